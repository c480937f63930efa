//! A TCP proxy built only on gyre-core's public API: what a library user
//! writes to make outbound connections (nginx's `stream { proxy_pass }` in
//! miniature).
//!
//! ```text
//! cargo run --release -p gyre-core --example tcp_proxy -- \
//!     --listen 127.0.0.1:7001 --upstream 127.0.0.1:7000|unix:/path \
//!     [--backend epoll|poll] [--buffer BYTES] [--connect-timeout-ms N] \
//!     [--timeout-ms N] [--connections N] \
//!     [--upstream-tls [--upstream-ca FILE] [--upstream-name NAME]]
//! ```
//!
//! `--upstream-tls` speaks TLS to the upstream (nginx's `proxy_pass https`,
//! `proxy_ssl on` in stream): without `--upstream-ca` any certificate is
//! taken and no SNI is sent (nginx's defaults); with it the certificate is
//! verified against those CAs for `--upstream-name` (default `localhost`),
//! which is also sent as SNI.
//!
//! Each accepted connection gets one upstream connection ([`Core::connect`])
//! and two buffers of `--buffer` bytes, one per direction, allocated once:
//! they are all the memory a session holds, whatever the peers do. A side
//! is read only while its buffer has room, so a slow reader stops the other
//! side's reads (the kernel's windows then push back on the sender), and a
//! buffer is written only while its destination takes bytes. An end of
//! stream on one side is passed on as a half-close (FIN after the buffered
//! bytes); the session ends once both directions are closed, or at once on
//! an error on either side (a reset) or after `--timeout-ms` without
//! traffic (nginx's `proxy_timeout`). Log lines are nginx's stream ones.

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::rc::Rc;

use gyre_core::conn::{ConnId, ListenOptions, Listener, Protocol};
use gyre_core::event::tls::rustls;
use gyre_core::event::tls_client::{client_config, ClientTlsOptions};
use gyre_core::event::{
    Backend, ConnectOptions, Core, CoreOptions, Ev, EvKind, Handler, Next, PeerAddr, TlsConnect,
};
use gyre_core::sys_error_text;

/// One direction: bytes read from `src` waiting to be written to `dst`.
struct Pipe {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// `src` reported end of stream.
    eof: bool,
    /// The end of stream was passed on to `dst`.
    shut: bool,
    bytes: u64,
}

impl Pipe {
    fn new(size: usize) -> Pipe {
        Pipe {
            buf: vec![0; size].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            shut: false,
            bytes: 0,
        }
    }

    fn has_room(&self) -> bool {
        self.end < self.buf.len() || self.start > 0
    }

    fn wants_read(&self) -> bool {
        !self.eof && self.has_room()
    }
}

/// What ended a pump.
enum Stop {
    /// Waiting for events.
    Wait,
    /// Both directions closed.
    Done,
    /// An I/O error: the log line's start.
    Failed(String),
}

struct Session {
    client: ConnId,
    upstream: ConnId,
    connected: bool,
    c2u: Pipe,
    u2c: Pipe,
    timeout: u64,
    closed: bool,
    /// ", client: …, server: …, upstream: "…"" for log lines.
    ctx: String,
}

/// Moves bytes from `src` to `dst` through `p` until neither side can make
/// progress. `dst_ok` is false while the upstream is still connecting.
fn transfer(
    core: &mut Core,
    src: ConnId,
    dst: ConnId,
    p: &mut Pipe,
    src_ok: bool,
    dst_ok: bool,
    what: &str,
) -> Result<bool, String> {
    let mut progress = false;
    // Bounded: every pass moves bytes or stops.
    for _ in 0..64 {
        let mut moved = false;
        if src_ok && !p.eof && core.conn(src).is_some_and(|x| x.read.ready) {
            if p.end == p.buf.len() && p.start > 0 {
                p.buf.copy_within(p.start..p.end, 0);
                p.end -= p.start;
                p.start = 0;
            }
            if p.end < p.buf.len() {
                match core.recv(src, &mut p.buf[p.end..]) {
                    Ok(0) => {
                        p.eof = true;
                        moved = true;
                    }
                    Ok(n) => {
                        p.end += n;
                        p.bytes += n as u64;
                        moved = true;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        return Err(format!(
                            "recv() failed ({}) while proxying {what}",
                            sys_error_text(&e)
                        ))
                    }
                }
            }
        }
        if dst_ok && p.start < p.end && core.conn(dst).is_some_and(|x| x.write.ready) {
            match core.send(dst, &p.buf[p.start..p.end]) {
                Ok(n) => {
                    p.start += n;
                    if p.start == p.end {
                        p.start = 0;
                        p.end = 0;
                    }
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    return Err(format!(
                        "send() failed ({}) while proxying {what}",
                        sys_error_text(&e)
                    ))
                }
            }
        }
        if dst_ok && p.eof && !p.shut && p.start == p.end {
            p.shut = true;
            moved = true;
            if let Err(e) = core.shutdown_write(dst) {
                return Err(format!(
                    "shutdown() failed ({}) while proxying {what}",
                    sys_error_text(&e)
                ));
            }
        }
        if !moved {
            break;
        }
        progress = true;
    }
    Ok(progress)
}

