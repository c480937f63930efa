//! A listpack: a sequence of byte strings in one contiguous allocation
//! (Redis's `listpack.c` idea, our own encoding). Small hashes (fields and
//! values alternating) and the nodes of a list's quicklist are listpacks.
//!
//! Entry layout: `len | bytes | backlen`, where `len` and `backlen` both
//! encode the byte count, `len` readable forwards and `backlen` backwards:
//!
//! * `< 0x80`: one byte, the length itself;
//! * `< 0x4000`: two bytes, forwards `0x80 | len >> 8, len & 0xff`,
//!   backwards `len & 0xff, 0x80 | len >> 8` (the marker byte is last);
//! * otherwise five bytes, forwards `0xc0, u32 LE`, backwards `u32 LE, 0xc0`.
//!
//! So a short entry costs two bytes beyond its data (Redis's listpack: one
//! or two, plus integer packing). Walking is O(n); callers keep listpacks
//! small (the `*-max-listpack-*` thresholds) and convert past them.
//! Offsets handed out are byte offsets of an entry's first byte; any
//! mutation invalidates offsets after the mutated entry.
//!
//! Two forms: `Listpack<true>` (the default; a quicklist's nodes) as
//! above, with its entry count stored; `Listpack<false>` (small hashes,
//! which never walk backwards) without `backlen` and without a count, so a
//! short entry costs one byte beyond its data and the length is a walk:
//! a hash of ten 2-byte fields and 8-byte values is 120 bytes, glibc's
//! 128-byte chunk, where both would make it 144 bytes and a 160-byte chunk.

/// Stored as [`CountedBytes`] (16 bytes, exact size).
use crate::counted::CountedBytes;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listpack<const BACK: bool = true> {
    buf: CountedBytes<BACK>,
}

fn header_len(n: usize) -> usize {
    if n < 0x80 {
        1
    } else if n < 0x4000 {
        2
    } else {
        5
    }
}

/// Append entry `v` to `out` in the form `BACK` says.
fn put<const BACK: bool>(out: &mut Vec<u8>, v: &[u8]) {
    let n = v.len();
    if n < 0x80 {
        out.push(n as u8);
        out.extend_from_slice(v);
        if BACK {
            out.push(n as u8);
        }
    } else if n < 0x4000 {
        out.extend_from_slice(&[0x80 | (n >> 8) as u8, n as u8]);
        out.extend_from_slice(v);
        if BACK {
            out.extend_from_slice(&[n as u8, 0x80 | (n >> 8) as u8]);
        }
    } else {
        let le = (n as u32).to_le_bytes();
        out.push(0xc0);
        out.extend_from_slice(&le);
        out.extend_from_slice(v);
        if BACK {
            out.extend_from_slice(&le);
            out.push(0xc0);
        }
    }
}

/// Append entry `v` to `out` in the forward-only form of a small hash
/// (`Listpack<false>`: the RDB loader builds hashes with it, then
/// [`Listpack::from_encoded`]).
pub fn write_entry(out: &mut Vec<u8>, v: &[u8]) {
    put::<false>(out, v);
}

/// Bytes an entry of a `Listpack<BACK>` holding `n` data bytes takes.
fn entry_len<const BACK: bool>(n: usize) -> usize {
    (1 + usize::from(BACK)) * header_len(n) + n
}

/// Bytes a quicklist node's entry holding `n` data bytes takes.
pub fn entry_size(n: usize) -> usize {
    entry_len::<true>(n)
}

impl<const BACK: bool> Listpack<BACK> {
    pub fn new() -> Listpack<BACK> {
        Listpack::default()
    }

    fn data(&self) -> &[u8] {
        self.buf.data()
    }

    fn edit<R>(&mut self, extra: usize, f: impl FnOnce(&mut Vec<u8>, &mut u32) -> R) -> R {
        self.buf.edit(extra, f)
    }

