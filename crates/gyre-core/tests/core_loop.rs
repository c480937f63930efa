//! The loop in-process, with both modules: stale events after close and
//! reuse in one batch, notify from another thread, timers (wraparound, lazy
//! delay, past deadlines), time events in the loop, draining reusable
//! connections, graceful shutdown.
#![allow(clippy::unwrap_used)]

mod util;
use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::time::{Duration, Instant};
use util::ReadSome;

use gyre_core::conn::{ConnId, ListenOptions, Listener, Protocol};
use gyre_core::event::{Backend, Core, CoreOptions, Ev, EvKind, Handler, Next};

const BACKENDS: [Backend; 2] = [Backend::Epoll, Backend::Poll];

fn core(backend: Backend, connections: usize) -> Core {
    Core::new(CoreOptions {
        backend,
        connections,
        ..CoreOptions::default()
    })
    .unwrap()
}

fn local() -> Listener {
    Listener::bind(ListenOptions::new("127.0.0.1:0".parse().unwrap())).unwrap()
}

/// Runs iterations until `done` or 5 s pass.
fn run_until(core: &mut Core, mut done: impl FnMut(&mut Core) -> bool) {
    let end = Instant::now() + Duration::from_secs(5);
    // A periodic time event bounds each wait so the deadline is checked.
    let te = core.create_time_event(10, |_, _| Next::Again(10));
    while !done(core) {
        assert!(Instant::now() < end, "condition not reached in 5 s");
        core.process_events_and_timers().unwrap();
    }
    core.delete_time_event(te).unwrap();
}

/// What a [`Recorder`] saw.
type Calls = Rc<RefCell<Vec<(ConnId, EvKind, bool)>>>;

/// A handler that records what it was called with.
struct Recorder {
    calls: Calls,
}

impl Handler for Recorder {
    fn handle(&mut self, _core: &mut Core, ev: Ev) {
        self.calls
            .borrow_mut()
            .push((ev.conn, ev.kind, ev.timedout));
    }
}

/// Accepts into a shared list; each connection gets `make()`'s handler.
struct Collect<F: FnMut() -> Box<dyn Handler>> {
    accepted: Rc<RefCell<Vec<ConnId>>>,
    make: F,
}

impl<F: FnMut() -> Box<dyn Handler>> Protocol for Collect<F> {
    fn init_connection(&mut self, core: &mut Core, c: ConnId) -> Option<Box<dyn Handler>> {
        core.handle_read_event(c).unwrap();
        self.accepted.borrow_mut().push(c);
        Some((self.make)())
    }
}

/// Whichever of the two connections is handled first closes the other and
/// puts a fresh fd in the freed slot; the other's event, already in the same
/// batch, must then be dropped, not delivered to the newcomer.
struct Killer {
    peers: Rc<RefCell<Vec<ConnId>>>,
    newcomer: Rc<Cell<Option<ConnId>>>,
    newcomer_calls: Calls,
    keep_alive: Rc<RefCell<Vec<UnixStream>>>,
}

impl Handler for Killer {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        if self.newcomer.get().is_some() {
            return;
        }
        let other = *self.peers.borrow().iter().find(|&&p| p != ev.conn).unwrap();
        core.close(other);
        let (a, b) = UnixStream::pair().unwrap();
        self.keep_alive.borrow_mut().push(b);
        let fd: OwnedFd = a.into();
        let n = core
            .adopt(
                fd,
                Box::new(Recorder {
                    calls: self.newcomer_calls.clone(),
                }),
            )
            .unwrap();
        core.handle_read_event(n).unwrap();
        assert_eq!(n.slot(), other.slot(), "LIFO free list reuses the slot");
        self.newcomer.set(Some(n));
    }
}

