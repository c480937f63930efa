//! Forking test children from the multithreaded test harness: the child runs
//! a closure restricted to atomics and raw system calls, then `_exit`s.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use gyre_core::sys::process::{exit_now, fork, try_wait_child, ExitStatus, Fork, Pid};
use gyre_core::sys::signal::send_kill;

/// Ends the child with 99 if `f` unwinds, so a panicking child never returns
/// into the test harness.
pub struct ExitOnUnwind;
impl Drop for ExitOnUnwind {
    fn drop(&mut self) {
        exit_now(99);
    }
}

/// Forks a child that runs `f` (atomics and raw syscalls only: the test binary
/// is multithreaded) and `_exit`s with its result.
pub fn spawn(f: impl FnOnce() -> i32) -> Pid {
    // SAFETY: the child only runs `f`, which the callers keep to atomics and
    // raw system calls (no allocation, no locks), then calls `_exit`.
    match unsafe { fork() }.expect("fork") {
        Fork::Child => {
            let guard = ExitOnUnwind;
            let code = f();
            std::mem::forget(guard);
            exit_now(code)
        }
        Fork::Parent { child } => child,
    }
}

/// Waits for `pid` with a deadline so a hung child fails the test instead of
/// hanging it.
pub fn wait_exit(pid: Pid, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = try_wait_child(pid).expect("waitpid") {
            return st;
        }
        if start.elapsed() > limit {
            let _ = send_kill(pid);
            let _ = gyre_core::sys::process::wait_child(pid);
            panic!("child {pid:?} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
