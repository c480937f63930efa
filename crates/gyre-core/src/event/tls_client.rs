//! TLS as a client on outbound connections (nginx's `ngx_ssl_create_connection`
//! with `NGX_SSL_CLIENT` and the upstream side of `ngx_ssl_handshake`): the
//! rustls client configuration gyre builds from `proxy_ssl_*` settings, and the
//! handshake driven by [`Core::connect`](super::Core::connect), and the
//! buffered record code of a client connection (rustls's `ClientConnection`
//! holds its ciphertext and plaintext), called from the record layer entry
//! points of src/event/tls.rs, which serve server connections from the
//! unbuffered state of src/event/tls_record.rs.

use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConnection, DigitallySignedStruct, SignatureScheme};

use super::actions::Interest;
use super::connect::TlsConnect;
use super::core::{Core, Ev};
use super::tls::{tls_error, TlsInfo};
use super::tls_conf;
use super::tls_record::{Flush, Tls};
use crate::conn::pool::ConnId;
use crate::sys::socket;

/// Reads ciphertext from the socket for rustls, remembering what happened.
struct SockReader<'a> {
    fd: BorrowedFd<'a>,
    /// A read shorter than asked (the socket is drained, with EPOLLRDHUP).
    short: bool,
}

impl Read for SockReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = socket::recv(self.fd, buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

struct SockWriter<'a>(BorrowedFd<'a>);

impl Write for SockWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        socket::send(self.0, buf)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        socket::writev(self.0, bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes a client connection's pending ciphertext until done or the
/// socket is full.
pub(super) fn flush_client(conn: &mut ClientConnection, fd: BorrowedFd<'_>) -> io::Result<Flush> {
    // Bounded: every pass either writes bytes or stops.
    while conn.wants_write() {
        match conn.write_tls(&mut SockWriter(fd)) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Flush::Blocked),
            Err(e) => return Err(e),
        }
    }
    Ok(Flush::Done)
}

/// What a client handshake negotiated (no SNI or client certificate of
/// ours to report; `client_certs` holds none).
fn client_info(conn: &ClientConnection) -> TlsInfo {
    TlsInfo {
        version: conn
            .protocol_version()
            .unwrap_or(rustls::ProtocolVersion::Unknown(0)),
        suite: conn
            .negotiated_cipher_suite()
            .map_or(rustls::CipherSuite::Unknown(0), |s| s.suite()),
        server_name: None,
        resumed: matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
        alpn: conn.alpn_protocol().map(Into::into),
        client_verified: false,
        client_certs: Vec::new(),
        client_verify: std::cell::OnceCell::new(),
    }
}

/// [`Core::recv`](super::Core::recv) on a client connection (called by
/// `tls_recv` with the slot's pieces).
#[allow(clippy::too_many_arguments)]
pub(super) fn client_recv(
    conn: &mut ClientConnection,
    plain_pending: &mut usize,
    sock_eof: &mut bool,
    closed: &mut bool,
    fd: BorrowedFd<'_>,
    rev: &mut crate::conn::pool::Event,
    rdhup: bool,
    buf: &mut [u8],
) -> io::Result<usize> {
    // Bounded: each pass takes plaintext or reads the socket.
    for _ in 0..64 {
        if buf.is_empty() {
            return Ok(0);
        }
        match conn.reader().read(buf) {
            Ok(0) => {
                // close_notify.
                rev.ready = false;
                rev.eof = true;
                return Ok(0);
            }
            Ok(n) => {
                *plain_pending = plain_pending.saturating_sub(n);
                if *plain_pending > 0 {
                    rev.ready = true;
                }
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                // The peer closed without close_notify: an end of
                // stream as any other (nginx ignores unexpected EOF).
                rev.ready = false;
                rev.eof = true;
                return Ok(0);
            }
            Err(e) => {
                rev.ready = false;
                rev.error = true;
                return Err(e);
            }
        }
        *plain_pending = 0;
        if *sock_eof {
            rev.ready = false;
            rev.eof = true;
            return Ok(0);
        }
        if !rev.ready {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut rd = SockReader { fd, short: false };
        match conn.read_tls(&mut rd) {
            Ok(0) => *sock_eof = true,
            Ok(_) => {
                if rd.short && rdhup && !rev.pending_eof {
                    rev.ready = false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                rev.ready = false;
                return Err(e);
            }
            Err(e) => {
                rev.ready = false;
                rev.error = true;
                return Err(e);
            }
        }
        match conn.process_new_packets() {
            Ok(st) => *plain_pending = st.plaintext_bytes_to_read(),
            Err(e) => {
                let _ = flush_client(conn, fd);
                *closed = true;
                rev.ready = false;
                rev.error = true;
                return Err(tls_error(e));
            }
        }
        // A record whose answer is ours to send (a key update).
        if conn.wants_write() {
            let _ = flush_client(conn, fd);
        }
    }
    Err(io::ErrorKind::WouldBlock.into())
}

/// Encrypts up to `limit` bytes of `bufs` into rustls's buffer (the caller
/// flushes); returns the plaintext taken.
pub(super) fn client_write(
    conn: &mut ClientConnection,
    bufs: &[IoSlice<'_>],
    limit: usize,
) -> io::Result<usize> {
    let mut taken = 0;
    // Bounded by `limit` per call.
    let mut i = 0;
    let mut off = 0;
    while i < bufs.len() && taken < limit {
        let b = &bufs[i][off..];
        let b = &b[..b.len().min(limit - taken)];
        if b.is_empty() {
            i += 1;
            off = 0;
            continue;
        }
        let n = conn.writer().write(b)?;
        if n == 0 {
            break;
        }
        taken += n;
        off += n;
        if off >= bufs[i].len() {
            i += 1;
            off = 0;
        }
    }
    Ok(taken)
}

/// What the `proxy_ssl_*` directives decide about a client configuration.
#[derive(Clone, Debug, Default)]
pub struct ClientTlsOptions<'a> {
    /// `proxy_ssl_verify` (nginx's default: off — any certificate is taken).
    pub verify: bool,
    /// `proxy_ssl_trusted_certificate`: PEM file of trusted CAs; required
    /// when verifying, as in nginx.
    pub trusted: Option<&'a Path>,
    /// `proxy_ssl_server_name` (default off: no SNI is sent).
    pub server_name: bool,
    /// ALPN protocols offered (none by default).
    pub alpn: Vec<Vec<u8>>,
}

/// Accepts every certificate (`proxy_ssl_verify off`); the handshake
/// signatures are still checked, so the peer holds the certificate's key.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A client configuration for outbound TLS. Sessions are cached per
/// configuration (rustls's default in-memory store), like nginx's
/// `proxy_ssl_session_reuse on`.
pub fn client_config(o: &ClientTlsOptions<'_>) -> io::Result<Arc<rustls::ClientConfig>> {
    let p = tls_conf::provider();
    let b = rustls::ClientConfig::builder_with_provider(p.clone())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?;
    let mut cc = if o.verify {
        let Some(path) = o.trusted else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no proxy_ssl_trusted_certificate for proxy_ssl_verify",
            ));
        };
        let mut roots = rustls::RootCertStore::empty();
        for c in tls_conf::load_certs(path)? {
            roots.add(c).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?;
        }
        b.with_root_certificates(roots).with_no_client_auth()
    } else {
        b.dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(p)))
            .with_no_client_auth()
    };
    cc.enable_sni = o.server_name;
    cc.alpn_protocols = o.alpn.clone();
    Ok(Arc::new(cc))
}

