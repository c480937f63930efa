//! Static files end to end with the real binary: index, files, HEAD, error
//! pages, directories, traversal attempts, MIME types, conditional and range
//! requests, a large (sendfile) file, `alias` / `root` / `index` in
//! locations, and methods other than GET/HEAD. nginx 1.22 is the reference.
#![allow(clippy::unwrap_used)]

mod util;

use std::os::unix::fs::MetadataExt;

use util::http::{agent, call, finish, get, raw_request, start_http, Raw, Running};
use util::Prefix;

const INDEX: &str = "<html><body>gyre-static-index-7f3a</body></html>\n";
const SECRET: &str = "TOP-SECRET-e2e-91c4";
/// With `server_tokens on`, nginx's default: signed with the version.
const NOT_FOUND_PAGE: &str = concat!(
    "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>gyre/",
    env!("CARGO_PKG_VERSION"),
    "</center>\r\n</body>\r\n</html>\r\n"
);
const BIG: usize = 1 << 20;

/// A running server (dropped first) and its prefix.
struct Fx {
    r: Running,
    p: Prefix,
}

fn big_content() -> Vec<u8> {
    // Not a repeating short pattern, so an offset error shows.
    let mut x: u32 = 0x1234_5678;
    (0..BIG)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

fn fixture(name: &str) -> Fx {
    let p = Prefix::new(name);
    p.write("html/index.html", INDEX);
    p.write("html/a.txt", "hello a\n");
    p.write("html/style.css", "body { color: red }\n");
    std::fs::write(p.path("html/pic.png"), b"\x89PNG\r\n\x1a\nfake").unwrap();
    p.write("html/data.xyz", "xyz data\n");
    p.write("html/README", "no extension\n");
    std::fs::create_dir_all(p.path("html/dir")).unwrap();
    p.write("html/dir/inner.txt", "inner\n");
    std::fs::write(p.path("html/big.bin"), big_content()).unwrap();
    // Next to the root: must never be served.
    p.write("secret.txt", SECRET);
    p.write("pics/x.png", "aliased png\n");
    p.write("otherroot/other/o.txt", "from other root\n");
    p.write("html/idx/start.html", "idx start\n");
    p.write("html/idx/index.html", "idx index (not first)\n");
    let r = start_http(&p, 1, |port| {
        format!(
            "server {{
                listen 127.0.0.1:{port};
                root html;
                default_type application/octet-stream;
                location /img/ {{ alias pics/; }}
                location /other/ {{ root otherroot; }}
                location /idx/ {{ index start.html index.html; }}
            }}"
        )
    });
    Fx { r, p }
}

#[test]
fn index_file_and_404_page() {
    let f = fixture("st-basic");
    let r = get(&f.r, "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), INDEX);
    assert_eq!(r.header("content-type"), Some("text/html"));
    assert_eq!(
        r.header("content-length"),
        Some(INDEX.len().to_string().as_str())
    );

    let r = get(&f.r, "/a.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello a\n");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));

    let r = get(&f.r, "/index.html");
    assert_eq!((r.status, r.text().as_str()), (200, INDEX));

    let r = get(&f.r, "/nope.html");
    assert_eq!(r.status, 404);
    assert_eq!(r.text(), NOT_FOUND_PAGE);
    assert_eq!(r.header("content-type"), Some("text/html"));
    assert!(
        f.r.server.logged(
            "nope.html\" failed (2: No such file or directory)",
            std::time::Duration::from_secs(2)
        ),
        "{}",
        f.r.log()
    );
}

