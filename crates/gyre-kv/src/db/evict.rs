//! The keyspace side of eviction and OBJECT IDLETIME/FREQ (Redis's
//! `evict.c` sampling and `robj->lru` updates): each node's access clock,
//! random samples for the eviction pool, evicting a key.

use super::node::HAS_TTL;
use super::*;

impl Db {
    /// A lookup touched node `i` (Redis's `updateLFU` / `LRU_CLOCK()`).
    #[inline(always)]
    pub(super) fn touch_access(&mut self, i: usize, now: i64) {
        let mode = self.access_mode;
        let Some(n) = self.nodes.get_mut(i) else {
            return;
        };
        let w = n.slot.word_mut();
        if *w & HAS_TTL == 0 {
            *w = mode.touch(*w, now, &mut self.rng);
        } else if let Some(t) = self.ttl.get_mut((*w & !HAS_TTL) as usize) {
            t.access = mode.touch(t.access, now, &mut self.rng);
        }
    }

    /// Node `i`'s access clock (in its slot, or in its TTL slot).
    pub(super) fn access_at(&self, i: usize) -> u32 {
        let w = self.nodes.get(i).map_or(0, |n| n.slot.word());
        if w & HAS_TTL == 0 {
            w
        } else {
            self.ttl
                .get((w & !HAS_TTL) as usize)
                .map_or(0, |t| t.access)
        }
    }

    /// A stored, live key's access clock without touching it (OBJECT
    /// IDLETIME / FREQ use LOOKUP_NOTOUCH).
    pub fn access_of(&self, key: &[u8], now: i64) -> Option<u32> {
        let i = self.find(key)?;
        if is_expired(expire_of(&self.ttl, &self.nodes[i]), now) {
            return None;
        }
        Some(self.access_at(i))
    }

    /// Up to `n` random keys (from the keys with a TTL when `volatile`)
    /// with their access clock and expire time, for the eviction pool.
    pub fn sample_for_eviction(
        &mut self,
        n: usize,
        volatile: bool,
        out: &mut Vec<(Vec<u8>, u32, i64)>,
    ) {
        for _ in 0..n {
            let i = if volatile {
                if self.ttl.is_empty() {
                    return;
                }
                self.ttl[self.rng.below(self.ttl.len())].node as usize
            } else {
                if self.nodes.is_empty() {
                    return;
                }
                self.rng.below(self.nodes.len())
            };
            let node = &self.nodes[i];
            let access = self.access_at(i);
            out.push((node.key().to_vec(), access, expire_of(&self.ttl, node)));
        }
    }

    /// A random key (with a TTL when `volatile`) for the random policies.
    pub fn random_for_eviction(&mut self, volatile: bool) -> Option<Vec<u8>> {
        let i = if volatile {
            if self.ttl.is_empty() {
                return None;
            }
            self.ttl[self.rng.below(self.ttl.len())].node as usize
        } else {
            if self.nodes.is_empty() {
                return None;
            }
            self.rng.below(self.nodes.len())
        };
        Some(self.nodes[i].key().to_vec())
    }

    /// Evict `key` (maxmemory): removed like a delete for WATCH, not
    /// logged as the running command's change. The bytes freed.
    pub fn evict(&mut self, key: &[u8]) -> Option<u64> {
        let i = self.find(key)?;
        let before = self.mem;
        if let Some(log) = &mut self.deleted_log {
            log.push((key.to_vec(), true));
        }
        self.expiring = true;
        self.delete_at(i);
        self.expiring = false;
        Some(before.saturating_sub(self.mem))
    }
}
