//! The HTTP/1.x response of an upstream, sans-I/O (nginx's
//! `ngx_http_proxy_process_status_line` / `_process_header`,
//! `ngx_http_parse_status_line`, the upstream flavour of
//! `ngx_http_parse_header_line`, and the body framing of the proxy's input
//! filters).
//!
//! [`parse_head`] looks at the bytes read so far into the
//! `proxy_buffer_size` buffer and says: need more, here is the head (and how
//! many bytes it took), the upstream is not HTTP/1.x at all (nginx then
//! passes everything through as an HTTP/0.9 body), or a 502 with nginx's log
//! line (`upstream sent too big header`, `upstream sent invalid header:
//! "X\x20..."`). [`BodyReader`] then frames the body: `Content-Length`,
//! chunked (decoded; nginx re-chunks or re-frames for the client) or until
//! the upstream closes, and tells whether the connection may be kept alive.
//!
//! nginx 1.22 details kept: any three digits are a status (`099`, `600`);
//! an IIS-style `403.1` works; bare LF line ends; a header line without a
//! colon is a header with an empty value; underscores are fine; a space, a
//! control byte or DEL in a name and NUL in a value are invalid; the last
//! `Content-Length` wins and an unparsable one counts as absent (read until
//! close); `chunked` anywhere in `Transfer-Encoding` means chunked and beats
//! `Content-Length`; HTTP/1.0 responses close the connection; 1xx responses
//! other than 101 are final responses in 1.22 (later nginx skips them: see
//! [`HeadOptions::skip_informational`]).

use crate::body::{BodyDecoder, BodyKind};

/// nginx's log line for a head longer than `proxy_buffer_size`.
pub const TOO_BIG: &str = "upstream sent too big header";
/// nginx's log line when the response is not HTTP/1.x (passed as HTTP/0.9).
pub const NO_VALID_HEADER: &str = "upstream sent no valid HTTP/1.0 header";
/// nginx's log line for bad chunked framing.
pub const INVALID_CHUNKED: &str = "upstream sent invalid chunked response";
/// nginx's log line when the upstream closes before the body's end.
pub const PREMATURE_CLOSE: &str = "upstream prematurely closed connection";

/// Where one header's name and value are in [`ResponseHead`]'s text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Field {
    name: Span,
    value: Span,
}

/// A parsed response head. Its texts (the status line's, the headers'
/// names and trimmed values) are spans of one copy of the head's bytes, so
/// reading a head allocates nothing once a reused head has grown to size
/// ([`parse_head_into`]); the proxy copies only the headers it passes on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseHead {
    /// major * 1000 + minor (nginx's `http_version`): 1000, 1001, 2000.
    pub version: u32,
    pub status: u16,
    /// The head's bytes as they came.
    text: Vec<u8>,
    /// The status line after the code (`OK`), possibly empty.
    reason: Span,
    fields: Vec<Field>,
    /// The last valid `Content-Length`.
    pub content_length: Option<u64>,
    /// `Transfer-Encoding` mentions `chunked`.
    pub chunked: bool,
    /// `Connection: close`, or an HTTP/1.0 upstream.
    pub connection_close: bool,
}

impl ResponseHead {
    /// What nginx makes of a response that is not HTTP/1.x: a 200 without
    /// headers whose body is every byte, read until the upstream closes.
    pub fn set_http09(&mut self) {
        self.reset(900);
        self.status = 200;
        self.connection_close = true;
    }

    /// Empties the head for `version`, keeping its buffers.
    fn reset(&mut self, version: u32) {
        self.version = version;
        self.status = 0;
        self.text.clear();
        self.reason = (0, 0);
        self.fields.clear();
        self.content_length = None;
        self.chunked = false;
        self.connection_close = version < 1001;
    }

    /// Keeps the head's bytes as its text, the spans (offsets into
    /// `bytes`) pointing into it. The bytes are kept as they came: nginx
    /// passes a header's octets on unchanged (a Latin-1 file name in a
    /// `Content-Disposition`, say).
    fn take_text(&mut self, bytes: &[u8]) {
        self.text.clear();
        self.text.extend_from_slice(bytes);
    }

