//! The master process (nginx's `ngx_master_process_cycle`).
//!
//! The master binds every listener, creates the shared zone, forks the
//! workers, then waits in `sigsuspend` with the managed signals blocked
//! everywhere else, so a signal can only arrive inside the wait and none is
//! lost between checking the flags and waiting:
//!
//! - CHLD: reap; log how each worker ended; force-unlock the accept mutex a
//!   dead worker held; respawn a worker that died unexpectedly (unless it
//!   exited with [`EXIT_FATAL`]).
//! - TERM / INT: fast shutdown; workers still alive after a grace period
//!   get SIGKILL.
//! - QUIT: graceful shutdown of every worker.
//! - HUP: reload: re-read the configuration; on error log it and keep
//!   serving; otherwise keep unchanged listeners, bind new ones, close removed
//!   ones, start new workers, then gracefully stop the old ones.
//! - USR1: reopen the error log, in the master and every worker.
//! - USR2: binary upgrade: rename the pid file to `.oldbin` and start the
//!   (new) binary with the listening sockets inherited through the `GYRE`
//!   environment variable; both masters serve until the old one is stopped.
//! - WINCH: gracefully stop the workers but keep the master (after USR2);
//!   HUP then starts workers again (rolling an upgrade back).
//!
//! The master is single-threaded, which is what makes `fork` safe here.

use std::io;
use std::path::{Path, PathBuf};

use crate::conf::{Conf, ConfError};
use crate::process::listening::{self, ListenSet};
use crate::process::shm::SharedZone;
use crate::process::worker::{self, WorkerParams};
use crate::sys::process::{self as sysproc, ExitStatus, Fork, Pid};
use crate::sys::signal::{self, SigSet, Signal};

use super::{App, Role, EXIT_FATAL};

/// How long workers get to exit after TERM before SIGKILL, in ms.
const TERMINATE_GRACE_MS: u64 = 1000;
const TERMINATE_TICK_MS: u64 = 100;

/// Re-reads the configuration for a reload.
pub type Loader<'a> = &'a dyn Fn() -> Result<Conf, ConfError>;

struct Proc {
    pid: Pid,
    role: Role,
    generation: u32,
    /// Told to exit (QUIT or TERM); not respawned.
    exiting: bool,
}

struct Master<'a> {
    app: &'a dyn App,
    load: Loader<'a>,
    conf: Conf,
    listening: Vec<ListenSet>,
    /// The singleton process's sockets.
    single_listening: Vec<ListenSet>,
    zone: SharedZone,
    procs: Vec<Proc>,
    generation: u32,
    terminating: bool,
    quitting: bool,
    terminate_ticks: u64,
    pid_file: PathBuf,
    /// The new master started by a binary upgrade (USR2), while it runs.
    new_binary: Option<u32>,
    /// WINCH stopped the workers; they are not respawned until HUP.
    no_workers: bool,
    /// A reload replaced the singleton's configuration: the new singleton
    /// starts once the old one has exited. The two never run at once, so
    /// the new kv process loads what the old one saved on its way out
    /// (started together, the new one read the old dump, which the old
    /// one's exit save then overwrote).
    single_pending: bool,
}

/// `logs/gyre.pid` -> `logs/gyre.pid.oldbin`.
fn oldbin_path(pid: &Path) -> PathBuf {
    let mut s = pid.as_os_str().to_os_string();
    s.push(".oldbin");
    PathBuf::from(s)
}

/// Warns as nginx does when a worker may run out of file descriptors.
pub fn check_nofile(conf: &Conf) {
    let (soft, _) = sysproc::get_nofile_limit();
    let limit = conf.core.worker_rlimit_nofile.unwrap_or(soft);
    let wc = conf.events.worker_connections as u64;
    if wc > limit {
        log::warn!("{wc} worker_connections exceed open file resource limit: {limit}");
    }
}

/// Writes the pid file (nginx's `ngx_create_pidfile`).
///
/// Written to a temporary name and renamed into place, so `-s` (or a
/// monitoring tool) never reads a created but still empty file.
pub fn write_pid_file(path: &Path) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, format!("{}\n", sysproc::getpid()))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "open() \"{}\" failed ({})",
                    path.display(),
                    crate::sys_error_text(&e)
                ),
            )
        })
}

