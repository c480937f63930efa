//! Temporary files (nginx's `ngx_create_temp_file` and the `*_temp_path`
//! directives): a directory with up to three levels of hashed
//! subdirectories, files named by a ten-digit counter, created exclusively
//! (`O_EXCL`) and, unless kept, unlinked right after the open so nothing is
//! left behind whatever happens to the process.
//!
//! It owns naming, the levels, creating missing directories and the
//! file's removal; what is written and when is the caller's (the request
//! body reader, crate::request_body). Not a cache: files never outlive
//! their owner except when asked to (`client_body_in_file_only on`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// nginx's `NGX_MAX_PATH_LEVEL`.
const MAX_LEVELS: usize = 3;

/// Creation attempts before giving up (collisions with files of another
/// process using the same directory).
const MAX_TRIES: u32 = 32;

/// `*_temp_path PATH [L1 [L2 [L3]]]`: where temporary files go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TempPath {
    pub dir: PathBuf,
    /// Lengths of the subdirectory names, outermost first (each 1 or 2).
    pub levels: Vec<usize>,
}

impl TempPath {
    /// A path without levels.
    pub fn new(dir: PathBuf) -> TempPath {
        TempPath {
            dir,
            levels: Vec::new(),
        }
    }

    /// Parses the level arguments of a `*_temp_path` directive (nginx's
    /// `ngx_conf_set_path_slot`): positive numbers, at most three (the
    /// directive takes four arguments), their sum at most the ten digits
    /// of a name. `Err` is nginx's reason, `invalid value`.
    pub fn parse(dir: PathBuf, levels: &[&str]) -> Result<TempPath, &'static str> {
        if levels.len() > MAX_LEVELS {
            return Err("invalid number of arguments");
        }
        let mut out = Vec::with_capacity(levels.len());
        for l in levels {
            match l.parse::<usize>() {
                Ok(n) if n > 0 => out.push(n),
                _ => return Err("invalid value"),
            }
        }
        if out.iter().sum::<usize>() > 10 {
            return Err("invalid value");
        }
        Ok(TempPath { dir, levels: out })
    }

    /// The full name of file number `n`: the levels are taken from the
    /// end of the ten-digit name, the first level the last characters
    /// (nginx's `ngx_create_hashed_filename`: `1:2` puts `0000000435` in
    /// `5/43/`).
    pub fn file_name(&self, n: u64) -> PathBuf {
        let name = format!("{:010}", n % 10_000_000_000);
        let mut p = self.dir.clone();
        let mut end = name.len();
        for &l in &self.levels {
            let start = end.saturating_sub(l);
            p.push(&name[start..end]);
            end = start;
        }
        p.push(&name);
        p
    }
}

/// What becomes of a temporary file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Unlinked right after the open: only the descriptor holds it.
    Unlinked,
    /// Kept under its name while its owner lives, removed when dropped
    /// (`client_body_in_file_only clean`).
    Clean,
    /// Kept under its name (`client_body_in_file_only on`).
    Persistent,
}

/// The worker's file counter (nginx's `ngx_temp_number`), started from
/// the pid and the time so two workers rarely collide; a collision moves
/// it on by a larger step, as nginx's `ngx_next_temp_number(1)` does.
static NUMBER: AtomicU64 = AtomicU64::new(0);

fn next_number(collision: bool) -> u64 {
    let seed = || {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        (t.wrapping_mul(1_000_003) ^ u64::from(std::process::id())) % 1_000_000_000
    };
    let _ = NUMBER.compare_exchange(0, seed() | 1, Ordering::Relaxed, Ordering::Relaxed);
    let add = if collision {
        u64::from(std::process::id()) | 1
    } else {
        1
    };
    NUMBER.fetch_add(add, Ordering::Relaxed)
}

/// One temporary file, written in order.
#[derive(Debug)]
pub struct TempFile {
    file: File,
    path: PathBuf,
    len: u64,
    keep: Keep,
}

