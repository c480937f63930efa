//! HTTPS server blocks (nginx's `ngx_http_ssl_module`): the `ssl_*`
//! directives, the rustls configuration each server block gets, SNI choosing
//! the server block for the handshake, and what the request path checks
//! afterwards (a plain HTTP request on a TLS port, a missing client
//! certificate).
//!
//! The TLS layer itself is gyre-core's ([`gyre_core::event::tls`]): a
//! listener with `ssl` gets a [`TlsListen`] whose [`ChooseConfig`] is the
//! SNI table below, and the HTTP handler then reads and writes through
//! `core.recv/send` as on a plain socket.
//!
//! Configurations are built when the configuration is read (so `gyre -t`
//! reports unreadable certificates, and the ticket keys made then are the
//! same in every worker forked afterwards); a reload reads the certificates
//! again.
//!
//! What rustls has no counterpart for: finite-field DHE (`ssl_dhparam` is
//! read, for nginx's error when it is missing, and has nothing to apply to:
//! rustls's TLS 1.2 suites are all ECDHE), TLS 1.0/1.1 and SSLv3, and
//! curves beyond X25519, P-256 and P-384 (plus the X25519MLKEM768 hybrid).

use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use gyre_core::conf::{ConfCtx, ConfError, Directive};
use gyre_core::conn::ConnId;
use gyre_core::errlog::INFO;
use gyre_core::event::tls::rustls;
use gyre_core::event::tls::{ChooseConfig, ClientVerify, TlsInfo, TlsListen};
use gyre_core::event::tls_x509;
use gyre_core::event::{tls_conf, Core};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};

use crate::conf::{HttpConf, ServerConf};
use crate::parse::Request;
use crate::response::Response;
use crate::ssl_session::{SessionCache, Tickets};

/// `ssl_verify_client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    Off,
    On,
    Optional,
    OptionalNoCa,
}

/// TLS versions rustls speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tls12,
    Tls13,
}

/// The `ssl_*` settings of one level (http or server); `None` is "not set
/// here" and inherits.
#[derive(Debug, Clone, Default)]
pub struct SslSet {
    pub certificates: Option<Vec<PathBuf>>,
    pub keys: Option<Vec<PathBuf>>,
    pub protocols: Option<Vec<Proto>>,
    pub ciphers: Option<String>,
    pub prefer_server_ciphers: Option<bool>,
    pub session_cache: Option<SessionCache>,
    pub session_timeout: Option<u64>,
    pub session_tickets: Option<bool>,
    pub ticket_keys: Option<Vec<PathBuf>>,
    pub verify_client: Option<Verify>,
    pub client_certificate: Option<PathBuf>,
    pub verify_depth: Option<usize>,
    pub dhparam: Option<PathBuf>,
    pub ecdh_curve: Option<String>,
}

impl SslSet {
    /// This level's values over `outer`'s (nginx's merge_srv_conf).
    fn merged(&self, outer: &SslSet) -> SslSet {
        macro_rules! m {
            ($f:ident) => {
                self.$f.clone().or_else(|| outer.$f.clone())
            };
        }
        SslSet {
            certificates: m!(certificates),
            keys: m!(keys),
            protocols: m!(protocols),
            ciphers: m!(ciphers),
            prefer_server_ciphers: m!(prefer_server_ciphers),
            session_cache: m!(session_cache),
            session_timeout: m!(session_timeout),
            session_tickets: m!(session_tickets),
            ticket_keys: m!(ticket_keys),
            verify_client: m!(verify_client),
            client_certificate: m!(client_certificate),
            verify_depth: m!(verify_depth),
            dhparam: m!(dhparam),
            ecdh_curve: m!(ecdh_curve),
        }
    }
}

/// A server block's TLS: its own settings, where it was declared (for
/// nginx's error text), and the configuration built from them.
#[derive(Clone, Default)]
pub struct ServerSsl {
    pub set: SslSet,
    pub file: String,
    pub line: usize,
    pub built: Option<Built>,
}

impl std::fmt::Debug for ServerSsl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSsl")
            .field("set", &self.set)
            .field("built", &self.built.is_some())
            .finish()
    }
}

