//! The tcp_proxy example as a real process, with real backends and clients,
//! on both modules: concurrent echoes, a half-close passed on, a slow reader
//! of a fast backend (the proxy's memory stays bounded and every byte
//! arrives), a backend that resets, an unreachable backend, a unix-domain
//! backend, a TLS backend (verified, and refused for an unknown issuer).
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use util::ReadSome;

const BACKENDS: [&str; 2] = ["epoll", "poll"];

struct ProxyProc {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Drop for ProxyProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ProxyProc {
    fn start(backend: &str, upstream: &str, extra: &[&str]) -> ProxyProc {
        let mut child = Command::new(util::example_bin("tcp_proxy"))
            .args(["--listen", "127.0.0.1:0", "--backend", backend])
            .args(["--upstream", upstream])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                const MARK: &str = "tcp_proxy listening on ";
                if let Some(i) = line.find(MARK) {
                    let addr = line[i + MARK.len()..]
                        .split(' ')
                        .next()
                        .unwrap()
                        .to_string();
                    let _ = tx.send(addr);
                }
                log2.lock().unwrap().push(line);
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("tcp_proxy did not start")
            .parse()
            .unwrap();
        ProxyProc { child, addr, log }
    }

    fn rss_kib(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }

    fn wait_log(&self, needle: &str) -> String {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(l) = self.log.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            assert!(Instant::now() < end, "no log line with {needle:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn client(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// A threaded backend: each connection runs `serve`.
fn backend(serve: fn(TcpStream)) -> SocketAddr {
    let ls = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = ls.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in ls.incoming().take(64) {
            let Ok(s) = s else { return };
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            std::thread::spawn(move || serve(s));
        }
    });
    addr
}

fn echo(mut s: TcpStream) {
    let mut buf = [0u8; 65536];
    while let Ok(n) = s.read_some(&mut buf) {
        if n == 0 || s.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed) % 251) as u8)
        .collect()
}

