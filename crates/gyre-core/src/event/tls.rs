//! TLS as a connection layer (nginx's `ngx_event_openssl`): a sans-I/O rustls
//! connection driven by the core's own socket calls, switched on per listener.
//!
//! This module owns the handshake (the first handler of a connection accepted
//! on a TLS listener), the record layer under [`Core::recv`] / [`Core::send`]
//! / [`Core::writev`] / [`Core::sendfile`] once the handshake is done, and the
//! close (close_notify, flushed in the background like nginx's
//! `ngx_ssl_shutdown` when the socket is full). It knows nothing of the
//! protocol above: the listener's [`Protocol::init_connection`] is called once
//! the handshake has finished, exactly as for a plain connection.
//!
//! What a protocol sees is what it sees on a plain socket: `read.ready` means
//! "a recv may make progress" (true while decrypted bytes wait in the TLS
//! layer), a record that needs more bytes is `WouldBlock`, and a short write
//! clears `write.ready`. Ciphertext that the socket could not take yet stays
//! in the TLS layer and keeps write interest registered by the core itself;
//! the protocol's write handler is called again only if it saw the short
//! write. Kernel TLS is not used (not available on the target machines), so
//! a file is read and encrypted.
//!
//! Server connections run on rustls's unbuffered API (src/event/tls_record.rs
//! holds their buffers); client connections made by [`Core::connect`] keep
//! the buffered `ClientConnection` and its record code in
//! src/event/tls_client.rs, reached from the same entry points here.
//!
//! [`Protocol::init_connection`]: crate::conn::Protocol::init_connection

use std::io::{self, IoSlice, Write};
use std::os::fd::BorrowedFd;
use std::rc::Rc;
use std::sync::Arc;

pub use rustls;
use rustls::server::{ClientHello, ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::WriteTraffic;
use rustls::ServerConfig;

use super::actions::Interest;
use super::core::{Core, Ev, EvKind, Handler};
pub(crate) use super::tls_record::Tls;
use super::tls_record::{encrypt_with, Flush, Next};
use crate::conn::pool::ConnId;
use crate::errlog::{ERROR, INFO};
use crate::sys::socket;

/// nginx's `ngx_ssl_shutdown` waits this long for close_notify to go out.
const SHUTDOWN_TIMEOUT_MS: u64 = 3000;

/// The most plaintext encrypted per call (four full records): bounds the
/// ciphertext held for one connection and the bytes read from a file.
const WRITE_CHUNK: usize = 4 * 16 * 1024;

/// Picks the configuration of a handshake from the client's hello: the
/// server block chosen by SNI (its certificates, protocols, client
/// verification). Certificates within one configuration can still be
/// chosen per handshake by the configuration's own `cert_resolver` (RSA or
/// ECDSA by the client's signature schemes).
pub trait ChooseConfig {
    /// An error refuses the handshake; its text is logged (at error level:
    /// it is the server's configuration that is lacking) followed by
    /// "while SSL handshaking".
    fn choose(&self, hello: &ClientHello<'_>) -> Result<Arc<ServerConfig>, String>;
}

/// One configuration for every client.
impl ChooseConfig for Arc<ServerConfig> {
    fn choose(&self, _hello: &ClientHello<'_>) -> Result<Arc<ServerConfig>, String> {
        Ok(self.clone())
    }
}

/// TLS on a listener (nginx's `listen ... ssl`).
#[derive(Clone)]
pub struct TlsListen {
    pub config: Rc<dyn ChooseConfig>,
    /// How long the handshake may take (nginx uses `client_header_timeout`).
    pub handshake_timeout: u64,
    /// When the first byte is not a TLS record, hand the connection to the
    /// protocol as plain text (marked [`Core::is_plain_on_tls`]) instead of
    /// failing the handshake: how HTTP answers "The plain HTTP request was
    /// sent to HTTPS port".
    pub plain_fallback: bool,
}

/// What a finished handshake negotiated, kept with the connection so a
/// protocol can read it without asking rustls (`$ssl_protocol`,
/// `$ssl_cipher`, `$ssl_server_name`, `$ssl_session_reused`, `$scheme`).
#[derive(Clone, Debug)]
pub struct TlsInfo {
    pub version: rustls::ProtocolVersion,
    pub suite: rustls::CipherSuite,
    /// The SNI host name the client sent.
    pub server_name: Option<Box<str>>,
    /// The session was resumed (ticket or session id).
    pub resumed: bool,
    pub alpn: Option<Box<[u8]>>,
    /// The client presented a certificate (checked by the protocol's
    /// verifier: see `client_verify`).
    pub client_verified: bool,
    /// The client's certificates, leaf first (empty without one).
    pub client_certs: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// The verdict on them (nginx's `SSL_get_verify_result`), reached once
    /// per connection by the protocol, which knows the trusted CAs: the
    /// handshake takes any certificate whose key the client proves it
    /// holds, as OpenSSL does under nginx's `ssl_verify_client`, so a bad
    /// certificate gets nginx's answer rather than a failed handshake.
    pub client_verify: std::cell::OnceCell<ClientVerify>,
}

/// nginx's `$ssl_client_verify` for a client that sent a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientVerify {
    Success,
    /// OpenSSL's `N:reason` (`20:unable to get local issuer certificate`).
    Failed(Box<str>),
}

impl TlsInfo {
    /// nginx's `$ssl_protocol`: `TLSv1.2`, `TLSv1.3`.
    pub fn protocol_name(&self) -> &'static str {
        match self.version {
            rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
            rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
            _ => "unknown",
        }
    }
}

