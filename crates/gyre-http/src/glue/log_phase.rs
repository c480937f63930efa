//! The log phase of the connection handler: the machine's records of the
//! `combined` fast path routed to their files, lines of other
//! `log_format`s written from the request's variables, and refused heads
//! logged in their location's format.

use std::net::SocketAddr;
use std::sync::Arc;

use gyre_core::conn::ConnId;
use gyre_core::event::Core;

use super::HttpConn;
use crate::conf::{HttpConf, LocConf, ServerConf};
use crate::conn::LogRecord;
use crate::request::HttpRequest;
use crate::variables::ConnInfo;

impl HttpConn {
    /// The machine's error notes and access-log records, written (a
    /// test when there are none).
    #[inline]
    pub(super) fn flush_logs(&mut self, core: &Core, c: ConnId) {
        if self
            .m
            .as_ref()
            .is_some_and(|m| m.has_notes() || m.has_logs())
        {
            self.write_logs(core, c);
        }
    }

    fn write_logs(&mut self, core: &Core, c: ConnId) {
        // The error-log line of a refused or timed-out head comes first,
        // as nginx's does.
        self.log_note(core, c);
        if !self.m.as_ref().is_some_and(|m| m.has_logs()) {
            return;
        }
        // Taken out while the records are routed, which borrows `self`.
        let Some(mut m) = self.m.take() else {
            return;
        };
        let peer = core.conn(c).and_then(|x| x.peer);
        let secs = core.clock().unix_secs();
        for rec in m.drain_logs() {
            if !self.shared.any_access_log {
                continue;
            }
            let sink = match rec.sink {
                0 => {
                    let (server, loc) = self.unrouted_loc(&rec);
                    if loc.log_format != 0 || loc.log_if.is_some() {
                        self.log_unrouted(core, server, loc, &rec, peer);
                        continue;
                    }
                    self.shared.log_sink(&loc)
                }
                s => s,
            };
            self.shared.log(sink, &rec, rec.peer.or(peer), secs);
        }
        self.m = Some(m);
    }

    /// The server and location of a record the machine made before
    /// routing (a refused head): its request line's path on its host.
    pub(super) fn unrouted_loc(&self, rec: &LogRecord) -> (usize, Arc<LocConf>) {
        let conf = &self.shared.conf;
        let server = self.pick_server(rec.host.as_deref());
        let Some(s) = conf.servers.get(server) else {
            return (server, HttpConf::server_loc(&ServerConf::default()).clone());
        };
        let target = rec
            .request_line
            .split(|&b| b == b' ')
            .nth(1)
            .unwrap_or(b"/");
        let path = target.split(|&b| b == b'?').next().unwrap_or(b"/");
        let path = String::from_utf8_lossy(path);
        (server, HttpConf::find_static(s, &path).clone())
    }

    /// A refused head's line in a location's own `log_format`: what the
    /// record knows (`$request`, `$status`, the byte counts, the client),
    /// the rest not found.
    pub(super) fn log_unrouted(
        &self,
        core: &Core,
        server: usize,
        loc: Arc<LocConf>,
        rec: &LogRecord,
        peer: Option<SocketAddr>,
    ) {
        let conn = ConnInfo {
            peer,
            local: Some(self.port.addr),
            ..ConnInfo::default()
        };
        let mut r = HttpRequest::new(Box::default(), server, loc, conn, rec.start);
        r.reset_vars(&self.shared.conf);
        r.st.status = rec.status;
        r.st.body_bytes_sent = rec.body_bytes_sent;
        r.st.bytes_sent = rec.bytes_sent;
        self.write_custom_log(core, &mut r, Some(&rec.request_line));
    }

    /// A line of the location's `log_format` (or `combined` with `if=`).
    pub(super) fn write_custom_log(&self, core: &Core, r: &mut HttpRequest, line: Option<&[u8]>) {
        let loc = r.st.loc.clone();
        let sink = self.shared.log_sink(&loc);
        self.write_log_line(core, r, line, loc.log_format, loc.log_if.as_ref(), sink);
    }

    /// A line in format `format` (0: `combined`) to `sink`, unless `cond`
    /// is empty or "0".
    pub(super) fn write_log_line(
        &self,
        core: &Core,
        r: &mut HttpRequest,
        line: Option<&[u8]>,
        format: usize,
        cond: Option<&crate::complex_value::ComplexValue>,
        sink: u32,
    ) {
        let shared = &self.shared;
        let conf = &shared.conf;
        let mut out = shared.scratch.borrow_mut();
        out.clear();
        let mut env = r.st.env(conf, None, core.now(), core.clock().unix_ms());
        env.request_line = line;
        if let Some(cond) = cond {
            cond.eval(&conf.vars, &mut r.vars, &env, &mut out);
            let write = !(out.is_empty() || out.as_slice() == b"0");
            out.clear();
            if !write {
                return;
            }
        }
        match conf.log_formats.get(format).filter(|f| f.value.is_some()) {
            Some(f) => f.write(&conf.vars, &mut r.vars, &env, &mut out),
            None => {
                // `combined` with `if=`: the fast formatter.
                let rec = LogRecord {
                    request_line: line.unwrap_or_else(|| r.st.req.request_line()).to_vec(),
                    status: crate::response::wire_status(r.st.status),
                    body_bytes_sent: r.st.body_bytes_sent,
                    referer: r.st.req.referer(),
                    user_agent: r.st.req.user_agent(),
                    remote_user: crate::auth_basic::basic_user(&r.st.req).map(|(cred, n)| {
                        String::from_utf8_lossy(cred.get(..n).unwrap_or(&[])).into_owned()
                    }),
                    ..LogRecord::default()
                };
                drop(out);
                shared.log(sink, &rec, r.st.conn.peer, core.clock().unix_secs());
                return;
            }
        }
        if !out.is_empty() {
            shared.with_log(sink, |l| l.write_line(&out));
        }
    }
}
