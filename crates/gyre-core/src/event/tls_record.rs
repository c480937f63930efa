//! A connection's TLS state on rustls's unbuffered API: the caller owns the
//! ciphertext and plaintext buffers, so they exist only while they hold
//! bytes. rustls's buffered `ServerConnection` keeps a 4 KiB record buffer
//! for the life of a connection; here an idle keep-alive connection holds no
//! buffer at all (nginx gets the same with `SSL_MODE_RELEASE_BUFFERS`).
//!
//! This module owns the buffers and one step of the record machine
//! ([`Tls::step`]); the socket calls, the handshake and the core's ready
//! flags are `tls.rs`'s.
//!
//! Client connections made by [`Core::connect`](super::Core::connect) stay
//! on rustls's buffered `ClientConnection` (src/event/tls_client.rs): they
//! are few per worker (upstream keep-alive), so their record buffer is not
//! worth a second unbuffered state machine. [`Tls::flush`],
//! [`Tls::pending_out`] and [`Tls::queue_close_notify`] serve both sides.

use std::io;
use std::os::fd::BorrowedFd;

use rustls::server::{Acceptor, ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, WriteTraffic};

use super::tls::TlsInfo;
use crate::sys::socket;

/// The largest TLS record on the wire (16 KiB + 2 KiB expansion + header).
const MAX_RECORD: usize = 16 * 1024 + 2048 + 5;

/// Ciphertext held while a handshake message is joined across records
/// (rustls limits handshake messages to 64 KiB) plus one record: more is
/// refused, so a peer cannot make a connection grow without bound.
pub(crate) const MAX_IN: usize = 0x10000 + MAX_RECORD;

/// Room made for one socket read.
const READ_ROOM: usize = 16 * 1024;

/// A connection's TLS state, owned by its pool slot.
pub(crate) struct Tls {
    /// Reading the ClientHello (before a configuration is chosen); it is
    /// fed a copy of `inb`, which the connection then reads from the start.
    pub(crate) hello: Option<Box<Acceptor>>,
    /// Handshaking or established (`None` while in `hello`, and on a
    /// client connection).
    pub(crate) conn: Option<Box<UnbufferedServerConnection>>,
    /// The client side of an outbound connection (buffered API: rustls
    /// holds its ciphertext and plaintext; `hello` and `conn` are `None`).
    pub(crate) client: Option<Box<rustls::ClientConnection>>,
    /// Client connections: decrypted bytes rustls holds for the protocol.
    pub(crate) plain_pending: usize,
    /// Ciphertext read from the socket, `in_used` bytes of it filled.
    pub(crate) inb: Vec<u8>,
    pub(crate) in_used: usize,
    /// Decrypted bytes not yet read by the protocol, from `plain_off`.
    plain: Vec<u8>,
    plain_off: usize,
    /// Ciphertext waiting for the socket, from `out_off`.
    out: Vec<u8>,
    out_off: usize,
    /// The SNI name of the ClientHello.
    pub(crate) sni: Option<Box<str>>,
    pub(crate) info: Option<std::rc::Rc<TlsInfo>>,
    /// The socket reported end of stream.
    pub(crate) sock_eof: bool,
    /// The peer's close_notify arrived.
    pub(crate) peer_closed: bool,
    /// The protocol saw a short write: call its write handler once the
    /// pending ciphertext is out.
    pub(crate) proto_wants_write: bool,
    /// A fatal alert or close_notify was queued: no more application data.
    pub(crate) closed: bool,
    /// Closed by its protocol, flushing close_notify in the background.
    pub(crate) lingering: bool,
}

/// Where one [`Tls::step`] stopped.
pub(crate) enum Next {
    /// Something happened (a record decrypted, a message encoded): step again.
    Progress,
    /// The handshake needs more ciphertext.
    NeedData,
    /// Established and nothing buffered to decrypt (the write callback ran).
    Writable,
    /// The peer's close_notify.
    PeerClosed,
}

/// Result of pushing ciphertext to the socket.
#[derive(PartialEq, Eq)]
pub(crate) enum Flush {
    Done,
    Blocked,
}

/// What [`Tls::step`] does once the connection may send application data.
pub(crate) type OnWritable<'a> =
    &'a mut dyn FnMut(&mut WriteTraffic<'_, ServerConnectionData>, &mut Vec<u8>) -> io::Result<()>;

impl Tls {
    pub(crate) fn new() -> Tls {
        Tls {
            hello: Some(Box::default()),
            ..Tls::empty()
        }
    }

