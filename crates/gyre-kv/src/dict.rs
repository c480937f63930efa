//! The hash table of large hashes and sets (Redis's `dict.c` role):
//! a dense vector of entries plus an open-addressing index of `u32` slots
//! (linear probing, at most 3/4 full, backward-shift deletion), keyed
//! SipHash-1-2 with a random key per table (see [`crate::hash`]: members
//! come from clients, so collisions must not be aimable).
//!
//! Each slot has a tag byte beside it (the hash's top bits, in a parallel
//! array): a probe compares a key only where the tag matches, so a lookup
//! touches about one entry and one key instead of every entry of its probe
//! chain (at 3/4 full an absent key's chain averages 8 slots, and each key
//! compare is two cache misses: the entry, then the key's bytes).
//!
//! Why dense: SRANDMEMBER / SPOP / HRANDFIELD pick a random entry in O(1),
//! and SSCAN / HSCAN walk the vector from the top down with the keyspace's
//! cursor guarantee (see [`crate::db::Db::scan`]): removal moves only the
//! last entry (already visited) down.
//!
//! Two entry forms share the table ([`Table`]): a set member is its bytes
//! ([`Dict`]); a hash field and its value are packed together ([`Pairs`]:
//! the field's length, the field, the value). Either is a [`SmallBytes`]:
//! up to 30 bytes inside the 32-byte entry, longer ones in an allocation
//! of their own — against a Redis `dictEntry` (24 bytes), two sds strings
//! and a bucket pointer. Two allocations a field cost twice glibc's chunk
//! overhead: a 1e6-field hash of 12-byte fields and 8-byte values held 116
//! MiB of RSS that way, 1.37x Redis's; one allocation a field, 62 MiB; in
//! the entry, none. A member in the entry is also one cache miss less per
//! key compare. Why 30 and not 22 (a 24-byte entry): redis-benchmark's
//! HSET pair (a 20-byte field, a 3-byte value, the length byte) is 24
//! bytes; with it boxed HSET -P 16 took ~1.3x the CPU per request, for
//! 8 bytes an entry less (a 1e6-field hash: 43 against 47 MiB of RSS).

use crate::hash::KeyHasher;

const EMPTY: u32 = u32::MAX;

/// A slot's tag: the hash's top byte (the home slot comes from its low
/// bits, so the two are independent for any table size up to 2^56).
#[inline]
fn tag_of(h: u64) -> u8 {
    (h >> 56) as u8
}

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

/// Bytes kept inside the entry when there are few (the 32 bytes an entry
/// has room for, less the length and the variant), else boxed.
#[derive(Clone)]
pub enum SmallBytes {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap(Box<[u8]>),
}

/// Bytes a [`SmallBytes`] holds without an allocation.
pub const INLINE: usize = 30;

impl SmallBytes {
    /// The concatenation of `parts`.
    fn from_parts(parts: &[&[u8]]) -> SmallBytes {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        if n <= INLINE {
            let mut buf = [0u8; INLINE];
            let mut at = 0;
            for p in parts {
                buf[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            SmallBytes::Inline { len: n as u8, buf }
        } else {
            SmallBytes::Heap(parts.concat().into_boxed_slice())
        }
    }

    /// Heap bytes owned (0 inside the entry).
    fn heap_size(&self) -> usize {
        match self {
            SmallBytes::Inline { .. } => 0,
            SmallBytes::Heap(b) => b.len(),
        }
    }

    pub fn into_vec(self) -> Vec<u8> {
        match self {
            SmallBytes::Inline { len, buf } => buf[..usize::from(len)].to_vec(),
            SmallBytes::Heap(b) => b.into_vec(),
        }
    }
}

impl From<&[u8]> for SmallBytes {
    fn from(b: &[u8]) -> SmallBytes {
        SmallBytes::from_parts(&[b])
    }
}

impl std::ops::Deref for SmallBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, buf } => &buf[..usize::from(*len)],
            SmallBytes::Heap(b) => b,
        }
    }
}

