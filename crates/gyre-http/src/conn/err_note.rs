//! What the machine tells the error log on its own (nginx's lines from
//! `ngx_http_process_request_line` and the header timer): a refused
//! request line and a client that timed out sending its head. The machine
//! only records the fact and what it saw of the request (allocating on
//! this error path only); the glue writes the line with the connection's
//! context (see [`crate::log_error::ConnLog`]).

use crate::parse::HeadParser;

/// One fact for the error log, taken with [`super::Connection::take_note`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrNote {
    pub kind: ErrKind,
    /// The request line, or what arrived of it (up to CR or LF), as
    /// nginx's `request: "…"` shows it; empty when nothing did.
    pub request_line: String,
    /// The `Host` header's value as sent, once it was read.
    pub host: Option<String>,
}

/// What happened (nginx's message and action for it; all at `info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrKind {
    /// The header timer fired before the request line was complete.
    TimedOutLine,
    /// The header timer fired after the request line.
    TimedOutHeaders,
    /// `NGX_HTTP_PARSE_INVALID_METHOD`.
    InvalidMethod,
    /// `NGX_HTTP_PARSE_INVALID_REQUEST`.
    InvalidRequest,
    /// `NGX_HTTP_PARSE_INVALID_VERSION` (answered 505).
    InvalidVersion,
    /// `NGX_HTTP_PARSE_INVALID_09_METHOD`: a line without a version whose
    /// method is not GET.
    Invalid09Method,
}

impl ErrKind {
    /// nginx's text (`ngx_http_client_errors`, or the timer's).
    pub fn message(self) -> &'static str {
        match self {
            ErrKind::TimedOutLine | ErrKind::TimedOutHeaders => {
                "client timed out (110: Connection timed out)"
            }
            ErrKind::InvalidMethod => "client sent invalid method",
            ErrKind::InvalidRequest => "client sent invalid request",
            ErrKind::InvalidVersion => "client sent invalid version",
            ErrKind::Invalid09Method => "client sent invalid method in HTTP/0.9 request",
        }
    }

    /// nginx's `c->log->action` at that moment.
    pub fn action(self) -> &'static str {
        match self {
            ErrKind::TimedOutHeaders => "reading client request headers",
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
    ErrNote {
        kind,
        request_line: String::from_utf8_lossy(head.line_so_far(buf)).into_owned(),
        host: head
            .header_value(buf, b"Host")
            .map(|v| String::from_utf8_lossy(v).into_owned()),
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
