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

use std::collections::HashMap;
use std::sync::Arc;

use crate::glob::stringmatch;
use crate::util::Rng;

/// Estimated per-key overhead in bytes (map slot, `Arc` header, entry,
/// index vector slots), for the `used_memory` estimate.
pub const ENTRY_OVERHEAD: u64 = 96;
const NO_SLOT: usize = usize::MAX;

/// A key's value and metadata.
#[derive(Debug)]
pub struct Entry {
    pub value: Vec<u8>,
    /// Absolute unix time in ms, or -1 for no TTL.
    expire: i64,
    slot: usize,
    ttl_slot: usize,
}

impl Entry {
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
    map: HashMap<Arc<[u8]>, Entry>,
    keys: Vec<Arc<[u8]>>,
    ttl_keys: Vec<Arc<[u8]>>,
    /// Running average TTL of sampled keys (Redis's `avg_ttl`), in ms.
    pub avg_ttl: i64,
    pub stats: DbStats,
    mem: u64,
    rng: Rng,
}

/// A key is expired when `now > expire` (Redis's `keyIsExpired`).
fn is_expired(e: &Entry, now: i64) -> bool {
    e.expire >= 0 && now > e.expire
}

fn entry_mem(key: &[u8], e: &Entry) -> u64 {
    ENTRY_OVERHEAD + key.len() as u64 + e.value.len() as u64
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

    /// Remove `key` if its TTL has passed; true if it did (counts
    /// `expired_keys`).
    pub fn expire_if_needed(&mut self, key: &[u8], now: i64) -> bool {
        let expired = self.map.get(key).is_some_and(|e| is_expired(e, now));
        if expired {
            self.remove(key);
            self.stats.expired_keys += 1;
        }
        expired
    }

    /// Read lookup: lazy expiry, counts keyspace hits/misses.
    pub fn lookup_read(&mut self, key: &[u8], now: i64) -> Option<&Entry> {
        self.expire_if_needed(key, now);
        match self.map.get(key) {
            Some(e) => {
                self.stats.keyspace_hits += 1;
                Some(e)
            }
            None => {
                self.stats.keyspace_misses += 1;
                None
            }
        }
    }

    /// Write lookup: lazy expiry, no hit/miss accounting.
    pub fn lookup_write(&mut self, key: &[u8], now: i64) -> Option<&Entry> {
        self.expire_if_needed(key, now);
        self.map.get(key)
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
        let e = self.map.get_mut(key)?;
        let before = e.value.len() as u64;
        let r = f(&mut e.value);
        let after = e.value.len() as u64;
        self.mem = self.mem.saturating_sub(before) + after;
        Some(r)
    }

    /// Store `value` under `key`. Without `keep_ttl` any TTL is removed
    /// (SET semantics). Does not check expiry: callers did a lookup.
    pub fn set(&mut self, key: &[u8], value: Vec<u8>, keep_ttl: bool) {
        if let Some(e) = self.map.get_mut(key) {
            self.mem = self.mem.saturating_sub(e.value.len() as u64) + value.len() as u64;
            e.value = value;
            if !keep_ttl {
                self.remove_expire(key);
            }
            return;
        }
        let k: Arc<[u8]> = Arc::from(key);
        let e = Entry {
            value,
            expire: -1,
            slot: self.keys.len(),
            ttl_slot: NO_SLOT,
        };
        self.mem += entry_mem(key, &e);
        self.keys.push(Arc::clone(&k));
        self.map.insert(k, e);
    }

    /// Remove a key unconditionally, returning its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        let e = self.map.remove(key)?;
        self.mem = self.mem.saturating_sub(entry_mem(key, &e));
        Self::unlink_slot(&mut self.keys, &mut self.map, e.slot, false);
        if e.ttl_slot != NO_SLOT {
            Self::unlink_slot(&mut self.ttl_keys, &mut self.map, e.ttl_slot, true);
        }
        Some(e.value)
    }

    fn unlink_slot(
        v: &mut Vec<Arc<[u8]>>,
        map: &mut HashMap<Arc<[u8]>, Entry>,
        slot: usize,
        ttl: bool,
    ) {
        if slot >= v.len() {
            return;
        }
        v.swap_remove(slot);
        if let Some(moved) = v.get(slot) {
            if let Some(me) = map.get_mut(moved) {
                if ttl {
                    me.ttl_slot = slot;
                } else {
                    me.slot = slot;
                }
            }
        }
    }

    /// Delete a live key (DEL): true if something was deleted.
    pub fn delete(&mut self, key: &[u8], now: i64) -> bool {
        if self.expire_if_needed(key, now) {
            return false;
        }
        self.remove(key).is_some()
    }

    /// Set an absolute expire time (ms) on an existing key.
    pub fn set_expire(&mut self, key: &[u8], when: i64) -> bool {
        let Some((k, e)) = self.map.get_key_value(key) else {
            return false;
        };
        let had = e.ttl_slot != NO_SLOT;
        let k = Arc::clone(k);
        let slot = self.ttl_keys.len();
        if let Some(e) = self.map.get_mut(key) {
            e.expire = when.max(0);
            if !had {
                e.ttl_slot = slot;
                self.ttl_keys.push(k);
            }
        }
        true
    }

    /// Remove a key's TTL; true if it had one.
    pub fn remove_expire(&mut self, key: &[u8]) -> bool {
        let Some(e) = self.map.get_mut(key) else {
            return false;
        };
        if e.ttl_slot == NO_SLOT {
            return false;
        }
        let slot = e.ttl_slot;
        e.ttl_slot = NO_SLOT;
        e.expire = -1;
        Self::unlink_slot(&mut self.ttl_keys, &mut self.map, slot, true);
        true
    }

    /// Absolute expire time of a stored key (no expiry check).
    pub fn get_expire(&self, key: &[u8]) -> Option<i64> {
        self.map.get(key).and_then(Entry::expire)
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
            let k = Arc::clone(&self.keys[self.rng.below(self.keys.len())]);
            if !self.expire_if_needed(&k, now) {
                return Some(k.to_vec());
            }
        }
        None
    }

    /// KEYS pattern: all live keys matching `pattern`.
    pub fn keys_matching(&self, pattern: &[u8], now: i64) -> Vec<Vec<u8>> {
        let all = pattern == b"*";
        self.map
            .iter()
            .filter(|(k, e)| !is_expired(e, now) && (all || stringmatch(pattern, k, false)))
            .map(|(k, _)| k.to_vec())
            .collect()
    }

    /// One SCAN step. The cursor is an upper bound into the dense key
    /// vector, walked from the top down (cursor 0 starts at the top and a
    /// returned 0 means done). Removal only moves the *last* key (already
    /// visited) down, and inserts append at the top, so like Redis's SCAN:
    /// a key present during the whole iteration is returned at least once,
    /// keys may be returned more than once, keys added meanwhile may be
    /// missed. `count` keys slots are visited per call.
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
            let Some(e) = self.map.get(k) else { continue };
            if is_expired(e, now) {
                expired.push(Arc::clone(k));
                continue;
            }
            if !type_ok {
                continue;
            }
            if let Some(p) = pattern {
                if !stringmatch(p, k, false) {
                    continue;
                }
            }
            out.push(k.to_vec());
        }
        for k in expired {
            self.expire_if_needed(&k, now);
        }
        (lower, out)
    }

    /// Sample up to `n` random keys with a TTL, reclaim the expired ones.
    /// O(n) whatever the database size.
    pub fn expire_sample(&mut self, now: i64, n: usize) -> SampleOutcome {
        let mut o = SampleOutcome::default();
        for _ in 0..n {
            if self.ttl_keys.is_empty() {
                break;
            }
            let i = self.rng.below(self.ttl_keys.len());
            let k = Arc::clone(&self.ttl_keys[i]);
            let Some(e) = self.map.get(&k) else { break };
            o.sampled += 1;
            if is_expired(e, now) {
                self.remove(&k);
                self.stats.expired_keys += 1;
                o.expired += 1;
            } else {
                o.ttl_sum = o.ttl_sum.saturating_add(e.expire - now);
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
                .all(|(i, k)| self.map.get(k).is_some_and(|e| e.slot == i))
            && self.ttl_keys.iter().enumerate().all(|(i, k)| {
                self.map
                    .get(k)
                    .is_some_and(|e| e.ttl_slot == i && e.expire >= 0)
            })
            && self.map.values().filter(|e| e.ttl_slot != NO_SLOT).count() == self.ttl_keys.len()
    }
}
