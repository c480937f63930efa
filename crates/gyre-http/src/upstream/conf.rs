//! The `upstream NAME { }` block (nginx's `ngx_http_upstream` block handler,
//! `ngx_http_upstream_server` and the balancer and keepalive directives),
//! read from the parsed body of a [`Block::Raw`] directive so that the http
//! module's table only needs one entry for it.
//!
//! Every error is nginx 1.22's text at nginx's place: parameters a
//! balancing method does not support (`balancing method does not support
//! parameter "backup"`, when the method comes first), bad values (`invalid
//! parameter "weight=0"`), addresses (`invalid port in upstream
//! "127.0.0.1:0"`, `host not found in upstream "…"`), `no servers are inside
//! upstream`, `no servers in upstream "NAME"` (only backup servers), zone
//! sizes, duplicates. Host names are resolved here, once, as nginx does
//! without a `resolver`; a name with several addresses gives several peers.
//!
//! [`Block::Raw`]: gyre_core::conf::Block::Raw

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use gyre_core::conf::value::{parse_number, parse_size, parse_time_ms, parse_time_sec};
use gyre_core::conf::{ConfError, Directive};
use gyre_core::event::PeerAddr;

use super::keepalive::KeepaliveConf;
use super::round_robin::{Peer, Peers};
use super::{Method, Upstream};

/// Which `server` parameters the current method allows (nginx's
/// `NGX_HTTP_UPSTREAM_*` flags).
#[derive(Clone, Copy)]
struct Flags {
    backup: bool,
}

/// One `server` line.
#[derive(Clone, Debug)]
pub struct ServerConf {
    /// The address argument as written.
    pub name: String,
    pub addrs: Vec<PeerAddr>,
    pub weight: i64,
    pub max_fails: u32,
    pub fail_timeout: i64,
    pub max_conns: u32,
    pub backup: bool,
    pub down: bool,
}

/// A parsed block, and the warnings nginx would log while reading it.
#[derive(Debug)]
pub struct Parsed {
    pub name: String,
    pub upstream: Upstream,
    pub servers: Vec<ServerConf>,
    /// `load balancing method redefined in FILE:LINE` (logged as warn).
    pub warnings: Vec<ConfError>,
}

fn err(d: &Directive, msg: impl Into<String>) -> ConfError {
    d.conf_error(msg)
}

fn nargs(d: &Directive) -> ConfError {
    err(
        d,
        format!("invalid number of arguments in \"{}\" directive", d.name),
    )
}

/// The directives an `upstream { }` block takes here (what [`parse`]
/// matches on): `gyre -V` reads its upstream modules off this list.
pub const DIRECTIVES: &[&str] = &[
    "server",
    "least_conn",
    "ip_hash",
    "hash",
    "random",
    "keepalive",
    "keepalive_timeout",
    "keepalive_time",
    "keepalive_requests",
    "zone",
];

