//! The phase engine (nginx's `ngx_http_core_run_phases`): an ordered list
//! of phase handlers built once from the configuration ([`build`]), walked
//! per request by [`run`].
//!
//! A handler says "next" (the following handler), "jump" (internal
//! redirects and post-rewrite go back to find-config), "finalize" with a
//! response (which `error_page` may turn into an internal redirect),
//! "done" (the handler responded itself) or "again": the request is
//! suspended, its state kept in the [`HttpRequest`], and the connection's
//! handler resumes it with [`resume`] when its [`Wake`] condition holds
//! (a timer, or the output drained). Phases without any handler in the
//! configuration are left out of the list, so a plain configuration runs
//! find-config and content only.
//!
//! Sans-I/O like the connection machine: a handler gets the machine to
//! queue output on, the file cache and the time, never a socket.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use gyre_core::errlog::ERROR;
use gyre_core::event::Msec;
use gyre_core::process::shm::SharedZone;

use crate::conf::{HttpConf, LocConf, TryLast};
use crate::conn::Connection;
use crate::log_error;
use crate::regex::MatchCache;
use crate::request::{Content, HttpRequest, Wake};
use crate::response::Response;
use crate::rewrite;
use crate::static_file::{FileCache, FileInfo};

/// One handler of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The realip module with the server's settings (crate::realip).
    PostRead,
    /// The server-level rewrite script.
    ServerRewrite,
    /// Location lookup, `internal`, `client_max_body_size`.
    FindConfig,
    /// The location's rewrite script.
    Rewrite,
    /// Back to find-config when a rewrite changed the URI.
    PostRewrite,
    /// `limit_req`, then `limit_conn` (crate::limit_req, crate::limit_conn).
    PreAccess,
    /// `allow`/`deny` and `auth_basic` (crate::access), under `satisfy`.
    Access,
    TryFiles,
    Content,
}

/// The handler list for a configuration.
pub fn build(conf: &HttpConf) -> Arc<[Phase]> {
    let mut v = Vec::new();
    let realip = crate::realip::in_use(conf);
    if realip {
        v.push(Phase::PostRead);
    }
    if conf.servers.iter().any(|s| !s.script.is_empty()) {
        v.push(Phase::ServerRewrite);
    }
    v.push(Phase::FindConfig);
    let locs = || {
        conf.servers
            .iter()
            .flat_map(|s| all_locations(&s.locations))
    };
    if locs().any(|l| !l.script.is_empty()) {
        v.push(Phase::Rewrite);
        // Only a `rewrite` can change the URI; scripts of `return`, `set`
        // and `if` alone need no second look.
        if locs().any(|l| crate::rewrite::changes_uri(&l.script)) {
            v.push(Phase::PostRewrite);
        }
    }
    let fallbacks = || conf.servers.iter().filter_map(|s| s.fallback.as_deref());
    if realip
        || fallbacks()
            .chain(locs().filter_map(|l| l.conf.as_deref()))
            .any(|l| l.limit_req.is_some() || l.limit_conn.is_some())
    {
        v.push(Phase::PreAccess);
    }
    if fallbacks()
        .chain(locs().filter_map(|l| l.conf.as_deref()))
        .flat_map(LocConf::with_nested)
        .any(crate::access::has_checks)
    {
        v.push(Phase::Access);
    }
    if conf.servers.iter().any(|s| s.set.try_files.is_some())
        || locs().any(|l| l.set.try_files.is_some())
    {
        v.push(Phase::TryFiles);
    }
    v.push(Phase::Content);
    v.into()
}

/// The pre-access handlers before limit_conn: the realip module with the
/// location's settings (when post-read changed nothing), then limit_req.
fn pre_access(cx: &mut Ctx<'_>, r: &mut HttpRequest) -> Step {
    crate::realip::handler(r);
    crate::limit_req::phase(cx, r)
}

/// Every location of a tree, nested ones included.
pub fn all_locations(ls: &[crate::conf::Location]) -> Vec<&crate::conf::Location> {
    let mut out = Vec::new();
    for l in ls {
        out.push(l);
        out.extend(all_locations(&l.children));
    }
    out
}

