//! Malformed and hostile input end to end with the real binary, over raw
//! sockets: nginx's error statuses and pages, body size limits, the header
//! timeout, and slow clients not starving a normal one. nginx 1.22 is the
//! reference.
#![allow(clippy::unwrap_used)]

mod util;

use std::time::{Duration, Instant};

use util::http::{start_one_server, Raw, Running};
use util::Prefix;

fn fixture(name: &str, extra: &str) -> (Running, Prefix) {
    let p = Prefix::new(name);
    p.write("html/index.html", "errors index\n");
    let r = start_one_server(&p, extra);
    (r, p)
}

/// Sends `req`, expects one response with `status` (and `Connection:
/// close`), then the server closing.
fn expect_error_and_close(r: &Running, what: &str, req: &[u8], status: u16) -> String {
    let mut c = r.raw();
    c.send(req);
    let resp = match c.try_response(false) {
        Ok(Some(resp)) => resp,
        other => panic!("{what}: no response ({other:?}); got {:?}", c.buf),
    };
    assert_eq!(resp.status, status, "{what}: {}", resp.head);
    assert_eq!(resp.header("connection"), Some("close"), "{what}");
    assert_eq!(resp.header("content-type"), Some("text/html"), "{what}");
    assert!(
        c.closed_within(Duration::from_secs(3)),
        "{what}: connection left open"
    );
    resp.text()
}

#[test]
fn malformed_requests_get_nginx_statuses_and_close() {
    let (r, _p) = fixture("err-malformed", "");
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(9000));
    let big_header = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "a".repeat(9000)
    );
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "garbage",
            b"GARBAGE\r\n\r\n".to_vec(),
            400,
            "<center><h1>400 Bad Request</h1></center>",
        ),
        (
            "TLS ClientHello on a plain port",
            b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            "lower-case method",
            b"get / HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            "request line over 8k",
            long_uri.into_bytes(),
            414,
            "<center><h1>414 Request-URI Too Large</h1></center>",
        ),
        (
            "header line over 8k",
            big_header.into_bytes(),
            400,
            "<center>Request Header Or Cookie Too Large</center>",
        ),
        (
            "HTTP/1.1 without Host",
            b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            "two Hosts",
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            "bad Host",
            b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            "HTTP/2.0 request line",
            b"GET / HTTP/2.0\r\nHost: t\r\n\r\n".to_vec(),
            505,
            "<center><h1>505 HTTP Version Not Supported</h1></center>",
        ),
        (
            "Content-Length and Transfer-Encoding",
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                .to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            "two Content-Lengths",
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            "bad Content-Length",
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5x\r\n\r\nhello".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            "unknown Transfer-Encoding",
            b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n".to_vec(),
            501,
            "501 Not Implemented",
        ),
        (
            "bad chunk size",
            b"GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            // nginx's static module refuses the method before reading the
            // body, then closes as the body cannot be discarded (checked
            // against nginx 1.22 by tests/http_differential.rs).
            "bad chunk size on a POST",
            b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
            405,
            "405 Not Allowed",
        ),
    ];
    for (what, req, status, page) in cases {
        let text = expect_error_and_close(&r, what, &req, status);
        assert!(text.contains(page), "{what}: page {text:?}");
        assert!(
            text.contains(concat!(
                "<hr><center>gyre/",
                env!("CARGO_PKG_VERSION"),
                "</center>"
            )),
            "{what}"
        );
    }
    // Still serving.
    let mut c = r.raw();
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response(false).text(), "errors index\n");
}

#[test]
fn headers_over_all_large_buffers_are_refused() {
    let (r, _p) = fixture("err-manyhdr", "");
    // Each line fits a large buffer (8k) but together they exceed 4 x 8k.
    let mut req = String::from("GET / HTTP/1.1\r\nHost: t\r\n");
    for i in 0..6 {
        req.push_str(&format!("X-H{i}: {}\r\n", "b".repeat(7000)));
    }
    req.push_str("\r\n");
    let text = expect_error_and_close(&r, "42k of headers", req.as_bytes(), 400);
    assert!(
        text.contains("Request Header Or Cookie Too Large"),
        "{text}"
    );
}

