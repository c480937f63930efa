//! Keys with a TTL (Redis's `expire.c` and the expires side of `db.c`):
//! the `ttl` vector of [`TtlRef`]s, lazy expiry on lookup and the active
//! expire cycle's sampling.

use super::node::{TtlRef, HAS_TTL};
use super::*;

/// Keys the expire cycle samples (and warms) at once.
const SAMPLE_BATCH: usize = 32;

/// Node `n`'s absolute expire time in ms, `NO_EXPIRE` without a TTL.
#[inline(always)]
pub(super) fn expire_of(ttl: &[TtlRef], n: &Node) -> i64 {
    let ts = n.ttl_slot();
    if ts == NONE {
        return NO_EXPIRE;
    }
    ttl.get(ts as usize).map_or(NO_EXPIRE, |t| t.expire)
}

/// A key is expired when `now > expire` (Redis's `keyIsExpired`).
pub(super) fn is_expired(expire: i64, now: i64) -> bool {
    expire >= 0 && now > expire
}

impl Db {
    /// swap_remove TTL slot `ts`, fixing the moved slot's node.
    pub(super) fn unlink_ttl(&mut self, ts: u32) {
        let ts = ts as usize;
        if ts >= self.ttl.len() {
            return;
        }
        self.ttl.swap_remove(ts);
        if let Some(moved) = self.ttl.get(ts) {
            if let Some(n) = self.nodes.get_mut(moved.node as usize) {
                n.slot.set_word(HAS_TTL | ts as u32);
            }
        }
    }

    pub(super) fn stored_expire(&self, key: &[u8]) -> Option<i64> {
        self.find(key).map(|i| expire_of(&self.ttl, &self.nodes[i]))
    }

    /// Remove `key` if its TTL has passed; true if it did (counts
    /// `expired_keys`).
    pub fn expire_if_needed(&mut self, key: &[u8], now: i64) -> bool {
        match self.find(key) {
            Some(i) => self.expire_at_if_needed(i, now),
            None => false,
        }
    }

    /// Inline: every lookup asks, and the answer is nearly always no.
    #[inline]
    pub(super) fn expire_at_if_needed(&mut self, i: usize, now: i64) -> bool {
        if is_expired(expire_of(&self.ttl, &self.nodes[i]), now) {
            self.expire_at(i);
            true
        } else {
            false
        }
    }

    /// Remove expired node `i` (an expiry, counted in `expired_keys`).
    #[inline(never)]
    pub(super) fn expire_at(&mut self, i: usize) {
        self.log_expired(i);
        self.expiring = true;
        self.delete_at(i);
        self.expiring = false;
        self.stats.expired_keys += 1;
    }

    /// A stored key whose TTL has passed, not yet reclaimed (Redis's
    /// `keyIsExpired`; WATCH and EXEC ask).
    pub fn key_is_expired(&self, key: &[u8], now: i64) -> bool {
        self.find(key)
            .is_some_and(|i| is_expired(expire_of(&self.ttl, &self.nodes[i]), now))
    }

    /// Set an absolute expire time (ms, clamped to >= 0) on an existing key.
    pub fn set_expire(&mut self, key: &[u8], when: i64) -> bool {
        match self.find(key) {
            Some(i) => {
                self.set_expire_at(i, when);
                true
            }
            None => false,
        }
    }

    /// [`Db::set_expire`] on a probed key; false if it does not exist.
    pub fn set_expire_probed(&mut self, p: &Probe, when: i64) -> bool {
        match p.index {
            Some(i) => {
                self.set_expire_at(i, when);
                true
            }
            None => false,
        }
    }

    pub(super) fn set_expire_at(&mut self, i: usize, when: i64) {
        self.cow(i);
        if self.noting() {
            let key = self.nodes[i].key().to_vec();
            self.note(&key, true, Some(Change::Expire));
        }
        let when = when.max(0);
        let n = &mut self.nodes[i];
        let ts = n.ttl_slot();
        if ts == NONE {
            // The access clock moves into the TTL slot, the slot's index
            // takes its place in the node.
            self.ttl.push(TtlRef {
                expire: when,
                node: i as u32,
                access: n.slot.word(),
            });
            n.slot.set_word(HAS_TTL | (self.ttl.len() - 1) as u32);
        } else if let Some(t) = self.ttl.get_mut(ts as usize) {
            t.expire = when;
        }
    }