impl ServerSsl {
    /// For a `server {}` just opened by `d`.
    pub fn at(d: &Directive) -> ServerSsl {
        ServerSsl {
            file: d.file(),
            line: d.line(),
            ..ServerSsl::default()
        }
    }
}

/// What a server block with certificates gets.
#[derive(Clone)]
pub struct Built {
    pub config: Arc<ServerConfig>,
    pub verify: Verify,
    /// Checks a client's certificates against `ssl_client_certificate`
    /// after the handshake (`None`: no CA given, nothing can verify).
    pub client_verifier: Option<Arc<dyn ClientCertVerifier>>,
}

// ------------------------------------------------------------- directives

fn target<'a>(c: &'a mut HttpConf, cx: &ConfCtx) -> Result<&'a mut SslSet, String> {
    if cx.blocks().last().map(String::as_str) == Some("server") {
        Ok(&mut c.servers.last_mut().ok_or("no server")?.ssl.set)
    } else {
        Ok(&mut c.ssl)
    }
}

pub fn set_certificate(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let p = cx.full_path(d.arg(0));
    target(c, cx)?
        .certificates
        .get_or_insert_with(Vec::new)
        .push(p);
    Ok(())
}

pub fn set_certificate_key(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let p = cx.full_path(d.arg(0));
    target(c, cx)?.keys.get_or_insert_with(Vec::new).push(p);
    Ok(())
}

pub fn set_protocols(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = parse_protocols(&d.args)?;
    target(c, cx)?.protocols = Some(v);
    Ok(())
}

/// `ssl_protocols` / `proxy_ssl_protocols` arguments as the versions
/// rustls speaks.
pub fn parse_protocols(args: &[String]) -> Result<Vec<Proto>, String> {
    let mut v = Vec::new();
    let mut old = None;
    for a in args {
        match a.as_str() {
            "TLSv1.2" => v.push(Proto::Tls12),
            "TLSv1.3" => v.push(Proto::Tls13),
            // Listed by Debian's own nginx.conf (`TLSv1 TLSv1.1 TLSv1.2
            // TLSv1.3`), and never negotiated there: OpenSSL 3.0 disables
            // SSLv3, TLS 1.0 and 1.1 below security level 0, so nginx on it
            // speaks the same 1.2 and 1.3 rustls does. Skipped, as OpenSSL
            // skips them.
            "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => old = Some(a),
            _ => return Err(format!("invalid value \"{a}\"")),
        }
    }
    if let (true, Some(a)) = (v.is_empty(), old) {
        return Err(format!(
            "\"{a}\" is not supported (rustls speaks TLSv1.2 and TLSv1.3 only)"
        ));
    }
    Ok(v)
}

/// The rustls versions of `protos`.
pub fn versions(protos: &[Proto]) -> Vec<&'static rustls::SupportedProtocolVersion> {
    protos
        .iter()
        .map(|p| match p {
            Proto::Tls12 => &rustls::version::TLS12,
            Proto::Tls13 => &rustls::version::TLS13,
        })
        .collect()
}

pub fn set_ciphers(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    // Checked now, so the error points at the directive.
    gyre_core::event::tls_ciphers::parse(d.arg(0))?;
    target(c, cx)?.ciphers = Some(d.arg(0).to_string());
    Ok(())
}

pub fn set_prefer_server_ciphers(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.flag()?;
    target(c, cx)?.prefer_server_ciphers = Some(v);
    Ok(())
}

pub fn set_session_cache(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = SessionCache::parse(&d.args)?;
    target(c, cx)?.session_cache = Some(v);
    Ok(())
}

pub fn set_session_timeout(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.sec(0)?;
    target(c, cx)?.session_timeout = Some(v);
    Ok(())
}

pub fn set_session_tickets(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    target(c, cx)?.session_tickets = Some(v);
    Ok(())
}

pub fn set_session_ticket_key(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let p = cx.full_path(d.arg(0));
    target(c, cx)?
        .ticket_keys
        .get_or_insert_with(Vec::new)
        .push(p);
    Ok(())
}