/// Reads the pid file and sends `sig` to the master (`-s`).
pub fn signal_master(pid_file: &Path, sig: Signal) -> io::Result<()> {
    let text = std::fs::read_to_string(pid_file).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "open() \"{}\" failed ({})",
                pid_file.display(),
                crate::sys_error_text(&e)
            ),
        )
    })?;
    let pid = text
        .trim()
        .parse::<i32>()
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| {
            io::Error::other(format!(
                "invalid PID number \"{}\" in \"{}\"",
                text.trim(),
                pid_file.display()
            ))
        })?;
    signal::send(pid, sig).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "kill({}, {}) failed ({})",
                pid.as_raw_nonzero(),
                sig.as_raw(),
                crate::sys_error_text(&e)
            ),
        )
    })
}

/// Detaches from the terminal (nginx's `ngx_daemon`): the parent exits, the
/// child starts a new session with stdin/stdout (and stderr unless the
/// error log is stderr) on /dev/null.
pub fn daemonize(keep_stderr: bool) -> io::Result<()> {
    // SAFETY: called before any thread is started; the child continues as
    // the single-threaded master.
    match unsafe { sysproc::fork() }? {
        Fork::Parent { .. } => sysproc::exit_now(0),
        Fork::Child => {}
    }
    sysproc::setsid()?;
    sysproc::redirect_stdio_to_devnull(!keep_stderr)
}

/// Runs the master until every worker has exited after TERM/INT or QUIT.
/// `load` re-reads the configuration on HUP.
pub fn run(conf: Conf, app: &dyn App, load: Loader<'_>) -> io::Result<()> {
    signal::install()?;
    signal::block(&SigSet::managed())?;
    check_nofile(&conf);
    let zone = SharedZone::new()?;
    let workers = conf.core.worker_processes;
    // After a binary upgrade the old master's sockets are reused as they are.
    let inherited = listening::inherited();
    let listening = listening::bind_all(&app.listeners(&conf), workers, &inherited)?;
    let single_listening = listening::bind_all(&app.singleton_listeners(&conf), 1, &inherited)?;
    drop(inherited);
    let pid_file = conf.core.pid.clone();
    write_pid_file(&pid_file)?;
    log::info!("using the \"{}\" event method", method_name(&conf));
    let mut m = Master {
        app,
        load,
        conf,
        listening,
        single_listening,
        zone,
        procs: Vec::new(),
        generation: 0,
        terminating: false,
        quitting: false,
        terminate_ticks: 0,
        pid_file,
        new_binary: None,
        single_pending: false,
        no_workers: false,
    };
    log::info!("start worker processes");
    for i in 0..workers {
        m.spawn(Role::Worker(i))?;
    }
    if !m.single_listening.is_empty() {
        m.spawn(Role::Singleton)?;
    }
    m.cycle();
    let _ = std::fs::remove_file(&m.pid_file);
    log::info!("exit");
    Ok(())
}

fn method_name(conf: &Conf) -> &'static str {
    match conf.events.method {
        crate::conf::EventMethod::Epoll => "epoll",
        crate::conf::EventMethod::Poll => "poll",
    }
}