struct SockWriter<'a>(BorrowedFd<'a>);

impl Write for SockWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        socket::send(self.0, buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn broken() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "connection closed")
}

/// rustls's error as an I/O error for the protocol (it is logged where it
/// matters: during the handshake).
pub(super) fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Where a connection is, for log lines: nginx's `*N` and, after the
/// message, `while SSL handshaking, client: ADDR, server: ADDR` (the
/// listener's address: no request, so no server name, exists yet).
#[derive(Clone, Copy)]
pub(crate) struct LogCtx {
    number: u64,
    client: Option<std::net::SocketAddr>,
    server: Option<std::net::SocketAddr>,
}

impl crate::errlog::LogContext for LogCtx {
    fn number(&self) -> u64 {
        self.number
    }
    fn action(&self) -> Option<&str> {
        Some("SSL handshaking")
    }
    fn context(&self, f: &mut dyn std::fmt::Write) -> std::fmt::Result {
        f.write_str(", client: ")?;
        if let Some(c) = self.client {
            write!(f, "{}", c.ip())?;
        }
        f.write_str(", server: ")?;
        if let Some(s) = self.server {
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// The handshake: the first handler of a connection on a TLS listener
/// (nginx's `ngx_http_ssl_handshake` + `ngx_ssl_handshake`).
pub(crate) struct Handshake {
    pub(crate) ls: usize,
    /// The first byte has been looked at (for `plain_fallback`).
    peeked: bool,
}

enum Step {
    Done,
    Again,
    Plain,
    Failed,
}

impl Handler for Handshake {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        let c = ev.conn;
        if ev.timedout {
            crate::log_ctx!(
                INFO,
                &core.log_ctx(c),
                "client timed out (110: Connection timed out)"
            );
            core.close(c);
            return;
        }
        if core.conn(c).is_some_and(|x| x.close) {
            // Drained (slots ran short) or the worker is shutting down.
            core.close(c);
            return;
        }
        match core.handshake_step(c, self) {
            Step::Again => {
                let want_write = core.tls_mut(c).is_some_and(|t| t.pending_out());
                let want = if want_write {
                    Interest::READ.with(Interest::WRITE)
                } else {
                    Interest::READ
                };
                if core.set_interest(c, want).is_err() {
                    core.close(c);
                }
            }
            Step::Failed => core.close(c),
            Step::Plain => {
                core.del_timer(Ev::read(c));
                core.set_reusable(c, false);
                if let Some(x) = core.pool.get_mut(c) {
                    x.tls = None;
                    x.plain_on_tls = true;
                    x.read.ready = true;
                }
                core.init_protocol(crate::conn::ListenerId(self.ls), c);
            }
            Step::Done => {
                core.del_timer(Ev::read(c));
                core.set_reusable(c, false);
                if let Some(x) = core.pool.get_mut(c) {
                    // The client's first data may have come with its Finished
                    // and already be decrypted; the protocol reads at once.
                    x.read.ready = true;
                }
                core.init_protocol(crate::conn::ListenerId(self.ls), c);
            }
        }
    }
}

/// Flushes close_notify after a close whose ciphertext the socket could not
/// take at once (nginx's `ngx_ssl_shutdown_handler`); the slot has a new
/// generation, so the protocol's id for it is already stale. Once all is
/// out it sends FIN and waits for the peer's, reading and dropping what the
/// peer still sends: closing a socket with unread input makes the kernel
/// reset the connection, which would destroy the very output this waits to
/// deliver. The timer (3 s) bounds it all.
struct Shutdown {
    fin_sent: bool,
}

impl Handler for Shutdown {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        use std::os::fd::AsFd;
        let c = ev.conn;
        if ev.timedout {
            core.close(c);
            return;
        }
        let Some(x) = core.pool.get_mut(c) else {
            return;
        };
        let (Some(t), Some(fd)) = (x.tls.as_deref_mut(), x.fd.as_ref()) else {
            core.close(c);
            return;
        };
        let fd = fd.as_fd();
        if ev.kind == EvKind::Read {
            let mut sink = [0u8; 16 * 1024];
            // Bounded: a peer that keeps sending gets a turn per event.
            for _ in 0..16 {
                match socket::recv(fd, &mut sink) {
                    Ok(0) => {
                        // The peer finished (or left before taking it all):
                        // nothing more can be delivered.
                        core.close(c);
                        return;
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        core.close(c);
                        return;
                    }
                }
            }
            return;
        }
        match t.flush(fd) {
            Ok(Flush::Blocked) => {}
            Ok(Flush::Done) if !self.fin_sent => {
                self.fin_sent = true;
                if socket::shutdown_write(fd).is_err() {
                    core.close(c);
                }
            }
            Ok(Flush::Done) => {}
            Err(_) => core.close(c),
        }
    }
}

impl Core {
    /// Puts TLS on a registered listener (`None` turns it off): connections
    /// it accepts from now on handshake first.
    pub fn set_listener_tls(&mut self, ls: crate::conn::ListenerId, tls: Option<TlsListen>) {
        if let Some(s) = self.listeners.get_mut(ls.0) {
            s.tls = tls;
        }
    }

