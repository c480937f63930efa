//! A quicklist: a list stored as a deque of listpack nodes (Redis's
//! `quicklist.c` idea). Pushes and pops at either end touch one small
//! node; an index walks node lengths first, then one node. A node holds
//! up to `list-max-listpack-size` (-1..-5: 4..64 KiB of entries; > 0: that
//! many entries); an entry larger than the size limit gets a node alone.
//! Per element this costs the data plus two bytes — against 16 bytes of
//! pointer plus an allocation for a `VecDeque<Box<[u8]>>`.
//!
//! No node compression (Redis's `list-compress-depth`, off by default).

use std::collections::VecDeque;

use crate::listpack::entry_size;

/// A node: the counted, two-way listpack form.
type Listpack = crate::listpack::Listpack<true>;

/// A list of one node is that listpack alone (16 bytes: it lives in the
/// keyspace node's value slot with no box, see [`crate::object`]); a
/// second node moves them into a boxed deque, and the deque goes back to a
/// lone listpack when one node is left.
#[derive(Clone, Debug, Default)]
pub struct Quicklist {
    repr: Repr,
}

#[derive(Clone, Debug)]
enum Repr {
    /// Zero or one node (empty: no node).
    One(Listpack),
    Many(Box<Many>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::One(Listpack::new())
    }
}

#[derive(Clone, Debug, Default)]
struct Many {
    nodes: VecDeque<Listpack>,
    len: usize,
    /// Sum of the nodes' allocations (kept in step so `mem` is O(1)).
    cap_bytes: usize,
}

/// Where an element is: node and byte offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub node: usize,
    pub off: usize,
}

/// The node fill limit from `list-max-listpack-size`.
#[derive(Clone, Copy, Debug)]
pub enum Fill {
    Bytes(usize),
    Count(usize),
}

impl Fill {
    pub fn from_conf(v: i64) -> Fill {
        match v {
            n if n > 0 => Fill::Count(n as usize),
            -1 => Fill::Bytes(4096),
            -3 => Fill::Bytes(16384),
            -4 => Fill::Bytes(32768),
            n if n <= -5 => Fill::Bytes(65536),
            _ => Fill::Bytes(8192),
        }
    }

    fn room(self, lp: &Listpack, add: usize) -> bool {
        match self {
            Fill::Count(n) => lp.len() < n && lp.bytes() + entry_size(add) <= 8192.max(lp.bytes()),
            Fill::Bytes(b) => lp.bytes() + entry_size(add) <= b,
        }
    }
}