#[test]
fn concurrent_echoes_through_the_proxy() {
    let up = backend(echo);
    for be in BACKENDS {
        let p = ProxyProc::start(be, &up.to_string(), &["--buffer", "8192"]);
        let addr = p.addr;
        let threads: Vec<_> = (0..8u32)
            .map(|i| {
                std::thread::spawn(move || {
                    let data = pattern(1 << 20, i);
                    let mut s = client(addr);
                    let mut r = s.try_clone().unwrap();
                    let w = {
                        let data = data.clone();
                        std::thread::spawn(move || {
                            s.write_all(&data).unwrap();
                            s.shutdown(Shutdown::Write).unwrap();
                        })
                    };
                    let mut got = Vec::new();
                    r.read_to_end(&mut got).unwrap();
                    w.join().unwrap();
                    assert!(got == data, "echo {i} differs ({} bytes)", got.len());
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}

/// Reads everything until EOF, then answers with the byte count and closes:
/// only works if the proxy passes the client's FIN on.
fn count_then_answer(mut s: TcpStream) {
    let mut n = 0usize;
    let mut buf = [0u8; 65536];
    loop {
        match s.read_some(&mut buf) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return,
        }
    }
    let _ = s.write_all(format!("got {n}").as_bytes());
}

#[test]
fn half_close_is_passed_on() {
    let up = backend(count_then_answer);
    for be in BACKENDS {
        let p = ProxyProc::start(be, &up.to_string(), &[]);
        let mut s = client(p.addr);
        s.write_all(&pattern(100_000, 1)).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        assert_eq!(got, "got 100000", "{be}");
    }
}

const BIG: usize = 64 << 20;

/// Writes BIG bytes as fast as the socket takes them.
fn firehose(mut s: TcpStream) {
    let data = pattern(BIG, 7);
    let _ = s.write_all(&data);
}

#[test]
fn slow_reader_keeps_the_proxy_memory_bounded() {
    let up = backend(firehose);
    for be in BACKENDS {
        let p = ProxyProc::start(be, &up.to_string(), &["--buffer", "16384"]);
        let before = p.rss_kib();
        let mut s = client(p.addr);
        // Read nothing for a while: the backend fills what the kernels
        // hold and then blocks; the proxy must not take the rest.
        let mut first = [0u8; 1];
        s.read_exact(&mut first).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let stalled = p.rss_kib();
        let mut got = first.to_vec();
        got.reserve(BIG);
        let mut buf = vec![0u8; 1 << 16];
        let mut peak = stalled;
        loop {
            match s.read_some(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if got.len() % (8 << 20) < n {
                        peak = peak.max(p.rss_kib());
                        // Slow: a pause now and then.
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                Err(e) => panic!("{be}: {e}"),
            }
        }
        assert_eq!(got.len(), BIG, "{be}");
        assert!(got == pattern(BIG, 7), "{be}: bytes differ");
        // Two 16 KiB buffers per session; allow for allocator noise, far
        // below the 64 MiB the backend sent.
        assert!(
            peak < before + 4096,
            "{be}: RSS grew from {before} KiB to {peak} KiB"
        );
    }
}

/// Reads a little and resets the connection (SO_LINGER 0).
fn resetter(mut s: TcpStream) {
    let mut buf = [0u8; 16];
    let _ = s.read_some(&mut buf);
    gyre_core::sys::socket::set_linger_zero(s.as_fd()).unwrap();
    drop(s);
}

#[test]
fn backend_reset_closes_the_client_and_nothing_else() {
    let bad = backend(resetter);
    for be in BACKENDS {
        let p = ProxyProc::start(be, &bad.to_string(), &[]);
        let mut s = client(p.addr);
        s.write_all(b"hello").unwrap();
        let mut buf = [0u8; 16];
        match s.read_some(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            other => panic!("{be}: expected the connection closed, got {other:?}"),
        }
        let line = p.wait_log("while proxying upstream");
        assert!(
            line.contains("recv() failed (104: Connection reset by peer)"),
            "{be}: {line}"
        );
        assert!(line.contains("client: 127.0.0.1, server: "), "{be}: {line}");
        // The proxy still serves: another session gets its own reset.
        let mut s2 = client(p.addr);
        s2.write_all(b"again").unwrap();
        let _ = s2.read_some(&mut buf);
    }
}

#[test]
fn unreachable_backend_is_logged_and_the_client_closed() {
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    for be in BACKENDS {
        let p = ProxyProc::start(be, &dead.to_string(), &[]);
        let mut s = client(p.addr);
        let mut buf = [0u8; 16];
        assert_eq!(s.read_some(&mut buf).unwrap_or(0), 0, "{be}");
        let line = p.wait_log("while connecting to upstream");
        assert!(
            line.contains("connect() failed (111: Connection refused)"),
            "{be}: {line}"
        );
        assert!(
            line.contains(&format!("upstream: \"{dead}\"")),
            "{be}: {line}"
        );
    }
}

#[test]
fn unix_domain_backend() {
    let path = std::env::temp_dir().join(format!("gyre-tcp-proxy-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let ls = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for s in ls.incoming().take(4) {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read_some(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    for be in BACKENDS {
        let p = ProxyProc::start(be, &format!("unix:{}", path.display()), &[]);
        let mut s = client(p.addr);
        s.write_all(b"via unix").unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"via unix", "{be}");
    }
    let _ = std::fs::remove_file(&path);
}

struct Pki {
    dir: std::path::PathBuf,
    ca: std::path::PathBuf,
    other_ca: std::path::PathBuf,
    server: Arc<gyre_core::event::tls::rustls::ServerConfig>,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pki() -> Pki {
    use util::certs::{Alg, Ca};
    let dir = std::env::temp_dir().join(format!("gyre-tcp-proxy-pki-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = Ca::new(&dir, "ca");
    let other = Ca::new(&dir, "other");
    let leaf = ca.leaf(&dir, "srv", &["backend.test"], Alg::Ecdsa);
    let server =
        gyre_core::event::tls_conf::simple_server_config(&leaf.cert, &leaf.key, &[]).unwrap();
    Pki {
        ca: ca.pem.clone(),
        other_ca: other.pem.clone(),
        dir,
        server,
    }
}

/// A rustls echo backend in threads.
fn tls_backend(cfg: Arc<gyre_core::event::tls::rustls::ServerConfig>) -> SocketAddr {
    use gyre_core::event::tls::rustls;
    let ls = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = ls.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in ls.incoming().take(16) {
            let Ok(s) = s else { return };
            let cfg = cfg.clone();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut t =
                    rustls::StreamOwned::new(rustls::ServerConnection::new(cfg).unwrap(), s);
                let mut buf = [0u8; 65536];
                while let Ok(n) = t.read_some(&mut buf) {
                    if n == 0 || t.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                t.conn.send_close_notify();
                let _ = t.flush();
            });
        }
    });
    addr
}

#[test]
fn tls_to_the_upstream() {
    let p = pki();
    let up = tls_backend(p.server.clone());
    let ca = p.ca.to_str().unwrap().to_string();
    for be in BACKENDS {
        for extra in [
            vec!["--upstream-tls"],
            vec![
                "--upstream-tls",
                "--upstream-ca",
                &ca,
                "--upstream-name",
                "backend.test",
            ],
        ] {
            let proxy = ProxyProc::start(be, &up.to_string(), &extra);
            let data = pattern(200_000, 3);
            let mut s = client(proxy.addr);
            let mut r = s.try_clone().unwrap();
            let w = {
                let data = data.clone();
                std::thread::spawn(move || {
                    s.write_all(&data).unwrap();
                    s.shutdown(Shutdown::Write).unwrap();
                })
            };
            let mut got = Vec::new();
            r.read_to_end(&mut got).unwrap();
            w.join().unwrap();
            assert!(got == data, "{be} {extra:?}: {} bytes", got.len());
        }
        // Verified against a CA that did not sign the backend: refused.
        let other = p.other_ca.to_str().unwrap();
        let proxy = ProxyProc::start(
            be,
            &up.to_string(),
            &[
                "--upstream-tls",
                "--upstream-ca",
                other,
                "--upstream-name",
                "backend.test",
            ],
        );
        let mut s = client(proxy.addr);
        let mut b = [0u8; 8];
        assert_eq!(s.read_some(&mut b).unwrap_or(0), 0, "{be}");
        let line = proxy.wait_log("while SSL handshaking to upstream");
        // nginx's words for a leaf sent alone whose issuer is not trusted.
        assert!(
            line.contains(
                "upstream SSL certificate verify error: (21:unable to verify the first certificate)"
            ),
            "{be}: {line}"
        );
    }
}