/// What a request's handlers work with besides the request.
pub struct Ctx<'a> {
    pub conf: &'a HttpConf,
    pub files: &'a mut FileCache,
    pub matches: &'a mut MatchCache,
    /// The connection machine the response is queued on.
    pub m: &'a mut Connection,
    /// Files that `Body::File` tokens refer to.
    pub open: &'a mut Vec<(u64, Rc<FileInfo>)>,
    pub zone: Option<&'a SharedZone>,
    pub now: Msec,
    pub unix_ms: u64,
    pub date: &'a str,
    /// Reused path buffer.
    pub fpath: &'a mut PathBuf,
    /// Reused scratch buffer.
    pub scratch: &'a mut Vec<u8>,
    /// The worker is exiting: this is the connection's last response.
    pub last_call: bool,
    /// The access-log sink of a location (see [`crate::LogRecord::sink`]).
    pub sink: &'a dyn Fn(&crate::conf::LocConf) -> u32,
    /// The worker's proxy state (pooled request states), if any.
    pub proxies: Option<&'a crate::proxy::Worker>,
}

/// A handler's verdict.
///
/// A response is never moved around: a handler fills the one it is lent
/// (`out`) and says [`Step::Respond`], or names an error status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Next,
    Jump(usize),
    /// Finalize with nginx's page for this status.
    Error(u16),
    /// Finalize with the response the handler filled in.
    Respond,
    /// The handler queued its response itself.
    Done,
    /// Suspended until `r.wake`.
    Again,
}

/// The request's end, as far as the connection handler cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The response is queued on the machine (completely).
    Done,
    /// Suspended: resume when [`HttpRequest::wake`] holds.
    Again,
}

fn find_config_index(conf: &HttpConf) -> usize {
    conf.phases
        .iter()
        .position(|p| *p == Phase::FindConfig)
        .unwrap_or(0)
}

fn rewrite_index(conf: &HttpConf) -> usize {
    conf.phases
        .iter()
        .position(|p| *p == Phase::Rewrite)
        .unwrap_or_else(|| find_config_index(conf) + 1)
}

/// Runs the phases from `r.st.phase` until the response is queued or a
/// handler suspends.
/// Runs the phases from `r.st.phase` until the response is queued or a
/// handler suspends. `out` is the response handlers fill in (reused).
pub fn run(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response) -> Status {
    loop {
        let Some(&ph) = cx.conf.phases.get(r.st.phase) else {
            out.set_error(500);
            return send(cx, r, out);
        };
        let step = match ph {
            Phase::ServerRewrite => server_rewrite(cx, r, out),
            Phase::FindConfig => find_config(cx, r),
            Phase::Rewrite => location_rewrite(cx, r, out),
            Phase::PostRewrite => post_rewrite(cx, r),
            Phase::PostRead => {
                crate::realip::handler(r);
                Step::Next
            }
            Phase::PreAccess => match pre_access(cx, r) {
                Step::Next => crate::limit_conn::phase(cx, r),
                other => other,
            },
            Phase::Access => crate::access::phase(cx, r, out),
            Phase::TryFiles => try_files(cx, r),
            Phase::Content => content(cx, r, out),
        };
        match step {
            Step::Next => r.st.phase += 1,
            Step::Jump(i) => r.st.phase = i,
            Step::Error(code) => {
                out.set_error(code);
                match finalize(cx, r, out) {
                    Ok(i) => r.st.phase = i,
                    Err(st) => return st,
                }
            }
            Step::Respond => match finalize(cx, r, out) {
                Ok(i) => r.st.phase = i,
                Err(st) => return st,
            },
            Step::Done => return Status::Done,
            Step::Again => return Status::Again,
        }
    }
}

/// Finalizes a suspended request with an error status (a proxied request
/// that failed: nginx's 502 / 504), through `error_page` like any other.
pub fn run_error(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response, code: u16) -> Status {
    out.set_error(code);
    match finalize(cx, r, out) {
        Ok(i) => {
            r.st.phase = i;
            run(cx, r, out)
        }
        Err(st) => st,
    }
}

