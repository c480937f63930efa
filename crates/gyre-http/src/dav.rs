//! `dav_methods PUT` (nginx's `ngx_http_dav_module`, its PUT method): the
//! request body is read into a temporary file (crate::request_body), which
//! is then renamed to the file the URI maps to: 201 Created with a
//! `Location` for a new file, 204 No Content for a replaced one.
//!
//! DELETE, MKCOL, COPY and MOVE are not implemented: `dav_methods` refuses
//! them at configuration time rather than accept methods it would answer
//! with 405.

use std::path::Path;

use gyre_core::conf::{ConfCtx, Directive};
use gyre_core::errlog::ERROR;

use crate::conf::{HttpConf, LocSettings};
use crate::log_error;
use crate::phases::{Ctx, Step};
use crate::request::HttpRequest;
use crate::request_body::{Post, Want};
use crate::response::Response;
use crate::temp_file::Keep;

/// The DAV directives of one level.
#[derive(Debug, Clone, Default)]
pub struct DavSet {
    /// `dav_methods`: `Some(true)` for PUT, `Some(false)` for `off`.
    pub put: Option<bool>,
    pub create_full_put_path: Option<bool>,
}

/// A location's DAV settings when PUT is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DavConf {
    /// `create_full_put_path` (off): make missing directories of the path.
    pub create_full_put_path: bool,
}

/// The settings from `levels` (outermost first); `None` unless PUT is on.
pub fn resolve(levels: &[&LocSettings]) -> Option<DavConf> {
    use crate::conf::pick;
    pick(levels, |s| s.dav.put)
        .unwrap_or(false)
        .then(|| DavConf {
            create_full_put_path: pick(levels, |s| s.dav.create_full_put_path).unwrap_or(false),
        })
}

/// `dav_methods off | method ...`.
pub fn set_methods(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let mut put = false;
    for a in &d.args {
        match a.as_str() {
            "off" if d.args.len() == 1 => {}
            "PUT" => put = true,
            "DELETE" | "MKCOL" | "COPY" | "MOVE" => {
                return Err(format!(
                    "\"dav_methods\" method \"{a}\" is not supported by gyre (only PUT)"
                ))
            }
            other => return Err(format!("invalid value \"{other}\"")),
        }
    }
    c.settings(cx)?.dav.put = Some(put);
    Ok(())
}

/// `create_full_put_path on|off`.
pub fn set_create_full_put_path(
    c: &mut HttpConf,
    d: &Directive,
    cx: &ConfCtx,
) -> Result<(), String> {
    let v = d.flag()?;
    c.settings(cx)?.dav.create_full_put_path = Some(v);
    Ok(())
}

/// The content handler for a PUT in a location with `dav_methods PUT`:
/// starts reading the body into a file (the request resumes in
/// [`put_body_read`]).
pub fn put(cx: &mut Ctx<'_>, r: &mut HttpRequest) -> Step {
    if r.st.uri.ends_with(b"/") {
        gyre_core::log_ctx!(
            ERROR,
            &log_error::req(cx.conf, r),
            "cannot PUT to a collection"
        );
        return Step::Error(409);
    }
    if r.st.req.header("Content-Range").is_some() {
        gyre_core::log_ctx!(
            ERROR,
            &log_error::req(cx.conf, r),
            "PUT with range is unsupported"
        );
        return Step::Error(501);
    }
    let want = Want {
        in_file: Some(Keep::Clean),
        group_access: true,
        log_file: false,
    };
    crate::request_body::start(cx, r, want, Post::DavPut)
}

/// The body is in its temporary file: rename it into place.
pub fn put_body_read(cx: &mut Ctx<'_>, r: &mut HttpRequest, out: &mut Response) -> Step {
    let Some(dav) = r.st.loc.dav else {
        return Step::Error(500);
    };
    let Some(file) = r.st.body.as_mut().and_then(|b| b.file.as_mut()) else {
        gyre_core::log_ctx!(
            ERROR,
            &log_error::req(cx.conf, r),
            "PUT request body must be in a file"
        );
        return Step::Error(500);
    };
    let temp = file.path().to_path_buf();
    let mut path = std::mem::take(cx.fpath);
    let uri = r.st.uri.clone();
    crate::static_handler::map_path(r, &uri, &mut path, cx);
    let status = match std::fs::metadata(&path) {
        Err(_) => 201,
        Ok(m) if m.is_dir() => {
            gyre_core::log_ctx!(
                ERROR,
                &log_error::req(cx.conf, r),
                "\"{}\" could not be created (21: Is a directory)",
                path.display()
            );
            *cx.fpath = path;
            return Step::Error(409);
        }
        Ok(_) => 204,
    };
    let renamed = rename(&temp, &path, dav.create_full_put_path);
    cx.files.forget(&path);
    *cx.fpath = path;
    if let Err(e) = renamed {
        gyre_core::log_ctx!(crit, &log_error::req(cx.conf, r), "{e}");
        return Step::Error(500);
    }
    if let Some(f) = r.st.body.as_mut().and_then(|b| b.file.as_mut()) {
        f.disown();
    }
    out.reset(status);
    if status == 201 {
        // nginx's ngx_http_dav_location: the URI escaped.
        let mut loc = Vec::with_capacity(uri.len());
        crate::uri::escape_uri(&uri, &mut loc);
        out.location = Some(loc.into());
        out.content_length = Some(0);
    }
    Step::Respond
}

/// nginx's `ngx_ext_rename_file` for a PUT: the file becomes 0600
/// (`dav_access`'s default), then is renamed; a missing directory is
/// made (0700) when `create_path`, and the rename tried again.
fn rename(from: &Path, to: &Path, create_path: bool) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let fail = |call: &str, e: &std::io::Error| {
        format!(
            "{call} \"{}\" to \"{}\" failed ({})",
            from.display(),
            to.display(),
            gyre_core::sys_error_text(e)
        )
    };
    if let Err(e) = std::fs::set_permissions(from, std::fs::Permissions::from_mode(0o600)) {
        return Err(format!(
            "chmod() \"{}\" failed ({})",
            from.display(),
            gyre_core::sys_error_text(&e)
        ));
    }
    match std::fs::rename(from, to) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create_path => {}
        Err(e) => return Err(fail("rename()", &e)),
    }
    if let Some(dir) = to.parent() {
        if let Err(e) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            return Err(format!(
                "mkdir() \"{}\" failed ({})",
                dir.display(),
                gyre_core::sys_error_text(&e)
            ));
        }
    }
    std::fs::rename(from, to).map_err(|e| fail("rename()", &e))
}
