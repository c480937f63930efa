//! The error log in nginx's format, behind the `log` facade:
//! `2026/11/29 22:14:45 [error] 1234#0: message`.
//!
//! It writes to stderr until a file is opened (nginx does the same before its
//! error log is open), and the file can be reopened in place for logrotate
//! (`USR1`). Each record is one write(2) of one line, so lines from several
//! processes appending to one file do not interleave.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// nginx's level names, for `error_log FILE LEVEL`.
pub fn parse_level(s: &str) -> Option<LevelFilter> {
    Some(match s {
        "debug" => LevelFilter::Trace,
        "info" | "notice" => LevelFilter::Info,
        "warn" => LevelFilter::Warn,
        "error" | "crit" | "alert" | "emerg" => LevelFilter::Error,
        _ => return None,
    })
}

fn level_name(l: Level) -> &'static str {
    match l {
        Level::Error => "error",
        Level::Warn => "warn",
        Level::Info => "notice",
        Level::Debug => "info",
        Level::Trace => "debug",
    }
}

struct Sink {
    path: Option<PathBuf>,
    file: Option<File>,
}

struct ErrorLog {
    sink: Mutex<Sink>,
}

static LOGGER: OnceLock<ErrorLog> = OnceLock::new();

fn logger() -> &'static ErrorLog {
    LOGGER.get_or_init(|| ErrorLog {
        sink: Mutex::new(Sink {
            path: None,
            file: None,
        }),
    })
}

/// Installs the error log (writing to stderr) at `level`. Idempotent.
pub fn init(level: LevelFilter) {
    let _ = log::set_logger(logger());
    log::set_max_level(level);
}

/// Directs the log to `path` (appending), or back to stderr with None.
pub fn open(path: Option<&Path>) -> std::io::Result<()> {
    let file = match path {
        Some(p) => Some(OpenOptions::new().create(true).append(true).open(p)?),
        None => None,
    };
    let mut s = logger().sink.lock().unwrap_or_else(|e| e.into_inner());
    s.path = path.map(Path::to_path_buf);
    s.file = file;
    Ok(())
}

/// Reopens the log file (after logrotate moved it away).
pub fn reopen() -> std::io::Result<()> {
    let path = {
        let s = logger().sink.lock().unwrap_or_else(|e| e.into_inner());
        s.path.clone()
    };
    open(path.as_deref())
}

/// nginx's error-log timestamp, in UTC: `YYYY/MM/DD HH:MM:SS`.
fn timestamp(out: &mut String) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let t = crate::event::clock::CivilTime::from_unix(secs);
    use std::fmt::Write as _;
    let _ = write!(
        out,
        "{}/{:02}/{:02} {:02}:{:02}:{:02}",
        t.year, t.month, t.day, t.hour, t.min, t.sec
    );
}

impl Log for ErrorLog {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let mut line = String::with_capacity(128);
        timestamp(&mut line);
        use std::fmt::Write as _;
        let _ = writeln!(
            line,
            " [{}] {}#0: {}",
            level_name(r.level()),
            std::process::id(),
            r.args()
        );
        let mut s = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        match s.file.as_mut() {
            Some(f) => {
                let _ = f.write_all(line.as_bytes());
            }
            None => {
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
        }
    }

    fn flush(&self) {}
}

/// Applies the configuration's first `error_log`: its target and level.
pub fn configure(logs: &[crate::conf::ErrorLog]) -> std::io::Result<()> {
    use crate::conf::{LogLevel, LogTarget};
    let Some(first) = logs.first() else {
        return Ok(());
    };
    let level = match first.level {
        LogLevel::Emerg | LogLevel::Alert | LogLevel::Crit | LogLevel::Error => LevelFilter::Error,
        LogLevel::Warn => LevelFilter::Warn,
        LogLevel::Notice | LogLevel::Info => LevelFilter::Info,
        LogLevel::Debug => LevelFilter::Trace,
    };
    match &first.target {
        LogTarget::Stderr => open(None)?,
        LogTarget::File(p) => open(Some(p)).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "open() \"{}\" failed ({})",
                    p.display(),
                    crate::sys_error_text(&e)
                ),
            )
        })?,
    }
    init(level);
    Ok(())
}