/// An internal redirect of a suspended request (a proxied response's
/// `X-Accel-Redirect`): served as GET (HEAD stays HEAD), from find-config
/// or the named location.
pub fn run_redirect(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response, to: &str) -> Status {
    if !r.st.req.is_head() {
        r.st.as_get = true;
    }
    match internal_redirect(cx, r, to.as_bytes()) {
        Ok(i) => {
            r.st.phase = i;
            run(cx, r, out)
        }
        Err(code) => run_error(cx, r, out, code),
    }
}

/// A request refused before its phases run (a plain HTTP request on a TLS
/// port: 497; no client certificate: 496). The response goes through
/// [`finalize`], so an `error_page 497 …` of the server applies, as nginx's
/// users rely on (`error_page 497 https://$host$request_uri;`).
pub fn run_refused(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response, code: u16) -> Status {
    out.set_error(code);
    match finalize(cx, r, out) {
        Ok(i) => {
            r.st.phase = i;
            run(cx, r, out)
        }
        Err(st) => st,
    }
}

/// Resumes a suspended content handler.
pub fn resume(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response) -> Status {
    r.wake = None;
    let step = match std::mem::replace(&mut r.content, Content::None) {
        Content::None => return Status::Done,
        Content::Paced(p) => crate::static_handler::pace(cx, r, p),
        Content::Gzip(st) => crate::gzip::step(cx, r, st),
        Content::ReadBody(post) => match post {
            crate::request_body::Post::DavPut => match crate::dav::put_body_read(cx, r, out) {
                Step::Respond => return send(cx, r, out),
                Step::Error(code) => return run_error(cx, r, out, code),
                other => other,
            },
        },
        // limit_req is done; the phase goes on with limit_conn.
        Content::Delayed => return run(cx, r, out),
        // Driven by the connection's handler, never resumed here.
        Content::Proxy(p) => {
            r.content = Content::Proxy(p);
            return Status::Again;
        }
    };
    match step {
        Step::Again => Status::Again,
        Step::Error(code) => {
            out.set_error(code);
            send(cx, r, out)
        }
        Step::Respond => send(cx, r, out),
        _ => Status::Done,
    }
}

#[inline]
fn script_ctx<'a>(cx: &'a mut Ctx<'_>) -> rewrite::Env<'a> {
    rewrite::Env {
        conf: cx.conf,
        matches: cx.matches,
        now: cx.now,
        unix_ms: cx.unix_ms,
        scratch: cx.scratch,
        quote: true,
    }
}

fn server_rewrite(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response) -> Step {
    let Some(server) = cx.conf.servers.get(r.st.server) else {
        return Step::Next;
    };
    let script = server.srv_script.clone();
    match rewrite::run(&script, &mut script_ctx(cx), r, out) {
        rewrite::End::Respond => Step::Respond,
        _ => Step::Next,
    }
}

#[inline]
fn find_config(cx: &mut Ctx<'_>, r: &mut HttpRequest) -> Step {
    let Some(server) = cx.conf.servers.get(r.st.server) else {
        return Step::Error(500);
    };
    let found = crate::location::find(&server.tree, &r.st.uri, cx.matches, &mut r.st.caps);
    r.st.valid_location = true;
    r.st.loc = found.unwrap_or_else(|| HttpConf::server_loc(server).clone());
    if let Some(le) = &r.st.loc.limit_except {
        // nginx's ngx_http_update_location_config: a method the block does
        // not name gets the block's configuration (an error page's
        // redirect is served as GET).
        let method = if r.st.as_get {
            "GET"
        } else {
            r.st.req.method()
        };
        if let Some(c) = le.for_method(method) {
            r.st.loc = c.clone();
        }
    }
    if !r.st.caps.is_empty() {
        r.st.cap_src.clear();
        r.st.cap_src.extend_from_slice(&r.st.uri);
        if let Some(re) = r.st.loc.regex.clone() {
            rewrite::set_named(&re, r);
        }
    }
    if r.st.loc.internal && r.st.uri_changes == crate::request::URI_CHANGES {
        return Step::Error(404);
    }
    if let crate::body::BodyKind::Length(n) = r.st.req.body {
        let max = r.st.loc.client_max_body_size;
        if max != 0 && n > max {
            gyre_core::log_ctx!(
                ERROR,
                &log_error::req(cx.conf, r),
                "client intended to send too large body: {n} bytes"
            );
            return Step::Error(413);
        }
    }
    Step::Next
}

