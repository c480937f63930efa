//! Request head parsing: request line, header lines, and nginx's header
//! buffer limits.
//!
//! Owns the rules deciding whether a head is acceptable and which error it
//! earns. Parsing is incremental over a caller-owned buffer: the parser
//! keeps only offsets and the headers parsed so far, so feeding a head one
//! byte at a time costs the same as feeding it at once, and errors are
//! raised as soon as the offending byte arrives, as nginx does.

use crate::body::BodyKind;
use crate::settings::HttpSettings;
use crate::uri::{self, Target};

/// HTTP version of a request (`HTTP/1.x`; a major other than 1 is a 505).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Always 1.
    pub major: u8,
    /// 0..=999, as nginx accepts.
    pub minor: u16,
}

impl Version {
    /// HTTP/1.0.
    pub const HTTP_10: Version = Version { major: 1, minor: 0 };
    /// HTTP/1.1.
    pub const HTTP_11: Version = Version { major: 1, minor: 1 };
}

/// One request header, name as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Field name (ASCII token characters).
    pub name: String,
    /// Field value with surrounding spaces removed; may hold any byte but
    /// NUL, CR and LF.
    pub value: Vec<u8>,
}

/// The `Connection` header's verdict (last matching header wins, as in
/// nginx).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionOption {
    /// Contains "close".
    Close,
    /// Contains "keep-alive".
    KeepAlive,
}

/// A complete, validated request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Method token (`[A-Z_-]+`); unknown methods are passed through so the
    /// handler can answer 405 like nginx's static module.
    pub method: String,
    /// The request target exactly as sent.
    pub target: Vec<u8>,
    /// Decoded, normalized path (see [`crate::uri`]).
    pub path: Vec<u8>,
    /// Raw query string, without `?`.
    pub query: Option<Vec<u8>>,
    /// Protocol version.
    pub version: Version,
    /// All accepted header lines in order (ignored invalid ones excluded).
    pub headers: Vec<Header>,
    /// Virtual host: from an absolute-form target, else from `Host`;
    /// lowercased, without port and trailing dot.
    pub host: Option<String>,
    /// `Connection` header verdict, if any.
    pub connection: Option<ConnectionOption>,
    /// Body framing.
    pub body: BodyKind,
    /// Whether the connection stays open after this request's response
    /// (version default, `Connection`, keepalive_requests/time applied).
    pub keep_alive: bool,
    /// The request line without its CRLF, for `$request` in access logs.
    pub request_line: String,
}

impl Request {
    /// First header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_slice())
    }

    /// All headers with this name, in order.
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_slice())
    }

    /// True for HEAD: the response body is suppressed.
    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }

    /// `If-Modified-Since` as Unix seconds, if present and well-formed.
    pub fn if_modified_since(&self) -> Option<u64> {
        self.header("If-Modified-Since")
            .and_then(crate::date::parse_http_date)
    }

    /// Raw `If-None-Match`.
    pub fn if_none_match(&self) -> Option<&[u8]> {
        self.header("If-None-Match")
    }

    /// Raw `Range`.
    pub fn range(&self) -> Option<&[u8]> {
        self.header("Range")
    }

    /// `Referer`, lossily decoded for logging.
    pub fn referer(&self) -> Option<String> {
        self.header("Referer")
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// `User-Agent`, lossily decoded for logging.
    pub fn user_agent(&self) -> Option<String> {
        self.header("User-Agent")
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The path as UTF-8, when it is.
    pub fn path_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.path).ok()
    }
}

/// A parsed request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestLine {
    pub method: String,
    pub target: Vec<u8>,
    pub version: Version,
}

fn is_method_char(c: u8) -> bool {
    c.is_ascii_uppercase() || c == b'_' || c == b'-'
}

