//! Temporary files (nginx's `ngx_create_temp_file`,
//! `ngx_create_hashed_filename` and `ngx_create_path` in `ngx_file.c`):
//! a `*_temp_path DIR [L1 [L2 [L3]]]` directory, the hashed sub-directory
//! levels, the ten-digit numbered names, and files opened `O_EXCL` and
//! unlinked at once, so they vanish with their last descriptor.
//!
//! Shared by everything that spills to disk: the proxy's buffered upstream
//! responses today (`proxy_temp_path`), client request bodies
//! (`client_body_temp_path`) can use the same. It does not decide *when* to
//! spill, nor log: callers log nginx's lines with the name this returns.
//!
//! Differences from nginx, on purpose: the number sequence is per process
//! (nginx keeps it in shared memory); two workers that pick the same number
//! collide on `O_EXCL` and the loser moves on by a random step, as nginx
//! does after a collision. The base directory is created on first use when
//! it is missing (nginx creates it at start); the level directories are
//! created on demand as nginx does.

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A `*_temp_path` directive's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TempPath {
    pub dir: PathBuf,
    /// The sub-directory levels, each the count of name characters it uses.
    pub levels: Vec<usize>,
}

impl TempPath {
    pub fn new(dir: PathBuf) -> TempPath {
        TempPath {
            dir,
            levels: Vec::new(),
        }
    }

    /// `DIR [L1 [L2 [L3]]]` (the directory already made absolute): nginx's
    /// `ngx_conf_set_path_slot` rule, each level a positive number and all
    /// of them at most the ten characters of a name; else its
    /// `invalid value`.
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

    /// The path of temp file number `n`: the levels take the name's last
    /// characters, the first level the very last ones (nginx's
    /// `ngx_create_hashed_filename`: `levels 1 2` puts `0000000123` in
    /// `3/12/`).
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

/// The ten digits of a temp file's name.
const NAME_DIGITS: usize = 10;

/// An open temp file: its descriptor, its name (for the log lines; the
/// name itself is gone unless the file is persistent) and how much was
/// written.
#[derive(Debug)]
pub struct TempFile {
    pub file: File,
    pub name: PathBuf,
    pub offset: u64,
}

/// Why a temp file could not be made: the call nginx names and the path.
#[derive(Debug)]
pub struct CreateError {
    pub call: &'static str,
    pub path: PathBuf,
    pub err: io::Error,
}

thread_local! {
    /// nginx's `ngx_temp_number`.
    static NUMBER: Cell<u64> = const { Cell::new(0) };
}

/// nginx's `ngx_next_temp_number`: the next number, or after a collision
/// one a random step further.
fn next_number(collision: bool) -> u64 {
    NUMBER.with(|n| {
        let step = if collision {
            // nginx's ngx_random_number: time and pid mixed.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos() as u64);
            ((t << 16) + std::process::id() as u64) % 1_000_000 + 1
        } else {
            1
        };
        let v = n.get() + step;
        n.set(v);
        v
    })
}

impl TempFile {
    /// nginx's `ngx_create_temp_file`: a new file under `path`, created
    /// `O_EXCL` with mode 0600, unlinked at once unless `persistent`.
    pub fn create(path: &TempPath, persistent: bool) -> Result<TempFile, CreateError> {
        let mut n = next_number(false);
        // Bounded: collisions move on; a missing directory is made once.
        let mut made_dirs = false;
        for _ in 0..64 {
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
                    made_dirs = true;
                    create_path(&name).map_err(|(p, err)| CreateError {
                        call: "mkdir()",
                        path: p,
                        err,
                    })?;
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

    /// Appends `b` (nginx's `ngx_write_chain_to_temp_file`, one pwrite).
    pub fn append(&mut self, b: &[u8]) -> Result<(), CreateError> {
        write_at(&self.file, &self.name, b, self.offset)?;
        self.offset += b.len() as u64;
        Ok(())
    }
}

/// Writes `b` at `offset` of a temp file held elsewhere (shared with the
/// writer of the response); the error names the call as nginx's
/// `pwrite() "…" failed` does.
pub fn write_at(file: &File, name: &Path, b: &[u8], offset: u64) -> Result<(), CreateError> {
    file.write_all_at(b, offset).map_err(|err| CreateError {
        call: "pwrite()",
        path: name.to_path_buf(),
        err,
    })
}

/// nginx's `ngx_create_path`: the directories above `file`, mode 0700.
fn create_path(file: &Path) -> Result<(), (PathBuf, io::Error)> {
    let Some(dir) = file.parent() else {
        return Ok(());
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| (dir.to_path_buf(), e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Read;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gyre-temp-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn levels_take_the_last_characters_of_the_name() {
        let p = TempPath::parse("/t".into(), &["1", "2"]).unwrap();
        assert_eq!(p.file_name(123), PathBuf::from("/t/3/12/0000000123"));
        let p = TempPath::parse("/t".into(), &[]).unwrap();
        assert_eq!(p.file_name(1), PathBuf::from("/t/0000000001"));
        let p = TempPath::parse("/t".into(), &["2", "2", "2"]).unwrap();
        assert_eq!(
            p.file_name(9_876_543_210),
            PathBuf::from("/t/10/32/54/9876543210")
        );
    }

    #[test]
    fn levels_are_checked_as_nginx_does() {
        // nginx 1.22: `3 3 5` and `0` are "invalid value", `9 1` is fine.
        assert!(TempPath::parse("/t".into(), &["3", "3", "5"]).is_err());
        assert!(TempPath::parse("/t".into(), &["0"]).is_err());
        assert!(TempPath::parse("/t".into(), &["x"]).is_err());
        assert!(TempPath::parse("/t".into(), &["9", "1"]).is_ok());
        assert!(TempPath::parse("/t".into(), &["3", "3", "3"]).is_ok());
    }

    #[test]
    fn a_temp_file_is_unlinked_at_once_and_keeps_its_bytes() {
        let d = tmp("unlink");
        let p = TempPath::parse(d.clone(), &["1", "2"]).unwrap();
        let mut a = TempFile::create(&p, false).unwrap();
        let mut b = TempFile::create(&p, false).unwrap();
        assert_ne!(a.name, b.name);
        assert!(a.name.starts_with(&d));
        assert!(!a.name.exists(), "unlinked right after open");
        // The level directories were made.
        assert!(a.name.parent().unwrap().is_dir());
        a.append(b"hello ").unwrap();
        a.append(b"world").unwrap();
        b.append(b"x").unwrap();
        assert_eq!(a.offset, 11);
        let mut s = String::new();
        (&a.file).read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello world");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_taken_number_is_skipped_and_persistent_files_stay() {
        let d = tmp("collide");
        let p = TempPath::new(d.clone());
        let f = TempFile::create(&p, true).unwrap();
        assert!(f.name.exists());
        // Make the next numbers taken: creation moves past them.
        let next = NUMBER.with(|n| n.get());
        for k in 1..4 {
            std::fs::write(p.file_name(next + k), b"").unwrap();
        }
        let g = TempFile::create(&p, true).unwrap();
        assert!(g.name.exists());
        assert_ne!(g.name, p.file_name(next + 1));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_unwritable_directory_is_open_failed() {
        let p = TempPath::new("/proc/gyre-no-such-dir/x".into());
        let e = TempFile::create(&p, false).unwrap_err();
        assert!(matches!(e.call, "mkdir()" | "open()"), "{e:?}");
    }
}
