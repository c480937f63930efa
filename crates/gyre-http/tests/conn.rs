//! Connection state machine behaviour, end to end through the public API.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use gyre_http::response::error_page;
use gyre_http::{
    Body, BodyKind, Connection, Disposition, Event, HttpSettings, LingeringClose, Response, Segment,
};

const GET: &[u8] =
    b"GET / HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t/1\r\nReferer: http://r/\r\n\r\n";

fn error_response(status: u16, wire: &str, keep_alive: bool) -> Vec<u8> {
    let page = error_page(status).unwrap();
    let mut v = format!(
        "HTTP/1.1 {wire}\r\nServer: gyre\r\nDate: {DATE}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        page.len(),
        if keep_alive { "keep-alive" } else { "close" }
    )
    .into_bytes();
    v.extend_from_slice(page);
    v
}

#[test]
fn simple_get() {
    let r = run(GET);
    assert_eq!(
        r.text(),
        format!("HTTP/1.1 200 OK\r\nServer: gyre\r\nDate: {DATE}\r\nContent-Type: text/html\r\nContent-Length: 6\r\nConnection: keep-alive\r\n\r\nhello\n")
    );
    assert_eq!(r.disposition, Disposition::Open);
    let req = &r.requests[0];
    assert_eq!(req.host(), Some("example.com"));
    assert_eq!(req.method(), "GET");
    assert!(req.keep_alive);
    assert_eq!(r.logs.len(), 1);
    let l = &r.logs[0];
    assert_eq!(l.request_line, b"GET / HTTP/1.1");
    assert_eq!((l.status, l.body_bytes_sent), (200, 6));
    assert_eq!(l.bytes_sent, r.out.len() as u64);
    assert_eq!(l.referer.as_deref(), Some(&b"http://r/"[..]));
    assert_eq!(l.user_agent.as_deref(), Some(&b"t/1"[..]));
}

#[test]
fn byte_by_byte_and_random_splits_agree() {
    let input: Vec<u8> = [
        GET,
        b"\r\nGET /a/../index.html?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
        b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;e=1\r\nabc\r\n0\r\nT: v\r\n\r\n",
        b"HEAD /file HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        b"GET /nope HTTP/1.1\nHost: x\n\n",
    ]
    .concat();
    let whole = run(&input);
    assert_eq!(whole.statuses(), vec![200, 200, 405, 200, 404]);
    let one = bytewise(&input);
    assert_eq!(one.requests, whole.requests);
    assert_eq!(one.out, whole.out);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..200 {
        let chunks = random_splits(&input, &mut rng);
        let r = run_with(HttpSettings::default(), &chunks, false);
        assert_eq!(r.requests, whole.requests);
        assert_eq!(r.out, whole.out);
    }
}

#[test]
fn pipelined_three_in_one_output() {
    let input = [
        GET,
        b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /file HTTP/1.1\r\nHost: x\r\n\r\n",
    ]
    .concat();
    let mut c = Connection::new(HttpSettings::default(), 0);
    c.on_read(&input, 1);
    let mut n = 0;
    while let Some(Event::Request(r)) = c.poll(1, DATE) {
        c.respond(handler(&r), 1, DATE).unwrap();
        n += 1;
    }
    assert_eq!(n, 3);
    let out = c.take_output();
    // Head+body, head+body, head, then the file: one batch, in order.
    assert_eq!(out.segments.len(), 2);
    let Segment::Bytes(b) = &out.segments[0] else {
        panic!()
    };
    let t = String::from_utf8_lossy(b);
    let a = t.find("200 OK").unwrap();
    let b2 = t.find("404 Not Found").unwrap();
    let c2 = t.rfind("200 OK").unwrap();
    assert!(a < b2 && b2 < c2);
    assert!(t.ends_with("Connection: keep-alive\r\n\r\n"));
    assert_eq!(
        out.segments[1],
        Segment::File {
            token: 7,
            offset: 0,
            len: 100
        }
    );
    assert!(c.is_idle());
    assert_eq!(c.take_logs().len(), 3);
}

