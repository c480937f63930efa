//! LZF, the compression of RDB strings (`rdbcompression yes`), in liblzf's
//! format so Redis reads what we write and we read what Redis writes.
//!
//! A stream is a sequence of items, each starting with a control byte `c`:
//! * `c < 32`: a literal run of `c + 1` bytes follows;
//! * else a back reference: length `c >> 5` (7 means "add the next byte"),
//!   plus 2, from `((c & 0x1f) << 8 | next byte) + 1` bytes back.
//!
//! The compressor is our own greedy one (a hash of the next three bytes
//! finds the last position they occurred, within the 8 KiB window).

const HLOG: usize = 14;
const MAX_LIT: usize = 32;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

fn hash3(b: &[u8]) -> usize {
    let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
    ((v.wrapping_mul(0x9E37_79B1)) >> (32 - HLOG)) as usize
}

/// Compress `input`; `None` unless the output is at most `max_out` bytes
/// (Redis saves a string compressed only when that saves 4+ bytes).
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        if t.is_empty() {
            t.resize(1 << HLOG, u32::MAX);
        }
        compress_with(input, max_out, &mut t)
    })
}

thread_local! {
    /// The match table, kept between calls and never cleared (liblzf's
    /// uninitialised table, safely): a stale entry is only a candidate,
    /// checked to lie before the current position and to match. Clearing
    /// 64 KiB per string cost more than compressing a 100-byte value.
    static TABLE: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn compress_with(input: &[u8], max_out: usize, table: &mut [u32]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(max_out.min(input.len() + input.len() / 16 + 8));
    let mut lit_start = 0;
    let mut i = 0;
    let flush_lits = |out: &mut Vec<u8>, from: usize, to: usize| {
        let mut s = from;
        while s < to {
            let n = (to - s).min(MAX_LIT);
            out.push((n - 1) as u8);
            out.extend_from_slice(&input[s..s + n]);
            s += n;
        }
    };
    while i + 2 < input.len() {
        let h = hash3(&input[i..]);
        let r = table[h];
        table[h] = i as u32;
        if (r as usize) < i {
            let r = r as usize;
            let off = i - r - 1;
            if off < MAX_OFF && input[r..r + 3] == input[i..i + 3] {
                let maxlen = (input.len() - i).min(MAX_REF);
                let mut len = 3;
                while len < maxlen && input[r + len] == input[i + len] {
                    len += 1;
                }
                flush_lits(&mut out, lit_start, i);
                let l = len - 2;
                if l < 7 {
                    out.push(((l << 5) | (off >> 8)) as u8);
                } else {
                    out.push(((7 << 5) | (off >> 8)) as u8);
                    out.push((l - 7) as u8);
                }
                out.push(off as u8);
                // Index the positions inside the match too (cheap, helps runs).
                let end = i + len;
                let mut j = i + 1;
                while j < end && j + 2 < input.len() {
                    table[hash3(&input[j..])] = j as u32;
                    j += 1;
                }
                i = end;
                lit_start = i;
                if out.len() > max_out {
                    return None;
                }
                continue;
            }
        }
        i += 1;
    }
    flush_lits(&mut out, lit_start, input.len());
    (out.len() <= max_out).then_some(out)
}

/// Decompress into exactly `out_len` bytes; `None` on a malformed stream.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    // A reference expands 3 input bytes to at most 264: never reserve
    // more than the input can produce (`out_len` comes from the file).
    let mut out: Vec<u8> = Vec::with_capacity(out_len.min(input.len().saturating_mul(90)));
    let mut i = 0;
    while i < input.len() {
        let c = usize::from(input[i]);
        i += 1;
        if c < 32 {
            let n = c + 1;
            let lit = input.get(i..i + n)?;
            if out.len() + n > out_len {
                return None;
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut len = c >> 5;
            if len == 7 {
                len += usize::from(*input.get(i)?);
                i += 1;
            }
            let off = ((c & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            let len = len + 2;
            if off > out.len() || out.len() + len > out_len {
                return None;
            }
            // Copy in whole periods of `off` (an overlapping reference
            // repeats the last `off` bytes), doubling each time.
            let start = out.len() - off;
            let mut left = len;
            while left > 0 {
                let avail = out.len() - start;
                let n = if avail >= left {
                    left
                } else {
                    avail - avail % off
                };
                out.extend_from_within(start..start + n);
                left -= n;
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trips() {
        let mut rng = crate::util::Rng::new(7);
        for n in [0usize, 1, 3, 20, 100, 1000, 70_000] {
            let repetitive: Vec<u8> = (0..n).map(|i| b"abcabcabd"[i % 9]).collect();
            let c = compress(&repetitive, n + n / 16 + 64).unwrap();
            assert_eq!(decompress(&c, n).unwrap(), repetitive);
            let random: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
            let c = compress(&random, n + n / 16 + 64).unwrap();
            assert_eq!(decompress(&c, n).unwrap(), random);
        }
        let long = vec![b'x'; 10_000];
        assert!(compress(&long, 200).unwrap().len() < 200);
        assert_eq!(compress(b"abcdefghijklmnopqrstuvwxyz", 20), None);
    }

    #[test]
    fn malformed_streams_are_rejected() {
        assert_eq!(decompress(&[0x20, 0x00], 3), None); // reference before any output
        assert_eq!(decompress(&[5, b'a'], 6), None); // truncated literal
        assert_eq!(decompress(&[0, b'a'], 2), None); // short output
    }
}
