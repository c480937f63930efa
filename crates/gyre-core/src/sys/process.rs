//! Process-level system calls for the master/worker model: `fork`, reaping
//! children, pids, `RLIMIT_NOFILE`, daemonising helpers and CPU affinity
//! (nginx's ngx_process.c / ngx_daemon.c / ngx_setaffinity.c, the syscall
//! half only — the policy lives in `process`).

use std::io;

use rustix::fd::AsFd;
use rustix::process::{Resource, Rlimit, WaitOptions};

pub use rustix::process::Pid;

/// Which side of a `fork` we are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fork {
    /// The original process; `child` is the new process's pid.
    Parent { child: Pid },
    /// The new process.
    Child,
}

/// `fork(2)`.
///
/// # Safety
///
/// If the calling process has more than one thread, the child is a copy of
/// only the calling thread with every lock (including the allocator's) in
/// whatever state other threads left it. Until it calls `exec` or
/// [`exit_now`], the child must then perform only async-signal-safe
/// operations: atomics, raw system calls, no allocation, no locks, no panics.
/// nginx's master is single-threaded, where this is not a concern.
pub unsafe fn fork() -> io::Result<Fork> {
    // SAFETY: forwarded to the caller (see `# Safety`); fork itself has no
    // memory-safety preconditions.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Fork::Child),
        n => Pid::from_raw(n)
            .map(|child| Fork::Parent { child })
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData)),
    }
}

/// `_exit(2)`: ends the process now, without running atexit handlers or
/// flushing stdio — the only correct way to end a forked child that must not
/// touch state shared with its parent (buffers would be flushed twice).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit is async-signal-safe and never returns; it has no
    // preconditions.
    unsafe { libc::_exit(code) }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// `exit(code)`.
    Exited(i32),
    /// Killed by a signal; the flag says whether it dumped core.
    Signaled(i32, bool),
}

impl ExitStatus {
    /// Decodes a raw `wait` status. Stop/continue reports cannot reach here
    /// because we never pass `WUNTRACED`/`WCONTINUED`.
    fn from_raw(status: i32) -> ExitStatus {
        if libc::WIFSIGNALED(status) {
            ExitStatus::Signaled(libc::WTERMSIG(status), libc::WCOREDUMP(status))
        } else {
            ExitStatus::Exited(libc::WEXITSTATUS(status))
        }
    }

    /// True for `Exited(0)`.
    pub fn success(self) -> bool {
        self == ExitStatus::Exited(0)
    }
}

/// `waitpid(-1, WNOHANG)` once: the next child that has ended, if any.
///
/// `Ok(None)` means no ended child right now, or no children at all (ECHILD),
/// which is the loop's normal end in nginx's `ngx_process_get_status`.
pub fn reap_one() -> io::Result<Option<(Pid, ExitStatus)>> {
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, st))) => return Ok(Some((pid, ExitStatus::from_raw(st.as_raw())))),
            Ok(None) => return Ok(None),
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::CHILD) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reaps every ended child (the master calls this after a SIGCHLD).
pub fn reap_all() -> io::Result<Vec<(Pid, ExitStatus)>> {
    let mut out = Vec::new();
    while let Some(r) = reap_one()? {
        out.push(r);
    }
    Ok(out)
}

