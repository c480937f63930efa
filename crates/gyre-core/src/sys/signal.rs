//! Flag-only signal handling for the master and the workers (nginx's
//! `ngx_signal_handler`, reduced to what is async-signal-safe).
//!
//! This module owns the process-wide signal state: one pending flag per
//! managed [`Signal`], an optional "notify" fd the handler pokes, the signal
//! mask helpers, `kill` and the `timer_resolution` interval timer.
//!
//! The handler only sets an atomic flag and optionally `write(2)`s 8 bytes to
//! a non-blocking fd — nothing else is async-signal-safe enough to do in Rust.
//! All real work (reload, reopen, reaping) happens in normal context after
//! [`take`] reports the flag. Two ways to wait without losing a signal:
//!
//! - master (nginx style): [`block`] the managed set once, then loop
//!   { check flags with [`take`]; [`suspend`] with an empty mask }. A signal
//!   can only be delivered inside `sigsuspend`, so none slips in between the
//!   check and the wait.
//! - worker: leave signals unblocked; `epoll_wait`/`poll` return `EINTR`
//!   when a handler runs (they are never restarted, even with `SA_RESTART`),
//!   and a signal arriving just *before* the wait is caught by the notify fd
//!   ([`set_notify_fd`]), which makes the wait return immediately.

use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use libc::c_int;

use crate::sys::process::Pid;

/// The signals gyre handles. Each has one pending flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// Fast shutdown (`nginx -s stop`).
    Term,
    /// Fast shutdown (Ctrl-C).
    Int,
    /// Graceful shutdown (`nginx -s quit`).
    Quit,
    /// Reload configuration (`nginx -s reload`).
    Hup,
    /// Reopen log files (`nginx -s reopen`).
    Usr1,
    /// Binary upgrade: start a new master.
    Usr2,
    /// Gracefully stop workers (after USR2).
    Winch,
    /// A child ended; reap it.
    Chld,
    /// `timer_resolution` tick: refresh the cached clock.
    Alrm,
}

const COUNT: usize = 9;

impl Signal {
    /// Every managed signal, in flag order.
    pub const ALL: [Signal; COUNT] = [
        Signal::Term,
        Signal::Int,
        Signal::Quit,
        Signal::Hup,
        Signal::Usr1,
        Signal::Usr2,
        Signal::Winch,
        Signal::Chld,
        Signal::Alrm,
    ];

    /// The raw signal number.
    pub const fn as_raw(self) -> c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Int => libc::SIGINT,
            Signal::Quit => libc::SIGQUIT,
            Signal::Hup => libc::SIGHUP,
            Signal::Usr1 => libc::SIGUSR1,
            Signal::Usr2 => libc::SIGUSR2,
            Signal::Winch => libc::SIGWINCH,
            Signal::Chld => libc::SIGCHLD,
            Signal::Alrm => libc::SIGALRM,
        }
    }

    /// The managed signal with this number, if any.
    pub const fn from_raw(signo: c_int) -> Option<Signal> {
        Some(match signo {
            libc::SIGTERM => Signal::Term,
            libc::SIGINT => Signal::Int,
            libc::SIGQUIT => Signal::Quit,
            libc::SIGHUP => Signal::Hup,
            libc::SIGUSR1 => Signal::Usr1,
            libc::SIGUSR2 => Signal::Usr2,
            libc::SIGWINCH => Signal::Winch,
            libc::SIGCHLD => Signal::Chld,
            libc::SIGALRM => Signal::Alrm,
            _ => return None,
        })
    }

    /// The conventional name, for logs.
    pub const fn name(self) -> &'static str {
        match self {
            Signal::Term => "SIGTERM",
            Signal::Int => "SIGINT",
            Signal::Quit => "SIGQUIT",
            Signal::Hup => "SIGHUP",
            Signal::Usr1 => "SIGUSR1",
            Signal::Usr2 => "SIGUSR2",
            Signal::Winch => "SIGWINCH",
            Signal::Chld => "SIGCHLD",
            Signal::Alrm => "SIGALRM",
        }
    }

    /// The signal `nginx -s <command>` sends.
    pub fn from_command(cmd: &str) -> Option<Signal> {
        match cmd {
            "stop" => Some(Signal::Term),
            "quit" => Some(Signal::Quit),
            "reopen" => Some(Signal::Usr1),
            "reload" => Some(Signal::Hup),
            _ => None,
        }
    }

    const fn index(self) -> usize {
        self as usize
    }

    fn to_rustix(self) -> rustix::process::Signal {
        use rustix::process::Signal as R;
        match self {
            Signal::Term => R::TERM,
            Signal::Int => R::INT,
            Signal::Quit => R::QUIT,
            Signal::Hup => R::HUP,
            Signal::Usr1 => R::USR1,
            Signal::Usr2 => R::USR2,
            Signal::Winch => R::WINCH,
            Signal::Chld => R::CHILD,
            Signal::Alrm => R::ALARM,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One flag per managed signal, set by the handler, cleared by [`take`].
static PENDING: [AtomicBool; COUNT] = [const { AtomicBool::new(false) }; COUNT];
/// The fd the handler pokes, or -1.
static NOTIFY_FD: AtomicI32 = AtomicI32::new(-1);

/// The handler for every managed signal. Only async-signal-safe work: atomic
/// stores, `write(2)`, and errno save/restore (the interrupted code may be
/// between a failing syscall and its errno read).
extern "C" fn on_signal(signo: c_int) {
    let saved = errno::get();
    if let Some(sig) = Signal::from_raw(signo) {
        if let Some(flag) = PENDING.get(sig.index()) {
            flag.store(true, Ordering::Release);
        }
    }
    let fd = NOTIFY_FD.load(Ordering::Acquire);
    if fd >= 0 {
        poke(fd);
    }
    errno::set(saved);
}

/// Writes the 8-byte value 1 to `fd` (the size an eventfd requires; a pipe
/// takes it too). Errors are ignored: EAGAIN means the fd is already readable,
/// which is all the waiter needs.
fn poke(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: `one` is a live 8-byte buffer for the duration of the call;
    // write(2) is async-signal-safe. A stale fd at worst writes to whatever
    // the number now names, which is why `set_notify_fd` must be cleared
    // before closing the fd.
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), size_of::<u64>()) };
}

