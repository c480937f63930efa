//! The process model with the real binary: workers start, a killed worker is
//! replaced, stop / quit / reopen via -s, the open-file-limit warning.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use util::ReadSome;

use util::http::{free_port, Raw};
use util::{wait_for, Prefix};

const BASE: &str = "daemon off;\nerror_log logs/error.log notice;\n";

#[test]
fn workers_start_and_a_killed_worker_is_replaced() {
    let p = Prefix::new("proc-respawn");
    p.conf(&format!(
        "{BASE}worker_processes 2;\nevents {{ worker_connections 64; }}\n"
    ));
    let s = p.start();
    assert!(wait_for(Duration::from_secs(5), || s.workers().len() == 2));
    let old = s.workers();
    std::process::Command::new("kill")
        .args(["-9", &old[0].to_string()])
        .status()
        .unwrap();
    assert!(
        s.logged(
            &format!("worker process {} exited on signal 9", old[0]),
            Duration::from_secs(5)
        ),
        "{}",
        s.log()
    );
    assert!(wait_for(Duration::from_secs(1), || {
        let w = s.workers();
        w.len() == 2 && !w.contains(&old[0])
    }));
    assert!(
        s.workers().contains(&old[1]),
        "the other worker is untouched"
    );
}

#[test]
fn stop_and_quit_via_the_pid_file() {
    for (sig, line) in [("stop", "exiting"), ("quit", "gracefully shutting down")] {
        let p = Prefix::new(&format!("proc-{sig}"));
        p.conf(&format!("{BASE}worker_processes 2;\nevents {{}}\n"));
        let mut s = p.start();
        assert!(wait_for(Duration::from_secs(5), || s.workers().len() == 2));
        let o = s.signal(sig);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            s.wait_exit(Duration::from_secs(5)),
            "master did not exit on {sig}"
        );
        assert!(s.log().contains(line), "{}", s.log());
        assert!(
            !p.path("logs/gyre.pid").exists(),
            "pid file removed on exit"
        );
    }
}

#[test]
fn reopen_moves_the_error_log() {
    let p = Prefix::new("proc-reopen");
    p.conf(&format!("{BASE}worker_processes 1;\nevents {{}}\n"));
    let s = p.start();
    assert!(s.logged("start worker process", Duration::from_secs(5)));
    std::fs::rename(p.path("logs/error.log"), p.path("logs/error.log.1")).unwrap();
    let o = s.signal("reopen");
    assert!(o.status.success());
    assert!(wait_for(Duration::from_secs(5), || p
        .path("logs/error.log")
        .exists()));
    assert!(s.logged("reopening logs", Duration::from_secs(5)));
}

#[test]
fn worker_connections_over_the_open_file_limit_warns() {
    let p = Prefix::new("proc-nofile");
    p.conf(&format!(
        "{BASE}worker_processes 1;\nevents {{ worker_connections 1000000; }}\n"
    ));
    let s = p.start();
    assert!(
        s.logged(
            "1000000 worker_connections exceed open file resource limit: ",
            Duration::from_secs(5)
        ),
        "{}",
        s.log()
    );
}

