//! The request sent to an upstream (nginx's `ngx_http_proxy_create_request`),
//! as pure functions over a small view of the client's request, so the
//! phase engine's request and variable types can adapt to it.
//!
//! nginx's rules: the request line is `METHOD URI HTTP/1.0` (or `1.1` with
//! `proxy_http_version 1.1`); then the `proxy_set_header` list — the
//! configured headers first, in their order, then nginx's defaults not
//! overridden (`Host: $proxy_host`, `Connection: close`, the body's
//! `Content-Length` / `Transfer-Encoding`, and `TE`, `Keep-Alive`,
//! `Expect`, `Upgrade` set to empty); a header whose value evaluates to empty
//! is not sent. Then, with `proxy_pass_request_headers on`, the client's
//! headers in their order, except those named in the list. Then the empty
//! line; the body follows.

/// nginx's default `proxy_set_header` list (`ngx_http_proxy_headers`).
pub const DEFAULT_HEADERS: &[(&str, &str)] = &[
    ("Host", "$proxy_host"),
    ("Connection", "close"),
    ("Content-Length", "$proxy_internal_body_length"),
    ("Transfer-Encoding", "$proxy_internal_chunked"),
    ("TE", ""),
    ("Keep-Alive", ""),
    ("Expect", ""),
    ("Upgrade", ""),
];

/// `proxy_http_version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyVersion {
    Http10,
    Http11,
}

/// How the request body goes to the upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    None,
    Length(u64),
    /// Unbuffered chunked body with `proxy_http_version 1.1`.
    Chunked,
}

/// The client's request as the builder needs it.
#[derive(Clone, Copy, Debug)]
pub struct RequestView<'a> {
    pub method: &'a str,
    /// The URI to send (after proxy_pass's URI rules).
    pub uri: &'a str,
    /// The client's headers, in order.
    pub headers: &'a [(&'a str, &'a str)],
    pub body: BodyFraming,
}

/// The header list in the order nginx sends it: `configured` (name, value
/// template) first, then the defaults whose names were not configured.
pub fn merged_headers(configured: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = configured.to_vec();
    for (name, value) in DEFAULT_HEADERS {
        if !configured.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            out.push((name.to_string(), value.to_string()));
        }
    }
    out
}

/// The proxy module's internal variables used by the defaults.
pub fn internal_variable(name: &str, body: BodyFraming) -> Option<String> {
    match (name, body) {
        ("proxy_internal_body_length", BodyFraming::Length(n)) => Some(n.to_string()),
        ("proxy_internal_chunked", BodyFraming::Chunked) => Some("chunked".into()),
        ("proxy_internal_body_length" | "proxy_internal_chunked", _) => Some(String::new()),
        _ => None,
    }
}

/// Writes the request head: `set` is the merged list with values already
/// evaluated (`$proxy_host` and the others by the caller).
pub fn build_head(
    req: &RequestView<'_>,
    version: ProxyVersion,
    set: &[(String, String)],
    pass_request_headers: bool,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(req.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(req.uri.as_bytes());
    out.extend_from_slice(match version {
        ProxyVersion::Http10 => b" HTTP/1.0\r\n",
        ProxyVersion::Http11 => b" HTTP/1.1\r\n",
    });
    for (name, value) in set {
        if value.is_empty() {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if pass_request_headers {
        for (name, value) in req.headers {
            if set.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                continue;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// `$proxy_host`: the proxied host, with the port unless it is the
/// scheme's default; `localhost` for a unix socket.
pub fn proxy_host(host: &str, port: Option<u16>, https: bool, unix: bool) -> String {
    if unix {
        return "localhost".into();
    }
    let default = if https { 443 } else { 80 };
    match port {
        Some(p) if p != default => format!("{host}:{p}"),
        _ => host.to_string(),
    }
}

/// `$proxy_add_x_forwarded_for`: the client's `X-Forwarded-For` headers
/// joined with ", ", then the client address.
pub fn add_x_forwarded_for(headers: &[(&str, &str)], remote_addr: &str) -> String {
    let mut out = String::new();
    for (n, v) in headers {
        if n.eq_ignore_ascii_case("x-forwarded-for") {
            out.push_str(v);
            out.push_str(", ");
        }
    }
    out.push_str(remote_addr);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(list: &[(String, String)], host: &str, body: BodyFraming) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| {
                let v = match v.strip_prefix('$') {
                    Some("proxy_host") => host.to_string(),
                    Some(var) => internal_variable(var, body).unwrap_or_default(),
                    None => v.clone(),
                };
                (n.clone(), v)
            })
            .collect()
    }

    #[test]
    fn defaults_as_nginx_sends_them() {
        let headers = [
            ("Host", "example.com"),
            ("User-Agent", "t/1"),
            ("Connection", "keep-alive"),
            ("Keep-Alive", "300"),
            ("Accept", "*/*"),
        ];
        let req = RequestView {
            method: "GET",
            uri: "/a?b",
            headers: &headers,
            body: BodyFraming::None,
        };
        let set = eval(&merged_headers(&[]), "127.0.0.1:8080", req.body);
        let mut out = Vec::new();
        build_head(&req, ProxyVersion::Http10, &set, true, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /a?b HTTP/1.0\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\n\
             User-Agent: t/1\r\nAccept: */*\r\n\r\n"
        );
    }

    #[test]
    fn configured_headers_first_and_empty_ones_suppressed() {
        let headers = [
            ("Host", "h"),
            ("X-Forwarded-For", "1.1.1.1"),
            ("Content-Length", "3"),
        ];
        let req = RequestView {
            method: "POST",
            uri: "/p",
            headers: &headers,
            body: BodyFraming::Length(3),
        };
        let conf = vec![
            (
                "X-Forwarded-For".to_string(),
                add_x_forwarded_for(&headers, "127.0.0.1"),
            ),
            ("Connection".to_string(), String::new()),
            ("host".to_string(), "$proxy_host".to_string()),
        ];
        let set = eval(&merged_headers(&conf), "app", req.body);
        let mut out = Vec::new();
        build_head(&req, ProxyVersion::Http11, &set, true, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /p HTTP/1.1\r\nX-Forwarded-For: 1.1.1.1, 127.0.0.1\r\nhost: app\r\n\
             Content-Length: 3\r\n\r\n"
        );
        let mut out = Vec::new();
        build_head(&req, ProxyVersion::Http11, &set, false, &mut out);
        assert!(!String::from_utf8(out)
            .unwrap()
            .contains("1.1.1.1\r\nContent"));
    }

    #[test]
    fn proxy_host_and_chunked() {
        assert_eq!(proxy_host("a", None, false, false), "a");
        assert_eq!(proxy_host("a", Some(80), false, false), "a");
        assert_eq!(proxy_host("a", Some(443), false, false), "a:443");
        assert_eq!(proxy_host("a", Some(443), true, false), "a");
        assert_eq!(proxy_host("/x", None, false, true), "localhost");
        assert_eq!(
            internal_variable("proxy_internal_chunked", BodyFraming::Chunked).as_deref(),
            Some("chunked")
        );
        assert_eq!(
            internal_variable("proxy_internal_body_length", BodyFraming::Chunked).as_deref(),
            Some("")
        );
    }
}
