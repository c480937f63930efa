//! Hashes (Redis's `t_hash.c`): the storage and its two encodings, and the
//! hash commands.
//!
//! Encodings: a listpack of field, value, field, value ... while the hash
//! has at most `hash-max-listpack-entries` fields and no field or value
//! longer than `hash-max-listpack-value`; past either, a hashtable
//! ([`Dict`]) for good (Redis never converts back). Listpack order is
//! insertion order (an updated field keeps its place), as Redis's.

use crate::cmd::{
    dense_step, eq, parse_count, parse_ll, scan_opts, scan_reply, spec, CommandSpec, Ctx, Replied,
    ERR_NOT_FLOAT, ERR_OVERFLOW, RO, RO_SLOW, WR_FAST, WR_NODENY,
};
use crate::db::Db;
use crate::dict::Pairs;
use crate::float::F80;
use crate::object::{check_kind, read_kind, Kind, Limits, Object, MAX_RANDOM_REPLY};
use crate::resp;
use crate::server::Server;
use crate::util::{parse_cursor, string2ll, Rng};

/// A small hash's listpack: field, value, field, value ..., in the
/// forward-only form (one byte of framing per short entry, no stored
/// count: see [`crate::listpack`]).
pub type Listpack = crate::listpack::Listpack<false>;

#[derive(Clone, Debug)]
pub enum HashObj {
    Listpack(Listpack),
    Table(Box<Pairs>),
}

impl Default for HashObj {
    fn default() -> Self {
        HashObj::Listpack(Listpack::new())
    }
}

/// Offset of `field` in a field/value listpack, and of its value.
fn lp_find(lp: &Listpack, field: &[u8]) -> Option<(usize, usize)> {
    let mut off = lp.first();
    while let Some((f, voff)) = lp.at(off) {
        let (_, next) = lp.at(voff)?;
        if f == field {
            return Some((off, voff));
        }
        off = next;
    }
    None
}

impl HashObj {
    pub fn new() -> HashObj {
        HashObj::default()
    }

    /// A listpack hash of field/value entries already checked (distinct
    /// fields, within `hash-max-listpack-*`), built in one allocation.
    pub fn from_listpack(lp: Listpack) -> HashObj {
        HashObj::Listpack(lp)
    }

    /// A field appears twice (a listpack from a file: Redis's
    /// `lpValidateIntegrity` with its dup check). O(n²), for listpacks
    /// within `hash-max-listpack-entries`.
    pub fn has_duplicate_field(&self) -> bool {
        let HashObj::Listpack(lp) = self else {
            return false;
        };
        lp.iter()
            .step_by(2)
            .enumerate()
            .any(|(i, f)| lp.iter().step_by(2).take(i).any(|g| g == f))
    }

    pub fn len(&self) -> usize {
        match self {
            HashObj::Listpack(lp) => lp.len() / 2,
            HashObj::Table(d) => d.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            HashObj::Listpack(lp) => lp.is_empty(),
            HashObj::Table(d) => d.len() == 0,
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            HashObj::Listpack(_) => "listpack",
            HashObj::Table(_) => "hashtable",
        }
    }

    pub fn mem(&self) -> usize {
        match self {
            HashObj::Listpack(lp) => lp.capacity(),
            HashObj::Table(d) => std::mem::size_of::<Pairs>() + d.mem(),
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            HashObj::Listpack(lp) => {
                let (_, voff) = lp_find(lp, field)?;
                lp.at(voff).map(|(v, _)| v)
            }
            HashObj::Table(d) => d.get(field),
        }
    }

