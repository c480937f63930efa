//! The hash table of large hashes and sets (Redis's `dict.c` role):
//! a dense vector of entries plus an open-addressing index of `u32` slots
//! (linear probing, at most 3/4 full, backward-shift deletion), keyed
//! SipHash-1-2 with a random key per table (see [`crate::hash`]: members
//! come from clients, so collisions must not be aimable).
//!
//! Why dense: SRANDMEMBER / SPOP / HRANDFIELD pick a random entry in O(1),
//! and SSCAN / HSCAN walk the vector from the top down with the keyspace's
//! cursor guarantee (see [`crate::db::Db::scan`]): removal moves only the
//! last entry (already visited) down. Per entry this costs the key box
//! (16 bytes), the value, and ~5 bytes of index — less than a Redis
//! `dictEntry` plus its bucket pointer.

use crate::hash::KeyHasher;

const EMPTY: u32 = u32::MAX;

/// Heap bytes a value owns (for an O(1) `used_memory`).
pub trait HeapSize {
    fn heap_size(&self) -> usize;
}

impl HeapSize for () {
    fn heap_size(&self) -> usize {
        0
    }
}

impl HeapSize for Box<[u8]> {
    fn heap_size(&self) -> usize {
        self.len()
    }
}

#[derive(Clone, Debug)]
pub struct Dict<V> {
    entries: Vec<(Box<[u8]>, V)>,
    slots: Vec<u32>,
    hasher: KeyHasher,
    /// Sum of key and value heap bytes (for `used_memory`).
    heap_bytes: usize,
}

impl<V: HeapSize> Default for Dict<V> {
    fn default() -> Self {
        Dict::new()
    }
}

impl<V: HeapSize> Dict<V> {
    pub fn new() -> Dict<V> {
        Dict {
            entries: Vec::new(),
            slots: Vec::new(),
            hasher: KeyHasher::random(),
            heap_bytes: 0,
        }
    }

