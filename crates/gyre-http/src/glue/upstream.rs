//! The client connection's side of a proxied request (nginx's
//! `ngx_http_upstream` seen from `r->connection`): telling the upstream
//! connection's events from the client's, and one turn of the request's
//! state machine ([`crate::proxy::handler::drive`]) with the worker's
//! buffers.

use gyre_core::conn::ConnId;
use gyre_core::event::{Core, Ev};

use super::{Flow, HttpConn};
use crate::conf::LocConf;
use crate::phases::Ctx;
use crate::proxy::handler::Flow as ProxyFlow;

impl HttpConn {
    pub(super) fn is_proxied(&self) -> bool {
        self.r
            .as_ref()
            .is_some_and(|r| matches!(r.content, crate::request::Content::Proxy(_)))
    }

    pub(super) fn proxy_reads_while_blocked(&self) -> bool {
        self.r.as_ref().is_some_and(
            |r| matches!(&r.content, crate::request::Content::Proxy(p) if p.reads_while_blocked()),
        )
    }

    /// The client connection, when `u` is the upstream connection of this
    /// connection's proxied request.
    pub(super) fn upstream_owner(&self, u: ConnId) -> Option<ConnId> {
        match self.r.as_ref().map(|r| &r.content) {
            Some(crate::request::Content::Proxy(p)) if p.owns(u) => p.client,
            _ => None,
        }
    }

    /// An event of a proxied request's upstream connection: the request
    /// goes on, then the client side is written and re-armed as after its
    /// own events.
    pub(super) fn upstream_event(&mut self, core: &mut Core, ev: Ev, c: ConnId) {
        if let Some(crate::request::Content::Proxy(p)) = self.r.as_mut().map(|r| &mut r.content) {
            p.u_event = true;
            if ev.timedout {
                p.timed_out = Some(ev.kind);
            }
        }
        if let Flow::Closed = self.run(core, c) {
            return;
        }
        self.after(core, c);
    }

    /// One turn of the proxied request (crate::proxy::handler::drive).
    pub(super) fn proxy_step(&mut self, core: &mut Core, c: ConnId) -> ProxyFlow {
        let shared = self.shared.clone();
        let (Some(r), Some(m)) = (self.r.as_mut(), self.m.as_mut()) else {
            return ProxyFlow::Done;
        };
        let mut files = shared.files.borrow_mut();
        let mut matches = shared.matches.borrow_mut();
        let mut fpath = shared.fpath.borrow_mut();
        let mut scratch = shared.scratch.borrow_mut();
        let mut buf = shared.buf.borrow_mut();
        let sink = |loc: &LocConf| {
            if shared.any_access_log {
                shared.log_sink(loc)
            } else {
                1
            }
        };
        let cx = Ctx {
            conf: &shared.conf,
            files: &mut files,
            matches: &mut matches,
            m,
            open: &mut self.files,
            zone: None,
            now: core.now(),
            unix_ms: core.clock().unix_ms(),
            date: "",
            fpath: &mut fpath,
            scratch: &mut scratch,
            last_call: self.last_call,
            sink: &sink,
            proxies: None,
        };
        let mut resp = shared.response.borrow_mut();
        let mut env = crate::proxy::handler::Env {
            conf: &shared.conf,
            worker: &shared.proxy,
            client: c,
            buf: &mut buf,
            resp: &mut resp,
            cx,
        };
        let flow = crate::proxy::handler::drive(core, &mut env, r);
        env.cx.m.settings_mut().send_timeout = r.st.loc.send_timeout;
        flow
    }
}
