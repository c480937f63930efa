//! The large sorted-set form (OBJECT ENCODING `skiplist`, as Redis names
//! it): an order-statistic B+tree for order and rank, a hash index for
//! member lookup, and an arena that holds every member once.
//!
//! * `pages` — the arena: `(member, score)` slots in fixed pages of
//!   `PAGE` (so growth never copies or doubles the whole arena), members
//!   up to 22 bytes inline in the slot. A slot's index is the member's `id`.
//! * `index` — open addressing with linear probing over `(id, hash)`
//!   pairs (8 bytes per slot, load 3/8..3/4); the stored 32 hash bits place
//!   an entry on growth without hashing members again, and filter probes
//!   before member bytes are compared. Removal shifts the run back (no
//!   tombstones). The hash is keyed SipHash-1-2 (see [`crate::hash`]).
//! * `tree` — [`BTree`] of `(score, id)`; ties on score order by member
//!   bytes, read through the arena.
//!
//! Redis's skiplist+dict costs a skiplist node (32 bytes + 16 per level,
//! 1.33 levels on average, so a 48- or 64-byte allocation), a dict entry
//! (24), a bucket pointer (8 at load ≤ 1) and the member's sds. Here a
//! member costs 32 bytes of slot, 12/fill of tree (fill ≈ 0.7) and 8/load
//! of index, ≈ 65-70 bytes with a short member and no allocation of its own.
//! The measured figures are in `zset/mod.rs`'s comment.

use super::btree::{BTree, Ent};
use crate::hash::KeyHasher;

/// Slots per arena page.
const PAGE: usize = 1024;
const INLINE: usize = 22;
const EMPTY: u32 = u32::MAX;

#[derive(Clone, Debug)]
enum Member {
    Inline(u8, [u8; INLINE]),
    Heap(Box<[u8]>),
}

impl Member {
    fn new(b: &[u8]) -> Member {
        if b.len() <= INLINE {
            let mut buf = [0; INLINE];
            buf[..b.len()].copy_from_slice(b);
            Member::Inline(b.len() as u8, buf)
        } else {
            Member::Heap(b.into())
        }
    }

    /// A freed slot's marker (no inline member is this long).
    const FREE: Member = Member::Inline(u8::MAX, [0; INLINE]);

    fn is_free(&self) -> bool {
        matches!(self, Member::Inline(u8::MAX, _))
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Member::Inline(n, b) => &b[..usize::from(*n).min(INLINE)],
            Member::Heap(b) => b,
        }
    }
}

#[derive(Clone, Debug)]
struct Slot {
    member: Member,
    score: f64,
}

/// See the module comment.
#[derive(Clone, Debug)]
pub struct Large {
    hasher: KeyHasher,
    pages: Vec<Vec<Slot>>,
    free: Vec<u32>,
    index: Vec<(u32, u32)>,
    tree: BTree,
    /// Bytes of members kept outside their slot (for [`Large::mem`]).
    heap: usize,
}

impl Default for Large {
    fn default() -> Self {
        Large::new()
    }
}