pub fn set_verify_client(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = match d.arg(0) {
        "off" => Verify::Off,
        "on" => Verify::On,
        "optional" => Verify::Optional,
        "optional_no_ca" => Verify::OptionalNoCa,
        other => {
            return Err(format!(
                "invalid value \"{other}\" in \"ssl_verify_client\" directive, it must be \"on\", \"off\", \"optional\" or \"optional_no_ca\""
            ))
        }
    };
    target(c, cx)?.verify_client = Some(v);
    Ok(())
}

pub fn set_client_certificate(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let p = cx.full_path(d.arg(0));
    target(c, cx)?.client_certificate = Some(p);
    Ok(())
}

pub fn set_verify_depth(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.number(0)? as usize;
    target(c, cx)?.verify_depth = Some(v);
    Ok(())
}

pub fn set_dhparam(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let p = cx.full_path(d.arg(0));
    target(c, cx)?.dhparam = Some(p);
    Ok(())
}

pub fn set_ecdh_curve(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    kx_groups(d.arg(0))?;
    target(c, cx)?.ecdh_curve = Some(d.arg(0).to_string());
    Ok(())
}

/// `ssl_ecdh_curve auto | NAME[:NAME...]` as rustls key-exchange groups.
fn kx_groups(spec: &str) -> Result<Vec<&'static dyn rustls::crypto::SupportedKxGroup>, String> {
    use rustls::crypto::aws_lc_rs::kx_group as g;
    if spec == "auto" {
        return Ok(tls_conf::provider().kx_groups.clone());
    }
    let mut out = Vec::new();
    for name in spec.split(':') {
        let group: &'static dyn rustls::crypto::SupportedKxGroup = match name {
            "X25519" | "x25519" => g::X25519,
            "prime256v1" | "P-256" | "secp256r1" => g::SECP256R1,
            "secp384r1" | "P-384" => g::SECP384R1,
            "X25519MLKEM768" => g::X25519MLKEM768,
            _ => {
                return Err(format!(
                    "SSL_CTX_set1_curves_list(\"{spec}\") failed (unsupported curve \"{name}\")"
                ))
            }
        };
        out.push(group);
    }
    Ok(out)
}

// ---------------------------------------------------------- configuration

/// Builds every server block's configuration and checks that each TLS
/// address's default server has a certificate (called from the http
/// block's init, so `gyre -t` runs it).
pub fn init(c: &mut HttpConf) -> Result<(), ConfError> {
    let http = c.ssl.clone();
    // Servers naming the same shared zone share it.
    let mut zones = Zones::new();
    crate::ssl_shared_cache::begin_read();
    for s in &mut c.servers {
        let set = s.ssl.set.merged(&http);
        if set.certificates.as_ref().is_some_and(|v| !v.is_empty()) {
            s.ssl.built = Some(build(&set, &mut zones).map_err(ConfError::new)?);
        } else if s.listen.iter().any(|l| l.ssl) {
            if let Some(Verify::On | Verify::Optional) = set.verify_client {
                if set.client_certificate.is_none() {
                    return Err(ConfError::new(
                        "no ssl_client_certificate for ssl_verify_client",
                    ));
                }
            }
        }
    }
    for (addr, _) in ssl_addresses(c) {
        let d = default_server(c, addr);
        if let Some(s) = c.servers.get(d) {
            if s.ssl.built.is_none() {
                return Err(ConfError::new(format!(
                    "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive in {}:{}",
                    s.ssl.file, s.ssl.line
                )));
            }
        }
    }
    // Its zones are the ones the next reload may keep.
    crate::ssl_shared_cache::commit_read();
    Ok(())
}

/// Addresses some `listen ... ssl` names (a socket is TLS for every server
/// on it, as nginx merges the option).
fn ssl_addresses(c: &HttpConf) -> Vec<(SocketAddr, ())> {
    let mut out: Vec<(SocketAddr, ())> = Vec::new();
    for s in &c.servers {
        for l in &s.listen {
            if l.ssl && !out.iter().any(|(a, _)| *a == l.addr) {
                out.push((l.addr, ()));
            }
        }
    }
    out
}

fn default_server(c: &HttpConf, addr: SocketAddr) -> usize {
    c.servers
        .iter()
        .position(|s| s.listen.iter().any(|l| l.addr == addr && l.default_server))
        .or_else(|| {
            c.servers
                .iter()
                .position(|s| s.listen.iter().any(|l| l.addr == addr))
        })
        .unwrap_or(0)
}

