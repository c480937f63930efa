//! The core's own directives: the main context (nginx's `ngx_core_module`)
//! and `events { }` (nginx's `ngx_events_module` and
//! `ngx_event_core_module`), with their typed configurations and nginx's
//! defaults.
//!
//! They are ordinary [`ModuleDef`]s, registered ahead of any protocol
//! module by [`load`](super::load); nothing in the walker is special-cased
//! for them.

use std::path::PathBuf;

use super::directive::{Args, Block, ConfCtx, Context, Directive, DirectiveSpec, ModuleDef};
use super::value;
use super::ConfError;

/// Severity threshold of an error log, most severe first (nginx's levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Emerg,
    Alert,
    Crit,
    Error,
    Warn,
    Notice,
    Info,
    Debug,
}

impl LogLevel {
    /// Parses nginx's level names.
    pub fn parse(s: &str) -> Option<LogLevel> {
        Some(match s {
            "emerg" => LogLevel::Emerg,
            "alert" => LogLevel::Alert,
            "crit" => LogLevel::Crit,
            "error" => LogLevel::Error,
            "warn" => LogLevel::Warn,
            "notice" => LogLevel::Notice,
            "info" => LogLevel::Info,
            "debug" => LogLevel::Debug,
            _ => return None,
        })
    }
}

/// Where an error log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    /// `error_log stderr`: the process's standard error.
    Stderr,
    /// A file, already resolved against the prefix.
    File(PathBuf),
}

/// One `error_log` directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorLog {
    pub target: LogTarget,
    pub level: LogLevel,
}

/// A CPU set, as the indices of the CPUs in it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuMask {
    pub cpus: Vec<usize>,
}

/// `worker_cpu_affinity`, stored for the process model to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuAffinity {
    /// `auto [mask]`: worker N is bound to the N-th CPU (of the mask).
    Auto(Option<CpuMask>),
    /// One mask per worker; the last repeats for extra workers.
    Masks(Vec<CpuMask>),
}

/// The main context's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreConf {
    /// Number of worker processes (1; `auto` = number of CPUs).
    pub worker_processes: usize,
    /// `RLIMIT_NOFILE` for workers; unset keeps the inherited limit.
    pub worker_rlimit_nofile: Option<u64>,
    /// PID file, resolved against the prefix (`logs/gyre.pid`).
    pub pid: PathBuf,
    /// Error logs, at least one (`logs/error.log error`).
    pub error_log: Vec<ErrorLog>,
    /// Detach from the terminal (on).
    pub daemon: bool,
    /// Run a master with workers rather than a single process (on).
    pub master_process: bool,
    /// Clock update interval in ms; 0 updates after every wake-up (0).
    pub timer_resolution: u64,
    /// How long a worker may linger on graceful shutdown, in ms (unset).
    pub worker_shutdown_timeout: Option<u64>,
    /// CPU binding of workers (unset).
    pub worker_cpu_affinity: Option<CpuAffinity>,
    /// `user NAME [GROUP]`: whom workers run as, when the master is root
    /// (unset: workers keep the master's user; see README).
    pub user: Option<WorkerUser>,
}

/// A `user` directive, looked up when read (as nginx does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// Default PID file, relative to the prefix.
pub const DEFAULT_PID: &str = "logs/gyre.pid";
/// Default error log, relative to the prefix.
pub const DEFAULT_ERROR_LOG: &str = "logs/error.log";

fn core_create() -> CoreConf {
    CoreConf {
        worker_processes: 1,
        worker_rlimit_nofile: None,
        // Empty until `init`: the default depends on the prefix.
        pid: PathBuf::new(),
        error_log: Vec::new(),
        daemon: true,
        master_process: true,
        timer_resolution: 0,
        worker_shutdown_timeout: None,
        worker_cpu_affinity: None,
        user: None,
    }
}

fn core_init(conf: &mut CoreConf, cx: &ConfCtx) -> Result<(), ConfError> {
    if conf.pid.as_os_str().is_empty() {
        conf.pid = cx.full_path(DEFAULT_PID);
    }
    if conf.error_log.is_empty() {
        conf.error_log.push(ErrorLog {
            target: LogTarget::File(cx.full_path(DEFAULT_ERROR_LOG)),
            level: LogLevel::Error,
        });
    }
    Ok(())
}