    pub(super) fn remove_expire_at(&mut self, i: usize) -> bool {
        let slot = self.nodes[i].ttl_slot();
        if slot == NONE {
            return false;
        }
        self.cow(i);
        if self.noting() {
            let key = self.nodes[i].key().to_vec();
            self.note(&key, true, Some(Change::Persist));
        }
        let access = self.ttl.get(slot as usize).map_or(0, |t| t.access);
        self.nodes[i].slot.set_word(access);
        self.unlink_ttl(slot);
        true
    }

    /// Remove a key's TTL; true if it had one.
    pub fn remove_expire(&mut self, key: &[u8]) -> bool {
        match self.find(key) {
            Some(i) => self.remove_expire_at(i),
            None => false,
        }
    }

    /// Absolute expire time of a stored key (no expiry check).
    pub fn get_expire(&self, key: &[u8]) -> Option<i64> {
        self.stored_expire(key).filter(|&e| e >= 0)
    }

    /// Sample up to `n` random keys with a TTL, reclaim the expired ones.
    /// O(n) whatever the database size; a live sample reads one TTL slot.
    ///
    /// Samples are drawn in batches and [`Db::warm`] first touches what
    /// reclaiming them will touch, so their cache misses overlap instead of
    /// being paid one after the other.
    pub fn expire_sample(&mut self, now: i64, n: usize) -> SampleOutcome {
        let mut o = SampleOutcome::default();
        let mut left = n;
        let mut picks = [0usize; SAMPLE_BATCH];
        while left > 0 && !self.ttl.is_empty() {
            let m = left.min(SAMPLE_BATCH);
            left -= m;
            let len = self.ttl.len();
            for p in &mut picks[..m] {
                *p = self.rng.below(len);
            }
            self.warm(&picks[..m], now);
            for &p in &picks[..m] {
                if self.ttl.is_empty() {
                    break;
                }
                // Reclaiming shrank the vector: draw again past its end.
                let s = if p < self.ttl.len() {
                    p
                } else {
                    self.rng.below(self.ttl.len())
                };
                let t = self.ttl[s];
                o.sampled += 1;
                if is_expired(t.expire, now) {
                    self.log_expired(t.node as usize);
                    self.expiring = true;
                    self.delete_at(t.node as usize);
                    self.expiring = false;
                    self.stats.expired_keys += 1;
                    o.expired += 1;
                } else {
                    o.ttl_sum = o.ttl_sum.saturating_add(t.expire - now);
                    o.ttl_samples += 1;
                }
            }
        }
        o
    }

    /// Software prefetch without `unsafe`: read, with loads that do not
    /// depend on each other, the TTL slots of `picks`, the nodes and map
    /// entries of the expired ones, and the tail nodes (and their map
    /// entries and TTL slots) that their removal will move. The CPU runs
    /// these misses in parallel; the removals that follow then hit cache.
    pub(super) fn warm(&self, picks: &[usize], now: i64) {
        let mut refs = [TtlRef::EMPTY; SAMPLE_BATCH];
        for (r, &p) in refs.iter_mut().zip(picks) {
            if let Some(t) = self.ttl.get(p) {
                *r = *t;
            }
        }
        let mut hashes = [0u32; 2 * SAMPLE_BATCH];
        let mut k = 0;
        let mut acc = 0u64;
        for r in &refs[..picks.len()] {
            if is_expired(r.expire, now) {
                if let Some(n) = self.nodes.get(r.node as usize) {
                    hashes[k] = n.hash;
                    k += 1;
                }
            }
        }
        let expired = k;
        if expired == 0 {
            return;
        }
        // Each removal moves the current last node (and last TTL slot).
        for n in self.nodes.iter().rev().take(expired) {
            hashes[k] = n.hash;
            k += 1;
            if let Some(t) = self.ttl.get(n.ttl_slot() as usize) {
                acc = acc.wrapping_add(t.expire as u64);
            }
        }
        for t in self.ttl.iter().rev().take(expired) {
            if let Some(n) = self.nodes.get(t.node as usize) {
                acc = acc.wrapping_add(u64::from(n.slot.word()));
            }
        }
        for h in &hashes[..k] {
            acc = acc.wrapping_add(u64::from(self.table.head(*h)));
        }
        std::hint::black_box(acc);
    }
}