fn load_error(what: &str, path: &std::path::Path, e: &std::io::Error) -> String {
    let reason = if e.raw_os_error().is_some() {
        format!("BIO_new_file() failed ({})", gyre_core::sys_error_text(e))
    } else {
        e.to_string()
    };
    format!("cannot load {what} \"{}\": {reason}", path.display())
}

type Zones = Vec<(String, Arc<crate::ssl_shared_cache::SharedCache>)>;

fn build(set: &SslSet, zones: &mut Zones) -> Result<Built, String> {
    let certs = set.certificates.clone().unwrap_or_default();
    let keys = set.keys.clone().unwrap_or_default();
    let ciphers = set.ciphers.as_deref().unwrap_or("HIGH:!aNULL:!MD5");
    let mut suites: Vec<rustls::SupportedCipherSuite> = tls_conf::provider()
        .cipher_suites
        .iter()
        .copied()
        .filter(|s| s.version() == &rustls::version::TLS13)
        .collect();
    suites.extend(gyre_core::event::tls_ciphers::parse(ciphers)?);
    let provider = Arc::new(CryptoProvider {
        cipher_suites: suites,
        kx_groups: kx_groups(set.ecdh_curve.as_deref().unwrap_or("auto"))?,
        ..(*tls_conf::provider()).clone()
    });
    let mut certified = Vec::new();
    for (i, cert) in certs.iter().enumerate() {
        let Some(key) = keys.get(i) else {
            return Err(format!(
                "no \"ssl_certificate_key\" is defined for certificate \"{}\"",
                cert.display()
            ));
        };
        let chain = tls_conf::load_certs(cert).map_err(|e| load_error("certificate", cert, &e))?;
        let der = tls_conf::load_key(key).map_err(|e| load_error("certificate key", key, &e))?;
        let signer = provider
            .key_provider
            .load_private_key(der)
            .map_err(|e| format!("cannot load certificate key \"{}\": {e}", key.display()))?;
        let ck = CertifiedKey::new(chain, signer);
        ck.keys_match().map_err(|e| {
            format!(
                "SSL_CTX_use_PrivateKey(\"{}\") failed (SSL: key values mismatch: {e})",
                key.display()
            )
        })?;
        certified.push(Arc::new(ck));
    }
    if let Some(p) = &set.dhparam {
        // Read for nginx's error; rustls has no DHE suites to use it for.
        std::fs::read(p).map_err(|e| {
            format!(
                "PEM_read_bio_DHparams(\"{}\") failed ({})",
                p.display(),
                gyre_core::sys_error_text(&e)
            )
        })?;
    }
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = set
        .protocols
        .clone()
        // nginx 1.22's default is "TLSv1 TLSv1.1 TLSv1.2" (TLSv1.3 joined
        // the default in 1.23.4): of those, rustls has TLSv1.2.
        .map_or_else(|| versions(&[Proto::Tls12]), |p| versions(&p));
    let verify = set.verify_client.unwrap_or(Verify::Off);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("SSL_CTX_set_min_proto_version() failed ({e})"))?;
    // The handshake takes any certificate whose key the client proves it
    // holds (OpenSSL under nginx finishes the handshake too); the verdict
    // against `ssl_client_certificate` is reached after it (`verdict`), so
    // a bad certificate gets nginx's 400 "The SSL certificate error".
    let client_verifier = match (&set.client_certificate, verify) {
        (_, Verify::Off) => None,
        (None, Verify::OptionalNoCa) => None,
        (None, _) => return Err("no ssl_client_certificate for ssl_verify_client".into()),
        (Some(ca), _) => {
            let mut roots = rustls::RootCertStore::empty();
            let trusted =
                tls_conf::load_certs(ca).map_err(|e| load_error("certificate", ca, &e))?;
            for c in &trusted {
                roots
                    .add(c.clone())
                    .map_err(|e| format!("cannot load certificate \"{}\": {e}", ca.display()))?;
            }
            let inner = WebPkiClientVerifier::builder_with_provider(roots.into(), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| format!("ssl_client_certificate \"{}\": {e}", ca.display()))?;
            Some(Arc::new(DepthLimit {
                inner,
                roots: trusted,
                depth: set.verify_depth.unwrap_or(1),
            }) as Arc<dyn ClientCertVerifier>)
        }
    };
    let builder = match verify {
        Verify::Off => builder.with_no_client_auth(),
        _ => builder.with_client_cert_verifier(Arc::new(AnyClientCert {
            provider: provider.clone(),
            // The CA names nginx sends in its CertificateRequest.
            hints: client_verifier
                .as_ref()
                .map(|v| v.root_hint_subjects().to_vec())
                .unwrap_or_default(),
        })),
    };
    let mut sc = builder.with_cert_resolver(Arc::new(PickCert { keys: certified }));
    sc.ignore_client_order = set.prefer_server_ciphers.unwrap_or(false);
    sc.alpn_protocols = vec![b"http/1.1".to_vec()];
    let timeout = set.session_timeout.unwrap_or(300);
    let cache = set.session_cache.clone().unwrap_or(SessionCache::None);
    sc.session_storage = match &cache {
        SessionCache::Off | SessionCache::None => {
            Arc::new(rustls::server::NoServerSessionStorage {})
        }
        SessionCache::Builtin(n) => rustls::server::ServerSessionMemoryCache::new(*n),
        SessionCache::Shared { name, size } => match zones.iter().find(|(n, _)| n == name) {
            Some((_, z)) => z.clone(),
            None => {
                let z = crate::ssl_shared_cache::SharedCache::kept_or_new(name, *size, timeout)?;
                zones.push((name.clone(), z.clone()));
                z
            }
        },
    };
    if set.session_tickets.unwrap_or(true) {
        let keys = set.ticket_keys.clone().unwrap_or_default();
        sc.ticketer = Arc::new(Tickets::new(&keys, timeout.min(u32::MAX as u64) as u32)?);
    } else if matches!(cache, SessionCache::Off | SessionCache::None) {
        sc.send_tls13_tickets = 0;
    }
    Ok(Built {
        config: Arc::new(sc),
        verify,
        client_verifier,
    })
}