#[inline]
fn location_rewrite(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response) -> Step {
    if r.st.loc.script.is_empty() {
        return Step::Next;
    }
    let script = r.st.loc.script.clone();
    match rewrite::run(&script, &mut script_ctx(cx), r, out) {
        rewrite::End::Respond => Step::Respond,
        _ => Step::Next,
    }
}

#[inline]
fn post_rewrite(cx: &mut Ctx<'_>, r: &mut HttpRequest) -> Step {
    if !r.st.uri_changed {
        return Step::Next;
    }
    r.st.uri_changed = false;
    r.st.uri_changes -= 1;
    if r.st.uri_changes == 0 {
        gyre_core::log_ctx!(
            ERROR,
            &log_error::req(cx.conf, r),
            "rewrite or internal redirection cycle while processing \"{}\"",
            String::from_utf8_lossy(&r.st.uri)
        );
        return Step::Error(500);
    }
    Step::Jump(find_config_index(cx.conf))
}

/// An internal redirect to `uri` (with `?args`), or to a named location:
/// the phase to go on from, or a 500 when the redirect budget is spent.
pub fn internal_redirect(
    cx: &mut Ctx<'_>,
    r: &mut HttpRequest,
    target: &[u8],
) -> Result<usize, u16> {
    r.st.uri_changes = r.st.uri_changes.saturating_sub(1);
    r.st.internal = true;
    if r.st.uri_changes == 0 {
        gyre_core::log_ctx!(
            ERROR,
            &log_error::req(cx.conf, r),
            "rewrite or internal redirection cycle while internally redirecting to \"{}\"",
            String::from_utf8_lossy(target)
        );
        return Err(500);
    }
    if target.starts_with(b"@") {
        let server = cx.conf.servers.get(r.st.server);
        let Some(l) = server.and_then(|s| HttpConf::named(s, target)) else {
            gyre_core::log_ctx!(
                ERROR,
                &log_error::req(cx.conf, r),
                "could not find named location \"{}\"",
                String::from_utf8_lossy(target)
            );
            return Err(500);
        };
        r.st.loc = l.clone();
        return Ok(rewrite_index(cx.conf));
    }
    match target.iter().position(|&c| c == b'?') {
        Some(q) => {
            r.st.uri.clear();
            r.st.uri.extend_from_slice(&target[..q]);
            r.st.args.clear();
            r.st.args.extend_from_slice(&target[q + 1..]);
            r.st.args_set = true;
        }
        None => {
            r.st.uri.clear();
            r.st.uri.extend_from_slice(target);
        }
    }
    Ok(find_config_index(cx.conf))
}

fn try_files(cx: &mut Ctx<'_>, r: &mut HttpRequest) -> Step {
    let loc = r.st.loc.clone();
    let Some(tf) = &loc.try_files else {
        return Step::Next;
    };
    for (t, dir) in &tf.tries {
        cx.scratch.clear();
        {
            let env = r.st.env(cx.conf, None, cx.now, cx.unix_ms);
            t.eval(&cx.conf.vars, &mut r.vars, &env, cx.scratch);
        }
        let name = cx.scratch.clone();
        let dir = *dir;
        let mut fpath = std::mem::take(cx.fpath);
        crate::static_handler::map_path(r, &name, &mut fpath, cx);
        let opened = cx.files.open(&fpath, cx.now, loc.open_file_cache);
        *cx.fpath = fpath;
        let hit = match opened {
            crate::static_file::Open::File(_) => !dir,
            crate::static_file::Open::Dir => dir,
            _ => false,
        };
        if hit {
            r.st.uri = name;
            return Step::Next;
        }
    }
    match &tf.last {
        TryLast::Code(c) => Step::Error(*c),
        TryLast::Named(n) => match internal_redirect(cx, r, n.as_bytes()) {
            Ok(i) => Step::Jump(i),
            Err(code) => Step::Error(code),
        },
        TryLast::Uri(cv) => {
            cx.scratch.clear();
            {
                let env = r.st.env(cx.conf, None, cx.now, cx.unix_ms);
                cv.eval(&cx.conf.vars, &mut r.vars, &env, cx.scratch);
            }
            let target = cx.scratch.clone();
            // nginx splits the arguments off the URI here: an empty
            // `$args` is then found (logged empty, not `-`).
            r.st.args_set = true;
            if !target.contains(&b'?') {
                r.st.args.clear();
            }
            match internal_redirect(cx, r, &target) {
                Ok(i) => Step::Jump(i),
                Err(code) => Step::Error(code),
            }
        }
    }
}

