//! The built-in MIME table (the common part of nginx's `mime.types`), used
//! when the configuration has no `types {}` block.

use std::collections::HashMap;

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

/// Extension (lower case) → MIME type.
pub fn builtin() -> HashMap<String, String> {
    let mut m = HashMap::new();
    for (t, exts) in TYPES {
        for e in *exts {
            m.insert((*e).to_string(), (*t).to_string());
        }
    }
    m
}

/// The type for `path` by its extension, or `default`.
pub fn for_path<'a>(types: &'a HashMap<String, String>, path: &str, default: &'a str) -> &'a str {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() || !ext.is_empty() => {
            let ext = ext.to_ascii_lowercase();
            types.get(&ext).map_or(default, String::as_str)
        }
        _ => default,
    }
}