    fn span(&self, (a, b): Span) -> &[u8] {
        self.text.get(a..b).unwrap_or(b"")
    }

    /// The status line after the code (`OK`), possibly empty.
    pub fn reason(&self) -> &[u8] {
        self.span(self.reason)
    }

    /// The headers in order, as (name, value).
    pub fn headers(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8])> + '_ {
        self.fields
            .iter()
            .map(|f| (self.span(f.name), self.span(f.value)))
    }

    /// The first header named `name` (case-insensitive; ASCII names).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|f| self.span(f.name).eq_ignore_ascii_case(name.as_bytes()))
            .map(|f| self.span(f.value))
    }

    /// How the body is delimited; `head` is true for a HEAD request.
    pub fn framing(&self, head: bool) -> Framing {
        if head || self.status == 204 || self.status == 304 {
            return Framing::None;
        }
        if self.chunked {
            return Framing::Chunked;
        }
        match self.content_length {
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        }
    }
}

/// How a response body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    None,
    Length(u64),
    Chunked,
    /// When the upstream closes (no reuse).
    UntilClose,
}

/// Parsing choices.
#[derive(Clone, Copy, Debug)]
pub struct HeadOptions {
    /// `proxy_buffer_size`: the head must fit.
    pub limit: usize,
    /// Skip 1xx heads other than 101 (nginx 1.23.1+; 1.22 passes them).
    pub skip_informational: bool,
}

impl Default for HeadOptions {
    fn default() -> Self {
        HeadOptions {
            limit: 4096,
            skip_informational: false,
        }
    }
}

/// What the bytes so far are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Head {
    /// Need more bytes.
    Incomplete,
    /// The head, and the bytes it took (the body starts there).
    Done(ResponseHead, usize),
    /// Not HTTP/1.x: every byte is the body of a 200 without headers, read
    /// until close; log [`NO_VALID_HEADER`] (error).
    Http09,
    /// A 502 (`NGX_HTTP_UPSTREAM_INVALID_HEADER`): the log line.
    Invalid(String),
}

/// What the bytes so far are, for a head parsed into a caller's
/// [`ResponseHead`] ([`parse_head_into`]); as [`Head`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    Incomplete,
    /// The head is complete; the bytes it took.
    Done(usize),
    Http09,
    Invalid(String),
}

/// Parses the head at the start of `buf` (everything read so far).
pub fn parse_head(buf: &[u8], o: &HeadOptions) -> Head {
    let mut head = ResponseHead::default();
    match parse_head_into(buf, o, &mut head) {
        Parsed::Incomplete => Head::Incomplete,
        Parsed::Done(n) => Head::Done(head, n),
        Parsed::Http09 => Head::Http09,
        Parsed::Invalid(line) => Head::Invalid(line),
    }
}

/// [`parse_head`] into `head`, whose buffers are reused (it is complete
/// only with [`Parsed::Done`]).
pub fn parse_head_into(buf: &[u8], o: &HeadOptions, head: &mut ResponseHead) -> Parsed {
    let mut start = 0;
    // Bounded: each skipped 1xx head consumes bytes.
    loop {
        let r = parse_one(&buf[start..], o.limit.saturating_sub(start), head);
        match r {
            Parsed::Done(n)
                if o.skip_informational
                    && (100..200).contains(&head.status)
                    && head.status != 101 =>
            {
                start += n;
            }
            Parsed::Done(n) => return Parsed::Done(start + n),
            other => return other,
        }
    }
}

