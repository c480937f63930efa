//! `autoindex` (nginx's `ngx_http_autoindex_module.c`): a directory
//! listing when a `/`-ending URI has no index file, in nginx's html, json
//! or xml layout, byte for byte: hidden entries skipped, directories
//! first, then names in byte order; html names cut at 50 characters.
//!
//! The body is made in memory and sent with a Content-Length (nginx
//! streams it chunked); dates are UTC (`autoindex_localtime` is read, and
//! gyre's clock is UTC).

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use gyre_core::event::clock::{format_http_date, CivilTime};

use crate::log_format::escape_json;

/// `autoindex_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Html,
    Json,
    Xml,
}

/// `autoindex` settings of a location.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Autoindex {
    pub format: Format,
    pub exact_size: bool,
}

struct Entry {
    name: Vec<u8>,
    dir: bool,
    size: u64,
    mtime: u64,
}

/// nginx's NGX_HTTP_AUTOINDEX_NAME_LEN.
const NAME_LEN: usize = 50;

fn read(dir: &Path) -> std::io::Result<Vec<Entry>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().as_bytes().to_vec();
        if name.first() == Some(&b'.') {
            continue;
        }
        // stat(), as nginx: a link is listed as what it points to.
        let Ok(md) = std::fs::metadata(e.path()) else {
            continue;
        };
        let mtime = md
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        v.push(Entry {
            name,
            dir: md.is_dir(),
            size: md.len(),
            mtime,
        });
    }
    v.sort_by(|a, b| b.dir.cmp(&a.dir).then_with(|| a.name.cmp(&b.name)));
    Ok(v)
}

fn html_escape(b: &[u8], out: &mut Vec<u8>) {
    for &c in b {
        match c {
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            c => out.push(c),
        }
    }
}

/// nginx's `ngx_escape_uri(.., NGX_ESCAPE_HTML)` for a link target.
fn uri_escape(b: &[u8], out: &mut Vec<u8>) {
    for &c in b {
        let keep = c.is_ascii_alphanumeric() || b"-._~!$'()*+,;=:@/".contains(&c);
        if keep {
            out.push(c);
        } else {
            let _ = write!(Bytes(out), "%{c:02X}");
        }
    }
}

/// A `fmt::Write` over a byte buffer.
struct Bytes<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Bytes<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// The listing of `dir` for `uri`, and its content type.
pub fn render(dir: &Path, uri: &[u8], ai: Autoindex) -> std::io::Result<(Vec<u8>, &'static str)> {
    let entries = read(dir)?;
    let mut out = Vec::new();
    match ai.format {
        Format::Html => html(&entries, uri, ai.exact_size, &mut out),
        Format::Json => json(&entries, &mut out),
        Format::Xml => xml(&entries, &mut out),
    }
    let ty = match ai.format {
        Format::Html => "text/html",
        Format::Json => "application/json",
        // nginx's xml listing names its charset itself.
        Format::Xml => "text/xml; charset=utf-8",
    };
    Ok((out, ty))
}

