//! The accept mutex across real processes: mutual exclusion under contention,
//! holder-only unlock, and the master's force_unlock after a holder dies.

mod util;

use util::fork::{spawn, wait_exit};

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

use gyre_core::process::shm::SharedZone;
use gyre_core::sys::process::{getpid, ExitStatus, Pid};
use gyre_core::sys::shm::Shm;
use gyre_core::sys::signal::send_kill;

fn pid(n: i32) -> Pid {
    Pid::from_raw(n).expect("nonzero pid")
}

#[test]
fn unlock_by_non_holder_fails() {
    let zone = SharedZone::new().expect("zone");
    let m = zone.accept_mutex();
    let (a, b) = (pid(1001), pid(1002));
    assert_eq!(m.holder(), None);
    assert!(m.try_lock(a));
    assert!(!m.try_lock(b), "second locker must fail");
    assert!(!m.try_lock(a), "not reentrant");
    assert!(!m.unlock(b), "non-holder unlock must fail");
    assert!(!m.force_unlock(b), "force_unlock of a non-holder must fail");
    assert_eq!(m.holder(), Some(a));
    assert!(m.unlock(a));
    assert!(!m.unlock(a), "double unlock must fail");
    assert_eq!(m.holder(), None);
    assert!(m.try_lock(b));
    assert_eq!(m.holder(), Some(b));
}

#[test]
fn clones_share_the_same_mutex() {
    let zone = SharedZone::new().expect("zone");
    let other = zone.clone();
    assert!(zone.accept_mutex().try_lock(pid(7)));
    assert_eq!(other.accept_mutex().holder(), Some(pid(7)));
    assert!(other.accept_mutex().unlock(pid(7)));
    assert_eq!(zone.accept_mutex().holder(), None);
}

const INSIDE: usize = 0;
const VIOLATIONS: usize = 1;
const PLAIN: usize = 2;
const ACQUIRED: usize = 3;
const GO: usize = 4;

#[test]
fn mutual_exclusion_across_processes() {
    const CHILDREN: usize = 3;
    const ITERS: u64 = 40_000;
    let zone = SharedZone::new().expect("zone");
    let aux: Shm<[AtomicU64; 8]> = Shm::new().expect("aux shm");

    let mut kids = Vec::new();
    for _ in 0..CHILDREN {
        let (zone, aux) = (&zone, &aux);
        kids.push(spawn(move || {
            let me = getpid();
            let m = zone.accept_mutex();
            while aux[GO].load(Acquire) == 0 {
                spin_loop();
            }
            let mut got = 0;
            for _ in 0..ITERS {
                if !m.try_lock(me) {
                    spin_loop();
                    continue;
                }
                if aux[INSIDE].fetch_add(1, SeqCst) != 0 {
                    aux[VIOLATIONS].fetch_add(1, SeqCst);
                }
                if m.holder() != Some(me) {
                    aux[VIOLATIONS].fetch_add(1, SeqCst);
                }
                // A non-atomic read-modify-write: only exclusion keeps it exact.
                let v = aux[PLAIN].load(Relaxed);
                for _ in 0..20 {
                    spin_loop();
                }
                aux[PLAIN].store(v + 1, Relaxed);
                aux[INSIDE].fetch_sub(1, SeqCst);
                if !m.unlock(me) {
                    aux[VIOLATIONS].fetch_add(1, SeqCst);
                }
                got += 1;
            }
            aux[ACQUIRED].fetch_add(got, SeqCst);
            0
        }));
    }
    aux[GO].store(1, Release);
    for k in kids {
        assert_eq!(wait_exit(k, Duration::from_secs(60)), ExitStatus::Exited(0));
    }
    assert_eq!(aux[VIOLATIONS].load(SeqCst), 0, "two holders at once");
    let acquired = aux[ACQUIRED].load(SeqCst);
    assert!(acquired > 0);
    assert_eq!(
        aux[PLAIN].load(SeqCst),
        acquired,
        "lost updates under the lock"
    );
    assert_eq!(zone.accept_mutex().holder(), None);
}

#[test]
fn force_unlock_after_holder_killed() {
    let zone = SharedZone::new().expect("zone");
    let child = {
        let zone = &zone;
        spawn(move || {
            if !zone.accept_mutex().try_lock(getpid()) {
                return 2;
            }
            loop {
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let start = Instant::now();
    while zone.accept_mutex().holder() != Some(child) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "child never locked"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    send_kill(child).expect("kill");
    assert_eq!(
        wait_exit(child, Duration::from_secs(10)),
        ExitStatus::Signaled(libc::SIGKILL, false)
    );
    let me = getpid();
    // The dead holder still owns the lock word until the master steps in.
    assert!(!zone.accept_mutex().try_lock(me));
    assert!(
        !zone.accept_mutex().force_unlock(me),
        "wrong pid must not unlock"
    );
    assert!(zone.accept_mutex().force_unlock(child));
    assert_eq!(zone.accept_mutex().holder(), None);
    assert!(!zone.accept_mutex().force_unlock(child), "already released");
    assert!(zone.accept_mutex().try_lock(me));
    assert!(zone.accept_mutex().unlock(me));
}