#[inline]
fn content(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response) -> Step {
    if let Some(pc) = r.st.loc.proxy.clone() {
        let pooled = cx.proxies.and_then(|w| w.take());
        return match crate::proxy::handler::start(cx, r, &pc, pooled) {
            Ok(()) => Step::Again,
            Err(status) => Step::Error(status),
        };
    }
    if r.st.loc.dav.is_some() && r.st.req.method() == "PUT" {
        return crate::dav::put(cx, r);
    }
    if r.st.loc.stub_status {
        return crate::static_handler::stub_status(cx, r, out);
    }
    crate::static_handler::serve(cx, r, out)
}

/// nginx's `ngx_http_finalize_request` / special response: an error
/// status with an `error_page` becomes an internal redirect (the phase to
/// go on from is returned); otherwise the response is queued (`Err` with
/// whether it is complete or its body follows).
#[inline]
fn finalize(cx: &mut Ctx<'_>, r: &mut HttpRequest, resp: &mut Response) -> Result<usize, Status> {
    let status = resp.status;
    if status >= 300 && (!r.st.error_page || r.st.loc.recursive_error_pages) {
        let loc = r.st.loc.clone();
        if let Some(ep) = loc.error_page.iter().find(|e| e.codes.contains(&status)) {
            r.st.error_page = true;
            r.st.err_status = match ep.overwrite {
                None => status,
                Some(0) => 0,
                Some(n) => n,
            };
            r.st.uri_overwrite = ep.overwrite == Some(0);
            let target = error_page_target(cx, r, ep);
            if !target.starts_with(b"/") && !target.starts_with(b"@") {
                // nginx's ngx_http_send_error_page: a URL is a redirect,
                // 302 unless `=CODE` names another redirect code.
                let code = ep
                    .overwrite
                    .filter(|c| matches!(c, 301 | 302 | 303 | 307 | 308))
                    .unwrap_or(302);
                resp.set_error(code);
                resp.location = Some(target.into_owned().into());
                return Err(send(cx, r, resp));
            }
            if !target.starts_with(b"@") && !r.st.req.is_get_or_head() {
                r.st.as_get = true;
            }
            match internal_redirect(cx, r, &target) {
                Ok(i) => return Ok(i),
                Err(code) => resp.set_error(code),
            }
        }
    }
    if r.st.error_page && !r.st.uri_overwrite && r.st.err_status != 0 {
        if resp.status == 200 {
            resp.status = r.st.err_status;
            resp.close = Response::error(resp.status).close;
        } else if resp.status != r.st.err_status && resp.status >= 300 {
            resp.set_error(r.st.err_status);
        }
    }
    Err(send(cx, r, resp))
}

/// An `error_page`'s URI, its variables evaluated.
fn error_page_target<'e>(
    cx: &mut Ctx<'_>,
    r: &mut HttpRequest,
    ep: &'e crate::conf::ErrorPage,
) -> std::borrow::Cow<'e, [u8]> {
    let Some(cv) = &ep.uri_cv else {
        return ep.uri.as_bytes().into();
    };
    cx.scratch.clear();
    {
        let env = r.st.env(cx.conf, None, cx.now, cx.unix_ms);
        cv.eval(&cx.conf.vars, &mut r.vars, &env, cx.scratch);
    }
    cx.scratch.clone().into()
}