impl Large {
    pub fn new() -> Large {
        Large {
            hasher: KeyHasher::random(),
            pages: Vec::new(),
            free: Vec::new(),
            index: Vec::new(),
            tree: BTree::new(),
            heap: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.tree.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    fn slot(&self, id: u32) -> &Slot {
        &self.pages[id as usize / PAGE][id as usize % PAGE]
    }

    fn slot_mut(&mut self, id: u32) -> &mut Slot {
        &mut self.pages[id as usize / PAGE][id as usize % PAGE]
    }

    /// The member and score of an arena id.
    pub fn entry(&self, id: u32) -> (&[u8], f64) {
        let s = self.slot(id);
        (s.member.as_slice(), s.score)
    }

    fn hash32(&self, m: &[u8]) -> u32 {
        self.hasher.hash(m) as u32
    }

    /// Index position of `m`, if present.
    fn probe(&self, m: &[u8]) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        let mask = self.index.len() - 1;
        let h = self.hash32(m);
        let mut pos = h as usize & mask;
        loop {
            let (id, hh) = self.index[pos];
            if id == EMPTY {
                return None;
            }
            if hh == h && self.slot(id).member.as_slice() == m {
                return Some(pos);
            }
            pos = (pos + 1) & mask;
        }
    }

    pub fn id_of(&self, m: &[u8]) -> Option<u32> {
        self.probe(m).map(|p| self.index[p].0)
    }

    pub fn score(&self, m: &[u8]) -> Option<f64> {
        self.id_of(m).map(|id| self.slot(id).score)
    }

    /// Rank of the entry `(score, m)` if present, else where it would go.
    fn position(&self, score: f64, m: &[u8]) -> usize {
        // Scores decide without touching the arena; member bytes (a cache
        // miss) only on a tie.
        self.tree.partition_point(|e| {
            e.score < score || e.score == score && self.slot(e.id).member.as_slice() < m
        })
    }

    /// [`Large::partition_point`] for a predicate on the score alone.
    pub fn partition_point_score(&self, mut pred: impl FnMut(f64) -> bool) -> usize {
        self.tree.partition_point(|e| pred(e.score))
    }

    pub fn rank(&self, m: &[u8]) -> Option<usize> {
        let id = self.id_of(m)?;
        let r = self.position(self.slot(id).score, m);
        Some(r)
    }

    /// Add a member that is not present.
    pub fn insert(&mut self, m: &[u8], score: f64) {
        let rank = self.position(score, m);
        if m.len() > INLINE {
            self.heap += m.len();
        }
        let slot = Slot {
            member: Member::new(m),
            score,
        };
        let id = match self.free.pop() {
            Some(id) => {
                *self.slot_mut(id) = slot;
                id
            }
            None => {
                if self.pages.last().is_none_or(|p| p.len() == PAGE) {
                    self.pages.push(Vec::with_capacity(PAGE));
                }
                let last = self.pages.len() - 1;
                let page = &mut self.pages[last];
                page.push(slot);
                (last * PAGE + page.len() - 1) as u32
            }
        };
        self.tree.insert_at(rank, Ent { score, id });
        self.index_add(id, self.hash32(m));
    }

    /// Change the score of a present member.
    pub fn update(&mut self, m: &[u8], score: f64) {
        let Some(id) = self.id_of(m) else { return };
        let old = self.slot(id).score;
        let r = self.position(old, m);
        self.tree.remove_at(r);
        self.slot_mut(id).score = score;
        let r = self.position(score, m);
        self.tree.insert_at(r, Ent { score, id });
    }

    pub fn remove(&mut self, m: &[u8]) -> Option<f64> {
        let pos = self.probe(m)?;
        let id = self.index[pos].0;
        let score = self.slot(id).score;
        let r = self.position(score, m);
        self.tree.remove_at(r);
        self.index_remove_at(pos);
        self.release(id);
        Some(score)
    }

    /// Remove the entry at `rank`.
    pub fn remove_rank(&mut self, rank: usize) {
        let e = self.tree.remove_at(rank);
        let m = self.slot(e.id).member.as_slice().to_vec();
        if let Some(pos) = self.probe(&m) {
            self.index_remove_at(pos);
        }
        self.release(e.id);
    }

    fn release(&mut self, id: u32) {
        let old = std::mem::replace(&mut self.slot_mut(id).member, Member::FREE);
        if let Member::Heap(b) = old {
            self.heap -= b.len();
        }
        self.free.push(id);
        if self.tree.is_empty() {
            self.pages.clear();
            self.free.clear();
            self.index.clear();
        }
    }

    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        self.tree.get(rank).map(|e| self.entry(e.id))
    }

    pub fn partition_point(&self, mut pred: impl FnMut(&[u8], f64) -> bool) -> usize {
        self.tree.partition_point(|e| {
            let (m, s) = self.entry(e.id);
            pred(m, s)
        })
    }

