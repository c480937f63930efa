//! TLS as a client on outbound connections (nginx's `ngx_ssl_create_connection`
//! with `NGX_SSL_CLIENT` and the upstream side of `ngx_ssl_handshake`): the
//! rustls client configuration gyre builds from `proxy_ssl_*` settings, and the
//! handshake driven by [`Core::connect`](super::Core::connect). Once it is done
//! the connection uses the record layer of src/event/tls.rs, as a server one.

use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConnection, DigitallySignedStruct, SignatureScheme};

use super::actions::Interest;
use super::connect::TlsConnect;
use super::core::{Core, Ev};
use super::tls::{flush_conn, info_of, tls_error, Flush, SockReader, State, Tls};
use super::tls_conf;
use crate::conn::pool::ConnId;

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
            let State::Conn(conn) = &mut tls.state else {
                return ClientStep::Failed(closed());
            };
            if conn.wants_write() {
                match flush_conn(conn, fd) {
                    Ok(Flush::Done) => continue,
                    Ok(Flush::Blocked) => {
                        x.write.ready = false;
                        return ClientStep::Again(Interest::BOTH);
                    }
                    Err(e) => return ClientStep::Failed(e),
                }
            }
            if !conn.is_handshaking() {
                tls.info = Some(info_of(conn));
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
                    let _ = flush_conn(conn, fd);
                    tls.closed_by_error();
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