/// `add_header`, then the output filters (gzip) and the machine.
#[inline]
fn send(cx: &mut Ctx<'_>, r: &mut HttpRequest, resp: &mut Response) -> Status {
    absolute_redirect(cx.conf, r, resp);
    // nginx's header and range filters: Last-Modified only on 200, 206
    // and 304, Accept-Ranges only on 200.
    if resp.status != 200 {
        if resp.status != 206 && resp.status != 304 {
            resp.last_modified = None;
        }
        resp.headers.retain(|(k, _)| k != "Accept-Ranges");
    }
    prepare(cx, r, resp);
    if let Some(vary) = r.st.loc.gzip.as_ref().map(|g| g.vary) {
        match crate::gzip::filter(cx, r, resp) {
            Some(Step::Again) => return Status::Again,
            Some(Step::Error(code)) => resp.set_error(code),
            Some(_) => return Status::Done,
            None => {}
        }
        if vary && r.st.gzip_vary {
            crate::gzip::add_vary(resp);
        }
    }
    let _ = cx.m.respond_ref(resp, cx.now, cx.date);
    (r.st.body_bytes_sent, r.st.bytes_sent) = cx.m.last_sent();
    Status::Done
}

/// What every response gets before it is queued: `add_header`, the
/// location's keep-alive settings, its access log.
#[inline]
pub fn prepare(cx: &mut Ctx<'_>, r: &mut HttpRequest, resp: &mut Response) {
    expires(cx, r, resp);
    charset(r, resp);
    add_headers(cx, r, resp);
    r.st.status = resp.status;
    let loc = &r.st.loc;
    let st = cx.m.settings_mut();
    st.keepalive_timeout = loc.keepalive_timeout;
    st.keepalive_requests = loc.keepalive_requests;
    st.server_tokens = loc.server_tokens;
    if loc.keepalive_timeout == 0 || cx.m.requests() >= loc.keepalive_requests || cx.last_call {
        resp.close = true;
    }
    let sink = log_sink(cx, loc);
    cx.m.set_log_sink(sink);
    if r.st.conn.realip_original.is_some() {
        // The combined fast path logs `$remote_addr` as the realip module
        // set it, not the connection's peer.
        cx.m.set_log_peer(r.st.conn.peer);
    }
}

/// Where the machine's own record of a request in `loc` goes (its
/// `combined` access log's sink); 1, no sink, when the location logs in
/// another format or with `if=`: the log phase writes those lines.
#[inline]
pub fn log_sink(cx: &Ctx<'_>, loc: &LocConf) -> u32 {
    if loc.log_format != 0 || loc.log_if.is_some() {
        1
    } else {
        (cx.sink)(loc)
    }
}

/// The location's `add_header`s (without `always`, only on nginx's list of
/// successful and redirect codes).
#[inline]
pub fn add_headers(cx: &mut Ctx<'_>, r: &mut HttpRequest, resp: &mut Response) {
    if r.st.loc.add_header.is_empty() {
        return;
    }
    let loc = r.st.loc.clone();
    for (k, v, always) in &loc.add_header {
        if *always
            || matches!(
                resp.status,
                200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
            )
        {
            let value: crate::response::Text = if v.is_literal() {
                (&v.text).into()
            } else {
                cx.scratch.clear();
                let env = r.st.env(cx.conf, Some(resp), cx.now, cx.unix_ms);
                v.eval(&cx.conf.vars, &mut r.vars, &env, cx.scratch);
                cx.scratch.clone().into()
            };
            // nginx skips a header whose value is empty.
            if !value.is_empty() {
                resp.headers.push((k.into(), value));
            }
        }
    }
}

/// nginx's default `charset_types`.
const CHARSET_TYPES: &[&str] = &[
    "text/html",
    "text/xml",
    "text/plain",
    "text/vnd.wap.wml",
    "application/javascript",
    "application/rss+xml",
];

/// `charset NAME`: `; charset=NAME` on the text types.
#[inline]
fn charset(r: &HttpRequest, resp: &mut Response) {
    let Some(cs) = &r.st.loc.charset else {
        return;
    };
    let Some(ct) = &resp.content_type else {
        return;
    };
    if ct.contains(&b';') || !CHARSET_TYPES.iter().any(|t| ct.eq_ignore_ascii_case(t)) {
        return;
    }
    resp.content_type = Some(
        [ct.as_bytes(), b"; charset=", cs.as_bytes()]
            .concat()
            .into(),
    );
}