/// How far a client handshake got.
pub(crate) enum ClientStep {
    Done,
    /// Wait for these events.
    Again(Interest),
    Failed(io::Error),
}

impl Core {
    /// Puts the client TLS state on a freshly connected `c`.
    pub(crate) fn start_client_tls(&mut self, c: ConnId, t: &TlsConnect) -> io::Result<()> {
        let conn = ClientConnection::new(t.config.clone(), t.name.clone()).map_err(tls_error)?;
        let x = self
            .pool
            .get_mut(c)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
        x.tls = Some(Box::new(Tls::client(conn)));
        Ok(())
    }

    /// Drives the client handshake as far as the socket allows.
    pub(crate) fn client_handshake_step(&mut self, c: ConnId) -> ClientStep {
        let rdhup = self.actions.reports_rdhup();
        let closed = || io::Error::from(io::ErrorKind::NotConnected);
        // Bounded: each pass makes progress on the socket or returns.
        for _ in 0..64 {
            let Some(x) = self.pool.get_mut(c) else {
                return ClientStep::Failed(closed());
            };
            let Some(fd) = x.fd.as_ref().map(|f| f.as_fd()) else {
                return ClientStep::Failed(closed());
            };
            let Some(tls) = x.tls.as_deref_mut() else {
                return ClientStep::Failed(closed());
            };
            let Some(conn) = tls.client.as_deref_mut() else {
                return ClientStep::Failed(closed());
            };
            if conn.wants_write() {
                match flush_client(conn, fd) {
                    Ok(Flush::Done) => continue,
                    Ok(Flush::Blocked) => {
                        x.write.ready = false;
                        return ClientStep::Again(Interest::BOTH);
                    }
                    Err(e) => return ClientStep::Failed(e),
                }
            }
            if !conn.is_handshaking() {
                tls.info = Some(Rc::new(client_info(conn)));
                if tls.plain_pending > 0 {
                    x.read.ready = true;
                }
                return ClientStep::Done;
            }
            if !x.read.ready {
                return ClientStep::Again(Interest::READ);
            }
            let mut rd = SockReader { fd, short: false };
            match conn.read_tls(&mut rd) {
                Ok(0) => {
                    return ClientStep::Failed(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "peer closed connection in SSL handshake",
                    ))
                }
                Ok(_) => {
                    if rd.short && rdhup && !x.read.pending_eof {
                        x.read.ready = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    x.read.ready = false;
                    return ClientStep::Again(Interest::READ);
                }
                Err(e) => return ClientStep::Failed(e),
            }
            match conn.process_new_packets() {
                Ok(st) => tls.plain_pending = st.plaintext_bytes_to_read(),
                Err(e) => {
                    // The alert rustls queued goes out best-effort.
                    let _ = flush_client(conn, fd);
                    // A fatal alert was queued: no close_notify, no more data.
                    tls.closed = true;
                    return ClientStep::Failed(tls_error(e));
                }
            }
        }
        // A server feeding a byte at a time while the socket stays ready:
        // give the others a turn.
        self.post(Ev::write(c));
        ClientStep::Again(Interest::BOTH)
    }
}