fn parse_one(buf: &[u8], limit: usize, head: &mut ResponseHead) -> Parsed {
    let window = &buf[..buf.len().min(limit)];
    let (version, status, reason, mut i) = match status_line(window) {
        Line::Ok(v) => v,
        Line::Incomplete => return incomplete(buf, limit),
        Line::Invalid => return Parsed::Http09,
    };
    head.reset(version);
    head.status = status;
    let mut flags = Noted::of(head);
    let mut fields = std::mem::take(&mut head.fields);
    // Bounded by the window: each line consumes bytes.
    let r = loop {
        match header_line(window, i) {
            HLine::Incomplete => break incomplete(buf, limit),
            HLine::Invalid(text) => {
                break Parsed::Invalid(format!("upstream sent invalid header: \"{text}...\""))
            }
            HLine::Ignore(next) => i = next,
            HLine::End(next) => break Parsed::Done(next),
            HLine::Header(name, value, next) => {
                flags.note(&window[name.0..name.1], &window[value.0..value.1]);
                fields.push(Field { name, value });
                i = next;
            }
        }
    };
    head.reason = reason;
    head.fields = fields;
    flags.set(head);
    if let Parsed::Done(end) = r {
        head.take_text(&window[..end]);
    }
    r
}

fn incomplete(buf: &[u8], limit: usize) -> Parsed {
    if buf.len() >= limit {
        Parsed::Invalid(TOO_BIG.to_string())
    } else {
        Parsed::Incomplete
    }
}

/// The facts nginx's upstream module takes from headers while reading.
struct Noted {
    content_length: Option<u64>,
    chunked: bool,
    connection_close: bool,
}

impl Noted {
    fn of(h: &ResponseHead) -> Noted {
        Noted {
            content_length: h.content_length,
            chunked: h.chunked,
            connection_close: h.connection_close,
        }
    }

    fn set(self, h: &mut ResponseHead) {
        h.content_length = self.content_length;
        h.chunked = self.chunked;
        h.connection_close = self.connection_close;
    }

    /// One header's name and value, as they came.
    fn note(&mut self, name: &[u8], value: &[u8]) {
        if name.eq_ignore_ascii_case(b"content-length") {
            // The last one wins; an unparsable one is no length (1.22).
            self.content_length = std::str::from_utf8(value)
                .ok()
                .and_then(gyre_core::conf::value::parse_number);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if contains_ci(value, b"chunked") {
                self.chunked = true;
            }
        } else if name.eq_ignore_ascii_case(b"connection") && contains_ci(value, b"close") {
            self.connection_close = true;
        }
    }
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

enum Line {
    /// Version, status, where the text after the code is, where the
    /// headers start.
    Ok((u32, u16, Span, usize)),
    Incomplete,
    Invalid,
}

/// nginx's `ngx_http_parse_status_line`.
fn status_line(b: &[u8]) -> Line {
    let mut i = 0;
    let next = |i: &mut usize| -> Option<u8> {
        let c = b.get(*i).copied();
        *i += 1;
        c
    };
    for &want in b"HTTP/" {
        match next(&mut i) {
            None => return Line::Incomplete,
            Some(c) if c == want => {}
            Some(_) => return Line::Invalid,
        }
    }
    let num = |first_nonzero: bool, end: u8, i: &mut usize| -> Result<u32, Line> {
        let mut v = match next(i) {
            None => return Err(Line::Incomplete),
            Some(c) if c.is_ascii_digit() && (!first_nonzero || c != b'0') => u32::from(c - b'0'),
            Some(_) => return Err(Line::Invalid),
        };
        loop {
            match next(i) {
                None => return Err(Line::Incomplete),
                Some(c) if c == end => return Ok(v),
                Some(c) if c.is_ascii_digit() => {
                    v = v * 10 + u32::from(c - b'0');
                    if v > 99 {
                        return Err(Line::Invalid);
                    }
                }
                Some(_) => return Err(Line::Invalid),
            }
        }
    };
    let major = match num(true, b'.', &mut i) {
        Ok(v) => v,
        Err(l) => return l,
    };
    let minor = match num(false, b' ', &mut i) {
        Ok(v) => v,
        Err(l) => return l,
    };
    // Spaces, then exactly three digits.
    let mut code = 0u16;
    let mut digits = 0;
    while digits < 3 {
        match next(&mut i) {
            None => return Line::Incomplete,
            Some(b' ') if digits == 0 => {}
            Some(c) if c.is_ascii_digit() => {
                code = code * 10 + u16::from(c - b'0');
                digits += 1;
            }
            Some(_) => return Line::Invalid,
        }
    }
    match next(&mut i) {
        None => return Line::Incomplete,
        Some(b' ') | Some(b'.') => {}
        Some(b'\r') => {
            return match next(&mut i) {
                None => Line::Incomplete,
                Some(b'\n') => Line::Ok((major * 1000 + minor, code, (0, 0), i)),
                Some(_) => Line::Invalid,
            }
        }
        Some(b'\n') => return Line::Ok((major * 1000 + minor, code, (0, 0), i)),
        Some(_) => return Line::Invalid,
    }
    let text_start = i;
    let Some(nl) = b[i..].iter().position(|&c| c == b'\n') else {
        return Line::Incomplete;
    };
    let mut end = i + nl;
    let after = end + 1;
    if end > text_start && b[end - 1] == b'\r' {
        end -= 1;
    }
    // A CR inside the text must be followed by LF (sw_almost_done).
    if b[text_start..end].contains(&b'\r') {
        return Line::Invalid;
    }
    Line::Ok((major * 1000 + minor, code, (text_start, end), after))
}

enum HLine {
    Incomplete,
    /// The text nginx logs: the line up to the bad byte, then `\xHH`.
    Invalid(String),
    /// An IIS duplicate `HTTP/1.1 ...` line, skipped.
    Ignore(usize),
    /// The empty line ending the head.
    End(usize),
    /// A header's name and value (where they are in the buffer), and
    /// where the next line starts.
    Header(Span, Span, usize),
}

type Span = (usize, usize);

fn invalid_at(b: &[u8], start: usize, at: usize) -> HLine {
    HLine::Invalid(format!(
        "{}\\x{:02x}",
        String::from_utf8_lossy(&b[start..at]),
        b.get(at).copied().unwrap_or(0)
    ))
}

/// Bytes that go on a header name without a second look: not a control
/// byte, space or DEL (invalid), not `:` (the end) and not `/` (which may
/// make an IIS `HTTP/` status line).
static NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x21;
    while c < 256 {
        t[c] = c != 0x7f && c != b':' as usize && c != b'/' as usize;
        c += 1;
    }
    t
};

