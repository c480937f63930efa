//! Flag-only signal handling in real child processes: delivery seen through
//! `take`, the race-free block + sigsuspend wait, the notify-fd hook waking
//! poll(2), the interval timer, SIGPIPE ignored, and reset to defaults.
//!
//! Handlers are only ever installed in forked children, never in the test
//! binary itself, so tests stay independent of each other.

mod util;

use util::fork::{spawn, wait_exit};

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

use gyre_core::sys::process::{getpid, ExitStatus};
use gyre_core::sys::shm::Shm;
use gyre_core::sys::signal::{
    block, clear_pending, install, is_pending, reset_to_default, send, set_interval_timer,
    set_mask, set_notify_fd, suspend, take, SigSet, Signal,
};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::pipe::{pipe_with, PipeFlags};

/// Spins (politely) until the child reports readiness through `flag`.
fn wait_ready(flag: &AtomicU64) {
    let start = Instant::now();
    while flag.load(SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "child never ready"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn signal_numbers_names_and_sets() {
    for s in Signal::ALL {
        assert_eq!(Signal::from_raw(s.as_raw()), Some(s));
        assert!(s.name().starts_with("SIG"));
    }
    assert_eq!(Signal::from_raw(libc::SIGKILL), None);
    assert_eq!(Signal::from_command("reload"), Some(Signal::Hup));
    assert_eq!(Signal::from_command("reopen"), Some(Signal::Usr1));
    assert_eq!(Signal::from_command("quit"), Some(Signal::Quit));
    assert_eq!(Signal::from_command("stop"), Some(Signal::Term));
    assert_eq!(Signal::from_command("nope"), None);
    let all = SigSet::managed();
    assert!(Signal::ALL.iter().all(|s| all.contains(*s)));
    let some = SigSet::empty().with(Signal::Hup);
    assert!(some.contains(Signal::Hup) && !some.contains(Signal::Term));
    assert_eq!(format!("{some:?}"), "{Hup}");
}

#[test]
fn child_sees_hup_usr1_quit_via_sigsuspend() {
    let ready: Shm<AtomicU64> = Shm::new().expect("shm");
    let child = {
        let ready = &ready;
        spawn(move || {
            if install().is_err() {
                return 100;
            }
            // nginx master style: block everything managed, then only let
            // signals in inside sigsuspend.
            if block(&SigSet::managed()).is_err() {
                return 101;
            }
            // A safety net so a lost signal fails the test instead of hanging.
            if set_interval_timer(20).is_err() {
                return 102;
            }
            ready.store(1, SeqCst);
            let (mut seen, mut ticks) = (0, 0);
            let empty = SigSet::empty();
            while ticks < 500 {
                if take(Signal::Hup) {
                    seen |= 1;
                }
                if take(Signal::Usr1) {
                    seen |= 2;
                }
                if take(Signal::Quit) {
                    seen |= 4;
                }
                if take(Signal::Alrm) {
                    ticks += 1;
                }
                if seen == 7 {
                    break;
                }
                suspend(&empty);
            }
            if take(Signal::Hup) || take(Signal::Term) || is_pending(Signal::Int) {
                seen |= 8; // flags must be cleared by take, others never set
            }
            seen
        })
    };
    wait_ready(&ready);
    send(child, Signal::Hup).expect("kill HUP");
    send(child, Signal::Usr1).expect("kill USR1");
    send(child, Signal::Quit).expect("kill QUIT");
    assert_eq!(
        wait_exit(child, Duration::from_secs(20)),
        ExitStatus::Exited(7)
    );
}

#[test]
fn interval_timer_ticks_repeatedly() {
    let child = spawn(|| {
        if install().is_err() || block(&SigSet::managed()).is_err() {
            return 100;
        }
        if set_interval_timer(10).is_err() {
            return 101;
        }
        let mut ticks = 0;
        while ticks < 5 {
            suspend(&SigSet::empty());
            if take(Signal::Alrm) {
                ticks += 1;
            }
        }
        if set_interval_timer(0).is_err() {
            return 102;
        }
        0
    });
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Exited(0)
    );
}

fn readable(fd: &impl rustix::fd::AsFd, timeout_ms: i64) -> Result<bool, rustix::io::Errno> {
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let ts = Timespec {
        tv_sec: timeout_ms / 1000,
        tv_nsec: (timeout_ms % 1000) * 1_000_000,
    };
    rustix::event::poll(&mut fds, Some(&ts)).map(|n| n == 1)
}

fn drain(fd: &impl rustix::fd::AsFd) -> u64 {
    let mut buf = [0u8; 8];
    match rustix::io::read(fd, &mut buf) {
        Ok(8) => u64::from_ne_bytes(buf),
        _ => 0,
    }
}

#[test]
fn notify_fd_wakes_poll() {
    let ready: Shm<AtomicU64> = Shm::new().expect("shm");
    let child = {
        let ready = &ready;
        spawn(move || {
            let Ok((r, w)) = pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC) else {
                return 100;
            };
            set_notify_fd(Some(w.as_raw_fd()));
            if install().is_err() {
                return 101;
            }
            // 1. A signal that lands before the wait: the poke makes the fd
            //    readable, so the wait cannot miss it.
            if send(getpid(), Signal::Usr2).is_err() {
                return 102;
            }
            if readable(&r, 0) != Ok(true) || drain(&r) != 1 || !take(Signal::Usr2) {
                return 103;
            }
            // 2. A signal from the parent while we sit in poll(2).
            ready.store(1, SeqCst);
            let mut woke = false;
            for _ in 0..20 {
                match readable(&r, 1000) {
                    Ok(true) => {
                        woke = true;
                        break;
                    }
                    // Interrupted by the handler: the poke is already there.
                    Err(rustix::io::Errno::INTR) => continue,
                    _ => continue,
                }
            }
            if !woke || drain(&r) != 1 || !take(Signal::Usr2) {
                return 104;
            }
            // 3. Unhooked: the handler no longer writes.
            set_notify_fd(None);
            if send(getpid(), Signal::Usr2).is_err() {
                return 105;
            }
            if readable(&r, 0) != Ok(false) || !take(Signal::Usr2) {
                return 106;
            }
            0
        })
    };
    wait_ready(&ready);
    send(child, Signal::Usr2).expect("kill USR2");
    assert_eq!(
        wait_exit(child, Duration::from_secs(30)),
        ExitStatus::Exited(0)
    );
}

