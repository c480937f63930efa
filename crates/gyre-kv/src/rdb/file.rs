//! Crash-safe dump files (Redis's `rdbSave`): write to `temp-<pid>.rdb` in
//! the target directory, fsync it, rename it over the dump file, fsync the
//! directory. A crash at any moment leaves the previous complete dump (or
//! none), never a torn one; a failed save removes its temp file.
//!
//! With `rdb-save-incremental-fsync` (and `aof-rewrite-incremental-fsync`
//! for an AOF base) the file is fdatasynced every [`AUTOSYNC_BYTES`], as
//! Redis's `rioSetAutoSync`: the page cache never holds the whole dump
//! for one final fsync. Measured on this project's VM (ext4 on virtio):
//! the final fsync of a 100 MB dump stalled the whole machine's vCPUs,
//! the kv loop included, for 15-30 ms after the writer thread had done
//! its work (a GET waited that long at the end of every BGSAVE; none did
//! with the dump on tmpfs).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{crc64, OP_EOF};

/// Redis's `REDIS_AUTOSYNC_BYTES`.
pub const AUTOSYNC_BYTES: u64 = 4 << 20;

/// A dump being written.
pub struct DumpFile {
    file: io::BufWriter<File>,
    temp: PathBuf,
    target: PathBuf,
    crc: u64,
    pub written: u64,
    /// Bytes written since the last fdatasync; `autosync` 0: only the
    /// final fsync.
    unsynced: u64,
    autosync: u64,
    checksum: bool,
    /// No EOF opcode and CRC footer (an AOF base of commands).
    raw: bool,
}

impl DumpFile {
    /// Start a dump that will become `target`; `tag` names the temp file
    /// (Redis: the pid of the process saving).
    pub fn create(target: &Path, tag: &str, checksum: bool) -> io::Result<DumpFile> {
        let dir = target.parent().unwrap_or(Path::new("."));
        let temp = dir.join(format!("temp-{tag}.rdb"));
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        Ok(DumpFile {
            file: io::BufWriter::with_capacity(64 * 1024, file),
            temp,
            target: target.to_path_buf(),
            crc: 0,
            written: 0,
            unsynced: 0,
            autosync: 0,
            checksum,
            raw: false,
        })
    }

    /// A file of commands, not an RDB: [`DumpFile::commit`] adds no footer.
    pub fn raw(mut self) -> DumpFile {
        self.raw = true;
        self.checksum = false;
        self
    }

    /// fdatasync every [`AUTOSYNC_BYTES`] written (`on`), as Redis's
    /// incremental fsync settings.
    pub fn incremental_fsync(mut self, on: bool) -> DumpFile {
        self.autosync = if on { AUTOSYNC_BYTES } else { 0 };
        self
    }

    pub fn write(&mut self, b: &[u8]) -> io::Result<()> {
        if self.checksum {
            self.crc = crc64::crc64(self.crc, b);
        }
        self.written += b.len() as u64;
        self.file.write_all(b)?;
        self.unsynced += b.len() as u64;
        if self.autosync > 0 && self.unsynced >= self.autosync {
            self.unsynced = 0;
            self.file.flush()?;
            self.file.get_ref().sync_data()?;
        }
        Ok(())
    }

    /// EOF opcode and CRC64 footer (zero with `rdbchecksum no`), then
    /// fsync, rename over the target, fsync the directory.
    pub fn commit(mut self) -> io::Result<u64> {
        if !self.raw {
            self.write(&[OP_EOF])?;
            let crc = if self.checksum { self.crc } else { 0 };
            self.file.write_all(&crc.to_le_bytes())?;
            self.written += 8;
        }
        let r = self.finish_inner();
        if r.is_err() {
            let _ = std::fs::remove_file(&self.temp);
        }
        r.map(|()| self.written)
    }

    fn finish_inner(&mut self) -> io::Result<()> {
        self.file.flush()?;
        self.file.get_ref().sync_all()?;
        std::fs::rename(&self.temp, &self.target)?;
        let dir = self.target.parent().unwrap_or(Path::new("."));
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        File::open(dir)?.sync_all()
    }

    /// Give up: remove the temp file.
    pub fn abort(self) {
        let _ = std::fs::remove_file(&self.temp);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// With incremental fsync the page cache holds at most
    /// [`AUTOSYNC_BYTES`] of the dump unsynced; the file is whole either way.
    #[test]
    fn incremental_fsync_syncs_every_4_mb_and_the_dump_is_whole() {
        let dir = std::env::temp_dir().join(format!("gyre-dumpfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for on in [false, true] {
            let target = dir.join(format!("d{on}.rdb"));
            let mut f = DumpFile::create(&target, "t", true)
                .unwrap()
                .incremental_fsync(on);
            let piece = vec![7u8; 1 << 20];
            for _ in 0..9 {
                f.write(&piece).unwrap();
                assert!(f.unsynced < AUTOSYNC_BYTES || !on);
            }
            assert_eq!(f.unsynced, if on { 1 << 20 } else { 9 << 20 });
            assert_eq!(f.commit().unwrap(), (9 << 20) + 9);
            let got = std::fs::read(&target).unwrap();
            assert_eq!(got.len(), (9 << 20) + 9);
            assert_eq!(got[9 << 20], OP_EOF);
            assert!(!dir.join("temp-t.rdb").exists());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