impl Quicklist {
    pub fn new() -> Quicklist {
        Quicklist::default()
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::One(lp) => lp.len(),
            Repr::Many(m) => m.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn mem(&self) -> usize {
        match &self.repr {
            Repr::One(lp) => lp.capacity(),
            Repr::Many(m) => {
                std::mem::size_of::<Many>()
                    + m.cap_bytes
                    + m.nodes.capacity() * std::mem::size_of::<Listpack>()
            }
        }
    }

    /// Number of nodes.
    fn nodes_len(&self) -> usize {
        match &self.repr {
            Repr::One(lp) => usize::from(!lp.is_empty()),
            Repr::Many(m) => m.nodes.len(),
        }
    }

    /// Node `i`.
    fn node(&self, i: usize) -> Option<&Listpack> {
        match &self.repr {
            Repr::One(lp) => (i == 0 && !lp.is_empty()).then_some(lp),
            Repr::Many(m) => m.nodes.get(i),
        }
    }

    /// A deque left with one node goes back to the lone listpack.
    fn demote(&mut self) {
        if let Repr::Many(m) = &mut self.repr {
            if m.nodes.len() <= 1 {
                let lp = m.nodes.pop_front().unwrap_or_default();
                self.repr = Repr::One(lp);
            }
        }
    }

    /// Run `f` on node `i`, keeping `len` and `cap_bytes` in step; drops
    /// the node if `f` emptied it.
    fn with_node<R>(&mut self, i: usize, f: impl FnOnce(&mut Listpack) -> R) -> R {
        let m = match &mut self.repr {
            Repr::One(lp) => return f(lp),
            Repr::Many(m) => m,
        };
        let n = &mut m.nodes[i];
        let (cap, cnt) = (n.capacity(), n.len());
        let r = f(n);
        m.cap_bytes = m.cap_bytes - cap + n.capacity();
        m.len = m.len - cnt + n.len();
        if n.is_empty() {
            m.cap_bytes -= n.capacity();
            m.nodes.remove(i);
            self.demote();
        }
        r
    }

    /// Remove node `i` whole.
    fn remove_node(&mut self, i: usize) {
        match &mut self.repr {
            Repr::One(lp) => *lp = Listpack::new(),
            Repr::Many(m) => {
                if let Some(n) = m.nodes.remove(i) {
                    m.len -= n.len();
                    m.cap_bytes -= n.capacity();
                }
                self.demote();
            }
        }
    }

    fn new_node(&mut self, at: usize, lp: Listpack) {
        if let Repr::One(cur) = &mut self.repr {
            if cur.is_empty() {
                *cur = lp;
                return;
            }
            let cur = std::mem::take(cur);
            let mut m = Box::new(Many {
                len: cur.len(),
                cap_bytes: cur.capacity(),
                nodes: VecDeque::with_capacity(2),
            });
            m.nodes.push_back(cur);
            self.repr = Repr::Many(m);
        }
        if let Repr::Many(m) = &mut self.repr {
            m.cap_bytes += lp.capacity();
            m.len += lp.len();
            m.nodes.insert(at.min(m.nodes.len()), lp);
        }
    }

    pub fn push_back(&mut self, v: &[u8], fill: Fill) {
        let last = self.nodes_len().checked_sub(1);
        match last.and_then(|i| self.node(i)) {
            Some(n) if fill.room(n, v.len()) => {
                let i = self.nodes_len() - 1;
                self.with_node(i, |n| n.push_back(v));
            }
            _ => {
                let mut lp = Listpack::new();
                lp.push_back(v);
                self.new_node(self.nodes_len(), lp);
            }
        }
    }

    pub fn push_front(&mut self, v: &[u8], fill: Fill) {
        match self.node(0) {
            Some(n) if fill.room(n, v.len()) => self.with_node(0, |n| n.push_front(v)),
            _ => {
                let mut lp = Listpack::new();
                lp.push_back(v);
                self.new_node(0, lp);
            }
        }
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        if self.nodes_len() == 0 {
            return None;
        }
        self.with_node(0, |n| n.pop_front())
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let i = self.nodes_len().checked_sub(1)?;
        self.with_node(i, |n| n.pop_back())
    }

    /// Position of element `i` (0-based from the head).
    pub fn locate(&self, i: usize) -> Option<Pos> {
        let len = self.len();
        if i >= len {
            return None;
        }
        let nodes = (0..self.nodes_len()).filter_map(|ni| Some((ni, self.node(ni)?)));
        if i < len / 2 {
            let mut left = i;
            for (ni, n) in nodes {
                if left < n.len() {
                    return Some(Pos {
                        node: ni,
                        off: n.offset_of(left)?,
                    });
                }
                left -= n.len();
            }
        } else {
            let mut from_end = len - i; // >= 1
            for (ni, n) in nodes.rev() {
                if from_end <= n.len() {
                    return Some(Pos {
                        node: ni,
                        off: n.offset_of(n.len() - from_end)?,
                    });
                }
                from_end -= n.len();
            }
        }
        None
    }

    pub fn at(&self, p: Pos) -> Option<&[u8]> {
        self.node(p.node)?.at(p.off).map(|(v, _)| v)
    }

    /// The position after `p`.
    pub fn next(&self, p: Pos) -> Option<Pos> {
        let n = self.node(p.node)?;
        let (_, next) = n.at(p.off)?;
        if next < n.end() {
            return Some(Pos {
                node: p.node,
                off: next,
            });
        }
        self.node(p.node + 1).map(|_| Pos {
            node: p.node + 1,
            off: 0,
        })
    }

    /// The position before `p`.
    pub fn prev(&self, p: Pos) -> Option<Pos> {
        let n = self.node(p.node)?;
        if let Some(off) = n.prev(p.off) {
            return Some(Pos { node: p.node, off });
        }
        let ni = p.node.checked_sub(1)?;
        let off = self.node(ni)?.last()?;
        Some(Pos { node: ni, off })
    }

    pub fn head(&self) -> Option<Pos> {
        self.node(0).map(|_| Pos { node: 0, off: 0 })
    }

    pub fn tail(&self) -> Option<Pos> {
        let ni = self.nodes_len().checked_sub(1)?;
        Some(Pos {
            node: ni,
            off: self.node(ni)?.last()?,
        })
    }

    /// Elements from index `start`, at most `count` of them.
    pub fn range(&self, start: usize, count: usize) -> Range<'_> {
        Range {
            ql: self,
            pos: self.locate(start),
            left: count,
        }
    }

