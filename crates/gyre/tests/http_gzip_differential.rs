//! gzip and gzip_static against the real nginx: the same files, the same
//! `server {}` text and the same raw requests go to gyre and to nginx 1.22,
//! and the answers must agree on what gzip decides: status, Content-Type,
//! Content-Encoding, Vary, the ETag (and whether it was weakened), whether
//! a Content-Length, Transfer-Encoding: chunked, Accept-Ranges and
//! Content-Range are sent, the close-or-keep decision, and the body after
//! decompression (compressed bytes differ: gyre's deflate is zlib-rs).
//!
//! nginx is found at `$NGINX` or `/usr/sbin/nginx`; without it the test
//! prints why it skipped.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use util::http::{start_http, Raw, Running};
use util::nginx::nginx_bin;
use util::Prefix;

/// nginx serving one server block with `server_body` in it.
fn start_nginx(bin: &Path, server_body: &str) -> Option<util::nginx::Nginx> {
    let http = |port: u16| format!("server {{\n  listen 127.0.0.1:{port};\n{server_body}\n }}");
    util::nginx::start_http(bin, "gzip-nginx", &http)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    content_type: Option<String>,
    content_encoding: Option<String>,
    vary: Option<String>,
    etag: Option<String>,
    /// The Content-Length value when the body is not gzipped (a gzipped
    /// one differs by compressor), else whether one was sent.
    content_length: Option<String>,
    chunked: bool,
    accept_ranges: bool,
    content_range: Option<String>,
    closed: bool,
    /// Decompressed when Content-Encoding says gzip; error pages signed
    /// "gyre".
    body: Vec<u8>,
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut d = flate2::read::MultiGzDecoder::new(b);
    if d.read_to_end(&mut out).is_err() {
        return b"<not a gzip stream>".to_vec();
    }
    out
}

fn ask(port: u16, input: &[u8]) -> Answer {
    let head_only = input.starts_with(b"HEAD ");
    let mut r = Raw::connect(port);
    r.send(input);
    let resp = r.response(head_only);
    let closed = r.closed_within(Duration::from_millis(100))
        || resp
            .header("Connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let gz = resp.header("Content-Encoding").is_some_and(|v| v == "gzip");
    let body = if gz && !head_only {
        gunzip(&resp.body)
    } else {
        resp.body.clone()
    };
    let body = String::from_utf8_lossy(&body)
        .replace("<center>nginx</center>", "<center>gyre</center>")
        .into_bytes();
    Answer {
        status: resp.status,
        content_type: resp.header("Content-Type").map(str::to_string),
        content_encoding: resp.header("Content-Encoding").map(str::to_string),
        vary: resp.header("Vary").map(str::to_string),
        etag: resp.header("ETag").map(str::to_string),
        content_length: resp.header("Content-Length").map(|v| {
            if resp.header("Content-Type") == Some("text/html") && v.len() == 3 {
                // nginx's pages are one byte longer ("nginx" vs "gyre").
                "page".to_string()
            } else if gz && resp.header("ETag").is_some_and(|e| e.starts_with("W/")) {
                "gzipped".to_string()
            } else {
                v.to_string()
            }
        }),
        chunked: resp
            .header("Transfer-Encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked")),
        accept_ranges: resp.header("Accept-Ranges").is_some(),
        content_range: resp.header("Content-Range").map(str::to_string),
        closed,
        body,
    }
}

/// Text that compresses, `n` bytes of it.
fn text(n: usize, seed: u32) -> String {
    let words = [
        "nginx", "gyre", "event", "loop", "worker", "gzip", "deflate", "chunk", "header", "body",
    ];
    let mut s = String::with_capacity(n + 16);
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    while s.len() < n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        s.push_str(words[(x % 10) as usize]);
        s.push(if x % 7 == 0 { '\n' } else { ' ' });
    }
    s.truncate(n);
    s
}

