//! HTTPS end to end with the real binary and real clients: curl (keep-alive,
//! SNI choosing between two certificates), `openssl s_client` (resumption
//! with `-reconnect` and `-sess_out`/`-sess_in`, across two workers; RSA or
//! ECDSA certificate by the client's signature algorithms), a rustls client
//! (keep-alive, a large file read and encrypted, mTLS accepted and refused,
//! the poll module), bad inputs, reload, and the `-t` errors.
//!
//! curl and openssl are Debian's; a test that needs one says so and skips
//! when it is missing. Every client has a deadline.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{ErrorKind, Read, Write};
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
use util::http::{free_port, probe, Running};
use util::{wait_for, Prefix, Server};

const IO: Duration = Duration::from_secs(10);

fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg(if tool == "openssl" {
            "version"
        } else {
            "--version"
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("{tool} not installed: skipping");
    }
    ok
}

struct Pki {
    ca: Ca,
    /// For `localhost`: ECDSA and RSA.
    ec: Leaf,
    rsa: Leaf,
    /// For `b.test`.
    b: Leaf,
}

fn pki(p: &Prefix) -> Pki {
    let dir = p.path("conf");
    let ca = Ca::new(&dir, "ca");
    let ec = ca.leaf(&dir, "ec", &["localhost"], Alg::Ecdsa);
    let rsa = ca.leaf(&dir, "rsa", &["localhost"], Alg::Rsa);
    let b = ca.leaf(&dir, "b", &["b.test"], Alg::Ecdsa);
    Pki { ca, ec, rsa, b }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Starts gyre with `workers` workers (`events` inside `events {}`) and the
/// `http` block made from the port; waits until it answers (a plain request
/// on a TLS port is answered too: with nginx's 400).
fn start(p: &Prefix, workers: u32, events: &str, http: impl Fn(u16) -> String) -> Running {
    let port = free_port();
    p.conf(&format!(
        "daemon off;\nerror_log logs/error.log info;\npid logs/gyre.pid;\n\
         worker_processes {workers};\nevents {{ worker_connections 256; {events} }}\n\
         http {{\naccess_log off;\n{}\n}}\n",
        http(port)
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
    Running { server, port }
}

fn two_servers(pki: &Pki, port: u16, extra: &str) -> String {
    format!(
        "server {{
            listen 127.0.0.1:{port} ssl;
            server_name localhost;
            ssl_certificate {ec};
            ssl_certificate_key {eck};
            ssl_certificate {rsa};
            ssl_certificate_key {rsak};
            root html;
            {extra}
        }}
        server {{
            listen 127.0.0.1:{port} ssl;
            server_name b.test;
            ssl_certificate {b};
            ssl_certificate_key {bk};
            return 200 \"server b\\n\";
        }}",
        ec = s(&pki.ec.cert),
        eck = s(&pki.ec.key),
        rsa = s(&pki.rsa.cert),
        rsak = s(&pki.rsa.key),
        b = s(&pki.b.cert),
        bk = s(&pki.b.key),
    )
}

fn curl(args: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn curl_keepalive_and_sni_picking_two_certificates() {
    if !have("curl") {
        return;
    }
    let p = Prefix::new("tls-curl");
    p.write("html/index.html", "tls index\n");
    let big: String = (0..64 * 1024)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    p.write("html/big.txt", &big);
    let pki = pki(&p);
    let r = start(&p, 1, "", |port| two_servers(&pki, port, ""));
    let ca = s(&pki.ca.pem);
    let url = |host: &str, path: &str| format!("https://{host}:{}{path}", r.port);
    let resolve = format!("b.test:{}:127.0.0.1", r.port);

    // Keep-alive: two requests, one connection, one handshake.
    let (out, err) = curl(&[
        "-v",
        "--cacert",
        &ca,
        &url("localhost", "/"),
        &url("localhost", "/index.html"),
    ]);
    assert_eq!(out, "tls index\ntls index\n", "{err}");
    assert!(err.contains("subject: CN=localhost"), "{err}");
    assert!(err.contains("Re-using existing connection"), "{err}");
    assert!(err.contains("ALPN: server accepted http/1.1"), "{err}");

    // SNI chooses the other server block and its certificate.
    let (out, err) = curl(&[
        "-v",
        "--cacert",
        &ca,
        "--resolve",
        &resolve,
        &url("b.test", "/"),
    ]);
    assert_eq!(out, "server b\n", "{err}");
    assert!(err.contains("subject: CN=b.test"), "{err}");

    // 64 KiB from the open-file cache's memory, encrypted.
    let (out, err) = curl(&["--cacert", &ca, &url("localhost", "/big.txt")]);
    assert!(
        out == big,
        "64 KiB body differs ({} bytes) {err}",
        out.len()
    );
}

// ------------------------------------------------------------ rustls client

fn roots(ca: &Path) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    roots
}

fn client(ca: &Path, client_cert: Option<&Leaf>) -> Arc<rustls::ClientConfig> {
    let b = rustls::ClientConfig::builder_with_provider(gyre_core::event::tls_conf::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(ca));
    let mut c = match client_cert {
        Some(l) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&l.cert)
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
            let key = PrivateKeyDer::from_pem_file(&l.key).unwrap();
            b.with_client_auth_cert(chain, key).unwrap()
        }
        None => b.with_no_client_auth(),
    };
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(c)
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn tls_connect(port: u16, cfg: &Arc<rustls::ClientConfig>, host: &str) -> Tls {
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(IO)).unwrap();
    sock.set_write_timeout(Some(IO)).unwrap();
    let name = ServerName::try_from(host.to_string()).unwrap();
    let c = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    rustls::StreamOwned::new(c, sock)
}