fn html(entries: &[Entry], uri: &[u8], exact: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(b"<html>\r\n<head><title>Index of ");
    html_escape(uri, out);
    out.extend_from_slice(b"</title></head>\r\n<body>\r\n<h1>Index of ");
    html_escape(uri, out);
    out.extend_from_slice(b"</h1><hr><pre><a href=\"../\">../</a>\r\n");
    for e in entries {
        out.extend_from_slice(b"<a href=\"");
        uri_escape(&e.name, out);
        if e.dir {
            out.push(b'/');
        }
        out.extend_from_slice(b"\">");
        let shown = String::from_utf8_lossy(&e.name);
        let mut len = shown.chars().count();
        if len > NAME_LEN {
            let cut: String = shown.chars().take(NAME_LEN - 3).collect();
            html_escape(cut.as_bytes(), out);
            out.extend_from_slice(b"..&gt;");
            len = NAME_LEN;
        } else {
            html_escape(&e.name, out);
            if e.dir && len < NAME_LEN {
                out.push(b'/');
                len += 1;
            }
        }
        out.extend_from_slice(b"</a>");
        out.resize(out.len() + (NAME_LEN - len), b' ');
        let t = CivilTime::from_unix(e.mtime);
        let _ = write!(
            Bytes(out),
            " {:02}-{}-{} {:02}:{:02} ",
            t.day,
            t.month_name(),
            t.year,
            t.hour,
            t.min
        );
        if e.dir {
            out.extend_from_slice(if exact {
                b"                  -"
            } else {
                b"      -"
            });
        } else if exact {
            let _ = write!(Bytes(out), "{:>19}", e.size);
        } else {
            size_short(e.size, out);
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"</pre><hr></body>\r\n</html>\r\n");
}

/// `autoindex_exact_size off`: K, M, G rounded as nginx rounds them.
fn size_short(n: u64, out: &mut Vec<u8>) {
    const K: u64 = 1024;
    let (size, scale) = if n > K * K * K - 1 {
        (
            n / (K * K * K) + u64::from(n % (K * K * K) > K * K * K / 2 - 1),
            Some('G'),
        )
    } else if n > K * K - 1 {
        (
            n / (K * K) + u64::from(n % (K * K) > K * K / 2 - 1),
            Some('M'),
        )
    } else if n > 9999 {
        (n / K + u64::from(n % K > K / 2 - 1), Some('K'))
    } else {
        (n, None)
    };
    let _ = match scale {
        Some(c) => write!(Bytes(out), "{size:>6}{c}"),
        None => write!(Bytes(out), " {size:>6}"),
    };
}

fn json(entries: &[Entry], out: &mut Vec<u8>) {
    out.extend_from_slice(b"[\r\n");
    for (i, e) in entries.iter().enumerate() {
        out.extend_from_slice(b"{ \"name\":\"");
        escape_json(&e.name, out);
        out.extend_from_slice(if e.dir {
            b"\", \"type\":\"directory\", \"mtime\":\""
        } else {
            b"\", \"type\":\"file\", \"mtime\":\""
        });
        let mut d = String::new();
        format_http_date(e.mtime, &mut d);
        out.extend_from_slice(d.as_bytes());
        out.push(b'"');
        if !e.dir {
            let _ = write!(Bytes(out), ", \"size\":{}", e.size);
        }
        out.extend_from_slice(b" }");
        if i + 1 < entries.len() {
            out.push(b',');
        }
        out.extend_from_slice(b"\r\n");
    }
    // No line end after the bracket, as nginx.
    out.push(b']');
}

fn xml(entries: &[Entry], out: &mut Vec<u8>) {
    out.extend_from_slice(b"<?xml version=\"1.0\"?>\r\n<list>\r\n");
    for e in entries {
        let t = CivilTime::from_unix(e.mtime);
        let kind: &[u8] = if e.dir { b"directory" } else { b"file" };
        out.push(b'<');
        out.extend_from_slice(kind);
        let _ = write!(
            Bytes(out),
            " mtime=\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z\"",
            t.year,
            t.month,
            t.day,
            t.hour,
            t.min,
            t.sec
        );
        if !e.dir {
            let _ = write!(Bytes(out), " size=\"{}\"", e.size);
        }
        out.push(b'>');
        html_escape(&e.name, out);
        out.extend_from_slice(b"</");
        out.extend_from_slice(kind);
        out.extend_from_slice(b">\r\n");
    }
    out.extend_from_slice(b"</list>\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_sizes_round_as_nginx() {
        let s = |n| {
            let mut o = Vec::new();
            size_short(n, &mut o);
            String::from_utf8(o).unwrap_or_default()
        };
        assert_eq!(s(5000), "   5000");
        assert_eq!(s(10_000), "    10K");
        assert_eq!(s(10_752), "    11K");
        assert_eq!(s(3 * 1024 * 1024), "     3M");
    }
}
