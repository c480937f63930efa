//! Response heads and nginx's built-in error pages.
//!
//! This module owns the exact bytes of every status line and error page the
//! server produces, so that clients (and tests diffing us against nginx) see
//! the same text nginx 1.22 sends, with `gyre` in place of `nginx`.
//! Writing a head allocates nothing: header values are static or shared
//! with the configuration and the file cache ([`Text`]), and the head is
//! written straight into the connection's output buffer.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use smallvec::SmallVec;

/// A response's extra headers; a file response's few fit inline.
pub type Headers = SmallVec<[(Text, Text); 4]>;

/// A header value that is usually not copied per response: static text,
/// or text shared with the configuration or the open-file cache.
///
/// It derefs to bytes, not `str`: nginx copies a URI, an upstream header or
/// a variable's value into a header as the bytes it got (a Latin-1 file
/// name in a directory redirect's `Location`, say), and so must we.
#[derive(Clone)]
pub enum Text {
    /// Text in the binary.
    Static(&'static str),
    /// Text shared with a longer-lived owner (a reference count only).
    Shared(Arc<str>),
    /// Bytes made for this response: any octets but CR and LF, as nginx.
    Owned(Vec<u8>),
}

impl Deref for Text {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Text::Static(s) => s.as_bytes(),
            Text::Shared(s) => s.as_bytes(),
            Text::Owned(s) => s,
        }
    }
}

impl Text {
    /// The bytes that go on the wire.
    pub fn as_bytes(&self) -> &[u8] {
        self
    }

    /// Whether this is `name`, ASCII-caseless: how header names compare.
    pub fn eq_ignore_ascii_case(&self, name: &str) -> bool {
        <[u8]>::eq_ignore_ascii_case(self, name.as_bytes())
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&String::from_utf8_lossy(self), f)
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        **self == **other
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        **self == *other.as_bytes()
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        **self == *other.as_bytes()
    }
}

impl From<&'static str> for Text {
    fn from(s: &'static str) -> Text {
        Text::Static(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::Owned(s.into_bytes())
    }
}

impl From<Vec<u8>> for Text {
    fn from(s: Vec<u8>) -> Text {
        Text::Owned(s)
    }
}

impl From<Arc<str>> for Text {
    fn from(s: Arc<str>) -> Text {
        Text::Shared(s)
    }
}

impl From<&Arc<str>> for Text {
    fn from(s: &Arc<str>) -> Text {
        Text::Shared(s.clone())
    }
}

/// The body of a response. File bodies are opaque to the state machine: it
/// never touches the file system, it only passes the region to the glue,
/// which sends it (e.g. with `sendfile`) in output order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// No body bytes (but `content_length` may still be announced, e.g. 304).
    Empty,
    /// Bytes made for this response (stub_status, tests).
    Bytes(Vec<u8>),
    /// Bytes in the binary (nginx's error pages).
    Static(&'static [u8]),
    /// A region of bytes shared with a longer-lived owner (a small file in
    /// the open-file cache, a `return` text): no copy until the output
    /// buffer.
    Shared {
        /// The whole buffer.
        data: Arc<[u8]>,
        /// First byte of the region.
        start: usize,
        /// End of the region (exclusive).
        end: usize,
    },
    /// A region of a file the glue opened; `token` is the glue's handle.
    File {
        /// Glue-defined identifier of the open file.
        token: u64,
        /// First byte of the region.
        offset: u64,
        /// Length of the region in bytes.
        len: u64,
    },
}

impl Body {
    /// Number of bytes this body would put on the wire.
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::Static(b) => b.len() as u64,
            Body::Shared { start, end, .. } => end.saturating_sub(*start) as u64,
            Body::File { len, .. } => *len,
        }
    }

    /// The bytes of an in-memory body (`None` for files).
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Body::Empty => Some(&[]),
            Body::Bytes(b) => Some(b),
            Body::Static(b) => Some(b),
            Body::Shared { data, start, end } => Some(data.get(*start..*end).unwrap_or(&[])),
            Body::File { .. } => None,
        }
    }

    /// The whole of a shared buffer as a body.
    pub fn shared(data: Arc<[u8]>) -> Body {
        let end = data.len();
        Body::Shared {
            data,
            start: 0,
            end,
        }
    }

    /// True when the body carries no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What the glue wants sent for one request.
