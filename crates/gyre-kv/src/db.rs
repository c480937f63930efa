//! The keyspace: one [`Db`] per logical database (`SELECT n`).
//!
//! Values are strings (the only type this module serves). Besides the hash
//! map each database keeps two dense vectors of keys (shared `Arc` with the
//! map, so no key bytes are copied):
//!
//! * `keys` — every key. RANDOMKEY picks a random index in O(1), SCAN walks
//!   it from the top down (see [`Db::scan`] for the guarantees).
//! * `ttl_keys` — keys with a TTL. The active expire cycle samples random
//!   indexes here in O(1) per sample, whatever the size of the keyspace.
//!
//! Removal is `swap_remove` plus fixing the moved key's stored index, O(1).
//! Expiry is lazy (every lookup checks) plus active ([`Db::expire_sample`],
//! driven by `Server`'s expire cycle).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use crate::glob::stringmatch;
use crate::util::Rng;

/// Estimated per-key overhead in bytes (map slot, key object, index
/// vector slots), for the `used_memory` estimate.
pub const ENTRY_OVERHEAD: u64 = 112;
const NO_SLOT: usize = usize::MAX;
const NO_EXPIRE: i64 = -1;

/// A key's shared metadata. The map, `keys` and `ttl_keys` hold the same
/// `Arc`; the TTL and both vector indexes live here so the expire cycle and
/// the swap_remove fix-ups never need a hash lookup (atomics only for
/// interior mutability; the keyspace is used from one thread).
#[derive(Debug)]
struct KeyInner {
    expire: AtomicI64,
    slot: AtomicUsize,
    ttl_slot: AtomicUsize,
    bytes: Box<[u8]>,
}

#[derive(Clone, Debug)]
struct Key(Arc<KeyInner>);

impl Key {
    fn expire(&self) -> i64 {
        self.0.expire.load(Relaxed)
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        // Must hash exactly like `[u8]` for `Borrow<[u8]>` lookups.
        self.0.bytes.hash(h);
    }
}

impl PartialEq for Key {
    fn eq(&self, o: &Key) -> bool {
        self.0.bytes == o.0.bytes
    }
}

impl Eq for Key {}

impl Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        &self.0.bytes
    }
}

/// A looked-up key: its value and TTL.
#[derive(Debug)]
pub struct Entry<'a> {
    pub value: &'a Vec<u8>,
    expire: i64,
}

impl Entry<'_> {
    /// Absolute expire time in ms, if any.
    pub fn expire(&self) -> Option<i64> {
        (self.expire >= 0).then_some(self.expire)
    }
}

/// Counters kept per database and summed for INFO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbStats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub expired_keys: u64,
}

/// Result of sampling keys with a TTL (one loop of the active expire cycle).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleOutcome {
    pub sampled: u64,
    pub expired: u64,
    pub ttl_sum: i64,
    pub ttl_samples: u64,
}

#[derive(Debug)]
pub struct Db {
    map: HashMap<Key, Vec<u8>>,
    keys: Vec<Key>,
    ttl_keys: Vec<Key>,
    /// Running average TTL of sampled keys (Redis's `avg_ttl`), in ms.
    pub avg_ttl: i64,
    pub stats: DbStats,
    mem: u64,
    rng: Rng,
}

/// A key is expired when `now > expire` (Redis's `keyIsExpired`).
fn is_expired(expire: i64, now: i64) -> bool {
    expire >= 0 && now > expire
}

fn entry_mem(key: &[u8], value: &[u8]) -> u64 {
    ENTRY_OVERHEAD + key.len() as u64 + value.len() as u64
}

/// swap_remove `slot` from `v` and record the moved key's new index.
fn unlink_slot(v: &mut Vec<Key>, slot: usize, ttl: bool) {
    if slot >= v.len() {
        return;
    }
    v.swap_remove(slot);
    if let Some(moved) = v.get(slot) {
        if ttl {
            moved.0.ttl_slot.store(slot, Relaxed);
        } else {
            moved.0.slot.store(slot, Relaxed);
        }
    }
}

impl Db {
    pub fn new(seed: u64) -> Db {
        Db {
            map: HashMap::new(),
            keys: Vec::new(),
            ttl_keys: Vec::new(),
            avg_ttl: 0,
            stats: DbStats::default(),
            mem: 0,
            rng: Rng::new(seed),
        }
    }

    /// Keys stored, including expired ones not yet reclaimed (DBSIZE).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Keys with a TTL.
    pub fn expires_len(&self) -> usize {
        self.ttl_keys.len()
    }

    /// Estimated bytes used by this database's data.
    pub fn used_memory(&self) -> u64 {
        self.mem
    }

    fn stored_expire(&self, key: &[u8]) -> Option<i64> {
        self.map.get_key_value(key).map(|(k, _)| k.expire())
    }

