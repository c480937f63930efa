//! The upstream block and its balancers against real nginx: the same
//! `upstream {}` text is read by `nginx -t` and by gyre's parser (errors
//! compared: message and line), and nginx proxies requests to real backends
//! that answer with their own port, so the order it picks them in is
//! compared with gyre's balancer over the block gyre parsed. Skipped (with a
//! message) when nginx is not installed.
#![allow(clippy::unwrap_used)]

mod common;
use common::ReadSome;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gyre_core::conf::{self, Args, Block, ConfCtx, Context, Directive, DirectiveSpec, ModuleDef};
use gyre_http::upstream::conf::parse;
use gyre_http::upstream::{Outcome, Upstream};

fn nginx_bin() -> Option<PathBuf> {
    let p = std::env::var_os("NGINX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"));
    if p.exists() {
        Some(p)
    } else {
        println!("skipped: no nginx at {}", p.display());
        None
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!(
            "gyre-upstream-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("logs")).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ------------------------------------------------------- gyre's side

#[derive(Default)]
struct Nothing;

fn keep(_: &mut Nothing, _: &Directive, _: &ConfCtx) -> Result<(), String> {
    Ok(())
}

static TABLE: &[DirectiveSpec<Nothing>] = &[DirectiveSpec::block(
    "upstream",
    Context::MAIN,
    Args::TAKE1,
    Block::Raw,
    true,
    keep,
)];

static MODULE: ModuleDef<Nothing> = ModuleDef {
    name: "upstream-test",
    directives: TABLE,
    create_conf: Nothing::default,
    init_conf: conf::no_init,
};

/// gyre's reading of `upstream u { BODY }` on line 3: the upstream, or
/// the error as "MESSAGE|LINE" (0: no place).
fn gyre_read(body: &str) -> Result<Upstream, String> {
    let text = format!("events {{}}\n\nupstream u {{ {body} }}\n");
    let dir = std::env::temp_dir();
    let c = conf::load_str(&text, Path::new("t.conf"), &dir, None, &[&MODULE])
        .map_err(|e| format!("{}|{}", e.message(), line_of(&e)))?;
    let d = c
        .directives()
        .iter()
        .find(|d| d.name == "upstream")
        .unwrap();
    parse(d)
        .map(|p| p.upstream)
        .map_err(|e| format!("{}|{}", e.message(), line_of(&e)))
}

fn line_of(e: &conf::ConfError) -> usize {
    match e.location() {
        Some(conf::Location::File { line, .. }) => *line,
        _ => 0,
    }
}

// ------------------------------------------------------- nginx's side

/// `nginx -t` of the same block on line 3: Ok, or "MESSAGE|LINE".
fn nginx_read(bin: &Path, body: &str) -> Result<(), String> {
    let t = TempDir::new("t");
    let text = format!(
        "pid logs/n.pid; error_log logs/error.log; events {{}}\nhttp {{ access_log off;\nupstream u {{ {body} }}\n\
         server {{ listen 127.0.0.1:1; location / {{ proxy_pass http://u; }} }} }}\n"
    );
    std::fs::write(t.0.join("n.conf"), text).unwrap();
    let out = Command::new(bin)
        .arg("-t")
        .arg("-q")
        .arg("-p")
        .arg(&t.0)
        .args(["-c", "n.conf", "-e", "logs/error.log"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if out.status.success() {
        return Ok(());
    }
    let s = String::from_utf8_lossy(&out.stderr).to_string();
    let line = s
        .lines()
        .find(|l| l.contains("[emerg]"))
        .unwrap_or("")
        .to_string();
    // "nginx: [emerg] MESSAGE in /path/n.conf:3"
    let msg = line.split("[emerg] ").nth(1).unwrap_or("").to_string();
    match msg.rsplit_once(" in ") {
        Some((m, place)) if place.contains("n.conf:") => {
            let l = place.rsplit(':').next().unwrap().parse::<usize>().unwrap();
            Err(format!("{m}|{l}"))
        }
        _ => Err(format!("{msg}|0")),
    }
}

#[test]
fn upstream_block_errors_match_nginx() {
    let Some(bin) = nginx_bin() else { return };
    let cases = [
        "server 127.0.0.1;",
        "server 127.0.0.1:1 weight=5 max_fails=3 fail_timeout=1m max_conns=10;",
        "server 127.0.0.1:1 weight=0;",
        "server 127.0.0.1:1 weight=x;",
        "server 127.0.0.1:1 foo;",
        "server 127.0.0.1:1 max_fails=-1;",
        "server 127.0.0.1:1 fail_timeout=1x;",
        "server 127.0.0.1:1 fail_timeout=10ms;",
        "server 127.0.0.1:1 max_conns=x;",
        "server 127.0.0.1:1 down; server 127.0.0.1:2 backup;",
        "server 127.0.0.1:1 backup; hash $uri;",
        "server 127.0.0.1:1; server 127.0.0.1:2 backup; hash $uri;",
        "hash $uri; server 127.0.0.1:1 backup;",
        "ip_hash; server 127.0.0.1:1 backup;",
        "random; server 127.0.0.1:1 backup;",
        "least_conn; server 127.0.0.1:1 backup; server 127.0.0.1:2;",
        "hash $uri; server 127.0.0.1:1 weight=2 max_conns=3;",
        "server 127.0.0.1:1 down backup;",
        "server 127.0.0.1:99999;",
        "server 127.0.0.1:0;",
        "server [::1];",
        "server [::1]:0;",
        "server unix:;",
        "server unix:/tmp/x.sock;",
        "server http://127.0.0.1:1;",
        "server 127.0.0.1:1/x;",
        "server localhost:1;",
        "server nosuchhost.invalid:80;",
        "server;",
        "server 127.0.0.1:1; hash;",
        "server 127.0.0.1:1; hash $uri foo;",
        "server 127.0.0.1:1; hash $uri consistent;",
        "server 127.0.0.1:1; random two foo;",
        "server 127.0.0.1:1; random foo;",
        "server 127.0.0.1:1; random two least_conn;",
        "server 127.0.0.1:1; least_conn x;",
        "server 127.0.0.1:1; ip_hash x;",
        "server 127.0.0.1:1; keepalive 0;",
        "server 127.0.0.1:1; keepalive x;",
        "server 127.0.0.1:1; keepalive 1 2;",
        "server 127.0.0.1:1; keepalive 2; keepalive 3;",
        "server 127.0.0.1:1; keepalive 16; keepalive_timeout 5s; keepalive_requests 100;",
        "server 127.0.0.1:1; keepalive_timeout 5x;",
        "server 127.0.0.1:1; keepalive_requests x;",
        "server 127.0.0.1:1; zone z 64k;",
        "server 127.0.0.1:1; zone z 1k;",
        "server 127.0.0.1:1; zone z x;",
        "server 127.0.0.1:1; zone z 64k 1;",
        "zone z; server 127.0.0.1:1;",
        "server 127.0.0.1:1; foo;",
        "",
    ];
    let mut bad = Vec::new();
    for body in cases {
        let n = nginx_read(&bin, body);
        let g = gyre_read(body).map(|_| ());
        if n != g {
            bad.push(format!("{body:?}\n  nginx: {n:?}\n  gyre:  {g:?}"));
        }
    }
    assert!(bad.is_empty(), "differences:\n{}", bad.join("\n"));
}

// ------------------------------------------------- balancing vs nginx

/// Backends that answer every request with their own port, then close.
fn backends(n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| {
            let ls = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = ls.local_addr().unwrap().port();
            std::thread::spawn(move || {
                for s in ls.incoming() {
                    let Ok(mut s) = s else { return };
                    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    let mut req = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read_some(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(k) => req.extend_from_slice(&buf[..k]),
                        }
                    }
                    let body = port.to_string();
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                }
            });
            port
        })
        .collect()
}

struct Nginx {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tests that start nginx run one at a time: each picks "free" ports
/// for nginx and for ports nobody listens on, and a parallel test's
/// listener taking one of them made nginx's answer a reset (once, under a
/// loaded full run).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_nginx(bin: &Path, body: &str) -> Nginx {
    start_nginx_with(
        bin,
        &format!("upstream u {{ {body} }}"),
        "location / { proxy_pass http://u; }",
    )
}

/// nginx with `http_extra` in `http {}` and `locations` in its server.
fn start_nginx_with(bin: &Path, http_extra: &str, locations: &str) -> Nginx {
    let t = TempDir::new("n");
    for d in ["cb", "px", "fc", "uw", "sc"] {
        std::fs::create_dir_all(t.0.join("tmp").join(d)).unwrap();
    }
    for _ in 0..3 {
        let port = free_port();
        let text = format!(
            "daemon off; master_process off; pid logs/n.pid; error_log logs/error.log info;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; client_body_temp_path tmp/cb; proxy_temp_path tmp/px;\n\
             fastcgi_temp_path tmp/fc; uwsgi_temp_path tmp/uw; scgi_temp_path tmp/sc;\n\
             {http_extra}\n\
             server {{ listen 127.0.0.1:{port}; {locations} }} }}\n"
        );
        std::fs::write(t.0.join("n.conf"), text).unwrap();
        let mut child = Command::new(bin)
            .arg("-p")
            .arg(&t.0)
            .args(["-c", "n.conf", "-e", "logs/error.log"])
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
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Nginx {
                    child,
                    port,
                    _dir: t,
                };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("nginx did not start");
}

/// GET `path` through nginx; the backend port it reached.
fn hit(port: u16, path: &str) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("");
    body.trim()
        .parse()
        .unwrap_or_else(|_| panic!("bad answer {out:?}"))
}

/// gyre's choice for one request with hash key `key`, freed as a success.
fn pick(up: &mut Upstream, key: &str) -> u16 {
    let mut r = up.start(key.as_bytes(), Some([127, 0, 0, 1].into()));
    let c = r.get(up, 0, &mut || 0).unwrap();
    let port = up
        .peers
        .peer(c)
        .unwrap()
        .name
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    r.free(up, Outcome::Ok, 0);
    port
}

fn compare(bin: &Path, body: &str, keys: &[String]) {
    let n = start_nginx(bin, body);
    let mut up = gyre_read(body).unwrap();
    let theirs: Vec<u16> = keys
        .iter()
        .map(|k| hit(n.port, &format!("/?k={k}")))
        .collect();
    let ours: Vec<u16> = keys.iter().map(|k| pick(&mut up, k)).collect();
    assert_eq!(ours, theirs, "{body}");
}

#[test]
fn balancing_sequences_match_nginx() {
    let _serial = serial();
    let Some(bin) = nginx_bin() else { return };
    let p = backends(4);
    let s = |i: usize| format!("127.0.0.1:{}", p[i]);
    let plain: Vec<String> = (0..21).map(|i| format!("r{i}")).collect();
    let keys: Vec<String> = (0..40).map(|i| format!("user{i}")).collect();
    compare(
        &bin,
        &format!(
            "server {} weight=5; server {}; server {};",
            s(0),
            s(1),
            s(2)
        ),
        &plain,
    );
    compare(
        &bin,
        &format!(
            "server {} weight=3; server {} weight=2; server {} down; server {};",
            s(0),
            s(1),
            s(2),
            s(3)
        ),
        &plain,
    );
    compare(
        &bin,
        &format!(
            "least_conn; server {} weight=2; server {}; server {};",
            s(0),
            s(1),
            s(2)
        ),
        &plain,
    );
    compare(
        &bin,
        &format!(
            "hash $arg_k; server {}; server {} weight=3; server {};",
            s(0),
            s(1),
            s(2)
        ),
        &keys,
    );
    compare(
        &bin,
        &format!(
            "hash $arg_k consistent; server {}; server {} weight=2; server {}; server {};",
            s(0),
            s(1),
            s(2),
            s(3)
        ),
        &keys,
    );
    compare(
        &bin,
        &format!(
            "hash $arg_k consistent; server {} down; server {}; server {};",
            s(0),
            s(1),
            s(2)
        ),
        &keys,
    );
    compare(
        &bin,
        &format!(
            "ip_hash; server {}; server {}; server {};",
            s(0),
            s(1),
            s(2)
        ),
        &plain,
    );
}

/// gyre's requests with a dead peer: a failed attempt is freed as failed
/// and the request goes on (nginx's `proxy_next_upstream error`); returns
/// the ports that answered and the "temporarily disabled" warnings.
fn with_failures(up: &mut Upstream, dead: u16, n: usize) -> (Vec<u16>, usize) {
    let mut out = Vec::new();
    let mut warned = 0;
    for _ in 0..n {
        let mut r = up.start(b"", None);
        // Bounded by the peers' tries.
        for _ in 0..16 {
            let Some(c) = r.get(up, 0, &mut || 0) else {
                break;
            };
            let port: u16 = up
                .peers
                .peer(c)
                .unwrap()
                .name
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            if port == dead {
                warned += usize::from(r.free(up, Outcome::Failed, 0).disabled);
                continue;
            }
            r.free(up, Outcome::Ok, 0);
            out.push(port);
            break;
        }
    }
    (out, warned)
}

#[test]
fn passive_health_matches_nginx() {
    let _serial = serial();
    let Some(bin) = nginx_bin() else { return };
    let p = backends(2);
    let dead = free_port();
    for body in [
        format!(
            "server 127.0.0.1:{}; server 127.0.0.1:{dead} max_fails=2; server 127.0.0.1:{} weight=2;",
            p[0], p[1]
        ),
        format!(
            "server 127.0.0.1:{dead}; server 127.0.0.1:{} weight=2; server 127.0.0.1:{} backup;",
            p[0], p[1]
        ),
        format!(
            "least_conn; server 127.0.0.1:{dead} weight=3; server 127.0.0.1:{}; server 127.0.0.1:{} backup;",
            p[0], p[1]
        ),
    ] {
        let n = start_nginx(&bin, &body);
        let theirs: Vec<u16> = (0..12).map(|i| hit(n.port, &format!("/{i}"))).collect();
        let log = std::fs::read_to_string(n._dir.0.join("logs/error.log")).unwrap();
        let their_warns = log.matches("upstream server temporarily disabled").count();
        let mut up = gyre_read(&body).unwrap();
        let (ours, our_warns) = with_failures(&mut up, dead, 12);
        assert_eq!(ours, theirs, "{body}");
        assert_eq!(our_warns, their_warns, "{body}\n{log}");
        assert!(their_warns >= 1, "the dead server was never disabled: {log}");
    }
}

// ------------------------------------- request building and response parsing

use gyre_http::upstream::http_request::{
    add_x_forwarded_for, build_head, internal_variable, merged_headers, BodyFraming, ProxyVersion,
    RequestView,
};
use gyre_http::upstream::http_response::{parse_head, Head, HeadOptions};
use std::sync::{Arc, Mutex};

/// A backend that records each request head and answers `answer(path)`.
fn recording_backend(answer: fn(&str) -> Vec<u8>) -> (u16, Arc<Mutex<Vec<Vec<u8>>>>) {
    let ls = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = ls.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        for s in ls.incoming() {
            let Ok(mut s) = s else { return };
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read_some(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => req.extend_from_slice(&buf[..k]),
                }
            }
            let end = req
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map_or(req.len(), |i| i + 4);
            let head = req[..end].to_vec();
            let path = String::from_utf8_lossy(&head)
                .split(' ')
                .nth(1)
                .unwrap_or("/")
                .to_string();
            seen2.lock().unwrap().push(head);
            let _ = s.write_all(&answer(&path));
            let _ = s.shutdown(std::net::Shutdown::Write);
        }
    });
    (port, seen)
}