fn server_body(root: &str) -> String {
    format!(
        "  root {root};\n\
         types {{ text/html html; text/css css; text/plain txt; application/json json; }}\n\
         gzip on; gzip_types text/plain text/css; gzip_vary on; gzip_min_length 100;\n\
         gzip_comp_level 6; gzip_disable msie6 \"Bot/\\d\";\n\
         location = /r {{ return 200 \"{}\"; }}\n\
         location /st/ {{ alias {root}/; gzip_static on; }}\n\
         location /sta/ {{ alias {root}/; gzip_static always; }}\n\
         location /px/ {{ alias {root}/; gzip_proxied expired no-cache; expires -1; }}\n\
         location /pxn/ {{ alias {root}/; gzip_proxied no_etag; }}\n\
         location /pxany/ {{ alias {root}/; gzip_proxied any; }}\n\
         location /h10/ {{ alias {root}/; gzip_http_version 1.0; }}\n\
         location /off/ {{ alias {root}/; gzip off; }}\n\
         location /types/ {{ alias {root}/; gzip_types *; }}\n\
         location /lvl1/ {{ alias {root}/; gzip_comp_level 1; gzip_buffers 4 4k; }}\n\
         location /rate/ {{ alias {root}/; limit_rate 2k; }}\n",
        text(300, 9)
    )
}

fn cases() -> Vec<(&'static str, String)> {
    let g = |path: &str, extra: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip, deflate\r\n{extra}\r\n")
    };
    vec![
        ("gzipped file", g("/page.html", "")),
        (
            "no accept-encoding",
            "GET /page.html HTTP/1.1\r\nHost: x\r\n\r\n".into(),
        ),
        (
            "head",
            "HEAD /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n".into(),
        ),
        (
            "q=0",
            "GET /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip;q=0\r\n\r\n".into(),
        ),
        (
            "q=0.5 after deflate",
            "GET /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: deflate, gzip;q=0.5\r\n\r\n"
                .into(),
        ),
        (
            "identity",
            "GET /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\n\r\n".into(),
        ),
        (
            "x-gzip only",
            "GET /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: x-gzip\r\n\r\n".into(),
        ),
        ("range on gzipped", g("/page.html", "Range: bytes=0-9\r\n")),
        (
            "range without gzip",
            "GET /page.html HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\n\r\n".into(),
        ),
        (
            "http/1.0",
            "GET /page.html HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n".into(),
        ),
        (
            "http/1.0 with gzip_http_version 1.0",
            "GET /h10/page.html HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n".into(),
        ),
        ("below gzip_min_length", g("/small.html", "")),
        ("text/plain listed", g("/t.txt", "")),
        ("css listed", g("/s.css", "")),
        ("type not listed", g("/data.json", "")),
        ("gzip_types *", g("/types/data.json", "")),
        ("error page", g("/nope", "")),
        ("return text", g("/r", "")),
        (
            "msie6",
            g(
                "/page.html",
                "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)\r\n",
            ),
        ),
        (
            "msie6 sv1",
            g(
                "/page.html",
                "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)\r\n",
            ),
        ),
        (
            "disable regex",
            g("/page.html", "User-Agent: bot/7 crawler\r\n"),
        ),
        ("via, proxied off", g("/page.html", "Via: 1.1 proxy\r\n")),
        ("via, expired", g("/px/page.html", "Via: 1.1 proxy\r\n")),
        ("via, no_etag", g("/pxn/page.html", "Via: 1.1 proxy\r\n")),
        ("via, any", g("/pxany/page.html", "Via: 1.1 proxy\r\n")),
        ("gzip off", g("/off/page.html", "")),
        ("gzip_static", g("/st/a.html", "")),
        (
            "gzip_static, no gzip",
            "GET /st/a.html HTTP/1.1\r\nHost: x\r\n\r\n".into(),
        ),
        (
            "gzip_static always",
            "GET /sta/a.html HTTP/1.1\r\nHost: x\r\n\r\n".into(),
        ),
        ("gzip_static, only the .gz", g("/st/only.html", "")),
        ("gzip_static, no .gz", g("/st/page.html", "")),
        (
            "gzip_static head",
            "HEAD /st/a.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n".into(),
        ),
        ("large file in slices", g("/big.html", "")),
        ("large file, level 1, 4 buffers", g("/lvl1/big.html", "")),
        ("index by redirect", g("/sub/", "")),
        (
            "limit_rate paces the gzipped body",
            g("/rate/page.html", ""),
        ),
        (
            "if-none-match weak",
            g("/page.html", "If-None-Match: W/\"ETAG\"\r\n"),
        ),
        ("close", g("/page.html", "Connection: close\r\n")),
    ]
}

