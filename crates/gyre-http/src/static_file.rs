//! Static files: mapping a URI to a path (`root` / `alias`), and the open-file
//! cache.
//!
//! The cache is on by default with a short validity (nginx has it off): a hot
//! file costs no open/fstat/close per request, and a small one (up to
//! [`SMALL_FILE`]) is kept in memory so its response goes out with the head
//! in one write. Entries are re-validated (`fstat` of the path) after
//! `open_file_cache_valid`; entries unused for `inactive` are dropped when the
//! cache is full.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use gyre_core::event::clock::{format_http_date, msec_diff, Msec};

use crate::conf::{LocConf, OpenFileCache};

/// Files up to this size are read once into memory.
pub const SMALL_FILE: u64 = 16 * 1024;

/// An open regular file and what responses need of it.
#[derive(Debug)]
pub struct FileInfo {
    pub file: File,
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: u64,
    /// nginx's ETag: `"<mtime hex>-<size hex>"`. Shared strings and
    /// content: responses carry them without copying.
    pub etag: Arc<str>,
    pub last_modified: Arc<str>,
    /// The whole content, for small files.
    pub content: Option<Arc<[u8]>>,
}

/// What opening a path found.
#[derive(Debug, Clone)]
pub enum Open {
    File(Rc<FileInfo>),
    Dir,
    /// ENOENT, ENOTDIR or ENAMETOOLONG (the errno, for the error log).
    NotFound(i32),
    /// EACCES, or ELOOP / EMLINK from a symlink (nginx opens with
    /// openat and answers all three 403, logged at `[error]`): the errno.
    Denied(i32),
    /// Neither a file nor a directory (a device, a FIFO): nginx's `"…" is
    /// not a regular file` at `[crit]`, answered 404.
    NotRegular,
    /// Another error (logged by the caller, answered with 500).
    Error(i32),
}

struct Cached {
    result: Open,
    checked: Msec,
    used: Msec,
}

/// Per-worker open-file cache, keyed by the path's bytes (hashing a
/// `Path` walks its components; this is looked up on every request).
#[derive(Default)]
pub struct FileCache {
    /// The last extension's MIME type (see [`crate::mime::TypeCache`]).
    pub mime: crate::mime::TypeCache,
    entries: HashMap<Box<[u8]>, Cached, foldhash::fast::RandomState>,
}

fn open_uncached(path: &Path) -> Open {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return from_error(&e),
    };
    let md = match file.metadata() {
        Ok(m) => m,
        Err(e) => return from_error(&e),
    };
    if md.is_dir() {
        return Open::Dir;
    }
    if !md.is_file() {
        return Open::NotRegular;
    }
    let size = md.len();
    let mtime = md.mtime().max(0) as u64;
    let mut last_modified = String::with_capacity(29);
    format_http_date(mtime, &mut last_modified);
    let content = if size <= SMALL_FILE {
        let mut buf = vec![0u8; size as usize];
        match file.read_exact_at(&mut buf, 0) {
            Ok(()) => Some(Arc::from(buf.into_boxed_slice())),
            Err(_) => None,
        }
    } else {
        None
    };
    Open::File(Rc::new(FileInfo {
        file,
        size,
        mtime,
        etag: format!("\"{mtime:x}-{size:x}\"").into(),
        last_modified: last_modified.into(),
        content,
    }))
}

fn from_error(e: &io::Error) -> Open {
    match e.raw_os_error() {
        // ENOENT, ENOTDIR, ENAMETOOLONG
        Some(code @ (2 | 20 | 36)) => Open::NotFound(code),
        // EACCES, EMLINK, ELOOP
        Some(code @ (13 | 31 | 40)) => Open::Denied(code),
        Some(code) => Open::Error(code),
        None => Open::Error(0),
    }
}

impl FileCache {
    pub fn new() -> FileCache {
        FileCache::default()
    }

    /// Opens `path`, through the cache when `cfg` is set.
    pub fn open(&mut self, path: &Path, now: Msec, cfg: Option<OpenFileCache>) -> Open {
        let Some(cfg) = cfg else {
            return open_uncached(path);
        };
        let key = path.as_os_str().as_bytes();
        if let Some(c) = self.entries.get_mut(key) {
            if msec_diff(now, c.checked) < cfg.valid_ms as i64 {
                c.used = now;
                return c.result.clone();
            }
        }
        let result = open_uncached(path);
        if self.entries.len() >= cfg.max && !self.entries.contains_key(key) {
            self.evict(now, cfg);
        }
        if cfg.max > 0 {
            self.entries.insert(
                key.into(),
                Cached {
                    result: result.clone(),
                    checked: now,
                    used: now,
                },
            );
        }
        result
    }

