//! The content handlers of files and stub_status (nginx's
//! `ngx_http_static_module`, `ngx_http_index_module`,
//! `ngx_http_stub_status_module`), and `limit_rate` pacing.
//!
//! A file answer is a [`Response`] whose body is either shared bytes of
//! the open-file cache or a file region the glue sends with sendfile. With
//! `limit_rate` the head is queued first and the body follows in pieces:
//! the handler returns "again" with a wake-up time, as nginx's write
//! filter delays the write event, using nginx's allowance
//! `rate * (elapsed seconds + 1) - (sent - limit_rate_after)`.

use std::path::PathBuf;
use std::rc::Rc;

use gyre_core::errlog::ERROR;

use crate::conf::IfModifiedSince;
use crate::log_error;
use crate::phases::{Ctx, Step};
use crate::range::{self, RangeDecision};
use crate::request::{Content, HttpRequest, Wake};
use crate::response::{Body, Response};
use crate::static_file::{FileInfo, Open};

/// A body being paced by `limit_rate`.
#[derive(Debug)]
pub struct Paced {
    /// The whole remaining body: shared bytes or a file region.
    pub body: Body,
    /// Body bytes queued so far.
    pub sent: u64,
}

/// The file for URI `uri` in the request's location: `root` + URI, or
/// `alias` (with captures when it has variables) + the URI after the
/// location's prefix.
pub fn map_path(r: &mut HttpRequest, uri: &[u8], out: &mut PathBuf, cx: &mut Ctx<'_>) {
    let loc = r.st.loc.clone();
    if let Some(cv) = &loc.alias_cv {
        cx.scratch.clear();
        {
            let env = r.st.env(cx.conf, None, cx.now, cx.unix_ms);
            cv.eval(&cx.conf.vars, &mut r.vars, &env, cx.scratch);
        }
        let p = out.as_mut_os_string();
        p.clear();
        p.push(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(cx.scratch));
        // A regex location's alias is the whole path (nginx).
        return;
    }
    crate::static_file::map_uri_into(&loc, &loc.name, uri, out);
}

/// The static content handler.
pub fn serve(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response) -> Step {
    // nginx's static module lets POST look the file up (a missing one is
    // a 404, an existing one a 405); other methods are refused at once.
    if !r.st.is_get_or_head() && r.st.req.method() != "POST" {
        return Step::Error(405);
    }
    let mut fpath = std::mem::take(cx.fpath);
    let uri = std::mem::take(&mut r.st.uri);
    map_path(r, &uri, &mut fpath, cx);
    let step = serve_path(cx, r, &uri, &fpath, out);
    // An index redirect set a new URI; otherwise the URI is given back.
    if r.st.uri.is_empty() {
        r.st.uri = uri;
    }
    *cx.fpath = fpath;
    step
}

