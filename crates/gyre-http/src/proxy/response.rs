//! The upstream's response for a proxied request (nginx's
//! `ngx_http_upstream_process_header` and the body relay of
//! `ngx_http_upstream_process_non_buffered_request` / the event pipe): the
//! head read into `proxy_buffer_size` and parsed, the next-upstream and
//! intercept decisions on its status, the head relayed with nginx's header
//! rules, then the body re-framed for the client, read only while the
//! client's pending output stays under the buffers.

use std::io;

use gyre_core::errlog::ERROR;
use gyre_core::event::Core;
use gyre_core::sys_error_text;

use super::conf::{ft, ign, ProxyConf};
use crate::conn::StreamFraming;
use crate::request::HttpRequest;
use crate::response::{Response, Text};
use crate::upstream::http_response::{
    parse_head_into, BodyReader, Framing, HeadOptions, Parsed, ResponseHead, NO_VALID_HEADER,
    PREMATURE_CLOSE,
};
use crate::upstream::Outcome;

use super::handler::*;
use super::next::{can_retry, close_upstream, fail};

pub(super) fn read_header(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
) -> Turn {
    const READING: &str = "reading response header from upstream";
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
            READING,
            "upstream timed out (110: Connection timed out)",
        );
    }
    let limit = p.conf.buffer_size;
    // The head buffer keeps its length across requests (the state is
    // pooled): it is zeroed once, not before every read.
    if p.hbuf.len() < limit {
        p.hbuf.resize(limit, 0);
    }
    // Bounded: each pass reads bytes or stops.
    loop {
        // Not readable (no event since the last EAGAIN): the response is
        // not there yet; no recv just to hear EAGAIN.
        let readable = core.conn(u).is_some_and(|x| x.read.ready);
        if !readable && p.hlen == 0 {
            return Turn::Wait;
        }
        if p.hlen < limit && readable {
            let have = p.hlen;
            match core.recv(u, &mut p.hbuf[have..limit]) {
                Ok(0) => {
                    return fail(core, env, r, p, ft::ERROR, READING, PREMATURE_CLOSE);
                }
                Ok(n) => {
                    p.hlen = have + n;
                    r.st.upstream.received(n as u64);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if have == 0 {
                        return Turn::Wait;
                    }
                }
                Err(e) => {
                    let msg = format!("recv() failed ({})", sys_error_text(&e));
                    return fail(core, env, r, p, ft::ERROR, READING, &msg);
                }
            }
        }
        let o = HeadOptions {
            limit,
            skip_informational: false,
        };
        match parse_head_into(&p.hbuf[..p.hlen], &o, &mut p.head) {
            Parsed::Incomplete => {
                if core.conn(u).is_some_and(|x| x.read.ready) && p.hlen < limit {
                    continue;
                }
                return Turn::Wait;
            }
            Parsed::Invalid(msg) => {
                return fail(core, env, r, p, ft::INVALID_HEADER, READING, &msg);
            }
            Parsed::Http09 => {
                log_line(env, r, p, ERROR, READING, NO_VALID_HEADER);
                p.head.set_http09();
                return got_head(core, env, r, p, 0);
            }
            Parsed::Done(n) => return got_head(core, env, r, p, n),
        }
    }
}

pub(super) fn is_idempotent(method: &str) -> bool {
    !matches!(method, "POST" | "LOCK" | "PATCH")
}

pub(super) fn got_head(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
    n: usize,
) -> Turn {
    // Out of the state for the time of the call (`p` is needed beside
    // it), put back for the body (its buffers are kept for the next).
    let head = std::mem::take(&mut p.head);
    let t = relay_head(core, env, r, p, &head, n);
    p.head = head;
    t
}

