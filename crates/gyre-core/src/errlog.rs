//! The error log in nginx's format, behind the `log` facade:
//! `2026/11/29 22:14:45 [error] 1234#1234: message`, or, for a line about a
//! connection or request, `… 1234#1234: *7 message while ACTION, client: …,
//! server: …, request: "…", host: "…"` (see [`LogContext`] and [`log_ctx!`],
//! nginx's `log->handler`).
//!
//! nginx has eight levels and `log` five; they map as [`ERROR`], [`WARN`],
//! [`NOTICE`], [`INFO`] and [`DEBUG`], and the three above error (crit,
//! alert, emerg) are `log`'s error level with a target naming them
//! ([`CRIT`], [`ALERT`], [`EMERG`]: `log::error!(target: errlog::ALERT, …)`),
//! so a module logs each message at nginx's level for it, the line shows
//! nginx's name, and `error_log FILE info` or `error_log FILE alert` shows
//! what nginx's would.
//!
//! It writes to stderr until a file is opened (nginx does the same before its
//! error log is open), and the file can be reopened in place for logrotate
//! (`USR1`). Each record is one write(2) of one line, so lines from several
//! processes appending to one file do not interleave.
//!
//! `error_log` in `http`, `server` and `location` (nginx's per-context logs,
//! `r->connection->log` set from the location's `error_log`) are [`LogChain`]s:
//! a line about a request or connection is routed by its [`LogContext`] to its
//! location's or server's chain, written to every log of it whose level lets
//! it through; any other line goes to the main log. Files are opened once per
//! path ([`open_chain_file`]) and reopened together on `USR1`.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// nginx's `error`, `crit`, `alert` and `emerg`.
pub const ERROR: Level = Level::Error;
/// nginx's `warn`.
pub const WARN: Level = Level::Warn;
/// nginx's `notice`.
pub const NOTICE: Level = Level::Info;
/// nginx's `info` (client mistakes and timeouts: `client timed out`).
pub const INFO: Level = Level::Debug;
/// nginx's `debug`.
pub const DEBUG: Level = Level::Trace;

