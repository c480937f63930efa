//! Argument value syntaxes shared by every module: numbers, sizes, times,
//! flags and `listen` addresses (nginx's `ngx_atoi`, `ngx_parse_size`,
//! `ngx_parse_offset`, `ngx_parse_time`, the flag slot and the `listen`
//! parser).
//!
//! The functions here only parse; they return `None` or a bare reason, and the
//! [`Directive`](super::Directive) helpers wrap them in nginx's messages, so a
//! module's setter stays a one-liner.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

/// Largest value any parser here returns: nginx caps numbers, offsets and
/// times at `NGX_MAX_INT_T_VALUE` so they survive signed arithmetic later.
const MAX: u64 = i64::MAX as u64;

/// Parses a non-negative decimal number (nginx's `ngx_atoi`): digits only, no
/// sign, no spaces, at most `i64::MAX`.
pub fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for b in s.bytes() {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        if value > MAX {
            return None;
        }
    }
    Some(value)
}

/// Splits a `k`/`m`/`g` suffix (either case) off a size.
fn size_with_unit(s: &str, max: u64) -> Option<u64> {
    let (digits, scale) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1u64 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1u64 << 30),
        _ => (s, 1),
    };
    let value = parse_number(digits)?;
    if value > max / scale {
        return None;
    }
    Some(value * scale)
}

/// Parses a size in bytes: `512`, `4k`/`4K`, `1m`/`1M`, `1g`/`1G` (nginx's
/// `ngx_parse_size`, plus `g` as for offsets). Capped at `isize::MAX`, since
/// a size describes memory.
pub fn parse_size(s: &str) -> Option<usize> {
    let value = size_with_unit(s, isize::MAX as u64)?;
    usize::try_from(value).ok()
}

/// Parses a file offset or length with the same units as [`parse_size`]
/// (nginx's `ngx_parse_offset`); capped at `i64::MAX` like `off_t`, so it may
/// exceed the address space on 32-bit targets.
pub fn parse_offset(s: &str) -> Option<u64> {
    size_with_unit(s, MAX)
}

/// Units of a time value, in the only order nginx accepts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Start,
    Year,
    Month,
    Week,
    Day,
    Hour,
    Min,
    Sec,
    Msec,
}

fn parse_time(s: &str, in_sec: bool) -> Option<u64> {
    let bytes = s.as_bytes();
    let mut step = Step::Start;
    let mut value: u64 = 0;
    let mut pending = false;
    let mut valid = false;
    let mut total: u64 = 0;
    let mut i = 0;

    while i < bytes.len() {
        let c = bytes[i];
        i += 1;
        if c.is_ascii_digit() {
            value = value.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            if value > MAX {
                return None;
            }
            pending = true;
            valid = true;
            continue;
        }
        if c == b' ' && !pending {
            continue;
        }
        let (next, seconds) = match c {
            b'y' => (Step::Year, 365 * 86_400),
            b'M' => (Step::Month, 30 * 86_400),
            b'w' => (Step::Week, 7 * 86_400),
            b'd' => (Step::Day, 86_400),
            b'h' => (Step::Hour, 3_600),
            b'm' if bytes.get(i) == Some(&b's') => {
                i += 1;
                (Step::Msec, 0)
            }
            b'm' => (Step::Min, 60),
            b's' => (Step::Sec, 1),
            _ => return None,
        };
        // Units must be given once each, largest first ("1h30m", not
        // "30m1h"), and every unit needs a number before it.
        if !pending || next <= step || (next == Step::Msec && in_sec) {
            return None;
        }
        step = next;
        let scale = match (next, in_sec) {
            (Step::Msec, _) => 1,
            (_, true) => seconds,
            (_, false) => seconds * 1000,
        };
        total = total.checked_add(value.checked_mul(scale)?)?;
        if total > MAX {
            return None;
        }
        value = 0;
        pending = false;
    }

    if !valid {
        return None;
    }
    if pending {
        // A trailing bare number counts as seconds ("1h30" is 1h 30s), so it
        // may only follow units larger than a second.
        if step >= Step::Sec {
            return None;
        }
        let scale = if in_sec { 1 } else { 1000 };
        total = total.checked_add(value.checked_mul(scale)?)?;
        if total > MAX {
            return None;
        }
    }
    Some(total)
}

