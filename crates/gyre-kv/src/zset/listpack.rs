//! The small sorted-set form: every `(member, score)` pair, ordered by
//! score then member bytes, in one contiguous byte buffer — Redis's
//! `listpack` encoding in spirit (one allocation, linear scans, a few
//! bytes of framing per entry), not its byte format.
//!
//! Entry layout: `varint member length | member bytes | score`, where the
//! score is a tag byte then its payload: tags `16..=255` are the integers
//! -100..=139 themselves (no payload: a typical entry costs its member
//! plus 2 bytes), tags `0..=8` an integral score stored as a zigzag
//! integer in that many little-endian bytes, tag `9` an IEEE double in 8
//! bytes. Integral means exactly representable (|v| < 2^53), so the
//! integer form is lossless; `-0` is stored as `0`, as Redis's listpack
//! does (ZSCORE answers `0` for a small set, `-0` for a skiplist one).
//!
//! There is no back-length, so walking backwards means collecting the
//! entry offsets first; the form is bounded by
//! `zset-max-listpack-entries` (128 by default), so that is cheap.

const TAG_DOUBLE: u8 = 9;
/// Tags from here on are a small integer score in the tag itself:
/// `tag - TAG_SMALL + SMALL_MIN`, -100..=139.
const TAG_SMALL: u8 = 16;
const SMALL_MIN: i64 = -100;
const INT_LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53

use crate::counted::CountedBytes;

/// See the module comment.
/// Stored as [`CountedBytes`] (16 bytes, exact size).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Listpack {
    buf: CountedBytes,
}

/// One decoded entry and where it sits in the buffer.
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    pub member: &'a [u8],
    pub score: f64,
    pub offset: usize,
    pub size: usize,
}

impl Listpack {
    pub fn new() -> Listpack {
        Listpack::default()
    }

    pub fn len(&self) -> usize {
        self.buf.count() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes allocated (the `used_memory` estimate).
    pub fn allocated(&self) -> usize {
        self.buf.allocated()
    }

    /// Entries in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            buf: self.buf.data(),
            pos: 0,
        }
    }

    /// The entry at `rank` (0 = lowest).
    pub fn get(&self, rank: usize) -> Option<At<'_>> {
        self.iter().nth(rank)
    }

    /// The entry of `member`, with its rank.
    pub fn find(&self, member: &[u8]) -> Option<(usize, At<'_>)> {
        self.iter().enumerate().find(|(_, a)| a.member == member)
    }

    /// How many leading entries satisfy `pred` (which must hold for a
    /// prefix of the order).
    pub fn partition_point(&self, mut pred: impl FnMut(&[u8], f64) -> bool) -> usize {
        self.iter()
            .position(|a| !pred(a.member, a.score))
            .unwrap_or(self.len())
    }

    /// Insert a member that is not present, in order.
    pub fn insert(&mut self, member: &[u8], score: f64) {
        let pos = self
            .iter()
            .find(|a| super::order(a.score, a.member, score, member).is_gt())
            .map_or(self.buf.data().len(), |a| a.offset);
        let mut enc = Vec::with_capacity(member.len() + 14);
        encode(&mut enc, member, score);
        self.buf.edit(enc.len(), |buf, n| {
            buf.splice(pos..pos, enc);
            *n += 1;
        });
    }

    /// Remove the entry found at `at`.
    pub fn remove_at(&mut self, offset: usize, size: usize) {
        self.buf.edit(0, |buf, n| {
            buf.drain(offset..offset + size);
            *n -= 1;
        });
    }

    /// Remove the entries with ranks `start..end`.
    pub fn remove_ranks(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        let mut it = self.iter();
        let all = self.buf.data().len();
        let from = it.nth(start).map_or(all, |a| a.offset);
        let to = self.iter().nth(end).map_or(all, |a| a.offset);
        let k = (end.min(self.len()) - start.min(self.len())) as u32;
        self.buf.edit(0, |buf, n| {
            buf.drain(from..to);
            *n -= k;
        });
    }

    /// Offsets of all entries, for walking backwards.
    pub fn entries(&self) -> Vec<At<'_>> {
        self.iter().collect()
    }
}

/// Forward iterator over a [`Listpack`].
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = At<'a>;

    fn next(&mut self) -> Option<At<'a>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let offset = self.pos;
        let (mlen, n) = read_varint(&self.buf[self.pos..]);
        let mstart = self.pos + n;
        let member = &self.buf[mstart..mstart + mlen];
        let tag = self.buf[mstart + mlen];
        let p = mstart + mlen + 1;
        let (score, plen) = if tag >= TAG_SMALL {
            ((i64::from(tag - TAG_SMALL) + SMALL_MIN) as f64, 0)
        } else if tag == TAG_DOUBLE {
            let mut b = [0u8; 8];
            b.copy_from_slice(&self.buf[p..p + 8]);
            (f64::from_le_bytes(b), 8)
        } else {
            let n = usize::from(tag);
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&self.buf[p..p + n]);
            let z = u64::from_le_bytes(b);
            let v = ((z >> 1) as i64) ^ -((z & 1) as i64);
            (v as f64, n)
        };
        self.pos = p + plen;
        Some(At {
            member,
            score,
            offset,
            size: self.pos - offset,
        })
    }
}