/// The upstream flavour of nginx's `ngx_http_parse_header_line`
/// (underscores allowed, invalid names not dropped).
fn header_line(b: &[u8], start: usize) -> HLine {
    let get = |i: usize| b.get(i).copied();
    // sw_start
    match get(start) {
        None => return HLine::Incomplete,
        Some(b'\r') => {
            return match get(start + 1) {
                None => HLine::Incomplete,
                Some(b'\n') => HLine::End(start + 2),
                Some(_) => invalid_at(b, start, start),
            }
        }
        Some(b'\n') => return HLine::End(start + 1),
        Some(c) if c <= 0x20 || c == 0x7f || c == b':' => return invalid_at(b, start, start),
        Some(_) => {}
    }
    // sw_name: the plain name bytes skipped at once, then the byte that
    // stops them decides.
    let mut i = start + 1;
    let name_end = loop {
        while b.get(i).is_some_and(|&c| NAME_BYTE[usize::from(c)]) {
            i += 1;
        }
        match get(i) {
            None => return HLine::Incomplete,
            Some(b':') => break i,
            Some(b'\r') => {
                return match get(i + 1) {
                    None => HLine::Incomplete,
                    Some(b'\n') => HLine::Header((start, i), (i, i), i + 2),
                    Some(_) => invalid_at(b, start, i),
                }
            }
            Some(b'\n') => return HLine::Header((start, i), (i, i), i + 1),
            Some(b'/') if i - start == 4 && &b[start..i] == b"HTTP" => {
                // sw_ignore_line: to the end of the line.
                return match b[i..].iter().position(|&c| c == b'\n') {
                    Some(p) => HLine::Ignore(i + p + 1),
                    None => HLine::Incomplete,
                };
            }
            Some(c) if c <= 0x20 || c == 0x7f => return invalid_at(b, start, i),
            Some(_) => i += 1,
        }
    };
    // sw_space_before_value
    i = name_end + 1;
    loop {
        match get(i) {
            None => return HLine::Incomplete,
            Some(b' ') => i += 1,
            _ => break,
        }
    }
    let vstart = i;
    // sw_value / sw_space_after_value: the value runs to the line's end
    // (found at once: a NUL before it is invalid), less trailing spaces.
    let Some(off) = memchr::memchr3(b'\r', b'\n', 0, &b[vstart..]) else {
        return HLine::Incomplete;
    };
    let at = vstart + off;
    let mut vend = at;
    while vend > vstart && b[vend - 1] == b' ' {
        vend -= 1;
    }
    match b[at] {
        b'\r' => match get(at + 1) {
            None => HLine::Incomplete,
            Some(b'\n') => HLine::Header((start, name_end), (vstart, vend), at + 2),
            Some(_) => invalid_at(b, start, at),
        },
        b'\n' => HLine::Header((start, name_end), (vstart, vend), at + 1),
        _ => invalid_at(b, start, at),
    }
}