    pub fn with_capacity(n: usize) -> Dict<V> {
        let mut d = Dict::new();
        d.entries.reserve(n);
        d.grow_to(n);
        d
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes allocated by the table plus its keys' and values' bytes.
    pub fn mem(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<(Box<[u8]>, V)>()
            + self.slots.capacity() * 4
            + self.heap_bytes
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn home(&self, key: &[u8]) -> usize {
        self.hasher.hash(key) as usize & self.mask()
    }

    /// Slot holding `key`'s index, if present.
    fn find_slot(&self, key: &[u8]) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mut s = self.home(key);
        loop {
            let i = self.slots[s];
            if i == EMPTY {
                return None;
            }
            if &*self.entries[i as usize].0 == key {
                return Some(s);
            }
            s = (s + 1) & self.mask();
        }
    }

    fn grow_to(&mut self, n: usize) {
        let size = (n * 4 / 3 + 1).next_power_of_two().max(8);
        if size <= self.slots.len() {
            return;
        }
        self.slots = vec![EMPTY; size];
        for i in 0..self.entries.len() {
            let mut s = self.home(&self.entries[i].0);
            while self.slots[s] != EMPTY {
                s = (s + 1) & self.mask();
            }
            self.slots[s] = i as u32;
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        self.find_slot(key)
            .map(|s| &self.entries[self.slots[s] as usize].1)
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.find_slot(key).is_some()
    }

    /// Insert or replace; returns the old value.
    pub fn insert(&mut self, key: &[u8], v: V) -> Option<V> {
        if let Some(s) = self.find_slot(key) {
            let i = self.slots[s] as usize;
            self.heap_bytes = self.heap_bytes + v.heap_size() - self.entries[i].1.heap_size();
            return Some(std::mem::replace(&mut self.entries[i].1, v));
        }
        if (self.entries.len() + 1) * 4 > self.slots.len() * 3 {
            self.grow_to((self.entries.len() + 1) * 2);
        }
        let mut s = self.home(key);
        while self.slots[s] != EMPTY {
            s = (s + 1) & self.mask();
        }
        self.slots[s] = self.entries.len() as u32;
        self.heap_bytes += key.len() + v.heap_size();
        self.entries.push((key.into(), v));
        None
    }

    /// Remove `key`, returning its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        let s = self.find_slot(key)?;
        Some(self.remove_slot(s).1)
    }

    /// Remove entry `i` of the dense order.
    pub fn remove_index(&mut self, i: usize) -> Option<(Box<[u8]>, V)> {
        let key = self.entries.get(i)?.0.clone();
        let s = self.find_slot(&key)?;
        Some(self.remove_slot(s))
    }

    fn remove_slot(&mut self, s: usize) -> (Box<[u8]>, V) {
        let i = self.slots[s] as usize;
        self.delete_slot(s);
        let last = self.entries.len() - 1;
        if i != last {
            // The last entry moves into `i`: re-point its slot.
            if let Some(ls) = self.find_slot(&self.entries[last].0) {
                self.slots[ls] = i as u32;
            }
        }
        let e = self.entries.swap_remove(i);
        self.heap_bytes -= e.0.len() + e.1.heap_size();
        if self.entries.len() * 8 < self.slots.len() && self.slots.len() > 64 {
            self.shrink();
        }
        e
    }

    /// Backward-shift deletion: no tombstones, probe chains stay short.
    fn delete_slot(&mut self, mut s: usize) {
        let m = self.mask();
        self.slots[s] = EMPTY;
        let mut j = s;
        loop {
            j = (j + 1) & m;
            let i = self.slots[j];
            if i == EMPTY {
                return;
            }
            let h = self.home(&self.entries[i as usize].0);
            // Move it back if its home is not in (s, j] (cyclically).
            let in_range = if s <= j {
                s < h && h <= j
            } else {
                s < h || h <= j
            };
            if !in_range {
                self.slots[s] = i;
                self.slots[j] = EMPTY;
                s = j;
            }
        }
    }

    fn shrink(&mut self) {
        self.entries.shrink_to(self.entries.len() * 2);
        self.slots = Vec::new();
        self.grow_to(self.entries.len());
    }

    /// Drop up to `n` entries from the end, for a table being freed
    /// piecemeal (lookups are over). Returns how many.
    ///
    /// The two arrays shrink in step with the entries (each call gives
    /// back the tail it emptied) instead of going whole: the entries of a
    /// ten-million-field hash are 320 MB, and unmapping that in one call
    /// stopped the loop for tens of milliseconds.
    pub fn free_some(&mut self, n: usize) -> usize {
        let before = self.entries.len();
        let k = n.min(before);
        let left = before - k;
        self.entries.truncate(left);
        self.entries.shrink_to(left);
        let keep = (self.slots.len() as u64 * left as u64)
            .checked_div(before as u64)
            .unwrap_or(0) as usize;
        self.slots.truncate(keep);
        self.slots.shrink_to(keep);
        k
    }

    /// Entry `i` of the dense order (random picks, SCAN).
    pub fn entry(&self, i: usize) -> Option<(&[u8], &V)> {
        self.entries.get(i).map(|(k, v)| (&**k, v))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.entries.iter().map(|(k, v)| (&**k, v))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::util::Rng;
    use std::collections::HashMap;

    impl HeapSize for u32 {
        fn heap_size(&self) -> usize {
            0
        }
    }

    #[test]
    fn matches_a_plain_map() {
        let mut d: Dict<u32> = Dict::new();
        let mut m: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut rng = Rng::new(7);
        for step in 0..50_000u32 {
            let k = format!("m{}", rng.below(3000)).into_bytes();
            match rng.below(3) {
                0 | 1 => assert_eq!(d.insert(&k, step), m.insert(k, step)),
                _ => assert_eq!(d.remove(&k), m.remove(&k)),
            }
            if step % 5000 == 0 {
                assert_eq!(d.len(), m.len());
                for (k, v) in &m {
                    assert_eq!(d.get(k), Some(v));
                }
                let mut seen: Vec<_> = d.iter().map(|(k, _)| k.to_vec()).collect();
                seen.sort();
                seen.dedup();
                assert_eq!(seen.len(), m.len());
            }
        }
        let keys: usize = m.keys().map(Vec::len).sum();
        assert_eq!(d.heap_bytes, keys);
        while !d.is_empty() {
            let (k, v) = d.remove_index(rng.below(d.len())).unwrap();
            assert_eq!(m.remove(&*k), Some(v));
        }
        assert!(m.is_empty());
        assert_eq!(d.heap_bytes, 0);
    }
}
