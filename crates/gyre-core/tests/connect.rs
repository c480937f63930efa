//! Outbound connections (`Core::connect`) with real sockets on both modules:
//! a TCP (v4, v6) and a unix-domain exchange, ECONNREFUSED found later and at
//! connect(2) time, a connect timeout against a listener whose accept queue
//! is full, stale events after a close in the same batch, the pool shared
//! with accepted connections, and TLS as a client against a rustls server in
//! another thread (verification on and off, SNI on and off, a bad issuer).
#![allow(clippy::unwrap_used)]

mod util;

use std::cell::{Cell, RefCell};
use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use util::ReadSome;

use gyre_core::conn::{ConnId, ListenOptions, Listener};
use gyre_core::event::tls::rustls;
use gyre_core::event::tls_client::{client_config, ClientTlsOptions};
use gyre_core::event::{
    Backend, ConnectOptions, Core, CoreOptions, Ev, EvKind, Handler, Next, PeerAddr, TlsConnect,
};
use util::certs::{Alg, Ca};

const BACKENDS: [Backend; 2] = [Backend::Epoll, Backend::Poll];

fn core(backend: Backend, connections: usize) -> Core {
    Core::new(CoreOptions {
        backend,
        connections,
        ..CoreOptions::default()
    })
    .unwrap()
}

/// Runs iterations until `done` or 10 s pass.
fn run_until(core: &mut Core, mut done: impl FnMut(&mut Core) -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    let te = core.create_time_event(10, |_, _| Next::Again(10));
    while !done(core) {
        assert!(Instant::now() < end, "condition not reached in 10 s");
        core.process_events_and_timers().unwrap();
    }
    core.delete_time_event(te).unwrap();
}

/// A failed connect as a test sees it: kind, errno, text.
type Failure = (ErrorKind, Option<i32>, String);

/// What an [`Exchange`] ended with.
#[derive(Debug, Default)]
struct Outcome {
    /// The first event: `Ok`, the connect error's kind and errno, or timed out.
    first: Option<Result<(), Failure>>,
    timedout: bool,
    /// The bytes read back.
    got: Vec<u8>,
    done: bool,
    /// Whether the TLS session was resumed (TLS connections only).
    resumed: Option<bool>,
    /// Events seen after the first one, by kind.
    reads: usize,
    writes: usize,
}

/// Connects, sends `out` (with backpressure), reads until as many bytes
/// came back, then closes.
struct Exchange {
    out: Rc<Vec<u8>>,
    sent: usize,
    started: bool,
    o: Rc<RefCell<Outcome>>,
}

impl Exchange {
    fn new(out: &[u8]) -> (Exchange, Rc<RefCell<Outcome>>) {
        let o = Rc::new(RefCell::new(Outcome::default()));
        (
            Exchange {
                out: Rc::new(out.to_vec()),
                sent: 0,
                started: false,
                o: o.clone(),
            },
            o,
        )
    }
}