/// Several certificates per server (RSA and ECDSA): the first one that can
/// sign with a scheme the client offers, in the client's order of
/// preference (as OpenSSL chooses).
#[derive(Debug)]
struct PickCert {
    keys: Vec<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for PickCert {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let offered = hello.signature_schemes();
        for scheme in offered {
            if let Some(k) = self
                .keys
                .iter()
                .find(|k| k.key.choose_scheme(std::slice::from_ref(scheme)).is_some())
            {
                return Some(k.clone());
            }
        }
        self.keys.first().cloned()
    }
}

/// `ssl_verify_depth`: at most `depth` intermediate CAs between the
/// client's certificate and a CA of `ssl_client_certificate` (OpenSSL's
/// count: 0 means signed directly by such a CA; 1, the default, allows one
/// intermediate; a trusted certificate the client also sends is not one).
#[derive(Debug)]
struct DepthLimit {
    inner: Arc<dyn ClientCertVerifier>,
    /// The trusted certificates, to tell a sent root from an intermediate.
    roots: Vec<CertificateDer<'static>>,
    depth: usize,
}

impl ClientCertVerifier for DepthLimit {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }
    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if tls_conf::intermediates_between(&self.roots, intermediates) > self.depth {
            return Err(rustls::Error::General(
                "certificate chain too long (ssl_verify_depth)".into(),
            ));
        }
        self.inner
            .verify_client_cert(end_entity, intermediates, now)
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The handshake's client verifier under every `ssl_verify_client` mode:
/// any certificate is taken (the client still proves it holds the key);
/// [`verdict`] judges it after the handshake.
#[derive(Debug)]
struct AnyClientCert {
    provider: Arc<CryptoProvider>,
    hints: Vec<DistinguishedName>,
}

impl ClientCertVerifier for AnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

// -------------------------------------------------------------------- SNI

/// A TLS address's servers, for choosing the configuration by SNI.
struct Sni {
    /// (server names, configuration) in configuration order.
    servers: Vec<(Vec<String>, Option<Arc<ServerConfig>>)>,
    default: usize,
}

