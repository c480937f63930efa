//! `Range: bytes=...` decisions for responses of known length.
//!
//! Follows nginx's range filter: syntax errors and ranges that all start
//! past the end are 416; ranges that add up to more than the entity (or a
//! `0-` on an empty one) make nginx fall back to 200. gyre serves a single satisfiable range as 206;
//! several satisfiable ranges get the full 200 response (nginx would send
//! multipart/byteranges, which we do not implement).

/// What to send for a request with a `Range` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeDecision {
    /// Ignore the header: 200 with the full body.
    Full,
    /// 206 with bytes `start..end` (end exclusive);
    /// `Content-Range: bytes start-(end-1)/len`.
    Partial {
        /// First byte.
        start: u64,
        /// One past the last byte.
        end: u64,
    },
    /// 416 with `Content-Range: bytes */len`.
    NotSatisfiable,
}

impl RangeDecision {
    /// The `Content-Range` header value for this decision, if any.
    pub fn content_range(&self, len: u64) -> Option<String> {
        match self {
            RangeDecision::Full => None,
            RangeDecision::Partial { start, end } => {
                Some(format!("bytes {}-{}/{}", start, end - 1, len))
            }
            RangeDecision::NotSatisfiable => Some(format!("bytes */{len}")),
        }
    }
}

const MAX: u64 = i64::MAX as u64;

/// Decides how to answer `Range: value` for an entity of `len` bytes.
pub fn decide(value: &[u8], len: u64) -> RangeDecision {
    if value.len() < 7 || !value[..6].eq_ignore_ascii_case(b"bytes=") {
        return RangeDecision::Full;
    }
    let mut p = &value[6..];
    let mut found: Option<(u64, u64)> = None;
    let mut count = 0u32;
    let mut size: u64 = 0;
    loop {
        p = skip_spaces(p);
        let (start, end);
        if p.first() != Some(&b'-') {
            let Some((s, rest)) = number(p) else {
                return RangeDecision::NotSatisfiable;
            };
            p = skip_spaces(rest);
            let Some(rest) = p.strip_prefix(b"-") else {
                return RangeDecision::NotSatisfiable;
            };
            p = skip_spaces(rest);
            if p.is_empty() || p[0] == b',' {
                start = s;
                end = len;
            } else {
                let Some((e, rest)) = number(p) else {
                    return RangeDecision::NotSatisfiable;
                };
                p = skip_spaces(rest);
                if !(p.is_empty() || p[0] == b',') {
                    return RangeDecision::NotSatisfiable;
                }
                start = s;
                end = if e >= len { len } else { e + 1 };
            }
        } else {
            let Some((n, rest)) = number(&p[1..]) else {
                return RangeDecision::NotSatisfiable;
            };
            p = skip_spaces(rest);
            if !(p.is_empty() || p[0] == b',') {
                return RangeDecision::NotSatisfiable;
            }
            start = len.saturating_sub(n);
            end = len;
        }
        if start < end {
            size = size.saturating_add(end - start);
            count += 1;
            found = Some((start, end));
        } else if start == 0 {
            // nginx: "bytes=0-" on an empty entity, or "-0": send it all.
            return RangeDecision::Full;
        }
        match p.first() {
            Some(b',') => p = &p[1..],
            _ => break,
        }
    }
    match (count, found) {
        (0, _) | (_, None) => RangeDecision::NotSatisfiable,
        _ if size > len => RangeDecision::Full,
        (1, Some((start, end))) => RangeDecision::Partial { start, end },
        _ => RangeDecision::Full,
    }
}

fn skip_spaces(mut p: &[u8]) -> &[u8] {
    while p.first() == Some(&b' ') {
        p = &p[1..];
    }
    p
}

fn number(p: &[u8]) -> Option<(u64, &[u8])> {
    let digits = p.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in &p[..digits] {
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        if v > MAX {
            return None;
        }
    }
    Some((v, &p[digits..]))
}

#[cfg(test)]
mod tests {
    use super::RangeDecision::*;
    use super::*;

    #[test]
    fn table() {
        let cases: &[(&str, u64, RangeDecision)] = &[
            ("bytes=0-9", 100, Partial { start: 0, end: 10 }),
            (
                "bytes=10-",
                100,
                Partial {
                    start: 10,
                    end: 100,
                },
            ),
            (
                "bytes=-10",
                100,
                Partial {
                    start: 90,
                    end: 100,
                },
            ),
            // nginx answers 206 even when the range covers everything.
            ("bytes=-200", 100, Partial { start: 0, end: 100 }),
            ("bytes=0-", 100, Partial { start: 0, end: 100 }),
            ("bytes=0-99", 100, Partial { start: 0, end: 100 }),
            ("bytes=0-1000", 100, Partial { start: 0, end: 100 }),
            // Overlapping ranges larger than the entity: nginx sends 200.
            ("bytes=0-1,0-99", 100, Full),
            (
                "bytes=99-",
                100,
                Partial {
                    start: 99,
                    end: 100,
                },
            ),
            (
                "bytes=50-1000",
                100,
                Partial {
                    start: 50,
                    end: 100,
                },
            ),
            ("bytes=100-", 100, NotSatisfiable),
            ("bytes=200-300", 100, NotSatisfiable),
            ("bytes=5-3", 100, NotSatisfiable),
            ("bytes=abc", 100, NotSatisfiable),
            ("bytes=-", 100, NotSatisfiable),
            ("bytes=1-2x", 100, NotSatisfiable),
            ("bytes=99999999999999999999-", 100, NotSatisfiable),
            ("bytes= 1 - 2 ", 100, Partial { start: 1, end: 3 }),
            ("BYTES=1-2", 100, Partial { start: 1, end: 3 }),
            ("bytes=0-1,5-6", 100, Full),
            ("bytes=0-1, 500-600", 100, Partial { start: 0, end: 2 }),
            ("bytes=-0", 100, NotSatisfiable),
            ("bytes=0-0", 0, Full),
            ("items=0-1", 100, Full),
            ("bytes=", 100, Full),
        ];
        for (v, len, want) in cases {
            assert_eq!(decide(v.as_bytes(), *len), *want, "{v} len {len}");
        }
    }

    #[test]
    fn content_range_values() {
        assert_eq!(
            Partial { start: 0, end: 3 }.content_range(6).as_deref(),
            Some("bytes 0-2/6")
        );
        assert_eq!(
            NotSatisfiable.content_range(6).as_deref(),
            Some("bytes */6")
        );
    }
}