impl Handler for Exchange {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        let c = ev.conn;
        if !self.started {
            self.started = true;
            assert_eq!(ev.kind, EvKind::Write, "the first event is a write event");
            if ev.timedout {
                let mut o = self.o.borrow_mut();
                o.timedout = true;
                o.done = true;
                drop(o);
                core.close(c);
                return;
            }
            match core.connect_result(c) {
                Ok(()) => {
                    let mut o = self.o.borrow_mut();
                    o.first = Some(Ok(()));
                    o.resumed = core.tls_info(c).map(|i| i.resumed);
                }
                Err(e) => {
                    let mut o = self.o.borrow_mut();
                    o.first = Some(Err((e.kind(), e.raw_os_error(), e.to_string())));
                    o.done = true;
                    drop(o);
                    core.close(c);
                    return;
                }
            }
        } else {
            let mut o = self.o.borrow_mut();
            match ev.kind {
                EvKind::Read => o.reads += 1,
                EvKind::Write => o.writes += 1,
            }
        }
        assert!(!ev.timedout, "no timer is armed after the connect");
        // Bounded: each pass moves bytes or stops at EAGAIN.
        for _ in 0..10_000 {
            let mut progress = false;
            if self.sent < self.out.len() && core.conn(c).unwrap().write.ready {
                match core.send(c, &self.out[self.sent..]) {
                    Ok(n) => {
                        self.sent += n;
                        progress = true;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("send: {e}"),
                }
            }
            if core.conn(c).unwrap().read.ready {
                let mut buf = [0u8; 16384];
                match core.recv(c, &mut buf) {
                    Ok(0) => panic!("EOF before the echo was complete"),
                    Ok(n) => {
                        self.o.borrow_mut().got.extend_from_slice(&buf[..n]);
                        progress = true;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("recv: {e}"),
                }
            }
            if self.o.borrow().got.len() >= self.out.len() {
                self.o.borrow_mut().done = true;
                core.close(c);
                return;
            }
            if !progress {
                break;
            }
        }
        core.handle_read_event(c).unwrap();
        core.handle_write_event(c).unwrap();
    }
}

/// A threaded echo server on a std listener; returns its address.
fn tcp_echo(addr: &str) -> Option<SocketAddr> {
    let ls = TcpListener::bind(addr).ok()?;
    let a = ls.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in ls.incoming().take(16) {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut buf = [0u8; 65536];
                while let Ok(n) = s.read_some(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    Some(a)
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "gyre-connect-{}-{name}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ))
}

#[test]
fn connect_sends_and_receives_over_tcp_v4_and_v6() {
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    for be in BACKENDS {
        for host in ["127.0.0.1:0", "[::1]:0"] {
            let Some(addr) = tcp_echo(host) else {
                println!("skipped {host}: cannot bind (no IPv6 on this machine?)");
                continue;
            };
            let mut core = core(be, 16);
            let (h, o) = Exchange::new(&payload);
            let c = core
                .connect(
                    &ConnectOptions::new(PeerAddr::Inet(addr), 5000),
                    Box::new(h),
                )
                .unwrap();
            assert!(core.is_outbound(c));
            assert_eq!(core.outbound_connections(), 1);
            run_until(&mut core, |_| o.borrow().done);
            let o = o.borrow();
            assert!(
                matches!(o.first, Some(Ok(()))),
                "{be:?} {host}: {:?}",
                o.first
            );
            assert!(o.got == payload, "{be:?} {host}: echo differs");
            assert!(!core.is_live(c));
            assert_eq!(core.outbound_connections(), 0);
            assert_eq!(core.connections_in_use(), 0, "{be:?}: the slot came back");
            assert_eq!(core.stats().connected, 1);
            assert_eq!(core.stats().accepted, 0, "not counted as accepted");
            assert_eq!(core.timers_len(), 0, "the connect timer is gone");
        }
    }
}

#[test]
fn refused_is_reported_to_the_handler() {
    for be in BACKENDS {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let mut core = core(be, 16);
        let (h, o) = Exchange::new(b"x");
        core.connect(
            &ConnectOptions::new(PeerAddr::Inet(port), 5000),
            Box::new(h),
        )
        .unwrap();
        run_until(&mut core, |_| o.borrow().done);
        let o = o.borrow();
        match &o.first {
            Some(Err((kind, errno, _))) => {
                assert_eq!(*kind, ErrorKind::ConnectionRefused, "{be:?}");
                assert_eq!(*errno, Some(libc::ECONNREFUSED), "{be:?}");
            }
            other => panic!("{be:?}: {other:?}"),
        }
        assert!(!o.timedout);
        assert_eq!(core.outbound_connections(), 0);
        assert_eq!(core.connections_in_use(), 0);
    }
}

#[test]
fn connect_times_out_when_the_accept_queue_is_full() {
    for be in BACKENDS {
        // backlog 0 holds one connection; further SYNs are dropped while
        // nobody accepts, so a connect stays in SYN-SENT.
        let mut lo = ListenOptions::new("127.0.0.1:0".parse().unwrap());
        lo.backlog = 0;
        let ls = Listener::bind(lo).unwrap();
        let addr = ls.local_addr();
        let mut held = Vec::new();
        let mut full = false;
        for _ in 0..16 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
                Ok(s) => held.push(s),
                Err(_) => {
                    full = true;
                    break;
                }
            }
        }
        assert!(full, "the accept queue never filled");
        let mut core = core(be, 16);
        let (h, o) = Exchange::new(b"x");
        let c = core
            .connect(&ConnectOptions::new(PeerAddr::Inet(addr), 200), Box::new(h))
            .unwrap();
        assert!(core.timer_set(Ev::write(c)), "{be:?}: connect timer armed");
        run_until(&mut core, |_| o.borrow().done);
        let o = o.borrow();
        assert!(o.timedout, "{be:?}: {:?}", o.first);
        assert!(o.first.is_none());
        assert_eq!(core.outbound_connections(), 0);
        drop(ls);
    }
}

#[test]
fn unix_domain_exchange_and_refusal() {
    for be in BACKENDS {
        let path = temp_path("echo.sock");
        let _ = std::fs::remove_file(&path);
        let ls = UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            if let Some(Ok(mut s)) = ls.incoming().next() {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read_some(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        });
        let mut core = core(be, 16);
        let (h, o) = Exchange::new(b"over a unix socket");
        core.connect(
            &ConnectOptions::new(PeerAddr::Unix(path.clone()), 5000),
            Box::new(h),
        )
        .unwrap();
        run_until(&mut core, |_| o.borrow().done);
        assert!(matches!(o.borrow().first, Some(Ok(()))), "{be:?}");
        assert_eq!(o.borrow().got, b"over a unix socket");

        // A socket file nobody listens on: connect(2) fails at once; the
        // handler still hears of it through its first event.
        let dead = temp_path("dead.sock");
        let _ = std::fs::remove_file(&dead);
        drop(UnixListener::bind(&dead).unwrap());
        let (h, o) = Exchange::new(b"x");
        let c = core
            .connect(
                &ConnectOptions::new(PeerAddr::Unix(dead.clone()), 5000),
                Box::new(h),
            )
            .unwrap();
        assert!(core.is_live(c));
        run_until(&mut core, |_| o.borrow().done);
        match &o.borrow().first {
            Some(Err((_, errno, _))) => assert_eq!(*errno, Some(libc::ECONNREFUSED)),
            other => panic!("{be:?}: {other:?}"),
        }
        assert_eq!(core.connections_in_use(), 0);
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&dead);
    }
}