/// Blocks until the given child ends (used on shutdown and in tests; it never
/// steals other children's statuses, unlike `waitpid(-1)`).
pub fn wait_child(pid: Pid) -> io::Result<ExitStatus> {
    loop {
        match rustix::process::waitpid(Some(pid), WaitOptions::empty()) {
            Ok(Some((_, st))) => return Ok(ExitStatus::from_raw(st.as_raw())),
            Ok(None) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// `waitpid(pid, WNOHANG)`: the child's status if it has ended, else `None`
/// (for bounded waits, e.g. an old master during a binary upgrade).
pub fn try_wait_child(pid: Pid) -> io::Result<Option<ExitStatus>> {
    loop {
        match rustix::process::waitpid(Some(pid), WaitOptions::NOHANG) {
            Ok(r) => return Ok(r.map(|(_, st)| ExitStatus::from_raw(st.as_raw()))),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// The calling process's pid (a raw syscall; safe in a forked child).
pub fn getpid() -> Pid {
    rustix::process::getpid()
}

/// The parent's pid, if any (0 is not a pid).
pub fn getppid() -> Option<Pid> {
    rustix::process::getppid()
}

fn limit_to_u64(v: Option<u64>) -> u64 {
    v.unwrap_or(u64::MAX)
}

fn limit_from_u64(v: u64) -> Option<u64> {
    (v != u64::MAX).then_some(v)
}

/// `getrlimit(RLIMIT_NOFILE)` as `(soft, hard)`; `u64::MAX` means unlimited.
pub fn get_nofile_limit() -> (u64, u64) {
    let r = rustix::process::getrlimit(Resource::Nofile);
    (limit_to_u64(r.current), limit_to_u64(r.maximum))
}

/// `setrlimit(RLIMIT_NOFILE)` (nginx's `worker_rlimit_nofile` sets both to the
/// same value). `u64::MAX` means unlimited. Raising the hard limit needs
/// privilege; lowering it is permanent for this process.
pub fn set_nofile_limit(soft: u64, hard: u64) -> io::Result<()> {
    let new = Rlimit {
        current: limit_from_u64(soft),
        maximum: limit_from_u64(hard),
    };
    Ok(rustix::process::setrlimit(Resource::Nofile, new)?)
}

/// `setsid(2)`: detach from the controlling terminal (daemon mode).
pub fn setsid() -> io::Result<Pid> {
    Ok(rustix::process::setsid()?)
}

/// Points stdin and stdout (and stderr if asked) at `/dev/null`, as
/// `ngx_daemon` does. stderr is normally left alone until the error log is
/// open, so that startup errors are still visible.
pub fn redirect_stdio_to_devnull(stderr_too: bool) -> io::Result<()> {
    let null = rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    redirect_stdio(null.as_fd(), stderr_too)
}

/// `dup2(fd, 0)`, `dup2(fd, 1)` and optionally `dup2(fd, 2)`.
pub fn redirect_stdio<Fd: AsFd>(fd: Fd, stderr_too: bool) -> io::Result<()> {
    rustix::stdio::dup2_stdin(&fd)?;
    rustix::stdio::dup2_stdout(&fd)?;
    if stderr_too {
        rustix::stdio::dup2_stderr(&fd)?;
    }
    Ok(())
}

/// Pins the calling process (thread) to one CPU (`worker_cpu_affinity`).
pub fn set_cpu_affinity(cpu: usize) -> io::Result<()> {
    set_cpu_affinity_mask(&[cpu])
}

/// Pins the calling process (thread) to a set of CPUs.
pub fn set_cpu_affinity_mask(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() || cpus.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut set = empty_cpu_set();
    for &c in cpus {
        // SAFETY: `c < CPU_SETSIZE` was checked, so the bit is inside `set`.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid, initialised cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn empty_cpu_set() -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    unsafe { std::mem::zeroed() }
}

/// A user from the password database, for `user NAME [GROUP]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserIds {
    pub uid: u32,
    pub gid: u32,
}

/// `geteuid(2)`.
pub fn geteuid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Scratch buffer size for the `get*nam_r` calls (their entries are short;
/// a larger one is tried on ERANGE).
const NAM_BUF: usize = 1024;

/// `getpwnam_r(3)`: the uid and primary gid of a user, `None` when there
/// is no such user (or the lookup failed).
pub fn lookup_user(name: &str) -> Option<UserIds> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut size = NAM_BUF;
    while size <= 1 << 20 {
        let mut buf = vec![0 as libc::c_char; size];
        // SAFETY: an all-zero passwd is a valid value (null pointers, zero ids)
        // for getpwnam_r to fill.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: the NUL-terminated
        // name, the struct and the buffer of `size` bytes it points into.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                size,
                &mut result,
            )
        };
        if rc == libc::ERANGE {
            size *= 4;
            continue;
        }
        return (rc == 0 && !result.is_null()).then_some(UserIds {
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
        });
    }
    None
}

/// `getgrnam_r(3)`: the gid of a group, `None` when there is none.
pub fn lookup_group(name: &str) -> Option<u32> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut size = NAM_BUF;
    while size <= 1 << 20 {
        let mut buf = vec![0 as libc::c_char; size];
        // SAFETY: an all-zero group is a valid value for getgrnam_r to fill.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        // SAFETY: as in lookup_user: valid name, struct and buffer.
        let rc = unsafe {
            libc::getgrnam_r(
                cname.as_ptr(),
                &mut grp,
                buf.as_mut_ptr(),
                size,
                &mut result,
            )
        };
        if rc == libc::ERANGE {
            size *= 4;
            continue;
        }
        return (rc == 0 && !result.is_null()).then_some(grp.gr_gid);
    }
    None
}

/// Gives up root for `name`: `setgid(gid)`, `initgroups(name, gid)`,
/// `setuid(uid)`, in that order (nginx's `ngx_worker_process_init`); the
/// first failure is returned with the call's name.
pub fn switch_user(name: &str, uid: u32, gid: u32) -> Result<(), (&'static str, io::Error)> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| ("initgroups", io::Error::from(io::ErrorKind::InvalidInput)))?;
    // SAFETY: setgid takes a plain id; libc applies it to every thread.
    if unsafe { libc::setgid(gid) } == -1 {
        return Err(("setgid", io::Error::last_os_error()));
    }
    // SAFETY: a valid NUL-terminated name and a plain id.
    if unsafe { libc::initgroups(cname.as_ptr(), gid as _) } == -1 {
        return Err(("initgroups", io::Error::last_os_error()));
    }
    // SAFETY: setuid takes a plain id; libc applies it to every thread.
    if unsafe { libc::setuid(uid) } == -1 {
        return Err(("setuid", io::Error::last_os_error()));
    }
    Ok(())
}

/// Gives the heap's free pages back to the kernel (glibc's
/// `malloc_trim(0)`): what a kv process's MEMORY PURGE does where Redis
/// asks jemalloc to purge its dirty pages. True if memory was released.
pub fn trim_heap() -> bool {
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks;
    // it takes no pointer and is safe to call at any time.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Whose CPU time [`cpu_time`] reads (getrusage's `who`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuOf {
    /// The whole process.
    Process,
    /// Its waited-for children.
    Children,
    /// The calling thread.
    Thread,
}

/// User and system CPU time in microseconds (getrusage(2)).
pub fn cpu_time(of: CpuOf) -> io::Result<(u64, u64)> {
    let who = match of {
        CpuOf::Process => libc::RUSAGE_SELF,
        CpuOf::Children => libc::RUSAGE_CHILDREN,
        CpuOf::Thread => libc::RUSAGE_THREAD,
    };
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the kernel to fill.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let us = |t: libc::timeval| (t.tv_sec.max(0) as u64) * 1_000_000 + t.tv_usec.max(0) as u64;
    Ok((us(ru.ru_utime), us(ru.ru_stime)))
}
