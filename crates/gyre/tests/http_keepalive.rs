//! Keep-alive end to end with the real binary over raw sockets: several
//! requests per connection, `Connection: close`, HTTP/1.0, keepalive_requests,
//! keepalive_timeout, and pipelining.
#![allow(clippy::unwrap_used)]

mod util;

use std::time::{Duration, Instant};

use util::http::{start_one_server, Running};
use util::Prefix;

fn fixture(name: &str, extra: &str) -> (Running, Prefix) {
    let p = Prefix::new(name);
    p.write("html/index.html", "ka index\n");
    for (f, body) in [
        ("a.txt", "AAAA\n"),
        ("b.txt", "BBBBBBBB\n"),
        ("c.txt", "C\n"),
    ] {
        p.write(&format!("html/{f}"), body);
    }
    let r = start_one_server(&p, extra);
    (r, p)
}

#[test]
fn several_requests_on_one_connection() {
    let (r, _p) = fixture("ka-many", "");
    let mut c = r.raw();
    for i in 0..10 {
        let (path, body) = [
            ("/a.txt", "AAAA\n"),
            ("/b.txt", "BBBBBBBB\n"),
            ("/", "ka index\n"),
        ][i % 3];
        c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let resp = c.response(false);
        assert_eq!(
            (resp.status, resp.text().as_str()),
            (200, body),
            "request {i}"
        );
        assert_eq!(resp.header("connection"), Some("keep-alive"), "request {i}");
    }
    // A 404 keeps the connection too.
    c.send(b"GET /missing HTTP/1.1\r\nHost: t\r\n\r\n");
    let resp = c.response(false);
    assert_eq!(resp.status, 404);
    assert_eq!(resp.header("connection"), Some("keep-alive"));
    c.send(b"GET /c.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response(false).text(), "C\n");
    assert!(!c.closed_within(Duration::from_millis(200)), "still open");
}

#[test]
fn connection_close_is_honoured() {
    let (r, _p) = fixture("ka-close", "");
    let mut c = r.raw();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let resp = c.response(false);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("connection"), Some("close"));
    assert!(c.closed_within(Duration::from_secs(3)), "server closes");
    assert!(c.buf.is_empty(), "nothing after the response");
    // Case-insensitive token.
    let mut c = r.raw();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: CLOSE\r\n\r\n");
    assert_eq!(c.response(false).header("connection"), Some("close"));
    assert!(c.closed_within(Duration::from_secs(3)));
}