fn set_worker_processes(c: &mut CoreConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.worker_processes = if d.arg(0) == "auto" {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        // Zero workers would leave nobody to accept; refuse it here.
        value::parse_number(d.arg(0))
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| d.error("invalid value"))?
    };
    Ok(())
}

/// `user NAME [GROUP]` (nginx's `ngx_set_user`): the names are looked up
/// now; without root the directive means nothing and is ignored, as nginx
/// does (it says so at [warn]).
fn set_user(c: &mut CoreConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    use crate::sys::process as sysproc;
    if sysproc::geteuid() != 0 {
        return Ok(());
    }
    let name = d.arg(0);
    let ids = sysproc::lookup_user(name).ok_or_else(|| format!("getpwnam(\"{name}\") failed"))?;
    let group = if d.args.len() == 2 { d.arg(1) } else { name };
    let gid =
        sysproc::lookup_group(group).ok_or_else(|| format!("getgrnam(\"{group}\") failed"))?;
    c.user = Some(WorkerUser {
        name: name.to_string(),
        uid: ids.uid,
        gid,
    });
    Ok(())
}

/// `load_module FILE`: gyre cannot load nginx's shared-object modules, and
/// says it in the words of an nginx built without dynamic modules.
fn set_load_module(_: &mut CoreConf, _: &Directive, _: &ConfCtx) -> Result<(), String> {
    Err("\"load_module\" is not supported on this platform".into())
}

fn set_worker_rlimit_nofile(c: &mut CoreConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.worker_rlimit_nofile = Some(d.number(0)?);
    Ok(())
}

fn set_pid(c: &mut CoreConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.pid = cx.full_path(d.arg(0));
    Ok(())
}

fn set_error_log(c: &mut CoreConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.error_log.push(parse_error_log(d, cx)?);
    Ok(())
}

/// nginx's `debug_core` … `debug_stream` masks.
const DEBUG_MASKS: &[&str] = &[
    "debug_core",
    "debug_alloc",
    "debug_mutex",
    "debug_event",
    "debug_http",
    "debug_mail",
    "debug_stream",
];

/// One `error_log FILE|stderr [LEVEL]` line, in any context (the http
/// module keeps its levels' lines; see errlog's chains).
pub fn parse_error_log(d: &Directive, cx: &ConfCtx) -> Result<ErrorLog, String> {
    let target = match d.arg(0) {
        "stderr" => LogTarget::Stderr,
        file => LogTarget::File(cx.full_path(file)),
    };
    // nginx's ngx_log_set_levels: one level, or debug_* masks (which
    // mean debug here: gyre has no per-module debug switches).
    let mut level = None;
    for name in d.args.iter().skip(1) {
        let l = match LogLevel::parse(name) {
            Some(l) => l,
            None if DEBUG_MASKS.contains(&name.as_str()) => LogLevel::Debug,
            None => return Err(format!("invalid log level \"{name}\"")),
        };
        if level.is_some_and(|prev| prev != LogLevel::Debug || l != LogLevel::Debug) {
            return Err(format!("duplicate log level \"{name}\""));
        }
        level = Some(l);
    }
    let level = level.unwrap_or(LogLevel::Error);
    Ok(ErrorLog { target, level })
}

fn set_daemon(c: &mut CoreConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.daemon = d.flag()?;
    Ok(())
}

fn set_master_process(c: &mut CoreConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.master_process = d.flag()?;
    Ok(())
}

fn set_timer_resolution(c: &mut CoreConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.timer_resolution = d.msec(0)?;
    Ok(())
}

fn set_worker_shutdown_timeout(c: &mut CoreConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.worker_shutdown_timeout = Some(d.msec(0)?);
    Ok(())
}

/// `CPU_SETSIZE` on Linux: the most CPUs a mask can name.
const MAX_CPUS: usize = 1024;

