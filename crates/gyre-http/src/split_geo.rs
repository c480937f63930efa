//! `split_clients` and `geo` (nginx's `ngx_http_split_clients_module.c` and
//! `ngx_http_geo_module.c`): variables chosen from another value, like
//! `map`.
//!
//! `split_clients "STRING" $var { 0.5% a; 20% b; * c; }` hashes the string
//! with nginx's MurmurHash2 and picks the part whose cumulative share the
//! hash falls in, so the split agrees with nginx's for the same input.
//! `geo [$source] $var { default v; 10.0.0.0/8 v; 127.0.0.1 v; }` picks the
//! longest matching network of the source address (`$remote_addr` by
//! default). Not yet: geo's `ranges`, `delete`, `proxy`, `include`.

use std::net::IpAddr;

use gyre_core::conf::Directive;

use crate::complex_value::ComplexValue;
use crate::variables::Variables;

/// nginx's `ngx_murmur_hash2`.
pub fn murmur_hash2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// One `split_clients` block.
#[derive(Debug, Clone)]
pub struct SplitClients {
    pub source: ComplexValue,
    /// (upper bound of the hash, value); 0 is the `*` catch-all.
    parts: Vec<(u32, ComplexValue)>,
}

/// Blocks compare by identity (each is its own variable).
impl PartialEq for SplitClients {
    fn eq(&self, other: &SplitClients) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for SplitClients {}

/// `N%` as hundredths of a percent (nginx's `ngx_atofp(.., 2)`).
fn percent(s: &str) -> Option<u64> {
    let n = s.strip_suffix('%')?;
    let (int, frac) = n.split_once('.').unwrap_or((n, ""));
    if frac.len() > 2 || int.is_empty() && frac.is_empty() {
        return None;
    }
    let int: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut f: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    if frac.len() == 1 {
        f *= 10;
    }
    Some(int * 100 + f)
}

impl SplitClients {
    pub fn parse(d: &Directive, vars: &mut Variables) -> Result<SplitClients, String> {
        let source = ComplexValue::compile(d.arg(0), vars)?;
        let mut parts = Vec::new();
        let mut sum: u64 = 0;
        for e in d.block.as_deref().unwrap_or(&[]) {
            let [value] = e.args.as_slice() else {
                return Err(format!("invalid number of parameters in \"{}\"", e.name));
            };
            let v = ComplexValue::compile(value, vars)?;
            if e.name == "*" {
                sum = 10_000;
                parts.push((0, v));
                continue;
            }
            let p =
                percent(&e.name).ok_or_else(|| format!("invalid percent value \"{}\"", e.name))?;
            sum += p;
            if sum > 10_000 {
                return Err("percent total is greater than 100%".into());
            }
            parts.push(((sum * 0xffff_ffff / 10_000) as u32, v));
        }
        Ok(SplitClients { source, parts })
    }

    /// The part for a source value.
    pub fn find(&self, src: &[u8]) -> Option<&ComplexValue> {
        let hash = murmur_hash2(src);
        self.parts
            .iter()
            .find(|(bound, _)| hash < *bound || *bound == 0)
            .map(|(_, v)| v)
    }
}

/// One `geo` block.
#[derive(Debug, Clone)]
pub struct Geo {
    pub source: ComplexValue,
    /// (network, prefix length, value), IPv4 and IPv6 apart.
    nets: Vec<(IpAddr, u8, ComplexValue)>,
    default: Option<ComplexValue>,
}

/// Blocks compare by identity.
impl PartialEq for Geo {
    fn eq(&self, other: &Geo) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Geo {}

fn parse_net(s: &str) -> Option<(IpAddr, u8)> {
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l.parse::<u8>().ok()?)),
        None => (s, None),
    };
    let ip: IpAddr = a.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some((ip, len))
}

fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len))
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len))
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

impl Geo {
    pub fn parse(d: &Directive, vars: &mut Variables) -> Result<Geo, String> {
        let source = if d.args.len() == 2 {
            ComplexValue::compile(d.arg(0), vars)?
        } else {
            ComplexValue::compile("$remote_addr", vars)?
        };
        let mut g = Geo {
            source,
            nets: Vec::new(),
            default: None,
        };
        for e in d.block.as_deref().unwrap_or(&[]) {
            let [value] = e.args.as_slice() else {
                return Err(format!(
                    "invalid number of the geo parameters in \"{}\"",
                    e.name
                ));
            };
            let v = ComplexValue::compile(value, vars)?;
            if e.name == "default" {
                g.default = Some(v);
                continue;
            }
            if matches!(
                e.name.as_str(),
                "ranges" | "delete" | "proxy" | "proxy_recursive" | "include"
            ) {
                return Err(format!("\"{}\" in \"geo\" is not supported yet", e.name));
            }
            let (net, len) =
                parse_net(&e.name).ok_or_else(|| format!("invalid network \"{}\"", e.name))?;
            g.nets.push((net, len, v));
        }
        Ok(g)
    }

    /// The value for a source address (the default when it is not an
    /// address or no network holds it).
    pub fn find(&self, src: &[u8]) -> Option<&ComplexValue> {
        let ip = std::str::from_utf8(src)
            .ok()
            .and_then(|s| s.parse::<IpAddr>().ok());
        let best = ip.and_then(|ip| {
            self.nets
                .iter()
                .filter(|(n, l, _)| in_net(ip, *n, *l))
                .max_by_key(|(_, l, _)| *l)
        });
        best.map(|(_, _, v)| v).or(self.default.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_hash2_mixes() {
        // Empty input hashes to 0 (every step keeps 0); agreement with
        // nginx on real keys is checked by the site differential test.
        assert_eq!(murmur_hash2(b""), 0);
        assert_ne!(murmur_hash2(b"a"), murmur_hash2(b"b"));
        assert_ne!(murmur_hash2(b"abcde"), murmur_hash2(b"abcdf"));
    }

    #[test]
    fn percents() {
        assert_eq!(percent("0.5%"), Some(50));
        assert_eq!(percent("20%"), Some(2000));
        assert_eq!(percent("33.33%"), Some(3333));
        assert_eq!(percent("1.234%"), None);
        assert_eq!(percent("x%"), None);
    }

    #[test]
    fn networks() {
        let (n, l) = parse_net("10.0.0.0/8").unwrap();
        assert!(in_net("10.1.2.3".parse().unwrap(), n, l));
        assert!(!in_net("11.1.2.3".parse().unwrap(), n, l));
        let (n, l) = parse_net("::1").unwrap();
        assert!(in_net("::1".parse().unwrap(), n, l));
        assert!(parse_net("10.0.0.0/33").is_none());
    }
}
