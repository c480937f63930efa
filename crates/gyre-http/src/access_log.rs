//! The access log in nginx's `combined` format:
//! `$remote_addr - $remote_user [$time_local] "$request" $status
//! $body_bytes_sent "$http_referer" "$http_user_agent"`.
//!
//! Lines are buffered per worker and written in one append when the buffer
//! fills or at least once a second (the glue's time event calls
//! [`AccessLog::flush`]), so logging costs no system call per request.
//! Lines are formatted by hand (the time once a second), without `fmt`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::response::push_decimal;

/// Flush once this much is buffered.
const BUFFER: usize = 32 * 1024;

/// One request, as the log line needs it.
pub struct Entry<'a> {
    /// The client's address (`-` when unknown).
    pub remote_addr: Option<IpAddr>,
    pub unix_secs: u64,
    pub request_line: &'a [u8],
    pub status: u16,
    pub body_bytes_sent: u64,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
    /// `$remote_user` (`-` when none).
    pub remote_user: Option<&'a [u8]>,
}

/// A buffered access-log file.
pub struct AccessLog {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    /// `$time_local` of `time_secs`, formatted once per second.
    time_secs: u64,
    time_text: Vec<u8>,
}

impl AccessLog {
    pub fn open(path: &Path) -> std::io::Result<AccessLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(AccessLog {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(BUFFER),
            time_secs: u64::MAX,
            time_text: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a line made by a `log_format` (newline included).
    pub fn write_line(&mut self, line: &[u8]) {
        self.buf.extend_from_slice(line);
        if self.buf.len() >= BUFFER {
            self.flush();
        }
    }

    pub fn log(&mut self, e: &Entry<'_>) {
        if e.unix_secs != self.time_secs {
            self.time_secs = e.unix_secs;
            self.time_text.clear();
            time_local(e.unix_secs, &mut self.time_text);
        }
        format_line(e, &self.time_text, &mut self.buf);
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
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let plain = |b: u8| b != b'"' && b != b'\\' && (0x20..0x7f).contains(&b);
    let mut rest = s;
    while !rest.is_empty() {
        let run = rest.iter().position(|&b| !plain(b)).unwrap_or(rest.len());
        out.extend_from_slice(&rest[..run]);
        if let Some(&b) = rest.get(run) {
            out.extend_from_slice(&[
                b'\\',
                b'x',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]);
            rest = &rest[run + 1..];
        } else {
            break;
        }
    }
}

fn two_digits(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(&[b'0' + (n / 10 % 10) as u8, b'0' + (n % 10) as u8]);
}

/// `29/Nov/2026:22:35:13 +0000` (UTC).
pub fn time_local(secs: u64, out: &mut Vec<u8>) {
    let t = gyre_core::event::clock::CivilTime::from_unix(secs);
    two_digits(out, t.day);
    out.push(b'/');
    out.extend_from_slice(t.month_name().as_bytes());
    out.push(b'/');
    push_decimal(out, t.year.max(0) as u64);
    out.push(b':');
    two_digits(out, t.hour);
    out.push(b':');
    two_digits(out, t.min);
    out.push(b':');
    two_digits(out, t.sec);
    out.extend_from_slice(b" +0000");
}

/// `$remote_addr`.
fn remote_addr(out: &mut Vec<u8>, addr: Option<IpAddr>) {
    match addr {
        Some(IpAddr::V4(a)) => {
            for (i, o) in a.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                push_decimal(out, u64::from(o));
            }
        }
        Some(a @ IpAddr::V6(_)) => {
            let _ = write!(out, "{a}");
        }
        None => out.push(b'-'),
    }
}

/// One `combined` line, newline included.
pub fn format_combined(e: &Entry<'_>, out: &mut Vec<u8>) {
    let mut time = Vec::with_capacity(26);
    time_local(e.unix_secs, &mut time);
    format_line(e, &time, out);
}

/// [`format_combined`] with `$time_local` already formatted.
fn format_line(e: &Entry<'_>, time: &[u8], out: &mut Vec<u8>) {
    remote_addr(out, e.remote_addr);
    out.extend_from_slice(b" - ");
    match e.remote_user {
        Some(u) => escaped(out, u),
        None => out.push(b'-'),
    }
    out.extend_from_slice(b" [");
    out.extend_from_slice(time);
    out.extend_from_slice(b"] \"");
    escaped(out, e.request_line);
    out.extend_from_slice(b"\" ");
    push_decimal(out, u64::from(e.status));
    out.push(b' ');
    push_decimal(out, e.body_bytes_sent);
    out.extend_from_slice(b" \"");
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
                remote_addr: Some([127, 0, 0, 1].into()),
                unix_secs: 784_111_777,
                request_line: b"GET /a\"b HTTP/1.1",
                status: 200,
                body_bytes_sent: 612,
                referer: None,
                user_agent: Some(b"curl/7.88.1\x01\xff\\"),
                remote_user: None,
            },
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "127.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a\\x22b HTTP/1.1\" 200 612 \"-\" \"curl/7.88.1\\x01\\xFF\\x5C\"\n"
        );
    }
}
