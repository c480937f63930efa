//! Client certificates as nginx treats them, differential against Debian's
//! nginx serving the same configuration: under `ssl_verify_client on` and
//! `optional` an untrusted certificate finishes the handshake and gets
//! 400 "The SSL certificate error" (nginx's 495) with the connection
//! closed, logged as `client SSL certificate verify error: (…) while
//! reading client request headers`; `optional_no_ca` takes it and says
//! why in `$ssl_client_verify`; the `$ssl_client_*` variables say the
//! same as nginx's. Skips with a message when nginx is missing. Every
//! client has a deadline.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use util::ReadSome;

use gyre_core::event::tls::rustls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use util::certs::{Alg, Ca, Leaf};
use util::http::{free_port, probe};
use util::{wait_for, Prefix, Server};

const IO: Duration = Duration::from_secs(10);

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn client(ca: &Path, cert: Option<&Leaf>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(gyre_core::event::tls_conf::provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match cert {
        Some(l) => {
            let chain = CertificateDer::pem_file_iter(&l.cert)
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
            b.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(&l.key).unwrap())
                .unwrap()
        }
        None => b.with_no_client_auth(),
    })
}

/// One GET: the status line, the body, and whether the server closed the
/// connection after it; or the error that ended it.
fn ask(port: u16, cfg: &Arc<rustls::ClientConfig>) -> Result<(String, String, bool), String> {
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(IO)).unwrap();
    sock.set_write_timeout(Some(IO)).unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let c = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    let mut t = rustls::StreamOwned::new(c, sock);
    t.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    // Bounded: the response is small; the read timeout ends a stall.
    for _ in 0..64 {
        let head_end = got.windows(4).position(|w| w == b"\r\n\r\n");
        if let Some(h) = head_end {
            let head = String::from_utf8_lossy(&got[..h]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |v| v.trim().parse().unwrap());
            if got.len() >= h + 4 + len {
                // The error page's signature line names the server.
                let body: String = String::from_utf8_lossy(&got[h + 4..h + 4 + len])
                    .lines()
                    .filter(|l| !l.starts_with("<hr><center>"))
                    .map(|l| format!("{l}\n"))
                    .collect();
                let status = head.lines().next().unwrap_or("").to_string();
                // After an error page both close; a kept connection would
                // only end at the read timeout, so only those are read on.
                let closed = status.contains(" 400 ")
                    && match t.read_some(&mut b) {
                        Ok(0) => true,
                        Ok(_) => false,
                        Err(e) => {
                            e.kind() != ErrorKind::WouldBlock && e.kind() != ErrorKind::TimedOut
                        }
                    };
                return Ok((status, body, closed));
            }
        }
        match t.read_some(&mut b) {
            Ok(0) => return Err("eof".into()),
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) => return Err(format!("{:?}", e.kind())),
        }
    }
    Err("no response".into())
}