fn parse_cpu_mask(mask: &str) -> Result<CpuMask, String> {
    if mask.len() > MAX_CPUS {
        return Err(format!(
            "\"worker_cpu_affinity\" supports up to {MAX_CPUS} CPUs only"
        ));
    }
    let mut cpus = Vec::new();
    // The rightmost digit is CPU 0, as in nginx.
    for (cpu, ch) in mask.chars().rev().enumerate() {
        match ch {
            '1' => cpus.push(cpu),
            '0' => {}
            _ => {
                return Err(format!(
                    "invalid character \"{ch}\" in \"worker_cpu_affinity\""
                ))
            }
        }
    }
    cpus.sort_unstable();
    Ok(CpuMask { cpus })
}

fn set_worker_cpu_affinity(c: &mut CoreConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.worker_cpu_affinity = Some(if d.arg(0) == "auto" {
        match d.args.len() {
            1 => CpuAffinity::Auto(None),
            2 => CpuAffinity::Auto(Some(parse_cpu_mask(d.arg(1))?)),
            _ => {
                return Err(format!(
                    "invalid number of arguments in \"{}\" directive",
                    d.name
                ))
            }
        }
    } else {
        CpuAffinity::Masks(
            d.args
                .iter()
                .map(|m| parse_cpu_mask(m))
                .collect::<Result<_, _>>()?,
        )
    });
    Ok(())
}

const CORE_DIRECTIVES: &[DirectiveSpec<CoreConf>] = &[
    DirectiveSpec::new("user", Context::MAIN, Args::TAKE12, set_user),
    DirectiveSpec::multi("load_module", Context::MAIN, Args::TAKE1, set_load_module),
    DirectiveSpec::new(
        "worker_processes",
        Context::MAIN,
        Args::TAKE1,
        set_worker_processes,
    ),
    DirectiveSpec::new(
        "worker_rlimit_nofile",
        Context::MAIN,
        Args::TAKE1,
        set_worker_rlimit_nofile,
    ),
    DirectiveSpec::new("pid", Context::MAIN, Args::TAKE1, set_pid),
    DirectiveSpec::multi("error_log", Context::MAIN, Args::ONE_MORE, set_error_log),
    DirectiveSpec::new("daemon", Context::MAIN, Args::FLAG, set_daemon),
    DirectiveSpec::new(
        "master_process",
        Context::MAIN,
        Args::FLAG,
        set_master_process,
    ),
    DirectiveSpec::new(
        "timer_resolution",
        Context::MAIN,
        Args::TAKE1,
        set_timer_resolution,
    ),
    DirectiveSpec::new(
        "worker_shutdown_timeout",
        Context::MAIN,
        Args::TAKE1,
        set_worker_shutdown_timeout,
    ),
    DirectiveSpec::new(
        "worker_cpu_affinity",
        Context::MAIN,
        Args::ONE_MORE,
        set_worker_cpu_affinity,
    ),
];

/// The main-context directives (`include` is handled by the parser).
pub static CORE_MODULE: ModuleDef<CoreConf> = ModuleDef {
    name: "core",
    directives: CORE_DIRECTIVES,
    create_conf: core_create,
    init_conf: core_init,
};

/// The multiplexing interface workers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventMethod {
    Epoll,
    Poll,
}

impl EventMethod {
    /// epoll where it exists, poll elsewhere, as nginx picks the best
    /// compiled-in method.
    pub const DEFAULT: EventMethod = if cfg!(any(target_os = "linux", target_os = "android")) {
        EventMethod::Epoll
    } else {
        EventMethod::Poll
    };
}

/// The `events { }` configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsConf {
    /// Connections per worker, listeners included (512).
    pub worker_connections: usize,
    /// `use` (epoll on Linux).
    pub method: EventMethod,
    /// Accept every pending connection per readiness event (off).
    pub multi_accept: bool,
    /// Serialize accepts across workers with a shared lock (off).
    pub accept_mutex: bool,
    /// How long a worker waits before retrying the accept mutex, ms (500).
    pub accept_mutex_delay: u64,
    /// Events fetched per `epoll_wait` (512).
    pub epoll_events: usize,
    /// gyre's `coalesce on|off` (on): while events keep coming, wait with a
    /// short sleep off the sockets' wait queues instead of blocking, so
    /// clients do not pay for waking the worker (event/coalesce.rs).
    pub coalesce: bool,
    /// Whether `events { }` was seen: nginx refuses to start without it.
    present: bool,
}

