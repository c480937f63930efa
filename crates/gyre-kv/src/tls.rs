//! TLS for the kv process (Redis's `tls.c` settings): `tls-port`,
//! `tls-cert-file`, `tls-key-file`, `tls-ca-cert-file`, `tls-auth-clients`,
//! `tls-protocols`, `tls-ciphers`, `tls-ciphersuites`,
//! `tls-prefer-server-ciphers`, and `port 0` for a TLS-only server, with Redis's
//! defaults (clients must present a certificate unless `tls-auth-clients`
//! is `no` or `optional`; TLSv1.2 and TLSv1.3). Each is accepted with
//! hyphens, as in redis.conf, or underscores, as the other `kv {}`
//! directives are spelled.
//!
//! The record layer is gyre-core's: the TLS listener is a listener like the
//! plain one with a rustls configuration attached, and the RESP protocol
//! reads and writes through it unchanged. Certificates are read when the
//! configuration is (so `gyre -t` reports them) and again when the kv
//! process starts; a reload that changes none of these settings keeps the
//! kv process and its certificate (Redis too reads them only at start or
//! on CONFIG SET).

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use gyre_core::conf::{ConfCtx, Directive};
use gyre_core::event::tls::rustls;
use gyre_core::event::tls::ChooseConfig;
use gyre_core::event::tls_conf;

use crate::conf::KvConf;

/// `tls-auth-clients`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthClients {
    #[default]
    Yes,
    No,
    Optional,
}

/// The TLS settings of `kv {}`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KvTls {
    /// `port`: `Some(0)` turns the plain port off.
    pub port: Option<u16>,
    pub tls_port: Option<u16>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub ca_cert_file: Option<PathBuf>,
    pub auth_clients: AuthClients,
    /// `tls-protocols`; empty: TLSv1.2 and TLSv1.3.
    pub protocols: Vec<String>,
    /// `tls-ciphers` (TLS 1.2, an OpenSSL cipher string); `None`: rustls's
    /// six suites, as OpenSSL's default list leaves them.
    pub ciphers: Option<String>,
    /// `tls-ciphersuites` (TLS 1.3 names joined by `:`).
    pub ciphersuites: Option<String>,
    /// `tls-prefer-server-ciphers` (default no: the client's order).
    pub prefer_server_ciphers: bool,
}

pub fn set_port(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.tls.port = Some(port(d)?);
    Ok(())
}

pub fn set_tls_port(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.tls.tls_port = Some(port(d)?);
    Ok(())
}

fn port(d: &Directive) -> Result<u16, String> {
    d.arg(0)
        .parse::<u16>()
        .map_err(|_| format!("Invalid {} value", d.name))
}

pub fn set_cert_file(c: &mut KvConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.tls.cert_file = Some(cx.full_path(d.arg(0)));
    Ok(())
}

pub fn set_key_file(c: &mut KvConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.tls.key_file = Some(cx.full_path(d.arg(0)));
    Ok(())
}

pub fn set_ca_cert_file(c: &mut KvConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.tls.ca_cert_file = Some(cx.full_path(d.arg(0)));
    Ok(())
}

pub fn set_auth_clients(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.tls.auth_clients = match d.arg(0) {
        "yes" => AuthClients::Yes,
        "no" => AuthClients::No,
        "optional" => AuthClients::Optional,
        _ => return Err("argument(s) must be one of the following: no, yes, optional".into()),
    };
    Ok(())
}

pub fn set_protocols(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.tls.protocols = parse_protocols(&d.args.join(" "))?;
    Ok(())
}

pub fn set_ciphers(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    gyre_core::event::tls_ciphers::parse(d.arg(0))
        .map_err(|e| ciphers_error("ciphers", d.arg(0), &e))?;
    c.tls.ciphers = Some(d.arg(0).to_string());
    Ok(())
}

pub fn set_ciphersuites(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    gyre_core::event::tls_ciphers::parse_tls13(d.arg(0))
        .map_err(|e| ciphers_error("ciphersuites", d.arg(0), &e))?;
    c.tls.ciphersuites = Some(d.arg(0).to_string());
    Ok(())
}

pub fn set_prefer_server_ciphers(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.tls.prefer_server_ciphers = yes_no(d.arg(0))?;
    Ok(())
}