/// What the body reader says about bytes given to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// [`INVALID_CHUNKED`].
    InvalidChunked,
    /// [`PREMATURE_CLOSE`].
    PrematureClose,
}

impl BodyError {
    /// nginx's log line.
    pub fn text(self) -> &'static str {
        match self {
            BodyError::InvalidChunked => INVALID_CHUNKED,
            BodyError::PrematureClose => PREMATURE_CLOSE,
        }
    }
}

/// Frames a response body as it arrives.
#[derive(Clone, Debug)]
pub struct BodyReader {
    framing: Framing,
    decoder: Option<BodyDecoder>,
    done: bool,
    /// Payload bytes passed on.
    pub received: u64,
}

impl BodyReader {
    pub fn new(framing: Framing) -> BodyReader {
        // A length is counted here (so bytes taken in place, `took`, and
        // fed ones agree); only chunks need the decoder.
        let decoder = match framing {
            Framing::Chunked => Some(BodyDecoder::new(BodyKind::Chunked)),
            Framing::Length(_) | Framing::None | Framing::UntilClose => None,
        };
        BodyReader {
            done: matches!(framing, Framing::None | Framing::Length(0)),
            framing,
            decoder,
            received: 0,
        }
    }

    /// Takes framing and payload from `input`, appending the payload to
    /// `out`; returns the bytes consumed (bytes after the body's end are
    /// left: an upstream must not send them, and they make the connection
    /// unfit for reuse).
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, BodyError> {
        if self.done {
            return Ok(0);
        }
        if let Some(left) = self.identity_left() {
            let k = (left.min(usize::MAX as u64) as usize).min(input.len());
            out.extend_from_slice(&input[..k]);
            self.took(k);
            return Ok(k);
        }
        let before = out.len();
        let n = match &mut self.decoder {
            Some(d) => {
                let n = d
                    .decode(input, Some(out))
                    .map_err(|_| BodyError::InvalidChunked)?;
                self.done = d.is_done();
                n
            }
            None => 0,
        };
        self.received += (out.len() - before) as u64;
        Ok(n)
    }

    /// For a body whose bytes are its payload (a length, or until close),
    /// how many may still come; None for a chunked or finished one.
    pub fn identity_left(&self) -> Option<u64> {
        match self.framing {
            _ if self.done => None,
            Framing::Length(n) => Some(n - self.received),
            Framing::UntilClose => Some(u64::MAX),
            Framing::Chunked | Framing::None => None,
        }
    }

    /// `n` payload bytes of an identity body were taken in place (read
    /// straight into the client's output), at most [`identity_left`].
    ///
    /// [`identity_left`]: BodyReader::identity_left
    pub fn took(&mut self, n: usize) {
        self.received += n as u64;
        if let Framing::Length(len) = self.framing {
            self.done = self.received >= len;
        }
    }

