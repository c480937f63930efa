//! The shared-memory zones of `limit_req_zone` (and, later,
//! `limit_conn_zone`): per-key state counted across all workers, as
//! nginx's slab zones are.
//!
//! A zone is mapped when the configuration is read, in the master, before
//! the workers fork, and inherited by them (the pattern of
//! `ssl_session_cache shared:`, see crate::ssl_shared_cache). It is a
//! fixed-size table of 64-byte slots made only of atomic words (gyre-core's
//! `sys::shm`): a lock word, a 128-bit hash of the key, and three state
//! words. `zone=NAME:SIZE` holds SIZE/64 states, about nginx's "16 thousand
//! 64-byte states" per megabyte. A key hashes to a bucket of [`WAYS`]
//! slots: its own slot, else an empty one, else the least recently used
//! (nginx's LRU expiry, bounded by the configured size). One lock word per
//! bucket (its first slot's) guards all of its slots: looking for the key
//! and placing it must be one step, or two workers could each miss the
//! other's key and store it twice (and, with a lock per slot, a busy slot
//! skipped during the search did exactly that: a key counted in two
//! places). The lock is tried a bounded number of times, yielding to a
//! holder that was descheduled: a worker that died holding one costs that
//! bucket's keys a refusal, never a hang.

use std::sync::atomic::{AtomicU64, Ordering};

use gyre_core::conf::Directive;
use gyre_core::sys::shm::ShmRegion;
use log::Level;

/// What limit_req and limit_conn do with a request over their limit, as
/// one level sets it (`*_status`, `*_log_level`, `*_dry_run`; `None`: not
/// set here).
#[derive(Debug, Clone, Copy, Default)]
pub struct RefusalSet {
    pub status: Option<u16>,
    pub log_level: Option<Level>,
    pub dry_run: Option<bool>,
}

/// [`RefusalSet`] resolved for a location, with nginx's defaults.
#[derive(Debug, Clone, Copy)]
pub struct Refusal {
    pub status: u16,
    pub log_level: Level,
    pub dry_run: bool,
}

impl Refusal {
    /// Each setting from the innermost of `levels` that has it.
    pub fn resolve<'a>(levels: impl Iterator<Item = &'a RefusalSet>) -> Refusal {
        let mut r = Refusal {
            status: 503,
            log_level: gyre_core::errlog::ERROR,
            dry_run: false,
        };
        for l in levels {
            r.status = l.status.unwrap_or(r.status);
            r.log_level = l.log_level.unwrap_or(r.log_level);
            r.dry_run = l.dry_run.unwrap_or(r.dry_run);
        }
        r
    }

    /// `, dry run` for the log line when the refusal is only logged.
    pub fn dry_note(&self) -> &'static str {
        if self.dry_run {
            ", dry run"
        } else {
            ""
        }
    }
}

/// `*_status CODE` (400..599).
pub fn parse_status(d: &Directive) -> Result<u16, String> {
    let n = d.number(0)?;
    if !(400..=599).contains(&n) {
        return Err("value must be between 400 and 599".into());
    }
    Ok(n as u16)
}

/// `*_log_level info|notice|warn|error`, to gyre's log levels.
pub fn parse_log_level(d: &Directive) -> Result<Level, String> {
    Ok(match d.arg(0) {
        "info" => gyre_core::errlog::INFO,
        "notice" => gyre_core::errlog::NOTICE,
        "warn" => gyre_core::errlog::WARN,
        "error" => gyre_core::errlog::ERROR,
        a => return Err(format!("invalid value \"{a}\"")),
    })
}

const SLOT_WORDS: usize = 8;
/// Slots a key may live in.
pub const WAYS: usize = 8;
const LOCK_TRIES: u32 = 10_000;

/// One key's state, as the module using the zone defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct State {
    /// limit_req: the excess in 1/1000 requests.
    pub excess: i64,
    /// The last time the state was used (ms of the monotonic clock).
    pub last: u64,
    /// limit_conn: connections counted.
    pub count: i64,
}