#[test]
fn stale_event_after_close_and_reuse_in_one_batch_is_dropped() {
    for be in BACKENDS {
        let mut core = core(be, 16);
        let ls = local();
        let addr = ls.local_addr();
        let accepted = Rc::new(RefCell::new(Vec::new()));
        let newcomer = Rc::new(Cell::new(None));
        let newcomer_calls = Rc::new(RefCell::new(Vec::new()));
        let keep = Rc::new(RefCell::new(Vec::new()));
        let (p2, n2, c2, k2) = (
            accepted.clone(),
            newcomer.clone(),
            newcomer_calls.clone(),
            keep.clone(),
        );
        core.add_listener(
            ls,
            Box::new(Collect {
                accepted: accepted.clone(),
                make: move || {
                    Box::new(Killer {
                        peers: p2.clone(),
                        newcomer: n2.clone(),
                        newcomer_calls: c2.clone(),
                        keep_alive: k2.clone(),
                    }) as Box<dyn Handler>
                },
            }),
        )
        .unwrap();
        let mut a = TcpStream::connect(addr).unwrap();
        let mut b = TcpStream::connect(addr).unwrap();
        run_until(&mut core, |_| accepted.borrow().len() == 2);
        // Both become readable before the next wait: one batch holds both.
        a.write_all(b"a").unwrap();
        b.write_all(b"b").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let stale_before = core.stats().stale_events;
        core.process_events_and_timers().unwrap();
        assert!(newcomer.get().is_some(), "{be:?}: no handler ran");
        assert_eq!(
            core.stats().stale_events - stale_before,
            1,
            "{be:?}: the closed connection's event was not dropped"
        );
        assert!(
            newcomer_calls.borrow().is_empty(),
            "{be:?}: stale event delivered to the slot's new connection"
        );
        // The closed one really is closed: its client sees EOF.
        let closed = accepted
            .borrow()
            .iter()
            .copied()
            .find(|&c| !core.is_live(c))
            .unwrap();
        let victim = if closed == accepted.borrow()[0] {
            &mut a
        } else {
            &mut b
        };
        victim
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(victim.read_some(&mut buf).unwrap_or(0), 0);
    }
}

#[test]
fn notify_wakes_the_loop_from_another_thread() {
    for be in BACKENDS {
        let mut core = core(be, 8);
        let n = core.notifier().unwrap();
        let woke = Rc::new(Cell::new(0));
        let w = woke.clone();
        core.on_notify(move |core| {
            w.set(w.get() + 1);
            core.stop();
        });
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            n.notify().unwrap();
        });
        let start = Instant::now();
        core.run().unwrap(); // no timers at all: only the notify can end it
        t.join().unwrap();
        assert_eq!(woke.get(), 1, "{be:?}");
        assert!(start.elapsed() >= Duration::from_millis(90));
    }
}

/// An adopted socketpair end whose handler records timer expiries.
fn adopted(core: &mut Core) -> (ConnId, Calls, UnixStream) {
    let (a, b) = UnixStream::pair().unwrap();
    let calls = Rc::new(RefCell::new(Vec::new()));
    let c = core
        .adopt(
            a.into(),
            Box::new(Recorder {
                calls: calls.clone(),
            }),
        )
        .unwrap();
    (c, calls, b)
}

#[test]
fn timer_fires_across_the_clock_wraparound() {
    for be in BACKENDS {
        // The clock starts 50 ms before u64 wraps around.
        let offset = u64::MAX - gyre_core::event::clock::monotonic_ms() - 50;
        let mut core = Core::new(CoreOptions {
            backend: be,
            connections: 8,
            clock_offset: offset,
            ..CoreOptions::default()
        })
        .unwrap();
        let start_ms = core.now();
        assert!(start_ms > u64::MAX - 1000);
        let (c, calls, _peer) = adopted(&mut core);
        core.add_timer(Ev::write(c), 120);
        let start = Instant::now();
        run_until(&mut core, |_| !calls.borrow().is_empty());
        assert!(start.elapsed() >= Duration::from_millis(110), "fired early");
        assert!(core.now() < 1000, "clock wrapped: {}", core.now());
        assert_eq!(calls.borrow()[0], (c, EvKind::Write, true));
        assert!(!core.timer_set(Ev::write(c)));
    }
}

