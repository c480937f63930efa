//! `Core::assume_readable`: a listener whose clients do not send at once
//! stops reading new connections before waiting for them (each such read
//! would only say EAGAIN) and still answers every one of them; both modules.
#![allow(clippy::unwrap_used)]

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::rc::Rc;
use std::time::{Duration, Instant};

use gyre_core::conn::{ConnId, ListenOptions, Listener, Protocol};
use gyre_core::event::{Backend, Core, CoreOptions, Ev, Handler, Next};

/// Counts first reads that found nothing, and answers `ok` to what it reads.
struct Counting {
    eagain_first: Rc<Cell<u32>>,
}

struct Conn {
    first: bool,
    eagain_first: Rc<Cell<u32>>,
}

impl Protocol for Counting {
    fn init_connection(&mut self, core: &mut Core, c: ConnId) -> Option<Box<dyn Handler>> {
        core.assume_readable(c);
        Some(Box::new(Conn {
            first: true,
            eagain_first: self.eagain_first.clone(),
        }))
    }
}

impl Handler for Conn {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        let c = ev.conn;
        let mut buf = [0u8; 64];
        match core.recv(c, &mut buf) {
            Ok(0) => core.close(c),
            Ok(_) => {
                self.first = false;
                let _ = core.send(c, b"ok");
                core.close(c);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if self.first {
                    self.eagain_first.set(self.eagain_first.get() + 1);
                }
                self.first = false;
                core.handle_read_event(c).unwrap();
            }
            Err(_) => core.close(c),
        }
    }
}

/// 64 clients, one after the other, each sending its request 20 ms after
/// connecting: the first few reads at accept find nothing, then the core
/// stops trying (it still tries one in 64).
fn run(backend: Backend) {
    let mut core = Core::new(CoreOptions {
        backend,
        connections: 64,
        ..CoreOptions::default()
    })
    .unwrap();
    let ls = Listener::bind(ListenOptions::new("127.0.0.1:0".parse().unwrap())).unwrap();
    let addr = ls.local_addr();
    let eagain = Rc::new(Cell::new(0));
    core.add_listener(
        ls,
        Box::new(Counting {
            eagain_first: eagain.clone(),
        }),
    )
    .unwrap();
    const N: u32 = 64;
    let client = std::thread::spawn(move || {
        let mut answered = 0;
        for _ in 0..N {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            s.write_all(b"hello").unwrap();
            let mut out = Vec::new();
            s.read_to_end(&mut out).unwrap();
            answered += u32::from(out == b"ok");
        }
        answered
    });
    let end = Instant::now() + Duration::from_secs(30);
    let te = core.create_time_event(10, |_, _| Next::Again(10));
    while !client.is_finished() {
        assert!(Instant::now() < end, "clients not done in 30 s");
        core.process_events_and_timers().unwrap();
    }
    core.delete_time_event(te).unwrap();
    assert_eq!(client.join().unwrap(), N, "every client answered");
    // Always reading at once would make this N (less only when this loop
    // was slower than the clients' 20 ms, which finds the data there).
    let missed = eagain.get();
    assert!(
        missed <= N / 2,
        "{backend:?}: {missed} of {N} first reads found nothing"
    );
}

#[test]
fn epoll_stops_reading_at_once_when_clients_are_slow() {
    run(Backend::Epoll);
}

#[test]
fn poll_stops_reading_at_once_when_clients_are_slow() {
    run(Backend::Poll);
}
