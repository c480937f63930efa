//! The raw shared mapping: page rounding, zero fill, typed views, and that a
//! forked child really shares the pages (MAP_SHARED, not copy-on-write).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

use gyre_core::sys::process::{exit_now, fork, try_wait_child, ExitStatus, Fork, Pid};
use gyre_core::sys::shm::{page_size, Shm, ShmRegion};
use gyre_core::sys::signal::send_kill;

/// Ends the child with 99 if `f` unwinds, so a panicking child never returns
/// into the test harness.
struct ExitOnUnwind;
impl Drop for ExitOnUnwind {
    fn drop(&mut self) {
        exit_now(99);
    }
}

/// Forks a child that runs `f` (atomics and raw syscalls only: the test binary
/// is multithreaded) and `_exit`s with its result.
fn spawn(f: impl FnOnce() -> i32) -> Pid {
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
fn wait_exit(pid: Pid, limit: Duration) -> ExitStatus {
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

#[test]
fn region_is_page_rounded_aligned_and_zeroed() {
    let page = page_size();
    assert!(page.is_power_of_two());
    let r = ShmRegion::new(100).expect("map");
    assert_eq!(r.len(), page);
    assert!(!r.is_empty());
    assert_eq!(r.as_ptr() as usize % page, 0);
    let words = r.zone::<[AtomicU64; 64]>().expect("fits");
    assert!(words.iter().all(|w| w.load(Relaxed) == 0));

    let r = ShmRegion::new(page + 1).expect("map");
    assert_eq!(r.len(), 2 * page);
    let r = ShmRegion::new(0).expect("map");
    assert_eq!(r.len(), page);
}

#[test]
fn zone_rejects_types_that_do_not_fit() {
    let r = ShmRegion::new(1).expect("map");
    assert!(r.zone::<[AtomicU64; 1 << 20]>().is_none());
    assert!(r.zone::<AtomicU32>().is_some());
}

#[test]
fn writes_are_visible_across_fork() {
    let shm: Shm<[AtomicU64; 4]> = Shm::new().expect("map");
    shm[0].store(7, SeqCst);
    let child = {
        let shm = &shm;
        spawn(move || {
            if shm[0].load(SeqCst) != 7 {
                return 1;
            }
            shm[1].store(42, SeqCst);
            // Wait for the parent's answer: proves the sharing goes both ways.
            while shm[2].load(SeqCst) == 0 {
                std::hint::spin_loop();
            }
            if shm[2].load(SeqCst) == 43 {
                0
            } else {
                2
            }
        })
    };
    let start = Instant::now();
    while shm[1].load(SeqCst) != 42 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "child write not seen"
        );
        std::thread::yield_now();
    }
    shm[2].store(43, SeqCst);
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Exited(0)
    );
}