#[test]
fn http10_closes_by_default_and_keeps_alive_on_request() {
    let (r, _p) = fixture("ka-10", "");
    let mut c = r.raw();
    c.send(b"GET /a.txt HTTP/1.0\r\n\r\n");
    let resp = c.response(false);
    assert_eq!((resp.status, resp.text().as_str()), (200, "AAAA\n"));
    assert_eq!(resp.header("connection"), Some("close"));
    assert!(c.closed_within(Duration::from_secs(3)), "HTTP/1.0 closes");

    let mut c = r.raw();
    for _ in 0..3 {
        c.send(b"GET /b.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let resp = c.response(false);
        assert_eq!((resp.status, resp.text().as_str()), (200, "BBBBBBBB\n"));
        assert_eq!(resp.header("connection"), Some("keep-alive"));
    }
    assert!(!c.closed_within(Duration::from_millis(200)), "kept alive");
    c.send(b"GET /b.txt HTTP/1.0\r\n\r\n");
    assert_eq!(c.response(false).header("connection"), Some("close"));
    assert!(c.closed_within(Duration::from_secs(3)));
}

#[test]
fn keepalive_requests_limits_requests_per_connection() {
    let (r, _p) = fixture("ka-reqs", "keepalive_requests 3;");
    let mut c = r.raw();
    for i in 1..=3 {
        c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        let resp = c.response(false);
        assert_eq!(resp.status, 200);
        let want = if i < 3 { "keep-alive" } else { "close" };
        assert_eq!(resp.header("connection"), Some(want), "response {i}");
    }
    assert!(
        c.closed_within(Duration::from_secs(3)),
        "closed after the 3rd"
    );
    // Pipelined: the 3rd is answered with close and the 4th is not answered.
    let mut c = r.raw();
    c.send(
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n"
            .repeat(4)
            .as_slice(),
    );
    for i in 1..=3 {
        let resp = c.response(false);
        let want = if i < 3 { "keep-alive" } else { "close" };
        assert_eq!(resp.header("connection"), Some(want), "response {i}");
    }
    assert!(c.closed_within(Duration::from_secs(3)));
    assert!(c.buf.is_empty(), "no 4th response: {:?}", c.buf);
}

#[test]
fn keepalive_timeout_closes_an_idle_connection() {
    let (r, _p) = fixture("ka-timeout", "keepalive_timeout 1s;");
    let mut c = r.raw();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let resp = c.response(false);
    assert_eq!(resp.header("connection"), Some("keep-alive"));
    let t = Instant::now();
    assert!(
        !c.closed_within(Duration::from_millis(500)),
        "closed before half the timeout"
    );
    assert!(
        c.closed_within(Duration::from_millis(2500)),
        "still open {:?} after the response",
        t.elapsed()
    );
    assert!(c.buf.is_empty(), "no response to nothing: {:?}", c.buf);
    // A connection that keeps talking is not closed.
    let mut c = r.raw();
    for _ in 0..4 {
        c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.response(false).status, 200);
        std::thread::sleep(Duration::from_millis(400));
    }
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response(false).status, 200);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let (r, _p) = fixture("ka-pipe", "");
    let mut c = r.raw();
    c.send(
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /c.txt HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    for body in ["AAAA\n", "BBBBBBBB\n", "C\n"] {
        let resp = c.response(false);
        assert_eq!((resp.status, resp.text().as_str()), (200, body));
    }
    // Mixed: a HEAD (no body) and a 404 between, the last one closing.
    c.send(
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n\
          HEAD /b.txt HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /nope HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /c.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let a = c.response(false);
    assert_eq!(a.text(), "AAAA\n");
    let h = c.response(true);
    assert_eq!((h.status, h.header("content-length")), (200, Some("9")));
    assert_eq!(c.response(false).status, 404);
    let last = c.response(false);
    assert_eq!(
        (last.text().as_str(), last.header("connection")),
        ("C\n", Some("close"))
    );
    assert!(c.closed_within(Duration::from_secs(3)));
    assert!(c.buf.is_empty(), "{:?}", c.buf);

    // Many small pipelined requests in one write, across the read buffer.
    let mut c = r.raw();
    let n = 200;
    c.send(
        b"GET /c.txt HTTP/1.1\r\nHost: t\r\n\r\n"
            .repeat(n)
            .as_slice(),
    );
    for i in 0..n {
        let resp = c.response(false);
        assert_eq!((resp.status, resp.text().as_str()), (200, "C\n"), "#{i}");
    }
}

#[test]
fn keepalive_settings_per_location() {
    let (r, p) = fixture(
        "ka-loc",
        "location /short/ { keepalive_timeout 1s; }
         location /few/ { keepalive_requests 2; }",
    );
    p.write("html/short/s.txt", "short\n");
    p.write("html/few/f.txt", "few\n");
    let mut wrong = Vec::new();

    let mut c = r.raw();
    c.send(b"GET /short/s.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response(false).text(), "short\n");
    if !c.closed_within(Duration::from_secs(3)) {
        wrong.push("location keepalive_timeout 1s: connection still open after 3 s".to_string());
    }
    // The shorter timeout of a later request counts, not the 75 s of the
    // one before it on the connection.
    let mut c = r.raw();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response(false).text(), "AAAA\n");
    c.send(b"GET /short/s.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response(false).text(), "short\n");
    if !c.closed_within(Duration::from_secs(3)) {
        wrong.push("keepalive_timeout 1s after a 75 s request: still open after 3 s".to_string());
    }

    let mut c = r.raw();
    for i in 1..=2 {
        c.send(b"GET /few/f.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        let resp = c.response(false);
        let want = if i < 2 { "keep-alive" } else { "close" };
        if resp.header("connection") != Some(want) {
            wrong.push(format!(
                "location keepalive_requests 2: response {i} has Connection: {:?}, want {want}",
                resp.header("connection")
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
