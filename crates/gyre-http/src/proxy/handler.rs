//! The proxy content handler and the upstream state machine that serves a
//! proxied request (nginx's `ngx_http_proxy_handler` and the parts of
//! `ngx_http_upstream.c` it drives): read the client's body, pick a peer,
//! take a cached connection or connect, send the request, read and parse
//! the response head, relay the head and the body to the client, then give
//! the connection back to the keep-alive cache or close it; on errors and
//! timeouts, `proxy_next_upstream` decides between another peer and nginx's
//! 502 / 504, with nginx's error-log lines.
//!
//! [`start`] runs in the content phase (sans-I/O: it only suspends the
//! request with its [`Proxy`] state); [`drive`] runs in the connection's
//! handler, with the core, each time something happened on the client or
//! the upstream connection, and does as much as it can without blocking.
//! The upstream connection's events reach the client's handler through
//! [`Relay`] ([`Core::dispatch`]), so one handler owns both sides. The
//! steps live in their own modules: the request written (`request.rs`),
//! the peer reached and the request sent (`peer.rs`), the head read and
//! relayed (`response.rs`), the body (`pipe.rs`, with the temp file), an
//! attempt's end and `proxy_next_upstream` (`next.rs`), the 101 tunnel
//! (`tunnel.rs`).
//!
//! Memory per request is bounded: the head buffer is `proxy_buffer_size`
//! (a bigger head is nginx's `upstream sent too big header`), and body
//! bytes held for a slow client are bounded by the buffers
//! ([`ProxyConf::max_pending`]), the rest in the temp file or not read yet.
//! Buffers are pooled per worker ([`super::Worker`]).

use std::fmt;
use std::io;
use std::sync::Arc;

use gyre_core::conn::ConnId;
use gyre_core::event::{Core, Ev, EvKind, Handler, Msec, PeerAddr};

use super::conf::ProxyConf;
use super::Worker;
use crate::conf::HttpConf;
use crate::log_error;
use crate::phases::Ctx;
use crate::request::{Content, HttpRequest};
use crate::response::Response;
use crate::upstream::http_response::{BodyReader, ResponseHead};
use crate::upstream::{Outcome, PeerRequest, Upstream};

use super::next::close_upstream;
use super::peer::{connect, connecting, send_request};
use super::pipe::relay_body;
use super::request::build_request;
use super::response::read_header;
use super::tunnel::tunnel;
/// Where a proxied request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum St {
    /// Collecting the client's body.
    ReadBody,
    /// Choosing a peer and connecting (or taking a cached connection).
    Connect,
    /// Waiting for the connect to finish.
    Connecting,
    SendRequest,
    ReadHeader,
    /// Relaying the body.
    Body,
    /// After a 101: bytes both ways until either side closes.
    Tunnel,
}

