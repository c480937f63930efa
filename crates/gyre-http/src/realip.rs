//! nginx's `ngx_http_realip_module`: behind trusted proxies, the client
//! address is taken from a request header (`set_real_ip_from`,
//! `real_ip_header`, `real_ip_recursive`), and `$realip_remote_addr` /
//! `$realip_remote_port` keep the address the connection came from.
//!
//! As in nginx the handler runs twice — at post-read with the server's
//! settings, and at pre-access with the location's — and changes the
//! address at most once per request. The new address is the request's
//! ([`ConnInfo::peer`] is a per-request copy), so `$remote_addr`,
//! `$binary_remote_addr`, `allow`/`deny`, the limit zones' keys and the
//! access log all see it; the next request on the connection starts from
//! the real peer again (nginx restores it in the request's cleanup).
//!
//! The address is found as `ngx_http_get_forwarded_addr` finds it: the
//! connection's address must be trusted; then the last address of the
//! header is taken, and with `real_ip_recursive on` the walk goes on
//! leftwards (and through earlier `X-Forwarded-For` lines) while the
//! address found is trusted too. An address may carry a port
//! (`192.0.2.1:8080`, `[2001:db8::1]:80`), which becomes `$remote_port`;
//! without one, `$remote_port` is empty, as nginx's is.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use gyre_core::conf::{ConfCtx, Directive};

use crate::access::Rules;
use crate::conf::{HttpConf, LocSettings};
use crate::request::HttpRequest;

/// Which header holds the client address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Header {
    XRealIp,
    XForwardedFor,
    /// The PROXY protocol's source: gyre's listeners take no
    /// `proxy_protocol`, so it is never there (nginx declines the same way
    /// on a connection without it).
    ProxyProtocol,
    /// Any other header, by name (the first one sent).
    Other(String),
}

/// The directives of one level (`None`: inherited).
#[derive(Debug, Clone, Default)]
pub struct RealIpLevel {
    pub from: Option<Rules>,
    pub header: Option<Header>,
    pub recursive: Option<bool>,
}

/// A location's resolved settings; absent when no `set_real_ip_from`
/// applies (the module is then off, as nginx's `from == NULL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealIp {
    pub from: Rules,
    pub header: Header,
    pub recursive: bool,
}

/// nginx's merge: `set_real_ip_from` as a whole list from the innermost
/// level that has one, the others each from the innermost that sets it.
pub fn resolve(levels: &[&LocSettings]) -> Option<Arc<RealIp>> {
    let pick =
        |f: &dyn Fn(&RealIpLevel) -> Option<_>| levels.iter().rev().find_map(|s| f(&s.realip));
    let from = levels.iter().rev().find_map(|s| s.realip.from.clone())?;
    let header = levels
        .iter()
        .rev()
        .find_map(|s| s.realip.header.clone())
        .unwrap_or(Header::XRealIp);
    let recursive = pick(&|r: &RealIpLevel| r.recursive).unwrap_or(false);
    Some(Arc::new(RealIp {
        from,
        header,
        recursive,
    }))
}

/// `set_real_ip_from address|CIDR|unix:` (a host name is resolved now, each
/// of its addresses trusted, as nginx does).
pub fn set_from(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let arg = d.arg(0);
    let s = c.settings(cx)?;
    let rules = s.realip.from.get_or_insert_with(Rules::default);
    if arg == "all" {
        return Err(format!("invalid parameter \"{arg}\""));
    }
    if crate::access::add_rule(rules, arg, false, d).is_ok() {
        return Ok(());
    }
    let addrs: Vec<SocketAddr> = (arg, 0)
        .to_socket_addrs()
        .map_err(|_| format!("host not found in set_real_ip_from \"{arg}\""))?
        .collect();
    for a in addrs {
        let one = match a.ip() {
            IpAddr::V4(v) => format!("{v}/32"),
            IpAddr::V6(v) => format!("{v}/128"),
        };
        crate::access::add_rule(rules, &one, false, d)?;
    }
    Ok(())
}

