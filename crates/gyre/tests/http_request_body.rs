//! Request bodies read by a handler (crate::request_body, through
//! `dav_methods PUT`) against the real nginx: the same `http {}` text and
//! the same raw requests go to gyre and to nginx 1.22 — Content-Length and
//! chunked bodies, bodies past `client_body_buffer_size` (spilled to a
//! temporary file under `client_body_temp_path` with levels), over
//! `client_max_body_size`, pipelined requests after a body, a body the
//! handler does not read (`return`: discarded, keep-alive kept), and
//! `$request_body` / `$request_body_file` in the access log. Then what only
//! gyre can be asked directly: a slow sender, the temporary files left
//! behind (none), `client_body_timeout`.
//!
//! nginx is found at `$NGINX` or `/usr/sbin/nginx`; without it the
//! differential part prints why it skipped.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::Write;
use std::time::Duration;

use util::http::{start_http, Raw};
use util::nginx::nginx_bin;
use util::Prefix;

/// The `http {}` inside both servers run (nginx's helper adds its own
/// temp paths at http level; the server's `client_body_temp_path` wins).
fn http_conf(port: u16) -> String {
    format!(
        "log_format body '$request_method $uri $status [$request_body] file=$request_body_file';
         server {{
           listen 127.0.0.1:{port};
           server_tokens off;
           root html;
           access_log logs/body.log body;
           client_body_temp_path tmp/body 1 2;
           client_body_buffer_size 1k;
           client_max_body_size 64k;
           location /up/ {{ dav_methods PUT; create_full_put_path on; }}
           location /flat/ {{ dav_methods PUT; }}
           location /ret {{ return 200 \"[$request_body]\"; }}
           location /keep/ {{ dav_methods PUT; client_body_in_file_only on; }}
         }}"
    )
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    location: Option<String>,
    content_length: Option<String>,
    content_type: Option<String>,
    body: String,
}

fn answer(r: &util::http::Resp, port: u16) -> Answer {
    Answer {
        status: r.status,
        location: r
            .header("Location")
            .map(|l| l.replace(&format!(":{port}/"), ":PORT/")),
        // An error page is one byte shorter when signed "gyre".
        content_length: r
            .header("Content-Length")
            .filter(|_| r.header("Content-Type") != Some("text/html"))
            .map(str::to_string),
        content_type: r.header("Content-Type").map(str::to_string),
        body: r
            .text()
            .replace("<center>nginx</center>", "<center>gyre</center>"),
    }
}

/// Sends `input` on one connection and reads `n` responses (then whether
/// the server closed).
fn ask(port: u16, input: &[u8], n: usize) -> (Vec<Answer>, bool) {
    let mut r = Raw::connect(port);
    r.send(input);
    let mut out = Vec::new();
    for _ in 0..n {
        match r.try_response(false) {
            Ok(Some(resp)) => out.push(answer(&resp, port)),
            _ => break,
        }
    }
    let closed = r.closed_within(Duration::from_millis(150));
    (out, closed)
}

fn put(path: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!(
        "PUT {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    v
}

fn chunked(path: &str, parts: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("PUT {path} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .into_bytes();
    for p in parts {
        v.extend_from_slice(format!("{:x}\r\n", p.len()).as_bytes());
        v.extend_from_slice(p);
        v.extend_from_slice(b"\r\n");
    }
    v.extend_from_slice(b"0\r\n\r\n");
    v
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

fn big(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| b"abcdefghijklmnopqrstuvwxyz"[i % 26])
        .collect()
}

/// The cases, in order (later ones see what earlier ones wrote): input,
/// responses expected on the connection.
fn cases() -> Vec<(&'static str, Vec<u8>, usize)> {
    let mut v: Vec<(&'static str, Vec<u8>, usize)> = vec![
        ("small put", put("/up/a.txt", b"hello"), 1),
        ("get it back", get("/up/a.txt"), 1),
        ("replace", put("/up/a.txt", b"hello again"), 1),
        ("get replaced", get("/up/a.txt"), 1),
        (
            "chunked, new directories",
            chunked("/up/d/e/b.txt", &[b"one ", b"two ", b"three"]),
            1,
        ),
        ("get chunked", get("/up/d/e/b.txt"), 1),
        ("past the buffer", put("/up/big.txt", &big(10_000)), 1),
        ("get big", get("/up/big.txt"), 1),
        (
            "chunked past the buffer",
            chunked("/up/bigc.txt", &[&big(900), &big(900), &big(900)]),
            1,
        ),
        ("get bigc", get("/up/bigc.txt"), 1),
        ("empty body", put("/up/empty.txt", b""), 1),
        ("get empty", get("/up/empty.txt"), 1),
        ("no directory", put("/flat/x/y.txt", b"z"), 1),
        ("collection", put("/up/", b"z"), 1),
        ("a directory", put("/up/d", b"z"), 1),
        ("over max", put("/up/huge.txt", &big(70_000)), 1),
        (
            "chunked over max",
            chunked("/up/hugec.txt", &[&big(40_000), &big(40_000)]),
            1,
        ),
        ("not put: static 405", put("/nothere/p.txt", b"abc"), 1),
        ("return ignores the body", put("/ret", b"abc"), 1),
        ("in file only", put("/keep/k.txt", b"kept"), 1),
    ];
    // Pipelined: a body, then a GET in the same write.
    let mut pipe = put("/up/p.txt", b"pipelined body");
    pipe.extend_from_slice(&get("/up/p.txt"));
    v.push(("pipelined after a body", pipe, 2));
    // A body a handler does not read, then the next request: discarded.
    let mut disc = put("/ret", &big(3000));
    disc.extend_from_slice(&get("/up/a.txt"));
    v.push(("discarded body then keep-alive", disc, 2));
    let mut range = put("/up/r.txt", b"abc");
    let at = range.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    range.splice(at..at, b"Content-Range: bytes 0-2/3\r\n".iter().copied());
    v.push(("range", range, 1));
    v
}

#[test]
fn bodies_match_nginx() {
    let Some(bin) = nginx_bin() else {
        println!("skipped: no nginx binary (set NGINX or install nginx)");
        return;
    };
    let Some(ng) = util::nginx::start_http(&bin, "body-nginx", &http_conf) else {
        println!("skipped: nginx did not start");
        return;
    };
    let p = Prefix::new("body-gyre");
    let g = start_http(&p, 1, http_conf);
    for d in [&p.dir, &ng.prefix.dir] {
        std::fs::create_dir_all(d.join("html/up")).unwrap();
        std::fs::create_dir_all(d.join("html/flat")).unwrap();
        std::fs::create_dir_all(d.join("html/keep")).unwrap();
    }
    let mut diffs = Vec::new();
    for (name, input, n) in cases() {
        let want = ask(ng.port, &input, n);
        let got = ask(g.port, &input, n);
        if want != got {
            diffs.push(format!("{name}:\n  nginx {want:?}\n  gyre  {got:?}"));
        }
    }
    // The access logs: `$request_body` is empty ("-") for a body in a
    // file and for one not read; `$request_body_file` names the file only
    // when it is kept (`client_body_in_file_only`) or was moved by PUT.
    let lines = |path: std::path::PathBuf, want: usize| -> Vec<String> {
        let end = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let t = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<String> = t
                .lines()
                .map(|l| {
                    // File names differ (numbers, prefixes): keep whether
                    // there was one.
                    match l.split_once("file=") {
                        Some((a, "-")) => format!("{a}file=-"),
                        Some((a, _)) => format!("{a}file=NAME"),
                        None => l.to_string(),
                    }
                })
                .collect();
            if lines.len() >= want || std::time::Instant::now() > end {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // One line per request, and the probe's.
    let requests: usize = cases().iter().map(|c| c.2).sum::<usize>() + 1;
    let want = lines(ng.prefix.path("logs/body.log"), requests);
    let got = lines(p.path("logs/body.log"), want.len());
    if want != got {
        diffs.push(format!("access log:\n  nginx {want:#?}\n  gyre  {got:#?}"));
    }
    // What the PUTs left under the document roots is the same.
    for f in [
        "up/a.txt",
        "up/d/e/b.txt",
        "up/big.txt",
        "up/bigc.txt",
        "keep/k.txt",
    ] {
        let a = std::fs::read(ng.prefix.path(&format!("html/{f}"))).ok();
        let b = std::fs::read(p.path(&format!("html/{f}"))).ok();
        if a != b {
            diffs.push(format!(
                "file {f}: nginx {:?} bytes, gyre {:?}",
                a.map(|v| v.len()),
                b.map(|v| v.len())
            ));
        }
    }
    assert!(diffs.is_empty(), "{}\n{}", diffs.join("\n"), g.log());
}

#[test]
fn slow_sender_spilled_body_and_no_files_left() {
    let p = Prefix::new("body-slow");
    std::fs::create_dir_all(p.path("html/up")).unwrap();
    let g = start_http(&p, 1, http_conf);
    // A 5,000-byte body in 50 writes, with pauses: the reads are many,
    // the body goes to a temporary file past 1k, and ends where PUT puts it.
    let body = big(5000);
    let mut r = g.raw();
    r.send(b"PUT /up/slow.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
    for part in body.chunks(100) {
        r.s.write_all(part).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let resp = r.response(false);
    assert_eq!(resp.status, 201, "{}", g.log());
    assert_eq!(std::fs::read(p.path("html/up/slow.txt")).unwrap(), body);
    // The same connection serves on.
    r.send(&get("/up/slow.txt"));
    let resp = r.response(false);
    assert_eq!((resp.status, resp.body.len()), (200, 5000));
    // A body that is not PUT in place (over the 64k limit, refused, and a
    // chunked one cut short by the client) leaves no file behind; the
    // level directories exist (1 and 2 characters long).
    let (a, _) = ask(g.port, &put("/up/huge.txt", &big(70_000)), 1);
    assert_eq!(a[0].status, 413);
    let mut r = g.raw();
    r.send(b"PUT /up/cut.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    r.send(format!("{:x}\r\n", 3000).as_bytes());
    r.send(&big(3000));
    r.shutdown_write();
    assert!(r.closed_within(Duration::from_secs(5)));
    assert!(
        util::wait_for(Duration::from_secs(5), || g.log().contains("/up/cut.txt")),
        "{}",
        g.log()
    );
    let left = util::files_under(&p.path("tmp/body"));
    assert!(left.is_empty(), "temporary files left: {left:?}");
    let levels: Vec<usize> = std::fs::read_dir(p.path("tmp/body"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().len())
        .collect();
    assert!(
        !levels.is_empty() && levels.iter().all(|&l| l == 1),
        "{levels:?}"
    );
    assert!(!std::path::Path::new(&p.path("html/up/cut.txt")).exists());
}

#[test]
fn body_timeout_closes_with_408_in_the_log() {
    let p = Prefix::new("body-timeout");
    std::fs::create_dir_all(p.path("html/up")).unwrap();
    let g = start_http(&p, 1, |port| {
        format!(
            "{}\n",
            http_conf(port).replace(
                "client_body_buffer_size 1k;",
                "client_body_buffer_size 1k; client_body_timeout 1s;"
            )
        )
    });
    let mut r = g.raw();
    r.send(b"PUT /up/t.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    // nginx's ngx_http_read_client_request_body_handler: a timed-out body
    // ends the request without a response (NGX_HTTP_REQUEST_TIME_OUT).
    assert!(r.closed_within(Duration::from_secs(10)));
    assert!(r.buf.is_empty(), "{:?}", String::from_utf8_lossy(&r.buf));
    let logged = util::wait_for(Duration::from_secs(5), || {
        std::fs::read_to_string(p.path("logs/body.log"))
            .unwrap_or_default()
            .contains("PUT /up/t.txt 408")
    });
    assert!(
        logged,
        "{}",
        std::fs::read_to_string(p.path("logs/body.log")).unwrap_or_default()
    );
    assert!(!p.path("html/up/t.txt").exists());
}

#[test]
fn expect_continue_then_body() {
    let p = Prefix::new("body-continue");
    std::fs::create_dir_all(p.path("html/up")).unwrap();
    let g = start_http(&p, 1, http_conf);
    let mut r = g.raw();
    r.send(
        b"PUT /up/c.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    );
    let cont = r.response(true);
    assert_eq!(cont.status, 100);
    r.send(b"data");
    let resp = r.response(false);
    assert_eq!(resp.status, 201);
    assert_eq!(std::fs::read(p.path("html/up/c.txt")).unwrap(), b"data");
}
