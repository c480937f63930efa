//! The request object of the module (nginx's `ngx_http_request_t` above
//! the connection machine): the parsed head plus everything the phases
//! change (the current URI and arguments, the location, regex captures,
//! variables, the internal-redirect budget, a suspended content handler).
//!
//! It is owned by the connection's handler and can outlive a loop turn: a
//! content handler that returns "again" leaves its state in
//! [`HttpRequest::content`] and the handler resumes it on a timer or when
//! the output drained. Objects are pooled per worker and keep their
//! buffers' capacity, so a request costs no allocation once warm.

use std::sync::Arc;

use gyre_core::event::Msec;

use crate::conf::{HttpConf, LocConf};
use crate::parse::Request;
use crate::regex::Captures;
use crate::response::Response;
use crate::variables::{ConnInfo, VarCache, VarEnv};

/// nginx's `NGX_HTTP_MAX_URI_CHANGES` + 1: internal redirects and
/// rewrites allowed before the cycle error.
pub const URI_CHANGES: u8 = 11;

/// Everything but the variable cache (kept apart so a variable can be
/// computed from the rest while the cache is written).
#[derive(Debug)]
pub struct ReqState {
    pub req: Box<Request>,
    pub server: usize,
    pub loc: Arc<LocConf>,
    /// `$uri`: the decoded path, then what rewrites and redirects set.
    pub uri: Vec<u8>,
    /// `$args`, without `?`.
    pub args: Vec<u8>,
    /// `$args` was set by a redirect (so an empty one is found).
    pub args_set: bool,
    pub caps: Captures,
    /// What the captures index into (the subject of the last match).
    pub cap_src: Vec<u8>,
    /// Index of the next phase handler to run.
    pub phase: usize,
    /// Internal redirects left (nginx's `r->uri_changes`).
    pub uri_changes: u8,
    /// A rewrite changed the URI: post-rewrite goes back to find-config.
    pub uri_changed: bool,
    /// The status an `error_page` redirect answers with (0: none yet).
    pub err_status: u16,
    /// An error page was already used (nginx's `recursive_error_pages off`).
    pub error_page: bool,
    /// `error_page ... = URI`: the page's own status is sent.
    pub uri_overwrite: bool,
    /// Served as GET after an error-page redirect.
    pub as_get: bool,
    pub start: Msec,
    /// Status and byte counts once responded (`$status` etc. in logs).
    pub status: u16,
    pub body_bytes_sent: u64,
    pub bytes_sent: u64,
    pub conn: ConnInfo,
    /// `limit_req` was applied (once per request, as nginx's main request).
    pub limit_req_done: bool,
    pub limit_conn_done: bool,
    /// Counts held in `limit_conn` zones, released when dropped.
    pub held: Vec<crate::limit_conn::Hold>,
    /// A rewrite or internal redirect changed the URI (nginx's
    /// `r->internal` / `!r->valid_unparsed_uri`, for proxy_pass's URI).
    pub internal: bool,
    /// nginx's `r->valid_location` (false after `rewrite … break`).
    pub valid_location: bool,
    /// The `$upstream_*` records of a proxied request.
    pub upstream: crate::proxy::vars::UpstreamVars,
    /// The response varies with Accept-Encoding (nginx's `r->gzip_vary`):
    /// `Vary` is added with `gzip_vary on`.
    pub gzip_vary: bool,
    /// The request body, once a handler asked for it (crate::request_body;
    /// nginx's `r->request_body`). Kept in the pooled object for its
    /// buffer; `None` or not `done` for a request that did not read it.
    pub body: Option<Box<crate::request_body::RequestBody>>,
}

/// A suspended content handler's state.
#[derive(Debug)]
pub enum Content {
    /// Nothing suspended.
    None,
    /// A paced file body (`limit_rate`).
    Paced(crate::static_handler::Paced),
    /// Delayed by `limit_req`: the phases go on after the timer.
    Delayed,
    /// Proxied (crate::proxy::handler), driven by the connection's handler.
    Proxy(Box<crate::proxy::handler::Proxy>),
    /// A body being gzipped a slice per loop turn (crate::gzip).
    Gzip(Box<crate::gzip::Stream>),
    /// The request body is being read (crate::request_body); then the
    /// handler that asked goes on.
    ReadBody(crate::request_body::Post),
}

/// When a suspended request wants to run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Once the output queued so far is written.
    Drained,
    /// At this time (a delay timer on the connection's write event, as
    /// nginx's `wev->delayed`), and only once the output drained.
    At(Msec),
    /// Once the output is written and the loop had a turn (work done in
    /// slices: other connections run between two).
    Yield,
    /// Once the request body is read (the connection handler reads the
    /// socket and calls crate::request_body::pump).
    Body,
}

