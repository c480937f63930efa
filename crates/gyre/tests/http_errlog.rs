//! Differential test of the error log and of redirects against the real
//! nginx: both serve the same directory with the same server block, get
//! the same bad requests (missing files, a forbidden directory, a missing
//! index, a too-large body, refused request lines, a rewrite cycle,
//! rewrite_log, clients timing out), and must write the same error-log
//! lines — up to the time, the pid and the connection number — and send the
//! same `Location` for directory, `return` and `error_page` redirects.
//!
//! nginx is found at `$NGINX` or `/usr/sbin/nginx`; without it the test
//! prints why it skipped.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use util::http::{free_port, probe, start_http, Raw};
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
";

fn nginx_bin() -> Option<PathBuf> {
    let p = std::env::var_os("NGINX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"));
    p.exists().then_some(p)
}

/// nginx in the foreground in its own prefix, killed on drop.
struct Nginx {
    child: Child,
    port: u16,
    prefix: Prefix,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_nginx(bin: &Path, root: &Path) -> Nginx {
    let p = Prefix::new("errlog-nginx");
    for t in ["cb", "px", "fc", "uw", "sc"] {
        std::fs::create_dir_all(p.path(&format!("tmp/{t}"))).unwrap();
    }
    for _attempt in 0..3 {
        let port = free_port();
        let conf = format!(
            "daemon off;\nmaster_process off;\nerror_log logs/error.log info;\npid logs/nginx.pid;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n access_log off;\n server_tokens off;\n client_body_temp_path tmp/cb;\n proxy_temp_path tmp/px;\n\
             fastcgi_temp_path tmp/fc;\n uwsgi_temp_path tmp/uw;\n scgi_temp_path tmp/sc;\n\
             server {{\n  listen 127.0.0.1:{port};\n  root {};\n{SERVER}\n }}\n}}\n",
            root.display()
        );
        p.write("conf/nginx.conf", &conf);
        let mut child = Command::new(bin)
            .arg("-p")
            .arg(&p.dir)
            .args(["-c", "conf/nginx.conf", "-e", "logs/error.log"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            if probe(port) {
                return Nginx {
                    child,
                    port,
                    prefix: p,
                };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!(
        "nginx did not start: {}",
        std::fs::read_to_string(p.path("logs/error.log")).unwrap_or_default()
    );
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
];

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

fn site(p: &Prefix) -> PathBuf {
    p.write("html/dir/file.txt", "x\n");
    for d in ["", "sn/", "np/", "na/"] {
        p.write(&format!("html/{d}app/index.html"), "app\n");
    }
    p.path("html")
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
    let root_s = root.display().to_string();
    let gyre = start_http(&p, 1, move |port| {
        format!(
            "access_log off;\nserver_tokens off;\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{SERVER}\n}}"
        )
    });
    let nginx_log = nginx.prefix.path("logs/error.log");
    let gyre_log = p.path("logs/error.log");

    for (_, input) in BAD {
        exchange(nginx.port, input);
        exchange(gyre.port, input);
    }
    let want = conn_lines(&nginx_log, nginx.port);
    assert!(want.len() >= BAD.len(), "nginx wrote {want:#?}");
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
    let root_s = root.display().to_string();
    let gyre = start_http(&p, 1, move |port| {
        format!(
            "access_log off;\nserver_tokens off;\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{SERVER}\n}}"
        )
    });
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
    let root_s = root.display().to_string();
    let gyre = start_http(&p, 1, move |port| {
        format!(
            "access_log off;\nserver_tokens off;\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{SERVER}\n}}"
        )
    });
    for input in BOT_PROBES {
        exchange(nginx.port, input);
        exchange(gyre.port, input);
    }
    let nginx_log = nginx.prefix.path("logs/error.log");
    let gyre_log = p.path("logs/error.log");
    let n = conn_lines(&nginx_log, nginx.port).len();
    wait_lines(&gyre_log, gyre.port, n);
    let want = fail2ban_matches(&f2b, &nginx_log, "nginx-botsearch");
    assert_eq!(
        want,
        BOT_PROBES.len() - 1,
        "nginx's lines: the filter changed?"
    );
    for filter in ["nginx-botsearch", "nginx-http-auth"] {
        let want = fail2ban_matches(&f2b, &nginx_log, filter);
        let got = fail2ban_matches(&f2b, &gyre_log, filter);
        assert_eq!(
            got, want,
            "{filter}: gyre's log matched {got} times, nginx's {want}"
        );
    }
}