fn raise_pipe() -> bool {
    rustix::process::kill_process(getpid(), rustix::process::Signal::PIPE).is_ok()
}

#[test]
fn sigpipe_is_ignored_after_install() {
    // The Rust runtime already ignores SIGPIPE, so first restore the default
    // (and check it is fatal) to make sure `install` is what ignores it.
    let control = spawn(|| {
        if reset_to_default().is_err() || !raise_pipe() {
            return 100;
        }
        101
    });
    assert_eq!(
        wait_exit(control, Duration::from_secs(10)),
        ExitStatus::Signaled(libc::SIGPIPE, false)
    );
    let child = spawn(|| {
        if reset_to_default().is_err() || install().is_err() {
            return 100;
        }
        if !raise_pipe() {
            return 101;
        }
        0
    });
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Exited(0)
    );
}

#[test]
fn reset_to_default_restores_fatal_term() {
    let child = spawn(|| {
        if install().is_err() || block(&SigSet::managed()).is_err() {
            return 100;
        }
        // Pending flag from before the reset must be forgotten.
        if send(getpid(), Signal::Hup).is_err() {
            return 101;
        }
        if set_mask(&SigSet::empty()).is_err() || !is_pending(Signal::Hup) {
            return 102;
        }
        if reset_to_default().is_err() || is_pending(Signal::Hup) {
            return 103;
        }
        let _ = send(getpid(), Signal::Term);
        // Not reached: default SIGTERM action terminates the process.
        104
    });
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Signaled(libc::SIGTERM, false)
    );
}

#[test]
fn block_returns_previous_mask_and_clear_pending_forgets() {
    let child = spawn(|| {
        if install().is_err() {
            return 100;
        }
        let Ok(before) = block(&SigSet::empty().with(Signal::Usr1)) else {
            return 101;
        };
        if before.contains(Signal::Usr1) {
            return 102;
        }
        // Blocked: the handler must not run yet.
        if send(getpid(), Signal::Usr1).is_err() || is_pending(Signal::Usr1) {
            return 103;
        }
        let Ok(during) = set_mask(&before) else {
            return 104;
        };
        if !during.contains(Signal::Usr1) {
            return 105;
        }
        // Unblocking delivered it before set_mask returned.
        if !is_pending(Signal::Usr1) {
            return 106;
        }
        clear_pending();
        if take(Signal::Usr1) {
            return 107;
        }
        0
    });
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Exited(0)
    );
}
