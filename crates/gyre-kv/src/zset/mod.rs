//! The sorted-set value: members ordered by `(score, member bytes)`, in one
//! of two encodings, as Redis's `t_zset.c` keeps them:
//!
//! * [`listpack::Listpack`] (OBJECT ENCODING `listpack`) while the set has
//!   at most `zset-max-listpack-entries` members (128) of at most
//!   `zset-max-listpack-value` bytes (64): one contiguous buffer, linear
//!   scans.
//! * [`large::Large`] (reported as `skiplist`, Redis's name) past either
//!   threshold: a B+tree with subtree counts for order and rank, a hash
//!   index for lookup, an arena holding each member once.
//!
//! Conversion follows Redis 7.0: a set is created large when the first
//! member already exceeds the value limit (or the entry limit is 0); it
//! converts when an insert would pass a threshold; it never converts back,
//! except that results of the STORE commands (ZUNIONSTORE & co.) are made
//! small when they fit ([`ZSet::shrink_if_fits`]).
//!
//! # Why a B+tree and not Redis's skiplist + dict
//!
//! Measured on this 2-core machine (shared, so speeds are indicative):
//! 1e6 members `m:<n>` with random integer scores below 2^30.
//!
//! * redis-server 7.0.15, ZADD through `redis-cli --pipe`: `used_memory`
//!   grew by **109 bytes per member** (encoding `skiplist`).
//! * [`large::Large`], `cargo test --release -p gyre-kv --lib
//!   zset::tests::measure -- --ignored --nocapture`: **68.8 bytes per
//!   member** (0.63x), in-process ZADD of a new member 600-900 ns, ZSCORE
//!   70-100 ns, ZRANK 680-830 ns (cache-cold: random members of a set far
//!   larger than the caches; ranges over runs with a load average of 4 on
//!   2 cores). With 16-byte `(score, id)` leaf entries it was 74.1 bytes;
//!   leaves now keep scores and ids in two arrays (12 bytes an entry).
//!
//! The skiplist pays an allocation per node (32 bytes + 16 per level,
//! 1.33 levels on average), a dict entry (24) and bucket (8), and an sds
//! per member; the B+tree packs 12-byte `(score, id)` entries 64 to a
//! leaf, keeps members up to 22 bytes inside their 32-byte arena slot and
//! indexes them with 8-byte hash slots. Rank is O(log n) in both (the
//! skiplist's spans, the tree's subtree counts). Hence the B+tree.

pub mod btree;
pub mod large;
pub mod listpack;
pub mod score;

use std::cmp::Ordering;

use large::Large;
use listpack::Listpack;
pub use score::{LexBound, ScoreBound};

/// The order of a sorted set: by score, then by member bytes. Scores are
/// never NaN; `-0` and `0` compare equal, as doubles do in C.
pub fn order(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> Ordering {
    if s1 < s2 {
        Ordering::Less
    } else if s1 > s2 {
        Ordering::Greater
    } else {
        m1.cmp(m2)
    }
}

/// redis.conf's encoding thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `zset-max-listpack-entries` (128).
    pub max_listpack_entries: usize,
    /// `zset-max-listpack-value` (64).
    pub max_listpack_value: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        }
    }
}

/// See the module comment.
#[derive(Clone, Debug)]
pub enum ZSet {
    Listpack(Listpack),
    Large(Box<Large>),
}

/// How an aggregate of ZUNION / ZINTER combines scores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis's `zunionInterAggregate`: a SUM that gives NaN (`inf + -inf`)
    /// is 0.
    pub fn apply(self, target: &mut f64, v: f64) {
        match self {
            Aggregate::Sum => {
                *target += v;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if v < *target {
                    *target = v;
                }
            }
            Aggregate::Max => {
                if v > *target {
                    *target = v;
                }
            }
        }
    }
}

