//! An echo server built only on gyre-core's public API: what a library user
//! writes to put their own protocol on the core.
//!
//! ```text
//! cargo run --release -p gyre-core --example echo -- \
//!     [--listen 127.0.0.1:7000] [--backend epoll|poll] [--idle-timeout-ms N] \
//!     [--connections N] [--multi-accept] [--tls-cert FILE --tls-key FILE]
//! cargo run --release -p gyre-core --example echo -- --conf echo.conf [--prefix DIR]
//! ```
//!
//! With `--conf`, the same protocol runs under the core's process model
//! (master, workers, signals, reload) with an nginx-syntax file that adds an
//! `echo {}` block of its own:
//!
//! ```text
//! worker_processes 2;
//! daemon off;
//! events { worker_connections 1024; accept_mutex on; }
//! echo { listen 127.0.0.1:7000; idle_timeout 30s; }
//! ```
//!
//! With `--tls-cert` / `--tls-key` (PEM) the listener speaks TLS: the core
//! runs the handshake and the echo protocol below is unchanged — its
//! `recv` and `send` go through the TLS layer.
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
use gyre_core::event::tls::TlsListen;
use gyre_core::event::tls_conf;
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
                // Nothing left to echo: the connection is idle. Idle ones
                // are closed first when slots run short or the worker shuts
                // down gracefully, and their timer does not hold an exiting
                // worker (a fresh connection's does: it has yet to be served).
                let idle = self.pending.is_empty();
                core.set_keepalive(c, idle);
                if self.idle_ms > 0 {
                    core.add_timer(Ev::read(c), self.idle_ms);
                }
            }
        }
    }
}

