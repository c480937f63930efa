//! Request head parsing: request line, header lines, and nginx's header
//! buffer limits.
//!
//! Owns the rules deciding whether a head is acceptable and which error it
//! earns. Parsing is incremental over a caller-owned buffer: the parser
//! keeps only offsets, so feeding a head one byte at a time costs the same
//! as feeding it at once, and errors are raised as soon as the offending
//! byte arrives, as nginx does.
//!
//! A parsed [`Request`] is one byte buffer (the head as received, then the
//! decoded path and the lowercased host) plus offsets into it, and both the
//! parser and the request keep their capacity when reused: a request costs
//! no allocation once a connection has served one.

use crate::body::BodyKind;
use crate::conn::{HeadErr, HeadLine};
use crate::settings::HttpSettings;
use crate::uri;

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

/// The `Connection` header's verdict (last matching header wins, as in
/// nginx).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionOption {
    /// Contains "close".
    Close,
    /// Contains "keep-alive".
    KeepAlive,
}

/// The methods the server itself distinguishes, decided once per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MethodKind {
    Get,
    Head,
    Other,
}

/// A byte range of a buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    start: usize,
    end: usize,
}

impl Span {
    fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    pub(crate) fn of(self, buf: &[u8]) -> &[u8] {
        buf.get(self.start..self.end).unwrap_or(&[])
    }

    fn pair(self) -> (usize, usize) {
        (self.start, self.end)
    }
}

/// A complete, validated request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The head as received (from the request line to the empty line), then
    /// the decoded path, then the lowercased host.
    buf: Vec<u8>,
    line: Span,
    method: Span,
    target: Span,
    path: Span,
    query: Option<Span>,
    host: Option<Span>,
    /// Name and value of each accepted header line, in order.
    headers: Vec<(Span, Span)>,
    /// Bytes of the head as received (request line to the empty line).
    head_len: usize,
    method_kind: MethodKind,
    /// Protocol version.
    pub version: Version,
    /// `Connection` header verdict, if any.
    pub connection: Option<ConnectionOption>,
    /// Body framing.
    pub body: BodyKind,
    /// Whether the connection stays open after this request's response
    /// (version default, `Connection`, keepalive_requests/time applied).
    pub keep_alive: bool,
}

impl Default for Request {
    fn default() -> Request {
        Request {
            buf: Vec::new(),
            line: Span::default(),
            method: Span::default(),
            target: Span::default(),
            path: Span::default(),
            query: None,
            host: None,
            headers: Vec::new(),
            head_len: 0,
            method_kind: MethodKind::Other,
            version: Version::HTTP_11,
            connection: None,
            body: BodyKind::None,
            keep_alive: false,
        }
    }
}

impl Request {
    /// Method token (`[A-Z_-]+`); unknown methods are passed through so the
    /// handler can answer 405 like nginx's static module.
    pub fn method(&self) -> &str {
        match self.method_kind {
            MethodKind::Get => "GET",
            MethodKind::Head => "HEAD",
            MethodKind::Other => std::str::from_utf8(self.method.of(&self.buf)).unwrap_or(""),
        }
    }

    /// GET or HEAD: the methods static content answers.
    pub fn is_get_or_head(&self) -> bool {
        self.method_kind != MethodKind::Other
    }

    /// The request target exactly as sent.
    pub fn target(&self) -> &[u8] {
        self.target.of(&self.buf)
    }

    /// Decoded, normalized path (see [`crate::uri`]).
    pub fn path(&self) -> &[u8] {
        self.path.of(&self.buf)
    }

    /// The path as UTF-8, when it is.
    pub fn path_str(&self) -> Option<&str> {
        std::str::from_utf8(self.path()).ok()
    }

    /// Raw query string, without `?`.
    pub fn query(&self) -> Option<&[u8]> {
        self.query.map(|s| s.of(&self.buf))
    }

    /// Virtual host: from an absolute-form target, else from `Host`;
    /// lowercased, without port and trailing dot.
    pub fn host(&self) -> Option<&str> {
        self.host
            .and_then(|s| std::str::from_utf8(s.of(&self.buf)).ok())
    }

    /// The request line without its CRLF, as sent (`$request`: nginx logs
    /// its bytes, escaped by the access log, never replaced).
    pub fn request_line(&self) -> &[u8] {
        self.line.of(&self.buf)
    }