/// A proxied request's state, kept in [`Content::Proxy`] while suspended.
#[derive(Debug)]
pub struct Proxy {
    pub(super) conf: Arc<ProxyConf>,
    pub(super) st: St,
    pub(super) pr: Option<PeerRequest>,
    /// The upstream connection in use.
    pub u: Option<ConnId>,
    /// It came from the keep-alive cache.
    pub(super) cached: bool,
    /// Requests made on it (this one included) and when it was made.
    pub(super) u_requests: u64,
    pub(super) u_created: Msec,
    /// The peer of the current attempt (its address and printed name).
    pub(super) addr: Option<PeerAddr>,
    /// The request head and, when it is in memory, the body, as sent (a
    /// body that went to a temporary file follows from there).
    pub(super) req: Vec<u8>,
    /// Where the URI is in `req` (for `upstream: "…"` in log lines).
    pub(super) uri: (usize, usize),
    pub(super) sent: usize,
    /// Bytes of the request body's temporary file sent after `req` (0 again
    /// for each attempt).
    pub(super) file_sent: u64,
    /// Bytes read from the upstream and not yet used.
    pub(super) buf: Vec<u8>,
    /// The response head as read (`proxy_buffer_size` long, filled to
    /// `hlen`).
    pub(super) hbuf: Vec<u8>,
    pub(super) hlen: usize,
    /// The body's read buffer (kept at its length, like `hbuf`).
    pub(super) rbuf: Vec<u8>,
    /// Decoded body bytes to relay (reused).
    pub(super) out: Vec<u8>,
    /// The response head (reused: its buffers kept).
    pub(super) head: ResponseHead,
    pub(super) reader: Option<BodyReader>,
    /// Attempts made.
    pub(super) attempts: usize,
    /// When the first attempt started (`proxy_next_upstream_timeout`).
    pub(super) first: Msec,
    /// When this attempt started.
    pub(super) attempt_start: Msec,
    /// The event that woke the request on the upstream side, if it was a
    /// timer (set by the glue before [`drive`]).
    pub timed_out: Option<EvKind>,
    /// The upstream connection had an event (set by the glue).
    pub u_event: bool,
    /// The client connection (known once [`drive`] ran).
    pub client: Option<ConnId>,
    /// The client's request was passed to the upstream (nginx's
    /// `u->request_sent`), for the non-idempotent rule.
    pub(super) request_sent: bool,
    /// A stale cached connection was already retried on a new one.
    pub(super) stale_retry: bool,
    /// How many times the choice of a peer waited for the end of the
    /// loop's turn because the keep-alive cache was empty (`peer.rs`).
    pub(super) deferred: u8,
    /// The response is relayed unbuffered (`proxy_buffering off`, or
    /// `X-Accel-Buffering: no` from the upstream).
    pub(super) unbuffered: bool,
    /// The response's temp file, once the client fell behind.
    pub(super) spill: Option<super::pipe::Spill>,
    /// The request's own upstream: a `proxy_pass` with variables naming an
    /// address (else the worker's upstream `conf.upstream`).
    pub(super) own: Option<Box<Upstream>>,
    /// Body bytes still to be taken from the client and sent
    /// (`proxy_request_buffering off`), and whether any were taken (the
    /// request cannot be sent again then).
    pub(super) body_left: u64,
    pub(super) body_taken: bool,
    /// The tunnel's client-to-upstream bytes (upstream-to-client ones use
    /// `buf`) and how much of each was written.
    pub(super) up: Vec<u8>,
    pub(super) up_sent: usize,
    pub(super) down_sent: usize,
    /// Each side's end of stream was seen / passed on.
    pub(super) client_eof: bool,
    pub(super) upstream_eof: bool,
}

impl Proxy {
    fn new(conf: Arc<ProxyConf>) -> Proxy {
        Proxy {
            conf,
            st: St::ReadBody,
            pr: None,
            u: None,
            cached: false,
            u_requests: 0,
            u_created: 0,
            addr: None,
            req: Vec::new(),
            uri: (0, 0),
            sent: 0,
            file_sent: 0,
            buf: Vec::new(),
            hbuf: Vec::new(),
            hlen: 0,
            rbuf: Vec::new(),
            out: Vec::new(),
            head: ResponseHead::default(),
            reader: None,
            attempts: 0,
            first: 0,
            attempt_start: 0,
            timed_out: None,
            u_event: false,
            client: None,
            request_sent: false,
            stale_retry: false,
            deferred: 0,
            unbuffered: false,
            spill: None,
            own: None,
            body_left: 0,
            body_taken: false,
            up: Vec::new(),
            up_sent: 0,
            down_sent: 0,
            client_eof: false,
            upstream_eof: false,
        }
    }

    /// Makes a pooled state serve another request, keeping its buffers.
    fn reuse(&mut self, conf: Arc<ProxyConf>) {
        self.conf = conf;
        self.st = St::ReadBody;
        self.pr = None;
        self.u = None;
        self.cached = false;
        self.addr = None;
        self.req.clear();
        self.sent = 0;
        self.file_sent = 0;
        self.buf.clear();
        self.hlen = 0;
        self.out.clear();
        self.reader = None;
        self.attempts = 0;
        self.timed_out = None;
        self.u_event = false;
        self.client = None;
        self.request_sent = false;
        self.stale_retry = false;
        self.deferred = 0;
        self.unbuffered = false;
        self.spill = None;
        self.own = None;
        self.body_left = 0;
        self.body_taken = false;
        self.up.clear();
        self.up_sent = 0;
        self.down_sent = 0;
        self.client_eof = false;
        self.upstream_eof = false;
    }

