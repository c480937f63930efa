//! gyre and nginx 1.22 proxying to the same backend with the same
//! configuration text: the same requests to both, compared — status, the
//! headers that matter, the body, and what the backend received (request
//! line and every header, in order). Skips with a message when nginx is
//! not installed.
#![allow(clippy::unwrap_used)]

mod proxy_backend;
mod util;

use std::process::Command;
use std::sync::Arc;

use proxy_backend::{backend, Got};
use util::http::{free_port, start_http, Raw, Resp};
use util::nginx::nginx_bin;
use util::Prefix;

fn view(r: &Resp) -> String {
    let mut s = format!("{}\n", r.head.lines().next().unwrap_or(""));
    // nginx's own error pages differ by the signature ("nginx"/"gyre").
    let own_page = r.status >= 500;
    for h in [
        "content-type",
        "content-length",
        "transfer-encoding",
        "x-up",
        "location",
        "set-cookie",
        "refresh",
        "x-other",
    ] {
        if own_page && h == "content-length" {
            continue;
        }
        if let Some(v) = r.header(h) {
            s.push_str(&format!("{h}: {v}\n"));
        }
    }
    // The upstream's own Server and Date (proxy_pass_header), once each.
    for (k, v) in &r.headers {
        if (k.eq_ignore_ascii_case("server") && v == "backend")
            || (k.eq_ignore_ascii_case("date") && v == "x")
        {
            s.push_str(&format!("{k}: {v}\n"));
        }
    }
    let servers = r
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("server"))
        .count();
    s.push_str(&format!("servers: {servers}\n"));
    if r.status != 502 && r.status != 504 {
        s.push_str(&String::from_utf8_lossy(&r.body));
    }
    s
}

fn received(g: &Got) -> String {
    let mut s = format!("{}\n", g.line);
    for (k, v) in &g.headers {
        s.push_str(&format!("{k}: {v}\n"));
    }
    s.push_str(&String::from_utf8_lossy(&g.body));
    s
}