    /// All accepted header lines in order (ignored invalid ones excluded):
    /// name as sent, value without surrounding spaces.
    pub fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.headers
            .iter()
            .map(|(n, v)| (n.of(&self.buf), v.of(&self.buf)))
    }

    /// First header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// All headers with this name, in order.
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// Bytes of the head as received (`$request_length` without a body).
    pub fn head_len(&self) -> usize {
        self.head_len
    }

    /// True for HEAD: the response body is suppressed.
    pub fn is_head(&self) -> bool {
        self.method_kind == MethodKind::Head
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

    /// `Referer` as sent, for the access log.
    pub fn referer(&self) -> Option<Vec<u8>> {
        self.header("Referer").map(<[u8]>::to_vec)
    }

    /// `User-Agent` as sent, for the access log.
    pub fn user_agent(&self) -> Option<Vec<u8>> {
        self.header("User-Agent").map(<[u8]>::to_vec)
    }

    /// The same request as a bodiless GET: what nginx's internal redirect
    /// to an `error_page` URI serves.
    pub fn as_get(&self) -> Request {
        let mut r = self.clone();
        r.method_kind = MethodKind::Get;
        r.body = BodyKind::None;
        r
    }
}

/// A parsed request line: offsets into the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestLine {
    pub method_end: usize,
    pub target: (usize, usize),
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
        method_end,
        target: (target_start, target_end),
        version: Version { major: 1, minor },
    }))
}

/// Where a header line's name and value are: offsets into the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeaderLine {
    pub name_end: usize,
    pub value: (usize, usize),
    /// A name nginx ignores (odd characters, or `_` without
    /// `underscores_in_headers`) under `ignore_invalid_headers`.
    pub ignored: bool,
}

impl HeaderLine {
    /// Where nginx's `r->header_end` is on the line: the end of the
    /// value without its trailing spaces, or the line's end (without CR)
    /// when the value is empty — what `client sent invalid header line:
    /// "…"` quotes of an ignored line.
    pub fn text_end(&self, line: &[u8]) -> usize {
        if self.value.0 < self.value.1 {
            self.value.1
        } else {
            line.strip_suffix(b"\r").map_or(line.len(), <[u8]>::len)
        }
    }
}

/// A header line nginx refuses (`NGX_HTTP_PARSE_INVALID_HEADER`): the
/// offset of the byte its parser stopped at (`r->header_end`), which the
/// error line quotes up to and names as `\xNN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadHeader(pub usize);

/// Parses one header line (without LF), following nginx's
/// `ngx_http_parse_header_line`.
pub(crate) fn parse_header_line(line: &[u8], st: &HttpSettings) -> Result<HeaderLine, BadHeader> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut invalid = false;
    let mut i = 0;
    while i < line.len() {
        let c = line[i];
        match NAME_CHAR[usize::from(c)] {
            NAME_OK => {}
            NAME_COLON => break,
            // Spaces and controls in a name (including obs-fold
            // continuation lines) are errors since nginx 1.21.1.
            NAME_BAD => return Err(BadHeader(i)),
            _ => invalid |= !(c == b'_' && st.underscores_in_headers),
        }
        i += 1;
    }
    if i == 0 {
        return Err(BadHeader(0));
    }
    let name_end = i;
    let mut start = (i + 1).min(line.len());
    let mut end = line.len();
    while start < end && line[start] == b' ' {
        start += 1;
    }
    // A NUL stops nginx's parser where it is; a CR inside the line where
    // the value (without trailing spaces) ended.
    if let Some(bad) = line[start..end].iter().position(|&c| c == 0 || c == b'\r') {
        let at = start + bad;
        if line[at] == 0 {
            return Err(BadHeader(at));
        }
        let mut e = at;
        while e > start && line[e - 1] == b' ' {
            e -= 1;
        }
        return Err(BadHeader(e));
    }
    while end > start && line[end - 1] == b' ' {
        end -= 1;
    }
    Ok(HeaderLine {
        name_end,
        value: (start, end),
        ignored: invalid && st.ignore_invalid_headers,
    })
}