fn events_create() -> EventsConf {
    EventsConf {
        worker_connections: 512,
        method: EventMethod::DEFAULT,
        multi_accept: false,
        accept_mutex: false,
        accept_mutex_delay: 500,
        epoll_events: 512,
        coalesce: true,
        present: false,
    }
}

fn events_init(conf: &mut EventsConf, _: &ConfCtx) -> Result<(), ConfError> {
    if !conf.present {
        return Err(ConfError::new("no \"events\" section in configuration"));
    }
    Ok(())
}

fn set_events(c: &mut EventsConf, _: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.present = true;
    Ok(())
}

fn set_worker_connections(c: &mut EventsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.worker_connections = value::parse_number(d.arg(0))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("invalid number \"{}\"", d.arg(0)))?;
    Ok(())
}

fn set_use(c: &mut EventsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.method = match d.arg(0) {
        "epoll" if EventMethod::DEFAULT == EventMethod::Epoll => EventMethod::Epoll,
        "poll" => EventMethod::Poll,
        other => return Err(format!("invalid event type \"{other}\"")),
    };
    Ok(())
}

fn set_multi_accept(c: &mut EventsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.multi_accept = d.flag()?;
    Ok(())
}

fn set_accept_mutex(c: &mut EventsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.accept_mutex = d.flag()?;
    Ok(())
}

fn set_accept_mutex_delay(c: &mut EventsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.accept_mutex_delay = d.msec(0)?;
    Ok(())
}

fn set_coalesce(c: &mut EventsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.coalesce = d.flag()?;
    Ok(())
}

fn set_epoll_events(c: &mut EventsConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    // epoll_wait(2) refuses a zero-sized event array.
    c.epoll_events = value::parse_number(d.arg(0))
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| d.error("invalid number"))?;
    Ok(())
}

const EVENTS_DIRECTIVES: &[DirectiveSpec<EventsConf>] = &[
    DirectiveSpec::block(
        "events",
        Context::MAIN,
        Args::NOARGS,
        Block::Context(Context::EVENTS),
        false,
        set_events,
    ),
    DirectiveSpec::new(
        "worker_connections",
        Context::EVENTS,
        Args::TAKE1,
        set_worker_connections,
    ),
    DirectiveSpec::new("use", Context::EVENTS, Args::TAKE1, set_use),
    DirectiveSpec::new(
        "multi_accept",
        Context::EVENTS,
        Args::FLAG,
        set_multi_accept,
    ),
    DirectiveSpec::new(
        "accept_mutex",
        Context::EVENTS,
        Args::FLAG,
        set_accept_mutex,
    ),
    DirectiveSpec::new(
        "accept_mutex_delay",
        Context::EVENTS,
        Args::TAKE1,
        set_accept_mutex_delay,
    ),
    DirectiveSpec::new(
        "epoll_events",
        Context::EVENTS,
        Args::TAKE1,
        set_epoll_events,
    ),
    DirectiveSpec::new("coalesce", Context::EVENTS, Args::FLAG, set_coalesce),
];

/// `events { }` and the directives inside it.
pub static EVENTS_MODULE: ModuleDef<EventsConf> = ModuleDef {
    name: "events",
    directives: EVENTS_DIRECTIVES,
    create_conf: events_create,
    init_conf: events_init,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_masks() {
        assert_eq!(parse_cpu_mask("0101").unwrap().cpus, vec![0, 2]);
        assert_eq!(parse_cpu_mask("1000").unwrap().cpus, vec![3]);
        assert_eq!(
            parse_cpu_mask("01x1").unwrap_err(),
            "invalid character \"x\" in \"worker_cpu_affinity\""
        );
        assert_eq!(
            parse_cpu_mask(&"1".repeat(1025)).unwrap_err(),
            "\"worker_cpu_affinity\" supports up to 1024 CPUs only"
        );
    }

    #[test]
    fn log_levels() {
        assert_eq!(LogLevel::parse("warn"), Some(LogLevel::Warn));
        assert_eq!(LogLevel::parse("loud"), None);
        assert!(LogLevel::Emerg < LogLevel::Debug);
    }
}
