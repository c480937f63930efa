//! The access log end to end with the real binary: nginx's `combined`
//! format, one line per request, flushed within a second or so; `off` at
//! http and location level. nginx 1.22 is the reference.
#![allow(clippy::unwrap_used)]

mod util;

use std::time::Duration;

use util::http::{raw_request, start_http, Running};
use util::{wait_for, Prefix};

const INDEX: &str = "access-log index 5d1e\n";

fn fixture(name: &str, http_extra: &str) -> (Running, Prefix) {
    let p = Prefix::new(name);
    p.write("html/index.html", INDEX);
    p.write("html/quiet/x", "quiet\n");
    let extra = http_extra.to_string();
    let r = start_http(&p, 1, move |port| {
        format!(
            "{extra}
            server {{
                listen 127.0.0.1:{port};
                root html;
                location /quiet/ {{ access_log off; }}
            }}"
        )
    });
    (r, p)
}

/// Checks one `combined` line and returns (request, status, bytes, referer,
/// user agent):
/// `127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET / HTTP/1.1" 200 2326 "-" "ua"`.
fn parse_combined(line: &str) -> Option<(String, u16, u64, String, String)> {
    let rest = line.strip_prefix("127.0.0.1 - - [")?;
    let (time, rest) = rest.split_once("] \"")?;
    let t = time.as_bytes();
    let shape = t.len() == 26
        && t[..2].iter().all(u8::is_ascii_digit)
        && t[2] == b'/'
        && t[3].is_ascii_uppercase()
        && t[4..6].iter().all(u8::is_ascii_lowercase)
        && t[6] == b'/'
        && t[7..11].iter().all(u8::is_ascii_digit)
        && t[11] == b':'
        && t[14] == b':'
        && t[17] == b':'
        && t[20] == b' '
        && (t[21] == b'+' || t[21] == b'-')
        && t[22..].iter().all(u8::is_ascii_digit);
    if !shape {
        return None;
    }
    let (request, rest) = rest.split_once("\" ")?;
    let (status, rest) = rest.split_once(' ')?;
    let (bytes, rest) = rest.split_once(" \"")?;
    let (referer, rest) = rest.split_once("\" \"")?;
    let ua = rest.strip_suffix('"')?;
    Some((
        request.to_string(),
        status.parse().ok()?,
        bytes.parse().ok()?,
        referer.to_string(),
        ua.to_string(),
    ))
}