/// One request in the module.
#[derive(Debug)]
pub struct HttpRequest {
    pub st: ReqState,
    pub vars: VarCache,
    pub content: Content,
    pub wake: Option<Wake>,
    /// The response being finalized (kept for `$sent_http_*` in logs).
    pub resp_log: Option<Response>,
}

impl HttpRequest {
    /// A request object for `req` on `server`, starting at phase 0.
    pub fn new(
        req: Box<Request>,
        server: usize,
        loc: Arc<LocConf>,
        conn: ConnInfo,
        now: Msec,
    ) -> HttpRequest {
        let mut r = HttpRequest {
            st: ReqState {
                req,
                server,
                loc,
                uri: Vec::new(),
                args: Vec::new(),
                args_set: false,
                caps: Captures::new(),
                cap_src: Vec::new(),
                phase: 0,
                uri_changes: URI_CHANGES,
                uri_changed: false,
                err_status: 0,
                error_page: false,
                uri_overwrite: false,
                as_get: false,
                start: now,
                status: 0,
                body_bytes_sent: 0,
                bytes_sent: 0,
                conn,
                limit_req_done: false,
                limit_conn_done: false,
                held: Vec::new(),
                internal: false,
                valid_location: true,
                upstream: Default::default(),
                gzip_vary: false,
                body: None,
            },
            vars: VarCache::default(),
            content: Content::None,
            wake: None,
            resp_log: None,
        };
        r.init_uri();
        r
    }

    /// Reuses a pooled object for a new request, keeping its buffers.
    pub fn reuse(
        &mut self,
        req: Box<Request>,
        server: usize,
        loc: Arc<LocConf>,
        conn: ConnInfo,
        now: Msec,
    ) -> Box<Request> {
        let old = std::mem::replace(&mut self.st.req, req);
        let st = &mut self.st;
        st.server = server;
        st.loc = loc;
        st.args_set = false;
        st.caps.clear();
        st.cap_src.clear();
        st.phase = 0;
        st.uri_changes = URI_CHANGES;
        st.uri_changed = false;
        st.err_status = 0;
        st.error_page = false;
        st.uri_overwrite = false;
        st.as_get = false;
        st.start = now;
        st.status = 0;
        st.body_bytes_sent = 0;
        st.bytes_sent = 0;
        st.conn = conn;
        st.limit_req_done = false;
        st.limit_conn_done = false;
        st.held.clear();
        st.internal = false;
        st.valid_location = true;
        st.upstream.clear();
        st.gzip_vary = false;
        self.content = Content::None;
        self.wake = None;
        self.resp_log = None;
        if let Some(b) = &mut self.st.body {
            // Drops the previous body's file (unlinked, or removed when
            // `clean`), keeps the first buffer.
            b.clear();
        }
        self.init_uri();
        old
    }

    fn init_uri(&mut self) {
        let st = &mut self.st;
        // Bytes, as nginx's `r->uri`: a decoded path that is not UTF-8
        // (`/%FF`, a Latin-1 file name) is looked up and served as sent.
        st.uri.clear();
        st.uri.extend_from_slice(st.req.path());
        st.args.clear();
        if let Some(q) = st.req.query() {
            st.args.extend_from_slice(q);
        }
    }

    /// Prepares the variable cache for the configuration's registry.
    pub fn reset_vars(&mut self, conf: &HttpConf) {
        self.vars.reset(conf.vars.len());
    }
}

impl ReqState {
    /// The variables' view of this request at `now`.
    pub fn env<'a>(
        &'a self,
        conf: &'a HttpConf,
        resp: Option<&'a Response>,
        now: Msec,
        unix_ms: u64,
    ) -> VarEnv<'a> {
        VarEnv {
            req: &self.req,
            uri: &self.uri,
            args: &self.args,
            caps: &self.caps,
            cap_src: &self.cap_src,
            loc: &self.loc,
            server: conf.servers.get(self.server),
            conn: &self.conn,
            resp,
            status: self.status,
            body_bytes_sent: self.body_bytes_sent,
            bytes_sent: self.bytes_sent,
            start: self.start,
            now,
            unix_ms,
            as_get: self.as_get,
            args_set: self.args_set,
            request_line: None,
            upstream: Some(&self.upstream),
            body: self.body.as_deref(),
        }
    }

    /// Whether the request is served as HEAD (the body suppressed).
    pub fn is_head(&self) -> bool {
        self.req.is_head()
    }

    /// GET or HEAD, or any method after an error-page redirect (served as
    /// GET).
    pub fn is_get_or_head(&self) -> bool {
        self.as_get || self.req.is_get_or_head()
    }
}