/// Parses a request line (without LF; a trailing CR is ignored). With
/// `complete == false` the line is a prefix still being received: `Ok(None)`
/// means "no error so far".
pub(crate) fn parse_request_line(line: &[u8], complete: bool) -> Result<Option<RequestLine>, u16> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let n = line.len();
    // Running out of input is an error only for a complete line (this also
    // covers HTTP/0.9 requests, which gyre refuses with 400).
    let more = |_: usize| if complete { Err(400) } else { Ok(None) };
    let mut i = 0;
    while i < n && is_method_char(line[i]) {
        i += 1;
    }
    if i == n {
        return more(i);
    }
    if i == 0 || line[i] != b' ' {
        return Err(400);
    }
    let method_end = i;
    while i < n && line[i] == b' ' {
        i += 1;
    }
    if i == n {
        return more(i);
    }
    if line[i] != b'/' && !line[i].is_ascii_alphabetic() {
        return Err(400);
    }
    let target_start = i;
    while i < n && line[i] != b' ' {
        let c = line[i];
        if c < 0x20 || c == 0x7f {
            return Err(400);
        }
        i += 1;
    }
    let target_end = i;
    while i < n && line[i] == b' ' {
        i += 1;
    }
    if i == n {
        return more(i);
    }
    const PROTO: &[u8] = b"HTTP/";
    let avail = (n - i).min(PROTO.len());
    if line[i..i + avail] != PROTO[..avail] {
        return Err(400);
    }
    if avail < PROTO.len() {
        return more(i);
    }
    i += PROTO.len();
    match line.get(i) {
        None => return more(i),
        Some(b'1') => {}
        Some(b'2'..=b'9') => return Err(505),
        Some(_) => return Err(400),
    }
    i += 1;
    match line.get(i) {
        None => return more(i),
        Some(b'.') => {}
        Some(b'0'..=b'9') => return Err(505),
        Some(_) => return Err(400),
    }
    i += 1;
    let mut minor: u16 = 0;
    let minor_start = i;
    while i < n && line[i].is_ascii_digit() {
        if minor > 99 {
            return Err(400);
        }
        minor = minor * 10 + u16::from(line[i] - b'0');
        i += 1;
    }
    if i == minor_start {
        return if i == n { more(i) } else { Err(400) };
    }
    while i < n && line[i] == b' ' {
        i += 1;
    }
    if i != n {
        return Err(400);
    }
    if !complete {
        return Ok(None);
    }
    Ok(Some(RequestLine {
        method: String::from_utf8_lossy(&line[..method_end]).into_owned(),
        target: line[target_start..target_end].to_vec(),
        version: Version { major: 1, minor },
    }))
}

/// Parses one header line (without LF). `Ok(None)` is a header nginx
/// ignores (odd characters in its name).
pub(crate) fn parse_header_line(line: &[u8], st: &HttpSettings) -> Result<Option<Header>, u16> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut invalid = false;
    let mut i = 0;
    while i < line.len() && line[i] != b':' {
        let c = line[i];
        if c <= 0x20 || c == 0x7f {
            // Spaces and controls in a name (including obs-fold
            // continuation lines) are errors since nginx 1.21.1.
            return Err(400);
        }
        if !(c.is_ascii_alphanumeric() || c == b'-' || (c == b'_' && st.underscores_in_headers)) {
            invalid = true;
        }
        i += 1;
    }
    if i == 0 {
        return Err(400);
    }
    let name = &line[..i];
    let mut value: &[u8] = if i < line.len() { &line[i + 1..] } else { b"" };
    while let [b' ', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' '] = value {
        value = rest;
    }
    if value.iter().any(|&c| c == 0 || c == b'\r') {
        return Err(400);
    }
    if invalid && st.ignore_invalid_headers {
        return Ok(None);
    }
    Ok(Some(Header {
        name: String::from_utf8_lossy(name).into_owned(),
        value: value.to_vec(),
    }))
}

/// nginx's Host check: no empty labels, no `/`, no controls; returns the
/// lowercased host without port and trailing dot.
pub(crate) fn validate_host(h: &[u8]) -> Option<String> {
    #[derive(PartialEq)]
    enum S {
        Usual,
        Literal,
        Rest,
    }
    let mut state = S::Usual;
    let mut dot_pos: Option<usize> = None;
    let mut host_len = h.len();
    for (i, &c) in h.iter().enumerate() {
        match c {
            b'.' => {
                if dot_pos.is_some_and(|d| d + 1 == i) {
                    return None;
                }
                dot_pos = Some(i);
            }
            b':' if state == S::Usual => {
                host_len = i;
                state = S::Rest;
            }
            b'[' if i == 0 => state = S::Literal,
            b']' if state == S::Literal => {
                host_len = i + 1;
                state = S::Rest;
            }
            b'/' => return None,
            c if c <= 0x20 || c == 0x7f => return None,
            _ => {}
        }
    }
    if host_len > 0 && dot_pos == Some(host_len - 1) {
        host_len -= 1;
    }
    if host_len == 0 {
        return None;
    }
    Some(String::from_utf8_lossy(&h[..host_len]).to_ascii_lowercase())
}