    fn empty() -> Tls {
        Tls {
            hello: None,
            conn: None,
            client: None,
            plain_pending: 0,
            inb: Vec::new(),
            in_used: 0,
            plain: Vec::new(),
            plain_off: 0,
            out: Vec::new(),
            out_off: 0,
            sni: None,
            info: None,
            sock_eof: false,
            peer_closed: false,
            proto_wants_write: false,
            closed: false,
            lingering: false,
        }
    }

    /// The client side of a connection made by
    /// [`Core::connect`](super::Core::connect).
    pub(crate) fn client(conn: rustls::ClientConnection) -> Tls {
        Tls {
            client: Some(Box::new(conn)),
            ..Tls::empty()
        }
    }

    /// Ciphertext waiting for the socket.
    pub(crate) fn pending_out(&self) -> bool {
        self.out_off < self.out.len() || self.client.as_ref().is_some_and(|c| c.wants_write())
    }

    /// Decrypted bytes waiting for the protocol.
    pub(crate) fn pending_plain(&self) -> bool {
        self.plain_off < self.plain.len()
    }

    /// Copies waiting plaintext into `buf`; the buffer goes once drained.
    pub(crate) fn take_plain(&mut self, buf: &mut [u8]) -> usize {
        let src = &self.plain[self.plain_off..];
        let n = src.len().min(buf.len());
        buf[..n].copy_from_slice(&src[..n]);
        self.plain_off += n;
        if self.plain_off >= self.plain.len() {
            self.plain = Vec::new();
            self.plain_off = 0;
        }
        n
    }