#[test]
fn reload_with_a_bad_config_keeps_serving_the_old_one() {
    let p = Prefix::new("proc-badreload");
    p.conf(&format!("{BASE}worker_processes 1;\nevents {{}}\n"));
    let s = p.start();
    assert!(wait_for(Duration::from_secs(5), || s.workers().len() == 1));
    let before = s.workers();
    p.conf("events {}\nbogus;\n");
    let o = s.signal("reload");
    // `-s` itself reads the configuration, as nginx's does: a bad file fails
    // there. Signal the master directly to see what it does.
    assert_eq!(o.status.code(), Some(1));
    std::process::Command::new("kill")
        .args(["-HUP", &s.pid().to_string()])
        .status()
        .unwrap();
    assert!(
        s.logged("unknown directive \"bogus\"", Duration::from_secs(5)),
        "{}",
        s.log()
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(s.workers(), before, "old worker kept");
}

// ---------------------------------------------------------------- with HTTP

/// A prefix whose `html/index.html` holds `index`, a free loopback port and
/// its address.
fn http_prefix(name: &str, index: &str) -> (Prefix, u16, SocketAddr) {
    let p = Prefix::new(name);
    p.write("html/index.html", index);
    let port = free_port();
    (p, port, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// One GET on a fresh connection (`Connection: close`); the status and body.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {text:?}")))?;
    let body = match buf.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => buf[i + 4..].to_vec(),
        None => Vec::new(),
    };
    Ok((status, body))
}

fn http_conf(port: u16, workers: usize, extra: &str) -> String {
    format!(
        "{BASE}worker_processes {workers};\nevents {{ worker_connections 512; }}\n\
         http {{\n access_log off;\n server {{\n  listen 127.0.0.1:{port};\n  root html;\n{extra}\n }}\n}}\n"
    )
}

#[test]
fn a_replacement_worker_serves_within_a_second_of_kill_9() {
    let (p, port, addr) = http_prefix("proc-http-respawn", "alive\n");
    p.conf(&http_conf(port, 1, ""));
    let s = p.start();
    assert_eq!(get(addr, "/").unwrap(), (200, b"alive\n".to_vec()));
    let w = s.workers();
    std::process::Command::new("kill")
        .args(["-9", &w[0].to_string()])
        .status()
        .unwrap();
    let t = std::time::Instant::now();
    assert!(wait_for(Duration::from_secs(1), || {
        s.workers().iter().any(|x| !w.contains(x)) && get(addr, "/").is_ok_and(|r| r.0 == 200)
    }));
    assert!(t.elapsed() < Duration::from_secs(1));
    // At nginx's level for it.
    let line = "[alert] ";
    assert!(s.logged("exited on signal 9", Duration::from_secs(2)));
    assert!(
        s.log().lines().any(|l| l.contains(line)
            && l.contains(&format!("worker process {} exited on signal 9", w[0]))),
        "{}",
        s.log()
    );
}

#[test]
fn reload_under_load_serves_the_new_config_and_fails_no_request() {
    let (p, port, addr) = http_prefix("proc-http-reload", "index\n");
    p.conf(&http_conf(
        port,
        2,
        "  location = /v { return 200 \"one\"; }",
    ));
    let s = p.start();
    assert_eq!(get(addr, "/v").unwrap(), (200, b"one".to_vec()));

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut ok, mut failed) = (0u32, Vec::new());
                let end = std::time::Instant::now() + Duration::from_secs(20);
                while !stop.load(std::sync::atomic::Ordering::Relaxed)
                    && std::time::Instant::now() < end
                {
                    match get(addr, "/") {
                        Ok((200, _)) => ok += 1,
                        Ok((st, _)) => failed.push(format!("status {st}")),
                        Err(e) => failed.push(e.to_string()),
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    p.conf(&http_conf(
        port,
        2,
        "  location = /v { return 200 \"two\"; }",
    ));
    for _ in 0..3 {
        let o = s.signal("reload");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::thread::sleep(Duration::from_millis(400));
    }
    assert!(wait_for(Duration::from_secs(5), || get(addr, "/v")
        .is_ok_and(|r| r.1 == b"two")));
    let total = finish_load(&stop, load);
    assert!(total > 100, "only {total} requests ran");
    assert!(s.log().contains("reconfiguring"));
}

#[test]
fn quit_lets_a_slow_download_finish() {
    let (p, port, addr) = http_prefix("proc-http-quit", "index\n");
    let big: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(p.path("html/big.bin"), &big).unwrap();
    p.conf(&http_conf(port, 1, ""));
    let mut s = p.start();
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A small receive buffer keeps most of the file in the server's hands.
    write!(
        c,
        "GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    let n = c.read_some(&mut chunk).unwrap();
    got.extend_from_slice(&chunk[..n]);
    let o = s.signal("quit");
    assert!(o.status.success());
    // Read slowly for a while: the worker must keep sending.
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(20));
        let n = c.read_some(&mut chunk).unwrap();
        got.extend_from_slice(&chunk[..n]);
    }
    assert!(TcpStream::connect(addr).is_err(), "listener closed on quit");
    c.read_to_end(&mut got).unwrap();
    let body = &got[got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..];
    assert_eq!(body.len(), big.len(), "download completed");
    assert!(body == &big[..]);
    assert!(s.wait_exit(Duration::from_secs(5)), "{}", s.log());
}

#[test]
fn shared_counters_count_every_request_across_workers() {
    let (p, port, addr) = http_prefix("proc-http-counters", "x\n");
    p.conf(&http_conf(port, 2, "  location = /status { stub_status; }"));
    let _s = p.start();
    for _ in 0..200 {
        assert_eq!(get(addr, "/").unwrap().0, 200);
    }
    let (st, body) = get(addr, "/status").unwrap();
    assert_eq!(st, 200);
    let text = String::from_utf8(body).unwrap();
    let nums: Vec<u64> = text
        .lines()
        .nth(2)
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    // 200 requests + the status request itself, each on its own connection.
    assert_eq!(nums, vec![201, 201, 201], "{text}");
    assert!(text.starts_with("Active connections: 1 \n"), "{text}");
}

#[test]
fn master_process_off_serves_in_one_process() {
    let (p, port, addr) = http_prefix("proc-single", "single\n");
    p.conf(&format!("master_process off;\n{}", http_conf(port, 4, "")));
    let mut s = p.start();
    assert_eq!(
        s.pid_file_pid(),
        Some(s.pid()),
        "the pid file names this process"
    );
    assert!(s.workers().is_empty(), "no worker processes");
    assert_eq!(get(addr, "/").unwrap(), (200, b"single\n".to_vec()));
    assert!(s.signal("quit").status.success());
    assert!(s.wait_exit(Duration::from_secs(5)), "{}", s.log());
}

#[test]
fn daemon_on_detaches_and_stops_via_the_pid_file() {
    let (p, port, addr) = http_prefix("proc-daemon", "daemon\n");
    let conf = http_conf(port, 1, "").replace("daemon off;\n", "daemon on;\n");
    p.conf(&conf);
    let out = p.run(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid_file = p.path("logs/gyre.pid");
    assert!(wait_for(Duration::from_secs(5), || pid_file.exists()));
    let master: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(wait_for(Duration::from_secs(5), || get(addr, "/")
        .is_ok_and(|r| r.0 == 200)));
    let o = p.run(&["-s", "stop"]);
    assert!(o.status.success());
    assert!(wait_for(Duration::from_secs(5), || !std::path::Path::new(
        &format!("/proc/{master}")
    )
    .exists()
        || std::fs::read_to_string(format!("/proc/{master}/stat"))
            .is_ok_and(|s| s.contains(") Z "))));
    assert!(wait_for(Duration::from_secs(5), || !pid_file.exists()));
}

#[test]
fn binary_upgrade_hands_the_sockets_to_a_new_master() {
    let (p, port, addr) = http_prefix("proc-usr2", "upgrade\n");
    p.conf(&http_conf(port, 1, ""));
    let mut s = p.start();
    let old = s.pid();
    assert_eq!(get(addr, "/").unwrap().0, 200);
    let kill = |sig: &str, pid: u32| {
        std::process::Command::new("kill")
            .args([&format!("-{sig}"), &pid.to_string()])
            .status()
            .unwrap();
    };
    kill("USR2", old);
    let pid_file = p.path("logs/gyre.pid");
    let oldbin = p.path("logs/gyre.pid.oldbin");
    assert!(wait_for(Duration::from_secs(5), || oldbin.exists()
        && std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
            .is_some_and(|n| n != old)));
    let new: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&oldbin).unwrap().trim(),
        old.to_string()
    );
    // The new master's workers serve on the inherited socket.
    assert!(wait_for(Duration::from_secs(5), || util::children(new)
        .len()
        == 1));
    assert!(
        s.logged("using inherited sockets", Duration::from_secs(5)),
        "{}",
        s.log()
    );
    // Old workers stop (WINCH), then the old master (QUIT): no request fails.
    kill("WINCH", old);
    assert!(wait_for(Duration::from_secs(5), || s.workers() == vec![new]));
    for _ in 0..50 {
        assert_eq!(get(addr, "/").unwrap().0, 200);
    }
    kill("QUIT", old);
    assert!(s.wait_exit(Duration::from_secs(5)));
    for _ in 0..20 {
        assert_eq!(get(addr, "/").unwrap().0, 200);
    }
    kill("QUIT", new);
    assert!(wait_for(Duration::from_secs(5), || !pid_file.exists()));
}

