//! Bit operations on string values, as Redis's `bitops.c` computes them
//! (LCS is [`crate::lcs`]), without the keyspace: the command
//! layer (`t_bitops`) looks keys up and stores results; everything here is
//! a function of byte strings and arguments, so it is tested alone.
//!
//! Bits are numbered from the most significant bit of byte 0 (SETBIT's
//! order). Offsets are refused past `proto-max-bulk-len` bytes, as Redis
//! does (`ERR bit offset is not an integer or out of range`), so no
//! argument can make a value grow beyond what a client could have sent.

use crate::util::string2ll;

pub const ERR_BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
pub const ERR_BIT_VALUE: &str = "ERR bit is not an integer or out of range";
pub const ERR_NOT_INT: &str = "ERR value is not an integer or out of range";
pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_BITFIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
pub const ERR_OVERFLOW_TYPE: &str = "ERR Invalid OVERFLOW type specified";
pub const ERR_BITFIELD_RO: &str = "ERR BITFIELD_RO only supports the GET subcommand";
pub const ERR_BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";
pub const ERR_BITOP_NOT: &str = "ERR BITOP NOT must be called with a single source key.";

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// Redis's `getBitOffsetFromArgument`: a non-negative integer whose byte
/// is below `max_bulk`; with `hash` and `#N`, N fields of `bits` bits.
pub fn parse_offset(arg: &[u8], hash: bool, bits: u32, max_bulk: u64) -> Result<u64, &'static str> {
    let usehash = hash && bits > 0 && arg.first() == Some(&b'#');
    let n = string2ll(&arg[usize::from(usehash)..]).ok_or(ERR_BIT_OFFSET)?;
    // C multiplies a long long here; a wrap shows as a negative offset.
    let n = if usehash {
        n.wrapping_mul(i64::from(bits))
    } else {
        n
    };
    if n < 0 || (n as u64 >> 3) >= max_bulk {
        return Err(ERR_BIT_OFFSET);
    }
    Ok(n as u64)
}

/// The bit at `offset` (0 past the end).
pub fn getbit(s: &[u8], offset: u64) -> u8 {
    let byte = (offset >> 3) as usize;
    s.get(byte).map_or(0, |b| (b >> (7 - (offset & 7))) & 1)
}

/// Set the bit at `offset` to `on`, growing `s` with zero bytes as
/// needed; returns the old bit.
pub fn setbit(s: &mut Vec<u8>, offset: u64, on: bool) -> u8 {
    let byte = (offset >> 3) as usize;
    if s.len() <= byte {
        s.resize(byte + 1, 0);
    }
    let shift = 7 - (offset & 7);
    let old = (s[byte] >> shift) & 1;
    if on {
        s[byte] |= 1 << shift;
    } else {
        s[byte] &= !(1 << shift);
    }
    old
}

/// SETBIT's value argument: `0` or `1`.
pub fn parse_bit_value(arg: &[u8]) -> Result<bool, &'static str> {
    match string2ll(arg) {
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        _ => Err(ERR_BIT_VALUE),
    }
}

fn parse_ll(arg: &[u8]) -> Result<i64, &'static str> {
    string2ll(arg).ok_or(ERR_NOT_INT)
}

/// An inclusive bit range `first..=last` within a string, or empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BitRange {
    first: u64,
    last: u64,
}

/// Redis's start/end resolution for BITCOUNT / BITPOS: negatives from the
/// end, clamped, in bytes or bits; `None` when empty.
fn resolve(start: i64, end: i64, strlen: usize, isbit: bool) -> Option<BitRange> {
    let totlen = if isbit {
        (strlen as i64) << 3
    } else {
        strlen as i64
    };
    let mut s = if start < 0 { totlen + start } else { start };
    let mut e = if end < 0 { totlen + end } else { end };
    s = s.max(0);
    e = e.max(0);
    if e >= totlen {
        e = totlen - 1;
    }
    if s > e {
        return None;
    }
    Some(if isbit {
        BitRange {
            first: s as u64,
            last: e as u64,
        }
    } else {
        BitRange {
            first: (s as u64) << 3,
            last: ((e as u64) << 3) + 7,
        }
    })
}

