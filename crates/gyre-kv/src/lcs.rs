//! LCS (Redis 7.0's `lcsCommand` in `t_string.c`): the longest common
//! subsequence of two strings by the classic dynamic programme, its length,
//! and the matching ranges IDX reports, with Redis's option checks and its
//! limit on the table (`proto-max-bulk-len` bytes).

use crate::util::string2ll;

use crate::bitops::{ERR_NOT_INT, ERR_SYNTAX};

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

fn parse_ll(arg: &[u8]) -> Result<i64, &'static str> {
    string2ll(arg).ok_or(ERR_NOT_INT)
}

pub const ERR_LCS_TOO_LONG: &str = "ERR String too long for LCS";
pub const ERR_LCS_MEMORY: &str =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
pub const ERR_LCS_LEN_IDX: &str =
    "ERR If you want both the length and indexes, please just use IDX.";

/// LCS's options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LcsOpts {
    pub len: bool,
    pub idx: bool,
    pub withmatchlen: bool,
    pub minmatchlen: i64,
}

/// Parse LCS's options (after the two keys).
pub fn parse_lcs(args: &[&[u8]]) -> Result<LcsOpts, &'static str> {
    let mut o = LcsOpts::default();
    let mut j = 0;
    while j < args.len() {
        let a = args[j];
        let more = args.len() - 1 - j;
        if eq(a, "idx") {
            o.idx = true;
        } else if eq(a, "len") {
            o.len = true;
        } else if eq(a, "withmatchlen") {
            o.withmatchlen = true;
        } else if eq(a, "minmatchlen") && more > 0 {
            o.minmatchlen = parse_ll(args[j + 1])?.max(0);
            j += 1;
        } else {
            return Err(ERR_SYNTAX);
        }
        j += 1;
    }
    if o.idx && o.len {
        return Err(ERR_LCS_LEN_IDX);
    }
    Ok(o)
}

/// One IDX match: inclusive ranges in `a` and in `b`, and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LcsMatch {
    pub a: (u32, u32),
    pub b: (u32, u32),
    pub len: u32,
}

/// The LCS of `a` and `b`: the string, its length, and the matches (from
/// the end of the strings backwards, as Redis emits them) of at least
/// `minmatchlen` bytes. The DP table is refused, as in Redis, when it
/// would take more than `max_bulk` bytes.
pub fn lcs(
    a: &[u8],
    b: &[u8],
    minmatchlen: i64,
    max_bulk: u64,
) -> Result<(Vec<u8>, Vec<LcsMatch>), &'static str> {
    if a.len() as u64 >= u64::from(u32::MAX - 1) || b.len() as u64 >= u64::from(u32::MAX - 1) {
        return Err(ERR_LCS_TOO_LONG);
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells.saturating_mul(4) > max_bulk {
        return Err(ERR_LCS_MEMORY);
    }
    let w = blen + 1;
    let mut t = vec![0u32; (alen + 1) * w];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[alen * w + blen] as usize;
    let mut out = vec![0u8; total];
    let mut idx = total;
    let mut matches = Vec::new();
    // Walk back from the end, tracking the current contiguous match.
    let (mut i, mut j) = (alen, blen);
    let mut cur: Option<((u32, u32), (u32, u32))> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            out[idx - 1] = a[i - 1];
            let (ai, bj) = ((i - 1) as u32, (j - 1) as u32);
            cur = Some(match cur {
                None => ((ai, ai), (bj, bj)),
                Some(((_, ae), (_, be))) => ((ai, ae), (bj, be)),
            });
            if ai == 0 || bj == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = cur.is_some();
        }
        if emit {
            if let Some(((as_, ae), (bs, be))) = cur.take() {
                let len = ae - as_ + 1;
                if minmatchlen == 0 || i64::from(len) >= minmatchlen {
                    matches.push(LcsMatch {
                        a: (as_, ae),
                        b: (bs, be),
                        len,
                    });
                }
            }
        }
    }
    Ok((out, matches))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 512 * 1024 * 1024;

    fn args(v: &[&'static str]) -> Vec<&'static [u8]> {
        v.iter().map(|s| s.as_bytes()).collect()
    }

    #[test]
    fn lcs_matches_redis_example() {
        // The example of Redis's LCS documentation.
        let (s, m) = lcs(b"ohmytext", b"mynewtext", 0, MAX).unwrap();
        assert_eq!(s, b"mytext");
        assert_eq!(
            m,
            vec![
                LcsMatch {
                    a: (4, 7),
                    b: (5, 8),
                    len: 4
                },
                LcsMatch {
                    a: (2, 3),
                    b: (0, 1),
                    len: 2
                },
            ]
        );
        let (_, m) = lcs(b"ohmytext", b"mynewtext", 4, MAX).unwrap();
        assert_eq!(m.len(), 1);
        let (s, m) = lcs(b"", b"abc", 0, MAX).unwrap();
        assert!(s.is_empty() && m.is_empty());
        assert_eq!(
            lcs(&[b'x'; 1000], &[b'x'; 1000], 0, 1 << 20),
            Err(ERR_LCS_MEMORY)
        );
        assert_eq!(parse_lcs(&args(&["LEN", "IDX"])), Err(ERR_LCS_LEN_IDX));
        assert_eq!(parse_lcs(&args(&["MINMATCHLEN"])), Err(ERR_SYNTAX));
        assert_eq!(
            parse_lcs(&args(&["MINMATCHLEN", "-5"])).map(|o| o.minmatchlen),
            Ok(0)
        );
        assert_eq!(parse_lcs(&args(&["minmatchlen", "x"])), Err(ERR_NOT_INT));
    }
}