fn server_block(port: u16, pki: &Pki, mode: &str) -> String {
    format!(
        "server {{ listen 127.0.0.1:{port} ssl; server_name localhost;
           ssl_certificate {}; ssl_certificate_key {};
           ssl_client_certificate {}; ssl_verify_client {mode};
           keepalive_timeout 5s;
           location / {{ return 200 \"$ssl_client_verify|$ssl_client_s_dn|$ssl_client_i_dn|$ssl_client_serial|$ssl_client_fingerprint\\n\"; }} }}",
        s(&pki.leaf.cert),
        s(&pki.leaf.key),
        s(&pki.ca_pem),
    )
}

struct Pki {
    ca_pem: PathBuf,
    leaf: Leaf,
    good: Leaf,
    bad: Leaf,
}

/// The message of the first error-log line containing `needle`, from it
/// to the end of its `while …` part.
fn log_message(log: &str, needle: &str) -> Option<String> {
    let l = log.lines().find(|l| l.contains(needle))?;
    let at = l.find(needle)?;
    let msg = &l[at..];
    Some(msg.split(", client:").next().unwrap_or(msg).to_string())
}

fn start_gyre(p: &Prefix, port: u16, server: &str) -> Server {
    p.conf(&format!(
        "daemon off;\nerror_log logs/error.log info;\npid logs/gyre.pid;\n\
         worker_processes 1;\nevents {{ worker_connections 64; }}\n\
         http {{\naccess_log off;\n{server}\n}}\n"
    ));
    let child = Command::new(util::gyre_bin())
        .arg("-p")
        .arg(&p.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        prefix: p.dir.clone(),
    };
    assert!(
        wait_for(Duration::from_secs(10), || probe(port)),
        "gyre did not start; log:\n{}",
        server.log()
    );
    server
}

/// `ssl_verify_depth N` allows N intermediate CAs between the client's
/// certificate and a CA of `ssl_client_certificate` (OpenSSL's count: a
/// root the client also sends is not one of them): a client signed by an
/// intermediate is refused at depth 0 and taken at 1 and 2, by both.
#[test]
fn verify_depth_counts_intermediates_as_nginx_does() {
    let Some(nginx) = util::nginx::nginx_bin() else {
        println!("nginx not installed: skipping the ssl_verify_depth differential test");
        return;
    };
    let p = Prefix::new("tls-verify-depth");
    let dir = p.path("conf");
    let ca = Ca::new(&dir, "root");
    let int = ca.intermediate(&dir, "int");
    let server_leaf = ca.leaf(&dir, "srv", &["localhost"], Alg::Ecdsa);
    let bob = int.client(&dir, "bob", "bob");
    // What the client sends: its certificate and the intermediate, and
    // once more with the root too.
    let chain = |file: &str, with_root: bool| {
        let mut pem = std::fs::read_to_string(&bob.cert).unwrap();
        pem.push_str(&std::fs::read_to_string(&int.pem).unwrap());
        if with_root {
            pem.push_str(&std::fs::read_to_string(&ca.pem).unwrap());
        }
        let l = Leaf {
            cert: dir.join(format!("{file}.crt")),
            key: bob.key.clone(),
        };
        std::fs::write(&l.cert, pem).unwrap();
        l
    };
    let clients = [
        (
            "leaf+intermediate",
            client(&ca.pem, Some(&chain("bob-int", false))),
        ),
        (
            "leaf+intermediate+root",
            client(&ca.pem, Some(&chain("bob-all", true))),
        ),
    ];
    for depth in [0, 1, 2] {
        let block = |port: u16| {
            format!(
                "server {{ listen 127.0.0.1:{port} ssl; server_name localhost;
                   ssl_certificate {}; ssl_certificate_key {};
                   ssl_client_certificate {}; ssl_verify_client on; ssl_verify_depth {depth};
                   location / {{ return 200 \"$ssl_client_verify|$ssl_client_s_dn|$ssl_client_i_dn\\n\"; }} }}",
                s(&server_leaf.cert),
                s(&server_leaf.key),
                s(&ca.pem),
            )
        };
        let gport = free_port();
        let g = start_gyre(&p, gport, &block(gport));
        let ng = util::nginx::start_http(&nginx, "tls-verify-depth-nginx", &block)
            .expect("nginx did not start");
        let nport = ng.port;
        for (who, cfg) in &clients {
            let ours = ask(gport, cfg);
            let theirs = ask(nport, cfg);
            assert_eq!(ours, theirs, "ssl_verify_depth {depth}, {who}");
            let (status, body, _) = ours.as_ref().unwrap();
            if depth == 0 {
                assert_eq!(status, "HTTP/1.1 400 Bad Request", "depth 0, {who}");
            } else {
                assert_eq!(status, "HTTP/1.1 200 OK", "depth {depth}, {who}: {body}");
                assert!(body.starts_with("SUCCESS|CN=bob|CN=int"), "{body}");
            }
        }
        if depth == 0 {
            let nlog = std::fs::read_to_string(ng.error_log()).unwrap_or_default();
            let needle = "client SSL certificate verify error: ";
            let ours = log_message(&g.log(), needle);
            assert!(ours.is_some(), "depth 0: not logged");
            assert_eq!(ours, log_message(&nlog, needle), "depth 0: log line");
        }
    }
}

#[test]
fn client_certificates_match_nginx() {
    let Some(nginx) = util::nginx::nginx_bin() else {
        println!("nginx not installed: skipping the client-certificate differential test");
        return;
    };
    let p = Prefix::new("tls-client-cert");
    let dir = p.path("conf");
    let ca = Ca::new(&dir, "ca");
    let other = Ca::new(&dir, "other-ca");
    let pki = Pki {
        ca_pem: ca.pem.clone(),
        leaf: ca.leaf(&dir, "ec", &["localhost"], Alg::Ecdsa),
        good: ca.client(&dir, "alice", "alice"),
        bad: other.client(&dir, "mallory", "mallory"),
    };
    let clients = [
        ("trusted", client(&pki.ca_pem, Some(&pki.good))),
        ("untrusted", client(&pki.ca_pem, Some(&pki.bad))),
        ("none", client(&pki.ca_pem, None)),
    ];
    for mode in ["on", "optional", "optional_no_ca"] {
        let gport = free_port();
        let g = start_gyre(&p, gport, &server_block(gport, &pki, mode));
        let ng = util::nginx::start_http(&nginx, &format!("tls-client-cert-{mode}"), &|port| {
            server_block(port, &pki, mode)
        })
        .expect("nginx did not start");
        let nport = ng.port;
        let mut seen = Vec::new();
        for (who, cfg) in &clients {
            let ours = ask(gport, cfg);
            let theirs = ask(nport, cfg);
            seen.push((*who, ours.clone()));
            assert_eq!(ours, theirs, "ssl_verify_client {mode}, {who} certificate");
        }
        let nlog = std::fs::read_to_string(ng.error_log()).unwrap_or_default();
        drop(ng);
        let glog = g.log();
        drop(g);
        // What each mode did (so the comparison above cannot pass on two
        // servers that both failed).
        let untrusted = &seen[1].1;
        match mode {
            "on" | "optional" => {
                let (status, body, closed) = untrusted.as_ref().unwrap();
                assert_eq!(status, "HTTP/1.1 400 Bad Request", "{mode}");
                assert!(body.contains("The SSL certificate error"), "{mode}: {body}");
                assert!(closed, "{mode}: connection kept after 495");
                let needle = "client SSL certificate verify error: ";
                let ours = log_message(&glog, needle);
                assert!(ours.is_some(), "{mode}: not logged:\n{glog}");
                assert_eq!(ours, log_message(&nlog, needle), "{mode}: log line");
                assert!(glog
                    .lines()
                    .any(|l| l.contains("[info]") && l.contains(needle)));
            }
            _ => {
                let (status, body, _) = untrusted.as_ref().unwrap();
                assert_eq!(status, "HTTP/1.1 200 OK");
                assert!(body.starts_with("FAILED:"), "{body}");
                assert!(body.contains("|CN=mallory|CN=other-ca|"), "{body}");
            }
        }
        let (_, body, _) = seen[0].1.as_ref().unwrap();
        assert!(
            body.starts_with("SUCCESS|CN=alice|CN=ca|"),
            "{mode}: {body}"
        );
        let fp = body.trim_end().rsplit('|').next().unwrap();
        assert_eq!(fp.len(), 40, "{body}");
    }
}