fn serve_path(
    cx: &mut Ctx<'_>,
    r: &mut HttpRequest,
    path: &[u8],
    fpath: &std::path::Path,
    out: &mut Response,
) -> Step {
    let loc = r.st.loc.clone();
    let now = cx.now;
    if loc.gzip.is_some() {
        if let Some(step) = crate::gzip_static::serve(cx, r, path, fpath, out) {
            return step;
        }
    }
    let opened = cx.files.open(fpath, now, loc.open_file_cache);
    if path.ends_with(b"/") {
        if !matches!(opened, Open::Dir) {
            // A device or FIFO is no directory: its index is not found.
            let opened = match opened {
                Open::NotRegular => Open::NotFound(20),
                o => o,
            };
            // nginx's index module: EACCES is `"…" is forbidden`, a
            // symlink error a silent 403.
            if let (Open::Denied(13), Some(idx)) = (&opened, loc.index.first()) {
                gyre_core::log_ctx!(
                    ERROR,
                    &log_error::req(cx.conf, r),
                    "\"{}\" is forbidden ({})",
                    fpath.join(idx).display(),
                    os_error(13)
                );
            }
            if let (Open::Error(code), Some(idx)) = (&opened, loc.index.first()) {
                gyre_core::log_ctx!(
                    crit,
                    &log_error::req(cx.conf, r),
                    "open() \"{}\" failed ({})",
                    fpath.join(idx).display(),
                    os_error(*code)
                );
            }
            if let (&Open::NotFound(code), Some(idx), true) =
                (&opened, loc.index.first(), loc.log_not_found)
            {
                // nginx's index module names the first index file.
                gyre_core::log_ctx!(
                    ERROR,
                    &log_error::req(cx.conf, r),
                    "\"{}\" is not found ({})",
                    fpath.join(idx).display(),
                    os_error(code)
                );
            }
            return Step::Error(match opened {
                Open::Denied(_) => 403,
                Open::Error(_) => 500,
                _ => 404,
            });
        }
        // The index module: the first index file that exists is served
        // by an internal redirect to its URI (which may pick another
        // location).
        for idx in &loc.index {
            let candidate = fpath.join(idx);
            match cx.files.open(&candidate, now, loc.open_file_cache) {
                Open::NotFound(_) => continue,
                // nginx's index module: `"…" is forbidden` at [error]
                // (a symlink error is a silent 403). It only stats the
                // file: one it may see but not read is served, and the
                // static handler's open() then fails.
                Open::Denied(40 | 31) => return Step::Error(403),
                Open::Denied(_) if std::fs::metadata(&candidate).is_ok() => {}
                Open::Denied(_) => {
                    gyre_core::log_ctx!(
                        ERROR,
                        &log_error::req(cx.conf, r),
                        "\"{}\" is forbidden ({})",
                        candidate.display(),
                        os_error(13)
                    );
                    return Step::Error(403);
                }
                _ => {}
            }
            let mut target = path.to_vec();
            target.extend_from_slice(idx.as_bytes());
            return match crate::phases::internal_redirect(cx, r, &target) {
                Ok(i) => Step::Jump(i),
                Err(code) => Step::Error(code),
            };
        }
        // The autoindex module, after the index module declined.
        if let Some(ai) = loc.autoindex {
            return match crate::autoindex::render(fpath, path, ai) {
                Ok((body, ty)) => {
                    out.reset(200);
                    out.content_type = Some(ty.into());
                    if r.st.is_head() {
                        out.content_length = Some(body.len() as u64);
                    } else {
                        out.body = Body::Bytes(body);
                    }
                    Step::Respond
                }
                Err(e) => {
                    gyre_core::log_ctx!(
                        ERROR,
                        &log_error::req(cx.conf, r),
                        "opendir() \"{}\" failed ({e})",
                        fpath.display()
                    );
                    Step::Error(500)
                }
            };
        }
        gyre_core::log_ctx!(
            ERROR,
            &log_error::req(cx.conf, r),
            "directory index of \"{}\" is forbidden",
            fpath.display()
        );
        return Step::Error(403);
    }
    match opened {
        Open::File(_) if !r.st.is_get_or_head() => Step::Error(405),
        Open::File(info) => file_response(cx, r, info, path, out),
        Open::Dir => {
            out.set_error(301);
            // nginx escapes the URI (a Latin-1 name as `%E9`), not the
            // arguments.
            let mut loc_hdr = Vec::with_capacity(path.len() + 1);
            crate::uri::escape_uri(path, &mut loc_hdr);
            loc_hdr.push(b'/');
            if !r.st.args.is_empty() {
                loc_hdr.push(b'?');
                loc_hdr.extend_from_slice(&r.st.args);
            }
            out.location = Some(loc_hdr.into());
            Step::Respond
        }
        Open::NotFound(_) if !loc.log_not_found => Step::Error(404),
        Open::NotFound(code) => {
            gyre_core::log_ctx!(
                ERROR,
                &log_error::req(cx.conf, r),
                "open() \"{}\" failed ({})",
                fpath.display(),
                os_error(code)
            );
            Step::Error(404)
        }
        // nginx's static handler: EACCES is the client's problem
        // ([error], 403), a non-regular file and any other errno the
        // server's ([crit]).
        Open::Denied(code) => {
            gyre_core::log_ctx!(
                ERROR,
                &log_error::req(cx.conf, r),
                "open() \"{}\" failed ({})",
                fpath.display(),
                os_error(code)
            );
            Step::Error(403)
        }
        Open::NotRegular => {
            gyre_core::log_ctx!(
                crit,
                &log_error::req(cx.conf, r),
                "\"{}\" is not a regular file",
                fpath.display()
            );
            Step::Error(404)
        }
        Open::Error(code) => {
            gyre_core::log_ctx!(
                crit,
                &log_error::req(cx.conf, r),
                "open() \"{}\" failed ({})",
                fpath.display(),
                os_error(code)
            );
            Step::Error(500)
        }
    }
}