    fn convert_to_table(&mut self) {
        if let HashObj::Listpack(lp) = self {
            let mut d = Pairs::with_capacity(lp.len() / 2 + 1);
            let mut it = lp.iter();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                d.insert(f, v);
            }
            *self = HashObj::Table(Box::new(d));
        }
    }

    /// Redis's `hashTypeTryConversion`: a field or value over the value
    /// limit turns a listpack into a hashtable before it is written.
    pub fn convert_for(&mut self, args: &[&[u8]], lim: &Limits) {
        if matches!(self, HashObj::Listpack(_))
            && args
                .iter()
                .any(|a| a.len() as u64 > lim.hash_max_listpack_value)
        {
            self.convert_to_table();
        }
    }

    /// Set `field` to `value`; true if the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], lim: &Limits) -> bool {
        self.convert_for(&[field, value], lim);
        let new = match self {
            HashObj::Listpack(lp) => match lp_find(lp, field) {
                Some((_, voff)) => {
                    lp.replace_at(voff, value);
                    false
                }
                None => {
                    lp.push_back(field);
                    lp.push_back(value);
                    true
                }
            },
            HashObj::Table(d) => d.insert(field, value),
        };
        // A pair takes at least two bytes: no walk to count the pairs
        // while the bytes could not hold more than the limit.
        if let HashObj::Listpack(lp) = self {
            if (lp.bytes() / 2) as u64 > lim.hash_max_listpack_entries
                && self.len() as u64 > lim.hash_max_listpack_entries
            {
                self.convert_to_table();
            }
        }
        new
    }

    /// Delete `field`; true if it was there.
    pub fn del(&mut self, field: &[u8]) -> bool {
        match self {
            HashObj::Listpack(lp) => match lp_find(lp, field) {
                Some((off, _)) => {
                    // Field and value in one resize.
                    lp.remove_entries(off, 2);
                    true
                }
                None => false,
            },
            HashObj::Table(d) => d.remove(field),
        }
    }

    /// Field/value pairs in the encoding's order.
    pub fn pairs(&self) -> Vec<(&[u8], &[u8])> {
        match self {
            HashObj::Listpack(lp) => {
                let mut out = Vec::with_capacity(lp.len() / 2);
                let mut it = lp.iter();
                while let (Some(f), Some(v)) = (it.next(), it.next()) {
                    out.push((f, v));
                }
                out
            }
            HashObj::Table(d) => d.iter().collect(),
        }
    }

    /// Pair `i` of the encoding's order (O(1) for a hashtable).
    pub fn pair(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self {
            HashObj::Listpack(lp) => {
                let off = lp.offset_of(2 * i)?;
                let (f, voff) = lp.at(off)?;
                Some((f, lp.at(voff)?.0))
            }
            HashObj::Table(d) => d.entry(i),
        }
    }

    /// See [`crate::object::Object::free_some`].
    pub fn free_some(&mut self, budget: usize) -> usize {
        match self {
            HashObj::Table(d) => d.free_some(budget),
            HashObj::Listpack(_) => {
                let n = self.len();
                *self = HashObj::new();
                n
            }
        }
    }

    pub fn is_table(&self) -> bool {
        matches!(self, HashObj::Table(_))
    }
}

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "hset",
        -4,
        WR_FAST,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Set the string value of a hash field",
        hset
    ),
    spec!(
        "hsetnx",
        4,
        WR_FAST,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Set the value of a hash field, only if the field does not exist",
        hsetnx
    ),
    spec!(
        "hget",
        3,
        RO,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Get the value of a hash field",
        hget
    ),
    spec!(
        "hmset",
        -4,
        WR_FAST,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Set multiple hash fields to multiple values",
        hmset
    ),
    spec!(
        "hmget",
        -3,
        RO,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Get the values of all the given hash fields",
        hmget
    ),
    spec!(
        "hdel",
        -3,
        WR_NODENY,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Delete one or more hash fields",
        hdel
    ),
    spec!(
        "hlen",
        2,
        RO,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Get the number of fields in a hash",
        hlen
    ),
    spec!(
        "hstrlen",
        3,
        RO,
        1,
        1,
        1,
        "hash",
        "3.2.0",
        "Get the length of the value of a hash field",
        hstrlen
    ),
    spec!(
        "hexists",
        3,
        RO,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Determine if a hash field exists",
        hexists
    ),
    spec!(
        "hkeys",
        2,
        RO_SLOW,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Get all the fields in a hash",
        hkeys
    ),
    spec!(
        "hvals",
        2,
        RO_SLOW,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Get all the values in a hash",
        hvals
    ),
    spec!(
        "hgetall",
        2,
        RO_SLOW,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Get all the fields and values in a hash",
        hgetall
    ),
    spec!(
        "hincrby",
        4,
        WR_FAST,
        1,
        1,
        1,
        "hash",
        "2.0.0",
        "Increment the integer value of a hash field by the given number",
        hincrby
    ),
    spec!(
        "hincrbyfloat",
        4,
        WR_FAST,
        1,
        1,
        1,
        "hash",
        "2.6.0",
        "Increment the float value of a hash field by the given amount",
        hincrbyfloat
    ),
    spec!(
        "hrandfield",
        -2,
        RO_SLOW,
        1,
        1,
        1,
        "hash",
        "6.2.0",
        "Get one or multiple random fields from a hash",
        hrandfield
    ),
    spec!(
        "hscan",
        -3,
        RO_SLOW,
        1,
        1,
        1,
        "hash",
        "2.8.0",
        "Incrementally iterate hash fields and associated values",
        hscan
    ),
];

