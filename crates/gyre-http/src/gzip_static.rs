//! nginx's `ngx_http_gzip_static_module`: `gzip_static on|always` serves
//! `FILE.gz` in place of `FILE` to clients that take gzip (`on`: as
//! [`crate::gzip::gzip_ok`] decides; `always`: to every client), with the
//! original's type, the `.gz` file's length, Last-Modified and ETag, and
//! `Content-Encoding: gzip`; no ranges (nginx 1.22 sends such a file
//! whole). When the `.gz` file is missing the static module serves the
//! original as usual.

use std::path::Path;

use crate::gzip::{self, Static};
use crate::phases::{Ctx, Step};
use crate::request::HttpRequest;
use crate::response::{Body, Response};
use crate::static_file::Open;

/// The handler, before the static module: `Some` when it answered.
pub fn serve(
    cx: &mut Ctx<'_>,
    r: &mut HttpRequest,
    uri: &[u8],
    fpath: &Path,
    out: &mut Response,
) -> Option<Step> {
    let g = r.st.loc.gzip.clone()?;
    if g.gzip_static == Static::Off || uri.ends_with(b"/") || !r.st.is_get_or_head() {
        return None;
    }
    let ok = match g.gzip_static {
        Static::Always => true,
        _ => {
            // The response is not made yet: gzip_proxied sees none of its
            // headers (nginx's handler asks before it has them too).
            out.reset(200);
            gzip::gzip_ok(&g, r, out, cx.unix_ms / 1000)
        }
    };
    if !g.vary && !ok {
        return None;
    }
    let mut gz = fpath.as_os_str().to_owned();
    gz.push(".gz");
    let info = match cx
        .files
        .open(Path::new(&gz), cx.now, r.st.loc.open_file_cache)
    {
        Open::File(info) => info,
        // nginx logs only errors other than "not found" here; a
        // directory or a forbidden file falls back to the original.
        _ => return None,
    };
    // `always` answers every client alike: no Vary (as nginx).
    if g.gzip_static == Static::On {
        r.st.gzip_vary = true;
    }
    if !ok {
        return None;
    }
    let loc = r.st.loc.clone();
    let ctype =
        crate::mime::for_path_cached(&cx.conf.types, &mut cx.files.mime, uri, &loc.default_type);
    out.reset(200);
    out.content_type = Some(ctype.into());
    out.last_modified = Some((&info.last_modified).into());
    if loc.etag {
        out.headers.push(("ETag".into(), (&info.etag).into()));
    }
    out.headers.push(("Content-Encoding".into(), "gzip".into()));
    if r.st.is_head() {
        out.content_length = Some(info.size);
        return Some(Step::Respond);
    }
    out.body = match &info.content {
        Some(bytes) => Body::shared(bytes.clone()),
        None => {
            let token = cx.open.len() as u64 + 1;
            let len = info.size;
            cx.open.push((token, info));
            Body::File {
                token,
                offset: 0,
                len,
            }
        }
    };
    Some(Step::Respond)
}
