//! Sorted-set commands (Redis's `t_zset.c`); the value and its encodings
//! are [`crate::zset`].
//!
//! * this file — the table, the shared lookups and replies, ZADD ZINCRBY
//!   ZREM ZCARD ZSCORE ZMSCORE ZRANK ZREVRANK ZSCAN ZRANDMEMBER;
//! * `range` — ZRANGE and its older forms, ZRANGESTORE, ZCOUNT,
//!   ZLEXCOUNT, ZREMRANGEBY*;
//! * `pop` — ZPOPMIN ZPOPMAX ZMPOP;
//! * `setops` — ZUNION ZINTER ZDIFF (and STORE), ZINTERCARD.
//!
//! Replies follow Redis 7.0.15: scores printed with `%.17g` (bulk strings
//! in RESP2, doubles in RESP3), WITHSCORES pairs flat in RESP2 and nested
//! in RESP3.

mod pop;
mod range;
mod setops;

pub(crate) use pop::serve_blocked;

use crate::cmd::{
    eq, parse_count, parse_ll, spec, CommandSpec, Ctx, Replied, ERR_NOT_FLOAT, ERR_WRONGTYPE, RO,
    RO_SLOW, WR, WR_FAST, WR_NODENY,
};
use crate::db::{Probe, Ref};
use crate::glob::stringmatch;
use crate::object::{check_kind, Kind, Object, MAX_RANDOM_REPLY};
use crate::server::Server;
use crate::t_hash::distinct_picks;
use crate::util::parse_cursor;
use crate::zset::{score, Limits, ZSet};

const ZSET: &str = "sorted-set";
/// Command flags used here beyond the shared ones (Redis's tables).
const W: &[&str] = &["write"];
const W_MOVABLE: &[&str] = &["write", "movablekeys"];
const RO_MOVABLE: &[&str] = &["readonly", "movablekeys"];
const WR_MOVABLE: &[&str] = &["write", "denyoom", "movablekeys"];
const W_BLOCKING_FAST: &[&str] = &["write", "noscript", "blocking", "fast"];
const W_BLOCKING_MOVABLE: &[&str] = &["write", "blocking", "movablekeys"];