/// `expires`: `Expires` and `Cache-Control` on nginx's success and
/// redirect codes.
#[inline]
fn expires(cx: &mut Ctx<'_>, r: &mut HttpRequest, resp: &mut Response) {
    use crate::conf::Expires;
    let mut e = r.st.loc.expires;
    if let Some(cv) = r.st.loc.expires_cv.clone() {
        // `expires $var`: the value as the response stands (a `map` on
        // `$sent_http_content_type` is the usual source).
        cx.scratch.clear();
        let env = r.st.env(cx.conf, Some(resp), cx.now, cx.unix_ms);
        cv.eval(&cx.conf.vars, &mut r.vars, &env, cx.scratch);
        let v = String::from_utf8_lossy(cx.scratch).into_owned();
        let args: Vec<String> = v.split_whitespace().map(str::to_string).collect();
        e = match crate::conf::parse_expires(&args) {
            Ok(e) => e,
            Err(_) => {
                gyre_core::log_ctx!(
                    ERROR,
                    &log_error::req(cx.conf, r),
                    "invalid value \"{v}\" in \"expires\" directive"
                );
                Expires::Off
            }
        };
    }
    if e == Expires::Off
        || !matches!(
            resp.status,
            200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
        )
    {
        return;
    }
    let now = (cx.unix_ms / 1000) as i64;
    let (at, cc): (i64, crate::response::Text) = match e {
        Expires::Off => return,
        Expires::Epoch => (1, "no-cache".into()),
        Expires::Max => (2_145_916_555, "max-age=315360000".into()),
        Expires::Access(t) if t < 0 => (now + t, "no-cache".into()),
        Expires::Access(t) => (now + t, format!("max-age={t}").into()),
        Expires::Daily(t) => {
            let midnight = now - now % 86_400;
            let mut at = midnight + t as i64;
            if at <= now {
                at += 86_400;
            }
            (at, format!("max-age={}", at - now).into())
        }
    };
    let mut date = String::new();
    gyre_core::event::clock::format_http_date(at.max(0) as u64, &mut date);
    resp.headers
        .retain(|(k, _)| !k.eq_ignore_ascii_case("Cache-Control"));
    resp.headers.push(("Expires".into(), date.into()));
    resp.headers.push(("Cache-Control".into(), cc));
}

/// nginx's header filter with `absolute_redirect on`: a `Location`
/// starting with `/` gets the scheme, the host (the request's, or the
/// server's name with `server_name_in_redirect`, or the local address
/// without a Host) and, with `port_in_redirect`, a port other than the
/// scheme's.
#[inline]
pub(crate) fn absolute_redirect(conf: &HttpConf, r: &HttpRequest, resp: &mut Response) {
    let Some(loc) = &resp.location else {
        return;
    };
    let lc = &r.st.loc;
    if !loc.starts_with(b"/") || !lc.absolute_redirect {
        // nginx's header filter writes a Location it leaves as it is
        // with the other headers, after Connection: the redirect put it
        // in the list first.
        if let Some(loc) = resp.location.take() {
            resp.headers.insert(0, ("Location".into(), loc));
        }
        return;
    }
    let host = if lc.server_name_in_redirect {
        crate::log_error::server_name(conf, r.st.server).to_string()
    } else {
        r.st.req.host().map(str::to_string).unwrap_or_else(|| {
            r.st.conn
                .local
                .map(|a| a.ip().to_string())
                .unwrap_or_default()
        })
    };
    let scheme = if r.st.conn.tls { "https" } else { "http" };
    let port = r.st.conn.local.map_or(80, |a| a.port());
    let default_port = if r.st.conn.tls { 443 } else { 80 };
    let mut abs = if port == default_port || !lc.port_in_redirect {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}:{port}")
    }
    .into_bytes();
    abs.extend_from_slice(loc);
    resp.location = Some(abs.into());
}

/// When a suspended request wants to run (for the connection handler).
pub fn wake_of(r: &HttpRequest) -> Option<Wake> {
    r.wake
}

#[cfg(test)]
mod tests;
