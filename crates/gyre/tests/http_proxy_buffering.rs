//! A proxied response buffered to a temp file (`proxy_buffering`,
//! `proxy_max_temp_file_size`, `proxy_temp_path` with levels) on the real
//! binary over real sockets: a client that reads nothing for a while, an
//! upstream that sends its whole body and waits to see the proxy close
//! (the proof that the slow client does not hold it), the body checked
//! byte for byte afterwards; and the same against nginx 1.22 (the
//! `an upstream response is buffered to a temporary file` line, its path
//! under the levels, the upstream released early), skipped with a message
//! when nginx is not installed.
#![allow(clippy::unwrap_used)]

mod proxy_backend;
mod util;

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use util::ReadSome;

use proxy_backend::find;
use util::http::{start_http, Raw};
use util::nginx::nginx_bin;
use util::{files_under, rss_kib, Prefix};

/// The body: 16 MiB, more than loopback socket buffers hold, in a pattern
/// that shows a byte out of place.
const LEN: usize = 16 << 20;

fn byte(i: usize) -> u8 {
    (i % 251) as u8
}

/// An upstream that answers every request with [`LEN`] pattern bytes
/// (`chunked`: in 64 KiB chunks), then counts the connections the proxy
/// closed on it (`released`).
struct Upstream {
    port: u16,
    released: Arc<AtomicUsize>,
}