fn popcount_bits(s: &[u8], r: BitRange) -> u64 {
    let (fb, lb) = ((r.first >> 3) as usize, (r.last >> 3) as usize);
    let mut n: u64 = s[fb..=lb].iter().map(|b| u64::from(b.count_ones())).sum();
    // Take out the bits of the edge bytes outside the range.
    let head = !(0xffu8 >> (r.first & 7));
    let tail = ((1u16 << (7 - (r.last & 7))) - 1) as u8;
    n -= u64::from((s[fb] & head).count_ones());
    n -= u64::from((s[lb] & tail).count_ones());
    n
}

/// BITCOUNT on an existing string value; `args` are the arguments after
/// the key.
pub fn bitcount(s: &[u8], args: &[&[u8]]) -> Result<i64, &'static str> {
    let range = match args.len() {
        0 => resolve(0, -1, s.len(), false),
        2 | 3 => {
            let start = parse_ll(args[0])?;
            let end = parse_ll(args[1])?;
            if start < 0 && end < 0 && start > end {
                return Ok(0);
            }
            let isbit = match args.get(2) {
                None => false,
                Some(a) if eq(a, "bit") => true,
                Some(a) if eq(a, "byte") => false,
                Some(_) => return Err(ERR_SYNTAX),
            };
            resolve(start, end, s.len(), isbit)
        }
        _ => return Err(ERR_SYNTAX),
    };
    Ok(range.map_or(0, |r| popcount_bits(s, r) as i64))
}

/// BITPOS's bit argument.
pub fn parse_bitpos_bit(arg: &[u8]) -> Result<u8, &'static str> {
    match parse_ll(arg)? {
        0 => Ok(0),
        1 => Ok(1),
        _ => Err(ERR_BITPOS_BIT),
    }
}

/// BITPOS on an existing string value; `args` are the arguments after
/// the bit (start, end, BYTE|BIT).
pub fn bitpos(s: &[u8], bit: u8, args: &[&[u8]]) -> Result<i64, &'static str> {
    let (range, end_given) = match args.len() {
        0 => (resolve(0, -1, s.len(), false), false),
        1..=3 => {
            let start = parse_ll(args[0])?;
            let isbit = match args.get(2) {
                None => false,
                Some(a) if eq(a, "bit") => true,
                Some(a) if eq(a, "byte") => false,
                Some(_) => return Err(ERR_SYNTAX),
            };
            let (end, given) = match args.get(1) {
                Some(a) => (parse_ll(a)?, true),
                None => (-1, false),
            };
            (resolve(start, end, s.len(), isbit), given)
        }
        _ => return Err(ERR_SYNTAX),
    };
    let Some(r) = range else { return Ok(-1) };
    if let Some(p) = find_bit(s, r, bit) {
        return Ok(p as i64);
    }
    // Past the range: the string reads as zero-padded to the right, so a
    // clear bit is "found" just after it, unless the caller set the end.
    Ok(if bit == 0 && !end_given {
        r.last as i64 + 1
    } else {
        -1
    })
}

fn find_bit(s: &[u8], r: BitRange, bit: u8) -> Option<u64> {
    let mut pos = r.first;
    // Bit by bit up to a byte boundary, then whole bytes.
    while pos <= r.last {
        if pos & 7 == 0 && pos + 7 <= r.last {
            let b = s[(pos >> 3) as usize];
            let v = if bit == 1 { b } else { !b };
            if v != 0 {
                return Some(pos + u64::from(v.leading_zeros()));
            }
            pos += 8;
            continue;
        }
        if getbit(s, pos) == bit {
            return Some(pos);
        }
        pos += 1;
    }
    None
}

/// BITOP's operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

impl BitOp {
    /// The operation name, and the NOT-takes-one-key check, as
    /// `bitopCommand` makes them; `nkeys` is the number of source keys.
    pub fn parse(name: &[u8], nkeys: usize) -> Result<BitOp, &'static str> {
        let op = if eq(name, "and") {
            BitOp::And
        } else if eq(name, "or") {
            BitOp::Or
        } else if eq(name, "xor") {
            BitOp::Xor
        } else if eq(name, "not") {
            BitOp::Not
        } else {
            return Err(ERR_SYNTAX);
        };
        if op == BitOp::Not && nkeys != 1 {
            return Err(ERR_BITOP_NOT);
        }
        Ok(op)
    }
}