fn yes_no(v: &str) -> Result<bool, String> {
    match v {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

/// Redis's log line for a cipher list OpenSSL refuses, with the reason.
fn ciphers_error(what: &str, spec: &str, why: &str) -> String {
    format!("Failed to configure {what}: {spec} ({why})")
}

fn parse_protocols(text: &str) -> Result<Vec<String>, String> {
    let mut v = Vec::new();
    // redis.conf writes them as one quoted, space-separated argument.
    for p in text.split_whitespace() {
        match p {
            "TLSv1.2" | "TLSv1.3" => v.push(p.to_string()),
            "TLSv1" | "TLSv1.1" => {
                return Err(format!(
                    "\"{p}\" is not supported (rustls speaks TLSv1.2 and TLSv1.3 only)"
                ))
            }
            _ => return Err(format!("Invalid tls-protocols specified: {p}")),
        }
    }
    Ok(v)
}

/// Where the TLS port listens: the host of the first `listen` (Redis binds
/// both ports to its `bind` addresses), 127.0.0.1 without one.
pub fn tls_addr(c: &KvConf) -> Option<SocketAddr> {
    let port = c.tls.tls_port.filter(|&p| p != 0)?;
    let ip = c
        .listen
        .first()
        .map_or_else(|| [127, 0, 0, 1].into(), |l| l.addr.ip());
    Some(SocketAddr::new(ip, port))
}

fn file_error(what: &str, p: &std::path::Path, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("Failed to load {what} {}: {e}", p.display()),
    )
}

/// The rustls configuration for the TLS port, with Redis's errors.
pub fn server_config(t: &KvTls) -> io::Result<Arc<rustls::ServerConfig>> {
    let (Some(cert), Some(key)) = (&t.cert_file, &t.key_file) else {
        return Err(io::Error::other(
            "Failed to configure TLS: tls-cert-file and tls-key-file must be specified",
        ));
    };
    let p = provider(t)?;
    let ck = tls_conf::certified_key(&p, cert, key)
        .map_err(|e| file_error("certificate/private key", cert, e))?;
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = if t.protocols.is_empty() {
        vec![&rustls::version::TLS12, &rustls::version::TLS13]
    } else {
        t.protocols
            .iter()
            .map(|v| {
                if v == "TLSv1.3" {
                    &rustls::version::TLS13
                } else {
                    &rustls::version::TLS12
                }
            })
            .collect()
    };
    let b = rustls::ServerConfig::builder_with_provider(p.clone())
        .with_protocol_versions(&versions)
        .map_err(io::Error::other)?;
    let b = match (t.auth_clients, &t.ca_cert_file) {
        (AuthClients::No, _) => b.with_no_client_auth(),
        (_, None) => {
            return Err(io::Error::other(
                "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!",
            ))
        }
        (auth, Some(ca)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in tls_conf::load_certs(ca).map_err(|e| file_error("CA certificate", ca, e))? {
                roots.add(c).map_err(io::Error::other)?;
            }
            let v = rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), p);
            let v = if auth == AuthClients::Optional {
                v.allow_unauthenticated()
            } else {
                v
            };
            b.with_client_cert_verifier(v.build().map_err(io::Error::other)?)
        }
    };
    let mut sc = b.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(ck)));
    sc.ignore_client_order = t.prefer_server_ciphers;
    Ok(Arc::new(sc))
}

/// The crypto provider with the suites `tls-ciphers` and
/// `tls-ciphersuites` leave (all of rustls's when unset).
fn provider(t: &KvTls) -> io::Result<Arc<rustls::crypto::CryptoProvider>> {
    use gyre_core::event::tls_ciphers;
    let base = tls_conf::provider();
    if t.ciphers.is_none() && t.ciphersuites.is_none() {
        return Ok(base);
    }
    let mut suites = match &t.ciphersuites {
        Some(s) => tls_ciphers::parse_tls13(s)
            .map_err(|e| io::Error::other(ciphers_error("ciphersuites", s, &e)))?,
        None => base
            .cipher_suites
            .iter()
            .copied()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .collect(),
    };
    match &t.ciphers {
        Some(s) => suites.extend(
            tls_ciphers::parse(s).map_err(|e| io::Error::other(ciphers_error("ciphers", s, &e)))?,
        ),
        None => suites.extend(
            base.cipher_suites
                .iter()
                .filter(|s| s.version() == &rustls::version::TLS12),
        ),
    }
    Ok(Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: suites,
        ..(*base).clone()
    }))
}

/// The TLS port's configuration, replaced in place by CONFIG SET of
/// `tls-cert-file`, `tls-key-file` or `tls-ca-cert-file` (Redis's
/// `applyTlsCfg`, which reads the files again even when the names are the
/// same: how certificates are rotated): new handshakes use the new one,
/// established connections keep theirs.
pub struct TlsSwap {
    settings: RefCell<KvTls>,
    config: RefCell<Arc<rustls::ServerConfig>>,
    /// The files' (size, mtime) when last read.
    stamps: RefCell<Vec<Option<(u64, std::time::SystemTime)>>>,
}