impl ChooseConfig for Sni {
    fn choose(&self, hello: &ClientHello<'_>) -> Result<Arc<ServerConfig>, String> {
        let i = match hello.server_name() {
            Some(name) => pick_by_name(self.servers.iter().map(|(n, _)| n.as_slice()), name)
                .unwrap_or(self.default),
            None => self.default,
        };
        self.servers
            .get(i)
            .and_then(|(_, c)| c.clone())
            .ok_or_else(|| {
                "no \"ssl_certificate\" is defined in server listening on SSL port".to_string()
            })
    }
}

/// nginx's server-name order: the exact name, the longest leading wildcard
/// (`*.example.com`, `.example.com`), the longest trailing one (`www.*`).
/// Returns the position in `names`, `None` for the default server.
fn pick_by_name<'a>(names: impl Iterator<Item = &'a [String]>, host: &str) -> Option<usize> {
    let host = host.to_ascii_lowercase();
    let host = host.trim_end_matches('.');
    let mut leading: Option<(usize, usize)> = None;
    let mut trailing: Option<(usize, usize)> = None;
    for (i, list) in names.enumerate() {
        for n in list {
            if n == host {
                return Some(i);
            }
            let lead = if let Some(suffix) = n.strip_prefix('*') {
                host.ends_with(suffix).then_some(suffix.len())
            } else if let Some(bare) = n.strip_prefix('.') {
                (host == bare || host.ends_with(n.as_str())).then_some(n.len())
            } else {
                None
            };
            if let Some(len) = lead {
                if leading.is_none_or(|(_, l)| len > l) {
                    leading = Some((i, len));
                }
            }
            if let Some(prefix) = n.strip_suffix('*') {
                if host.starts_with(prefix) && trailing.is_none_or(|(_, l)| prefix.len() > l) {
                    trailing = Some((i, prefix.len()));
                }
            }
        }
    }
    leading.or(trailing).map(|(i, _)| i)
}

/// The TLS option for the listener bound to `addr` (serving `servers`,
/// `default` among them), or `None` when no `listen ... ssl` names it.
pub fn listener_tls(
    conf: &HttpConf,
    addr: SocketAddr,
    servers: &[usize],
    default: usize,
) -> Option<TlsListen> {
    if !ssl_addresses(conf).iter().any(|(a, _)| *a == addr) {
        return None;
    }
    let list: Vec<(Vec<String>, Option<Arc<ServerConfig>>)> = servers
        .iter()
        .filter_map(|&i| conf.servers.get(i))
        .map(|s| {
            (
                s.server_names.clone(),
                s.ssl.built.as_ref().map(|b| b.config.clone()),
            )
        })
        .collect();
    let default_pos = servers.iter().position(|&i| i == default).unwrap_or(0);
    let timeout = conf
        .servers
        .get(default)
        .map_or(60_000, |s| s.client_header_timeout);
    Some(TlsListen {
        config: std::rc::Rc::new(Sni {
            servers: list,
            default: default_pos,
        }),
        handshake_timeout: timeout,
        plain_fallback: true,
    })
}

// ------------------------------------------------------------ per request

