//! The echo example as a real process over loopback, with both modules:
//! concurrency, idle timeout, pool exhaustion and EMFILE back-off.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use util::ReadSome;

use util::{cpu_ticks, EchoProc};

const BACKENDS: [&str; 2] = ["epoll", "poll"];

fn connect(p: &EchoProc) -> TcpStream {
    let s = TcpStream::connect(p.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn echo_round_trip(s: &mut TcpStream, msg: &[u8]) {
    s.write_all(msg).unwrap();
    let mut got = vec![0; msg.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(got, msg);
}

/// Reads until EOF or reset; true if the server closed the connection.
fn closed_by_server(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    match s.read_some(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe),
    }
}

#[test]
fn thousand_concurrent_connections() {
    for be in BACKENDS {
        let p = EchoProc::start(&["--backend", be, "--connections", "1100"], None);
        let mut conns: Vec<TcpStream> = (0..1000).map(|_| connect(&p)).collect();
        for (i, s) in conns.iter_mut().enumerate() {
            s.write_all(format!("message {i:04} via {be}\n").as_bytes())
                .unwrap();
        }
        for (i, s) in conns.iter_mut().enumerate() {
            let want = format!("message {i:04} via {be}\n");
            let mut got = vec![0; want.len()];
            s.read_exact(&mut got).unwrap();
            assert_eq!(got, want.as_bytes(), "{be}: connection {i}");
        }
        // A second round on every connection, with a large message that
        // cannot be echoed in one write on every connection at once.
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for s in conns.iter_mut().take(20) {
            let mut w = s.try_clone().unwrap();
            let data = big.clone();
            let writer = std::thread::spawn(move || w.write_all(&data).unwrap());
            let mut got = vec![0; big.len()];
            s.read_exact(&mut got).unwrap();
            writer.join().unwrap();
            assert!(got == big, "{be}: large echo corrupted");
        }
    }
}

#[test]
fn idle_connections_are_closed_by_the_timer() {
    for be in BACKENDS {
        let p = EchoProc::start(&["--backend", be, "--idle-timeout-ms", "300"], None);
        let mut idle = connect(&p);
        let mut busy = connect(&p);
        let start = Instant::now();
        // Keep one connection busy past the timeout; the other stays idle.
        while start.elapsed() < Duration::from_millis(700) {
            echo_round_trip(&mut busy, b"ping");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            closed_by_server(&mut idle, Duration::from_secs(5)),
            "{be}: idle connection not closed"
        );
        echo_round_trip(&mut busy, b"still here");
        assert!(
            closed_by_server(&mut busy, Duration::from_secs(5)),
            "{be}: idle after use not closed"
        );
    }
}

#[test]
fn pool_exhaustion_refuses_extra_connections_and_recovers() {
    for be in BACKENDS {
        // 4 slots: one is the listener's.
        let p = EchoProc::start(&["--backend", be, "--connections", "4"], None);
        // Fresh connections (nothing echoed yet) are busy, not idle: they
        // cannot be drained to make room.
        let held: Vec<TcpStream> = (0..3).map(|_| connect(&p)).collect();
        std::thread::sleep(Duration::from_millis(200));
        let mut extra = connect(&p);
        let _ = extra.write_all(b"y");
        assert!(
            closed_by_server(&mut extra, Duration::from_secs(5)),
            "{be}: connection beyond the pool was not closed"
        );
        assert!(p.logged("worker_connections are not enough", Duration::from_secs(5)));
        drop(held);
        std::thread::sleep(Duration::from_millis(200));
        let mut again = connect(&p);
        echo_round_trip(&mut again, b"served again");

        // Idle connections (served, waiting) are drained, oldest first, to
        // make room for new ones.
        let mut idle: Vec<TcpStream> = (0..2).map(|_| connect(&p)).collect();
        for s in &mut idle {
            echo_round_trip(s, b"x");
        }
        let mut newest = connect(&p);
        echo_round_trip(&mut newest, b"room was made");
        assert!(
            closed_by_server(&mut again, Duration::from_secs(5)),
            "{be}: the oldest idle connection was not drained"
        );
    }
}

#[test]
fn emfile_backs_off_without_spinning_and_recovers() {
    for be in BACKENDS {
        // 24 fds: stdio, the listener, epoll, plus a few connections.
        let p = EchoProc::start(&["--backend", be], Some(24));
        let mut conns = Vec::new();
        for _ in 0..40 {
            conns.push(connect(&p));
        }
        assert!(
            p.logged("Too many open files", Duration::from_secs(5)),
            "{be}: EMFILE not logged"
        );
        // Connections stay queued in the backlog; the server must not spin.
        let t0 = cpu_ticks(p.pid());
        std::thread::sleep(Duration::from_millis(1500));
        let used = cpu_ticks(p.pid()) - t0;
        assert!(
            used < 30,
            "{be}: server used {used} ticks in 1.5 s at EMFILE"
        );
        // Some connections were served all along.
        echo_round_trip(&mut conns[0], b"first");
        drop(conns);
        // After the flood the server accepts and serves again.
        std::thread::sleep(Duration::from_millis(600));
        let mut s = connect(&p);
        echo_round_trip(&mut s, b"recovered");
    }
}
