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
    let mut out = Vec::with_capacity(max_out.min(input.len() + input.len() / 16 + 8));
    compress_into(input, max_out, &mut out).then_some(out)
}

/// [`compress`] appending to `out` (the RDB writer's buffer: no
/// allocation per string); false, with `out` as it was, when the result
/// would exceed `max_out` bytes.
pub fn compress_into(input: &[u8], max_out: usize, out: &mut Vec<u8>) -> bool {
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        if t.is_empty() {
            t.resize(1 << HLOG, u32::MAX);
        }
        let base = out.len();
        let ok = compress_with(input, base + max_out, &mut t, out);
        if !ok {
            out.truncate(base);
        }
        ok
    })
}

thread_local! {
    /// The match table, kept between calls and never cleared (liblzf's
    /// uninitialised table, safely): a stale entry is only a candidate,
    /// checked to lie before the current position and to match. Clearing
    /// 64 KiB per string cost more than compressing a 100-byte value.
    static TABLE: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Length of the common prefix of `input[r..]` and `input[i..]` (r < i),
/// at most `max`: eight bytes per step, then the rest.
#[inline]
fn match_len(input: &[u8], r: usize, i: usize, max: usize) -> usize {
    let mut len = 0;
    while len + 8 <= max {
        let a = u64::from_le_bytes(input[r + len..r + len + 8].try_into().unwrap_or([0; 8]));
        let b = u64::from_le_bytes(input[i + len..i + len + 8].try_into().unwrap_or([0; 8]));
        let x = a ^ b;
        if x != 0 {
            return len + (x.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    while len < max && input[r + len] == input[i + len] {
        len += 1;
    }
    len
}

/// The compressor proper; `limit`: the longest `out` may grow.
fn compress_with(input: &[u8], limit: usize, table: &mut [u32], out: &mut Vec<u8>) -> bool {
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
                let len = 3 + match_len(input, r + 3, i + 3, maxlen - 3);
                flush_lits(out, lit_start, i);
                let l = len - 2;
                if l < 7 {
                    out.push(((l << 5) | (off >> 8)) as u8);
                } else {
                    out.push(((7 << 5) | (off >> 8)) as u8);
                    out.push((l - 7) as u8);
                }
                out.push(off as u8);
                // Index the match's last two positions only, as Redis's
                // liblzf (`VERY_FAST`): indexing every position inside a
                // long match cost most of the time on repetitive values.
                let end = i + len;
                for j in end.saturating_sub(2).max(i + 1)..end {
                    if j + 2 < input.len() {
                        table[hash3(&input[j..])] = j as u32;
                    }
                }
                i = end;
                lit_start = i;
                if out.len() > limit {
                    return false;
                }
                continue;
            }
        }
        i += 1;
    }
    flush_lits(out, lit_start, input.len());
    out.len() <= limit
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
        // Appending keeps what the buffer held, and a failure leaves it so.
        let mut out = b"head".to_vec();
        assert!(compress_into(&long, 200, &mut out));
        assert_eq!(&out[..4], b"head");
        assert_eq!(decompress(&out[4..], long.len()).unwrap(), long);
        let before = out.clone();
        assert!(!compress_into(b"abcdefghijklmnopqrstuvwxyz", 20, &mut out));
        assert_eq!(out, before);
    }

    #[test]
    fn matches_of_every_length_round_trip() {
        for n in 0..300 {
            let mut v = b"0123456789abcdef".to_vec();
            v.extend(std::iter::repeat_n(b'q', n));
            v.extend_from_slice(b"0123456789abcdef!");
            let c = compress(&v, v.len() + 64).unwrap();
            assert_eq!(decompress(&c, v.len()).unwrap(), v, "{n}");
        }
    }

    #[test]
    fn malformed_streams_are_rejected() {
        assert_eq!(decompress(&[0x20, 0x00], 3), None); // reference before any output
        assert_eq!(decompress(&[5, b'a'], 6), None); // truncated literal
        assert_eq!(decompress(&[0, b'a'], 2), None); // short output
    }
}
