//! Sorted-set scores as text: parsing as Redis's `string2d` / `strtod` does,
//! and printing as Redis 7.0's `addReplyDouble` (`%.17g`, `inf`, `-inf`).
//!
//! Scores are IEEE doubles. Redis parses them with `strtod` and refuses an
//! empty string, leading space, trailing garbage, NaN, and results that
//! overflowed to ±HUGE_VAL or underflowed to zero (`ERANGE`). Rust's
//! `f64::from_str` accepts the same decimal syntax (optional sign, digits,
//! `.`, exponent, `inf`/`infinity`/`nan` in any case), rounds correctly,
//! and reports neither overflow nor underflow, so those two are detected
//! here from the text ([`strtod`] finds the longest valid prefix as C's
//! does, and hands its decimal part to Rust). Hexadecimal floats
//! (`0x1p3`), which `strtod` also takes, are parsed by `parse_hex`. Range
//! bounds ([`ScoreBound`], Redis's `zslParseRange`) only ask that strtod
//! used the whole text and gave no NaN: `""` and `(` are 0, `" 1"` is 1,
//! `1e400` is inf.

/// Redis's `string2d`: the whole text is one `strtod` number, no leading
/// space, not NaN, no overflow to ±HUGE_VAL, no underflow to zero.
pub fn parse(s: &[u8]) -> Option<f64> {
    if s.first().is_none_or(|c| is_space(*c)) {
        return None;
    }
    let (v, used, erange) = strtod(s);
    if used != s.len() || v.is_nan() || erange && (v.is_infinite() || v == 0.0) {
        return None;
    }
    Some(v)
}

/// C's `isspace` in the C locale.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// glibc's `strtod` on the longest valid prefix: `(value, bytes used,
/// ERANGE)`. Nothing valid gives `(0, 0, false)` as C does (end pointer
/// at the start). ERANGE is reported for overflow and for a non-zero
/// number that rounds to zero (what Redis's checks look at).
pub fn strtod(s: &[u8]) -> (f64, usize, bool) {
    let mut i = s.iter().take_while(|&&c| is_space(c)).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let signed = |v: f64| if neg { -v } else { v };
    let rest = &s[i..];
    let lower: Vec<u8> = rest.iter().take(8).map(u8::to_ascii_lowercase).collect();
    if lower.starts_with(b"infinity") {
        return (signed(f64::INFINITY), i + 8, false);
    }
    if lower.starts_with(b"inf") {
        return (signed(f64::INFINITY), i + 3, false);
    }
    if lower.starts_with(b"nan") {
        let mut n = i + 3;
        // `nan(chars)` takes the parenthesized part too.
        if s.get(n) == Some(&b'(') {
            if let Some(k) = s[n + 1..]
                .iter()
                .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))
            {
                if s[n + 1 + k] == b')' {
                    n += k + 2;
                }
            }
        }
        return (f64::NAN, n, false);
    }
    if lower.len() >= 2 && lower[0] == b'0' && lower[1] == b'x' {
        let hex = &rest[2..];
        let n = hex_prefix_len(hex);
        if n > 0 {
            let (v, erange) = parse_hex(&hex[..n]);
            return (signed(v), i + 2 + n, erange);
        }
        // "0x" with no hex digits: the "0" alone.
        return (signed(0.0), i + 1, false);
    }
    let n = dec_prefix_len(rest);
    if n == 0 {
        return (0.0, 0, false);
    }
    let text = std::str::from_utf8(&rest[..n]).unwrap_or("0");
    let v: f64 = text.parse().unwrap_or(0.0);
    let erange = v.is_infinite() || v == 0.0 && mantissa_nonzero(text);
    (signed(v), i + n, erange)
}

/// Length of the longest `digits [. digits] [e [sign] digits]` prefix with
/// at least one mantissa digit (0 if none).
fn dec_prefix_len(s: &[u8]) -> usize {
    let digits = |from: usize| s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut n = digits(0);
    let mut mant = n;
    if s.get(n) == Some(&b'.') {
        let f = digits(n + 1);
        mant += f;
        n += 1 + f;
    }
    if mant == 0 {
        return 0;
    }
    if matches!(s.get(n), Some(b'e' | b'E')) {
        let mut k = n + 1;
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        let e = digits(k);
        if e > 0 {
            n = k + e;
        }
    }
    n
}