/// Outcome of feeding bytes to a [`HeadParser`].
#[derive(Debug)]
pub(crate) enum HeadStatus {
    /// Need more bytes.
    Incomplete,
    /// The head ends at this offset of the buffer.
    Complete(usize, Box<Request>),
    /// Refuse with this status (494 = header too large).
    Error(u16),
}

/// Incremental head parser over a buffer that starts at the request's
/// first byte and only ever grows until the head is complete.
#[derive(Debug, Default)]
pub(crate) struct HeadParser {
    /// Offset up to which bytes have been examined.
    scan: usize,
    /// Start of the line being received (None while skipping leading
    /// empty lines, which nginx tolerates before a request line).
    line_start: Option<usize>,
    /// End of the current simulated nginx header buffer.
    buf_end: usize,
    /// Large header buffers in use.
    nbusy: usize,
    line: Option<RequestLine>,
    request_line: String,
    target: Option<Target>,
    uri_host: Option<String>,
    headers: Vec<Header>,
    host: Option<String>,
    content_length: Option<Vec<u8>>,
    transfer_encoding: Option<Vec<u8>>,
    connection: Option<ConnectionOption>,
}

impl HeadParser {
    pub(crate) fn new(st: &HttpSettings) -> HeadParser {
        HeadParser {
            buf_end: st.client_header_buffer_size,
            ..HeadParser::default()
        }
    }

    /// True once any byte of a request line has arrived.
    pub(crate) fn started(&self) -> bool {
        self.line_start.is_some() || self.line.is_some()
    }

    /// True when the head announced a body (Content-Length or
    /// Transfer-Encoding), even if the head was then refused.
    pub(crate) fn body_may_follow(&self) -> bool {
        self.content_length.is_some() || self.transfer_encoding.is_some()
    }

    /// The request line, once it was parsed (for logging errors).
    pub(crate) fn request_line(&self) -> &str {
        &self.request_line
    }

    /// nginx reads a head into a `client_header_buffer_size` buffer, then
    /// moves the unfinished line into one of the large buffers whenever the
    /// current one fills up; a line that cannot fit one large buffer, or a
    /// head needing more than the allowed count, is refused. Replaying that
    /// on offsets gives exactly nginx's limits.
    fn fit(&mut self, start: usize, end: usize, st: &HttpSettings) -> Result<(), u16> {
        while end > self.buf_end {
            let err = if self.line.is_none() { 414 } else { 494 };
            if self.buf_end.saturating_sub(start) >= st.large_header_buffer_size
                || self.nbusy >= st.large_header_buffers
            {
                return Err(err);
            }
            self.nbusy += 1;
            self.buf_end = start.min(self.buf_end) + st.large_header_buffer_size;
        }
        Ok(())
    }

    /// Examines the bytes of `buf` not seen yet.
    pub(crate) fn advance(&mut self, buf: &[u8], st: &HttpSettings) -> HeadStatus {
        match self.advance_inner(buf, st) {
            Ok(Some(end)) => match self.finish(st) {
                Ok(r) => HeadStatus::Complete(end, Box::new(r)),
                Err(e) => HeadStatus::Error(e),
            },
            Ok(None) => HeadStatus::Incomplete,
            Err(e) => HeadStatus::Error(e),
        }
    }