    /// The upstream closed: fine only for a close-delimited or finished body.
    pub fn eof(&mut self) -> Result<(), BodyError> {
        if self.done || self.framing == Framing::UntilClose {
            self.done = true;
            Ok(())
        } else {
            Err(BodyError::PrematureClose)
        }
    }

    /// The whole body arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether the connection may go back to the keepalive cache after the
    /// body (nginx's `u->keepalive`): the body ended by its own framing and
    /// the upstream did not ask to close.
    pub fn keepalive(&self, head: &ResponseHead) -> bool {
        self.done
            && self.framing != Framing::UntilClose
            && !head.connection_close
            && head.status != 101
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(b: &[u8]) -> (ResponseHead, usize) {
        match parse_head(b, &HeadOptions::default()) {
            Head::Done(h, n) => (h, n),
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(b)),
        }
    }

    #[test]
    fn header_bytes_are_kept_as_they_came() {
        let (h, _) = done(
            b"HTTP/1.1 200 OK\r\nX-A: caf\xe9\r\nX-B: ok\r\nX-C: \xc3\xa9t\xc3\xa9\r\n\r\n\xff\xfe",
        );
        assert_eq!(h.header("x-a"), Some(&b"caf\xe9"[..]));
        assert_eq!(h.header("x-b"), Some(&b"ok"[..]));
        assert_eq!(h.header("x-c"), Some(&b"\xc3\xa9t\xc3\xa9"[..]));
    }

    #[test]
    fn a_length_body_taken_in_place_and_fed_agree() {
        let mut b = BodyReader::new(Framing::Length(10));
        let mut out = Vec::new();
        assert_eq!(b.feed(b"abc", &mut out).unwrap(), 3);
        assert_eq!(b.identity_left(), Some(7));
        b.took(5);
        assert_eq!(b.identity_left(), Some(2));
        assert!(!b.is_done());
        // More than the length: the rest is left.
        assert_eq!(b.feed(b"xyz", &mut out).unwrap(), 2);
        assert_eq!(out, b"abcxy");
        assert!(b.is_done());
        assert_eq!(b.identity_left(), None);
        assert_eq!(b.received, 10);
        let b = BodyReader::new(Framing::Chunked);
        assert_eq!(b.identity_left(), None);
        let b = BodyReader::new(Framing::UntilClose);
        assert_eq!(b.identity_left(), Some(u64::MAX));
    }