/// What a byte is in a header name: [`NAME_OK`] (letters, digits, `-`),
/// [`NAME_COLON`] (the end), [`NAME_BAD`] (controls, space, DEL: the line
/// is refused) or [`NAME_ODD`] (anything else, `_` included: the line is
/// ignored under `ignore_invalid_headers`, `_` unless
/// `underscores_in_headers`). One look-up a byte instead of four tests.
static NAME_CHAR: [u8; 256] = {
    let mut t = [NAME_ODD; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        if b.is_ascii_alphanumeric() || b == b'-' {
            t[c] = NAME_OK;
        } else if b <= 0x20 || b == 0x7f {
            t[c] = NAME_BAD;
        }
        c += 1;
    }
    t[b':' as usize] = NAME_COLON;
    t
};
const NAME_OK: u8 = 0;
const NAME_COLON: u8 = 1;
const NAME_BAD: u8 = 2;
const NAME_ODD: u8 = 3;

/// nginx's Host check: no empty labels, no `/`, no controls; returns the
/// length of the host without port and trailing dot (lowercasing is left
/// to the caller).
pub(crate) fn validate_host(h: &[u8]) -> Option<usize> {
    #[derive(PartialEq)]
    enum S {
        Usual,
        Literal,
        Rest,
    }
    let mut state = S::Usual;
    let mut dot_pos: Option<usize> = None;
    let mut host_len = h.len();
    let mut i = 0;
    while i < h.len() {
        let c = h[i];
        // Most bytes of a host need no decision: one table look-up each.
        if !HOST_SPECIAL[c as usize] {
            i += 1;
            continue;
        }
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
        i += 1;
    }
    if host_len > 0 && dot_pos == Some(host_len - 1) {
        host_len -= 1;
    }
    if host_len == 0 {
        return None;
    }
    Some(host_len)
}

/// The bytes [`validate_host`] decides on: `.` `:` `[` `]` `/`, controls,
/// space and DEL.
static HOST_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c <= 0x20 {
        t[c] = true;
        c += 1;
    }
    t[0x7f] = true;
    t[b'.' as usize] = true;
    t[b':' as usize] = true;
    t[b'[' as usize] = true;
    t[b']' as usize] = true;
    t[b'/' as usize] = true;
    t
};

/// Appends a validated host, lowercased, as UTF-8 (bytes that are not are
/// replaced, as the log and the server-name match see them).
fn push_host(out: &mut Vec<u8>, host: &[u8]) {
    if host.is_ascii() || std::str::from_utf8(host).is_ok() {
        let start = out.len();
        out.extend_from_slice(host);
        out[start..].make_ascii_lowercase();
    } else {
        let s = String::from_utf8_lossy(host).to_ascii_lowercase();
        out.extend_from_slice(s.as_bytes());
    }
}

/// Outcome of feeding bytes to a [`HeadParser`].
#[derive(Debug)]
pub(crate) enum HeadStatus {
    /// Need more bytes.
    Incomplete,
    /// The head ends at this offset of the buffer; the request was written
    /// into the caller's [`Request`].
    Complete(usize),
    /// Refuse with this status (494 = header too large).
    Error(u16),
}

/// What the parser learned from the request line (offsets into the
/// buffer).
#[derive(Debug, Clone, Copy)]
struct LineInfo {
    line: Span,
    method: Span,
    target: Span,
    version: Version,
    query: Option<Span>,
    uri_host: Option<Span>,
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
    line: Option<LineInfo>,
    /// The decoded, normalized path (kept for its capacity).
    path: Vec<u8>,
    headers: Vec<(Span, Span)>,
    host: Option<Span>,
    content_length: Option<Span>,
    transfer_encoding: Option<Span>,
    connection: Option<ConnectionOption>,
    /// Why the head was refused, for the error log.
    pub(crate) err: Option<HeadErr>,
    /// Header lines ignored under `ignore_invalid_headers`, for nginx's
    /// `client sent invalid header line` (empty, never allocated, unless
    /// a client sends one): the quoted text, and whether `Host` was read
    /// before it (the line then names it).
    pub(crate) ignored: Vec<(Span, bool)>,
    /// Where the last header line began (nginx's `r->header_name_start`,
    /// which a 494 at a line boundary quotes).
    last_header: Option<usize>,
    /// The head began with bytes left over from the previous request
    /// (nginx's `reading client pipelined request line`).
    pub(crate) pipelined: bool,
    /// The last `Host` value that passed [`validate_host`] and its verdict,
    /// kept across requests (never reset): a keep-alive client sends the
    /// same Host every time, and the check is a pure function of the
    /// bytes. Bounded by [`HOST_MEMO_MAX`].
    host_memo: (Vec<u8>, usize),
}