/// Reads an `upstream NAME { … }` directive.
pub fn parse(d: &Directive) -> Result<Parsed, ConfError> {
    if d.args.len() != 1 {
        return Err(nargs(d));
    }
    let name = d.arg(0).to_string();
    let body = d.block.as_deref().unwrap_or(&[]);
    let mut flags = Flags { backup: true };
    let mut method: Option<Method> = None;
    let mut servers = Vec::new();
    let mut warnings = Vec::new();
    let mut keepalive: Option<KeepaliveConf> = None;
    let mut ka_timeout: Option<u64> = None;
    let mut ka_requests: Option<u64> = None;
    let mut ka_time: Option<u64> = None;
    let mut zone: Option<(String, usize)> = None;
    let mut zone_set = false;
    for c in body {
        if c.block.is_some() {
            return Err(err(c, format!("unknown directive \"{}\"", c.name)));
        }
        let mut set_method = |m: Method, flags: &mut Flags| {
            if method.is_some() {
                warnings.push(err(c, "load balancing method redefined"));
            }
            // hash, ip_hash and random do not take backup servers.
            flags.backup = matches!(m, Method::RoundRobin | Method::LeastConn);
            method = Some(m);
        };
        match c.name.as_str() {
            "server" => {
                if c.args.is_empty() {
                    return Err(nargs(c));
                }
                servers.push(server(c, flags)?);
            }
            "least_conn" | "ip_hash" => {
                if !c.args.is_empty() {
                    return Err(nargs(c));
                }
                let m = if c.name == "ip_hash" {
                    Method::IpHash
                } else {
                    Method::LeastConn
                };
                set_method(m, &mut flags);
            }
            "hash" => {
                let consistent = match c.args.len() {
                    1 => false,
                    2 if c.arg(1) == "consistent" => true,
                    2 => return Err(err(c, format!("invalid parameter \"{}\"", c.arg(1)))),
                    _ => return Err(nargs(c)),
                };
                set_method(
                    Method::Hash {
                        key: c.arg(0).to_string(),
                        consistent,
                    },
                    &mut flags,
                );
            }
            "random" => {
                if c.args.len() > 2 {
                    return Err(nargs(c));
                }
                let mut two = false;
                if !c.args.is_empty() {
                    if c.arg(0) != "two" {
                        return Err(err(c, format!("invalid parameter \"{}\"", c.arg(0))));
                    }
                    two = true;
                    if c.args.len() == 2 && c.arg(1) != "least_conn" {
                        return Err(err(c, format!("invalid parameter \"{}\"", c.arg(1))));
                    }
                }
                set_method(Method::Random { two }, &mut flags);
            }
            "keepalive" => {
                if c.args.len() != 1 {
                    return Err(nargs(c));
                }
                if keepalive.is_some() {
                    return Err(err(c, "\"keepalive\" directive is duplicate"));
                }
                let n = parse_number(c.arg(0)).filter(|&n| n > 0).ok_or_else(|| {
                    err(
                        c,
                        format!("invalid value \"{}\" in \"keepalive\" directive", c.arg(0)),
                    )
                })?;
                keepalive = Some(KeepaliveConf::new(n as usize));
            }
            "keepalive_timeout" | "keepalive_time" => {
                if c.args.len() != 1 {
                    return Err(nargs(c));
                }
                let slot = if c.name == "keepalive_timeout" {
                    &mut ka_timeout
                } else {
                    &mut ka_time
                };
                if slot.is_some() {
                    return Err(err(c, c.error("is duplicate")));
                }
                *slot =
                    Some(parse_time_ms(c.arg(0)).ok_or_else(|| err(c, c.error("invalid value")))?);
            }
            "keepalive_requests" => {
                if c.args.len() != 1 {
                    return Err(nargs(c));
                }
                if ka_requests.is_some() {
                    return Err(err(c, c.error("is duplicate")));
                }
                ka_requests =
                    Some(parse_number(c.arg(0)).ok_or_else(|| err(c, c.error("invalid number")))?);
            }
            "zone" => {
                if c.args.is_empty() || c.args.len() > 2 {
                    return Err(nargs(c));
                }
                if zone_set {
                    return Err(err(c, c.error("is duplicate")));
                }
                zone_set = true;
                let size = if c.args.len() == 2 {
                    let s = parse_size(c.arg(1))
                        .ok_or_else(|| err(c, format!("invalid zone size \"{}\"", c.arg(1))))?;
                    // nginx: 8 pages.
                    if s < 8 * 4096 {
                        return Err(err(c, format!("zone \"{}\" is too small", c.arg(0))));
                    }
                    s
                } else {
                    0
                };
                zone = Some((c.arg(0).to_string(), size));
            }
            _ => return Err(err(c, format!("unknown directive \"{}\"", c.name))),
        }
    }
    if servers.is_empty() {
        // nginx reports the line of the closing brace; gyre's tree keeps
        // the line of the opening one.
        return Err(err(d, "no servers are inside upstream"));
    }
    if let Some((z, 0)) = &zone {
        // Reported by nginx when the zones are created: no place.
        return Err(ConfError::new(format!(
            "zero size shared memory zone \"{z}\""
        )));
    }
    let mut primary = Vec::new();
    let mut backup = Vec::new();
    for s in &servers {
        for a in &s.addrs {
            let mut p = Peer::new(a.clone(), &s.name).with_weight(s.weight);
            p.max_fails = s.max_fails;
            p.fail_timeout = s.fail_timeout;
            p.max_conns = s.max_conns;
            p.down = s.down;
            if s.backup {
                backup.push(p);
            } else {
                primary.push(p);
            }
        }
    }
    if primary.is_empty() {
        return Err(err(d, format!("no servers in upstream \"{name}\"")));
    }
    // Backups declared before `hash`, `ip_hash` or `random` stay: nginx
    // keeps them too, and its round-robin fallback (after 20 tries) uses
    // them.
    let method = method.unwrap_or(Method::RoundRobin);
    let mut upstream = Upstream::new(Peers::new(&name, primary, backup), method);
    if let Some(mut k) = keepalive {
        if let Some(t) = ka_timeout {
            k.timeout = t;
        }
        if let Some(r) = ka_requests {
            k.requests = r;
        }
        if let Some(t) = ka_time {
            k.time = t;
        }
        upstream.keepalive = Some(k);
    }
    if let Some((z, size)) = &zone {
        let at = body.iter().find(|c| c.name == "zone").unwrap_or(d);
        upstream
            .share(z, *size)
            .map_err(|e| err(at, e.to_string()))?;
    }
    Ok(Parsed {
        name,
        upstream,
        servers,
        warnings,
    })
}

