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
/// `Default` is nginx's defaults except for the protocols and suites
/// (`None`: rustls's, TLS 1.2 and 1.3 with every suite).
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
    /// `proxy_ssl_crl`: PEM CRLs; with them every certificate of the chain
    /// below the trusted one must have its issuer's list and not be on it
    /// (OpenSSL's `X509_V_FLAG_CRL_CHECK_ALL`, as nginx sets it).
    pub crl: Option<&'a Path>,
    /// `proxy_ssl_verify_depth`, OpenSSL's count: at most this many
    /// intermediate CAs between the certificate and a trusted one
    /// (`None`: nginx's 1).
    pub verify_depth: Option<usize>,
    /// `proxy_ssl_certificate` and `proxy_ssl_certificate_key`: the chain
    /// and key presented when the server asks for a client certificate.
    pub certificate: Option<(&'a Path, &'a Path)>,
    /// `proxy_ssl_protocols` (`None`: TLS 1.2 and 1.3).
    pub versions: Option<Vec<&'static rustls::SupportedProtocolVersion>>,
    /// `proxy_ssl_ciphers`: the TLS 1.2 suites, in order (`None`: all);
    /// as OpenSSL's cipher list, it leaves the TLS 1.3 suites alone.
    pub tls12_suites: Option<Vec<rustls::SupportedCipherSuite>>,
    /// `proxy_ssl_session_reuse off`: every handshake is a full one.
    pub no_session_reuse: bool,
}

/// Why `proxy_ssl_verify` refused a server's certificate, as nginx logs it
/// after the handshake (`ngx_http_upstream_ssl_handshake`): OpenSSL's
/// verify result, or the name check (`ngx_ssl_check_host`). Carried to
/// the caller in the handshake's error ([`verify_failure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyFailure {
    /// OpenSSL's `X509_V_ERR_*` code and text.
    Chain(u32, &'static str),
    /// The certificate is not for this name.
    Name(String),
}

impl std::fmt::Display for VerifyFailure {
    /// nginx's `[error]` text.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyFailure::Chain(code, text) => {
                write!(f, "upstream SSL certificate verify error: ({code}:{text})")
            }
            VerifyFailure::Name(n) => write!(f, "upstream SSL certificate does not match \"{n}\""),
        }
    }
}

impl std::error::Error for VerifyFailure {}

/// The verification failure inside a handshake error from
/// [`Core::connect_result`](super::Core::connect_result), if that is what
/// ended the handshake.
pub fn verify_failure(e: &io::Error) -> Option<&VerifyFailure> {
    match e.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::InvalidCertificate(rustls::CertificateError::Other(o)) => {
            o.0.downcast_ref::<VerifyFailure>()
        }
        _ => None,
    }
}

/// OpenSSL's verify result for a chain rustls refused (`chain`: the
/// certificates the peer sent, leaf first), as `SSL_get_verify_result`
/// gives it under a callback that lets verification go on to the end:
/// for an issuer it cannot find, whether the leaf names itself (18), the
/// chain ends in a self-signed certificate (19), the leaf came alone (21,
/// the last check's error) or the chain's top is unknown (20).
pub fn openssl_verify_error(e: &rustls::Error, chain: &[&[u8]]) -> (u32, &'static str) {
    use rustls::CertificateError as E;
    let self_issued = super::tls_x509::self_issued;
    let unknown = || match chain {
        [leaf] if self_issued(leaf) => (18, "self-signed certificate"),
        [_] | [] => (21, "unable to verify the first certificate"),
        [.., top] if self_issued(top) => (19, "self-signed certificate in certificate chain"),
        _ => (20, "unable to get local issuer certificate"),
    };
    match e {
        rustls::Error::InvalidCertificate(ce) => match ce {
            E::UnknownIssuer => unknown(),
            E::Expired | E::ExpiredContext { .. } => (10, "certificate has expired"),
            E::NotValidYet | E::NotValidYetContext { .. } => (9, "certificate is not yet valid"),
            E::BadSignature => (7, "certificate signature failure"),
            E::Revoked => (23, "certificate revoked"),
            E::UnknownRevocationStatus => (3, "unable to get certificate CRL"),
            E::ExpiredRevocationList | E::ExpiredRevocationListContext { .. } => {
                (12, "CRL has expired")
            }
            E::InvalidPurpose | E::InvalidPurposeContext { .. } => {
                (26, "unsupported certificate purpose")
            }
            E::BadEncoding => (4, "unable to decrypt certificate's signature"),
            _ => (1, "unspecified certificate verification error"),
        },
        _ => (1, "unspecified certificate verification error"),
    }
}