#[test]
fn gyre_proxies_like_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("nginx not installed: skipping the proxy differential test");
        return;
    };
    let b = backend(Arc::new(|g: &Got| {
        let path = g.line.split(' ').nth(1).unwrap_or("").to_string();
        let body = format!("{path} {}", String::from_utf8_lossy(&g.body));
        if path.contains("chunked") {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nX-Up: c\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            )
            .into_bytes()
        } else if path.contains("reason") {
            b"HTTP/1.1 299 Custom Words\r\nContent-Length: 2\r\n\r\nok".to_vec()
        } else if path.contains("fine") {
            b"HTTP/1.1 200 Fine\r\nContent-Length: 2\r\n\r\nok".to_vec()
        } else if path.contains("bare") {
            b"HTTP/1.1 404\r\nContent-Length: 2\r\n\r\nno".to_vec()
        } else if path.contains("accelnamed") {
            b"HTTP/1.1 200 OK\r\nX-Accel-Redirect: @acc\r\nContent-Length: 5\r\n\r\nnope!".to_vec()
        } else if path.contains("accel") {
            b"HTTP/1.1 200 OK\r\nX-Accel-Redirect: /internal/x?y=1\r\nContent-Length: 5\r\n\r\nnope!".to_vec()
        } else if path.contains("/v2/loc") {
            // Points back at itself by the Host it was sent (nginx's
            // $proxy_host), for proxy_redirect and proxy_cookie_*.
            let host = g
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("host"))
                .map_or("", |(_, v)| v.as_str())
                .to_string();
            format!(
                "HTTP/1.1 302 Found\r\nLocation: http://{host}/v2/next\r\nRefresh: 5; url=http://{host}/v2/r\r\n\
                 Set-Cookie: s=1; Domain=backend.local; Path=/v2/x; HttpOnly\r\nContent-Length: 0\r\n\r\n"
            )
            .into_bytes()
        } else if path.contains("latin") {
            // Bytes that are not UTF-8 pass as they came, and a Location
            // that is absolute keeps its place among the headers.
            b"HTTP/1.1 302 F\xe9und\r\nX-Up: caf\xe9\r\nLocation: http://elsewhere/caf\xe9\r\nX-Other: o\xff\r\nContent-Length: 0\r\n\r\n".to_vec()
        } else if path.contains("redirect") {
            b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n".to_vec()
        } else {
            format!(
                "HTTP/1.1 200 OK\r\nServer: backend\r\nDate: x\r\nContent-Type: text/plain\r\nX-Up: 1\r\nX-Other: o\r\nSet-Cookie: a=1\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
    }));
    let bp = b.port;
    let dead = free_port();
    let http = move |port: u16| {
        format!(
            "upstream app {{ server 127.0.0.1:{bp}; }}
             server {{ listen 127.0.0.1:{port};
                location / {{ proxy_pass http://127.0.0.1:{bp}; }}
                location /app/ {{ proxy_pass http://127.0.0.1:{bp}/v2/; }}
                location /up/ {{ proxy_pass http://app;
                    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                    proxy_set_header X-Real-IP $remote_addr; }}
                location /rw/ {{ rewrite ^/rw/(.*)$ /new/$1 break; proxy_pass http://127.0.0.1:{bp}; }}
                location /rwp/ {{ rewrite ^/rwp/(.*)$ /n/$1 break; proxy_pass http://127.0.0.1:{bp}/p/; }}
                location ~ ^/re/ {{ proxy_pass http://127.0.0.1:{bp}; }}
                location /h11/ {{ proxy_pass http://127.0.0.1:{bp}; proxy_http_version 1.1; }}
                location /hide/ {{ proxy_pass http://127.0.0.1:{bp}; proxy_hide_header X-Up; }}
                location /pass/ {{ proxy_pass http://127.0.0.1:{bp}; proxy_pass_header Server; proxy_pass_header Date; }}
                location /nohdr/ {{ proxy_pass http://127.0.0.1:{bp}; proxy_pass_request_headers off; }}
                location /nobody/ {{ proxy_pass http://127.0.0.1:{bp}; proxy_pass_request_body off;
                    proxy_set_header Content-Length \"\"; }}
                location /dead/ {{ proxy_pass http://127.0.0.1:{dead}; }}
                location /ign/ {{ proxy_pass http://127.0.0.1:{bp}; proxy_ignore_headers X-Accel-Redirect; }}
                location /internal/ {{ internal; return 200 \"internal $uri $args $request_method\"; }}
                location @acc {{ return 200 \"named $uri $request_method\"; }}
                location /rd/ {{ proxy_pass http://127.0.0.1:{bp}/v2/;
                    proxy_cookie_domain backend.local front; proxy_cookie_path /v2/ /rd/; }}
                location /rdx/ {{ proxy_pass http://127.0.0.1:{bp};
                    proxy_redirect ~^http://[^/]+/v2/(.*)$ /re/$1;
                    proxy_cookie_flags ~ secure samesite=lax; }}
                location /rdoff/ {{ proxy_pass http://127.0.0.1:{bp}/v2/; proxy_redirect off; }}
             }}"
        )
    };
    let Some(ng) = util::nginx::start_http(&bin, "proxy-diff-nginx", &http) else {
        eprintln!("nginx did not start: skipping");
        return;
    };
    let p = Prefix::new("proxy-diff-gyre");
    let gy = start_http(&p, 1, http);
    let cases: &[&str] = &[
        "GET /a/../b//c?x=1 HTTP/1.1\r\nHost: front\r\nUser-Agent: t/1\r\nAccept: */*\r\n\r\n",
        "GET /app/x%20y?q=1 HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /app/plain HTTP/1.0\r\n\r\n",
        "GET /up/z HTTP/1.1\r\nHost: front\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2\r\n\r\n",
        "GET /rw/a%20b?k=v HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /rwp/a?k=v HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /re/x?y HTTP/1.1\r\nHost: front\r\n\r\n",
        "POST /h11/p HTTP/1.1\r\nHost: front\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
        "POST /h11/c HTTP/1.1\r\nHost: front\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "GET /hide/h HTTP/1.1\r\nHost: front\r\nConnection: keep-alive\r\nKeep-Alive: 300\r\nTE: trailers\r\nUpgrade: x\r\n\r\n",
        "GET /nohdr/n HTTP/1.1\r\nHost: front\r\nX-A: 1\r\n\r\n",
        "GET /pass/p HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /reason HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /fine HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /bare HTTP/1.1\r\nHost: front\r\n\r\n",
        "POST /nobody/n HTTP/1.1\r\nHost: front\r\nContent-Length: 3\r\n\r\nabc",
        "GET /chunked HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /chunked HTTP/1.0\r\n\r\n",
        "GET /redirect HTTP/1.1\r\nHost: front\r\n\r\n",
        "HEAD /head HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /dead/x HTTP/1.1\r\nHost: front\r\n\r\n",
        "POST /accel HTTP/1.1\r\nHost: front\r\nContent-Length: 2\r\n\r\nab",
        "GET /accelnamed HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /ign/accel HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /rd/loc HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /rdx/v2/loc HTTP/1.1\r\nHost: front\r\n\r\n",
        "GET /rdoff/loc HTTP/1.1\r\nHost: front\r\n\r\n",
    ];
    let mut diffs = Vec::new();
    for req in cases {
        let head = req.starts_with("HEAD");
        let one = |port: u16| -> (String, String) {
            let before = b.got.lock().unwrap().len();
            let mut c = Raw::connect(port);
            c.send(req.as_bytes());
            // Chunked responses: read to the close (Connection: close).
            let r = if req.contains("chunked HTTP/1.1") {
                c.send(b"GET /__end HTTP/1.1\r\nHost: front\r\nConnection: close\r\n\r\n");
                let mut all = Vec::new();
                let _ = std::io::Read::read_to_end(&mut c.s, &mut all);
                let text = String::from_utf8_lossy(&all).into_owned();
                let first = text.split("HTTP/1.1 200").nth(1).unwrap_or("").to_string();
                let body = first.split_once("\r\n\r\n").map_or("", |x| x.1);
                Resp {
                    status: 200,
                    head: String::new(),
                    headers: vec![(
                        "transfer-encoding".into(),
                        if first.contains("Transfer-Encoding: chunked") {
                            "chunked".into()
                        } else {
                            String::new()
                        },
                    )],
                    body: proxy_backend::dechunk(body).into_bytes(),
                }
            } else {
                c.response(head)
            };
            let got = b.got.lock().unwrap();
            let rec = got.get(before).map(received).unwrap_or_default();
            (view(&r), rec)
        };
        // A rewritten Location is made absolute with each server's port.
        let (nr, nrec) = one(ng.port);
        let nr = nr.replace(&ng.port.to_string(), "PORT");
        let (gr, grec) = one(gy.port);
        let gr = gr.replace(&gy.port.to_string(), "PORT");
        if nr != gr {
            diffs.push(format!(
                "{req:?}\n nginx response:\n{nr}\n gyre response:\n{gr}"
            ));
        }
        if nrec != grec {
            diffs.push(format!(
                "{req:?}\n nginx sent:\n{nrec}\n gyre sent:\n{grec}"
            ));
        }
    }
    // The raw head, byte for byte (the views above read text).
    let raw = |port: u16| {
        util::http::raw_head(
            port,
            b"GET /latin HTTP/1.1\r\nHost: front\r\nConnection: close\r\n\r\n",
        )
        .concat()
        .escape_ascii()
        .to_string()
    };
    let (nraw, graw) = (raw(ng.port), raw(gy.port));
    if nraw != graw {
        diffs.push(format!("raw head of /latin:\n nginx {nraw}\n gyre  {graw}"));
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n---\n")
    );
}

/// The `[emerg]` message of a `-t` run, without the file and line.
fn emerg(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.split_once("[emerg] ").map(|(_, m)| m.to_string()))
        .map(|m| match m.rfind(" in /") {
            Some(i) => m[..i].to_string(),
            None => m,
        })
        .unwrap_or_default()
}

#[test]
fn configuration_errors_are_nginx_s() {
    let Some(bin) = nginx_bin() else {
        eprintln!("nginx not installed: skipping");
        return;
    };
    let cases = [
        "server { listen 127.0.0.1:1; location / { proxy_pass ftp://x; } }",
        "server { listen 127.0.0.1:1; location ~ ^/a { proxy_pass http://127.0.0.1:1/x; } }",
        "server { listen 127.0.0.1:1; location @n { proxy_pass http://127.0.0.1:1/x; } }",
        "upstream u { server 127.0.0.1:1; } server { listen 127.0.0.1:1; location / { proxy_pass http://u:8080; } }",
        "server { listen 127.0.0.1:1; location / { proxy_pass http://127.0.0.1:1; proxy_pass http://127.0.0.1:2; } }",
        "server { listen 127.0.0.1:1; location / { proxy_pass http://127.0.0.1:1; proxy_buffers 8 4k; proxy_busy_buffers_size 64k; } }",
        "server { listen 127.0.0.1:1; location / { proxy_pass http://127.0.0.1:1; proxy_buffer_size 16k; } }",
        "server { listen 127.0.0.1:1; location / { proxy_pass http://127.0.0.1:1; proxy_next_upstream error foo; } }",
        "server { listen 127.0.0.1:1; location / { proxy_pass http://127.0.0.1:1; proxy_http_version 2.0; } }",
        "upstream u { server 127.0.0.1:1; } upstream u { server 127.0.0.1:2; }",
        "server { listen 127.0.0.1:1; location / { proxy_pass http://127.0.0.1:0; } }",
        "server { listen 127.0.0.1:1; proxy_pass http://127.0.0.1:1; }",
        "server { listen 127.0.0.1:1; location / { proxy_pass http://127.0.0.1:1; proxy_ignore_headers X-Nope; } }",
    ];
    let mut diffs = Vec::new();
    for c in cases {
        let pn = Prefix::new("proxy-conf-nginx");
        for t in ["cb", "px", "fc", "uw", "sc"] {
            std::fs::create_dir_all(pn.path(&format!("tmp/{t}"))).unwrap();
        }
        pn.write(
            "conf/nginx.conf",
            &format!(
                "events {{}}\nhttp {{ client_body_temp_path tmp/cb; proxy_temp_path tmp/px; \
                 fastcgi_temp_path tmp/fc; uwsgi_temp_path tmp/uw; scgi_temp_path tmp/sc;\n{c}\n}}\n"
            ),
        );
        let n = Command::new(&bin)
            .arg("-p")
            .arg(&pn.dir)
            .args(["-c", "conf/nginx.conf", "-e", "logs/error.log", "-t"])
            .output()
            .unwrap();
        let pg = Prefix::new("proxy-conf-gyre");
        pg.conf(&format!("events {{}}\nhttp {{\n{c}\n}}\n"));
        let g = pg.run(&["-t"]);
        let (ne, ge) = (
            emerg(&String::from_utf8_lossy(&n.stderr)),
            emerg(&String::from_utf8_lossy(&g.stderr)),
        );
        if ne != ge || ne.is_empty() {
            diffs.push(format!("{c}\n nginx: {ne}\n gyre:  {ge}"));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
