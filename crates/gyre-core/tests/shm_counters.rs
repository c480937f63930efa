//! stub_status counters and the connection serial counter, bumped by many
//! processes at once, must add up exactly; every counter sits on its own
//! cache line.

mod util;

use util::fork::{spawn, wait_exit};

use std::sync::atomic::{AtomicU64, Ordering::*};
use std::time::Duration;

use gyre_core::process::shm::{Counter, Gauge, SharedZone, StatsSnapshot, CACHE_LINE};
use gyre_core::sys::process::ExitStatus;
use gyre_core::sys::shm::Shm;

#[test]
fn every_counter_is_on_its_own_cache_line() {
    assert_eq!(size_of::<Counter>(), CACHE_LINE);
    assert_eq!(size_of::<Gauge>(), CACHE_LINE);
    let zone = SharedZone::new().expect("zone");
    let s = zone.stats();
    let mut addrs = [
        zone.accept_mutex() as *const _ as usize,
        zone.connection_counter() as *const _ as usize,
        &s.accepted as *const _ as usize,
        &s.handled as *const _ as usize,
        &s.requests as *const _ as usize,
        &s.active as *const _ as usize,
        &s.reading as *const _ as usize,
        &s.writing as *const _ as usize,
        &s.waiting as *const _ as usize,
    ];
    for a in addrs {
        assert_eq!(a % CACHE_LINE, 0, "{a:#x} not cache-line aligned");
    }
    addrs.sort_unstable();
    for w in addrs.windows(2) {
        assert!(
            w[1] - w[0] >= CACHE_LINE,
            "{:#x} and {:#x} share a line",
            w[0],
            w[1]
        );
    }
}

#[test]
fn fresh_zone_is_zeroed_and_snapshot_tracks_updates() {
    let zone = SharedZone::new().expect("zone");
    let s = zone.stats();
    assert_eq!(s.snapshot(), StatsSnapshot::default());
    assert_eq!(zone.connection_counter().get(), 0);
    assert_eq!(zone.accept_mutex().holder(), None);

    s.accepted.inc();
    s.handled.add(2);
    s.requests.add(5);
    s.active.inc();
    s.active.inc();
    s.active.dec();
    s.reading.add(3);
    s.writing.add(-1);
    s.waiting.inc();
    assert_eq!(zone.connection_counter().fetch_add(1), 0);
    assert_eq!(zone.connection_counter().fetch_add(1), 1);
    assert_eq!(
        s.snapshot(),
        StatsSnapshot {
            accepted: 1,
            handled: 2,
            requests: 5,
            active: 1,
            reading: 3,
            writing: -1,
            waiting: 1,
        }
    );
}

#[test]
fn counters_from_many_children_sum_exactly() {
    const CHILDREN: u64 = 4;
    const N: u64 = 4096;
    const WORDS: usize = (CHILDREN * N / 64) as usize;
    let zone = SharedZone::new().expect("zone");
    // One bit per connection serial: a duplicate serial would find its bit set.
    let seen: Shm<[AtomicU64; WORDS]> = Shm::new().expect("bitmap");
    let dups: Shm<AtomicU64> = Shm::new().expect("dups");

    let mut kids = Vec::new();
    for _ in 0..CHILDREN {
        let (zone, seen, dups) = (&zone, &seen, &dups);
        kids.push(spawn(move || {
            let s = zone.stats();
            for _ in 0..N {
                let serial = zone.connection_counter().fetch_add(1);
                let (word, bit) = ((serial / 64) as usize, serial % 64);
                match seen.get(word) {
                    Some(w) if w.fetch_or(1 << bit, Relaxed) & (1 << bit) == 0 => {}
                    _ => {
                        dups.fetch_add(1, Relaxed);
                    }
                }
                s.accepted.inc();
                s.handled.inc();
                s.active.inc();
                s.reading.inc();
                s.requests.add(2);
                s.reading.dec();
                s.writing.inc();
                s.writing.dec();
                s.waiting.inc();
                s.waiting.dec();
                s.active.dec();
            }
            // Leave one connection open per child so gauges are not all zero.
            s.active.inc();
            0
        }));
    }
    for k in kids {
        assert_eq!(wait_exit(k, Duration::from_secs(60)), ExitStatus::Exited(0));
    }
    let total = CHILDREN * N;
    assert_eq!(
        zone.stats().snapshot(),
        StatsSnapshot {
            accepted: total,
            handled: total,
            requests: 2 * total,
            active: CHILDREN as i64,
            reading: 0,
            writing: 0,
            waiting: 0,
        }
    );
    assert_eq!(zone.connection_counter().get(), total);
    assert_eq!(dups.load(SeqCst), 0, "duplicate connection serials");
    assert!(
        seen.iter().all(|w| w.load(SeqCst) == u64::MAX),
        "serial gap"
    );
}
