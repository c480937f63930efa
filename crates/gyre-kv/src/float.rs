//! INCRBYFLOAT arithmetic with Redis's exact results.
//!
//! Redis parses both operands with `strtold`, adds them as x86-64 `long
//! double` (80-bit extended: 64-bit significand) and prints the sum with
//! `%.17Lf`, trimming trailing zeros. Doing the same with `f64` gives other
//! digits (`10 + 0.1` would print `10.09999999999999964`), so this module
//! emulates the 80-bit format in software: correctly rounded decimal and
//! hexadecimal parsing, correctly rounded addition, and exact fixed-point
//! printing, with a tiny big-integer type.

use std::cmp::Ordering;

/// Redis's `MAX_LONG_DOUBLE_CHARS`: longer operands are not valid floats.
pub const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

// ---------------------------------------------------------------------------
// Minimal unsigned big integer, little-endian base 2^32.
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bitlen(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros()),
        }
    }

    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        self.0.get(limb).is_some_and(|l| (l >> (i % 32)) & 1 == 1)
    }

    /// Any bit below position `i` set?
    fn any_below(&self, i: u64) -> bool {
        let full = (i / 32) as usize;
        if self.0.iter().take(full).any(|&l| l != 0) {
            return true;
        }
        let part = (i % 32) as u32;
        part > 0
            && self
                .0
                .get(full)
                .is_some_and(|&l| l & ((1u32 << part) - 1) != 0)
    }

    fn mul_small_add(&mut self, m: u32, a: u32) {
        let mut carry = u64::from(a);
        for l in self.0.iter_mut() {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    fn pow10(n: u64) -> Big {
        let mut b = Big::from_u64(1);
        let mut left = n;
        while left >= 9 {
            b.mul_small_add(1_000_000_000, 0);
            left -= 9;
        }
        for _ in 0..left {
            b.mul_small_add(10, 0);
        }
        b
    }

    fn mul(&self, o: &Big) -> Big {
        let mut r = vec![0u32; self.0.len() + o.0.len()];
        for (i, &a) in self.0.iter().enumerate() {
            let mut carry = 0u64;
            for (j, &b) in o.0.iter().enumerate() {
                let v = u64::from(a) * u64::from(b) + u64::from(r[i + j]) + carry;
                r[i + j] = v as u32;
                carry = v >> 32;
            }
            let mut k = i + o.0.len();
            while carry > 0 && k < r.len() {
                let v = u64::from(r[k]) + carry;
                r[k] = v as u32;
                carry = v >> 32;
                k += 1;
            }
        }
        let mut b = Big(r);
        b.trim();
        b
    }

    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big::default();
        }
        let limbs = (n / 32) as usize;
        let bits = (n % 32) as u32;
        let mut r = vec![0u32; limbs];
        if bits == 0 {
            r.extend_from_slice(&self.0);
        } else {
            let mut carry = 0u32;
            for &l in &self.0 {
                r.push((l << bits) | carry);
                carry = l >> (32 - bits);
            }
            r.push(carry);
        }
        let mut b = Big(r);
        b.trim();
        b
    }

    fn shr(&self, n: u64) -> Big {
        let limbs = (n / 32) as usize;
        if limbs >= self.0.len() {
            return Big::default();
        }
        let bits = (n % 32) as u32;
        let src = &self.0[limbs..];
        let mut r = Vec::with_capacity(src.len());
        for (i, &l) in src.iter().enumerate() {
            let hi = if bits == 0 {
                0
            } else {
                src.get(i + 1).map_or(0, |&h| h << (32 - bits))
            };
            r.push(if bits == 0 { l } else { (l >> bits) | hi });
        }
        let mut b = Big(r);
        b.trim();
        b
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn add(&self, o: &Big) -> Big {
        let n = self.0.len().max(o.0.len());
        let mut r = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let v = u64::from(*self.0.get(i).unwrap_or(&0))
                + u64::from(*o.0.get(i).unwrap_or(&0))
                + carry;
            r.push(v as u32);
            carry = v >> 32;
        }
        r.push(carry as u32);
        let mut b = Big(r);
        b.trim();
        b
    }

    /// `self - o`, requires `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut r = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut v = i64::from(self.0[i]) - i64::from(*o.0.get(i).unwrap_or(&0)) - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            r.push(v as u32);
        }
        let mut b = Big(r);
        b.trim();
        b
    }

    /// `(self / d, self % d != 0)`, `d` non-zero. Cost is proportional to the
    /// quotient's bit length times `d`'s size.
    fn div_sticky(&self, d: &Big) -> (Big, bool) {
        let nb = self.bitlen();
        let db = d.bitlen();
        if nb < db {
            return (Big::default(), !self.is_zero());
        }
        // Start with the top db-1 bits (certainly < d).
        let start = nb - (db - 1);
        let mut r = self.shr(start);
        let mut q = Big::default();
        let mut i = start;
        while i > 0 {
            i -= 1;
            r = r.shl(1);
            if self.bit(i) {
                r.mul_small_add(1, 1);
            }
            q = q.shl(1);
            if r.cmp(d) != Ordering::Less {
                r = r.sub(d);
                q.mul_small_add(1, 1);
            }
        }
        (q, !r.is_zero())
    }

    fn low_u64(&self) -> u64 {
        u64::from(*self.0.first().unwrap_or(&0)) | (u64::from(*self.0.get(1).unwrap_or(&0)) << 32)
    }

    fn to_decimal(&self) -> String {
        if self.is_zero() {
            return "0".to_string();
        }
        let mut chunks = Vec::new();
        let mut cur = self.0.clone();
        while !cur.is_empty() {
            let mut rem = 0u64;
            for l in cur.iter_mut().rev() {
                let v = (rem << 32) | u64::from(*l);
                *l = (v / 1_000_000_000) as u32;
                rem = v % 1_000_000_000;
            }
            while cur.last() == Some(&0) {
                cur.pop();
            }
            chunks.push(rem as u32);
        }
        let mut s = String::new();
        for (i, c) in chunks.iter().rev().enumerate() {
            if i == 0 {
                s.push_str(&c.to_string());
            } else {
                s.push_str(&format!("{c:09}"));
            }
        }
        s
    }
}

