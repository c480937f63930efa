//! One worker process (nginx's `ngx_worker_process_cycle`).
//!
//! After fork a worker creates its own multiplexer (nothing event-related is
//! inherited), applies `worker_rlimit_nofile` and CPU affinity, takes its
//! listeners, lets the [`App`](super::App) put protocols on them, and runs the
//! loop. Signals only set flags; the handler also pokes the loop's notify fd so
//! the loop acts on them at once:
//!
//! - TERM / INT: stop now (connections are closed by exit);
//! - QUIT: graceful: close the listeners, close idle keep-alive connections,
//!   let the rest finish, exit when only cancelable timers remain, or after
//!   `worker_shutdown_timeout`;
//! - USR1: reopen the error log and the files protocols registered with
//!   `Core::on_reopen` (access logs).

use std::io;

use crate::conf::{Conf, EventMethod};
use crate::conn::Listener;
use crate::event::{AcceptMutex, Backend, Core, CoreOptions, Next};
use crate::process::shm::SharedZone;
use crate::sys::process::{self as sysproc, Pid};
use crate::sys::signal::{self, SigSet, Signal};

use super::{App, Role, EXIT_FATAL};

/// The loop's settings from the configuration, for a cycle of `workers`
/// workers.
pub fn core_options(conf: &Conf, workers: usize) -> CoreOptions {
    let ev = &conf.events;
    CoreOptions {
        connections: ev.worker_connections,
        backend: match ev.method {
            EventMethod::Epoll => Backend::Epoll,
            EventMethod::Poll => Backend::Poll,
        },
        events: ev.epoll_events,
        multi_accept: ev.multi_accept,
        accept_mutex_delay: ev.accept_mutex_delay,
        timer_resolution: conf.core.timer_resolution,
        // Without the mutex, several workers on one socket are woken one at
        // a time (EPOLLEXCLUSIVE); reuseport sockets are per worker anyway.
        exclusive_accept: workers > 1 && !ev.accept_mutex,
        clock_offset: 0,
        coalesce: ev.coalesce,
    }
}

/// The accept mutex in the shared zone, locked with this worker's pid.
struct ShmAcceptMutex {
    zone: SharedZone,
    pid: Pid,
}

impl AcceptMutex for ShmAcceptMutex {
    fn try_lock(&mut self) -> bool {
        self.zone.accept_mutex().try_lock(self.pid)
    }
    fn unlock(&mut self) {
        self.zone.accept_mutex().unlock(self.pid);
    }
}

/// What one worker runs with.
pub struct WorkerParams<'a> {
    pub conf: &'a Conf,
    pub app: &'a dyn App,
    pub listeners: Vec<Listener>,
    pub zone: SharedZone,
    /// This worker's number, 0-based, or the singleton.
    pub role: Role,
    /// Workers in this cycle.
    pub workers: usize,
    /// Without a master (`master_process off`) the one process also serves
    /// the singleton's sockets.
    pub single_listeners: Vec<Listener>,
}

/// Runs a worker until it is told to stop; returns its exit code.
pub fn run(p: WorkerParams<'_>) -> i32 {
    signal::clear_pending();
    if let Err(e) = signal::set_mask(&SigSet::empty()) {
        log::error!(target: crate::errlog::ALERT, "sigprocmask() failed ({e})");
    }
    if let Some(n) = p.conf.core.worker_rlimit_nofile {
        if let Err(e) = sysproc::set_nofile_limit(n, n) {
            log::error!(target: crate::errlog::ALERT, "setrlimit(RLIMIT_NOFILE, {n}) failed ({e})");
        }
    }
    if let Role::Worker(i) = p.role {
        set_affinity(p.conf, i);
    }
    let mut p = p;
    let listeners = std::mem::take(&mut p.listeners);
    let single = std::mem::take(&mut p.single_listeners);
    // Without a master the one process also serves the singleton: like
    // nginx's single-process mode, it keeps its user.
    let drop_root = p.role != Role::Singleton && single.is_empty();
    match init(&p, listeners, single) {
        Ok(mut core) => {
            if drop_root {
                if let Err(code) = switch_user(p.conf) {
                    return code;
                }
            }
            let r = core.run();
            signal::set_notify_fd(None);
            match r {
                Ok(()) => {
                    log::info!("exit");
                    0
                }
                Err(e) => {
                    log::error!("event loop failed ({e})");
                    1
                }
            }
        }
        Err(e) => {
            log::error!("{e}");
            EXIT_FATAL
        }
    }
}