    /// The request is a tunnel after a 101 (the client connection carries
    /// raw bytes now, not HTTP).
    pub fn is_tunnel(&self) -> bool {
        self.st == St::Tunnel
    }

    /// The request relays a body and may read its upstream while the
    /// client's output is blocked (into its temp file).
    pub fn reads_while_blocked(&self) -> bool {
        self.st == St::Body
    }

    /// Whether `c` is this request's upstream connection.
    pub fn owns(&self, c: ConnId) -> bool {
        self.u == Some(c)
    }
}

/// How [`drive`] left the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// Waiting for an event; `progress` when output was queued or state
    /// changed (the caller writes, then calls again).
    Wait { progress: bool },
    /// The response is complete (or the request is over).
    Done,
    /// Finalize with this error status (through `error_page`).
    Error(u16),
    /// `X-Accel-Redirect` from the upstream: an internal redirect to this
    /// URI (or `@named` location), served as GET.
    Redirect(String),
}

/// The upstream connection's handler: its events go to the handler of the
/// client connection that owns it.
pub struct Relay {
    pub client: ConnId,
}

impl Handler for Relay {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        if core.is_live(ev.conn) && core.dispatch(self.client, ev) {
            return;
        }
        if core.is_live(self.client) {
            core.post(Ev::write(self.client));
        } else {
            // The client went away: nothing will ever read this.
            core.close(ev.conn);
        }
    }
}

/// What [`drive`] works with besides the core and the request.
pub struct Env<'a, 'b> {
    pub conf: &'a HttpConf,
    pub worker: &'a Worker,
    pub client: ConnId,
    /// The worker's read buffer.
    pub buf: &'a mut Vec<u8>,
    /// The worker's response object, reused for relayed heads.
    pub resp: &'a mut Response,
    pub cx: Ctx<'b>,
}

/// The content phase: suspends the request with its proxy state; the
/// connection's handler then calls [`drive`].
pub fn start(
    cx: &mut Ctx<'_>,
    r: &mut HttpRequest,
    conf: &Arc<ProxyConf>,
    pool: Option<Box<Proxy>>,
) -> Result<(), u16> {
    let mut own = None;
    let mut evaluated = None;
    if let Some(cv) = &conf.dynamic {
        // proxy_pass with variables: this request's URL and target.
        let mut url = Vec::new();
        let env = r.st.env(cx.conf, None, cx.now, cx.unix_ms);
        cv.eval(&cx.conf.vars, &mut r.vars, &env, &mut url);
        let url = String::from_utf8_lossy(&url);
        match super::eval::eval(&url, conf, &cx.conf.upstreams) {
            Ok(e) => {
                if let super::eval::Target::Direct(u) = e.target {
                    own = Some(u);
                }
                evaluated = Some(e.conf);
            }
            Err((status, msg)) => {
                let lcx = log_error::req(cx.conf, r);
                gyre_core::log_ctx!(gyre_core::errlog::ERROR, &lcx, "{msg}");
                if let (Some(p), Some(w)) = (pool, cx.proxies) {
                    w.give_back(p);
                }
                return Err(status);
            }
        }
    }
    let conf = evaluated.as_ref().unwrap_or(conf);
    let mut p = match pool {
        Some(mut p) => {
            p.reuse(conf.clone());
            p
        }
        None => Box::new(Proxy::new(conf.clone())),
    };
    p.own = own;
    p.first = cx.now;
    r.st.upstream.clear();
    if let Some(e) = &evaluated {
        r.st.upstream.set_evaluated(e.clone());
    }
    let has_body = !matches!(r.st.req.body, crate::body::BodyKind::None);
    let stream = match r.st.req.body {
        crate::body::BodyKind::Length(n) if !conf.request_buffering && conf.pass_request_body => n,
        _ => 0,
    };
    if stream > 0 {
        // proxy_request_buffering off: the head goes at once, the body
        // follows as it arrives.
        let loc = r.st.loc.clone();
        crate::request_body::collect(cx, &loc);
        p.body_left = stream;
        p.st = St::Connect;
        build_request(cx, r, &mut p);
    } else if has_body {
        // The body is read whether or not it is passed (nginx reads it
        // into the request and decides when building the upstream's):
        // in memory up to client_body_buffer_size, then to a temporary
        // file under client_body_temp_path (crate::request_body), so a
        // big upload never sits whole in the worker's memory.
        crate::request_body::begin(cx, r, crate::request_body::Want::default());
    } else {
        p.st = St::Connect;
        build_request(cx, r, &mut p);
    }
    r.content = Content::Proxy(p);
    Ok(())
}