/// What nginx's `ngx_http_process_request` refuses on a TLS port: a plain
/// HTTP request (497, sent as 400 "The plain HTTP request was sent to HTTPS
/// port") and, with `ssl_verify_client on`, a client without a certificate
/// (496, 400 "No required SSL certificate was sent"). `None` on a plain
/// port or when all is well; costs two flag checks on a plain port.
pub fn refuse(
    core: &Core,
    c: ConnId,
    conf: &HttpConf,
    servers: &[usize],
    default: usize,
    req: &Request,
) -> Option<Response> {
    let plain = core.is_plain_on_tls(c);
    let info = core.tls_info(c);
    if !plain && info.is_none() {
        return None;
    }
    let server_i = match req.host() {
        Some(h) if servers.len() > 1 => {
            let list = servers.iter().filter_map(|&i| conf.servers.get(i));
            let pos = pick_by_name(list.map(|s| s.server_names.as_slice()), h);
            pos.and_then(|p| servers.get(p).copied()).unwrap_or(default)
        }
        _ => default,
    };
    let server: &ServerConf = conf.servers.get(server_i)?;
    let number = core.conn(c).map_or(0, |x| x.number);
    let peer = core.conn(c).and_then(|x| x.peer);
    let cx = crate::log_error::head(
        req,
        number,
        peer,
        crate::log_error::server_name(conf, server_i),
    )
    .with_chain(crate::log_error::server_chain(conf, server_i))
    .with_action("reading client request headers");
    if plain {
        gyre_core::log_ctx!(INFO, &cx, "client sent plain HTTP request to HTTPS port");
        return Some(Response::error(497));
    }
    let info = info?;
    let verify = server.ssl.built.as_ref().map_or(Verify::Off, |b| b.verify);
    let verifier = server
        .ssl
        .built
        .as_ref()
        .and_then(|b| b.client_verifier.as_deref());
    if verify != Verify::Off && info.client_verified {
        let v = info
            .client_verify
            .get_or_init(|| verdict(verifier, &info.client_certs));
        if let (ClientVerify::Failed(why), Verify::On | Verify::Optional) = (v, verify) {
            gyre_core::log_ctx!(INFO, &cx, "client SSL certificate verify error: ({why})");
            return Some(Response::error(495));
        }
    }
    if verify == Verify::On && !info.client_verified {
        gyre_core::log_ctx!(INFO, &cx, "client sent no required SSL certificate");
        return Some(Response::error(496));
    }
    None
}

/// The verdict on a client's certificates (leaf first), with OpenSSL's
/// codes and texts for `$ssl_client_verify` and the log.
fn verdict(
    verifier: Option<&dyn ClientCertVerifier>,
    certs: &[rustls::pki_types::CertificateDer<'static>],
) -> ClientVerify {
    let Some(leaf) = certs.first() else {
        return ClientVerify::Failed("20:unable to get local issuer certificate".into());
    };
    // OpenSSL's distinctions for an issuer it cannot find: the leaf names
    // itself, or was sent alone, or the chain sent ends untrusted.
    let unknown = || {
        if tls_x509::self_issued(leaf) {
            "18:self-signed certificate"
        } else if certs.len() == 1 {
            "21:unable to verify the first certificate"
        } else {
            "20:unable to get local issuer certificate"
        }
    };
    let Some(v) = verifier else {
        return ClientVerify::Failed(unknown().into());
    };
    use rustls::CertificateError as E;
    match v.verify_client_cert(leaf, &certs[1..], rustls::pki_types::UnixTime::now()) {
        Ok(_) => ClientVerify::Success,
        Err(e) => ClientVerify::Failed(
            match e {
                rustls::Error::InvalidCertificate(ce) => match ce {
                    E::UnknownIssuer => unknown(),
                    E::Expired | E::ExpiredContext { .. } => "10:certificate has expired",
                    E::NotValidYet | E::NotValidYetContext { .. } => {
                        "9:certificate is not yet valid"
                    }
                    E::BadSignature => "7:certificate signature failure",
                    E::Revoked => "23:certificate revoked",
                    E::InvalidPurpose | E::InvalidPurposeContext { .. } => {
                        "26:unsupported certificate purpose"
                    }
                    _ => "79:invalid certificate",
                },
                // OpenSSL stops building the chain at the depth; its last
                // word is then the issuer it did not look for.
                rustls::Error::General(g) if g.contains("ssl_verify_depth") => {
                    "20:unable to get local issuer certificate"
                }
                _ => "79:invalid certificate",
            }
            .into(),
        ),
    }
}

/// nginx's TLS variables for the access log (`$ssl_protocol`,
/// `$ssl_cipher`, `$ssl_server_name`, `$ssl_session_reused`,
/// `$ssl_alpn_protocol`, `$https`, `$scheme`); `None` for a name that is not
/// one of them. Read from what the core kept after the handshake.
pub fn variable(core: &Core, c: ConnId, name: &str) -> Option<Cow<'static, str>> {
    let info = core.tls_info(c);
    match name {
        "https" => Some(Cow::Borrowed(if info.is_some() { "on" } else { "" })),
        "scheme" => Some(Cow::Borrowed(if info.is_some() { "https" } else { "http" })),
        _ => tls_var(info, var_name(name)?),
    }
}

