//! An echo server built only on gyre-core's public API: what a library user
//! writes to put their own protocol on the core.
//!
//! ```text
//! cargo run --release -p gyre-core --example echo -- \
//!     [--listen 127.0.0.1:7000] [--backend epoll|poll] [--idle-timeout-ms N] \
//!     [--connections N] [--multi-accept]
//! ```
//!
//! Every connection echoes what it reads. A connection idle for
//! `--idle-timeout-ms` is closed (a timer on its read event); a periodic time
//! event logs the counters once a second. Reads go into one buffer shared by
//! all connections; only a connection whose peer does not read its echo fast
//! enough keeps bytes of its own, so an idle connection costs its pool slot
//! and a small handler.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::rc::Rc;

use gyre_core::conn::{ConnId, ListenOptions, Listener, Protocol};
use gyre_core::event::{Backend, Core, CoreOptions, Ev, Handler, Next};

#[derive(Default)]
struct Counters {
    open: Cell<u64>,
    accepted: Cell<u64>,
    bytes: Cell<u64>,
    reads: Cell<u64>,
    timed_out: Cell<u64>,
}

struct Echo {
    idle_ms: u64,
    counters: Rc<Counters>,
    scratch: Rc<RefCell<Vec<u8>>>,
}

impl Protocol for Echo {
    fn init_connection(&mut self, core: &mut Core, c: ConnId) -> Option<Box<dyn Handler>> {
        if core.handle_read_event(c).is_err() {
            return None;
        }
        if self.idle_ms > 0 {
            core.add_timer(Ev::read(c), self.idle_ms);
        }
        self.counters.open.set(self.counters.open.get() + 1);
        self.counters.accepted.set(self.counters.accepted.get() + 1);
        Some(Box::new(EchoConn {
            idle_ms: self.idle_ms,
            counters: self.counters.clone(),
            scratch: self.scratch.clone(),
            pending: Vec::new(),
        }))
    }
}

struct EchoConn {
    idle_ms: u64,
    counters: Rc<Counters>,
    scratch: Rc<RefCell<Vec<u8>>>,
    /// Echo bytes the socket did not take yet.
    pending: Vec<u8>,
}

enum Step {
    Wait,
    Close,
}

impl EchoConn {
    fn close(&mut self, core: &mut Core, c: ConnId) {
        self.counters.open.set(self.counters.open.get() - 1);
        core.close(c);
    }

    /// Sends `data`, keeping what the socket does not take.
    fn send(&mut self, core: &mut Core, c: ConnId, data: &[u8]) -> Result<(), ()> {
        let mut off = 0;
        while off < data.len() {
            match core.send(c, &data[off..]) {
                Ok(n) => off += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => return Err(()),
            }
        }
        self.pending.extend_from_slice(&data[off..]);
        Ok(())
    }

    fn step(&mut self, core: &mut Core, c: ConnId) -> Step {
        if !self.pending.is_empty() {
            let data = std::mem::take(&mut self.pending);
            if self.send(core, c, &data).is_err() {
                return Step::Close;
            }
            if !self.pending.is_empty() {
                return Step::Wait;
            }
        }
        let scratch = self.scratch.clone();
        let mut buf = scratch.borrow_mut();
        while core.conn(c).is_some_and(|x| x.read.ready) {
            match core.recv(c, &mut buf) {
                Ok(0) => return Step::Close,
                Ok(n) => {
                    self.counters.reads.set(self.counters.reads.get() + 1);
                    self.counters
                        .bytes
                        .set(self.counters.bytes.get() + n as u64);
                    if self.send(core, c, &buf[..n]).is_err() {
                        return Step::Close;
                    }
                    if !self.pending.is_empty() {
                        // Stop reading until the peer takes its echo.
                        return Step::Wait;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => return Step::Close,
            }
        }
        Step::Wait
    }
}

impl Handler for EchoConn {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        let c = ev.conn;
        if ev.timedout {
            self.counters
                .timed_out
                .set(self.counters.timed_out.get() + 1);
            self.close(core, c);
            return;
        }
        if core.conn(c).is_some_and(|x| x.close) {
            self.close(core, c);
            return;
        }
        match self.step(core, c) {
            Step::Close => self.close(core, c),
            Step::Wait => {
                let r = if self.pending.is_empty() {
                    core.handle_read_event(c)
                } else {
                    core.disable_read(c)
                        .and_then(|_| core.handle_write_event(c))
                };
                if r.is_err() {
                    self.close(core, c);
                    return;
                }
                if self.idle_ms > 0 {
                    core.add_timer(Ev::read(c), self.idle_ms);
                }
            }
        }
    }
}

struct Args {
    listen: SocketAddr,
    backend: Backend,
    idle_ms: u64,
    connections: usize,
    multi_accept: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        listen: SocketAddr::from(([127, 0, 0, 1], 7000)),
        backend: Backend::DEFAULT,
        idle_ms: 0,
        connections: 1024,
        multi_accept: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => {
                let v = value()?;
                a.listen = v.parse().map_err(|_| format!("bad address {v:?}"))?;
            }
            "--backend" => {
                let v = value()?;
                a.backend = Backend::from_name(&v).ok_or(format!("unknown backend {v:?}"))?;
            }
            "--idle-timeout-ms" => {
                let v = value()?;
                a.idle_ms = v.parse().map_err(|_| format!("bad number {v:?}"))?;
            }
            "--connections" => {
                let v = value()?;
                a.connections = v.parse().map_err(|_| format!("bad number {v:?}"))?;
            }
            "--multi-accept" => a.multi_accept = true,
            "-h" | "--help" => {
                return Err("usage: echo [--listen ADDR:PORT] [--backend epoll|poll] \
                            [--idle-timeout-ms N] [--connections N] [--multi-accept]"
                    .into())
            }
            _ => return Err(format!("unknown flag {flag:?}")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    gyre_core::errlog::init(log::LevelFilter::Info);
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> std::io::Result<()> {
    let mut core = Core::new(CoreOptions {
        connections: args.connections,
        backend: args.backend,
        multi_accept: args.multi_accept,
        ..CoreOptions::default()
    })?;
    let ls = Listener::bind(ListenOptions::new(args.listen))?;
    let addr = ls.local_addr();
    let counters = Rc::new(Counters::default());
    core.add_listener(
        ls,
        Box::new(Echo {
            idle_ms: args.idle_ms,
            counters: counters.clone(),
            scratch: Rc::new(RefCell::new(vec![0; 16 * 1024])),
        }),
    )?;
    log::info!("echo listening on {addr} using {}", core.backend_name());
    let mut last_reads = 0;
    core.create_time_event(1000, move |core, _| {
        let c = &counters;
        if c.reads.get() != last_reads || c.open.get() > 0 {
            log::info!(
                "open {} accepted {} reads {} bytes {} idle-closed {} free {}",
                c.open.get(),
                c.accepted.get(),
                c.reads.get(),
                c.bytes.get(),
                c.timed_out.get(),
                core.free_connections()
            );
            last_reads = c.reads.get();
        }
        Next::Again(1000)
    });
    core.run()
}