    /// Reads the socket into `inb` (growing it by one read's room; an
    /// empty `inb` takes the worker's `spare` first). Returns the bytes
    /// read (0: end of stream) and whether the read was shorter than the
    /// room (the socket is drained).
    pub(crate) fn read_sock(
        &mut self,
        fd: BorrowedFd<'_>,
        spare: &mut Vec<u8>,
    ) -> io::Result<(usize, bool)> {
        if self.in_used >= MAX_IN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "message buffer full",
            ));
        }
        let room = READ_ROOM.min(MAX_IN - self.in_used);
        if self.inb.is_empty() {
            std::mem::swap(&mut self.inb, spare);
        }
        if self.inb.len() < self.in_used + room {
            self.inb.resize(self.in_used + room, 0);
        }
        let n = socket::recv(fd, &mut self.inb[self.in_used..self.in_used + room])?;
        self.in_used += n;
        Ok((n, n < room))
    }

    /// Gives up the ciphertext buffer when it holds nothing: to the
    /// worker's `spare` (one buffer that every connection reads into in
    /// turn, so a busy connection does not allocate per read), or dropped.
    pub(crate) fn release_idle(&mut self, spare: &mut Vec<u8>) {
        if self.in_used == 0 && !self.inb.is_empty() {
            if spare.is_empty() {
                std::mem::swap(&mut self.inb, spare);
            } else {
                self.inb = Vec::new();
            }
        }
    }

    /// Writes pending ciphertext until done or the socket is full; the
    /// buffer goes once it is all out.
    pub(crate) fn flush(&mut self, fd: BorrowedFd<'_>) -> io::Result<Flush> {
        if let Some(cc) = self.client.as_deref_mut() {
            return super::tls_client::flush_client(cc, fd);
        }
        // Bounded: every pass writes bytes or stops.
        while self.out_off < self.out.len() {
            match socket::send(fd, &self.out[self.out_off..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.out_off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Flush::Blocked),
                Err(e) => return Err(e),
            }
        }
        self.out = Vec::new();
        self.out_off = 0;
        Ok(Flush::Done)
    }

    /// One pass of rustls over the buffered ciphertext: an application
    /// record is decrypted (its first bytes into `dst[*got..]`, the rest
    /// kept for the next read), a handshake message, ticket or alert is
    /// encoded for the socket, or, once established with nothing to
    /// decrypt, `on_write` runs (encrypting into the output buffer).
    pub(crate) fn step(
        &mut self,
        dst: &mut [u8],
        got: &mut usize,
        on_write: Option<OnWritable<'_>>,
    ) -> Result<Next, rustls::Error> {
        let Some(conn) = self.conn.as_deref_mut() else {
            return Err(rustls::Error::HandshakeNotComplete);
        };
        let st = conn.process_tls_records(&mut self.inb[..self.in_used]);
        let mut discard = st.discard;
        let next = match st.state {
            Err(e) => {
                discard_front(&mut self.inb, &mut self.in_used, discard);
                return Err(e);
            }
            Ok(ConnectionState::ReadTraffic(mut r)) => {
                // Bounded: rustls decrypts one record per pass.
                while let Some(rec) = r.next_record() {
                    let rec = rec?;
                    discard += rec.discard;
                    let p = rec.payload;
                    let n = p.len().min(dst.len().saturating_sub(*got));
                    dst[*got..*got + n].copy_from_slice(&p[..n]);
                    *got += n;
                    if n < p.len() {
                        self.plain.extend_from_slice(&p[n..]);
                    }
                }
                Next::Progress
            }
            Ok(ConnectionState::ReadEarlyData(mut r)) => {
                // Early data is never enabled; drop what a client sends anyway.
                while let Some(rec) = r.next_record() {
                    discard += rec?.discard;
                }
                Next::Progress
            }
            Ok(ConnectionState::EncodeTlsData(mut e)) => {
                let start = self.out.len();
                let mut need = 512;
                let mut done = false;
                // Bounded: the second try has the size rustls asked for.
                for _ in 0..2 {
                    self.out.resize(start + need, 0);
                    match e.encode(&mut self.out[start..]) {
                        Ok(n) => {
                            self.out.truncate(start + n);
                            done = true;
                            break;
                        }
                        Err(EncodeError::InsufficientSize(s)) => need = s.required_size,
                        Err(_) => break,
                    }
                }
                if !done {
                    self.out.truncate(start);
                }
                Next::Progress
            }
            Ok(ConnectionState::TransmitTlsData(t)) => {
                // The encoded bytes are ours now; they go out with `flush`.
                t.done();
                Next::Progress
            }
            Ok(ConnectionState::BlockedHandshake) => Next::NeedData,
            Ok(ConnectionState::WriteTraffic(mut w)) => {
                if let Some(f) = on_write {
                    if let Err(e) = f(&mut w, &mut self.out) {
                        discard_front(&mut self.inb, &mut self.in_used, discard);
                        return Err(rustls::Error::General(e.to_string()));
                    }
                }
                Next::Writable
            }
            Ok(ConnectionState::PeerClosed) | Ok(ConnectionState::Closed) => Next::PeerClosed,
            Ok(_) => Next::NeedData,
        };
        discard_front(&mut self.inb, &mut self.in_used, discard);
        Ok(next)
    }

    /// After a rustls error: the alert it queued is encoded for a
    /// best-effort send.
    pub(crate) fn encode_alert(&mut self) {
        let mut got = 0;
        // Bounded: an alert is one message.
        for _ in 0..4 {
            match self.step(&mut [], &mut got, None) {
                Ok(Next::Progress) => {}
                _ => break,
            }
        }
    }

    /// Queues close_notify (once established); false if rustls never
    /// became writable in a few passes. Records still buffered are
    /// decrypted on the way and kept unread.
    pub(crate) fn queue_close_notify(&mut self) -> bool {
        if let Some(cc) = self.client.as_deref_mut() {
            cc.send_close_notify();
            return true;
        }
        let mut got = 0;
        let mut f = |w: &mut WriteTraffic<'_, ServerConnectionData>, out: &mut Vec<u8>| {
            encrypt_with(out, 64, |o| w.queue_close_notify(o))
        };
        for _ in 0..8 {
            match self.step(&mut [], &mut got, Some(&mut f)) {
                Ok(Next::Progress) => {}
                Ok(Next::Writable) => return true,
                _ => return false,
            }
        }
        false
    }
}

/// Encrypts with `f` into the end of `out`, growing it to the size rustls
/// asks for.
pub(crate) fn encrypt_with(
    out: &mut Vec<u8>,
    guess: usize,
    mut f: impl FnMut(&mut [u8]) -> Result<usize, EncryptError>,
) -> io::Result<()> {
    let start = out.len();
    let mut need = guess;
    // Bounded: the second try has the size rustls asked for.
    for _ in 0..2 {
        out.resize(start + need, 0);
        match f(&mut out[start..]) {
            Ok(n) => {
                out.truncate(start + n);
                return Ok(());
            }
            Err(EncryptError::InsufficientSize(s)) => need = s.required_size,
            Err(e) => {
                out.truncate(start);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string()));
            }
        }
    }
    out.truncate(start);
    Err(io::Error::other("TLS output size"))
}

/// Drops `n` consumed bytes from the front of the input buffer.
fn discard_front(inb: &mut [u8], used: &mut usize, n: usize) {
    if n == 0 {
        return;
    }
    if n >= *used {
        *used = 0;
    } else {
        inb.copy_within(n..*used, 0);
        *used -= n;
    }
}