/// Length of the longest `hexdigits [. hexdigits] [p [sign] digits]`
/// prefix with at least one mantissa digit.
fn hex_prefix_len(s: &[u8]) -> usize {
    let hex = |from: usize| {
        s[from..]
            .iter()
            .take_while(|c| c.is_ascii_hexdigit())
            .count()
    };
    let mut n = hex(0);
    let mut mant = n;
    if s.get(n) == Some(&b'.') {
        let f = hex(n + 1);
        mant += f;
        n += 1 + f;
    }
    if mant == 0 {
        return 0;
    }
    if matches!(s.get(n), Some(b'p' | b'P')) {
        let mut k = n + 1;
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        let e = s[k..].iter().take_while(|c| c.is_ascii_digit()).count();
        if e > 0 {
            n = k + e;
        }
    }
    n
}

/// Any non-zero digit before the exponent?
fn mantissa_nonzero(body: &str) -> bool {
    body.bytes()
        .take_while(|&c| c != b'e' && c != b'E')
        .any(|c| c.is_ascii_digit() && c != b'0')
}

/// The part of a C hexadecimal float after `0x` (already validated by
/// [`hex_prefix_len`]): `(value, ERANGE)`, correctly rounded (to nearest,
/// ties to even) like glibc's `strtod`.
fn parse_hex(s: &[u8]) -> (f64, bool) {
    let (mant, exp) = match s.iter().position(|&c| c == b'p' || c == b'P') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut bits: u64 = 0; // the first 57..60 significant bits
    let mut sticky = false;
    let mut shift: i64 = 0; // binary exponent adjustment
    let mut seen_point = false;
    for &c in mant {
        if c == b'.' {
            seen_point = true;
            continue;
        }
        let d = u64::from((c as char).to_digit(16).unwrap_or(0));
        if bits >> 56 == 0 {
            bits = bits << 4 | d;
            if seen_point {
                shift -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_point {
                shift += 4;
            }
        }
    }
    if let Some(e) = exp {
        let t = std::str::from_utf8(e).unwrap_or("0");
        let huge = if t.starts_with('-') {
            -100_000
        } else {
            100_000
        };
        let v: i64 = t.parse().unwrap_or(huge);
        shift += v.clamp(-100_000, 100_000);
    }
    if bits == 0 {
        return (0.0, false);
    }
    // value = m * 2^(e2 - 64) with m's top bit set.
    let lz = i64::from(bits.leading_zeros());
    let m = bits << lz;
    let e2 = shift - lz + 64;
    let exp_unbiased = e2 - 1;
    if exp_unbiased > 1023 {
        return (f64::INFINITY, true);
    }
    // Bits kept: 53 for normal numbers, fewer for subnormals.
    let keep = if exp_unbiased < -1022 {
        53 - (-1022 - exp_unbiased)
    } else {
        53
    };
    if keep <= 0 {
        // At most half the smallest subnormal: rounds to it or to zero.
        let up = keep == 0 && (m > 1 << 63 || m == 1 << 63 && sticky);
        return if up {
            (f64::from_bits(1), true)
        } else {
            (0.0, true)
        };
    }
    let drop = 64 - keep as u32;
    let mut q = m >> drop;
    let rem = m & ((1u64 << drop) - 1);
    let halfway = 1u64 << (drop - 1);
    if rem > halfway || rem == halfway && (sticky || q & 1 == 1) {
        q += 1;
    }
    let v = q as f64 * pow2(e2 - 64 + i64::from(drop));
    (v, v.is_infinite())
}

fn pow2(e: i64) -> f64 {
    // Two steps so that neither factor over- or underflows on its own.
    let half = e / 2;
    f64::powi(2.0, half as i32) * f64::powi(2.0, (e - half) as i32)
}

/// `printf("%.17g", v)` — what Redis 7.0 replies for a score; `inf` and
/// `-inf` for the infinities.
pub fn format(v: f64) -> String {
    let mut s = String::new();
    format_into(&mut s, v);
    s
}

/// [`format()`] appending to `out`.
pub fn format_into(out: &mut String, v: f64) {
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "inf" } else { "-inf" });
        return;
    }
    if v.is_nan() {
        out.push_str("nan");
        return;
    }
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    let mut digits = [0u8; 20];
    if let Some(d) = integral(v, &mut digits) {
        out.push_str(std::str::from_utf8(d).unwrap_or("0"));
        return;
    }
    // Rust's `{:e}` with 16 fractional digits rounds exactly to 17
    // significant digits, which is the rounding `%.17g` starts from.
    let sci = format!("{:.16e}", v);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mant),
    };
    let digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    if neg {
        out.push('-');
    }
    if (-4..17).contains(&x) {
        // Fixed notation with 17 - 1 - x decimals, trailing zeros cut.
        if x >= 0 {
            let int_len = x as usize + 1;
            out.extend(digits[..int_len].iter().map(|&d| d as char));
            let frac = trim_zeros(&digits[int_len..]);
            if !frac.is_empty() {
                out.push('.');
                out.extend(frac.iter().map(|&d| d as char));
            }
        } else {
            out.push_str("0.");
            for _ in 0..(-x - 1) {
                out.push('0');
            }
            out.extend(trim_zeros(&digits).iter().map(|&d| d as char));
        }
    } else {
        out.push(digits[0] as char);
        let frac = trim_zeros(&digits[1..]);
        if !frac.is_empty() {
            out.push('.');
            out.extend(frac.iter().map(|&d| d as char));
        }
        out.push('e');
        out.push(if x < 0 { '-' } else { '+' });
        let a = x.unsigned_abs();
        if a < 10 {
            out.push('0');
        }
        out.push_str(&a.to_string());
    }
}