    pub fn iter(&self) -> Range<'_> {
        self.range(0, self.len())
    }

    /// Replace the element at `p`.
    pub fn replace(&mut self, p: Pos, v: &[u8]) {
        self.with_node(p.node, |n| n.replace_at(p.off, v));
    }

    /// Insert `v` before (`after` false) or after the element at `p`.
    pub fn insert(&mut self, p: Pos, after: bool, v: &[u8], fill: Fill) {
        let at = if after {
            self.node(p.node)
                .and_then(|n| n.at(p.off))
                .map_or(p.off, |(_, next)| next)
        } else {
            p.off
        };
        self.with_node(p.node, |n| n.insert_at(at, v));
        self.split_if_over(p.node, fill);
    }

    /// Split node `i` in two halves when it grew past the fill limit.
    fn split_if_over(&mut self, i: usize, fill: Fill) {
        let Some(n) = self.node(i) else {
            return;
        };
        let over = match fill {
            Fill::Count(c) => n.len() > c,
            Fill::Bytes(b) => n.bytes() > b && n.len() > 1,
        };
        if !over {
            return;
        }
        let half = n.len() / 2;
        let mut tail = Listpack::new();
        for v in n.iter().skip(half) {
            tail.push_back(v);
        }
        let cut = n.offset_of(half).unwrap_or(n.end());
        self.with_node(i, |n| n.truncate_at(cut));
        self.new_node(i + 1, tail);
    }

    /// Remove the element at `p`; returns the position of the element that
    /// followed it, if any.
    pub fn remove(&mut self, p: Pos) -> Option<Pos> {
        let n = self.node(p.node)?;
        let node_len = n.len();
        let had_next_in_node = n.at(p.off).is_some_and(|(_, next)| next < n.end());
        self.with_node(p.node, |n| n.remove_at(p.off));
        if node_len == 1 {
            // The node went away: the next element heads the next node.
            return self.node(p.node).map(|_| Pos {
                node: p.node,
                off: 0,
            });
        }
        if had_next_in_node {
            return Some(p);
        }
        self.node(p.node + 1).map(|_| Pos {
            node: p.node + 1,
            off: 0,
        })
    }

    /// The representation's invariants: a deque holds two or more
    /// non-empty nodes and its counters match them.
    pub fn check(&self) -> bool {
        match &self.repr {
            Repr::One(_) => true,
            Repr::Many(m) => {
                m.nodes.len() >= 2
                    && m.nodes.iter().all(|n| !n.is_empty())
                    && m.len == m.nodes.iter().map(Listpack::len).sum::<usize>()
                    && m.cap_bytes == m.nodes.iter().map(Listpack::capacity).sum::<usize>()
            }
        }
    }

    /// Free up to about `budget` elements, whole nodes from the tail (a
    /// list being freed piecemeal); returns how many went.
    pub fn free_some(&mut self, budget: usize) -> usize {
        let mut freed = 0;
        while freed < budget {
            let Some(last) = self.nodes_len().checked_sub(1) else {
                break;
            };
            freed += self.node(last).map_or(0, Listpack::len);
            self.remove_node(last);
        }
        freed
    }

    /// Drop `n` elements from the head (whole nodes at once when possible).
    pub fn drop_front(&mut self, mut n: usize) {
        while n > 0 {
            let Some(l) = self.node(0).map(Listpack::len) else {
                break;
            };
            if l <= n {
                n -= l;
                self.remove_node(0);
            } else {
                self.with_node(0, |lp| {
                    for _ in 0..n {
                        lp.pop_front();
                    }
                });
                n = 0;
            }
        }
    }

    /// Drop `n` elements from the tail.
    pub fn drop_back(&mut self, mut n: usize) {
        while n > 0 {
            let Some(last) = self.nodes_len().checked_sub(1) else {
                break;
            };
            let l = self.node(last).map_or(0, Listpack::len);
            if l <= n {
                n -= l;
                self.remove_node(last);
            } else {
                self.with_node(last, |lp| {
                    for _ in 0..n {
                        lp.pop_back();
                    }
                });
                n = 0;
            }
        }
    }
}

