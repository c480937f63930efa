//! Small helpers with Redis's exact semantics: number parsing, human sizes,
//! memory units, and a tiny deterministic PRNG.

/// Redis's `string2ll`: an optional `-`, then digits with no leading zero
/// (except `0` itself), no sign `+`, no spaces, no overflow.
/// `x` in decimal, written at the end of `buf` (no allocation).
pub fn decimal(x: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut u = x.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if x < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

pub fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if neg {
        if v > (i64::MAX as u64) + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// Redis's `strtoul`-based SCAN cursor parsing: an optional sign (`-n`
/// wraps like C's `strtoul`), then decimal digits, nothing else; overflow
/// is an error.
pub fn parse_cursor(s: &[u8]) -> Option<u64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', r)) => (true, r),
        Some((b'+', r)) => (false, r),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// The calling process's resident set in bytes (`/proc/self/statm`'s
/// second field, in pages), as Redis's `zmalloc_get_rss`.
pub fn process_rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * rustix::param::page_size() as u64)
}

/// The machine's memory in bytes (`/proc/meminfo`'s MemTotal), as
/// Redis's `total_system_memory`; 0 when it cannot be read.
pub fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// Redis's `bytesToHuman`.
pub fn bytes_to_human(n: u64) -> String {
    let d = n as f64;
    const K: f64 = 1024.0;
    if n < 1024 {
        format!("{n}B")
    } else if d < K * K {
        format!("{:.2}K", d / K)
    } else if d < K * K * K {
        format!("{:.2}M", d / (K * K))
    } else if d < K * K * K * K {
        format!("{:.2}G", d / (K * K * K))
    } else if d < K * K * K * K * K {
        format!("{:.2}T", d / (K * K * K * K))
    } else if d < K * K * K * K * K * K {
        format!("{:.2}P", d / (K * K * K * K * K))
    } else {
        format!("{n}B")
    }
}

/// Redis's `memtoull`: a number with an optional unit `b k kb m mb g gb`
/// (case-insensitive; `k` = 1000, `kb` = 1024).
pub fn memtoull(s: &[u8]) -> Option<u64> {
    let lower: Vec<u8> = s.to_ascii_lowercase();
    let split = lower
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let mul: u64 = match unit {
        b"" | b"b" => 1,
        b"k" => 1000,
        b"kb" => 1024,
        b"m" => 1000 * 1000,
        b"mb" => 1024 * 1024,
        b"g" => 1000 * 1000 * 1000,
        b"gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if num.is_empty() {
        return None;
    }
    let v: u64 = std::str::from_utf8(num).ok()?.parse().ok()?;
    v.checked_mul(mul)
}

/// xorshift64* — deterministic, seedable, good enough for key sampling.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_is_to_string() {
        let mut buf = [0u8; 20];
        for x in [0, 7, -1, 12, -12_345, i64::MAX, i64::MIN, 4096, -4096] {
            assert_eq!(decimal(x, &mut buf), x.to_string().as_bytes());
        }
    }

    #[test]
    fn string2ll_table() {
        for (s, v) in [
            ("0", Some(0)),
            ("-0", None),
            ("00", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("", None),
            ("-", None),
            ("123", Some(123)),
            ("-123", Some(-123)),
            ("9223372036854775807", Some(i64::MAX)),
            ("9223372036854775808", None),
            ("-9223372036854775808", Some(i64::MIN)),
            ("-9223372036854775809", None),
            ("1.5", None),
        ] {
            assert_eq!(string2ll(s.as_bytes()), v, "{s:?}");
        }
    }

    #[test]
    fn human_and_mem() {
        assert_eq!(bytes_to_human(1000), "1000B");
        assert_eq!(bytes_to_human(1655312), "1.58M");
        assert_eq!(bytes_to_human(2048), "2.00K");
        assert_eq!(memtoull(b"512mb"), Some(512 * 1024 * 1024));
        assert_eq!(memtoull(b"1GB"), Some(1 << 30));
        assert_eq!(memtoull(b"10k"), Some(10_000));
        assert_eq!(memtoull(b"1x"), None);
        assert_eq!(memtoull(b"mb"), None);
    }

    #[test]
    fn rng_below_in_range() {
        let mut r = Rng::new(7);
        for n in 1..100 {
            assert!(r.below(n) < n);
        }
    }
}