fn ok_answer(_: &str) -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()
}

/// Sends a raw request to nginx and reads the whole answer.
fn raw(port: u16, req: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// (proxy directives, the same headers as gyre's configured list, version,
/// proxy_pass_request_headers).
type ProxyCase = (String, Vec<(String, String)>, ProxyVersion, bool);
/// (method, URI, headers, body) of a client request.
type ClientRequest<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, &'a [u8]);

#[test]
fn upstream_request_heads_match_nginx() {
    let _serial = serial();
    let Some(bin) = nginx_bin() else { return };
    let (bport, seen) = recording_backend(ok_answer);
    let cases: Vec<ProxyCase> = vec![
        (String::new(), vec![], ProxyVersion::Http10, true),
        (
            "proxy_http_version 1.1; proxy_set_header Connection \"\"; \
             proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; proxy_set_header X-Lit lit;"
                .into(),
            vec![
                ("Connection".into(), String::new()),
                ("X-Forwarded-For".into(), "$proxy_add_x_forwarded_for".into()),
                ("X-Lit".into(), "lit".into()),
            ],
            ProxyVersion::Http11,
            true,
        ),
        (
            "proxy_pass_request_headers off; proxy_set_header host $proxy_host;".into(),
            vec![("host".into(), "$proxy_host".into())],
            ProxyVersion::Http10,
            false,
        ),
    ];
    let requests: [ClientRequest<'_>; 2] = [
        (
            "GET",
            "/a/b?c=d",
            vec![
                ("Host", "example.com"),
                ("User-Agent", "gyre-test/1"),
                ("Connection", "keep-alive"),
                ("Keep-Alive", "300"),
                ("TE", "trailers"),
                ("Upgrade", "h2c"),
                ("X-Forwarded-For", "10.0.0.1"),
                // (A name with "_" would not be here: the request parser
                // drops it first, as nginx's ignore_invalid_headers does.)
                ("Accept", "*/*"),
            ],
            b"",
        ),
        (
            "POST",
            "/post",
            vec![
                ("Host", "example.com"),
                ("Content-Length", "5"),
                ("Content-Type", "text/plain"),
            ],
            b"hello",
        ),
    ];
    for (directives, conf, version, pass) in &cases {
        let n = start_nginx_with(
            &bin,
            "",
            &format!("location / {{ proxy_pass http://127.0.0.1:{bport}; {directives} }}"),
        );
        for (method, uri, headers, body) in &requests {
            let mut req = format!("{method} {uri} HTTP/1.1\r\n");
            for (k, v) in headers {
                req.push_str(&format!("{k}: {v}\r\n"));
            }
            req.push_str("\r\n");
            let mut bytes = req.into_bytes();
            bytes.extend_from_slice(body);
            seen.lock().unwrap().clear();
            // The client asked for keep-alive: wait for the backend to
            // have the request rather than for nginx to close.
            let mut s = TcpStream::connect(("127.0.0.1", n.port)).unwrap();
            s.write_all(&bytes).unwrap();
            let end = Instant::now() + Duration::from_secs(5);
            while seen.lock().unwrap().is_empty() {
                assert!(Instant::now() < end, "the backend got nothing");
                std::thread::sleep(Duration::from_millis(5));
            }
            drop(s);
            let theirs = seen.lock().unwrap().pop().unwrap();
            let framing = if body.is_empty() {
                BodyFraming::None
            } else {
                BodyFraming::Length(body.len() as u64)
            };
            let view = RequestView {
                method,
                uri,
                headers,
                body: framing,
            };
            let set: Vec<(String, String)> = merged_headers(conf)
                .into_iter()
                .map(|(k, v)| {
                    let v = match v.strip_prefix('$') {
                        Some("proxy_host") => format!("127.0.0.1:{bport}"),
                        Some("proxy_add_x_forwarded_for") => {
                            add_x_forwarded_for(headers, "127.0.0.1")
                        }
                        Some(var) => internal_variable(var, framing).unwrap(),
                        None => v,
                    };
                    (k, v)
                })
                .collect();
            let mut ours = Vec::new();
            build_head(&view, *version, &set, *pass, &mut ours);
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "{directives} / {method} {uri}"
            );
        }
    }
}