///
/// Headers are emitted in nginx's order (Server, Date, Content-Type,
/// Content-Length, Last-Modified, Location, Connection, then `headers`), so
/// byte-level comparisons against nginx stay meaningful.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code; 494 is sent on the wire as `400 Bad Request` (nginx's
    /// internal "header too large" code).
    pub status: u16,
    /// `Content-Type` value, if any.
    pub content_type: Option<Text>,
    /// `Content-Length`; `None` means "use the body's length" (except for
    /// 1xx/204/304, which never get one).
    pub content_length: Option<u64>,
    /// Preformatted `Last-Modified` date.
    pub last_modified: Option<Text>,
    /// `Location` value (redirects).
    pub location: Option<Text>,
    /// Further headers, written after `Connection` in this order.
    pub headers: Headers,
    /// The body; dropped (but its length still announced) for HEAD.
    pub body: Body,
    /// Force `Connection: close` and closing after this response.
    pub close: bool,
    /// The length is not known in advance (a gzipped body): no
    /// `Content-Length`; the body goes chunked to HTTP/1.1 clients and
    /// ends with the connection for HTTP/1.0 ones (nginx's chunked filter).
    pub chunked: bool,
    /// `Server` / `Date` come from `headers` (an upstream's, passed with
    /// `proxy_pass_header`), not from gyre.
    pub foreign_server: bool,
    pub foreign_date: bool,
    /// The status line's text after the code, as an upstream sent it
    /// (nginx passes a proxied response's status line as it came).
    pub reason: Option<Text>,
}

impl Response {
    /// An empty response with the given status.
    pub fn new(status: u16) -> Response {
        Response {
            status,
            content_type: None,
            content_length: None,
            last_modified: None,
            location: None,
            headers: Headers::new(),
            body: Body::Empty,
            close: false,
            chunked: false,
            foreign_server: false,
            foreign_date: false,
            reason: None,
        }
    }

    /// nginx's built-in page for `status` (text/html), or an empty body for
    /// codes nginx sends without a page (e.g. 204, 304). Like nginx's
    /// special response handler, the statuses that mean the connection's
    /// framing can no longer be trusted (400, 413, 414, 494-497, 500, 501)
    /// close the connection.
    pub fn error(status: u16) -> Response {
        let mut r = Response::new(status);
        r.close = matches!(status, 400 | 413 | 414 | 494..=497 | 500 | 501);
        if let Some(page) = error_page(status) {
            r.content_type = Some(Text::Static("text/html"));
            r.body = Body::Static(page);
        }
        r
    }

    /// Makes this an empty response with `status`, in place (keeping the
    /// header list's storage): what the phases use instead of moving
    /// responses around.
    pub fn reset(&mut self, status: u16) {
        self.status = status;
        // The glue resets the shared response after every request, so the
        // phases' own reset usually finds it clean: drop only what is set.
        if self.content_type.is_some() {
            self.content_type = None;
        }
        self.content_length = None;
        if self.last_modified.is_some() {
            self.last_modified = None;
        }
        if self.location.is_some() {
            self.location = None;
        }
        if !self.headers.is_empty() {
            self.headers.clear();
        }
        if !matches!(self.body, Body::Empty) {
            self.body = Body::Empty;
        }
        self.close = false;
        self.chunked = false;
        self.foreign_server = false;
        self.foreign_date = false;
        if self.reason.is_some() {
            self.reason = None;
        }
    }

    /// [`Response::error`] in place.
    pub fn set_error(&mut self, status: u16) {
        self.reset(status);
        self.close = matches!(status, 400 | 413 | 414 | 494..=497 | 500 | 501);
        if let Some(page) = error_page(status) {
            self.content_type = Some(Text::Static("text/html"));
            self.body = Body::Static(page);
        }
    }

    /// Appends a header written after the standard ones.
    pub fn header(mut self, name: &str, value: &str) -> Response {
        self.headers
            .push((name.to_string().into(), value.to_string().into()));
        self
    }
}