// ---------------------------------------------------------------------------
// 80-bit extended values
// ---------------------------------------------------------------------------

/// Smallest binary exponent of the significand's last bit (subnormals).
const MIN_EXP: i64 = -16445;
/// Largest binary exponent of the significand's last bit.
const MAX_EXP: i64 = 16320;

/// An x87 extended-precision value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum F80 {
    Zero {
        neg: bool,
    },
    /// `mant * 2^exp`; `mant` has its top bit set unless subnormal.
    Finite {
        neg: bool,
        mant: u64,
        exp: i64,
    },
    Inf {
        neg: bool,
    },
    NaN,
}

/// Outcome of rounding an exact value: the value plus whether it over- or
/// underflowed (strtold's ERANGE).
struct Rounded {
    v: F80,
    overflow: bool,
    underflow_to_zero: bool,
}

/// Round `big * 2^exp2` (plus a sticky bit strictly below `big`'s last bit,
/// only meaningful when `big` has at least 66 bits) to 64 significant bits,
/// ties to even.
fn round(neg: bool, big: &Big, exp2: i64, sticky: bool) -> Rounded {
    let bl = big.bitlen() as i64;
    if bl == 0 {
        return Rounded {
            v: F80::Zero { neg },
            overflow: false,
            underflow_to_zero: sticky,
        };
    }
    let mut shift = bl - 64;
    let mut e = exp2 + shift;
    if e < MIN_EXP {
        shift += MIN_EXP - e;
        e = MIN_EXP;
    }
    let mut mant: u64;
    if shift > 0 {
        let s = shift as u64;
        mant = big.shr(s).low_u64();
        let half = big.bit(s - 1);
        let rest = sticky || big.any_below(s - 1);
        if half && (rest || mant & 1 == 1) {
            match mant.checked_add(1) {
                Some(m) => mant = m,
                None => {
                    mant = 1 << 63;
                    e += 1;
                }
            }
        }
    } else {
        mant = big.low_u64() << (-shift) as u32;
    }
    if mant == 0 {
        return Rounded {
            v: F80::Zero { neg },
            overflow: false,
            underflow_to_zero: true,
        };
    }
    if e > MAX_EXP {
        return Rounded {
            v: F80::Inf { neg },
            overflow: true,
            underflow_to_zero: false,
        };
    }
    Rounded {
        v: F80::Finite { neg, mant, exp: e },
        overflow: false,
        underflow_to_zero: false,
    }
}

impl F80 {
    pub fn is_finite(&self) -> bool {
        matches!(self, F80::Zero { .. } | F80::Finite { .. })
    }