    /// Number of entries (a walk without `BACK`).
    pub fn len(&self) -> usize {
        if BACK {
            self.buf.count() as usize
        } else {
            self.iter().count()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes of entries (the allocation's used part).
    pub fn bytes(&self) -> usize {
        self.data().len()
    }

    /// Bytes allocated (for `used_memory`).
    pub fn capacity(&self) -> usize {
        self.buf.allocated()
    }

    /// Offset of the first entry (== `end()` when empty).
    pub fn first(&self) -> usize {
        0
    }

    /// One past the last entry.
    pub fn end(&self) -> usize {
        self.data().len()
    }

    /// The entry at `off` and the offset of the next one.
    pub fn at(&self, off: usize) -> Option<(&[u8], usize)> {
        let buf = self.data();
        let b = *buf.get(off)?;
        let (n, h) = if b < 0x80 {
            (usize::from(b), 1)
        } else if b < 0xc0 {
            let lo = *buf.get(off + 1)?;
            ((usize::from(b & 0x3f) << 8) | usize::from(lo), 2)
        } else {
            let mut le = [0u8; 4];
            le.copy_from_slice(buf.get(off + 1..off + 5)?);
            (u32::from_le_bytes(le) as usize, 5)
        };
        let data = buf.get(off + h..off + h + n)?;
        Some((data, off + (1 + usize::from(BACK)) * h + n))
    }

    /// Entries front to back.
    pub fn iter(&self) -> Iter<'_, BACK> {
        Iter { lp: self, off: 0 }
    }

    /// Entry `i` (0-based from the front).
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.iter().nth(i)
    }

    /// A listpack of `count` entries already encoded (by [`write_entry`]
    /// for `Listpack<false>`) in `bytes`, in one exact-size allocation
    /// (the RDB loader: no realloc per entry).
    pub fn from_encoded(bytes: &[u8], count: u32) -> Listpack<BACK> {
        let mut lp = Listpack::new();
        lp.edit(bytes.len(), |buf, n| {
            buf.extend_from_slice(bytes);
            *n = count;
        });
        lp
    }

    pub fn push_back(&mut self, v: &[u8]) {
        // Exact growth, as Redis's listpack reallocs per insert: a small
        // aggregate carries no doubling slack.
        self.edit(entry_len::<BACK>(v.len()), |buf, n| {
            put::<BACK>(buf, v);
            *n += 1;
        });
    }

    pub fn push_front(&mut self, v: &[u8]) {
        self.insert_at(0, v);
    }

    /// Insert `v` before the entry at `off` (`end()`: append).
    pub fn insert_at(&mut self, off: usize, v: &[u8]) {
        let mut e = Vec::with_capacity(entry_len::<BACK>(v.len()));
        put::<BACK>(&mut e, v);
        self.edit(e.len(), |buf, n| {
            let off = off.min(buf.len());
            buf.splice(off..off, e);
            *n += 1;
        });
    }

    /// Remove the entry at `off`; returns the offset now holding the next
    /// entry (== `off`).
    pub fn remove_at(&mut self, off: usize) -> usize {
        if let Some((_, next)) = self.at(off) {
            self.edit(0, |buf, n| {
                buf.drain(off..next);
                *n -= 1;
            });
        }
        off
    }

    /// Remove up to `k` entries from the one at `off`, in one resize.
    pub fn remove_entries(&mut self, off: usize, k: usize) {
        let (mut end, mut gone) = (off, 0u32);
        while (gone as usize) < k {
            let Some((_, next)) = self.at(end) else {
                break;
            };
            end = next;
            gone += 1;
        }
        if gone > 0 {
            self.edit(0, |buf, n| {
                buf.drain(off..end);
                *n -= gone;
            });
        }
    }

    /// Replace the entry at `off` with `v`.
    pub fn replace_at(&mut self, off: usize, v: &[u8]) {
        let Some((old, next)) = self.at(off) else {
            return;
        };
        if old.len() == v.len() {
            let h = header_len(v.len());
            self.buf.data_mut()[off + h..off + h + v.len()].copy_from_slice(v);
            return;
        }
        let mut e = Vec::with_capacity(entry_len::<BACK>(v.len()));
        put::<BACK>(&mut e, v);
        let extra = e.len().saturating_sub(next - off);
        self.edit(extra, |buf, _| {
            buf.splice(off..next, e);
        });
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let v = self.at(0)?.0.to_vec();
        self.remove_at(0);
        Some(v)
    }

    /// Remove every entry from the one at `off` on.
    pub fn truncate_at(&mut self, off: usize) {
        let mut gone = 0;
        let mut o = off;
        while let Some((_, next)) = self.at(o) {
            gone += 1;
            o = next;
        }
        if gone > 0 {
            self.edit(0, |buf, n| {
                buf.truncate(off);
                *n -= gone;
            });
        }
    }

    /// Offset of the entry before the one at `off` (`off` may be `end()`);
    /// `None` without `BACK` (no back-lengths to walk by).
    pub fn prev(&self, off: usize) -> Option<usize> {
        let buf = self.data();
        if !BACK || off == 0 || off > buf.len() {
            return None;
        }
        let b = buf[off - 1];
        let (n, h) = if b < 0x80 {
            (usize::from(b), 1)
        } else if b < 0xc0 {
            let lo = *buf.get(off.checked_sub(2)?)?;
            ((usize::from(b & 0x3f) << 8) | usize::from(lo), 2)
        } else {
            let mut le = [0u8; 4];
            le.copy_from_slice(buf.get(off.checked_sub(5)?..off - 1)?);
            (u32::from_le_bytes(le) as usize, 5)
        };
        off.checked_sub(2 * h + n)
    }

    /// Offset of the last entry.
    pub fn last(&self) -> Option<usize> {
        self.prev(self.end())
    }

    /// Offset of entry `i`, walking from the nearer end.
    pub fn offset_of(&self, i: usize) -> Option<usize> {
        if !BACK {
            let mut off = 0;
            for _ in 0..i {
                off = self.at(off)?.1;
            }
            return self.at(off).map(|_| off);
        }
        if i >= self.len() {
            return None;
        }
        if i <= self.len() / 2 {
            let mut off = 0;
            for _ in 0..i {
                off = self.at(off)?.1;
            }
            Some(off)
        } else {
            let mut off = self.end();
            for _ in i..self.len() {
                off = self.prev(off)?;
            }
            Some(off)
        }
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let off = self.last()?;
        let v = self.at(off)?.0.to_vec();
        self.edit(0, |buf, n| {
            buf.truncate(off);
            *n -= 1;
        });
        Some(v)
    }
}

pub struct Iter<'a, const BACK: bool = true> {
    lp: &'a Listpack<BACK>,
    off: usize,
}