/// One GET on a keep-alive connection: (status, body).
fn get(t: &mut Tls, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
    get_at(t, "localhost", path)
}

fn get_at(t: &mut Tls, host: &str, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
    write!(t, "GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n")?;
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if t.read_some(&mut b)? == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        head.push(b[0]);
        assert!(head.len() < 16 * 1024, "head too long");
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status: u16 = head[9..12].parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0; len];
    t.read_exact(&mut body)?;
    Ok((status, body))
}

#[test]
fn rustls_keepalive_and_large_file_on_both_modules() {
    let p = Prefix::new("tls-rustls");
    p.write("html/index.html", "tls index\n");
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(p.path("html/big.bin"), &big).unwrap();
    let pki = pki(&p);
    let cfg = client(&pki.ca.pem, None);
    for events in ["use epoll;", "use poll;"] {
        let r = start(&p, 1, events, |port| {
            two_servers(&pki, port, "ssl_protocols TLSv1.2 TLSv1.3;")
        });
        let mut t = tls_connect(r.port, &cfg, "localhost");
        assert_eq!(get(&mut t, "/").unwrap(), (200, b"tls index\n".to_vec()));
        assert_eq!(
            t.conn.protocol_version(),
            Some(rustls::ProtocolVersion::TLSv1_3)
        );
        assert_eq!(t.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
        // Larger than the in-memory file limit: the sendfile path, read
        // and encrypted under TLS, across many full socket buffers.
        let (st, body) = get(&mut t, "/big.bin").unwrap();
        assert_eq!(st, 200, "{events}");
        assert!(body == big, "{events}: 3 MB body differs");
        assert_eq!(get(&mut t, "/index.html").unwrap().0, 200, "{events}");
        let mut b = tls_connect(r.port, &cfg, "b.test");
        assert_eq!(
            get_at(&mut b, "b.test", "/").unwrap(),
            (200, b"server b\n".to_vec())
        );
        drop(r);
    }
}

#[test]
fn mtls_accepted_and_refused() {
    let p = Prefix::new("tls-mtls");
    p.write("html/index.html", "secret\n");
    let pki = pki(&p);
    let dir = p.path("conf");
    let good = pki.ca.client(&dir, "client", "alice");
    let other_ca = Ca::new(&dir, "other-ca");
    let bad = other_ca.client(&dir, "mallory", "mallory");
    let r = start(&p, 1, "", |port| {
        format!(
            "server {{
                listen 127.0.0.1:{port} ssl;
                server_name localhost;
                ssl_certificate {c};
                ssl_certificate_key {k};
                ssl_client_certificate {ca};
                ssl_verify_client on;
                root html;
            }}",
            c = s(&pki.ec.cert),
            k = s(&pki.ec.key),
            ca = s(&pki.ca.pem),
        )
    });
    // A certificate from the trusted CA: served.
    let mut t = tls_connect(r.port, &client(&pki.ca.pem, Some(&good)), "localhost");
    assert_eq!(get(&mut t, "/").unwrap(), (200, b"secret\n".to_vec()));

    // No certificate: nginx's 400 page, connection closed.
    let mut t = tls_connect(r.port, &client(&pki.ca.pem, None), "localhost");
    let (st, body) = get(&mut t, "/").unwrap();
    assert_eq!(st, 400);
    assert!(String::from_utf8_lossy(&body).contains("No required SSL certificate was sent"));
    assert!(r
        .server
        .logged("client sent no required SSL certificate", IO));

    // A certificate from another CA: as nginx, the handshake finishes and
    // the request gets 400 "The SSL certificate error" (495).
    let mut t = tls_connect(r.port, &client(&pki.ca.pem, Some(&bad)), "localhost");
    let (st, body) = get(&mut t, "/").unwrap();
    assert_eq!(st, 400);
    assert!(String::from_utf8_lossy(&body).contains("The SSL certificate error"));
    assert!(r.server.logged(
        "client SSL certificate verify error: (21:unable to verify the first certificate) \
         while reading client request headers",
        IO
    ));
    // Still serving.
    let mut t = tls_connect(r.port, &client(&pki.ca.pem, Some(&good)), "localhost");
    assert_eq!(get(&mut t, "/").unwrap().0, 200);
}

