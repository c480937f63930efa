//! An order-statistic B+tree of `(score, id)` entries: the ordered half of
//! the large sorted set (the member bytes live in the arena of
//! [`super::large`], reached by `id`).
//!
//! The tree is addressed by **rank**: every inner node keeps, per child,
//! its entry count and its first entry. Searches by key are
//! `partition_point` with a caller's monotone predicate (the caller knows
//! how to compare members), which serves insert positions, ZRANK, score
//! and lex ranges alike; inserts and removals then go by rank. No
//! separator key can go stale, because a child's first entry is refreshed
//! from the child after every change below it.
//!
//! Leaves hold up to [`LEAF_MAX`] entries of 12 bytes, inner nodes up to
//! [`INNER_MAX`] children; a node that falls under a quarter full is merged
//! with a sibling or evened out with it, so the height stays logarithmic
//! (3 levels hold ~2.6e5 entries at the lowest fill, 4 levels ~1.7e7).

/// One ordered entry: the score and the arena id of the member.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ent {
    pub score: f64,
    pub id: u32,
}

pub const LEAF_MAX: usize = 64;
pub const INNER_MAX: usize = 64;
const LEAF_MIN: usize = LEAF_MAX / 4;
const INNER_MIN: usize = INNER_MAX / 4;

/// A leaf's entries as two parallel arrays: a search by score reads only
/// the scores (8 bytes an entry, contiguous), and an entry costs 12 bytes
/// instead of a padded 16.
#[derive(Clone, Debug, Default)]
struct Leaf {
    scores: Vec<f64>,
    ids: Vec<u32>,
}