struct Args {
    conf: Option<String>,
    prefix: Option<String>,
    listen: SocketAddr,
    backend: Backend,
    idle_ms: u64,
    connections: usize,
    multi_accept: bool,
    tls_cert: Option<String>,
    tls_key: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        conf: None,
        prefix: None,
        listen: SocketAddr::from(([127, 0, 0, 1], 7000)),
        backend: Backend::DEFAULT,
        idle_ms: 0,
        connections: 1024,
        multi_accept: false,
        tls_cert: None,
        tls_key: None,
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
            "--tls-cert" => a.tls_cert = Some(value()?),
            "--tls-key" => a.tls_key = Some(value()?),
            "--conf" => a.conf = Some(value()?),
            // nginx's level names (`info` shows handshake failures).
            "--log-level" => {
                let v = value()?;
                let l = gyre_core::errlog::parse_level(&v)
                    .ok_or_else(|| format!("unknown log level {v:?}"))?;
                gyre_core::errlog::init(l);
            }
            "--prefix" => a.prefix = Some(value()?),
            "-h" | "--help" => {
                return Err("usage: echo [--listen ADDR:PORT] [--backend epoll|poll] \
                            [--idle-timeout-ms N] [--connections N] [--multi-accept] \
                            [--tls-cert FILE --tls-key FILE] [--log-level LEVEL]"
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
    let r = if args.conf.is_some() {
        run_conf(&args)
    } else {
        run(args)
    };
    match r {
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
    let id = core.add_listener(
        ls,
        Box::new(Echo {
            idle_ms: args.idle_ms,
            counters: counters.clone(),
            scratch: Rc::new(RefCell::new(vec![0; 16 * 1024])),
        }),
    )?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let config = tls_conf::simple_server_config(cert.as_ref(), key.as_ref(), &[])?;
            core.set_listener_tls(
                id,
                Some(TlsListen {
                    config: Rc::new(config),
                    // The idle timeout bounds the handshake too.
                    handshake_timeout: if args.idle_ms > 0 {
                        args.idle_ms
                    } else {
                        60_000
                    },
                    plain_fallback: false,
                }),
            );
            " (TLS)"
        }
        (None, None) => "",
        _ => {
            return Err(std::io::Error::other(
                "--tls-cert and --tls-key go together",
            ))
        }
    };
    log::info!(
        "echo listening on {addr}{tls} using {}",
        core.backend_name()
    );
    let mut last = (0, 0, 0);
    core.create_time_event(1000, move |core, _| {
        let c = &counters;
        // Logged while connections are open or anything changed (a slot
        // freed late by a TLS close included).
        let now = (
            c.reads.get(),
            core.free_connections(),
            core.stats().tls_lingered,
        );
        if now != last || c.open.get() > 0 {
            log::info!(
                "open {} accepted {} reads {} bytes {} idle-closed {} free {} tls-lingered {}",
                c.open.get(),
                c.accepted.get(),
                c.reads.get(),
                c.bytes.get(),
                c.timed_out.get(),
                core.free_connections(),
                core.stats().tls_lingered
            );
            last = now;
        }
        Next::Again(1000)
    });
    core.run()
}

// ------------------------------------------------------------------------
// The same protocol under the core's process model and configuration.

use gyre_core::conf::{
    self, Args as ArgCount, Block, Conf, ConfCtx, Context, Directive, DirectiveSpec, ListenConf,
    ModuleDef,
};
use gyre_core::process::{master, App};

/// The `echo {}` block.
#[derive(Default)]
struct EchoConf {
    listen: Vec<ListenConf>,
    idle_ms: u64,
}

fn set_echo(_: &mut EchoConf, _: &Directive, _: &ConfCtx) -> Result<(), String> {
    Ok(())
}

fn set_listen(c: &mut EchoConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.listen.push(d.listen(7000)?);
    Ok(())
}

fn set_idle(c: &mut EchoConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.idle_ms = d.msec(0)?;
    Ok(())
}

const ECHO: Context = Context::custom(0);

static ECHO_DIRECTIVES: &[DirectiveSpec<EchoConf>] = &[
    DirectiveSpec::block(
        "echo",
        Context::MAIN,
        ArgCount::NOARGS,
        Block::Context(ECHO),
        false,
        set_echo,
    ),
    DirectiveSpec::multi("listen", ECHO, ArgCount::ONE_MORE, set_listen),
    DirectiveSpec::new("idle_timeout", ECHO, ArgCount::TAKE1, set_idle),
];

static ECHO_MODULE: ModuleDef<EchoConf> = ModuleDef {
    name: "echo",
    directives: ECHO_DIRECTIVES,
    create_conf: EchoConf::default,
    init_conf: conf::no_init,
};

struct EchoApp;

impl App for EchoApp {
    fn listeners(&self, conf: &Conf) -> Vec<ListenOptions> {
        let Some(e) = conf.module::<EchoConf>() else {
            return Vec::new();
        };
        e.listen
            .iter()
            .map(|l| ListenOptions {
                addr: l.addr,
                backlog: l.backlog,
                reuseport: l.reuseport,
                deferred: l.deferred,
            })
            .collect()
    }

    fn init_worker(
        &self,
        conf: &Conf,
        core: &mut Core,
        listeners: Vec<Listener>,
        _worker: usize,
    ) -> std::io::Result<()> {
        // Under the process model a connection always has a timer, so a
        // graceful shutdown waits for fresh connections to be served.
        let idle_ms = match conf.module::<EchoConf>().map_or(0, |e| e.idle_ms) {
            0 => 60_000,
            ms => ms,
        };
        let counters = Rc::new(Counters::default());
        let scratch = Rc::new(RefCell::new(vec![0; 16 * 1024]));
        for ls in listeners {
            log::info!("echo listening on {}", ls.local_addr());
            core.add_listener(
                ls,
                Box::new(Echo {
                    idle_ms,
                    counters: counters.clone(),
                    scratch: scratch.clone(),
                }),
            )?;
        }
        Ok(())
    }
}

fn run_conf(args: &Args) -> std::io::Result<()> {
    let prefix = match &args.prefix {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_dir()?,
    };
    let file = std::path::PathBuf::from(args.conf.as_deref().unwrap_or("echo.conf"));
    let modules: [&dyn conf::Module; 1] = [&ECHO_MODULE];
    let load = || conf::load(&prefix, &file, None, &modules);
    let cf = load().map_err(|e| std::io::Error::other(format!("[emerg] {e}")))?;
    gyre_core::errlog::configure(&cf.core.error_log)?;
    if cf.core.master_process {
        master::run(cf, &EchoApp, &load)
    } else {
        master::run_single(cf, &EchoApp)
    }
}