fn canned(path: &str) -> Vec<u8> {
    let r: &[u8] = match path {
        "/garbage" => b"garbage here\r\n\r\nbody",
        "/badstatus" => b"HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nhi",
        "/badheader" => b"HTTP/1.1 200 OK\r\nX Y: z\r\nContent-Length: 2\r\n\r\nhi",
        "/nul" => b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nhi",
        "/lead" => b"HTTP/1.1 200 OK\r\n X-A: a\r\nContent-Length: 2\r\n\r\nhi",
        "/cr" => b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 2\r\n\r\nhi",
        "/colonless" => b"HTTP/1.1 200 OK\r\nXYZ\r\nContent-Length: 2\r\n\r\nhi",
        "/under" => b"HTTP/1.1 200 OK\r\nX_A: a\r\nContent-Length: 2\r\n\r\nhi",
        "/s099" => b"HTTP/1.1 099 Weird\r\nContent-Length: 2\r\n\r\nhi",
        "/s600" => b"HTTP/1.1 600 Weird\r\nContent-Length: 2\r\n\r\nhi",
        "/iis" => b"HTTP/1.1 403.1 Forbidden\r\nContent-Length: 2\r\n\r\nhi",
        "/lf" => b"HTTP/1.1 200 OK\nContent-Length: 2\n\nhi",
        "/noreason" => b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nhi",
        "/h2" => b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nhi",
        "/lower" => b"http/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi",
        "/big" => {
            let mut v = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
            v.extend(std::iter::repeat_n(b'a', 5000));
            v.extend_from_slice(b"\r\nContent-Length: 2\r\n\r\nhi");
            return v;
        }
        "/fits" => {
            // 4096 bytes of head exactly.
            let mut v = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
            let pad = 4096 - v.len() - "\r\n\r\n".len();
            v.extend(std::iter::repeat_n(b'a', pad));
            v.extend_from_slice(b"\r\n\r\nhi");
            return v;
        }
        _ => b"HTTP/1.1 404 NF\r\nContent-Length: 0\r\n\r\n",
    };
    r.to_vec()
}

