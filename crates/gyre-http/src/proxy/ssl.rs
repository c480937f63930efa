//! TLS to upstreams (`proxy_pass https://…`): the `proxy_ssl_*`
//! directives with nginx 1.22's defaults and merge, the rustls client
//! configuration a location gets (nginx's `ngx_http_proxy_merge_ssl` and
//! `ngx_http_proxy_set_ssl`), the name a connection checks and sends
//! (`ngx_http_upstream_ssl_name`), and the `[error]` text of a refused
//! certificate (`ngx_http_upstream_ssl_handshake`).
//!
//! Configurations are built when the configuration is read (so `gyre -t`
//! reports an unreadable file), once per distinct settings: locations with
//! the same settings share one, and with it its session cache
//! (`proxy_ssl_session_reuse`). rustls keys cached sessions by server name
//! where nginx keeps one per peer; a session offered to another peer of the
//! same name is refused by it and the handshake is a full one.
//!
//! Not here: `proxy_ssl_password_file` (rustls reads no encrypted keys)
//! and `proxy_ssl_conf_command` (no OpenSSL) are unknown directives, as
//! their `ssl_*` counterparts are on gyre's server side; certificates
//! with variables are refused.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;

use gyre_core::conf::{ConfCtx, Directive};
use gyre_core::event::tls::rustls;
use gyre_core::event::tls_client::{self, client_config, ClientTlsOptions};
use gyre_core::event::{Msec, TlsConnect};

use super::conf::ProxyConf;
use super::handler::Env;
use crate::complex_value::ComplexValue;
use crate::conf::{pick, HttpConf, LocSettings};
use crate::request::HttpRequest;
use crate::ssl::Proto;

/// The `proxy_ssl_*` settings of one level; `None`: not set here.
#[derive(Debug, Clone, Default)]
pub struct SslSettings {
    pub verify: Option<bool>,
    pub verify_depth: Option<usize>,
    pub trusted_certificate: Option<PathBuf>,
    pub crl: Option<PathBuf>,
    pub server_name: Option<bool>,
    pub name: Option<ComplexValue>,
    pub session_reuse: Option<bool>,
    pub protocols: Option<Vec<Proto>>,
    pub ciphers: Option<String>,
    pub certificate: Option<PathBuf>,
    pub certificate_key: Option<PathBuf>,
}

/// A location's TLS to its upstream.
#[derive(Debug)]
pub struct UpstreamTls {
    pub config: Arc<rustls::ClientConfig>,
    /// `proxy_ssl_name` (default: the host of the `proxy_pass` URL).
    pub name: Option<ComplexValue>,
    /// `proxy_ssl_session_reuse`: nginx then sets TCP_NODELAY before the
    /// handshake (an abbreviated one may wait on Nagle otherwise).
    pub session_reuse: bool,
}

/// The `proxy_ssl_*` directives (one setter, by name).
pub fn set(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    // nginx reads these files against the configuration's directory
    // (`ngx_conf_full_name(cycle, name, 1)`).
    let path = |a: &str| cx.conf_dir().join(a);
    let name = if d.name == "proxy_ssl_name" {
        Some(ComplexValue::compile(d.arg(0), &mut c.vars)?)
    } else {
        None
    };
    let s = &mut c.settings(cx)?.proxy.ssl;
    match d.name.as_str() {
        "proxy_ssl_verify" => s.verify = Some(d.flag()?),
        "proxy_ssl_verify_depth" => s.verify_depth = Some(d.number(0)? as usize),
        "proxy_ssl_trusted_certificate" => s.trusted_certificate = Some(path(d.arg(0))),
        "proxy_ssl_crl" => s.crl = Some(path(d.arg(0))),
        "proxy_ssl_server_name" => s.server_name = Some(d.flag()?),
        "proxy_ssl_name" => s.name = name,
        "proxy_ssl_session_reuse" => s.session_reuse = Some(d.flag()?),
        "proxy_ssl_protocols" => s.protocols = Some(crate::ssl::parse_protocols(&d.args)?),
        // Checked when a location uses it (nginx: an http:// location
        // takes any string).
        "proxy_ssl_ciphers" => s.ciphers = Some(d.arg(0).to_string()),
        "proxy_ssl_certificate" | "proxy_ssl_certificate_key" => {
            if d.arg(0).contains('$') {
                return Err(format!("variables in \"{}\" are not supported", d.name));
            }
            if d.name == "proxy_ssl_certificate" {
                s.certificate = Some(path(d.arg(0)));
            } else {
                s.certificate_key = Some(path(d.arg(0)));
            }
        }
        other => return Err(format!("unknown directive \"{other}\"")),
    }
    Ok(())
}