pub static COMMANDS: &[CommandSpec] = &[
    spec!("zadd", -4, WR_FAST, 1, 1, 1, ZSET, "1.2.0", "Add one or more members to a sorted set, or update its score if it already exists", zadd),
    spec!("zincrby", 4, WR_FAST, 1, 1, 1, ZSET, "1.2.0", "Increment the score of a member in a sorted set", zincrby),
    spec!("zrem", -3, WR_NODENY, 1, 1, 1, ZSET, "1.2.0", "Remove one or more members from a sorted set", zrem),
    spec!("zcard", 2, RO, 1, 1, 1, ZSET, "1.2.0", "Get the number of members in a sorted set", zcard),
    spec!("zscore", 3, RO, 1, 1, 1, ZSET, "1.2.0", "Get the score associated with the given member in a sorted set", zscore),
    spec!("zmscore", -3, RO, 1, 1, 1, ZSET, "6.2.0", "Get the score associated with the given members in a sorted set", zmscore),
    spec!("zrank", 3, RO, 1, 1, 1, ZSET, "2.0.0", "Determine the index of a member in a sorted set", zrank),
    spec!("zrevrank", 3, RO, 1, 1, 1, ZSET, "2.0.0", "Determine the index of a member in a sorted set, with scores ordered from high to low", zrevrank),
    spec!("zscan", -3, RO_SLOW, 1, 1, 1, ZSET, "2.8.0", "Incrementally iterate sorted sets elements and associated scores", zscan),
    spec!("zrandmember", -2, RO_SLOW, 1, 1, 1, ZSET, "6.2.0", "Get one or multiple random elements from a sorted set", zrandmember),
    spec!("zcount", 4, RO, 1, 1, 1, ZSET, "2.0.0", "Count the members in a sorted set with scores within the given values", range::zcount),
    spec!("zlexcount", 4, RO, 1, 1, 1, ZSET, "2.8.9", "Count the number of members in a sorted set between a given lexicographical range", range::zlexcount),
    spec!("zrange", -4, RO_SLOW, 1, 1, 1, ZSET, "1.2.0", "Return a range of members in a sorted set", range::zrange),
    spec!("zrangestore", -5, WR, 1, 2, 1, ZSET, "6.2.0", "Store a range of members from sorted set into another key", range::zrangestore),
    spec!("zrevrange", -4, RO_SLOW, 1, 1, 1, ZSET, "1.2.0", "Return a range of members in a sorted set, by index, with scores ordered from high to low", range::zrevrange),
    spec!("zrangebyscore", -4, RO_SLOW, 1, 1, 1, ZSET, "1.0.5", "Return a range of members in a sorted set, by score", range::zrangebyscore),
    spec!("zrevrangebyscore", -4, RO_SLOW, 1, 1, 1, ZSET, "2.2.0", "Return a range of members in a sorted set, by score, with scores ordered from high to low", range::zrevrangebyscore),
    spec!("zrangebylex", -4, RO_SLOW, 1, 1, 1, ZSET, "2.8.9", "Return a range of members in a sorted set, by lexicographical range", range::zrangebylex),
    spec!("zrevrangebylex", -4, RO_SLOW, 1, 1, 1, ZSET, "2.8.9", "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", range::zrevrangebylex),
    spec!("zremrangebyrank", 4, W, 1, 1, 1, ZSET, "2.0.0", "Remove all members in a sorted set within the given indexes", range::zremrangebyrank),
    spec!("zremrangebyscore", 4, W, 1, 1, 1, ZSET, "1.2.0", "Remove all members in a sorted set within the given scores", range::zremrangebyscore),
    spec!("zremrangebylex", 4, W, 1, 1, 1, ZSET, "2.8.9", "Remove all members in a sorted set between the given lexicographical range", range::zremrangebylex),
    spec!("zpopmin", -2, WR_NODENY, 1, 1, 1, ZSET, "5.0.0", "Remove and return members with the lowest scores in a sorted set", pop::zpopmin),
    spec!("zpopmax", -2, WR_NODENY, 1, 1, 1, ZSET, "5.0.0", "Remove and return members with the highest scores in a sorted set", pop::zpopmax),
    spec!("zmpop", -4, W_MOVABLE, 0, 0, 0, ZSET, "7.0.0", "Remove and return members with scores in a sorted set", pop::zmpop),
    spec!("bzpopmin", -3, W_BLOCKING_FAST, 1, -2, 1, ZSET, "5.0.0", "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available", pop::bzpopmin),
    spec!("bzpopmax", -3, W_BLOCKING_FAST, 1, -2, 1, ZSET, "5.0.0", "Remove and return the member with the highest score from one or more sorted sets, or block until one is available", pop::bzpopmax),
    spec!("bzmpop", -5, W_BLOCKING_MOVABLE, 0, 0, 0, ZSET, "7.0.0", "Remove and return members with scores in a sorted set or block until one is available", pop::bzmpop),
    spec!("zunion", -3, RO_MOVABLE, 0, 0, 0, ZSET, "6.2.0", "Add multiple sorted sets", setops::zunion),
    spec!("zinter", -3, RO_MOVABLE, 0, 0, 0, ZSET, "6.2.0", "Intersect multiple sorted sets", setops::zinter),
    spec!("zdiff", -3, RO_MOVABLE, 0, 0, 0, ZSET, "6.2.0", "Subtract multiple sorted sets", setops::zdiff),
    spec!("zunionstore", -4, WR_MOVABLE, 1, 1, 1, ZSET, "2.0.0", "Add multiple sorted sets and store the resulting sorted set in a new key", setops::zunionstore),
    spec!("zinterstore", -4, WR_MOVABLE, 1, 1, 1, ZSET, "2.0.0", "Intersect multiple sorted sets and store the resulting sorted set in a new key", setops::zinterstore),
    spec!("zdiffstore", -4, WR_MOVABLE, 1, 1, 1, ZSET, "6.2.0", "Subtract multiple sorted sets and store the resulting sorted set in a new key", setops::zdiffstore),
    spec!("zintercard", -3, RO_MOVABLE, 0, 0, 0, ZSET, "7.0.0", "Intersect multiple sorted sets and return the cardinality of the result", setops::zintercard),
];

