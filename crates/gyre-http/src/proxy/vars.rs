//! What a proxied request records about its upstream attempts, for the
//! `$upstream_*` variables (nginx's `u->state` array): per attempt the
//! peer, the status, the connect / header / response times and the bytes
//! received; and the last response's headers for `$upstream_http_NAME`.
//! Kept in the request object and cleared per request, so the vectors keep
//! their capacity.

use gyre_core::event::{msec_diff, Msec};

/// One attempt.
#[derive(Debug, Clone, Default)]
struct Attempt {
    /// Index of the peer's name in `names`.
    name: (usize, usize),
    status: u16,
    start: Msec,
    connect: Option<Msec>,
    header: Option<Msec>,
    end: Option<Msec>,
    bytes: u64,
}

/// The `$upstream_*` facts of a request.
#[derive(Debug, Clone, Default)]
pub struct UpstreamVars {
    attempts: Vec<Attempt>,
    /// The peers' names, concatenated.
    names: String,
    /// The last response's headers: `name\0value\0` pairs.
    headers: Vec<u8>,
    /// A `proxy_pass` with variables: the settings evaluated for this
    /// request (`$proxy_host`, `$proxy_port` as nginx sets them from the
    /// evaluated URL).
    evaluated: Option<std::sync::Arc<super::conf::ProxyConf>>,
}

impl UpstreamVars {
    pub fn clear(&mut self) {
        self.attempts.clear();
        self.names.clear();
        self.headers.clear();
        self.evaluated = None;
    }

    /// Records the settings a `proxy_pass` with variables evaluated to.
    pub fn set_evaluated(&mut self, conf: std::sync::Arc<super::conf::ProxyConf>) {
        self.evaluated = Some(conf);
    }

    /// The settings of this request's `proxy_pass` with variables, once
    /// evaluated.
    pub fn evaluated(&self) -> Option<&super::conf::ProxyConf> {
        self.evaluated.as_deref()
    }

    /// True when the request was proxied.
    pub fn is_empty(&self) -> bool {
        self.attempts.is_empty()
    }

    /// A new attempt on the peer `name` (an upstream's name when no peer
    /// was live, as nginx's `$upstream_addr`).
    pub fn push_attempt(&mut self, name: &str, now: Msec) {
        let start = self.names.len();
        self.names.push_str(name);
        self.attempts.push(Attempt {
            name: (start, self.names.len()),
            start: now,
            ..Attempt::default()
        });
    }

    pub fn connected(&mut self, now: Msec) {
        if let Some(a) = self.attempts.last_mut() {
            a.connect = Some(now);
        }
    }

    pub fn header(&mut self, now: Msec, status: u16) {
        if let Some(a) = self.attempts.last_mut() {
            a.header = Some(now);
            a.status = status;
            a.end = Some(now);
        }
    }

    pub fn received(&mut self, n: u64) {
        if let Some(a) = self.attempts.last_mut() {
            a.bytes += n;
        }
    }

    /// The attempt failed: nginx records 502 or 504 for it.
    pub fn failed(&mut self, now: Msec, status: u16) {
        if let Some(a) = self.attempts.last_mut() {
            if a.status == 0 {
                a.status = status;
            }
            a.end = Some(now);
        }
    }

    pub fn done(&mut self, now: Msec) {
        if let Some(a) = self.attempts.last_mut() {
            a.end = Some(now);
        }
    }

    /// The last response's headers.
    pub fn set_headers<'a>(&mut self, hs: impl Iterator<Item = (&'a [u8], &'a [u8])>) {
        self.headers.clear();
        for (n, v) in hs {
            self.headers.extend_from_slice(n);
            self.headers.push(0);
            self.headers.extend_from_slice(v);
            self.headers.push(0);
        }
    }

    /// The peer of the last attempt.
    pub fn last_addr(&self) -> &str {
        self.attempts
            .last()
            .and_then(|a| self.names.get(a.name.0..a.name.1))
            .unwrap_or("")
    }

    /// `$upstream_http_NAME` (`name` lower-case with `-`).
    pub fn header_value(&self, name: &[u8]) -> Option<&[u8]> {
        let mut it = self.headers.split(|&b| b == 0);
        while let (Some(n), Some(v)) = (it.next(), it.next()) {
            if n.eq_ignore_ascii_case(name) {
                return Some(v);
            }
        }
        None
    }

    /// Writes one of the list variables (`, ` between attempts); false
    /// when the request was not proxied.
    pub fn write(&self, which: Which, out: &mut Vec<u8>) -> bool {
        if self.attempts.is_empty() {
            return false;
        }
        for (i, a) in self.attempts.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            match which {
                Which::Addr => out
                    .extend_from_slice(self.names.get(a.name.0..a.name.1).unwrap_or("").as_bytes()),
                Which::Status => match a.status {
                    0 => out.push(b'-'),
                    s => out.extend_from_slice(s.to_string().as_bytes()),
                },
                Which::ResponseTime => secs(out, a.end.map(|e| msec_diff(e, a.start))),
                Which::ConnectTime => secs(out, a.connect.map(|e| msec_diff(e, a.start))),
                Which::HeaderTime => secs(out, a.header.map(|e| msec_diff(e, a.start))),
                Which::BytesReceived => out.extend_from_slice(a.bytes.to_string().as_bytes()),
            }
        }
        true
    }
}

/// nginx's `%T.%03M` seconds, or `-`.
fn secs(out: &mut Vec<u8>, ms: Option<i64>) {
    match ms {
        Some(ms) => {
            let ms = ms.max(0);
            out.extend_from_slice(format!("{}.{:03}", ms / 1000, ms % 1000).as_bytes());
        }
        None => out.push(b'-'),
    }
}

/// Which `$upstream_*` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Addr,
    Status,
    ResponseTime,
    ConnectTime,
    HeaderTime,
    BytesReceived,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_as_nginx_writes_them() {
        let mut v = UpstreamVars::default();
        v.push_attempt("127.0.0.1:1", 1000);
        v.failed(1003, 502);
        v.push_attempt("127.0.0.1:2", 1003);
        v.connected(1004);
        v.header(1010, 200);
        v.received(120);
        v.done(2500);
        let s = |w| {
            let mut o = Vec::new();
            v.write(w, &mut o);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(s(Which::Addr), "127.0.0.1:1, 127.0.0.1:2");
        assert_eq!(s(Which::Status), "502, 200");
        assert_eq!(s(Which::ConnectTime), "-, 0.001");
        assert_eq!(s(Which::HeaderTime), "-, 0.007");
        assert_eq!(s(Which::ResponseTime), "0.003, 1.497");
        assert_eq!(s(Which::BytesReceived), "0, 120");
        v.set_headers([(&b"X-A"[..], &b"1"[..]), (b"Set-Cookie", b"c")].into_iter());
        assert_eq!(v.header_value(b"set-cookie"), Some(&b"c"[..]));
        assert_eq!(v.header_value(b"x-b"), None);
    }
}