impl std::ops::DerefMut for SmallBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            SmallBytes::Inline { len, buf } => &mut buf[..usize::from(*len)],
            SmallBytes::Heap(b) => b,
        }
    }
}

impl std::fmt::Debug for SmallBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// An entry of a [`Table`]: the bytes it is found by, and what it owns.
pub trait Keyed {
    fn key(&self) -> &[u8];
    fn heap_size(&self) -> usize;
}

impl<V: HeapSize> Keyed for (SmallBytes, V) {
    fn key(&self) -> &[u8] {
        &self.0
    }

    fn heap_size(&self) -> usize {
        self.0.heap_size() + self.1.heap_size()
    }
}

/// A key with a value beside it (sets: `V = ()`).
pub type Dict<V> = Table<(SmallBytes, V)>;

/// A hash's fields and values, each pair in one allocation.
pub type Pairs = Table<Packed>;

#[derive(Clone, Debug)]
pub struct Table<E> {
    entries: Vec<E>,
    slots: Vec<u32>,
    /// `tags[s]`: the tag of the entry in slot `s` (see [`tag_of`]).
    tags: Vec<u8>,
    hasher: KeyHasher,
    /// Sum of the entries' heap bytes (for `used_memory`).
    heap_bytes: usize,
}

impl<E: Keyed> Default for Table<E> {
    fn default() -> Self {
        Table::new()
    }
}

impl<E: Keyed> Table<E> {
    pub fn new() -> Table<E> {
        Table {
            entries: Vec::new(),
            slots: Vec::new(),
            tags: Vec::new(),
            hasher: KeyHasher::random(),
            heap_bytes: 0,
        }
    }

    pub fn with_capacity(n: usize) -> Table<E> {
        let mut d = Table::new();
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

    /// Bytes allocated by the table plus its entries' bytes.
    pub fn mem(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<E>()
            + self.slots.capacity() * 4
            + self.tags.capacity()
            + self.heap_bytes
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.find_slot(key).is_some()
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn home(&self, key: &[u8]) -> usize {
        self.hasher.hash(key) as usize & self.mask()
    }

    /// `key`'s home slot and tag.
    fn place(&self, key: &[u8]) -> (usize, u8) {
        let h = self.hasher.hash(key);
        (h as usize & self.mask(), tag_of(h))
    }

    /// Slot holding `key`'s index, if present.
    fn find_slot(&self, key: &[u8]) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let (mut s, tag) = self.place(key);
        loop {
            let i = self.slots[s];
            if i == EMPTY {
                return None;
            }
            if self.tags[s] == tag && self.entries[i as usize].key() == key {
                return Some(s);
            }
            s = (s + 1) & self.mask();
        }
    }

    /// The first free slot from `key`'s home on, and the key's tag.
    fn free_slot(&self, key: &[u8]) -> (usize, u8) {
        let (mut s, tag) = self.place(key);
        while self.slots[s] != EMPTY {
            s = (s + 1) & self.mask();
        }
        (s, tag)
    }

    fn find(&self, key: &[u8]) -> Option<&E> {
        self.find_slot(key)
            .map(|s| &self.entries[self.slots[s] as usize])
    }

    fn grow_to(&mut self, n: usize) {
        let size = (n * 4 / 3 + 1).next_power_of_two().max(8);
        if size <= self.slots.len() {
            return;
        }
        self.slots = vec![EMPTY; size];
        self.tags = vec![0; size];
        for i in 0..self.entries.len() {
            let (s, tag) = self.free_slot(self.entries[i].key());
            self.slots[s] = i as u32;
            self.tags[s] = tag;
        }
    }

    /// Adds `e`, whose key is not in the table.
    fn push_new(&mut self, e: E) {
        if (self.entries.len() + 1) * 4 > self.slots.len() * 3 {
            self.grow_to((self.entries.len() + 1) * 2);
        }
        let (s, tag) = self.free_slot(e.key());
        self.slots[s] = self.entries.len() as u32;
        self.tags[s] = tag;
        self.heap_bytes += e.heap_size();
        self.entries.push(e);
    }

    /// Removes the entry found by `key`.
    fn take(&mut self, key: &[u8]) -> Option<E> {
        let s = self.find_slot(key)?;
        Some(self.remove_slot(s))
    }

    /// Removes entry `i` of the dense order.
    fn take_index(&mut self, i: usize) -> Option<E> {
        let s = self.find_slot(self.entries.get(i)?.key())?;
        Some(self.remove_slot(s))
    }

    fn remove_slot(&mut self, s: usize) -> E {
        let i = self.slots[s] as usize;
        self.delete_slot(s);
        let last = self.entries.len() - 1;
        if i != last {
            // The last entry moves into `i`: re-point its slot.
            if let Some(ls) = self.find_slot(self.entries[last].key()) {
                self.slots[ls] = i as u32;
            }
        }
        let e = self.entries.swap_remove(i);
        self.heap_bytes -= e.heap_size();
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
            let h = self.home(self.entries[i as usize].key());
            // Move it back if its home is not in (s, j] (cyclically).
            let in_range = if s <= j {
                s < h && h <= j
            } else {
                s < h || h <= j
            };
            if !in_range {
                self.slots[s] = i;
                self.tags[s] = self.tags[j];
                self.slots[j] = EMPTY;
                s = j;
            }
        }
    }

