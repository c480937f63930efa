//! The keyspace's hash table (Redis's `dict.c` role for `db->dict`): a
//! power-of-two array of `u32` bucket heads, chained through
//! [`Node::next`](super::node::Node) in the dense node vector.
//!
//! Why chaining into the nodes instead of a general map: a bucket is 4
//! bytes, and at most one bucket per key (Redis's load factor 1: the table
//! doubles when it would hold more keys than buckets), so the index costs
//! 4-8 bytes per key; a `HashMap<u32, u32>` (8-byte entries plus a control
//! byte at 44-87% load) cost about 16. A lookup reads one bucket, then the
//! head node, whose `hash` is compared before its key bytes.
//!
//! Keys hash with keyed SipHash-1-2, random per database (see
//! [`crate::hash`]), so nobody can aim keys at one chain; the node keeps
//! 32 bits of that hash ([`map_key`]), enough to pick a bucket in tables
//! of up to 2^32 and to reject most chain neighbours without touching
//! their key bytes.
//!
//! Growing is incremental, as Redis's rehash: the new array (twice the
//! buckets) is allocated, and each insert then moves a few of the old
//! array's chains into it, so no command relinks every key (relinking a
//! million at once took 68 ms, about what the `HashMap`'s own resize
//! took; now the insert that grows the table allocates the new array
//! and moves 16 chains: `db::tests::measure_growth`). The RDB loader sizes
//! the table up front from RESIZEDB ([`Db::reserve`]), so a load never
//! rehashes. The table never shrinks while keys go (see the module notes
//! of [`super`]).

use super::{Db, NONE};

/// The 32 bits of a 64-bit key hash the keyspace keeps (both halves
/// folded, so the bucket bits depend on the whole hash).
#[inline(always)]
pub(super) fn map_key(h: u64) -> u32 {
    (h ^ (h >> 32)) as u32
}

/// Bucket heads; empty until the first key. While the table grows,
/// `old` holds the previous, half-size array, whose buckets from `cursor`
/// on have not moved yet (Redis's two `ht_table`s and `rehashidx`): a
/// key's chain is in `old` when its old bucket is at or past `cursor`,
/// else in `heads`.
#[derive(Debug, Default)]
pub(super) struct Table {
    heads: Vec<u32>,
    old: Vec<u32>,
    cursor: usize,
}

/// Old buckets moved per insert while growing: the old array is gone
/// after 1/16 of the keys it held have been added again (sooner gives back
/// its memory: at 4 per insert, 300k keys still held the old quarter of a
/// million buckets, 3.5 bytes per key), and no insert relinks more than
/// a few dozen keys (about a microsecond of cache misses).
const MOVE_PER_INSERT: usize = 16;

impl Table {
    /// Where `h`'s chain head is: `(in old, bucket)`.
    #[inline(always)]
    fn place(&self, h: u32) -> (bool, usize) {
        if !self.old.is_empty() {
            let ob = (h as usize) & (self.old.len() - 1);
            if ob >= self.cursor {
                return (true, ob);
            }
        }
        (false, (h as usize) & self.heads.len().wrapping_sub(1))
    }

    /// The first node of `h`'s bucket (`NONE`: empty).
    #[inline(always)]
    pub(super) fn head(&self, h: u32) -> u32 {
        match self.place(h) {
            (true, b) => self.old[b],
            (false, b) => self.heads.get(b).copied().unwrap_or(NONE),
        }
    }

    #[inline(always)]
    fn head_mut(&mut self, h: u32) -> Option<&mut u32> {
        match self.place(h) {
            (true, b) => self.old.get_mut(b),
            (false, b) => self.heads.get_mut(b),
        }
    }

    /// Buckets (a power of two, or 0).
    pub(super) fn buckets(&self) -> usize {
        self.heads.len()
    }

    pub(super) fn growing(&self) -> bool {
        !self.old.is_empty()
    }

    /// Make node `i` the head of `h`'s bucket (the caller has set its
    /// `next` to the old head).
    #[inline(always)]
    pub(super) fn set_head(&mut self, h: u32, i: u32) {
        if let Some(head) = self.head_mut(h) {
            *head = i;
        }
    }
}

/// Buckets for `keys` keys: the next power of two (load factor <= 1).
pub(super) fn buckets_for(keys: usize) -> usize {
    keys.max(4).next_power_of_two()
}

impl Db {
    /// Node index of `key` (hash already taken). Inline: every lookup
    /// runs it.
    #[inline(always)]
    pub(super) fn find_hashed(&self, h: u32, key: &[u8]) -> Option<usize> {
        let mut i = self.table.head(h);
        while let Some(n) = self.nodes.get(i as usize) {
            if n.hash == h && n.key() == key {
                return Some(i as usize);
            }
            i = n.next;
        }
        None
    }

    pub(super) fn find(&self, key: &[u8]) -> Option<usize> {
        self.find_hashed(self.hash(key), key)
    }

