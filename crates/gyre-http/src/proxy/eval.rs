//! `proxy_pass` with variables (nginx's `ngx_http_proxy_eval` and the
//! target lookup of `ngx_http_upstream_init_request`): the URL evaluated
//! per request, its scheme, host, port and URI taken apart; then an
//! `upstream {}` block of that name (or an upstream another `proxy_pass`
//! made for that host and port), else an address literal connected to
//! directly, else nginx's `no resolver defined to resolve NAME` and 502
//! (gyre has no `resolver`).
//!
//! Errors are nginx's status and `[error]` text: `invalid URL prefix in
//! "…"` and `… in upstream "…"` (500), the resolver line (502).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use gyre_core::event::PeerAddr;

use super::conf::{split_url, ProxyConf};
use crate::upstream::round_robin::{Peer, Peers};
use crate::upstream::set::UpstreamSet;
use crate::upstream::{Method, Upstream};

/// Where an evaluated URL goes.
#[derive(Debug)]
pub enum Target {
    /// The upstream of this index in the configuration's set.
    Upstream(usize),
    /// An address, as a one-peer upstream of the request's own.
    Direct(Box<Upstream>),
}

/// An evaluated `proxy_pass`: the request's settings with its target.
#[derive(Debug)]
pub struct Evaluated {
    pub conf: Arc<ProxyConf>,
    pub target: Target,
}

/// nginx's failure: the status and the `[error]` line.
pub type Failure = (u16, String);

/// Evaluates `url` for a location whose settings are `base`.
pub fn eval(url: &str, base: &ProxyConf, set: &UpstreamSet) -> Result<Evaluated, Failure> {
    let scheme = |s: &str| url.len() > s.len() && url[..s.len()].eq_ignore_ascii_case(s);
    let (https, rest) = if url.is_char_boundary(7) && scheme("http://") {
        (false, &url[7..])
    } else if url.is_char_boundary(8) && scheme("https://") {
        (true, &url[8..])
    } else {
        return Err((500, format!("invalid URL prefix in \"{url}\"")));
    };
    let default_port = if https { 443 } else { 80 };
    let (host, port, uri) =
        split_url(rest).map_err(|e| (500, format!("{e} in upstream \"{rest}\"")))?;
    let unix = host.starts_with("unix:");
    let resolved_port = port.unwrap_or(default_port);
    // nginx's lookup: a block matches a URL without a port; an upstream
    // made for a `proxy_pass host:port` matches that port.
    let found = set.entries.iter().position(|e| {
        e.name.eq_ignore_ascii_case(&host)
            && match e.port {
                None => port.is_none(),
                Some(p) => p == resolved_port,
            }
    });
    let target = match found {
        Some(i) => Target::Upstream(i),
        None => {
            let addr = if let Some(path) = host.strip_prefix("unix:") {
                PeerAddr::Unix(path.into())
            } else if let Ok(ip) = host.parse::<IpAddr>() {
                PeerAddr::Inet(SocketAddr::new(ip, resolved_port))
            } else {
                return Err((502, format!("no resolver defined to resolve {host}")));
            };
            let peer = Peer::new(addr, &host);
            let peers = Peers::new(&host, vec![peer], Vec::new());
            Target::Direct(Box::new(Upstream::new(peers, Method::RoundRobin)))
        }
    };
    let mut conf = base.clone();
    conf.https = https;
    conf.proxy_host = crate::upstream::http_request::proxy_host(&host, port, https, unix);
    conf.host = host.clone();
    conf.proxy_port = if unix {
        String::new()
    } else {
        resolved_port.to_string()
    };
    // The URI part replaces the whole URI ("?x" is "/?x"); without one
    // the client's goes, as with a static proxy_pass.
    conf.uri = uri.map(|u| {
        if u.starts_with('?') {
            format!("/{u}")
        } else {
            u
        }
    });
    conf.upstream = match target {
        Target::Upstream(i) => i,
        Target::Direct(_) => usize::MAX,
    };
    Ok(Evaluated {
        conf: Arc::new(conf),
        target,
    })
}