/// The longest Host value [`HeadParser::host_memo`] keeps.
const HOST_MEMO_MAX: usize = 255;

impl HeadParser {
    pub(crate) fn new(st: &HttpSettings) -> HeadParser {
        HeadParser {
            buf_end: st.client_header_buffer_size,
            ..HeadParser::default()
        }
    }

    /// Ready for the next request, keeping the capacity of its vectors.
    pub(crate) fn reset(&mut self, st: &HttpSettings) {
        self.scan = 0;
        self.line_start = None;
        self.buf_end = st.client_header_buffer_size;
        self.nbusy = 0;
        self.line = None;
        self.path.clear();
        self.headers.clear();
        self.host = None;
        self.content_length = None;
        self.transfer_encoding = None;
        self.connection = None;
        self.err = None;
        self.ignored.clear();
        self.last_header = None;
        self.pipelined = false;
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

    /// The request line within `buf`, once it was parsed (for logging
    /// errors).
    pub(crate) fn request_line<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        self.line.as_ref().map_or(&[], |l| l.line.of(buf))
    }

    /// `$request` of a refused head: the parsed request line, or for a 414
    /// what nginx keeps of the line (from its start to the buffer's end).
    pub(crate) fn logged_line<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        match (&self.line, &self.err) {
            (None, Some(HeadErr::TooLongUri((s, e)))) => {
                buf.get(*s..(*e).min(buf.len())).unwrap_or(&[])
            }
            _ => self.request_line(buf),
        }
    }

    /// The request line, or the part of it that arrived (up to CR or LF),
    /// as nginx's error log shows a request being read.
    pub(crate) fn line_so_far<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        if let Some(l) = &self.line {
            return l.line.of(buf);
        }
        if !self.started() {
            return &[];
        }
        // The buffer starts at the request: its first line (after the
        // empty lines nginx skips) is the request line.
        let skip = buf
            .iter()
            .position(|&b| b != b'\r' && b != b'\n')
            .unwrap_or(buf.len());
        let rest = &buf[skip..];
        let end = rest
            .iter()
            .position(|&b| b == b'\r' || b == b'\n')
            .unwrap_or(rest.len());
        &rest[..end]
    }

    /// The value of the first header `name` read so far.
    pub(crate) fn header_value<'a>(&self, buf: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.of(buf).eq_ignore_ascii_case(name))
            .map(|(_, v)| v.of(buf))
    }

    /// True once the request line was parsed.
    pub(crate) fn line_parsed(&self) -> bool {
        self.line.is_some()
    }

    /// nginx reads a head into a `client_header_buffer_size` buffer, then
    /// moves the unfinished line into one of the large buffers whenever the
    /// current one fills up; a line that cannot fit one large buffer, or a
    /// head needing more than the allowed count, is refused. Replaying that
    /// on offsets gives exactly nginx's limits.
    fn fit(&mut self, start: usize, end: usize, st: &HttpSettings) -> Result<(), u16> {
        while end > self.buf_end {
            if self.buf_end.saturating_sub(start) >= st.large_header_buffer_size
                || self.nbusy >= st.large_header_buffers
            {
                self.err = Some(self.too_large(start));
                return Err(if self.line.is_none() { 414 } else { 494 });
            }
            self.nbusy += 1;
            self.buf_end = start.min(self.buf_end) + st.large_header_buffer_size;
        }
        Ok(())
    }

    /// What nginx quotes when the head outgrows its buffers: the request
    /// line up to the buffer's end (414); the header line being read, up
    /// to the buffer's end and at most 1,748 bytes (`NGX_MAX_ERROR_STR -
    /// 300`); at a line boundary the last header line's start, or nothing
    /// before the first header (`client sent too large request`).
    fn too_large(&self, start: usize) -> HeadErr {
        if self.line.is_none() {
            return HeadErr::TooLongUri((start, self.buf_end));
        }
        let (from, nuls) = if start < self.buf_end {
            (Some(start), None)
        } else {
            // The last header line, as nginx left it in its buffer: a
            // header it kept has NULs after its name and its value.
            let nuls = self
                .headers
                .last()
                .filter(|(n, _)| Some(n.start) == self.last_header)
                .map(|(n, v)| (n.end, v.end));
            (self.last_header, nuls)
        };
        match from {
            Some(f) => HeadErr::TooLongHeader((f, self.buf_end.min(f + 1748)), nuls),
            None => HeadErr::TooLargeRequest,
        }
    }

    /// Examines the bytes of `buf` not seen yet; a complete head is written
    /// into `req` (whose buffers are reused).
    pub(crate) fn advance(
        &mut self,
        buf: &[u8],
        st: &HttpSettings,
        req: &mut Request,
    ) -> HeadStatus {
        match self.advance_inner(buf, st) {
            Ok(Some(end)) => match self.finish(buf, end, st, req) {
                Ok(()) => HeadStatus::Complete(end),
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
            let lf = memchr::memchr(b'\n', &buf[self.scan..]);
            let end = lf.map_or(buf.len(), |i| self.scan + i + 1);
            // A complete request line that fits the current buffer gets the
            // same verdict from the full parse below; otherwise check the
            // prefix now, since nginx checks each byte as it lands in a
            // buffer and a bad byte within the first large buffer beats the
            // 414.
            let fits = lf.is_some() && end <= self.buf_end;
            if self.line.is_none() && !fits {
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
                self.on_request_line(buf, start, end - 1, st)?;
            } else if line.is_empty() || line == b"\r" {
                return Ok(Some(end));
            } else {
                self.last_header = Some(start);
                match parse_header_line(line, st) {
                    Err(BadHeader(at)) => {
                        self.err = Some(HeadErr::InvalidHeader((start, start + at)));
                        return Err(400);
                    }
                    Ok(h) if h.ignored => {
                        let text = Span::new(start, start + h.text_end(line));
                        self.ignored.push((text, self.host.is_some()));
                    }
                    Ok(h) => {
                        let name = Span::new(start, start + h.name_end);
                        let value = Span::new(start + h.value.0, start + h.value.1);
                        self.on_header(buf, name, value)?;
                    }
                }
            }
        }
    }

    fn on_request_line(
        &mut self,
        buf: &[u8],
        start: usize,
        end: usize,
        st: &HttpSettings,
    ) -> Result<(), u16> {
        let line = &buf[start..end];
        let rl = parse_request_line(line, true)?.ok_or(400u16)?;
        let line_len = line.strip_suffix(b"\r").map_or(line.len(), <[u8]>::len);
        let target = Span::new(start + rl.target.0, start + rl.target.1);
        let parts = uri::parse_target_into(target.of(buf), st.merge_slashes, &mut self.path)
            .map_err(|_| 400u16)?;
        let mut uri_host = None;
        if let Some((hs, he)) = parts.host {
            let len = validate_host(&target.of(buf)[hs..he]).ok_or(400u16)?;
            uri_host = Some(Span::new(target.start + hs, target.start + hs + len));
        }
        self.line = Some(LineInfo {
            line: Span::new(start, start + line_len),
            method: Span::new(start, start + rl.method_end),
            target,
            version: rl.version,
            query: parts
                .query
                .map(|(qs, qe)| Span::new(target.start + qs, target.start + qe)),
            uri_host,
        });
        Ok(())
    }

    /// Per-header checks nginx runs as each line arrives (so their errors
    /// win over later ones).
    fn on_header(&mut self, buf: &[u8], name: Span, value: Span) -> Result<(), u16> {
        let n = name.of(buf);
        let v = value.of(buf);
        let this = (name.pair(), value.pair());
        if n.eq_ignore_ascii_case(b"Host") {
            if self.host.is_some() {
                let prev = self.previous(buf, n).unwrap_or(this);
                self.err = Some(HeadErr::DuplicateHost { prev, new: this });
                return Err(400);
            }
            let Some(len) = self.check_host(v) else {
                // Kept: the error line shows the host as sent.
                self.headers.push((name, value));
                self.err = Some(HeadErr::InvalidHost);
                return Err(400);
            };
            self.host = Some(Span::new(value.start, value.start + len));
        } else if n.eq_ignore_ascii_case(b"Content-Length") {
            if self.content_length.is_some() {
                let prev = self.previous(buf, n).unwrap_or(this);
                self.err = Some(HeadErr::Duplicate { prev, new: this });
                return Err(400);
            }
            self.content_length = Some(value);
        } else if n.eq_ignore_ascii_case(b"Transfer-Encoding") {
            if self.transfer_encoding.is_some() {
                let prev = self.previous(buf, n).unwrap_or(this);
                self.err = Some(HeadErr::Duplicate { prev, new: this });
                return Err(400);
            }
            self.transfer_encoding = Some(value);
        } else if n.eq_ignore_ascii_case(b"Connection") {
            if contains_ignore_case(v, b"close") {
                self.connection = Some(ConnectionOption::Close);
            } else if contains_ignore_case(v, b"keep-alive") {
                self.connection = Some(ConnectionOption::KeepAlive);
            }
        }
        self.headers.push((name, value));
        Ok(())
    }

    /// [`validate_host`] through the memo of the last valid value.
    #[inline]
    fn check_host(&mut self, v: &[u8]) -> Option<usize> {
        if !v.is_empty() && v == self.host_memo.0.as_slice() {
            return Some(self.host_memo.1);
        }
        let len = validate_host(v)?;
        if v.len() <= HOST_MEMO_MAX {
            self.host_memo.0.clear();
            self.host_memo.0.extend_from_slice(v);
            self.host_memo.1 = len;
        }
        Some(len)
    }

    /// The first header line named `name` read so far.
    fn previous(&self, buf: &[u8], name: &[u8]) -> Option<HeadLine> {
        self.headers
            .iter()
            .find(|(n, _)| n.of(buf).eq_ignore_ascii_case(name))
            .map(|(n, v)| (n.pair(), v.pair()))
    }

    /// Whole-head checks, in nginx's order; on success the request is
    /// written into `req`.
    fn finish(
        &mut self,
        buf: &[u8],
        end: usize,
        st: &HttpSettings,
        req: &mut Request,
    ) -> Result<(), u16> {
        // Kept (not taken): a refused head still logs its request line.
        let line = self.line.ok_or(400u16)?;
        let refuse = |this: &mut HeadParser, e: HeadErr, status: u16| {
            this.err = Some(e);
            Err(status)
        };
        if self.host.is_none() && line.version >= Version::HTTP_11 {
            return refuse(self, HeadErr::NoHost, 400);
        }
        let mut body = BodyKind::None;
        if let Some(cl) = self.content_length {
            match parse_content_length(cl.of(buf)) {
                Some(n) => body = BodyKind::Length(n),
                None => return refuse(self, HeadErr::InvalidContentLength, 400),
            }
        }
        if let Some(te) = self.transfer_encoding {
            if line.version < Version::HTTP_11 {
                return refuse(self, HeadErr::Te10, 400);
            }
            if !te.of(buf).eq_ignore_ascii_case(b"chunked") {
                return refuse(self, HeadErr::UnknownTe(te.pair()), 501);
            }
            if self.content_length.is_some() {
                return refuse(self, HeadErr::ClAndTe, 400);
            }
            body = BodyKind::Chunked;
        }
        let method = line.method.of(buf);
        if method == b"CONNECT" {
            return refuse(self, HeadErr::Connect, 405);
        }
        if method == b"TRACE" {
            return refuse(self, HeadErr::Trace, 405);
        }
        if let BodyKind::Length(n) = body {
            if st.client_max_body_size != 0 && n > st.client_max_body_size {
                return Err(413);
            }
        }
        let keep_alive = match self.connection {
            Some(ConnectionOption::Close) => false,
            Some(ConnectionOption::KeepAlive) => true,
            None => line.version > Version::HTTP_10,
        };
        // The head keeps its offsets: it goes first in the request's buffer.
        req.buf.clear();
        req.buf.extend_from_slice(&buf[..end]);
        let path_start = req.buf.len();
        req.head_len = path_start;
        req.buf.extend_from_slice(&self.path);
        req.path = Span::new(path_start, req.buf.len());
        req.host = match line.uri_host.or(self.host) {
            Some(h) => {
                let host_start = req.buf.len();
                push_host(&mut req.buf, h.of(buf));
                Some(Span::new(host_start, req.buf.len()))
            }
            None => None,
        };
        req.line = line.line;
        req.method = line.method;
        req.target = line.target;
        req.query = line.query;
        req.headers.clear();
        req.headers.extend_from_slice(&self.headers);
        req.method_kind = match method {
            b"GET" => MethodKind::Get,
            b"HEAD" => MethodKind::Head,
            _ => MethodKind::Other,
        };
        req.version = line.version;
        req.connection = self.connection;
        req.body = body;
        req.keep_alive = keep_alive;
        Ok(())
    }
}

/// Case-insensitive substring test without copying (`Connection` values).
fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
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
mod tests;
