//! A request's life on a connection, from its parsed head to the log
//! phase (nginx's `ngx_http_process_request`, `ngx_http_handler` and
//! `ngx_http_finalize_request`): every parsed head gets a (pooled) request
//! object and its server, the phases run, a suspended request is woken
//! when its output drained and its time came, and an ended one is logged
//! and goes back to the pool.

use std::sync::Arc;

use gyre_core::conn::ConnId;
use gyre_core::event::clock::msec_diff;
use gyre_core::event::{Core, Ev};

use super::read_body::BodyRead;
use super::{HttpConn, Stat, MACHINE_POOL};
use crate::conf::{HttpConf, LocConf, ServerConf};
use crate::conn::Event;
use crate::parse::Request;
use crate::phases::{self, Ctx, Status};
use crate::request::{HttpRequest, Wake};
use crate::variables::ConnInfo;

/// How [`HttpConn::run_phases`] starts.
pub(super) enum Start {
    /// A new request, from its first phase.
    New,
    /// A suspended content handler, woken.
    Resume,
    /// Refused before the phases (nginx's `ngx_http_process_request`: a
    /// plain request on a TLS port: 497, a missing client certificate:
    /// 496), with that status.
    Refused(u16),
    /// A suspended request finalized with an error status (a proxied
    /// request's 502 / 504).
    Error(u16),
    /// A suspended request redirected internally (`X-Accel-Redirect`).
    Redirect(String),
}

impl HttpConn {
    /// Answers every request the machine has parsed, unless one is
    /// suspended.
    pub(super) fn answer(&mut self, core: &Core, c: ConnId) {
        let now = core.now();
        let date = core.clock().http_date();
        while self.r.is_none() {
            let Some(ev) = self.m.as_mut().and_then(|m| m.poll(now, date)) else {
                break;
            };
            if let Event::Request(req) = ev {
                if let Some(z) = core.shared() {
                    z.stats().requests.inc();
                }
                self.set_stat(core, Stat::Writing);
                // Lines about the head (ignored header lines) come before
                // the phases' own, as nginx's do.
                self.log_note(core, c);
                let mut r = self.new_request(core, c, req);
                let refused = if self.port.tls {
                    crate::ssl::refuse(
                        core,
                        c,
                        &self.shared.conf,
                        &self.port.servers,
                        self.port.default,
                        &r.st.req,
                    )
                } else {
                    None
                };
                let start = match refused {
                    Some(resp) => Start::Refused(resp.status),
                    None => Start::New,
                };
                match self.run_phases(core, &mut r, start) {
                    Status::Done => self.end_request(core, c, r),
                    Status::Again => self.r = Some(r),
                }
            }
        }
        self.flush_logs(core, c);
    }

    /// A (pooled) request object for a parsed head.
    fn new_request(&mut self, core: &Core, c: ConnId, req: Box<Request>) -> Box<HttpRequest> {
        let conf = &self.shared.conf;
        let (server_i, by_regex) = if self.port.servers.len() <= 1 && !self.port.regex_names {
            (self.port.default, false)
        } else {
            self.find_server(req.host())
        };
        let loc = conf
            .servers
            .get(server_i)
            .map(|s| HttpConf::server_loc(s).clone())
            .unwrap_or_else(|| HttpConf::server_loc(&ServerConf::default()).clone());
        let conn = ConnInfo {
            peer: core.conn(c).and_then(|x| x.peer),
            realip_original: None,
            local: Some(self.port.addr),
            number: core.conn(c).map_or(0, |x| x.number),
            requests: self.m.as_ref().map_or(0, |m| m.requests()),
            tls: self.port.tls && core.tls_info(c).is_some(),
            ssl: if self.port.tls {
                core.tls_info_rc(c)
            } else {
                None
            },
        };
        let now = core.now();
        let pooled = self.shared.requests.borrow_mut().pop();
        let mut r = match pooled {
            Some(mut r) => {
                let old = r.reuse(req, server_i, loc, conn, now);
                if let Some(m) = self.m.as_mut() {
                    m.recycle(old);
                }
                r
            }
            None => Box::new(HttpRequest::new(req, server_i, loc, conn, now)),
        };
        r.reset_vars(conf);
        if by_regex {
            self.server_captures(&mut r);
        }
        r
    }

    /// The captures of the `server_name ~REGEX` that chose the server:
    /// `$1`... and its named groups, as nginx sets them.
    fn server_captures(&self, r: &mut HttpRequest) {
        let conf = &self.shared.conf;
        let Some(s) = conf.servers.get(r.st.server) else {
            return;
        };
        let Some(host) = r.st.req.host() else {
            return;
        };
        let host = host.to_ascii_lowercase();
        let host = host.trim_end_matches('.').to_string();
        let mut matches = self.shared.matches.borrow_mut();
        for re in &s.name_regexes {
            if matches.exec(re, host.as_bytes(), &mut r.st.caps) {
                r.st.cap_src.clear();
                r.st.cap_src.extend_from_slice(host.as_bytes());
                crate::rewrite::set_named(re, r);
                return;
            }
        }
    }

