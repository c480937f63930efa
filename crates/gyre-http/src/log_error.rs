//! The HTTP module's error-log context (nginx's `ngx_http_log_error` and
//! `ngx_http_log_error_handler`): what a line about a request or an HTTP
//! connection carries after its message, in nginx's order —
//! `, client: ADDR, server: NAME, request: "LINE", host: "HOST", referrer: "…"`,
//! each part only when known. It owns no messages: every module writes its
//! own through [`gyre_core::log_ctx!`] with [`req`] or a [`ConnLog`], so
//! access rules, limits and content handlers all get the same shape
//! (fail2ban's stock filters match it).
//!
//! A module's line is one call, e.g. the access module's
//! `gyre_core::log_ctx!(ERROR, &log_error::req(cx.conf, r), "access forbidden by rule")`
//! (add `.with_action("…")` for nginx's `while …`).
//!
//! Nothing is formatted unless the line's level is on: the contexts only
//! borrow the request.

use std::fmt;
use std::net::SocketAddr;

use gyre_core::errlog::{LogChain, LogContext};

use crate::conf::HttpConf;
use crate::parse::Request;
use crate::request::HttpRequest;

/// A line about a request whose head was parsed.
pub struct ReqLog<'a> {
    req: &'a Request,
    number: u64,
    peer: Option<SocketAddr>,
    server: &'a str,
    action: Option<&'static str>,
    /// nginx's `upstream: "http://127.0.0.1:8080/x"` (the peer and URI a
    /// proxied request is on).
    upstream: Option<&'a dyn fmt::Display>,
    /// The location's (or server's) `error_log`s.
    chain: Option<&'a LogChain>,
}

/// The context of `r`'s lines (its server's first `server_name`, as
/// nginx's `cscf->server_name`).
pub fn req<'a>(conf: &'a HttpConf, r: &'a HttpRequest) -> ReqLog<'a> {
    ReqLog {
        req: &r.st.req,
        number: r.st.conn.number,
        peer: r.st.conn.peer,
        server: server_name(conf, r.st.server),
        action: None,
        upstream: None,
        chain: r.st.loc.error_log.as_ref(),
    }
}

/// The `error_log`s of server `i` (its own, or the http level's).
pub fn server_chain(conf: &HttpConf, i: usize) -> Option<&LogChain> {
    conf.servers
        .get(i)
        .and_then(|s| s.fallback.as_ref())
        .and_then(|f| f.error_log.as_ref())
}

/// The context of a head refused before the phases (no request object
/// yet): the connection's number and peer, the chosen server's name.
pub fn head<'a>(
    req: &'a Request,
    number: u64,
    peer: Option<SocketAddr>,
    server: &'a str,
) -> ReqLog<'a> {
    ReqLog {
        req,
        number,
        peer,
        server,
        action: None,
        upstream: None,
        chain: None,
    }
}

impl<'a> ReqLog<'a> {
    /// The same context written to `chain` (a head's server's logs).
    pub fn with_chain(mut self, chain: Option<&'a LogChain>) -> ReqLog<'a> {
        self.chain = chain;
        self
    }

    /// The same context with nginx's `while ACTION`.
    pub fn with_action(mut self, action: &'static str) -> ReqLog<'a> {
        self.action = Some(action);
        self
    }

    /// The same context with nginx's `upstream: "…"` (written as given,
    /// e.g. `http://127.0.0.1:8080/x`).
    pub fn with_upstream(mut self, upstream: &'a dyn fmt::Display) -> ReqLog<'a> {
        self.upstream = Some(upstream);
        self
    }
}

/// The `server:` nginx prints for a server: its first name, empty without
/// one (nginx 1.22's default `server_name ""`).
pub fn server_name(conf: &HttpConf, server: usize) -> &str {
    conf.servers
        .get(server)
        .and_then(|s| s.server_names.first())
        .map_or("", String::as_str)
}

impl LogContext for ReqLog<'_> {
    fn number(&self) -> u64 {
        self.number
    }

    fn action(&self) -> Option<&str> {
        self.action
    }

    fn chain(&self) -> Option<&LogChain> {
        self.chain
    }

    fn context(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        let req = self.req;
        client(out, self.peer)?;
        write!(out, ", server: {}", self.server)?;
        // The error log is text: bytes that are not UTF-8 are replaced
        // (nginx writes them raw).
        let line = String::from_utf8_lossy(req.request_line());
        if !line.is_empty() {
            write!(out, ", request: \"{line}\"")?;
        }
        if let Some(u) = self.upstream {
            write!(out, ", upstream: \"{u}\"")?;
        }
        if let Some(h) = req.header("Host") {
            write!(out, ", host: \"{}\"", String::from_utf8_lossy(h))?;
        }
        if let Some(h) = req.header("Referer") {
            write!(out, ", referrer: \"{}\"", String::from_utf8_lossy(h))?;
        }
        Ok(())
    }
}

/// nginx's `, client: ADDR` (the address without its port).
fn client(out: &mut dyn fmt::Write, peer: Option<SocketAddr>) -> fmt::Result {
    match peer {
        Some(p) => write!(out, ", client: {}", p.ip()),
        None => out.write_str(", client: unix:"),
    }
}

/// A line about a connection whose request head is not (fully) parsed:
/// what the machine saw of it (see [`crate::conn::ErrNote`]).
pub struct ConnLog<'a> {
    pub number: u64,
    pub peer: Option<SocketAddr>,
    /// `server:` — the server's name once a request was begun, the
    /// listening address before (nginx's `c->listening->addr_text`).
    pub server: Server<'a>,
    pub request_line: &'a str,
    pub host: Option<&'a str>,
    pub referrer: Option<&'a str>,
    pub action: Option<&'static str>,
    /// The server's `error_log`s ([`server_chain`]).
    pub chain: Option<&'a LogChain>,
}

/// What a connection line names as its server.
pub enum Server<'a> {
    Name(&'a str),
    Listening(SocketAddr),
}

impl LogContext for ConnLog<'_> {
    fn number(&self) -> u64 {
        self.number
    }