/// nginx's `(2: No such file or directory)` for an errno (formatted only
/// when the line is written).
fn os_error(code: i32) -> impl std::fmt::Display {
    struct E(i32);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let text = gyre_core::sys_error_text(&std::io::Error::from_raw_os_error(self.0));
            f.write_str(&text)
        }
    }
    E(code)
}

fn file_response(
    cx: &mut Ctx<'_>,
    r: &mut HttpRequest,
    info: Rc<FileInfo>,
    uri_path: &[u8],
    resp: &mut Response,
) -> Step {
    let loc = r.st.loc.clone();
    let req = &r.st.req;
    let ctype = crate::mime::for_path_cached(
        &cx.conf.types,
        &mut cx.files.mime,
        uri_path,
        &loc.default_type,
    );
    // nginx's not-modified filter: every condition sent must hold.
    let (ims, inm) = (req.if_modified_since(), req.if_none_match());
    let not_modified = (ims.is_some() || inm.is_some())
        && ims.is_none_or(|t| match loc.if_modified_since {
            IfModifiedSince::Off => false,
            IfModifiedSince::Exact => t == info.mtime,
            IfModifiedSince::Before => t >= info.mtime,
        })
        // `*` matches even without an ETag (nginx's ngx_http_test_if_match).
        && inm.is_none_or(|h| h.trim_ascii() == b"*" || (loc.etag && etag_matches(h, &info.etag)));
    resp.reset(200);
    resp.content_type = Some(ctype.into());
    resp.last_modified = Some((&info.last_modified).into());
    if loc.etag {
        resp.headers.push(("ETag".into(), (&info.etag).into()));
    }
    if not_modified && !r.st.error_page {
        // The not-modified filter drops the type, as nginx's does.
        resp.status = 304;
        resp.content_type = None;
        return Step::Respond;
    }
    // nginx's range filter sees no length on a response the gzip filter
    // takes, and sends it whole; the gzip filter runs first, on the 200,
    // so a partial answer still says Vary.
    let mut vary = false;
    let range = req.range().filter(|_| {
        loc.gzip.as_ref().is_none_or(|g| {
            resp.content_length = Some(info.size);
            vary = crate::gzip::qualifies(g, resp);
            let gz = vary && crate::gzip::gzip_ok(g, r, resp, cx.unix_ms / 1000);
            resp.content_length = None;
            !gz
        })
    });
    let decision = range.map(|v| range::decide(v, info.size));
    if vary {
        r.st.gzip_vary = true;
    }
    let (start, len) = match decision {
        Some(RangeDecision::Partial { start, end }) if !r.st.error_page => {
            resp.status = 206;
            if let Some(cr) = (RangeDecision::Partial { start, end }).content_range(info.size) {
                resp.headers.push(("Content-Range".into(), cr.into()));
            }
            (start, end - start)
        }
        Some(RangeDecision::NotSatisfiable) if !r.st.error_page => {
            resp.set_error(416);
            resp.headers.push((
                "Content-Range".into(),
                format!("bytes */{}", info.size).into(),
            ));
            return Step::Respond;
        }
        _ => (0, info.size),
    };
    resp.headers.push(("Accept-Ranges".into(), "bytes".into()));
    if r.st.is_head() {
        resp.content_length = Some(len);
        return Step::Respond;
    }
    resp.body = match &info.content {
        Some(bytes) => Body::Shared {
            data: bytes.clone(),
            start: (start as usize).min(bytes.len()),
            end: ((start + len) as usize).min(bytes.len()),
        },
        None => {
            let token = cx.open.len() as u64 + 1;
            cx.open.push((token, info));
            Body::File {
                token,
                offset: start,
                len,
            }
        }
    };
    if loc.limit_rate > 0 && len > 0 && !r.st.error_page {
        // A body the gzip filter takes is paced there, compressed.
        let gzipped = loc.gzip.as_ref().is_some_and(|g| {
            crate::gzip::qualifies(g, resp) && crate::gzip::gzip_ok(g, r, resp, cx.unix_ms / 1000)
        });
        if !gzipped {
            return start_paced(cx, r, resp);
        }
    }
    Step::Respond
}