impl Master<'_> {
    fn name(&self, role: Role) -> &'static str {
        match role {
            Role::Worker(_) => "worker process",
            Role::Singleton => self.app.singleton_name(),
        }
    }

    fn cycle(&mut self) {
        loop {
            if (self.terminating || self.quitting) && self.procs.is_empty() {
                return;
            }
            signal::suspend(&SigSet::empty());
            if signal::take(Signal::Chld) {
                self.reap();
            }
            if signal::take(Signal::Term) | signal::take(Signal::Int) {
                self.terminate();
            }
            if signal::take(Signal::Alrm) && self.terminating {
                self.terminate_tick();
            }
            if signal::take(Signal::Quit) {
                self.quit();
            }
            if signal::take(Signal::Hup) {
                self.reload();
            }
            if signal::take(Signal::Usr1) {
                // Logged after reopening, so the line lands in the new file.
                if let Err(e) = crate::errlog::reopen() {
                    log::error!("reopen of the error log failed ({e})");
                }
                log::info!("reopening logs");
                self.signal_workers(Signal::Usr1, false);
            }
            if signal::take(Signal::Usr2) {
                self.upgrade();
            }
            if signal::take(Signal::Winch) {
                log::info!("gracefully shutting down worker processes");
                self.no_workers = true;
                for p in &mut self.procs {
                    if matches!(p.role, Role::Worker(_)) {
                        p.exiting = true;
                        let _ = signal::send(p.pid, Signal::Quit);
                    }
                }
            }
        }
    }

    /// USR2: starts the new binary as a new master that inherits the
    /// listening sockets; this master keeps running (and serving) until it
    /// is told to stop (WINCH, then QUIT), so an upgrade can be rolled back.
    fn upgrade(&mut self) {
        if self.new_binary.is_some() || self.terminating || self.quitting {
            log::error!("the changing binary signal is ignored: a new binary is already running or the master is exiting");
            return;
        }
        let oldbin = oldbin_path(&self.pid_file);
        if let Err(e) = std::fs::rename(&self.pid_file, &oldbin) {
            log::error!(
                "rename() \"{}\" to \"{}\" failed ({e})",
                self.pid_file.display(),
                oldbin.display()
            );
            return;
        }
        let env = match listening::export(&self.listening) {
            Ok(v) => v,
            Err(e) => {
                log::error!("fcntl(FD_CLOEXEC) failed ({e})");
                listening::restore_cloexec(&self.listening);
                let _ = std::fs::rename(&oldbin, &self.pid_file);
                return;
            }
        };
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        let r = std::process::Command::new(&exe)
            .args(&args)
            .env(listening::INHERIT_ENV, &env)
            .spawn();
        listening::restore_cloexec(&self.listening);
        match r {
            Ok(child) => {
                log::info!("start new binary process {}", child.id());
                self.new_binary = Some(child.id());
                // The child is reaped by the CHLD handler with waitpid(-1).
                std::mem::forget(child);
            }
            Err(e) => {
                log::error!(
                    "execve() failed while executing new binary process \"{}\" ({e})",
                    exe.display()
                );
                let _ = std::fs::rename(&oldbin, &self.pid_file);
            }
        }
    }

    /// Forks a worker (or the singleton) of the current generation.
    fn spawn(&mut self, role: Role) -> io::Result<()> {
        let listeners = match role {
            Role::Worker(i) => listening::for_worker(&self.listening, i)?,
            Role::Singleton => listening::for_worker(&self.single_listening, 0)?,
        };
        // SAFETY: the master is single-threaded (it starts no threads), so
        // the child may run arbitrary code.
        match unsafe { sysproc::fork() }? {
            Fork::Child => {
                // The master's copies of the listening sockets (and other
                // workers' reuseport sockets) must not stay open here, or a
                // gracefully exiting worker would keep them listening.
                drop(std::mem::take(&mut self.listening));
                drop(std::mem::take(&mut self.single_listening));
                let code = worker::run(WorkerParams {
                    conf: &self.conf,
                    app: self.app,
                    listeners,
                    zone: self.zone.clone(),
                    role,
                    workers: self.conf.core.worker_processes,
                    single_listeners: Vec::new(),
                });
                sysproc::exit_now(code)
            }
            Fork::Parent { child } => {
                log::info!("start {} {}", self.name(role), child.as_raw_nonzero());
                self.procs.push(Proc {
                    pid: child,
                    role,
                    generation: self.generation,
                    exiting: false,
                });
                Ok(())
            }
        }
    }

    fn reap(&mut self) {
        let reaped = match sysproc::reap_all() {
            Ok(r) => r,
            Err(e) => {
                log::error!("waitpid() failed ({e})");
                return;
            }
        };
        for (pid, status) in reaped {
            let raw = pid.as_raw_nonzero();
            let name = match self.procs.iter().find(|p| p.pid == pid) {
                Some(p) => self.name(p.role),
                None => "process",
            };
            match status {
                ExitStatus::Exited(0) => log::info!("{name} {raw} exited with code 0"),
                // nginx: notice for an exit code, alert for a signal.
                ExitStatus::Exited(c) => log::info!("{name} {raw} exited with code {c}"),
                ExitStatus::Signaled(s, core) => log::error!(
                    target: crate::errlog::ALERT,
                    "{name} {raw} exited on signal {s}{}",
                    if core { " (core dumped)" } else { "" }
                ),
            }
            if self.new_binary == Some(raw.get() as u32) {
                // The new binary is gone: this master is the one again.
                self.new_binary = None;
                let oldbin = oldbin_path(&self.pid_file);
                if let Err(e) = std::fs::rename(&oldbin, &self.pid_file) {
                    log::error!("rename() \"{}\" back failed ({e})", oldbin.display());
                }
                continue;
            }
            if self.zone.accept_mutex().force_unlock(pid) {
                log::error!(target: crate::errlog::ALERT, "shared memory zone was locked by {raw}, unlocked");
            }
            let Some(i) = self.procs.iter().position(|p| p.pid == pid) else {
                continue;
            };
            let p = self.procs.swap_remove(i);
            if p.role == Role::Singleton && self.single_pending {
                self.start_pending_singleton();
                continue;
            }
            let current = match p.role {
                // The singleton outlives reloads that do not replace it.
                Role::Singleton => !self.procs.iter().any(|q| q.role == Role::Singleton),
                Role::Worker(_) => p.generation == self.generation,
            };
            if p.exiting || self.terminating || self.quitting || self.no_workers || !current {
                continue;
            }
            if status == ExitStatus::Exited(EXIT_FATAL) {
                log::error!(
                    target: crate::errlog::ALERT,
                    "{name} {raw} exited with fatal code {EXIT_FATAL} and cannot be respawned"
                );
                continue;
            }
            if let Err(e) = self.spawn(p.role) {
                log::error!(target: crate::errlog::ALERT, "could not respawn {name} ({e})");
            }
        }
    }

    fn signal_workers(&mut self, sig: Signal, exiting: bool) {
        for p in &mut self.procs {
            if exiting {
                p.exiting = true;
            }
            if let Err(e) = signal::send(p.pid, sig) {
                log::error!(
                    target: crate::errlog::ALERT,
                    "kill({}, {}) failed ({e})",
                    p.pid.as_raw_nonzero(),
                    sig.as_raw()
                );
            }
        }
    }

    fn terminate(&mut self) {
        if !self.terminating {
            log::info!("terminating");
        }
        self.terminating = true;
        self.signal_workers(Signal::Term, true);
        self.listening.clear();
        self.single_listening.clear();
        self.terminate_ticks = 0;
        if let Err(e) = signal::set_interval_timer(TERMINATE_TICK_MS) {
            log::error!("setitimer() failed ({e})");
        }
    }

    fn terminate_tick(&mut self) {
        self.terminate_ticks += 1;
        if self.terminate_ticks * TERMINATE_TICK_MS >= TERMINATE_GRACE_MS {
            for p in &self.procs {
                log::error!(
                    "worker process {} is not exiting, sending SIGKILL",
                    p.pid.as_raw_nonzero()
                );
                let _ = signal::send_kill(p.pid);
            }
        }
    }

    fn quit(&mut self) {
        if !self.quitting {
            log::info!("gracefully shutting down");
        }
        self.quitting = true;
        self.signal_workers(Signal::Quit, true);
        self.listening.clear();
        self.single_listening.clear();
    }

    fn reload(&mut self) {
        if self.terminating || self.quitting {
            return;
        }
        if self.no_workers {
            // After WINCH (an upgrade being rolled back): start workers
            // again with the configuration in force, as nginx does.
            self.no_workers = false;
            self.generation += 1;
            log::info!("start worker processes");
            for i in 0..self.conf.core.worker_processes {
                if let Err(e) = self.spawn(Role::Worker(i)) {
                    log::error!("could not start worker process ({e})");
                }
            }
            return;
        }
        log::info!("reconfiguring");
        let conf = match (self.load)() {
            Ok(c) => c,
            Err(e) => {
                log::error!("{e}");
                return;
            }
        };
        check_nofile(&conf);
        let workers = conf.core.worker_processes;
        let listening =
            match listening::bind_all(&self.app.listeners(&conf), workers, &self.listening) {
                Ok(l) => l,
                Err(e) => {
                    log::error!("{e}");
                    return;
                }
            };
        let replace_single = self.app.singleton_changed(&self.conf, &conf);
        if replace_single {
            match listening::bind_all(
                &self.app.singleton_listeners(&conf),
                1,
                &self.single_listening,
            ) {
                Ok(l) => self.single_listening = l,
                Err(e) => {
                    log::error!("{e}");
                    return;
                }
            }
        }
        self.listening = listening;
        self.conf = conf;
        let old = self.generation;
        self.generation += 1;
        log::info!("start worker processes");
        for i in 0..workers {
            if let Err(e) = self.spawn(Role::Worker(i)) {
                log::error!("could not start worker process ({e})");
            }
        }
        let mut stop_single = false;
        if replace_single {
            stop_single = true;
            // After the old one has exited, if there is one (see
            // `single_pending`).
            self.single_pending = true;
            if !self.procs.iter().any(|p| p.role == Role::Singleton) {
                self.start_pending_singleton();
            }
        }
        for p in &mut self.procs {
            let stale = match p.role {
                Role::Worker(_) => p.generation == old,
                Role::Singleton => stop_single && p.generation != self.generation,
            };
            if stale && !p.exiting {
                p.exiting = true;
                if let Err(e) = signal::send(p.pid, Signal::Quit) {
                    log::error!("kill({}, QUIT) failed ({e})", p.pid.as_raw_nonzero());
                }
            } else if p.role == Role::Singleton && !replace_single && !p.exiting {
                // Kept with its state: it re-reads what it can in place
                // (certificates whose files changed), see `Core::on_reload`.
                if let Err(e) = signal::send(p.pid, Signal::Hup) {
                    log::error!("kill({}, HUP) failed ({e})", p.pid.as_raw_nonzero());
                }
            }
        }
    }
}