/// The encoding thresholds in force (`zset-max-listpack-*`).
pub(crate) fn limits(server: &Server) -> Limits {
    let e = &server.config.encodings;
    Limits {
        max_listpack_entries: usize::try_from(e.zset_max_listpack_entries).unwrap_or(usize::MAX),
        max_listpack_value: usize::try_from(e.zset_max_listpack_value).unwrap_or(usize::MAX),
    }
}

/// Read lookup (hit/miss counted): `None` if missing; WRONGTYPE replied
/// for another type.
pub(crate) fn read<'d>(
    server: &'d mut Server,
    ctx: &mut Ctx<'_>,
    key: &[u8],
) -> Result<Option<&'d ZSet>, Replied> {
    match server.dbs[ctx.db]
        .lookup_read(key, ctx.now)
        .map(|e| e.value)
    {
        None => Ok(None),
        Some(Ref::Obj(Object::Zset(z))) => Ok(Some(z)),
        Some(_) => {
            ctx.err(ERR_WRONGTYPE);
            Err(Replied)
        }
    }
}

/// Write lookup: the probe and whether a sorted set is there; WRONGTYPE
/// replied for another type.
pub(crate) fn probe(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    key: &[u8],
) -> Result<(Probe, bool), Replied> {
    let db = &mut server.dbs[ctx.db];
    let p = db.probe(key, ctx.now);
    let found = check_kind(db, &p, Kind::Zset, ctx)?;
    Ok((p, found))
}

/// `f` on the sorted set found by [`probe`]; the key goes when the set is
/// left empty (the keyspace's `update_obj`).
pub(crate) fn modify<R: Default>(
    server: &mut Server,
    ctx: &Ctx<'_>,
    p: &Probe,
    f: impl FnOnce(&mut ZSet) -> R,
) -> R {
    server.dbs[ctx.db]
        .update_obj(p, |o| match o {
            Object::Zset(z) => f(z),
            _ => R::default(),
        })
        .unwrap_or_default()
}

/// Store `z` at `key` (any old value and its TTL replaced, Redis's
/// `setKey`), or delete `key` when `z` is empty. Returns whether the
/// keyspace changed.
pub(crate) fn store(server: &mut Server, ctx: &Ctx<'_>, key: &[u8], z: ZSet) -> bool {
    let db = &mut server.dbs[ctx.db];
    if z.is_empty() {
        return db.delete(key, ctx.now);
    }
    let p = db.probe(key, ctx.now);
    let created = !p.found();
    db.insert_obj(p, key, Object::Zset(z));
    if created {
        // Redis's setKey -> dbAdd -> signalKeyAsReady (an overwrite does
        // not signal).
        server.blocked.signal(ctx.db, key);
    }
    true
}

/// A score: a bulk string in RESP2, a double in RESP3 (`addReplyDouble`).
pub(crate) fn reply_score(ctx: &mut Ctx<'_>, v: f64) {
    let mut buf = [0u8; 20];
    if let Some(d) = score::integral(v, &mut buf) {
        if ctx.proto >= 3 {
            ctx.out.push(b',');
            ctx.out.extend_from_slice(d);
            ctx.out.extend_from_slice(b"\r\n");
        } else {
            ctx.bulk(d);
        }
        return;
    }
    let s = score::format(v);
    if ctx.proto >= 3 {
        ctx.out.push(b',');
        ctx.out.extend_from_slice(s.as_bytes());
        ctx.out.extend_from_slice(b"\r\n");
    } else {
        ctx.bulk(s.as_bytes());
    }
}

/// The array header for `n` results, pairs flat in RESP2.
pub(crate) fn reply_len(ctx: &mut Ctx<'_>, n: usize, withscores: bool) {
    ctx.array(if withscores && ctx.proto < 3 {
        2 * n
    } else {
        n
    });
}

