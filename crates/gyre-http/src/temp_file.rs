//! Temporary files (nginx's `ngx_create_temp_file` and the `*_temp_path`
//! directives): a directory with up to three levels of hashed
//! subdirectories, files named by a ten-digit counter, created exclusively
//! (`O_EXCL`, mode 0600) and, unless persistent, unlinked right after the
//! open so nothing is left behind whatever happens to the process.
//!
//! It owns naming, the levels and creating missing directories; what is
//! written and when, logging, and removing a persistent file are the
//! caller's (the request body reader, crate::request_body).
//!
//! The API is the same as the proxy branch's `temp_file.rs` (helper
//! "proxy", written in parallel): `TempPath::{new, parse, file_name}`,
//! `TempFile { file, name, offset }` with `create(path, persistent)` and
//! `append`, `write_at`, `CreateError { call, path, err }`; either file
//! serves both users.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The ten digits of a name.
const NAME_DIGITS: usize = 10;

/// Creation attempts before giving up (collisions with files of another
/// process using the same directory).
const MAX_TRIES: u32 = 64;

/// `*_temp_path PATH [L1 [L2 [L3]]]`: where temporary files go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TempPath {
    pub dir: PathBuf,
    /// Lengths of the subdirectory names, outermost first.
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
    /// `ngx_conf_set_path_slot`): positive numbers whose sum is at most the
    /// ten digits of a name (the directive's table allows three). `Err` is
    /// nginx's reason, `invalid value`.
    pub fn parse(dir: PathBuf, levels: &[&str]) -> Result<TempPath, String> {
        let mut out = Vec::with_capacity(levels.len());
        for l in levels {
            match l.parse::<usize>() {
                Ok(n) if n > 0 && l.bytes().all(|b| b.is_ascii_digit()) => out.push(n),
                _ => return Err("invalid value".into()),
            }
        }
        if out.iter().sum::<usize>() > NAME_DIGITS {
            return Err("invalid value".into());
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

/// An open temporary file: its descriptor, the name it was created under
/// (gone already unless persistent) and how much was written.
#[derive(Debug)]
pub struct TempFile {
    pub file: File,
    pub name: PathBuf,
    pub offset: u64,
}

/// What failed: the call nginx's line names, and the path.
#[derive(Debug)]
pub struct CreateError {
    pub call: &'static str,
    pub path: PathBuf,
    pub err: io::Error,
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
        u64::from(std::process::id()) % 1_000_000 + 1
    } else {
        1
    };
    NUMBER.fetch_add(add, Ordering::Relaxed)
}

impl TempFile {
    /// Creates a new file under `path` (its missing directories too,
    /// 0700), mode 0600, unlinked at once unless `persistent`.
    pub fn create(path: &TempPath, persistent: bool) -> Result<TempFile, CreateError> {
        let mut n = next_number(false);
        let mut made_dirs = false;
        for _ in 0..MAX_TRIES {
            let name = path.file_name(n);
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&name)
            {
                Ok(file) => {
                    if !persistent {
                        if let Err(err) = std::fs::remove_file(&name) {
                            return Err(CreateError {
                                call: "unlink()",
                                path: name,
                                err,
                            });
                        }
                    }
                    return Ok(TempFile {
                        file,
                        name,
                        offset: 0,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n = next_number(true),
                Err(e) if e.kind() == io::ErrorKind::NotFound && !made_dirs => {
                    // The same name again once its directories exist.
                    made_dirs = true;
                    if let Some(dir) = name.parent() {
                        std::fs::DirBuilder::new()
                            .recursive(true)
                            .mode(0o700)
                            .create(dir)
                            .map_err(|err| CreateError {
                                call: "mkdir()",
                                path: dir.to_path_buf(),
                                err,
                            })?;
                    }
                }
                Err(err) => {
                    return Err(CreateError {
                        call: "open()",
                        path: name,
                        err,
                    })
                }
            }
        }
        Err(CreateError {
            call: "open()",
            path: path.file_name(n),
            err: io::Error::from(io::ErrorKind::AlreadyExists),
        })
    }

    /// Appends `b` (one pwrite).
    pub fn append(&mut self, b: &[u8]) -> Result<(), CreateError> {
        write_at(&self.file, &self.name, b, self.offset)?;
        self.offset += b.len() as u64;
        Ok(())
    }
}

/// Writes `b` at `offset` of a temporary file; the error names the call as
/// nginx's `pwrite() "…" failed` does.
pub fn write_at(file: &File, name: &Path, b: &[u8], offset: u64) -> Result<(), CreateError> {
    file.write_all_at(b, offset).map_err(|err| CreateError {
        call: "pwrite()",
        path: name.to_path_buf(),
        err,
    })
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
        assert!(TempPath::parse("/t".into(), &["+1"]).is_err());
    }

    #[test]
    fn unlinked_file_has_no_name_but_keeps_its_bytes() {
        let d = dir("unlinked");
        let tp = TempPath::parse(d.clone(), &["1", "2"]).unwrap();
        let mut f = TempFile::create(&tp, false).unwrap();
        assert!(!f.name.exists(), "unlinked after open");
        assert!(f.name.starts_with(&d));
        f.append(b"hello ").unwrap();
        f.append(b"world").unwrap();
        let mut b = vec![0; 11];
        f.file.read_exact_at(&mut b, 0).unwrap();
        assert_eq!((&b[..], f.offset), (&b"hello world"[..], 11));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn persistent_file_stays_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let d = dir("keep");
        let tp = TempPath::new(d.clone());
        let a = TempFile::create(&tp, true).unwrap();
        let b = TempFile::create(&tp, true).unwrap();
        assert_ne!(a.name, b.name);
        let mode = std::fs::metadata(&a.name).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let name = a.name.clone();
        drop((a, b));
        assert!(name.exists());
        let _ = std::fs::remove_dir_all(&d);
    }
}
