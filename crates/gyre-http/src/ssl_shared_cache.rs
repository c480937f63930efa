//! `ssl_session_cache shared:NAME:SIZE`: TLS sessions in a shared-memory zone
//! every worker uses (nginx's `ngx_ssl_session_cache` in a shm zone), so a
//! session set up with one worker resumes on another.
//!
//! The zone is mapped when the configuration is read, in the master, and
//! inherited by the workers. It is a table of fixed-size slots made of
//! atomic words (the only way several processes may share memory safely in
//! Rust, see gyre-core's `sys::shm`): a lock word, the expiry time, the
//! lengths, a 32-byte key and up to [`VALUE_MAX`] bytes of session. A key
//! hashes to a bucket of [`WAYS`] slots; a new session takes an empty or
//! expired slot there, else the one that expires first. Each slot has its
//! own spin lock tried a bounded number of times: a worker that died holding
//! one costs that slot, never a hang (the cache then just misses).
//! Sessions larger than a slot (long client certificate chains) are not
//! cached. As in nginx, a reload keeps a zone whose name and size are
//! unchanged (the master remembers the zones of the configuration it last
//! read: [`SharedCache::kept_or_new`]), so sessions resume across a HUP;
//! tickets, on by default, do too when their key file is kept.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use gyre_core::event::tls::rustls::server::StoresServerSessions;
use gyre_core::sys::shm::ShmRegion;

/// Session bytes a slot holds.
pub const VALUE_MAX: usize = 1024;
const KEY_MAX: usize = 32;
/// Words per slot: lock, expiry, lengths, key, value.
const SLOT_WORDS: usize = 3 + KEY_MAX / 8 + VALUE_MAX / 8;
/// Slots a key may live in.
const WAYS: usize = 4;
/// Attempts at a slot lock before giving up on it.
const LOCK_TRIES: u32 = 1000;

pub struct SharedCache {
    region: ShmRegion,
    slots: usize,
    /// `ssl_session_timeout` of the configuration now using the zone.
    timeout_secs: std::sync::atomic::AtomicU64,
}

thread_local! {
    /// The zones of the configuration read last, by (name, size), and the
    /// ones the configuration being read has asked for so far.
    static ZONES: std::cell::RefCell<(Vec<Zone>, Vec<Zone>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

type Zone = (String, usize, Arc<SharedCache>);

/// Starts a configuration read: no zone asked for yet.
pub fn begin_read() {
    ZONES.with(|z| z.borrow_mut().1.clear());
}

/// Ends a configuration read that succeeded: its zones become the ones the
/// next reload may keep; the previous configuration's others are let go
/// (unmapped once their last user, an old worker's cycle, drops them).
pub fn commit_read() {
    ZONES.with(|z| {
        let mut z = z.borrow_mut();
        let reading = std::mem::take(&mut z.1);
        z.0 = reading;
    });
}

impl std::fmt::Debug for SharedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCache")
            .field("slots", &self.slots)
            .finish()
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// FNV-1a: keys are random session ids, any spread will do.
fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn store_bytes(words: &[AtomicU64], bytes: &[u8]) {
    for (w, chunk) in words.iter().zip(bytes.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        w.store(u64::from_le_bytes(b), Ordering::Relaxed);
    }
}

fn load_bytes(words: &[AtomicU64], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for w in words.iter().take(len.div_ceil(8)) {
        out.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A locked slot; unlocked on drop.
struct Slot<'a> {
    w: &'a [AtomicU64],
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.w[0].store(0, Ordering::Release);
    }
}

impl Slot<'_> {
    fn expire(&self) -> u64 {
        self.w[1].load(Ordering::Relaxed)
    }
    fn lens(&self) -> (usize, usize) {
        let l = self.w[2].load(Ordering::Relaxed);
        ((l & 0xffff) as usize, (l >> 16) as usize)
    }
    fn key_is(&self, key: &[u8]) -> bool {
        let (kl, _) = self.lens();
        kl == key.len() && load_bytes(&self.w[3..3 + KEY_MAX / 8], kl) == key
    }
    fn value(&self) -> Vec<u8> {
        let (_, vl) = self.lens();
        load_bytes(&self.w[3 + KEY_MAX / 8..], vl.min(VALUE_MAX))
    }
    fn clear(&self) {
        self.w[1].store(0, Ordering::Relaxed);
        self.w[2].store(0, Ordering::Relaxed);
    }
}

impl SharedCache {
    /// Maps a zone of `size` bytes; sessions live `timeout_secs`.
    pub fn new(size: usize, timeout_secs: u64) -> Result<Arc<SharedCache>, String> {
        let region = ShmRegion::new(size)
            .map_err(|e| format!("shared zone of size {size} cannot be allocated ({e})"))?;
        let slots = region.words().len() / SLOT_WORDS;
        Ok(Arc::new(SharedCache {
            region,
            slots,
            timeout_secs: AtomicU64::new(timeout_secs),
        }))
    }

    /// The zone `name` of the previous configuration if its size is the
    /// same (nginx keeps such a zone, and its sessions, across a reload),
    /// else a new one.
    pub fn kept_or_new(
        name: &str,
        size: usize,
        timeout_secs: u64,
    ) -> Result<Arc<SharedCache>, String> {
        let kept = ZONES.with(|z| {
            z.borrow()
                .0
                .iter()
                .find(|(n, sz, _)| n == name && *sz == size)
                .map(|(_, _, c)| c.clone())
        });
        let zone = match kept {
            Some(c) => {
                c.timeout_secs.store(timeout_secs, Ordering::Relaxed);
                c
            }
            None => SharedCache::new(size, timeout_secs)?,
        };
        ZONES.with(|z| {
            z.borrow_mut()
                .1
                .push((name.to_string(), size, zone.clone()))
        });
        Ok(zone)
    }

    /// Sessions the zone can hold.
    pub fn capacity(&self) -> usize {
        self.slots
    }

    fn lock(&self, i: usize) -> Option<Slot<'_>> {
        let w = self
            .region
            .words()
            .get(i * SLOT_WORDS..(i + 1) * SLOT_WORDS)?;
        for _ in 0..LOCK_TRIES {
            if w[0]
                .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Some(Slot { w });
            }
            std::hint::spin_loop();
        }
        None
    }

    fn bucket(&self, key: &[u8]) -> impl Iterator<Item = usize> {
        let n = self.slots.max(1);
        let base = (hash(key) as usize % n) & !(WAYS - 1);
        (base..base + WAYS).map(move |i| i % n)
    }

    fn find(&self, key: &[u8], remove: bool) -> Option<Vec<u8>> {
        let now = now_secs();
        for i in self.bucket(key) {
            let Some(s) = self.lock(i) else {
                continue;
            };
            if s.expire() > now && s.key_is(key) {
                let v = s.value();
                if remove {
                    s.clear();
                }
                return Some(v);
            }
        }
        None
    }
}