/// What decides a client configuration: locations with equal keys share
/// one.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    verify: bool,
    verify_depth: usize,
    trusted: Option<PathBuf>,
    crl: Option<PathBuf>,
    server_name: bool,
    session_reuse: bool,
    protocols: Vec<Proto>,
    ciphers: String,
    certificate: Option<(PathBuf, PathBuf)>,
}

thread_local! {
    /// The configurations built during one read of the configuration
    /// (which runs on one thread): emptied by [`begin_read`], so a reload
    /// reads the files again.
    static BUILT: RefCell<Vec<(Key, Arc<rustls::ClientConfig>)>> = const { RefCell::new(Vec::new()) };
}

/// Forgets the configurations of the previous read.
pub fn begin_read() {
    BUILT.with(|b| b.borrow_mut().clear());
}

/// A proxied location's TLS from its levels (outermost first), as nginx
/// merges it: each setting from the innermost level that has it, else
/// nginx 1.22's default.
pub fn resolve(levels: &[&LocSettings]) -> Result<Arc<UpstreamTls>, String> {
    let key = Key {
        verify: pick(levels, |s| s.proxy.ssl.verify).unwrap_or(false),
        verify_depth: pick(levels, |s| s.proxy.ssl.verify_depth).unwrap_or(1),
        trusted: pick(levels, |s| s.proxy.ssl.trusted_certificate.clone()),
        crl: pick(levels, |s| s.proxy.ssl.crl.clone()),
        server_name: pick(levels, |s| s.proxy.ssl.server_name).unwrap_or(false),
        session_reuse: pick(levels, |s| s.proxy.ssl.session_reuse).unwrap_or(true),
        // nginx 1.22's default is "TLSv1 TLSv1.1 TLSv1.2" (TLSv1.3 joined
        // it in 1.23.4): of those, rustls has TLSv1.2.
        protocols: pick(levels, |s| s.proxy.ssl.protocols.clone())
            .unwrap_or_else(|| vec![Proto::Tls12]),
        ciphers: pick(levels, |s| s.proxy.ssl.ciphers.clone()).unwrap_or_else(|| "DEFAULT".into()),
        certificate: match (
            pick(levels, |s| s.proxy.ssl.certificate.clone()),
            pick(levels, |s| s.proxy.ssl.certificate_key.clone()),
        ) {
            (None, _) => None,
            (Some(cert), None) => {
                return Err(format!(
                    "no \"proxy_ssl_certificate_key\" is defined for certificate \"{}\"",
                    cert.display()
                ))
            }
            (Some(cert), Some(key)) => Some((cert, key)),
        },
    };
    let session_reuse = key.session_reuse;
    let config = match BUILT.with(|b| {
        b.borrow()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, c)| c.clone())
    }) {
        Some(c) => c,
        None => {
            let c = build(&key)?;
            BUILT.with(|b| b.borrow_mut().push((key, c.clone())));
            c
        }
    };
    Ok(Arc::new(UpstreamTls {
        config,
        name: pick(levels, |s| s.proxy.ssl.name.clone()),
        session_reuse,
    }))
}

/// nginx's load error for a file named by a directive.
fn load_error(what: &str, path: &std::path::Path, e: &std::io::Error) -> String {
    let reason = if e.raw_os_error().is_some() {
        format!("BIO_new_file() failed ({})", gyre_core::sys_error_text(e))
    } else {
        e.to_string()
    };
    format!("cannot load {what} \"{}\": {reason}", path.display())
}