#[test]
fn error_statuses_and_pages() {
    let big_line = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(9000));
    let big_hdr = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n",
        "b".repeat(9000)
    );
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"GET / HTTP/1.1\r\n\r\n".to_vec(), 400, "400 Bad Request"),
        (
            b"get / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            b"GET / HTTP/2.0\r\nHost: x\r\n\r\n".to_vec(),
            505,
            "505 HTTP Version Not Supported",
        ),
        (
            b"GET / HTTP/3\r\n\r\n".to_vec(),
            505,
            "505 HTTP Version Not Supported",
        ),
        (b"GET / HTTP/0.9\r\n\r\n".to_vec(), 400, "400 Bad Request"),
        (b"GET /\r\n\r\n".to_vec(), 400, "400 Bad Request"),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a..b\r\n\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            b"GET /%00 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            b"GET /.. HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            b"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            400,
            "400 Bad Request",
        ),
        (
            b"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            405,
            "405 Not Allowed",
        ),
        (
            b"CONNECT /x HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            405,
            "405 Not Allowed",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n".to_vec(),
            413,
            "413 Request Entity Too Large",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n".to_vec(),
            501,
            "501 Not Implemented",
        ),
        (big_line.into_bytes(), 414, "414 Request-URI Too Large"),
        (big_hdr.into_bytes(), 494, "400 Bad Request"),
    ];
    for (input, status, wire) in cases {
        for r in [run(&input), bytewise(&input)] {
            assert_eq!(
                r.out,
                error_response(status, wire, false),
                "{}",
                String::from_utf8_lossy(&input[..input.len().min(60)])
            );
            assert!(r.conn.wants_close());
            assert!(r.requests.is_empty());
            assert_eq!(r.logs.len(), 1);
            assert_eq!(r.logs[0].status, if status == 494 { 400 } else { status });
        }
    }
}