fn relay_head(
    core: &mut Core,
    env: &mut Env<'_, '_>,
    r: &mut HttpRequest,
    p: &mut Proxy,
    head: &ResponseHead,
    n: usize,
) -> Turn {
    let now = core.now();
    r.st.upstream.header(now, head.status);
    let status = head.status;
    let conf = p.conf.clone();
    // proxy_next_upstream http_5xx / 403 / 404 / 429.
    let ftype = ft::of_status(status);
    if ftype != 0 && conf.next_upstream & ftype != 0 && can_retry(core, env, r, p) {
        let outcome = if matches!(status, 403 | 404 | 429) {
            Outcome::Ok
        } else {
            Outcome::Failed
        };
        close_upstream(core, env, p, outcome, false);
        p.st = St::Connect;
        return Turn::Again;
    }
    // proxy_intercept_errors: an error_page for the status takes over.
    if conf.intercept_errors
        && status >= 300
        && r.st
            .loc
            .error_page
            .iter()
            .any(|e| e.codes.contains(&status))
    {
        close_upstream(core, env, p, Outcome::Ok, false);
        return Turn::End(Flow::Error(status));
    }
    // X-Accel-Redirect: the upstream names what is served instead.
    if conf.ignore_headers & ign::X_ACCEL_REDIRECT == 0 {
        if let Some(to) = head.header("X-Accel-Redirect").filter(|v| !v.is_empty()) {
            let to = String::from_utf8_lossy(to).into_owned();
            close_upstream(core, env, p, Outcome::Ok, false);
            r.st.upstream.done(now);
            return Turn::End(Flow::Redirect(to));
        }
    }
    // X-Accel-Buffering: yes / no turns buffering on or off for this
    // response (nginx's `change_buffering` of the proxy module).
    let accel = (conf.ignore_headers & ign::X_ACCEL_BUFFERING == 0)
        .then(|| head.header("X-Accel-Buffering"))
        .flatten();
    p.unbuffered = match accel {
        Some(v) if v.eq_ignore_ascii_case(b"yes") => false,
        Some(v) if v.eq_ignore_ascii_case(b"no") => true,
        _ => !conf.buffering,
    };
    // What came after the head: the body's first bytes.
    p.buf.clear();
    p.buf
        .extend_from_slice(p.hbuf.get(n..p.hlen).unwrap_or(&[]));
    p.hlen = 0;
    let framing = head.framing(r.st.is_head());
    if env.worker.upstream_http {
        // Kept only when a `$upstream_http_NAME` can ask for them.
        r.st.upstream.set_headers(head.headers());
    }
    // The worker's response, reused (its header list keeps its capacity).
    let resp = &mut *env.resp;
    resp.reset(status);
    // nginx sends a proxied response's status line as the upstream did.
    resp.reason = Some(static_or_owned(head.reason(), REASONS));
    let rewritten = {
        let mut e = super::redirect::Eval {
            conf: env.cx.conf,
            matches: &mut *env.cx.matches,
            now: env.cx.now,
            unix_ms: env.cx.unix_ms,
        };
        copy_headers(&conf, head, resp, &mut e, r)
    };
    if rewritten {
        // nginx's header filter completes a Location proxy_redirect made.
        crate::phases::absolute_redirect(env.cx.conf, r, resp);
    }
    let client_framing = match framing {
        Framing::None => match head.content_length {
            Some(len) if !head.chunked => StreamFraming::Length(len),
            _ => StreamFraming::Length(0),
        },
        Framing::Length(len) => StreamFraming::Length(len),
        Framing::Chunked | Framing::UntilClose => {
            if r.st.req.version >= crate::Version::HTTP_11 {
                StreamFraming::Chunked
            } else {
                StreamFraming::UntilClose
            }
        }
    };
    // nginx passes a HEAD response's Content-Length; a bodiless one has none.
    let client_framing = if r.st.is_head() && head.content_length.is_none() {
        StreamFraming::UntilClose
    } else {
        client_framing
    };
    let mut date = [0u8; 40];
    let dlen = {
        let d = core.clock().http_date().as_bytes();
        let l = d.len().min(date.len());
        date[..l].copy_from_slice(&d[..l]);
        l
    };
    let date = std::str::from_utf8(&date[..dlen]).unwrap_or("");
    // An upstream's relative Location stays relative (nginx's header
    // filter only completes its own redirects).
    crate::phases::prepare(&mut env.cx, r, resp);
    let awaiting = env
        .cx
        .m
        .respond_head_framed(resp, client_framing, now, date)
        .unwrap_or(false);
    // Drop the texts now (the response is reused by the next request).
    resp.reset(0);
    (r.st.body_bytes_sent, r.st.bytes_sent) = env.cx.m.last_sent();
    p.reader = Some(BodyReader::new(framing));
    let upgrade = status == 101 && r.st.req.header("Upgrade").is_some();
    if upgrade {
        // nginx's `u->upgrade`: from now on both connections carry the
        // upgraded protocol's bytes.
        r.st.upstream.done(now);
        p.down_sent = 0;
        p.up.clear();
        p.up_sent = 0;
        env.cx.m.take_input(&mut p.up);
        if r.st.loc.tcp_nodelay {
            // nginx's ngx_http_upstream_upgrade: both sides, for the
            // upgraded protocol's small messages.
            super::peer::set_nodelay(core, env.client);
            if let Some(u) = p.u {
                super::peer::set_nodelay(core, u);
            }
        }
        p.st = St::Tunnel;
        return Turn::WaitProgress;
    }
    if !awaiting {
        // HEAD, a bodiless status or an empty body: the response is out.
        let keep = p.reader.as_ref().is_some_and(|b| b.keepalive(head)) && p.buf.is_empty();
        close_upstream(core, env, p, Outcome::Ok, keep);
        return Turn::End(Flow::Done);
    }
    p.st = St::Body;
    Turn::Again
}