mod errno {
    use libc::c_int;

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn location() -> *mut c_int {
        // SAFETY: returns the calling thread's errno slot; no preconditions.
        #[cfg(target_os = "linux")]
        unsafe {
            libc::__errno_location()
        }
        // SAFETY: as above (bionic's name for it).
        #[cfg(target_os = "android")]
        unsafe {
            libc::__errno()
        }
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn location() -> *mut c_int {
        // SAFETY: returns the calling thread's errno slot; no preconditions.
        unsafe { libc::__error() }
    }

    pub(super) fn get() -> c_int {
        // SAFETY: `location` is the valid, thread-local errno slot.
        unsafe { *location() }
    }

    pub(super) fn set(v: c_int) {
        // SAFETY: `location` is the valid, thread-local errno slot.
        unsafe { *location() = v }
    }
}

/// Test-and-clear: true if `sig` arrived since the last `take(sig)`.
/// Several deliveries in between collapse into one (as with real signals).
pub fn take(sig: Signal) -> bool {
    PENDING[sig.index()].swap(false, Ordering::AcqRel)
}

/// Whether `sig` is pending, without clearing it.
pub fn is_pending(sig: Signal) -> bool {
    PENDING[sig.index()].load(Ordering::Acquire)
}

/// Clears every pending flag (a freshly forked worker must not act on the
/// master's signals).
pub fn clear_pending() {
    for flag in &PENDING {
        flag.store(false, Ordering::Release);
    }
}

/// Makes every handler also write 8 bytes to `fd` (an eventfd or the write
/// end of a pipe), or stops doing so with `None`.
///
/// The fd must be non-blocking — a full pipe must not block a handler — and
/// must stay open until it is unset here.
pub fn set_notify_fd(fd: Option<RawFd>) {
    NOTIFY_FD.store(fd.unwrap_or(-1), Ordering::Release);
}

/// A set of signals (`sigset_t`) for masks.
#[derive(Clone, Copy)]
pub struct SigSet(libc::sigset_t);

impl SigSet {
    /// The empty set.
    pub fn empty() -> SigSet {
        let mut raw = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset fully initialises the set it is given.
        unsafe { libc::sigemptyset(raw.as_mut_ptr()) };
        // SAFETY: initialised just above.
        SigSet(unsafe { raw.assume_init() })
    }

    /// Every managed signal (what the master blocks outside `sigsuspend`).
    pub fn managed() -> SigSet {
        let mut s = SigSet::empty();
        for sig in Signal::ALL {
            s.add(sig);
        }
        s
    }

    /// Adds `sig`.
    pub fn add(&mut self, sig: Signal) {
        // SAFETY: `self.0` is an initialised set and `sig` a valid signal.
        unsafe { libc::sigaddset(&mut self.0, sig.as_raw()) };
    }

    /// Builder form of [`SigSet::add`].
    pub fn with(mut self, sig: Signal) -> SigSet {
        self.add(sig);
        self
    }

    /// Whether `sig` is in the set.
    pub fn contains(&self, sig: Signal) -> bool {
        // SAFETY: `self.0` is an initialised set and `sig` a valid signal.
        unsafe { libc::sigismember(&self.0, sig.as_raw()) == 1 }
    }
}

impl fmt::Debug for SigSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(Signal::ALL.iter().filter(|s| self.contains(**s)))
            .finish()
    }
}

