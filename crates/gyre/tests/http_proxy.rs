//! The reverse proxy on the real binary, with real sockets: a threaded
//! test backend that records what it received, raw-socket backends for the
//! edge cases, and the upstream blocks' balancing seen through the proxy.
#![allow(clippy::unwrap_used)]

mod proxy_backend;
mod util;

use std::io::Write;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};
use util::ReadSome;

use proxy_backend::{backend, dechunk, echo_backend, find, ok, Got, Reply};

use util::http::{free_port, start_http, Raw};
use util::Prefix;

fn start(p: &Prefix, http: impl Fn(u16) -> String) -> util::http::Running {
    start_http(p, 1, http)
}

fn get(port: u16, req: &str) -> util::http::Resp {
    let mut r = Raw::connect(port);
    r.send(req.as_bytes());
    r.response(req.starts_with("HEAD"))
}

#[test]
fn proxy_pass_sends_nginx_s_request_and_relays_the_response() {
    let b = echo_backend();
    let p = Prefix::new("proxy-basic");
    let bp = b.port;
    let g = start(&p, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port};
                location / {{ proxy_pass http://127.0.0.1:{bp}; }}
                location /app/ {{ proxy_pass http://127.0.0.1:{bp}/v2/; }}
                location /hdr/ {{ proxy_pass http://127.0.0.1:{bp};
                    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                    proxy_set_header Host $host;
                    proxy_hide_header X-Up;
                    add_header X-Got $upstream_status; }}
            }}"
        )
    });
    let r = get(
        g.port,
        "GET /a/../b//c?x=1 HTTP/1.1\r\nHost: front\r\nUser-Agent: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.text(), "/a/../b//c?x=1");
    assert_eq!(r.header("x-up"), Some("1"));
    assert!(
        r.header("server").is_some_and(|s| s.starts_with("gyre")),
        "the upstream's Server is hidden: {:?}",
        r.header("server")
    );
    let got = b.got.lock().unwrap().last().cloned().unwrap();
    assert_eq!(got.line, "GET /a/../b//c?x=1 HTTP/1.0");
    assert_eq!(
        got.headers,
        vec![
            ("Host".to_string(), format!("127.0.0.1:{bp}")),
            ("Connection".to_string(), "close".to_string()),
            ("User-Agent".to_string(), "t".to_string()),
        ]
    );
    let r = get(g.port, "GET /app/x%20y?q HTTP/1.1\r\nHost: front\r\n\r\n");
    assert_eq!(r.text(), "/v2/x%20y?q");
    let r = get(
        g.port,
        "GET /hdr/z HTTP/1.1\r\nHost: front\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n",
    );
    assert_eq!(r.header("x-up"), None);
    assert_eq!(r.header("x-got"), Some("200"));
    let got = b.got.lock().unwrap().last().cloned().unwrap();
    assert_eq!(got.header("x-forwarded-for"), Some("10.0.0.1, 127.0.0.1"));
    assert_eq!(got.header("host"), Some("front"));
}