// ----------------------------------------------------------------- openssl

/// Runs `openssl s_client ARGS` against the port with stdin held open for
/// `hold` (so TLS 1.3 tickets arrive before it exits); returns its stdout.
fn s_client(port: u16, args: &[&str], hold: Duration) -> String {
    let mut child = Command::new("timeout")
        .args(["10", "openssl", "s_client", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(hold);
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn count(out: &str, prefix: &str) -> usize {
    out.lines().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn openssl_resumption_across_two_workers() {
    if !have("openssl") {
        return;
    }
    let p = Prefix::new("tls-resume");
    let pki = pki(&p);
    let ca = s(&pki.ca.pem);
    // reuseport: the kernel spreads connections over both workers' sockets
    // by their addresses, so resumptions land on both.
    let r = start(&p, 2, "", |port| {
        format!(
            "server {{
                listen 127.0.0.1:{port} ssl reuseport;
                server_name localhost;
                ssl_certificate {c};
                ssl_certificate_key {k};
                ssl_protocols TLSv1.2 TLSv1.3;
                return 200 ok;
            }}",
            c = s(&pki.ec.cert),
            k = s(&pki.ec.key),
        )
    });
    let hold = Duration::from_millis(300);
    // TLS 1.2, -reconnect: the first handshake is full, the five
    // reconnections resume with the ticket.
    let out = s_client(r.port, &["-tls1_2", "-CAfile", &ca, "-reconnect"], hold);
    assert_eq!(count(&out, "New, TLSv1.2"), 1, "{out}");
    assert_eq!(count(&out, "Reused, TLSv1.2"), 5, "{out}");

    // TLS 1.3: a ticket saved by one connection resumes on the next ten,
    // whichever worker takes them.
    let sess = s(&p.path("conf/sess.pem"));
    let out = s_client(r.port, &["-CAfile", &ca, "-sess_out", &sess], hold);
    assert_eq!(count(&out, "New, TLSv1.3"), 1, "{out}");
    for i in 0..10 {
        let out = s_client(r.port, &["-CAfile", &ca, "-sess_in", &sess], hold);
        assert_eq!(count(&out, "Reused, TLSv1.3"), 1, "resumption {i}: {out}");
    }
}

#[test]
fn shared_session_cache_without_tickets() {
    if !have("openssl") {
        return;
    }
    let p = Prefix::new("tls-shared-cache");
    let pki = pki(&p);
    let ca = s(&pki.ca.pem);
    let r = start(&p, 2, "", |port| {
        format!(
            "server {{
                listen 127.0.0.1:{port} ssl reuseport;
                ssl_certificate {c};
                ssl_certificate_key {k};
                ssl_session_tickets off;
                ssl_session_cache shared:SSL:1m;
                return 200 ok;
            }}",
            c = s(&pki.ec.cert),
            k = s(&pki.ec.key),
        )
    });
    let hold = Duration::from_millis(200);
    let sess = s(&p.path("conf/sess12.pem"));
    let out = s_client(
        r.port,
        &["-tls1_2", "-CAfile", &ca, "-sess_out", &sess],
        hold,
    );
    assert_eq!(count(&out, "New, TLSv1.2"), 1, "{out}");
    // No ticket: the session id is looked up in the zone both workers see.
    assert!(!out.contains("TLS session ticket:"), "{out}");
    for i in 0..10 {
        let out = s_client(
            r.port,
            &["-tls1_2", "-CAfile", &ca, "-sess_in", &sess],
            hold,
        );
        assert_eq!(count(&out, "Reused, TLSv1.2"), 1, "resumption {i}: {out}");
    }
    // A reload with the zone's name and size unchanged keeps it, as nginx
    // does: the new workers resume the session the old ones stored.
    let old = r.server.workers();
    assert!(r.server.signal("reload").status.success());
    assert!(
        wait_for(Duration::from_secs(10), || {
            let now = r.server.workers();
            now.len() == 2 && now.iter().all(|w| !old.contains(w))
        }),
        "workers not replaced after reload"
    );
    for i in 0..4 {
        let out = s_client(
            r.port,
            &["-tls1_2", "-CAfile", &ca, "-sess_in", &sess],
            hold,
        );
        assert_eq!(count(&out, "Reused, TLSv1.2"), 1, "after reload {i}: {out}");
    }
}