pub struct Zone {
    pub name: String,
    pub size: usize,
    region: ShmRegion,
    slots: usize,
}

impl std::fmt::Debug for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zone")
            .field("name", &self.name)
            .field("slots", &self.slots)
            .finish()
    }
}

impl PartialEq for Zone {
    fn eq(&self, o: &Zone) -> bool {
        self.name == o.name
    }
}

/// Two independent 64-bit FNV-1a variants: a collision between two keys
/// of one bucket would need both to agree.
fn hash(key: &[u8]) -> (u64, u64) {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x8422_2325_cbf2_9ce4;
    for &c in key {
        a ^= u64::from(c);
        a = a.wrapping_mul(0x0100_0000_01b3);
        b = b.wrapping_mul(0x0000_0100_0000_01b3) ^ u64::from(c);
    }
    // 0 marks an empty slot.
    (a | 1, b)
}

/// A bucket under its lock: [`WAYS`] slots.
struct Bucket<'a> {
    w: &'a [AtomicU64],
}

impl Drop for Bucket<'_> {
    fn drop(&mut self) {
        self.w[0].store(0, Ordering::Release);
    }
}

impl Bucket<'_> {
    fn slot(&self, i: usize) -> &[AtomicU64] {
        &self.w[i * SLOT_WORDS..(i + 1) * SLOT_WORDS]
    }
    fn key(&self, i: usize) -> (u64, u64) {
        let w = self.slot(i);
        (w[1].load(Ordering::Relaxed), w[2].load(Ordering::Relaxed))
    }
    fn state(&self, i: usize) -> State {
        let w = self.slot(i);
        State {
            excess: w[3].load(Ordering::Relaxed) as i64,
            last: w[4].load(Ordering::Relaxed),
            count: w[5].load(Ordering::Relaxed) as i64,
        }
    }
    fn store(&self, i: usize, k: (u64, u64), s: State) {
        let w = self.slot(i);
        w[1].store(k.0, Ordering::Relaxed);
        w[2].store(k.1, Ordering::Relaxed);
        w[3].store(s.excess as u64, Ordering::Relaxed);
        w[4].store(s.last, Ordering::Relaxed);
        w[5].store(s.count as u64, Ordering::Relaxed);
    }
}

impl Zone {
    /// Maps a zone of `size` bytes.
    pub fn new(name: &str, size: usize) -> Result<Zone, String> {
        let region = ShmRegion::new(size).map_err(|e| {
            format!("shared zone \"{name}\" of size {size} cannot be allocated ({e})")
        })?;
        let slots = region.words().len() / SLOT_WORDS;
        Ok(Zone {
            name: name.to_string(),
            size,
            region,
            slots,
        })
    }

    /// States the zone can hold.
    pub fn capacity(&self) -> usize {
        self.slots
    }