fn set_action(signo: c_int, handler: libc::sighandler_t, flags: c_int) -> io::Result<()> {
    // SAFETY: an all-zero sigaction is a valid starting value (SIG_DFL, no
    // flags, empty mask); the fields we need are set below.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    sa.sa_flags = flags;
    // Block the other managed signals while a handler runs, so handlers never
    // nest (not needed for correctness, but keeps errno handling simple).
    sa.sa_mask = SigSet::managed().0;
    // SAFETY: `sa` is fully initialised; `handler` is SIG_DFL, SIG_IGN or
    // `on_signal`, which is async-signal-safe; the old action is not needed.
    let r = unsafe { libc::sigaction(signo, &sa, std::ptr::null_mut()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn handler_addr() -> libc::sighandler_t {
    on_signal as extern "C" fn(c_int) as libc::sighandler_t
}

/// Installs the flag-setting handler for every managed signal and ignores
/// SIGPIPE (a write to a closed socket must return EPIPE, not kill us).
///
/// `SA_RESTART` is set so stray blocking calls (log writes) don't fail with
/// EINTR; the waits that must wake — `sigsuspend`, `epoll_wait`, `poll` — are
/// never restarted by the kernel, so the event loop still sees every signal.
/// Async-signal-safe (no allocation), so a forked child may call it.
pub fn install() -> io::Result<()> {
    for sig in Signal::ALL {
        set_action(sig.as_raw(), handler_addr(), libc::SA_RESTART)?;
    }
    set_action(libc::SIGPIPE, libc::SIG_IGN, 0)
}

/// Restores default dispositions for the managed signals and SIGPIPE, clears
/// the flags and the notify fd, and unblocks the managed set: what a child
/// that will `exec` or take over signal handling itself should start from.
pub fn reset_to_default() -> io::Result<()> {
    set_notify_fd(None);
    for sig in Signal::ALL {
        set_action(sig.as_raw(), libc::SIG_DFL, 0)?;
    }
    set_action(libc::SIGPIPE, libc::SIG_DFL, 0)?;
    clear_pending();
    unblock(&SigSet::managed())?;
    Ok(())
}

fn mask(how: c_int, set: &SigSet) -> io::Result<SigSet> {
    let mut old = SigSet::empty();
    // SAFETY: both sets are initialised; pthread_sigmask (not sigprocmask,
    // whose effect is unspecified with threads) changes the calling thread.
    let r = unsafe { libc::pthread_sigmask(how, &set.0, &mut old.0) };
    if r == 0 {
        Ok(old)
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// Blocks `set` for the calling thread; returns the previous mask.
pub fn block(set: &SigSet) -> io::Result<SigSet> {
    mask(libc::SIG_BLOCK, set)
}

/// Unblocks `set` for the calling thread; returns the previous mask.
pub fn unblock(set: &SigSet) -> io::Result<SigSet> {
    mask(libc::SIG_UNBLOCK, set)
}

/// Replaces the calling thread's mask; returns the previous one.
pub fn set_mask(set: &SigSet) -> io::Result<SigSet> {
    mask(libc::SIG_SETMASK, set)
}

/// `sigsuspend(mask)`: atomically installs `mask` and sleeps until a handler
/// has run, then restores the old mask. With the managed set blocked
/// beforehand this is the race-free wait of nginx's master cycle.
pub fn suspend(mask: &SigSet) {
    // SAFETY: `mask` is an initialised set. sigsuspend always returns -1 with
    // EINTR once a handler ran; there is nothing else to report.
    unsafe { libc::sigsuspend(&mask.0) };
}

/// `kill(pid, sig)`.
pub fn send(pid: Pid, sig: Signal) -> io::Result<()> {
    Ok(rustix::process::kill_process(pid, sig.to_rustix())?)
}

/// `kill(pid, SIGKILL)`: for workers that ignored a shutdown for too long.
pub fn send_kill(pid: Pid) -> io::Result<()> {
    Ok(rustix::process::kill_process(
        pid,
        rustix::process::Signal::KILL,
    )?)
}

/// Delivers SIGALRM every `ms` milliseconds (`timer_resolution`); 0 disarms.
/// Interval timers are not inherited across `fork`, so each worker arms its
/// own.
pub fn set_interval_timer(ms: u64) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: (ms / 1000) as libc::time_t,
        tv_usec: ((ms % 1000) * 1000) as libc::suseconds_t,
    };
    let it = libc::itimerval {
        it_interval: tv,
        it_value: tv,
    };
    // SAFETY: `it` is a valid itimerval; the old value is not requested.
    let r = unsafe { libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
