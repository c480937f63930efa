//! The access log in nginx's `combined` format:
//! `$remote_addr - $remote_user [$time_local] "$request" $status
//! $body_bytes_sent "$http_referer" "$http_user_agent"`.
//!
//! Lines are buffered per worker and written in one append when the buffer
//! fills or at least once a second (the glue's time event calls
//! [`AccessLog::flush`]), so logging costs no system call per request.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Flush once this much is buffered.
const BUFFER: usize = 32 * 1024;

/// One request, as the log line needs it.
pub struct Entry<'a> {
    pub remote_addr: &'a str,
    pub unix_secs: u64,
    pub request_line: &'a [u8],
    pub status: u16,
    pub body_bytes_sent: u64,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
}

/// A buffered access-log file.
pub struct AccessLog {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
}

impl AccessLog {
    pub fn open(path: &Path) -> std::io::Result<AccessLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(AccessLog {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(BUFFER),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn log(&mut self, e: &Entry<'_>) {
        format_combined(e, &mut self.buf);
        if self.buf.len() >= BUFFER {
            self.flush();
        }
    }

    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Err(err) = self.file.write_all(&self.buf) {
            log::error!("write() to \"{}\" failed ({err})", self.path.display());
        }
        self.buf.clear();
    }

    /// Reopens the file (logrotate, USR1).
    pub fn reopen(&mut self) {
        self.flush();
        match OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
        {
            Ok(f) => self.file = f,
            Err(err) => log::error!("open() \"{}\" failed ({err})", self.path.display()),
        }
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Appends `s`, escaping bytes that would break the line as nginx does
/// (`\xHH` for `"`, `\`, control and non-ASCII bytes).
fn escaped(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(out, "\\x{b:02X}");
        } else {
            out.push(b);
        }
    }
}

/// `29/Nov/2026:22:35:13 +0000` (UTC).
pub fn time_local(secs: u64, out: &mut Vec<u8>) {
    let t = gyre_core::event::clock::CivilTime::from_unix(secs);
    let _ = write!(
        out,
        "{:02}/{}/{}:{:02}:{:02}:{:02} +0000",
        t.day,
        t.month_name(),
        t.year,
        t.hour,
        t.min,
        t.sec
    );
}

/// One `combined` line, newline included.
pub fn format_combined(e: &Entry<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(e.remote_addr.as_bytes());
    out.extend_from_slice(b" - - [");
    time_local(e.unix_secs, out);
    out.extend_from_slice(b"] \"");
    escaped(out, e.request_line);
    let _ = write!(out, "\" {} {} \"", e.status, e.body_bytes_sent);
    match e.referer {
        Some(r) => escaped(out, r),
        None => out.push(b'-'),
    }
    out.extend_from_slice(b"\" \"");
    match e.user_agent {
        Some(u) => escaped(out, u),
        None => out.push(b'-'),
    }
    out.extend_from_slice(b"\"\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_line() {
        let mut out = Vec::new();
        format_combined(
            &Entry {
                remote_addr: "127.0.0.1",
                unix_secs: 784_111_777,
                request_line: b"GET /a\"b HTTP/1.1",
                status: 200,
                body_bytes_sent: 612,
                referer: None,
                user_agent: Some(b"curl/7.88.1"),
            },
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "127.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a\\x22b HTTP/1.1\" 200 612 \"-\" \"curl/7.88.1\"\n"
        );
    }
}
