//! The kv process's TLS port through the real binary: `redis-cli --tls`
//! (with and without a client certificate, as `tls-auth-clients` asks), a
//! rustls client speaking RESP (a 1 MB value both ways), a TLS-only server
//! (`port 0`), and the configuration errors. redis-cli is Debian's; its
//! tests skip with a message when it is missing.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use util::ReadSome;

use gyre_core::event::tls::rustls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use util::certs::{Alg, Ca, Leaf};
use util::http::free_port;
use util::{wait_for, Prefix, Server};

struct Kv {
    s: Server,
    tls_port: u16,
    plain_port: Option<u16>,
}

struct Pki {
    ca: Ca,
    server: Leaf,
    client: Leaf,
}

fn pki(p: &Prefix) -> Pki {
    let dir = p.path("conf");
    let ca = Ca::new(&dir, "ca");
    let server = ca.leaf(&dir, "kv", &["localhost"], Alg::Ecdsa);
    let client = ca.client(&dir, "client", "alice");
    Pki { ca, server, client }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn start(p: &Prefix, pki: &Pki, plain: bool, extra: &str) -> Kv {
    let tls_port = free_port();
    let plain_port = plain.then(free_port);
    let listen = match plain_port {
        Some(port) => format!("listen 127.0.0.1:{port};"),
        None => "port 0;".to_string(),
    };
    p.conf(&format!(
        "daemon off;\nerror_log logs/error.log info;\npid logs/gyre.pid;\nworker_processes 1;\n\
         events {{}}\nkv {{\n{listen}\ntls-port {tls_port};\ntls-cert-file {};\n\
         tls_key_file {};\ntls-ca-cert-file {};\n{extra}\n}}\n",
        s(&pki.server.cert),
        s(&pki.server.key),
        s(&pki.ca.pem),
    ));
    let srv = p.start();
    assert!(
        wait_for(Duration::from_secs(10), || TcpStream::connect((
            "127.0.0.1",
            tls_port
        ))
        .is_ok()),
        "{}",
        srv.log()
    );
    Kv {
        s: srv,
        tls_port,
        plain_port,
    }
}

fn have_redis_cli() -> bool {
    let ok = Command::new("redis-cli")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("redis-cli not installed: skipping");
    }
    ok
}