#[test]
fn body_over_client_max_body_size_is_413() {
    let (r, _p) = fixture(
        "err-413",
        "client_max_body_size 1k;
         location = /ok { return 200 \"ok\"; }",
    );
    // Refused from the Content-Length alone, before the body is sent.
    let mut c = r.raw();
    c.send(b"POST /ok HTTP/1.1\r\nHost: t\r\nContent-Length: 2000\r\n\r\n");
    let resp = c.response(false);
    assert_eq!(resp.status, 413, "{}", resp.head);
    assert!(resp
        .text()
        .contains("<center><h1>413 Request Entity Too Large</h1></center>"));
    assert_eq!(resp.header("connection"), Some("close"));
    // The server lingers for the body, then closes once it has it.
    let _ = c.try_send(&[b'x'; 2000]);
    c.shutdown_write();
    assert!(c.closed_within(Duration::from_secs(3)));

    // Exactly the limit is fine; the body is discarded and the connection
    // goes on.
    let mut c = r.raw();
    let mut req = b"POST /ok HTTP/1.1\r\nHost: t\r\nContent-Length: 1024\r\n\r\n".to_vec();
    req.extend_from_slice(&[b'y'; 1024]);
    req.extend_from_slice(b"GET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
    c.send(&req);
    assert_eq!(c.response(false).text(), "ok");
    assert_eq!(c.response(false).text(), "ok");

    // Chunked: refused once the decoded body passes the limit.
    let mut c = r.raw();
    let mut req = b"POST /ok HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    req.extend_from_slice(b"800\r\n");
    req.extend_from_slice(&[b'z'; 0x800]);
    req.extend_from_slice(b"\r\n0\r\n\r\n");
    let _ = c.try_send(&req);
    let resp = c.response(false);
    assert!(
        resp.status == 413 || resp.status == 200,
        "chunked over the limit: {}",
        resp.head
    );
}

#[test]
fn client_max_body_size_per_location() {
    let (r, _p) = fixture(
        "err-413-loc",
        "client_max_body_size 1k;
         location /big/ { client_max_body_size 10k; return 200 \"big ok\"; }
         location /small/ { client_max_body_size 100; return 200 \"small ok\"; }",
    );
    let mut wrong = Vec::new();
    for (path, len, want) in [
        ("/big/x", 2000, 200),
        ("/small/x", 500, 413),
        ("/other", 2000, 413),
    ] {
        let mut c = r.raw();
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        )
        .into_bytes();
        req.extend(std::iter::repeat_n(b'q', len));
        let _ = c.try_send(&req);
        let got = c.response(false).status;
        if got != want {
            wrong.push(format!(
                "POST {path} with {len} bytes: want {want}, got {got}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn client_header_timeout_closes_without_a_response() {
    let (r, _p) = fixture("err-hdr-timeout", "client_header_timeout 1s;");
    // Half a head, and a connection that sends nothing at all.
    let mut partial = r.raw();
    partial.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
    let mut silent = r.raw();
    let t = Instant::now();
    assert!(
        !partial.closed_within(Duration::from_millis(500)),
        "closed well before client_header_timeout"
    );
    assert!(
        partial.closed_within(Duration::from_millis(2500)),
        "partial head still open after {:?}",
        t.elapsed()
    );
    assert!(
        partial.buf.is_empty(),
        "nginx sends nothing: {:?}",
        partial.buf
    );
    assert!(
        silent.closed_within(Duration::from_secs(2)),
        "silent connection still open after {:?}",
        t.elapsed()
    );
    assert!(silent.buf.is_empty(), "{:?}", silent.buf);
}

#[test]
fn slow_clients_do_not_starve_a_normal_one() {
    let (r, _p) = fixture("err-slowloris", "");
    let port = r.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let trickler = std::thread::spawn(move || {
        let mut slow: Vec<Raw> = (0..50).map(|_| Raw::connect(port)).collect();
        for c in &mut slow {
            c.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
        }
        let end = Instant::now() + Duration::from_secs(3);
        let mut rounds = 0;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < end {
            for c in &mut slow {
                // One byte at a time.
                let _ = c.try_send(b"X");
            }
            rounds += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        (slow.len(), rounds)
    });
    std::thread::sleep(Duration::from_millis(200));
    let mut worst = Duration::ZERO;
    for _ in 0..10 {
        let t = Instant::now();
        let mut c = Raw::connect(port);
        c.s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let resp = c.response(false);
        assert_eq!(resp.text(), "errors index\n");
        worst = worst.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (n, rounds) = trickler.join().unwrap();
    assert_eq!(n, 50);
    assert!(
        rounds >= 5,
        "the slow clients kept trickling ({rounds} rounds)"
    );
    assert!(
        worst < Duration::from_secs(1),
        "a normal request took {worst:?}"
    );
}
