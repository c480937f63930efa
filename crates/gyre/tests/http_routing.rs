//! Routing end to end with the real binary: location precedence (`=`,
//! prefix, `^~`), server selection by Host (exact, wildcards, default
//! server), `return`, and `add_header`. nginx 1.22 is the reference.
#![allow(clippy::unwrap_used)]

mod util;

use util::http::{agent, call, raw_request, start_http, Running};
use util::Prefix;

struct Fx {
    r: Running,
    _p: Prefix,
}

fn fixture(name: &str) -> Fx {
    let p = Prefix::new(name);
    p.write("html/index.html", "routing index\n");
    let r = start_http(&p, 1, |port| {
        let l = format!("listen 127.0.0.1:{port}");
        format!(
            "
            server {{
                {l};
                server_name def.test;
                add_header X-Srv s;
                location = / {{ return 200 \"exact-root\"; }}
                location / {{ return 200 \"prefix-root\"; }}
                location = /exact {{ return 200 \"exact\"; }}
                location /exact {{ return 200 \"prefix-exact\"; }}
                location ^~ /static/ {{ return 200 \"caret-static\"; }}
                location /static/deep/ {{ return 200 \"deep\"; }}
            }}
            "
        ) + &format!(
            "
            server {{
                {l} default_server;
                server_name the-default.test;
                location / {{ return 200 \"default\"; }}
                location /ret/text {{ return 200 \"hello text\"; }}
                location /ret/moved {{ return 301 http://example.test/new; }}
                location /ret/found {{ return 302 http://example.test/found; }}
                location /ret/url {{ return http://example.test/u; }}
                location /ret/gone {{ return 404; }}
                location /ret/teapot {{ return 418 \"short and stout\"; }}
                location /hdr/ {{ add_header X-Gyre-Test yes; add_header X-Two two; return 200 \"h\"; }}
                location /hdr404/ {{ add_header X-Gyre-Test yes; return 404; }}
                location /always/ {{ add_header X-Always a always; return 404; }}
            }}
            server {{ {l}; server_name a.test alias-a.test; return 200 \"a\"; }}
            server {{ {l}; server_name www.pre.*; return 200 \"wild-tail\"; }}
            server {{ {l}; server_name *.example.test; return 200 \"wild-short\"; }}
            server {{ {l}; server_name *.api.example.test; return 200 \"wild-long\"; }}
            server {{ {l}; server_name exact.example.test; return 200 \"exact-name\"; }}
            server {{ {l}; server_name .dot.test; return 200 \"dot\"; }}
            "
        )
    });
    Fx { r, _p: p }
}

/// Status and body of `GET path` with `Host: host` (None: HTTP/1.0, no Host).
fn req(f: &Fx, host: Option<&str>, path: &str) -> (u16, String) {
    let r = match host {
        Some(h) => raw_request(
            f.r.port,
            &format!("GET {path} HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\n\r\n"),
        ),
        None => raw_request(f.r.port, &format!("GET {path} HTTP/1.0\r\n\r\n")),
    };
    (r.status, r.text())
}

#[test]
fn location_precedence() {
    let f = fixture("rt-loc");
    let h = Some("def.test");
    for (path, want) in [
        ("/", "exact-root"),
        ("/index.html", "prefix-root"),
        ("/exact", "exact"),
        ("/exact/", "prefix-exact"),
        ("/exactly", "prefix-exact"),
        ("/exact?x=1", "exact"),
        ("/%65xact", "exact"),
        ("/static/../exact", "exact"),
        ("//exact", "exact"),
        ("/static/a.css", "caret-static"),
        ("/static/deep/x", "deep"),
        ("/static/deeper", "caret-static"),
        ("/Static/a", "prefix-root"),
    ] {
        assert_eq!(req(&f, h, path), (200, want.to_string()), "{path}");
    }
}

#[test]
fn server_selection_exact_and_default() {
    let f = fixture("rt-names");
    for (host, want) in [
        (Some("a.test"), "a"),
        (Some("alias-a.test"), "a"),
        (Some("A.TeSt"), "a"),
        (Some("a.test:8080"), "a"),
        (Some("a.test."), "a"),
        (Some("def.test"), "prefix-root"),
        (Some("exact.example.test"), "exact-name"),
        (Some("x.example.test"), "wild-short"),
        (Some("www.pre.org"), "wild-tail"),
        (Some("dot.test"), "dot"),
        (Some("x.y.dot.test"), "dot"),
        (Some("example.test"), "default"),
        (Some("unknown.test"), "default"),
        (Some("127.0.0.1"), "default"),
        (None, "default"),
    ] {
        assert_eq!(
            req(&f, host, "/x"),
            (200, want.to_string()),
            "Host {host:?}"
        );
    }
    // An absolute-form target's host wins over the Host header.
    let r = raw_request(
        f.r.port,
        "GET http://a.test/x HTTP/1.1\r\nHost: def.test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.text(), "a");
}

#[test]
fn server_selection_wildcard_precedence() {
    let f = fixture("rt-wild");
    let mut wrong = Vec::new();
    for (host, want) in [
        // nginx: the longest matching leading wildcard.
        ("x.api.example.test", "wild-long"),
        // nginx: a leading wildcard beats a trailing one.
        ("www.pre.example.test", "wild-short"),
    ] {
        let got = req(&f, Some(host), "/x");
        if got != (200, want.to_string()) {
            wrong.push(format!("Host {host}: want {want:?}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn return_directive() {
    let f = fixture("rt-ret");
    let a = agent();
    let get = |path: &str| call(a.get(&f.r.url(path)));

    let r = get("/ret/text");
    assert_eq!((r.status, r.text().as_str()), (200, "hello text"));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("content-length"), Some("10"));

    let r = raw_request(
        f.r.port,
        "HEAD /ret/text HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!((r.status, r.header("content-length")), (200, Some("10")));

    for (path, code, loc, title) in [
        (
            "/ret/moved",
            301,
            "http://example.test/new",
            "301 Moved Permanently",
        ),
        ("/ret/found", 302, "http://example.test/found", "302 Found"),
        ("/ret/url", 302, "http://example.test/u", "302 Found"),
    ] {
        let r = get(path);
        assert_eq!(r.status, code, "{path}");
        assert_eq!(r.header("location"), Some(loc), "{path}");
        assert!(
            r.text()
                .contains(&format!("<center><h1>{title}</h1></center>")),
            "{path}: {}",
            r.text()
        );
    }

    let r = get("/ret/gone");
    assert_eq!(r.status, 404);
    assert!(r.text().contains("<center><h1>404 Not Found</h1></center>"));
    assert!(r.text().contains(concat!(
        "<hr><center>gyre/",
        env!("CARGO_PKG_VERSION"),
        "</center>"
    )));

    let r = get("/ret/teapot");
    assert_eq!((r.status, r.text().as_str()), (418, "short and stout"));
}

#[test]
fn add_header_on_success_codes_and_inheritance() {
    let f = fixture("rt-hdr");
    let a = agent();
    let r = call(a.get(&f.r.url("/hdr/")));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-gyre-test"), Some("yes"));
    assert_eq!(r.header("x-two"), Some("two"));
    // Not on an error without `always`.
    let r = call(a.get(&f.r.url("/hdr404/")));
    assert_eq!(r.status, 404);
    assert_eq!(r.header("x-gyre-test"), None);
    // A location without add_header inherits the server's; one with its
    // own does not.
    let r = call(a.get(&f.r.url("/")).set("Host", "def.test"));
    assert_eq!(r.text(), "exact-root");
    assert_eq!(r.header("x-srv"), Some("s"));
}

#[test]
fn add_header_always_on_errors() {
    let f = fixture("rt-always");
    let r = call(agent().get(&f.r.url("/always/")));
    assert_eq!(r.status, 404);
    assert_eq!(r.header("x-always"), Some("a"));
}