#[test]
fn certificate_chosen_by_signature_algorithms() {
    if !have("openssl") {
        return;
    }
    let p = Prefix::new("tls-sigalgs");
    let pki = pki(&p);
    let r = start(&p, 1, "", |port| two_servers(&pki, port, ""));
    let hold = Duration::from_millis(100);
    let rsa = s_client(
        r.port,
        &[
            "-servername",
            "localhost",
            "-sigalgs",
            "RSA-PSS+SHA256:RSA+SHA256",
        ],
        hold,
    );
    assert!(rsa.contains("Server public key is 2048 bit"), "{rsa}");
    let ec = s_client(
        r.port,
        &["-servername", "localhost", "-sigalgs", "ECDSA+SHA256"],
        hold,
    );
    assert!(ec.contains("Server public key is 256 bit"), "{ec}");
}

// -------------------------------------------------------------- bad inputs

/// A line of the error log at nginx's `[info]` level with `*N ` right
/// before `msg` and `tail` after it.
fn info_line(log: &str, msg: &str, tail: &str) -> bool {
    log.lines().any(|l| {
        let Some(at) = l.find(msg) else {
            return false;
        };
        let star = l[..at].trim_end().rsplit(' ').next().unwrap_or("");
        l.contains("[info] ")
            && star.len() > 1
            && star.starts_with('*')
            && star[1..].chars().all(|c| c.is_ascii_digit())
            && l[at..].contains(tail)
    })
}

fn closed_by_server(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 4096];
    for _ in 0..64 {
        match s.read_some(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe)
            }
        }
    }
    false
}

fn client_hello(cfg: &Arc<rustls::ClientConfig>) -> Vec<u8> {
    let name = ServerName::try_from("localhost").unwrap();
    let mut c = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    let mut out = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut out).unwrap();
    }
    out
}

