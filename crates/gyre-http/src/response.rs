//! Response heads and nginx's built-in error pages.
//!
//! This module owns the exact bytes of every status line and error page the
//! server produces, so that clients (and tests diffing us against nginx) see
//! the same text nginx 1.22 sends, with `gyre` in place of `nginx`.

/// The body of a response. File bodies are opaque to the state machine: it
/// never touches the file system, it only passes the region to the glue,
/// which sends it (e.g. with `sendfile`) in output order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// No body bytes (but `content_length` may still be announced, e.g. 304).
    Empty,
    /// Bytes held in memory (error pages, stub_status, `return` texts).
    Bytes(Vec<u8>),
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
            Body::File { len, .. } => *len,
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
    pub content_type: Option<String>,
    /// `Content-Length`; `None` means "use the body's length" (except for
    /// 1xx/204/304, which never get one).
    pub content_length: Option<u64>,
    /// Preformatted `Last-Modified` date.
    pub last_modified: Option<String>,
    /// `Location` value (redirects).
    pub location: Option<String>,
    /// Further headers, written after `Connection` in this order.
    pub headers: Vec<(String, String)>,
    /// The body; dropped (but its length still announced) for HEAD.
    pub body: Body,
    /// Force `Connection: close` and closing after this response.
    pub close: bool,
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
            headers: Vec::new(),
            body: Body::Empty,
            close: false,
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
            r.content_type = Some("text/html".to_string());
            r.body = Body::Bytes(page);
        }
        r
    }

    /// Appends a header written after the standard ones.
    pub fn header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.to_string(), value.to_string()));
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

const TAIL: &str = "<hr><center>gyre</center>\r\n</body>\r\n</html>\r\n";

/// nginx's HTML error page for `status`, with the `gyre` signature, or
/// `None` when nginx sends no page for it.
pub fn error_page(status: u16) -> Option<Vec<u8>> {
    let title = match status {
        301 => "301 Moved Permanently",
        302 => "302 Found",
        303 => "303 See Other",
        307 => "307 Temporary Redirect",
        308 => "308 Permanent Redirect",
        401 => "401 Authorization Required",
        494 => {
            return Some(special_400("Request Header Or Cookie Too Large"));
        }
        495 => return Some(special_400("The SSL certificate error")),
        496 => return Some(special_400("No required SSL certificate was sent")),
        497 => return Some(special_400("The plain HTTP request was sent to HTTPS port")),
        400..=599 => {
            let s = status_line(status);
            if s.is_empty() {
                return None;
            }
            s
        }
        _ => return None,
    };
    Some(
        format!("<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n{TAIL}")
            .into_bytes(),
    )
}

fn special_400(text: &str) -> Vec<u8> {
    format!(
        "<html>\r\n<head><title>400 {text}</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>{text}</center>\r\n{TAIL}"
    )
    .into_bytes()
}

/// True for statuses that never carry a body or a Content-Length.
pub(crate) fn bodiless(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

/// Serializes the response head. `content_length` is the final value (the
/// caller resolved `None` already); `keep_alive` picks the Connection header.
pub(crate) fn write_head(
    resp: &Response,
    content_length: Option<u64>,
    keep_alive: bool,
    date: &str,
    out: &mut Vec<u8>,
) {
    use std::fmt::Write;
    let mut h = String::with_capacity(256);
    let line = status_line(resp.status);
    if line.is_empty() {
        let _ = write!(h, "HTTP/1.1 {} \r\n", wire_status(resp.status));
    } else {
        let _ = write!(h, "HTTP/1.1 {line}\r\n");
    }
    h.push_str("Server: gyre\r\n");
    let _ = write!(h, "Date: {date}\r\n");
    if let Some(ct) = &resp.content_type {
        let _ = write!(h, "Content-Type: {ct}\r\n");
    }
    if let Some(cl) = content_length {
        let _ = write!(h, "Content-Length: {cl}\r\n");
    }
    if let Some(lm) = &resp.last_modified {
        let _ = write!(h, "Last-Modified: {lm}\r\n");
    }
    if let Some(loc) = &resp.location {
        let _ = write!(h, "Location: {loc}\r\n");
    }
    h.push_str(if keep_alive {
        "Connection: keep-alive\r\n"
    } else {
        "Connection: close\r\n"
    });
    for (k, v) in &resp.headers {
        let _ = write!(h, "{k}: {v}\r\n");
    }
    h.push_str("\r\n");
    out.extend_from_slice(h.as_bytes());
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
        let p = String::from_utf8(error_page(494).unwrap()).unwrap();
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

    #[test]
    fn head_order() {
        let mut r = Response::error(404);
        r.headers.push(("ETag".into(), "\"x\"".into()));
        let mut out = Vec::new();
        write_head(&r, Some(145), true, "D", &mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 404 Not Found\r\nServer: gyre\r\nDate: D\r\nContent-Type: text/html\r\nContent-Length: 145\r\nConnection: keep-alive\r\nETag: \"x\"\r\n\r\n"
        );
    }
}
