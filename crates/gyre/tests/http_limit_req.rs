//! `limit_req_zone` / `limit_req` on the real binary, compared with nginx
//! 1.22: the zone is shared by two workers (connections held open on both
//! workers, checked through /proc, draw from one bucket), and the same
//! requests in the same order get the same statuses from both servers.
//! Rates are slow (1 r/m) so that what leaks during a test run cannot
//! change an answer: behaviour, never timing.
#![allow(clippy::unwrap_used)]

mod util;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use util::ReadSome;

use util::http::{free_port, owner_of_socket, server_socket_inodes, start_http, Raw};
use util::nginx::{nginx_bin, Nginx, Site};
use util::Prefix;

const HTTP: &str = r#"
    limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;
    limit_req_zone $binary_remote_addr zone=two:1m rate=1r/m;
    limit_req_zone $binary_remote_addr zone=dry:1m rate=1r/m;
    limit_req_zone $binary_remote_addr zone=lvl:1m rate=1r/m;
    limit_req_zone $binary_remote_addr zone=fast:1m rate=20r/s;
    limit_req_zone $arg_k zone=bykey:1m rate=1r/m;
    limit_conn_zone $binary_remote_addr zone=addr:1m;
"#;

const SERVER: &str = r#"
    location /one/ { limit_req zone=one burst=5 nodelay; }
    location /two/ { limit_req zone=two burst=2 nodelay; limit_req_status 429; }
    location /dry/ { limit_req zone=dry nodelay; limit_req_dry_run on; }
    location /lvl/ { limit_req zone=lvl; limit_req_log_level warn; }
    location /key/ { limit_req zone=bykey burst=1 nodelay; }
    location /delay/ { limit_req zone=fast burst=5; }
    location /open/ { }
    location /dl/ { limit_conn addr 1; }
    location /rate/ { limit_rate 2k; limit_conn addr 1; }
"#;

/// `name` keeps the prefixes of tests running at once apart.
fn start_nginx(bin: &Path, root: &Path, name: &str) -> Option<Nginx> {
    let site = Site {
        root,
        http: HTTP,
        server: SERVER,
    };
    util::nginx::start(bin, name, &site)
}

fn get(r: &mut Raw, path: &str) -> u16 {
    r.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    match r.try_response(false) {
        Ok(Some(resp)) => resp.status,
        _ => 0,
    }
}

