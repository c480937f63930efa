//! The connection handler's own error-log lines (nginx's
//! `ngx_http_wait_request_handler`, the header timer, the refused request
//! line, the send timeout), written with the connection's context. Lines
//! about a request being served are the phases' (see
//! [`crate::log_error::req`]).

use gyre_core::conn::ConnId;
use gyre_core::errlog::INFO;
use gyre_core::event::Core;

use super::HttpConn;
use crate::conn::ErrNote;
use crate::log_error::{self, ConnLog, Server};
use crate::request::HttpRequest;

/// nginx's text for every timer that fires on a client.
const TIMED_OUT: &str = "client timed out (110: Connection timed out)";

impl HttpConn {
    /// The machine's notes, if it left any (cheap when it did not).
    #[inline]
    pub(super) fn log_note(&mut self, core: &Core, c: ConnId) {
        self.log_note_about(core, c, None);
    }

    /// The same, naming `r` in the notes about a request (its body) — the
    /// request being ended, or the one a module reading its body holds.
    #[inline]
    pub(super) fn log_note_about(&mut self, core: &Core, c: ConnId, r: Option<&HttpRequest>) {
        if self.m.as_ref().is_some_and(|m| m.has_notes()) {
            self.log_notes(core, c, r);
        }
    }

    #[cold]
    fn log_notes(&mut self, core: &Core, c: ConnId, r: Option<&HttpRequest>) {
        let notes = self.m.as_mut().map(|m| m.take_notes()).unwrap_or_default();
        for n in &notes {
            self.log_one_note(core, c, n, r.or(self.r.as_deref()));
        }
    }

    fn log_one_note(&self, core: &Core, c: ConnId, n: &ErrNote, r: Option<&HttpRequest>) {
        let level = n.kind.level();
        if let (true, Some(r)) = (n.about_request, r) {
            let cx = log_error::req(&self.shared.conf, r);
            gyre_core::log_ctx!(level, &cx, "{}", n.message());
            return;
        }
        // nginx has chosen the virtual server by then if Host was read.
        let host = n.host.as_deref().map(strip_port);
        let server = self.pick_server(host);
        let cx = ConnLog {
            number: core.conn(c).map_or(0, |x| x.number),
            peer: core.conn(c).and_then(|x| x.peer),
            server: Server::Name(log_error::server_name(&self.shared.conf, server)),
            request_line: &n.request_line,
            host: n.host.as_deref(),
            referrer: n.referrer.as_deref(),
            action: n.action,
            chain: log_error::server_chain(&self.shared.conf, server),
        };
        gyre_core::log_ctx!(level, &cx, "{}", n.message());
    }

    /// recv() failed between requests: before the first (nginx's `…
    /// while waiting for request`, named by the listening address) or on
    /// a kept-alive connection (`client ADDR closed keepalive connection
    /// (104: …)`, without the context). Inside a request it is the
    /// machine's note.
    pub(super) fn log_recv_error(&self, core: &Core, c: ConnId, e: &std::io::Error) {
        let number = core.conn(c).map_or(0, |x| x.number);
        let peer = core.conn(c).and_then(|x| x.peer);
        let text = gyre_core::sys_error_text(e);
        if self.is_fresh() {
            let cx = ConnLog {
                number,
                peer,
                server: Server::Listening(self.port.addr),
                request_line: "",
                host: None,
                referrer: None,
                action: Some("waiting for request"),
                chain: log_error::server_chain(&self.shared.conf, self.port.default),
            };
            gyre_core::log_ctx!(INFO, &cx, "recv() failed ({text})");
        } else if self.is_idle() {
            let addr = peer.map(|p| p.ip().to_string()).unwrap_or_default();
            gyre_core::log_ctx!(
                INFO,
                &Bare(number, self.keepalive_chain()),
                "client {addr} closed keepalive connection ({text})"
            );
        }
    }

