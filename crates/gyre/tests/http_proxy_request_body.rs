//! A proxied request body (`proxy_request_buffering on`, nginx's default)
//! on the real binary over real sockets: up to `client_body_buffer_size`
//! it is held in memory, past that it goes to a temporary file under
//! `client_body_temp_path` (nginx's warn line `a client request body is
//! buffered to a temporary file`) and is sent to the upstream from there,
//! again from its start when the request moves to the next upstream; the
//! worker's memory does not grow by the body's size, and no file is left.
#![allow(clippy::unwrap_used)]

mod util;

use std::time::Duration;

use util::backend::{Backend, Reply};
use util::http::{free_port, start_http, Raw};
use util::{files_under, rss_kib, Prefix};

/// 8 MiB: far over the 16 KiB buffer, in a pattern that shows a byte out
/// of place.
const LEN: usize = 8 << 20;

fn body() -> Vec<u8> {
    (0..LEN).map(|i| (i % 251) as u8).collect()
}

fn check_body(got: &[u8]) {
    assert_eq!(got.len(), LEN);
    if let Some(i) = (0..LEN).find(|&i| got[i] != (i % 251) as u8) {
        panic!("body byte {i} is {} instead of {}", got[i], (i % 251) as u8);
    }
}

#[test]
fn a_big_body_goes_through_a_temp_file_and_whole_to_the_upstream() {
    let b = Backend::start(|_| Reply::ok("took it"));
    let up = b.port();
    let p = Prefix::new("proxy-reqbody");
    let g = start_http(&p, 1, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port};
                client_max_body_size 32m;
                client_body_temp_path body 1 2;
                location / {{ proxy_pass http://127.0.0.1:{up}; proxy_http_version 1.1; }} }}"
        )
    });
    let worker = g.server.workers()[0];
    let data = body();
    let before = rss_kib(worker);
    for (i, chunked) in [false, true].into_iter().enumerate() {
        let mut c = Raw::connect(g.port);
        if chunked {
            c.send(b"POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
            for piece in data.chunks(100_000) {
                c.send(format!("{:x}\r\n", piece.len()).as_bytes());
                c.send(piece);
                c.send(b"\r\n");
            }
            c.send(b"0\r\n\r\n");
        } else {
            c.send(
                format!("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: {LEN}\r\n\r\n").as_bytes(),
            );
            c.send(&data);
        }
        let r = c.response(false);
        assert_eq!(r.status, 200, "{}\n{}", r.head, g.log());
        assert_eq!(r.body, b"took it");
        // The first request the backend saw is start_http's probe.
        let got = b.wait_requests(i + 2, Duration::from_secs(10));
        let req = got.last().unwrap();
        // nginx sends a buffered body with its length, never chunked.
        assert_eq!(req.header("Content-Length"), Some(LEN.to_string().as_str()));
        assert!(!req.chunked);
        check_body(&req.body);
    }
    let grew = rss_kib(worker).saturating_sub(before);
    assert!(
        grew < 4 * 1024,
        "worker RSS grew {grew} KiB for an 8 MiB body kept in a temp file"
    );
    let log = g.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("a client request body is buffered to a temporary file"))
        .collect();
    assert_eq!(lines.len(), 2, "{log}");
    let dir = p.path("body");
    assert!(lines[0].contains("[warn]"), "{}", lines[0]);
    assert!(
        lines[0].contains(&format!(
            "temporary file {}/1/00/0000000001, client: 127.0.0.1",
            dir.display()
        )),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("request: \"POST /up HTTP/1.1\""),
        "{}",
        lines[0]
    );
    assert!(
        files_under(&dir).is_empty(),
        "left: {:?}",
        files_under(&dir)
    );
}