impl TempFile {
    /// Creates a new file under `tp` (its missing directories too, 0700),
    /// with mode 0600, or 0660 when `group` (nginx's
    /// `request_body_file_group_access`).
    pub fn create(tp: &TempPath, keep: Keep, group: bool) -> io::Result<TempFile> {
        let mode = if group { 0o660 } else { 0o600 };
        let mut n = next_number(false);
        let mut made_dirs = false;
        for _ in 0..MAX_TRIES {
            let path = tp.file_name(n);
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&path)
            {
                Ok(file) => {
                    if keep == Keep::Unlinked {
                        let _ = std::fs::remove_file(&path);
                    }
                    return Ok(TempFile {
                        file,
                        path,
                        len: 0,
                        keep,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n = next_number(true),
                Err(e) if e.kind() == io::ErrorKind::NotFound && !made_dirs => {
                    // The same name again once its directories exist.
                    made_dirs = true;
                    if let Some(parent) = path.parent() {
                        create_dirs(parent)?;
                    }
                }
                Err(e) => return Err(named(e, "open()", &path)),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("no free temporary file name in \"{}\"", tp.dir.display()),
        ))
    }

    /// Appends `data`.
    pub fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if let Err(e) = self.file.write_all_at(data, self.len) {
            return Err(named(e, "write()", &self.path));
        }
        self.len += data.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before anything was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The name the file was created under (gone already when unlinked).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, to read back (`read_at`) or send (sendfile).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Whether the file still has a name.
    pub fn keep(&self) -> Keep {
        self.keep
    }

    /// The file has been renamed away by its consumer (a DAV PUT moved
    /// it into place): nothing to remove any more.
    pub fn disown(&mut self) {
        self.keep = Keep::Persistent;
    }

    /// Reads `buf.len()` bytes at `offset` (all of them or an error).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.keep == Keep::Clean {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Creates `dir` and its missing parents with mode 0700 (nginx's
/// `ngx_create_path`).
fn create_dirs(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| named(e, "mkdir()", dir))
}

/// nginx's `call() "path" failed` framing for an error.
fn named(e: io::Error, call: &str, path: &Path) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "{call} \"{}\" failed ({})",
            path.display(),
            gyre_core::sys_error_text(&e)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gyre-tf-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn levels_come_from_the_end_of_the_name() {
        let tp = TempPath::parse("/t".into(), &["1", "2"]).unwrap();
        assert_eq!(tp.file_name(435), PathBuf::from("/t/5/43/0000000435"));
        let tp = TempPath::parse("/t".into(), &["2", "2", "1"]).unwrap();
        assert_eq!(
            tp.file_name(1_234_567_890),
            PathBuf::from("/t/90/78/6/1234567890")
        );
        assert_eq!(
            TempPath::new("/t".into()).file_name(7),
            PathBuf::from("/t/0000000007")
        );
        assert!(TempPath::parse("/t".into(), &["3", "4", "3"]).is_ok());
        assert!(TempPath::parse("/t".into(), &["3", "4", "4"]).is_err());
        assert!(TempPath::parse("/t".into(), &["0"]).is_err());
        assert!(TempPath::parse("/t".into(), &["x"]).is_err());
        assert!(TempPath::parse("/t".into(), &["1", "1", "1", "1"]).is_err());
    }

    #[test]
    fn unlinked_file_has_no_name_but_keeps_its_bytes() {
        let d = dir("unlinked");
        let tp = TempPath::parse(d.clone(), &["1", "2"]).unwrap();
        let mut f = TempFile::create(&tp, Keep::Unlinked, false).unwrap();
        assert!(!f.path().exists(), "unlinked after open");
        assert!(f.path().starts_with(&d));
        f.write(b"hello ").unwrap();
        f.write(b"world").unwrap();
        let mut b = vec![0; 11];
        f.read_at(&mut b, 0).unwrap();
        assert_eq!((&b[..], f.len()), (&b"hello world"[..], 11));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn clean_file_is_removed_on_drop_persistent_stays() {
        let d = dir("keep");
        let tp = TempPath::new(d.clone());
        let f = TempFile::create(&tp, Keep::Clean, false).unwrap();
        let p = f.path().to_path_buf();
        assert!(p.exists());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        drop(f);
        assert!(!p.exists());
        let f = TempFile::create(&tp, Keep::Persistent, false).unwrap();
        let p = f.path().to_path_buf();
        drop(f);
        assert!(p.exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn two_files_get_two_names() {
        let d = dir("two");
        let tp = TempPath::new(d.clone());
        let a = TempFile::create(&tp, Keep::Clean, false).unwrap();
        let b = TempFile::create(&tp, Keep::Clean, false).unwrap();
        assert_ne!(a.path(), b.path());
        drop((a, b));
        let _ = std::fs::remove_dir_all(&d);
    }
}