/// The result of BITOP over the sources (missing keys are empty
/// strings): as long as the longest source, shorter ones zero-padded.
pub fn bitop(op: BitOp, srcs: &[&[u8]]) -> Vec<u8> {
    let maxlen = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    if maxlen == 0 {
        return Vec::new();
    }
    let byte = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(0);
    let mut out = Vec::with_capacity(maxlen);
    match op {
        BitOp::Not => out.extend(srcs[0].iter().map(|b| !b)),
        _ => {
            for i in 0..maxlen {
                let mut v = byte(srcs[0], i);
                for s in &srcs[1..] {
                    let b = byte(s, i);
                    match op {
                        BitOp::And => v &= b,
                        BitOp::Or => v |= b,
                        _ => v ^= b,
                    }
                }
                out.push(v);
            }
        }
    }
    out
}

/// BITFIELD's overflow behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One BITFIELD operation, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldOp {
    pub kind: FieldKind,
    pub signed: bool,
    pub bits: u32,
    pub offset: u64,
    pub overflow: Overflow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// A parsed BITFIELD: its operations, and the highest bit a write reaches
/// (`None` when it only reads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bitfield {
    pub ops: Vec<FieldOp>,
    pub highest_write: Option<u64>,
}

/// `i8`, `u16`, ... (`i` up to 64 bits, `u` up to 63), case-sensitive.
fn parse_type(arg: &[u8]) -> Result<(bool, u32), &'static str> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(ERR_BITFIELD_TYPE),
    };
    let bits = string2ll(&arg[1..]).ok_or(ERR_BITFIELD_TYPE)?;
    if bits < 1 || signed && bits > 64 || !signed && bits > 63 {
        return Err(ERR_BITFIELD_TYPE);
    }
    Ok((signed, bits as u32))
}

/// Parse BITFIELD's arguments after the key, all of them before any runs
/// (Redis's order of checks); `readonly` is BITFIELD_RO.
pub fn parse_bitfield(
    args: &[&[u8]],
    readonly: bool,
    max_bulk: u64,
) -> Result<Bitfield, &'static str> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest: Option<u64> = None;
    let mut j = 0;
    while j < args.len() {
        let rem = args.len() - j - 1;
        let sub = args[j];
        let kind = if eq(sub, "get") && rem >= 2 {
            0
        } else if eq(sub, "set") && rem >= 3 {
            1
        } else if eq(sub, "incrby") && rem >= 3 {
            2
        } else if eq(sub, "overflow") && rem >= 1 {
            let t = args[j + 1];
            overflow = if eq(t, "wrap") {
                Overflow::Wrap
            } else if eq(t, "sat") {
                Overflow::Sat
            } else if eq(t, "fail") {
                Overflow::Fail
            } else {
                return Err(ERR_OVERFLOW_TYPE);
            };
            j += 2;
            continue;
        } else {
            return Err(ERR_SYNTAX);
        };
        let (signed, bits) = parse_type(args[j + 1])?;
        let offset = parse_offset(args[j + 2], true, bits, max_bulk)?;
        let kind = if kind == 0 {
            FieldKind::Get
        } else {
            let top = offset + u64::from(bits) - 1;
            highest = Some(highest.map_or(top, |h| h.max(top)));
            let v = parse_ll(args[j + 3])?;
            if kind == 1 {
                FieldKind::Set(v)
            } else {
                FieldKind::IncrBy(v)
            }
        };
        ops.push(FieldOp {
            kind,
            signed,
            bits,
            offset,
            overflow,
        });
        j += if kind == FieldKind::Get { 3 } else { 4 };
    }
    if readonly && highest.is_some() {
        return Err(ERR_BITFIELD_RO);
    }
    Ok(Bitfield {
        ops,
        highest_write: highest,
    })
}

fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for i in 0..u64::from(bits) {
        v = v << 1 | u64::from(getbit(s, offset + i));
    }
    v
}

fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let u = get_unsigned(s, offset, bits);
    if bits == 64 {
        return u as i64;
    }
    // Sign-extend from bit `bits - 1`.
    let shift = 64 - bits;
    ((u << shift) as i64) >> shift
}

/// Write the low `bits` of `v` (`s` already long enough).
fn set_field(s: &mut [u8], offset: u64, bits: u32, v: u64) {
    for i in 0..u64::from(bits) {
        let bit = (v >> (u64::from(bits) - 1 - i)) & 1;
        let o = offset + i;
        let byte = (o >> 3) as usize;
        let shift = 7 - (o & 7);
        if bit == 1 {
            s[byte] |= 1 << shift;
        } else {
            s[byte] &= !(1 << shift);
        }
    }
}

/// Redis's `checkSignedBitfieldOverflow`, with its arithmetic kept as C
/// does it (wrapping): `(stored bits, overflowed)` for WRAP and SAT (FAIL
/// stores nothing). The wrapping matters: a SET of a value far below the
/// type's minimum saturates to the *maximum* in Redis, because its
/// `max - value` wraps negative; that is reproduced, not fixed.
fn signed_add(bits: u32, value: i64, incr: i64, ow: Overflow) -> (u64, bool) {
    let max: i64 = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let wrapped = (value as u64).wrapping_add(incr as u64) & mask;
    let high =
        value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr);
    let low = !high
        && (value < min
            || (bits != 64 && incr < minincr)
            || (value < 0 && incr < 0 && incr < minincr));
    match (high, low, ow) {
        (false, false, _) => (wrapped, false),
        (true, _, Overflow::Sat) => (max as u64 & mask, true),
        (_, true, Overflow::Sat) => (min as u64 & mask, true),
        _ => (wrapped, true),
    }
}

/// Redis's `checkUnsignedBitfieldOverflow` (`value` already the field's
/// unsigned reading, or a SET's value converted to `uint64_t`).
fn unsigned_add(bits: u32, value: u64, incr: i64, ow: Overflow) -> (u64, bool) {
    let max: u64 = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let wrapped = value.wrapping_add(incr as u64) & max;
    if value > max || (incr > 0 && incr > maxincr) {
        return (if ow == Overflow::Sat { max } else { wrapped }, true);
    }
    if incr < 0 && incr < minincr {
        return (if ow == Overflow::Sat { 0 } else { wrapped }, true);
    }
    (wrapped, false)
}

/// Run the operations on `s` (grown by the caller to cover
/// `highest_write` when there are writes; reads past the end see zeros).
/// Each reply is `Some(value)` or `None` (an overflow under FAIL).
pub fn run_bitfield(s: &mut [u8], ops: &[FieldOp]) -> Vec<Option<i64>> {
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let (old_s, old_u) = if op.signed {
            let v = get_signed(s, op.offset, op.bits);
            (v, v as u64)
        } else {
            let v = get_unsigned(s, op.offset, op.bits);
            (v as i64, v)
        };
        let (new, overflow, reply) = match (op.kind, op.signed) {
            (FieldKind::Get, _) => {
                out.push(Some(old_s));
                continue;
            }
            (FieldKind::Set(v), true) => {
                let (n, o) = signed_add(op.bits, v, 0, op.overflow);
                (n, o, old_s)
            }
            // C converts the long long to uint64_t.
            (FieldKind::Set(v), false) => {
                let (n, o) = unsigned_add(op.bits, v as u64, 0, op.overflow);
                (n, o, old_s)
            }
            (FieldKind::IncrBy(v), true) => {
                let (n, o) = signed_add(op.bits, old_s, v, op.overflow);
                (n, o, sign_extend(n, op.bits))
            }
            (FieldKind::IncrBy(v), false) => {
                let (n, o) = unsigned_add(op.bits, old_u, v, op.overflow);
                (n, o, n as i64)
            }
        };
        if overflow && op.overflow == Overflow::Fail {
            out.push(None);
            continue;
        }
        set_field(s, op.offset, op.bits, new);
        out.push(Some(reply));
    }
    out
}