#[test]
fn bad_inputs_cost_only_their_connection() {
    let p = Prefix::new("tls-bad");
    p.write("html/index.html", "still here\n");
    let pki = pki(&p);
    let cfg = client(&pki.ca.pem, None);
    let r = start(&p, 1, "", |port| {
        two_servers(&pki, port, "client_header_timeout 1s;")
    });
    let mut keep = tls_connect(r.port, &cfg, "localhost");
    assert_eq!(get(&mut keep, "/").unwrap().0, 200);

    // A plain HTTP request: nginx's page, and the connection is closed.
    let mut plain = TcpStream::connect(("127.0.0.1", r.port)).unwrap();
    plain.set_read_timeout(Some(IO)).unwrap();
    plain
        .write_all(b"GET /missing HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    plain.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{resp}");
    assert!(resp.contains("Connection: close\r\n"), "{resp}");
    assert!(
        resp.contains("<center>The plain HTTP request was sent to HTTPS port</center>"),
        "{resp}"
    );
    assert!(r
        .server
        .logged("client sent plain HTTP request to HTTPS port", IO));
    let log = r.server.log();
    assert!(
        info_line(
            &log,
            "client sent plain HTTP request to HTTPS port while reading client request headers",
            ", client: 127.0.0.1, server: localhost, request: \"GET /missing HTTP/1.1\", host: \"localhost\""
        ),
        "{log}"
    );

    // Garbage that looks like a TLS record: an alert, closed, logged.
    let mut g = TcpStream::connect(("127.0.0.1", r.port)).unwrap();
    g.write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5])
        .unwrap();
    assert!(closed_by_server(&mut g, IO), "garbage");
    assert!(r.server.logged("SSL_do_handshake() failed", IO));
    assert!(r
        .server
        .logged("while SSL handshaking, client: 127.0.0.1", IO));
    // nginx's level and shape: `[info] PID#0: *N SSL_do_handshake() failed
    // (SSL: ...) while SSL handshaking, client: ADDR, server: LISTEN`.
    let server = format!(", server: 127.0.0.1:{}", r.port);
    let log = r.server.log();
    assert!(
        info_line(&log, "SSL_do_handshake() failed (SSL: ", &server),
        "{log}"
    );

    // Half a ClientHello, then the client disappears.
    let hello = client_hello(&cfg);
    let mut t = TcpStream::connect(("127.0.0.1", r.port)).unwrap();
    t.write_all(&hello[..hello.len() / 2]).unwrap();
    drop(t);
    assert!(r
        .server
        .logged("peer closed connection in SSL handshake", IO));
    let log = r.server.log();
    assert!(
        info_line(&log, "peer closed connection in SSL handshake", &server),
        "{log}"
    );

    // A stalled handshake is closed by client_header_timeout.
    let mut st = TcpStream::connect(("127.0.0.1", r.port)).unwrap();
    st.write_all(&hello[..20]).unwrap();
    assert!(
        closed_by_server(&mut st, IO),
        "stalled handshake not closed"
    );
    assert!(r.server.logged(
        "client timed out (110: Connection timed out) while SSL handshaking",
        IO
    ));
    let log = r.server.log();
    assert!(
        info_line(
            &log,
            "client timed out (110: Connection timed out)",
            &server
        ),
        "{log}"
    );

    // The established connection was not disturbed (its keep-alive timer
    // is 75 s), and new ones are served.
    assert_eq!(
        get(&mut keep, "/").unwrap(),
        (200, b"still here\n".to_vec())
    );
    let mut again = tls_connect(r.port, &cfg, "localhost");
    assert_eq!(get(&mut again, "/").unwrap().0, 200);
}

// ------------------------------------------------------------------ reload