#[test]
fn lazy_delay_and_past_deadlines() {
    for be in BACKENDS {
        let mut core = core(be, 8);
        let (c, calls, _peer) = adopted(&mut core);
        let ev = Ev::read(c);
        core.add_timer(ev, 60_000);
        let d0 = core.timer_deadline(ev).unwrap();
        core.add_timer(ev, 60_100); // within 300 ms: no work
        assert_eq!(core.timer_deadline(ev), Some(d0));
        core.add_timer(ev, 61_000);
        assert_eq!(core.timer_deadline(ev), Some(d0 + 1000));
        core.del_timer(ev);
        assert!(!core.timer_set(ev));

        // A deadline already past expires on the next iteration.
        core.add_timer(ev, 0);
        let before = core.stats().iterations;
        core.process_events_and_timers().unwrap();
        assert_eq!(calls.borrow().as_slice(), &[(c, EvKind::Read, true)]);
        assert_eq!(core.stats().iterations - before, 1);
    }
}

/// Re-arms a 0 ms timer from its own expiry: must run once per iteration,
/// not loop inside one.
struct Rearm {
    runs: Rc<Cell<u32>>,
}

impl Handler for Rearm {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        self.runs.set(self.runs.get() + 1);
        core.add_timer(ev, 0);
    }
}

/// Re-posts itself `left` times, counting its runs.
struct Yielder {
    runs: Rc<Cell<u32>>,
    left: u32,
}

impl Handler for Yielder {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        self.runs.set(self.runs.get() + 1);
        if self.left > 0 {
            self.left -= 1;
            core.post(ev);
        }
    }
}

#[test]
fn an_event_posted_by_a_posted_event_runs_in_the_next_iteration() {
    let mut core = core(Backend::Epoll, 8);
    let mut runs = Vec::new();
    let mut peers = Vec::new();
    for _ in 0..2 {
        let (a, b) = UnixStream::pair().unwrap();
        peers.push(b);
        let n = Rc::new(Cell::new(0));
        let c = core
            .adopt(
                a.into(),
                Box::new(Yielder {
                    runs: n.clone(),
                    left: 3,
                }),
            )
            .unwrap();
        core.post(Ev::read(c));
        runs.push(n);
    }
    // Each handler yields after every run: one turn each per iteration,
    // and the loop does not block while turns are pending.
    for i in 1..=4 {
        let t = Instant::now();
        core.process_events_and_timers().unwrap();
        assert!(t.elapsed() < Duration::from_secs(1), "iteration {i} waited");
        assert_eq!((runs[0].get(), runs[1].get()), (i, i));
    }
}

#[test]
fn zero_timer_rearmed_in_its_handler_runs_once_per_iteration() {
    let mut core = core(Backend::Epoll, 8);
    let (a, _b) = UnixStream::pair().unwrap();
    let runs = Rc::new(Cell::new(0));
    let c = core
        .adopt(a.into(), Box::new(Rearm { runs: runs.clone() }))
        .unwrap();
    core.add_timer(Ev::read(c), 0);
    for _ in 0..5 {
        core.process_events_and_timers().unwrap();
    }
    assert!(runs.get() <= 5 && runs.get() >= 2, "runs {}", runs.get());
}

#[test]
fn time_events_in_the_loop() {
    for be in BACKENDS {
        let mut core = core(be, 8);
        let log = Rc::new(RefCell::new(Vec::new()));
        let l1 = log.clone();
        let periodic = core.create_time_event(5, move |_, id| {
            l1.borrow_mut().push(("periodic", id));
            Next::Again(5)
        });
        let l2 = log.clone();
        let once = core.create_time_event(20, move |_, id| {
            l2.borrow_mut().push(("once", id));
            Next::NoMore
        });
        assert!(once > periodic, "ids increase");
        let l3 = log.clone();
        // Deletes the periodic event from inside its own pass, then itself.
        core.create_time_event(60, move |core, id| {
            l3.borrow_mut().push(("killer", id));
            core.delete_time_event(periodic).unwrap();
            core.delete_time_event(id).unwrap();
            assert!(core.delete_time_event(id).is_err());
            Next::Again(1)
        });
        // run_until's own periodic event is the one left.
        run_until(&mut core, |core| core.time_events_len() == 1);
        let log = log.borrow();
        let n_periodic = log.iter().filter(|e| e.0 == "periodic").count();
        assert!(n_periodic >= 3, "{be:?}: periodic ran {n_periodic} times");
        assert_eq!(log.iter().filter(|e| e.0 == "once").count(), 1);
        assert_eq!(log.iter().filter(|e| e.0 == "killer").count(), 1);
        assert!(core.delete_time_event(once).is_err(), "one-shot is gone");
    }
}