/// One result: the member, and with scores its score (as a pair in RESP3).
pub(crate) fn reply_member(ctx: &mut Ctx<'_>, m: &[u8], s: f64, withscores: bool) {
    if withscores && ctx.proto >= 3 {
        ctx.array(2);
    }
    ctx.bulk(m);
    if withscores {
        reply_score(ctx, s);
    }
}

/// Arguments `from..` as byte slices.
pub(crate) fn args_from<'a>(ctx: &Ctx<'a>, from: usize) -> Vec<&'a [u8]> {
    (from..ctx.argc()).map(|i| ctx.arg(i)).collect()
}

/// ZADD's flags.
#[derive(Clone, Copy, Debug, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    incr: bool,
}

/// What `zsetAdd` did with one element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Added,
    Updated,
    /// Processed, score unchanged.
    Same,
    /// Not processed (NX/XX/GT/LT said no).
    Nop,
}

/// Redis's `zsetAdd`: `Err` when an increment gives NaN; else what
/// happened and the resulting score.
fn zset_add(
    z: &mut ZSet,
    score: f64,
    m: &[u8],
    f: AddFlags,
    lim: &Limits,
) -> Result<(Outcome, f64), ()> {
    match z.score(m) {
        Some(cur) => {
            if f.nx {
                return Ok((Outcome::Nop, cur));
            }
            let mut score = score;
            if f.incr {
                score += cur;
                if score.is_nan() {
                    return Err(());
                }
            }
            if (f.lt && score >= cur) || (f.gt && score <= cur) {
                return Ok((Outcome::Nop, cur));
            }
            if score != cur {
                z.set(m, score, lim);
                return Ok((Outcome::Updated, score));
            }
            Ok((Outcome::Same, score))
        }
        None if !f.xx => {
            z.set(m, score, lim);
            Ok((Outcome::Added, score))
        }
        None => Ok((Outcome::Nop, score)),
    }
}

/// Counters of one ZADD.
#[derive(Clone, Copy, Debug, Default)]
struct AddTotals {
    added: i64,
    updated: i64,
    processed: i64,
    last: f64,
    nan: bool,
}

fn add_all(z: &mut ZSet, elems: &[(f64, &[u8])], f: AddFlags, lim: &Limits) -> AddTotals {
    let mut t = AddTotals::default();
    for &(s, m) in elems {
        match zset_add(z, s, m, f, lim) {
            Err(()) => {
                t.nan = true;
                return t;
            }
            Ok((what, score)) => {
                match what {
                    Outcome::Added => t.added += 1,
                    Outcome::Updated => t.updated += 1,
                    _ => {}
                }
                if what != Outcome::Nop {
                    t.processed += 1;
                }
                t.last = score;
            }
        }
    }
    t
}

fn zadd(server: &mut Server, ctx: &mut Ctx<'_>) {
    zadd_generic(server, ctx, AddFlags::default());
}

fn zincrby(server: &mut Server, ctx: &mut Ctx<'_>) {
    zadd_generic(
        server,
        ctx,
        AddFlags {
            incr: true,
            ..AddFlags::default()
        },
    );
}