    fn shrink(&mut self) {
        self.entries.shrink_to(self.entries.len() * 2);
        self.slots = Vec::new();
        self.tags = Vec::new();
        self.grow_to(self.entries.len());
    }

    /// Drop up to `n` entries from the end, for a table being freed
    /// piecemeal (lookups are over). Returns how many.
    ///
    /// The two arrays shrink in step with the entries (each call gives
    /// back the tail it emptied) instead of going whole: the entries of a
    /// ten-million-field hash are 160 MB, and unmapping that in one call
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
        self.tags.truncate(keep);
        self.tags.shrink_to(keep);
        k
    }
}

impl<V: HeapSize> Table<(SmallBytes, V)> {
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        self.find(key).map(|e| &e.1)
    }

    /// Insert or replace; returns the old value.
    pub fn insert(&mut self, key: &[u8], v: V) -> Option<V> {
        if let Some(s) = self.find_slot(key) {
            // The key stays: only the value changes.
            let i = self.slots[s] as usize;
            self.heap_bytes = self.heap_bytes + v.heap_size() - self.entries[i].1.heap_size();
            return Some(std::mem::replace(&mut self.entries[i].1, v));
        }
        self.push_new((key.into(), v));
        None
    }

    /// Remove `key`, returning its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        self.take(key).map(|e| e.1)
    }

    /// Remove entry `i` of the dense order.
    pub fn remove_index(&mut self, i: usize) -> Option<(SmallBytes, V)> {
        self.take_index(i)
    }

    /// Entry `i` of the dense order (random picks, SCAN).
    pub fn entry(&self, i: usize) -> Option<(&[u8], &V)> {
        self.entries.get(i).map(|(k, v)| (&**k, v))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.entries.iter().map(|(k, v)| (&**k, v))
    }
}

/// A hash field and its value in one allocation: the field's length as
/// a LEB128 varint, the field, the value.
#[derive(Clone, Debug)]
pub struct Packed(SmallBytes);

impl Packed {
    pub fn new(field: &[u8], value: &[u8]) -> Packed {
        let mut len = [0u8; 10];
        let mut at = 0;
        let mut n = field.len();
        while n >= 0x80 {
            len[at] = (n as u8 & 0x7f) | 0x80;
            n >>= 7;
            at += 1;
        }
        len[at] = n as u8;
        Packed(SmallBytes::from_parts(&[&len[..=at], field, value]))
    }

    /// (field, value).
    pub fn pair(&self) -> (&[u8], &[u8]) {
        let (mut n, mut shift, mut at) = (0usize, 0u32, 0usize);
        while let Some(&b) = self.0.get(at) {
            n |= usize::from(b & 0x7f) << shift;
            at += 1;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let body = self.0.get(at..).unwrap_or(&[]);
        body.split_at(n.min(body.len()))
    }
}

impl Keyed for Packed {
    fn key(&self) -> &[u8] {
        self.pair().0
    }