fn stamps(t: &KvTls) -> Vec<Option<(u64, std::time::SystemTime)>> {
    [&t.cert_file, &t.key_file, &t.ca_cert_file]
        .iter()
        .map(|p| {
            let m = std::fs::metadata(p.as_ref()?).ok()?;
            Some((m.len(), m.modified().ok()?))
        })
        .collect()
}

impl std::fmt::Debug for TlsSwap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSwap")
            .field("settings", &self.settings.borrow())
            .finish()
    }
}

impl ChooseConfig for TlsSwap {
    fn choose(
        &self,
        _hello: &rustls::server::ClientHello<'_>,
    ) -> Result<Arc<rustls::ServerConfig>, String> {
        Ok(self.config.borrow().clone())
    }
}

/// The CONFIG GET text of one of [`PARAMS`] (the defaults without a TLS
/// port, as Redis built with TLS answers).
pub fn value(t: &KvTls, name: &str) -> String {
    let path = |p: &Option<PathBuf>| {
        p.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    match name {
        "tls-cert-file" => path(&t.cert_file),
        "tls-key-file" => path(&t.key_file),
        "tls-ca-cert-file" => path(&t.ca_cert_file),
        "tls-ciphers" => t.ciphers.clone().unwrap_or_default(),
        "tls-ciphersuites" => t.ciphersuites.clone().unwrap_or_default(),
        "tls-prefer-server-ciphers" => if t.prefer_server_ciphers { "yes" } else { "no" }.into(),
        "tls-protocols" => t.protocols.join(" "),
        _ => match t.auth_clients {
            AuthClients::Yes => "yes",
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
        }
        .into(),
    }
}

/// The CONFIG names of the settings CONFIG SET applies by building a new
/// configuration (Redis's `applyTlsCfg` for each of them).
pub const PARAMS: [&str; 8] = [
    "tls-cert-file",
    "tls-key-file",
    "tls-ca-cert-file",
    "tls-ciphers",
    "tls-ciphersuites",
    "tls-prefer-server-ciphers",
    "tls-protocols",
    "tls-auth-clients",
];

impl TlsSwap {
    pub fn new(t: &KvTls) -> io::Result<TlsSwap> {
        Ok(TlsSwap {
            config: RefCell::new(server_config(t)?),
            settings: RefCell::new(t.clone()),
            stamps: RefCell::new(stamps(t)),
        })
    }

    /// CONFIG GET of one of [`PARAMS`].
    pub fn get(&self, name: &str) -> String {
        value(&self.settings.borrow(), name)
    }

    /// CONFIG SET of some of [`PARAMS`] at once: the values are parsed,
    /// the files read and the configuration replaced, or nothing changes
    /// and the reason is returned (for the log).
    pub fn set(&self, changes: &[(&str, &str)]) -> io::Result<()> {
        let mut t = self.settings.borrow().clone();
        for (name, v) in changes {
            let text = (!v.is_empty()).then(|| v.to_string());
            match *name {
                "tls-cert-file" => t.cert_file = text.map(PathBuf::from),
                "tls-key-file" => t.key_file = text.map(PathBuf::from),
                "tls-ca-cert-file" => t.ca_cert_file = text.map(PathBuf::from),
                "tls-ciphers" => t.ciphers = text,
                "tls-ciphersuites" => t.ciphersuites = text,
                "tls-prefer-server-ciphers" => {
                    t.prefer_server_ciphers = yes_no(v).map_err(io::Error::other)?
                }
                "tls-protocols" => t.protocols = parse_protocols(v).map_err(io::Error::other)?,
                _ => {
                    t.auth_clients = match *v {
                        "yes" => AuthClients::Yes,
                        "no" => AuthClients::No,
                        "optional" => AuthClients::Optional,
                        _ => {
                            return Err(io::Error::other(
                                "argument(s) must be one of the following: no, yes, optional",
                            ))
                        }
                    }
                }
            }
        }
        let sc = server_config(&t)?;
        *self.config.borrow_mut() = sc;
        *self.stamps.borrow_mut() = stamps(&t);
        *self.settings.borrow_mut() = t;
        Ok(())
    }

    /// On a reload that keeps the kv process: the files are read again if
    /// one changed on disk (size or mtime); a failure keeps the running
    /// configuration and is logged.
    pub fn reload_if_changed(&self) {
        let now = stamps(&self.settings.borrow());
        if now == *self.stamps.borrow() {
            return;
        }
        match self.set(&[]) {
            Ok(()) => log::info!("TLS certificates reloaded"),
            Err(e) => {
                *self.stamps.borrow_mut() = now;
                log::warn!("{e}");
            }
        }
    }
}