/// Integers below 10^17 print as their digits under `%.17g` (the common
/// case, no float formatting): `v`'s digits in `buf`, if it is one.
pub fn integral(v: f64, buf: &mut [u8; 20]) -> Option<&[u8]> {
    if v.fract() != 0.0 || v.abs() >= 1e17 || v == 0.0 {
        return None;
    }
    let neg = v < 0.0;
    let mut n = v.abs() as u64;
    let mut i = buf.len();
    while n > 0 {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    if neg {
        i -= 1;
        buf[i] = b'-';
    }
    Some(&buf[i..])
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let n = d.iter().rposition(|&c| c != b'0').map_or(0, |i| i + 1);
    &d[..n]
}

/// One end of a score range (`ZRANGEBYSCORE min max`): a value and whether
/// it is exclusive (`(1.5`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreBound {
    pub value: f64,
    pub exclusive: bool,
}

impl ScoreBound {
    /// Redis's `zslParseRange` for one end: `(` makes it exclusive; the
    /// rest is a float (`-inf`, `+inf` included); NaN is refused.
    pub fn parse(s: &[u8]) -> Option<ScoreBound> {
        let (exclusive, t) = match s.first() {
            Some(b'(') => (true, &s[1..]),
            _ => (false, s),
        };
        // `zslParseRange` checks only that strtod used everything and the
        // value is not NaN: "" and "(" are 0, " 1" is 1, 1e400 is inf.
        let (v, used, _) = strtod(t);
        if used != t.len() || v.is_nan() {
            return None;
        }
        Some(ScoreBound {
            value: v,
            exclusive,
        })
    }

    /// Is `v` at or above this bound taken as a minimum?
    pub fn above_min(&self, v: f64) -> bool {
        if self.exclusive {
            v > self.value
        } else {
            v >= self.value
        }
    }

    /// Is `v` at or below this bound taken as a maximum?
    pub fn below_max(&self, v: f64) -> bool {
        if self.exclusive {
            v < self.value
        } else {
            v <= self.value
        }
    }
}

/// One end of a lex range (`ZRANGEBYLEX min max`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    MinusInf,
    /// `+`: above every member.
    PlusInf,
    /// `[m` (inclusive) or `(m` (exclusive).
    Member { m: Vec<u8>, exclusive: bool },
}

impl LexBound {
    /// Redis's `zslParseLexRangeItem`.
    pub fn parse(s: &[u8]) -> Option<LexBound> {
        match s.first()? {
            b'+' if s.len() == 1 => Some(LexBound::PlusInf),
            b'-' if s.len() == 1 => Some(LexBound::MinusInf),
            b'(' => Some(LexBound::Member {
                m: s[1..].to_vec(),
                exclusive: true,
            }),
            b'[' => Some(LexBound::Member {
                m: s[1..].to_vec(),
                exclusive: false,
            }),
            _ => None,
        }
    }

    /// Is `m` at or above this bound taken as a minimum?
    pub fn above_min(&self, x: &[u8]) -> bool {
        match self {
            LexBound::MinusInf => true,
            LexBound::PlusInf => false,
            LexBound::Member { m, exclusive } => {
                if *exclusive {
                    x > m.as_slice()
                } else {
                    x >= m.as_slice()
                }
            }
        }
    }