    /// Link a node about to be pushed at index `nodes.len()` with hash
    /// `h`: grows the table first if it would pass one key per bucket.
    /// Returns the node's `next`.
    #[inline]
    pub(super) fn link_new(&mut self, h: u32) -> u32 {
        let n = self.nodes.len();
        if self.table.growing() {
            self.move_buckets(MOVE_PER_INSERT);
        }
        if n >= self.table.buckets() {
            self.grow(buckets_for(n + 1));
        }
        match self.table.head_mut(h) {
            Some(head) => std::mem::replace(head, n as u32),
            None => NONE,
        }
    }

    /// Rebuild the chains over `buckets` buckets (a power of two) at once
    /// (an empty or nearly empty table: RESIZEDB).
    #[inline(never)]
    pub(super) fn rehash(&mut self, buckets: usize) {
        self.rehash_prefix(buckets, self.nodes.len());
    }

    /// [`Db::rehash`] of the first `linked` nodes only (the others are
    /// about to be linked by [`Db::link_appended`]).
    pub(super) fn rehash_prefix(&mut self, buckets: usize, linked: usize) {
        let mut heads = vec![NONE; buckets];
        let mask = buckets - 1;
        for (i, n) in self.nodes.iter_mut().enumerate().take(linked) {
            let b = n.hash as usize & mask;
            n.next = heads[b];
            heads[b] = i as u32;
        }
        self.table = Table {
            heads,
            old: Vec::new(),
            cursor: 0,
        };
    }

    /// Start growing to `buckets` buckets: the current array becomes the
    /// old one, moved a few buckets per insert ([`Db::move_buckets`]), so
    /// no single command relinks every key (Redis's incremental rehash).
    #[inline(never)]
    fn grow(&mut self, buckets: usize) {
        if self.table.growing() {
            self.move_buckets(usize::MAX);
        }
        if self.table.heads.is_empty() {
            self.table.heads = vec![NONE; buckets];
            return;
        }
        let old = std::mem::replace(&mut self.table.heads, vec![NONE; buckets]);
        self.table.old = old;
        self.table.cursor = 0;
    }

    /// End a growth in progress at once.
    pub(super) fn finish_growing(&mut self) {
        if self.table.growing() {
            self.move_buckets(usize::MAX);
        }
    }

    /// Move up to `k` old buckets' chains into the new array.
    #[inline(never)]
    fn move_buckets(&mut self, k: usize) {
        let t = &mut self.table;
        let mask = t.heads.len() - 1;
        let end = t.cursor.saturating_add(k).min(t.old.len());
        for c in t.cursor..end {
            let mut j = std::mem::replace(&mut t.old[c], NONE);
            while let Some(n) = self.nodes.get_mut(j as usize) {
                let next = n.next;
                let b = n.hash as usize & mask;
                n.next = t.heads[b];
                t.heads[b] = j;
                j = next;
            }
        }
        t.cursor = end;
        if t.cursor >= t.old.len() {
            t.old = Vec::new();
            t.cursor = 0;
        }
    }

    /// Size the table for `keys` keys at once (RESIZEDB, `dictExpand`).
    pub(super) fn table_reserve(&mut self, keys: usize) {
        let want = buckets_for(keys);
        if want > self.table.buckets() {
            self.rehash(want);
        }
    }

    /// Re-point whatever referenced node `from` (its bucket head or its
    /// predecessor in the chain) to `to`.
    pub(super) fn repoint_chain(&mut self, hash: u32, from: u32, to: u32) {
        let Some(head) = self.table.head_mut(hash) else {
            return;
        };
        if *head == from {
            *head = to;
            return;
        }
        let mut j = *head as usize;
        while let Some(n) = self.nodes.get_mut(j) {
            if n.next == from {
                n.next = to;
                return;
            }
            j = n.next as usize;
        }
    }

    /// Drop node `i` from its chain.
    pub(super) fn unlink_chain(&mut self, i: usize) {
        let (hash, next) = (self.nodes[i].hash, self.nodes[i].next);
        self.repoint_chain(hash, i as u32, next);
    }

    /// Drop the table (FLUSHDB).
    pub(super) fn table_clear(&mut self) {
        self.table = Table::default();
    }

    /// Every node is reachable from exactly its own bucket, in the array
    /// [`Table::place`] says (tests).
    pub(super) fn table_ok(&self) -> bool {
        let t = &self.table;
        let mut chained = 0;
        let arrays = [(false, &t.heads, 0), (true, &t.old, t.cursor)];
        for (in_old, heads, from) in arrays {
            for (b, &head) in heads.iter().enumerate().skip(from) {
                let mut i = head;
                while let Some(n) = self.nodes.get(i as usize) {
                    if t.place(n.hash) != (in_old, b) {
                        return false;
                    }
                    chained += 1;
                    i = n.next;
                }
            }
        }
        let moved_empty = t.old.iter().take(t.cursor).all(|&h| h == NONE);
        moved_empty && chained == self.nodes.len() && self.nodes.len() <= t.buckets()
    }
}