/// Marks every accepted connection reusable; closes when asked to.
struct Idle {
    closed: Rc<RefCell<Vec<ConnId>>>,
}

impl Handler for Idle {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        if core.conn(ev.conn).is_some_and(|x| x.close) {
            self.closed.borrow_mut().push(ev.conn);
            core.close(ev.conn);
        }
    }
}

struct IdleProto {
    accepted: Rc<RefCell<Vec<ConnId>>>,
    closed: Rc<RefCell<Vec<ConnId>>>,
}

impl Protocol for IdleProto {
    fn init_connection(&mut self, core: &mut Core, c: ConnId) -> Option<Box<dyn Handler>> {
        core.handle_read_event(c).unwrap();
        core.set_reusable(c, true);
        self.accepted.borrow_mut().push(c);
        Some(Box::new(Idle {
            closed: self.closed.clone(),
        }))
    }
}

#[test]
fn reusable_connections_are_drained_oldest_first_when_slots_run_low() {
    for be in BACKENDS {
        // 32 slots, 1 for the listener: draining starts below 2 free.
        let mut core = core(be, 32);
        let ls = local();
        let addr: SocketAddr = ls.local_addr();
        let accepted = Rc::new(RefCell::new(Vec::new()));
        let closed = Rc::new(RefCell::new(Vec::new()));
        core.add_listener(
            ls,
            Box::new(IdleProto {
                accepted: accepted.clone(),
                closed: closed.clone(),
            }),
        )
        .unwrap();
        let mut clients = Vec::new();
        for i in 0..30 {
            clients.push(TcpStream::connect(addr).unwrap());
            run_until(&mut core, |_| accepted.borrow().len() == i + 1);
        }
        assert!(closed.borrow().is_empty());
        assert_eq!(core.free_connections(), 1);
        clients.push(TcpStream::connect(addr).unwrap());
        run_until(&mut core, |_| accepted.borrow().len() == 31);
        let closed = closed.borrow();
        assert!(!closed.is_empty(), "{be:?}: nothing drained");
        assert_eq!(closed[0], accepted.borrow()[0], "{be:?}: oldest first");
        assert!(core.stats().drained >= 1);
        let oldest = &mut clients[0];
        oldest
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut b = [0u8; 1];
        assert_eq!(
            oldest.read_some(&mut b).unwrap_or(0),
            0,
            "drained client sees EOF"
        );
    }
}

#[test]
fn graceful_shutdown_waits_for_non_cancelable_timers_only() {
    for be in BACKENDS {
        let mut core = core(be, 8);
        let (busy, calls, _p1) = adopted(&mut core);
        let (idle, _c2, _p2) = adopted(&mut core);
        core.set_cancelable(Ev::read(idle), true);
        core.add_timer(Ev::read(idle), 60_000);
        core.add_timer(Ev::read(busy), 100);
        let ls = local();
        let addr = ls.local_addr();
        core.add_listener(
            ls,
            Box::new(IdleProto {
                accepted: Rc::default(),
                closed: Rc::default(),
            }),
        )
        .unwrap();
        core.shutdown();
        assert!(TcpStream::connect(addr).is_err(), "listener closed");
        assert!(!core.no_timers_left());
        let start = Instant::now();
        core.run().unwrap();
        // run() returned once the busy timer fired; the cancelable one did
        // not hold the exit.
        assert!(start.elapsed() >= Duration::from_millis(90));
        assert_eq!(calls.borrow().len(), 1);
        assert!(core.no_timers_left());
        assert!(core.timer_set(Ev::read(idle)));
        core.cancel_timers();
        assert_eq!(core.timers_len(), 0);
    }
}