    /// Is `m` at or below this bound taken as a maximum?
    pub fn below_max(&self, x: &[u8]) -> bool {
        match self {
            LexBound::MinusInf => false,
            LexBound::PlusInf => true,
            LexBound::Member { m, exclusive } => {
                if *exclusive {
                    x < m.as_slice()
                } else {
                    x <= m.as_slice()
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_matches_printf_17g() {
        // Figures printed by redis-server 7.0.15 (ZRANGE WITHSCORES).
        for (v, s) in [
            (0.1, "0.10000000000000001"),
            (1.1, "1.1000000000000001"),
            (1e20, "1e+20"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e-300, "1e-300"),
            (3.0, "3"),
            (1e15, "1000000000000000"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (4503599627370496.0, "4503599627370496"),
            (2.5e-5, "2.5000000000000001e-05"),
            (1e300, "1.0000000000000001e+300"),
            (5.1, "5.0999999999999996"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (-2.5, "-2.5"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (-0.0, "-0"),
            (0.0, "0"),
            (f64::MAX, "1.7976931348623157e+308"),
            (99999999999999984.0, "99999999999999984"),
            (1e17, "1e+17"),
            (-12345.0, "-12345"),
            (9007199254740993.0, "9007199254740992"),
            (5e-324, "4.9406564584124654e-324"),
        ] {
            assert_eq!(format(v), s, "{v:e}");
        }
    }

    #[test]
    fn parse_as_strtod_with_redis_checks() {
        for (s, v) in [
            ("1", Some(1.0)),
            ("-1.5", Some(-1.5)),
            ("+2", Some(2.0)),
            (".5", Some(0.5)),
            ("5.", Some(5.0)),
            ("1e3", Some(1000.0)),
            ("inf", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("+INF", Some(f64::INFINITY)),
            ("0x10", Some(16.0)),
            ("0x1p-2", Some(0.25)),
            ("-0X1.8P1", Some(-3.0)),
            ("0e-400", Some(0.0)),
            ("1e-320", Some(1e-320)),
        ] {
            assert_eq!(parse(s.as_bytes()), v, "{s}");
        }
        for s in [
            "", " 1", "1 ", "nan", "-nan", "abc", "1e", "1e400", "-1e400", "1e-400", "--1", "+-1",
            "0x", "1,5", "0xg",
        ] {
            assert_eq!(parse(s.as_bytes()), None, "{s:?}");
        }
        assert!(parse(b"-0").is_some_and(|v| v == 0.0 && v.is_sign_negative()));
    }

    #[test]
    fn hex_rounding_and_limits() {
        assert_eq!(parse(b"0x1p1023"), Some(f64::powi(2.0, 1023)));
        assert_eq!(parse(b"0x1p1024"), None);
        assert_eq!(parse(b"0x1p-1074"), Some(5e-324));
        assert_eq!(parse(b"0x1p-1080"), None);
        // 2^53 + 1 rounds to even (2^53); 2^53 + 3 to 2^53 + 4.
        assert_eq!(parse(b"0x20000000000001"), Some(9007199254740992.0));
        assert_eq!(parse(b"0x20000000000003"), Some(9007199254740996.0));
        assert_eq!(parse(b"0x1.fffffffffffff8p0"), Some(2.0));
    }

    #[test]
    fn bounds() {
        let b = ScoreBound::parse(b"(1.5").unwrap();
        assert!(b.exclusive && b.value == 1.5);
        assert!(!b.above_min(1.5) && b.above_min(1.6) && b.below_max(1.4));
        assert_eq!(ScoreBound::parse(b"-inf").unwrap().value, f64::NEG_INFINITY);
        assert_eq!(ScoreBound::parse(b"(+inf").unwrap().value, f64::INFINITY);
        assert_eq!(ScoreBound::parse(b"1e400").unwrap().value, f64::INFINITY);
        assert!(ScoreBound::parse(b"nan").is_none());
        assert_eq!(ScoreBound::parse(b"(").unwrap().value, 0.0);
        assert_eq!(ScoreBound::parse(b"").unwrap().value, 0.0);
        assert_eq!(ScoreBound::parse(b" 1").unwrap().value, 1.0);
        assert!(ScoreBound::parse(b"1 ").is_none());
        assert!(ScoreBound::parse(b" (1").is_none());
        assert!(ScoreBound::parse(b"[1").is_none());
        assert_eq!(LexBound::parse(b"-"), Some(LexBound::MinusInf));
        assert_eq!(LexBound::parse(b"+"), Some(LexBound::PlusInf));
        assert!(LexBound::parse(b"a").is_none());
        assert!(LexBound::parse(b"").is_none());
        assert!(LexBound::parse(b"+a").is_none());
        let l = LexBound::parse(b"(b").unwrap();
        assert!(l.above_min(b"c") && !l.above_min(b"b") && l.below_max(b"a"));
        let l = LexBound::parse(b"[").unwrap();
        assert!(l.above_min(b"") && l.below_max(b""));
    }
}
