//! Building rustls server configurations: the crypto provider every TLS
//! listener uses, and certificates and keys read from PEM files.
//!
//! The provider is aws-lc-rs, chosen by measurement (README, "TLS"): on the
//! target x86-64 machines its server-side ECDSA P-256 handshake took 76 µs
//! against ring's 97 µs and RSA-2048 348 µs against 607 µs; it builds with
//! the C compiler alone (no cmake, clang or nasm on x86-64 Linux).

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// The crypto provider of every configuration gyre builds.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn pem_error(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {e}", path.display()),
    )
}

/// Every certificate in a PEM file, leaf first (the chain as nginx's
/// `ssl_certificate` reads it). An empty file is an error.
pub fn load_certs(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let data = std::fs::read(path)?;
    let mut out = Vec::new();
    for c in CertificateDer::pem_slice_iter(&data) {
        out.push(c.map_err(|e| pem_error(path, e))?);
    }
    if out.is_empty() {
        return Err(pem_error(path, "no certificate found"));
    }
    Ok(out)
}

/// How many of the certificates a peer sent are intermediates between its
/// own and a trusted CA, as OpenSSL's verify depth counts them: rustls does
/// not say which path it built, so those that are not trusted ones (a peer
/// may send the root too). `ssl_verify_depth` / `proxy_ssl_verify_depth`
/// allow at most that many.
pub fn intermediates_between(trusted: &[CertificateDer<'_>], sent: &[CertificateDer<'_>]) -> usize {
    sent.iter()
        .filter(|c| !trusted.iter().any(|r| r.as_ref() == c.as_ref()))
        .count()
}

/// Every certificate revocation list in a PEM file (`X509 CRL` blocks).
/// An empty file is an error.
pub fn load_crls(path: &Path) -> io::Result<Vec<CertificateRevocationListDer<'static>>> {
    let data = std::fs::read(path)?;
    let mut out = Vec::new();
    for c in CertificateRevocationListDer::pem_slice_iter(&data) {
        out.push(c.map_err(|e| pem_error(path, e))?);
    }
    if out.is_empty() {
        return Err(pem_error(path, "no CRL found"));
    }
    Ok(out)
}

/// The first private key (PKCS#8, PKCS#1 RSA or SEC1 EC) in a PEM file.
pub fn load_key(path: &Path) -> io::Result<PrivateKeyDer<'static>> {
    let data = std::fs::read(path)?;
    PrivateKeyDer::from_pem_slice(&data).map_err(|e| pem_error(path, e))
}

/// A certificate chain with its signing key, checked to belong together.
pub fn certified_key(
    provider: &CryptoProvider,
    cert: &Path,
    key: &Path,
) -> io::Result<Arc<CertifiedKey>> {
    let chain = load_certs(cert)?;
    let der = load_key(key)?;
    let signer = provider
        .key_provider
        .load_private_key(der)
        .map_err(|e| pem_error(key, e))?;
    let ck = CertifiedKey::new(chain, signer);
    ck.keys_match().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("key values mismatch ({e})"),
        )
    })?;
    Ok(Arc::new(ck))
}

/// A configuration for one certificate, TLS 1.2 and 1.3, ALPN `alpn`: what
/// a simple protocol (the echo example, the kv port) needs.
pub fn simple_server_config(
    cert: &Path,
    key: &Path,
    alpn: &[&[u8]],
) -> io::Result<Arc<rustls::ServerConfig>> {
    let p = provider();
    let ck = certified_key(&p, cert, key)?;
    let mut sc = rustls::ServerConfig::builder_with_provider(p)
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(ck)));
    sc.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    Ok(Arc::new(sc))
}