/// Records events; on its first read event closes `victim` and connects a
/// newcomer, which takes the victim's slot.
struct Closer {
    victim: Rc<Cell<Option<ConnId>>>,
    target: SocketAddr,
    newcomer: Rc<Cell<Option<ConnId>>>,
    newcomer_events: Rc<RefCell<Vec<(EvKind, bool)>>>,
    connected: Rc<Cell<usize>>,
}

struct Recorder(Rc<RefCell<Vec<(EvKind, bool)>>>);

impl Handler for Recorder {
    fn handle(&mut self, _core: &mut Core, ev: Ev) {
        self.0.borrow_mut().push((ev.kind, ev.timedout));
    }
}

impl Handler for Closer {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        if ev.kind == EvKind::Write {
            if core.connect_result(ev.conn).is_ok() {
                self.connected.set(self.connected.get() + 1);
            }
            core.handle_write_event(ev.conn).unwrap();
            return;
        }
        if self.newcomer.get().is_some() {
            return;
        }
        let me = ev.conn;
        let v = self.victim.get().into_iter().find(|&v| v != me).unwrap();
        core.close(v);
        let n = core
            .connect(
                &ConnectOptions::new(PeerAddr::Inet(self.target), 5000),
                Box::new(Recorder(self.newcomer_events.clone())),
            )
            .unwrap();
        assert_eq!(n.slot(), v.slot(), "LIFO free list reuses the slot");
        self.newcomer.set(Some(n));
    }
}