pub struct Range<'a> {
    ql: &'a Quicklist,
    pos: Option<Pos>,
    left: usize,
}

impl<'a> Iterator for Range<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let p = self.pos?;
        let v = self.ql.at(p)?;
        self.pos = self.ql.next(p);
        self.left -= 1;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::util::Rng;

    #[test]
    fn matches_a_vecdeque() {
        for fill in [Fill::Count(3), Fill::Bytes(64), Fill::Bytes(8192)] {
            let mut q = Quicklist::new();
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            let mut rng = Rng::new(3);
            for step in 0..20_000 {
                let v = format!("v{}", rng.below(50)).into_bytes();
                match rng.below(9) {
                    0 | 1 => {
                        q.push_back(&v, fill);
                        m.push_back(v);
                    }
                    2 | 3 => {
                        q.push_front(&v, fill);
                        m.push_front(v);
                    }
                    4 => assert_eq!(q.pop_front(), m.pop_front()),
                    5 => assert_eq!(q.pop_back(), m.pop_back()),
                    6 if !m.is_empty() => {
                        let i = rng.below(m.len());
                        let p = q.locate(i).unwrap();
                        assert_eq!(q.at(p).unwrap(), &m[i][..]);
                        if rng.below(2) == 0 {
                            q.insert(p, true, &v, fill);
                            m.insert(i + 1, v);
                        } else {
                            let next = q.remove(p);
                            m.remove(i);
                            assert_eq!(next.and_then(|p| q.at(p)), m.get(i).map(|x| &x[..]));
                        }
                    }
                    7 if m.len() > 4 => {
                        q.drop_front(2);
                        q.drop_back(1);
                        m.drain(..2);
                        m.pop_back();
                    }
                    _ => {
                        let s = rng.below(m.len() + 1);
                        let got: Vec<&[u8]> = q.range(s, 5).collect();
                        let want: Vec<&[u8]> = m.iter().skip(s).take(5).map(|x| &x[..]).collect();
                        assert_eq!(got, want);
                    }
                }
                assert_eq!(q.len(), m.len(), "step {step}");
                assert!(q.check(), "step {step}");
            }
            assert!(q.check());
            let mut back = Vec::new();
            let mut p = q.tail();
            while let Some(x) = p {
                back.push(q.at(x).unwrap().to_vec());
                p = q.prev(x);
            }
            back.reverse();
            assert_eq!(back, Vec::from(m));
        }
    }
}
