//! Crash-safe dump files (Redis's `rdbSave`): write to `temp-<pid>.rdb` in
//! the target directory, fsync it, rename it over the dump file, fsync the
//! directory. A crash at any moment leaves the previous complete dump (or
//! none), never a torn one; a failed save removes its temp file.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{crc64, OP_EOF};

/// A dump being written.
pub struct DumpFile {
    file: io::BufWriter<File>,
    temp: PathBuf,
    target: PathBuf,
    crc: u64,
    pub written: u64,
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

    pub fn write(&mut self, b: &[u8]) -> io::Result<()> {
        if self.checksum {
            self.crc = crc64::crc64(self.crc, b);
        }
        self.written += b.len() as u64;
        self.file.write_all(b)
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