/// Advances the request as far as it goes without blocking.
pub fn drive(core: &mut Core, env: &mut Env<'_, '_>, r: &mut HttpRequest) -> Flow {
    // Moved out for the time of the call: `r` is needed beside it.
    let Content::Proxy(mut p) = std::mem::replace(&mut r.content, Content::None) else {
        return Flow::Done;
    };
    p.client = Some(env.client);
    let flow = step(core, env, r, &mut p);
    match flow {
        Flow::Wait { .. } => r.content = Content::Proxy(p),
        Flow::Done | Flow::Error(_) | Flow::Redirect(_) => {
            release(core, &mut p);
            env.worker.give_back(p);
            r.content = Content::None;
        }
    }
    flow
}

/// Closes what a request still holds (the client went away).
pub fn abandon(core: &mut Core, worker: &Worker, r: &mut HttpRequest) {
    if let Content::Proxy(p) = std::mem::replace(&mut r.content, Content::None) {
        let mut p = p;
        if let (Some(pr), Some(_)) = (p.pr.as_mut(), p.u) {
            let secs = worker.secs(core);
            with_upstream(worker, p.conf.upstream, &mut p.own, |up| {
                pr.free(up, Outcome::Ok, secs);
            });
        }
        release(core, &mut p);
        worker.give_back(p);
    }
}

/// Runs `f` on the request's upstream: its own (`own`) or the worker's of
/// index `idx`.
pub(super) fn with_upstream<R>(
    worker: &Worker,
    idx: usize,
    own: &mut Option<Box<Upstream>>,
    f: impl FnOnce(&mut Upstream) -> R,
) -> Option<R> {
    if let Some(u) = own.as_deref_mut() {
        return Some(f(u));
    }
    let mut ups = worker.ups.borrow_mut();
    ups.get_mut(idx).map(f)
}

pub(super) fn release(core: &mut Core, p: &mut Proxy) {
    if let Some(u) = p.u.take() {
        core.close(u);
    }
}

