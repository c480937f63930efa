//! Outbound connections (nginx's `ngx_event_connect_peer` and the
//! `ngx_http_upstream_test_connect` check): a non-blocking connect to a TCP
//! or unix-domain address, bounded by a timer, on a slot of the same pool as
//! accepted connections, optionally followed by a TLS handshake as a client.
//!
//! What a caller sees is the handler model of accepted connections: one
//! [`Handler`] for reads, writes and timers. It is first called with a write
//! event once the connect (and the handshake) has finished:
//!
//! - `ev.timedout`: the connect timeout expired (nginx: "upstream timed out
//!   (110: Connection timed out) while connecting to upstream");
//! - otherwise [`Core::connect_result`] says whether it succeeded, with the
//!   error (SO_ERROR, ECONNREFUSED, the TLS alert) if not.
//!
//! The core logs nothing here: the caller knows the context nginx appends
//! ("while connecting to upstream, client: …, upstream: …"). Until that first
//! call the core owns the connection's events; afterwards everything is as
//! for an accepted connection (`core.recv/send/writev`, `handle_read_event`,
//! timers, `close`), TLS included. Outbound connections do not count as
//! stub_status's "active" (nginx counts accepted ones there), but they take
//! slots from `worker_connections`, as in nginx; [`Core::outbound_connections`]
//! counts them apart.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;

use super::actions::Interest;
use super::core::{Core, Ev, EvKind, Handler};
use super::tls::rustls;
use super::tls_client::ClientStep;
use crate::conn::pool::ConnId;
use crate::sys::socket::{self, ConnectStart};

/// Where to connect.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PeerAddr {
    Inet(SocketAddr),
    /// A unix-domain socket path (nginx's `unix:/path`).
    Unix(PathBuf),
}

impl fmt::Display for PeerAddr {
    /// As nginx prints a peer: `127.0.0.1:8080`, `[::1]:80`, `unix:/path`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerAddr::Inet(a) => write!(f, "{a}"),
            PeerAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// TLS on an outbound connection (`proxy_pass https://…`).
#[derive(Clone)]
pub struct TlsConnect {
    /// From [`super::tls_client::client_config`]: verification on or off,
    /// trusted CAs, whether SNI is sent (`proxy_ssl_server_name`).
    pub config: Arc<rustls::ClientConfig>,
    /// The name the certificate is checked against and sent as SNI
    /// (`proxy_ssl_name`, by default the proxied host).
    pub name: rustls::pki_types::ServerName<'static>,
}

impl fmt::Debug for TlsConnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnect")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// One connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    pub addr: PeerAddr,
    /// ms for the connect and the TLS handshake together
    /// (`proxy_connect_timeout`, which nginx also applies to the handshake).
    pub timeout: u64,
    pub tls: Option<TlsConnect>,
    /// TCP_NODELAY once connected (nginx's `tcp_nodelay`, on by default).
    pub nodelay: bool,
}

impl ConnectOptions {
    pub fn new(addr: PeerAddr, timeout: u64) -> ConnectOptions {
        ConnectOptions {
            addr,
            timeout,
            tls: None,
            nodelay: true,
        }
    }
}

/// The handler of a connection until its connect (and handshake) is over;
/// then the caller's handler takes the slot and gets the first write event.
struct Connecting {
    user: Option<Box<dyn Handler>>,
    /// An error connect(2) returned at once, reported on the posted event.
    error: Option<io::Error>,
    tls: Option<TlsConnect>,
    handshaking: bool,
    nodelay: bool,
}

impl Handler for Connecting {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        let c = ev.conn;
        if ev.timedout {
            self.finish(core, c, None, true);
            return;
        }
        if !self.handshaking {
            if let Err(e) = self.error.take().map_or_else(|| core.test_connect(c), Err) {
                self.finish(core, c, Some(e), false);
                return;
            }
            if self.nodelay {
                if let Some(fd) = core.fd(c) {
                    // Not fatal: the connection works without it.
                    let _ = socket::set_nodelay(fd, true);
                }
            }
            if let Some(x) = core.pool.get_mut(c) {
                x.write.ready = true;
            }
            match self.tls.take() {
                Some(t) => {
                    if let Err(e) = core.start_client_tls(c, &t) {
                        self.finish(core, c, Some(e), false);
                        return;
                    }
                    self.handshaking = true;
                }
                None => {
                    self.finish(core, c, None, false);
                    return;
                }
            }
        }
        match core.client_handshake_step(c) {
            ClientStep::Done => self.finish(core, c, None, false),
            ClientStep::Again(want) => {
                if let Err(e) = core.set_interest(c, want) {
                    self.finish(core, c, Some(e), false);
                }
            }
            ClientStep::Failed(e) => self.finish(core, c, Some(e), false),
        }
    }
}