#[test]
fn handler_errors_keep_or_close() {
    let r = run(b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.out, error_response(404, "404 Not Found", true));
    assert_eq!(r.disposition, Disposition::Open);
    let r = run(b"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.out, error_response(405, "405 Not Allowed", true));
    // 500 from the handler closes, as nginx's special responses do.
    let mut c = Connection::new(HttpSettings::default(), 0);
    c.on_read(GET, 1);
    assert!(matches!(c.poll(1, DATE), Some(Event::Request(_))));
    c.respond(Response::error(500), 1, DATE).unwrap();
    assert_eq!(
        c.take_output().bytes(),
        error_response(500, "500 Internal Server Error", false)
    );
    assert_eq!(c.disposition(), Disposition::Close);
    assert!(c.respond(Response::error(500), 1, DATE).is_err());
}

#[test]
fn request_line_limit_boundary() {
    // Request line including CRLF exactly one large buffer: accepted.
    let mk = |total: usize| {
        let pre = "GET /";
        let post = " HTTP/1.1\r\n";
        format!(
            "{pre}{}{post}Host: x\r\n\r\n",
            "a".repeat(total - pre.len() - post.len())
        )
    };
    for (n, ok) in [
        (1024, true),
        (1025, true),
        (8191, true),
        (8192, true),
        (8193, false),
    ] {
        let r = run(mk(n).as_bytes());
        assert_eq!(r.statuses(), vec![if ok { 404 } else { 414 }], "{n}");
        let r = bytewise(mk(n).as_bytes());
        assert_eq!(r.statuses(), vec![if ok { 404 } else { 414 }], "{n}");
    }
    // An unterminated long line is refused as soon as it overflows.
    let r = run(format!("GET /{}", "a".repeat(9000)).as_bytes());
    assert_eq!(r.statuses(), vec![414]);
    // A bad byte wins over length.
    let r = run(format!("G\x01T /{}", "a".repeat(9000)).as_bytes());
    assert_eq!(r.statuses(), vec![400]);
}

#[test]
fn header_limits_boundary() {
    let line = |total: usize| format!("X: {}\r\n", "b".repeat(total - 5));
    for (n, ok) in [(8191, true), (8192, true), (8193, false)] {
        let input = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", line(n));
        let r = run(input.as_bytes());
        assert_eq!(r.statuses(), vec![if ok { 200 } else { 400 }], "{n}");
    }
    // Whole head across 4 large buffers: 32 lines of 1000 fit, 33 do not
    // (as measured against nginx 1.22).
    for (k, ok) in [(30, true), (32, true), (33, false), (40, false)] {
        let input = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", line(1000).repeat(k));
        let r = run(input.as_bytes());
        assert_eq!(r.statuses(), vec![if ok { 200 } else { 400 }], "{k}");
        if !ok {
            assert!(r.text().contains("Request Header Or Cookie Too Large"));
        }
    }
    // Smaller configured buffers.
    let st = HttpSettings {
        client_header_buffer_size: 64,
        large_header_buffers: 2,
        large_header_buffer_size: 128,
        ..Default::default()
    };
    let ok = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", line(128));
    assert_eq!(
        run_with(st.clone(), &[ok.as_bytes()], false).statuses(),
        vec![200]
    );
    let bad = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", line(129));
    assert_eq!(run_with(st, &[bad.as_bytes()], false).statuses(), vec![400]);
}

#[test]
fn body_size_limit_boundary() {
    let st = HttpSettings {
        client_max_body_size: 10,
        ..Default::default()
    };
    let ok = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789";
    assert_eq!(run_with(st.clone(), &[ok], false).statuses(), vec![200]);
    let bad = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n";
    let r = run_with(st.clone(), &[bad], false);
    assert_eq!(r.statuses(), vec![413]);
    // The body may still be coming: linger so the client reads the 413.
    assert_eq!(r.disposition, Disposition::Linger);
    // 0 disables the check.
    let st0 = HttpSettings {
        client_max_body_size: 0,
        ..Default::default()
    };
    assert_eq!(
        run_with(
            st0,
            &[b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n"],
            false
        )
        .statuses(),
        vec![200]
    );
}

#[test]
fn smuggling_cases() {
    let cases: &[(&[u8], u16)] = &[
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc", 501),
        (b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\nx", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\nx", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1 1\r\n\r\nx", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\t\r\n\r\nx", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length : 1\r\n\r\nx", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nFoo: a\r\n b\r\n\r\n", 400),
        // Accepted like nginx: trailing spaces, leading zeros, TE in caps.
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 01  \r\n\r\nx", 200),
        (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n", 200),
    ];
    for (input, status) in cases {
        let r = run(input);
        assert_eq!(
            r.statuses(),
            vec![*status],
            "{}",
            String::from_utf8_lossy(input)
        );
        if *status == 200 {
            assert!(r.conn.is_idle(), "{}", String::from_utf8_lossy(input));
        }
    }
}

#[test]
fn chunked_bodies_are_discarded_and_framed() {
    let body = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;name=val\r\nhello\r\n00A\r\n0123456789\r\n0\r\nTrailer-A: 1\r\nTrailer-B: 2\r\n\r\n";
    let input = [&body[..], GET].concat();
    let r = run(&input);
    assert_eq!(r.statuses(), vec![405, 200]);
    assert_eq!(r.requests[0].body, BodyKind::Chunked);
    // Bad chunk syntax arriving with the head: 400 (nginx discards the
    // body before answering).
    let r = run(b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.statuses(), vec![400]);
    assert!(r.conn.wants_close());
    // Arriving after the response: the connection just closes.
    let r = run_with(
        HttpSettings::default(),
        &[
            b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"zz\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
        ],
        false,
    );
    assert_eq!(r.statuses(), vec![200]);
    assert_eq!(r.disposition, Disposition::Close);
}

fn collect(input: &[u8], st: HttpSettings) -> (Vec<u8>, Vec<Event>, Connection) {
    // The head arrives first, the body after the handler chose to collect.
    let split = input.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut c = Connection::new(st, 0);
    c.on_read(&input[..split], 1);
    let Some(Event::Request(_)) = c.poll(1, DATE) else {
        panic!("no request")
    };
    c.collect_body();
    c.on_read(&input[split..], 1);
    let mut body = Vec::new();
    let mut evs = Vec::new();
    while let Some(ev) = c.poll(1, DATE) {
        match ev {
            Event::Body(b) => body.extend(b),
            e => evs.push(e),
        }
    }
    (body, evs, c)
}

#[test]
fn collected_bodies() {
    let (b, evs, mut c) = collect(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", HttpSettings::default());
    assert_eq!(b, b"abcde");
    assert_eq!(evs, vec![Event::BodyEnd]);
    assert!(c
        .take_output()
        .bytes()
        .starts_with(b"HTTP/1.1 100 Continue\r\n\r\n"));
    c.respond(Response::new(204), 2, DATE).unwrap();
    assert!(c.is_idle());
    let (b, evs, _) = collect(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcdGET",
        HttpSettings::default(),
    );
    assert_eq!((b.as_slice(), evs), (&b"abcd"[..], vec![Event::BodyEnd]));
    // Chunked bodies over client_max_body_size are refused while reading.
    let st = HttpSettings {
        client_max_body_size: 4,
        ..Default::default()
    };
    let (_, evs, mut c) = collect(
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n0\r\n\r\n",
        st.clone(),
    );
    assert_eq!(evs, vec![Event::BodyError(413)]);
    assert!(String::from_utf8_lossy(&c.take_output().bytes())
        .starts_with("HTTP/1.1 413 Request Entity Too Large\r\n"));
    let (b, evs, _) = collect(
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n",
        st,
    );
    assert_eq!((b.as_slice(), evs), (&b"abcd"[..], vec![Event::BodyEnd]));
    let (_, evs, c) = collect(
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nq\r\n",
        HttpSettings::default(),
    );
    assert_eq!(evs, vec![Event::BodyError(400)]);
    assert!(c.wants_close());
}

#[test]
fn http10_and_connection_header() {
    let r = run(b"GET / HTTP/1.0\r\n\r\n");
    assert!(r.text().contains("Connection: close\r\n"));
    assert_eq!(r.disposition, Disposition::Close);
    let r = run(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET / HTTP/1.0\r\n\r\n");
    assert_eq!(r.statuses(), vec![200, 200]);
    let t = r.text();
    let first = t.find("Connection: keep-alive").unwrap();
    assert!(t[first..].contains("Connection: close"));
    assert_eq!(r.disposition, Disposition::Close);
    let r = run(
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(r.statuses(), vec![200]);
    // Pipelined data after a close: linger so the client gets the answer.
    assert_eq!(r.disposition, Disposition::Linger);
    // Last Connection header wins (nginx).
    let r =
        run(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(r.disposition, Disposition::Open);
    // HTTP/1.2 is served as 1.1.
    assert_eq!(
        run(b"GET / HTTP/1.2\r\nHost: x\r\n\r\n").disposition,
        Disposition::Open
    );
}

#[test]
fn keepalive_requests_limit() {
    let st = HttpSettings {
        keepalive_requests: 3,
        ..Default::default()
    };
    let input = GET.repeat(4);
    let r = run_with(st, &[&input], false);
    assert_eq!(r.statuses(), vec![200, 200, 200]);
    let t = r.text();
    assert_eq!(t.matches("Connection: keep-alive").count(), 2);
    assert_eq!(t.matches("Connection: close").count(), 1);
    assert_eq!(r.disposition, Disposition::Linger);
    // keepalive_timeout 0 disables keep-alive.
    let st = HttpSettings {
        keepalive_timeout: 0,
        ..Default::default()
    };
    assert_eq!(run_with(st, &[GET], false).disposition, Disposition::Close);
}

#[test]
fn head_requests_get_length_without_body() {
    let r = run(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\nHEAD /file HTTP/1.1\r\nHost: x\r\n\r\n");
    let t = r.text();
    assert!(t.contains("Content-Length: 6\r\n"));
    assert!(t.contains("Content-Length: 100\r\n"));
    assert!(!t.contains("hello"));
    assert!(t.ends_with("\r\n\r\n"));
    assert_eq!(r.logs[0].body_bytes_sent, 0);
}

#[test]
fn absolute_form_and_hosts() {
    let r = run(b"GET http://Other.EXAMPLE:8080/a/../index.html?q HTTP/1.1\r\nHost: x\r\n\r\n");
    let q = &r.requests[0];
    assert_eq!(q.host(), Some("other.example"));
    assert_eq!(q.path(), b"/index.html");
    assert_eq!(q.query(), Some(&b"q"[..]));
    // 1.1 still needs a Host header (nginx).
    assert_eq!(run(b"GET http://x/ HTTP/1.1\r\n\r\n").statuses(), vec![400]);
    assert_eq!(
        run(b"GET http://u@x/ HTTP/1.1\r\nHost: x\r\n\r\n").statuses(),
        vec![400]
    );
    let r = run(b"GET / HTTP/1.1\r\nHost: WWW.Example.com.:80\r\n\r\n");
    assert_eq!(r.requests[0].host(), Some("www.example.com"));
    assert_eq!(
        run(b"GET / HTTP/1.1\r\nHost: \r\n\r\n").statuses(),
        vec![400]
    );
}

#[test]
fn request_accessors() {
    let r = run(b"GET /x%20y?a=%zz HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\nIf-None-Match: \"abc\"\r\nRange: bytes=0-1\r\nX-Multi: 1\r\nx-multi: 2\r\nFoo_bar: ignored\r\nNoColon\r\n\r\n");
    let q = &r.requests[0];
    assert_eq!(q.path_str(), Some("/x y"));
    assert_eq!(q.query(), Some(&b"a=%zz"[..]));
    assert_eq!(q.if_modified_since(), Some(784_111_777));
    assert_eq!(q.if_none_match(), Some(&b"\"abc\""[..]));
    assert_eq!(q.range(), Some(&b"bytes=0-1"[..]));
    assert_eq!(
        q.headers_named("X-MULTI").collect::<Vec<_>>(),
        vec![&b"1"[..], &b"2"[..]]
    );
    assert_eq!(q.header("Foo_bar"), None);
    assert_eq!(q.header("NoColon"), Some(&b""[..]));
}

#[test]
fn timeouts_are_deadlines() {
    let st = HttpSettings::default();
    // Fresh connection: client_header_timeout from accept.
    let mut c = Connection::new(st.clone(), 1000);
    assert_eq!(c.next_deadline(), Some(61_000));
    c.on_timeout(60_999);
    assert!(!c.wants_close());
    c.on_timeout(61_000);
    assert_eq!(c.disposition(), Disposition::Close);
    assert!(c.take_logs().is_empty());

    // Partial head: deadline counted from its first byte, not refreshed.
    let mut c = Connection::new(st.clone(), 0);
    c.on_read(b"GET / HT", 5000);
    assert_eq!(c.poll(5000, DATE), None);
    c.on_read(b"TP/1.1\r\n", 30_000);
    assert_eq!(c.poll(30_000, DATE), None);
    assert_eq!(c.next_deadline(), Some(65_000));
    c.on_timeout(65_000);
    assert_eq!(c.disposition(), Disposition::Close);
    assert!(c.take_output().is_empty());
    let logs = c.take_logs();
    assert_eq!(
        (logs[0].status, logs[0].request_line.as_slice()),
        (408, &b"GET / HTTP/1.1"[..])
    );

    // Idle keep-alive: keepalive_timeout after the response.
    let mut c = Connection::new(st.clone(), 0);
    c.on_read(GET, 10);
    let Some(Event::Request(r)) = c.poll(10, DATE) else {
        panic!()
    };
    c.respond(handler(&r), 20, DATE).unwrap();
    assert!(c.is_idle());
    assert_eq!(c.next_deadline(), Some(75_020));
    c.on_timeout(75_020);
    assert_eq!(c.disposition(), Disposition::Close);

    // Body discard: client_body_timeout between reads.
    let mut c = Connection::new(st.clone(), 0);
    c.on_read(
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab",
        10,
    );
    let Some(Event::Request(r)) = c.poll(10, DATE) else {
        panic!()
    };
    c.respond(handler(&r), 10, DATE).unwrap();
    assert_eq!(c.poll(10, DATE), None);
    assert_eq!(c.next_deadline(), Some(60_010));
    c.on_read(b"cd", 100);
    assert_eq!(c.poll(100, DATE), None);
    assert_eq!(c.next_deadline(), Some(60_100));
    c.on_read(b"efghij", 200);
    assert_eq!(c.poll(200, DATE), None);
    assert!(c.is_idle());

    // Awaiting a response: no deadline (send_timeout is the glue's).
    let mut c = Connection::new(st, 0);
    c.on_read(GET, 10);
    assert!(matches!(c.poll(10, DATE), Some(Event::Request(_))));
    assert_eq!(c.next_deadline(), None);
    assert!(!c.wants_read());
}

#[test]
fn deadlines_survive_clock_wrap() {
    let start = u64::MAX - 10;
    let mut c = Connection::new(HttpSettings::default(), start);
    let d = c.next_deadline().unwrap();
    assert_eq!(d, start.wrapping_add(60_000));
    c.on_timeout(start.wrapping_add(59_999));
    assert!(!c.wants_close());
    c.on_timeout(d);
    assert!(c.wants_close());
}

#[test]
fn lingering_close() {
    let mut c = Connection::new(HttpSettings::default(), 0);
    c.on_read(
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n",
        1,
    );
    assert_eq!(c.poll(1, DATE), None);
    assert_eq!(c.disposition(), Disposition::Linger);
    assert!(c.wants_read());
    c.start_lingering(10);
    assert_eq!(c.next_deadline(), Some(5010));
    c.on_read(&[0u8; 1000], 4000);
    assert_eq!(c.next_deadline(), Some(9000));
    for t in (8000..40_000).step_by(4000) {
        c.on_read(b"x", t);
    }
    assert_eq!(c.next_deadline(), Some(30_010));
    c.on_timeout(30_010);
    assert_eq!(c.disposition(), Disposition::Close);
    // EOF ends lingering at once.
    let mut c = Connection::new(HttpSettings::default(), 0);
    c.on_read(
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n",
        1,
    );
    c.poll(1, DATE);
    c.start_lingering(2);
    c.on_eof(3);
    assert_eq!(c.disposition(), Disposition::Close);
    // lingering_close off: plain close.
    let st = HttpSettings {
        lingering_close: LingeringClose::Off,
        ..Default::default()
    };
    let r = run_with(
        st,
        &[b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n"],
        false,
    );
    assert_eq!(r.disposition, Disposition::Close);
}

#[test]
fn eof_handling() {
    // EOF while idle: close, nothing logged.
    let r = run_with(HttpSettings::default(), &[], true);
    assert_eq!(r.disposition, Disposition::Close);
    assert!(r.logs.is_empty());
    // EOF in a partial head: close, 400 logged, nothing sent.
    let r = run_with(HttpSettings::default(), &[b"GET / HTTP/1.1\r\nHo"], true);
    assert_eq!(r.disposition, Disposition::Close);
    assert!(r.out.is_empty());
    assert_eq!(r.logs[0].status, 400);
    // Requests received before EOF are still answered.
    let r = run_with(HttpSettings::default(), &[&GET.repeat(2)], true);
    assert_eq!(r.statuses(), vec![200, 200]);
    assert_eq!(r.disposition, Disposition::Close);
}

#[test]
fn idle_connection_holds_no_buffers() {
    let mut c = Connection::new(HttpSettings::default(), 0);
    c.supply_buffer(Vec::with_capacity(4096));
    assert_eq!(c.buffered_capacity(), 4096);
    c.on_read(GET, 1);
    let Some(Event::Request(r)) = c.poll(1, DATE) else {
        panic!()
    };
    c.respond(handler(&r), 1, DATE).unwrap();
    let _ = c.take_output();
    assert!(c.is_idle());
    let buf = c.release_buffers().unwrap();
    assert!(buf.capacity() >= 4096 && buf.is_empty());
    assert_eq!(c.buffered_capacity(), 0);
    // And it keeps working with a fresh buffer.
    c.on_read(GET, 2);
    assert!(matches!(c.poll(2, DATE), Some(Event::Request(_))));
    assert!(c.release_buffers().is_none());
}

#[test]
fn file_bodies_and_custom_heads() {
    let mut c = Connection::new(HttpSettings::default(), 0);
    c.on_read(b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n", 1);
    assert!(matches!(c.poll(1, DATE), Some(Event::Request(_))));
    let mut r = Response::new(206);
    r.content_type = Some("text/plain".into());
    r.last_modified = Some("Sun, 06 Nov 1994 08:49:37 GMT".into());
    r.body = Body::File {
        token: 3,
        offset: 10,
        len: 5,
    };
    let r = r
        .header("ETag", "\"x-1\"")
        .header("Content-Range", "bytes 10-14/100");
    c.respond(r, 1, DATE).unwrap();
    let out = c.take_output();
    assert_eq!(out.len(), out.bytes().len() as u64 + 5);
    assert_eq!(
        String::from_utf8(out.bytes()).unwrap(),
        format!("HTTP/1.1 206 Partial Content\r\nServer: gyre\r\nDate: {DATE}\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: keep-alive\r\nETag: \"x-1\"\r\nContent-Range: bytes 10-14/100\r\n\r\n")
    );
    assert_eq!(
        out.segments[1],
        Segment::File {
            token: 3,
            offset: 10,
            len: 5
        }
    );
    // 304 carries no Content-Length and no body.
    c.on_read(b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n", 2);
    assert!(matches!(c.poll(2, DATE), Some(Event::Request(_))));
    let mut r = Response::new(304);
    r.body = Body::Bytes(b"nope".to_vec());
    c.respond(r, 2, DATE).unwrap();
    let t = String::from_utf8(c.take_output().bytes()).unwrap();
    assert!(!t.contains("Content-Length") && t.ends_with("\r\n\r\n"));
}

/// The output as a byte stream, with file regions rendered as synthetic
/// bytes (a function of the file offset) so partial sends can be compared.
fn render_file(offset: u64, len: u64, out: &mut Vec<u8>) {
    out.extend((offset..offset + len).map(|i| (i % 251) as u8));
}

fn answer_all(c: &mut Connection, now: u64) {
    while let Some(ev) = c.poll(now, DATE) {
        if let Event::Request(r) = ev {
            let resp = handler(&r);
            c.respond(resp, now, DATE).unwrap();
            c.recycle(r);
        }
    }
}

#[test]
fn in_place_output_matches_take_output_under_short_writes() {
    let input: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /file HTTP/1.1\r\nHost: a\r\n\r\nHEAD /file HTTP/1.1\r\nHost: a\r\n\r\nGET /nope HTTP/1.1\r\nHost: a\r\n\r\nGET /file HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    let mut reference = Connection::new(HttpSettings::default(), 0);
    reference.on_read(input, 1);
    answer_all(&mut reference, 1);
    let mut expected = Vec::new();
    for seg in reference.take_output().segments {
        match seg {
            Segment::Bytes(b) => expected.extend_from_slice(&b),
            Segment::File { offset, len, .. } => render_file(offset, len, &mut expected),
        }
    }
    for step in 1..=9u64 {
        let mut c = Connection::new(HttpSettings::default(), 0);
        c.on_read(input, 1);
        answer_all(&mut c, 1);
        let mut got = Vec::new();
        let mut i = 0u64;
        let mut file_expected = false;
        while let Some(chunk) = c.next_output() {
            if matches!(chunk, gyre_http::Chunk::File { .. }) {
                file_expected = false;
            }
            assert!(!file_expected, "file_follows() promised a file next");
            if matches!(chunk, gyre_http::Chunk::Bytes(b) if b.len() as u64 <= 1 + (i + 1) * step % 37)
                && c.file_follows()
            {
                file_expected = true;
            }
            // Short writes of varying sizes, as a full socket buffer gives.
            i += 1;
            let want = 1 + (i * step) % 37;
            let n = match chunk {
                gyre_http::Chunk::Bytes(b) => {
                    let n = (want as usize).min(b.len());
                    got.extend_from_slice(&b[..n]);
                    n as u64
                }
                gyre_http::Chunk::File { offset, len, token } => {
                    assert_eq!(token, 7);
                    let n = want.min(len);
                    render_file(offset, n, &mut got);
                    n
                }
            };
            c.consume_output(n);
        }
        assert!(!c.has_output());
        assert_eq!(got, expected, "step {step}");
    }
}

#[test]
fn a_reused_machine_behaves_like_a_new_one() {
    // Leave state behind: a partial head, output not taken, a log record.
    let mut c = Connection::new(HttpSettings::default(), 0);
    c.on_read(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /fi", 1);
    answer_all(&mut c, 1);
    assert!(c.has_output());
    c.reuse(HttpSettings::default(), 100, 5, 50);
    assert!(!c.has_output() && c.is_idle() && c.take_logs().is_empty());
    assert_eq!((c.requests(), c.created()), (5, 50));
    let mut fresh = Connection::resume(HttpSettings::default(), 100, 5, 50);
    for m in [&mut c, &mut fresh] {
        m.on_read(GET, 101);
        answer_all(m, 101);
    }
    assert_eq!(c.take_output(), fresh.take_output());
    assert_eq!(c.take_logs(), fresh.take_logs());
    assert_eq!(c.next_deadline(), fresh.next_deadline());
}

#[test]
fn error_log_notes_are_nginx_facts() {
    use gyre_http::conn::ErrKind;
    let reset = std::io::Error::from_raw_os_error(104);
    // A reset inside a pipelined request line: nginx's action for it.
    let mut c = Connection::new(HttpSettings::default(), 0);
    c.on_read(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /p", 1);
    answer_all(&mut c, 1);
    assert!(!c.has_notes());
    c.on_recv_error(&reset, 2);
    let n = c.take_notes();
    assert_eq!(n.len(), 1);
    assert_eq!(
        n[0].message(),
        "recv() failed (104: Connection reset by peer)"
    );
    assert_eq!(n[0].action, Some("reading client pipelined request line"));
    assert_eq!(n[0].request_line, "GET /p");
    assert_eq!(c.disposition(), Disposition::Close);

    // Ignored header lines are noted when the head completes, in order,
    // naming Host only after it was read.
    let mut c = Connection::new(HttpSettings::default(), 0);
    c.on_read(
        b"GET / HTTP/1.1\r\nX@Y: 1\r\nHost: a\r\nA_B: 2  \r\n\r\n",
        1,
    );
    let Some(Event::Request(_)) = c.poll(1, DATE) else {
        panic!("no request")
    };
    let n = c.take_notes();
    let texts: Vec<_> = n.iter().map(|n| (n.message(), n.host.as_deref())).collect();
    assert_eq!(
        texts,
        [
            ("client sent invalid header line: \"X@Y: 1\"", None),
            ("client sent invalid header line: \"A_B: 2\"", Some("a")),
        ]
    );
    assert_eq!(n[0].action, Some("reading client request headers"));

    // A broken chunked body found while it is discarded names the
    // request the glue handed back, at [error].
    let mut c = Connection::new(HttpSettings::default(), 0);
    c.on_read(
        b"POST /x HTTP/1.1\r\nHost: a\r\nReferer: http://r/\r\nTransfer-Encoding: chunked\r\n\r\n",
        1,
    );
    let Some(Event::Request(mut req)) = c.poll(1, DATE) else {
        panic!("no request")
    };
    c.respond(handler(&req), 1, DATE).unwrap();
    c.keep_discarded(&mut req);
    c.on_read(b"zz\r\n", 2);
    while c.poll(2, DATE).is_some() {}
    let n = c.take_notes();
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].kind, ErrKind::InvalidChunked);
    assert_eq!(n[0].kind.level(), log::Level::Error);
    assert_eq!(n[0].message(), "client sent invalid chunked body");
    assert_eq!(
        (
            n[0].request_line.as_str(),
            n[0].host.as_deref(),
            n[0].referrer.as_deref()
        ),
        ("POST /x HTTP/1.1", Some("a"), Some("http://r/"))
    );
    assert!(n[0].about_request && n[0].action.is_none());

    // While a module reads a body: nginx's lines, checked chunk by chunk
    // against client_max_body_size (verified with nginx 1.22's dav PUT).
    let st = HttpSettings {
        client_max_body_size: 100,
        ..HttpSettings::default()
    };
    let chunk = "d".repeat(80);
    let input = format!(
        "PUT /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n50\r\n{chunk}\r\n50\r\n{chunk}\r\n0\r\n\r\n"
    );
    let (_, evs, mut c) = collect(input.as_bytes(), st.clone());
    assert_eq!(evs, vec![Event::BodyError(413)]);
    let n = c.take_notes();
    assert_eq!(
        n[0].message(),
        "client intended to send too large chunked body: 80+80 bytes"
    );
    assert!(n[0].about_request && n[0].kind.level() == log::Level::Error);
    let (_, evs, mut c) = collect(
        b"PUT /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        st.clone(),
    );
    assert_eq!(evs, vec![Event::BodyError(400)]);
    assert_eq!(
        c.take_notes()[0].message(),
        "client sent invalid chunked body"
    );
    let (_, _, mut c) = collect(
        b"PUT /u HTTP/1.1\r\nHost: a\r\nContent-Length: 50\r\n\r\nabc",
        st,
    );
    c.on_eof(2);
    while c.poll(2, DATE).is_some() {}
    let n = c.take_notes();
    assert_eq!(n[0].message(), "client prematurely closed connection");
    assert!(n[0].about_request && n[0].action.is_none());
    assert_eq!(n[0].kind.level(), log::Level::Debug, "nginx's [info]");

    // A 494 between header lines before any header: nginx's "too large
    // request"; inside one, the line (cut at 1,748 bytes).
    let st = HttpSettings {
        client_header_buffer_size: 32,
        large_header_buffers: 1,
        large_header_buffer_size: 64,
        ..HttpSettings::default()
    };
    let mut c = Connection::new(st.clone(), 0);
    let line = format!("GET /{} HTTP/1.1\r\n", "a".repeat(64 - 16));
    c.on_read(line.as_bytes(), 1);
    c.on_read(b"Host: a\r\n\r\n", 1);
    while c.poll(1, DATE).is_some() {}
    let n = c.take_notes();
    assert_eq!(n[0].message(), "client sent too large request", "{n:?}");
    let mut c = Connection::new(st, 0);
    c.on_read(b"GET / HTTP/1.1\r\nX-Long: ", 1);
    c.on_read("b".repeat(100).as_bytes(), 1);
    while c.poll(1, DATE).is_some() {}
    let n = c.take_notes();
    assert_eq!(
        n[0].message(),
        format!(
            "client sent too long header line: \"X-Long: {}...\"",
            "b".repeat(64 - 8)
        )
    );
}