    /// Whether `c` speaks TLS (handshake finished or not).
    pub fn is_tls(&self, c: ConnId) -> bool {
        self.pool.get(c).is_some_and(|x| x.tls.is_some())
    }

    /// What the handshake negotiated, once it is done.
    pub fn tls_info(&self, c: ConnId) -> Option<&TlsInfo> {
        self.pool.get(c)?.tls.as_ref()?.info.as_deref()
    }

    /// [`Core::tls_info`] shared (a request keeps it for its variables).
    pub fn tls_info_rc(&self, c: ConnId) -> Option<Rc<TlsInfo>> {
        self.pool.get(c)?.tls.as_ref()?.info.clone()
    }

    /// The certificates the client presented (mTLS), leaf first.
    pub fn tls_peer_certificates(
        &self,
        c: ConnId,
    ) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        let tls = self.pool.get(c)?.tls.as_deref()?;
        match (&tls.conn, &tls.client) {
            (Some(s), _) => s.peer_certificates(),
            (None, Some(cc)) => cc.peer_certificates(),
            (None, None) => None,
        }
    }

    /// The connection came on a TLS listener but its client spoke plain text
    /// (only with [`TlsListen::plain_fallback`]).
    pub fn is_plain_on_tls(&self, c: ConnId) -> bool {
        self.pool.get(c).is_some_and(|x| x.plain_on_tls)
    }

    fn tls_mut(&mut self, c: ConnId) -> Option<&mut Tls> {
        self.pool.get_mut(c)?.tls.as_deref_mut()
    }

