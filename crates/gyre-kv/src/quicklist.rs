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

use crate::listpack::{entry_size, Listpack};

#[derive(Clone, Debug, Default)]
pub struct Quicklist {
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
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn mem(&self) -> usize {
        self.cap_bytes + self.nodes.capacity() * std::mem::size_of::<Listpack>()
    }

    /// Run `f` on node `i`, keeping `len` and `cap_bytes` in step; drops
    /// the node if `f` emptied it.
    fn with_node<R>(&mut self, i: usize, f: impl FnOnce(&mut Listpack) -> R) -> R {
        let n = &mut self.nodes[i];
        let (cap, cnt) = (n.capacity(), n.len());
        let r = f(n);
        self.cap_bytes = self.cap_bytes - cap + n.capacity();
        self.len = self.len - cnt + n.len();
        if n.is_empty() {
            self.cap_bytes -= n.capacity();
            self.nodes.remove(i);
        }
        r
    }

    fn new_node(&mut self, at: usize, lp: Listpack) {
        self.cap_bytes += lp.capacity();
        self.len += lp.len();
        // A small list's node deque grows one slot at a time: most lists
        // are one node, and VecDeque's first growth is 4 slots (128 bytes).
        if self.nodes.len() < 4 {
            self.nodes.reserve_exact(1);
        }
        self.nodes.insert(at, lp);
    }

    pub fn push_back(&mut self, v: &[u8], fill: Fill) {
        match self.nodes.back() {
            Some(n) if fill.room(n, v.len()) => {
                let i = self.nodes.len() - 1;
                self.with_node(i, |n| n.push_back(v));
            }
            _ => {
                let mut lp = Listpack::new();
                lp.push_back(v);
                self.new_node(self.nodes.len(), lp);
            }
        }
    }

    pub fn push_front(&mut self, v: &[u8], fill: Fill) {
        match self.nodes.front() {
            Some(n) if fill.room(n, v.len()) => self.with_node(0, |n| n.push_front(v)),
            _ => {
                let mut lp = Listpack::new();
                lp.push_back(v);
                self.new_node(0, lp);
            }
        }
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        if self.nodes.is_empty() {
            return None;
        }
        self.with_node(0, |n| n.pop_front())
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let i = self.nodes.len().checked_sub(1)?;
        self.with_node(i, |n| n.pop_back())
    }

    /// Position of element `i` (0-based from the head).
    pub fn locate(&self, i: usize) -> Option<Pos> {
        if i >= self.len {
            return None;
        }
        if i < self.len / 2 {
            let mut left = i;
            for (ni, n) in self.nodes.iter().enumerate() {
                if left < n.len() {
                    return Some(Pos {
                        node: ni,
                        off: n.offset_of(left)?,
                    });
                }
                left -= n.len();
            }
        } else {
            let mut from_end = self.len - i; // >= 1
            for (ni, n) in self.nodes.iter().enumerate().rev() {
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
        self.nodes.get(p.node)?.at(p.off).map(|(v, _)| v)
    }

    /// The position after `p`.
    pub fn next(&self, p: Pos) -> Option<Pos> {
        let n = self.nodes.get(p.node)?;
        let (_, next) = n.at(p.off)?;
        if next < n.end() {
            return Some(Pos {
                node: p.node,
                off: next,
            });
        }
        self.nodes.get(p.node + 1).map(|_| Pos {
            node: p.node + 1,
            off: 0,
        })
    }

    /// The position before `p`.
    pub fn prev(&self, p: Pos) -> Option<Pos> {
        let n = self.nodes.get(p.node)?;
        if let Some(off) = n.prev(p.off) {
            return Some(Pos { node: p.node, off });
        }
        let ni = p.node.checked_sub(1)?;
        let off = self.nodes[ni].last()?;
        Some(Pos { node: ni, off })
    }

    pub fn head(&self) -> Option<Pos> {
        self.nodes.front().map(|_| Pos { node: 0, off: 0 })
    }

    pub fn tail(&self) -> Option<Pos> {
        let ni = self.nodes.len().checked_sub(1)?;
        Some(Pos {
            node: ni,
            off: self.nodes[ni].last()?,
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
        self.range(0, self.len)
    }

    /// Replace the element at `p`.
    pub fn replace(&mut self, p: Pos, v: &[u8]) {
        self.with_node(p.node, |n| n.replace_at(p.off, v));
    }

    /// Insert `v` before (`after` false) or after the element at `p`.
    pub fn insert(&mut self, p: Pos, after: bool, v: &[u8], fill: Fill) {
        let at = if after {
            self.nodes[p.node].at(p.off).map_or(p.off, |(_, next)| next)
        } else {
            p.off
        };
        self.with_node(p.node, |n| n.insert_at(at, v));
        self.split_if_over(p.node, fill);
    }

    /// Split node `i` in two halves when it grew past the fill limit.
    fn split_if_over(&mut self, i: usize, fill: Fill) {
        let n = &self.nodes[i];
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
        self.with_node(i, |n| {
            while n.end() > cut {
                n.pop_back();
            }
            n.shrink();
        });
        self.new_node(i + 1, tail);
    }

    /// Remove the element at `p`; returns the position of the element that
    /// followed it, if any.
    pub fn remove(&mut self, p: Pos) -> Option<Pos> {
        let node_len = self.nodes[p.node].len();
        let had_next_in_node = self.nodes[p.node]
            .at(p.off)
            .is_some_and(|(_, next)| next < self.nodes[p.node].end());
        self.with_node(p.node, |n| n.remove_at(p.off));
        if node_len == 1 {
            // The node went away: the next element heads the next node.
            return self.nodes.get(p.node).map(|_| Pos {
                node: p.node,
                off: 0,
            });
        }
        if had_next_in_node {
            return Some(p);
        }
        self.nodes.get(p.node + 1).map(|_| Pos {
            node: p.node + 1,
            off: 0,
        })
    }

    /// Free up to about `budget` elements, whole nodes from the tail (a
    /// list being freed piecemeal); returns how many went.
    pub fn free_some(&mut self, budget: usize) -> usize {
        let mut freed = 0;
        while freed < budget {
            let Some(n) = self.nodes.pop_back() else {
                break;
            };
            freed += n.len();
            self.len -= n.len();
            self.cap_bytes -= n.capacity();
        }
        if self.nodes.is_empty() {
            self.nodes = VecDeque::new();
        }
        freed
    }

    /// Drop `n` elements from the head (whole nodes at once when possible).
    pub fn drop_front(&mut self, mut n: usize) {
        while n > 0 && !self.nodes.is_empty() {
            let l = self.nodes[0].len();
            if l <= n {
                n -= l;
                self.len -= l;
                self.cap_bytes -= self.nodes[0].capacity();
                self.nodes.pop_front();
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
        while n > 0 && !self.nodes.is_empty() {
            let last = self.nodes.len() - 1;
            let l = self.nodes[last].len();
            if l <= n {
                n -= l;
                self.len -= l;
                self.cap_bytes -= self.nodes[last].capacity();
                self.nodes.pop_back();
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
            }
            let cap: usize = q.nodes.iter().map(|n| n.capacity()).sum();
            assert_eq!(cap, q.cap_bytes);
            assert!(q.nodes.iter().all(|n| !n.is_empty()));
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