/// The `$ssl_*` variables (names as the registry keeps them).
const VARS: &[&str] = &[
    "ssl_protocol",
    "ssl_cipher",
    "ssl_server_name",
    "ssl_session_reused",
    "ssl_alpn_protocol",
    "ssl_client_verify",
    "ssl_client_s_dn",
    "ssl_client_i_dn",
    "ssl_client_serial",
    "ssl_client_fingerprint",
];

/// `name` if it is one of the `$ssl_*` variables.
pub fn var_name(name: &str) -> Option<&'static str> {
    VARS.iter().copied().find(|v| *v == name)
}

/// An `$ssl_*` variable of a connection (`info`: `None` on a plain one,
/// where each is empty). The client certificate's are read from its DER
/// when asked for.
pub fn tls_var(info: Option<&TlsInfo>, name: &str) -> Option<Cow<'static, str>> {
    let Some(i) = info else {
        return Some(Cow::Borrowed(""));
    };
    let leaf = i.client_certs.first();
    Some(match name {
        "ssl_protocol" => Cow::Borrowed(i.protocol_name()),
        "ssl_cipher" => Cow::Borrowed(gyre_core::event::tls_ciphers::openssl_name(i.suite)),
        "ssl_server_name" => Cow::Owned(i.server_name.as_deref().unwrap_or("").to_string()),
        "ssl_session_reused" => Cow::Borrowed(if i.resumed { "r" } else { "." }),
        "ssl_alpn_protocol" => Cow::Owned(
            i.alpn
                .as_deref()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .unwrap_or_default(),
        ),
        "ssl_client_verify" => match (leaf, i.client_verify.get()) {
            (Some(_), Some(ClientVerify::Success)) => Cow::Borrowed("SUCCESS"),
            (Some(_), Some(ClientVerify::Failed(why))) => {
                // OpenSSL's text without its code: `FAILED:self-signed certificate`.
                let text = why.split_once(':').map_or(&**why, |(_, t)| t);
                Cow::Owned(format!("FAILED:{text}"))
            }
            _ => Cow::Borrowed("NONE"),
        },
        "ssl_client_s_dn" => Cow::Owned(
            leaf.and_then(|c| tls_x509::subject_dn(c))
                .unwrap_or_default(),
        ),
        "ssl_client_i_dn" => Cow::Owned(
            leaf.and_then(|c| tls_x509::issuer_dn(c))
                .unwrap_or_default(),
        ),
        "ssl_client_serial" => Cow::Owned(
            leaf.and_then(|c| tls_x509::serial_hex(c))
                .unwrap_or_default(),
        ),
        "ssl_client_fingerprint" => Cow::Owned(leaf.map(|c| sha1_hex(c)).unwrap_or_default()),
        _ => return None,
    })
}

/// nginx's `$ssl_client_fingerprint`: SHA-1 of the DER, lower-case hex.
fn sha1_hex(der: &[u8]) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, der);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sni_name_order() {
        let names: Vec<Vec<String>> = vec![
            vec!["example.com".into()],
            vec!["*.example.com".into()],
            vec!["www.*".into()],
            vec![".example.org".into()],
        ];
        let pick = |h: &str| pick_by_name(names.iter().map(Vec::as_slice), h);
        assert_eq!(pick("example.com"), Some(0));
        assert_eq!(pick("EXAMPLE.com."), Some(0));
        assert_eq!(pick("a.example.com"), Some(1));
        assert_eq!(pick("www.example.net"), Some(2));
        assert_eq!(pick("www.example.com"), Some(1), "leading wildcard first");
        assert_eq!(pick("example.org"), Some(3));
        assert_eq!(pick("x.example.org"), Some(3));
        assert_eq!(pick("other.net"), None);
    }

    #[test]
    fn curves() {
        assert_eq!(kx_groups("X25519:prime256v1:secp384r1").unwrap().len(), 3);
        assert!(!kx_groups("auto").unwrap().is_empty());
        assert!(kx_groups("secp521r1")
            .unwrap_err()
            .contains("unsupported curve \"secp521r1\""));
    }
}