#[test]
fn upstream_response_heads_match_nginx() {
    let _serial = serial();
    let Some(bin) = nginx_bin() else { return };
    let (bport, _) = recording_backend(canned);
    let n = start_nginx_with(
        &bin,
        "",
        &format!("location / {{ proxy_pass http://127.0.0.1:{bport}; proxy_buffer_size 4k; }}"),
    );
    let o = HeadOptions {
        limit: 4096,
        ..HeadOptions::default()
    };
    for path in [
        "/garbage",
        "/badstatus",
        "/badheader",
        "/nul",
        "/lead",
        "/cr",
        "/colonless",
        "/under",
        "/s099",
        "/s600",
        "/iis",
        "/lf",
        "/noreason",
        "/h2",
        "/lower",
        "/big",
        "/fits",
    ] {
        let before = std::fs::read_to_string(n._dir.0.join("logs/error.log")).unwrap_or_default();
        let out = raw(
            n.port,
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        let after = std::fs::read_to_string(n._dir.0.join("logs/error.log")).unwrap_or_default();
        let logged = after[before.len()..].to_string();
        let text = String::from_utf8_lossy(&out);
        let status_line = text.lines().next().unwrap_or("").to_string();
        match parse_head(&canned(path), &o) {
            Head::Done(h, _) => {
                assert!(
                    status_line.starts_with(&format!("HTTP/1.1 {:03}", h.status)),
                    "{path}: nginx answered {status_line:?}, gyre read status {}",
                    h.status
                );
            }
            Head::Http09 => {
                assert!(
                    logged.contains("upstream sent no valid HTTP/1.0 header"),
                    "{path}: {logged}"
                );
                assert!(
                    out.starts_with(&canned(path)),
                    "{path}: nginx passes the bytes as they came: {text:?}"
                );
            }
            Head::Invalid(line) => {
                assert!(
                    status_line.starts_with("HTTP/1.1 502"),
                    "{path}: {status_line}"
                );
                assert!(
                    logged.contains(&format!(
                        "{line} while reading response header from upstream"
                    )),
                    "{path}: gyre {line:?}, nginx: {logged}"
                );
            }
            Head::Incomplete => panic!("{path}: incomplete"),
        }
    }
}
