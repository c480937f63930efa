//! The small sorted-set form: every `(member, score)` pair, ordered by
//! score then member bytes, in one contiguous byte buffer — Redis's
//! `listpack` encoding in spirit (one allocation, linear scans, a few
//! bytes of framing per entry), not its byte format.
//!
//! Entry layout: `header | [varint member length] | member bytes | score
//! payload`. The header byte's low 5 bits are the member's length (31:
//! longer, its length follows as a varint), its high 3 bits the score's
//! form: codes `0..=5` an integral score as a zigzag integer in that many
//! little-endian bytes (0: the score 0), `6` one in 7 bytes, `7` an IEEE
//! double in 8 bytes. Integral means exactly representable (|v| < 2^53),
//! so the integer form is lossless; `-0` is stored as `0`, as Redis's
//! listpack does (ZSCORE answers `0` for a small set, `-0` for a skiplist
//! one). A member of 8 bytes with a score under a million costs 12 bytes,
//! so ten of them are 120: glibc's 128-byte chunk.
//!
//! There is no back-length and no stored count (see
//! [`crate::counted`]), so walking backwards means collecting the entry
//! offsets first and the length is a walk; the form is bounded by
//! `zset-max-listpack-entries` (128 by default), so that is cheap.

/// Member length bits of the header meaning "a varint length follows".
const ESCAPE: u8 = 31;
const CODE_DOUBLE: u8 = 7;
/// Payload bytes of each score code.
const PAYLOAD: [usize; 8] = [0, 1, 2, 3, 4, 5, 7, 8];
const INT_LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53

use crate::counted::CountedBytes;

/// See the module comment.
/// Stored as [`CountedBytes`] (16 bytes, exact size).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Listpack {
    buf: CountedBytes<false>,
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

    /// Members (a walk: see the module comment).
    pub fn len(&self) -> usize {
        self.iter().count()
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
        let h = self.buf[offset];
        let code = h >> 5;
        let (mlen, mstart) = if h & ESCAPE == ESCAPE {
            let (m, n) = read_varint(&self.buf[offset + 1..]);
            (m, offset + 1 + n)
        } else {
            (usize::from(h & ESCAPE), offset + 1)
        };
        let member = &self.buf[mstart..mstart + mlen];
        let p = mstart + mlen;
        let plen = PAYLOAD[usize::from(code)];
        let mut b = [0u8; 8];
        b[..plen].copy_from_slice(&self.buf[p..p + plen]);
        let score = if code == CODE_DOUBLE {
            f64::from_le_bytes(b)
        } else {
            let z = u64::from_le_bytes(b);
            (((z >> 1) as i64) ^ -((z & 1) as i64)) as f64
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
    let (code, payload) = if score.fract() == 0.0 && score.abs() < INT_LIMIT {
        let v = score as i64;
        let z = ((v << 1) ^ (v >> 63)) as u64;
        // 0..=7 bytes (|v| < 2^53: at most 54 bits); 6 goes to 7.
        let n = 8 - z.leading_zeros() / 8;
        (n.min(6) as u8, z.to_le_bytes())
    } else {
        (CODE_DOUBLE, score.to_le_bytes())
    };
    let m = member.len();
    if m < usize::from(ESCAPE) {
        out.push((code << 5) | m as u8);
    } else {
        out.push((code << 5) | ESCAPE);
        write_varint(out, m);
    }
    out.extend_from_slice(member);
    out.extend_from_slice(&payload[..PAYLOAD[usize::from(code)]]);
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
        // The score 0 is the header alone; others take zigzag payload.
        let mut one = Listpack::new();
        one.insert(b"a", 3.0);
        assert_eq!(one.buf.data().len(), 1 + 1 + 1);
        one.insert(b"b", 140.0);
        one.insert(b"c", -101.0);
        one.insert(b"d", 0.0);
        // 140 as zigzag takes 2 payload bytes, -101 one.
        assert_eq!(one.buf.data().len(), 3 + 4 + 3 + 2);
        let got: Vec<f64> = one.iter().map(|a| a.score).collect();
        assert_eq!(got, [-101.0, 0.0, 3.0, 140.0]);
        // Ten 8-byte members with scores under a million: 120 bytes, the
        // allocation itself (no count, no framing beyond the header).
        let mut ten = Listpack::new();
        for k in 0..10 {
            ten.insert(
                format!("m{k}{:06}", 999_990 + k).as_bytes(),
                999_999.0 - k as f64,
            );
        }
        assert_eq!((ten.allocated(), ten.len()), (120, 10));
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
        // Around the header's length limit: 30 bytes in the header, 31
        // and 127 a one-byte varint after it, 128 two.
        for (n, size) in [(30, 1 + 30), (31, 2 + 31), (127, 2 + 127), (128, 3 + 128)] {
            let mut one = Listpack::new();
            let m = vec![b'm'; n];
            one.insert(&m, -9_007_199_254_740_991.0);
            assert_eq!(one.allocated(), size + 7);
            let a = one.get(0).unwrap();
            assert_eq!(
                (a.member, a.score, a.size),
                (&m[..], -9_007_199_254_740_991.0, size + 7)
            );
        }
    }
}