/// The status line text nginx uses (its wording, e.g. "Request Time-out").
pub fn status_line(status: u16) -> &'static str {
    match status {
        100 => "100 Continue",
        101 => "101 Switching Protocols",
        200 => "200 OK",
        201 => "201 Created",
        202 => "202 Accepted",
        204 => "204 No Content",
        206 => "206 Partial Content",
        301 => "301 Moved Permanently",
        302 => "302 Moved Temporarily",
        303 => "303 See Other",
        304 => "304 Not Modified",
        307 => "307 Temporary Redirect",
        308 => "308 Permanent Redirect",
        400 | 494 | 495 | 496 | 497 => "400 Bad Request",
        401 => "401 Unauthorized",
        402 => "402 Payment Required",
        403 => "403 Forbidden",
        404 => "404 Not Found",
        405 => "405 Not Allowed",
        406 => "406 Not Acceptable",
        408 => "408 Request Time-out",
        409 => "409 Conflict",
        410 => "410 Gone",
        411 => "411 Length Required",
        412 => "412 Precondition Failed",
        413 => "413 Request Entity Too Large",
        414 => "414 Request-URI Too Large",
        415 => "415 Unsupported Media Type",
        416 => "416 Requested Range Not Satisfiable",
        421 => "421 Misdirected Request",
        429 => "429 Too Many Requests",
        500 => "500 Internal Server Error",
        501 => "501 Not Implemented",
        502 => "502 Bad Gateway",
        503 => "503 Service Temporarily Unavailable",
        504 => "504 Gateway Time-out",
        505 => "505 HTTP Version Not Supported",
        507 => "507 Insufficient Storage",
        _ => "",
    }
}

/// The code that goes on the wire (494..497 are nginx-internal 400s).
pub fn wire_status(status: u16) -> u16 {
    match status {
        494..=497 => 400,
        s => s,
    }
}

/// The server's name with its version (`server_tokens on`).
pub const SERVER_VERSIONED: &str = concat!("gyre/", env!("CARGO_PKG_VERSION"));

/// The end of the status line and the Server header with the version.
const SERVER_LINE_VERSIONED: &str = concat!("\r\nServer: gyre/", env!("CARGO_PKG_VERSION"), "\r\n");

/// nginx's page for a status with a title line only, signed `$sig`.
macro_rules! page {
    ($title:literal, $sig:expr) => {
        concat!(
            "<html>\r\n<head><title>",
            $title,
            "</title></head>\r\n<body>\r\n<center><h1>",
            $title,
            "</h1></center>\r\n<hr><center>",
            $sig,
            "</center>\r\n</body>\r\n</html>\r\n"
        )
    };
}

/// nginx's pages for its internal 400 variants, which explain the error
/// below the title.
macro_rules! special_400 {
    ($text:literal, $sig:expr) => {
        concat!(
            "<html>\r\n<head><title>400 ",
            $text,
            "</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>",
            $text,
            "</center>\r\n<hr><center>",
            $sig,
            "</center>\r\n</body>\r\n</html>\r\n"
        )
    };
}

/// The table of pages, signed `$sig` (one function per signature).
macro_rules! pages {
    ($name:ident, $sig:expr) => {
        fn $name(status: u16) -> Option<&'static str> {
            Some(match status {
                301 => page!("301 Moved Permanently", $sig),
                302 => page!("302 Found", $sig),
                303 => page!("303 See Other", $sig),
                307 => page!("307 Temporary Redirect", $sig),
                308 => page!("308 Permanent Redirect", $sig),
                400 => page!("400 Bad Request", $sig),
                401 => page!("401 Authorization Required", $sig),
                402 => page!("402 Payment Required", $sig),
                403 => page!("403 Forbidden", $sig),
                404 => page!("404 Not Found", $sig),
                405 => page!("405 Not Allowed", $sig),
                406 => page!("406 Not Acceptable", $sig),
                408 => page!("408 Request Time-out", $sig),
                409 => page!("409 Conflict", $sig),
                410 => page!("410 Gone", $sig),
                411 => page!("411 Length Required", $sig),
                412 => page!("412 Precondition Failed", $sig),
                413 => page!("413 Request Entity Too Large", $sig),
                414 => page!("414 Request-URI Too Large", $sig),
                415 => page!("415 Unsupported Media Type", $sig),
                416 => page!("416 Requested Range Not Satisfiable", $sig),
                421 => page!("421 Misdirected Request", $sig),
                429 => page!("429 Too Many Requests", $sig),
                494 => special_400!("Request Header Or Cookie Too Large", $sig),
                495 => special_400!("The SSL certificate error", $sig),
                496 => special_400!("No required SSL certificate was sent", $sig),
                497 => special_400!("The plain HTTP request was sent to HTTPS port", $sig),
                500 => page!("500 Internal Server Error", $sig),
                501 => page!("501 Not Implemented", $sig),
                502 => page!("502 Bad Gateway", $sig),
                503 => page!("503 Service Temporarily Unavailable", $sig),
                504 => page!("504 Gateway Time-out", $sig),
                505 => page!("505 HTTP Version Not Supported", $sig),
                507 => page!("507 Insufficient Storage", $sig),
                _ => return None,
            })
        }
    };
}

