//! Relaying through a pipe with splice(2) (`Core::splice_in` /
//! `Core::splice_out`, `conn::splice::Pipe`) on real sockets and both
//! modules: a producer's bytes reach a slow consumer whole and in order,
//! the events' ready flags tell the relay when to wait (it waits, it never
//! spins), the end of stream is seen, and bytes left in the pipe are taken
//! back with `Pipe::read`.
#![allow(clippy::unwrap_used)]

mod util;
use std::cell::RefCell;
use std::io::{ErrorKind, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::{Duration, Instant};
use util::ReadSome;

use gyre_core::conn::splice::Pipe;
use gyre_core::conn::ConnId;
use gyre_core::event::{Backend, Core, CoreOptions, Ev, Handler, Next};

const BACKENDS: [Backend; 2] = [Backend::Epoll, Backend::Poll];

fn byte(i: usize) -> u8 {
    (i % 251) as u8
}

fn core(backend: Backend) -> Core {
    Core::new(CoreOptions {
        backend,
        connections: 16,
        ..CoreOptions::default()
    })
    .unwrap()
}

/// A connected pair: the std end, and the accepted end as an fd.
fn pair() -> (TcpStream, OwnedFd) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (a, _) = l.accept().unwrap();
    (s, OwnedFd::from(a))
}

#[derive(Default)]
struct Relay {
    from: Option<ConnId>,
    to: Option<ConnId>,
    pipe: Option<Pipe>,
    moved: usize,
    eof: bool,
    /// Handler calls (each must have had something to do: bounded).
    calls: usize,
}

/// Both connections' handler: splice in, splice out, wait when either
/// side says so.
struct Side(Rc<RefCell<Relay>>);

impl Handler for Side {
    fn handle(&mut self, core: &mut Core, _ev: Ev) {
        let mut r = self.0.borrow_mut();
        let r = &mut *r;
        r.calls += 1;
        let (Some(from), Some(to), Some(pipe)) = (r.from, r.to, r.pipe.as_mut()) else {
            return;
        };
        for _ in 0..10_000 {
            if pipe.held() > 0 {
                match core.splice_out(to, pipe, pipe.held()) {
                    Ok(n) => r.moved += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        core.handle_write_event(to).unwrap();
                        return;
                    }
                    Err(e) => panic!("splice out: {e}"),
                }
                if !core.conn(to).unwrap().write.ready {
                    core.handle_write_event(to).unwrap();
                    return;
                }
                continue;
            }
            if r.eof {
                core.close(to);
                core.close(from);
                r.from = None;
                return;
            }
            if !core.conn(from).unwrap().read.ready {
                core.handle_read_event(from).unwrap();
                return;
            }
            match core.splice_in(from, pipe, 64 * 1024) {
                Ok(0) => r.eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    core.handle_read_event(from).unwrap();
                    return;
                }
                Err(e) => panic!("splice in: {e}"),
            }
        }
        panic!("the relay never waited");
    }
}

#[test]
fn a_spliced_relay_delivers_every_byte_to_a_slow_reader() {
    const LEN: usize = 8 << 20;
    for backend in BACKENDS {
        let mut core = core(backend);
        let (mut producer, from_fd) = pair();
        let (mut consumer, to_fd) = pair();
        let state = Rc::new(RefCell::new(Relay {
            pipe: Some(Pipe::new().unwrap()),
            ..Relay::default()
        }));
        let from = core.adopt(from_fd, Box::new(Side(state.clone()))).unwrap();
        let to = core.adopt(to_fd, Box::new(Side(state.clone()))).unwrap();
        assert!(core.can_splice(from) && core.can_splice(to));
        {
            let mut s = state.borrow_mut();
            s.from = Some(from);
            s.to = Some(to);
        }
        core.handle_read_event(from).unwrap();
        let writer = std::thread::spawn(move || {
            let body: Vec<u8> = (0..LEN).map(byte).collect();
            producer.write_all(&body).unwrap();
        });
        let reader = std::thread::spawn(move || {
            consumer
                .set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let mut got = Vec::with_capacity(LEN);
            let mut buf = vec![0u8; 16 * 1024];
            let mut reads = 0;
            loop {
                match consumer.read_some(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => panic!("reading: {e}"),
                }
                reads += 1;
                if reads % 64 == 0 {
                    // Slow now and then: the relay's writes block.
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            got
        });
        let end = Instant::now() + Duration::from_secs(20);
        let te = core.create_time_event(10, |_, _| Next::Again(10));
        while state.borrow().from.is_some() {
            assert!(
                Instant::now() < end,
                "{backend:?}: the relay did not finish"
            );
            core.process_events_and_timers().unwrap();
        }
        core.delete_time_event(te).unwrap();
        writer.join().unwrap();
        let got = reader.join().unwrap();
        assert_eq!(got.len(), LEN, "{backend:?}");
        if let Some(i) = (0..LEN).find(|&i| got[i] != byte(i)) {
            panic!("{backend:?}: byte {i} is {} instead of {}", got[i], byte(i));
        }
        let s = state.borrow();
        assert_eq!(s.moved, LEN);
        // Every call had work (a wake-up per wait, not a busy loop).
        assert!(
            s.calls < LEN / 128,
            "{backend:?}: {} handler calls",
            s.calls
        );
    }
}

/// What could not be spliced out is read back from the pipe, which is then
/// empty; a connection without data says WouldBlock and is not ready.
#[test]
fn bytes_left_in_the_pipe_are_read_back() {
    for backend in BACKENDS {
        let mut core = core(backend);
        let (mut producer, fd) = pair();
        let state = Rc::new(RefCell::new(Relay::default()));
        let c = core.adopt(fd, Box::new(Side(state.clone()))).unwrap();
        let mut pipe = Pipe::new().unwrap();
        assert!(pipe.capacity() >= 64 * 1024, "{}", pipe.capacity());
        let e = core.splice_in(c, &mut pipe, 4096).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock);
        assert!(!core.conn(c).unwrap().read.ready);
        producer.write_all(b"hello, pipe").unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        let n = loop {
            match core.splice_in(c, &mut pipe, 4096) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    assert!(Instant::now() < end, "no bytes came");
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!((n, pipe.held()), (11, 11));
        let mut buf = [0u8; 64];
        assert_eq!(pipe.read(&mut buf[..5]).unwrap(), 5);
        assert_eq!(pipe.read(&mut buf[5..]).unwrap(), 6);
        assert_eq!(&buf[..11], b"hello, pipe");
        assert_eq!(pipe.held(), 0);
        assert_eq!(pipe.read(&mut buf).unwrap(), 0);
        drop(producer);
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            match core.splice_in(c, &mut pipe, 4096) {
                Ok(0) => break,
                Ok(n) => panic!("{n} bytes after the producer closed"),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    assert!(Instant::now() < end, "no end of stream");
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(core.conn(c).unwrap().read.eof);
        core.close(c);
    }
}