fn encode(out: &mut Vec<u8>, member: &[u8], score: f64) {
    write_varint(out, member.len());
    out.extend_from_slice(member);
    let small = (score as i64).saturating_sub(SMALL_MIN);
    if score.fract() == 0.0 && (0..=i64::from(u8::MAX - TAG_SMALL)).contains(&small) {
        out.push(TAG_SMALL + small as u8);
    } else if score.fract() == 0.0 && score.abs() < INT_LIMIT {
        let v = score as i64;
        let z = ((v << 1) ^ (v >> 63)) as u64;
        let n = (8 - z.leading_zeros() / 8) as usize;
        out.push(n as u8);
        out.extend_from_slice(&z.to_le_bytes()[..n]);
    } else {
        out.push(TAG_DOUBLE);
        out.extend_from_slice(&score.to_le_bytes());
    }
}

fn write_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn read_varint(b: &[u8]) -> (usize, usize) {
    let mut v = 0usize;
    for (i, &c) in b.iter().enumerate() {
        v |= usize::from(c & 0x7f) << (7 * i);
        if c & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    (v, b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(lp: &Listpack) -> Vec<(Vec<u8>, f64)> {
        lp.iter().map(|a| (a.member.to_vec(), a.score)).collect()
    }

    #[test]
    fn scores_round_trip_in_both_forms() {
        let mut lp = Listpack::new();
        let scores = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            127.0,
            -128.0,
            -100.0,
            139.0,
            -101.0,
            140.0,
            1e15,
            -9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            0.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e300,
            5e-324,
        ];
        for (i, &s) in scores.iter().enumerate() {
            lp.insert(format!("m{i}").as_bytes(), s);
        }
        assert_eq!(lp.len(), scores.len());
        for (i, &s) in scores.iter().enumerate() {
            let (_, a) = lp.find(format!("m{i}").as_bytes()).unwrap();
            assert_eq!(a.score, s);
            // -0 is kept as 0 (as Redis's listpack does).
            assert!(!a.score.is_sign_negative() || s < 0.0);
        }
        let p = pairs(&lp);
        assert!(p
            .windows(2)
            .all(|w| super::super::order(w[0].1, &w[0].0, w[1].1, &w[1].0).is_lt()));
        // Small integers are their tag byte; larger ones take payload.
        let mut one = Listpack::new();
        one.insert(b"a", 3.0);
        assert_eq!(one.buf.data().len(), 1 + 1 + 1);
        one.insert(b"b", 140.0);
        one.insert(b"c", -101.0);
        // 140 as zigzag takes 2 payload bytes, -101 one.
        assert_eq!(one.buf.data().len(), 3 + 5 + 4);
        let got: Vec<f64> = one.iter().map(|a| a.score).collect();
        assert_eq!(got, [-101.0, 3.0, 140.0]);
    }

    #[test]
    fn order_ties_by_member_and_removal() {
        let mut lp = Listpack::new();
        for m in ["c", "a", "b", "", "aa"] {
            lp.insert(m.as_bytes(), 1.0);
        }
        lp.insert(b"z", 0.0);
        let names: Vec<_> = lp.iter().map(|a| a.member.to_vec()).collect();
        assert_eq!(
            names,
            [&b"z"[..], b"", b"a", b"aa", b"b", b"c"].map(|s| s.to_vec())
        );
        assert_eq!(lp.partition_point(|_, s| s < 1.0), 1);
        assert_eq!(lp.partition_point(|m, _| m != b"b"), 4);
        let (r, a) = lp.find(b"aa").unwrap();
        assert_eq!(r, 3);
        lp.remove_at(a.offset, a.size);
        assert_eq!(lp.len(), 5);
        assert!(lp.find(b"aa").is_none());
        lp.remove_ranks(1, 3);
        let names: Vec<_> = lp.iter().map(|a| a.member.to_vec()).collect();
        assert_eq!(names, [&b"z"[..], b"b", b"c"].map(|s| s.to_vec()));
        lp.remove_ranks(0, 3);
        assert!(lp.is_empty() && lp.buf.allocated() == 0);
    }

    #[test]
    fn long_members_use_longer_varints() {
        let mut lp = Listpack::new();
        let big = vec![b'x'; 70_000];
        lp.insert(&big, 2.5);
        lp.insert(b"s", 1.0);
        assert_eq!(lp.get(1).unwrap().member.len(), 70_000);
        assert_eq!(lp.get(1).unwrap().score, 2.5);
        assert_eq!(lp.get(0).unwrap().member, b"s");
    }
}