impl Leaf {
    fn with_capacity(n: usize) -> Leaf {
        Leaf {
            scores: Vec::with_capacity(n),
            ids: Vec::with_capacity(n),
        }
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    fn at(&self, i: usize) -> Ent {
        Ent {
            score: self.scores[i],
            id: self.ids[i],
        }
    }

    fn insert(&mut self, i: usize, e: Ent) {
        self.scores.insert(i, e.score);
        self.ids.insert(i, e.id);
    }

    fn remove(&mut self, i: usize) -> Ent {
        Ent {
            score: self.scores.remove(i),
            id: self.ids.remove(i),
        }
    }

    /// Move entries `from..` into a new leaf.
    fn split_off(&mut self, from: usize) -> Leaf {
        let mut right = Leaf::with_capacity(LEAF_MAX + 1);
        right.scores.extend(self.scores.drain(from..));
        right.ids.extend(self.ids.drain(from..));
        right
    }

    fn append(&mut self, other: &mut Leaf) {
        self.scores.append(&mut other.scores);
        self.ids.append(&mut other.ids);
    }

    fn partition_point(&self, pred: &mut impl FnMut(Ent) -> bool) -> usize {
        // Binary search over indices (the predicate is monotone).
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.at(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn bytes(&self) -> usize {
        self.scores.capacity() * 8 + self.ids.capacity() * 4
    }
}

#[derive(Clone, Debug)]
enum Node {
    Leaf(Leaf),
    Inner(Vec<Kid>),
}

#[derive(Clone, Debug)]
struct Kid {
    count: usize,
    first: Ent,
    node: Node,
}

/// See the module comment.
#[derive(Clone, Debug)]
pub struct BTree {
    root: Node,
    len: usize,
    /// Nodes still to free once [`BTree::free_some`] has started.
    dying: Vec<Node>,
}

impl Default for BTree {
    fn default() -> Self {
        BTree::new()
    }
}

impl Node {
    fn count(&self) -> usize {
        match self {
            Node::Leaf(v) => v.len(),
            Node::Inner(k) => k.iter().map(|k| k.count).sum(),
        }
    }

    /// The first entry (the node is not empty).
    fn first(&self) -> Ent {
        match self {
            Node::Leaf(v) => v.at(0),
            Node::Inner(k) => k[0].first,
        }
    }

    fn underfull(&self) -> bool {
        match self {
            Node::Leaf(v) => v.len() < LEAF_MIN,
            Node::Inner(k) => k.len() < INNER_MIN,
        }
    }

    fn kid(node: Node) -> Kid {
        Kid {
            count: node.count(),
            first: node.first(),
            node,
        }
    }

    /// Insert at `rank`; returns the new right sibling if this node split.
    fn insert_at(&mut self, rank: usize, e: Ent) -> Option<Node> {
        match self {
            Node::Leaf(v) => {
                v.insert(rank, e);
                if v.len() > LEAF_MAX {
                    return Some(Node::Leaf(v.split_off(v.len() / 2)));
                }
                None
            }
            Node::Inner(kids) => {
                let (i, r) = locate(kids, rank, true);
                let kid = &mut kids[i];
                let split = kid.node.insert_at(r, e);
                kid.count += 1;
                kid.first = kid.node.first();
                if let Some(right) = split {
                    kid.count = kid.node.count();
                    kids.insert(i + 1, Node::kid(right));
                }
                if kids.len() > INNER_MAX {
                    let mut right = Vec::with_capacity(INNER_MAX + 1);
                    right.extend(kids.drain(kids.len() / 2..));
                    return Some(Node::Inner(right));
                }
                None
            }
        }
    }

    fn remove_at(&mut self, rank: usize) -> Ent {
        match self {
            Node::Leaf(v) => v.remove(rank),
            Node::Inner(kids) => {
                let (i, r) = locate(kids, rank, false);
                let e = kids[i].node.remove_at(r);
                kids[i].count -= 1;
                if kids[i].count == 0 {
                    // Only an underfull node's last entry can go this way;
                    // an empty child is dropped, never kept.
                    kids.remove(i);
                } else {
                    kids[i].first = kids[i].node.first();
                    if kids[i].node.underfull() && kids.len() > 1 {
                        rebalance(kids, i);
                    }
                }
                e
            }
        }
    }

    fn get(&self, mut rank: usize) -> Ent {
        let mut n = self;
        loop {
            match n {
                Node::Leaf(v) => return v.at(rank),
                Node::Inner(kids) => {
                    let (i, r) = locate(kids, rank, false);
                    rank = r;
                    n = &kids[i].node;
                }
            }
        }
    }

    fn partition_point(&self, pred: &mut impl FnMut(Ent) -> bool) -> usize {
        let mut n = self;
        let mut base = 0;
        loop {
            match n {
                Node::Leaf(v) => return base + v.partition_point(pred),
                Node::Inner(kids) => {
                    let i = kids.partition_point(|k| pred(k.first));
                    if i == 0 {
                        return base;
                    }
                    base += kids[..i - 1].iter().map(|k| k.count).sum::<usize>();
                    n = &kids[i - 1].node;
                }
            }
        }
    }

    /// Call `f` on ranks `start..end` of this node, backwards if `rev`.
    fn visit(&self, start: usize, end: usize, rev: bool, f: &mut impl FnMut(Ent)) {
        match self {
            Node::Leaf(v) => {
                if rev {
                    (start..end).rev().for_each(|i| f(v.at(i)));
                } else {
                    (start..end).for_each(|i| f(v.at(i)));
                }
            }
            Node::Inner(kids) => {
                let mut spans = Vec::new();
                let mut base = 0;
                for (i, k) in kids.iter().enumerate() {
                    let (lo, hi) = (base, base + k.count);
                    base = hi;
                    if hi <= start {
                        continue;
                    }
                    if lo >= end {
                        break;
                    }
                    spans.push((i, start.max(lo) - lo, end.min(hi) - lo));
                }
                if rev {
                    spans.reverse();
                }
                for (i, s, e) in spans {
                    kids[i].node.visit(s, e, rev, f);
                }
            }
        }
    }
}

/// The child holding `rank` and the rank inside it. With `append`, a rank
/// equal to a child's end stays in that child (an insert at its end).
fn locate(kids: &[Kid], mut rank: usize, append: bool) -> (usize, usize) {
    let last = kids.len() - 1;
    for (i, k) in kids.iter().enumerate() {
        if rank < k.count || (append && rank == k.count) || i == last {
            return (i, rank);
        }
        rank -= k.count;
    }
    (last, rank)
}

/// Child `i` fell under a quarter full: merge it with a neighbour, or share
/// the two nodes' contents evenly when they do not fit in one.
fn rebalance(kids: &mut Vec<Kid>, i: usize) {
    let (l, r) = if i + 1 < kids.len() {
        (i, i + 1)
    } else {
        (i - 1, i)
    };
    let right = kids.remove(r).node;
    let left = &mut kids[l].node;
    match (left, right) {
        (Node::Leaf(a), Node::Leaf(mut b)) => {
            let total = a.len() + b.len();
            a.append(&mut b);
            if total > LEAF_MAX {
                let rest = a.split_off(total / 2);
                kids.insert(r, Node::kid(Node::Leaf(rest)));
            }
        }
        (Node::Inner(a), Node::Inner(mut b)) => {
            if a.len() + b.len() <= INNER_MAX {
                a.append(&mut b);
            } else {
                let total = a.len() + b.len();
                a.append(&mut b);
                let mut rest = Vec::with_capacity(INNER_MAX + 1);
                rest.extend(a.drain(total / 2..));
                kids.insert(r, Node::kid(Node::Inner(rest)));
            }
        }
        // Siblings are always at the same depth.
        (_, other) => {
            kids.insert(r, Node::kid(other));
            return;
        }
    }
    let k = &mut kids[l];
    k.count = k.node.count();
    if k.count > 0 {
        k.first = k.node.first();
    }
}

impl BTree {
    pub fn new() -> BTree {
        BTree {
            root: Node::Leaf(Leaf::default()),
            len: 0,
            dying: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn insert_at(&mut self, rank: usize, e: Ent) {
        debug_assert!(rank <= self.len);
        if let Some(right) = self.root.insert_at(rank, e) {
            let left = std::mem::replace(&mut self.root, Node::Leaf(Leaf::default()));
            let mut kids = Vec::with_capacity(INNER_MAX + 1);
            kids.push(Node::kid(left));
            kids.push(Node::kid(right));
            self.root = Node::Inner(kids);
        }
        self.len += 1;
    }

    pub fn remove_at(&mut self, rank: usize) -> Ent {
        debug_assert!(rank < self.len);
        let e = self.root.remove_at(rank);
        self.len -= 1;
        // A root with one child gives way to it.
        while let Node::Inner(kids) = &mut self.root {
            if kids.len() > 1 {
                break;
            }
            let only = kids.pop().map_or(Node::Leaf(Leaf::default()), |k| k.node);
            self.root = only;
        }
        e
    }

    pub fn get(&self, rank: usize) -> Option<Ent> {
        (rank < self.len).then(|| self.root.get(rank))
    }

    /// Number of leading entries for which `pred` holds (`pred` must hold
    /// on a prefix of the order).
    pub fn partition_point(&self, mut pred: impl FnMut(Ent) -> bool) -> usize {
        if self.len == 0 {
            return 0;
        }
        self.root.partition_point(&mut pred)
    }

    /// `f` on ranks `start..end` in order (or backwards with `rev`).
    pub fn visit(&self, start: usize, end: usize, rev: bool, mut f: impl FnMut(Ent)) {
        let end = end.min(self.len);
        if start < end {
            self.root.visit(start, end, rev, &mut f);
        }
    }

    /// Tear the tree down a slice at a time (lazy free of a set already out
    /// of the keyspace): frees nodes until at least `budget` entries went,
    /// returns how many did (at least one while entries remain). The tree
    /// is not usable for anything else once this started.
    pub fn free_some(&mut self, budget: usize) -> usize {
        if self.dying.is_empty() && self.len > 0 {
            let root = std::mem::replace(&mut self.root, Node::Leaf(Leaf::default()));
            self.dying.push(root);
        }
        let mut freed = 0;
        while freed < budget {
            match self.dying.pop() {
                None => break,
                Some(Node::Leaf(l)) => freed += l.len(),
                Some(Node::Inner(kids)) => self.dying.extend(kids.into_iter().map(|k| k.node)),
            }
        }
        self.len = if self.dying.is_empty() {
            0
        } else {
            self.len.saturating_sub(freed)
        };
        freed
    }

    /// Bytes allocated by the nodes (the `used_memory` estimate).
    pub fn allocated(&self) -> usize {
        fn walk(n: &Node) -> usize {
            match n {
                Node::Leaf(v) => v.bytes(),
                Node::Inner(k) => {
                    k.capacity() * std::mem::size_of::<Kid>()
                        + k.iter().map(|k| walk(&k.node)).sum::<usize>()
                }
            }
        }
        walk(&self.root)
    }

    /// Structure checks for tests: counts, firsts, depth, fill.
    pub fn check(&self) -> bool {
        fn walk(n: &Node, root: bool) -> Option<(usize, usize)> {
            match n {
                Node::Leaf(v) => {
                    (root || v.len() >= LEAF_MIN && v.len() <= LEAF_MAX).then_some((v.len(), 0))
                }
                Node::Inner(kids) => {
                    if !(root && kids.len() >= 2 || kids.len() >= INNER_MIN)
                        || kids.len() > INNER_MAX
                    {
                        return None;
                    }
                    let mut total = 0;
                    let mut depth = None;
                    for k in kids {
                        let (c, d) = walk(&k.node, false)?;
                        if c != k.count || c == 0 || k.first != k.node.first() {
                            return None;
                        }
                        if *depth.get_or_insert(d) != d {
                            return None;
                        }
                        total += c;
                    }
                    Some((total, depth.unwrap_or(0) + 1))
                }
            }
        }
        walk(&self.root, true).is_some_and(|(c, _)| c == self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::Rng;

    fn ent(score: f64, id: u32) -> Ent {
        Ent { score, id }
    }

    /// The tree against a sorted Vec, under random inserts and removals.
    #[test]
    fn matches_a_sorted_vec() {
        let mut rng = Rng::new(42);
        let mut t = BTree::new();
        let mut model: Vec<(u64, u32)> = Vec::new();
        for step in 0..40_000u32 {
            let grow = model.len() < 3000 || rng.below(10) < 4;
            if grow && (step / 8000) % 2 == 0 || model.is_empty() {
                let key = rng.below(1000) as u64;
                let pos = model.partition_point(|&(k, id)| (k, id) < (key, step));
                let rank = t.partition_point(|e| (e.score as u64, e.id) < (key, step));
                assert_eq!(rank, pos);
                t.insert_at(rank, ent(key as f64, step));
                model.insert(pos, (key, step));
            } else {
                let r = rng.below(model.len());
                let e = t.remove_at(r);
                let (k, id) = model.remove(r);
                assert_eq!((e.score as u64, e.id), (k, id));
            }
            if step % 997 == 0 && !model.is_empty() {
                assert!(t.check(), "step {step}");
                assert_eq!(t.len(), model.len());
                let mut all = Vec::new();
                t.visit(0, t.len(), false, |e| all.push((e.score as u64, e.id)));
                assert_eq!(all, model);
                let r = rng.below(model.len());
                let e = t.get(r).unwrap();
                assert_eq!((e.score as u64, e.id), model[r]);
                let (a, b) = (rng.below(model.len()), rng.below(model.len()));
                let (a, b) = (a.min(b), a.max(b));
                let mut back = Vec::new();
                t.visit(a, b, true, |e| back.push((e.score as u64, e.id)));
                let want: Vec<_> = model[a..b].iter().rev().copied().collect();
                assert_eq!(back, want);
            }
        }
        while !model.is_empty() {
            let r = rng.below(model.len());
            assert_eq!(t.remove_at(r).id, model.remove(r).1);
        }
        assert!(t.is_empty() && t.check());
        assert!(t.get(0).is_none());
    }

    #[test]
    fn free_some_tears_down_in_bounded_slices() {
        let mut t = BTree::new();
        for i in 0..50_000u32 {
            t.insert_at(t.len(), ent(f64::from(i), i));
        }
        let mut total = 0;
        let mut steps = 0;
        while !t.is_empty() {
            let n = t.free_some(1000);
            // A slice ends within one leaf of its budget.
            assert!((1..1000 + LEAF_MAX).contains(&n), "{n}");
            total += n;
            steps += 1;
            assert!(steps < 1000);
        }
        assert_eq!(total, 50_000);
        assert_eq!(t.free_some(10), 0);
    }

    #[test]
    fn sequential_growth_and_shrink_keep_shape() {
        let mut t = BTree::new();
        for i in 0..100_000u32 {
            t.insert_at(t.len(), ent(f64::from(i), i));
        }
        assert!(t.check());
        assert_eq!(t.partition_point(|e| e.score < 5000.5), 5001);
        for _ in 0..99_990 {
            t.remove_at(0);
        }
        assert!(t.check());
        assert_eq!(t.get(0).map(|e| e.id), Some(99_990));
    }
}
