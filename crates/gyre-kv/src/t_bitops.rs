//! Bitmap and LCS commands (Redis's `bitops.c`, and LCS from
//! `t_string.c`): SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD
//! BITFIELD_RO LCS. The arithmetic is [`crate::bitops`]; this module looks
//! the keys up, keeps Redis's order of checks, stores and replies.

use crate::bitops::{self, BitOp};
use crate::cmd::{spec, CommandSpec, Ctx, ERR_WRONGTYPE, RO, RO_SLOW, WR};
use crate::db::Ref;
use crate::resp;
use crate::server::Server;

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "setbit",
        4,
        WR,
        1,
        1,
        1,
        "bitmap",
        "2.2.0",
        "Sets or clears the bit at offset in the string value stored at key",
        setbit
    ),
    spec!(
        "getbit",
        3,
        RO,
        1,
        1,
        1,
        "bitmap",
        "2.2.0",
        "Returns the bit value at offset in the string value stored at key",
        getbit
    ),
    spec!(
        "bitcount",
        -2,
        RO_SLOW,
        1,
        1,
        1,
        "bitmap",
        "2.6.0",
        "Count set bits in a string",
        bitcount
    ),
    spec!(
        "bitpos",
        -3,
        RO_SLOW,
        1,
        1,
        1,
        "bitmap",
        "2.8.7",
        "Find first bit set or clear in a string",
        bitpos
    ),
    spec!(
        "bitop",
        -4,
        WR,
        2,
        -1,
        1,
        "bitmap",
        "2.6.0",
        "Perform bitwise operations between strings",
        bitop
    ),
    spec!(
        "bitfield",
        -2,
        WR,
        1,
        1,
        1,
        "bitmap",
        "3.2.0",
        "Perform arbitrary bitfield integer operations on strings",
        bitfield
    ),
    spec!(
        "bitfield_ro",
        -2,
        RO,
        1,
        1,
        1,
        "bitmap",
        "6.0.0",
        "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD",
        bitfield_ro
    ),
    spec!(
        "lcs",
        -3,
        RO_SLOW,
        1,
        2,
        1,
        "string",
        "7.0.0",
        "Find longest common substring",
        lcs
    ),
];

/// Arguments `from..` as byte slices.
fn rest<'a>(ctx: &Ctx<'a>, from: usize) -> Vec<&'a [u8]> {
    (from..ctx.argc()).map(|i| ctx.arg(i)).collect()
}

/// The key held something other than a string (the reply is written).
struct WrongType;

/// The string value at `key` for reading: `None` if missing, WRONGTYPE
/// replied for an aggregate. Copied: replies are written while the
/// keyspace is borrowed otherwise, and sources may also be the target.
fn read_string(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    key: &[u8],
) -> Result<Option<Vec<u8>>, WrongType> {
    match server.dbs[ctx.db]
        .lookup_read(key, ctx.now)
        .map(|e| e.value)
    {
        None => Ok(None),
        Some(Ref::Str(v)) => Ok(Some(v.to_vec())),
        Some(Ref::Obj(_)) => {
            ctx.err(ERR_WRONGTYPE);
            Err(WrongType)
        }
    }
}

/// Run `f` on the string at `key` without copying it (`None` if missing).
fn with_read<R>(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> R,
) -> Result<R, WrongType> {
    match server.dbs[ctx.db]
        .lookup_read(key, ctx.now)
        .map(|e| e.value)
    {
        None => Ok(f(None)),
        Some(Ref::Str(v)) => Ok(f(Some(v))),
        Some(Ref::Obj(_)) => {
            ctx.err(ERR_WRONGTYPE);
            Err(WrongType)
        }
    }
}

/// Redis's `lookupStringForBitCommand`: the value at `key` grown with zero
/// bytes to hold bit `maxbit` (created if missing), then `f` on it in
/// place (no copy of a large bitmap). WRONGTYPE for an aggregate.
fn with_bit_string<R>(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    key: &[u8],
    maxbit: u64,
    mut f: impl FnMut(&mut Vec<u8>) -> R,
) -> Result<(R, bool), WrongType> {
    let need = (maxbit >> 3) as usize + 1;
    let db = &mut server.dbs[ctx.db];
    match db.lookup_write(key, ctx.now).map(|e| e.value) {
        Some(Ref::Obj(_)) => {
            ctx.err(ERR_WRONGTYPE);
            return Err(WrongType);
        }
        Some(Ref::Str(_)) => {
            let r = db.update_value(key, ctx.now, |v| {
                let grown = v.len() < need;
                if grown {
                    v.resize(need, 0);
                }
                (f(v), grown)
            });
            if let Some(r) = r {
                return Ok(r);
            }
        }
        None => {}
    }
    let mut v = vec![0u8; need];
    let r = f(&mut v);
    db.set(key, v, false);
    Ok((r, true))
}

fn setbit(server: &mut Server, ctx: &mut Ctx<'_>) {
    let max = server.config.proto_max_bulk_len;
    let offset = match bitops::parse_offset(ctx.arg(2), false, 0, max) {
        Ok(o) => o,
        Err(e) => return ctx.err(e),
    };
    let on = match bitops::parse_bit_value(ctx.arg(3)) {
        Ok(b) => b,
        Err(e) => return ctx.err(e),
    };
    let key = ctx.arg(1);
    if let Ok((old, grown)) =
        with_bit_string(server, ctx, key, offset, |v| bitops::setbit(v, offset, on))
    {
        // Redis 7.0: a change only when the string was created or grew,
        // or the bit flipped (a no-op SETBIT is not propagated).
        if grown || old != u8::from(on) {
            server.dirty += 1;
        }
        ctx.int(i64::from(old));
    }
}