#[test]
fn stale_event_of_a_closed_outbound_connection_is_dropped() {
    for be in BACKENDS {
        let ls = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = ls.local_addr().unwrap();
        let mut core = core(be, 16);
        let ids: Rc<RefCell<Vec<ConnId>>> = Rc::default();
        let newcomer = Rc::new(Cell::new(None));
        let events = Rc::new(RefCell::new(Vec::new()));
        let connected = Rc::new(Cell::new(0));
        let victims: Vec<Rc<Cell<Option<ConnId>>>> = vec![Rc::default(), Rc::default()];
        for v in &victims {
            let c = core
                .connect(
                    &ConnectOptions::new(PeerAddr::Inet(addr), 5000),
                    Box::new(Closer {
                        victim: v.clone(),
                        target: addr,
                        newcomer: newcomer.clone(),
                        newcomer_events: events.clone(),
                        connected: connected.clone(),
                    }),
                )
                .unwrap();
            ids.borrow_mut().push(c);
        }
        // Each handler's "victim" is the other connection.
        victims[0].set(Some(ids.borrow()[1]));
        victims[1].set(Some(ids.borrow()[0]));
        let mut peers: Vec<TcpStream> = (0..2).map(|_| ls.accept().unwrap().0).collect();
        run_until(&mut core, |_| connected.get() == 2);
        // Both become readable before the next wait: one batch holds both.
        for p in &mut peers {
            p.write_all(b"!").unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        let stale = core.stats().stale_events;
        core.process_events_and_timers().unwrap();
        assert!(newcomer.get().is_some(), "{be:?}: no handler ran");
        assert_eq!(core.stats().stale_events - stale, 1, "{be:?}");
        assert!(
            events.borrow().iter().all(|&(k, _)| k == EvKind::Write),
            "{be:?}: the victim's read event reached the newcomer: {:?}",
            events.borrow()
        );
        // The newcomer's own connect completes normally.
        let (_n, _) = ls.accept().unwrap();
        run_until(&mut core, |_| !events.borrow().is_empty());
        assert_eq!(events.borrow()[0], (EvKind::Write, false));
    }
}

#[test]
fn outbound_connections_share_the_pool() {
    for be in BACKENDS {
        let ls = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = ls.local_addr().unwrap();
        let mut core = core(be, 3);
        let mut ok = Vec::new();
        for _ in 0..3 {
            let (h, _o) = Exchange::new(b"x");
            ok.push(
                core.connect(
                    &ConnectOptions::new(PeerAddr::Inet(addr), 5000),
                    Box::new(h),
                )
                .unwrap(),
            );
        }
        assert_eq!(core.outbound_connections(), 3);
        let (h, _o) = Exchange::new(b"x");
        let e = core
            .connect(
                &ConnectOptions::new(PeerAddr::Inet(addr), 5000),
                Box::new(h),
            )
            .unwrap_err();
        assert!(e.to_string().contains("worker_connections"), "{e}");
        core.close(ok[0]);
        assert_eq!(core.outbound_connections(), 2);
        assert_eq!(core.free_connections(), 1);
    }
}

// ------------------------------------------------------------------- TLS

struct Pki {
    dir: PathBuf,
    ca: PathBuf,
    other_ca: PathBuf,
    server: Arc<rustls::ServerConfig>,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pki() -> Pki {
    let dir = temp_path("pki");
    std::fs::create_dir_all(&dir).unwrap();
    let ca = Ca::new(&dir, "ca");
    let other = Ca::new(&dir, "other");
    let leaf = ca.leaf(&dir, "srv", &["localhost"], Alg::Ecdsa);
    let server =
        gyre_core::event::tls_conf::simple_server_config(&leaf.cert, &leaf.key, &[]).unwrap();
    Pki {
        ca: ca.pem.clone(),
        other_ca: other.pem.clone(),
        dir,
        server,
    }
}

/// A rustls echo server in a thread; records the SNI each client sent.
fn tls_echo(cfg: Arc<rustls::ServerConfig>) -> (SocketAddr, Arc<Mutex<Vec<Option<String>>>>) {
    let ls = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = ls.local_addr().unwrap();
    let sni = Arc::new(Mutex::new(Vec::new()));
    let sni2 = sni.clone();
    std::thread::spawn(move || {
        for s in ls.incoming().take(8) {
            let Ok(s) = s else { return };
            let cfg = cfg.clone();
            let sni = sni2.clone();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let conn = rustls::ServerConnection::new(cfg).unwrap();
                let mut t = rustls::StreamOwned::new(conn, s);
                let mut buf = [0u8; 65536];
                let mut first = true;
                while let Ok(n) = t.read_some(&mut buf) {
                    if first {
                        first = false;
                        sni.lock()
                            .unwrap()
                            .push(t.conn.server_name().map(str::to_string));
                    }
                    if n == 0 || t.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, sni)
}

fn tls_opts(addr: SocketAddr, cfg: Arc<rustls::ClientConfig>) -> ConnectOptions {
    let mut o = ConnectOptions::new(PeerAddr::Inet(addr), 5000);
    o.tls = Some(TlsConnect {
        config: cfg,
        name: rustls::pki_types::ServerName::try_from("localhost").unwrap(),
    });
    o
}

#[test]
fn tls_client_exchange_verified_with_sni() {
    let p = pki();
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 253) as u8).collect();
    for be in BACKENDS {
        let (addr, sni) = tls_echo(p.server.clone());
        let cfg = client_config(&ClientTlsOptions {
            verify: true,
            trusted: Some(&p.ca),
            server_name: true,
            alpn: Vec::new(),
            ..ClientTlsOptions::default()
        })
        .unwrap();
        let mut core = core(be, 16);
        let (h, o) = Exchange::new(&payload);
        let c = core.connect(&tls_opts(addr, cfg), Box::new(h)).unwrap();
        let mut saw_tls = false;
        run_until(&mut core, |core| {
            if core.tls_info(c).is_some() {
                saw_tls = true;
            }
            o.borrow().done
        });
        let o = o.borrow();
        assert!(matches!(o.first, Some(Ok(()))), "{be:?}: {:?}", o.first);
        assert!(
            o.got == payload,
            "{be:?}: echo differs ({} bytes)",
            o.got.len()
        );
        assert!(saw_tls, "{be:?}: handshake info recorded");
        assert_eq!(sni.lock().unwrap().as_slice(), &[Some("localhost".into())]);
        assert_eq!(core.connections_in_use(), 0);
    }
}

#[test]
fn tls_client_without_verification_or_sni() {
    let p = pki();
    for be in BACKENDS {
        let (addr, sni) = tls_echo(p.server.clone());
        // nginx's defaults: proxy_ssl_verify off, proxy_ssl_server_name off.
        let cfg = client_config(&ClientTlsOptions::default()).unwrap();
        let mut core = core(be, 16);
        let (h, o) = Exchange::new(b"no verification");
        core.connect(&tls_opts(addr, cfg), Box::new(h)).unwrap();
        run_until(&mut core, |_| o.borrow().done);
        assert!(matches!(o.borrow().first, Some(Ok(()))), "{be:?}");
        assert_eq!(o.borrow().got, b"no verification");
        assert_eq!(sni.lock().unwrap().as_slice(), &[None]);
    }
}

#[test]
fn tls_client_refuses_an_unknown_issuer() {
    let p = pki();
    for be in BACKENDS {
        let (addr, _sni) = tls_echo(p.server.clone());
        let cfg = client_config(&ClientTlsOptions {
            verify: true,
            trusted: Some(&p.other_ca),
            server_name: true,
            alpn: Vec::new(),
            ..ClientTlsOptions::default()
        })
        .unwrap();
        let mut core = core(be, 16);
        let (h, o) = Exchange::new(b"x");
        core.connect(&tls_opts(addr, cfg), Box::new(h)).unwrap();
        run_until(&mut core, |_| o.borrow().done);
        match &o.borrow().first {
            Some(Err((kind, _, text))) => {
                assert_eq!(*kind, ErrorKind::InvalidData, "{be:?}: {text}");
                // OpenSSL's verdict, as nginx logs it.
                assert!(text.contains("unable to"), "{be:?}: {text}");
            }
            other => panic!("{be:?}: {other:?}"),
        }
        assert_eq!(core.connections_in_use(), 0);
    }
}

#[test]
fn verify_needs_a_trusted_certificate() {
    let e = client_config(&ClientTlsOptions {
        verify: true,
        ..ClientTlsOptions::default()
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "no proxy_ssl_trusted_certificate for proxy_ssl_verify"
    );
}

#[test]
fn tls_client_resumes_sessions() {
    let p = pki();
    for be in BACKENDS {
        let (addr, _sni) = tls_echo(p.server.clone());
        let cfg = client_config(&ClientTlsOptions::default()).unwrap();
        let mut core = core(be, 16);
        let mut resumed = Vec::new();
        for _ in 0..2 {
            let (h, o) = Exchange::new(b"resume me");
            core.connect(&tls_opts(addr, cfg.clone()), Box::new(h))
                .unwrap();
            run_until(&mut core, |_| o.borrow().done);
            assert_eq!(o.borrow().got, b"resume me");
            resumed.push(o.borrow().resumed);
        }
        // nginx's proxy_ssl_session_reuse on: the second handshake resumes.
        assert_eq!(resumed, vec![Some(false), Some(true)], "{be:?}");
    }
}

/// Echoes what it reads (for a TLS listener in the same loop).
struct EchoBack {
    pending: Vec<u8>,
}

impl Handler for EchoBack {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        let c = ev.conn;
        if ev.timedout {
            core.close(c);
            return;
        }
        // Bounded: each pass moves bytes or stops.
        for _ in 0..1000 {
            if !self.pending.is_empty() {
                match core.send(c, &self.pending) {
                    Ok(n) => {
                        self.pending.drain(..n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        core.close(c);
                        return;
                    }
                }
                continue;
            }
            let mut buf = [0u8; 8192];
            match core.recv(c, &mut buf) {
                Ok(0) => {
                    core.close(c);
                    return;
                }
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    core.close(c);
                    return;
                }
            }
        }
        if self.pending.is_empty() {
            core.handle_read_event(c).unwrap();
        } else {
            core.disable_read(c).unwrap();
        }
        core.handle_write_event(c).unwrap();
    }
}

struct EchoProto;

impl gyre_core::conn::Protocol for EchoProto {
    fn init_connection(&mut self, core: &mut Core, c: ConnId) -> Option<Box<dyn Handler>> {
        core.handle_read_event(c).ok()?;
        Some(Box::new(EchoBack {
            pending: Vec::new(),
        }))
    }
}

#[test]
fn tls_client_and_server_layers_in_one_loop() {
    let p = pki();
    let payload: Vec<u8> = (0..150_000u32).map(|i| (i % 249) as u8).collect();
    for be in BACKENDS {
        let mut core = core(be, 16);
        let ls = Listener::bind(ListenOptions::new("127.0.0.1:0".parse().unwrap())).unwrap();
        let addr = ls.local_addr();
        let id = core.add_listener(ls, Box::new(EchoProto)).unwrap();
        core.set_listener_tls(
            id,
            Some(gyre_core::event::tls::TlsListen {
                config: Rc::new(p.server.clone()),
                handshake_timeout: 5000,
                plain_fallback: false,
            }),
        );
        let cfg = client_config(&ClientTlsOptions {
            verify: true,
            trusted: Some(&p.ca),
            server_name: true,
            alpn: Vec::new(),
            ..ClientTlsOptions::default()
        })
        .unwrap();
        let (h, o) = Exchange::new(&payload);
        let c = core.connect(&tls_opts(addr, cfg), Box::new(h)).unwrap();
        run_until(&mut core, |_| o.borrow().done);
        assert!(matches!(o.borrow().first, Some(Ok(()))), "{be:?}");
        assert!(o.borrow().got == payload, "{be:?}: echo differs");
        assert!(!core.is_live(c));
        assert_eq!(core.outbound_connections(), 0);
        // The server side sees the client's close_notify and closes too.
        run_until(&mut core, |core| core.connections_in_use() == 1);
    }
}