    fn advance_inner(&mut self, buf: &[u8], st: &HttpSettings) -> Result<Option<usize>, u16> {
        loop {
            if self.line_start.is_none() {
                while self.scan < buf.len() && matches!(buf[self.scan], b'\r' | b'\n') {
                    self.scan += 1;
                }
                if self.scan == buf.len() {
                    self.fit(self.scan, buf.len(), st)?;
                    return Ok(None);
                }
                self.line_start = Some(self.scan);
            }
            let start = self.line_start.unwrap_or(self.scan);
            let lf = buf[self.scan..].iter().position(|&b| b == b'\n');
            let end = lf.map_or(buf.len(), |i| self.scan + i + 1);
            if self.line.is_none() {
                // nginx checks each byte as it lands in a buffer, so a bad
                // byte within the first large buffer beats the 414.
                let seen =
                    (end - usize::from(lf.is_some())).min(start + st.large_header_buffer_size);
                parse_request_line(&buf[start..seen], false)?;
            }
            self.fit(start, end, st)?;
            if lf.is_none() {
                self.scan = buf.len();
                return Ok(None);
            }
            let line = &buf[start..end - 1];
            self.scan = end;
            self.line_start = Some(end);
            if self.line.is_none() {
                self.on_request_line(line, st)?;
            } else if line.is_empty() || line == b"\r" {
                return Ok(Some(end));
            } else if let Some(h) = parse_header_line(line, st)? {
                self.on_header(h)?;
            }
        }
    }