/// `weight * score`, NaN (`0 * inf`) taken as 0, as Redis does.
pub fn weighted(score: f64, weight: f64) -> f64 {
    let v = score * weight;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

impl ZSet {
    /// An empty set for a first member of `first_len` bytes (Redis's
    /// choice in ZADD: large at once if that member is over the value
    /// limit or listpacks are off).
    pub fn for_first(limits: &Limits, first_len: usize) -> ZSet {
        if limits.max_listpack_entries == 0 || first_len > limits.max_listpack_value {
            ZSet::Large(Box::default())
        } else {
            ZSet::Listpack(Listpack::new())
        }
    }

    /// OBJECT ENCODING's name.
    pub fn encoding(&self) -> &'static str {
        match self {
            ZSet::Listpack(_) => "listpack",
            ZSet::Large(_) => "skiplist",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ZSet::Listpack(l) => l.len(),
            ZSet::Large(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            ZSet::Listpack(l) => l.is_empty(),
            ZSet::Large(t) => t.is_empty(),
        }
    }

    /// Estimated bytes held, O(1) (the `used_memory` estimate).
    pub fn mem(&self) -> usize {
        match self {
            ZSet::Listpack(l) => l.allocated(),
            ZSet::Large(t) => t.mem() + std::mem::size_of::<Large>(),
        }
    }

    pub fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            ZSet::Listpack(l) => l.find(m).map(|(_, a)| a.score),
            ZSet::Large(t) => t.score(m),
        }
    }

    /// Rank from the lowest (or from the highest with `rev`).
    pub fn rank(&self, m: &[u8], rev: bool) -> Option<usize> {
        let r = match self {
            ZSet::Listpack(l) => l.find(m).map(|(r, _)| r),
            ZSet::Large(t) => t.rank(m),
        }?;
        Some(if rev { self.len() - 1 - r } else { r })
    }

    /// The member and score at `rank` (0 = lowest).
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        match self {
            ZSet::Listpack(l) => l.get(rank).map(|a| (a.member, a.score)),
            ZSet::Large(t) => t.get(rank),
        }
    }

    /// Number of leading entries for which `pred(member, score)` holds.
    pub fn partition_point(&self, pred: impl FnMut(&[u8], f64) -> bool) -> usize {
        match self {
            ZSet::Listpack(l) => l.partition_point(pred),
            ZSet::Large(t) => t.partition_point(pred),
        }
    }

    /// Ranks `start..end` of the entries with scores in `min..max`.
    pub fn score_range(&self, min: &ScoreBound, max: &ScoreBound) -> (usize, usize) {
        let (start, end) = match self {
            ZSet::Listpack(l) => (
                l.partition_point(|_, s| !min.above_min(s)),
                l.partition_point(|_, s| max.below_max(s)),
            ),
            ZSet::Large(t) => (
                t.partition_point_score(|s| !min.above_min(s)),
                t.partition_point_score(|s| max.below_max(s)),
            ),
        };
        (start, end.max(start))
    }

    /// Ranks `start..end` of the members in `min..max` (meaningful when all
    /// scores are equal, as in Redis).
    pub fn lex_range(&self, min: &LexBound, max: &LexBound) -> (usize, usize) {
        let start = self.partition_point(|m, _| !min.above_min(m));
        let end = self.partition_point(|m, _| max.below_max(m));
        (start, end.max(start))
    }

    /// `f(member, score)` on ranks `start..end`, from `end - 1` down with
    /// `rev`.
    pub fn visit(&self, start: usize, end: usize, rev: bool, mut f: impl FnMut(&[u8], f64)) {
        let end = end.min(self.len());
        if start >= end {
            return;
        }
        match self {
            ZSet::Listpack(l) => {
                if rev {
                    let all = l.entries();
                    all[start..end]
                        .iter()
                        .rev()
                        .for_each(|a| f(a.member, a.score));
                } else {
                    l.iter()
                        .skip(start)
                        .take(end - start)
                        .for_each(|a| f(a.member, a.score));
                }
            }
            ZSet::Large(t) => t.visit(start, end, rev, f),
        }
    }

    /// Every entry, in order, copied.
    pub fn to_vec(&self) -> Vec<(Vec<u8>, f64)> {
        let mut v = Vec::with_capacity(self.len());
        self.visit(0, self.len(), false, |m, s| v.push((m.to_vec(), s)));
        v
    }

    /// Set `m`'s score, adding it if absent; converts to the large form
    /// first if the insert would pass a threshold (Redis's `zsetAdd`).
    /// Returns whether `m` is new.
    pub fn set(&mut self, m: &[u8], score: f64, limits: &Limits) -> bool {
        if let ZSet::Listpack(l) = self {
            if let Some((_, a)) = l.find(m) {
                if a.score != score {
                    let (off, size) = (a.offset, a.size);
                    l.remove_at(off, size);
                    l.insert(m, score);
                }
                return false;
            }
            if l.len() + 1 > limits.max_listpack_entries || m.len() > limits.max_listpack_value {
                self.convert_to_large();
            } else {
                l.insert(m, score);
                return true;
            }
        }
        match self {
            ZSet::Large(t) => {
                if let Some(old) = t.score(m) {
                    if old != score {
                        t.update(m, score);
                    }
                    false
                } else {
                    t.insert(m, score);
                    true
                }
            }
            ZSet::Listpack(_) => false,
        }
    }

    /// Remove `m`, returning its score.
    pub fn remove(&mut self, m: &[u8]) -> Option<f64> {
        match self {
            ZSet::Listpack(l) => {
                let (_, a) = l.find(m)?;
                let (score, off, size) = (a.score, a.offset, a.size);
                l.remove_at(off, size);
                Some(score)
            }
            ZSet::Large(t) => t.remove(m),
        }
    }

    /// Remove ranks `start..end`; returns how many went.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> usize {
        let end = end.min(self.len());
        if start >= end {
            return 0;
        }
        match self {
            ZSet::Listpack(l) => l.remove_ranks(start, end),
            ZSet::Large(t) => {
                if start == 0 && end == t.len() {
                    **t = Large::new();
                } else {
                    for _ in start..end {
                        t.remove_rank(start);
                    }
                }
            }
        }
        end - start
    }

    /// Pop up to `count` entries from the low end (or the high end with
    /// `max`), in pop order.
    pub fn pop(&mut self, count: usize, max: bool) -> Vec<(Vec<u8>, f64)> {
        let n = count.min(self.len());
        let mut out = Vec::with_capacity(n);
        let len = self.len();
        if max {
            self.visit(len - n, len, true, |m, s| out.push((m.to_vec(), s)));
            self.remove_ranks(len - n, len);
        } else {
            self.visit(0, n, false, |m, s| out.push((m.to_vec(), s)));
            self.remove_ranks(0, n);
        }
        out
    }

    /// Move every entry into the large form.
    pub fn convert_to_large(&mut self) {
        if let ZSet::Listpack(l) = self {
            let mut t = Box::<Large>::default();
            for a in l.iter() {
                t.insert(a.member, a.score);
            }
            *self = ZSet::Large(t);
        }
    }

    /// Redis's `zsetConvertToListpackIfNeeded`: back to the small form
    /// when the set fits both thresholds.
    pub fn shrink_if_fits(&mut self, limits: &Limits) {
        if let ZSet::Large(t) = self {
            if t.len() > limits.max_listpack_entries {
                return;
            }
            let mut maxlen = 0;
            t.visit(0, t.len(), false, |m, _| maxlen = maxlen.max(m.len()));
            if maxlen > limits.max_listpack_value {
                return;
            }
            let mut l = Listpack::new();
            t.visit(0, t.len(), false, |m, s| l.insert(m, s));
            *self = ZSet::Listpack(l);
        }
    }

    /// A set built from `(member, score)` pairs with distinct members, in
    /// the form Redis's STORE commands leave (small when it fits).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (Vec<u8>, f64)>, limits: &Limits) -> ZSet {
        let mut t = Box::<Large>::default();
        for (m, s) in pairs {
            if t.score(&m).is_some() {
                t.update(&m, s);
            } else {
                t.insert(&m, s);
            }
        }
        let mut z = ZSet::Large(t);
        z.shrink_if_fits(limits);
        z
    }

    /// Lazy free of a set already out of the keyspace (see
    /// [`crate::object::Object::free_some`]): about `budget` members go;
    /// returns how many (a listpack goes whole: one allocation).
    pub fn free_some(&mut self, budget: usize) -> usize {
        match self {
            ZSet::Listpack(l) => {
                let n = l.len();
                *l = Listpack::new();
                n
            }
            ZSet::Large(t) => t.free_some(budget),
        }
    }

    /// Consistency checks for tests.
    pub fn check(&self) -> bool {
        match self {
            ZSet::Listpack(l) => {
                let v: Vec<_> = l.iter().collect();
                v.windows(2)
                    .all(|w| order(w[0].score, w[0].member, w[1].score, w[1].member).is_lt())
            }
            ZSet::Large(t) => t.check(),
        }
    }
}

