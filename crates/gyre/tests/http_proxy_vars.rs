//! `proxy_pass` with variables on the real binary, and against nginx 1.22
//! with the same configuration text and requests: an upstream block named
//! by the evaluated host, an address literal connected to directly, a URI
//! part replacing the whole URI, the scheme from a variable, and without a
//! `resolver` nginx's 502 and `no resolver defined to resolve NAME`, its
//! 500s for a bad prefix or port; compared: status, what the backend
//! received (request line, Host), and the `[error]` lines. The nginx half
//! is skipped with a message when nginx is not installed.
#![allow(clippy::unwrap_used)]

mod proxy_backend;
mod util;

use std::time::Duration;

use proxy_backend::echo_backend;
use util::http::{start_http, Raw};
use util::nginx::nginx_bin;
use util::Prefix;

fn http(port: u16, b: u16) -> String {
    format!(
        "upstream grp {{ server 127.0.0.1:{b}; }}
        server {{ listen 127.0.0.1:{port};
            location /v/ {{ proxy_pass http://$arg_h; }}
            location /u/ {{ proxy_pass http://$arg_h/fixed$is_args$args; }}
            location /q/ {{ proxy_pass http://$arg_h?only; }}
            location /s/ {{ proxy_pass $arg_s://grp; }}
            location ~ ^/re/(.*)$ {{ proxy_pass http://grp/r/$1; }}
            location /static/ {{ proxy_pass http://grp; }}
        }}"
    )
}

/// The requests, `{B}` standing for the backend's port.
const CASES: &[&str] = &[
    "/v/x?h=grp",
    "/v/x?h=127.0.0.1:{B}",
    "/v/x?h=nohost.invalid",
    "/v/x?h=",
    "/v/x?h=grp:80",
    "/v/x?h=localhost:{B}",
    "/v/x?h=127.0.0.1:0",
    "/u/x?h=grp&a=1",
    "/q/x?h=grp",
    "/s/x?s=http",
    "/s/x?s=ftp",
    "/re/abc?z=1",
    "/static/y?k",
];

/// What one request showed: status, and for a proxied answer what the
/// backend received.
fn run(port: u16, b: &proxy_backend::Backend, bport: u16) -> Vec<String> {
    let mut out = Vec::new();
    for case in CASES {
        let path = case.replace("{B}", &bport.to_string());
        let before = b.got.lock().unwrap().len();
        let mut c = Raw::connect(port);
        c.send(
            format!("GET {path} HTTP/1.1\r\nHost: front\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        let r = c.response(false);
        let got = b.got.lock().unwrap();
        let seen = if got.len() > before {
            let g = got.last().unwrap();
            format!("{} host={}", g.line, g.header("host").unwrap_or("-"))
                .replace(&bport.to_string(), "B")
        } else {
            "-".to_string()
        };
        out.push(format!("{case} -> {} {seen}", r.status));
    }
    out
}

/// The `[error]` lines' messages and context, the connection number cut.
fn errors(log: &str, bport: u16) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("[error]") && !l.contains("__probe__"))
        .filter_map(|l| l.split_once(": *").map(|(_, m)| m))
        .filter_map(|m| m.split_once(' ').map(|(_, m)| m))
        .map(|m| m.replace(&bport.to_string(), "B"))
        .collect()
}

#[test]
fn proxy_pass_with_variables_matches_nginx() {
    let b = echo_backend();
    let bport = b.port;
    let p = Prefix::new("proxy-vars");
    let g = start_http(&p, 1, move |port| http(port, bport));
    let gyre = run(g.port, &b, bport);
    // What gyre does on its own, nginx or not.
    let want = [
        "/v/x?h=grp -> 200 GET /v/x?h=grp HTTP/1.0 host=grp",
        "/v/x?h=127.0.0.1:{B} -> 200 GET /v/x?h=127.0.0.1:B HTTP/1.0 host=127.0.0.1:B",
        "/v/x?h=nohost.invalid -> 502 -",
        "/v/x?h= -> 500 -",
        "/v/x?h=grp:80 -> 502 -",
        "/v/x?h=localhost:{B} -> 502 -",
        "/v/x?h=127.0.0.1:0 -> 500 -",
        "/u/x?h=grp&a=1 -> 200 GET /fixed?h=grp&a=1 HTTP/1.0 host=grp",
        "/q/x?h=grp -> 200 GET /?only HTTP/1.0 host=grp",
        "/s/x?s=http -> 200 GET /s/x?s=http HTTP/1.0 host=grp",
        "/s/x?s=ftp -> 500 -",
        "/re/abc?z=1 -> 200 GET /r/abc HTTP/1.0 host=grp",
        "/static/y?k -> 200 GET /static/y?k HTTP/1.0 host=grp",
    ];
    assert_eq!(gyre, want);
    assert!(g.server.logged("ftp://grp", Duration::from_secs(5)));
    let gyre_errors = errors(&g.log(), bport);
    assert!(
        gyre_errors.iter().any(|e| e.starts_with(
            "no resolver defined to resolve nohost.invalid, client: 127.0.0.1, server: , request: \"GET /v/x?h=nohost.invalid HTTP/1.1\", host: \"front\""
        )),
        "{gyre_errors:#?}"
    );
    let Some(bin) = nginx_bin() else {
        println!("skipped the nginx half: nginx not installed");
        return;
    };
    let Some(n) = util::nginx::start_http(&bin, "proxy-vars-nginx", &move |port| http(port, bport))
    else {
        println!("skipped the nginx half: nginx did not start");
        return;
    };
    let nginx = run(n.port, &b, bport);
    assert_eq!(gyre, nginx);
    // The last case's answer is logged by then.
    std::thread::sleep(Duration::from_millis(200));
    let log = std::fs::read_to_string(n.error_log()).unwrap_or_default();
    assert_eq!(gyre_errors, errors(&log, bport));
}
