//! TLS for the kv process (Redis's `tls.c` settings): `tls-port`,
//! `tls-cert-file`, `tls-key-file`, `tls-ca-cert-file`, `tls-auth-clients`,
//! `tls-protocols`, and `port 0` for a TLS-only server, with Redis's
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
    let mut v = Vec::new();
    // redis.conf writes them as one quoted, space-separated argument.
    for p in d.args.iter().flat_map(|a| a.split_whitespace()) {
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
    c.tls.protocols = v;
    Ok(())
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
    let p = tls_conf::provider();
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
    let sc = b.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(ck)));
    Ok(Arc::new(sc))
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

/// The CONFIG names of the file settings.
pub const FILE_PARAMS: [&str; 3] = ["tls-cert-file", "tls-key-file", "tls-ca-cert-file"];

impl TlsSwap {
    pub fn new(t: &KvTls) -> io::Result<TlsSwap> {
        Ok(TlsSwap {
            config: RefCell::new(server_config(t)?),
            settings: RefCell::new(t.clone()),
            stamps: RefCell::new(stamps(t)),
        })
    }

    /// CONFIG GET of one of [`FILE_PARAMS`].
    pub fn get(&self, name: &str) -> String {
        let t = self.settings.borrow();
        let p = match name {
            "tls-cert-file" => &t.cert_file,
            "tls-key-file" => &t.key_file,
            _ => &t.ca_cert_file,
        };
        p.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    /// CONFIG SET of some of [`FILE_PARAMS`] at once: the files are read
    /// and the configuration replaced, or nothing changes and the reason
    /// is returned (for the log).
    pub fn set(&self, changes: &[(&str, &str)]) -> io::Result<()> {
        let mut t = self.settings.borrow().clone();
        for (name, v) in changes {
            let v = (!v.is_empty()).then(|| PathBuf::from(v));
            match *name {
                "tls-cert-file" => t.cert_file = v,
                "tls-key-file" => t.key_file = v,
                _ => t.ca_cert_file = v,
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