    /// ", client: ADDR, server: ADDR" for log lines, as nginx appends;
    /// formatted only if a line is written.
    pub(crate) fn log_ctx(&self, c: ConnId) -> LogCtx {
        let x = self.pool.get(c);
        LogCtx {
            number: x.map_or(0, |x| x.number),
            client: x.and_then(|x| x.peer),
            server: x
                .and_then(|x| x.listener)
                .and_then(|l| self.listeners.get(l))
                .map(|s| s.addr),
        }
    }

    /// Called by the accept path: a connection on a TLS listener gets the
    /// TLS state and the handshake handler, with its deadline.
    pub(crate) fn start_tls(&mut self, ls: usize, c: ConnId, timeout: u64) {
        if let Some(x) = self.pool.get_mut(c) {
            // The layer writes whole records, several per flight (the
            // server's Finished, its ChangeCipherSpec, a ticket): with
            // Nagle on, the later ones waited for the client's delayed ACK,
            // 40 ms per handshake on loopback (s_time: 20 handshakes/s of
            // wall time). OpenSSL avoids it by buffering a whole flight.
            if let Some(fd) = x.fd() {
                let _ = crate::sys::socket::set_nodelay(fd, true);
            }
            x.tls = Some(Box::new(Tls::new()));
            // Clients speak first: try the ClientHello at once.
            x.read.ready = true;
            x.handler = Some(Box::new(Handshake { ls, peeked: false }));
        }
        self.add_timer(Ev::read(c), timeout);
        // As nginx: a connection still handshaking may be closed when slots
        // run short (a flood of idle handshakes cannot starve real clients).
        self.set_reusable(c, true);
        if self.accept_mutex_held {
            self.post(Ev::read(c));
        } else {
            self.call(c, EvKind::Read, false);
        }
    }

    fn tls_listen(&self, ls: usize) -> Option<&TlsListen> {
        self.listeners.get(ls)?.tls.as_ref()
    }