/// `user`: a worker gives up root once its sockets and log files are open
/// (nginx does it in `ngx_worker_process_init`, before its modules' init;
/// gyre's workers open their access logs in init, so it comes after).
fn switch_user(conf: &Conf) -> Result<(), i32> {
    let Some(u) = &conf.core.user else {
        return Ok(());
    };
    if sysproc::geteuid() != 0 {
        return Ok(());
    }
    sysproc::switch_user(&u.name, u.uid, u.gid).map_err(|(call, e)| {
        match call {
            "setgid" => log::error!("setgid({}) failed ({e})", u.gid),
            "initgroups" => log::error!("initgroups({}, {}) failed ({e})", u.name, u.gid),
            _ => log::error!("setuid({}) failed ({e})", u.uid),
        }
        EXIT_FATAL
    })
}

fn set_affinity(conf: &Conf, index: usize) {
    use crate::conf::CpuAffinity;
    let Some(aff) = &conf.core.worker_cpu_affinity else {
        return;
    };
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpus: Vec<usize> = match aff {
        CpuAffinity::Auto(None) => vec![index % ncpu],
        CpuAffinity::Auto(Some(m)) if !m.cpus.is_empty() => vec![m.cpus[index % m.cpus.len()]],
        CpuAffinity::Auto(Some(_)) => return,
        CpuAffinity::Masks(masks) => match masks.get(index).or(masks.last()) {
            Some(m) => m.cpus.clone(),
            None => return,
        },
    };
    if let Err(e) = sysproc::set_cpu_affinity_mask(&cpus) {
        log::error!(target: crate::errlog::ALERT, "sched_setaffinity() failed ({e})");
    }
}

/// `listeners` move into the loop: a graceful shutdown closes the last
/// copy of each in this process.
fn init(
    p: &WorkerParams<'_>,
    listeners: Vec<Listener>,
    single_listeners: Vec<Listener>,
) -> io::Result<Core> {
    let single = p.role == Role::Singleton;
    let opts = core_options(p.conf, if single { 1 } else { p.workers });
    let mut core = Core::new(opts)?;
    if !single {
        // stub_status counts the workers' (HTTP) connections.
        core.set_shared(p.zone.clone());
    }
    if !single && p.conf.events.accept_mutex && p.workers > 1 {
        core.set_accept_mutex(Box::new(ShmAcceptMutex {
            zone: p.zone.clone(),
            pid: sysproc::getpid(),
        }))?;
    }
    match p.role {
        Role::Worker(i) => p.app.init_worker(p.conf, &mut core, listeners, i)?,
        Role::Singleton => p.app.init_singleton(p.conf, &mut core, listeners)?,
    }
    if !single_listeners.is_empty() {
        p.app.init_singleton(p.conf, &mut core, single_listeners)?;
    }
    let notifier = core.notifier()?;
    signal::set_notify_fd(Some(notifier.raw_fd()));
    let shutdown_timeout = p.conf.core.worker_shutdown_timeout;
    core.on_notify(move |core| on_signals(core, shutdown_timeout));
    // A signal that arrived before the notify fd was set.
    on_signals(&mut core, shutdown_timeout);
    Ok(core)
}

/// Turns pending signal flags into loop actions.
fn on_signals(core: &mut Core, shutdown_timeout: Option<u64>) {
    if signal::take(Signal::Term) | signal::take(Signal::Int) {
        log::info!("exiting");
        core.stop();
    }
    if signal::take(Signal::Quit) && !core.is_exiting() {
        log::info!("gracefully shutting down");
        core.shutdown();
        if let Some(ms) = shutdown_timeout {
            core.create_time_event(ms, |core, _| {
                log::info!("worker shutdown timeout, closing connections");
                core.stop();
                Next::NoMore
            });
        }
    }
    if signal::take(Signal::Usr1) {
        if let Err(e) = crate::errlog::reopen() {
            log::error!("reopen of the error log failed ({e})");
        }
        log::info!("reopening logs");
        core.reopen_files();
    }
    // HUP reaches the singleton when a reload keeps it; a worker gets none
    // (a reload replaces it) and would run no hook.
    if signal::take(Signal::Hup) {
        core.reload_in_place();
    }
    // A worker ignores USR2, WINCH (they are the master's); ALRM is the
    // timer_resolution tick when set with setitimer, unused here.
    signal::take(Signal::Usr2);
    signal::take(Signal::Winch);
}