    fn on_request_line(&mut self, line: &[u8], st: &HttpSettings) -> Result<(), u16> {
        let rl = parse_request_line(line, true)?.ok_or(400u16)?;
        self.request_line =
            String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line)).into_owned();
        let target = uri::parse_target(&rl.target, st.merge_slashes).map_err(|_| 400u16)?;
        if let Some(h) = &target.host {
            self.uri_host = Some(validate_host(h).ok_or(400u16)?);
        }
        self.target = Some(target);
        self.line = Some(rl);
        Ok(())
    }

    /// Per-header checks nginx runs as each line arrives (so their errors
    /// win over later ones).
    fn on_header(&mut self, h: Header) -> Result<(), u16> {
        let name = h.name.as_str();
        if name.eq_ignore_ascii_case("Host") {
            if self.host.is_some() {
                return Err(400);
            }
            self.host = Some(validate_host(&h.value).ok_or(400u16)?);
        } else if name.eq_ignore_ascii_case("Content-Length") {
            if self.content_length.is_some() {
                return Err(400);
            }
            self.content_length = Some(h.value.clone());
        } else if name.eq_ignore_ascii_case("Transfer-Encoding") {
            if self.transfer_encoding.is_some() {
                return Err(400);
            }
            self.transfer_encoding = Some(h.value.clone());
        } else if name.eq_ignore_ascii_case("Connection") {
            let v = h.value.to_ascii_lowercase();
            if contains(&v, b"close") {
                self.connection = Some(ConnectionOption::Close);
            } else if contains(&v, b"keep-alive") {
                self.connection = Some(ConnectionOption::KeepAlive);
            }
        }
        self.headers.push(h);
        Ok(())
    }

    /// Whole-head checks, in nginx's order.
    fn finish(&mut self, st: &HttpSettings) -> Result<Request, u16> {
        let rl = self.line.take().ok_or(400u16)?;
        let target = self.target.take().ok_or(400u16)?;
        if self.host.is_none() && rl.version >= Version::HTTP_11 {
            return Err(400);
        }
        let mut body = BodyKind::None;
        if let Some(cl) = &self.content_length {
            body = BodyKind::Length(parse_content_length(cl).ok_or(400u16)?);
        }
        if let Some(te) = &self.transfer_encoding {
            if rl.version < Version::HTTP_11 {
                return Err(400);
            }
            if !te.eq_ignore_ascii_case(b"chunked") {
                return Err(501);
            }
            if self.content_length.is_some() {
                return Err(400);
            }
            body = BodyKind::Chunked;
        }
        if rl.method == "CONNECT" || rl.method == "TRACE" {
            return Err(405);
        }
        if let BodyKind::Length(n) = body {
            if st.client_max_body_size != 0 && n > st.client_max_body_size {
                return Err(413);
            }
        }
        let keep_alive = match self.connection {
            Some(ConnectionOption::Close) => false,
            Some(ConnectionOption::KeepAlive) => true,
            None => rl.version > Version::HTTP_10,
        };
        Ok(Request {
            method: rl.method,
            target: rl.target,
            path: target.path,
            query: target.query,
            version: rl.version,
            headers: std::mem::take(&mut self.headers),
            host: self.uri_host.take().or_else(|| self.host.take()),
            connection: self.connection,
            body,
            keep_alive,
            request_line: std::mem::take(&mut self.request_line),
        })
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// nginx's `ngx_atoof`: digits only, no sign, no spaces, no overflow.
pub(crate) fn parse_content_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &c in v {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
        if n > i64::MAX as u64 {
            return None;
        }
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        let ok = [
            ("GET / HTTP/1.1", "GET", "/", 1),
            ("GET  /  HTTP/1.1", "GET", "/", 1),
            ("FOO /x HTTP/1.0", "FOO", "/x", 0),
            ("GET / HTTP/1.2", "GET", "/", 2),
            ("GET / HTTP/1.999 ", "GET", "/", 999),
            ("M-_ http://x HTTP/1.1\r", "M-_", "http://x", 1),
        ];
        for (l, m, t, minor) in ok {
            let r = parse_request_line(l.as_bytes(), true).unwrap().unwrap();
            assert_eq!(
                (r.method.as_str(), r.target.as_slice(), r.version.minor),
                (m, t.as_bytes(), minor)
            );
        }
        let bad = [
            ("get / HTTP/1.1", 400),
            ("GET / HTTP/2.0", 505),
            ("GET / HTTP/3", 505),
            ("GET / HTTP/10.1", 505),
            ("GET / HTTP/0.9", 400),
            ("GET / HTTP/1.1000", 400),
            ("GET / http/1.1", 400),
            ("GET /", 400),
            ("GET / ", 400),
            ("GET\t/ HTTP/1.1", 400),
            ("GET * HTTP/1.1", 400),
            ("GET /a\x01 HTTP/1.1", 400),
            ("GET /a\rb HTTP/1.1", 400),
            ("GET / HTTP/1.", 400),
            ("GET / HTTP/1.1x", 400),
            (" GET / HTTP/1.1", 400),
        ];
        for (l, e) in bad {
            assert_eq!(parse_request_line(l.as_bytes(), true), Err(e), "{l:?}");
        }
        // Prefixes of good lines are never errors.
        let l = b"GET /index.html HTTP/1.1\r";
        for i in 0..l.len() {
            assert_eq!(parse_request_line(&l[..i], false), Ok(None));
        }
        assert_eq!(parse_request_line(b"G\x01", false), Err(400));
        assert_eq!(parse_request_line(b"GET / HTTP/2", false), Err(505));
    }

    #[test]
    fn header_lines() {
        let st = HttpSettings::default();
        let h = parse_header_line(b"Host:   x  \r", &st).unwrap().unwrap();
        assert_eq!((h.name.as_str(), h.value.as_slice()), ("Host", &b"x"[..]));
        let h = parse_header_line(b"Foobar", &st).unwrap().unwrap();
        assert_eq!((h.name.as_str(), h.value.as_slice()), ("Foobar", &b""[..]));
        assert_eq!(parse_header_line(b"Foo_bar: 1", &st), Ok(None));
        assert_eq!(parse_header_line("F\u{e9}: 1".as_bytes(), &st), Ok(None));
        assert!(parse_header_line(b"Foo: a\x01b", &st).unwrap().is_some());
        for bad in [
            &b"Foo : bar"[..],
            b" b",
            b"\tb",
            b": b",
            b"Foo: a\x00b",
            b"F\x01o: x",
            b"Foo: a\rb",
        ] {
            assert_eq!(parse_header_line(bad, &st), Err(400), "{bad:?}");
        }
    }

    #[test]
    fn hosts() {
        let ok = [
            ("X", "x"),
            ("x.", "x"),
            ("X:8080", "x"),
            ("[::1]:80", "[::1]"),
            ("x:abc", "x"),
            ("-x", "-x"),
            ("x_y", "x_y"),
        ];
        for (i, o) in ok {
            assert_eq!(validate_host(i.as_bytes()).as_deref(), Some(o), "{i}");
        }
        for bad in ["", "x..y", "a b", "x/y", ".", ":80", "a\x00"] {
            assert_eq!(validate_host(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn content_lengths() {
        assert_eq!(parse_content_length(b"01"), Some(1));
        assert_eq!(
            parse_content_length(b"9223372036854775807"),
            Some(i64::MAX as u64)
        );
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b"0x1",
            b"1 1",
            b"1, 1",
            b"1\t",
            b"9223372036854775808",
            b"99999999999999999999999",
        ] {
            assert_eq!(parse_content_length(bad), None, "{bad:?}");
        }
    }
}
