//! `error_log` in `http`, `server` and `location`, differential against the
//! real nginx: both get the same configuration (an http-level log, a server
//! with two logs at different levels, a location with its own, a second
//! server that inherits the http level's) and the same requests, and every
//! log file must hold the same lines — up to the time, the pid, the
//! connection number, the prefix and the port. Also the configuration
//! errors (`-t`) for a log that cannot be opened and for `error_log`
//! inside `if`.
//!
//! nginx is found at `$NGINX` or `/usr/sbin/nginx`; without it the test
//! prints why it skipped.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use util::http::start_http;
use util::nginx::nginx_bin;
use util::Prefix;

/// The inside of `http {}` for a server on `port` (paths are relative to
/// the prefix, so both servers write inside their own).
fn http(port: u16) -> String {
    format!(
        "error_log logs/http.log warn;
         server {{
             listen 127.0.0.1:{port};
             server_name localhost;
             root html;
             error_log logs/srv.log info;
             error_log logs/srv-err.log error;
             location /loc/ {{ error_log logs/loc.log error; }}
             location /ka/ {{ error_log logs/ka.log info; }}
             location /inh/ {{ }}
         }}
         server {{
             listen 127.0.0.1:{port};
             server_name other;
             root html;
         }}"
    )
}

/// The log files compared.
const LOGS: &[&str] = &["http.log", "srv.log", "srv-err.log", "loc.log", "ka.log"];

/// Sends `req` on a fresh connection and reads until the server closes.
fn send(port: u16, req: &[u8]) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    if !req.is_empty() {
        s.write_all(req).unwrap();
    } else {
        // A client that connects and goes away: `client closed connection
        // while waiting for request` (info).
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
}

/// The requests, each answered before the next.
fn exercise(port: u16) {
    let reqs: &[&[u8]] = &[
        // The server's own logs (info and error).
        b"GET /missing HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        // The location's log only.
        b"GET /loc/missing HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        // A location without error_log: the server's.
        b"GET /inh/missing HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        // The other server: the http level's (warn lets error through).
        b"GET /missing HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n",
        // A refused head, about the default server (info).
        b"GET / HTTP/7.1\r\nHost: localhost\r\n\r\n",
        // No request at all: the default server's logs (info).
        b"",
    ];
    for r in reqs {
        send(port, r);
    }
    // Kept-alive connections closed by the client after a response: the
    // `closed keepalive connection` line goes where the last request's
    // location logs (nginx's connection log follows the location).
    keepalive_then_close(port, b"GET /ka/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    keepalive_then_close(port, b"GET /inh/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

/// Sends `req` (keep-alive), reads the whole response, then closes.
fn keepalive_then_close(port: u16, req: &[u8]) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                break;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => panic!("the connection ended before the response"),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A log line without what differs between the two servers and runs.
fn normalize(line: &str, prefix: &Path, port: u16) -> String {
    // `2026/12/02 01:02:03 [error] 123#123: *4 message`
    let rest = line.get(20..).unwrap_or(line);
    let rest = match rest.split_once(": ") {
        Some((level_pid, msg)) => {
            let level = level_pid.split(' ').next().unwrap_or("");
            format!("{level} {msg}")
        }
        None => rest.to_string(),
    };
    let mut words: Vec<String> = Vec::new();
    for (i, w) in rest.split(' ').enumerate() {
        if i == 1 && w.starts_with('*') {
            continue;
        }
        words.push(w.to_string());
    }
    words
        .join(" ")
        .replace(&prefix.display().to_string(), "PREFIX")
        .replace(&port.to_string(), "PORT")
}

/// Each compared log's lines, normalized (missing file: no lines).
fn lines(prefix: &Path, port: u16) -> Vec<(String, Vec<String>)> {
    LOGS.iter()
        .map(|name| {
            let text = std::fs::read_to_string(prefix.join("logs").join(name)).unwrap_or_default();
            let ls = text
                .lines()
                .map(|l| normalize(l, prefix, port))
                .collect::<Vec<_>>();
            (name.to_string(), ls)
        })
        .collect()
}

/// Waits until the log files stop growing (the last line of a closed
/// connection may be written just after the client saw the close).
fn settle(prefix: &Path) {
    let size = || {
        LOGS.iter()
            .map(|n| std::fs::metadata(prefix.join("logs").join(n)).map_or(0, |m| m.len()))
            .sum::<u64>()
    };
    let end = Instant::now() + Duration::from_secs(2);
    let mut last = size();
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        let now = size();
        if now == last {
            return;
        }
        last = now;
    }
}

#[test]
fn per_context_error_logs_match_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping: nginx not installed (set NGINX or install Debian's nginx)");
        return;
    };
    let p = Prefix::new("errlog-ctx");
    let g = start_http(&p, 1, http);
    exercise(g.port);
    settle(&p.dir);
    let gl = lines(&p.dir, g.port);

    let n = util::nginx::start_http(&bin, "errlog-ctx-nginx", &http).expect("nginx starts");
    exercise(n.port);
    settle(&n.prefix.dir);
    let nl = lines(&n.prefix.dir, n.port);

    for ((name, g), (_, n)) in gl.iter().zip(&nl) {
        assert_eq!(g, n, "{name}: gyre's lines (left) vs nginx's (right)");
    }
    // Every file got something, so the comparison says something.
    for (name, ls) in &nl {
        assert!(!ls.is_empty(), "nginx wrote nothing to {name}");
    }
    // Both kept-alive closes were logged, each where its request's
    // location logs.
    for name in ["ka.log", "srv.log"] {
        let (_, ls) = nl.iter().find(|(n, _)| n == name).unwrap();
        assert!(
            ls.iter().any(|l| l.contains("closed keepalive connection")),
            "nginx's {name}: {ls:?}"
        );
    }
    // The lines went to the context logs, not to the main log.
    let main = std::fs::read_to_string(p.path("logs/error.log")).unwrap();
    assert!(!main.contains("/missing"), "main log: {main}");
}

