//! The byte layouts Redis keeps small aggregates in, as they appear inside
//! RDB files and DUMP payloads: Redis's listpack (hash 16, zset 17, the
//! nodes of quicklist 18), intset (11) and, for reading older files,
//! ziplist (10, 12, 13, and the nodes of quicklist 14).
//!
//! gyre's in-memory listpack ([`crate::listpack`]) is a different, simpler
//! encoding; these functions translate at the file boundary. Every parser
//! checks each length against the blob (a corrupt file is an error, never
//! a panic or an out-of-bounds read).

use crate::util::string2ll;

/// A malformed blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadBlob;

// ------------------------------------------------------------------ listpack

/// Length of a listpack entry's back-length field for an entry of `l`
/// bytes (encoding + data).
fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

fn push_backlen(out: &mut Vec<u8>, l: usize) {
    let n = backlen_size(l);
    // Most significant 7-bit group first; all but the first carry 0x80.
    for k in (0..n).rev() {
        let g = ((l >> (7 * k)) & 127) as u8;
        out.push(if k == n - 1 { g } else { g | 128 });
    }
}

fn lp_entry(out: &mut Vec<u8>, v: &[u8]) {
    let start = out.len();
    if let Some(x) = (v.len() <= 20).then(|| string2ll(v)).flatten() {
        if (0..=127).contains(&x) {
            out.push(x as u8);
        } else if (-4096..=4095).contains(&x) {
            let u = (x as u64) & 0x1fff;
            out.extend_from_slice(&[0xc0 | (u >> 8) as u8, u as u8]);
        } else if i16::try_from(x).is_ok() {
            out.push(0xf1);
            out.extend_from_slice(&(x as i16).to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&x) {
            out.push(0xf2);
            out.extend_from_slice(&(x as i32).to_le_bytes()[..3]);
        } else if i32::try_from(x).is_ok() {
            out.push(0xf3);
            out.extend_from_slice(&(x as i32).to_le_bytes());
        } else {
            out.push(0xf4);
            out.extend_from_slice(&x.to_le_bytes());
        }
    } else {
        let n = v.len();
        if n < 64 {
            out.push(0x80 | n as u8);
        } else if n < 4096 {
            out.extend_from_slice(&[0xe0 | (n >> 8) as u8, n as u8]);
        } else {
            out.push(0xf0);
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
        out.extend_from_slice(v);
    }
    let l = out.len() - start;
    push_backlen(out, l);
}

/// A Redis listpack holding `entries` (integers in canonical form are
/// stored as integers, as Redis does).
pub fn lp_build<'a>(entries: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![0; 6];
    let mut n: usize = 0;
    for e in entries {
        lp_entry(&mut out, e);
        n += 1;
    }
    out.push(0xff);
    let total = out.len() as u32;
    out[..4].copy_from_slice(&total.to_le_bytes());
    let count = if n < 65535 { n as u16 } else { 65535 };
    out[4..6].copy_from_slice(&count.to_le_bytes());
    out
}

fn get(b: &[u8], from: usize, n: usize) -> Result<&[u8], BadBlob> {
    b.get(from..from.checked_add(n).ok_or(BadBlob)?)
        .ok_or(BadBlob)
}

fn int_le(b: &[u8]) -> i64 {
    let mut x: u64 = 0;
    for (i, &c) in b.iter().enumerate() {
        x |= u64::from(c) << (8 * i);
    }
    // Sign-extend from the width read.
    let bits = 8 * b.len() as u32;
    if bits < 64 {
        let sh = 64 - bits;
        ((x << sh) as i64) >> sh
    } else {
        x as i64
    }
}

/// The entries of a Redis listpack (integers as decimal strings).
pub fn lp_parse(b: &[u8]) -> Result<Vec<Vec<u8>>, BadBlob> {
    let mut out = Vec::new();
    lp_each(b, |e| out.push(e.to_vec()))?;
    Ok(out)
}

/// Each entry of a Redis listpack in order (integers as decimal strings,
/// formatted on the stack), after the same checks as [`lp_parse`] —
/// without an allocation per entry, which loading many small hashes paid.
pub fn lp_each(b: &[u8], mut f: impl FnMut(&[u8])) -> Result<(), BadBlob> {
    let hdr = get(b, 0, 6)?;
    let total = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
    if total != b.len() || b.last() != Some(&0xff) {
        return Err(BadBlob);
    }
    let count = u16::from_le_bytes([hdr[4], hdr[5]]);
    let mut seen = 0usize;
    let mut num = [0u8; 20];
    let mut p = 6;
    loop {
        let c = *b.get(p).ok_or(BadBlob)?;
        if c == 0xff {
            break;
        }
        let (val, l): (&[u8], usize) = if c < 0x80 {
            (crate::util::decimal(i64::from(c), &mut num), 1)
        } else if c < 0xc0 {
            let n = usize::from(c & 0x3f);
            (get(b, p + 1, n)?, 1 + n)
        } else if c < 0xe0 {
            let lo = *b.get(p + 1).ok_or(BadBlob)?;
            let u = (u64::from(c & 0x1f) << 8) | u64::from(lo);
            let x = ((u << 51) as i64) >> 51;
            (crate::util::decimal(x, &mut num), 2)
        } else if c < 0xf0 {
            let lo = *b.get(p + 1).ok_or(BadBlob)?;
            let n = (usize::from(c & 0x0f) << 8) | usize::from(lo);
            (get(b, p + 2, n)?, 2 + n)
        } else {
            match c {
                0xf0 => {
                    let l4 = get(b, p + 1, 4)?;
                    let n = u32::from_le_bytes([l4[0], l4[1], l4[2], l4[3]]) as usize;
                    (get(b, p + 5, n)?, 5 + n)
                }
                0xf1..=0xf4 => {
                    let w = [2, 3, 4, 8][usize::from(c - 0xf1)];
                    let x = int_le(get(b, p + 1, w)?);
                    (crate::util::decimal(x, &mut num), 1 + w)
                }
                _ => return Err(BadBlob),
            }
        };
        p += l + backlen_size(l);
        if p >= b.len() {
            return Err(BadBlob);
        }
        f(val);
        seen += 1;
    }
    if p != b.len() - 1 || (count != 65535 && usize::from(count) != seen) {
        return Err(BadBlob);
    }
    Ok(())
}

// ------------------------------------------------------------------ ziplist

/// The entries of a Redis ziplist (RDB files before Redis 7.0).
pub fn ziplist_parse(b: &[u8]) -> Result<Vec<Vec<u8>>, BadBlob> {
    let hdr = get(b, 0, 10)?;
    let total = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
    if total != b.len() || b.last() != Some(&0xff) {
        return Err(BadBlob);
    }
    let count = u16::from_le_bytes([hdr[8], hdr[9]]);
    let mut out = Vec::new();
    let mut p = 10;
    loop {
        let c = *b.get(p).ok_or(BadBlob)?;
        if c == 0xff {
            break;
        }
        // prevlen: 1 byte, or 0xfe + 4 bytes.
        p += if c == 0xfe { 5 } else { 1 };
        let e = *b.get(p).ok_or(BadBlob)?;
        let (val, l): (Vec<u8>, usize) = match e >> 6 {
            0 => {
                let n = usize::from(e & 0x3f);
                (get(b, p + 1, n)?.to_vec(), 1 + n)
            }
            1 => {
                let lo = *b.get(p + 1).ok_or(BadBlob)?;
                let n = (usize::from(e & 0x3f) << 8) | usize::from(lo);
                (get(b, p + 2, n)?.to_vec(), 2 + n)
            }
            2 => {
                let l4 = get(b, p + 1, 4)?;
                let n = u32::from_be_bytes([l4[0], l4[1], l4[2], l4[3]]) as usize;
                (get(b, p + 5, n)?.to_vec(), 5 + n)
            }
            _ => {
                let (x, w) = match e {
                    0xc0 => (int_le(get(b, p + 1, 2)?), 2),
                    0xd0 => (int_le(get(b, p + 1, 4)?), 4),
                    0xe0 => (int_le(get(b, p + 1, 8)?), 8),
                    0xf0 => (int_le(get(b, p + 1, 3)?), 3),
                    0xfe => (int_le(get(b, p + 1, 1)?), 1),
                    0xf1..=0xfd => (i64::from(e & 0x0f) - 1, 0),
                    _ => return Err(BadBlob),
                };
                (x.to_string().into_bytes(), 1 + w)
            }
        };
        p += l;
        out.push(val);
    }
    if p != b.len() - 1 || (count != 65535 && usize::from(count) != out.len()) {
        return Err(BadBlob);
    }
    Ok(out)
}

// ------------------------------------------------------------------ zipmap

/// The field/value entries of a zipmap (hashes in RDB files of Redis 2.2
/// to 2.4, type 9): `zmlen`, then `len field len free value [free bytes]`
/// pairs, `0xff` at the end; a length is one byte below 254, else 254 and
/// a 4-byte little-endian length.
pub fn zipmap_parse(b: &[u8]) -> Result<Vec<Vec<u8>>, BadBlob> {
    fn len(b: &[u8], p: &mut usize) -> Result<Option<usize>, BadBlob> {
        let c = *b.get(*p).ok_or(BadBlob)?;
        *p += 1;
        match c {
            255 => Ok(None),
            254 => {
                let l = get(b, *p, 4)?;
                *p += 4;
                Ok(Some(u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize))
            }
            n => Ok(Some(usize::from(n))),
        }
    }
    let mut out = Vec::new();
    let mut p = 1;
    while let Some(kl) = len(b, &mut p)? {
        out.push(get(b, p, kl)?.to_vec());
        p += kl;
        let vl = len(b, &mut p)?.ok_or(BadBlob)?;
        let free = usize::from(*b.get(p).ok_or(BadBlob)?);
        p += 1;
        out.push(get(b, p, vl)?.to_vec());
        p += vl + free;
    }
    if p != b.len() {
        return Err(BadBlob);
    }
    Ok(out)
}

// ------------------------------------------------------------------ intset

/// A Redis intset blob: encoding (2, 4, 8) and length as u32 LE, then the
/// sorted members little-endian at that width.
pub fn intset_build(members: &[i64]) -> Vec<u8> {
    let w: usize = if members.iter().all(|&x| i16::try_from(x).is_ok()) {
        2
    } else if members.iter().all(|&x| i32::try_from(x).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + w * members.len());
    out.extend_from_slice(&(w as u32).to_le_bytes());
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for &x in members {
        out.extend_from_slice(&x.to_le_bytes()[..w]);
    }
    out
}

/// The members of an intset blob (checked sorted and distinct, as Redis's
/// `intsetValidateIntegrity`).
pub fn intset_parse(b: &[u8]) -> Result<Vec<i64>, BadBlob> {
    let h = get(b, 0, 8)?;
    let w = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
    let n = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
    if !matches!(w, 2 | 4 | 8) || n.checked_mul(w).and_then(|x| x.checked_add(8)) != Some(b.len()) {
        return Err(BadBlob);
    }
    let v: Vec<i64> = b[8..].chunks_exact(w).map(int_le).collect();
    if v.is_empty() || v.windows(2).any(|p| p[0] >= p[1]) {
        return Err(BadBlob);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn listpack_round_trips_every_encoding() {
        let big = vec![b'z'; 5000];
        let mid = vec![b'm'; 300];
        let vals: Vec<Vec<u8>> = [
            &b""[..],
            b"0",
            b"127",
            b"128",
            b"-1",
            b"-4096",
            b"4095",
            b"-4097",
            b"32767",
            b"-32768",
            b"8388607",
            b"-8388608",
            b"2147483647",
            b"-2147483648",
            b"9223372036854775807",
            b"-9223372036854775808",
            b"007",
            b"+1",
            b"hello",
            &mid,
            &big,
        ]
        .iter()
        .map(|v| v.to_vec())
        .collect();
        let lp = lp_build(vals.iter().map(|v| v.as_slice()));
        assert_eq!(lp_parse(&lp).unwrap(), vals);
        // Known bytes: Redis's listpack of ["a", 1]:
        // total 13, count 2, 0x81 'a' backlen 2, 0x01 backlen 1, 0xff.
        let lp = lp_build([&b"a"[..], b"1"].into_iter());
        assert_eq!(lp, [12, 0, 0, 0, 2, 0, 0x81, b'a', 2, 1, 1, 0xff]);
    }

    #[test]
    fn corrupt_blobs_are_errors() {
        let lp = lp_build([&b"abc"[..], b"12345678"].into_iter());
        for cut in 0..lp.len() {
            assert!(lp_parse(&lp[..cut]).is_err());
        }
        let mut bad = lp.clone();
        bad[6] = 0xbf; // a 63-byte string that is not there
        assert!(lp_parse(&bad).is_err());
        assert!(intset_parse(&intset_build(&[3, 1])).is_err());
        assert!(intset_parse(&[2, 0, 0, 0, 9, 0, 0, 0]).is_err());
    }

    #[test]
    fn intset_widths() {
        for set in [vec![1, 2, 3], vec![-70_000, 5], vec![i64::MIN, 0, i64::MAX]] {
            assert_eq!(intset_parse(&intset_build(&set)).unwrap(), set);
        }
        assert_eq!(intset_build(&[1])[0], 2);
    }

    #[test]
    fn zipmap_entries() {
        // {"a": "xy", "long": <300 bytes>} with 2 free bytes after "xy".
        let mut z = vec![2, 1, b'a', 2, 2, b'x', b'y', 0, 0, 4];
        z.extend_from_slice(b"long");
        z.push(254);
        z.extend_from_slice(&300u32.to_le_bytes());
        z.push(0);
        z.extend_from_slice(&[b'v'; 300]);
        z.push(255);
        let e = zipmap_parse(&z).unwrap();
        assert_eq!(e.len(), 4);
        assert_eq!(
            (&e[0][..], &e[1][..], e[3].len()),
            (&b"a"[..], &b"xy"[..], 300)
        );
        assert!(zipmap_parse(&z[..z.len() - 1]).is_err());
    }

    #[test]
    fn ziplist_entries() {
        // A ziplist of "ab", 12 (immediate), 300 (int16), written by hand.
        let mut z = vec![0u8; 10];
        z.extend_from_slice(&[0, 0x02, b'a', b'b']);
        z.extend_from_slice(&[4, 0xfd]);
        z.extend_from_slice(&[2, 0xc0, 0x2c, 0x01]);
        z.push(0xff);
        let n = z.len() as u32;
        z[..4].copy_from_slice(&n.to_le_bytes());
        z[8..10].copy_from_slice(&3u16.to_le_bytes());
        assert_eq!(
            ziplist_parse(&z).unwrap(),
            vec![b"ab".to_vec(), b"12".to_vec(), b"300".to_vec()]
        );
        assert!(ziplist_parse(&z[..z.len() - 2]).is_err());
    }
}
