//! Differential test against the real nginx: the same raw bytes go to gyre
//! and to nginx 1.22 (Debian's package) serving the same directory with the
//! same configuration text, and the answers must agree: status, the
//! close-or-keep decision, Content-Length and Content-Type, and the body with
//! the server's name in error pages normalised ("nginx" → "gyre").
//!
//! nginx is found at `$NGINX` or `/usr/sbin/nginx`; without it the test
//! prints why it skipped (`apt-get install nginx` enables it).
#![allow(clippy::unwrap_used)]

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use util::http::{start_http, Raw, Running};
use util::nginx::{nginx_bin, Nginx, Site};
use util::Prefix;

/// The location setup both servers get (inside `server {}`).
const LOCATIONS: &str = "
    location = /ret { return 200 \"fixed text\\n\"; }
    location /redir { return 302 http://example.com/x; }
    location /gone { return 410; }
";

fn start_nginx(bin: &Path, root: &Path) -> Option<Nginx> {
    start_nginx_with(bin, root, "", LOCATIONS)
}

/// nginx with `http_extra` in `http {}` and `server_body` in its server.
fn start_nginx_with(bin: &Path, root: &Path, http_extra: &str, server_body: &str) -> Option<Nginx> {
    let site = Site {
        root,
        http: http_extra,
        server: server_body,
    };
    util::nginx::start(bin, "diff-nginx", &site)
}

/// What is compared of one answer.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    content_type: Option<String>,
    content_length: Option<String>,
    body: String,
    /// The server closed the connection after the response.
    closed: bool,
}

/// Sends `input`, reads one response (the body by Content-Length, the head
/// only for HEAD), then whether the server closes within a moment.
fn ask(port: u16, input: &[u8], head_only: bool) -> Answer {
    let mut r = Raw::connect(port);
    // A server may refuse before it has read everything (big heads).
    let _ = r.try_send(input);
    let resp = match r.try_response(head_only) {
        Ok(Some(resp)) => resp,
        // No response at all (e.g. nginx's 444 or a silent close).
        _ => {
            return Answer {
                status: 0,
                content_type: None,
                content_length: None,
                body: String::from_utf8_lossy(&r.buf).into_owned(),
                closed: true,
            }
        }
    };
    let closed = r.closed_within(Duration::from_millis(100))
        || resp
            .header("Connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    // Error pages are one byte longer with "nginx" than with "gyre".
    let signed_page = resp.text().contains("<center>nginx</center>");
    Answer {
        status: resp.status,
        content_type: resp.header("Content-Type").map(str::to_string),
        content_length: resp.header("Content-Length").map(|v| {
            let n: i64 = v.parse().unwrap_or(-1);
            (n - i64::from(signed_page)).to_string()
        }),
        body: resp
            .text()
            .replace("<center>nginx</center>", "<center>gyre</center>"),
        closed,
    }
}

/// (name, raw request). Each goes on a fresh connection.
fn cases() -> Vec<(&'static str, Vec<u8>)> {
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(9000));
    let big_header = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "b".repeat(9000)
    );
    let many_headers = format!(
        "GET / HTTP/1.1\r\nHost: x\r\n{}\r\n",
        (0..40)
            .map(|i| format!("X-{i}: {}\r\n", "c".repeat(1000)))
            .collect::<String>()
    );
    let mut v: Vec<(&'static str, Vec<u8>)> = vec![
        ("index", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("file", b"GET /page.html HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("text file", b"GET /t.txt HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("unknown type", b"GET /blob.zzz HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("head", b"HEAD /page.html HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("http/1.0", b"GET /page.html HTTP/1.0\r\n\r\n".to_vec()),
        ("1.0 keep-alive", b"GET /page.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".to_vec()),
        ("close", b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec()),
        ("missing", b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("dir without slash", b"GET /sub HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("dir with index", b"GET /sub/ HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("dir without index", b"GET /empty/ HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("dot dot", b"GET /sub/../page.html HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("escaping root", b"GET /../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("encoded escape", b"GET /%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("encoded name", b"GET /pa%67e.html HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("bad escape", b"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("nul", b"GET /a%00b HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("double slash", b"GET //page.html HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("query", b"GET /page.html?a=1&b HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("absolute uri", b"GET http://other/page.html HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("post to file", b"POST /page.html HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc".to_vec()),
        ("delete", b"DELETE /page.html HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("trace", b"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("lowercase method", b"get / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("no host 1.1", b"GET / HTTP/1.1\r\n\r\n".to_vec()),
        ("two hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".to_vec()),
        ("bad host", b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n".to_vec()),
        ("http/2.0", b"GET / HTTP/2.0\r\nHost: x\r\n\r\n".to_vec()),
        ("http/1.9", b"GET / HTTP/1.9\r\nHost: x\r\n\r\n".to_vec()),
        ("garbage", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec()),
        ("space in header name", b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n".to_vec()),
        ("cl and te", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec()),
        ("bad content-length", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n".to_vec()),
        ("two content-lengths", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na".to_vec()),
        ("unknown te", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n".to_vec()),
        ("te on 1.0", b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec()),
        ("bad chunk", b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec()),
        ("too large body", b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n".to_vec()),
        ("range", b"GET /page.html HTTP/1.1\r\nHost: x\r\nRange: bytes=0-3\r\n\r\n".to_vec()),
        ("suffix range", b"GET /page.html HTTP/1.1\r\nHost: x\r\nRange: bytes=-4\r\n\r\n".to_vec()),
        ("unsatisfiable range", b"GET /page.html HTTP/1.1\r\nHost: x\r\nRange: bytes=999-\r\n\r\n".to_vec()),
        ("bad range", b"GET /page.html HTTP/1.1\r\nHost: x\r\nRange: pages=1\r\n\r\n".to_vec()),
        ("return text", b"GET /ret HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("return head", b"HEAD /ret HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("return redirect", b"GET /redir HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("return code only", b"GET /gone HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("leading empty lines", b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("bare lf", b"GET / HTTP/1.1\nHost: x\n\n".to_vec()),
    ];
    v.push(("long uri", long_uri.into_bytes()));
    v.push(("big header", big_header.into_bytes()));
    v.push(("many headers", many_headers.into_bytes()));
    v.push((
        "too huge cookie",
        format!(
            "GET / HTTP/1.1\r\nHost: x\r\nCookie: sid={}\r\n\r\n",
            "c".repeat(9000)
        )
        .into_bytes(),
    ));
    v
}

#[test]
fn gyre_answers_like_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the nginx differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let p = Prefix::new("diff-gyre");
    p.write("html/index.html", "<p>index</p>\n");
    p.write("html/page.html", "<html>a page</html>\n");
    p.write("html/t.txt", "plain text\n");
    p.write("html/blob.zzz", "zzz\n");
    p.write("html/sub/index.html", "sub index\n");
    std::fs::create_dir_all(p.path("html/empty")).unwrap();
    let root = p.path("html");
    let Some(nginx) = start_nginx(&bin, &root) else {
        eprintln!(
            "skipping the nginx differential test: {} did not start",
            bin.display()
        );
        return;
    };
    let root_s = root.display().to_string();
    let gyre: Running = start_http(&p, 1, move |port| {
        format!("access_log off;\nserver_tokens off;\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{LOCATIONS}\n}}")
    });
    let mut differences = Vec::new();
    for (name, input) in cases() {
        let head_only = input.starts_with(b"HEAD ");
        let want = ask(nginx.port, &input, head_only);
        let got = ask(gyre.port, &input, head_only);
        if want != got {
            differences.push(format!("{name}:\n  nginx {want:?}\n  gyre  {got:?}"));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} cases differ:\n{}",
        differences.len(),
        cases().len(),
        differences.join("\n")
    );
}

/// A site configured the way real ones are: an SPA fallback, a redirect to
/// https, regex locations for assets, rewrites, `if`, `set`, named
/// locations, error pages, nested and internal locations.
const SITE: &str = r#"
    location / { try_files $uri $uri/ /index.html; }
    location ~* \.(css|js)$ { add_header X-Asset $1; expires 30d; }
    location ^~ /static/ { add_header X-Static yes; }
    location = /old { return 301 https://$host$request_uri; }
    location /legacy/ { rewrite ^/legacy/(.*)$ /page.html?from=$1 last; }
    location /b/ { rewrite ^/b/(.*)$ /t.txt break; }
    location /perm { rewrite ^/perm(.*)$ /moved$1 permanent; }
    location /setv { set $who "$arg_name-x"; return 200 "hi $who $request_method $uri $args$is_args.\n"; }
    location /cond {
        if ($arg_x = yes) { return 403; }
        if ($http_user_agent ~* curl) { return 418; }
        if (!-f $document_root/t.txt) { return 500; }
        return 200 "ok $http_x_thing $cookie_sid\n";
    }
    location /named { try_files /nope @fallback; }
    location @fallback { return 200 "fallback $uri $args\n"; }
    location /err { error_page 404 = @fallback; }
    location /err2 { error_page 404 /page.html; }
    location /err3 { error_page 404 =200 /t.txt; }
    location /loop { rewrite ^ /loop2 last; }
    location /loop2 { rewrite ^ /loop last; }
    location /nested/ {
        location ~ \.txt$ { return 200 "nested txt $uri\n"; }
        return 200 "nested\n";
    }
    location /int { internal; }
    location ~ ^/cap/(?<name>\w+)/(\d+)$ { return 200 "cap $name $2\n"; }
    location /tf404 { try_files $uri =404; }
    location /slow/ { limit_rate 4k; }
    location = /map { return 200 "$ua_class $site [$nomatch]\n"; }
    location = /exp-epoch { expires epoch; return 200 "e\n"; }
    location = /exp-neg { expires -1h; return 200 "n\n"; }
    location = /exp-max { expires max; return 200 "m\n"; }
    location = /exp-404 { expires 1h; }
    location /cs/ { charset utf-8; }
    location = /csret { charset utf-8; return 200 "x"; }
    location /ls/ { autoindex on; }
    location /lsj/ { autoindex on; autoindex_format json; }
    location /lsx/ { autoindex on; autoindex_format xml; }
    location /lse/ { autoindex on; autoindex_exact_size off; charset utf-8; }
    location /lsi/ { autoindex on; index t.txt; }
    location = /split { return 200 "$variant $geo_here $geo_arg\n"; }
    location /noetag/ { etag off; if_modified_since before; }
    location /imsoff/ { if_modified_since off; }
"#;

const SITE_HTTP: &str = "types { text/html html; text/css css; text/plain txt; }\n\
    map $http_user_agent $ua_class { default other; ~*bot robot; \"~^curl/\" curl; Exact/1 exact; }\n\
    map $host $site { hostnames; .example.com ex; *.b.org b; www.c.* c; default none; }\n\
    map $uri $nomatch { /x y; }\n\
    split_clients \"${arg_id}salt\" $variant { 0.5% tiny; 20% a; 30.25% b; * rest; }\n\
    geo $geo_here { default none; 127.0.0.0/8 loop; 127.0.0.1 exact; 10.0.0.0/8 ten; }\n\
    geo $arg_ip $geo_arg { default none; 10.0.0.0/8 ten; 10.1.0.0/16 ten-one; ::1 six; }\n\
    log_format t '$request_method $uri $args $status $body_bytes_sent \"$http_user_agent\" $request_length \"$request\" \"$http_referer\" $server_protocol';\n";

fn site_cases() -> Vec<(&'static str, Vec<u8>)> {
    let huge_args = format!(
        "GET /setv?name={} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(700)
    );
    let huge_cookie = format!(
        "GET /cond HTTP/1.1\r\nHost: x\r\nCookie: sid={}\r\n\r\n",
        "c".repeat(7000)
    );
    let mut v: Vec<(&'static str, Vec<u8>)> = vec![
        (
            "spa file",
            b"GET /page.html HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "spa route",
            b"GET /app/route/42 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        ("spa dir", b"GET /sub/ HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        (
            "spa route with args",
            b"GET /app/route?q=1 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            // Bytes that are not UTF-8 are logged as sent, escaped (\xFF).
            "raw bytes",
            b"GET /raw\xff\xfe?q=\xe9 HTTP/1.1\r\nHost: x\r\nUser-Agent: ua\xff\r\nReferer: r\xfe\r\n\r\n"
                .to_vec(),
        ),
        (
            "latin-1 file name, escaped",
            b"GET /caf%E9.txt HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "latin-1 file name, raw",
            b"GET /caf\xe9.txt?a=\xe9 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        ("spa root", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        (
            "asset regex",
            b"GET /s/app.CSS HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "asset missing",
            b"GET /none.js HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "noregex prefix",
            b"GET /static/x.css HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "https redirect",
            b"GET /old?a=1 HTTP/1.1\r\nHost: www.example.com\r\n\r\n".to_vec(),
        ),
        (
            "rewrite last",
            b"GET /legacy/abc?q=2 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "rewrite break",
            b"GET /b/whatever HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "rewrite permanent",
            b"GET /perm/x?y=1 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "set and vars",
            b"GET /setv?name=bob HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "set no args",
            b"GET /setv HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "head return",
            b"HEAD /setv HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "if eq",
            b"GET /cond?x=yes HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "if regex",
            b"GET /cond HTTP/1.1\r\nHost: x\r\nUser-Agent: Curl/8\r\n\r\n".to_vec(),
        ),
        (
            "if none",
            b"GET /cond HTTP/1.1\r\nHost: x\r\nX-Thing: t\r\nCookie: a=1; sid=s9\r\n\r\n".to_vec(),
        ),
        (
            "try_files named",
            b"GET /named?k=v HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "error_page named",
            b"GET /err/nothing HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "error_page uri",
            b"GET /err2/nothing HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "error_page =200",
            b"GET /err3/nothing HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "error_page post",
            b"POST /err2/nothing HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".to_vec(),
        ),
        (
            "redirect loop",
            b"GET /loop HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "nested regex",
            b"GET /nested/a.txt HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "nested prefix",
            b"GET /nested/a HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        ("internal", b"GET /int HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        (
            "named captures",
            b"GET /cap/blog/42 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "try_files =404",
            b"GET /tf404 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "limit_rate",
            b"GET /slow/big.txt HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "named direct",
            b"GET /@fallback HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "map default",
            b"GET /map HTTP/1.1\r\nHost: other.net\r\n\r\n".to_vec(),
        ),
        (
            "map regex",
            b"GET /map HTTP/1.1\r\nHost: a.example.com\r\nUser-Agent: GoogleBOT/2\r\n\r\n".to_vec(),
        ),
        (
            "map regex 2",
            b"GET /map HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8\r\n\r\n".to_vec(),
        ),
        (
            "map exact caseless",
            b"GET /map HTTP/1.1\r\nHost: x.b.org\r\nUser-Agent: exact/1\r\n\r\n".to_vec(),
        ),
        (
            "map tail wildcard",
            b"GET /map HTTP/1.1\r\nHost: www.c.io\r\n\r\n".to_vec(),
        ),
        (
            "expires epoch",
            b"GET /exp-epoch HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "expires negative",
            b"GET /exp-neg HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "expires max",
            b"GET /exp-max HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        (
            "expires on a 404",
            b"GET /exp-404 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        ("charset text", b"GET /cs/t.txt HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("charset css", b"GET /cs/s/app.CSS HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("charset 404", b"GET /cs/nope HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("charset return", b"GET /csret HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("etag off inm", b"GET /noetag/t.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n".to_vec()),
        ("ims before", b"GET /noetag/t.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n\r\n".to_vec()),
        ("ims exact future", b"GET /t.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n\r\n".to_vec()),
        ("ims off", b"GET /imsoff/t.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n\r\n".to_vec()),
        ("inm star and ims", b"GET /t.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n\r\n".to_vec()),
        // HTTP/1.0: nginx streams listings chunked to 1.1 clients.
        ("autoindex html", b"GET /ls/ HTTP/1.0\r\n\r\n".to_vec()),
        ("autoindex json", b"GET /lsj/ HTTP/1.0\r\n\r\n".to_vec()),
        ("autoindex xml", b"GET /lsx/ HTTP/1.0\r\n\r\n".to_vec()),
        ("autoindex short sizes", b"GET /lse/ HTTP/1.0\r\n\r\n".to_vec()),
        ("autoindex subdir", b"GET /ls/sub/ HTTP/1.0\r\n\r\n".to_vec()),
        ("autoindex index wins", b"GET /lsi/ HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("autoindex head", b"HEAD /lsj/ HTTP/1.0\r\n\r\n".to_vec()),
        ("geo ten-one", b"GET /split?ip=10.1.2.3 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("geo ten", b"GET /split?ip=10.9.2.3 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("geo v6", b"GET /split?ip=::1 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("geo junk", b"GET /split?ip=zz HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("range", b"GET /t.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=1-3\r\n\r\n".to_vec()),
        ("range unsatisfiable", b"GET /t.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=99-\r\n\r\n".to_vec()),
        ("inm star", b"GET /t.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n".to_vec()),
    ];
    v.push(("huge args", huge_args.into_bytes()));
    // Refused heads are logged in the location's own format too. (Not
    // yet compared: a head refused after its request line, whose
    // $request_length nginx counts up to the bad line.)
    v.push((
        "uri too long",
        format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "u".repeat(9000)).into_bytes(),
    ));
    // split_clients over many keys: the same MurmurHash2 split as nginx.
    for id in 0..40 {
        v.push((
            "split_clients",
            format!(
                "GET /split?id={id}x{} HTTP/1.1\r\nHost: x\r\n\r\n",
                id * 7919
            )
            .into_bytes(),
        ));
    }
    v.push(("huge cookie", huge_cookie.into_bytes()));
    v
}

/// The headers compared besides those of [`Answer`].
const SITE_HEADERS: &[&str] = &[
    "Location",
    "X-Asset",
    "X-Static",
    "Cache-Control",
    "ETag",
    "Last-Modified",
    "Accept-Ranges",
    "Content-Range",
];

fn headers_of(port: u16, input: &[u8], head_only: bool) -> Vec<Option<String>> {
    let mut r = Raw::connect(port);
    let _ = r.try_send(input);
    match r.try_response(head_only) {
        Ok(Some(resp)) => SITE_HEADERS
            .iter()
            .map(|h| {
                resp.header(h)
                    .map(|v| v.replace(&format!(":{port}/"), ":PORT/"))
            })
            .collect(),
        _ => vec![None; SITE_HEADERS.len()],
    }
}

#[test]
fn a_real_site_configuration_answers_like_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the nginx site differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let p = Prefix::new("diff-site-gyre");
    p.write("html/index.html", "<p>spa index</p>\n");
    p.write("html/page.html", "<html>a page</html>\n");
    p.write("html/t.txt", "plain text\n");
    p.write("html/s/app.CSS", "body{}\n");
    p.write("html/static/x.css", "static\n");
    p.write("html/sub/index.html", "sub index\n");
    p.write("html/slow/big.txt", &"0123456789abcdef".repeat(512));
    for d in ["cs", "noetag", "imsoff"] {
        p.write(&format!("html/{d}/t.txt"), "plain text\n");
    }
    p.write("html/cs/s/app.CSS", "body{}\n");
    for d in ["ls", "lsj", "lsx", "lse", "lsi"] {
        p.write(&format!("html/{d}/a.txt"), "hi\n");
        p.write(&format!("html/{d}/<b>&\"q.txt"), "x\n");
        p.write(&format!("html/{d}/big.bin"), &"z".repeat(20_000));
        p.write(&format!("html/{d}/{}.txt", "n".repeat(60)), "x");
        p.write(&format!("html/{d}/.hidden"), "h");
        p.write(&format!("html/{d}/sub/t.txt"), "t");
    }
    p.write("html/lsi/t.txt", "index\n");
    // File names are bytes: a Latin-1 name (not UTF-8) is served and
    // listed as nginx serves and lists it.
    {
        use std::os::unix::ffi::OsStrExt;
        let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
        std::fs::write(p.path("html").join(latin1), "latin-1\n").unwrap();
        std::fs::write(p.path("html/ls").join(latin1), "latin-1\n").unwrap();
    }
    let root = p.path("html");
    let Some(nginx) = start_nginx_with(
        &bin,
        &root,
        SITE_HTTP,
        &format!("access_log logs/t.log t;\n{SITE}"),
    ) else {
        // nginx is there: not starting means the configuration is wrong.
        panic!("{} did not start on the site configuration", bin.display());
    };
    let root_s = root.display().to_string();
    let gyre: Running = start_http(&p, 1, move |port| {
        format!(
            "access_log off;\nserver_tokens off;\n{SITE_HTTP}server {{\n listen 127.0.0.1:{port};\n root {root_s};\n access_log logs/t.log t;\n{SITE}\n}}"
        )
    });
    let mut differences = Vec::new();
    let cases = site_cases();
    for (name, input) in &cases {
        let head_only = input.starts_with(b"HEAD ");
        let mut want = ask(nginx.port, input, head_only);
        let mut got = ask(gyre.port, input, head_only);
        if name.starts_with("autoindex") && input.ends_with(b"HTTP/1.0\r\n\r\n") {
            // nginx sends listings without a length (to EOF); gyre with one.
            want.content_length = None;
            got.content_length = None;
        }
        if want != got {
            differences.push(format!("{name}:\n  nginx {want:?}\n  gyre  {got:?}"));
        }
        let want_h = headers_of(nginx.port, input, head_only);
        let got_h = headers_of(gyre.port, input, head_only);
        if want_h != got_h {
            differences.push(format!(
                "{name} headers {SITE_HEADERS:?}:\n  nginx {want_h:?}\n  gyre  {got_h:?}"
            ));
        }
    }
    // The log_format lines: each case was asked twice of each server.
    let read = |path: PathBuf| {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            // Readiness probes (HTTP/1.0) are not counted: they differ.
            let n = text.lines().filter(|l| !l.ends_with("HTTP/1.0")).count();
            if n >= 2 * cases.len() || Instant::now() > end {
                return text;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let nginx_log = read(nginx.prefix.path("logs/t.log"));
    let gyre_log = read(p.path("logs/t.log"));
    // Without the readiness probes (HTTP/1.0), which differ in number.
    let lines = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.ends_with("HTTP/1.0"))
            .map(str::to_string)
            .collect()
    };
    let (nl, gl) = (lines(&nginx_log), lines(&gyre_log));
    for (i, (n, g)) in nl.iter().zip(gl.iter()).enumerate() {
        // Field 4 is $body_bytes_sent: nginx's built-in error pages are one
        // byte longer ("nginx" against "gyre").
        let norm = |line: &str, adjust: bool| {
            let mut f: Vec<String> = line.split(' ').map(str::to_string).collect();
            if adjust && f.len() > 4 && f[3].as_str() >= "300" {
                if let Ok(n) = f[4].parse::<i64>() {
                    f[4] = (n - 1).to_string();
                }
            }
            f.join(" ")
        };
        let signed = |line: &str| {
            let f: Vec<&str> = line.split(' ').collect();
            f.len() > 4 && f[3] >= "300" && f[4].parse::<u64>().is_ok_and(|n| n > 100)
        };
        let (n, g) = (norm(n, signed(n)), norm(g, false));
        if n != g {
            differences.push(format!("log line {i}:\n  nginx {n}\n  gyre  {g}"));
        }
    }
    if nl.len() != gl.len() {
        differences.push(format!("log lines: nginx {} gyre {}", nl.len(), gl.len()));
    }
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// `server_tokens on|off|build` per location: the Server header and the
/// error pages' signature in nginx's forms, gyre's name and version in
/// place of nginx's (`nginx/1.22.1` → `gyre/VERSION`, `nginx` → `gyre`).
#[test]
fn server_tokens_like_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the server_tokens differential test: no nginx");
        return;
    };
    let p = Prefix::new("tokens-gyre");
    p.write("html/on/a.txt", "a\n");
    let root = p.path("html");
    let locs = "location /on/ { server_tokens on; }\n\
                location /build/ { server_tokens build; }\n\
                location /off/ { server_tokens off; }\n\
                location = /on/ret { server_tokens on; return 403; }\n";
    let Some(nginx) = start_nginx_with(&bin, &root, "", locs) else {
        eprintln!("skipping the server_tokens differential test: nginx did not start");
        return;
    };
    let root_s = root.display().to_string();
    let gyre: Running = start_http(&p, 1, move |port| {
        format!("access_log off;\nserver_tokens off;\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{locs}\n}}")
    });
    let nginx_ver = {
        let o = Command::new(&bin).arg("-v").output().unwrap();
        let t = String::from_utf8_lossy(&o.stderr).into_owned();
        t.trim().rsplit(' ').next().unwrap().to_string()
    };
    let gyre_ver = concat!("gyre/", env!("CARGO_PKG_VERSION"));
    let norm = |s: &str| s.replace(&nginx_ver, gyre_ver).replace("nginx", "gyre");
    let answer = |port: u16, path: &str| {
        let mut r = Raw::connect(port);
        r.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
        let resp = r.response(false);
        (
            resp.status,
            norm(resp.header("Server").unwrap_or("")),
            norm(&resp.text()),
        )
    };
    for path in ["/on/x", "/on/a.txt", "/build/x", "/off/x", "/x", "/on/ret"] {
        let want = answer(nginx.port, path);
        let got = answer(gyre.port, path);
        assert_eq!(got, want, "{path}");
    }
    assert_eq!(answer(gyre.port, "/on/x").1, gyre_ver);
    assert!(answer(gyre.port, "/on/x")
        .2
        .contains(&format!("<hr><center>{gyre_ver}</center>")));
}

/// Header values made of the request's bytes (a directory redirect's
/// `Location`, `rewrite … redirect`, `return` and `add_header` with
/// variables, an `error_page` URL) carry those bytes as nginx does, not
/// a UTF-8 rendering of them: a Latin-1 name stays one byte `\xe9`.
#[test]
fn raw_bytes_in_header_values_like_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the raw header bytes differential test: no nginx");
        return;
    };
    let p = Prefix::new("rawhdr-gyre");
    p.write("html/a.txt", "a\n");
    p.write("html/dav/.keep", "");
    {
        use std::os::unix::ffi::OsStrExt;
        let dir = p.path("html").join(std::ffi::OsStr::from_bytes(b"d\xe9"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), "in d\n").unwrap();
    }
    let root = p.path("html");
    let locs = "location /rw { rewrite ^/rw(.*)$ /to$1 redirect; }\n\
                location /lit { rewrite ^ /a%41%e9%20b?q=%41 redirect; }\n\
                location /ia { rewrite ^/ia(.*)$ /hdr?x=$1 last; }\n\
                location /ret { return 302 /r$uri; }\n\
                location /hdr { add_header X-U $uri always; add_header X-A $args always; return 204; }\n\
                location ~ ^/set(.*)$ { set $v $1; add_header X-V $v always; return 204; }\n\
                location /ep { error_page 404 http://example.com$uri; }\n\
                location /abs { absolute_redirect off; return 301 /x$uri; }\n\
                location /dav/ { dav_methods PUT; }\n";
    let Some(nginx) = start_nginx_with(&bin, &root, "", locs) else {
        panic!("{} did not start", bin.display());
    };
    let root_s = root.display().to_string();
    let gyre: Running = start_http(&p, 1, move |port| {
        format!("access_log off;\nserver_tokens off;\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{locs}\n}}")
    });
    let cases: &[&[u8]] = &[
        b"GET /d%E9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /d\xe9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /d%E9?q=\xff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /rw%E9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /rw\xe9?a=\xfe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /ret\xe9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /hdr%E9?x=\xe9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /ep%E9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /lit HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /ia%E9+b;c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /ia\xe9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /set%E9&a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /set\xe9&a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /abs\xe9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"PUT /dav/f%E9.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
    ];
    let mut differences = Vec::new();
    // Both serve one root: the PUT finds no file either time.
    let put = {
        use std::os::unix::ffi::OsStrExt;
        root.join("dav")
            .join(std::ffi::OsStr::from_bytes(b"f\xe9.txt"))
    };
    // Error pages are one byte longer with "nginx" than with "gyre".
    let head = |port: u16, input: &[u8]| -> Vec<u8> {
        util::http::raw_head(port, input)
            .into_iter()
            .filter(|l| !l.starts_with(b"Content-Length:"))
            .flat_map(|l| l.into_iter().chain([b'\n']))
            .collect()
    };
    for input in cases {
        let _ = std::fs::remove_file(&put);
        let want = head(nginx.port, input);
        let _ = std::fs::remove_file(&put);
        let got = head(gyre.port, input);
        if want != got {
            differences.push(format!(
                "{:?}:\n  nginx {:?}\n  gyre  {:?}",
                String::from_utf8_lossy(input),
                want.escape_ascii().to_string(),
                got.escape_ascii().to_string()
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
