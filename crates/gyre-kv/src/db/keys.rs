//! Keyspace-wide reads and moves (the generic-command side of Redis's
//! `db.c`): RANDOMKEY, TYPE, KEYS, SCAN, RENAME, COPY, MOVE.

use super::*;

impl Db {
    /// RANDOMKEY: a random live key. Expired picks are reclaimed; after 100
    /// of them in one call it gives up and answers none (bounded work).
    pub fn random_key(&mut self, now: i64) -> Option<Vec<u8>> {
        for _ in 0..100 {
            if self.nodes.is_empty() {
                return None;
            }
            let i = self.rng.below(self.nodes.len());
            if !self.expire_at_if_needed(i, now) {
                return Some(self.nodes[i].key().to_vec());
            }
        }
        None
    }

    /// The kind of a live key (TYPE), counted as a read lookup.
    pub fn kind_of(&mut self, key: &[u8], now: i64) -> Option<Kind> {
        self.lookup_read(key, now).map(|e| e.kind())
    }

    /// KEYS pattern: all live keys matching `pattern`.
    pub fn keys_matching(&self, pattern: &[u8], now: i64) -> Vec<Vec<u8>> {
        let all = pattern == b"*";
        self.nodes
            .iter()
            .filter(|n| {
                !is_expired(expire_of(&self.ttl, n), now)
                    && (all || stringmatch(pattern, n.key(), false))
            })
            .map(|n| n.key().to_vec())
            .collect()
    }

    /// One SCAN step. The cursor is an upper bound into the dense node
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
        kind: Option<&[u8]>,
        now: i64,
    ) -> (u64, Vec<Vec<u8>>) {
        let len = self.nodes.len() as u64;
        let upper = if cursor == 0 || cursor > len {
            len
        } else {
            cursor
        };
        let lower = upper.saturating_sub(count.max(1) as u64);
        let mut out = Vec::new();
        let mut expired = Vec::new();
        for i in (lower..upper).rev() {
            let Some(n) = self.nodes.get(i as usize) else {
                continue;
            };
            let key = n.key();
            if is_expired(expire_of(&self.ttl, n), now) {
                expired.push(key.to_vec());
                continue;
            }
            if kind.is_some_and(|k| !k.eq_ignore_ascii_case(n.value().kind().name().as_bytes())) {
                continue;
            }
            if let Some(p) = pattern {
                if !stringmatch(p, key, false) {
                    continue;
                }
            }
            out.push(key.to_vec());
        }
        for k in expired {
            self.expire_if_needed(&k, now);
        }
        (lower, out)
    }

    /// Move `src` to `dst` keeping the TTL (RENAME), whatever the type.
    /// Both were looked up.
    pub fn rename(&mut self, src: &[u8], dst: &[u8]) -> bool {
        let expire = self.get_expire(src);
        let Some(i) = self.find(src) else {
            return false;
        };
        let v = self.remove_at(i).slot.into_value();
        self.remove(dst);
        let h = self.hash(dst);
        let p = Probe {
            hash: h,
            index: self.find_hashed(h, dst),
        };
        let p = self.store(p, dst, New::Owned(v), false);
        if let Some(t) = expire {
            self.set_expire_probed(&p, t);
        }
        true
    }

    /// A copy of a live key's value and TTL (COPY).
    pub fn copy_out(&mut self, key: &[u8], now: i64) -> Option<(Copied, Option<i64>)> {
        let i = self.find_live(key, now)?;
        let n = &self.nodes[i];
        let e = expire_of(&self.ttl, n);
        Some((Copied(n.slot.clone_value()), (e >= 0).then_some(e)))
    }

    /// Take a live key out (MOVE): its value and TTL.
    pub fn take(&mut self, key: &[u8], now: i64) -> Option<(Copied, Option<i64>)> {
        let i = self.find_live(key, now)?;
        let e = expire_of(&self.ttl, &self.nodes[i]);
        let expire = (e >= 0).then_some(e);
        let n = self.remove_at(i);
        Some((Copied(n.slot.into_value()), expire))
    }

    /// Store a [`Copied`] value (COPY / MOVE), replacing what is there.
    pub fn store_copy(&mut self, key: &[u8], v: Copied, expire: Option<i64>) {
        let h = self.hash(key);
        let p = Probe {
            hash: h,
            index: self.find_hashed(h, key),
        };
        let p = self.store(p, key, New::Owned(v.0), false);
        if let Some(t) = expire {
            self.set_expire_probed(&p, t);
        }
    }
}