/// Parses a time into milliseconds (nginx's `ngx_parse_time(.., 0)`): units
/// `ms s m h d w M y` (month = 30 days, year = 365 days), combinable largest
/// first as in `1h30m` or `1m 30s`; a bare number is seconds.
pub fn parse_time_ms(s: &str) -> Option<u64> {
    parse_time(s, false)
}

/// Parses a time into whole seconds (nginx's `ngx_parse_time(.., 1)`): as
/// [`parse_time_ms`] but `ms` is refused.
pub fn parse_time_sec(s: &str) -> Option<u64> {
    parse_time(s, true)
}

/// Parses `on`/`off`, in any case, as nginx's flag slot does.
pub fn parse_flag(s: &str) -> Option<bool> {
    if s.eq_ignore_ascii_case("on") {
        Some(true)
    } else if s.eq_ignore_ascii_case("off") {
        Some(false)
    } else {
        None
    }
}

/// nginx's `NGX_LISTEN_BACKLOG` on Linux: one less than the historical
/// `somaxconn` so the kernel does not round it up.
pub const DEFAULT_BACKLOG: i32 = 511;

/// One `listen` directive: where to bind and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenConf {
    pub addr: SocketAddr,
    /// The server a connection goes to when no other name matches.
    pub default_server: bool,
    /// `listen(2)` backlog, [`DEFAULT_BACKLOG`] unless `backlog=N` is given.
    pub backlog: i32,
    /// `SO_REUSEPORT`: one socket per worker, balanced by the kernel.
    pub reuseport: bool,
    /// `TCP_DEFER_ACCEPT`: wake the worker only when data has arrived.
    pub deferred: bool,
    /// `ssl`: connections on this address speak TLS.
    pub ssl: bool,
}

/// Parses the arguments of `listen` (without the directive name):
/// `ADDR[:PORT] [default_server] [backlog=N] [reuseport] [deferred] [ssl]`.
///
/// ADDR is `PORT` alone, `*:PORT`, `IPv4[:PORT]`, `[IPv6][:PORT]` or a host
/// name resolved now (its first address, as the configuration is read once).
/// `default_port` is used when no port is given (80 for HTTP, 6379 for a
/// Redis-protocol module). Errors are nginx's full messages.
pub fn parse_listen(args: &[String], default_port: u16) -> Result<ListenConf, String> {
    let Some(url) = args.first() else {
        return Err("invalid number of arguments in \"listen\" directive".to_string());
    };
    let addr = parse_listen_addr(url, default_port)
        .map_err(|reason| format!("{reason} in \"{url}\" of the \"listen\" directive"))?;

    let mut conf = ListenConf {
        addr,
        default_server: false,
        backlog: DEFAULT_BACKLOG,
        reuseport: false,
        deferred: false,
        ssl: false,
    };
    for arg in &args[1..] {
        match arg.as_str() {
            // "default" is the pre-0.8.21 spelling nginx still accepts.
            "default_server" | "default" => conf.default_server = true,
            "reuseport" => conf.reuseport = true,
            "deferred" => conf.deferred = true,
            "ssl" => conf.ssl = true,
            // gyre has no HTTP/2: nginx's words when built without it.
            "http2" => return Err("the \"http2\" parameter requires ngx_http_v2_module".into()),
            _ => {
                if let Some(n) = arg.strip_prefix("backlog=") {
                    conf.backlog = parse_number(n)
                        .and_then(|n| i32::try_from(n).ok())
                        .filter(|&n| n != 0)
                        .ok_or_else(|| format!("invalid backlog \"{n}\""))?;
                } else {
                    return Err(format!("invalid parameter \"{arg}\""));
                }
            }
        }
    }
    Ok(conf)
}