    /// The bucket starting at slot `base`, locked; `None` when the lock
    /// stayed taken for [`LOCK_TRIES`] tries.
    fn lock(&self, base: usize) -> Option<Bucket<'_>> {
        let w = self
            .region
            .words()
            .get(base * SLOT_WORDS..(base + WAYS) * SLOT_WORDS)?;
        for n in 0..LOCK_TRIES {
            if w[0]
                .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Some(Bucket { w });
            }
            // A short spin for a holder that is running; then let one that
            // was descheduled run (two cores, many workers); then sleep, so
            // a holder behind many yielding waiters gets a CPU (yields
            // alone ran out under a loaded test machine). At most ~0.1 s
            // in all before giving up on a holder that died.
            if n < 64 {
                std::hint::spin_loop();
            } else if n < 1024 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(10));
            }
        }
        None
    }

    /// Runs `f` on `key`'s state under its bucket's lock, `None` being a
    /// key not in the zone; whatever `f` leaves in the state is stored (a
    /// `None` left removes the key). A new key may take the place of a
    /// least recently used one that is `evictable`. `None` when no slot
    /// could be had.
    pub fn with<R>(
        &self,
        key: &[u8],
        evictable: impl Fn(&State) -> bool,
        f: impl FnOnce(&mut Option<State>) -> R,
    ) -> Option<R> {
        if self.slots < WAYS {
            return None;
        }
        let k = hash(key);
        let base = (k.0 as usize % self.slots) & !(WAYS - 1);
        let b = self.lock(base)?;
        // Its own slot, else an empty one, else the least recently used.
        let mut pick: Option<(usize, u64, bool)> = None;
        for i in 0..WAYS {
            let sk = b.key(i);
            if sk == k {
                let mut st = Some(b.state(i));
                let r = f(&mut st);
                match st {
                    Some(st) => b.store(i, k, st),
                    None => b.store(i, (0, 0), State::default()),
                }
                return Some(r);
            }
            let (empty, last) = (sk.0 == 0, b.state(i).last);
            if !empty && !evictable(&b.state(i)) {
                continue;
            }
            let better = match pick {
                None => true,
                Some((_, _, true)) => false,
                Some((_, pl, false)) => empty || gyre_core::event::msec_before(last, pl),
            };
            if better {
                pick = Some((i, last, empty));
            }
        }
        let (i, _, _) = pick?;
        let mut st = None;
        let r = f(&mut st);
        if let Some(st) = st {
            b.store(i, k, st);
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_state_and_the_oldest_goes() {
        let z = Zone::new("t", 64 * 1024).unwrap();
        assert_eq!(z.capacity(), 1024);
        z.with(
            b"a",
            |_| true,
            |s| {
                assert!(s.is_none());
                *s = Some(State {
                    excess: 5,
                    last: 10,
                    count: 0,
                });
            },
        )
        .unwrap();
        assert_eq!(
            z.with(b"a", |_| true, |s| s.map(|s| s.excess)).unwrap(),
            Some(5)
        );
        assert_eq!(
            z.with(b"b", |_| true, |s| s.map(|s| s.excess)).unwrap(),
            None
        );
        // Fill far beyond the capacity: bounded, and recent keys survive.
        for i in 0..10_000u64 {
            z.with(
                &i.to_le_bytes(),
                |_| true,
                |s| {
                    *s = Some(State {
                        excess: 1,
                        last: 100 + i,
                        count: 0,
                    })
                },
            )
            .unwrap();
        }
        assert_eq!(
            z.with(&9_999u64.to_le_bytes(), |_| true, |s| s.map(|s| s.last))
                .unwrap(),
            Some(10_099)
        );
        // Live states are never evicted: a bucket full of them refuses.
        let live = |s: &State| s.count == 0;
        let bucket = |k: &[u8]| (hash(k).0 as usize % z.capacity()) & !(WAYS - 1);
        let same: Vec<u64> = (1_000_000u64..)
            .filter(|i| bucket(&i.to_le_bytes()) == bucket(b"new"))
            .take(WAYS)
            .collect();
        for i in &same {
            z.with(&i.to_le_bytes(), live, |s| {
                *s = Some(State {
                    count: 1,
                    ..State::default()
                })
            })
            .unwrap();
        }
        assert!(z
            .with(b"new", live, |s| *s = Some(State::default()))
            .is_none());
        let k = same[3].to_le_bytes();
        assert_eq!(z.with(&k, live, |s| s.map(|s| s.count)), Some(Some(1)));
        // Removal.
        z.with(&9_999u64.to_le_bytes(), |_| true, |s| *s = None)
            .unwrap();
        assert_eq!(
            z.with(&9_999u64.to_le_bytes(), |_| true, |s| *s).unwrap(),
            None
        );
    }

    #[test]
    fn concurrent_updates_are_not_lost() {
        let z = std::sync::Arc::new(Zone::new("t", 64 * 1024).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let z = z.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        z.with(
                            b"k",
                            |_| true,
                            |s| {
                                let mut st = s.unwrap_or_default();
                                st.count += 1;
                                *s = Some(st);
                            },
                        )
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            z.with(b"k", |_| true, |s| s.map(|s| s.count)).unwrap(),
            Some(8000)
        );
    }
}