/// nginx's level names, for `error_log FILE LEVEL`.
pub fn parse_level(s: &str) -> Option<LevelFilter> {
    Some(match s {
        "debug" => LevelFilter::Trace,
        "info" => LevelFilter::Debug,
        "notice" => LevelFilter::Info,
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

/// The main log's own level (the `log` facade's maximum may be higher
/// for a context log's sake).
static MAIN_LEVEL: AtomicU8 = AtomicU8::new(LEVEL_INFO);
/// The most verbose level of every context log made so far.
static CHAIN_LEVEL: AtomicU8 = AtomicU8::new(0);
const LEVEL_INFO: u8 = 3;

fn level_code(l: LevelFilter) -> u8 {
    l as usize as u8
}

fn level_from(code: u8) -> LevelFilter {
    match code {
        0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        4 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    }
}

fn apply_max_level() {
    let m = MAIN_LEVEL
        .load(Ordering::Relaxed)
        .max(CHAIN_LEVEL.load(Ordering::Relaxed));
    log::set_max_level(level_from(m));
}

/// Installs the error log (writing to stderr) at `level`. Idempotent.
pub fn init(level: LevelFilter) {
    let _ = log::set_logger(logger());
    MAIN_LEVEL.store(level_code(level), Ordering::Relaxed);
    apply_max_level();
}

/// A file a context log writes to, shared by every chain naming its path.
#[derive(Debug)]
pub struct ChainFile {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

/// Files of the context logs alive, for [`reopen`].
static CHAIN_FILES: Mutex<Vec<std::sync::Weak<ChainFile>>> = Mutex::new(Vec::new());

/// Opens `path` for appending, or shares the file another chain opened.
pub fn open_chain_file(path: &Path) -> std::io::Result<std::sync::Arc<ChainFile>> {
    let mut files = CHAIN_FILES.lock().unwrap_or_else(|e| e.into_inner());
    files.retain(|w| w.strong_count() > 0);
    if let Some(f) = files
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .find(|f| f.path == path)
    {
        return Ok(f);
    }
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    let f = std::sync::Arc::new(ChainFile {
        path: path.to_path_buf(),
        file: Mutex::new(Some(file)),
    });
    files.push(std::sync::Arc::downgrade(&f));
    Ok(f)
}

/// One log of a chain: where and from which level.
#[derive(Debug, Clone)]
pub struct ChainLog {
    /// None: standard error.
    file: Option<std::sync::Arc<ChainFile>>,
    level: LevelFilter,
    floor: u8,
}

/// The logs of one `http`, `server` or `location` level (all its
/// `error_log` lines).
pub type LogChain = std::sync::Arc<[ChainLog]>;

/// Opens the logs one level's `error_log` lines name (nginx opens them
/// while reading the configuration, so `-t` reports a path it cannot open),
/// and lets the `log` facade pass their levels.
pub fn make_chain(logs: &[crate::conf::ErrorLog]) -> Result<LogChain, String> {
    use crate::conf::LogTarget;
    let mut out = Vec::with_capacity(logs.len());
    for l in logs {
        let (level, floor) = filter_of(l.level);
        let file = match &l.target {
            LogTarget::Stderr => None,
            LogTarget::File(p) => Some(open_chain_file(p).map_err(|e| {
                format!(
                    "open() \"{}\" failed ({})",
                    p.display(),
                    crate::sys_error_text(&e)
                )
            })?),
        };
        CHAIN_LEVEL.fetch_max(level_code(level), Ordering::Relaxed);
        out.push(ChainLog { file, level, floor });
    }
    apply_max_level();
    Ok(out.into())
}

thread_local! {
    /// The chain the line being logged is routed to ([`Route`]).
    static ROUTE: std::cell::RefCell<Option<LogChain>> = const { std::cell::RefCell::new(None) };
}

/// Routes the lines logged while it lives to a context's chain (made by
/// [`log_ctx!`] from [`LogContext::chain`]).
pub struct Route(bool);

impl Route {
    pub fn new(chain: Option<&LogChain>) -> Route {
        match chain {
            Some(c) => {
                ROUTE.with(|r| *r.borrow_mut() = Some(c.clone()));
                Route(true)
            }
            None => Route(false),
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        if self.0 {
            ROUTE.with(|r| *r.borrow_mut() = None);
        }
    }
}

/// A record passes a log at `level` with crit/alert/emerg `floor`.
fn passes(r: &Record<'_>, level: LevelFilter, floor: u8) -> bool {
    if r.level() > level {
        return false;
    }
    let above = if r.level() == Level::Error {
        above_error(r.target())
    } else {
        0
    };
    above >= floor
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
    open(path.as_deref())?;
    let files: Vec<_> = {
        let files = CHAIN_FILES.lock().unwrap_or_else(|e| e.into_inner());
        files.iter().filter_map(std::sync::Weak::upgrade).collect()
    };
    for f in files {
        let file = OpenOptions::new().create(true).append(true).open(&f.path)?;
        *f.file.lock().unwrap_or_else(|e| e.into_inner()) = Some(file);
    }
    Ok(())
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
        let chain = ROUTE.with(|c| c.borrow().clone());
        match &chain {
            Some(c) => {
                if !c.iter().any(|l| passes(r, l.level, l.floor)) {
                    return;
                }
            }
            None => {
                let main = level_from(MAIN_LEVEL.load(Ordering::Relaxed));
                if !passes(r, main, ERROR_FLOOR.load(Ordering::Relaxed)) {
                    return;
                }
            }
        }
        let line = format_line(r);
        let Some(chain) = chain else {
            let mut s = self.sink.lock().unwrap_or_else(|e| e.into_inner());
            write_to(s.file.as_mut(), &line);
            return;
        };
        for l in chain.iter().filter(|l| passes(r, l.level, l.floor)) {
            match &l.file {
                Some(f) => {
                    let mut g = f.file.lock().unwrap_or_else(|e| e.into_inner());
                    write_to(g.as_mut(), &line);
                }
                None => write_to(None, &line),
            }
        }
    }

    fn flush(&self) {}
}

/// One record as nginx writes it, with its newline.
fn format_line(r: &Record<'_>) -> String {
    let mut line = String::with_capacity(128);
    timestamp(&mut line);
    use std::fmt::Write as _;
    let above = if r.level() == Level::Error {
        above_error(r.target())
    } else {
        0
    };
    let name = match above {
        1 => CRIT,
        2 => ALERT,
        3 => EMERG,
        _ => level_name(r.level()),
    };
    // nginx built with threads (Debian's) writes `PID#TID`; the line's
    // length limit counts them.
    let tid = rustix::thread::gettid().as_raw_nonzero();
    let _ = write!(line, " [{name}] {}#{tid}: {}", std::process::id(), r.args());
    cap(&mut line);
    line.push('\n');
    line
}

/// One write(2) of a whole line, to the file or to stderr.
fn write_to(file: Option<&mut File>, line: &str) {
    match file {
        Some(f) => {
            let _ = f.write_all(line.as_bytes());
        }
        None => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

/// nginx's `NGX_MAX_ERROR_STR`: a line is at most this many bytes with
/// its newline; longer ones are cut (a 414's request line, a long header
/// line quoted), as nginx cuts them.
pub const MAX_LINE: usize = 2048;

fn cap(line: &mut String) {
    if line.len() >= MAX_LINE {
        let mut end = MAX_LINE - 1;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
    }
}

/// The target that marks an [`ERROR`] record as nginx's `[crit]` (a
/// failure of the server's own, such as an unexpected errno from open()):
/// `log_ctx!(crit, &cx, "…")`.
pub const CRIT: &str = "crit";
/// nginx's `[alert]` (a process that died on a signal, a failed system
/// call the server cannot do without).
pub const ALERT: &str = "alert";
/// nginx's `[emerg]`.
pub const EMERG: &str = "emerg";

/// How far above error an error record's target puts it: 0 error, 1 crit,
/// 2 alert, 3 emerg.
fn above_error(target: &str) -> u8 {
    match target {
        CRIT => 1,
        ALERT => 2,
        EMERG => 3,
        _ => 0,
    }
}

/// The least [`above_error`] an error record needs to be written (the
/// `error_log` level when it is crit, alert or emerg).
static ERROR_FLOOR: AtomicU8 = AtomicU8::new(0);

/// What a line about a connection or request adds to its message (nginx's
/// `log->handler`, e.g. `ngx_http_log_error`): the connection number
/// before it, what was being done, and who and what it was about after it.
/// Every protocol implements it once for its connection or request, and
/// every message about one goes through [`log_ctx!`], so the shape is the
/// same for all of them, as fail2ban's and log shippers' patterns expect.
pub trait LogContext {
    /// nginx's `*N`: the connection's number, the one `$connection` shows.
    fn number(&self) -> u64;
    /// nginx's `while …` (`reading client request headers`), if any.
    fn action(&self) -> Option<&str> {
        None
    }
    /// Appends the context after the message, each part with its leading
    /// `, ` (`, client: 127.0.0.1, server: localhost, request: "GET / HTTP/1.1"`).
    fn context(&self, out: &mut dyn fmt::Write) -> fmt::Result;
    /// The `error_log`s of the line's location or server (None: the main
    /// log).
    fn chain(&self) -> Option<&LogChain> {
        None
    }
}

/// A message with its [`LogContext`], formatted only when the line is
/// written (nothing is built while the level is off).
pub struct WithContext<'a, C: ?Sized>(pub &'a C, pub fmt::Arguments<'a>);

impl<C: LogContext + ?Sized> fmt::Display for WithContext<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "*{} {}", self.0.number(), self.1)?;
        if let Some(a) = self.0.action() {
            write!(f, " while {a}")?;
        }
        self.0.context(f)
    }
}

/// Logs a message about a connection or request at an nginx level, with
/// its context: `log_ctx!(errlog::INFO, &ctx, "client timed out ({e})")`.
#[macro_export]
macro_rules! log_ctx {
    (alert, $ctx:expr, $($arg:tt)+) => {
        $crate::log_ctx!(@go $crate::errlog::ALERT, $crate::errlog::ERROR, $ctx, $($arg)+)
    };
    (crit, $ctx:expr, $($arg:tt)+) => {
        $crate::log_ctx!(@go $crate::errlog::CRIT, $crate::errlog::ERROR, $ctx, $($arg)+)
    };
    (@go $target:expr, $level:expr, $ctx:expr, $($arg:tt)+) => {
        if $level <= $crate::errlog::__log::max_level() {
            let cx = $ctx;
            let _route = $crate::errlog::Route::new($crate::errlog::LogContext::chain(cx));
            $crate::errlog::__log::log!(
                target: $target,
                $level,
                "{}",
                $crate::errlog::WithContext(cx, format_args!($($arg)+))
            )
        }
    };
    ($level:expr, $ctx:expr, $($arg:tt)+) => {
        $crate::log_ctx!(@go module_path!(), $level, $ctx, $($arg)+)
    };
}

#[doc(hidden)]
pub use log as __log;

/// The `log` filter and the crit/alert/emerg floor of an nginx level.
fn filter_of(l: crate::conf::LogLevel) -> (LevelFilter, u8) {
    use crate::conf::LogLevel;
    let floor = match l {
        LogLevel::Crit => 1,
        LogLevel::Alert => 2,
        LogLevel::Emerg => 3,
        _ => 0,
    };
    let level = match l {
        LogLevel::Emerg | LogLevel::Alert | LogLevel::Crit | LogLevel::Error => LevelFilter::Error,
        LogLevel::Warn => LevelFilter::Warn,
        LogLevel::Notice => LevelFilter::Info,
        LogLevel::Info => LevelFilter::Debug,
        LogLevel::Debug => LevelFilter::Trace,
    };
    (level, floor)
}

/// Applies the configuration's first `error_log`: its target and level.
pub fn configure(logs: &[crate::conf::ErrorLog]) -> std::io::Result<()> {
    use crate::conf::LogTarget;
    let Some(first) = logs.first() else {
        return Ok(());
    };
    let (level, floor) = filter_of(first.level);
    ERROR_FLOOR.store(floor, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Req {
        action: Option<&'static str>,
    }

    impl LogContext for Req {
        fn number(&self) -> u64 {
            7
        }
        fn action(&self) -> Option<&str> {
            self.action
        }
        fn context(&self, out: &mut dyn fmt::Write) -> fmt::Result {
            write!(
                out,
                ", client: 127.0.0.1, server: localhost, request: \"GET /x HTTP/1.1\", host: \"localhost\""
            )
        }
    }

    #[test]
    fn a_line_about_a_request_has_nginx_shape() {
        let r = Req { action: None };
        let e = "2: No such file or directory";
        let line = WithContext(&r, format_args!("open() \"/srv/x\" failed ({e})")).to_string();
        assert_eq!(
            line,
            "*7 open() \"/srv/x\" failed (2: No such file or directory), client: 127.0.0.1, \
             server: localhost, request: \"GET /x HTTP/1.1\", host: \"localhost\""
        );
        let r = Req {
            action: Some("reading client request headers"),
        };
        let line = WithContext(&r, format_args!("client timed out")).to_string();
        assert!(
            line.starts_with("*7 client timed out while reading client request headers, client: ")
        );
    }

    #[test]
    fn long_lines_are_cut_as_nginx_cuts_them() {
        let mut l = "a".repeat(5000);
        cap(&mut l);
        assert_eq!(l.len(), MAX_LINE - 1);
        // Never inside a character.
        let mut l = format!("{}é", "a".repeat(MAX_LINE - 2));
        cap(&mut l);
        assert_eq!(l.len(), MAX_LINE - 2);
        let mut l = "short".to_string();
        cap(&mut l);
        assert_eq!(l, "short");
    }

    #[test]
    fn levels_map_to_nginx_names_and_filters() {
        for (l, name) in [
            (ERROR, "error"),
            (WARN, "warn"),
            (NOTICE, "notice"),
            (INFO, "info"),
            (DEBUG, "debug"),
        ] {
            assert_eq!(level_name(l), name);
            let f = parse_level(name).expect("a level");
            // `error_log FILE LEVEL` shows that level and the ones above it.
            assert!(l <= f, "{name}");
        }
        let notice = parse_level("notice").expect("notice");
        assert!(INFO > notice, "info lines are not shown at notice");
        for (t, n) in [(CRIT, 1), (ALERT, 2), (EMERG, 3), ("gyre_http::x", 0)] {
            assert_eq!(above_error(t), n);
        }
    }
}
