//! The built-in MIME table (the common part of nginx's `mime.types`), used
//! when the configuration has no `types {}` block.

use std::collections::HashMap;
use std::sync::Arc;

const TYPES: &[(&str, &[&str])] = &[
    ("text/html", &["html", "htm", "shtml"]),
    ("text/css", &["css"]),
    ("text/xml", &["xml"]),
    ("image/gif", &["gif"]),
    ("image/jpeg", &["jpeg", "jpg"]),
    ("application/javascript", &["js"]),
    ("application/atom+xml", &["atom"]),
    ("application/rss+xml", &["rss"]),
    ("text/mathml", &["mml"]),
    ("text/plain", &["txt"]),
    ("text/vnd.wap.wml", &["wml"]),
    ("image/png", &["png"]),
    ("image/svg+xml", &["svg", "svgz"]),
    ("image/tiff", &["tif", "tiff"]),
    ("image/webp", &["webp"]),
    ("image/x-icon", &["ico"]),
    ("image/bmp", &["bmp"]),
    ("image/avif", &["avif"]),
    ("font/woff", &["woff"]),
    ("font/woff2", &["woff2"]),
    ("application/json", &["json"]),
    ("application/pdf", &["pdf"]),
    ("application/wasm", &["wasm"]),
    ("application/zip", &["zip"]),
    ("application/x-tar", &["tar"]),
    ("application/gzip", &["gz"]),
    ("application/xhtml+xml", &["xhtml"]),
    (
        "application/octet-stream",
        &["bin", "exe", "dll", "iso", "img", "msi"],
    ),
    ("audio/mpeg", &["mp3"]),
    ("audio/ogg", &["ogg"]),
    ("video/mp4", &["mp4"]),
    ("video/webm", &["webm"]),
];

/// Extension (lower case) → MIME type. The types are shared strings so a
/// response names its type without copying it; the table is looked up on
/// every file response, so it uses a fast (randomly seeded) hash.
pub type MimeTypes = HashMap<String, Arc<str>, foldhash::fast::RandomState>;

/// The built-in table.
pub fn builtin() -> MimeTypes {
    let mut m = MimeTypes::default();
    for (t, exts) in TYPES {
        let t: Arc<str> = Arc::from(*t);
        for e in *exts {
            m.insert((*e).to_string(), t.clone());
        }
    }
    m
}

/// The type for `path` by its extension, or `default`.
pub fn for_path<'a>(types: &'a MimeTypes, path: &[u8], default: &'a Arc<str>) -> &'a Arc<str> {
    let name = &path[memchr::memrchr(b'/', path).map_or(0, |i| i + 1)..];
    let dot = memchr::memrchr(b'.', name);
    match dot.map(|i| (&name[..i], &name[i + 1..])) {
        Some((stem, ext)) if !stem.is_empty() || !ext.is_empty() => {
            // Lowercase on the stack: extensions are short.
            let mut low = [0u8; 16];
            let found = if ext.len() <= low.len() {
                let low = &mut low[..ext.len()];
                low.copy_from_slice(ext);
                low.make_ascii_lowercase();
                std::str::from_utf8(low).ok().and_then(|e| types.get(e))
            } else {
                std::str::from_utf8(ext)
                    .ok()
                    .and_then(|e| types.get(&e.to_ascii_lowercase()))
            };
            found.unwrap_or(default)
        }
        _ => default,
    }
}

/// The last extension looked up and its type: consecutive requests for
/// files of one kind skip the hash (a worker has one `types` map).
#[derive(Debug, Default)]
pub struct TypeCache {
    ext: [u8; 16],
    len: usize,
    ty: Option<Arc<str>>,
}

/// [`for_path`] through a [`TypeCache`].
pub fn for_path_cached(
    types: &MimeTypes,
    cache: &mut TypeCache,
    path: &[u8],
    default: &Arc<str>,
) -> Arc<str> {
    let name = &path[memchr::memrchr(b'/', path).map_or(0, |i| i + 1)..];
    let Some(dot) = memchr::memrchr(b'.', name) else {
        return default.clone();
    };
    let ext = &name[dot + 1..];
    if ext.len() > cache.ext.len() || name.len() == 1 {
        return for_path(types, path, default).clone();
    }
    if cache.len == ext.len() && cache.ext[..ext.len()].eq_ignore_ascii_case(ext) {
        if let Some(t) = &cache.ty {
            return t.clone();
        }
    }
    let t = for_path(types, path, default);
    if !Arc::ptr_eq(t, default) {
        cache.ext[..ext.len()].copy_from_slice(ext);
        cache.len = ext.len();
        cache.ty = Some(t.clone());
    }
    t.clone()
}

#[cfg(test)]
mod cache_tests {
    use super::*;

    #[test]
    fn cached_lookup_agrees_with_the_map() {
        let types = builtin();
        let d: Arc<str> = "text/plain".into();
        let mut c = TypeCache::default();
        for p in [
            "/a.css", "/b.CSS", "/c.html", "/d", "/e.zzz", "/.css", "/f.css", "/x.y/z",
        ] {
            assert_eq!(
                for_path_cached(&types, &mut c, p.as_bytes(), &d),
                for_path(&types, p.as_bytes(), &d).clone(),
                "{p}"
            );
        }
    }
}