fn getbit(server: &mut Server, ctx: &mut Ctx<'_>) {
    let max = server.config.proto_max_bulk_len;
    let offset = match bitops::parse_offset(ctx.arg(2), false, 0, max) {
        Ok(o) => o,
        Err(e) => return ctx.err(e),
    };
    let key = ctx.arg(1);
    if let Ok(bit) = with_read(server, ctx, key, |v| {
        v.map_or(0, |v| bitops::getbit(v, offset))
    }) {
        ctx.int(i64::from(bit));
    }
}

fn bitcount(server: &mut Server, ctx: &mut Ctx<'_>) {
    let args = rest(ctx, 2);
    let key = ctx.arg(1);
    let Ok(r) = with_read(server, ctx, key, |v| match v {
        None => Ok(0),
        Some(v) => bitops::bitcount(v, &args),
    }) else {
        return;
    };
    match r {
        Ok(n) => ctx.int(n),
        Err(e) => ctx.err(e),
    }
}

fn bitpos(server: &mut Server, ctx: &mut Ctx<'_>) {
    let bit = match bitops::parse_bitpos_bit(ctx.arg(2)) {
        Ok(b) => b,
        Err(e) => return ctx.err(e),
    };
    let args = rest(ctx, 3);
    let key = ctx.arg(1);
    let Ok(r) = with_read(server, ctx, key, |v| match v {
        // A missing key is an infinite run of zeros.
        None => Ok(if bit == 1 { -1 } else { 0 }),
        Some(v) => bitops::bitpos(v, bit, &args),
    }) else {
        return;
    };
    match r {
        Ok(n) => ctx.int(n),
        Err(e) => ctx.err(e),
    }
}

fn bitop(server: &mut Server, ctx: &mut Ctx<'_>) {
    let op = match BitOp::parse(ctx.arg(1), ctx.argc() - 3) {
        Ok(op) => op,
        Err(e) => return ctx.err(e),
    };
    let dest = ctx.arg(2);
    let mut srcs = Vec::with_capacity(ctx.argc() - 3);
    for k in rest(ctx, 3) {
        match read_string(server, ctx, k) {
            Ok(v) => srcs.push(v.unwrap_or_default()),
            Err(WrongType) => return,
        }
    }
    let views: Vec<&[u8]> = srcs.iter().map(Vec::as_slice).collect();
    let out = bitops::bitop(op, &views);
    let n = out.len();
    let db = &mut server.dbs[ctx.db];
    if n > 0 {
        db.set(dest, out, false);
        server.dirty += 1;
    } else if db.delete(dest, ctx.now) {
        server.dirty += 1;
    }
    ctx.int(n as i64);
}

fn bitfield(server: &mut Server, ctx: &mut Ctx<'_>) {
    bitfield_generic(server, ctx, false);
}

fn bitfield_ro(server: &mut Server, ctx: &mut Ctx<'_>) {
    bitfield_generic(server, ctx, true);
}

fn bitfield_generic(server: &mut Server, ctx: &mut Ctx<'_>, readonly: bool) {
    let max = server.config.proto_max_bulk_len;
    let args = rest(ctx, 2);
    let p = match bitops::parse_bitfield(&args, readonly, max) {
        Ok(p) => p,
        Err(e) => return ctx.err(e),
    };
    let key = ctx.arg(1);
    let replies = match p.highest_write {
        None => {
            let Ok(v) = read_string(server, ctx, key) else {
                return;
            };
            bitops::run_bitfield(&mut v.unwrap_or_default(), &p.ops)
        }
        Some(top) => {
            let Ok((r, _)) =
                with_bit_string(server, ctx, key, top, |v| bitops::run_bitfield(v, &p.ops))
            else {
                return;
            };
            server.dirty += 1;
            r
        }
    };
    ctx.array(replies.len());
    for r in replies {
        match r {
            Some(n) => ctx.int(n),
            None => ctx.null(),
        }
    }
}

fn lcs(server: &mut Server, ctx: &mut Ctx<'_>) {
    // LCS has its own type error, checked before the options.
    let db = &mut server.dbs[ctx.db];
    let mut get = |k: &[u8]| match db.lookup_read(k, ctx.now).map(|e| e.value) {
        None => Ok(Vec::new()),
        Some(Ref::Str(v)) => Ok(v.to_vec()),
        Some(Ref::Obj(_)) => Err(()),
    };
    let (ka, kb) = (ctx.arg(1), ctx.arg(2));
    let (Ok(a), Ok(b)) = (get(ka), get(kb)) else {
        return ctx.err("ERR The specified keys must contain string values");
    };
    let o = match crate::lcs::parse_lcs(&rest(ctx, 3)) {
        Ok(o) => o,
        Err(e) => return ctx.err(e),
    };
    let (s, matches) =
        match crate::lcs::lcs(&a, &b, o.minmatchlen, server.config.proto_max_bulk_len) {
            Ok(r) => r,
            Err(e) => return ctx.err(e),
        };
    if o.idx {
        ctx.map(2);
        ctx.bulk(b"matches");
        ctx.array(matches.len());
        for m in &matches {
            ctx.array(2 + usize::from(o.withmatchlen));
            ctx.array(2);
            ctx.int(i64::from(m.a.0));
            ctx.int(i64::from(m.a.1));
            ctx.array(2);
            ctx.int(i64::from(m.b.0));
            ctx.int(i64::from(m.b.1));
            if o.withmatchlen {
                ctx.int(i64::from(m.len));
            }
        }
        ctx.bulk(b"len");
        ctx.int(s.len() as i64);
    } else if o.len {
        ctx.int(s.len() as i64);
    } else {
        resp::write_bulk(ctx.out, &s);
    }
}