/// `redis-cli ARGS` with a deadline: (stdout, stderr).
fn redis_cli(args: &[&str]) -> (String, String) {
    let out = Command::new("timeout")
        .args(["10", "redis-cli"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn redis_cli_tls_with_client_certificate() {
    if !have_redis_cli() {
        return;
    }
    let p = Prefix::new("kv-tls-cli");
    let pki = pki(&p);
    let kv = start(&p, &pki, true, "");
    let port = kv.tls_port.to_string();
    let (ca, cert, key) = (s(&pki.ca.pem), s(&pki.client.cert), s(&pki.client.key));
    let tls = |cmd: &[&str]| {
        let mut a = vec![
            "--tls",
            "--cacert",
            &ca,
            "--cert",
            &cert,
            "--key",
            &key,
            "-h",
            "127.0.0.1",
            "-p",
            &port,
        ];
        a.extend_from_slice(cmd);
        redis_cli(&a)
    };
    assert_eq!(tls(&["PING"]).0, "PONG\n");
    assert_eq!(tls(&["SET", "k", "over tls"]).0, "OK\n");
    assert_eq!(tls(&["GET", "k"]).0, "over tls\n");
    // The same keyspace behind the plain port.
    let plain = kv.plain_port.unwrap().to_string();
    assert_eq!(redis_cli(&["-p", &plain, "GET", "k"]).0, "over tls\n");

    // tls-auth-clients yes (Redis's default): no certificate, no service.
    let (out, err) = redis_cli(&["--tls", "--cacert", &ca, "-p", &port, "PING"]);
    assert!(
        !out.contains("PONG"),
        "served without a client certificate: {out}"
    );
    assert!(!(out.clone() + &err).is_empty());
    // And the server is still there.
    assert_eq!(tls(&["PING"]).0, "PONG\n");
}

fn rustls_client(ca: &Path, client: Option<&Leaf>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(gyre_core::event::tls_conf::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match client {
        Some(l) => b
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(&l.cert)
                    .unwrap()
                    .map(|c| c.unwrap())
                    .collect(),
                PrivateKeyDer::from_pem_file(&l.key).unwrap(),
            )
            .unwrap(),
        None => b.with_no_client_auth(),
    })
}

fn read_reply(t: &mut impl Read, want: usize) -> Vec<u8> {
    let mut out = vec![0; want];
    t.read_exact(&mut out).unwrap();
    out
}

#[test]
fn tls_only_with_optional_client_auth_and_a_large_value() {
    let p = Prefix::new("kv-tls-only");
    let pki = pki(&p);
    let kv = start(
        &p,
        &pki,
        false,
        "tls-auth-clients optional;\ntls-protocols \"TLSv1.2 TLSv1.3\";",
    );
    assert_eq!(kv.plain_port, None);
    // One listener: the TLS one.
    assert!(kv.s.logged("kv listening on", Duration::from_secs(5)));
    assert_eq!(
        kv.s.log().matches("kv listening on").count(),
        1,
        "{}",
        kv.s.log()
    );

    let sock = TcpStream::connect(("127.0.0.1", kv.tls_port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock.set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let cfg = rustls_client(&pki.ca.pem, None);
    let conn =
        rustls::ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap()).unwrap();
    let mut t = rustls::StreamOwned::new(conn, sock);
    t.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    assert_eq!(read_reply(&mut t, 7), b"+PONG\r\n");
    // 1 MB in and out: many records each way.
    let big: Vec<u8> = (0..1_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut cmd = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", big.len()).into_bytes();
    cmd.extend_from_slice(&big);
    cmd.extend_from_slice(b"\r\n*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
    t.write_all(&cmd).unwrap();
    assert_eq!(read_reply(&mut t, 5), b"+OK\r\n");
    let head = format!("${}\r\n", big.len());
    assert_eq!(read_reply(&mut t, head.len()), head.as_bytes());
    assert!(read_reply(&mut t, big.len()) == big, "1 MB value differs");
    assert_eq!(read_reply(&mut t, 2), b"\r\n");
    // INFO says what Redis says for a TLS-only server.
    t.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .unwrap();
    let mut info = Vec::new();
    let mut b = [0u8; 4096];
    while !info.ends_with(b"\r\n\r\n") || !String::from_utf8_lossy(&info).contains("tcp_port") {
        let n = t.read_some(&mut b).unwrap();
        assert!(n > 0 && info.len() < 1 << 20);
        info.extend_from_slice(&b[..n]);
    }
    assert!(String::from_utf8_lossy(&info).contains("\r\ntcp_port:0\r\n"));
    // With a client certificate too (optional).
    let sock = TcpStream::connect(("127.0.0.1", kv.tls_port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let cfg = rustls_client(&pki.ca.pem, Some(&pki.client));
    let conn =
        rustls::ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap()).unwrap();
    let mut t = rustls::StreamOwned::new(conn, sock);
    t.write_all(b"*2\r\n$6\r\nSTRLEN\r\n$3\r\nbig\r\n").unwrap();
    assert_eq!(read_reply(&mut t, 10), b":1000000\r\n");
}

#[test]
fn tls_configuration_errors_at_t() {
    let p = Prefix::new("kv-tls-t");
    let pki = pki(&p);
    let t = |kv: &str| {
        p.conf(&format!("daemon off;\nevents {{}}\nkv {{\n{kv}\n}}\n"));
        let out = p.run(&["-t"]);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let (c, k) = (s(&pki.server.cert), s(&pki.server.key));
    let e = t(&format!(
        "tls-port 6390; tls-cert-file {c}; tls-key-file {k};"
    ));
    assert!(
        e.contains("Either tls-ca-cert-file or tls-ca-cert-dir must be specified"),
        "{e}"
    );
    let e = t(&format!(
        "tls-port 6390; tls-auth-clients no; tls-cert-file /nonexistent; tls-key-file {k};"
    ));
    assert!(
        e.contains("Failed to load certificate/private key /nonexistent"),
        "{e}"
    );
    let e = t(&format!("tls-port 6390; tls-auth-clients no; tls-cert-file {c}; tls-key-file {k}; tls-protocols TLSv1.1;"));
    assert!(e.contains("\"TLSv1.1\" is not supported"), "{e}");
    let e = t("listen 127.0.0.1:6390; port 0;");
    assert!(
        e.contains("\"port 0\" and \"listen\" exclude each other"),
        "{e}"
    );
    let e = t(&format!(
        "port 0; tls_port 6390; tls_auth_clients no; tls_cert_file {c}; tls_key_file {k};"
    ));
    assert!(e.contains("test is successful"), "{e}");
}

/// The same redis-cli invocations against Debian's redis-server and gyre,
/// both TLS-only with the same certificates: same output, refusal included.
#[test]
fn differential_against_redis_server() {
    if !have_redis_cli() {
        return;
    }
    let redis = Path::new("/usr/bin/redis-server");
    if !redis.exists() {
        println!("redis-server not installed: skipping the differential test");
        return;
    }
    let p = Prefix::new("kv-tls-diff");
    let pki = pki(&p);
    let kv = start(&p, &pki, false, "");
    let rport = free_port();
    let mut rs = Command::new(redis)
        .args(["--port", "0", "--tls-port", &rport.to_string()])
        .args([
            "--tls-cert-file",
            &s(&pki.server.cert),
            "--tls-key-file",
            &s(&pki.server.key),
        ])
        .args([
            "--tls-ca-cert-file",
            &s(&pki.ca.pem),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--dir", &s(&p.path("logs"))])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = wait_for(Duration::from_secs(10), || {
        TcpStream::connect(("127.0.0.1", rport)).is_ok()
    });
    let (ca, cert, key) = (s(&pki.ca.pem), s(&pki.client.cert), s(&pki.client.key));
    let run = |port: u16, with_cert: bool, cmd: &[&str]| {
        let port = port.to_string();
        let mut a = vec!["--tls", "--cacert", ca.as_str(), "-p", port.as_str()];
        if with_cert {
            a.extend_from_slice(&["--cert", cert.as_str(), "--key", key.as_str()]);
        }
        a.extend_from_slice(cmd);
        redis_cli(&a)
    };
    let cases: [(bool, &[&str]); 5] = [
        (true, &["PING"]),
        (true, &["SET", "k", "v"]),
        (true, &["GET", "k"]),
        (true, &["INCR", "k"]),
        (false, &["PING"]),
    ];
    let mut diffs = Vec::new();
    for (with_cert, cmd) in cases {
        let mut g = run(kv.tls_port, with_cert, cmd);
        let mut r = run(rport, with_cert, cmd);
        if !with_cert {
            // Refused: no reply, an error; redis-server's is a FIN or a
            // reset from one run to the next ("Server closed the
            // connection" / "Connection reset by peer").
            for x in [&mut g, &mut r] {
                x.1 = x.1.starts_with("Error: ").to_string();
            }
        }
        if g != r {
            diffs.push(format!("{cmd:?} cert={with_cert}: gyre {g:?} redis {r:?}"));
        }
    }
    let _ = rs.kill();
    let _ = rs.wait();
    assert!(up, "redis-server did not start");
    assert!(diffs.is_empty(), "{diffs:#?}");
}

/// A TLS handshake for `name`, then PING: whether the certificate served
/// covers `name` (the client verifies it).
fn tls_ping(port: u16, cfg: &Arc<rustls::ClientConfig>, name: &str) -> bool {
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let c =
        rustls::ClientConnection::new(cfg.clone(), ServerName::try_from(name.to_string()).unwrap())
            .unwrap();
    let mut t = rustls::StreamOwned::new(c, sock);
    if t.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut b = [0u8; 7];
    t.read_exact(&mut b).is_ok() && &b == b"+PONG\r\n"
}

#[test]
fn config_set_tls_files_reloads_certificates() {
    if !have_redis_cli() {
        return;
    }
    let p = Prefix::new("kv-tls-config-set");
    let pki = pki(&p);
    let kv = start(&p, &pki, true, "");
    let plain = kv.plain_port.unwrap().to_string();
    let cli = |args: &[&str]| {
        let mut a = vec!["-p", plain.as_str()];
        a.extend_from_slice(args);
        redis_cli(&a).0
    };
    let cfg = rustls_client(&pki.ca.pem, Some(&pki.client));
    assert!(tls_ping(kv.tls_port, &cfg, "localhost"));
    assert!(!tls_ping(kv.tls_port, &cfg, "renewed"));
    assert_eq!(
        cli(&["CONFIG", "GET", "tls-cert-file"]),
        format!("tls-cert-file\n{}\n", s(&pki.server.cert))
    );

    // A missing file: Redis's error, nothing changed.
    let out = cli(&["CONFIG", "SET", "tls-cert-file", "/nonexistent/kv.crt"]);
    assert_eq!(
        out.trim_end(),
        "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - \
         Unable to update TLS configuration. Check server logs."
    );
    assert!(tls_ping(kv.tls_port, &cfg, "localhost"));
    assert_eq!(
        cli(&["CONFIG", "GET", "tls-cert-file"]),
        format!("tls-cert-file\n{}\n", s(&pki.server.cert))
    );

    // A new certificate and key, set together: new handshakes get it.
    let dir = p.path("conf");
    let renewed = pki.ca.leaf(&dir, "kv2", &["renewed"], Alg::Ecdsa);
    let out = cli(&[
        "CONFIG",
        "SET",
        "tls-cert-file",
        &s(&renewed.cert),
        "tls-key-file",
        &s(&renewed.key),
    ]);
    assert_eq!(out, "OK\n");
    assert!(tls_ping(kv.tls_port, &cfg, "renewed"));
    assert!(!tls_ping(kv.tls_port, &cfg, "localhost"));

    // The same names again after the files were replaced (rotation): read
    // again, as Redis does.
    let back = pki.ca.leaf(&dir, "kv2", &["localhost"], Alg::Ecdsa);
    assert_eq!(back.cert, renewed.cert);
    let out = cli(&["CONFIG", "SET", "tls-cert-file", &s(&back.cert)]);
    assert_eq!(out, "OK\n");
    assert!(tls_ping(kv.tls_port, &cfg, "localhost"));
}

#[test]
fn reload_rereads_changed_certificates_and_keeps_the_kv_process() {
    if !have_redis_cli() {
        return;
    }
    let p = Prefix::new("kv-tls-reload");
    let pki = pki(&p);
    let kv = start(&p, &pki, true, "");
    let plain = kv.plain_port.unwrap().to_string();
    let cli = |args: &[&str]| {
        let mut a = vec!["-p", plain.as_str()];
        a.extend_from_slice(args);
        redis_cli(&a).0
    };
    assert_eq!(cli(&["SET", "k", "kept"]), "OK\n");
    let cfg = rustls_client(&pki.ca.pem, Some(&pki.client));
    assert!(tls_ping(kv.tls_port, &cfg, "localhost"));
    assert!(!tls_ping(kv.tls_port, &cfg, "renewed"));
    // New files under the same names (kv {} unchanged), then HUP.
    let dir = p.path("conf");
    let renewed = pki.ca.leaf(&dir, "kv", &["renewed"], Alg::Ecdsa);
    assert_eq!(renewed.cert, pki.server.cert);
    assert!(kv.s.signal("reload").status.success());
    assert!(
        wait_for(Duration::from_secs(10), || tls_ping(
            kv.tls_port,
            &cfg,
            "renewed"
        )),
        "new certificate not served after reload; log:\n{}",
        kv.s.log()
    );
    // The same kv process: the keyspace is still there.
    assert_eq!(cli(&["GET", "k"]), "kept\n");
    assert!(kv
        .s
        .logged("TLS certificates reloaded", Duration::from_secs(5)));
}

#[test]
fn redis_crate_over_tls_with_a_client_certificate() {
    let p = Prefix::new("kv-tls-redis-crate");
    let pki = pki(&p);
    let dir = p.path("conf");
    // A certificate for the address the URL names.
    let ip = pki.ca.leaf(&dir, "kv-ip", &["127.0.0.1"], Alg::Ecdsa);
    let pki = Pki {
        server: ip,
        ca: pki.ca,
        client: pki.client,
    };
    let kv = start(&p, &pki, false, "");
    let read = |p: &Path| std::fs::read(p).unwrap();
    let url = format!("rediss://127.0.0.1:{}/", kv.tls_port);
    let certs = |client: bool| redis::TlsCertificates {
        client_tls: client.then(|| redis::ClientTlsConfig {
            client_cert: read(&pki.client.cert),
            client_key: read(&pki.client.key),
        }),
        root_cert: Some(read(&pki.ca.pem)),
    };
    let client = redis::Client::build_with_tls(url.as_str(), certs(true)).unwrap();
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(10))
        .unwrap();
    con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("via redis-rs")
        .query(&mut con)
        .unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(v, "via redis-rs");
    let n: i64 = redis::cmd("INCR").arg("n").query(&mut con).unwrap();
    assert_eq!(n, 1);
    // tls-auth-clients yes: without a certificate the connection fails.
    let anon = redis::Client::build_with_tls(url.as_str(), certs(false)).unwrap();
    let r = anon
        .get_connection_with_timeout(Duration::from_secs(10))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
    assert!(r.is_err(), "served without a client certificate: {r:?}");
}

/// The (protocol, OpenSSL suite name) a handshake with `cfg` settles on,
/// after one PING.
fn negotiated(port: u16, cfg: &Arc<rustls::ClientConfig>) -> (String, &'static str) {
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let c = rustls::ClientConnection::new(cfg.clone(), ServerName::try_from("localhost").unwrap())
        .unwrap();
    let mut t = rustls::StreamOwned::new(c, sock);
    t.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    assert_eq!(read_reply(&mut t, 7), b"+PONG\r\n");
    let suite = t.conn.negotiated_cipher_suite().unwrap().suite();
    (
        format!("{:?}", t.conn.protocol_version().unwrap()),
        gyre_core::event::tls_ciphers::openssl_name(suite),
    )
}

#[test]
fn tls_ciphers_and_ciphersuites_choose_the_suite_and_change_at_run_time() {
    if !have_redis_cli() {
        return;
    }
    let p = Prefix::new("kv-tls-ciphers");
    let pki = pki(&p);
    let kv = start(
        &p,
        &pki,
        true,
        "tls-ciphers \"ECDHE-ECDSA-CHACHA20-POLY1305\";\n\
         tls-ciphersuites TLS_AES_256_GCM_SHA384;\ntls-prefer-server-ciphers yes;",
    );
    let plain = kv.plain_port.unwrap().to_string();
    let cli = |args: &[&str]| {
        let mut a = vec!["-p", plain.as_str()];
        a.extend_from_slice(args);
        redis_cli(&a).0
    };
    let cfg = rustls_client(&pki.ca.pem, Some(&pki.client));
    assert_eq!(
        negotiated(kv.tls_port, &cfg),
        ("TLSv1_3".to_string(), "TLS_AES_256_GCM_SHA384")
    );
    assert_eq!(
        cli(&["CONFIG", "GET", "tls-ciphers"]),
        "tls-ciphers\nECDHE-ECDSA-CHACHA20-POLY1305\n"
    );
    assert_eq!(
        cli(&["CONFIG", "GET", "tls-prefer-server-ciphers"]),
        "tls-prefer-server-ciphers\nyes\n"
    );

    // TLS 1.2 only: the one TLS 1.2 suite left.
    assert_eq!(cli(&["CONFIG", "SET", "tls-protocols", "TLSv1.2"]), "OK\n");
    assert_eq!(
        negotiated(kv.tls_port, &cfg),
        ("TLSv1_2".to_string(), "ECDHE-ECDSA-CHACHA20-POLY1305")
    );
    assert_eq!(
        cli(&[
            "CONFIG",
            "SET",
            "tls-ciphers",
            "ECDHE-ECDSA-AES128-GCM-SHA256"
        ]),
        "OK\n"
    );
    assert_eq!(
        negotiated(kv.tls_port, &cfg),
        ("TLSv1_2".to_string(), "ECDHE-ECDSA-AES128-GCM-SHA256")
    );

    // A list OpenSSL would refuse: Redis's CONFIG SET error, nothing changed.
    let out = cli(&["CONFIG", "SET", "tls-ciphers", "NOSUCHCIPHER"]);
    assert_eq!(
        out.trim_end(),
        "ERR CONFIG SET failed (possibly related to argument 'tls-ciphers') - \
         Unable to update TLS configuration. Check server logs."
    );
    assert!(kv.s.logged(
        "Failed to configure ciphers: NOSUCHCIPHER",
        Duration::from_secs(5)
    ));
    assert_eq!(
        negotiated(kv.tls_port, &cfg),
        ("TLSv1_2".to_string(), "ECDHE-ECDSA-AES128-GCM-SHA256")
    );
}

#[test]
fn tls_cipher_errors_at_t() {
    let p = Prefix::new("kv-tls-ciphers-t");
    let t = |kv: &str| {
        p.conf(&format!("daemon off;\nevents {{}}\nkv {{\n{kv}\n}}\n"));
        String::from_utf8_lossy(&p.run(&["-t"]).stderr).into_owned()
    };
    let e = t("tls-ciphers \"FOO:BAR\";");
    assert!(e.contains("Failed to configure ciphers: FOO:BAR"), "{e}");
    let e = t("tls-ciphersuites TLS_NOPE;");
    assert!(
        e.contains("Failed to configure ciphersuites: TLS_NOPE"),
        "{e}"
    );
    let e = t("tls-prefer-server-ciphers maybe;");
    assert!(e.contains("argument must be 'yes' or 'no'"), "{e}");
    let e = t("tls-ciphers HIGH; tls-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_128_CCM_SHA256;");
    assert!(e.contains("test is successful"), "{e}");
}