    /// Runs the phases of `r` (from its current phase, or resumes its
    /// suspended content handler).
    pub(super) fn run_phases(&mut self, core: &Core, r: &mut HttpRequest, start: Start) -> Status {
        let shared = self.shared.clone();
        let Some(m) = self.m.as_mut() else {
            return Status::Done;
        };
        let mut files = shared.files.borrow_mut();
        let mut matches = shared.matches.borrow_mut();
        let mut fpath = shared.fpath.borrow_mut();
        let mut scratch = shared.scratch.borrow_mut();
        let sink = |loc: &LocConf| {
            if shared.any_access_log {
                shared.log_sink(loc)
            } else {
                1
            }
        };
        let mut cx = Ctx {
            conf: &shared.conf,
            files: &mut files,
            matches: &mut matches,
            m,
            open: &mut self.files,
            zone: core.shared(),
            now: core.now(),
            unix_ms: core.clock().unix_ms(),
            date: core.clock().http_date(),
            fpath: &mut fpath,
            scratch: &mut scratch,
            last_call: self.last_call,
            sink: &sink,
            proxies: Some(&shared.proxy),
        };
        let mut out = shared.response.borrow_mut();
        let status = match start {
            Start::New => phases::run(&mut cx, r, &mut out),
            Start::Resume => phases::resume(&mut cx, r, &mut out),
            Start::Refused(code) => phases::run_refused(&mut cx, r, &mut out, code),
            Start::Error(code) => phases::run_error(&mut cx, r, &mut out, code),
            Start::Redirect(to) => phases::run_redirect(&mut cx, r, &mut out, &to),
        };
        // Drop what the response shares (file bytes, texts) now.
        out.reset(0);
        if let Some(m) = self.m.as_mut() {
            m.settings_mut().send_timeout = r.st.loc.send_timeout;
        }
        status
    }

    /// The log phase, then the request object goes back to the pool.
    pub(super) fn end_request(&mut self, core: &Core, _c: ConnId, mut r: Box<HttpRequest>) {
        // limit_conn counts end once the response is written.
        self.held.append(&mut r.st.held);
        self.log_note_about(core, _c, Some(&r));
        if !self
            .last_loc
            .as_ref()
            .is_some_and(|l| Arc::ptr_eq(l, &r.st.loc))
        {
            self.last_loc = Some(r.st.loc.clone());
        }
        let shared = self.shared.clone();
        if shared.any_access_log && (r.st.loc.log_format != 0 || r.st.loc.log_if.is_some()) {
            self.write_custom_log(core, &mut r, None);
        }
        if shared.any_access_log && !r.st.loc.extra_logs.is_empty() {
            let loc = r.st.loc.clone();
            for e in loc.extra_logs.iter() {
                let sink = shared.path_sink(&e.path);
                self.write_log_line(core, &mut r, None, e.format, e.cond.as_ref(), sink);
            }
        }
        if let Some(m) = self.m.as_mut() {
            // Lines about a body still being discarded name the request
            // (after the log lines: it takes the request's head, leaving
            // the machine's spare one in its place).
            m.keep_discarded(&mut r.st.req);
        }
        if let Some(b) = &mut r.st.body {
            // A body's temporary file goes with its request (nginx's pool
            // cleanup), not when the object is next used.
            b.clear();
        }
        let mut pool = shared.requests.borrow_mut();
        if pool.len() < MACHINE_POOL {
            pool.push(r);
        }
    }

    /// Resumes a suspended request once its output drained and its time
    /// came; true when it is still suspended (waiting for the output to
    /// drain, or for the delay timer or posted event armed here); false
    /// when it ended, or queued output for the caller to write.
    pub(super) fn wake_request(&mut self, core: &mut Core, c: ConnId) -> bool {
        let Some(mut r) = self.r.take() else {
            return false;
        };
        loop {
            if self.has_output() {
                self.r = Some(r);
                return true;
            }
            if let Some(Wake::Body) = r.wake {
                match self.read_body(core, c, &mut r) {
                    BodyRead::Wait => {
                        self.r = Some(r);
                        return true;
                    }
                    BodyRead::Ended(status) => {
                        // The machine answered (400, 413) or closed (408,
                        // the client left); only the log phase is left.
                        r.content = crate::request::Content::None;
                        r.wake = None;
                        r.st.status = status;
                        self.end_request(core, c, r);
                        self.answer(core, c);
                        return false;
                    }
                    BodyRead::Failed => {
                        r.content = crate::request::Content::None;
                        r.wake = None;
                        match self.run_phases(core, &mut r, Start::Error(500)) {
                            Status::Done => {
                                self.end_request(core, c, r);
                                self.answer(core, c);
                            }
                            Status::Again => self.r = Some(r),
                        }
                        return false;
                    }
                    BodyRead::Done => r.wake = None,
                }
            }
            let now = core.now();
            if let Some(Wake::Yield) = r.wake {
                // Work in slices: the next one on the loop's next turn
                // (a posted write event), after other connections'.
                r.wake = None;
                self.delayed = true;
                // No timer on the write event marks the wake-up as the
                // posted one (the send timeout is not needed: nothing is
                // queued).
                core.del_timer(Ev::write(c));
                core.post(Ev::write(c));
                self.r = Some(r);
                return true;
            }
            if let Some(Wake::At(t)) = r.wake {
                let wait = msec_diff(t, now);
                if wait > 0 {
                    self.delayed = true;
                    core.add_timer(Ev::write(c), wait as u64);
                    self.r = Some(r);
                    return true;
                }
            }
            self.delayed = false;
            if let Status::Done = self.run_phases(core, &mut r, Start::Resume) {
                self.end_request(core, c, r);
                self.answer(core, c);
                return false;
            }
            if self.has_output() {
                // Written by the caller now: the socket may be writable
                // already, and an edge-triggered poll would not say so
                // again.
                self.r = Some(r);
                return false;
            }
        }
    }
}
