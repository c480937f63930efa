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
//! response side (head, relay, body end) is in `response.rs`, the 101
//! tunnel in `tunnel.rs`.
//!
//! Memory per request is bounded: the head buffer is `proxy_buffer_size`
//! (a bigger head is nginx's `upstream sent too big header`), and body
//! bytes are read from the upstream only while the client's pending output
//! is below [`ProxyConf::max_pending`]; a slow client slows the upstream
//! read, nothing piles up. Buffers are pooled per worker ([`super::Worker`]).

use std::fmt;
use std::io;
use std::sync::Arc;

use gyre_core::conn::ConnId;
use gyre_core::errlog::{ERROR, WARN};
use gyre_core::event::{ConnectOptions, Core, Ev, EvKind, Handler, Msec, PeerAddr};
use gyre_core::sys_error_text;

use super::conf::{ft, HeaderValue, ProxyConf};
use super::uri::{upstream_uri, UriInput};
use super::Worker;
use crate::conf::HttpConf;
use crate::log_error;
use crate::phases::Ctx;
use crate::request::{Content, HttpRequest};
use crate::response::Response;
use crate::upstream::http_request::ProxyVersion;
use crate::upstream::http_response::{BodyReader, ResponseHead};
use crate::upstream::keepalive::{self, Finished};
use crate::upstream::{Outcome, PeerRequest};