impl StoresServerSessions for SharedCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        if key.len() > KEY_MAX || value.len() > VALUE_MAX || self.slots == 0 {
            return false;
        }
        let now = now_secs();
        // The slot for it: the same key, else an empty or expired one, else
        // the one that expires first.
        let mut victim: Option<(usize, u64)> = None;
        for i in self.bucket(&key) {
            let Some(s) = self.lock(i) else {
                continue;
            };
            let e = s.expire();
            if e <= now || s.key_is(&key) {
                victim = Some((i, 0));
                break;
            }
            if victim.is_none_or(|(_, ve)| e < ve) {
                victim = Some((i, e));
            }
        }
        let Some((i, _)) = victim else {
            return false;
        };
        let Some(s) = self.lock(i) else {
            return false;
        };
        store_bytes(&s.w[3..3 + KEY_MAX / 8], &key);
        store_bytes(&s.w[3 + KEY_MAX / 8..], &value);
        s.w[2].store(
            key.len() as u64 | ((value.len() as u64) << 16),
            Ordering::Relaxed,
        );
        s.w[1].store(
            now + self.timeout_secs.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.find(key, false)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.find(key, true)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_take_and_limits() {
        let c = SharedCache::new(64 * 1024, 300).unwrap();
        assert!(c.capacity() >= 50);
        assert!(c.put(b"k1".to_vec(), b"v1".to_vec()));
        assert!(c.put(vec![7; 32], vec![9; VALUE_MAX]));
        assert_eq!(c.get(b"k1").unwrap(), b"v1");
        assert_eq!(c.get(&[7; 32]).unwrap(), vec![9; VALUE_MAX]);
        assert_eq!(c.take(b"k1").unwrap(), b"v1");
        assert!(c.get(b"k1").is_none(), "taken once");
        assert!(!c.put(vec![1; 33], vec![]), "key too long");
        assert!(
            !c.put(b"big".to_vec(), vec![0; VALUE_MAX + 1]),
            "value too long"
        );
        // Replacing a key keeps one copy.
        assert!(c.put(b"k2".to_vec(), b"a".to_vec()));
        assert!(c.put(b"k2".to_vec(), b"bb".to_vec()));
        assert_eq!(c.get(b"k2").unwrap(), b"bb");
    }

    #[test]
    fn full_zone_evicts_and_expired_sessions_miss() {
        let c = SharedCache::new(32 * 1024, 300).unwrap();
        let n = c.capacity() * 3;
        for i in 0..n {
            c.put(format!("key{i}").into_bytes(), vec![i as u8; 100]);
        }
        let hits = (0..n)
            .filter(|i| c.get(format!("key{i}").as_bytes()).is_some())
            .count();
        assert!(hits > 0 && hits <= c.capacity(), "{hits}");
        let old = SharedCache::new(32 * 1024, 0).unwrap();
        old.put(b"x".to_vec(), b"y".to_vec());
        assert!(old.get(b"x").is_none(), "timeout 0: expired at once");
    }

    #[test]
    fn concurrent_users_of_one_mapping() {
        // Workers are processes sharing the mapping; threads on one mapping
        // exercise the same locks (the cross-process case is tested end to
        // end with two workers in crates/gyre/tests/http_tls.rs).
        let c = SharedCache::new(256 * 1024, 300).unwrap();
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let c = &c;
                s.spawn(move || {
                    for i in 0..200u32 {
                        let k = format!("t{t}-{i}").into_bytes();
                        c.put(k.clone(), vec![t; 64]);
                        if let Some(v) = c.get(&k) {
                            assert_eq!(v, vec![t; 64]);
                        }
                    }
                });
            }
        });
    }
}
