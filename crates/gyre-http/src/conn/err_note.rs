//! What the machine tells the error log on its own (nginx's lines from
//! `ngx_http_process_request_line`, `_headers` and the header timer): a
//! refused head and a client that timed out or closed sending it. The machine
//! only records the fact and what it saw of the request (allocating on
//! this error path only); the glue writes the line with the connection's
//! context (see [`crate::log_error::ConnLog`]).

use crate::parse::HeadParser;

/// One fact for the error log, taken with [`super::Connection::take_notes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrNote {
    pub kind: ErrKind,
    /// The request line, or what arrived of it (up to CR or LF), as
    /// nginx's `request: "…"` shows it; empty when nothing did.
    pub request_line: String,
    /// The `Host` header's value as sent, once it was read.
    pub host: Option<String>,
    /// The message when it names what was sent ([`ErrKind::Header`]).
    pub detail: Option<String>,
    /// nginx's `while …` (`c->log->action`) when the fact happened.
    pub action: Option<&'static str>,
    /// The `Referer` header's value, for a fact about a request.
    pub referrer: Option<String>,
    /// A fact about a request whose head was read (its body): the glue
    /// names the request it holds, if any, instead of these fields.
    pub about_request: bool,
}

impl ErrNote {
    /// nginx's text for the line.
    pub fn message(&self) -> &str {
        self.detail.as_deref().unwrap_or(self.kind.message())
    }
}

/// nginx's action while a request line is read again from bytes left in
/// the buffer by the previous request (`ngx_http_set_keepalive`).
const PIPELINED: &str = "reading client pipelined request line";

/// A header line as offsets into the head's buffer: (name, value).
pub(crate) type Line = ((usize, usize), (usize, usize));

/// Why the parser refused a head after its request line (nginx's checks in
/// `ngx_http_process_request_headers` and `_header`), kept as offsets so
/// the refusal itself allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadErr {
    NoHost,
    InvalidHost,
    DuplicateHost {
        prev: Line,
        new: Line,
    },
    /// A second Content-Length or Transfer-Encoding.
    Duplicate {
        prev: Line,
        new: Line,
    },
    InvalidContentLength,
    Te10,
    UnknownTe((usize, usize)),
    ClAndTe,
    Connect,
    Trace,
    /// A header line nginx's parser refuses, up to the byte it stopped at.
    InvalidHeader((usize, usize)),
    /// The request line outgrew a large header buffer (414): the line up
    /// to the buffer's end.
    TooLongUri((usize, usize)),
    /// A header line outgrew the large header buffers (494): what nginx
    /// quotes of it, and where it shows NULs (see [`quoted_with_nuls`]).
    TooLongHeader((usize, usize), Option<(usize, usize)>),
    /// The buffers ran out between header lines before any header.
    TooLargeRequest,
}

impl HeadErr {
    /// nginx's message, with what was sent quoted from `buf`.
    fn text(self, buf: &[u8]) -> String {
        let of = |(s, e): (usize, usize)| String::from_utf8_lossy(buf.get(s..e).unwrap_or(&[]));
        let line = |(n, v): Line| format!("{}: {}", of(n), of(v));
        match self {
            HeadErr::NoHost => "client sent HTTP/1.1 request without \"Host\" header".into(),
            HeadErr::InvalidHost => "client sent invalid host header".into(),
            HeadErr::DuplicateHost { prev, new } => format!(
                "client sent duplicate host header: \"{}\", previous value: \"{}\"",
                line(new),
                line(prev)
            ),
            HeadErr::Duplicate { prev, new } => format!(
                "client sent duplicate header line: \"{}\", previous value: \"{}\"",
                line(new),
                line(prev)
            ),
            HeadErr::InvalidContentLength => "client sent invalid \"Content-Length\" header".into(),
            HeadErr::Te10 => {
                "client sent HTTP/1.0 request with \"Transfer-Encoding\" header".into()
            }
            HeadErr::UnknownTe(v) => {
                format!("client sent unknown \"Transfer-Encoding\": \"{}\"", of(v))
            }
            HeadErr::ClAndTe => "client sent \"Content-Length\" and \"Transfer-Encoding\" \
                                 headers at the same time"
                .into(),
            HeadErr::Connect => "client sent CONNECT method".into(),
            HeadErr::Trace => "client sent TRACE method".into(),
            HeadErr::InvalidHeader((s, e)) => format!(
                "client sent invalid header line: \"{}\\x{:02x}...\"",
                of((s, e)),
                buf.get(e).copied().unwrap_or(0)
            ),
            HeadErr::TooLongUri(_) => ErrKind::TooLongUri.message().into(),
            HeadErr::TooLongHeader(v, nuls) => format!(
                "client sent too long header line: \"{}...\"",
                quoted_with_nuls(buf, v, nuls)
            ),
            HeadErr::TooLargeRequest => "client sent too large request".into(),
        }
    }
}