    /// Drives the handshake as far as the socket allows.
    fn handshake_step(&mut self, c: ConnId, hs: &mut Handshake) -> Step {
        let Some(cfg) = self.tls_listen(hs.ls).cloned() else {
            return Step::Failed;
        };
        let rdhup = self.actions.reports_rdhup();
        // Bounded: each pass makes progress on the socket or returns.
        for _ in 0..64 {
            let ctx = self.log_ctx(c);
            let Some(x) = self.pool.get_mut(c) else {
                return Step::Failed;
            };
            use std::os::fd::AsFd;
            let Some(fd) = x.fd.as_ref().map(|f| f.as_fd()) else {
                return Step::Failed;
            };
            let Some(tls) = x.tls.as_deref_mut() else {
                return Step::Failed;
            };
            if cfg.plain_fallback && !hs.peeked {
                let mut b = [0u8; 1];
                match socket::peek(fd, &mut b) {
                    Ok(0) => return Step::Failed,
                    Ok(_) => {
                        hs.peeked = true;
                        // 0x16: a TLS handshake record; high bit: SSLv2 hello.
                        if b[0] != 0x16 && b[0] & 0x80 == 0 {
                            return Step::Plain;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        x.read.ready = false;
                        return Step::Again;
                    }
                    Err(_) => return Step::Failed,
                }
            }
            if tls.hello.is_none() {
                let established = tls.conn.as_ref().is_some_and(|k| !k.is_handshaking());
                if !established {
                    let mut got = 0;
                    match tls.step(&mut [], &mut got, None) {
                        // More to process or encode: the messages of one
                        // flight gather in the output buffer and go out in
                        // one send below. Sent one by one, the later ones
                        // waited behind Nagle for the client's delayed ACK
                        // (40 ms per handshake on loopback).
                        Ok(Next::Progress) => continue,
                        // Writable before the client's Finished, or
                        // waiting for its next flight: send, then read.
                        Ok(Next::NeedData) | Ok(Next::Writable) => {}
                        Ok(Next::PeerClosed) => {
                            crate::log_ctx!(INFO, &ctx, "peer closed connection in SSL handshake");
                            return Step::Failed;
                        }
                        Err(e) => {
                            // The alert rustls queued goes out best-effort.
                            tls.encode_alert();
                            let _ = tls.flush(fd);
                            crate::log_ctx!(INFO, &ctx, "SSL_do_handshake() failed (SSL: {e})");
                            return Step::Failed;
                        }
                    }
                }
                match tls.flush(fd) {
                    Ok(Flush::Done) => {}
                    Ok(Flush::Blocked) => {
                        x.write.ready = false;
                        return Step::Again;
                    }
                    Err(_) => return Step::Failed,
                }
                if established {
                    tls.info = tls
                        .conn
                        .as_deref()
                        .map(|k| Rc::new(info_of(k, tls.sni.clone())));
                    tls.release_idle(&mut self.tls_spare);
                    return Step::Done;
                }
            }
            if !x.read.ready {
                return Step::Again;
            }
            let before = tls.in_used;
            match tls.read_sock(fd, &mut self.tls_spare) {
                Ok((0, _)) => {
                    crate::log_ctx!(INFO, &ctx, "peer closed connection in SSL handshake");
                    return Step::Failed;
                }
                Ok((_, short)) => {
                    if short && rdhup && !x.read.pending_eof {
                        x.read.ready = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    x.read.ready = false;
                    return Step::Again;
                }
                Err(e) if e.raw_os_error().is_some() => {
                    crate::log_ctx!(
                        INFO,
                        &ctx,
                        "peer closed connection in SSL handshake ({})",
                        crate::sys_error_text(&e)
                    );
                    return Step::Failed;
                }
                Err(e) => {
                    crate::log_ctx!(INFO, &ctx, "SSL_do_handshake() failed (SSL: {e})");
                    return Step::Failed;
                }
            }
            let Some(acc) = tls.hello.as_deref_mut() else {
                continue;
            };
            // The acceptor reads a copy: the connection made for the chosen
            // configuration reads the ClientHello again from `inb`.
            let mut fresh = &tls.inb[before..tls.in_used];
            // Bounded: every pass consumes bytes or stops.
            while !fresh.is_empty() {
                match acc.read_tls(&mut fresh) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => {
                        crate::log_ctx!(INFO, &ctx, "SSL_do_handshake() failed (SSL: {e})");
                        return Step::Failed;
                    }
                }
            }
            match acc.accept() {
                Ok(None) => continue,
                Ok(Some(accepted)) => {
                    let hello = accepted.client_hello();
                    let sc = match cfg.config.choose(&hello) {
                        Ok(sc) => sc,
                        Err(reason) => {
                            crate::log_ctx!(ERROR, &ctx, "{reason}");
                            return Step::Failed;
                        }
                    };
                    tls.sni = hello.server_name().map(Into::into);
                    drop(accepted);
                    match UnbufferedServerConnection::new(sc) {
                        Ok(conn) => {
                            tls.conn = Some(Box::new(conn));
                            tls.hello = None;
                        }
                        Err(e) => {
                            crate::log_ctx!(INFO, &ctx, "SSL_do_handshake() failed (SSL: {e})");
                            return Step::Failed;
                        }
                    }
                }
                Err((e, mut alert)) => {
                    let _ = alert.write(&mut SockWriter(fd));
                    crate::log_ctx!(INFO, &ctx, "SSL_do_handshake() failed (SSL: {e})");
                    return Step::Failed;
                }
            }
        }
        // Not finished in 64 passes (a client feeding a byte at a time while
        // the socket stays ready): give the others a turn.
        self.post(Ev::read(c));
        Step::Again
    }

    /// The listener's protocol takes over `c` (after the handshake).
    fn init_protocol(&mut self, ls: crate::conn::ListenerId, c: ConnId) {
        self.init_connection_plain(ls, c);
    }

    fn set_interest_of(&mut self, c: ConnId, want: Interest) -> io::Result<()> {
        let cur = self
            .pool
            .get(c)
            .map(|x| x.registered)
            .unwrap_or(Interest::NONE);
        self.set_interest(c, cur.with(want))
    }

    // ------------------------------------------------------------ record layer

    /// [`Core::recv`] on a TLS connection.
    pub(crate) fn tls_recv(&mut self, c: ConnId, buf: &mut [u8]) -> io::Result<usize> {
        let rdhup = self.actions.reports_rdhup();
        let x = self.pool.get_mut(c).ok_or_else(broken)?;
        use std::os::fd::AsFd;
        let fd = x.fd.as_ref().map(|f| f.as_fd()).ok_or_else(broken)?;
        let tls = x.tls.as_deref_mut().ok_or_else(broken)?;
        if let Some(cc) = tls.client.as_deref_mut() {
            let plain = &mut tls.plain_pending;
            return super::tls_client::client_recv(
                cc,
                plain,
                &mut tls.sock_eof,
                &mut tls.closed,
                fd,
                &mut x.read,
                rdhup,
                buf,
            );
        }
        if tls.conn.is_none() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let rev = &mut x.read;
        if buf.is_empty() {
            return Ok(0);
        }
        // Bounded: each pass takes plaintext, steps rustls or reads the socket.
        for _ in 0..64 {
            if tls.pending_plain() {
                let n = tls.take_plain(buf);
                if tls.pending_plain() || tls.in_used > 0 {
                    rev.ready = true;
                }
                return Ok(n);
            }
            if tls.peer_closed {
                // close_notify.
                rev.ready = false;
                rev.eof = true;
                return Ok(0);
            }
            let mut got = 0;
            match tls.step(buf, &mut got, None) {
                Ok(Next::Progress) => {
                    if tls.pending_out() {
                        // A record whose answer is ours to send (a key update).
                        let _ = tls.flush(fd);
                    }
                    if got > 0 {
                        if tls.pending_plain() || tls.in_used > 0 {
                            rev.ready = true;
                        }
                        // Often the last read before the connection waits.
                        tls.release_idle(&mut self.tls_spare);
                        return Ok(got);
                    }
                    continue;
                }
                Ok(Next::PeerClosed) => {
                    tls.peer_closed = true;
                    continue;
                }
                Ok(Next::NeedData) | Ok(Next::Writable) => {}
                Err(e) => {
                    tls.encode_alert();
                    let _ = tls.flush(fd);
                    tls.closed = true;
                    rev.ready = false;
                    rev.error = true;
                    return Err(tls_error(e));
                }
            }
            if tls.sock_eof {
                // The peer closed without close_notify: an end of stream as
                // any other (nginx ignores unexpected EOF).
                rev.ready = false;
                rev.eof = true;
                return Ok(0);
            }
            if !rev.ready {
                tls.release_idle(&mut self.tls_spare);
                return Err(io::ErrorKind::WouldBlock.into());
            }
            match tls.read_sock(fd, &mut self.tls_spare) {
                Ok((0, _)) => tls.sock_eof = true,
                Ok((_, short)) => {
                    if short && rdhup && !rev.pending_eof {
                        rev.ready = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    rev.ready = false;
                    tls.release_idle(&mut self.tls_spare);
                    return Err(e);
                }
                Err(e) => {
                    rev.ready = false;
                    rev.error = true;
                    return Err(e);
                }
            }
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// [`Core::send`] / [`Core::writev`] on a TLS connection: encrypts what
    /// the TLS layer takes (up to [`WRITE_CHUNK`] beyond what is pending) and
    /// writes it. Returns the plaintext taken.
    pub(crate) fn tls_send(&mut self, c: ConnId, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        let mut blocked = false;
        let mut taken = 0usize;
        let mut plain_waits = false;
        let r = {
            let x = self.pool.get_mut(c).ok_or_else(broken)?;
            use std::os::fd::AsFd;
            let fd = x.fd.as_ref().map(|f| f.as_fd()).ok_or_else(broken)?;
            let tls = x.tls.as_deref_mut().ok_or_else(broken)?;
            if tls.closed {
                x.write.error = true;
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "TLS closed"));
            }
            (|| -> io::Result<()> {
                if tls.flush(fd)? == Flush::Blocked {
                    blocked = true;
                    return Ok(());
                }
                if let Some(cc) = tls.client.as_deref_mut() {
                    taken = super::tls_client::client_write(cc, bufs, WRITE_CHUNK)?;
                    if tls.flush(fd)? == Flush::Blocked {
                        blocked = true;
                    }
                    return Ok(());
                }
                if tls.conn.is_none() {
                    return Err(broken());
                }
                let mut enc = |w: &mut WriteTraffic<'_, ServerConnectionData>,
                               out: &mut Vec<u8>|
                 -> io::Result<()> {
                    // Bounded by WRITE_CHUNK per call.
                    for b in bufs {
                        if taken >= WRITE_CHUNK {
                            break;
                        }
                        let b = &b[..b.len().min(WRITE_CHUNK - taken)];
                        if b.is_empty() {
                            continue;
                        }
                        // Per record: header, content type, tag, explicit nonce.
                        let guess = b.len() + (b.len() / (16 * 1024) + 1) * 40;
                        encrypt_with(out, guess, |o| w.encrypt(b, o))?;
                        taken += b.len();
                    }
                    Ok(())
                };
                let mut got = 0;
                // Bounded: records buffered before the write are decrypted
                // and kept for the protocol's next read.
                for _ in 0..8 {
                    match tls.step(&mut [], &mut got, Some(&mut enc)) {
                        Ok(Next::Progress) | Ok(Next::PeerClosed) => {}
                        Ok(_) => break,
                        Err(e) => {
                            tls.closed = true;
                            return Err(tls_error(e));
                        }
                    }
                }
                plain_waits = tls.pending_plain();
                if tls.flush(fd)? == Flush::Blocked {
                    blocked = true;
                }
                Ok(())
            })()
        };
        let x = self.pool.get_mut(c).ok_or_else(broken)?;
        if plain_waits {
            x.read.ready = true;
        }
        let wev = &mut x.write;
        if let Err(e) = r {
            wev.ready = false;
            wev.error = true;
            return Err(e);
        }
        if taken < want {
            // The protocol sees a short write (or EAGAIN) and waits for the
            // write event, as on a full socket.
            wev.ready = false;
            if let Some(t) = x.tls.as_deref_mut() {
                t.proto_wants_write = true;
            }
        }
        if blocked {
            // Pending ciphertext keeps write interest, whatever the protocol
            // does next.
            self.set_interest_of(c, Interest::WRITE)?;
        }
        if taken == 0 && want > 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(taken)
    }

    /// [`Core::sendfile`] on a TLS connection: reads the file and encrypts.
    pub(crate) fn tls_sendfile(
        &mut self,
        c: ConnId,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        let mut buf = std::mem::take(&mut self.tls_scratch);
        buf.resize(count.min(WRITE_CHUNK), 0);
        let r = (|| {
            let n = socket::pread(file, &mut buf, *offset)?;
            if n == 0 {
                return Ok(0);
            }
            let sent = self.tls_send(c, &[IoSlice::new(&buf[..n])])?;
            if sent < count && sent == n {
                // Everything read went out: not a short write for the
                // protocol (it asked for more than one chunk).
                if let Some(x) = self.pool.get_mut(c) {
                    let blocked = x.tls.as_deref().is_some_and(|t| t.pending_out());
                    if !blocked {
                        x.write.ready = true;
                        if let Some(t) = x.tls.as_deref_mut() {
                            t.proto_wants_write = false;
                        }
                    }
                }
            }
            *offset += sent as u64;
            Ok(sent)
        })();
        buf.clear();
        self.tls_scratch = buf;
        r
    }

    /// Called before a connection's write handler runs on a write event:
    /// pushes pending ciphertext first. Returns whether the protocol's
    /// handler should run (it saw a short write and the socket has room).
    pub(crate) fn tls_before_write_handler(&mut self, c: ConnId) -> bool {
        let edge = self.actions.edge_triggered();
        let Some(x) = self.pool.get_mut(c) else {
            return false;
        };
        use std::os::fd::AsFd;
        let Some(fd) = x.fd.as_ref().map(|f| f.as_fd()) else {
            return true;
        };
        let Some(tls) = x.tls.as_deref_mut() else {
            return true;
        };
        if tls.hello.is_some() || tls.info.is_none() || tls.lingering {
            // Handshaking, or closing: those handlers flush for themselves.
            return true;
        }
        match tls.flush(fd) {
            Ok(Flush::Blocked) => {
                x.write.ready = false;
                false
            }
            Ok(Flush::Done) => {
                if tls.proto_wants_write {
                    tls.proto_wants_write = false;
                    return true;
                }
                // Nothing the protocol waits for: a level-triggered module
                // would report the writable socket forever.
                if !edge {
                    let cur = x.registered;
                    let _ = self.set_interest(c, cur.without(Interest::WRITE));
                }
                false
            }
            Err(_) => {
                x.write.error = true;
                true
            }
        }
    }

    /// [`Core::shutdown_write`] on a TLS connection: close_notify, then FIN
    /// once it is out.
    pub(crate) fn tls_shutdown_write(&mut self, c: ConnId) -> io::Result<()> {
        let x = self.pool.get_mut(c).ok_or_else(broken)?;
        use std::os::fd::AsFd;
        let fd = x.fd.as_ref().map(|f| f.as_fd()).ok_or_else(broken)?;
        let Some(tls) = x.tls.as_deref_mut() else {
            return socket::shutdown_write(fd);
        };
        if !tls.closed {
            tls.closed = true;
            tls.queue_close_notify();
        }
        match tls.flush(fd)? {
            Flush::Done => socket::shutdown_write(fd),
            Flush::Blocked => {
                x.write.ready = false;
                self.set_interest_of(c, Interest::WRITE)
            }
        }
    }

    /// Part of [`Core::close`]: sends close_notify after an established
    /// session. Returns the id to close now, or `None` when the ciphertext
    /// could not all go out and the slot now flushes it in the background
    /// under a new generation (so `c` is stale for its protocol at once).
    pub(crate) fn tls_close(&mut self, c: ConnId) -> Option<ConnId> {
        let x = self.pool.get_mut(c)?;
        use std::os::fd::AsFd;
        let fd = x.fd.as_ref().map(|f| f.as_fd())?;
        let Some(tls) = x.tls.as_deref_mut() else {
            return Some(c);
        };
        if tls.info.is_none() || tls.lingering || x.write.error || x.read.error {
            return Some(c);
        }
        if !tls.closed {
            tls.closed = true;
            tls.queue_close_notify();
        }
        match tls.flush(fd) {
            Ok(Flush::Blocked) => tls.lingering = true,
            _ => return Some(c),
        }
        // Linger: the protocol's handler and timers go, the slot stays.
        self.stats.tls_lingered += 1;
        self.del_timer(Ev::read(c));
        self.del_timer(Ev::write(c));
        self.delete_posted(Ev::read(c));
        self.delete_posted(Ev::write(c));
        self.set_reusable(c, false);
        let n = self.pool.renew(c)?;
        let token = n.token();
        let x = self.pool.get_mut(n)?;
        x.handler = Some(Box::new(Shutdown { fin_sent: false }));
        x.idle = false;
        let fd = x.fd.as_ref()?.as_fd();
        let trigger = if self.actions.edge_triggered() {
            super::actions::Trigger::Edge
        } else {
            super::actions::Trigger::Level
        };
        let both = Interest::READ.with(Interest::WRITE);
        let r = if x.in_backend {
            self.actions.modify(fd, token, both, trigger)
        } else {
            self.actions.add(fd, token, both, trigger)
        };
        let x = self.pool.get_mut(n)?;
        match r {
            Ok(()) => {
                x.in_backend = true;
                x.registered = both;
                x.read.active = true;
                x.write.active = true;
                x.write.ready = false;
            }
            Err(_) => return Some(n),
        }
        self.add_timer(Ev::write(n), SHUTDOWN_TIMEOUT_MS);
        None
    }
}

fn info_of(conn: &UnbufferedServerConnection, server_name: Option<Box<str>>) -> TlsInfo {
    TlsInfo {
        version: conn
            .protocol_version()
            .unwrap_or(rustls::ProtocolVersion::Unknown(0)),
        suite: conn
            .negotiated_cipher_suite()
            .map_or(rustls::CipherSuite::Unknown(0), |s| s.suite()),
        server_name,
        resumed: matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
        alpn: conn.alpn_protocol().map(Into::into),
        client_verified: conn.peer_certificates().is_some_and(|c| !c.is_empty()),
        client_certs: conn
            .peer_certificates()
            .map(<[_]>::to_vec)
            .unwrap_or_default(),
        client_verify: std::cell::OnceCell::new(),
    }
}