impl<'a, const BACK: bool> Iterator for Iter<'a, BACK> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let (v, next) = self.lp.at(self.off)?;
        self.off = next;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn entries_of_every_header_size_walk_both_ways() {
        let mut lp = Listpack::<true>::new();
        let vals: Vec<Vec<u8>> = [0usize, 1, 127, 128, 300, 0x3fff, 0x4000, 70_000]
            .iter()
            .map(|&n| vec![b'x'; n])
            .collect();
        for v in &vals {
            lp.push_back(v);
        }
        assert_eq!(lp.len(), vals.len());
        assert_eq!(lp.iter().collect::<Vec<_>>(), vals);
        let mut back = Vec::new();
        let mut off = lp.end();
        while let Some(p) = lp.prev(off) {
            back.push(lp.at(p).unwrap().0.to_vec());
            off = p;
        }
        back.reverse();
        assert_eq!(back, vals);
        for (i, v) in vals.iter().enumerate() {
            assert_eq!(lp.at(lp.offset_of(i).unwrap()).unwrap().0, &v[..]);
        }
    }

    #[test]
    fn insert_replace_remove_pop() {
        let mut lp = Listpack::<true>::new();
        lp.push_back(b"b");
        lp.push_front(b"a");
        lp.push_back(b"c");
        let off = lp.offset_of(1).unwrap();
        lp.replace_at(off, &[b'B'; 200]);
        assert_eq!(lp.get(1).unwrap().len(), 200);
        lp.replace_at(off, b"b");
        lp.insert_at(lp.offset_of(2).unwrap(), b"bc");
        assert_eq!(
            lp.iter().collect::<Vec<_>>(),
            vec![&b"a"[..], b"b", b"bc", b"c"]
        );
        lp.remove_at(lp.offset_of(1).unwrap());
        assert_eq!(lp.pop_back().unwrap(), b"c");
        assert_eq!(lp.pop_front().unwrap(), b"a");
        assert_eq!(lp.pop_front().unwrap(), b"bc");
        assert!(lp.is_empty() && lp.bytes() == 0);
        assert_eq!(lp.pop_back(), None);
    }

    /// The forward-only form: one header byte per short entry, no count,
    /// the same walks forwards; what [`write_entry`] and
    /// [`Listpack::from_encoded`] build is what pushes build.
    #[test]
    fn forward_form_is_one_byte_per_short_entry() {
        let mut lp = Listpack::<false>::new();
        let vals: Vec<Vec<u8>> = [0usize, 2, 8, 127, 128, 0x3fff, 0x4000, 70_000]
            .iter()
            .map(|&n| vec![b'y'; n])
            .collect();
        let mut enc = Vec::new();
        for v in &vals {
            lp.push_back(v);
            write_entry(&mut enc, v);
        }
        assert_eq!(lp, Listpack::<false>::from_encoded(&enc, vals.len() as u32));
        let data: usize = vals.iter().map(Vec::len).sum();
        assert_eq!(lp.capacity(), data + 1 + 1 + 1 + 1 + 2 + 2 + 5 + 5);
        assert_eq!(lp.len(), vals.len());
        assert_eq!(lp.iter().collect::<Vec<_>>(), vals);
        for (i, v) in vals.iter().enumerate() {
            assert_eq!(lp.at(lp.offset_of(i).unwrap()).unwrap().0, &v[..]);
        }
        assert_eq!(lp.offset_of(vals.len()), None);
        assert_eq!(lp.prev(lp.end()), None);
        let mut h = Listpack::<false>::new();
        for k in 0..10 {
            h.push_back(format!("f{k}").as_bytes());
            h.push_back(b"v1234567");
        }
        assert_eq!(h.capacity(), 120);
        h.replace_at(h.offset_of(3).unwrap(), b"longer value");
        assert_eq!(h.get(3).unwrap(), b"longer value");
        h.remove_entries(h.offset_of(2).unwrap(), 2);
        assert_eq!(h.len(), 18);
        assert_eq!(h.get(2).unwrap(), b"f2");
        h.remove_entries(0, 18);
        assert!(h.is_empty() && h.capacity() == 0 && h.iter().count() == 0);
    }
}