    /// Redis's `string2ld`: the whole string must be a `strtold` number, no
    /// leading space, no NaN, and no overflow or underflow to zero.
    pub fn parse_redis(s: &[u8]) -> Option<F80> {
        if s.is_empty() || s.len() >= MAX_LONG_DOUBLE_CHARS {
            return None;
        }
        let (neg, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let lower = body.to_ascii_lowercase();
        if lower == b"inf" || lower == b"infinity" {
            return Some(F80::Inf { neg });
        }
        let r = if lower.starts_with(b"0x") {
            parse_hex(neg, &body[2..])?
        } else {
            parse_dec(neg, body)?
        };
        if r.overflow || r.underflow_to_zero {
            return None;
        }
        Some(r.v)
    }

    /// Correctly rounded sum.
    pub fn plus(self, o: F80) -> F80 {
        match (self, o) {
            (F80::NaN, _) | (_, F80::NaN) => F80::NaN,
            (F80::Inf { neg: a }, F80::Inf { neg: b }) => {
                if a == b {
                    self
                } else {
                    F80::NaN
                }
            }
            (F80::Inf { .. }, _) => self,
            (_, F80::Inf { .. }) => o,
            (F80::Zero { neg: a }, F80::Zero { neg: b }) => F80::Zero { neg: a && b },
            (F80::Zero { .. }, _) => o,
            (_, F80::Zero { .. }) => self,
            (
                F80::Finite {
                    neg: na,
                    mant: ma,
                    exp: ea,
                },
                F80::Finite {
                    neg: nb,
                    mant: mb,
                    exp: eb,
                },
            ) => {
                // Far apart: the smaller one is far below half an ulp.
                if ea - eb > 200 {
                    return self;
                }
                if eb - ea > 200 {
                    return o;
                }
                let e = ea.min(eb);
                let a = Big::from_u64(ma).shl((ea - e) as u64);
                let b = Big::from_u64(mb).shl((eb - e) as u64);
                if na == nb {
                    return round(na, &a.add(&b), e, false).v;
                }
                match a.cmp(&b) {
                    Ordering::Equal => F80::Zero { neg: false },
                    Ordering::Greater => round(na, &a.sub(&b), e, false).v,
                    Ordering::Less => round(nb, &b.sub(&a), e, false).v,
                }
            }
        }
    }

    /// `printf("%.17Lf")`, exact, ties to even. Only for finite values.
    pub fn format_fixed17(&self) -> String {
        let (neg, q) = match *self {
            F80::Zero { neg } => (neg, Big::default()),
            F80::Finite { neg, mant, exp } => {
                let x = Big::from_u64(mant).mul(&Big::pow10(17));
                if exp >= 0 {
                    (neg, x.shl(exp as u64))
                } else {
                    let s = (-exp) as u64;
                    let mut q = x.shr(s);
                    let half = x.bit(s - 1);
                    let rest = x.any_below(s - 1);
                    if half && (rest || q.bit(0)) {
                        q.mul_small_add(1, 1);
                    }
                    (neg, q)
                }
            }
            F80::Inf { neg } => return if neg { "-inf".into() } else { "inf".into() },
            F80::NaN => return "nan".into(),
        };
        let mut digits = q.to_decimal();
        while digits.len() < 18 {
            digits.insert(0, '0');
        }
        let point = digits.len() - 17;
        let mut s = String::with_capacity(digits.len() + 2);
        if neg {
            s.push('-');
        }
        s.push_str(&digits[..point]);
        s.push('.');
        s.push_str(&digits[point..]);
        s
    }

    /// Redis's `ld2string(..., LD_STR_HUMAN)`: `%.17Lf` without trailing
    /// zeros (and point), `-0` shown as `0`.
    pub fn to_redis_human(&self) -> String {
        let mut s = self.format_fixed17();
        if s.contains('.') {
            while s.ends_with('0') {
                s.pop();
            }
            if s.ends_with('.') {
                s.pop();
            }
        }
        if s == "-0" {
            s = "0".into();
        }
        s
    }
}

fn parse_dec(neg: bool, s: &[u8]) -> Option<Rounded> {
    let mut d = Big::default();
    let mut i = 0;
    let mut ndigits = 0u64; // significant digits accumulated into d
    let mut any = false;
    let mut exp10: i64 = 0;
    let mut frac = false;
    while i < s.len() {
        match s[i] {
            c @ b'0'..=b'9' => {
                any = true;
                if !d.is_zero() || c != b'0' {
                    d.mul_small_add(10, u32::from(c - b'0'));
                    ndigits += 1;
                }
                if frac {
                    exp10 -= 1;
                }
            }
            b'.' if !frac => frac = true,
            _ => break,
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if i < s.len() {
        if s[i] != b'e' && s[i] != b'E' {
            return None;
        }
        i += 1;
        let eneg = match s.get(i) {
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
        let start = i;
        let mut e: i64 = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            e = (e * 10 + i64::from(s[i] - b'0')).min(1_000_000_000);
            i += 1;
        }
        if i == start || i != s.len() {
            return None;
        }
        exp10 += if eneg { -e } else { e };
    }
    if d.is_zero() {
        return Some(round(neg, &d, 0, false));
    }
    let magnitude = ndigits as i64 + exp10;
    if magnitude > 4940 {
        return Some(Rounded {
            v: F80::Inf { neg },
            overflow: true,
            underflow_to_zero: false,
        });
    }
    if magnitude < -4960 {
        return Some(Rounded {
            v: F80::Zero { neg },
            overflow: false,
            underflow_to_zero: true,
        });
    }
    if exp10 >= 0 {
        let big = d.mul(&Big::pow10(exp10 as u64));
        return Some(round(neg, &big, 0, false));
    }
    let m = Big::pow10((-exp10) as u64);
    let s2 = (66 + m.bitlen() as i64 - d.bitlen() as i64 + 1).max(0) as u64;
    let (q, sticky) = d.shl(s2).div_sticky(&m);
    Some(round(neg, &q, -(s2 as i64), sticky))
}

fn parse_hex(neg: bool, s: &[u8]) -> Option<Rounded> {
    let mut m = Big::default();
    let mut i = 0;
    let mut any = false;
    let mut exp2: i64 = 0;
    let mut frac = false;
    while i < s.len() {
        let c = s[i];
        let v = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            b'.' if !frac => {
                frac = true;
                i += 1;
                continue;
            }
            _ => break,
        };
        any = true;
        // Keep at most ~200 significant bits; the rest only matters as a
        // sticky bit.
        if m.bitlen() < 200 {
            m.mul_small_add(16, u32::from(v));
            if frac {
                exp2 -= 4;
            }
        } else {
            if v != 0 {
                // sticky: fold into the lowest bit (safe: far below the
                // 64 kept bits)
                if !m.bit(0) {
                    m.mul_small_add(1, 1);
                }
            }
            if !frac {
                exp2 += 4;
            }
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if i < s.len() {
        if s[i] != b'p' && s[i] != b'P' {
            return None;
        }
        i += 1;
        let eneg = match s.get(i) {
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
        let start = i;
        let mut e: i64 = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            e = (e * 10 + i64::from(s[i] - b'0')).min(1_000_000_000);
            i += 1;
        }
        if i == start || i != s.len() {
            return None;
        }
        exp2 += if eneg { -e } else { e };
    }
    if exp2 > 100_000 {
        return Some(round(neg, &m, 100_000, false));
    }
    Some(round(neg, &m, exp2.max(-100_000), false))
}

/// INCRBYFLOAT: `Ok(new string)`, or the error message.
pub fn incr_by_float(current: &[u8], incr: &[u8]) -> Result<String, &'static str> {
    let a = F80::parse_redis(current).ok_or("ERR value is not a valid float")?;
    let b = F80::parse_redis(incr).ok_or("ERR value is not a valid float")?;
    let sum = a.plus(b);
    if !sum.is_finite() {
        return Err("ERR increment would produce NaN or Infinity");
    }
    Ok(sum.to_redis_human())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_roundtrip_small() {
        let v = F80::parse_redis(b"10.1").unwrap();
        assert_eq!(v.to_redis_human(), "10.1");
        let v = F80::parse_redis(b"0.125").unwrap();
        assert_eq!(v.format_fixed17(), "0.12500000000000000");
        assert_eq!(F80::parse_redis(b"-0").unwrap().to_redis_human(), "0");
    }

    #[test]
    fn big_division() {
        let a = Big::pow10(30);
        let b = Big::pow10(10);
        let (q, st) = a.div_sticky(&b);
        assert_eq!(q.to_decimal(), "100000000000000000000");
        assert!(!st);
        let (q, st) = Big::from_u64(10).div_sticky(&Big::from_u64(3));
        assert_eq!(q.to_decimal(), "3");
        assert!(st);
    }
}