#[test]
fn request_bodies_go_with_a_length_and_chunked_responses_are_rechunked() {
    let b = backend(Arc::new(|g: &Got| {
        if g.line.starts_with("POST") {
            let body = String::from_utf8_lossy(&g.body).to_uppercase();
            ok(&body)
        } else if g.line.contains("/chunked") {
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".to_vec()
        } else {
            b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close".to_vec()
        }
    }));
    let p = Prefix::new("proxy-bodies");
    let bp = b.port;
    let g = start(&p, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port};
                location / {{ proxy_pass http://127.0.0.1:{bp}; proxy_http_version 1.1; }} }}"
        )
    });
    let r = get(
        g.port,
        "POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    );
    assert_eq!(r.text(), "ABCDE");
    let got = b.got.lock().unwrap().last().cloned().unwrap();
    assert_eq!(got.header("content-length"), Some("5"));
    assert_eq!(got.header("transfer-encoding"), None);
    assert_eq!(got.line, "POST /p HTTP/1.1");
    // Chunked upstream, HTTP/1.1 client: chunked again.
    let mut c = Raw::connect(g.port);
    c.send(b"GET /chunked HTTP/1.1\r\nHost: h\r\n\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut all = Vec::new();
    while find(&all, b"0\r\n\r\n").is_none() && Instant::now() < deadline {
        let mut chunk = [0u8; 4096];
        let n = c.s.read_some(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        all.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&all).into_owned();
    assert!(text.contains("Transfer-Encoding: chunked\r\n"), "{text}");
    // Re-chunked as read (one chunk per upstream read, as nginx's buffers).
    let body = text.split_once("\r\n\r\n").unwrap().1;
    assert_eq!(dechunk(body), "hello world", "{text}");
    // The same connection serves another request (keep-alive kept).
    c.send(b"GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    // (the test client decodes chunked bodies)
    assert_eq!(r.text(), "until close");
    // An HTTP/1.0 client gets the close-delimited body as it is.
    let r = get(g.port, "GET /chunked HTTP/1.0\r\n\r\n");
    assert_eq!(r.text(), "hello world");
    // HEAD passes the upstream's length, no body.
    let r = get(
        g.port,
        "HEAD /h HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
}

#[test]
fn refused_and_slow_upstreams_are_502_and_504_with_nginx_s_lines() {
    // A port nobody listens on.
    let dead = free_port();
    // A backend that accepts and never answers.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let slow = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().take(8) {
            held.push(s);
        }
        std::thread::sleep(Duration::from_secs(20));
    });
    let p = Prefix::new("proxy-errors");
    let g = start(&p, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port};
                location /dead/ {{ proxy_pass http://127.0.0.1:{dead}; }}
                location /slow/ {{ proxy_pass http://127.0.0.1:{slow}; proxy_read_timeout 300ms; }}
                location /page/ {{ proxy_pass http://127.0.0.1:{dead}; error_page 502 = /fallback; }}
                location = /fallback {{ return 200 fallback; }}
            }}"
        )
    });
    let r = get(g.port, "GET /dead/x HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(r.status, 502);
    let line = format!(
        "connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: , request: \"GET /dead/x HTTP/1.1\", upstream: \"http://127.0.0.1:{dead}/dead/x\", host: \"h\""
    );
    assert!(
        g.server.logged(&line, Duration::from_secs(5)),
        "{}",
        g.log()
    );
    let r = get(g.port, "GET /slow/y HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(r.status, 504);
    let line = format!(
        "upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1, server: , request: \"GET /slow/y HTTP/1.1\", upstream: \"http://127.0.0.1:{slow}/slow/y\", host: \"h\""
    );
    assert!(
        g.server.logged(&line, Duration::from_secs(5)),
        "{}",
        g.log()
    );
    let r = get(g.port, "GET /page/ HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "fallback"));
}

/// A raw backend: reads one request head, writes `bytes`, then closes (or
/// resets when `reset`).
fn raw_backend(bytes: &'static [u8], hold: bool) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().take(16) {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = Vec::new();
                while find(&buf, b"\r\n\r\n").is_none() {
                    let mut c = [0u8; 4096];
                    match s.read_some(&mut c) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&c[..n]),
                    }
                }
                let _ = s.write_all(bytes);
                if hold {
                    std::thread::sleep(Duration::from_secs(3));
                }
            });
        }
    });
    port
}