pub(super) fn step(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Flow {
    if client_gone(core, env, r, p) {
        return Flow::Done;
    }

    // Bounded: every turn changes state or waits.
    for _ in 0..64 {
        let f = match p.st {
            St::ReadBody => read_body(core, env, r, p),
            St::Connect => connect(core, env, r, p),
            St::Connecting => connecting(core, env, r, p),
            St::SendRequest => send_request(core, env, r, p),
            St::ReadHeader => read_header(core, env, r, p),
            St::Body => relay_body(core, env, r, p),
            St::Tunnel => tunnel(core, env, r, p),
        };
        // "Progress" for the caller: output to write before calling
        // again (state changes alone are not).
        match f {
            Turn::Again => {}
            Turn::Wait => {
                return Flow::Wait {
                    progress: env.cx.m.has_output(),
                }
            }
            Turn::WaitProgress => return Flow::Wait { progress: true },
            Turn::End(f) => return f,
        }
    }
    // Yield: the client's write event brings the request back.
    core.post(Ev::write(env.client));
    Flow::Wait { progress: false }
}

pub(super) enum Turn {
    /// The state changed: go on.
    Again,
    Wait,
    WaitProgress,
    End(Flow),
}

pub(super) fn read_body(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    use crate::request_body::Pumped;
    let now = core.now();
    // Bounded: each pass takes input or stops.
    for _ in 0..1024 {
        // Out of the request while it is filled, so `r` names the lines.
        let Some(mut rb) = r.st.body.take() else {
            return Turn::End(Flow::Error(500));
        };
        let date = core.clock().http_date();
        let pumped = crate::request_body::pump(env.cx.m, &mut rb, env.conf, r, now, date);
        r.st.body = Some(rb);
        match pumped {
            Pumped::Done => {
                p.st = St::Connect;
                build_request(&mut env.cx, r, p);
                return Turn::Again;
            }
            Pumped::Failed => return Turn::End(Flow::Error(500)),
            Pumped::Ended(_) => return Turn::End(Flow::Done),
            Pumped::Again => {}
        }
        if !env.cx.m.wants_read() || !core.conn(env.client).is_some_and(|x| x.read.ready) {
            return Turn::Wait;
        }
        match core.recv(env.client, env.buf) {
            Ok(0) => env.cx.m.on_eof(now),
            Ok(n) => env.cx.m.on_read(&env.buf[..n], now),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Turn::Wait,
            Err(_) => return Turn::End(Flow::Done),
        }
    }
    Turn::Wait
}

/// nginx's `ngx_http_upstream_check_broken_connection` with epoll's
/// RDHUP: a client that closed while its request is with the upstream
/// ends the request and the upstream connection (logged at info, 499 in
/// the access log), unless `proxy_ignore_client_abort on`.
pub(super) fn client_gone(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> bool {
    if p.conf.ignore_client_abort || matches!(p.st, St::ReadBody | St::Tunnel) {
        return false;
    }
    if !core.conn(env.client).is_some_and(|x| x.read.pending_eof) {
        return false;
    }
    let action = match p.st {
        St::Connect | St::Connecting => "connecting to upstream",
        St::SendRequest => "sending request to upstream",
        St::ReadHeader => "reading response header from upstream",
        _ => "reading upstream",
    };
    log_line(
        env,
        r,
        p,
        gyre_core::errlog::INFO,
        action,
        "epoll_wait() reported that client prematurely closed connection, so upstream connection is closed too",
    );
    let now = core.now();
    if env.cx.m.is_streaming() {
        let _ = env.cx.m.abort_body(now);
    } else {
        env.cx.m.abandon_request(499, now);
    }
    r.st.status = 499;
    r.st.upstream.done(now);
    close_upstream(core, env, p, Outcome::Ok, false);
    true
}

/// `upstream: "http://127.0.0.1:8080/x"` of the log lines.
struct UpUrl<'a> {
    https: bool,
    peer: &'a str,
    uri: &'a [u8],
}

impl fmt::Display for UpUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(
            f,
            "{scheme}://{}{}",
            self.peer,
            String::from_utf8_lossy(self.uri)
        )
    }
}

/// Writes an error-log line about the current attempt, with nginx's
/// context (client, server, request, upstream, host).
pub(super) fn log_line(
    env: &Env<'_, '_>,
    r: &HttpRequest,
    p: &Proxy,
    level: log::Level,
    action: &'static str,
    msg: &str,
) {
    log_at(env, r, p, Some(level), action, msg);
}

/// [`log_line`] at nginx's `[crit]` (a failure of the server's own: a temp
/// file it cannot create or write).
pub(super) fn log_crit(
    env: &Env<'_, '_>,
    r: &HttpRequest,
    p: &Proxy,
    action: &'static str,
    msg: &str,
) {
    log_at(env, r, p, None, action, msg);
}

fn log_at(
    env: &Env<'_, '_>,
    r: &HttpRequest,
    p: &Proxy,
    level: Option<log::Level>,
    action: &'static str,
    msg: &str,
) {
    let peer = r.st.upstream.last_addr();
    let url = UpUrl {
        https: p.conf.https,
        peer,
        uri: p.req.get(p.uri.0..p.uri.1).unwrap_or(&[]),
    };
    let cx = log_error::req(env.conf, r)
        .with_action(action)
        .with_upstream(&url);
    match level {
        Some(level) => gyre_core::log_ctx!(level, &cx, "{msg}"),
        None => gyre_core::log_ctx!(crit, &cx, "{msg}"),
    }
}
