//! `limit_except` against the real nginx: the same `http {}` text and the
//! same raw requests (each method, allowed and limited, with and without
//! credentials) go to gyre and to nginx 1.22; statuses, `WWW-Authenticate`
//! and pages must agree, and the block's `access_log` must get the same
//! lines. Configuration errors are nginx's words.
//!
//! nginx is found at `$NGINX` or `/usr/sbin/nginx`; without it the
//! differential part prints why it skipped.
#![allow(clippy::unwrap_used)]

mod util;

use std::time::Duration;

use util::http::{start_http, Raw};
use util::nginx::nginx_bin;
use util::Prefix;

fn http_conf(port: u16) -> String {
    format!(
        "server {{
           listen 127.0.0.1:{port};
           server_tokens off;
           root html;
           access_log off;
           location /ro/ {{
             limit_except GET {{ allow 10.9.9.9; deny all; access_log logs/lmt.log; }}
           }}
           location /auth/ {{
             limit_except GET POST {{ auth_basic \"area\"; auth_basic_user_file htpasswd; }}
           }}
           location /ret {{ limit_except GET {{ deny all; }} return 200 \"ret\"; }}
           location /any/ {{ limit_except get {{ allow 127.0.0.1; deny all; }} }}
         }}"
    )
}

fn ask(port: u16, req: &str) -> (u16, Option<String>, String) {
    let mut r = Raw::connect(port);
    r.send(req.as_bytes());
    let resp = r.response(req.starts_with("HEAD "));
    (
        resp.status,
        resp.header("WWW-Authenticate").map(str::to_string),
        resp.text()
            .replace("<center>nginx</center>", "<center>gyre</center>"),
    )
}

fn requests() -> Vec<String> {
    let mut v = Vec::new();
    for path in ["/ro/f.txt", "/auth/f.txt", "/ret", "/any/f.txt"] {
        for m in ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "FOO"] {
            v.push(format!(
                "{m} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            ));
        }
        // With credentials (user:pass) and wrong ones.
        for auth in ["dXNlcjpwYXNz", "dXNlcjp3cm9uZw=="] {
            v.push(format!(
                "PUT {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Basic {auth}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            ));
        }
    }
    v
}

#[test]
fn limit_except_matches_nginx() {
    let Some(bin) = nginx_bin() else {
        println!("skipped: no nginx binary (set NGINX or install nginx)");
        return;
    };
    let Some(ng) = util::nginx::start_http(&bin, "lmt-nginx", &http_conf) else {
        println!("skipped: nginx did not start");
        return;
    };
    let p = Prefix::new("lmt-gyre");
    for d in [&p.dir, &ng.prefix.dir] {
        for f in ["ro/f.txt", "auth/f.txt", "any/f.txt"] {
            let path = d.join("html").join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "file\n").unwrap();
        }
        std::fs::write(d.join("conf/htpasswd"), "user:{PLAIN}pass\n").unwrap();
    }
    let g = start_http(&p, 1, http_conf);
    let mut diffs = Vec::new();
    for req in requests() {
        let want = ask(ng.port, &req);
        let got = ask(g.port, &req);
        if want != got {
            diffs.push(format!(
                "{}:\n  nginx {want:?}\n  gyre  {got:?}",
                req.lines().next().unwrap_or("")
            ));
        }
    }
    // The block's access_log has the limited methods' lines only.
    let count = |path: std::path::PathBuf| {
        let end = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let n = std::fs::read_to_string(&path)
                .unwrap_or_default()
                .lines()
                .count();
            if n >= 8 || std::time::Instant::now() > end {
                return n;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let (a, b) = (
        count(ng.prefix.path("logs/lmt.log")),
        count(p.path("logs/lmt.log")),
    );
    if a != b {
        diffs.push(format!("lmt.log lines: nginx {a}, gyre {b}"));
    }
    assert!(diffs.is_empty(), "{}\n{}", diffs.join("\n"), g.log());
}

#[test]
fn limit_except_errors_are_nginx_words() {
    let cases = [
        ("limit_except FOO { deny all; }", "invalid method \"FOO\""),
        (
            "limit_except GET { deny all; } limit_except POST { deny all; }",
            "\"limit_except\" directive is duplicate",
        ),
        (
            "limit_except GET { return 403; }",
            "\"return\" directive is not allowed here",
        ),
        (
            "limit_except GET { root /tmp; }",
            "\"root\" directive is not allowed here",
        ),
        (
            "limit_except GET { proxy_pass http://127.0.0.1:1; }",
            "\"proxy_pass\" inside \"limit_except\" is not supported by gyre",
        ),
    ];
    for (body, want) in cases {
        let p = Prefix::new("lmt-err");
        p.conf(&format!(
            "events {{}}\nhttp {{ server {{ listen 127.0.0.1:1; location / {{ {body} }} }} }}\n"
        ));
        let out = p.run(&["-t"]);
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{body}: accepted");
        assert!(text.contains(want), "{body}: {text}");
    }
    let p = Prefix::new("lmt-err");
    p.conf("events {}\nhttp { server { listen 127.0.0.1:1; limit_except GET { deny all; } } }\n");
    let out = p.run(&["-t"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("\"limit_except\" directive is not allowed here"),
        "{text}"
    );
}