/// `buf[s..e]` with NULs at `nuls`: when the buffers run out right after a
/// header line nginx kept, its 494 quotes that line from its buffer,
/// where it had ended the name and the value with NULs (the line then
/// holds them, and the CR LF that followed).
fn quoted_with_nuls(buf: &[u8], (s, e): (usize, usize), nuls: Option<(usize, usize)>) -> String {
    let mut bytes = buf.get(s..e).unwrap_or(&[]).to_vec();
    if let Some((a, b)) = nuls {
        for at in [a, b] {
            if let Some(c) = at.checked_sub(s).and_then(|i| bytes.get_mut(i)) {
                *c = 0;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// What happened (nginx's message and action for it; all at `info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrKind {
    /// The header timer fired before the request line was complete.
    TimedOutLine,
    /// The header timer fired after the request line.
    TimedOutHeaders,
    /// The client closed inside the request line.
    ClosedLine,
    /// The client closed inside the headers.
    ClosedHeaders,
    /// `NGX_HTTP_PARSE_INVALID_METHOD`.
    InvalidMethod,
    /// `NGX_HTTP_PARSE_INVALID_REQUEST`.
    InvalidRequest,
    /// `NGX_HTTP_PARSE_INVALID_VERSION` (answered 505).
    InvalidVersion,
    /// `NGX_HTTP_PARSE_INVALID_09_METHOD`: a line without a version whose
    /// method is not GET.
    Invalid09Method,
    /// A head refused after its request line, or a header line ignored
    /// (the text is the note's).
    Header,
    /// The request line did not fit a large header buffer (414).
    TooLongUri,
    /// recv() failed (the text, with the errno, is the note's).
    RecvFailed,
    /// The client closed while its body was read or discarded.
    BodyClosed,
    /// A chunked body nginx's parser refuses (`[error]`).
    InvalidChunked,
    /// A chunk that takes a body being read over `client_max_body_size`
    /// (`[error]`; the text, with the sizes, is the note's).
    TooLargeChunked,
}

impl ErrKind {
    /// nginx's text (`ngx_http_client_errors`, or the timer's).
    pub fn message(self) -> &'static str {
        match self {
            ErrKind::TimedOutLine | ErrKind::TimedOutHeaders => {
                "client timed out (110: Connection timed out)"
            }
            ErrKind::ClosedLine | ErrKind::ClosedHeaders => "client prematurely closed connection",
            ErrKind::InvalidMethod => "client sent invalid method",
            ErrKind::InvalidRequest => "client sent invalid request",
            ErrKind::InvalidVersion => "client sent invalid version",
            ErrKind::Invalid09Method => "client sent invalid method in HTTP/0.9 request",
            ErrKind::Header => "client sent invalid header",
            ErrKind::TooLongUri => "client sent too long URI",
            ErrKind::RecvFailed => "recv() failed",
            ErrKind::BodyClosed => "client prematurely closed connection",
            ErrKind::InvalidChunked => "client sent invalid chunked body",
            ErrKind::TooLargeChunked => "client intended to send too large chunked body",
        }
    }

    /// nginx's level for the line: a broken chunked body is `[error]`,
    /// everything else the client did `[info]`.
    pub fn level(self) -> log::Level {
        match self {
            ErrKind::InvalidChunked | ErrKind::TooLargeChunked => gyre_core::errlog::ERROR,
            _ => gyre_core::errlog::INFO,
        }
    }

    /// nginx's `c->log->action` at that moment.
    pub fn action(self) -> &'static str {
        match self {
            ErrKind::TimedOutHeaders | ErrKind::ClosedHeaders | ErrKind::Header => {
                "reading client request headers"
            }
            _ => "reading client request line",
        }
    }
}

/// Which of nginx's request-line errors a refused line is, following
/// `ngx_http_parse_request_line`: a method byte other than `A-Z`, `_`, `-`
/// (or the line ending inside the method) is an invalid method, a line
/// without a version whose method is not GET an HTTP/0.9 one, a version
/// above 1 (the 505) an invalid version, anything else an invalid request.
pub fn line_error(line: &[u8], status: u16) -> ErrKind {
    if status == 505 {
        return ErrKind::InvalidVersion;
    }
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(sp) = line.iter().position(|&b| b == b' ') else {
        return ErrKind::InvalidMethod;
    };
    let method = &line[..sp];
    if method.is_empty()
        || !method
            .iter()
            .all(|&b| b.is_ascii_uppercase() || b == b'_' || b == b'-')
    {
        return ErrKind::InvalidMethod;
    }
    let rest = line[sp..].trim_ascii_start();
    if !rest.is_empty() && !rest.contains(&b' ') && method != b"GET" {
        return ErrKind::Invalid09Method;
    }
    ErrKind::InvalidRequest
}

/// A note about the head being read in `buf`.
pub(crate) fn note(kind: ErrKind, head: &HeadParser, buf: &[u8]) -> ErrNote {
    let action = match kind.action() {
        "reading client request line" if head.pipelined => PIPELINED,
        a => a,
    };
    ErrNote {
        kind,
        request_line: String::from_utf8_lossy(head.line_so_far(buf)).into_owned(),
        host: head
            .header_value(buf, b"Host")
            .map(|v| String::from_utf8_lossy(v).into_owned()),
        detail: None,
        action: Some(action),
        referrer: None,
        about_request: false,
    }
}

/// The note for a head the parser refused (after its request line, or
/// for its length), when the parser said why.
pub(crate) fn head_note(head: &HeadParser, buf: &[u8]) -> Option<ErrNote> {
    let err = head.err?;
    let kind = match err {
        HeadErr::TooLongUri(_) => ErrKind::TooLongUri,
        _ => ErrKind::Header,
    };
    let mut n = note(kind, head, buf);
    if let HeadErr::TooLongUri((s, e)) = err {
        // nginx's `request:` is then the buffer from the line's start.
        n.request_line = String::from_utf8_lossy(buf.get(s..e).unwrap_or(&[])).into_owned();
    }
    n.detail = Some(err.text(buf));
    Some(n)
}

/// The notes for header lines the parser ignored (nginx's `client sent
/// invalid header line` for each, in order), each naming `Host` only if it
/// was read before that line.
pub(crate) fn ignored_notes(head: &HeadParser, buf: &[u8], out: &mut Vec<ErrNote>) {
    for &(text, host_known) in &head.ignored {
        let mut n = note(ErrKind::Header, head, buf);
        if !host_known {
            n.host = None;
        }
        n.detail = Some(format!(
            "client sent invalid header line: \"{}\"",
            String::from_utf8_lossy(text.of(buf))
        ));
        out.push(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_line_errors_are_classified_as_nginx_does() {
        for (line, status, want) in [
            (&b"GARBAGE"[..], 400, ErrKind::InvalidMethod),
            (b"get / HTTP/1.1", 400, ErrKind::InvalidMethod),
            (b"G@T / HTTP/1.1", 400, ErrKind::InvalidMethod),
            (b" / HTTP/1.1", 400, ErrKind::InvalidMethod),
            (b"GET / HTTP/7.1", 505, ErrKind::InvalidVersion),
            (b"GET / HTTP/1.1x", 400, ErrKind::InvalidRequest),
            (b"GET x HTTP/1.1", 400, ErrKind::InvalidRequest),
            (b"POST /\r", 400, ErrKind::Invalid09Method),
        ] {
            assert_eq!(line_error(line, status), want, "{:?}", line);
        }
        assert_eq!(
            ErrKind::TimedOutHeaders.action(),
            "reading client request headers"
        );
    }
}
