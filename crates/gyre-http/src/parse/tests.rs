use super::*;

#[test]
fn request_lines() {
    let ok = [
        ("GET / HTTP/1.1", "GET", "/", 1),
        ("GET  /  HTTP/1.1", "GET", "/", 1),
        ("FOO /x HTTP/1.0", "FOO", "/x", 0),
        ("GET / HTTP/1.2", "GET", "/", 2),
        ("GET / HTTP/1.999 ", "GET", "/", 999),
        ("M-_ http://x HTTP/1.1\r", "M-_", "http://x", 1),
    ];
    for (l, m, t, minor) in ok {
        let r = parse_request_line(l.as_bytes(), true).unwrap().unwrap();
        let (ts, te) = r.target;
        assert_eq!(
            (&l[..r.method_end], &l[ts..te], r.version.minor),
            (m, t, minor)
        );
    }
    let bad = [
        ("get / HTTP/1.1", 400),
        ("GET / HTTP/2.0", 505),
        ("GET / HTTP/3", 505),
        ("GET / HTTP/10.1", 505),
        ("GET / HTTP/0.9", 400),
        ("GET / HTTP/1.1000", 400),
        ("GET / http/1.1", 400),
        ("GET /", 400),
        ("GET / ", 400),
        ("GET\t/ HTTP/1.1", 400),
        ("GET * HTTP/1.1", 400),
        ("GET /a\x01 HTTP/1.1", 400),
        ("GET /a\rb HTTP/1.1", 400),
        ("GET / HTTP/1.", 400),
        ("GET / HTTP/1.1x", 400),
        (" GET / HTTP/1.1", 400),
    ];
    for (l, e) in bad {
        assert_eq!(parse_request_line(l.as_bytes(), true), Err(e), "{l:?}");
    }
    // Prefixes of good lines are never errors.
    let l = b"GET /index.html HTTP/1.1\r";
    for i in 0..l.len() {
        assert_eq!(parse_request_line(&l[..i], false), Ok(None));
    }
    assert_eq!(parse_request_line(b"G\x01", false), Err(400));
    assert_eq!(parse_request_line(b"GET / HTTP/2", false), Err(505));
}

#[test]
fn header_lines() {
    let st = HttpSettings::default();
    let split = |l: &'static [u8]| {
        let h = parse_header_line(l, &st).unwrap();
        assert!(!h.ignored);
        (&l[..h.name_end], &l[h.value.0..h.value.1])
    };
    assert_eq!(split(b"Host:   x  \r"), (&b"Host"[..], &b"x"[..]));
    assert_eq!(split(b"Foobar"), (&b"Foobar"[..], &b""[..]));
    assert_eq!(split(b"A:   "), (&b"A"[..], &b""[..]));
    assert!(parse_header_line(b"Foo: a\x01b", &st).is_ok());
    // Ignored lines, and what nginx quotes of them (r->header_end).
    for (l, quoted) in [
        (&b"Foo_bar: 1"[..], &b"Foo_bar: 1"[..]),
        ("F\u{e9}: 1  ".as_bytes(), "F\u{e9}: 1".as_bytes()),
        (b"C@D:  \r", b"C@D:  "),
        (b"E@F", b"E@F"),
    ] {
        let h = parse_header_line(l, &st).unwrap();
        assert!(h.ignored, "{l:?}");
        assert_eq!(&l[..h.text_end(l)], quoted);
    }
    let with_underscores = HttpSettings {
        underscores_in_headers: true,
        ..HttpSettings::default()
    };
    assert!(
        !parse_header_line(b"Foo_bar: 1", &with_underscores)
            .unwrap()
            .ignored
    );
    let kept = HttpSettings {
        ignore_invalid_headers: false,
        ..HttpSettings::default()
    };
    assert!(!parse_header_line(b"F@o: 1", &kept).unwrap().ignored);
    // Refused lines stop where nginx's parser does.
    for (bad, at) in [
        (&b"Foo : bar"[..], 3),
        (b" b", 0),
        (b"\tb", 0),
        (b": b", 0),
        (b"Foo: a\x00b", 6),
        (b"F\x01o: x", 1),
        (b"Foo: a\rb", 6),
        (b"Foo: a  \rb", 6),
        (b"Foo: \rb", 5),
    ] {
        assert_eq!(parse_header_line(bad, &st), Err(BadHeader(at)), "{bad:?}");
    }
}

#[test]
fn hosts() {
    let ok = [
        ("X", "x"),
        ("x.", "x"),
        ("X:8080", "x"),
        ("[::1]:80", "[::1]"),
        ("x:abc", "x"),
        ("-x", "-x"),
        ("x_y", "x_y"),
    ];
    for (i, o) in ok {
        let mut out = Vec::new();
        let len = validate_host(i.as_bytes()).unwrap();
        push_host(&mut out, &i.as_bytes()[..len]);
        assert_eq!(out, o.as_bytes(), "{i}");
    }
    for bad in ["", "x..y", "a b", "x/y", ".", ":80", "a\x00"] {
        assert_eq!(validate_host(bad.as_bytes()), None, "{bad:?}");
    }
}

/// One parser over several heads (a kept-alive connection): the Host
/// memo answers only for the very bytes it checked, so a bad Host
/// after a good one, or a good one after a bad one, gets its own
/// verdict.
#[test]
fn the_host_memo_gives_each_host_its_own_verdict() {
    let st = HttpSettings::default();
    let mut p = HeadParser::new(&st);
    let mut req = Request::default();
    let mut head = |p: &mut HeadParser, host: &str| {
        p.reset(&st);
        let buf = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes();
        match p.advance(&buf, &st, &mut req) {
            HeadStatus::Complete(_) => Ok(req.host().map(str::to_string)),
            HeadStatus::Error(e) => Err(e),
            HeadStatus::Incomplete => panic!("incomplete"),
        }
    };
    for _ in 0..2 {
        assert_eq!(head(&mut p, "A.b:80"), Ok(Some("a.b".into())));
        assert_eq!(head(&mut p, "a..b"), Err(400));
        assert_eq!(head(&mut p, "A.b:80"), Ok(Some("a.b".into())));
        assert_eq!(head(&mut p, "a.b."), Ok(Some("a.b".into())));
        assert_eq!(head(&mut p, "a.b/"), Err(400));
    }
    let long = "h".repeat(HOST_MEMO_MAX + 1);
    assert_eq!(head(&mut p, &long), Ok(Some(long.clone())));
    assert_eq!(head(&mut p, &long), Ok(Some(long.clone())));
}

#[test]
fn content_lengths() {
    assert_eq!(parse_content_length(b"01"), Some(1));
    assert_eq!(
        parse_content_length(b"9223372036854775807"),
        Some(i64::MAX as u64)
    );
    for bad in [
        &b""[..],
        b"-1",
        b"+1",
        b"0x1",
        b"1 1",
        b"1, 1",
        b"1\t",
        b"9223372036854775808",
        b"99999999999999999999999",
    ] {
        assert_eq!(parse_content_length(bad), None, "{bad:?}");
    }
}