    fn heap_size(&self) -> usize {
        self.0.heap_size()
    }
}

impl Table<Packed> {
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.find(field).map(|e| e.pair().1)
    }

    /// Sets `field` to `value`; true if the field is new. A value of the
    /// old one's length is written over it (no allocation).
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        let Some(s) = self.find_slot(field) else {
            self.push_new(Packed::new(field, value));
            return true;
        };
        let e = &mut self.entries[self.slots[s] as usize];
        let at = e.0.len() - e.pair().1.len();
        match e.0.get_mut(at..) {
            Some(old) if old.len() == value.len() => old.copy_from_slice(value),
            _ => {
                let before = e.0.heap_size();
                *e = Packed::new(field, value);
                self.heap_bytes = self.heap_bytes + e.0.heap_size() - before;
            }
        }
        false
    }

    /// Deletes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        self.take(field).is_some()
    }

    /// Pair `i` of the dense order (random picks, SCAN).
    pub fn entry(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.entries.get(i).map(Packed::pair)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.entries.iter().map(Packed::pair)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::util::Rng;
    use std::collections::HashMap;

    fn varint_len(mut n: usize) -> usize {
        let mut len = 1;
        while n >= 0x80 {
            n >>= 7;
            len += 1;
        }
        len
    }

    /// Heap bytes `n` bytes of entry take (none inside the entry).
    fn heap(n: usize) -> usize {
        if n <= INLINE {
            0
        } else {
            n
        }
    }

    #[test]
    fn an_entry_is_32_bytes() {
        assert_eq!(std::mem::size_of::<SmallBytes>(), 32);
        assert_eq!(std::mem::size_of::<(SmallBytes, ())>(), 32);
        assert_eq!(std::mem::size_of::<Packed>(), 32);
    }

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
            // Lengths 2 to 44: members in the entry and boxed ones.
            let n = rng.below(3000);
            let k = format!("m{n}{}", "x".repeat(n % 41)).into_bytes();
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
        let keys: usize = m.keys().map(|k| heap(k.len())).sum();
        assert_eq!(d.heap_bytes, keys);
        while !d.is_empty() {
            let (k, v) = d.remove_index(rng.below(d.len())).unwrap();
            assert_eq!(m.remove(&*k), Some(v));
        }
        assert!(m.is_empty());
        assert_eq!(d.heap_bytes, 0);
    }

    /// The packed field/value form against a map, with fields long enough
    /// for a two- and three-byte length, empty fields and values, and
    /// values that change size in place.
    #[test]
    fn pairs_match_a_plain_map() {
        let mut d = Pairs::new();
        let mut m: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let mut rng = Rng::new(11);
        for step in 0..40_000u32 {
            let flen = [0, 1, 12, 127, 128, 300, 20_000][rng.below(7)];
            let f: Vec<u8> = format!("{}:{}", rng.below(2000), "f".repeat(flen)).into_bytes();
            let v: Vec<u8> = "v".repeat(rng.below(40)).into_bytes();
            match rng.below(3) {
                0 | 1 => assert_eq!(d.insert(&f, &v), m.insert(f, v).is_none()),
                _ => assert_eq!(d.remove(&f), m.remove(&f).is_some()),
            }
            if step % 4000 == 0 {
                assert_eq!(d.len(), m.len());
                for (k, v) in &m {
                    assert_eq!(d.get(k), Some(v.as_slice()));
                }
                assert_eq!(d.iter().count(), m.len());
                for i in 0..d.len() {
                    let (k, v) = d.entry(i).unwrap();
                    assert_eq!(m.get(k).map(Vec::as_slice), Some(v));
                }
            }
        }
        let bytes: usize = m
            .iter()
            .map(|(k, v)| heap(varint_len(k.len()) + k.len() + v.len()))
            .sum();
        assert_eq!(d.heap_bytes, bytes);
        assert_eq!(d.get(b"absent"), None);
        assert!(!d.remove(b"absent"));
    }
}