impl Session {
    fn pump(&mut self, core: &mut Core) -> Stop {
        let (c, u, up) = (self.client, self.upstream, self.connected);
        let mut progress = false;
        // Bounded: each direction runs until it cannot move bytes.
        for _ in 0..16 {
            let a = match transfer(core, c, u, &mut self.c2u, true, up, "connection") {
                Ok(a) => a,
                Err(e) => return Stop::Failed(e),
            };
            let b = match transfer(core, u, c, &mut self.u2c, up, true, "upstream") {
                Ok(b) => b,
                Err(e) => return Stop::Failed(e),
            };
            if !a && !b {
                break;
            }
            progress = true;
        }
        if self.c2u.shut && self.u2c.shut {
            return Stop::Done;
        }
        if let Err(e) = self.arm(core, progress) {
            return Stop::Failed(format!("event registration failed ({e})"));
        }
        Stop::Wait
    }

    /// Read interest only where the buffer has room; write interest where
    /// bytes wait; the idle timer re-armed on traffic.
    fn arm(&mut self, core: &mut Core, progress: bool) -> io::Result<()> {
        let (c, u) = (self.client, self.upstream);
        if self.c2u.wants_read() {
            core.handle_read_event(c)?;
        } else {
            core.disable_read(c)?;
        }
        core.handle_write_event(c)?;
        if self.connected {
            if self.u2c.wants_read() {
                core.handle_read_event(u)?;
            } else {
                core.disable_read(u)?;
            }
            core.handle_write_event(u)?;
        }
        if progress || !core.timer_set(Ev::read(c)) {
            core.add_timer(Ev::read(c), self.timeout);
        }
        Ok(())
    }

    fn finish(&mut self, core: &mut Core, why: Option<String>) {
        if self.closed {
            return;
        }
        self.closed = true;
        if let Some(w) = why {
            log::error!(
                "{w}{}, bytes from/to client:{}/{}, bytes from/to upstream:{}/{}",
                self.ctx,
                self.c2u.bytes,
                self.u2c.bytes,
                self.u2c.bytes,
                self.c2u.bytes
            );
        }
        core.close(self.upstream);
        core.close(self.client);
    }

    fn on_event(&mut self, core: &mut Core, ev: Ev) {
        if self.closed {
            return;
        }
        let c = self.client;
        if core.conn(c).is_some_and(|x| x.close) {
            self.finish(core, None);
            return;
        }
        if ev.conn == self.upstream && !self.connected {
            // The first event of the upstream connection: the connect is over.
            if ev.timedout {
                self.finish(
                    core,
                    Some("upstream timed out (110: Connection timed out) while connecting to upstream".into()),
                );
                return;
            }
            if let Err(e) = core.connect_result(ev.conn) {
                let why = if let Some(v) = gyre_core::event::tls_client::verify_failure(&e) {
                    // The certificate refused, in nginx's words.
                    format!("{v} while SSL handshaking to upstream")
                } else if e.kind() == io::ErrorKind::InvalidData {
                    // rustls refused the handshake (an alert, a protocol error).
                    format!(
                        "SSL_do_handshake() failed (SSL: {e}) while SSL handshaking to upstream"
                    )
                } else {
                    format!(
                        "connect() failed ({}) while connecting to upstream",
                        sys_error_text(&e)
                    )
                };
                self.finish(core, Some(why));
                return;
            }
            self.connected = true;
        } else if ev.timedout {
            debug_assert_eq!(ev.kind, EvKind::Read);
            self.finish(
                core,
                Some(
                    "upstream timed out (110: Connection timed out) while proxying connection"
                        .into(),
                ),
            );
            return;
        }
        match self.pump(core) {
            Stop::Wait => {}
            Stop::Done => self.finish(core, None),
            Stop::Failed(e) => self.finish(core, Some(e)),
        }
    }
}

/// Both sides' handler: they share the session.
struct Side(Rc<RefCell<Session>>);

impl Handler for Side {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        self.0.borrow_mut().on_event(core, ev);
    }
}

struct Proxy {
    upstream: PeerAddr,
    tls: Option<TlsConnect>,
    buffer: usize,
    connect_timeout: u64,
    timeout: u64,
    server: SocketAddr,
}