/// Resolve Redis's rank arguments (`start stop`, negatives from the end)
/// to `start..end` over a set of `len`, as `zrangeGenericCommand` does.
pub fn rank_span(start: i64, stop: i64, len: usize) -> (usize, usize) {
    let llen = len as i64;
    let mut s = if start < 0 { llen + start } else { start };
    let mut e = if stop < 0 { llen + stop } else { stop };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= llen {
        return (0, 0);
    }
    if e >= llen {
        e = llen - 1;
    }
    (s as usize, e as usize + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::Rng;
    use std::collections::HashMap;

    fn lim(entries: usize, value: usize) -> Limits {
        Limits {
            max_listpack_entries: entries,
            max_listpack_value: value,
        }
    }

    /// Both forms against a model (a sorted Vec), through conversion.
    #[test]
    fn both_forms_match_a_model() {
        let mut rng = Rng::new(99);
        for &(entries, value) in &[(128, 64), (8, 4), (0, 64), (1_000_000, 1_000)] {
            let l = lim(entries, value);
            let mut z = ZSet::for_first(&l, 1);
            let mut model: HashMap<Vec<u8>, f64> = HashMap::new();
            for step in 0..4000 {
                let m = format!("{}", rng.below(300)).into_bytes();
                let s =
                    [f64::NEG_INFINITY, -1.5, 0.0, 1.0, 2.0, 1e300, f64::INFINITY][rng.below(7)];
                match rng.below(5) {
                    0..=2 => {
                        let new = z.set(&m, s, &l);
                        assert_eq!(new, model.insert(m, s).is_none());
                    }
                    3 => assert_eq!(z.remove(&m), model.remove(&m)),
                    _ => {
                        let n = rng.below(3);
                        let max = rng.below(2) == 0;
                        for (pm, ps) in z.pop(n, max) {
                            assert_eq!(model.remove(&pm), Some(ps));
                        }
                    }
                }
                if step % 250 == 0 {
                    assert!(z.check());
                    let mut want: Vec<_> = model.iter().map(|(m, s)| (m.clone(), *s)).collect();
                    want.sort_by(|a, b| order(a.1, &a.0, b.1, &b.0));
                    assert_eq!(z.to_vec(), want);
                    for (r, (m, _)) in want.iter().enumerate() {
                        assert_eq!(z.rank(m, false), Some(r));
                        assert_eq!(z.rank(m, true), Some(want.len() - 1 - r));
                    }
                    let min = ScoreBound {
                        value: 0.0,
                        exclusive: true,
                    };
                    let max = ScoreBound {
                        value: 2.0,
                        exclusive: false,
                    };
                    let (a, b) = z.score_range(&min, &max);
                    let n = want.iter().filter(|(_, s)| *s > 0.0 && *s <= 2.0).count();
                    assert_eq!(b - a, n);
                    let mut back = Vec::new();
                    z.visit(a, b, true, |m, _| back.push(m.to_vec()));
                    let fwd: Vec<_> = want
                        .iter()
                        .filter(|(_, s)| *s > 0.0 && *s <= 2.0)
                        .map(|(m, _)| m.clone())
                        .rev()
                        .collect();
                    assert_eq!(back, fwd);
                }
            }
            if entries == 0 {
                assert_eq!(z.encoding(), "skiplist");
            }
            if entries == 1_000_000 {
                assert_eq!(z.encoding(), "listpack");
            }
        }
    }

    #[test]
    fn conversion_thresholds() {
        let l = lim(3, 4);
        let mut z = ZSet::for_first(&l, 1);
        for (i, m) in ["a", "b", "c"].iter().enumerate() {
            z.set(m.as_bytes(), i as f64, &l);
        }
        assert_eq!(z.encoding(), "listpack");
        z.set(b"d", 9.0, &l);
        assert_eq!(z.encoding(), "skiplist");
        let mut z = ZSet::for_first(&l, 1);
        z.set(b"abcde", 1.0, &l);
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(ZSet::for_first(&l, 5).encoding(), "skiplist");
        // Updating a present member never converts.
        let mut z = ZSet::for_first(&l, 1);
        for m in ["a", "b", "c"] {
            z.set(m.as_bytes(), 1.0, &l);
        }
        z.set(b"a", 5.0, &l);
        assert_eq!(z.encoding(), "listpack");
        assert_eq!(z.rank(b"a", false), Some(2));
        // Removing never converts back; STORE results do.
        let mut z = ZSet::for_first(&l, 1);
        for m in ["a", "b", "c", "d"] {
            z.set(m.as_bytes(), 1.0, &l);
        }
        z.remove(b"a");
        assert_eq!(z.encoding(), "skiplist");
        z.shrink_if_fits(&l);
        assert_eq!(z.encoding(), "listpack");
        assert_eq!(z.len(), 3);
        let z = ZSet::from_pairs(vec![(b"abcdef".to_vec(), 1.0)], &l);
        assert_eq!(z.encoding(), "skiplist");
    }

    #[test]
    fn negative_zero_is_kept_only_in_the_large_form() {
        let l = Limits::default();
        let mut z = ZSet::for_first(&l, 1);
        z.set(b"a", -0.0, &l);
        assert!(z.score(b"a").is_some_and(|s| !s.is_sign_negative()));
        z.convert_to_large();
        z.set(b"b", -0.0, &l);
        assert!(z.score(b"b").is_some_and(|s| s.is_sign_negative()));
        // -0 and 0 are equal scores: ties by member.
        assert_eq!(z.rank(b"b", false), Some(1));
    }

    #[test]
    fn rank_spans_as_zrange() {
        assert_eq!(rank_span(0, -1, 5), (0, 5));
        assert_eq!(rank_span(-2, -1, 5), (3, 5));
        assert_eq!(rank_span(-100, 2, 5), (0, 3));
        assert_eq!(rank_span(3, 1, 5), (0, 0));
        assert_eq!(rank_span(5, 10, 5), (0, 0));
        assert_eq!(rank_span(1, 100, 5), (1, 5));
        assert_eq!(rank_span(0, -1, 0), (0, 0));
        assert_eq!(rank_span(i64::MIN, i64::MAX, 3), (0, 3));
        assert_eq!(rank_span(0, i64::MIN, 3), (0, 0));
    }

    #[test]
    fn aggregates_as_redis() {
        let mut t = f64::INFINITY;
        Aggregate::Sum.apply(&mut t, f64::NEG_INFINITY);
        assert_eq!(t, 0.0);
        let mut t = 1.0;
        Aggregate::Min.apply(&mut t, -1.0);
        assert_eq!(t, -1.0);
        Aggregate::Max.apply(&mut t, 3.0);
        assert_eq!(t, 3.0);
        assert_eq!(weighted(f64::INFINITY, 0.0), 0.0);
        assert_eq!(weighted(2.0, -1.5), -3.0);
    }

    /// The memory/speed comparison behind the large form (see the module
    /// comment). Prints figures; run with `--ignored --nocapture` in
    /// release mode.
    #[test]
    #[ignore]
    fn measure() {
        use std::time::Instant;
        let n = 1_000_000usize;
        let mut rng = Rng::new(1);
        let members: Vec<Vec<u8>> = (0..n).map(|i| format!("m:{i}").into_bytes()).collect();
        let scores: Vec<f64> = (0..n).map(|_| rng.below(1 << 30) as f64).collect();
        let mut t = Large::new();
        let t0 = Instant::now();
        for (m, s) in members.iter().zip(&scores) {
            t.insert(m, *s);
        }
        let add = t0.elapsed().as_nanos() as f64 / n as f64;
        let t0 = Instant::now();
        let mut sum = 0.0;
        for m in &members {
            sum += t.score(m).unwrap_or(0.0);
        }
        let score = t0.elapsed().as_nanos() as f64 / n as f64;
        let t0 = Instant::now();
        let mut rs = 0;
        for m in members.iter().step_by(10) {
            rs += t.rank(m).unwrap_or(0);
        }
        let rank = t0.elapsed().as_nanos() as f64 / (n / 10) as f64;
        let bytes = t.allocated() as f64 / n as f64;
        let t0 = Instant::now();
        drop(t);
        let free = t0.elapsed().as_secs_f64() * 1000.0;
        println!(
            "btree: {bytes:.1} bytes/member, ZADD {add:.0} ns, ZSCORE {score:.0} ns, ZRANK {rank:.0} ns, drop {free:.1} ms ({sum} {rs})"
        );
    }
}