#[test]
fn timer_resolution_updates_the_clock_on_ticks_only() {
    for be in BACKENDS {
        let mut core = Core::new(CoreOptions {
            backend: be,
            connections: 8,
            timer_resolution: 20,
            ..CoreOptions::default()
        })
        .unwrap();
        let (c, calls, _peer) = adopted(&mut core);
        let t0 = core.now();
        core.add_timer(Ev::read(c), 50);
        let start = Instant::now();
        // No timeout is passed to the wait: only the tick wakes the loop.
        run_until(&mut core, |_| !calls.borrow().is_empty());
        assert!(start.elapsed() >= Duration::from_millis(45));
        let advanced = core.now() - t0;
        assert!(advanced >= 50, "{be:?}: clock advanced {advanced} ms");
    }
}

#[test]
fn writev_and_sendfile_reach_the_peer() {
    use std::io::IoSlice;
    use std::os::fd::AsFd;
    for be in BACKENDS {
        let mut core = core(be, 8);
        let (c, _calls, mut peer) = adopted(&mut core);
        let n = core
            .writev(c, &[IoSlice::new(b"head "), IoSlice::new(b"and body ")])
            .unwrap();
        assert_eq!(n, 14);
        let path =
            std::env::temp_dir().join(format!("gyre-sendfile-{}-{be:?}", std::process::id()));
        std::fs::write(&path, b"0123456789file-content").unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let mut off = 10u64;
        let n = core.sendfile(c, f.as_fd(), &mut off, 12).unwrap();
        assert_eq!((n, off), (12, 22));
        std::fs::remove_file(&path).unwrap();
        let mut got = vec![0u8; 26];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"head and body file-content");
        assert!(core.conn(c).unwrap().write.ready || !core.conn(c).unwrap().write.active);
    }
}

/// Writes until the socket is full: write interest is registered only then,
/// and the write handler runs once the peer reads.
struct Flood {
    wrote: Rc<Cell<usize>>,
    write_events: Rc<Cell<u32>>,
}

impl Handler for Flood {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        if ev.kind == EvKind::Write {
            self.write_events.set(self.write_events.get() + 1);
        }
        let chunk = [7u8; 65536];
        while let Ok(n) = core.send(ev.conn, &chunk) {
            self.wrote.set(self.wrote.get() + n);
            if self.write_events.get() > 0 {
                break;
            }
        }
        core.handle_write_event(ev.conn).unwrap();
    }
}

#[test]
fn write_interest_only_after_eagain() {
    for be in BACKENDS {
        let mut core = core(be, 8);
        let (a, mut peer) = UnixStream::pair().unwrap();
        let wrote = Rc::new(Cell::new(0));
        let write_events = Rc::new(Cell::new(0));
        let c = core
            .adopt(
                a.into(),
                Box::new(Flood {
                    wrote: wrote.clone(),
                    write_events: write_events.clone(),
                }),
            )
            .unwrap();
        assert!(
            !core.conn(c).unwrap().write.active,
            "{be:?}: nothing registered yet"
        );
        // An adopted socket starts writable: nothing is registered until a
        // send would block. Run the handler (as a read) to flood it.
        assert!(core.conn(c).unwrap().write.ready);
        core.post(Ev::read(c));
        core.process_events_and_timers().unwrap();
        assert!(wrote.get() > 0);
        assert!(
            core.conn(c).unwrap().write.active,
            "{be:?}: registered after EAGAIN"
        );
        assert!(!core.conn(c).unwrap().write.ready);
        // The peer drains; the write handler runs again.
        let mut sink = vec![0u8; 1 << 20];
        peer.set_nonblocking(true).unwrap();
        let _ = peer.read_some(&mut sink);
        let _ = peer.read_some(&mut sink);
        run_until(&mut core, |_| write_events.get() > 0);
    }
}
