//! Variables computed from a parsed request, as the phases see them.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::conn::{Connection, Event};
use crate::settings::HttpSettings;

fn request(raw: &str) -> Box<Request> {
    let mut m = Connection::new(HttpSettings::default(), 0);
    m.on_read(raw.as_bytes(), 0);
    match m.poll(0, "D") {
        Some(Event::Request(r)) => r,
        other => panic!("{other:?}"),
    }
}

struct Fixture {
    vars: Variables,
    idx: Vec<VarIndex>,
    loc: LocConf,
    caps: Captures,
}

fn fixture(names: &[&str]) -> Fixture {
    let mut vars = Variables::default();
    let idx = names.iter().map(|n| vars.index(n).unwrap()).collect();
    vars.define_user("mine").unwrap();
    vars.resolve().unwrap();
    Fixture {
        vars,
        idx,
        loc: crate::conf::HttpConf::server_loc(&Default::default())
            .as_ref()
            .clone(),
        caps: Captures::new(),
    }
}

fn values(
    f: &Fixture,
    req: &Request,
    uri: &str,
    args: &str,
    conn: &ConnInfo,
) -> Vec<Option<String>> {
    let env = VarEnv {
        req,
        uri: uri.as_bytes(),
        args: args.as_bytes(),
        caps: &f.caps,
        cap_src: b"",
        loc: &f.loc,
        server: None,
        conn,
        resp: None,
        status: 404,
        body_bytes_sent: 7,
        bytes_sent: 100,
        start: 1000,
        now: 2234,
        unix_ms: 1_700_000_000_123,
        as_get: false,
        args_set: false,
        request_line: None,
        upstream: None,
        body: None,
    };
    let mut cache = VarCache::default();
    cache.reset(f.vars.len());
    f.idx
        .iter()
        .map(|&i| {
            cache
                .value(&f.vars, i, &env)
                .map(|v| String::from_utf8_lossy(v).into_owned())
        })
        .collect()
}

#[test]
fn request_variables() {
    let f = fixture(&[
        "uri",
        "request_uri",
        "args",
        "arg_b",
        "arg_zz",
        "is_args",
        "host",
        "http_user_agent",
        "http_x_two",
        "cookie_sid",
        "request_method",
        "server_protocol",
        "scheme",
        "https",
        "status",
        "body_bytes_sent",
        "request_time",
        "msec",
        "remote_addr",
        "remote_port",
        "server_port",
        "request",
        "request_length",
        "connection",
        "time_iso8601",
    ]);
    let raw = "GET /a%20b?x=1&B=2 HTTP/1.1\r\nHost: Example.COM:8080\r\nUser-Agent: t/1\r\n\
               X-Two: a\r\nX-Two: b\r\nCookie: k=v; sid=s1\r\n\r\n";
    let req = request(raw);
    let conn = ConnInfo {
        peer: Some("10.0.0.7:5555".parse().unwrap()),
        realip_original: None,
        local: Some("127.0.0.1:8080".parse().unwrap()),
        number: 42,
        requests: 1,
        tls: false,
        ssl: None,
    };
    let v = values(&f, &req, "/a b", "x=1&B=2", &conn);
    let head_len = raw.len().to_string();
    let want = [
        Some("/a b"),
        Some("/a%20b?x=1&B=2"),
        Some("x=1&B=2"),
        Some("2"),
        None,
        Some("?"),
        Some("example.com"),
        Some("t/1"),
        Some("a, b"),
        Some("s1"),
        Some("GET"),
        Some("HTTP/1.1"),
        Some("http"),
        Some(""),
        Some("404"),
        Some("7"),
        Some("1.234"),
        Some("1700000000.123"),
        Some("10.0.0.7"),
        Some("5555"),
        Some("8080"),
        Some("GET /a%20b?x=1&B=2 HTTP/1.1"),
        Some(head_len.as_str()),
        Some("42"),
        Some("2023-11-14T22:13:20+00:00"),
    ];
    for (i, (got, want)) in v.iter().zip(want).enumerate() {
        assert_eq!(got.as_deref(), want, "variable {i}");
    }
    // The connection's TLS flag decides $scheme and $https.
    let tls = ConnInfo { tls: true, ..conn };
    let v = values(&f, &req, "/", "", &tls);
    assert_eq!(v[12].as_deref(), Some("https"));
    assert_eq!(v[13].as_deref(), Some("on"));
    // No arguments: $args is not found, $is_args empty.
    assert_eq!(v[2], None);
    assert_eq!(v[5].as_deref(), Some(""));
}

#[test]
fn set_values_and_the_cache() {
    let f = fixture(&["http_user_agent", "mine"]);
    let req = request("GET / HTTP/1.1\r\nHost: h\r\nUser-Agent: ua\r\n\r\n");
    let conn = ConnInfo::default();
    let env = VarEnv {
        req: &req,
        uri: b"/",
        args: b"",
        caps: &f.caps,
        cap_src: b"",
        loc: &f.loc,
        server: None,
        conn: &conn,
        resp: None,
        status: 0,
        body_bytes_sent: 0,
        bytes_sent: 0,
        start: 0,
        now: 0,
        unix_ms: 0,
        as_get: false,
        args_set: false,
        request_line: None,
        upstream: None,
        body: None,
    };
    let mut c = VarCache::default();
    c.reset(f.vars.len());
    let mine = f.vars.define_user_index("mine");
    assert_eq!(c.value(&f.vars, mine, &env), None, "unset");
    c.set(mine, b"one");
    c.set(mine, b"two");
    assert_eq!(c.value(&f.vars, mine, &env), Some(&b"two"[..]));
    assert_eq!(c.value(&f.vars, f.idx[0], &env), Some(&b"ua"[..]));
    // Cached: a second read gives the same bytes without recomputing.
    let before = c.buf.len();
    assert_eq!(c.value(&f.vars, f.idx[0], &env), Some(&b"ua"[..]));
    assert_eq!(c.buf.len(), before);
    c.reset(f.vars.len());
    assert_eq!(c.value(&f.vars, mine, &env), None, "a new request forgets");
}