/// `real_ip_header X-Real-IP|X-Forwarded-For|proxy_protocol|NAME`.
pub fn set_header(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let a = d.arg(0);
    let h = if a.eq_ignore_ascii_case("X-Real-IP") {
        Header::XRealIp
    } else if a.eq_ignore_ascii_case("X-Forwarded-For") {
        Header::XForwardedFor
    } else if a == "proxy_protocol" {
        Header::ProxyProtocol
    } else {
        Header::Other(a.to_string())
    };
    c.settings(cx)?.realip.header = Some(h);
    Ok(())
}

/// `real_ip_recursive on|off`.
pub fn set_recursive(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.realip.recursive = Some(v);
    Ok(())
}

/// True when `peer` is a trusted proxy (a `unix:` peer has no address here).
fn trusted(from: &Rules, peer: IpAddr) -> bool {
    from.check(Some(peer)) == Some(false)
}

/// How a look-up ended (nginx's `NGX_OK`, `NGX_DONE`, `NGX_DECLINED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// The address is the client (no further hop to look at).
    Ok,
    /// The walk stopped at an untrusted hop, which is the client.
    Done,
    /// Nothing changes.
    Declined,
}

/// `ngx_parse_addr_port`: `ADDR`, `ADDR:PORT` (IPv4), `[ADDR]:PORT` or a
/// bare IPv6 address; port 0 when there is none.
fn parse_addr_port(s: &[u8]) -> Option<SocketAddr> {
    let s = std::str::from_utf8(s).ok()?;
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, 0));
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (ip, tail) = rest.split_once(']')?;
        let ip: IpAddr = ip.parse().ok()?;
        let port = match tail {
            "" => 0,
            t => t
                .strip_prefix(':')?
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)?,
        };
        return Some(SocketAddr::new(ip, port));
    }
    let (ip, port) = s.rsplit_once(':')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    let port = port.parse::<u16>().ok().filter(|&p| p != 0)?;
    Some(SocketAddr::new(IpAddr::V4(ip), port))
}

/// One header value (`ngx_http_get_forwarded_addr_internal`): `addr` is
/// the hop the value came from, replaced by what is found.
fn from_value(addr: &mut SocketAddr, xff: &[u8], from: &Rules, recursive: bool) -> Found {
    if !trusted(from, addr.ip()) {
        return Found::Declined;
    }
    // Trailing separators off, then back to the start of the last item.
    let mut end = xff.len();
    while end > 1 && matches!(xff[end - 1], b' ' | b',') {
        end -= 1;
    }
    let mut start = end.saturating_sub(1);
    while start > 0 {
        if matches!(xff[start], b' ' | b',') {
            start += 1;
            break;
        }
        start -= 1;
    }
    let Some(found) = xff.get(start..end).and_then(parse_addr_port) else {
        return Found::Declined;
    };
    *addr = found;
    if recursive && start > 0 {
        return match from_value(addr, &xff[..start - 1], from, true) {
            Found::Declined => Found::Done,
            other => other,
        };
    }
    Found::Ok
}

/// The client address by the header's values (`values` in the order
/// sent): `Some` when it changes.
pub fn forwarded_addr(
    peer: SocketAddr,
    values: &[&[u8]],
    xff: bool,
    from: &Rules,
    recursive: bool,
) -> Option<SocketAddr> {
    let mut addr = peer;
    let rc = if xff {
        // X-Forwarded-For lines are walked from the last one.
        let mut rc = Found::Declined;
        let mut found = false;
        for v in values.iter().rev() {
            rc = from_value(&mut addr, v, from, recursive);
            if !recursive {
                break;
            }
            if rc == Found::Declined && found {
                rc = Found::Done;
                break;
            }
            if rc != Found::Ok {
                break;
            }
            found = true;
        }
        rc
    } else {
        match values.first() {
            Some(v) => from_value(&mut addr, v, from, recursive),
            None => Found::Declined,
        }
    };
    (rc != Found::Declined).then_some(addr)
}