    pub fn visit(&self, start: usize, end: usize, rev: bool, mut f: impl FnMut(&[u8], f64)) {
        self.tree.visit(start, end, rev, |e| {
            let (m, s) = self.entry(e.id);
            f(m, s)
        });
    }

    /// Lazy free (the set is out of the keyspace): up to about `budget`
    /// members go, the arena pages, the member index and the free list in
    /// step with the tree (the index of ten million members is over 100
    /// MB: unmapping it at once stopped the loop for milliseconds).
    /// Returns how many went (at least one while any remain).
    pub fn free_some(&mut self, budget: usize) -> usize {
        let before = self.tree.len();
        let n = self.tree.free_some(budget);
        let left = self.tree.len();
        keep_share(&mut self.index, left, before);
        keep_share(&mut self.free, left, before);
        let keep = self.tree.len().div_ceil(PAGE);
        while self.pages.len() > keep {
            self.pages.pop();
        }
        n
    }

    /// ZSCAN over the arena: ids from `cursor` up, until `count` live
    /// entries are taken; the next cursor (0 at the end) and the entries.
    /// An id never changes while its member is in the set, so every member
    /// present for a whole scan is returned (Redis's SCAN guarantee); the
    /// arena only shrinks when the set empties.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<(Vec<u8>, f64)>) {
        let total = self.pages.iter().map(Vec::len).sum::<usize>() as u64;
        let mut id = cursor;
        let mut out = Vec::new();
        let mut visited = 0usize;
        while id < total && out.len() < count && visited < count.saturating_mul(10) {
            let s = self.slot(id as u32);
            if !s.member.is_free() {
                out.push((s.member.as_slice().to_vec(), s.score));
            }
            visited += 1;
            id += 1;
        }
        (if id >= total { 0 } else { id }, out)
    }

    /// Estimated bytes held, in O(1) (INFO's `used_memory` is updated on
    /// every write): arena pages, heap members, index, and the tree at the
    /// ~70% leaf fill random inserts give (18 bytes per entry).
    pub fn mem(&self) -> usize {
        self.pages.len() * PAGE * std::mem::size_of::<Slot>()
            + self.heap
            + self.index.len() * 8
            + self.free.capacity() * 4
            + self.tree.len() * 18
    }

    /// Bytes allocated, counted exactly by walking everything (for the
    /// measurement; O(n)).
    pub fn allocated(&self) -> usize {
        let slots = self.pages.len() * PAGE * std::mem::size_of::<Slot>();
        let heap: usize = self
            .pages
            .iter()
            .flatten()
            .map(|s| match &s.member {
                Member::Heap(b) => b.len(),
                Member::Inline(..) => 0,
            })
            .sum();
        slots + heap + self.index.len() * 8 + self.free.capacity() * 4 + self.tree.allocated()
    }

    fn index_add(&mut self, id: u32, h: u32) {
        if (self.len() + 1) * 4 > self.index.len() * 3 {
            self.index_resize((self.index.len() * 2).max(8));
        }
        let mask = self.index.len() - 1;
        let mut pos = h as usize & mask;
        while self.index[pos].0 != EMPTY {
            pos = (pos + 1) & mask;
        }
        self.index[pos] = (id, h);
    }

    fn index_resize(&mut self, cap: usize) {
        let old = std::mem::replace(&mut self.index, vec![(EMPTY, 0); cap]);
        let mask = cap - 1;
        for (id, h) in old.into_iter().filter(|e| e.0 != EMPTY) {
            let mut pos = h as usize & mask;
            while self.index[pos].0 != EMPTY {
                pos = (pos + 1) & mask;
            }
            self.index[pos] = (id, h);
        }
    }

    /// Backward-shift deletion: pull later entries of the run into the
    /// hole unless that would move them before their home slot.
    fn index_remove_at(&mut self, mut hole: usize) {
        let mask = self.index.len() - 1;
        self.index[hole] = (EMPTY, 0);
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let (id, h) = self.index[j];
            if id == EMPTY {
                break;
            }
            let home = h as usize & mask;
            // Can the entry at j move to the hole? Only if its home is not
            // cyclically within (hole, j].
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.index[hole] = (id, h);
                self.index[j] = (EMPTY, 0);
                hole = j;
            }
        }
        // len() already counts the removed entry out when called from
        // remove (the tree went first).
        if self.index.len() > 64 && self.len() * 8 < self.index.len() * 3 / 2 {
            self.index_resize(self.index.len() / 2);
        }
    }

    /// Consistency checks for tests.
    pub fn check(&self) -> bool {
        let live = self.index.iter().filter(|e| e.0 != EMPTY).count();
        if live != self.len() || !self.tree.check() {
            return false;
        }
        let mut prev: Option<(Vec<u8>, f64)> = None;
        let mut ok = true;
        self.visit(0, self.len(), false, |m, s| {
            if let Some((pm, ps)) = &prev {
                ok &= super::order(*ps, pm, s, m).is_lt();
            }
            ok &= self.score(m) == Some(s);
            prev = Some((m.to_vec(), s));
        });
        ok
    }
}