fn sign_extend(v: u64, bits: u32) -> i64 {
    if bits == 64 {
        return v as i64;
    }
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 512 * 1024 * 1024;

    #[test]
    fn offsets_and_limits() {
        assert_eq!(parse_offset(b"0", false, 0, MAX), Ok(0));
        assert_eq!(parse_offset(b"4294967295", false, 0, MAX), Ok(4294967295));
        assert_eq!(
            parse_offset(b"4294967296", false, 0, MAX),
            Err(ERR_BIT_OFFSET)
        );
        assert_eq!(parse_offset(b"-1", false, 0, MAX), Err(ERR_BIT_OFFSET));
        assert_eq!(parse_offset(b"#2", false, 8, MAX), Err(ERR_BIT_OFFSET));
        assert_eq!(parse_offset(b"#2", true, 8, MAX), Ok(16));
        assert_eq!(parse_offset(b"#-1", true, 8, MAX), Err(ERR_BIT_OFFSET));
        assert_eq!(
            parse_offset(b"#1152921504606846975", true, 8, MAX),
            Err(ERR_BIT_OFFSET)
        );
        assert_eq!(parse_offset(b"1.5", false, 0, MAX), Err(ERR_BIT_OFFSET));
    }

    #[test]
    fn setbit_getbit() {
        let mut s = Vec::new();
        assert_eq!(setbit(&mut s, 7, true), 0);
        assert_eq!(s, [1]);
        assert_eq!(setbit(&mut s, 0, true), 0);
        assert_eq!(s, [0x81]);
        assert_eq!(setbit(&mut s, 7, false), 1);
        assert_eq!(setbit(&mut s, 20, true), 0);
        assert_eq!(s, [0x80, 0, 0x08]);
        assert_eq!(getbit(&s, 0), 1);
        assert_eq!(getbit(&s, 20), 1);
        assert_eq!(getbit(&s, 21), 0);
        assert_eq!(getbit(&s, 1000), 0);
        assert_eq!(parse_bit_value(b"2"), Err(ERR_BIT_VALUE));
        assert_eq!(parse_bit_value(b"1"), Ok(true));
    }

    fn args(v: &[&'static str]) -> Vec<&'static [u8]> {
        v.iter().map(|s| s.as_bytes()).collect()
    }

    #[test]
    fn bitcount_ranges() {
        let s = b"foobar";
        assert_eq!(bitcount(s, &[]), Ok(26));
        assert_eq!(bitcount(s, &args(&["0", "0"])), Ok(4));
        assert_eq!(bitcount(s, &args(&["1", "1"])), Ok(6));
        assert_eq!(bitcount(s, &args(&["1", "1", "BYTE"])), Ok(6));
        assert_eq!(bitcount(s, &args(&["5", "30", "BIT"])), Ok(17));
        assert_eq!(bitcount(s, &args(&["-2", "-1"])), Ok(7));
        assert_eq!(bitcount(s, &args(&["-1", "-2", "nonsense"])), Ok(0));
        assert_eq!(bitcount(s, &args(&["0", "1", "nonsense"])), Err(ERR_SYNTAX));
        assert_eq!(bitcount(s, &args(&["0"])), Err(ERR_SYNTAX));
        assert_eq!(bitcount(s, &args(&["a", "1"])), Err(ERR_NOT_INT));
        assert_eq!(bitcount(s, &args(&["10", "20"])), Ok(0));
        assert_eq!(bitcount(s, &args(&["-100", "100"])), Ok(26));
        assert_eq!(bitcount(b"", &[]), Ok(0));
        assert_eq!(bitcount(&[0xff], &args(&["1", "6", "BIT"])), Ok(6));
        assert_eq!(bitcount(&[0xff, 0xff], &args(&["7", "8", "bit"])), Ok(2));
    }

    #[test]
    fn bitpos_cases() {
        let s = [0xff, 0xf0, 0x00];
        assert_eq!(bitpos(&s, 0, &[]), Ok(12));
        assert_eq!(bitpos(&[0xff, 0xff], 0, &[]), Ok(16));
        assert_eq!(bitpos(&[0xff, 0xff], 0, &args(&["0", "-1"])), Ok(-1));
        assert_eq!(bitpos(&[0xff, 0xff], 0, &args(&["0"])), Ok(16));
        assert_eq!(bitpos(&s, 1, &args(&["2"])), Ok(-1));
        assert_eq!(bitpos(&[0, 0xff, 0xf0], 1, &args(&["0"])), Ok(8));
        assert_eq!(
            bitpos(&[0, 0xff, 0xf0], 1, &args(&["2", "-1", "byte"])),
            Ok(16)
        );
        assert_eq!(
            bitpos(&[0, 0xff, 0xf0], 1, &args(&["7", "15", "bit"])),
            Ok(8)
        );
        assert_eq!(
            bitpos(&[0, 0xff, 0xf0], 0, &args(&["7", "15", "bit"])),
            Ok(7)
        );
        assert_eq!(
            bitpos(&[0, 0xff, 0xf0], 0, &args(&["8", "15", "bit"])),
            Ok(-1)
        );
        assert_eq!(
            bitpos(&[0xff, 0xff], 0, &args(&["3", "bit"])),
            Err(ERR_NOT_INT)
        );
        assert_eq!(bitpos(&[0xff], 0, &args(&["0", "7", "bit"])), Ok(-1));
        assert_eq!(
            bitpos(&[0xff], 0, &args(&["0", "-1", "foo"])),
            Err(ERR_SYNTAX)
        );
        assert_eq!(bitpos(b"", 0, &[]), Ok(-1));
        assert_eq!(bitpos(b"", 1, &[]), Ok(-1));
        assert_eq!(parse_bitpos_bit(b"2"), Err(ERR_BITPOS_BIT));
        assert_eq!(parse_bitpos_bit(b"x"), Err(ERR_NOT_INT));
    }

    #[test]
    fn bitop_ops() {
        assert_eq!(BitOp::parse(b"NOT", 2), Err(ERR_BITOP_NOT));
        assert_eq!(BitOp::parse(b"nand", 2), Err(ERR_SYNTAX));
        let a: &[u8] = &[0xf0, 0x0f];
        let b: &[u8] = &[0xff];
        assert_eq!(bitop(BitOp::And, &[a, b]), [0xf0, 0x00]);
        assert_eq!(bitop(BitOp::Or, &[a, b]), [0xff, 0x0f]);
        assert_eq!(bitop(BitOp::Xor, &[a, b]), [0x0f, 0x0f]);
        assert_eq!(bitop(BitOp::Not, &[a]), [0x0f, 0xf0]);
        assert_eq!(bitop(BitOp::And, &[a, b""]), [0, 0]);
        assert!(bitop(BitOp::Or, &[b"", b""]).is_empty());
    }

    fn bf(s: &mut Vec<u8>, a: &[&'static str]) -> Result<Vec<Option<i64>>, &'static str> {
        let p = parse_bitfield(&args(a), false, MAX)?;
        if let Some(h) = p.highest_write {
            let need = (h >> 3) as usize + 1;
            if s.len() < need {
                s.resize(need, 0);
            }
        }
        Ok(run_bitfield(s, &p.ops))
    }

    #[test]
    fn bitfield_semantics() {
        let mut s = Vec::new();
        assert_eq!(bf(&mut s, &["SET", "i8", "0", "-100"]), Ok(vec![Some(0)]));
        assert_eq!(
            bf(&mut s, &["GET", "i8", "0", "GET", "u8", "0"]),
            Ok(vec![Some(-100), Some(156)])
        );
        assert_eq!(
            bf(&mut s, &["INCRBY", "i8", "0", "-100"]),
            Ok(vec![Some(56)])
        );
        assert_eq!(
            bf(&mut s, &["OVERFLOW", "SAT", "INCRBY", "i8", "0", "-200"]),
            Ok(vec![Some(-128)])
        );
        assert_eq!(
            bf(
                &mut s,
                &["OVERFLOW", "FAIL", "INCRBY", "i8", "0", "-1", "GET", "i8", "0"]
            ),
            Ok(vec![None, Some(-128)])
        );
        let mut u = Vec::new();
        assert_eq!(
            bf(
                &mut u,
                &["OVERFLOW", "SAT", "SET", "u8", "0", "-1", "GET", "u8", "0"]
            ),
            Ok(vec![Some(0), Some(255)])
        );
        assert_eq!(
            bf(&mut u, &["SET", "u8", "0", "256", "GET", "u8", "0"]),
            Ok(vec![Some(255), Some(0)])
        );
        assert_eq!(bf(&mut u, &["INCRBY", "u2", "100", "5"]), Ok(vec![Some(1)]));
        assert_eq!(u.len(), 13);
        assert_eq!(
            bf(&mut u, &["SET", "u8", "#1", "200", "GET", "u4", "8"]),
            Ok(vec![Some(0), Some(12)])
        );
        let mut w = Vec::new();
        assert_eq!(
            bf(
                &mut w,
                &[
                    "SET",
                    "i64",
                    "0",
                    "9223372036854775807",
                    "INCRBY",
                    "i64",
                    "0",
                    "1"
                ]
            ),
            Ok(vec![Some(0), Some(i64::MIN)])
        );
        assert_eq!(
            bf(
                &mut w,
                &[
                    "OVERFLOW",
                    "SAT",
                    "INCRBY",
                    "i64",
                    "0",
                    "-1",
                    "INCRBY",
                    "i64",
                    "0",
                    "-9223372036854775808"
                ]
            ),
            Ok(vec![Some(i64::MIN), Some(i64::MIN)])
        );
        assert_eq!(
            bf(
                &mut w,
                &[
                    "SET",
                    "i64",
                    "0",
                    "9223372036854775807",
                    "OVERFLOW",
                    "SAT",
                    "INCRBY",
                    "i64",
                    "0",
                    "1"
                ]
            ),
            Ok(vec![Some(i64::MIN), Some(i64::MAX)])
        );
        assert_eq!(
            bf(&mut w, &["SET", "i64", "0", "-9223372036854775808"]),
            Ok(vec![Some(i64::MAX)])
        );
        assert_eq!(
            bf(&mut w, &["SET", "u63", "0", "-1", "GET", "u63", "0"]),
            Ok(vec![Some(0x4000000000000000), Some(i64::MAX)])
        );
        // Redis's wrapped `max - value`: a SET far below the minimum
        // saturates to the maximum (and wraps as the low bits under WRAP).
        let mut q = Vec::new();
        assert_eq!(
            bf(
                &mut q,
                &[
                    "OVERFLOW",
                    "SAT",
                    "SET",
                    "i63",
                    "0",
                    "-9223372036854775808",
                    "GET",
                    "i63",
                    "0"
                ]
            ),
            Ok(vec![Some(0), Some((1 << 62) - 1)])
        );
        let mut q = Vec::new();
        assert_eq!(
            bf(
                &mut q,
                &["OVERFLOW", "SAT", "SET", "i8", "0", "-200", "GET", "i8", "0"]
            ),
            Ok(vec![Some(0), Some(-128)])
        );
        assert_eq!(bf(&mut w, &["GET", "u64", "0"]), Err(ERR_BITFIELD_TYPE));
        assert_eq!(bf(&mut w, &["GET", "I8", "0"]), Err(ERR_BITFIELD_TYPE));
        assert_eq!(bf(&mut w, &["GET", "i0", "0"]), Err(ERR_BITFIELD_TYPE));
        assert_eq!(bf(&mut w, &["GET", "i8"]), Err(ERR_SYNTAX));
        assert_eq!(bf(&mut w, &["OVERFLOW", "x"]), Err(ERR_OVERFLOW_TYPE));
        assert_eq!(bf(&mut w, &["SET", "i8", "0", "x"]), Err(ERR_NOT_INT));
        assert_eq!(bf(&mut w, &["GET", "i8", "-1"]), Err(ERR_BIT_OFFSET));
        assert_eq!(
            parse_bitfield(&args(&["GET", "u8", "0", "SET", "u8", "0", "1"]), true, MAX),
            Err(ERR_BITFIELD_RO)
        );
        assert!(parse_bitfield(&args(&["GET", "u8", "0"]), true, MAX).is_ok());
        // A read past the end sees zeros, and does not grow the value.
        let mut r = vec![0xff];
        assert_eq!(bf(&mut r, &["GET", "u16", "4"]), Ok(vec![Some(0xf000)]));
        assert_eq!(r.len(), 1);
    }
}