#[test]
fn gzip_answers_like_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the gzip differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let p = Prefix::new("gzip-gyre");
    p.write("html/page.html", &text(5000, 1));
    p.write("html/small.html", "tiny\n");
    p.write("html/t.txt", &text(3000, 2));
    p.write("html/s.css", &text(2000, 3));
    p.write("html/data.json", &text(2000, 4));
    p.write("html/big.html", &text(3 << 20, 5));
    p.write("html/sub/index.html", &text(1000, 6));
    p.write("html/a.html", &text(4000, 7));
    let gz = |data: &[u8]| {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(9));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    };
    std::fs::write(p.path("html/a.html.gz"), gz(text(4000, 7).as_bytes())).unwrap();
    std::fs::write(p.path("html/only.html.gz"), gz(b"only compressed\n")).unwrap();
    let root = p.path("html").display().to_string();
    let body = server_body(&root);
    let Some(nginx) = start_nginx(&bin, &body) else {
        eprintln!("skipping the gzip differential test: nginx did not start");
        return;
    };
    let body2 = body.clone();
    let gyre: Running = start_http(&p, 1, move |port| {
        format!("access_log off;\nserver_tokens off;\nserver {{\n listen 127.0.0.1:{port};\n{body2}\n}}")
    });
    // The page's ETag, for the If-None-Match case.
    let etag = ask(nginx.port, b"GET /page.html HTTP/1.1\r\nHost: x\r\n\r\n")
        .etag
        .unwrap();
    let etag = etag.trim_matches('"').to_string();
    let mut differences = Vec::new();
    let mut gzipped = 0;
    for (name, input) in cases() {
        let input = input.replace("ETAG", &etag);
        let want = ask(nginx.port, input.as_bytes());
        let got = ask(gyre.port, input.as_bytes());
        if want.content_encoding.is_some() {
            gzipped += 1;
        }
        if want != got {
            let show = |a: &Answer| Answer {
                body: a.body.iter().take(200).copied().collect(),
                ..a.clone()
            };
            differences.push(format!(
                "{name}:\n  nginx: {:?}\n  gyre:  {:?}",
                show(&want),
                show(&got)
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} cases differ:\n{}",
        differences.len(),
        cases().len(),
        differences.join("\n")
    );
    // The cases exercise both sides of the decision.
    assert!(gzipped >= 12, "only {gzipped} cases were gzipped by nginx");
}

/// Several gzipped responses on one keep-alive connection, a large one
/// (compressed across loop turns) between small ones, pipelined: every
/// body decompresses to its file and the connection stays open.
#[test]
fn gzipped_responses_keep_the_connection_and_their_order() {
    let p = Prefix::new("gzip-keepalive");
    let big = text(2 << 20, 11);
    p.write("html/big.html", &big);
    p.write("html/page.html", &text(5000, 12));
    let gyre = start_http(&p, 1, |port| {
        format!(
            "access_log off;\nserver_tokens off;\nserver {{ listen 127.0.0.1:{port}; root html; gzip on; gzip_comp_level 3; }}"
        )
    });
    let mut c = gyre.raw();
    let req = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n").into_bytes()
    };
    let mut all = req("/page.html");
    all.extend(req("/big.html"));
    all.extend(req("/page.html"));
    c.send(&all);
    for want in [text(5000, 12), big.clone(), text(5000, 12)] {
        let r = c.response(false);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Content-Encoding"), Some("gzip"));
        assert_eq!(r.header("Transfer-Encoding"), Some("chunked"));
        assert_eq!(r.header("Content-Length"), None);
        assert_eq!(gunzip(&r.body), want.as_bytes());
    }
    assert!(!c.closed_within(Duration::from_millis(100)));
}