/// Cut a vector being freed to its share `left / before` of its length,
/// giving the rest back ([`Large::free_some`]).
fn keep_share<T>(v: &mut Vec<T>, left: usize, before: usize) {
    let keep = (v.len() as u64 * left as u64)
        .checked_div(before as u64)
        .unwrap_or(0) as usize;
    v.truncate(keep);
    v.shrink_to(keep);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::Rng;
    use std::collections::BTreeMap;

    #[test]
    fn free_some_empties_pages_with_the_tree() {
        let mut z = Large::new();
        for i in 0..10_000 {
            z.insert(
                format!("a-member-longer-than-inline-{i}").as_bytes(),
                f64::from(i % 97),
            );
        }
        let mut left = z.len();
        while !z.is_empty() {
            let n = z.free_some(500);
            assert!(n >= 1);
            left -= n.min(left);
            assert!(z.pages.len() <= z.len().div_ceil(PAGE));
        }
        assert_eq!(left, 0);
        assert!(z.pages.is_empty() && z.index.is_empty());
    }

    #[test]
    fn random_ops_match_a_model() {
        let mut rng = Rng::new(7);
        let mut z = Large::new();
        let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
        for step in 0..30_000 {
            let k = rng.below(2000);
            let m = if k % 7 == 0 {
                format!("a-long-member-name-over-22-bytes-{k}").into_bytes()
            } else {
                format!("m{k}").into_bytes()
            };
            let score = (rng.below(50) as f64) - 25.0;
            match rng.below(4) {
                0 | 1 => {
                    if model.contains_key(&m) {
                        z.update(&m, score);
                    } else {
                        z.insert(&m, score);
                    }
                    model.insert(m, score);
                }
                2 => assert_eq!(z.remove(&m), model.remove(&m)),
                _ => {
                    if !model.is_empty() {
                        let r = rng.below(model.len());
                        let (gm, _) = z.get(r).map(|(m, s)| (m.to_vec(), s)).unwrap();
                        z.remove_rank(r);
                        assert!(model.remove(&gm).is_some());
                    }
                }
            }
            if step % 1000 == 0 {
                assert!(z.check(), "step {step}");
                for (m, s) in &model {
                    assert_eq!(z.score(m), Some(*s));
                }
            }
        }
        let mut sorted: Vec<_> = model.iter().map(|(m, s)| (*s, m.clone())).collect();
        sorted.sort_by(|a, b| super::super::order(a.0, &a.1, b.0, &b.1));
        for (r, (_, m)) in sorted.iter().enumerate() {
            assert_eq!(z.rank(m), Some(r));
        }
        assert_eq!(z.rank(b"absent"), None);
        for (_, m) in sorted {
            z.remove(&m);
        }
        assert!(z.is_empty() && z.check() && z.index.is_empty());
    }
}