/// `proxy_ssl_verify on`: the chain checked against the trusted CAs and
/// the depth, then the name; a refusal carries nginx's verdict
/// ([`VerifyFailure`]).
#[derive(Debug)]
struct Verify {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    /// The trusted certificates, to tell a sent root from an intermediate.
    roots: Vec<CertificateDer<'static>>,
    depth: usize,
}

fn refuse(f: VerifyFailure) -> rustls::Error {
    rustls::Error::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(
        Arc::new(f),
    )))
}

impl ServerCertVerifier for Verify {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError as E;
        let between = tls_conf::intermediates_between(&self.roots, intermediates);
        // OpenSSL stops building the chain at the depth, and its last
        // word (what nginx logs) is then the issuer it did not look for.
        let too_deep = || {
            refuse(VerifyFailure::Chain(
                20,
                "unable to get local issuer certificate",
            ))
        };
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(_) if between > self.depth => Err(too_deep()),
            Ok(v) => Ok(v),
            Err(rustls::Error::InvalidCertificate(
                E::NotValidForName | E::NotValidForNameContext { .. },
            )) => {
                if between > self.depth {
                    return Err(too_deep());
                }
                let name = server_name.to_str();
                let name = name.trim_start_matches('[').trim_end_matches(']');
                Err(refuse(VerifyFailure::Name(name.to_string())))
            }
            Err(e) => {
                let mut chain: Vec<&[u8]> = vec![end_entity.as_ref()];
                chain.extend(intermediates.iter().map(|c| c.as_ref()));
                let (code, text) = openssl_verify_error(&e, &chain);
                Err(refuse(VerifyFailure::Chain(code, text)))
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
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

fn invalid(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// A client configuration for outbound TLS (built once per distinct
/// settings, when the configuration is read). Sessions are cached per
/// configuration and server name (rustls's in-memory store), like nginx's
/// `proxy_ssl_session_reuse on`. Errors are nginx's texts where nginx has
/// one (`no proxy_ssl_trusted_certificate for proxy_ssl_verify`).
pub fn client_config(o: &ClientTlsOptions<'_>) -> io::Result<Arc<rustls::ClientConfig>> {
    let base = tls_conf::provider();
    let p = match &o.tls12_suites {
        None => base,
        Some(tls12) => {
            let mut suites: Vec<rustls::SupportedCipherSuite> = base
                .cipher_suites
                .iter()
                .copied()
                .filter(|s| s.version() == &rustls::version::TLS13)
                .collect();
            suites.extend(tls12.iter().copied());
            Arc::new(rustls::crypto::CryptoProvider {
                cipher_suites: suites,
                ..(*base).clone()
            })
        }
    };
    let versions = o.versions.as_deref().unwrap_or(rustls::DEFAULT_VERSIONS);
    let b = rustls::ClientConfig::builder_with_provider(p.clone())
        .with_protocol_versions(versions)
        .map_err(|e| invalid(format!("SSL_CTX_set_cipher_list() failed ({e})")))?;
    let verifier: Arc<dyn ServerCertVerifier> = if o.verify {
        let Some(path) = o.trusted else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no proxy_ssl_trusted_certificate for proxy_ssl_verify",
            ));
        };
        let certs = tls_conf::load_certs(path)?;
        let mut roots = rustls::RootCertStore::empty();
        for c in &certs {
            roots
                .add(c.clone())
                .map_err(|e| invalid(format!("{}: {e}", path.display())))?;
        }
        let mut vb =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), p.clone());
        if let Some(crl) = o.crl {
            vb = vb
                .with_crls(tls_conf::load_crls(crl)?)
                .enforce_revocation_expiration();
        }
        let inner = vb
            .build()
            .map_err(|e| invalid(format!("{}: {e}", path.display())))?;
        Arc::new(Verify {
            inner,
            roots: certs,
            depth: o.verify_depth.unwrap_or(1),
        })
    } else {
        Arc::new(NoVerify(p.clone()))
    };
    let b = b.dangerous().with_custom_certificate_verifier(verifier);
    let mut cc = match o.certificate {
        None => b.with_no_client_auth(),
        Some((cert, key)) => {
            let ck = tls_conf::certified_key(&p, cert, key)?;
            b.with_client_cert_resolver(Arc::new(ClientCert(ck)))
        }
    };
    cc.enable_sni = o.server_name;
    cc.alpn_protocols = o.alpn.clone();
    if o.no_session_reuse {
        cc.resumption = rustls::client::Resumption::disabled();
    }
    Ok(Arc::new(cc))
}

/// `proxy_ssl_certificate`: sent whenever the server asks, whatever CAs
/// it names (as OpenSSL does with a certificate set on the context).
#[derive(Debug)]
struct ClientCert(Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for ClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.0.key.choose_scheme(sigschemes)?;
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
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
