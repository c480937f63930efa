//! TLS to upstreams (`proxy_ssl_*`) against nginx 1.22: the same
//! configuration text for gyre and for Debian's nginx as proxies, in front
//! of one TLS backend (Debian's nginx, with a test CA made at test time)
//! that echoes what it saw of the handshake — the SNI, whether the session
//! was resumed, the protocol, the client certificate — and the Host it was
//! sent; with a certificate chain, a revoked certificate and CRLs. Compared: status, body, and for a refused certificate the
//! `[error]` line. Also the `-t` errors. Skips with a message when nginx is
//! not installed.
#![allow(clippy::unwrap_used)]

mod util;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use util::certs::{Alg, Ca};
use util::http::{raw_request, start_http};
use util::nginx::nginx_bin;
use util::Prefix;

/// What the backend answers: what it saw of the connection.
const ECHO: &str = "sni=$ssl_server_name reused=$ssl_session_reused proto=$ssl_protocol \
                    client=$ssl_client_verify dn=$ssl_client_s_dn host=$host";

/// The proxies' configuration (the same text for gyre and nginx): one
/// upstream block per location, so each location has its own peers (nginx
/// keeps sessions per peer, gyre per configuration and name).
fn proxy_http(port: u16, bp: u16, dir: &Path) -> String {
    let d = dir.display();
    let mut ups = String::new();
    for u in [
        "plain", "backend", "wrongca", "badname", "sni", "sniname", "snioff", "cert", "reuse",
        "noreuse", "tls13", "depth0", "depth1", "revoked", "crlok", "crlold", "nocrl",
    ] {
        ups.push_str(&format!("upstream {u}.test {{ server 127.0.0.1:{bp}; }}\n"));
    }
    format!(
        "{ups}
         server {{ listen 127.0.0.1:{port};
            location /plain/ {{ proxy_pass https://plain.test/; }}
            location /verify/ {{ proxy_pass https://backend.test/;
                proxy_ssl_verify on; proxy_ssl_trusted_certificate {d}/ca.crt; }}
            location /wrongca/ {{ proxy_pass https://wrongca.test/;
                proxy_ssl_verify on; proxy_ssl_trusted_certificate {d}/other.crt;
                proxy_ssl_name backend.test; }}
            location /badname/ {{ proxy_pass https://badname.test/;
                proxy_ssl_verify on; proxy_ssl_trusted_certificate {d}/ca.crt; }}
            location /sni/ {{ proxy_pass https://sni.test/; proxy_ssl_server_name on; }}
            location /sniname/ {{ proxy_pass https://sniname.test/; proxy_ssl_server_name on;
                proxy_ssl_name $http_x_name; }}
            location /sniaddr/ {{ proxy_pass https://127.0.0.1:{bp}/; proxy_ssl_server_name on; }}
            location /snioff/ {{ proxy_pass https://snioff.test/; proxy_ssl_name named.test; }}
            location /cert/ {{ proxy_pass https://cert.test/;
                proxy_ssl_certificate {d}/client.crt; proxy_ssl_certificate_key {d}/client.key; }}
            location /reuse/ {{ proxy_pass https://reuse.test/; }}
            location /noreuse/ {{ proxy_pass https://noreuse.test/; proxy_ssl_session_reuse off; }}
            location /tls13/ {{ proxy_pass https://tls13.test/; proxy_ssl_protocols TLSv1.2 TLSv1.3; }}
            location /depth0/ {{ proxy_pass https://depth0.test/; proxy_ssl_verify on;
                proxy_ssl_trusted_certificate {d}/ca.crt; proxy_ssl_verify_depth 0;
                proxy_ssl_server_name on; proxy_ssl_name chain.test; }}
            location /depth1/ {{ proxy_pass https://depth1.test/; proxy_ssl_verify on;
                proxy_ssl_trusted_certificate {d}/ca.crt;
                proxy_ssl_server_name on; proxy_ssl_name chain.test;
                proxy_set_header Host chain.test; }}
            location /revoked/ {{ proxy_pass https://revoked.test/; proxy_ssl_verify on;
                proxy_ssl_trusted_certificate {d}/ca.crt; proxy_ssl_crl {d}/ca.crl;
                proxy_ssl_server_name on; }}
            location /crlok/ {{ proxy_pass https://crlok.test/; proxy_ssl_verify on;
                proxy_ssl_trusted_certificate {d}/ca.crt; proxy_ssl_crl {d}/ca.crl;
                proxy_ssl_name backend.test; }}
            location /crlold/ {{ proxy_pass https://crlold.test/; proxy_ssl_verify on;
                proxy_ssl_trusted_certificate {d}/ca.crt; proxy_ssl_crl {d}/expired.crl;
                proxy_ssl_name backend.test; }}
            location /nocrl/ {{ proxy_pass https://nocrl.test/; proxy_ssl_verify on;
                proxy_ssl_trusted_certificate {d}/ca.crt; proxy_ssl_crl {d}/ca.crl;
                proxy_ssl_server_name on; proxy_ssl_name chain.test; }}
            location /var/ {{ set $t 127.0.0.1:{bp}; proxy_pass https://$t;
                proxy_ssl_server_name on; proxy_ssl_name $proxy_host;
                proxy_ssl_protocols TLSv1.2 TLSv1.3;
                add_header X-PH \"$proxy_host $proxy_port\"; }}
         }}"
    )
}

/// The `[error]` message about the upstream certificate, from its text
/// to the end of the line (no time, pid or connection number).
fn cert_line(log: &str) -> Option<String> {
    log.lines().find_map(|l| {
        l.find("upstream SSL certificate")
            .map(|i| l[i..].to_string())
    })
}

#[test]
fn proxy_ssl_as_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("nginx not installed: skipping the proxy_ssl differential test");
        return;
    };
    let certs = Prefix::new("proxy-ssl-certs");
    let dir = certs.dir.clone();
    let ca = Ca::new(&dir, "ca");
    Ca::new(&dir, "other");
    let leaf = ca.leaf(&dir, "backend", &["backend.test", "localhost"], Alg::Ecdsa);
    // A chain: a leaf of an intermediate, sent with it (for the depth).
    let inter = ca.intermediate(&dir, "inter");
    let chained = inter.leaf(&dir, "chained", &["chain.test"], Alg::Ecdsa);
    let chain = dir.join("chain.crt");
    std::fs::write(
        &chain,
        std::fs::read_to_string(&chained.cert).unwrap()
            + &std::fs::read_to_string(&inter.pem).unwrap(),
    )
    .unwrap();
    let (chc, chk) = (
        chain.display().to_string(),
        chained.key.display().to_string(),
    );
    // A revoked leaf, the CA's list naming it, and a list out of date.
    let revoked = ca.leaf_with_serial(&dir, "revoked", &["revoked.test"], 4242);
    ca.crl(&dir, "ca", &[4242], 2099);
    ca.crl(&dir, "expired", &[], 2021);
    let (rvc, rvk) = (
        revoked.cert.display().to_string(),
        revoked.key.display().to_string(),
    );
    ca.client(&dir, "client", "proxy-client");
    let (lc, lk) = (
        leaf.cert.display().to_string(),
        leaf.key.display().to_string(),
    );
    let cadisp = ca.pem.display().to_string();
    let backend = move |port: u16| {
        format!(
            "server {{ listen 127.0.0.1:{port} ssl;
                ssl_certificate {lc}; ssl_certificate_key {lk};
                ssl_protocols TLSv1.2 TLSv1.3;
                ssl_session_cache shared:B:1m;
                ssl_verify_client optional; ssl_client_certificate {cadisp};
                location / {{ return 200 \"{ECHO}\\n\"; }}
             }}
             server {{ listen 127.0.0.1:{port} ssl; server_name chain.test;
                ssl_certificate {chc}; ssl_certificate_key {chk};
                ssl_protocols TLSv1.2 TLSv1.3;
                ssl_session_cache shared:B:1m;
                location / {{ return 200 \"chain {ECHO}\\n\"; }}
             }}
             server {{ listen 127.0.0.1:{port} ssl; server_name revoked.test;
                ssl_certificate {rvc}; ssl_certificate_key {rvk};
                ssl_protocols TLSv1.2 TLSv1.3;
                location / {{ return 200 \"revoked {ECHO}\\n\"; }}
             }}"
        )
    };
    let Some(be) = util::nginx::start_http(&bin, "proxy-ssl-backend", &backend) else {
        eprintln!("the nginx backend did not start: skipping");
        return;
    };
    let bp = be.port;
    let d2 = dir.clone();
    let http = move |port: u16| proxy_http(port, bp, &d2);
    let Some(ng) = util::nginx::start_http(&bin, "proxy-ssl-nginx", &http) else {
        eprintln!("the nginx proxy did not start: skipping");
        return;
    };
    let p = Prefix::new("proxy-ssl-gyre");
    let gy = start_http(&p, 1, http);
    // (request path, extra header); each case in this order on both.
    let cases: &[(&str, &str)] = &[
        ("/plain/", ""),
        ("/verify/", ""),
        ("/wrongca/", ""),
        ("/badname/", ""),
        ("/sni/", ""),
        ("/sniname/", "X-Name: named.test:8443\r\n"),
        ("/sniaddr/", ""),
        ("/snioff/", ""),
        ("/cert/", ""),
        ("/reuse/", ""),
        ("/reuse/", ""),
        ("/reuse/", ""),
        ("/noreuse/", ""),
        ("/noreuse/", ""),
        ("/tls13/", ""),
        ("/depth0/", ""),
        ("/depth1/", ""),
        ("/revoked/", ""),
        ("/crlok/", ""),
        ("/crlold/", ""),
        ("/nocrl/", ""),
        ("/var/", ""),
    ];
    let mut diffs = Vec::new();
    for (path, extra) in cases {
        let req = format!("GET {path} HTTP/1.1\r\nHost: front\r\n{extra}Connection: close\r\n\r\n");
        let view = |port: u16| {
            let r = raw_request(port, &req);
            let mut v = format!("{}", r.status);
            if let Some(h) = r.header("x-ph") {
                v.push_str(&format!(" x-ph: {h}"));
            }
            if r.status == 200 {
                v.push_str(&format!(" {}", r.text().trim_end()));
            }
            v
        };
        let (n, g) = (view(ng.port), view(gy.port));
        eprintln!("{path}: {n}");
        if n != g {
            diffs.push(format!("{path}\n nginx: {n}\n gyre:  {g}"));
        }
    }
    // The refused certificates: the same error lines, in the same order.
    let nlog = || std::fs::read_to_string(ng.error_log()).unwrap_or_default();
    let lines = |log: String| log.lines().filter_map(cert_line).collect::<Vec<_>>();
    util::wait_for(Duration::from_secs(3), || {
        lines(nlog()).len() >= 6 && lines(gy.log()).len() >= 6
    });
    let (n, g) = (lines(nlog()), lines(gy.log()));
    eprintln!("{n:#?}");
    if n != g || n.len() != 6 {
        diffs.push(format!("log lines\n nginx: {n:#?}\n gyre:  {g:#?}"));
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// The `[emerg]` message of a `-t` run, without the file and line, and
/// without the library's words after `failed` (OpenSSL's error stack).
fn emerg(stderr: &str) -> String {
    let m = stderr
        .lines()
        .find_map(|l| l.split_once("[emerg] ").map(|(_, m)| m.to_string()))
        .unwrap_or_default();
    let m = match m.rfind(" in /") {
        Some(i) => m[..i].to_string(),
        None => m,
    };
    match m.find(" failed (") {
        Some(i) => m[..i + " failed".len()].to_string(),
        None => m,
    }
}

fn t_nginx(bin: &Path, c: &str) -> (bool, String) {
    let pn = Prefix::new("proxy-ssl-conf-nginx");
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
    let o = Command::new(bin)
        .arg("-p")
        .arg(&pn.dir)
        .args(["-c", "conf/nginx.conf", "-e", "logs/error.log", "-t"])
        .output()
        .unwrap();
    (
        o.status.success(),
        emerg(&String::from_utf8_lossy(&o.stderr)),
    )
}

fn t_gyre(c: &str) -> (bool, String) {
    let pg = Prefix::new("proxy-ssl-conf-gyre");
    pg.conf(&format!("events {{}}\nhttp {{\n{c}\n}}\n"));
    let o = pg.run(&["-t"]);
    (
        o.status.success(),
        emerg(&String::from_utf8_lossy(&o.stderr)),
    )
}

#[test]
fn proxy_ssl_configuration_errors_are_nginx_s() {
    let Some(bin) = nginx_bin() else {
        eprintln!("nginx not installed: skipping");
        return;
    };
    let certs = Prefix::new("proxy-ssl-conf-certs");
    let ca = Ca::new(&certs.dir, "ca");
    let client = ca.client(&certs.dir, "client", "c");
    let (cc, ck, cap) = (
        client.cert.display().to_string(),
        client.key.display().to_string(),
        ca.pem.display().to_string(),
    );
    let loc = |inner: &str, scheme: &str| {
        format!(
            "server {{ listen 127.0.0.1:1; location / {{ proxy_pass {scheme}://127.0.0.1:1; {inner} }} }}"
        )
    };
    let https = |inner: &str| loc(inner, "https");
    let cases: Vec<String> = vec![
        https("proxy_ssl_verify on;"),
        https("proxy_ssl_verify on; proxy_ssl_verify off;"),
        https("proxy_ssl_verify maybe;"),
        https("proxy_ssl_server_name yes;"),
        https("proxy_ssl_session_reuse 1;"),
        https("proxy_ssl_verify_depth x;"),
        https("proxy_ssl_protocols TLSv9;"),
        https("proxy_ssl_ciphers BOGUS;"),
        https("proxy_ssl_certificate /nonexistent/c.crt;"),
        https(&format!("proxy_ssl_certificate {cc};")),
        https("proxy_ssl_certificate /nonexistent/c.crt; proxy_ssl_certificate_key /nonexistent/c.key;"),
        https("proxy_ssl_verify on; proxy_ssl_trusted_certificate /nonexistent/ca.crt;"),
        https(&format!(
            "proxy_ssl_verify on; proxy_ssl_trusted_certificate {cap}; proxy_ssl_crl /nonexistent/x.crl;"
        )),
        https("proxy_ssl_name;"),
        // Inherited from the server level into an https location.
        "server { listen 127.0.0.1:1; proxy_ssl_verify on;
           location / { proxy_pass https://127.0.0.1:1; } }"
            .to_string(),
        // A URL with variables may be https: checked as one.
        "server { listen 127.0.0.1:1; proxy_ssl_verify on;
           location / { proxy_pass http://$host; } }"
            .to_string(),
    ];
    // Accepted by both: TLS settings only matter to https locations, and a
    // complete configuration.
    let accepted: Vec<String> = vec![
        loc("proxy_ssl_verify on;", "http"),
        loc(
            "proxy_ssl_ciphers BOGUS; proxy_ssl_certificate /nonexistent/c.crt;",
            "http",
        ),
        // The list is read only when verifying, as nginx does.
        https("proxy_ssl_crl /nonexistent/x.crl;"),
        format!("proxy_ssl_verify on; {}", loc("", "http")),
        https(&format!(
            "proxy_ssl_verify on; proxy_ssl_verify_depth 2; proxy_ssl_trusted_certificate {cap};
             proxy_ssl_server_name on; proxy_ssl_name $host; proxy_ssl_session_reuse off;
             proxy_ssl_protocols TLSv1.2 TLSv1.3; proxy_ssl_ciphers HIGH:!aNULL;
             proxy_ssl_certificate {cc}; proxy_ssl_certificate_key {ck};"
        )),
    ];
    let mut diffs = Vec::new();
    for c in &cases {
        let (n, g) = (t_nginx(&bin, c), t_gyre(c));
        if n != g || n.0 || n.1.is_empty() {
            diffs.push(format!("{c}\n nginx: {n:?}\n gyre:  {g:?}"));
        }
    }
    for c in &accepted {
        let (n, g) = (t_nginx(&bin, c), t_gyre(c));
        if !n.0 || !g.0 {
            diffs.push(format!("{c}\n nginx: {n:?}\n gyre:  {g:?}"));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