/// The handler (post-read with the server's settings, pre-access with the
/// location's): changes the request's client address once.
pub fn handler(r: &mut HttpRequest) {
    if r.st.conn.realip_original.is_some() {
        return;
    }
    let Some(rip) = r.st.loc.realip.clone() else {
        return;
    };
    let Some(peer) = r.st.conn.peer else {
        return;
    };
    let req = &r.st.req;
    let (values, xff): (Vec<&[u8]>, bool) = match &rip.header {
        Header::XRealIp => (req.header("x-real-ip").into_iter().collect(), false),
        Header::XForwardedFor => (req.headers_named("x-forwarded-for").collect(), true),
        Header::ProxyProtocol => return,
        Header::Other(name) => (req.header(name).into_iter().collect(), false),
    };
    if let Some(addr) = forwarded_addr(peer, &values, xff, &rip.from, rip.recursive) {
        r.st.conn.realip_original = Some(peer);
        r.st.conn.peer = Some(addr);
    }
}

/// Whether any level of the configuration uses the module.
pub fn in_use(conf: &HttpConf) -> bool {
    conf.servers.iter().any(|s| {
        s.fallback.as_ref().is_some_and(|f| f.realip.is_some())
            || crate::phases::all_locations(&s.locations)
                .iter()
                .any(|l| l.conf.as_ref().is_some_and(|c| c.realip.is_some()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[&str]) -> Rules {
        let d = Directive {
            name: "set_real_ip_from".into(),
            args: vec![],
            block: None,
            location: gyre_core::conf::Location::CommandLine,
        };
        let mut r = Rules::default();
        for a in list {
            crate::access::add_rule(&mut r, a, false, &d).unwrap();
        }
        r
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_last_address_of_a_trusted_peer_is_the_client() {
        let from = rules(&["127.0.0.1", "10.0.0.0/8"]);
        let xff: &[&[u8]] = &[b"203.0.113.9, 10.1.2.3"];
        // Not recursive: the last item, trusted or not.
        assert_eq!(
            forwarded_addr(sa("127.0.0.1:5000"), xff, true, &from, false),
            Some(sa("10.1.2.3:0"))
        );
        // Recursive: leftwards past trusted hops.
        assert_eq!(
            forwarded_addr(sa("127.0.0.1:5000"), xff, true, &from, true),
            Some(sa("203.0.113.9:0"))
        );
        // An untrusted peer changes nothing.
        assert_eq!(
            forwarded_addr(sa("192.0.2.1:5000"), xff, true, &from, true),
            None
        );
    }

    #[test]
    fn recursion_goes_through_earlier_header_lines_and_stops_at_an_untrusted_hop() {
        let from = rules(&["127.0.0.1", "10.0.0.0/8"]);
        let lines: &[&[u8]] = &[b"198.51.100.4, 203.0.113.9", b"10.0.0.2"];
        assert_eq!(
            forwarded_addr(sa("127.0.0.1:1"), lines, true, &from, true),
            Some(sa("203.0.113.9:0"))
        );
        // Everything trusted: the leftmost address.
        let all: &[&[u8]] = &[b"10.9.9.9, 10.0.0.2"];
        assert_eq!(
            forwarded_addr(sa("127.0.0.1:1"), all, true, &from, true),
            Some(sa("10.9.9.9:0"))
        );
    }

    #[test]
    fn addresses_may_carry_ports_and_garbage_is_declined() {
        let from = rules(&["127.0.0.1"]);
        let one = |v: &'static [u8]| forwarded_addr(sa("127.0.0.1:1"), &[v], false, &from, false);
        assert_eq!(one(b"192.0.2.7:8080"), Some(sa("192.0.2.7:8080")));
        assert_eq!(one(b"[2001:db8::1]:443"), Some(sa("[2001:db8::1]:443")));
        assert_eq!(one(b"2001:db8::1"), Some(sa("[2001:db8::1]:0")));
        assert_eq!(one(b"not-an-address"), None);
        assert_eq!(one(b"192.0.2.7, "), Some(sa("192.0.2.7:0")));
        assert_eq!(one(b""), None);
    }
}