impl Protocol for Proxy {
    fn init_connection(&mut self, core: &mut Core, c: ConnId) -> Option<Box<dyn Handler>> {
        let client = core
            .conn(c)
            .and_then(|x| x.peer)
            .map(|p| p.ip().to_string())
            .unwrap_or_default();
        let ctx = format!(
            ", client: {client}, server: {}, upstream: \"{}\"",
            self.server, self.upstream
        );
        // The upstream's handler needs the session, which needs the
        // upstream's id: connect with a placeholder id filled in at once
        // (no event is delivered before this function returns).
        let s = Rc::new(RefCell::new(Session {
            client: c,
            upstream: c,
            connected: false,
            c2u: Pipe::new(self.buffer),
            u2c: Pipe::new(self.buffer),
            timeout: self.timeout,
            closed: false,
            ctx,
        }));
        let mut o = ConnectOptions::new(self.upstream.clone(), self.connect_timeout);
        o.tls = self.tls.clone();
        match core.connect(&o, Box::new(Side(s.clone()))) {
            Ok(u) => s.borrow_mut().upstream = u,
            Err(e) => {
                log::error!(
                    "connect() failed ({}) while connecting to upstream{}",
                    sys_error_text(&e),
                    s.borrow().ctx
                );
                return None;
            }
        }
        core.handle_read_event(c).ok()?;
        core.add_timer(Ev::read(c), self.timeout);
        Some(Box::new(Side(s)))
    }
}

struct Args {
    listen: SocketAddr,
    upstream: Option<PeerAddr>,
    backend: Backend,
    buffer: usize,
    connect_timeout: u64,
    timeout: u64,
    connections: usize,
    upstream_tls: bool,
    upstream_ca: Option<String>,
    upstream_name: String,
}

fn number(v: &str) -> Result<u64, String> {
    v.parse().map_err(|_| format!("bad number {v:?}"))
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        listen: SocketAddr::from(([127, 0, 0, 1], 7001)),
        upstream: None,
        backend: Backend::DEFAULT,
        buffer: 16 * 1024,
        connect_timeout: 60_000,
        timeout: 600_000,
        connections: 1024,
        upstream_tls: false,
        upstream_ca: None,
        upstream_name: "localhost".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => {
                let v = value()?;
                a.listen = v.parse().map_err(|_| format!("bad address {v:?}"))?;
            }
            "--upstream" => {
                let v = value()?;
                a.upstream = Some(match v.strip_prefix("unix:") {
                    Some(p) => PeerAddr::Unix(p.into()),
                    None => PeerAddr::Inet(v.parse().map_err(|_| format!("bad address {v:?}"))?),
                });
            }
            "--backend" => {
                let v = value()?;
                a.backend = Backend::from_name(&v).ok_or(format!("unknown backend {v:?}"))?;
            }
            "--buffer" => a.buffer = number(&value()?)?.clamp(1, 1 << 30) as usize,
            "--connect-timeout-ms" => a.connect_timeout = number(&value()?)?,
            "--timeout-ms" => a.timeout = number(&value()?)?,
            "--connections" => a.connections = number(&value()?)? as usize,
            "--upstream-tls" => a.upstream_tls = true,
            "--upstream-ca" => a.upstream_ca = Some(value()?),
            "--upstream-name" => a.upstream_name = value()?,
            "-h" | "--help" => {
                return Err("usage: tcp_proxy --upstream ADDR:PORT|unix:PATH \
                            [--listen ADDR:PORT] [--backend epoll|poll] [--buffer BYTES] \
                            [--connect-timeout-ms N] [--timeout-ms N] [--connections N] \
                            [--upstream-tls [--upstream-ca FILE] [--upstream-name NAME]]"
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

fn run(args: Args) -> io::Result<()> {
    let Some(upstream) = args.upstream else {
        return Err(io::Error::other("--upstream is required"));
    };
    let tls = if args.upstream_tls {
        let verify = args.upstream_ca.is_some();
        let config = client_config(&ClientTlsOptions {
            verify,
            trusted: args.upstream_ca.as_deref().map(std::path::Path::new),
            server_name: verify,
            alpn: Vec::new(),
            ..ClientTlsOptions::default()
        })?;
        let name = rustls::pki_types::ServerName::try_from(args.upstream_name.clone())
            .map_err(|e| io::Error::other(format!("--upstream-name: {e}")))?;
        Some(TlsConnect { config, name })
    } else {
        None
    };
    let mut core = Core::new(CoreOptions {
        connections: args.connections,
        backend: args.backend,
        ..CoreOptions::default()
    })?;
    let ls = Listener::bind(ListenOptions::new(args.listen))?;
    let addr = ls.local_addr();
    log::info!(
        "tcp_proxy listening on {addr} to {upstream} using {}",
        core.backend_name()
    );
    core.add_listener(
        ls,
        Box::new(Proxy {
            upstream,
            tls,
            buffer: args.buffer,
            connect_timeout: args.connect_timeout,
            timeout: args.timeout,
            server: addr,
        }),
    )?;
    // Counters once a second while anything is open.
    core.create_time_event(1000, |core, _| {
        if core.outbound_connections() > 0 {
            log::info!(
                "sessions {} free slots {}",
                core.outbound_connections(),
                core.free_connections()
            );
        }
        Next::Again(1000)
    });
    core.run()
}