// ------------------------------------------------------------ commands

fn as_hash(o: &Object) -> Option<&HashObj> {
    match o {
        Object::Hash(h) => Some(h),
        _ => None,
    }
}

/// Read lookup of a hash (WRONGTYPE written on `Err`).
fn read<'d>(db: &'d mut Db, ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<&'d HashObj>, Replied> {
    Ok(read_kind(db, ctx, key, Kind::Hash)?.and_then(as_hash))
}

/// Write to the hash at `key` through `f`, creating it when `create`
/// (Redis's `hashTypeLookupWriteOrCreate`). `Ok(None)`: missing and not
/// created. The key is deleted if `f` leaves the hash empty.
fn write<R>(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut HashObj, &Limits, &mut Ctx<'_>) -> R,
) -> Result<Option<R>, Replied> {
    let lim = server.config.encodings;
    let d = &mut server.dbs[ctx.db];
    let mut p = d.probe(key, ctx.now);
    if !check_kind(d, &p, Kind::Hash, ctx)? {
        if !create {
            return Ok(None);
        }
        p = d.insert_obj(p, key, Object::Hash(HashObj::new()));
    }
    Ok(d.update_obj(&p, |o| match o {
        Object::Hash(h) => Some(f(h, &lim, ctx)),
        _ => None,
    })
    .flatten())
}