/// nginx's `ngx_http_upstream_server`.
fn server(d: &Directive, flags: Flags) -> Result<ServerConf, ConfError> {
    let mut s = ServerConf {
        name: d.arg(0).to_string(),
        addrs: Vec::new(),
        weight: 1,
        max_fails: 1,
        fail_timeout: 10,
        max_conns: 0,
        backup: false,
        down: false,
    };
    for a in &d.args[1..] {
        let invalid = || err(d, format!("invalid parameter \"{a}\""));
        if let Some(v) = a.strip_prefix("weight=") {
            s.weight = parse_number(v)
                .filter(|&w| w > 0 && w <= i64::MAX as u64)
                .ok_or_else(invalid)? as i64;
        } else if let Some(v) = a.strip_prefix("max_conns=") {
            s.max_conns = parse_number(v)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(invalid)?;
        } else if let Some(v) = a.strip_prefix("max_fails=") {
            s.max_fails = parse_number(v)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(invalid)?;
        } else if let Some(v) = a.strip_prefix("fail_timeout=") {
            s.fail_timeout = parse_time_sec(v).ok_or_else(invalid)? as i64;
        } else if a == "backup" {
            if !flags.backup {
                return Err(err(
                    d,
                    format!("balancing method does not support parameter \"{a}\""),
                ));
            }
            s.backup = true;
        } else if a == "down" {
            s.down = true;
        } else {
            return Err(invalid());
        }
    }
    s.addrs = resolve(d.arg(0)).map_err(|e| err(d, format!("{e} in upstream \"{}\"", d.arg(0))))?;
    Ok(s)
}

/// nginx's `ngx_parse_url` for an upstream server (default port 80) and
/// the configuration-time resolution. The error is nginx's `u.err`.
pub fn resolve(url: &str) -> Result<Vec<PeerAddr>, &'static str> {
    if let Some(path) = url.strip_prefix("unix:") {
        if path.is_empty() {
            return Err("no path in the unix domain socket");
        }
        return Ok(vec![PeerAddr::Unix(path.into())]);
    }
    if url.contains('/') || url.contains('?') {
        return Err("invalid host");
    }
    let (host, port) = if let Some(rest) = url.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err("invalid IPv6 address");
        };
        let host = &rest[..end];
        let after = &rest[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err("invalid host"),
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err("invalid IPv6 address");
        }
        (host, port)
    } else {
        match url.rfind(':') {
            Some(i) => (&url[..i], Some(&url[i + 1..])),
            None => (url, None),
        }
    };
    let port = match port {
        Some(p) => match parse_number(p) {
            Some(n) if (1..=65535).contains(&n) => n as u16,
            _ => return Err("invalid port"),
        },
        None => 80,
    };
    if host.is_empty() {
        return Err("no host");
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![PeerAddr::Inet(SocketAddr::new(ip, port))]);
    }
    let addrs: Vec<PeerAddr> = match (host, port).to_socket_addrs() {
        Ok(it) => {
            let mut v: Vec<PeerAddr> = Vec::new();
            for a in it {
                let p = PeerAddr::Inet(a);
                if !v.contains(&p) {
                    v.push(p);
                }
            }
            v
        }
        Err(_) => Vec::new(),
    };
    if addrs.is_empty() {
        return Err("host not found");
    }
    Ok(addrs)
}