/// The upstream's headers nginx passes to the client, in order:
/// hop-by-hop and hidden ones dropped, the ones the header filter writes
/// itself (type, length, dates, location) into their places. Strings are
/// made only for what is passed (common names and values are static).
/// Returns true when `proxy_redirect` rewrote the Location.
pub(super) fn copy_headers(
    conf: &ProxyConf,
    head: &ResponseHead,
    resp: &mut Response,
    e: &mut super::redirect::Eval<'_>,
    r: &mut HttpRequest,
) -> bool {
    let mut rewritten = false;
    let redirect = conf.redirect.active();
    let cookie = conf.cookie.active();
    for (n, v) in head.headers() {
        let known = Known::of(n);
        if known == Known::Framing
            || conf
                .hide
                .iter()
                .any(|x| x.as_bytes().eq_ignore_ascii_case(n))
        {
            continue;
        }
        // Passed Server / Date (proxy_pass_header): nginx then sends no
        // own. proxy_redirect on Location and Refresh, proxy_cookie_* on
        // Set-Cookie (nginx's rewrite handlers of those headers).
        let new = match known {
            Known::Server => {
                resp.foreign_server = true;
                None
            }
            Known::Date => {
                resp.foreign_date = true;
                None
            }
            Known::Location if redirect => {
                let v = conf.redirect.rewrite_location(v, e, r);
                rewritten |= v.is_some();
                v
            }
            Known::Refresh if redirect => conf.redirect.rewrite_refresh(v, e, r),
            Known::SetCookie if cookie => conf.cookie.rewrite(v, e, r),
            _ => None,
        };
        let value = match new {
            Some(v) => Text::Owned(v),
            None => static_or_owned(v, VALUES),
        };
        match known {
            Known::ContentType => resp.content_type = Some(value),
            Known::LastModified => resp.last_modified = Some(value),
            // Made absolute by the header filter ([`absolute_redirect`]);
            // one left as it came keeps its place among the others.
            Known::Location if value.starts_with(b"/") && r.st.loc.absolute_redirect => {
                resp.location = Some(value)
            }
            _ => resp.headers.push((static_or_owned(n, NAMES), value)),
        }
    }
    rewritten
}

/// The upstream headers the proxy treats apart, told by one look at the
/// name (its length, then one comparison).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    /// Content-Length, Connection, Keep-Alive, Transfer-Encoding: the
    /// client's framing is gyre's own.
    Framing,
    Server,
    Date,
    Location,
    Refresh,
    SetCookie,
    ContentType,
    LastModified,
    Other,
}

impl Known {
    fn of(b: &[u8]) -> Known {
        let is = |s: &str| lower_eq(b, s.as_bytes());
        match b.len() {
            4 if is("date") => Known::Date,
            6 if is("server") => Known::Server,
            7 if is("refresh") => Known::Refresh,
            8 if is("location") => Known::Location,
            10 if is("connection") || is("keep-alive") => Known::Framing,
            10 if is("set-cookie") => Known::SetCookie,
            12 if is("content-type") => Known::ContentType,
            13 if is("last-modified") => Known::LastModified,
            14 if is("content-length") => Known::Framing,
            17 if is("transfer-encoding") => Known::Framing,
            _ => Known::Other,
        }
    }
}

/// `name` (a header name as the parser takes it: no byte at or below
/// space) is `lower` (lower-case letters, digits and `-`) in any case:
/// with those bytes, setting bit 5 of `name`'s is what lower-casing does,
/// so eight are compared at once.
fn lower_eq(name: &[u8], lower: &[u8]) -> bool {
    const CASE: u64 = 0x2020_2020_2020_2020;
    if name.len() != lower.len() {
        return false;
    }
    let mut a = name.chunks_exact(8);
    let mut b = lower.chunks_exact(8);
    for (x, y) in a.by_ref().zip(b.by_ref()) {
        let x = u64::from_le_bytes(x.try_into().unwrap_or([0; 8]));
        let y = u64::from_le_bytes(y.try_into().unwrap_or([0; 8]));
        if x | CASE != y {
            return false;
        }
    }
    a.remainder()
        .iter()
        .zip(b.remainder())
        .all(|(x, y)| x | 0x20 == *y)
}

/// Status texts met often enough not to copy.
const REASONS: &[&str] = &[
    "OK",
    "Not Found",
    "Found",
    "Moved Permanently",
    "Not Modified",
];

/// Header names passed often, spelled as servers usually send them (a
/// name is passed as it came, so only an exact match is static).
const NAMES: &[&str] = &[
    "ETag",
    "Accept-Ranges",
    "Cache-Control",
    "Expires",
    "Vary",
    "Set-Cookie",
    "Content-Encoding",
    "X-Powered-By",
    "Access-Control-Allow-Origin",
    "Pragma",
    "Age",
    "Link",
];

/// Values passed often.
const VALUES: &[&str] = &[
    "bytes",
    "text/plain",
    "text/html",
    "text/html; charset=utf-8",
    "text/html; charset=UTF-8",
    "application/json",
    "application/octet-stream",
    "text/css",
    "application/javascript",
    "image/png",
    "image/jpeg",
    "gzip",
    "Accept-Encoding",
    "no-cache",
    "*",
];

/// `s` as static text when it is one of `known`, else a copy.
fn static_or_owned(s: &[u8], known: &[&'static str]) -> Text {
    match known.iter().find(|k| k.as_bytes() == s) {
        Some(k) => Text::Static(k),
        None => Text::Owned(s.to_vec()),
    }
}