fn upstream(chunked: bool) -> Upstream {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let released = Arc::new(AtomicUsize::new(0));
    let rel = released.clone();
    std::thread::spawn(move || {
        for s in l.incoming().take(16) {
            let Ok(mut s) = s else { continue };
            let rel = rel.clone();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut buf = Vec::new();
                while find(&buf, b"\r\n\r\n").is_none() {
                    let mut c = [0u8; 4096];
                    match s.read_some(&mut c) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&c[..n]),
                    }
                }
                if find(&buf, b"/__probe__").is_some() {
                    // The harness's readiness probe.
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                    return;
                }
                let body: Vec<u8> = (0..LEN).map(byte).collect();
                let ok = if chunked {
                    let mut out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                    for c in body.chunks(64 * 1024) {
                        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                        out.extend_from_slice(c);
                        out.extend_from_slice(b"\r\n");
                    }
                    out.extend_from_slice(b"0\r\n\r\n");
                    s.write_all(&out).is_ok()
                } else {
                    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {LEN}\r\n\r\n");
                    s.write_all(head.as_bytes()).is_ok() && s.write_all(&body).is_ok()
                };
                if !ok {
                    return;
                }
                // The proxy sent `Connection: close`: it closes once it has
                // read the response.
                let mut c = [0u8; 64];
                if matches!(s.read_some(&mut c), Ok(0)) {
                    rel.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    Upstream { port, released }
}

fn released_within(u: &Upstream, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if u.released.load(Ordering::SeqCst) > 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    u.released.load(Ordering::SeqCst) > 0
}

/// Reads the whole response of `c` and checks every body byte.
fn read_all(c: &mut Raw, chunked: bool) {
    let r = c.response(false);
    assert_eq!(r.status, 200, "{}", r.head);
    let body = if chunked {
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        r.body.clone()
    } else {
        assert_eq!(r.header("content-length"), Some(LEN.to_string().as_str()));
        r.body.clone()
    };
    assert_eq!(body.len(), LEN);
    if let Some(i) = (0..LEN).find(|&i| body[i] != byte(i)) {
        panic!("body byte {i} is {} instead of {}", body[i], byte(i));
    }
}

fn conf(port: u16, up: u16, extra: &str) -> String {
    format!(
        "server {{ listen 127.0.0.1:{port};
            location / {{ proxy_pass http://127.0.0.1:{up}; proxy_http_version 1.1; {extra} }} }}"
    )
}

#[test]
fn a_slow_client_gets_the_body_from_a_temp_file_and_the_upstream_is_freed() {
    for chunked in [false, true] {
        let u = upstream(chunked);
        let p = Prefix::new("proxy-spill");
        let up = u.port;
        let g = start_http(&p, 1, move |port| {
            conf(port, up, "proxy_temp_path spill 1 2;")
        });
        let worker = g.server.workers()[0];
        let before = rss_kib(worker);
        let mut c = Raw::connect(g.port);
        c.send(b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
        // The client reads nothing; the proxy reads the upstream to the
        // end anyway (into the temp file) and closes it.
        assert!(
            released_within(&u, Duration::from_secs(10)),
            "the upstream was held by the slow client (chunked {chunked}); log:\n{}",
            g.log()
        );
        let held = rss_kib(worker);
        assert!(
            held < before + 4 * 1024,
            "worker RSS grew {} KiB with the body in the temp file",
            held.saturating_sub(before)
        );
        let log = g.log();
        let line = log
            .lines()
            .find(|l| l.contains("an upstream response is buffered to a temporary file"))
            .unwrap_or_else(|| panic!("no temp file line in:\n{log}"));
        let dir = p.path("spill");
        // `levels 1 2`: 0000000001 is under 1/00/.
        let name = format!("{}/1/00/0000000001", dir.display());
        assert!(line.contains("[warn]"), "{line}");
        assert!(
            line.contains(&format!(
                "a temporary file {name} while reading upstream, client: 127.0.0.1, "
            )),
            "{line}"
        );
        assert!(
            line.contains(&format!(
                "request: \"GET /big HTTP/1.1\", upstream: \"http://127.0.0.1:{up}/big\", host: \"h\""
            )),
            "{line}"
        );
        assert!(
            files_under(&dir).is_empty(),
            "temp files left: {:?}",
            files_under(&dir)
        );
        read_all(&mut c, chunked);
        // The connection is still good for another request.
        c.send(b"GET /again HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
        read_all(&mut c, chunked);
    }
}

/// The access log's lines starting with `prefix`, once there are `n`
/// (bounded wait).
fn log_lines(path: &Path, prefix: &str, n: usize) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_string)
            .collect();
        if lines.len() >= n || Instant::now() > end {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A body relayed to a client that reads as it comes (moved from the
/// upstream's socket to the client's inside the kernel when both are plain
/// sockets, the rest queued when the client lags): whole, in order, and
/// counted as nginx counts it ($body_bytes_sent, $upstream_bytes_received),
/// twice on one keep-alive connection, with temp files on and off.
#[test]
fn a_body_relayed_to_a_reading_client_is_whole_and_counted() {
    for extra in ["", "proxy_max_temp_file_size 0;"] {
        let u = upstream(false);
        let p = Prefix::new("proxy-relay");
        let up = u.port;
        let g = start_http(&p, 1, move |port| {
            format!(
                "log_format n '$uri $status $body_bytes_sent $upstream_bytes_received';
                access_log logs/relay.log n;
                {}",
                conf(port, up, extra)
            )
        });
        let mut c = Raw::connect(g.port);
        for _ in 0..2 {
            c.send(b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
            read_all(&mut c, false);
        }
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {LEN}\r\n\r\n").len();
        let want = format!("/big 200 {LEN} {}", head + LEN);
        // (The harness's readiness probes are logged too.)
        let lines = log_lines(&p.path("logs/relay.log"), "/big ", 2);
        assert!(
            lines.len() == 2 && lines.iter().all(|l| *l == want),
            "{extra}: want {want:?} twice, log: {lines:?}"
        );
    }
}

#[test]
fn max_temp_file_size_0_reads_the_upstream_at_the_client_s_pace() {
    let u = upstream(false);
    let p = Prefix::new("proxy-nospill");
    let up = u.port;
    let g = start_http(&p, 1, move |port| {
        conf(port, up, "proxy_max_temp_file_size 0;")
    });
    let mut c = Raw::connect(g.port);
    c.send(b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
    // Nothing is read by the client, nothing may be held beyond the
    // buffers: the upstream cannot finish.
    assert!(
        !released_within(&u, Duration::from_secs(1)),
        "the upstream was read to the end with temp files off"
    );
    read_all(&mut c, false);
    assert!(released_within(&u, Duration::from_secs(10)));
    assert!(!g.log().contains("temporary file"), "{}", g.log());
    assert!(files_under(&p.path("proxy_temp")).is_empty());
}

#[test]
fn a_temp_file_that_cannot_be_made_is_crit_and_the_response_is_cut() {
    let u = upstream(false);
    let p = Prefix::new("proxy-spill-fail");
    p.write("html/f", "a file, not a directory");
    let up = u.port;
    let g = start_http(&p, 1, move |port| {
        conf(port, up, "proxy_temp_path html/f/t;")
    });
    let mut c = Raw::connect(g.port);
    c.send(b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
    // nginx's ngx_create_temp_file: ENOTDIR is no missing level to make.
    let needle = format!(
        "open() \"{}\" failed (20: Not a directory) while reading upstream",
        p.path("html/f/t/0000000001").display()
    );
    assert!(
        g.server.logged(&needle, Duration::from_secs(10)),
        "{}",
        g.log()
    );
    assert!(g.log().contains("[crit]"), "{}", g.log());
    // What the client had is sent, then the connection closes short.
    assert!(matches!(c.try_response(false), Ok(None) | Err(_)));
}

#[test]
fn temp_file_directives_are_checked_as_nginx_does() {
    let p = Prefix::new("proxy-temp-conf");
    for (d, want) in [
        (
            "proxy_max_temp_file_size 1k;",
            "\"proxy_max_temp_file_size\" must be equal to zero to disable temporary files usage or must be equal to or greater than the maximum of the value of \"proxy_buffer_size\" and one of the \"proxy_buffers\"",
        ),
        (
            "proxy_temp_file_write_size 1k;",
            "\"proxy_temp_file_write_size\" must be equal to or greater than the maximum of the value of \"proxy_buffer_size\" and one of the \"proxy_buffers\"",
        ),
        ("proxy_temp_path t 3 3 5;", "\"proxy_temp_path\" directive invalid value"),
        ("proxy_temp_path t 0;", "\"proxy_temp_path\" directive invalid value"),
        (
            "proxy_temp_path t 2 2 2 2;",
            "invalid number of arguments in \"proxy_temp_path\" directive",
        ),
    ] {
        p.conf(&format!(
            "events {{}} http {{ server {{ listen 127.0.0.1:1; location / {{ {d} proxy_pass http://127.0.0.1:1; }} }} }}"
        ));
        let out = p.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{d}: accepted");
        assert!(err.contains(want), "{d}: {err}");
    }
    for d in [
        "proxy_max_temp_file_size 0;",
        "proxy_temp_path t 9 1;",
        "proxy_temp_file_write_size 64k;",
    ] {
        p.conf(&format!(
            "events {{}} http {{ server {{ listen 127.0.0.1:1; location / {{ {d} proxy_pass http://127.0.0.1:1; }} }} }}"
        ));
        let out = p.run(&["-t"]);
        assert!(
            out.status.success(),
            "{d}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The temp file line, from its message on, with the prefix and the
/// upstream's port made neutral.
fn spill_line(log: &str, prefix: &Path, up: u16) -> Option<String> {
    let l = log
        .lines()
        .find(|l| l.contains("an upstream response is buffered"))?;
    let level = if l.contains("[warn]") {
        "[warn] "
    } else {
        "[?] "
    };
    let i = l.find("an upstream response")?;
    Some(format!(
        "{level}{}",
        l[i..]
            .replace(&prefix.display().to_string(), "PREFIX")
            .replace(&up.to_string(), "UP")
    ))
}

#[test]
fn differential_the_temp_file_line_and_the_freed_upstream_match_nginx() {
    let Some(bin) = nginx_bin() else {
        println!("skipped: nginx not installed");
        return;
    };
    // Not tmp/px: nginx refuses one path with two different levels.
    let http = |port: u16, up: u16| conf(port, up, "proxy_temp_path tmp/spill 1 2;");
    // nginx.
    let u = upstream(false);
    let up = u.port;
    let Some(n) = util::nginx::start_http(&bin, "proxy-spill-nginx", &move |port| http(port, up))
    else {
        println!("skipped: nginx did not start");
        return;
    };
    let mut c = Raw::connect(n.port);
    c.send(b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
    let nginx_freed = released_within(&u, Duration::from_secs(10));
    let log = std::fs::read_to_string(n.error_log()).unwrap_or_default();
    let nginx_line = spill_line(&log, &n.prefix.dir, up);
    let nginx_left = files_under(&n.prefix.path("tmp/spill"));
    read_all(&mut c, false);
    // gyre, the same configuration text.
    let u = upstream(false);
    let up2 = u.port;
    let p = Prefix::new("proxy-spill-gyre");
    let g = start_http(&p, 1, move |port| http(port, up2));
    let mut c = Raw::connect(g.port);
    c.send(b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
    let gyre_freed = released_within(&u, Duration::from_secs(10));
    let gyre_line = spill_line(&g.log(), &p.dir, up2);
    let gyre_left = files_under(&p.path("tmp/spill"));
    read_all(&mut c, false);
    assert_eq!(
        gyre_freed, nginx_freed,
        "upstream freed before the client read"
    );
    assert!(nginx_line.is_some(), "nginx log:\n{log}");
    assert_eq!(gyre_line, nginx_line);
    assert_eq!(gyre_left, nginx_left);
}
