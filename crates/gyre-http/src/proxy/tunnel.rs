//! An upgraded connection after a 101 (nginx's
//! `ngx_http_upstream_upgrade` / `_process_upgraded`): the client and the
//! upstream exchange raw bytes until both ended, an error, or the idle
//! timeout.

use std::io;

use gyre_core::errlog::ERROR;
use gyre_core::event::{Core, Ev};
use gyre_core::sys_error_text;

use crate::request::HttpRequest;
use crate::upstream::Outcome;

use super::handler::*;

/// nginx's `ngx_http_upstream_process_upgraded`: bytes both ways through
/// one buffer per direction (`proxy_buffer_size` each), a side read only
/// while its buffer is empty, end of stream passed on as a half-close; the
/// tunnel ends when both directions ended, on an error, or after
/// `proxy_read_timeout` without traffic.
pub(super) fn tunnel(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    const PROXYING: &str = "proxying upgraded connection";
    let (Some(u), c) = (p.u, env.client) else {
        return Turn::End(Flow::Done);
    };
    if p.timed_out.take().is_some() {
        log_line(
            env,
            r,
            p,
            ERROR,
            PROXYING,
            "upstream timed out (110: Connection timed out)",
        );
        return end_tunnel(core, env, p);
    }
    // The 101 head (queued on the machine) goes first.
    if env.cx.m.has_output() {
        return Turn::Wait;
    }
    let size = p.conf.buffer_size;
    let mut traffic = false;
    // Bounded: each pass moves bytes or stops.
    for _ in 0..64 {
        let mut moved = false;
        // Client → upstream.
        if p.up_sent == p.up.len() && !p.client_eof {
            p.up.resize(size, 0);
            match core.recv(c, &mut p.up) {
                Ok(0) => {
                    p.up.clear();
                    p.client_eof = true;
                    let _ = core.shutdown_write(u);
                    moved = true;
                }
                Ok(n) => {
                    p.up.truncate(n);
                    p.up_sent = 0;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => p.up.clear(),
                Err(_) => return end_tunnel(core, env, p),
            }
        }
        if p.up_sent < p.up.len() {
            match core.send(u, &p.up[p.up_sent..]) {
                Ok(n) => {
                    p.up_sent += n;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    let msg = format!("send() failed ({})", sys_error_text(&e));
                    log_line(env, r, p, ERROR, PROXYING, &msg);
                    return end_tunnel(core, env, p);
                }
            }
            if p.up_sent == p.up.len() {
                p.up.clear();
                p.up_sent = 0;
            }
        }
        // Upstream → client.
        if p.down_sent == p.buf.len() && !p.upstream_eof {
            p.buf.resize(size, 0);
            match core.recv(u, &mut p.buf) {
                Ok(0) => {
                    p.buf.clear();
                    p.upstream_eof = true;
                    let _ = core.shutdown_write(c);
                    moved = true;
                }
                Ok(n) => {
                    p.buf.truncate(n);
                    p.down_sent = 0;
                    r.st.upstream.received(n as u64);
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => p.buf.clear(),
                Err(e) => {
                    let msg = format!("recv() failed ({})", sys_error_text(&e));
                    log_line(env, r, p, ERROR, PROXYING, &msg);
                    return end_tunnel(core, env, p);
                }
            }
        }
        if p.down_sent < p.buf.len() {
            match core.send(c, &p.buf[p.down_sent..]) {
                Ok(n) => {
                    p.down_sent += n;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return end_tunnel(core, env, p),
            }
            if p.down_sent == p.buf.len() {
                p.buf.clear();
                p.down_sent = 0;
            }
        }
        if p.client_eof && p.upstream_eof && p.up.is_empty() && p.buf.is_empty() {
            return end_tunnel(core, env, p);
        }
        if !moved {
            break;
        }
        traffic = true;
    }
    for (conn, read) in [(c, !p.client_eof), (u, !p.upstream_eof)] {
        let ok = if read {
            core.handle_read_event(conn)
        } else {
            core.disable_read(conn)
        };
        if ok.and_then(|_| core.handle_write_event(conn)).is_err() {
            return end_tunnel(core, env, p);
        }
    }
    if traffic || !core.timer_set(Ev::read(u)) {
        core.add_timer(Ev::read(u), p.conf.read_timeout);
    }
    Turn::Wait
}

/// The tunnel is over: both connections close.
pub(super) fn end_tunnel(core: &mut Core, env: &mut Env<'_, '_>, p: &mut Proxy) -> Turn {
    if let Some(u) = p.u.take() {
        core.close(u);
    }
    if let Some(pr) = p.pr.as_mut() {
        let secs = env.worker.secs(core);
        super::handler::with_upstream(env.worker, p.conf.upstream, &mut p.own, |up| {
            pr.free(up, Outcome::Ok, secs);
        });
    }
    // The client's connection cannot carry HTTP again.
    env.cx.m.on_eof(core.now());
    Turn::End(Flow::Done)
}