impl Master<'_> {
    /// Starts the singleton of the current configuration that a reload
    /// left waiting for the old one to exit.
    fn start_pending_singleton(&mut self) {
        self.single_pending = false;
        if self.single_listening.is_empty() || self.terminating || self.quitting {
            return;
        }
        if let Err(e) = self.spawn(Role::Singleton) {
            log::error!("could not start {} ({e})", self.app.singleton_name());
        }
    }
}

/// Runs without a master (`master_process off`): this process binds the
/// listeners and is the only worker (nginx's `ngx_single_process_cycle`).
/// TERM/INT stop it, QUIT stops it gracefully, USR1 reopens the log; a reload
/// needs the master.
pub fn run_single(conf: Conf, app: &dyn App) -> io::Result<()> {
    signal::install()?;
    check_nofile(&conf);
    let zone = SharedZone::new()?;
    let listening = listening::bind_all(&app.listeners(&conf), 1, &[])?;
    let listeners = listening::for_worker(&listening, 0)?;
    let single = listening::bind_all(&app.singleton_listeners(&conf), 1, &[])?;
    let single_listeners = listening::for_worker(&single, 0)?;
    // Only the worker's copies stay open, so a graceful quit closes them.
    drop(listening);
    drop(single);
    write_pid_file(&conf.core.pid)?;
    log::info!("using the \"{}\" event method", method_name(&conf));
    let code = worker::run(WorkerParams {
        conf: &conf,
        app,
        listeners,
        zone,
        role: Role::Worker(0),
        workers: 1,
        single_listeners,
    });
    let _ = std::fs::remove_file(&conf.core.pid);
    if code == 0 {
        Ok(())
    } else {
        Err(io::Error::other(format!("worker exited with code {code}")))
    }
}