fn lines_with(path: &Path, needle: &str, at_least: usize) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let t = std::fs::read_to_string(path).unwrap_or_default();
        let v: Vec<String> = t
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect();
        if v.len() >= at_least || Instant::now() > end {
            return v;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn site(p: &Prefix) -> PathBuf {
    for d in [
        "one", "two", "dry", "lvl", "key", "delay", "open", "dl", "rate",
    ] {
        p.write(&format!("html/{d}/t.txt"), &format!("{d}\n"));
    }
    p.write("html/dl/big.bin", &"x".repeat(48 << 20));
    p.write("html/rate/big.bin", &"r".repeat(400 << 10));
    p.path("html")
}

#[test]
fn one_bucket_for_all_workers() {
    let p = Prefix::new("limreq-workers");
    let root = site(&p);
    let root_s = root.display().to_string();
    let gyre = start_http(&p, 2, move |port| {
        format!("access_log off;\nserver_tokens off;\n{HTTP}\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{SERVER}\n}}")
    });
    // Both workers up (the first may answer the readiness probe alone).
    util::wait_for(Duration::from_secs(10), || gyre.server.workers().len() == 2);
    let workers = gyre.server.workers();
    assert_eq!(workers.len(), 2, "{workers:?}");
    // Hold connections until both workers have some (bounded tries).
    let mut conns: Vec<Raw> = Vec::new();
    let mut owners = Vec::new();
    for _ in 0..40 {
        let mut r = Raw::connect(gyre.port);
        // A request on it, so the worker has accepted it.
        assert_eq!(get(&mut r, "/open/t.txt"), 200);
        conns.push(r);
        let ports: Vec<u16> = conns.iter().map(Raw::local_port).collect();
        owners = server_socket_inodes(gyre.port, &ports)
            .into_iter()
            .map(|i| i.and_then(|i| owner_of_socket(&workers, i)))
            .collect();
        if workers.iter().all(|w| owners.contains(&Some(*w))) {
            break;
        }
    }
    let both = workers.iter().all(|w| owners.contains(&Some(*w)));
    if !both {
        eprintln!("one worker took every connection ({owners:?}); the count is still checked");
    }
    // burst=5 nodelay: six requests pass in all, whichever worker serves.
    let mut statuses = Vec::new();
    for i in 0..12 {
        let n = conns.len();
        statuses.push(get(&mut conns[i % n], "/one/t.txt"));
    }
    let ok = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(ok, 6, "{statuses:?} (owners {owners:?})");
    assert_eq!(&statuses[..6], &[200; 6]);
    assert!(statuses[6..].iter().all(|s| *s == 503), "{statuses:?}");
    // The refusals are logged, each with its excess.
    let lines = lines_with(&p.path("logs/error.log"), "limiting requests", 6);
    assert_eq!(lines.len(), 6, "{lines:?}");
    for l in &lines {
        assert!(l.contains("[error]"), "{l}");
        assert!(l.contains(" by zone \"one\""), "{l}");
        let ex = l
            .split("excess: ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        let (int, frac) = ex.split_once('.').unwrap();
        assert!(int == "5" || int == "6", "{l}");
        assert_eq!(frac.len(), 3, "{l}");
    }
}

#[test]
fn the_same_requests_get_the_same_statuses_as_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the limit_req differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let p = Prefix::new("limreq-gyre");
    let root = site(&p);
    let Some(nginx) = start_nginx(&bin, &root, "limreq-nginx") else {
        panic!(
            "{} did not start on the limit_req configuration",
            bin.display()
        );
    };
    let root_s = root.display().to_string();
    let gyre = start_http(&p, 2, move |port| {
        format!("access_log off;\nserver_tokens off;\n{HTTP}\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{SERVER}\n}}")
    });
    let script: Vec<&str> = [
        vec!["/two/t.txt"; 5],
        vec!["/dry/t.txt"; 4],
        vec!["/lvl/t.txt"; 3],
        vec![
            "/key/t.txt?k=a",
            "/key/t.txt?k=b",
            "/key/t.txt?k=a",
            "/key/t.txt?k=a",
        ],
        vec![
            "/key/t.txt",
            "/key/t.txt",
            "/key/t.txt",
            "/key/t.txt?k=b",
            "/key/t.txt?k=b",
        ],
        vec!["/open/t.txt"; 2],
    ]
    .concat();
    // A new connection every other request (workers may differ).
    let run = |port: u16| -> Vec<u16> {
        let mut out = Vec::new();
        let mut r = Raw::connect(port);
        for (i, path) in script.iter().enumerate() {
            if i % 2 == 0 {
                r = Raw::connect(port);
            }
            out.push(get(&mut r, path));
        }
        out
    };
    let want = run(nginx.port);
    let got = run(gyre.port);
    assert_eq!(got, want, "statuses for {script:?}");
    assert!(want.contains(&429) && want.contains(&503) && want.contains(&200));
    // Same log lines, levels and excess text (the excess's last digits
    // depend on the time between requests: compared to the tenth).
    let norm = |l: &str| -> Option<String> {
        let i = l.find("limiting requests")?;
        let msg = &l[i..];
        let msg = msg.split(", client:").next().unwrap_or(msg);
        let level = if l.contains("[error]") {
            "error"
        } else if l.contains("[warn]") {
            "warn"
        } else {
            "other"
        };
        // "excess: 1.234 by" -> "excess: 1.2 by".
        let (head, rest) = msg.split_once("excess: ")?;
        let (num, tail) = rest.split_once(' ')?;
        let short = &num[..num.len().min(num.find('.')? + 2)];
        Some(format!("{level} {head}excess: {short} {tail}"))
    };
    let read = |path: PathBuf, n: usize| -> Vec<String> {
        lines_with(&path, "limiting requests", n)
            .iter()
            .filter_map(|l| norm(l))
            .collect()
    };
    let n_lines = read(nginx.prefix.path("logs/error.log"), 1);
    let g_lines = read(p.path("logs/error.log"), n_lines.len());
    assert_eq!(g_lines, n_lines);
    assert!(n_lines.iter().any(|l| l.contains("dry run")));
    assert!(n_lines.iter().any(|l| l.starts_with("warn")));
}

#[test]
fn delayed_requests_are_served_after_their_wait() {
    let p = Prefix::new("limreq-delay");
    let root = site(&p);
    let root_s = root.display().to_string();
    let gyre = start_http(&p, 1, move |port| {
        format!("access_log off;\nserver_tokens off;\n{HTTP}\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{SERVER}\n}}")
    });
    // Three at once on three connections: the first passes, the others
    // wait for their share (20 r/s) and are then served.
    let mut conns: Vec<Raw> = (0..3).map(|_| Raw::connect(gyre.port)).collect();
    for r in &mut conns {
        r.send(b"GET /delay/t.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    }
    for r in &mut conns {
        let resp = r.try_response(false).unwrap().unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.text(), "delay\n");
    }
    let lines = lines_with(&p.path("logs/error.log"), "delaying request", 1);
    assert!(!lines.is_empty(), "{}", gyre.log());
    assert!(lines[0].contains("[warn]"), "{}", lines[0]);
    assert!(lines[0].contains("delaying request, excess: "));
    assert!(lines[0].contains(", by zone \"fast\""));
}

#[test]
fn bad_directives_are_config_errors_like_nginx() {
    let p = Prefix::new("limreq-bad");
    let z = "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s;";
    for (http, loc, want) in [
        (
            "",
            "limit_req zone=two;",
            "zero size shared memory zone \"two\"",
        ),
        (
            "limit_req_zone $binary_remote_addr zone=one:1k rate=1r/s;",
            "",
            "zone \"zone=one:1k\" is too small",
        ),
        (
            "limit_req_zone $binary_remote_addr zone=one:1m rate=abc;",
            "",
            "invalid rate \"rate=abc\"",
        ),
        (
            "limit_req_zone $binary_remote_addr rate=1r/s;",
            "",
            "invalid number of arguments in \"limit_req_zone\" directive",
        ),
        (
            "limit_req_zone $binary_remote_addr zone=one rate=1r/s;",
            "",
            "invalid zone size \"zone=one\"",
        ),
        (
            &format!("{z} limit_req_zone $uri zone=one:1m rate=1r/s;"),
            "",
            "limit_req_zone \"one\" is already bound to key \"$binary_remote_addr\"",
        ),
        (
            z,
            "limit_req zone=one burst=x;",
            "invalid burst value \"burst=x\"",
        ),
        (
            z,
            "limit_req zone=one; limit_req zone=one;",
            "\"limit_req\" directive is duplicate",
        ),
        (
            z,
            "limit_req_status 399;",
            "value must be between 400 and 599",
        ),
        (z, "limit_req_log_level foo;", "invalid value \"foo\""),
        (
            "limit_conn_zone $binary_remote_addr zone=addr:1m;",
            "limit_conn addr 0;",
            "invalid number of connections \"0\"",
        ),
        (
            "",
            "limit_conn nozone 1;",
            "zero size shared memory zone \"nozone\"",
        ),
        (
            "limit_conn_zone $binary_remote_addr foo;",
            "",
            "invalid parameter \"foo\"",
        ),
    ] {
        p.conf(&format!(
            "{}http {{ {http} server {{ listen 127.0.0.1:{}; location / {{ {loc} }} }} }}\n",
            util::http::main_conf(1),
            free_port()
        ));
        let out = p.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{http} {loc} accepted");
        assert!(
            err.contains(&format!("[emerg] {want}")),
            "{http} {loc}: {err}"
        );
    }
}

/// Sends a GET and reads only the status line and head (a slow download
/// goes on behind it).
fn head_only(port: u16, path: &str) -> (std::net::TcpStream, u16) {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let mut buf = Vec::new();
    let mut b = [0u8; 512];
    let end = Instant::now() + Duration::from_secs(5);
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && Instant::now() < end {
        match s.read_some(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
    let status = String::from_utf8_lossy(&buf)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (s, status)
}

/// One slow download (a client that does not read a file larger than the
/// socket buffers) holds the address's only `limit_conn` slot: others
/// are refused (from new connections, so from either worker) until it is
/// closed; the same as nginx.
fn conn_script(port: u16) -> Vec<u16> {
    let mut out = Vec::new();
    let (a, st) = head_only(port, "/dl/big.bin");
    out.push(st);
    for _ in 0..4 {
        let mut r = Raw::connect(port);
        out.push(get(&mut r, "/dl/t.txt"));
    }
    let mut r = Raw::connect(port);
    out.push(get(&mut r, "/open/t.txt"));
    drop(a);
    // Freed once the server notices the close (bounded wait).
    let end = Instant::now() + Duration::from_secs(15);
    let mut freed = 0;
    while Instant::now() < end {
        let mut r = Raw::connect(port);
        if get(&mut r, "/dl/t.txt") == 200 {
            freed = 200;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    out.push(freed);
    out
}

#[test]
fn limit_conn_counts_slow_downloads_like_nginx() {
    let p = Prefix::new("limconn-gyre");
    let root = site(&p);
    let root_s = root.display().to_string();
    let gyre = start_http(&p, 2, move |port| {
        format!("access_log off;\nserver_tokens off;\n{HTTP}\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{SERVER}\n}}")
    });
    util::wait_for(Duration::from_secs(10), || gyre.server.workers().len() == 2);
    let got = conn_script(gyre.port);
    assert_eq!(got, vec![200, 503, 503, 503, 503, 200, 200], "gyre");
    // Four refusals, and any the wait for the release met.
    let lines = lines_with(&p.path("logs/error.log"), "limiting connections", 4);
    assert!(lines.len() >= 4, "{lines:?}");
    assert!(lines
        .iter()
        .all(|l| l.contains("[error]") && l.contains("limiting connections by zone \"addr\"")));
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the nginx side of the limit_conn test: no nginx");
        return;
    };
    let Some(nginx) = start_nginx(&bin, &root, "limconn-nginx") else {
        panic!("{} did not start", bin.display());
    };
    assert_eq!(conn_script(nginx.port), got, "nginx");
    let n = lines_with(
        &nginx.prefix.path("logs/error.log"),
        "limiting connections by zone \"addr\"",
        4,
    );
    assert!(n.len() >= 4, "{n:?}");
}

/// A `limit_rate`-paced download whose client goes away: the server
/// notices at its next paced write and closes, releasing the limit_conn
/// slot (new requests to the location get 503 until then, 200 after).
fn paced_close_script(port: u16) -> Vec<u16> {
    let mut out = Vec::new();
    let mut a = Raw::connect(port);
    a.send(b"GET /rate/big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    // The head and the first second's share arrive; then the client
    // leaves with the rest unread.
    let mut buf = [0u8; 1024];
    let n = std::io::Read::read(&mut a.s, &mut buf).unwrap_or(0);
    out.push(if buf[..n].starts_with(b"HTTP/1.1 200 ") {
        200
    } else {
        0
    });
    let mut r = Raw::connect(port);
    out.push(get(&mut r, "/rate/t.txt"));
    drop(a);
    let end = Instant::now() + Duration::from_secs(15);
    let mut freed = 0;
    while Instant::now() < end {
        let mut r = Raw::connect(port);
        if get(&mut r, "/rate/t.txt") == 200 {
            freed = 200;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    out.push(freed);
    out
}

#[test]
fn a_paced_download_whose_client_left_is_closed() {
    let p = Prefix::new("limrate-close");
    let root = site(&p);
    let root_s = root.display().to_string();
    let gyre = start_http(&p, 1, move |port| {
        format!("access_log off;\nserver_tokens off;\n{HTTP}\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{SERVER}\n}}")
    });
    let got = paced_close_script(gyre.port);
    assert_eq!(got, vec![200, 503, 200], "gyre");
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the nginx side of the paced-close test: no nginx");
        return;
    };
    let Some(nginx) = start_nginx(&bin, &root, "limrate-nginx") else {
        panic!("{} did not start", bin.display());
    };
    assert_eq!(paced_close_script(nginx.port), got, "nginx");
}
