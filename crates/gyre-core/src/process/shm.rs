//! The shared zone every worker sees (what nginx's `ngx_event_module_init`
//! carves out of one `ngx_shm_alloc`): the accept mutex, the connection serial
//! counter and the stub_status counters.
//!
//! This module owns the zone's layout ([`ZoneLayout`]) and the operations on
//! each part. The mapping itself comes from [`crate::sys::shm`].
//!
//! Every field sits on its own 64-byte cache line: workers on different cores
//! bump different counters constantly, and sharing a line would make each
//! increment bounce that line between cores (false sharing). Adding a counter
//! later means appending a field to [`ZoneLayout`] — the zone is created fresh
//! by each master, so there is no on-disk or cross-version layout to keep.

use std::io;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use crate::sys::process::Pid;
use crate::sys::shm::{Shm, ShmSafe};

/// Cache line size assumed for padding (x86-64 and most arm64 cores).
pub const CACHE_LINE: usize = 64;

/// nginx's `ngx_shmtx_t` in its atomic form, used as the accept mutex.
///
/// The lock word holds the holder's pid (0 = free). Storing the pid rather
/// than a flag is what lets the master release a lock whose holder died
/// (`force_unlock`), and lets anyone ask who holds it.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct AcceptMutex {
    lock: AtomicI32,
}

impl AcceptMutex {
    /// Tries once to take the lock for `pid`; never blocks (workers that lose
    /// simply don't accept this iteration, as in nginx).
    pub fn try_lock(&self, pid: Pid) -> bool {
        // The plain load first avoids a locked RMW (and a cache line
        // invalidation) when the lock is obviously held — ngx_shmtx_trylock.
        self.lock.load(Ordering::Relaxed) == 0
            && self
                .lock
                .compare_exchange(0, pid.as_raw_pid(), Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Releases the lock if `pid` holds it; false otherwise (a worker must
    /// never release someone else's lock).
    pub fn unlock(&self, pid: Pid) -> bool {
        self.lock
            .compare_exchange(pid.as_raw_pid(), 0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Releases the lock on behalf of `pid`, which the master has just reaped:
    /// a worker killed while holding the mutex would otherwise stop every
    /// other worker from accepting. Returns whether the dead pid held it.
    pub fn force_unlock(&self, pid: Pid) -> bool {
        // Same CAS as unlock, but the ordering documents the intent: the dead
        // holder's critical section is over, so release it to the others.
        self.lock
            .compare_exchange(pid.as_raw_pid(), 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// The current holder, if any (a racy snapshot, for diagnostics and for
    /// the master's "did the dead worker hold it" check).
    pub fn holder(&self) -> Option<Pid> {
        Pid::from_raw(self.lock.load(Ordering::Acquire))
    }
}

/// A monotonically increasing shared counter on its own cache line.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds `n` and returns the previous value: a unique serial across all
    /// processes (nginx's `ngx_atomic_fetch_add(ngx_connection_counter, 1)`).
    #[inline]
    pub fn fetch_add(&self, n: u64) -> u64 {
        self.0.fetch_add(n, Ordering::Relaxed)
    }

    /// The current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A shared gauge that goes up and down, on its own cache line.
///
/// Signed so that a decrement racing ahead of its increment (or a worker that
/// dies mid-connection) shows up as a small negative, not 2^64 - 1.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Gauge(AtomicI64);

impl Gauge {
    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Subtracts one.
    #[inline]
    pub fn dec(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    /// Adds `n` (may be negative).
    #[inline]
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The current value.
    #[inline]
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// nginx's stub_status counters (`ngx_stat_*`), shared by all workers.
///
/// Fields are public because each is only an atomic with its own methods;
/// there is no cross-field invariant to protect.
#[repr(C)]
#[derive(Debug)]
pub struct Stats {
    /// Connections accepted.
    pub accepted: Counter,
    /// Connections handled (accepted and given a connection slot).
    pub handled: Counter,
    /// Requests (protocol-level) started.
    pub requests: Counter,
    /// Open client connections, including idle ones.
    pub active: Gauge,
    /// Connections reading a request.
    pub reading: Gauge,
    /// Connections writing a response.
    pub writing: Gauge,
    /// Idle (keep-alive) connections waiting for a request.
    pub waiting: Gauge,
}

/// A plain copy of [`Stats`] at one moment (each field read separately, so
/// fields may be from slightly different instants, as in nginx).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    pub accepted: u64,
    pub handled: u64,
    pub requests: u64,
    pub active: i64,
    pub reading: i64,
    pub writing: i64,
    pub waiting: i64,
}

impl Stats {
    /// Reads every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            accepted: self.accepted.get(),
            handled: self.handled.get(),
            requests: self.requests.get(),
            active: self.active.get(),
            reading: self.reading.get(),
            writing: self.writing.get(),
            waiting: self.waiting.get(),
        }
    }
}

/// The zone's layout. Append new parts at the end (each cache-line aligned);
/// the region is sized from `size_of::<ZoneLayout>()`.
#[repr(C)]
#[derive(Debug)]
pub struct ZoneLayout {
    /// The accept mutex (`ngx_accept_mutex`).
    pub accept_mutex: AcceptMutex,
    /// Connection serial numbers (`ngx_connection_counter`).
    pub connection_counter: Counter,
    /// stub_status counters.
    pub stats: Stats,
}

// SAFETY: every part is #[repr(C)] and made only of integer atomics (padding
// aside, which is never read), valid for any bit pattern, mutated only via
// atomic operations, with no pointers and no Drop.
unsafe impl ShmSafe for AcceptMutex {}
// SAFETY: as above — a single AtomicU64 in a #[repr(C)] wrapper.
unsafe impl ShmSafe for Counter {}
// SAFETY: as above — a single AtomicI64 in a #[repr(C)] wrapper.
unsafe impl ShmSafe for Gauge {}
// SAFETY: #[repr(C)] struct of Counter/Gauge fields, each ShmSafe.
unsafe impl ShmSafe for Stats {}
// SAFETY: #[repr(C)] struct of ShmSafe parts.
unsafe impl ShmSafe for ZoneLayout {}

/// The shared zone: created once by the master before forking, inherited by
/// every worker (the mapping survives `fork`). Cloning is a refcount bump.
#[derive(Debug, Clone)]
pub struct SharedZone {
    shm: Arc<Shm<ZoneLayout>>,
}

impl SharedZone {
    /// Maps a fresh zeroed zone: mutex free, all counters zero.
    pub fn new() -> io::Result<SharedZone> {
        Ok(SharedZone {
            shm: Arc::new(Shm::new()?),
        })
    }

    /// The accept mutex.
    pub fn accept_mutex(&self) -> &AcceptMutex {
        &self.shm.accept_mutex
    }

    /// The stub_status counters.
    pub fn stats(&self) -> &Stats {
        &self.shm.stats
    }

    /// The connection serial counter.
    pub fn connection_counter(&self) -> &Counter {
        &self.shm.connection_counter
    }

    /// The whole layout, for parts added later.
    pub fn layout(&self) -> &ZoneLayout {
        &self.shm
    }
}