/// Keep-alive requests: reconnects only when a response says
/// `Connection: close`; anything else (EOF or reset before a response) is a
/// failed request.
fn keepalive_load(
    addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (u32, Vec<String>) {
    let (mut ok, mut failed) = (0u32, Vec::new());
    let end = std::time::Instant::now() + Duration::from_secs(20);
    let mut conn: Option<Raw> = None;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) && std::time::Instant::now() < end {
        let r = conn.get_or_insert_with(|| Raw::connect(addr.port()));
        if !r.try_send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n") {
            failed.push("write failed".to_string());
            conn = None;
            continue;
        }
        match r.try_response(false) {
            Ok(Some(resp)) => {
                ok += 1;
                if resp
                    .header("Connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case("close"))
                {
                    conn = None;
                }
            }
            Ok(None) => {
                failed.push("eof before response".to_string());
                conn = None;
            }
            Err(e) => {
                failed.push(e.to_string());
                conn = None;
            }
        }
    }
    (ok, failed)
}

/// Joins load threads; every request must have succeeded. The total.
fn finish_load(
    stop: &std::sync::atomic::AtomicBool,
    load: Vec<std::thread::JoinHandle<(u32, Vec<String>)>>,
) -> u32 {
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for h in load {
        let (ok, failed) = h.join().unwrap();
        assert!(failed.is_empty(), "failed during reload: {failed:?}");
        total += ok;
    }
    total
}

#[test]
fn reload_under_keepalive_load_fails_no_request() {
    let (p, port, addr) = http_prefix("proc-http-reload-ka", "index\n");
    p.conf(&http_conf(port, 2, ""));
    let s = p.start();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..8)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || keepalive_load(addr, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..4 {
        assert!(s.signal("reload").status.success());
        std::thread::sleep(Duration::from_millis(300));
    }
    let total = finish_load(&stop, load);
    assert!(total > 100, "only {total} requests ran");
}
