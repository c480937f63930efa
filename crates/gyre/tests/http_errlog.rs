//! Differential test of the error log and of redirects against the real
//! nginx: both serve the same directory with the same server block, get
//! the same bad requests (missing files, a forbidden directory, a missing
//! index, a too-large body, refused request lines, a rewrite cycle,
//! rewrite_log, clients timing out, over-long and invalid header lines,
//! symlink and permission errors, clients resetting the connection), and
//! must write the same error-log lines — up to the time, the pid and the
//! connection number — and send the same `Location` for directory,
//! `return` and `error_page` redirects. fail2ban's stock nginx filters
//! must match gyre's log as they match nginx's.
//!
//! nginx is found at `$NGINX` or `/usr/sbin/nginx`; without it the test
//! prints why it skipped.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use util::http::{free_port, probe, start_http, Raw};
use util::nginx::{command_as, nginx_bin, Nginx, Site, NOBODY};
use util::Prefix;

/// The server block both get (after `listen` and `root`).
const SERVER: &str = "
    server_name localhost;
    client_header_timeout 1s;
    client_max_body_size 10;
    location /loop { rewrite ^ /loop2; }
    location /loop2 { rewrite ^ /loop; }
    location /rl { rewrite_log on; rewrite ^/rl(.*)$ /x$1 last; }
    location = /r { return 301 /rel; }
    location /ep/ { error_page 404 /nothere.html; }
    location /sn/ { server_name_in_redirect on; }
    location /np/ { port_in_redirect off; }
    location /na/ { absolute_redirect off; }
    location /epurl/ { error_page 404 =301 http://example.com/moved; }
    location /ephost/ { error_page 404 https://$host$request_uri; }
    location /quiet/ { log_not_found off; }
    location /limited/ { limit_req zone=one; }
    location /private/ { auth_basic \"Private\"; auth_basic_user_file @HTPASSWD@; }
";

/// The http-level lines both get before the server.
const HTTP: &str = "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;";

/// The server block for a site at `root` (its user file next to it).
fn server_block(root: &Path) -> String {
    SERVER.replace(
        "@HTPASSWD@",
        &root.with_file_name("htpasswd").display().to_string(),
    )
}

fn start_nginx(bin: &Path, root: &Path) -> Nginx {
    start_nginx_as(bin, root, false)
}

/// nginx with [`HTTP`] and [`server_block`], as nobody when `nobody`.
fn start_nginx_as(bin: &Path, root: &Path, nobody: bool) -> Nginx {
    let server = server_block(root);
    let site = Site {
        root,
        http: HTTP,
        server: &server,
    };
    util::nginx::start_as(bin, "errlog-nginx", &site, nobody).expect("nginx starts")
}

/// (name, raw request): each on a fresh connection, answered before the
/// next is sent.
const BAD: &[(&str, &str)] = &[
    (
        "missing file, with a referrer",
        "GET /missing HTTP/1.1\r\nHost: localhost\r\nReferer: http://x/\r\nConnection: close\r\n\r\n",
    ),
    (
        "directory without index",
        "GET /dir/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "missing directory",
        "GET /nodir/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "a file as a directory",
        "GET /app/index.html/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "a file as a directory, with a slash",
        "GET /app/index.html/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "missing file, no Host",
        "GET /nodir/x HTTP/1.0\r\n\r\n",
    ),
    (
        "too large body",
        "POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\nConnection: close\r\n\r\n",
    ),
    ("invalid method", "GARBAGE\r\n\r\n"),
    ("lowercase method", "get / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    ("invalid version", "GET / HTTP/7.1\r\n\r\n"),
    ("invalid request", "GET x HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    ("no Host", "GET /x HTTP/1.1\r\n\r\n"),
    ("two Hosts", "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
    ("invalid Host", "GET /x HTTP/1.1\r\nHost: a/b\r\n\r\n"),
    (
        "invalid Content-Length",
        "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n",
    ),
    (
        "two Content-Lengths",
        "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\ncontent-length: 2\r\n\r\n",
    ),
    (
        "unknown Transfer-Encoding",
        "GET /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
    ),
    (
        "Transfer-Encoding in HTTP/1.0",
        "GET /x HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
    ),
    (
        "Content-Length and Transfer-Encoding",
        "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    ),
    ("TRACE", "TRACE / HTTP/1.1\r\nHost: a\r\n\r\n"),
    ("HTTP/0.9 POST", "POST /\r\n"),
    (
        "rewrite cycle",
        "GET /loop HTTP/1.1\r\nHost: Localhost:99\r\nConnection: close\r\n\r\n",
    ),
    (
        "rewrite_log",
        "GET /rlabc HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "error_page to a missing page",
        "GET /ep/zz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "log_not_found off",
        "GET /quiet/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "log_not_found off, missing index",
        "GET /quiet/d/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    ("closed inside the request line", "GET /app/"),
    ("closed inside the headers", "GET /app/ HTTP/1.1\r\nHost: a\r\n"),
    ("closed before a request", ""),
    (
        "closed after a kept-alive request",
        "GET /app/ HTTP/1.1\r\nHost: a\r\n\r\n",
    ),
    (
        "directory redirect (no line)",
        "GET /app HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    // Header lines nginx ignores (logged, at [info], naming Host only once
    // it was read) and refuses (quoted up to the byte its parser stopped
    // at).
    (
        "ignored header lines, then no Host",
        "GET / HTTP/1.1\r\nX@Y: 1\r\nA_B:\r\nC@D:  \r\nE@F\r\n\r\n",
    ),
    (
        "an ignored header line after Host",
        "GET /app/ HTTP/1.1\r\nHost: Other\r\nX\u{e9}: 1  \r\nConnection: close\r\n\r\n",
    ),
    (
        "a space in a header name",
        "GET / HTTP/1.1\r\nHost: localhost\r\nX Y: 1\r\n\r\n",
    ),
    (
        "a NUL in a header value",
        "GET / HTTP/1.1\r\nHost: localhost\r\nX: a\0b\r\n\r\n",
    ),
    (
        "a CR in a header value",
        "GET / HTTP/1.1\r\nHost: localhost\r\nX: a \rb\r\n\r\n",
    ),
    (
        "a control in a header name",
        "GET / HTTP/1.1\r\nHost: localhost\r\nX\u{1}Y: a\r\n\r\n",
    ),
    (
        "a folded header line",
        "GET / HTTP/1.1\r\nHost: localhost\r\nX: a\r\n b\r\n\r\n",
    ),
    (
        "a header line without a name",
        "GET / HTTP/1.1\r\nHost: localhost\r\n: a\r\n\r\n",
    ),
    (
        "a broken chunked body, discarded",
        "POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ),
    // Symlinks and special files.
    (
        "a symlink loop",
        "GET /loop HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "a symlink loop as a directory",
        "GET /loop/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "a device",
        "GET /dev HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "a device as a directory",
        "GET /dev/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "a device as the index",
        "GET /devdir/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
];

/// Heads too large for nginx's buffers (`client_header_buffer_size 1k`,
/// `large_client_header_buffers 4 8k`): nginx quotes the request line up
/// to its buffer's end (414) or the header line (494), and cuts the log
/// line at 2,048 bytes.
fn too_large() -> Vec<(&'static str, String)> {
    let c = "c".repeat(4000);
    let many: String = (0..12).map(|i| format!("X-H{i}: {c}\r\n")).collect();
    vec![
        (
            "a request line longer than a large buffer",
            format!(
                "GET /{} HTTP/1.1\r\nHost: localhost\r\n\r\n",
                "a".repeat(9000)
            ),
        ),
        (
            "a header line longer than a large buffer",
            format!(
                "GET / HTTP/1.1\r\nHost: localhost\r\nX-Long: {}\r\n\r\n",
                "b".repeat(9000)
            ),
        ),
        (
            "more header lines than the large buffers hold",
            format!("GET / HTTP/1.1\r\nHost: localhost\r\n{many}\r\n"),
        ),
    ]
}

/// (name, bytes sent, whether the answer is read first) of clients that
/// reset the connection (SO_LINGER 0) after sending: nginx's `recv()
/// failed (104: Connection reset by peer)` with the action and request of
/// the moment.
const RESETS: &[(&str, &str, bool)] = &[
    ("reset before a request", "", false),
    ("reset inside the request line", "GET / HT", false),
    (
        "reset inside the headers",
        "GET /h HTTP/1.1\r\nHost: localhost\r\n",
        false,
    ),
    (
        "reset on a kept-alive connection",
        "GET /app/ HTTP/1.1\r\nHost: localhost\r\n\r\n",
        true,
    ),
    (
        "reset inside a pipelined request line",
        "GET /app/ HTTP/1.1\r\nHost: localhost\r\n\r\nGET /p",
        true,
    ),
    (
        "reset while a body is discarded",
        "POST /dir/file.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 9\r\n\r\nabc",
        true,
    ),
    (
        "reset while lingering after a 413",
        "POST /dir/file.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nabc",
        true,
    ),
];

/// Sends `input`, waits until the server took it (its answer, or a
/// moment), and resets the connection.
fn reset(port: u16, input: &str, answered: bool) {
    use std::os::fd::AsFd;
    let mut r = Raw::connect(port);
    let _ = r.try_send(input.as_bytes());
    if answered {
        let _ = r.try_response(false);
    }
    // Nothing observable says the server read a partial head: give it a
    // moment (the line compared is the same either way once it has).
    std::thread::sleep(Duration::from_millis(150));
    gyre_core::sys::socket::set_linger_zero(r.s.as_fd()).unwrap();
    drop(r);
}

/// Sends `input` on a fresh connection and reads until the server closes
/// (every case closes) or a deadline.
fn exchange(port: u16, input: &str) {
    let mut r = Raw::connect(port);
    let _ = r.try_send(input.as_bytes());
    // The client closes its side once it has its answer (a kept-alive
    // request), or at once after a partial head or nothing.
    if input.ends_with("\r\n\r\n") {
        let _ = r.try_response(false);
    }
    r.shutdown_write();
    let _ = r.closed_within(Duration::from_secs(3));
}

/// The error-log lines about connections (`*N`), without the probes',
/// normalised: time, pid and connection number dropped, the port written
/// `PORT`.
fn conn_lines(path: &Path, port: u16) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.contains("/__probe__"))
        .filter_map(|l| {
            // `YYYY/MM/DD HH:MM:SS [level] PID#TID: *N message`
            let level_start = l.find(" [")?;
            let level_end = l.find("] ")?;
            let level = &l[level_start + 1..=level_end];
            let rest = &l[level_end + 2..];
            let (_pid, rest) = rest.split_once(": ")?;
            let rest = rest.strip_prefix('*')?;
            let (_number, msg) = rest.split_once(' ')?;
            Some(format!(
                "{level} {}",
                msg.replace(&port.to_string(), "PORT")
            ))
        })
        .collect()
}

/// Waits until `path` has at least `n` connection lines (or a deadline).
fn wait_lines(path: &Path, port: u16, n: usize) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let lines = conn_lines(path, port);
        if lines.len() >= n || Instant::now() > end {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Clients that time out: one sends nothing, one half a request line, one
/// a line and part of its headers; all are held past
/// `client_header_timeout 1s`, on both servers at once.
fn time_out(ports: &[u16]) {
    let mut held = Vec::new();
    for &port in ports {
        for input in [
            &b""[..],
            b"GET / HT",
            b"GET /t HTTP/1.1\r\nHost: localhost\r\n",
        ] {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            if !input.is_empty() {
                s.write_all(input).unwrap();
            }
            held.push(s);
        }
    }
    // Every server closes them by itself (read returns 0 or an error).
    for s in &mut held {
        let mut buf = [0u8; 64];
        let _ = std::io::Read::read(s, &mut buf);
    }
}

/// gyre with the same configuration as [`start_nginx`]'s.
fn start_gyre(p: &Prefix, root: &Path) -> util::http::Running {
    let root_s = root.display().to_string();
    let server = server_block(root);
    start_http(p, 1, move |port| {
        format!(
            "access_log off;\nserver_tokens off;\n{HTTP}\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{server}\n}}"
        )
    })
}

fn site(p: &Prefix) -> PathBuf {
    p.write("html/dir/file.txt", "x\n");
    for d in ["", "sn/", "np/", "na/"] {
        p.write(&format!("html/{d}app/index.html"), "app\n");
    }
    // alice / secret
    p.write("htpasswd", "alice:{PLAIN}secret\n");
    let html = p.path("html");
    std::os::unix::fs::symlink(html.join("loop"), html.join("loop")).unwrap();
    std::os::unix::fs::symlink("/dev/null", html.join("dev")).unwrap();
    std::fs::create_dir_all(html.join("devdir")).unwrap();
    std::os::unix::fs::symlink("/dev/null", html.join("devdir/index.html")).unwrap();
    html
}

#[test]
fn error_log_lines_are_nginx_lines() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the error-log differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let p = Prefix::new("errlog-gyre");
    let root = site(&p);
    let nginx = start_nginx(&bin, &root);
    let gyre = start_gyre(&p, &root);
    let nginx_log = nginx.prefix.path("logs/error.log");
    let gyre_log = p.path("logs/error.log");

    for (_, input) in BAD {
        exchange(nginx.port, input);
        exchange(gyre.port, input);
    }
    let long = too_large();
    for (_, input) in &long {
        exchange(nginx.port, input);
        exchange(gyre.port, input);
    }
    for &(_, input, answered) in RESETS {
        reset(nginx.port, input, answered);
        reset(gyre.port, input, answered);
    }
    let want = conn_lines(&nginx_log, nginx.port);
    assert!(
        want.len() >= BAD.len() + long.len() + RESETS.len(),
        "nginx wrote {want:#?}"
    );
    let got = wait_lines(&gyre_log, gyre.port, want.len());
    let mut differences = Vec::new();
    for (i, (n, g)) in want.iter().zip(got.iter()).enumerate() {
        if n != g {
            differences.push(format!("line {i}:\n  nginx {n}\n  gyre  {g}"));
        }
    }
    if want.len() != got.len() {
        differences.push(format!(
            "line counts: nginx {} gyre {}\n  nginx {want:#?}\n  gyre  {got:#?}",
            want.len(),
            got.len()
        ));
    }

    // Timeouts: compared as sets (both servers' timers fire together).
    let (n0, g0) = (want.len(), got.len());
    time_out(&[nginx.port, gyre.port]);
    let mut want_t = wait_lines(&nginx_log, nginx.port, n0 + 3).split_off(n0);
    let mut got_t = wait_lines(&gyre_log, gyre.port, g0 + 3).split_off(g0);
    want_t.sort();
    got_t.sort();
    assert_eq!(want_t.len(), 3, "nginx's timeout lines: {want_t:#?}");
    if want_t != got_t {
        differences.push(format!(
            "timeouts:\n  nginx {want_t:#?}\n  gyre  {got_t:#?}"
        ));
    }
    eprintln!(
        "compared {} error-log lines and {} timeout lines with nginx's",
        want.len(),
        want_t.len()
    );
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// Files the server may not read: a file of mode 000, a directory
/// without search permission (its file, and the directory as an index),
/// an index file of mode 000.
const DENIED: &[(&str, &str)] = &[
    (
        "a file of mode 000",
        "GET /secret.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "a file in a directory without x",
        "GET /nox/f.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "a directory without x",
        "GET /nox/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
    (
        "an index of mode 000",
        "GET /ro/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ),
];

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// gyre as [`start_gyre`] starts it, but as `nobody` when `nobody`.
fn start_gyre_as(p: &Prefix, root: &Path, nobody: bool) -> (util::Server, u16) {
    if nobody {
        std::os::unix::fs::chown(p.path("logs"), Some(NOBODY), None).unwrap();
    }
    let root_s = root.display().to_string();
    let server = server_block(root);
    for _attempt in 0..3 {
        let port = free_port();
        p.conf(&format!(
            "{}http {{\naccess_log off;\nserver_tokens off;\n{HTTP}\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{server}\n}}\n}}\n",
            util::http::main_conf(1)
        ));
        let child = command_as(Path::new(util::gyre_bin()), nobody)
            .arg("-p")
            .arg(&p.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut s = util::Server {
            child,
            prefix: p.dir.clone(),
        };
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if matches!(s.child.try_wait(), Ok(Some(_))) {
                break;
            }
            if probe(port) {
                return (s, port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = s.child.kill();
    }
    panic!(
        "gyre did not start; log:\n{}",
        std::fs::read_to_string(p.path("logs/error.log")).unwrap_or_default()
    );
}

/// EACCES is the client's problem for nginx: 403 and `open() "…" failed
/// (13: Permission denied)` at [error] (`"…" is forbidden` from the index
/// module). As root nothing is denied, so both servers then run as
/// nobody.
#[test]
fn permission_errors_are_nginx_lines() {
    use std::os::unix::fs::PermissionsExt;
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the permission differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let nobody = is_root();
    if nobody && !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipping the permission differential test: running as root without setpriv (util-linux) to drop to nobody");
        return;
    }
    let p = Prefix::new("perm-gyre");
    let root = site(&p);
    p.write("html/secret.txt", "s\n");
    p.write("html/nox/f.txt", "f\n");
    p.write("html/ro/index.html", "i\n");
    let mode = |rel: &str, m: u32| {
        std::fs::set_permissions(p.path(rel), std::fs::Permissions::from_mode(m)).unwrap();
    };
    mode("html/secret.txt", 0o000);
    mode("html/ro/index.html", 0o000);
    mode("html/nox", 0o600);
    let nginx = start_nginx_as(&bin, &root, nobody);
    let (gyre, gyre_port) = start_gyre_as(&p, &root, nobody);
    let mut statuses = Vec::new();
    for (name, input) in DENIED {
        let status = |port: u16| {
            let mut r = Raw::connect(port);
            let _ = r.try_send(input.as_bytes());
            r.try_response(false).ok().flatten().map_or(0, |x| x.status)
        };
        let (n, g) = (status(nginx.port), status(gyre_port));
        statuses.push((name, n, g));
    }
    let nginx_log = nginx.prefix.path("logs/error.log");
    let want = conn_lines(&nginx_log, nginx.port);
    let got = wait_lines(&p.path("logs/error.log"), gyre_port, want.len());
    // Put the modes back so the prefix can be removed as a non-root user.
    mode("html/nox", 0o700);
    drop(gyre);
    assert!(
        statuses.iter().all(|&(_, n, _)| n == 403),
        "nginx's statuses: {statuses:?}"
    );
    assert!(
        statuses.iter().all(|&(_, n, g)| n == g),
        "statuses (nginx, gyre): {statuses:?}"
    );
    assert_eq!(want.len(), DENIED.len(), "nginx's lines: {want:#?}");
    assert_eq!(got, want);
    eprintln!(
        "compared {} permission error lines with nginx's",
        want.len()
    );
}

/// `underscores_in_headers` and `ignore_invalid_headers` (server level):
/// which header lines a request keeps (`$http_a_b` shows it) and which
/// nginx logs as ignored.
#[test]
fn header_settings_are_nginx_settings() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the header settings differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let input =
        "GET /h HTTP/1.1\r\nHost: localhost\r\nA_B: 1\r\nX@Y: 2\r\nConnection: close\r\n\r\n";
    let mut compared = 0;
    for settings in [
        "",
        "underscores_in_headers on;",
        "ignore_invalid_headers off;",
        "underscores_in_headers on; ignore_invalid_headers off;",
    ] {
        let server = format!(
            "server_name localhost; {settings} location /h {{ return 200 \"[$http_a_b]\\n\"; }}"
        );
        let p = Prefix::new("hdr-gyre");
        let root = p.path("html");
        let site = Site {
            root: &root,
            http: "",
            server: &server,
        };
        let nginx = util::nginx::start(&bin, "hdr-nginx", &site).expect("nginx starts");
        let root_s = root.display().to_string();
        let gyre = start_http(&p, 1, |port| {
            format!("access_log off;\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{server}\n}}")
        });
        let answer = |port: u16| {
            let mut r = Raw::connect(port);
            r.send(input.as_bytes());
            r.try_response(false)
                .ok()
                .flatten()
                .map(|x| (x.status, x.text()))
        };
        let want = answer(nginx.port);
        let got = answer(gyre.port);
        assert_eq!(got, want, "{settings}");
        let want_lines = conn_lines(&nginx.prefix.path("logs/error.log"), nginx.port);
        let got_lines = wait_lines(&p.path("logs/error.log"), gyre.port, want_lines.len());
        assert_eq!(got_lines, want_lines, "{settings}");
        compared += want_lines.len();
    }
    assert!(compared >= 3, "nginx logged the ignored lines");
}

/// nginx's header buffers at their edges (`client_header_buffer_size
/// 64; large_client_header_buffers 1 512`): a request line filling the
/// one large buffer, then a header (`client sent too large request`); a
/// header line outgrowing it; the buffer ending right after a header line
/// (nginx quotes that line from its buffer, NULs and CR LF included).
#[test]
fn header_buffer_edges_are_nginx_edges() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the header buffer differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let server =
        "server_name localhost; client_header_buffer_size 64; large_client_header_buffers 1 512;";
    let line = format!("GET /{} HTTP/1.1\r\n", "a".repeat(496));
    let header = format!("GET / HTTP/1.1\r\nX-A: {}\r\n", "b".repeat(505));
    let cases: [(&str, String, &str); 4] = [
        (
            "a full request line, then a header",
            line.clone(),
            "Host: a\r\n\r\n",
        ),
        (
            "the same in one write",
            format!("{line}Host: a\r\n\r\n"),
            "",
        ),
        (
            "a header line longer than the buffer",
            "GET / HTTP/1.1\r\nX-Long: ".into(),
            &"b".repeat(600),
        ),
        (
            "the buffer full after a header line",
            header,
            "Host: a\r\n\r\n",
        ),
    ];
    let p = Prefix::new("buf-gyre");
    let root = p.path("html");
    let site = Site {
        root: &root,
        http: "",
        server,
    };
    let nginx = util::nginx::start(&bin, "buf-nginx", &site).expect("nginx starts");
    let root_s = root.display().to_string();
    let gyre = start_http(&p, 1, |port| {
        format!(
            "access_log off;\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{server}\n}}"
        )
    });
    let mut statuses = Vec::new();
    for (name, first, second) in &cases {
        let status = |port: u16| {
            let mut r = Raw::connect(port);
            let _ = r.try_send(first.as_bytes());
            if !second.is_empty() {
                // Two reads for the server (nothing says it read the first).
                std::thread::sleep(Duration::from_millis(100));
                let _ = r.try_send(second.as_bytes());
            }
            r.try_response(false).ok().flatten().map_or(0, |x| x.status)
        };
        statuses.push((name, status(nginx.port), status(gyre.port)));
    }
    assert!(
        statuses.iter().all(|&(_, n, g)| n == 400 && g == 400),
        "statuses (nginx, gyre): {statuses:?}"
    );
    let want = conn_lines(&nginx.prefix.path("logs/error.log"), nginx.port);
    let got = wait_lines(&p.path("logs/error.log"), gyre.port, want.len());
    assert_eq!(want.len(), cases.len(), "nginx's lines: {want:#?}");
    assert_eq!(got, want);
}

/// (name, raw request) whose `Location` is compared.
const REDIRECTS: &[(&str, &str)] = &[
    (
        "directory, Host",
        "GET /app HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ),
    (
        "directory, Host with port",
        "GET /app?a=1 HTTP/1.1\r\nHost: Other:99\r\n\r\n",
    ),
    ("directory, no Host", "GET /app HTTP/1.0\r\n\r\n"),
    (
        "return 301 /rel",
        "GET /r HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ),
    (
        "server_name_in_redirect on",
        "GET /sn/app HTTP/1.1\r\nHost: other\r\n\r\n",
    ),
    (
        "port_in_redirect off",
        "GET /np/app HTTP/1.1\r\nHost: other\r\n\r\n",
    ),
    (
        "absolute_redirect off",
        "GET /na/app HTTP/1.1\r\nHost: other\r\n\r\n",
    ),
    (
        "error_page =301 URL",
        "GET /epurl/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ),
    (
        "error_page URL with variables",
        "GET /ephost/x?q=1 HTTP/1.1\r\nHost: h.example\r\n\r\n",
    ),
];

#[test]
fn redirects_are_nginx_redirects() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the redirect differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let p = Prefix::new("redir-gyre");
    let root = site(&p);
    let nginx = start_nginx(&bin, &root);
    let gyre = start_gyre(&p, &root);
    let answer = |port: u16, input: &str| {
        let mut r = Raw::connect(port);
        let _ = r.try_send(input.as_bytes());
        match r.try_response(false) {
            Ok(Some(resp)) => (
                resp.status,
                resp.header("Location")
                    .map(|l| l.replace(&format!(":{port}/"), ":PORT/")),
                resp.header("Content-Type").map(str::to_string),
            ),
            _ => (0, None, None),
        }
    };
    let mut differences = Vec::new();
    for (name, input) in REDIRECTS {
        let want = answer(nginx.port, input);
        let got = answer(gyre.port, input);
        if want != got {
            differences.push(format!("{name}:\n  nginx {want:?}\n  gyre  {got:?}"));
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// Probes of the kind fail2ban's `nginx-botsearch` bans for (missing
/// files and directories under well-known admin paths), and an ordinary
/// missing file it must not count.
const BOT_PROBES: &[&str] = &[
    "GET /wp-login.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    "POST /wp-admin.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    "GET /phpmyadmin/index.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    "GET /roundcube/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    "GET /cgi-bin/test.cgi HTTP/1.1\r\nHost: localhost\r\nReferer: http://r/\r\nConnection: close\r\n\r\n",
    "GET /ordinary.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
];

/// Failed logins (an unknown user, a wrong password) for fail2ban's
/// `nginx-http-auth`, and requests over `limit_req`'s rate (1 a minute:
/// the second and third are refused) for `nginx-limit-req`.
const AUTH_AND_LIMITS: &[&str] = &[
    "GET /private/ HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic Ym9iOnNlY3JldA==\r\nConnection: close\r\n\r\n",
    "GET /private/ HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic YWxpY2U6d3Jvbmc=\r\nConnection: close\r\n\r\n",
    "GET /private/ HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\nConnection: close\r\n\r\n",
    "GET /limited/a HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    "GET /limited/b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    "GET /limited/c HTTP/1.1\r\nHost: localhost\r\nReferer: http://r/\r\nConnection: close\r\n\r\n",
];

/// `fail2ban-regex LOG FILTER`'s count of matched lines.
fn fail2ban_matches(bin: &Path, log: &Path, filter: &str) -> usize {
    let out = Command::new(bin)
        .arg(log)
        .arg(format!("/etc/fail2ban/filter.d/{filter}.conf"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // `Lines: 12 lines, 0 ignored, 5 matched, 7 missed`
    let line = text
        .lines()
        .find(|l| l.starts_with("Lines:"))
        .unwrap_or_else(|| panic!("fail2ban-regex said:\n{text}"));
    let (before, _) = line.split_once(" matched").unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn fail2ban_stock_filters_match_gyre_as_nginx() {
    let Some(nginx_path) = nginx_bin() else {
        eprintln!("skipping the fail2ban test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let f2b = PathBuf::from("/usr/bin/fail2ban-regex");
    if !f2b.exists() || !Path::new("/etc/fail2ban/filter.d/nginx-botsearch.conf").exists() {
        eprintln!("skipping the fail2ban test: no fail2ban-regex or its nginx filters (apt-get install fail2ban)");
        return;
    }
    let p = Prefix::new("f2b-gyre");
    let root = site(&p);
    let nginx = start_nginx(&nginx_path, &root);
    let gyre = start_gyre(&p, &root);
    for input in BOT_PROBES.iter().chain(AUTH_AND_LIMITS) {
        exchange(nginx.port, input);
        exchange(gyre.port, input);
    }
    let nginx_log = nginx.prefix.path("logs/error.log");
    let gyre_log = p.path("logs/error.log");
    let n = conn_lines(&nginx_log, nginx.port).len();
    wait_lines(&gyre_log, gyre.port, n);
    // bob is unknown, alice's password wrong; two requests over the rate.
    for (filter, n) in [
        ("nginx-botsearch", BOT_PROBES.len() - 1),
        ("nginx-http-auth", 2),
        ("nginx-limit-req", 2),
    ] {
        let want = fail2ban_matches(&f2b, &nginx_log, filter);
        assert_eq!(want, n, "{filter} on nginx's lines: the filter changed?");
        let got = fail2ban_matches(&f2b, &gyre_log, filter);
        assert_eq!(
            got, want,
            "{filter}: gyre's log matched {got} times, nginx's {want}"
        );
    }
}