    /// Remove `key` if its TTL has passed; true if it did (counts
    /// `expired_keys`).
    pub fn expire_if_needed(&mut self, key: &[u8], now: i64) -> bool {
        let expired = self.stored_expire(key).is_some_and(|e| is_expired(e, now));
        if expired {
            self.remove(key);
            self.stats.expired_keys += 1;
        }
        expired
    }

    fn entry(&self, key: &[u8]) -> Option<Entry<'_>> {
        self.map.get_key_value(key).map(|(k, v)| Entry {
            value: v,
            expire: k.expire(),
        })
    }

    /// Read lookup: lazy expiry, counts keyspace hits/misses.
    pub fn lookup_read(&mut self, key: &[u8], now: i64) -> Option<Entry<'_>> {
        self.expire_if_needed(key, now);
        if self.map.contains_key(key) {
            self.stats.keyspace_hits += 1;
        } else {
            self.stats.keyspace_misses += 1;
        }
        self.entry(key)
    }

    /// Write lookup: lazy expiry, no hit/miss accounting.
    pub fn lookup_write(&mut self, key: &[u8], now: i64) -> Option<Entry<'_>> {
        self.expire_if_needed(key, now);
        self.entry(key)
    }

    /// True if a live key exists (write lookup).
    pub fn exists(&mut self, key: &[u8], now: i64) -> bool {
        self.lookup_write(key, now).is_some()
    }

    /// Modify a live key's value in place (keeps its TTL). `None` if the
    /// key does not exist.
    pub fn update_value<R>(
        &mut self,
        key: &[u8],
        now: i64,
        f: impl FnOnce(&mut Vec<u8>) -> R,
    ) -> Option<R> {
        self.expire_if_needed(key, now);
        let v = self.map.get_mut(key)?;
        let before = v.len() as u64;
        let r = f(v);
        let after = v.len() as u64;
        self.mem = self.mem.saturating_sub(before) + after;
        Some(r)
    }

    /// Store `value` under `key`. Without `keep_ttl` any TTL is removed
    /// (SET semantics). Does not check expiry: callers did a lookup.
    pub fn set(&mut self, key: &[u8], value: Vec<u8>, keep_ttl: bool) {
        if let Some(v) = self.map.get_mut(key) {
            self.mem = self.mem.saturating_sub(v.len() as u64) + value.len() as u64;
            *v = value;
            if !keep_ttl {
                self.remove_expire(key);
            }
            return;
        }
        let k = Key(Arc::new(KeyInner {
            expire: AtomicI64::new(NO_EXPIRE),
            slot: AtomicUsize::new(self.keys.len()),
            ttl_slot: AtomicUsize::new(NO_SLOT),
            bytes: key.into(),
        }));
        self.mem += entry_mem(key, &value);
        self.keys.push(k.clone());
        self.map.insert(k, value);
    }

    /// Remove a key unconditionally, returning its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        let (k, v) = self.map.remove_entry(key)?;
        self.mem = self.mem.saturating_sub(entry_mem(key, &v));
        unlink_slot(&mut self.keys, k.0.slot.load(Relaxed), false);
        let ts = k.0.ttl_slot.load(Relaxed);
        if ts != NO_SLOT {
            unlink_slot(&mut self.ttl_keys, ts, true);
        }
        Some(v)
    }

    /// Delete a live key (DEL): true if something was deleted.
    pub fn delete(&mut self, key: &[u8], now: i64) -> bool {
        if self.expire_if_needed(key, now) {
            return false;
        }
        self.remove(key).is_some()
    }

    /// Set an absolute expire time (ms, clamped to >= 0) on an existing key.
    pub fn set_expire(&mut self, key: &[u8], when: i64) -> bool {
        let Some((k, _)) = self.map.get_key_value(key) else {
            return false;
        };
        k.0.expire.store(when.max(0), Relaxed);
        if k.0.ttl_slot.load(Relaxed) == NO_SLOT {
            k.0.ttl_slot.store(self.ttl_keys.len(), Relaxed);
            let k = k.clone();
            self.ttl_keys.push(k);
        }
        true
    }

    /// Remove a key's TTL; true if it had one.
    pub fn remove_expire(&mut self, key: &[u8]) -> bool {
        let Some((k, _)) = self.map.get_key_value(key) else {
            return false;
        };
        let slot = k.0.ttl_slot.load(Relaxed);
        if slot == NO_SLOT {
            return false;
        }
        k.0.ttl_slot.store(NO_SLOT, Relaxed);
        k.0.expire.store(NO_EXPIRE, Relaxed);
        unlink_slot(&mut self.ttl_keys, slot, true);
        true
    }

    /// Absolute expire time of a stored key (no expiry check).
    pub fn get_expire(&self, key: &[u8]) -> Option<i64> {
        self.stored_expire(key).filter(|&e| e >= 0)
    }

    /// FLUSHDB: drop everything (counters are kept).
    pub fn flush(&mut self) -> usize {
        let n = self.map.len();
        self.map = HashMap::new();
        self.keys = Vec::new();
        self.ttl_keys = Vec::new();
        self.avg_ttl = 0;
        self.mem = 0;
        n
    }

    /// RANDOMKEY: a random live key. Expired picks are reclaimed; after 100
    /// of them in one call it gives up and answers none (bounded work).
    pub fn random_key(&mut self, now: i64) -> Option<Vec<u8>> {
        for _ in 0..100 {
            if self.keys.is_empty() {
                return None;
            }
            let k = self.keys[self.rng.below(self.keys.len())].clone();
            if !self.expire_if_needed(&k.0.bytes, now) {
                return Some(k.0.bytes.to_vec());
            }
        }
        None
    }

    /// KEYS pattern: all live keys matching `pattern`.
    pub fn keys_matching(&self, pattern: &[u8], now: i64) -> Vec<Vec<u8>> {
        let all = pattern == b"*";
        self.keys
            .iter()
            .filter(|k| {
                !is_expired(k.expire(), now) && (all || stringmatch(pattern, &k.0.bytes, false))
            })
            .map(|k| k.0.bytes.to_vec())
            .collect()
    }

    /// One SCAN step. The cursor is an upper bound into the dense key
    /// vector, walked from the top down (cursor 0 starts at the top and a
    /// returned 0 means done). Removal only moves the *last* key (already
    /// visited) down, and inserts append at the top, so like Redis's SCAN:
    /// a key present during the whole iteration is returned at least once,
    /// keys may be returned more than once, keys added meanwhile may be
    /// missed. `count` key slots are visited per call.
    pub fn scan(
        &mut self,
        cursor: u64,
        count: usize,
        pattern: Option<&[u8]>,
        type_ok: bool,
        now: i64,
    ) -> (u64, Vec<Vec<u8>>) {
        let len = self.keys.len() as u64;
        let upper = if cursor == 0 || cursor > len {
            len
        } else {
            cursor
        };
        let lower = upper.saturating_sub(count.max(1) as u64);
        let mut out = Vec::new();
        let mut expired = Vec::new();
        for i in (lower..upper).rev() {
            let Some(k) = self.keys.get(i as usize) else {
                continue;
            };
            if is_expired(k.expire(), now) {
                expired.push(k.clone());
                continue;
            }
            if !type_ok {
                continue;
            }
            if let Some(p) = pattern {
                if !stringmatch(p, &k.0.bytes, false) {
                    continue;
                }
            }
            out.push(k.0.bytes.to_vec());
        }
        for k in expired {
            self.expire_if_needed(&k.0.bytes, now);
        }
        (lower, out)
    }

    /// Sample up to `n` random keys with a TTL, reclaim the expired ones.
    /// O(n) whatever the database size; a live sample costs no hash lookup.
    pub fn expire_sample(&mut self, now: i64, n: usize) -> SampleOutcome {
        let mut o = SampleOutcome::default();
        for _ in 0..n {
            if self.ttl_keys.is_empty() {
                break;
            }
            let i = self.rng.below(self.ttl_keys.len());
            let expire = self.ttl_keys[i].expire();
            o.sampled += 1;
            if is_expired(expire, now) {
                let k = self.ttl_keys[i].clone();
                self.remove(&k.0.bytes);
                self.stats.expired_keys += 1;
                o.expired += 1;
            } else {
                o.ttl_sum = o.ttl_sum.saturating_add(expire - now);
                o.ttl_samples += 1;
            }
        }
        o
    }

    /// Move `src` to `dst` keeping the TTL (RENAME). Both were looked up.
    pub fn rename(&mut self, src: &[u8], dst: &[u8]) -> bool {
        let expire = self.get_expire(src);
        let Some(v) = self.remove(src) else {
            return false;
        };
        self.remove(dst);
        self.set(dst, v, false);
        if let Some(t) = expire {
            self.set_expire(dst, t);
        }
        true
    }

    /// Check internal index invariants (tests).
    pub fn check_invariants(&self) -> bool {
        self.keys.len() == self.map.len()
            && self
                .keys
                .iter()
                .enumerate()
                .all(|(i, k)| self.map.contains_key(&*k.0.bytes) && k.0.slot.load(Relaxed) == i)
            && self.ttl_keys.iter().enumerate().all(|(i, k)| {
                self.map.contains_key(&*k.0.bytes)
                    && k.0.ttl_slot.load(Relaxed) == i
                    && k.expire() >= 0
            })
            && self
                .keys
                .iter()
                .filter(|k| k.0.ttl_slot.load(Relaxed) != NO_SLOT)
                .count()
                == self.ttl_keys.len()
    }
}