#[test]
fn broken_upstream_responses() {
    let big: &'static [u8] = Box::leak(
        format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\n\r\n", "a".repeat(9000))
            .into_bytes()
            .into_boxed_slice(),
    );
    let too_big = raw_backend(big, false);
    let short = raw_backend(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this",
        false,
    );
    let invalid = raw_backend(b"HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n", false);
    let p = Prefix::new("proxy-broken");
    let g = start(&p, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port};
                location /big/ {{ proxy_pass http://127.0.0.1:{too_big}; }}
                location /short/ {{ proxy_pass http://127.0.0.1:{short}; }}
                location /inv/ {{ proxy_pass http://127.0.0.1:{invalid}; }}
            }}"
        )
    });
    let r = get(g.port, "GET /big/ HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(r.status, 502);
    assert!(
        g.server.logged(
            "upstream sent too big header while reading response header from upstream",
            Duration::from_secs(5)
        ),
        "{}",
        g.log()
    );
    let r = get(g.port, "GET /inv/ HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(r.status, 502);
    assert!(g
        .server
        .logged("upstream sent invalid header", Duration::from_secs(5)));
    // Premature close mid-body: the head went out, then the client's
    // connection is closed before the announced length.
    let mut c = Raw::connect(g.port);
    c.send(b"GET /short/ HTTP/1.1\r\nHost: h\r\n\r\n");
    let e = c.try_response(false);
    assert!(e.is_err(), "a truncated body must not look complete");
    assert!(g.server.logged(
        "upstream prematurely closed connection while reading upstream",
        Duration::from_secs(5)
    ));
}

#[test]
fn keepalive_reuses_upstream_connections() {
    let b = echo_backend();
    let p = Prefix::new("proxy-keepalive");
    let bp = b.port;
    let g = start(&p, move |port| {
        format!(
            "upstream app {{ server 127.0.0.1:{bp}; keepalive 4; }}
             server {{ listen 127.0.0.1:{port};
                location / {{ proxy_pass http://app; proxy_http_version 1.1;
                    proxy_set_header Connection \"\"; }} }}"
        )
    });
    for i in 0..5 {
        let r = get(g.port, &format!("GET /k{i} HTTP/1.1\r\nHost: h\r\n\r\n"));
        assert_eq!(r.text(), format!("/k{i}"));
    }
    // The start-up probe came first, on the same connection.
    let got: Vec<Got> = b.got.lock().unwrap().clone();
    let got: Vec<Got> = got.into_iter().filter(|g| g.line.contains("/k")).collect();
    assert_eq!(got.len(), 5);
    assert_eq!(
        got[4].on_conn,
        got[0].on_conn + 4,
        "one upstream connection: {got:?}"
    );
    assert_eq!(got[0].header("connection"), None);
    assert_eq!(got[0].header("host"), Some("app"));
}

#[test]
fn round_robin_weights_backup_and_failover_through_the_proxy() {
    let name = |n: &'static str| -> Reply { Arc::new(move |_g: &Got| ok(n)) };
    let a = backend(name("a"));
    let b = backend(name("b"));
    let c = backend(name("c"));
    let bk = backend(name("backup"));
    let dead = free_port();
    let p = Prefix::new("proxy-rr");
    let (ap, bp, cp, kp) = (a.port, b.port, c.port, bk.port);
    let g = start(&p, move |port| {
        format!(
            "upstream w {{ server 127.0.0.1:{ap} weight=5; server 127.0.0.1:{bp}; server 127.0.0.1:{cp}; }}
             upstream withbackup {{ server 127.0.0.1:{dead}; server 127.0.0.1:{kp} backup; }}
             upstream half {{ server 127.0.0.1:{dead}; server 127.0.0.1:{ap}; }}
             server {{ listen 127.0.0.1:{port};
                location /w/ {{ proxy_pass http://w; }}
                location /b/ {{ proxy_pass http://withbackup; }}
                location /h/ {{ proxy_pass http://half; }} }}"
        )
    });
    let seq: Vec<String> = (0..7)
        .map(|_| get(g.port, "GET /w/ HTTP/1.1\r\nHost: h\r\n\r\n").text())
        .collect();
    assert_eq!(seq, ["a", "a", "b", "a", "c", "a", "a"]);
    // The primary is down: the backup answers, every time.
    for _ in 0..3 {
        let r = get(g.port, "GET /b/ HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!((r.status, r.text().as_str()), (200, "backup"));
    }
    // One of two dead: proxy_next_upstream error makes every request work.
    for _ in 0..20 {
        let r = get(g.port, "GET /h/ HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!((r.status, r.text().as_str()), (200, "a"));
    }
    assert!(g.server.logged(
        "upstream server temporarily disabled",
        Duration::from_secs(5)
    ));
}

#[test]
fn a_slow_client_bounds_what_the_proxy_holds() {
    // 8 MiB from the upstream; the client reads nothing for a while.
    let body: &'static [u8] = Box::leak(
        {
            let mut v = b"HTTP/1.1 200 OK\r\nContent-Length: 8388608\r\n\r\n".to_vec();
            v.extend(std::iter::repeat_n(b'x', 8 << 20));
            v
        }
        .into_boxed_slice(),
    );
    let port_b = raw_backend(body, true);
    let p = Prefix::new("proxy-slow");
    let g = start(&p, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port};
                location / {{ proxy_pass http://127.0.0.1:{port_b}; }} }}"
        )
    });
    let worker = g.server.workers()[0];
    let fresh = util::rss_kib(worker);
    let mut c = Raw::connect(g.port);
    c.send(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    std::thread::sleep(Duration::from_millis(500));
    let held = util::rss_kib(worker);
    // Now read it all.
    let r = c.response(false);
    assert_eq!(r.body.len(), 8 << 20);
    // The worker never held the body: its RSS while the client was not
    // reading stayed far below 8 MiB above a fresh worker's.
    assert!(
        held.saturating_sub(fresh) < 4 * 1024,
        "worker RSS {held} KiB while the client waited ({fresh} KiB fresh)"
    );
}

#[test]
fn a_cached_connection_the_upstream_closed_is_retried_on_a_new_one() {
    // Each connection answers one request keep-alive, then closes on the
    // next one without answering (an upstream's keep-alive timeout racing
    // the proxy's reuse).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let bp = l.local_addr().unwrap().port();
    let conns = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let n = conns.clone();
    std::thread::spawn(move || {
        for s in l.incoming().take(64) {
            let Ok(mut s) = s else { continue };
            n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = Vec::new();
                for i in 0..2 {
                    while find(&buf, b"\r\n\r\n").is_none() {
                        let mut c = [0u8; 4096];
                        match s.read_some(&mut c) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&c[..n]),
                        }
                    }
                    let end = find(&buf, b"\r\n\r\n").unwrap();
                    buf.drain(..end + 4);
                    if i == 1 {
                        return;
                    }
                    s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .unwrap();
                }
            });
        }
    });
    let p = Prefix::new("proxy-stale");
    let g = start(&p, move |port| {
        format!(
            "upstream app {{ server 127.0.0.1:{bp}; keepalive 2; }}
             server {{ listen 127.0.0.1:{port};
                location / {{ proxy_pass http://app; proxy_http_version 1.1;
                    proxy_set_header Connection \"\"; }} }}"
        )
    });
    for _ in 0..4 {
        let r = get(g.port, "GET /s HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!((r.status, r.text().as_str()), (200, "ok"), "{}", g.log());
    }
    // The probe's connection, then one new connection per request.
    assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 5);
}

/// A WebSocket-like backend: answers the upgrade with 101, then echoes
/// every byte upper-cased until the client's end of stream, then closes.
fn upgrade_backend() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().take(16) {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = Vec::new();
                while find(&buf, b"\r\n\r\n").is_none() {
                    let mut c = [0u8; 4096];
                    match s.read_some(&mut c) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&c[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                if !head.contains("Upgrade: websocket") {
                    let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
                    return;
                }
                let end = find(&buf, b"\r\n\r\n").unwrap() + 4;
                let early: Vec<u8> = buf[end..].to_vec();
                s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n").unwrap();
                s.write_all(&early.to_ascii_uppercase()).unwrap();
                loop {
                    let mut c = [0u8; 4096];
                    match s.read_some(&mut c) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&c[..n].to_ascii_uppercase()).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    port
}

#[test]
fn upgraded_connections_are_tunnelled_both_ways() {
    let bp = upgrade_backend();
    let p = Prefix::new("proxy-upgrade");
    let g = start(&p, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port};
                location /ws {{ proxy_pass http://127.0.0.1:{bp}; proxy_http_version 1.1;
                    proxy_set_header Upgrade $http_upgrade;
                    proxy_set_header Connection \"upgrade\"; }}
                location /idle {{ proxy_pass http://127.0.0.1:{bp}; proxy_http_version 1.1;
                    proxy_set_header Upgrade $http_upgrade;
                    proxy_set_header Connection \"upgrade\"; proxy_read_timeout 300ms; }} }}"
        )
    });
    let mut c = Raw::connect(g.port);
    // A first frame right behind the request head.
    c.send(
        b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nearly;",
    );
    let mut all = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while find(&all, b"EARLY;").is_none() && Instant::now() < deadline {
        let mut chunk = [0u8; 4096];
        let n = c.s.read_some(&mut chunk).unwrap();
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&all));
        all.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&all).into_owned();
    assert!(
        text.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{text}"
    );
    assert!(text.contains("\r\nUpgrade: websocket\r\n"), "{text}");
    assert!(text.contains("\r\nConnection: upgrade\r\n"), "{text}");
    assert!(!text.contains("Content-Length"), "{text}");
    for msg in ["ping", "second message"] {
        c.send(msg.as_bytes());
        let mut got = Vec::new();
        while got.len() < msg.len() {
            let mut chunk = [0u8; 4096];
            let n = c.s.read_some(&mut chunk).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(got, msg.to_ascii_uppercase().as_bytes());
    }
    // The client's end of stream reaches the backend, which closes: so
    // does the proxy.
    c.shutdown_write();
    assert!(c.closed_within(Duration::from_secs(5)));
    // An idle tunnel ends after proxy_read_timeout.
    let mut c = Raw::connect(g.port);
    c.send(b"GET /idle HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
    assert!(c.closed_within(Duration::from_secs(5)));
    assert!(g.server.logged(
        "upstream timed out (110: Connection timed out) while proxying upgraded connection",
        Duration::from_secs(5)
    ));
}

#[test]
fn expect_100_continue_is_answered_by_the_proxy() {
    let b = echo_backend();
    let bp = b.port;
    let p = Prefix::new("proxy-expect");
    let g = start(&p, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port};
                location / {{ proxy_pass http://127.0.0.1:{bp}; }} }}"
        )
    });
    let mut c = Raw::connect(g.port);
    c.send(b"POST /e HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.status, 100);
    c.send(b"body");
    let r = c.response(false);
    assert_eq!((r.status, r.text().as_str()), (200, "/e"));
    let got = b.got.lock().unwrap().last().cloned().unwrap();
    assert_eq!(got.body, b"body");
    assert_eq!(got.header("expect"), None, "Expect is not passed upstream");
}

#[test]
fn a_client_that_goes_away_closes_its_upstream_request() {
    // The backend never answers; it reports when its connection closes.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let bp = l.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        for s in l.incoming().take(8) {
            let Ok(mut s) = s else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut buf = Vec::new();
                loop {
                    let mut c = [0u8; 4096];
                    match s.read_some(&mut c) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&c[..n]),
                    }
                }
                if find(&buf, b"GET /wait").is_some() {
                    let _ = tx.send(());
                }
            });
        }
    });
    let p = Prefix::new("proxy-abort");
    let g = start(&p, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port};
                location /wait {{ proxy_pass http://127.0.0.1:{bp}; proxy_read_timeout 30s; }} }}"
        )
    });
    let mut c = Raw::connect(g.port);
    c.send(b"GET /wait HTTP/1.1\r\nHost: h\r\n\r\n");
    std::thread::sleep(Duration::from_millis(200));
    drop(c);
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_ok(),
        "the upstream connection was not closed: {}",
        g.log()
    );
    assert!(g.server.logged(
        "epoll_wait() reported that client prematurely closed connection, so upstream connection is closed too while reading response header from upstream",
        Duration::from_secs(5)
    ), "{}", g.log());
}

#[test]
fn next_upstream_on_statuses_intercept_errors_and_upstream_variables() {
    let name = |n: &'static str, status: u16| -> Reply {
        Arc::new(move |_g: &Got| {
            format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nX-Name: {n}\r\n\r\n{n}",
                n.len()
            )
            .into_bytes()
        })
    };
    let bad = backend(name("bad", 500));
    let good = backend(name("good", 200));
    let missing = backend(name("missing", 404));
    let p = Prefix::new("proxy-next");
    let (bp, gp, mp) = (bad.port, good.port, missing.port);
    let g = start(&p, move |port| {
        format!(
            "log_format up '$request_uri $status ua=$upstream_addr us=$upstream_status uh=$upstream_http_x_name ub=$upstream_bytes_received';
             access_log logs/up.log up;
             upstream pair {{ server 127.0.0.1:{bp}; server 127.0.0.1:{gp}; }}
             upstream badonly {{ server 127.0.0.1:{bp}; server 127.0.0.1:{bp}; }}
             server {{ listen 127.0.0.1:{port};
                location /n/ {{ proxy_pass http://pair; proxy_next_upstream error timeout http_500; }}
                location /t/ {{ proxy_pass http://badonly; proxy_next_upstream http_500; proxy_next_upstream_tries 1; }}
                location /i/ {{ proxy_pass http://127.0.0.1:{mp}; proxy_intercept_errors on;
                    error_page 404 = /own404; }}
                location /p/ {{ proxy_pass http://127.0.0.1:{mp}; }}
                location = /own404 {{ return 200 own; }} }}"
        )
    });
    // Round robin starts with `bad`: its 500 sends the request on.
    for _ in 0..4 {
        let r = get(g.port, "GET /n/ HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!((r.status, r.text().as_str()), (200, "good"));
    }
    // One try only: the 500 is passed on as it is.
    let r = get(g.port, "GET /t/ HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (500, "bad"));
    let r = get(g.port, "GET /i/ HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "own"));
    let r = get(g.port, "GET /p/ HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (404, "missing"));
    let log = p.path("logs/up.log");
    let want = [
        format!("/n/ 200 ua=127.0.0.1:{bp}, 127.0.0.1:{gp} us=500, 200 uh=good ub="),
        format!("/t/ 500 ua=127.0.0.1:{bp} us=500 uh=bad ub="),
        format!("/p/ 404 ua=127.0.0.1:{mp} us=404 uh=missing ub="),
    ];
    assert!(
        util::wait_for(Duration::from_secs(5), || {
            let t = std::fs::read_to_string(&log).unwrap_or_default();
            want.iter().all(|w| t.contains(w.as_str()))
        }),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[test]
fn fail_timeout_brings_a_failed_server_back() {
    let a = backend(Arc::new(|_g: &Got| ok("a")));
    // A port with nothing on it yet.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let later = l.local_addr().unwrap().port();
    drop(l);
    let p = Prefix::new("proxy-failtimeout");
    let ap = a.port;
    let g = start(&p, move |port| {
        format!(
            "upstream u {{ server 127.0.0.1:{later} max_fails=1 fail_timeout=1s; server 127.0.0.1:{ap}; }}
             server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://u; }} }}"
        )
    });
    for _ in 0..4 {
        let r = get(g.port, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!((r.status, r.text().as_str()), (200, "a"));
    }
    assert!(g.server.logged(
        "upstream server temporarily disabled",
        Duration::from_secs(5)
    ));
    // The server comes up; after fail_timeout it is tried again and used.
    let Ok(l) = TcpListener::bind(("127.0.0.1", later)) else {
        eprintln!("port {later} was taken meanwhile: skipping the second half");
        return;
    };
    std::thread::spawn(move || {
        for s in l.incoming().take(64) {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = s.read_some(&mut buf);
                let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\nback");
            });
        }
    });
    // nginx compares whole seconds: `now - checked > fail_timeout`.
    std::thread::sleep(Duration::from_millis(2100));
    let answers: Vec<String> = (0..6)
        .map(|_| get(g.port, "GET / HTTP/1.1\r\nHost: h\r\n\r\n").text())
        .collect();
    assert!(answers.iter().any(|a| a == "back"), "{answers:?}");
    assert!(answers.iter().any(|a| a == "a"), "{answers:?}");
}

#[test]
fn a_reload_finishes_requests_in_flight() {
    // The backend answers after 600 ms.
    let b = backend(Arc::new(|_g: &Got| {
        std::thread::sleep(Duration::from_millis(600));
        ok("slow")
    }));
    let bp = b.port;
    let p = Prefix::new("proxy-reload");
    let g = start(&p, move |port| {
        format!(
            "upstream u {{ server 127.0.0.1:{bp}; keepalive 4; }}
             server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://u;
                proxy_http_version 1.1; proxy_set_header Connection \"\"; }} }}"
        )
    });
    let port = g.port;
    let clients: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || get(port, &format!("GET /r{i} HTTP/1.1\r\nHost: h\r\n\r\n")))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let o = g.server.signal("reload");
    assert!(o.status.success());
    for c in clients {
        let r = c.join().unwrap();
        assert_eq!((r.status, r.text().as_str()), (200, "slow"));
    }
    // The old worker left; the new one proxies.
    let r = get(g.port, "GET /after HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(r.text(), "slow");
}

#[test]
fn a_backend_killed_under_load_fails_no_request() {
    let a = backend(Arc::new(|_g: &Got| ok("a")));
    let b = backend(Arc::new(|_g: &Got| {
        std::thread::sleep(Duration::from_millis(2));
        ok("b")
    }));
    let p = Prefix::new("proxy-kill");
    let (ap, bp) = (a.port, b.port);
    let g = start(&p, move |port| {
        format!(
            "upstream u {{ server 127.0.0.1:{ap}; server 127.0.0.1:{bp}; }}
             server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://u;
                proxy_next_upstream error timeout; }} }}"
        )
    });
    let port = g.port;
    // Four clients: 30 requests each, then b is killed, then 30 more.
    let killed = Arc::new(std::sync::Barrier::new(5));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let killed = killed.clone();
            std::thread::spawn(move || {
                let mut bad = Vec::new();
                for i in 0..60 {
                    if i == 30 {
                        killed.wait();
                        killed.wait();
                    }
                    let mut c = Raw::connect(port);
                    c.send(format!("GET /k{i} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
                    match c.try_response(false) {
                        Ok(Some(r)) if r.status == 200 => {}
                        other => bad.push(format!("{other:?}")),
                    }
                }
                bad
            })
        })
        .collect();
    killed.wait();
    drop(b);
    killed.wait();
    let failed: Vec<String> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    // The dead backend was met, and the requests went on to the other.
    let log = g.log();
    assert!(
        log.contains("(111: Connection refused) while connecting to upstream")
            || log.contains("upstream prematurely closed connection")
            || log.contains("(104: Connection reset by peer)"),
        "{log}"
    );
}

#[test]
fn proxy_request_buffering_off_streams_the_body() {
    let b = echo_backend();
    let bp = b.port;
    let p = Prefix::new("proxy-stream-body");
    let g = start(&p, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port};
                location / {{ proxy_pass http://127.0.0.1:{bp}; proxy_request_buffering off;
                    client_max_body_size 0; }} }}"
        )
    });
    let body: Vec<u8> = (0..3 << 20).map(|i: u32| b'a' + (i % 26) as u8).collect();
    let mut c = Raw::connect(g.port);
    c.send(
        format!(
            "POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    // Sent in pieces, as a client uploading would.
    for piece in body.chunks(64 * 1024) {
        c.send(piece);
    }
    let r = c.response(false);
    assert_eq!((r.status, r.text().as_str()), (200, "/up"));
    let got = b.got.lock().unwrap().last().cloned().unwrap();
    assert_eq!(got.header("content-length"), Some("3145728"));
    assert!(got.body == body, "the body arrived changed");
}