/// `gyre -t` and `nginx -t` on `conf`: the `[emerg]` line of each, with
/// the program's name and the prefix taken out.
fn test_conf(bin: &Path, conf: &str) -> (String, String) {
    let emerg = |out: &std::process::Output, prefix: &Path| {
        let text = String::from_utf8_lossy(&out.stderr).to_string();
        text.lines()
            .find(|l| l.contains("[emerg]"))
            .map(|l| {
                l.split_once("[emerg] ")
                    .map_or(l, |(_, m)| m)
                    .replace(&prefix.display().to_string(), "PREFIX")
                    .replace("nginx.conf", "CONF")
                    .replace("gyre.conf", "CONF")
            })
            .unwrap_or_else(|| format!("no [emerg] line in: {text}"))
    };
    let p = Prefix::new("errlog-ctx-t");
    p.conf(conf);
    let out = p.run(&["-t"]);
    let g = emerg(&out, &p.dir);
    let np = Prefix::new("errlog-ctx-t-nginx");
    np.write("conf/nginx.conf", conf);
    let out = std::process::Command::new(bin)
        .arg("-p")
        .arg(&np.dir)
        .args(["-c", "conf/nginx.conf", "-e", "logs/error.log", "-t"])
        .output()
        .unwrap();
    let n = emerg(&out, &np.dir);
    (g, n)
}

#[test]
fn error_log_configuration_errors_match_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping: nginx not installed (set NGINX or install Debian's nginx)");
        return;
    };
    let head = "error_log logs/error.log;\npid logs/x.pid;\nevents {}\n";
    for http in [
        // A directory that does not exist.
        "server { listen 127.0.0.1:1; error_log /nonexistent-gyre-dir/e.log; }",
        // Not allowed in if.
        "server { listen 127.0.0.1:1; location / { if ($args) { error_log logs/x.log; } } }",
        // A level nginx does not have.
        "server { listen 127.0.0.1:1; error_log logs/x.log loud; }",
        // A second level.
        "error_log logs/x.log info extra;",
        "error_log logs/x.log info warn;",
        // debug masks are accepted (the next error is nginx's own).
        "error_log logs/x.log debug_http debug_core; server { listen 127.0.0.1:1; location / { if ($args) { error_log x; } } }",
    ] {
        let conf = format!("{head}http {{\n{http}\n}}\n");
        let (g, n) = test_conf(&bin, &conf);
        assert_eq!(g, n, "for: {http}");
    }
}
