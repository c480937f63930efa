//! Reaching the upstream (nginx's `ngx_http_upstream_connect` and
//! `ngx_http_upstream_send_request`): a peer chosen by the balancer, a
//! cached keep-alive connection or a new one, the connect's outcome, then
//! the request (and a streamed body, `proxy_request_buffering off`) written
//! under `proxy_send_timeout`.

use std::io;
use std::os::fd::AsFd;

use gyre_core::conn::ConnId;
use gyre_core::errlog::ERROR;
use gyre_core::event::{ConnectOptions, Core, Ev};
use gyre_core::sys_error_text;

use super::conf::ft;
use super::handler::{log_line, Env, Flow, Proxy, Relay, St, Turn};
use super::next::{close_upstream, fail};
use crate::request::HttpRequest;
use crate::upstream::keepalive;
use crate::upstream::{Outcome, Upstream};

/// How many turns a request waits for a cached connection to come back
/// before it connects (a turn is microseconds: no wait blocks meanwhile).
const DEFERRALS: u8 = 6;

pub(super) fn connect(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    let now = core.now();
    if p.pr.is_none() && p.deferred < DEFERRALS && cache_empty(env, p) {
        // Every cached connection is in use, and requests of this turn may
        // still give theirs back (the responses that came with this one),
        // or the next poll bring them: choosing after those (this turn's
        // posted events, then the next turn's, whose wait does not block)
        // takes one of their connections instead of connecting a new one
        // that the full cache would close again (with more clients than
        // `keepalive`, a fifth of a loaded worker's requests connected).
        p.deferred += 1;
        core.post(Ev::write(env.client));
        return Turn::Wait;
    }
    let secs = env.worker.secs(core);
    let mut ups = env.worker.ups.borrow_mut();
    // The request's own upstream (proxy_pass with variables naming an
    // address) or the worker's.
    let up: &mut Upstream = match p.own.as_deref_mut() {
        Some(u) => u,
        None => match ups.get_mut(p.conf.upstream) {
            Some(u) => u,
            None => return Turn::End(Flow::Error(500)),
        },
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
    let nodelay = r.st.loc.tcp_nodelay;
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
    p.hlen = 0;
    p.reader = None;
    p.sent = 0;
    p.file_sent = 0;
    if let Some(cache) = cache.as_ref().filter(|_| !p.stale_retry) {
        if let Some(k) = keepalive::unpark(core, cache, &addr) {
            let u = k.conn;
            core.set_handler(u, Box::new(Relay { client: env.client }));
            if nodelay && p.body_left > 0 {
                set_nodelay(core, u);
            }
            p.u = Some(u);
            p.cached = true;
            p.u_requests = k.requests + 1;
            p.u_created = k.created;
            r.st.upstream.connected(now);
            p.st = St::SendRequest;
            return Turn::Again;
        }
    }
    let mut o = ConnectOptions::new(addr, p.conf.connect_timeout);
    if p.conf.https {
        o.tls = super::ssl::connect_tls(env, r, &p.conf, now);
    }
    // As nginx: TCP_NODELAY on an upstream connection only before a TLS
    // handshake with session reuse, for a body streamed as it arrives
    // (`proxy_request_buffering off`), and for a tunnel (`tunnel.rs`); a
    // request written whole needs none (nothing unacknowledged is in
    // flight when it goes), and the setsockopt is saved.
    let reuse = o.tls.is_some() && p.conf.tls.as_ref().is_some_and(|t| t.session_reuse);
    o.nodelay = nodelay && (reuse || p.body_left > 0);
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

/// Whether the request's upstream has a keep-alive cache and nothing is
/// in it.
fn cache_empty(env: &Env<'_, '_>, p: &Proxy) -> bool {
    p.own.is_none()
        && env
            .worker
            .caches
            .get(p.conf.upstream)
            .and_then(|c| c.as_ref())
            .is_some_and(|c| c.borrow().is_empty())
}

/// Sets TCP_NODELAY on `c` (`tcp_nodelay on`); not fatal, as in nginx's
/// callers the connection works without it.
pub(super) fn set_nodelay(core: &Core, c: gyre_core::conn::ConnId) {
    if let Some(fd) = core.fd(c) {
        let _ = gyre_core::sys::socket::set_nodelay(fd, true);
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
            super::ssl::handshake_error(&e)
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
                // The head (and a body in memory) is out; a body in a
                // temporary file follows from there.
                let Some(f) = body_file(r, p).filter(|f| p.file_sent < f.len()) else {
                    break;
                };
                let mut off = p.file_sent;
                let left = usize::try_from(f.len() - off).unwrap_or(usize::MAX);
                match core.sendfile(u, f.file().as_fd(), &mut off, left) {
                    Ok(_) => {
                        p.file_sent = off;
                        p.request_sent = true;
                        continue;
                    }
                    Err(e) => return send_failed(core, env, r, p, u, e),
                }
            }
            match pull_body(core, env, p) {
                Pull::Got => continue,
                Pull::Done => break,
                Pull::Wait => {
                    // A cached connection's idle timer is not this wait's.
                    core.del_timer(Ev::read(u));
                    return Turn::Wait;
                }
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
            Err(e) => return send_failed(core, env, r, p, u, e),
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

/// The temporary file the request body went to, when it is passed on.
fn body_file<'r>(r: &'r HttpRequest, p: &Proxy) -> Option<&'r crate::temp_file::TempFile> {
    if !p.conf.pass_request_body || matches!(r.st.req.body, crate::body::BodyKind::None) {
        return None;
    }
    r.st.body.as_ref()?.file.as_ref()
}

/// A send to the upstream that did not go: EAGAIN waits for the write
/// event, any other error fails the attempt (nginx's `send() failed`).
fn send_failed(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
    u: ConnId,
    e: io::Error,
) -> Turn {
    let msg = if e.kind() != io::ErrorKind::WouldBlock {
        format!("send() failed ({})", sys_error_text(&e))
    } else if core.handle_write_event(u).is_err() {
        "epoll_ctl() failed".to_string()
    } else {
        core.add_timer(Ev::write(u), p.conf.send_timeout);
        // A cached connection's idle timer is not this wait's.
        core.del_timer(Ev::read(u));
        return Turn::Wait;
    };
    fail(
        core,
        env,
        r,
        p,
        ft::ERROR,
        "sending request to upstream",
        &msg,
    )
}