pages!(pages_plain, "gyre");
pages!(pages_versioned, concat!("gyre/", env!("CARGO_PKG_VERSION")));

/// nginx's HTML error page for `status`, signed `gyre` (`server_tokens
/// off`), or `None` when nginx sends no page for it. The pages are
/// constants, so an error response costs no allocation.
pub fn error_page(status: u16) -> Option<&'static [u8]> {
    pages_plain(status).map(str::as_bytes)
}

/// The page signed `gyre/VERSION` (`server_tokens on`, nginx's default).
pub fn error_page_versioned(status: u16) -> Option<&'static [u8]> {
    pages_versioned(status).map(str::as_bytes)
}

/// With `server_tokens on`, the versioned twin of a body that is one of
/// the plain pages (the phases and the machine set the plain one).
pub(crate) fn versioned_page(status: u16, body: &Body) -> Option<&'static [u8]> {
    match body {
        Body::Static(p) if error_page(status).is_some_and(|q| std::ptr::eq(*p, q)) => {
            error_page_versioned(status)
        }
        _ => None,
    }
}

/// True for statuses that never carry a body or a Content-Length.
pub(crate) fn bodiless(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

/// Appends `n` in decimal.
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// [`push_decimal`] for the head: the digits are written left-aligned in
/// a fixed 20-byte block that is appended whole (a copy of known size, a
/// couple of moves instead of a `memcpy` call) and cut to length.
#[inline]
fn push_decimal_fixed(out: &mut Vec<u8>, n: u64) {
    let mut len = 1;
    let mut v = n / 10;
    while v > 0 {
        len += 1;
        v /= 10;
    }
    let mut digits = [0u8; 20];
    let mut v = n;
    for d in digits.iter_mut().take(len).rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    let at = out.len();
    out.extend_from_slice(&digits);
    out.truncate(at + len);
}

/// Appends an HTTP date (always 29 bytes: a copy of known size).
#[inline]
fn push_date(out: &mut Vec<u8>, date: &[u8]) {
    match <&[u8; 29]>::try_from(date) {
        Ok(d) => out.extend_from_slice(d),
        Err(_) => out.extend_from_slice(date),
    }
}

fn push_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// The statuses most responses have, with their status line, `Server`
/// and the start of `Date` as one constant per `server_tokens` setting
/// (one copy instead of four).
macro_rules! status_heads {
    ($($code:literal => $line:literal,)*) => {
        fn status_server_date(status: u16, tokens: bool) -> Option<&'static [u8]> {
            Some(match (status, tokens) {
                $(
                    ($code, false) => {
                        concat!("HTTP/1.1 ", $line, "\r\nServer: gyre\r\nDate: ").as_bytes()
                    }
                    ($code, true) => concat!(
                        "HTTP/1.1 ", $line, "\r\nServer: gyre/", env!("CARGO_PKG_VERSION"),
                        "\r\nDate: "
                    )
                    .as_bytes(),
                )*
                _ => return None,
            })
        }
    };
}

status_heads! {
    200 => "200 OK",
    204 => "204 No Content",
    206 => "206 Partial Content",
    301 => "301 Moved Permanently",
    302 => "302 Moved Temporarily",
    304 => "304 Not Modified",
    403 => "403 Forbidden",
    404 => "404 Not Found",
}