fn hset_generic(server: &mut Server, ctx: &mut Ctx<'_>, name: &str) {
    if ctx.argc() % 2 == 1 {
        return ctx.err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let key = ctx.arg(1);
    let argv = ctx.argv;
    let r = write(server, ctx, key, true, |h, lim, _| {
        let args: Vec<&[u8]> = argv.iter().skip(2).collect();
        h.convert_for(&args, lim);
        args.chunks_exact(2)
            .filter(|fv| h.set(fv[0], fv[1], lim))
            .count()
    });
    if let Ok(Some(n)) = r {
        server.dirty += ((ctx.argc() - 2) / 2) as u64;
        if name == "hset" {
            ctx.int(n as i64);
        } else {
            ctx.ok();
        }
    }
}

fn hset(server: &mut Server, ctx: &mut Ctx<'_>) {
    hset_generic(server, ctx, "hset");
}

fn hmset(server: &mut Server, ctx: &mut Ctx<'_>) {
    hset_generic(server, ctx, "hmset");
}

fn hsetnx(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (key, field, value) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    let r = write(server, ctx, key, true, |h, lim, _| {
        if h.get(field).is_some() {
            return false;
        }
        h.convert_for(&[field, value], lim);
        h.set(field, value, lim)
    });
    if let Ok(Some(set)) = r {
        if set {
            server.dirty += 1;
        }
        ctx.int(i64::from(set));
    }
}

fn hget(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (key, field) = (ctx.arg(1), ctx.arg(2));
    let Ok(h) = read(&mut server.dbs[ctx.db], ctx, key) else {
        return;
    };
    match h.and_then(|h| h.get(field)) {
        Some(v) => resp::write_bulk(ctx.out, v),
        None => ctx.null(),
    }
}

fn hmget(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    let Ok(h) = read(&mut server.dbs[ctx.db], ctx, key) else {
        return;
    };
    ctx.array(ctx.argc() - 2);
    for i in 2..ctx.argc() {
        match h.and_then(|h| h.get(ctx.arg(i))) {
            Some(v) => resp::write_bulk(ctx.out, v),
            None => ctx.null(),
        }
    }
}

fn hdel(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    let argv = ctx.argv;
    let r = write(server, ctx, key, false, |h, _, _| {
        let mut n = 0;
        for f in argv.iter().skip(2) {
            if h.del(f) {
                n += 1;
            }
            if h.is_empty() {
                break;
            }
        }
        n
    });
    if let Ok(n) = r {
        let n = n.unwrap_or(0);
        server.dirty += n as u64;
        ctx.int(n);
    }
}

fn hlen(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    if let Ok(h) = read(&mut server.dbs[ctx.db], ctx, key) {
        let n = h.map_or(0, HashObj::len);
        ctx.int(n as i64);
    }
}

fn hstrlen(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (key, field) = (ctx.arg(1), ctx.arg(2));
    if let Ok(h) = read(&mut server.dbs[ctx.db], ctx, key) {
        let n = h.and_then(|h| h.get(field)).map_or(0, <[u8]>::len);
        ctx.int(n as i64);
    }
}

fn hexists(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (key, field) = (ctx.arg(1), ctx.arg(2));
    if let Ok(h) = read(&mut server.dbs[ctx.db], ctx, key) {
        let found = h.is_some_and(|h| h.get(field).is_some());
        ctx.int(i64::from(found));
    }
}

/// HKEYS (`fields`), HVALS (`values`), HGETALL (both, a map in RESP3).
fn getall_generic(server: &mut Server, ctx: &mut Ctx<'_>, fields: bool, values: bool) {
    let key = ctx.arg(1);
    let Ok(h) = read(&mut server.dbs[ctx.db], ctx, key) else {
        return;
    };
    let pairs = h.map(HashObj::pairs).unwrap_or_default();
    if fields && values {
        ctx.map(pairs.len());
    } else {
        ctx.array(pairs.len());
    }
    for (f, v) in pairs {
        if fields {
            resp::write_bulk(ctx.out, f);
        }
        if values {
            resp::write_bulk(ctx.out, v);
        }
    }
}

fn hkeys(server: &mut Server, ctx: &mut Ctx<'_>) {
    getall_generic(server, ctx, true, false);
}

fn hvals(server: &mut Server, ctx: &mut Ctx<'_>) {
    getall_generic(server, ctx, false, true);
}

fn hgetall(server: &mut Server, ctx: &mut Ctx<'_>) {
    getall_generic(server, ctx, true, true);
}

fn hincrby(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(incr) = parse_ll(ctx, 3) else {
        return;
    };
    let (key, field) = (ctx.arg(1), ctx.arg(2));
    let r = write(server, ctx, key, true, |h, lim, ctx| {
        let old = match h.get(field) {
            None => 0,
            Some(v) => match string2ll(v) {
                Some(v) => v,
                None => return ctx.err("ERR hash value is not an integer"),
            },
        };
        let Some(new) = old.checked_add(incr) else {
            return ctx.err(ERR_OVERFLOW);
        };
        h.set(field, new.to_string().as_bytes(), lim);
        ctx.int(new);
    });
    if let Ok(Some(())) = r {
        server.dirty += 1;
    }
}

fn hincrbyfloat(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(incr) = F80::parse_redis(ctx.arg(3)) else {
        return ctx.err(ERR_NOT_FLOAT);
    };
    if !incr.is_finite() {
        return ctx.err("ERR value is NaN or Infinity");
    }
    let (key, field) = (ctx.arg(1), ctx.arg(2));
    let mut new_value = Vec::new();
    let r = write(server, ctx, key, true, |h, lim, ctx| {
        let old = match h.get(field) {
            None => F80::parse_redis(b"0"),
            Some(v) => match F80::parse_redis(v) {
                Some(v) => Some(v),
                None => {
                    ctx.err("ERR hash value is not a float");
                    return false;
                }
            },
        };
        let Some(sum) = old.map(|o| o.plus(incr)).filter(F80::is_finite) else {
            ctx.err("ERR increment would produce NaN or Infinity");
            return false;
        };
        let s = sum.to_redis_human();
        h.set(field, s.as_bytes(), lim);
        ctx.bulk(s.as_bytes());
        new_value = s.into_bytes();
        true
    });
    if let Ok(Some(true)) = r {
        server.dirty += 1;
        // Replayed as the value it produced (`HSET key field value`).
        server.prop_rewrite([&b"HSET"[..], key, field, &new_value]);
    }
}

/// HRANDFIELD key [count [WITHVALUES]] (Redis's `hrandfieldCommand`).
fn hrandfield(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    if ctx.argc() == 2 {
        let Ok(h) = read(&mut server.dbs[ctx.db], ctx, key) else {
            return;
        };
        return match h.filter(|h| !h.is_empty()) {
            Some(h) => {
                let i = server.rng.below(h.len());
                match h.pair(i) {
                    Some((f, _)) => resp::write_bulk(ctx.out, f),
                    None => ctx.null(),
                }
            }
            None => ctx.null(),
        };
    }
    let Ok(count) = parse_count(ctx, 2) else {
        return;
    };
    if ctx.argc() > 4 || (ctx.argc() == 4 && !eq(ctx.arg(3), "withvalues")) {
        return ctx.syntax();
    }
    let withvalues = ctx.argc() == 4;
    if withvalues && count.unsigned_abs() > (i64::MAX / 2) as u64 {
        return ctx.err("ERR value is out of range");
    }
    let Ok(h) = read(&mut server.dbs[ctx.db], ctx, key) else {
        return;
    };
    let Some(h) = h.filter(|_| count != 0) else {
        return ctx.array(0);
    };
    let rng = &mut server.rng;
    let len = h.len();
    let picks: Vec<usize> = if count < 0 {
        if count.unsigned_abs() > MAX_RANDOM_REPLY {
            return ctx.err("ERR value is out of range");
        }
        (0..count.unsigned_abs()).map(|_| rng.below(len)).collect()
    } else if count as u64 >= len as u64 {
        (0..len).collect()
    } else {
        distinct_picks(rng, len, count as usize)
    };
    if withvalues && ctx.proto >= 3 {
        ctx.array(picks.len());
    } else {
        ctx.array(picks.len() * if withvalues { 2 } else { 1 });
    }
    for i in picks {
        let Some((f, v)) = h.pair(i) else { continue };
        if withvalues && ctx.proto >= 3 {
            ctx.array(2);
        }
        resp::write_bulk(ctx.out, f);
        if withvalues {
            resp::write_bulk(ctx.out, v);
        }
    }
}

/// `k` distinct indexes below `len` (k < len): a partial Fisher–Yates
/// when k is a large part of len, rejection sampling otherwise.
pub(crate) fn distinct_picks(rng: &mut Rng, len: usize, k: usize) -> Vec<usize> {
    if k * 3 > len {
        let mut all: Vec<usize> = (0..len).collect();
        for i in 0..k {
            let j = i + rng.below(len - i);
            all.swap(i, j);
        }
        all.truncate(k);
        all
    } else {
        let mut seen = std::collections::HashSet::with_capacity(k);
        let mut out = Vec::with_capacity(k);
        while out.len() < k {
            let i = rng.below(len);
            if seen.insert(i) {
                out.push(i);
            }
        }
        out
    }
}

fn hscan(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(cursor) = parse_cursor(ctx.arg(2)) else {
        return ctx.err("ERR invalid cursor");
    };
    let key = ctx.arg(1);
    let h = match read(&mut server.dbs[ctx.db], ctx, key) {
        Err(Replied) => return,
        Ok(None) => return scan_reply(ctx, 0, &[]),
        Ok(Some(h)) => h,
    };
    let Ok(o) = scan_opts(ctx, 3) else {
        return;
    };
    let (next, range) = if h.is_table() {
        dense_step(h.len(), cursor, o.count)
    } else {
        (0, 0..h.len())
    };
    let mut items: Vec<&[u8]> = Vec::new();
    let listpack_order = !h.is_table();
    let mut visit = |i: usize| {
        if let Some((f, v)) = h.pair(i) {
            if o.matches(f) {
                items.push(f);
                items.push(v);
            }
        }
    };
    if listpack_order {
        range.for_each(&mut visit);
    } else {
        range.rev().for_each(&mut visit);
    }
    scan_reply(ctx, next, &items);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn converts_at_the_thresholds_and_keeps_contents() {
        let lim = Limits {
            hash_max_listpack_entries: 4,
            hash_max_listpack_value: 8,
            ..Limits::default()
        };
        let mut h = HashObj::new();
        for i in 0..4 {
            assert!(h.set(format!("f{i}").as_bytes(), b"v", &lim));
        }
        assert!(!h.set(b"f1", b"v1", &lim));
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(h.pairs()[1], (&b"f1"[..], &b"v1"[..]));
        assert!(h.set(b"f4", b"v", &lim));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"f1"), Some(&b"v1"[..]));
        assert_eq!(h.len(), 5);
        let mut g = HashObj::new();
        g.set(b"f", b"a-long-value", &lim);
        assert_eq!(g.encoding(), "hashtable");
        assert!(g.del(b"f") && g.is_empty());
    }
}