    /// Where a kept-alive connection's lines go: the last request's
    /// location's `error_log`s (the default server's before any request).
    fn keepalive_chain(&self) -> Option<&gyre_core::errlog::LogChain> {
        match &self.last_loc {
            Some(loc) => loc.error_log.as_ref(),
            None => log_error::server_chain(&self.shared.conf, self.port.default),
        }
    }

    /// The first request never came (nginx's `waiting for request`,
    /// named by the listening address: no server is chosen yet).
    pub(super) fn log_wait_timeout(&self, core: &Core, c: ConnId) {
        let cx = ConnLog {
            number: core.conn(c).map_or(0, |x| x.number),
            peer: core.conn(c).and_then(|x| x.peer),
            server: Server::Listening(self.port.addr),
            request_line: "",
            host: None,
            referrer: None,
            action: Some("waiting for request"),
            chain: log_error::server_chain(&self.shared.conf, self.port.default),
        };
        gyre_core::log_ctx!(INFO, &cx, "{TIMED_OUT}");
    }

    /// The client closed between requests: before its first (nginx's
    /// `client closed connection while waiting for request`) or on a
    /// kept-alive connection (`client ADDR closed keepalive connection`,
    /// which nginx writes without the context). A close inside a head is
    /// the machine's note.
    pub(super) fn log_eof(&self, core: &Core, c: ConnId) {
        let number = core.conn(c).map_or(0, |x| x.number);
        let peer = core.conn(c).and_then(|x| x.peer);
        if self.is_fresh() {
            let cx = ConnLog {
                number,
                peer,
                server: Server::Listening(self.port.addr),
                request_line: "",
                host: None,
                referrer: None,
                action: Some("waiting for request"),
                chain: log_error::server_chain(&self.shared.conf, self.port.default),
            };
            gyre_core::log_ctx!(INFO, &cx, "client closed connection");
        } else if self.is_idle() {
            let addr = peer.map(|p| p.ip().to_string()).unwrap_or_default();
            gyre_core::log_ctx!(
                INFO,
                &Bare(number, self.keepalive_chain()),
                "client {addr} closed keepalive connection"
            );
        }
    }

    /// `send_timeout` expired with output left.
    pub(super) fn log_send_timeout(&self, core: &Core, c: ConnId) {
        const SENDING: &str = "sending response to client";
        if let Some(r) = &self.r {
            let cx = log_error::req(&self.shared.conf, r).with_action(SENDING);
            gyre_core::log_ctx!(INFO, &cx, "{TIMED_OUT}");
            return;
        }
        let cx = ConnLog {
            number: core.conn(c).map_or(0, |x| x.number),
            peer: core.conn(c).and_then(|x| x.peer),
            server: Server::Name(log_error::server_name(&self.shared.conf, self.port.default)),
            request_line: "",
            host: None,
            referrer: None,
            action: Some(SENDING),
            chain: log_error::server_chain(&self.shared.conf, self.port.default),
        };
        gyre_core::log_ctx!(INFO, &cx, "{TIMED_OUT}");
    }
}

/// A line with the connection number only (nginx's lines written while
/// `c->log->handler` is unset).
struct Bare<'a>(u64, Option<&'a gyre_core::errlog::LogChain>);

impl gyre_core::errlog::LogContext for Bare<'_> {
    fn number(&self) -> u64 {
        self.0
    }

    fn chain(&self) -> Option<&gyre_core::errlog::LogChain> {
        self.1
    }

    fn context(&self, _out: &mut dyn std::fmt::Write) -> std::fmt::Result {
        Ok(())
    }
}

/// `host:port` → `host` (an IPv6 literal keeps its brackets' content).
fn strip_port(h: &str) -> &str {
    match h.rsplit_once(':') {
        Some((name, port))
            if port.bytes().all(|b| b.is_ascii_digit())
                && (!name.contains(':') || name.ends_with(']')) =>
        {
            name
        }
        _ => h,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_port_is_taken_off_a_host_header() {
        assert_eq!(super::strip_port("Example.com:8080"), "Example.com");
        assert_eq!(super::strip_port("localhost"), "localhost");
        assert_eq!(super::strip_port("[::1]:80"), "[::1]");
    }
}
