//! The end of an attempt (nginx's `ngx_http_upstream_next` and the peer
//! side of `ngx_http_upstream_finalize_request`): the peer freed with its
//! outcome, the connection parked in the keep-alive cache or closed, and
//! on a failure another peer or nginx's 502 / 504.

use gyre_core::errlog::{ERROR, WARN};
use gyre_core::event::{Core, Ev};

use super::conf::ft;
use super::handler::{log_line, with_upstream, Env, Flow, Proxy, St, Turn};
use super::response::is_idempotent;
use crate::request::HttpRequest;
use crate::upstream::keepalive::{self, Finished, Kept};
use crate::upstream::Outcome;

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
    if let Some(pr) = p.pr.as_mut().filter(|pr| pr.current().is_some()) {
        disabled = with_upstream(env.worker, p.conf.upstream, &mut p.own, |up| {
            pr.free(up, outcome, secs).disabled
        })
        .unwrap_or(false);
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
            let k = Kept {
                conn: u,
                requests: p.u_requests,
                created: p.u_created,
            };
            // A failed park closed the connection.
            let _ = keepalive::park(core, &cache, addr, k, kc.timeout);
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
    if p.cached
        && ftype == ft::ERROR
        && !p.stale_retry
        && p.buf.is_empty()
        && p.hlen == 0
        && !p.body_taken
    {
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