/// Queues the head of a paced response, then its first piece.
fn start_paced(cx: &mut Ctx<'_>, r: &mut HttpRequest, resp: &mut Response) -> Step {
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    resp.content_length = Some(body.len());
    crate::phases::prepare(cx, r, resp);
    match cx.m.respond_head(resp, cx.now, cx.date) {
        Ok(true) => pace(cx, r, Paced { body, sent: 0 }),
        _ => Step::Done,
    }
}

/// Queues what the rate allows now; "again" with the time the next piece
/// is due, "done" once the body is queued.
pub fn pace(cx: &mut Ctx<'_>, r: &mut HttpRequest, mut p: Paced) -> Step {
    let loc = &r.st.loc;
    let rate = loc.limit_rate.max(1);
    let total = p.body.len();
    let elapsed = cx.now.wrapping_sub(r.st.start) / 1000;
    // Saturating: the rate and the threshold come from the configuration.
    let budget = rate
        .saturating_mul(elapsed + 1)
        .saturating_add(loc.limit_rate_after)
        .min(i64::MAX as u64);
    let allowed = budget as i64 - p.sent as i64;
    if allowed <= 0 {
        let delay = ((-allowed) as u64).saturating_mul(1000) / rate + 1;
        r.wake = Some(Wake::At(cx.now.wrapping_add(delay)));
        r.content = Content::Paced(p);
        return Step::Again;
    }
    let n = (allowed as u64).min(total - p.sent);
    let piece = match &p.body {
        Body::File { token, offset, .. } => Body::File {
            token: *token,
            offset: offset + p.sent,
            len: n,
        },
        Body::Shared { data, start, .. } => Body::Shared {
            data: data.clone(),
            start: start + p.sent as usize,
            end: start + (p.sent + n) as usize,
        },
        other => other.clone(),
    };
    let _ = cx.m.send_body(&piece);
    p.sent += n;
    (r.st.body_bytes_sent, r.st.bytes_sent) = cx.m.last_sent();
    if p.sent >= total {
        let _ = cx.m.finish_body(cx.now);
        return Step::Done;
    }
    // The allowance is spent: wait for the output to drain, then for the
    // next share.
    r.wake = Some(Wake::Drained);
    r.content = Content::Paced(p);
    Step::Again
}

fn etag_matches(header: &[u8], etag: &str) -> bool {
    let h = String::from_utf8_lossy(header);
    h.trim() == "*"
        || h.split(',').any(|t| {
            let t = t.trim();
            t.strip_prefix("W/").unwrap_or(t) == etag
        })
}

/// stub_status's page.
pub fn stub_status(cx: &mut Ctx<'_>, r: &HttpRequest, resp: &mut Response) -> Step {
    if !r.st.is_get_or_head() {
        return Step::Error(405);
    }
    let snap = cx.zone.map(|z| z.stats().snapshot()).unwrap_or_default();
    resp.reset(200);
    resp.content_type = Some("text/plain".into());
    let body = crate::stub_status::render(&snap).into_bytes();
    if r.st.is_head() {
        resp.content_length = Some(body.len() as u64);
    } else {
        resp.body = Body::Bytes(body);
    }
    Step::Respond
}