use super::response::*;
use super::tunnel::*;
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
    /// The request head and body, as sent.
    pub(super) req: Vec<u8>,
    /// Where the URI is in `req` (for `upstream: "…"` in log lines).
    pub(super) uri: (usize, usize),
    pub(super) sent: usize,
    /// The client's body, collected.
    pub(super) body: Vec<u8>,
    /// Bytes read from the upstream and not yet used.
    pub(super) buf: Vec<u8>,
    /// Decoded body bytes to relay (reused).
    pub(super) out: Vec<u8>,
    pub(super) head: Option<ResponseHead>,
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
    /// `X-Accel-Buffering: no` from the upstream.
    pub(super) unbuffered: bool,
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
            body: Vec::new(),
            buf: Vec::new(),
            out: Vec::new(),
            head: None,
            reader: None,
            attempts: 0,
            first: 0,
            attempt_start: 0,
            timed_out: None,
            u_event: false,
            client: None,
            request_sent: false,
            stale_retry: false,
            unbuffered: false,
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
        self.body.clear();
        self.buf.clear();
        self.out.clear();
        self.head = None;
        self.reader = None;
        self.attempts = 0;
        self.timed_out = None;
        self.u_event = false;
        self.client = None;
        self.request_sent = false;
        self.stale_retry = false;
        self.unbuffered = false;
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
) {
    let mut p = match pool {
        Some(mut p) => {
            p.reuse(conf.clone());
            p
        }
        None => Box::new(Proxy::new(conf.clone())),
    };
    p.first = cx.now;
    r.st.upstream.clear();
    let has_body = !matches!(r.st.req.body, crate::body::BodyKind::None);
    let stream = match r.st.req.body {
        crate::body::BodyKind::Length(n) if !conf.request_buffering && conf.pass_request_body => n,
        _ => 0,
    };
    if stream > 0 {
        // proxy_request_buffering off: the head goes at once, the body
        // follows as it arrives.
        cx.m.collect_body();
        p.body_left = stream;
        p.st = St::Connect;
        build_request(cx, r, &mut p);
    } else if has_body {
        // The body is read whether or not it is passed (nginx reads it
        // into the request and decides when building the upstream's).
        cx.m.collect_body();
    } else {
        p.st = St::Connect;
        build_request(cx, r, &mut p);
    }
    r.content = Content::Proxy(p);
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
            let mut ups = worker.ups.borrow_mut();
            if let Some(up) = ups.get_mut(p.conf.upstream) {
                pr.free(up, Outcome::Ok, worker.secs(core));
            }
        }
        release(core, &mut p);
        worker.give_back(p);
    }
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
    let now = core.now();
    // Bounded: each pass takes input or stops.
    for _ in 0..1024 {
        let date = core.clock().http_date();
        match env.cx.m.poll(now, date) {
            Some(crate::conn::Event::Body(b)) => {
                if p.body.is_empty() {
                    p.body = b;
                } else {
                    p.body.extend_from_slice(&b);
                }
                continue;
            }
            Some(crate::conn::Event::BodyEnd) => {
                p.st = St::Connect;
                build_request(&mut env.cx, r, p);
                return Turn::Again;
            }
            Some(crate::conn::Event::BodyError(_)) => return Turn::End(Flow::Done),
            Some(crate::conn::Event::Request(_)) | None => {}
        }
        if env.cx.m.wants_close() {
            return Turn::End(Flow::Done);
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

/// nginx's `ngx_http_proxy_create_request`: the request line, the
/// `proxy_set_header` list (configured headers, then the defaults), the
/// client's headers not named there, the body.
pub(super) fn build_request(cx: &mut Ctx<'_>, r: &mut HttpRequest, p: &mut Proxy) {
    let conf = p.conf.clone();
    let out = &mut p.req;
    out.clear();
    let method = if r.st.as_get {
        "GET"
    } else {
        r.st.req.method()
    };
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    let uri_start = out.len();
    let i = UriInput {
        unparsed: r.st.req.target(),
        uri: &r.st.uri,
        args: &r.st.args,
        changed: r.st.internal,
        valid_location: r.st.valid_location,
    };
    let loc = conf.location_prefix.then_some(&*conf.location);
    upstream_uri(conf.uri.as_deref(), loc, &i, out);
    p.uri = (uri_start, out.len());
    out.extend_from_slice(match conf.http_version {
        ProxyVersion::Http10 => b" HTTP/1.0\r\n",
        ProxyVersion::Http11 => b" HTTP/1.1\r\n",
    });
    let body_len = if p.body_left > 0 {
        p.body_left as usize
    } else if conf.pass_request_body {
        p.body.len()
    } else {
        0
    };
    let has_body = conf.pass_request_body && !matches!(r.st.req.body, crate::body::BodyKind::None);
    for (name, v) in &conf.headers {
        let mark = out.len();
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        let vstart = out.len();
        match v {
            HeaderValue::Value(cv) => {
                if cv.is_literal() {
                    out.extend_from_slice(cv.text.as_bytes());
                } else {
                    let env = r.st.env(cx.conf, None, cx.now, cx.unix_ms);
                    cv.eval(&cx.conf.vars, &mut r.vars, &env, out);
                }
            }
            HeaderValue::ProxyHost => out.extend_from_slice(conf.proxy_host.as_bytes()),
            HeaderValue::BodyLength => {
                if has_body {
                    push_decimal(out, body_len as u64);
                } else if let crate::body::BodyKind::Length(n) = r.st.req.body {
                    // nginx: without the body, the client's length is
                    // still announced (hence the usual
                    // `proxy_set_header Content-Length ""` with it).
                    push_decimal(out, n);
                }
            }
            HeaderValue::Chunked | HeaderValue::Empty => {}
        }
        if out.len() == vstart {
            out.truncate(mark);
        } else {
            out.extend_from_slice(b"\r\n");
        }
    }
    if conf.pass_request_headers {
        for (n, v) in r.st.req.headers() {
            if conf
                .headers
                .iter()
                .any(|(c, _)| c.as_bytes().eq_ignore_ascii_case(n))
            {
                continue;
            }
            out.extend_from_slice(n);
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    if has_body {
        out.extend_from_slice(&p.body);
    }
}

pub(super) fn push_decimal(out: &mut Vec<u8>, n: u64) {
    let mut b = [0u8; 20];
    let mut i = b.len();
    let mut v = n;
    loop {
        i -= 1;
        b[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&b[i..]);
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
    let peer = r.st.upstream.last_addr();
    let url = UpUrl {
        https: p.conf.https,
        peer,
        uri: p.req.get(p.uri.0..p.uri.1).unwrap_or(&[]),
    };
    let cx = log_error::req(env.conf, r)
        .with_action(action)
        .with_upstream(&url);
    gyre_core::log_ctx!(level, &cx, "{msg}");
}

pub(super) fn connect(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    let now = core.now();
    let secs = env.worker.secs(core);
    let mut ups = env.worker.ups.borrow_mut();
    let Some(up) = ups.get_mut(p.conf.upstream) else {
        return Turn::End(Flow::Error(500));
    };
    if p.pr.is_none() {
        let client = r.st.conn.peer.map(|a| a.ip());
        // The hash key: the upstream's `hash` value, evaluated.
        let mut key = Vec::new();
        if let Some(Some(cv)) = env.conf.upstream_keys.get(p.conf.upstream) {
            let e = r.st.env(env.conf, None, now, env.cx.unix_ms);
            cv.eval(&env.conf.vars, &mut r.vars, &e, &mut key);
        }
        p.pr = Some(up.start(&key, client));
    }
    let Some(pr) = p.pr.as_mut() else {
        return Turn::End(Flow::Error(500));
    };
    let chosen = pr.get(up, secs, &mut || env.worker.random());
    let Some(chosen) = chosen else {
        drop(ups);
        r.st.upstream.push_attempt(&up_name(env, p), now);
        log_line(
            env,
            r,
            p,
            ERROR,
            "connecting to upstream",
            "no live upstreams",
        );
        return Turn::End(Flow::Error(502));
    };
    let Some(peer) = up.peers.peer(chosen) else {
        return Turn::End(Flow::Error(500));
    };
    let addr = peer.addr.clone();
    r.st.upstream.push_attempt(&peer.name, now);
    let cache = env
        .worker
        .caches
        .get(p.conf.upstream)
        .and_then(|c| c.clone());
    drop(ups);
    p.attempts += 1;
    p.attempt_start = now;
    p.addr = Some(addr.clone());
    p.buf.clear();
    p.head = None;
    p.reader = None;
    p.sent = 0;
    if let Some(cache) = cache.as_ref().filter(|_| !p.stale_retry) {
        if let Some(u) = keepalive::unpark(core, cache, &addr) {
            core.set_handler(u, Box::new(Relay { client: env.client }));
            let (n, created) = env.worker.kept.borrow_mut().remove(&u).unwrap_or((0, now));
            p.u = Some(u);
            p.cached = true;
            p.u_requests = n + 1;
            p.u_created = created;
            r.st.upstream.connected(now);
            p.st = St::SendRequest;
            return Turn::Again;
        }
    }
    let mut o = ConnectOptions::new(addr, p.conf.connect_timeout);
    if p.conf.https {
        o.tls = env.worker.tls_for(&p.conf.proxy_host);
    }
    match core.connect(&o, Box::new(Relay { client: env.client })) {
        Ok(u) => {
            p.u = Some(u);
            p.cached = false;
            p.u_requests = 1;
            p.u_created = now;
            p.st = St::Connecting;
            Turn::Wait
        }
        Err(e) => {
            // No socket or no free slot: nginx's NGX_ERROR from
            // ngx_event_connect_peer, a 500 without another try.
            let msg = sys_error_text(&e);
            log_line(env, r, p, ERROR, "connecting to upstream", &msg);
            r.st.upstream.failed(now, 500);
            close_upstream(core, env, p, Outcome::Ok, false);
            Turn::End(Flow::Error(500))
        }
    }
}

/// What [`pull_body`] got.
enum Pull {
    /// Body bytes in `p.req` to send.
    Got,
    /// The body is complete.
    Done,
    Wait,
    /// The client went away or its body was refused (the machine answered).
    Gone,
}

/// Takes the next body bytes from the client for a streamed body; the
/// client is read only when the last ones went out, so at most one read
/// is held.
fn pull_body(core: &mut Core, env: &mut Env<'_, '_>, p: &mut Proxy) -> Pull {
    let now = core.now();
    // Bounded: each pass takes input or stops.
    for _ in 0..1024 {
        let ev = {
            let date = core.clock().http_date();
            env.cx.m.poll(now, date)
        };
        match ev {
            Some(crate::conn::Event::Body(b)) => {
                p.req.clear();
                p.req.extend_from_slice(&b);
                p.sent = 0;
                p.body_left = p.body_left.saturating_sub(b.len() as u64);
                p.body_taken = true;
                return Pull::Got;
            }
            Some(crate::conn::Event::BodyEnd) => {
                p.body_left = 0;
                return Pull::Done;
            }
            Some(crate::conn::Event::BodyError(_)) => return Pull::Gone,
            Some(crate::conn::Event::Request(_)) | None => {}
        }
        if env.cx.m.wants_close() {
            return Pull::Gone;
        }
        if !env.cx.m.wants_read() || !core.conn(env.client).is_some_and(|x| x.read.ready) {
            return Pull::Wait;
        }
        match core.recv(env.client, env.buf) {
            Ok(0) => env.cx.m.on_eof(now),
            Ok(n) => env.cx.m.on_read(&env.buf[..n], now),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Pull::Wait,
            Err(_) => return Pull::Gone,
        }
    }
    Pull::Wait
}

pub(super) fn up_name(env: &Env<'_, '_>, p: &Proxy) -> String {
    env.conf
        .upstreams
        .entries
        .get(p.conf.upstream)
        .map_or(String::new(), |e| e.name.clone())
}

pub(super) fn connecting(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    let Some(u) = p.u else {
        p.st = St::Connect;
        return Turn::Again;
    };
    if p.timed_out.take().is_some() {
        return fail(
            core,
            env,
            r,
            p,
            ft::TIMEOUT,
            "connecting to upstream",
            "upstream timed out (110: Connection timed out)",
        );
    }
    // The first event of the connection tells the outcome; until it came
    // nothing is to be done.
    if !std::mem::take(&mut p.u_event) {
        return Turn::Wait;
    }
    if let Err(e) = core.connect_result(u) {
        let msg = if e.kind() == io::ErrorKind::InvalidData {
            format!("SSL_do_handshake() failed (SSL: {e})")
        } else {
            format!("connect() failed ({})", sys_error_text(&e))
        };
        let action = if e.kind() == io::ErrorKind::InvalidData {
            "SSL handshaking to upstream"
        } else {
            "connecting to upstream"
        };
        return fail(core, env, r, p, ft::ERROR, action, &msg);
    }
    if core.conn(u).is_some_and(|x| x.write.error) {
        return fail(
            core,
            env,
            r,
            p,
            ft::ERROR,
            "connecting to upstream",
            "connect() failed (111: Connection refused)",
        );
    }
    r.st.upstream.connected(core.now());
    p.st = St::SendRequest;
    Turn::Again
}

pub(super) fn send_request(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    let Some(u) = p.u else {
        return Turn::End(Flow::Error(502));
    };
    if p.timed_out.take().is_some() {
        return fail(
            core,
            env,
            r,
            p,
            ft::TIMEOUT,
            "sending request to upstream",
            "upstream timed out (110: Connection timed out)",
        );
    }
    // Bounded: each pass sends what is there or stops.
    for _ in 0..4096 {
        if p.sent == p.req.len() {
            if p.body_left == 0 {
                break;
            }
            match pull_body(core, env, p) {
                Pull::Got => continue,
                Pull::Done => break,
                Pull::Wait => return Turn::Wait,
                Pull::Gone => {
                    close_upstream(core, env, p, Outcome::Ok, false);
                    return Turn::End(Flow::Done);
                }
            }
        }
        match core.send(u, &p.req[p.sent..]) {
            Ok(n) => {
                p.sent += n;
                p.request_sent = true;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if core.handle_write_event(u).is_err() {
                    return fail(
                        core,
                        env,
                        r,
                        p,
                        ft::ERROR,
                        "sending request to upstream",
                        "epoll_ctl() failed",
                    );
                }
                core.add_timer(Ev::write(u), p.conf.send_timeout);
                return Turn::Wait;
            }
            Err(e) => {
                let msg = format!("send() failed ({})", sys_error_text(&e));
                return fail(
                    core,
                    env,
                    r,
                    p,
                    ft::ERROR,
                    "sending request to upstream",
                    &msg,
                );
            }
        }
    }
    core.del_timer(Ev::write(u));
    if core.handle_read_event(u).is_err() {
        return fail(
            core,
            env,
            r,
            p,
            ft::ERROR,
            "sending request to upstream",
            "epoll_ctl() failed",
        );
    }
    core.add_timer(Ev::read(u), p.conf.read_timeout);
    p.st = St::ReadHeader;
    Turn::Again
}

/// Frees the peer with `outcome` and parks or closes the connection; true
/// when the peer just reached `max_fails` (nginx's "upstream server
/// temporarily disabled").
pub(super) fn close_upstream(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    p: &mut Proxy,
    outcome: Outcome,
    keep: bool,
) -> bool {
    let secs = env.worker.secs(core);
    let now = core.now();
    let mut disabled = false;
    if let Some(pr) = p.pr.as_mut() {
        let mut ups = env.worker.ups.borrow_mut();
        if let Some(up) = ups.get_mut(p.conf.upstream) {
            if pr.current().is_some() {
                disabled = pr.free(up, outcome, secs).disabled;
            }
        }
    }
    let Some(u) = p.u.take() else {
        return disabled;
    };
    let cache = env
        .worker
        .caches
        .get(p.conf.upstream)
        .and_then(|c| c.clone());
    let kconf = env
        .worker
        .ups
        .borrow()
        .get(p.conf.upstream)
        .and_then(|up| up.keepalive.clone());
    if let (true, Some(cache), Some(kc), Some(addr)) = (keep, cache, kconf, p.addr.clone()) {
        let f = Finished {
            failed: outcome == Outcome::Failed,
            broken: false,
            requests: p.u_requests,
            age: gyre_core::event::msec_diff(now, p.u_created).max(0) as u64,
            response_keepalive: true,
            body_sent: p.sent == p.req.len(),
            exiting: core.is_exiting(),
        };
        if keepalive::may_cache(&kc, &f) {
            core.del_timer(Ev::write(u));
            if keepalive::park(core, &cache, addr, u, kc.timeout).is_ok() {
                env.worker
                    .kept
                    .borrow_mut()
                    .insert(u, (p.u_requests, p.u_created));
            }
            return disabled;
        }
    }
    core.close(u);
    disabled
}

/// Whether another peer may be tried (nginx's `ngx_http_upstream_next`
/// conditions besides the failure type).
pub(super) fn can_retry(core: &Core, _env: &Env<'_, '_>, r: &HttpRequest, p: &Proxy) -> bool {
    let conf = &p.conf;
    if conf.next_upstream & ft::OFF != 0 || p.body_taken {
        // A streamed body cannot be sent again.
        return false;
    }
    let tries = p.pr.as_ref().map_or(0, |pr| pr.tries());
    if tries <= 1 {
        return false;
    }
    if conf.next_upstream_tries != 0 && p.attempts >= conf.next_upstream_tries {
        return false;
    }
    if conf.next_upstream_timeout != 0
        && gyre_core::event::msec_diff(core.now(), p.first) >= conf.next_upstream_timeout as i64
    {
        return false;
    }
    if p.request_sent
        && !is_idempotent(if r.st.as_get {
            "GET"
        } else {
            r.st.req.method()
        })
        && conf.next_upstream & ft::NON_IDEMPOTENT == 0
    {
        return false;
    }
    true
}

/// An attempt failed with `ftype` (nginx's `ngx_http_upstream_next`): log,
/// free the peer as failed, then another peer or the error status.
pub(super) fn fail(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
    ftype: u32,
    action: &'static str,
    msg: &str,
) -> Turn {
    log_line(env, r, p, ERROR, action, msg);
    let status = match ftype {
        ft::TIMEOUT => 504,
        _ => 502,
    };
    r.st.upstream.failed(core.now(), status);
    if p.cached && ftype == ft::ERROR && !p.stale_retry && p.buf.is_empty() && !p.body_taken {
        // A cached connection the upstream had closed: once more on a new
        // connection, not counted against the peer.
        p.stale_retry = true;
        if let Some(pr) = p.pr.as_mut() {
            pr.cached_connection_failed();
        }
        close_upstream(core, env, p, Outcome::Ok, false);
        p.st = St::Connect;
        return Turn::Again;
    }
    let retry = p.conf.next_upstream & ftype != 0 && can_retry(core, env, r, p);
    if close_upstream(core, env, p, Outcome::Failed, false) {
        log_line(
            env,
            r,
            p,
            WARN,
            action,
            "upstream server temporarily disabled",
        );
    }
    if retry {
        p.st = St::Connect;
        return Turn::Again;
    }
    Turn::End(Flow::Error(status))
}