/// Serializes the response head onto `out`. `content_length` is the final
/// value (the caller resolved `None` already); `chunked` writes nginx's
/// `Transfer-Encoding: chunked`; `keep_alive` picks the Connection header.
pub(crate) fn write_head(
    resp: &Response,
    content_length: Option<u64>,
    chunked: bool,
    keep_alive: bool,
    tokens: bool,
    date: &str,
    out: &mut Vec<u8>,
) {
    out.reserve(192);
    let fast = if resp.reason.is_none() && !resp.foreign_server && !resp.foreign_date {
        status_server_date(resp.status, tokens)
    } else {
        None
    };
    match fast {
        Some(head) => {
            out.extend_from_slice(head);
            push_date(out, date.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        None => write_status_server_date(resp, tokens, date, out),
    }
    if let Some(ct) = &resp.content_type {
        out.extend_from_slice(b"Content-Type: ");
        out.extend_from_slice(ct.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let Some(cl) = content_length {
        out.extend_from_slice(b"Content-Length: ");
        push_decimal_fixed(out, cl);
        out.extend_from_slice(b"\r\n");
    }
    if let Some(lm) = &resp.last_modified {
        out.extend_from_slice(b"Last-Modified: ");
        push_date(out, lm.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let Some(loc) = &resp.location {
        push_header(out, b"Location", loc.as_bytes());
    }
    if chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    // The Connection header and, when nothing follows, the empty line.
    let last = resp.headers.is_empty();
    out.extend_from_slice(match (resp.status == 101, keep_alive, last) {
        (true, _, true) => b"Connection: upgrade\r\n\r\n",
        (true, _, false) => b"Connection: upgrade\r\n",
        (false, true, true) => b"Connection: keep-alive\r\n\r\n",
        (false, true, false) => b"Connection: keep-alive\r\n",
        (false, false, true) => b"Connection: close\r\n\r\n",
        (false, false, false) => b"Connection: close\r\n",
    });
    if last {
        return;
    }
    for (k, v) in &resp.headers {
        push_header(out, k.as_bytes(), v.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// The status line, `Server` and `Date` of a head the constants of
/// [`status_server_date`] do not cover (another status, an upstream's
/// reason text, its own `Server` or `Date`).
#[cold]
fn write_status_server_date(resp: &Response, tokens: bool, date: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"HTTP/1.1 ");
    let line = status_line(resp.status);
    if let Some(reason) = &resp.reason {
        push_decimal(out, u64::from(resp.status));
        if !reason.is_empty() {
            out.push(b' ');
            out.extend_from_slice(reason.as_bytes());
        }
    } else if line.is_empty() {
        push_decimal(out, u64::from(wire_status(resp.status)));
        out.push(b' ');
    } else {
        out.extend_from_slice(line.as_bytes());
    }
    // `server_tokens`: the version too, or the name alone (one copy of a
    // constant either way); none of gyre's when an upstream's is passed.
    out.extend_from_slice(if resp.foreign_server {
        b"\r\n"
    } else if tokens {
        SERVER_LINE_VERSIONED.as_bytes()
    } else {
        b"\r\nServer: gyre\r\n"
    });
    if !resp.foreign_date {
        push_header(out, b"Date", date.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_page_is_nginx_text() {
        let p = error_page(404).unwrap();
        assert_eq!(
            p,
            b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>gyre</center>\r\n</body>\r\n</html>\r\n"
        );
    }

    #[test]
    fn header_too_large_page() {
        let p = std::str::from_utf8(error_page(494).unwrap()).unwrap();
        assert!(p.starts_with(
            "<html>\r\n<head><title>400 Request Header Or Cookie Too Large</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>Request Header Or Cookie Too Large</center>\r\n<hr>"
        ));
        assert_eq!(status_line(494), "400 Bad Request");
    }

    #[test]
    fn nginx_lengths() {
        // Content-Length values nginx sends with its own signature, minus
        // the 1 byte difference between "nginx" and "gyre".
        for (s, n) in [
            (400, 150),
            (404, 146),
            (413, 176),
            (505, 180),
            (416, 190),
            (494, 226),
        ] {
            assert_eq!(error_page(s).unwrap().len(), n - 1, "{s}");
        }
    }

    /// The head as written field by field (the order and texts before the
    /// constants of `status_server_date` and the fixed-size copies).
    fn reference_head(
        resp: &Response,
        cl: Option<u64>,
        chunked: bool,
        keep_alive: bool,
        tokens: bool,
        date: &str,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        write_status_server_date(resp, tokens, date, &mut out);
        let mut h = |k: &[u8], v: &[u8]| out.extend_from_slice(&[k, b": ", v, b"\r\n"].concat());
        if let Some(ct) = &resp.content_type {
            h(b"Content-Type", ct);
        }
        if let Some(cl) = cl {
            h(b"Content-Length", cl.to_string().as_bytes());
        }
        if let Some(lm) = &resp.last_modified {
            h(b"Last-Modified", lm);
        }
        if let Some(loc) = &resp.location {
            h(b"Location", loc);
        }
        if chunked {
            h(b"Transfer-Encoding", b"chunked");
        }
        let conn = match (resp.status == 101, keep_alive) {
            (true, _) => "upgrade",
            (false, true) => "keep-alive",
            (false, false) => "close",
        };
        h(b"Connection", conn.as_bytes());
        for (k, v) in &resp.headers {
            h(k, v);
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    #[test]
    fn heads_match_the_field_by_field_text() {
        let date = "Wed, 02 Dec 2026 01:45:06 GMT";
        for status in 100..=599u16 {
            for variant in 0..8u32 {
                let mut r = Response::new(status);
                let tokens = variant & 1 != 0;
                let keep_alive = variant & 2 != 0;
                if variant & 4 != 0 {
                    r.content_type = Some("text/plain".into());
                    r.last_modified = Some("Tue, 01 Dec 2026 10:00:00 GMT".into());
                    r.headers.push(("ETag".into(), "\"x\"".into()));
                }
                if status == 302 {
                    r.location = Some("http://h/".into());
                }
                if status == 299 {
                    r.reason = Some("Odd".into());
                }
                if status == 298 {
                    r.foreign_server = true;
                    r.foreign_date = true;
                    r.headers.push(("Server".into(), "up".into()));
                }
                for cl in [
                    None,
                    Some(0),
                    Some(9),
                    Some(10),
                    Some(13),
                    Some(65_536),
                    Some(u64::MAX),
                ] {
                    let chunked = cl.is_none() && variant & 4 != 0;
                    let mut out = b"x".to_vec();
                    write_head(&r, cl, chunked, keep_alive, tokens, date, &mut out);
                    let want = reference_head(&r, cl, chunked, keep_alive, tokens, date);
                    assert_eq!(
                        String::from_utf8_lossy(&out[1..]),
                        String::from_utf8_lossy(&want),
                        "{status} {variant} {cl:?}"
                    );
                }
            }
        }
        // A date of another length (never made by the clock) is kept as is.
        let mut out = Vec::new();
        write_head(
            &Response::new(200),
            Some(1),
            false,
            true,
            false,
            "D",
            &mut out,
        );
        assert!(out.starts_with(b"HTTP/1.1 200 OK\r\nServer: gyre\r\nDate: D\r\n"));
    }

    #[test]
    fn head_order() {
        let mut r = Response::error(404);
        r.headers.push(("ETag".into(), "\"x\"".into()));
        let mut out = b"before".to_vec();
        write_head(&r, Some(145), false, true, false, "D", &mut out);
        assert_eq!(
            out,
            b"beforeHTTP/1.1 404 Not Found\r\nServer: gyre\r\nDate: D\r\nContent-Type: text/html\r\nContent-Length: 145\r\nConnection: keep-alive\r\nETag: \"x\"\r\n\r\n"
        );
    }

    #[test]
    fn every_error_status_has_its_page() {
        for status in 400..=599u16 {
            let line = status_line(status);
            let page = error_page(status).map(|p| std::str::from_utf8(p).unwrap());
            match (status, page) {
                (401 | 494..=497, Some(_)) => {}
                (_, Some(p)) => assert!(p.contains(&format!("<h1>{line}</h1>")), "{status}"),
                (_, None) => assert!(line.is_empty(), "{status} has a status line but no page"),
            }
        }
    }

    #[test]
    fn numbers_and_unknown_statuses() {
        let mut out = Vec::new();
        for n in [0, 7, 10, 12345, u64::MAX] {
            out.clear();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
        out.clear();
        write_head(
            &Response::new(299),
            None,
            false,
            false,
            false,
            "D",
            &mut out,
        );
        assert!(out.starts_with(b"HTTP/1.1 299 \r\nServer: gyre\r\n"));
    }
}