    /// Drops entries unused for `inactive`; if none, the least recently used.
    fn evict(&mut self, now: Msec, cfg: OpenFileCache) {
        let before = self.entries.len();
        self.entries
            .retain(|_, c| msec_diff(now, c.used) < cfg.inactive_ms as i64);
        if self.entries.len() < before {
            return;
        }
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, c)| msec_diff(c.used, now))
            .map(|(p, _)| p.clone());
        if let Some(p) = oldest {
            self.entries.remove(&p);
        }
    }

    /// Forgets what is known of `path` (this worker replaced the file: a
    /// DAV PUT); other workers see the new file once their entry's
    /// `open_file_cache_valid` runs out.
    pub fn forget(&mut self, path: &Path) {
        self.entries.remove(path.as_os_str().as_bytes());
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The file a (normalised) URI path maps to in location `loc_uri`: `root`
/// + path, or `alias` + the path after the location prefix.
pub fn map_uri(loc: &LocConf, loc_uri: &str, path: &[u8]) -> PathBuf {
    let mut p = PathBuf::new();
    map_uri_into(loc, loc_uri, path, &mut p);
    p
}

/// [`map_uri`] into a reused buffer.
///
/// The path is bytes, as nginx's: a file name that is not UTF-8 maps to
/// the same bytes on disk.
pub fn map_uri_into(loc: &LocConf, loc_uri: &str, path: &[u8], out: &mut PathBuf) {
    let p = out.as_mut_os_string();
    p.clear();
    match &loc.alias {
        Some(alias) => {
            let rest = path.strip_prefix(loc_uri.as_bytes()).unwrap_or(path);
            p.push(alias.as_os_str());
            let a = alias.as_os_str().as_bytes();
            if !rest.is_empty() && !rest.starts_with(b"/") && !a.is_empty() && !a.ends_with(b"/") {
                p.push("/");
            }
            p.push(std::ffi::OsStr::from_bytes(rest));
        }
        None => {
            p.push(loc.root.as_os_str());
            p.push(std::ffi::OsStr::from_bytes(path));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gyre-static-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn cache_serves_without_reopening_until_valid_expires() {
        let d = tmpdir("cache");
        let f = d.join("a.txt");
        std::fs::write(&f, b"hello").unwrap();
        let cfg = Some(crate::conf::DEFAULT_OPEN_FILE_CACHE);
        let mut c = FileCache::new();
        let Open::File(a) = c.open(&f, 1000, cfg) else {
            panic!()
        };
        assert_eq!(a.content.as_deref(), Some(&b"hello"[..]));
        std::fs::write(&f, b"changed!").unwrap();
        let Open::File(b) = c.open(&f, 1500, cfg) else {
            panic!()
        };
        assert!(Rc::ptr_eq(&a, &b), "served from the cache within valid");
        let Open::File(b) = c.open(&f, 2100, cfg) else {
            panic!()
        };
        assert_eq!(b.content.as_deref(), Some(&b"changed!"[..]));
        assert!(matches!(
            c.open(&d.join("nope"), 2100, cfg),
            Open::NotFound(_)
        ));
        assert!(matches!(c.open(&d, 2100, cfg), Open::Dir));
        assert!(matches!(c.open(&f.join("x"), 2100, cfg), Open::NotFound(_)));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn eviction_keeps_the_cache_bounded() {
        let d = tmpdir("evict");
        let cfg = Some(OpenFileCache {
            max: 3,
            inactive_ms: 10_000,
            valid_ms: 1000,
        });
        let mut c = FileCache::new();
        for i in 0..10 {
            let f = d.join(format!("{i}"));
            std::fs::write(&f, b"x").unwrap();
            c.open(&f, i, cfg);
            assert!(c.len() <= 3);
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn root_and_alias_mapping() {
        let mut loc = crate::conf::HttpConf::server_loc(&Default::default())
            .as_ref()
            .clone();
        loc.root = PathBuf::from("/srv/html");
        assert_eq!(
            map_uri(&loc, "/", b"/a/b.txt"),
            PathBuf::from("/srv/html/a/b.txt")
        );
        loc.alias = Some(PathBuf::from("/data/pics/"));
        assert_eq!(
            map_uri(&loc, "/img/", b"/img/x.png"),
            PathBuf::from("/data/pics/x.png")
        );
        loc.alias = Some(PathBuf::from("/data/pics"));
        assert_eq!(
            map_uri(&loc, "/img", b"/img/x.png"),
            PathBuf::from("/data/pics/x.png")
        );
    }
}