/// Redis's `zaddGenericCommand` (ZINCRBY is ZADD with INCR preset, and
/// parses its arguments the same way).
fn zadd_generic(server: &mut Server, ctx: &mut Ctx<'_>, mut f: AddFlags) {
    let mut ch = false;
    let mut idx = 2;
    while idx < ctx.argc() {
        let o = ctx.arg(idx);
        if eq(o, "nx") {
            f.nx = true;
        } else if eq(o, "xx") {
            f.xx = true;
        } else if eq(o, "ch") {
            ch = true;
        } else if eq(o, "incr") {
            f.incr = true;
        } else if eq(o, "gt") {
            f.gt = true;
        } else if eq(o, "lt") {
            f.lt = true;
        } else {
            break;
        }
        idx += 1;
    }
    let n = ctx.argc() - idx;
    if n % 2 == 1 || n == 0 {
        return ctx.syntax();
    }
    if f.nx && f.xx {
        return ctx.err("ERR XX and NX options at the same time are not compatible");
    }
    if (f.gt || f.lt) && f.nx || f.gt && f.lt {
        return ctx.err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && n > 2 {
        return ctx.err("ERR INCR option supports a single increment-element pair");
    }
    let mut elems = Vec::with_capacity(n / 2);
    for j in (idx..ctx.argc()).step_by(2) {
        match score::parse(ctx.arg(j)) {
            Some(s) => elems.push((s, ctx.arg(j + 1))),
            None => return ctx.err(ERR_NOT_FLOAT),
        }
    }
    let key = ctx.arg(1);
    let Ok((p, found)) = probe(server, ctx, key) else {
        return;
    };
    let lim = limits(server);
    let t = if found {
        modify(server, ctx, &p, |z| add_all(z, &elems, f, &lim))
    } else if f.xx {
        AddTotals::default()
    } else {
        let mut z = ZSet::for_first(&lim, elems[0].1.len());
        let t = add_all(&mut z, &elems, f, &lim);
        if !z.is_empty() {
            server.dbs[ctx.db].insert_obj(p, key, Object::Zset(z));
            // Redis's dbAdd -> signalKeyAsReady: BZPOP* waiters.
            server.blocked.signal(ctx.db, key);
        }
        t
    };
    if t.nan {
        return ctx.err("ERR resulting score is not a number (NaN)");
    }
    server.dirty += (t.added + t.updated) as u64;
    if f.incr {
        if t.processed > 0 {
            reply_score(ctx, t.last);
        } else {
            ctx.null();
        }
    } else {
        ctx.int(if ch { t.added + t.updated } else { t.added });
    }
}

fn zrem(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    let Ok((p, found)) = probe(server, ctx, key) else {
        return;
    };
    if !found {
        return ctx.int(0);
    }
    let members = args_from(ctx, 2);
    let deleted = modify(server, ctx, &p, |z| {
        let mut n = 0i64;
        for m in members {
            if z.remove(m).is_some() {
                n += 1;
            }
            if z.is_empty() {
                break;
            }
        }
        n
    });
    server.dirty += deleted as u64;
    ctx.int(deleted);
}

fn zcard(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    if let Ok(z) = read(server, ctx, key) {
        ctx.int(z.map_or(0, |z| z.len() as i64));
    }
}

fn zscore(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (key, m) = (ctx.arg(1), ctx.arg(2));
    if let Ok(z) = read(server, ctx, key) {
        match z.and_then(|z| z.score(m)) {
            Some(s) => reply_score(ctx, s),
            None => ctx.null(),
        }
    }
}

fn zmscore(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    let members = args_from(ctx, 2);
    if let Ok(z) = read(server, ctx, key) {
        ctx.array(members.len());
        for m in members {
            match z.and_then(|z| z.score(m)) {
                Some(s) => reply_score(ctx, s),
                None => ctx.null(),
            }
        }
    }
}

fn rank_generic(server: &mut Server, ctx: &mut Ctx<'_>, rev: bool) {
    let (key, m) = (ctx.arg(1), ctx.arg(2));
    if let Ok(z) = read(server, ctx, key) {
        match z.and_then(|z| z.rank(m, rev)) {
            Some(r) => ctx.int(r as i64),
            None => ctx.null(),
        }
    }
}

fn zrank(server: &mut Server, ctx: &mut Ctx<'_>) {
    rank_generic(server, ctx, false);
}

fn zrevrank(server: &mut Server, ctx: &mut Ctx<'_>) {
    rank_generic(server, ctx, true);
}

/// Redis's `scanGenericCommand` for a sorted set: a small set is returned
/// whole with cursor 0; a large one walks its arena (see
/// [`crate::zset::large::Large::scan`]). Scores are bulk strings in both
/// protocols.
fn zscan(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(cursor) = parse_cursor(ctx.arg(2)) else {
        return ctx.err("ERR invalid cursor");
    };
    let key = ctx.arg(1);
    let z = match read(server, ctx, key) {
        Err(Replied) => return,
        Ok(None) => {
            ctx.array(2);
            ctx.bulk(b"0");
            return ctx.array(0);
        }
        Ok(Some(z)) => z,
    };
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut j = 3;
    while j < ctx.argc() {
        let more = ctx.argc() - j - 1;
        if eq(ctx.arg(j), "count") && more >= 1 {
            let Some(c) = parse_ll(ctx, j + 1) else {
                return;
            };
            if c < 1 {
                return ctx.syntax();
            }
            count = c;
        } else if eq(ctx.arg(j), "match") && more >= 1 {
            let p = ctx.arg(j + 1);
            pattern = (p != b"*").then_some(p);
        } else {
            return ctx.syntax();
        }
        j += 2;
    }
    let small = matches!(z, ZSet::Listpack(_));
    let (next, items) = match z {
        ZSet::Listpack(_) => (0, z.to_vec()),
        ZSet::Large(t) => t.scan(cursor, usize::try_from(count).unwrap_or(usize::MAX)),
    };
    let items: Vec<_> = items
        .into_iter()
        .filter(|(m, _)| pattern.is_none_or(|p| stringmatch(p, m, false)))
        .collect();
    ctx.array(2);
    ctx.bulk(next.to_string().as_bytes());
    ctx.array(items.len() * 2);
    for (m, s) in items {
        ctx.bulk(&m);
        if small && s.fract() == 0.0 && s.abs() <= 4_611_686_018_427_387_904.0 {
            // A listpack holds an integral score up to 2^62 as an integer
            // (Redis's double2ll), and ZSCAN returns the stored text.
            ctx.bulk((s as i64).to_string().as_bytes());
        } else {
            ctx.bulk(score::format(s).as_bytes());
        }
    }
}

/// Redis's `zrandmemberCommand`. Negative counts pick with repetition,
/// bounded as HRANDFIELD / SRANDMEMBER are ([`MAX_RANDOM_REPLY`]: Redis
/// would try to build any reply, and run out of memory for
/// -9223372036854775807).
fn zrandmember(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    let mut withscores = false;
    let mut count = None;
    if ctx.argc() >= 3 {
        let Ok(l) = parse_count(ctx, 2) else {
            return;
        };
        if ctx.argc() > 4 || (ctx.argc() == 4 && !eq(ctx.arg(3), "withscores")) {
            return ctx.syntax();
        }
        withscores = ctx.argc() == 4;
        if withscores && !(i64::MIN / 2..=i64::MAX / 2).contains(&l) {
            return ctx.err("ERR value is out of range");
        }
        count = Some(l);
    }
    let Server { dbs, rng, .. } = server;
    let z = match dbs[ctx.db].lookup_read(key, ctx.now).map(|e| e.value) {
        None => None,
        Some(Ref::Obj(Object::Zset(z))) => Some(z),
        Some(_) => return ctx.err(ERR_WRONGTYPE),
    };
    let Some(l) = count else {
        match z.and_then(|z| z.get(rng.below(z.len()))) {
            Some((m, _)) => ctx.bulk(m),
            None => ctx.null(),
        }
        return;
    };
    let Some(z) = z.filter(|_| l != 0) else {
        return ctx.array(0);
    };
    let size = z.len();
    if l < 0 || l == 1 {
        // With repetitions: independent picks.
        if l.unsigned_abs() > MAX_RANDOM_REPLY {
            return ctx.err("ERR value is out of range");
        }
        let n = l.unsigned_abs() as usize;
        reply_len(ctx, n, withscores);
        for _ in 0..n {
            if let Some((m, s)) = z.get(rng.below(size)) {
                reply_member(ctx, m, s, withscores);
            }
        }
        return;
    }
    if l as u64 >= size as u64 {
        // The whole set, walked from the top as Redis's iterator does.
        reply_len(ctx, size, withscores);
        z.visit(0, size, true, |m, s| reply_member(ctx, m, s, withscores));
        return;
    }
    let picks = distinct_picks(rng, size, l as usize);
    reply_len(ctx, picks.len(), withscores);
    for r in picks {
        if let Some((m, s)) = z.get(r) {
            reply_member(ctx, m, s, withscores);
        }
    }
}