/// The configuration for `k`, its checks in nginx's order
/// (`ngx_http_proxy_set_ssl`): ciphers, certificate, trusted CAs, CRL.
fn build(k: &Key) -> Result<Arc<rustls::ClientConfig>, String> {
    let tls12_suites = gyre_core::event::tls_ciphers::parse(&k.ciphers)?;
    if let Some((cert, key)) = &k.certificate {
        // Read here for nginx's texts; the core reads them again.
        gyre_core::event::tls_conf::load_certs(cert)
            .map_err(|e| load_error("certificate", cert, &e))?;
        gyre_core::event::tls_conf::load_key(key)
            .map_err(|e| load_error("certificate key", key, &e))?;
        let provider = gyre_core::event::tls_conf::provider();
        gyre_core::event::tls_conf::certified_key(&provider, cert, key)
            .map_err(|e| format!("SSL_CTX_use_PrivateKey(\"{}\") failed ({e})", key.display()))?;
    }
    if k.verify && k.trusted.is_none() {
        return Err("no proxy_ssl_trusted_certificate for proxy_ssl_verify".into());
    }
    if let (true, Some(t)) = (k.verify, &k.trusted) {
        gyre_core::event::tls_conf::load_certs(t).map_err(|e| {
            let reason = if e.raw_os_error().is_some() {
                gyre_core::sys_error_text(&e)
            } else {
                e.to_string()
            };
            format!(
                "SSL_CTX_load_verify_locations(\"{}\") failed ({reason})",
                t.display()
            )
        })?;
    }
    if let (true, Some(crl)) = (k.verify, &k.crl) {
        gyre_core::event::tls_conf::load_crls(crl).map_err(|e| {
            let reason = if e.raw_os_error().is_some() {
                gyre_core::sys_error_text(&e)
            } else {
                e.to_string()
            };
            format!(
                "X509_LOOKUP_load_file(\"{}\") failed ({reason})",
                crl.display()
            )
        })?;
    }
    let o = ClientTlsOptions {
        verify: k.verify,
        // nginx reads the trusted certificates only when verifying.
        trusted: k.trusted.as_deref().filter(|_| k.verify),
        crl: k.crl.as_deref().filter(|_| k.verify),
        server_name: k.server_name,
        alpn: Vec::new(),
        verify_depth: Some(k.verify_depth),
        certificate: k
            .certificate
            .as_ref()
            .map(|(c, key)| (c.as_path(), key.as_path())),
        versions: Some(crate::ssl::versions(&k.protocols)),
        tls12_suites: Some(tls12_suites),
        no_session_reuse: !k.session_reuse,
    };
    client_config(&o).map_err(|e| e.to_string())
}

/// nginx's `ngx_http_upstream_ssl_name`: the name without a port
/// (`$proxy_host` and `$http_host` carry one), and whether it may be sent
/// as SNI (not an IP literal, RFC 6066).
fn strip_port(name: &str) -> &str {
    let from = if name.starts_with('[') {
        name.find(']').unwrap_or(0)
    } else {
        0
    };
    match name[from..].find(':') {
        Some(i) => &name[..from + i],
        None => name,
    }
}

/// The TLS of a connection to the upstream of `conf` (`host`: the host of
/// the `proxy_pass` URL, the default name): the location's configuration
/// and this request's `proxy_ssl_name`.
pub(super) fn connect_tls(
    env: &Env<'_, '_>,
    r: &mut HttpRequest,
    conf: &ProxyConf,
    now: Msec,
) -> Option<TlsConnect> {
    let tls = conf.tls.as_ref()?;
    let mut buf = Vec::new();
    let name = match &tls.name {
        Some(cv) => {
            let e = r.st.env(env.conf, None, now, env.cx.unix_ms);
            cv.eval(&env.conf.vars, &mut r.vars, &e, &mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        }
        None => conf.host.clone(),
    };
    let name = strip_port(&name);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    // A name rustls cannot carry (not a DNS name or an address) is
    // neither sent nor matched: the placeholder fails verification.
    let name = rustls::pki_types::ServerName::try_from(name.to_string())
        .or_else(|_| rustls::pki_types::ServerName::try_from("localhost".to_string()))
        .ok()?;
    Some(TlsConnect {
        config: tls.config.clone(),
        name,
    })
}

/// The `[error]` text of a failed handshake with an upstream: nginx's
/// verdict on a refused certificate, else OpenSSL's handshake failure.
pub(super) fn handshake_error(e: &std::io::Error) -> String {
    match tls_client::verify_failure(e) {
        Some(v) => v.to_string(),
        None => format!("SSL_do_handshake() failed (SSL: {e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_port() {
        assert_eq!(strip_port("example.com:8443"), "example.com");
        assert_eq!(strip_port("example.com"), "example.com");
        assert_eq!(strip_port("[::1]:443"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
        assert_eq!(strip_port(""), "");
    }
}