#[test]
fn head_has_get_headers_and_no_body() {
    let f = fixture("st-head");
    let g = raw_request(
        f.r.port,
        "GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let mut c = f.r.raw();
    c.send(b"HEAD /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let h = c.response(true);
    assert!(c.closed_within(std::time::Duration::from_secs(3)), "closed");
    assert!(c.buf.is_empty(), "HEAD sent a body: {:?}", c.buf);
    assert_eq!(h.status, 200);
    for name in ["content-type", "content-length", "last-modified", "etag"] {
        assert_eq!(h.header(name), g.header(name), "{name}");
    }
    assert_eq!(
        h.header("content-length"),
        Some(INDEX.len().to_string().as_str())
    );
    // The big file too (the sendfile path).
    let h = raw_request(
        f.r.port,
        "HEAD /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(h.header("content-length"), Some(BIG.to_string().as_str()));
}

#[test]
fn directory_without_index_is_403_and_without_slash_301() {
    let f = fixture("st-dir");
    let r = get(&f.r, "/dir/");
    assert_eq!(r.status, 403);
    assert!(r.text().contains("<center><h1>403 Forbidden</h1></center>"));
    assert!(
        f.r.server
            .logged("directory index of \"", std::time::Duration::from_secs(2)),
        "{}",
        f.r.log()
    );

    for (path, want) in [("/dir", "/dir/"), ("/dir?a=1&b=2", "/dir/?a=1&b=2")] {
        let r = get(&f.r, path);
        assert_eq!(r.status, 301, "{path}");
        let loc = r.header("location").unwrap();
        // nginx (absolute_redirect on) sends http://<Host><uri>; a relative
        // reference is equivalent for clients.
        let abs = format!("http://127.0.0.1:{}{want}", f.r.port);
        assert!(loc == want || loc == abs, "{path}: Location {loc:?}");
        assert!(r.text().contains("301 Moved Permanently"));
    }
    // A file inside the directory is served.
    assert_eq!(get(&f.r, "/dir/inner.txt").text(), "inner\n");
}

#[test]
fn traversal_never_leaves_the_root() {
    let f = fixture("st-trav");
    // nginx answers every one of these with 400 (a ".." above the root, a
    // decoded NUL).
    let bad400 = [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/.%2e/secret.txt",
        "/..%2fsecret.txt",
        "/%2e%2e%2fsecret.txt",
        "/dir/../../secret.txt",
        "/dir/%2e%2e/%2e%2e/secret.txt",
        "/./../secret.txt",
        "/img/../../secret.txt",
        "/../../../../../../../../etc/passwd",
        "/%00",
        "/index.html%00.txt",
        "/secret.txt%00",
    ];
    for path in bad400 {
        let r = raw_request(
            f.r.port,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        );
        assert!(!r.text().contains(SECRET), "{path} served the secret");
        assert_eq!(r.status, 400, "{path}: {}", r.head);
    }
    // Absolute-form target.
    let r = raw_request(
        f.r.port,
        "GET http://t/../secret.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 400, "{}", r.head);
    // Not an escape: stays below the root, or is simply not found.
    for (path, status) in [
        ("/secret.txt", 404),
        ("/dir/../secret.txt", 404),
        ("/dir/../index.html", 200),
        ("/..\\secret.txt", 404),
        ("/img/..%2f..%2fsecret.txt", 400),
    ] {
        let r = raw_request(
            f.r.port,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        );
        assert!(!r.text().contains(SECRET), "{path} served the secret");
        assert_eq!(r.status, status, "{path}: {}", r.head);
    }
    // The server still works.
    assert_eq!(get(&f.r, "/").status, 200);
}

#[test]
fn mime_types_and_default_type() {
    let f = fixture("st-mime");
    for (path, ct) in [
        ("/index.html", "text/html"),
        ("/style.css", "text/css"),
        ("/pic.png", "image/png"),
        ("/a.txt", "text/plain"),
        ("/data.xyz", "application/octet-stream"),
        ("/README", "application/octet-stream"),
        ("/INDEX.HTML", ""),
    ] {
        let r = get(&f.r, path);
        if ct.is_empty() {
            assert_eq!(r.status, 404, "{path}: case-sensitive file system");
            continue;
        }
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some(ct), "{path}");
    }
    let r = get(&f.r, "/pic.png");
    assert_eq!(r.body, b"\x89PNG\r\n\x1a\nfake");
}

#[test]
fn etag_and_last_modified_give_304() {
    let f = fixture("st-cond");
    let md = std::fs::metadata(f.p.path("html/a.txt")).unwrap();
    let etag = format!("\"{:x}-{:x}\"", md.mtime(), md.size());
    let r = get(&f.r, "/a.txt");
    assert_eq!(r.header("etag"), Some(etag.as_str()), "nginx's ETag format");
    let lm = r.header("last-modified").unwrap().to_string();
    assert!(lm.ends_with(" GMT") && lm.len() == 29, "{lm}");

    let a = agent();
    let url = f.r.url("/a.txt");
    for inm in [etag.clone(), format!("W/{etag}"), "*".into()] {
        let r = call(a.get(&url).set("If-None-Match", &inm));
        assert_eq!(r.status, 304, "If-None-Match: {inm}");
        assert!(r.body.is_empty());
        assert_eq!(r.header("etag"), Some(etag.as_str()));
    }
    let r = call(a.get(&url).set("If-None-Match", "\"other\""));
    assert_eq!((r.status, r.text().as_str()), (200, "hello a\n"));

    let r = call(a.get(&url).set("If-Modified-Since", &lm));
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    let r = call(
        a.get(&url)
            .set("If-Modified-Since", "Mon, 01 Jan 2001 00:00:00 GMT"),
    );
    assert_eq!(r.status, 200);

    // On a raw socket: a 304 has no body, and the connection goes on.
    let mut c = f.r.raw();
    c.send(
        format!("GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: {etag}\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
            .as_bytes(),
    );
    let r = c.response(false);
    assert_eq!(r.status, 304);
    let r = c.response(false);
    assert_eq!((r.status, r.text().as_str()), (200, "hello a\n"));
}

#[test]
fn range_past_the_end_is_416() {
    let f = fixture("st-416");
    let a = agent();
    for (path, size) in [("/a.txt", 8), ("/big.bin", BIG)] {
        let r = call(a.get(&f.r.url(path)).set("Range", "bytes=999999999-"));
        assert_eq!(r.status, 416, "{path}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes */{size}").as_str())
        );
        assert!(r.text().contains("416 Requested Range Not Satisfiable"));
    }
}

#[test]
fn single_range_is_206_with_exact_bytes() {
    let f = fixture("st-range");
    let a = agent();
    let big = big_content();
    for (path, range, body, cr) in [
        ("/a.txt", "bytes=0-4", &b"hello"[..], "bytes 0-4/8"),
        ("/a.txt", "bytes=-3", &b" a\n"[..], "bytes 5-7/8"),
        ("/a.txt", "bytes=5-", &b" a\n"[..], "bytes 5-7/8"),
        ("/a.txt", "bytes=7-7", &b"\n"[..], "bytes 7-7/8"),
        (
            "/big.bin",
            "bytes=500000-500099",
            &big[500_000..500_100],
            "bytes 500000-500099/1048576",
        ),
        (
            "/big.bin",
            "bytes=-10",
            &big[BIG - 10..],
            "bytes 1048566-1048575/1048576",
        ),
    ] {
        // Raw socket: the framing itself is what is wrong, and ureq would
        // hide a short body behind a transport error.
        let mut c = f.r.raw();
        c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nRange: {range}\r\n\r\n").as_bytes());
        let r = c.response(false);
        assert_eq!(r.status, 206, "{path} {range}");
        assert_eq!(r.header("content-range"), Some(cr), "{path} {range}");
        assert_eq!(
            r.header("content-length"),
            Some(body.len().to_string().as_str()),
            "{path} {range}"
        );
        assert!(
            r.body == body,
            "{path} {range}: body {:?}",
            &r.body[..r.body.len().min(16)]
        );
    }
    let _ = a;
}

#[test]
fn one_mebibyte_file_is_byte_exact() {
    let f = fixture("st-big");
    let big = big_content();
    for _ in 0..2 {
        // Twice: the second one comes from the open-file cache.
        let r = get(&f.r, "/big.bin");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some(BIG.to_string().as_str()));
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        assert!(r.body == big, "1 MiB body differs (len {})", r.body.len());
    }
    // Pipelined behind a big body on one raw connection.
    let mut c = f.r.raw();
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.response(false);
    assert!(r.body == big);
    assert_eq!(c.response(false).text(), "hello a\n");
}

#[test]
fn alias_root_and_index_in_locations() {
    let f = fixture("st-alias");
    let r = get(&f.r, "/img/x.png");
    assert_eq!((r.status, r.text().as_str()), (200, "aliased png\n"));
    assert_eq!(r.header("content-type"), Some("image/png"));
    // The alias does not also serve the root's path.
    assert_eq!(get(&f.r, "/img/../pic.png").status, 200);
    assert_eq!(get(&f.r, "/img/pic.png").status, 404);

    let r = get(&f.r, "/other/o.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "from other root\n"));
    assert_eq!(get(&f.r, "/other/a.txt").status, 404);

    let r = get(&f.r, "/idx/");
    assert_eq!((r.status, r.text().as_str()), (200, "idx start\n"));
    assert_eq!(r.header("content-type"), Some("text/html"));
    let r = get(&f.r, "/idx");
    assert_eq!(r.status, 301);
}

#[test]
fn post_to_a_static_file_is_405_and_keeps_the_connection() {
    let f = fixture("st-post");
    let r = finish(agent().post(&f.r.url("/a.txt")).send_string("x=1"));
    assert_eq!(r.status, 405);
    assert!(r
        .text()
        .contains("<center><h1>405 Not Allowed</h1></center>"));
    for m in ["PUT", "DELETE"] {
        let r = raw_request(
            f.r.port,
            &format!(
                "{m} /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            ),
        );
        assert_eq!(r.status, 405, "{m}");
    }
    // nginx discards the body and keeps the connection alive after a 405.
    let mut c: Raw = f.r.raw();
    c.send(b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhelloGET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.response(false);
    assert_eq!(r.status, 405);
    assert_eq!(r.header("connection"), Some("keep-alive"));
    let r = c.response(false);
    assert_eq!((r.status, r.text().as_str()), (200, "hello a\n"));
}

#[test]
fn error_page_serves_a_custom_page() {
    let p = Prefix::new("st-errpage");
    p.write("html/index.html", INDEX);
    p.write("html/custom404.html", "custom not found page\n");
    let r = start_http(&p, 1, |port| {
        format!(
            "server {{
                listen 127.0.0.1:{port};
                root html;
                error_page 404 /custom404.html;
            }}"
        )
    });
    let resp = get(&r, "/missing");
    assert_eq!(resp.status, 404);
    assert_eq!(resp.text(), "custom not found page\n");
    assert_eq!(resp.header("content-type"), Some("text/html"));
}