    #[test]
    fn status_lines_as_nginx_reads_them() {
        let (h, n) = done(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
        assert_eq!((h.version, h.status, h.reason()), (1001, 200, &b"OK"[..]));
        assert_eq!(n, 38);
        assert_eq!(h.content_length, Some(2));
        assert!(!h.connection_close);
        for ok in [
            &b"HTTP/1.1 200\r\n\r\n"[..],
            b"HTTP/1.1 099 Weird\r\n\r\n",
            b"HTTP/1.1 600 Weird\r\n\r\n",
            b"HTTP/1.1 403.1 Forbidden\r\n\r\n",
            b"HTTP/2.0 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\n\n",
        ] {
            done(ok);
        }
        assert!(done(b"HTTP/1.0 200 OK\r\n\r\n").0.connection_close);
        for bad in [
            &b"garbage here\r\n\r\n"[..],
            b"HTTP/1.1 2x0 OK\r\n",
            b"HTTP/1.1 20 OK\r\n",
            b"HTTP/1.1\r\n",
            b"HTTP/0.9 200 OK\r\n",
            b"http/1.1 200 OK\r\n",
            b"HTTP/1.1 200X\r\n",
        ] {
            assert_eq!(
                parse_head(bad, &HeadOptions::default()),
                Head::Http09,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // Decided as soon as a byte is wrong, incomplete otherwise.
        assert_eq!(
            parse_head(b"HTT", &HeadOptions::default()),
            Head::Incomplete
        );
        assert_eq!(parse_head(b"HTX", &HeadOptions::default()), Head::Http09);
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nA: b", &HeadOptions::default()),
            Head::Incomplete
        );
    }

    #[test]
    fn headers_as_nginx_reads_them() {
        let (h, _) = done(
            b"HTTP/1.1 200 OK\r\nX_A:  a b  \r\nXYZ\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
        );
        assert_eq!(h.header("x_a"), Some(&b"a b"[..]));
        assert_eq!(h.header("XYZ"), Some(&b""[..]));
        assert_eq!(h.headers().len(), 4, "the IIS status line is skipped");
        assert_eq!(h.content_length, Some(3), "the last one wins");
        let (h, _) = done(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n");
        assert_eq!(h.content_length, None);
        assert_eq!(h.framing(false), Framing::UntilClose);
        let (h, _) = done(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n",
        );
        assert_eq!(h.framing(false), Framing::Chunked);
        let (h, _) = done(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n");
        assert_eq!(h.framing(false), Framing::UntilClose);
        let (h, _) = done(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(h.framing(false), Framing::None);
        let (h, _) = done(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(h.framing(true), Framing::None, "HEAD");
        let (h, _) = done(b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\n\r\n");
        assert!(h.connection_close);
    }

    #[test]
    fn invalid_headers_are_nginx_log_lines() {
        let cases: [(&[u8], &str); 4] = [
            (b"HTTP/1.1 200 OK\r\nX Y: z\r\n\r\n", "X\\x20"),
            (b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n\r\n", "X-A: a\\x00"),
            (b"HTTP/1.1 200 OK\r\n X-A: a\r\n\r\n", "\\x20"),
            (b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", "X-A: a\\x0d"),
        ];
        for (input, text) in cases {
            assert_eq!(
                parse_head(input, &HeadOptions::default()),
                Head::Invalid(format!("upstream sent invalid header: \"{text}...\""))
            );
        }
    }

    #[test]
    fn too_big_header_at_proxy_buffer_size() {
        let mut resp = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
        resp.extend(std::iter::repeat_n(b'a', 5000));
        resp.extend_from_slice(b"\r\n\r\n");
        let o = HeadOptions {
            limit: 4096,
            ..HeadOptions::default()
        };
        assert_eq!(parse_head(&resp[..4096], &o), Head::Invalid(TOO_BIG.into()));
        assert_eq!(parse_head(&resp[..4000], &o), Head::Incomplete);
        // A head of exactly the buffer's size fits.
        let exact = b"HTTP/1.1 200 OK\r\n\r\n";
        let o = HeadOptions {
            limit: exact.len(),
            ..HeadOptions::default()
        };
        assert!(matches!(parse_head(exact, &o), Head::Done(_, 19)));
    }

    #[test]
    fn informational_heads() {
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        // nginx 1.22: the 100 is the response.
        let (h, n) = done(r);
        assert_eq!((h.status, n), (100, 25));
        let o = HeadOptions {
            skip_informational: true,
            ..HeadOptions::default()
        };
        match parse_head(r, &o) {
            Head::Done(h, n) => {
                assert_eq!(h.status, 200);
                assert_eq!(&r[n..], b"hi");
            }
            other => panic!("{other:?}"),
        }
        // 101 is never skipped.
        match parse_head(b"HTTP/1.1 101 Switching\r\nUpgrade: websocket\r\n\r\n", &o) {
            Head::Done(h, _) => assert_eq!(h.status, 101),
            other => panic!("{other:?}"),
        }
    }

    /// Inputs built from the tokens heads are made of, by a fixed LCG.
    fn generated(seed: u64, n: usize) -> Vec<Vec<u8>> {
        const TOKENS: &[&[u8]] = &[
            b"HTTP/1.1 ",
            b"HTTP/1.0 ",
            b"HTTP/",
            b"200",
            b"1",
            b" OK",
            b"\r\n",
            b"\n",
            b"\r",
            b"Content-Length: ",
            b"Transfer-Encoding: chunked",
            b"Connection: close",
            b": ",
            b"X-A",
            b" ",
            b"\0",
            b"_",
            b"\x7f",
            b"5",
            b"chunked",
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"a",
            b"0\r\n\r\n",
            b"3\r\nabc\r\n",
            b";x",
            b"zz",
        ];
        let mut x = seed;
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as usize
        };
        (0..n)
            .map(|_| {
                let len = next() % 24;
                let mut v = b"HTTP/1.1 200 OK\r\n".to_vec();
                if next() % 4 == 0 {
                    v.clear();
                }
                for _ in 0..len {
                    v.extend_from_slice(TOKENS[next() % TOKENS.len()]);
                }
                v
            })
            .collect()
    }

    #[test]
    fn decisions_on_a_prefix_never_change() {
        for (i, input) in generated(7, 3000).iter().enumerate() {
            for skip in [false, true] {
                let o = HeadOptions {
                    limit: 16 + i % 96,
                    skip_informational: skip,
                };
                let full = parse_head(input, &o);
                if let Head::Done(_, n) = &full {
                    assert!(*n <= input.len());
                }
                for k in 0..input.len() {
                    let r = parse_head(&input[..k], &o);
                    if r != Head::Incomplete {
                        assert_eq!(
                            r,
                            full,
                            "prefix {k} of {:?}",
                            String::from_utf8_lossy(input)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bodies_decode_the_same_however_split() {
        for input in generated(11, 2000) {
            for framing in [Framing::Chunked, Framing::Length(7), Framing::UntilClose] {
                let mut whole = BodyReader::new(framing);
                let mut a = Vec::new();
                let ra = whole.feed(&input, &mut a);
                let mut bytes = BodyReader::new(framing);
                let mut b = Vec::new();
                let mut rb = Ok(0);
                for i in 0..input.len() {
                    match bytes.feed(&input[i..i + 1], &mut b) {
                        Ok(n) => rb = rb.map(|t| t + n),
                        Err(e) => {
                            rb = Err(e);
                            break;
                        }
                    }
                }
                assert_eq!(ra.is_err(), rb.is_err(), "{framing:?} {input:?}");
                if ra.is_ok() {
                    assert_eq!(ra, rb);
                    assert_eq!(a, b);
                    assert_eq!(whole.is_done(), bytes.is_done());
                }
            }
        }
    }

    #[test]
    fn bodies_and_keepalive() {
        let (h, n) = done(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        let mut b = BodyReader::new(h.framing(false));
        let mut out = Vec::new();
        let input = b"2\r\nhi\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: x\r\n\r\n";
        // Byte by byte: the framing state survives any split.
        for i in 0..input.len() {
            assert_eq!(b.feed(&input[i..i + 1], &mut out).unwrap(), 1);
        }
        assert_eq!(out, b"hiabc");
        assert!(b.is_done() && b.keepalive(&h));
        let _ = n;

        let mut b = BodyReader::new(Framing::Chunked);
        assert_eq!(
            b.feed(b"zz\r\nhi\r\n", &mut out),
            Err(BodyError::InvalidChunked)
        );

        let (h, _) = done(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
        let mut b = BodyReader::new(h.framing(false));
        let mut out = Vec::new();
        b.feed(b"hi", &mut out).unwrap();
        assert_eq!(b.eof(), Err(BodyError::PrematureClose));
        assert_eq!(BodyError::PrematureClose.text(), PREMATURE_CLOSE);

        let (h, _) = done(b"HTTP/1.1 200 OK\r\n\r\n");
        let mut b = BodyReader::new(h.framing(false));
        b.feed(b"until close", &mut out).unwrap();
        assert!(!b.is_done());
        assert_eq!(b.eof(), Ok(()));
        assert!(!b.keepalive(&h), "close-delimited: not reusable");

        let (h, _) = done(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n");
        let mut b = BodyReader::new(h.framing(false));
        let mut out = Vec::new();
        assert_eq!(b.feed(b"hiEXTRA", &mut out).unwrap(), 2);
        assert!(b.keepalive(&h));
        let (h, _) = done(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert!(!BodyReader::new(h.framing(false)).keepalive(&h), "HTTP/1.0");
    }
}
