//! The raw shared mapping: page rounding, zero fill, typed views, and that a
//! forked child really shares the pages (MAP_SHARED, not copy-on-write).

mod util;

use util::fork::{spawn, wait_exit};

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

use gyre_core::sys::process::ExitStatus;
use gyre_core::sys::shm::{page_size, Shm, ShmRegion};

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