#[test]
fn the_next_upstream_gets_the_file_body_from_its_start() {
    let b = Backend::start(|_| Reply::ok("second"));
    let (good, dead) = (b.port(), free_port());
    let p = Prefix::new("proxy-reqbody-next");
    let g = start_http(&p, 1, move |port| {
        format!(
            "upstream u {{ server 127.0.0.1:{dead}; server 127.0.0.1:{good}; }}
            server {{ listen 127.0.0.1:{port};
                client_max_body_size 32m;
                client_body_buffer_size 8k;
                location / {{ proxy_pass http://u; }} }}"
        )
    });
    let data = body();
    // Round robin: one of the two requests tries the dead peer first.
    for i in 0..2 {
        let mut c = Raw::connect(g.port);
        c.send(format!("PUT /f HTTP/1.1\r\nHost: h\r\nContent-Length: {LEN}\r\n\r\n").as_bytes());
        c.send(&data);
        let r = c.response(false);
        assert_eq!(r.status, 200, "{}\n{}", r.head, g.log());
        // The first request the backend saw is start_http's probe.
        let got = b.wait_requests(i + 2, Duration::from_secs(10));
        check_body(&got.last().unwrap().body);
    }
    assert!(
        g.log()
            .contains("connect() failed (111: Connection refused) while connecting to upstream"),
        "{}",
        g.log()
    );
}

#[test]
fn a_small_body_stays_in_memory_and_is_request_body() {
    let b = Backend::start(|_| Reply::ok("ok"));
    let up = b.port();
    let p = Prefix::new("proxy-reqbody-var");
    let g = start_http(&p, 1, move |port| {
        format!(
            "log_format body '$request_method [$request_body] $request_length';
            server {{ listen 127.0.0.1:{port};
                access_log logs/body.log body;
                location / {{ proxy_pass http://127.0.0.1:{up}; }} }}"
        )
    });
    let mut c = Raw::connect(g.port);
    c.send(b"POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\n\r\na=1&b=2");
    assert_eq!(c.response(false).status, 200);
    // The first request the backend saw is start_http's probe.
    assert_eq!(
        b.wait_requests(2, Duration::from_secs(5))[1].body,
        b"a=1&b=2"
    );
    let path = p.path("logs/body.log");
    assert!(util::wait_for(Duration::from_secs(5), || {
        std::fs::read_to_string(&path).is_ok_and(|s| s.contains("POST [a=1&b=2] "))
    }));
    assert!(
        !g.log().contains("buffered to a temporary file"),
        "{}",
        g.log()
    );
}

/// A chunked body is held to the location's `client_max_body_size` as it
/// comes, buffered (the default) or streamed (`proxy_request_buffering
/// off`): 413 and nginx's error line, nothing reaches the upstream, and the
/// location's own access log has the record.
#[test]
fn a_chunked_body_over_the_location_limit_is_413_before_the_upstream() {
    let b = Backend::start(|_| Reply::ok("ok"));
    let up = b.port();
    let p = Prefix::new("proxy-reqbody-max");
    let g = start_http(&p, 1, move |port| {
        format!(
            "server {{ listen 127.0.0.1:{port}; client_max_body_size 1m;
                location /small {{ client_max_body_size 10; access_log logs/small.log;
                    proxy_pass http://127.0.0.1:{up}; }}
                location /stream {{ client_max_body_size 10; proxy_request_buffering off;
                    proxy_http_version 1.1; proxy_pass http://127.0.0.1:{up}; }} }}"
        )
    });
    for path in ["/small", "/stream"] {
        let mut c = Raw::connect(g.port);
        c.send(
            format!(
                "POST {path} HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\
                 8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n"
            )
            .as_bytes(),
        );
        let r = c.response(false);
        assert_eq!(r.status, 413, "{path}: {}\n{}", r.head, g.log());
    }
    assert!(
        g.server.logged(
            "client intended to send too large chunked body: 8+8 bytes",
            Duration::from_secs(5)
        ),
        "{}",
        g.log()
    );
    let small = p.path("logs/small.log");
    assert!(util::wait_for(Duration::from_secs(5), || {
        std::fs::read_to_string(&small).is_ok_and(|s| s.contains("\"POST /small HTTP/1.1\" 413 "))
    }));
    // Nothing reached the backend (start_http's probe of / is no proxied
    // location's).
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(b.requests().len(), 0);
}
