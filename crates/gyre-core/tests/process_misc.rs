//! Process syscalls in real children: fork/exit statuses, pids, the
//! RLIMIT_NOFILE round trip, setsid, stdio redirection and CPU affinity.
//!
//! Every wait here names its child (never `waitpid(-1)`), so these tests can
//! run in parallel; `waitpid(-1)` is exercised alone in `process_reap.rs`.

mod util;

use util::fork::{spawn, wait_exit};

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::*};
use std::time::Duration;

use gyre_core::sys::process::{
    get_nofile_limit, getpid, getppid, redirect_stdio_to_devnull, set_cpu_affinity,
    set_cpu_affinity_mask, set_nofile_limit, setsid, try_wait_child, wait_child, ExitStatus,
};
use gyre_core::sys::shm::Shm;
use gyre_core::sys::signal::send_kill;

#[test]
fn exit_code_is_reported() {
    let child = spawn(|| 7);
    assert_eq!(wait_child(child).expect("wait"), ExitStatus::Exited(7));
    let child = spawn(|| 0);
    let st = wait_child(child).expect("wait");
    assert!(st.success());
}

#[test]
fn killed_child_is_reported_as_signaled() {
    let child = spawn(|| loop {
        std::thread::sleep(Duration::from_millis(50));
    });
    assert_eq!(try_wait_child(child).expect("waitpid"), None);
    send_kill(child).expect("kill");
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Signaled(libc::SIGKILL, false)
    );
}

#[test]
fn child_pid_matches_fork_result() {
    let shm: Shm<[AtomicI64; 2]> = Shm::new().expect("shm");
    let parent = getpid();
    let child = {
        let shm = &shm;
        spawn(move || {
            shm[0].store(getpid().as_raw_pid() as i64, SeqCst);
            shm[1].store(getppid().map_or(0, |p| p.as_raw_pid() as i64), SeqCst);
            0
        })
    };
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Exited(0)
    );
    assert_eq!(shm[0].load(SeqCst), child.as_raw_pid() as i64);
    assert_eq!(shm[1].load(SeqCst), parent.as_raw_pid() as i64);
    assert_ne!(child, parent);
}

#[test]
fn nofile_limit_round_trip_in_child() {
    let (soft, hard) = get_nofile_limit();
    assert!(soft <= hard);
    // Stay within whatever limits the test runs under.
    let hi = hard.min(128);
    let lo = soft.min(hi / 2);
    let shm: Shm<[AtomicU64; 4]> = Shm::new().expect("shm");
    let child = {
        let shm = &shm;
        spawn(move || {
            // Lowering the hard limit is irreversible: only ever in a child.
            if set_nofile_limit(lo, hi).is_err() {
                return 1;
            }
            let (s, h) = get_nofile_limit();
            shm[0].store(s, SeqCst);
            shm[1].store(h, SeqCst);
            // Raising the soft limit back up to the (new) hard limit works.
            if set_nofile_limit(hi, hi).is_err() {
                return 2;
            }
            shm[2].store(get_nofile_limit().0, SeqCst);
            // Above the hard limit it must fail for an unprivileged process,
            // and may succeed for root; either way it must not crash.
            let _ = set_nofile_limit(hi * 2, hi * 2);
            0
        })
    };
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Exited(0)
    );
    assert_eq!((shm[0].load(SeqCst), shm[1].load(SeqCst)), (lo, hi));
    assert_eq!(shm[2].load(SeqCst), hi);
    // The parent's limits are untouched.
    assert_eq!(get_nofile_limit(), (soft, hard));
}

#[test]
fn setsid_and_devnull_redirect_in_child() {
    let null = rustix::fs::stat("/dev/null").expect("stat /dev/null");
    let child = spawn(move || {
        match setsid() {
            Ok(sid) if sid == getpid() => {}
            _ => return 1,
        }
        if redirect_stdio_to_devnull(false).is_err() {
            return 2;
        }
        for fd in [rustix::stdio::stdin(), rustix::stdio::stdout()] {
            match rustix::fs::fstat(fd.as_fd()) {
                Ok(st) if st.st_rdev == null.st_rdev && st.st_ino == null.st_ino => {}
                _ => return 3,
            }
        }
        // Writing to the redirected stdout goes nowhere and succeeds.
        match rustix::io::write(rustix::stdio::stdout(), b"discarded\n") {
            Ok(10) => 0,
            _ => 4,
        }
    });
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Exited(0)
    );
}

#[test]
fn cpu_affinity() {
    assert!(set_cpu_affinity_mask(&[]).is_err());
    assert!(set_cpu_affinity(1 << 20).is_err());
    let child = spawn(|| {
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 {
            return 1;
        }
        // The CPU we are running on is certainly in our allowed set.
        if set_cpu_affinity(cpu as usize).is_err() {
            return 2;
        }
        // SAFETY: as above.
        if unsafe { libc::sched_getcpu() } != cpu {
            return 3;
        }
        0
    });
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Exited(0)
    );
}
