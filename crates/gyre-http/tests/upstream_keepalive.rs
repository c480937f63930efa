//! The upstream keep-alive cache on real connections (gyre-core's
//! `Core::connect`), on both modules: a cached idle connection the upstream
//! closes is noticed and dropped, `keepalive_timeout` drops it, a full cache
//! closes its least recently used connection, a taken connection is live and
//! usable, and graceful shutdown closes what is cached.
#![allow(clippy::unwrap_used)]

mod common;
use common::ReadSome;
use std::cell::RefCell;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::rc::Rc;
use std::time::{Duration, Instant};

use gyre_core::conn::ConnId;
use gyre_core::event::{Backend, ConnectOptions, Core, CoreOptions, Ev, Handler, Next, PeerAddr};
use gyre_http::upstream::keepalive::{self, Cache, SharedCache};

const BACKENDS: [Backend; 2] = [Backend::Epoll, Backend::Poll];

fn core(backend: Backend) -> Core {
    Core::new(CoreOptions {
        backend,
        connections: 32,
        ..CoreOptions::default()
    })
    .unwrap()
}

fn run_until(core: &mut Core, mut done: impl FnMut(&mut Core) -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    let te = core.create_time_event(10, |_, _| Next::Again(10));
    while !done(core) {
        assert!(Instant::now() < end, "condition not reached in 10 s");
        core.process_events_and_timers().unwrap();
    }
    core.delete_time_event(te).unwrap();
}

/// Parks the connection in the cache once connected.
struct Parker {
    cache: SharedCache,
    addr: PeerAddr,
    timeout: u64,
    parked: Rc<RefCell<Vec<ConnId>>>,
}

impl Handler for Parker {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        assert!(!ev.timedout);
        core.connect_result(ev.conn).unwrap();
        keepalive::park(
            core,
            &self.cache,
            self.addr.clone(),
            keepalive::Kept::new(ev.conn),
            self.timeout,
        )
        .unwrap();
        self.parked.borrow_mut().push(ev.conn);
    }
}

struct Setup {
    core: Core,
    ls: TcpListener,
    addr: PeerAddr,
    cache: SharedCache,
    parked: Rc<RefCell<Vec<ConnId>>>,
}

fn setup(be: Backend, max: usize) -> Setup {
    let ls = TcpListener::bind("127.0.0.1:0").unwrap();
    let sa: SocketAddr = ls.local_addr().unwrap();
    Setup {
        core: core(be),
        ls,
        addr: PeerAddr::Inet(sa),
        cache: Rc::new(RefCell::new(Cache::new(max))),
        parked: Rc::default(),
    }
}

impl Setup {
    /// Connects, parks, and returns the upstream's end of it.
    fn cached(&mut self, timeout: u64) -> (ConnId, TcpStream) {
        let n = self.parked.borrow().len();
        self.core
            .connect(
                &ConnectOptions::new(self.addr.clone(), 5000),
                Box::new(Parker {
                    cache: self.cache.clone(),
                    addr: self.addr.clone(),
                    timeout,
                    parked: self.parked.clone(),
                }),
            )
            .unwrap();
        let (peer, _) = self.ls.accept().unwrap();
        let parked = self.parked.clone();
        run_until(&mut self.core, |_| parked.borrow().len() == n + 1);
        let c = *self.parked.borrow().last().unwrap();
        (c, peer)
    }
}

#[test]
fn upstream_close_is_noticed_and_dropped() {
    for be in BACKENDS {
        let mut s = setup(be, 4);
        let (c1, p1) = s.cached(60_000);
        let (c2, _p2) = s.cached(60_000);
        assert_eq!(s.cache.borrow().len(), 2);
        // A few idle iterations: nothing happens to an idle connection.
        for _ in 0..3 {
            s.core.create_time_event(5, |_, _| Next::NoMore);
            s.core.process_events_and_timers().unwrap();
        }
        assert_eq!(s.cache.borrow().len(), 2, "{be:?}");
        drop(p1);
        let cache = s.cache.clone();
        run_until(&mut s.core, |_| cache.borrow().len() == 1);
        assert!(!s.core.is_live(c1), "{be:?}: closed");
        assert!(s.core.is_live(c2));
        // What is left is still usable.
        let got = keepalive::unpark(&mut s.core, &s.cache, &s.addr)
            .unwrap()
            .conn;
        assert_eq!(got, c2);
        // The idle timer is left armed for the request to re-arm (its
        // read timeout) or delete before it waits.
        assert!(
            s.core.timer_set(Ev::read(got)),
            "the idle timer is left to the caller"
        );
    }
}

#[test]
fn bytes_from_an_idle_upstream_drop_it_too() {
    for be in BACKENDS {
        let mut s = setup(be, 4);
        let (c, mut p) = s.cached(60_000);
        p.write_all(b"HTTP/1.1 200 OK\r\n").unwrap();
        let cache = s.cache.clone();
        run_until(&mut s.core, |_| cache.borrow().is_empty());
        assert!(!s.core.is_live(c), "{be:?}");
        // The upstream sees the close.
        p.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        assert_eq!(p.read_some(&mut b).unwrap_or(0), 0);
    }
}

#[test]
fn keepalive_timeout_drops_the_connection() {
    for be in BACKENDS {
        let mut s = setup(be, 4);
        let (c, _p) = s.cached(100);
        assert!(s.core.timer_set(Ev::read(c)));
        let cache = s.cache.clone();
        run_until(&mut s.core, |_| cache.borrow().is_empty());
        assert!(!s.core.is_live(c), "{be:?}");
    }
}

#[test]
fn a_full_cache_closes_the_least_recently_used() {
    for be in BACKENDS {
        let mut s = setup(be, 2);
        let (c1, _p1) = s.cached(60_000);
        let (c2, _p2) = s.cached(60_000);
        let (c3, _p3) = s.cached(60_000);
        assert!(!s.core.is_live(c1), "{be:?}: evicted and closed");
        assert!(s.core.is_live(c2) && s.core.is_live(c3));
        assert_eq!(s.cache.borrow().len(), 2);
        // Most recent first.
        assert_eq!(
            keepalive::unpark(&mut s.core, &s.cache, &s.addr).map(|k| k.conn),
            Some(c3)
        );
    }
}

#[test]
fn graceful_shutdown_closes_cached_connections() {
    for be in BACKENDS {
        let mut s = setup(be, 4);
        let (c, _p) = s.cached(60_000);
        s.core.shutdown();
        assert!(!s.core.is_live(c), "{be:?}");
        assert!(s.cache.borrow().is_empty());
        assert!(s.core.no_timers_left());
    }
}