    fn action(&self) -> Option<&str> {
        self.action
    }

    fn chain(&self) -> Option<&LogChain> {
        self.chain
    }

    fn context(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        client(out, self.peer)?;
        match self.server {
            Server::Name(n) => write!(out, ", server: {n}")?,
            Server::Listening(a) => write!(out, ", server: {a}")?,
        }
        if !self.request_line.is_empty() {
            write!(out, ", request: \"{}\"", self.request_line)?;
        }
        if let Some(h) = self.host {
            write!(out, ", host: \"{h}\"")?;
        }
        if let Some(r) = self.referrer {
            write!(out, ", referrer: \"{r}\"")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyre_core::errlog::WithContext;

    #[test]
    fn a_connection_line_has_nginx_order_and_skips_what_is_unknown() {
        let c = ConnLog {
            number: 9,
            peer: Some("127.0.0.1:5000".parse().expect("addr")),
            server: Server::Name("localhost"),
            request_line: "GET / HTTP/7.1",
            host: None,
            referrer: None,
            action: Some("reading client request line"),
            chain: None,
        };
        let line = WithContext(&c, format_args!("client sent invalid version")).to_string();
        assert_eq!(
            line,
            "*9 client sent invalid version while reading client request line, \
             client: 127.0.0.1, server: localhost, request: \"GET / HTTP/7.1\""
        );
        let c = ConnLog {
            server: Server::Listening("127.0.0.1:8080".parse().expect("addr")),
            request_line: "",
            action: None,
            ..c
        };
        let line = WithContext(&c, format_args!("x")).to_string();
        assert_eq!(line, "*9 x, client: 127.0.0.1, server: 127.0.0.1:8080");
    }

    #[test]
    fn a_request_line_has_upstream_between_request_and_host() {
        let mut req = Request::default();
        let mut parser = crate::parse::HeadParser::new(&crate::settings::HttpSettings::default());
        let head = b"GET /x HTTP/1.1\r\nHost: Example.com:81\r\nReferer: http://r/\r\n\r\n";
        let crate::parse::HeadStatus::Complete(_) =
            parser.advance(head, &crate::settings::HttpSettings::default(), &mut req)
        else {
            panic!("the head parses");
        };
        let peer = Some("10.0.0.1:5000".parse().expect("addr"));
        let up = "http://127.0.0.1:8080/x";
        let cx = head_ctx(&req, peer)
            .with_action("connecting to upstream")
            .with_upstream(&up);
        let line = WithContext(
            &cx,
            format_args!("connect() failed (111: Connection refused)"),
        )
        .to_string();
        assert_eq!(
            line,
            "*3 connect() failed (111: Connection refused) while connecting to upstream, \
             client: 10.0.0.1, server: localhost, request: \"GET /x HTTP/1.1\", \
             upstream: \"http://127.0.0.1:8080/x\", host: \"Example.com:81\", referrer: \"http://r/\""
        );
    }

    fn head_ctx(req: &Request, peer: Option<SocketAddr>) -> ReqLog<'_> {
        head(req, 3, peer, "localhost")
    }
}