#[test]
fn combined_line_per_request() {
    let (r, p) = fixture("al-combined", "access_log logs/access.log;");
    let ua = "gyre-e2e/1.0 (test)";
    let get = |line: &str| {
        raw_request(
            r.port,
            &format!(
                "{line}\r\nHost: t\r\nUser-Agent: {ua}\r\nReferer: http://ref.test/p\r\nConnection: close\r\n\r\n"
            ),
        )
    };
    let ok = get("GET /index.html?x=1 HTTP/1.1");
    assert_eq!(ok.status, 200);
    let missing = get("GET /missing HTTP/1.1");
    assert_eq!(missing.status, 404);
    assert_eq!(get("HEAD /index.html HTTP/1.1").status, 200);
    assert_eq!(get("GET /quiet/x HTTP/1.1").status, 200);
    let quoted = get("GET /say\"hi HTTP/1.1");
    // Without User-Agent and Referer.
    let bare = raw_request(
        r.port,
        "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(bare.status, 200);

    let path = p.path("logs/access.log");
    let read = || std::fs::read_to_string(&path).unwrap_or_default();
    // Buffered, flushed at least once a second.
    assert!(
        wait_for(Duration::from_secs(3), || read().lines().count() >= 6),
        "access log after 3 s: {:?}",
        read()
    );
    let text = read();
    let lines: Vec<_> = text
        .lines()
        .map(|l| parse_combined(l).unwrap_or_else(|| panic!("not combined: {l:?}")))
        .filter(|l| !l.0.contains("__probe__"))
        .collect();
    let want = vec![
        (
            "GET /index.html?x=1 HTTP/1.1".to_string(),
            200,
            INDEX.len() as u64,
            "http://ref.test/p".to_string(),
            ua.to_string(),
        ),
        (
            "GET /missing HTTP/1.1".into(),
            404,
            missing.body.len() as u64,
            "http://ref.test/p".into(),
            ua.into(),
        ),
        (
            "HEAD /index.html HTTP/1.1".into(),
            200,
            0,
            "http://ref.test/p".into(),
            ua.into(),
        ),
        (
            "GET /say\\x22hi HTTP/1.1".into(),
            quoted.status,
            quoted.body.len() as u64,
            "http://ref.test/p".into(),
            ua.into(),
        ),
        (
            "GET / HTTP/1.1".into(),
            200,
            INDEX.len() as u64,
            "-".into(),
            "-".into(),
        ),
    ];
    assert_eq!(lines, want, "{text}");
}

#[test]
fn access_log_off_writes_no_file() {
    let (r, p) = fixture("al-off", "access_log off;");
    for _ in 0..3 {
        let resp = raw_request(
            r.port,
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(resp.status, 200);
    }
    std::thread::sleep(Duration::from_millis(1500));
    let logs: Vec<_> = std::fs::read_dir(p.path("logs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!p.path("logs/access.log").exists(), "logs/ has {logs:?}");
}

#[test]
fn access_log_is_on_by_default() {
    let (r, p) = fixture("al-default", "");
    let resp = raw_request(
        r.port,
        "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(resp.status, 200);
    let path = p.path("logs/access.log");
    assert!(
        wait_for(Duration::from_secs(3), || std::fs::read_to_string(&path)
            .unwrap_or_default()
            .contains("\"GET / HTTP/1.1\" 200 ")),
        "no logs/access.log line"
    );
}

#[test]
fn reopen_starts_a_new_access_log_after_rotation() {
    let (r, p) = fixture("al-reopen", "access_log logs/access.log;");
    let get = |path: &str| {
        raw_request(
            r.port,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
        )
    };
    let log = p.path("logs/access.log");
    let rotated = p.path("logs/access.log.1");
    assert_eq!(get("/?before").status, 200);
    let has = |path: &std::path::Path, what: &str| {
        std::fs::read_to_string(path).is_ok_and(|t| t.contains(what))
    };
    assert!(wait_for(Duration::from_secs(3), || has(&log, "/?before")));
    // logrotate: rename, then ask for a reopen.
    std::fs::rename(&log, &rotated).unwrap();
    assert!(r.server.signal("reopen").status.success());
    assert!(
        wait_for(Duration::from_secs(5), || log.exists()),
        "{}",
        r.log()
    );
    assert_eq!(get("/?after").status, 200);
    assert!(
        wait_for(Duration::from_secs(3), || has(&log, "/?after")),
        "new log: {:?}",
        std::fs::read_to_string(&log)
    );
    assert!(!has(&rotated, "/?after"), "the rotated file got new lines");
    assert!(has(&rotated, "/?before"));
}

/// `$remote_user` in the combined format: the user of an
/// `Authorization: Basic` header, whether or not the location checks it
/// (nginx's `ngx_http_auth_basic_user`), escaped; `-` without one or with
/// another scheme.
#[test]
fn combined_line_has_the_basic_auth_user() {
    let p = Prefix::new("al-user");
    p.write("html/index.html", INDEX);
    p.write("html/area/index.html", INDEX);
    // alice:secret as {PLAIN}.
    p.write("conf/users", "alice:{PLAIN}secret\n");
    let r = start_http(&p, 1, |port| {
        format!(
            "access_log logs/access.log;
            server {{
                listen 127.0.0.1:{port};
                root html;
                location /area/ {{ auth_basic \"area\"; auth_basic_user_file users; }}
            }}"
        )
    });
    let get = |path: &str, auth: &str| {
        raw_request(
            r.port,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n"),
        )
    };
    // "alice:secret", "bob:x" (no auth_basic there), "a\"b:c".
    assert_eq!(
        get("/area/", "Authorization: Basic YWxpY2U6c2VjcmV0\r\n").status,
        200
    );
    assert_eq!(
        get("/area/", "Authorization: Basic YWxpY2U6d3Jvbmc=\r\n").status,
        401
    );
    assert_eq!(get("/", "Authorization: Basic Ym9iOng=\r\n").status, 200);
    assert_eq!(get("/", "Authorization: Basic YSJiOmM=\r\n").status, 200);
    assert_eq!(get("/", "Authorization: Bearer abc\r\n").status, 200);
    let path = p.path("logs/access.log");
    let lines = || std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        wait_for(Duration::from_secs(3), || lines().lines().count() >= 6),
        "log: {}",
        lines()
    );
    let users: Vec<String> = lines()
        .lines()
        .filter(|l| !l.contains("__probe__"))
        .map(|l| l.split(' ').nth(2).unwrap_or("").to_string())
        .collect();
    assert_eq!(
        users,
        ["alice", "alice", "bob", "a\\x22b", "-"],
        "{}",
        lines()
    );
}