fn peer_cn(t: &Tls) -> String {
    let certs = t.conn.peer_certificates().unwrap();
    // The CN is the only printable run we put in the subject.
    let der = certs[0].as_ref();
    for name in ["renewed", "localhost"] {
        if der.windows(name.len()).any(|w| w == name.as_bytes()) {
            return name.to_string();
        }
    }
    String::new()
}

#[test]
fn hup_reloads_certificates_and_keeps_connections() {
    let p = Prefix::new("tls-reload");
    p.write("html/index.html", "x\n");
    let dir = p.path("conf");
    let ca = Ca::new(&dir, "ca");
    let first = ca.leaf(&dir, "site", &["localhost"], Alg::Ecdsa);
    let r = start(&p, 1, "", |port| {
        format!(
            "server {{
                listen 127.0.0.1:{port} ssl;
                ssl_certificate {c};
                ssl_certificate_key {k};
                root html;
            }}",
            c = s(&first.cert),
            k = s(&first.key),
        )
    });
    let cfg = client(&ca.pem, None);
    let mut old = tls_connect(r.port, &cfg, "localhost");
    assert_eq!(get(&mut old, "/").unwrap().0, 200);
    assert_eq!(peer_cn(&old), "localhost");
    // New files under the same names (a renewed certificate, with another
    // subject name in it as well), then HUP.
    let renewed = ca.leaf(&dir, "site", &["localhost", "renewed"], Alg::Ecdsa);
    assert_eq!(renewed.cert, first.cert);
    let out = r.server.signal("reload");
    assert!(out.status.success());
    let saw_new = wait_for(Duration::from_secs(10), || {
        let mut t = tls_connect(r.port, &cfg, "localhost");
        get(&mut t, "/").is_ok() && peer_cn(&t) == "renewed"
    });
    assert!(
        saw_new,
        "new certificate not served after reload; log:\n{}",
        r.server.log()
    );
    // The connection made before the reload finishes its request (the old
    // worker answers it with Connection: close as it exits).
    assert_eq!(get(&mut old, "/").unwrap().0, 200);
}

// ------------------------------------------------------------------ gyre -t