impl Connecting {
    /// Hands the connection to the caller's handler with its first event.
    fn finish(&mut self, core: &mut Core, c: ConnId, err: Option<io::Error>, timedout: bool) {
        let Some(user) = self.user.take() else {
            return;
        };
        if !timedout {
            core.del_timer(Ev::write(c));
        }
        let level = !core.actions.edge_triggered();
        let failed = err.is_some();
        if let Some(x) = core.pool.get_mut(c) {
            x.handler = Some(user);
            if failed {
                x.write.ready = false;
                x.write.error = true;
            }
        }
        if level && !timedout {
            // poll would report the writable socket on every wait; write
            // interest comes back when a send would block.
            let cur = core.pool.get(c).map_or(Interest::NONE, |x| x.registered);
            let _ = core.set_interest(c, cur.without(Interest::WRITE));
        }
        // Straight to the handler: the core's TLS write path would hold back
        // a write event the handler did not ask for.
        let Some(mut h) = core.pool.get_mut(c).and_then(|x| x.handler.take()) else {
            return;
        };
        core.connect_error = err.map(|e| (c, e));
        h.handle(
            core,
            Ev {
                conn: c,
                kind: EvKind::Write,
                timedout,
            },
        );
        core.connect_error = None;
        if let Some(x) = core.pool.get_mut(c) {
            if x.handler.is_none() {
                x.handler = Some(h);
            }
        }
    }
}

impl Core {
    /// Starts connecting (nginx's `ngx_event_connect_peer`). `h` is called
    /// with a write event once the outcome is known (see the module docs);
    /// an error here (no socket, no free slot) means nothing was started.
    /// An error connect(2) reports at once (ECONNREFUSED, EAGAIN on a full
    /// unix socket) is delivered to `h` like one found later.
    pub fn connect(&mut self, o: &ConnectOptions, h: Box<dyn Handler>) -> io::Result<ConnId> {
        let inet = match &o.addr {
            PeerAddr::Inet(a) => Some(a),
            PeerAddr::Unix(_) => None,
        };
        let fd = socket::stream_socket(inet)?;
        let c = self.get_connection(fd)?;
        self.stats.connected += 1;
        let started = match (&o.addr, self.pool.get(c).and_then(|x| x.fd())) {
            (PeerAddr::Inet(a), Some(fd)) => socket::connect_inet(fd, a),
            (PeerAddr::Unix(p), Some(fd)) => socket::connect_unix(fd, p),
            (_, None) => Err(io::ErrorKind::NotConnected.into()),
        };
        let (started, error) = match started {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(e)),
        };
        if let Some(x) = self.pool.get_mut(c) {
            x.outbound = true;
            x.handler = Some(Box::new(Connecting {
                user: Some(h),
                error,
                tls: o.tls.clone(),
                handshaking: false,
                nodelay: o.nodelay && inet.is_some(),
            }));
        }
        self.pool.outbound_n += 1;
        match started {
            Some(ConnectStart::Done) | Some(ConnectStart::InProgress) => {
                // Both directions in one registration, as nginx's
                // ngx_add_conn: the write event says the connect is over,
                // the read event is wanted for the response anyway.
                if let Err(e) = self.set_interest(c, Interest::BOTH) {
                    self.close(c);
                    return Err(e);
                }
                self.add_timer(Ev::write(c), o.timeout);
            }
            None => self.post(Ev::write(c)),
        }
        Ok(c)
    }

    /// The outcome of a connect, asked during the first event of a
    /// connection made by [`Core::connect`]: `Ok` when connected (and
    /// handshaken), or why not (taken: a second call says `Ok`; after that
    /// first event the error is gone, and `write.error` is what remains).
    pub fn connect_result(&mut self, c: ConnId) -> io::Result<()> {
        match self.connect_error.take() {
            Some((id, e)) if id == c => Err(e),
            other => {
                self.connect_error = other;
                Ok(())
            }
        }
    }

    /// Whether `c` was made by [`Core::connect`].
    pub fn is_outbound(&self, c: ConnId) -> bool {
        self.pool.get(c).is_some_and(|x| x.outbound)
    }

    /// Outbound connections in use (their slots count in
    /// `worker_connections` with the accepted ones).
    pub fn outbound_connections(&self) -> usize {
        self.pool.outbound_n
    }

    /// nginx's `ngx_http_upstream_test_connect`: the socket's pending error.
    fn test_connect(&mut self, c: ConnId) -> io::Result<()> {
        let x = self
            .pool
            .get_mut(c)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
        let fd =
            x.fd.as_ref()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
        socket::take_error(fd.as_fd())
    }
}