fn parse_port(s: &str) -> Result<u16, &'static str> {
    parse_number(s)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|&p| p != 0)
        .ok_or("invalid port")
}

fn parse_listen_addr(url: &str, default_port: u16) -> Result<SocketAddr, &'static str> {
    if url.starts_with("unix:") {
        return Err("unix domain sockets are not supported");
    }
    if url.bytes().all(|b| b.is_ascii_digit()) && !url.is_empty() {
        let port = parse_port(url)?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    if let Some(rest) = url.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("invalid host")?;
        let ip: std::net::Ipv6Addr = host.parse().map_err(|_| "invalid IPv6 address")?;
        let port = match after {
            "" => default_port,
            _ => parse_port(after.strip_prefix(':').ok_or("invalid host")?)?,
        };
        return Ok(SocketAddr::new(IpAddr::V6(ip), port));
    }
    let (host, port) = match url.rsplit_once(':') {
        Some((host, port)) => (host, parse_port(port)?),
        None => (url, default_port),
    };
    if host.is_empty() {
        return Err("no host");
    }
    if host == "*" {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(SocketAddr::new(IpAddr::V4(ip), port));
    }
    if host.contains(':') {
        // An IPv6 address must be bracketed to carry a port.
        return Err("invalid host");
    }
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or("host not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_number("0"), Some(0));
        assert_eq!(parse_number("512"), Some(512));
        assert_eq!(parse_number("9223372036854775807"), Some(MAX));
        assert_eq!(parse_number("9223372036854775808"), None);
        assert_eq!(parse_number("99999999999999999999999"), None);
        for bad in ["", "-1", "+1", "1 ", "0x10", "1k", "xyz"] {
            assert_eq!(parse_number(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("4K"), Some(4096));
        assert_eq!(parse_size("1m"), Some(1 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("0"), Some(0));
        for bad in ["", "k", "1kb", "1.5k", "-1k", "1t", "1 k", "abc"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
        // Overflow after scaling is refused, not wrapped.
        assert_eq!(parse_size("9223372036854775807k"), None);
        assert_eq!(parse_offset("8589934591g"), Some(8_589_934_591 << 30));
        assert_eq!(parse_offset("8589934592g"), None);
    }

    #[test]
    fn times_each_unit() {
        assert_eq!(parse_time_ms("500ms"), Some(500));
        assert_eq!(parse_time_ms("10s"), Some(10_000));
        assert_eq!(parse_time_ms("10"), Some(10_000));
        assert_eq!(parse_time_ms("1m"), Some(60_000));
        assert_eq!(parse_time_ms("1h"), Some(3_600_000));
        assert_eq!(parse_time_ms("1d"), Some(86_400_000));
        assert_eq!(parse_time_ms("1w"), Some(7 * 86_400_000));
        assert_eq!(parse_time_ms("1M"), Some(30 * 86_400_000));
        assert_eq!(parse_time_ms("1y"), Some(365 * 86_400_000));
        assert_eq!(parse_time_ms("0"), Some(0));
        assert_eq!(parse_time_sec("1m"), Some(60));
        assert_eq!(parse_time_sec("90"), Some(90));
        assert_eq!(parse_time_sec("1d"), Some(86_400));
    }

    #[test]
    fn times_combined() {
        assert_eq!(parse_time_ms("1h30m"), Some(5_400_000));
        assert_eq!(parse_time_ms("1m30s"), Some(90_000));
        assert_eq!(parse_time_ms("1s500ms"), Some(1_500));
        assert_eq!(parse_time_ms("1m 30s"), Some(90_000));
        assert_eq!(parse_time_ms("1h30"), Some(3_630_000));
        assert_eq!(parse_time_ms("1y1M1w1d1h1m1s1ms"), Some(34_822_861_001));
    }

    #[test]
    fn times_bad() {
        for bad in [
            "", " ", "s", "ms", "1x", "30m1h", "1s1s", "1m1h", "-1s", "1.5s", "1 s", "1s5", "1ms5",
            "h1",
        ] {
            assert_eq!(parse_time_ms(bad), None, "{bad:?}");
        }
        assert_eq!(parse_time_sec("500ms"), None);
        // Overflow is refused.
        assert_eq!(parse_time_ms("9223372036854775807s"), None);
        assert_eq!(parse_time_ms("999999999999y"), None);
        assert_eq!(parse_time_ms("99999999999999999999999"), None);
        assert_eq!(parse_time_ms("9223372036854775807ms"), Some(MAX));
    }

    #[test]
    fn flags() {
        assert_eq!(parse_flag("on"), Some(true));
        assert_eq!(parse_flag("ON"), Some(true));
        assert_eq!(parse_flag("off"), Some(false));
        assert_eq!(parse_flag("Off"), Some(false));
        assert_eq!(parse_flag("yes"), None);
        assert_eq!(parse_flag(""), None);
    }

    fn listen(args: &[&str]) -> Result<ListenConf, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse_listen(&args, 80)
    }

    #[test]
    fn listen_addresses() {
        let l = listen(&["127.0.0.1:8080"]).unwrap();
        assert_eq!(l.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(l.backlog, 511);
        assert!(!l.default_server && !l.reuseport && !l.deferred);
        assert_eq!(
            listen(&["8080"]).unwrap().addr,
            "0.0.0.0:8080".parse().unwrap()
        );
        assert_eq!(
            listen(&["*:81"]).unwrap().addr,
            "0.0.0.0:81".parse().unwrap()
        );
        assert_eq!(
            listen(&["[::1]:8080"]).unwrap().addr,
            "[::1]:8080".parse().unwrap()
        );
        assert_eq!(listen(&["[::]"]).unwrap().addr, "[::]:80".parse().unwrap());
        assert_eq!(
            listen(&["10.0.0.1"]).unwrap().addr,
            "10.0.0.1:80".parse().unwrap()
        );
        assert_eq!(listen(&["localhost:99"]).unwrap().addr.port(), 99);
    }

    #[test]
    fn listen_parameters() {
        let l = listen(&[
            "127.0.0.1:80",
            "default_server",
            "backlog=1024",
            "reuseport",
            "deferred",
        ])
        .unwrap();
        assert!(l.default_server && l.reuseport && l.deferred);
        assert_eq!(l.backlog, 1024);
    }

    #[test]
    fn listen_errors() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["127.0.0.1:99999"],
                "invalid port in \"127.0.0.1:99999\" of the \"listen\" directive",
            ),
            (
                &["127.0.0.1:0"],
                "invalid port in \"127.0.0.1:0\" of the \"listen\" directive",
            ),
            (
                &["127.0.0.1:x"],
                "invalid port in \"127.0.0.1:x\" of the \"listen\" directive",
            ),
            (
                &["[::1"],
                "invalid host in \"[::1\" of the \"listen\" directive",
            ),
            (
                &["[zz]:80"],
                "invalid IPv6 address in \"[zz]:80\" of the \"listen\" directive",
            ),
            (
                &["::1"],
                "invalid host in \"::1\" of the \"listen\" directive",
            ),
            (&[":80"], "no host in \":80\" of the \"listen\" directive"),
            (&["80", "bogus"], "invalid parameter \"bogus\""),
            (&["80", "backlog=x"], "invalid backlog \"x\""),
            (&["80", "backlog=0"], "invalid backlog \"0\""),
            (
                &["80", "backlog=4294967296"],
                "invalid backlog \"4294967296\"",
            ),
            (&[], "invalid number of arguments in \"listen\" directive"),
        ];
        for (args, msg) in cases {
            assert_eq!(listen(args).unwrap_err(), *msg, "{args:?}");
        }
    }
}