fn test_conf(p: &Prefix, server: &str) -> String {
    p.conf(&format!(
        "daemon off;\nerror_log logs/error.log;\nevents {{}}\nhttp {{\n{server}\n}}\n"
    ));
    let out = p.run(&["-t"]);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn config_errors_at_t() {
    let p = Prefix::new("tls-t");
    let pki = pki(&p);
    let (c, k) = (s(&pki.ec.cert), s(&pki.ec.key));
    let conf = s(&p.path("conf/gyre.conf"));

    let e = test_conf(&p, "server {\nlisten 127.0.0.1:8443 ssl;\n}");
    assert!(
        e.contains(&format!(
            "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive in {conf}:5"
        )),
        "{e}"
    );
    let e = test_conf(
        &p,
        "server { listen 127.0.0.1:8443 ssl; ssl_certificate /nonexistent.crt; ssl_certificate_key /nonexistent.key; }",
    );
    assert!(
        e.contains("cannot load certificate \"/nonexistent.crt\": BIO_new_file() failed (2: No such file or directory)"),
        "{e}"
    );
    let e = test_conf(
        &p,
        &format!("server {{ listen 127.0.0.1:8443 ssl; ssl_certificate {c}; ssl_certificate_key /nonexistent.key; }}"),
    );
    assert!(
        e.contains("cannot load certificate key \"/nonexistent.key\""),
        "{e}"
    );
    let e = test_conf(
        &p,
        &format!("server {{ listen 127.0.0.1:8443 ssl; ssl_certificate {c}; ssl_certificate_key {k}; ssl_ciphers HIGH:FOO; }}"),
    );
    assert!(e.contains("unknown cipher \"FOO\""), "{e}");
    let e = test_conf(
        &p,
        &format!("server {{ listen 127.0.0.1:8443 ssl; ssl_certificate {c}; ssl_certificate_key {k}; ssl_protocols TLSv1.1; }}"),
    );
    assert!(e.contains("\"TLSv1.1\" is not supported"), "{e}");
    let e = test_conf(
        &p,
        &format!("server {{ listen 127.0.0.1:8443 ssl; ssl_certificate {c}; ssl_certificate_key {k}; ssl_verify_client on; }}"),
    );
    assert!(
        e.contains("no ssl_client_certificate for ssl_verify_client"),
        "{e}"
    );
    // A key that is not the certificate's.
    let e = test_conf(
        &p,
        &format!(
            "server {{ listen 127.0.0.1:8443 ssl; ssl_certificate {c}; ssl_certificate_key {}; }}",
            s(&pki.b.key)
        ),
    );
    assert!(e.contains("key values mismatch"), "{e}");
    // All of it right: the test passes, with every directive accepted.
    let e = test_conf(
        &p,
        &format!(
            "ssl_session_cache shared:SSL:10m; ssl_session_timeout 10m;
             server {{ listen 127.0.0.1:8443 ssl default_server reuseport;
               ssl_certificate {c}; ssl_certificate_key {k};
               ssl_protocols TLSv1.2 TLSv1.3; ssl_ciphers ECDHE+AESGCM:!aNULL;
               ssl_prefer_server_ciphers on; ssl_session_tickets on;
               ssl_ecdh_curve X25519:prime256v1; ssl_verify_depth 2;
               ssl_client_certificate {ca}; ssl_verify_client optional; }}",
            ca = s(&pki.ca.pem)
        ),
    );
    assert!(e.contains("test is successful"), "{e}");
}

/// Same inputs to Debian's nginx and to gyre, same certificate: the status
/// line, `Connection` and page title of a plain request on the TLS port,
/// and a normal request over TLS.
#[test]
fn differential_against_nginx() {
    let nginx = PathBuf::from("/usr/sbin/nginx");
    if !nginx.exists() {
        println!("nginx not installed: skipping the differential test");
        return;
    }
    let p = Prefix::new("tls-diff");
    p.write("html/index.html", "same\n");
    let pki = pki(&p);
    let server = |port: u16| {
        format!(
            "server {{ listen 127.0.0.1:{port} ssl; server_name localhost;
               ssl_certificate {}; ssl_certificate_key {}; root {}; }}",
            s(&pki.ec.cert),
            s(&pki.ec.key),
            s(&p.path("html"))
        )
    };
    let r = start(&p, 1, "", server);
    let nport = free_port();
    let ndir = p.path("nginx");
    std::fs::create_dir_all(ndir.join("logs")).unwrap();
    std::fs::write(
        ndir.join("nginx.conf"),
        format!(
            "daemon off; master_process off; error_log {0}/logs/error.log info; pid {0}/nginx.pid;
             events {{}} http {{ access_log off; {1} }}",
            ndir.display(),
            server(nport)
        ),
    )
    .unwrap();
    let mut ng = Command::new(&nginx)
        .args(["-p", &s(&ndir), "-c", &s(&ndir.join("nginx.conf"))])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || probe(nport)),
        "nginx did not start"
    );
    let plain = |port: u16| {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(IO)).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        let status = out.lines().next().unwrap_or("").to_string();
        let conn = out
            .lines()
            .find(|l| l.starts_with("Connection:"))
            .unwrap_or("")
            .to_string();
        let title = out
            .split("<title>")
            .nth(1)
            .and_then(|t| t.split("</title>").next())
            .unwrap_or("")
            .to_string();
        (status, conn, title)
    };
    let cfg = client(&pki.ca.pem, None);
    let over_tls = |port: u16| {
        let mut t = tls_connect(port, &cfg, "localhost");
        let r = get(&mut t, "/index.html").unwrap();
        (r, t.conn.protocol_version())
    };
    let results = (
        plain(r.port),
        plain(nport),
        over_tls(r.port),
        over_tls(nport),
    );
    let _ = ng.kill();
    let _ = ng.wait();
    assert_eq!(results.0, results.1, "plain HTTP on the TLS port");
    assert_eq!(
        results.2, results.3,
        "GET over TLS (and the default protocol)"
    );
}
