//! Sets (Redis's `t_set.c`): the storage and its two encodings, and the
//! set commands.
//!
//! Encodings, as Redis 7.0: an [`IntSet`] while every member is an
//! integer in canonical form and there are at most
//! `set-max-intset-entries` of them; otherwise a hashtable ([`Dict`]),
//! for good. (Redis 7.2 added listpack sets for small non-integer sets;
//! `set-max-listpack-entries` is accepted but 7.0's behaviour kept.)

use crate::cmd::{
    dense_step, eq, parse_count, scan_opts, scan_reply, spec, CommandSpec, Ctx, Replied, RO,
    RO_SLOW, WR, WR_FAST, WR_NODENY,
};
use crate::db::Db;
use crate::dict::Dict;
use crate::intset::IntSet;
use crate::object::{check_kind, read_kind, Kind, Limits, Object, MAX_RANDOM_REPLY};
use crate::resp;
use crate::server::Server;
use crate::t_hash::distinct_picks;
use crate::util::{parse_cursor, string2ll, Rng};

#[derive(Clone, Debug)]
pub enum SetObj {
    Intset(IntSet),
    Table(Box<Dict<()>>),
}

/// A member as an intset integer: Redis's `isSdsRepresentableAsLongLong`
/// (canonical decimal only: no `+`, no leading zeros, no `-0`).
pub fn as_int(m: &[u8]) -> Option<i64> {
    string2ll(m)
}

impl SetObj {
    /// Redis's `setTypeCreate`: an intset if the first member is an integer.
    pub fn for_member(m: &[u8]) -> SetObj {
        if as_int(m).is_some() {
            SetObj::Intset(IntSet::new())
        } else {
            SetObj::Table(Box::default())
        }
    }

    pub fn len(&self) -> usize {
        match self {
            SetObj::Intset(s) => s.len(),
            SetObj::Table(d) => d.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            SetObj::Intset(_) => "intset",
            SetObj::Table(_) => "hashtable",
        }
    }

    pub fn mem(&self) -> usize {
        match self {
            SetObj::Intset(s) => s.capacity_bytes(),
            SetObj::Table(d) => std::mem::size_of::<Dict<()>>() + d.mem(),
        }
    }

    fn convert_to_table(&mut self, extra: usize) {
        if let SetObj::Intset(s) = self {
            let mut d = Dict::with_capacity(s.len() + extra);
            for x in s.iter() {
                d.insert(x.to_string().as_bytes(), ());
            }
            *self = SetObj::Table(Box::new(d));
        }
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            SetObj::Intset(s) => as_int(m).is_some_and(|x| s.contains(x)),
            SetObj::Table(d) => d.contains(m),
        }
    }

    /// Add `m`; true if it is new.
    pub fn add(&mut self, m: &[u8], lim: &Limits) -> bool {
        if let SetObj::Intset(s) = self {
            match as_int(m) {
                Some(x) => {
                    if !s.insert(x) {
                        return false;
                    }
                    if s.len() as u64 > lim.set_max_intset_entries {
                        self.convert_to_table(0);
                    }
                    return true;
                }
                None => self.convert_to_table(1),
            }
        }
        match self {
            SetObj::Table(d) => d.insert(m, ()).is_none(),
            SetObj::Intset(_) => false,
        }
    }

    /// Remove `m`; true if it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            SetObj::Intset(s) => as_int(m).is_some_and(|x| s.remove(x)),
            SetObj::Table(d) => d.remove(m).is_some(),
        }
    }

    /// See [`crate::object::Object::free_some`].
    pub fn free_some(&mut self, budget: usize) -> usize {
        match self {
            SetObj::Table(d) => d.free_some(budget),
            SetObj::Intset(s) => {
                let n = s.len();
                *s = IntSet::new();
                n
            }
        }
    }

    /// Member `i` of the encoding's order (O(1)).
    pub fn member(&self, i: usize) -> Option<Vec<u8>> {
        match self {
            SetObj::Intset(s) => s.get(i).map(|x| x.to_string().into_bytes()),
            SetObj::Table(d) => d.entry(i).map(|(k, _)| k.to_vec()),
        }
    }

    /// Remove member `i` of the encoding's order.
    pub fn remove_index(&mut self, i: usize) -> Option<Vec<u8>> {
        match self {
            SetObj::Intset(s) => s.remove_index(i).map(|x| x.to_string().into_bytes()),
            SetObj::Table(d) => d.remove_index(i).map(|(k, _)| k.into_vec()),
        }
    }

    /// Members in the encoding's order (ascending for an intset).
    pub fn members(&self) -> Vec<Vec<u8>> {
        match self {
            SetObj::Intset(s) => s.iter().map(|x| x.to_string().into_bytes()).collect(),
            SetObj::Table(d) => d.iter().map(|(k, _)| k.to_vec()).collect(),
        }
    }
}

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "sadd",
        -3,
        WR_FAST,
        1,
        1,
        1,
        "set",
        "1.0.0",
        "Add one or more members to a set",
        sadd
    ),
    spec!(
        "srem",
        -3,
        WR_NODENY,
        1,
        1,
        1,
        "set",
        "1.0.0",
        "Remove one or more members from a set",
        srem
    ),
    spec!(
        "sismember",
        3,
        RO,
        1,
        1,
        1,
        "set",
        "1.0.0",
        "Determine if a given value is a member of a set",
        sismember
    ),
    spec!(
        "smismember",
        -3,
        RO,
        1,
        1,
        1,
        "set",
        "6.2.0",
        "Returns the membership associated with the given elements for a set",
        smismember
    ),
    spec!(
        "scard",
        2,
        RO,
        1,
        1,
        1,
        "set",
        "1.0.0",
        "Get the number of members in a set",
        scard
    ),
    spec!(
        "smembers",
        2,
        RO_SLOW,
        1,
        1,
        1,
        "set",
        "1.0.0",
        "Get all the members in a set",
        smembers
    ),
    spec!(
        "spop",
        -2,
        WR_NODENY,
        1,
        1,
        1,
        "set",
        "1.0.0",
        "Remove and return one or multiple random members from a set",
        spop
    ),
    spec!(
        "srandmember",
        -2,
        RO_SLOW,
        1,
        1,
        1,
        "set",
        "1.0.0",
        "Get one or multiple random members from a set",
        srandmember
    ),
    spec!(
        "smove",
        4,
        WR_FAST,
        1,
        2,
        1,
        "set",
        "1.0.0",
        "Move a member from one set to another",
        smove
    ),
    spec!(
        "sinter",
        -2,
        RO_SLOW,
        1,
        -1,
        1,
        "set",
        "1.0.0",
        "Intersect multiple sets",
        sinter
    ),
    spec!(
        "sintercard",
        -3,
        RO_SLOW,
        0,
        0,
        0,
        "set",
        "7.0.0",
        "Intersect multiple sets and return the cardinality of the result",
        sintercard
    ),
    spec!(
        "sinterstore",
        -3,
        WR,
        1,
        -1,
        1,
        "set",
        "1.0.0",
        "Intersect multiple sets and store the resulting set in a key",
        sinterstore
    ),
    spec!(
        "sunion",
        -2,
        RO_SLOW,
        1,
        -1,
        1,
        "set",
        "1.0.0",
        "Add multiple sets",
        sunion
    ),
    spec!(
        "sunionstore",
        -3,
        WR,
        1,
        -1,
        1,
        "set",
        "1.0.0",
        "Add multiple sets and store the resulting set in a key",
        sunionstore
    ),
    spec!(
        "sdiff",
        -2,
        RO_SLOW,
        1,
        -1,
        1,
        "set",
        "1.0.0",
        "Subtract multiple sets",
        sdiff
    ),
    spec!(
        "sdiffstore",
        -3,
        WR,
        1,
        -1,
        1,
        "set",
        "1.0.0",
        "Subtract multiple sets and store the resulting set in a key",
        sdiffstore
    ),
    spec!(
        "sscan",
        -3,
        RO_SLOW,
        1,
        1,
        1,
        "set",
        "2.8.0",
        "Incrementally iterate Set elements",
        sscan
    ),
];

// ------------------------------------------------------------ commands

fn as_set(o: &Object) -> Option<&SetObj> {
    match o {
        Object::Set(s) => Some(s),
        _ => None,
    }
}

/// Read lookup of a set (WRONGTYPE written on `Err`).
fn read<'d>(db: &'d mut Db, ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<&'d SetObj>, Replied> {
    Ok(read_kind(db, ctx, key, Kind::Set)?.and_then(as_set))
}

/// Write to the set at `key` through `f`; `create` makes it (from the
/// first member, Redis's `setTypeCreate`) when missing. The key is
/// deleted if `f` leaves the set empty.
fn write<R>(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    key: &[u8],
    create: Option<&[u8]>,
    f: impl FnOnce(&mut SetObj, &Limits, &mut Ctx<'_>, &mut Rng) -> R,
) -> Result<Option<R>, Replied> {
    let lim = server.config.encodings;
    let d = &mut server.dbs[ctx.db];
    let mut p = d.probe(key, ctx.now);
    if !check_kind(d, &p, Kind::Set, ctx)? {
        let Some(first) = create else {
            return Ok(None);
        };
        p = d.insert_obj(p, key, Object::Set(SetObj::for_member(first)));
    }
    let rng = &mut server.rng;
    Ok(d.update_obj(&p, |o| match o {
        Object::Set(s) => Some(f(s, &lim, ctx, rng)),
        _ => None,
    })
    .flatten())
}

/// Store `members` as the set `dst` (the STORE variants): replaces what is
/// there, deletes `dst` when empty. Built like Redis's result set: an
/// intset while the members allow.
/// Store `members` at `dst` (an empty result deletes it); the size and
/// whether anything changed (Redis counts an empty result as a change
/// only when it deleted a key).
fn store(
    server: &mut Server,
    db: usize,
    now: i64,
    dst: &[u8],
    members: &[Vec<u8>],
) -> (usize, bool) {
    let lim = server.config.encodings;
    let d = &mut server.dbs[db];
    let deleted = d.delete(dst, now);
    if members.is_empty() {
        return (0, deleted);
    }
    let mut s = SetObj::Intset(crate::intset::IntSet::new());
    for m in members {
        s.add(m, &lim);
    }
    let n = s.len();
    let p = d.probe(dst, now);
    d.insert_obj(p, dst, Object::Set(s));
    (n, true)
}

fn sadd(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    let argv = ctx.argv;
    let r = write(server, ctx, key, Some(ctx.arg(2)), |s, lim, _, _| {
        argv.iter().skip(2).filter(|m| s.add(m, lim)).count()
    });
    if let Ok(Some(n)) = r {
        server.dirty += n as u64;
        ctx.int(n as i64);
    }
}

fn srem(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    let argv = ctx.argv;
    let r = write(server, ctx, key, None, |s, _, _, _| {
        let mut n = 0;
        for m in argv.iter().skip(2) {
            if s.remove(m) {
                n += 1;
                if s.is_empty() {
                    break;
                }
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

fn sismember(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (key, m) = (ctx.arg(1), ctx.arg(2));
    if let Ok(s) = read(&mut server.dbs[ctx.db], ctx, key) {
        let found = s.is_some_and(|s| s.contains(m));
        ctx.int(i64::from(found));
    }
}

fn smismember(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    let Ok(s) = read(&mut server.dbs[ctx.db], ctx, key) else {
        return;
    };
    ctx.array(ctx.argc() - 2);
    for i in 2..ctx.argc() {
        let found = s.is_some_and(|s| s.contains(ctx.arg(i)));
        resp::write_int(ctx.out, i64::from(found));
    }
}

fn scard(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    if let Ok(s) = read(&mut server.dbs[ctx.db], ctx, key) {
        let n = s.map_or(0, SetObj::len);
        ctx.int(n as i64);
    }
}

fn reply_members(ctx: &mut Ctx<'_>, ms: &[Vec<u8>]) {
    ctx.set_len(ms.len());
    for m in ms {
        resp::write_bulk(ctx.out, m);
    }
}

fn smembers(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    if let Ok(s) = read(&mut server.dbs[ctx.db], ctx, key) {
        let ms = s.map(SetObj::members).unwrap_or_default();
        reply_members(ctx, &ms);
    }
}

fn spop(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    if ctx.argc() > 3 {
        return ctx.syntax();
    }
    let count = if ctx.argc() == 3 {
        match string2ll(ctx.arg(2)).filter(|&n| n >= 0) {
            Some(n) => Some(n as u64),
            None => return ctx.err("ERR value is out of range, must be positive"),
        }
    } else {
        None
    };
    let mut whole = false;
    let r = write(server, ctx, key, None, |s, _, _, rng| match count {
        None => {
            let i = rng.below(s.len());
            s.remove_index(i).into_iter().collect::<Vec<_>>()
        }
        Some(n) if n >= s.len() as u64 => {
            whole = true;
            let all = s.members();
            while let Some(i) = s.len().checked_sub(1) {
                s.remove_index(i);
            }
            all
        }
        Some(n) => (0..n)
            .filter_map(|_| {
                let i = rng.below(s.len());
                s.remove_index(i)
            })
            .collect(),
    });
    match (r, count) {
        (Err(Replied), _) => {}
        (Ok(None), None) => ctx.null(),
        (Ok(None), Some(_)) => ctx.set_len(0),
        (Ok(Some(v)), None) => match v.first() {
            Some(m) => {
                server.dirty += 1;
                server.prop_rewrite([&b"SREM"[..], key, m]);
                ctx.bulk(m);
            }
            None => ctx.null(),
        },
        (Ok(Some(v)), Some(_)) => {
            server.dirty += v.len() as u64;
            if server.propagating() && !v.is_empty() {
                // The whole set: DEL; else one SREM per member (Redis 7.0).
                if whole {
                    server.prop_rewrite([&b"DEL"[..], key]);
                } else {
                    let db = ctx.db;
                    for m in &v {
                        server.prop_also(db, [&b"SREM"[..], key, m]);
                    }
                    server.prop_prevent();
                }
            }
            reply_members(ctx, &v);
        }
    }
}

fn srandmember(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    if ctx.argc() == 2 {
        let Ok(s) = read(&mut server.dbs[ctx.db], ctx, key) else {
            return;
        };
        return match s.filter(|s| !s.is_empty()) {
            Some(s) => {
                let i = server.rng.below(s.len());
                match s.member(i) {
                    Some(m) => ctx.bulk(&m),
                    None => ctx.null(),
                }
            }
            None => ctx.null(),
        };
    }
    if ctx.argc() > 3 {
        return ctx.syntax();
    }
    let Ok(count) = parse_count(ctx, 2) else {
        return;
    };
    let Ok(s) = read(&mut server.dbs[ctx.db], ctx, key) else {
        return;
    };
    let Some(s) = s.filter(|_| count != 0) else {
        return ctx.array(0);
    };
    let len = s.len();
    let rng = &mut server.rng;
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
    ctx.array(picks.len());
    for i in picks {
        match s.member(i) {
            Some(m) => resp::write_bulk(ctx.out, &m),
            None => ctx.null(),
        }
    }
}

fn smove(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (src, dst, m) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    let (db, now) = (ctx.db, ctx.now);
    let d = &mut server.dbs[db];
    let ps = d.probe(src, now);
    let pd = d.probe(dst, now);
    if !ps.found() {
        return ctx.int(0);
    }
    if check_kind(d, &ps, Kind::Set, ctx).is_err() || check_kind(d, &pd, Kind::Set, ctx).is_err() {
        return;
    }
    if src == dst {
        let found = d
            .probed_obj(&ps)
            .and_then(as_set)
            .is_some_and(|s| s.contains(m));
        return ctx.int(i64::from(found));
    }
    let removed = d.update_obj(&ps, |o| match o {
        Object::Set(s) => s.remove(m),
        _ => false,
    });
    if removed != Some(true) {
        return ctx.int(0);
    }
    server.dirty += 1;
    let _ = write(server, ctx, dst, Some(m), |s, lim, _, _| s.add(m, lim));
    ctx.int(1);
}

/// Every key's set (`None` for a missing key), WRONGTYPE if any key holds
/// another type (Redis checks all keys before computing).
fn sets_of<'d>(
    db: &'d mut Db,
    ctx: &mut Ctx<'_>,
    keys: std::ops::Range<usize>,
) -> Result<Vec<Option<&'d SetObj>>, Replied> {
    let now = ctx.now;
    let probes: Vec<_> = keys.clone().map(|i| db.probe(ctx.arg(i), now)).collect();
    for (p, i) in probes.iter().zip(keys) {
        db.count_read_key(ctx.arg(i), p.found());
        check_kind(db, p, Kind::Set, ctx)?;
    }
    let db: &'d Db = db;
    Ok(probes
        .iter()
        .map(|p| db.probed_obj(p).and_then(as_set))
        .collect())
}

/// SINTER over `sets` (the smallest set's members found in all others),
/// stopping at `limit` members (0: no limit).
fn inter(sets: &[Option<&SetObj>], limit: usize) -> Vec<Vec<u8>> {
    let mut sets: Vec<&SetObj> = match sets.iter().copied().collect::<Option<Vec<_>>>() {
        Some(s) => s,
        None => return Vec::new(),
    };
    sets.sort_by_key(|s| s.len());
    let Some((first, rest)) = sets.split_first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for m in first.members() {
        if rest.iter().all(|s| s.contains(&m)) {
            out.push(m);
            if limit != 0 && out.len() >= limit {
                break;
            }
        }
    }
    out
}

/// SUNION (`diff` false) or SDIFF (the first set minus the others).
fn union_diff(sets: &[Option<&SetObj>], diff: bool) -> Vec<Vec<u8>> {
    let mut acc = crate::dict::Dict::<()>::new();
    if diff {
        let Some(Some(first)) = sets.first() else {
            return Vec::new();
        };
        for m in first.members() {
            if !sets[1..].iter().flatten().any(|s| s.contains(&m)) {
                acc.insert(&m, ());
            }
        }
    } else {
        for s in sets.iter().flatten() {
            for m in s.members() {
                acc.insert(&m, ());
            }
        }
    }
    acc.iter().map(|(k, _)| k.to_vec()).collect()
}

fn setop(server: &mut Server, ctx: &mut Ctx<'_>, op: u8, store_at: Option<usize>) {
    let first = if store_at.is_some() { 2 } else { 1 };
    let (db, now) = (ctx.db, ctx.now);
    let Ok(sets) = sets_of(&mut server.dbs[db], ctx, first..ctx.argc()) else {
        return;
    };
    let mut ms = match op {
        b'i' => inter(&sets, 0),
        b'u' => union_diff(&sets, false),
        _ => union_diff(&sets, true),
    };
    if let Some(i) = store_at {
        let (n, changed) = store(server, db, now, ctx.arg(i), &ms);
        if changed {
            server.dirty += 1;
        }
        return ctx.int(n as i64);
    }
    // An integer-only result comes back ascending, as Redis's intset does.
    if ms.len() as u64 <= server.config.encodings.set_max_intset_entries
        && ms.iter().all(|m| crate::t_set::as_int(m).is_some())
        && op != b'i'
    {
        ms.sort_by_key(|m| crate::t_set::as_int(m).unwrap_or(0));
    }
    reply_members(ctx, &ms);
}

fn sinter(server: &mut Server, ctx: &mut Ctx<'_>) {
    setop(server, ctx, b'i', None);
}

fn sinterstore(server: &mut Server, ctx: &mut Ctx<'_>) {
    setop(server, ctx, b'i', Some(1));
}

fn sunion(server: &mut Server, ctx: &mut Ctx<'_>) {
    setop(server, ctx, b'u', None);
}

fn sunionstore(server: &mut Server, ctx: &mut Ctx<'_>) {
    setop(server, ctx, b'u', Some(1));
}

fn sdiff(server: &mut Server, ctx: &mut Ctx<'_>) {
    setop(server, ctx, b'd', None);
}

fn sdiffstore(server: &mut Server, ctx: &mut Ctx<'_>) {
    setop(server, ctx, b'd', Some(1));
}

fn sintercard(server: &mut Server, ctx: &mut Ctx<'_>) {
    let numkeys = match string2ll(ctx.arg(1)) {
        Some(n) if n >= 1 => n as u64,
        _ => return ctx.err("ERR numkeys should be greater than 0"),
    };
    if numkeys > (ctx.argc() - 2) as u64 {
        return ctx.err("ERR Number of keys can't be greater than number of args");
    }
    let end = 2 + numkeys as usize;
    let mut limit = 0usize;
    let mut j = end;
    while j < ctx.argc() {
        if eq(ctx.arg(j), "limit") && j + 1 < ctx.argc() {
            match string2ll(ctx.arg(j + 1)) {
                Some(l) if l >= 0 => limit = usize::try_from(l).unwrap_or(usize::MAX),
                _ => return ctx.err("ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return ctx.syntax();
        }
    }
    let Ok(sets) = sets_of(&mut server.dbs[ctx.db], ctx, 2..end) else {
        return;
    };
    let n = inter(&sets, limit).len();
    ctx.int(n as i64);
}

fn sscan(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(cursor) = parse_cursor(ctx.arg(2)) else {
        return ctx.err("ERR invalid cursor");
    };
    let key = ctx.arg(1);
    let s = match read(&mut server.dbs[ctx.db], ctx, key) {
        Err(Replied) => return,
        Ok(None) => return scan_reply(ctx, 0, &[]),
        Ok(Some(s)) => s,
    };
    let Ok(o) = scan_opts(ctx, 3) else {
        return;
    };
    let (next, items): (u64, Vec<Vec<u8>>) = match s {
        SetObj::Intset(_) => (0, s.members()),
        SetObj::Table(_) => {
            let (next, range) = dense_step(s.len(), cursor, o.count);
            (next, range.rev().filter_map(|i| s.member(i)).collect())
        }
    };
    let items: Vec<&[u8]> = items
        .iter()
        .map(Vec::as_slice)
        .filter(|m| o.matches(m))
        .collect();
    scan_reply(ctx, next, &items);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intset_until_a_string_or_too_many() {
        let lim = Limits {
            set_max_intset_entries: 3,
            ..Limits::default()
        };
        let mut s = SetObj::for_member(b"1");
        for m in [&b"3"[..], b"1", b"2"] {
            s.add(m, &lim);
        }
        assert_eq!(s.encoding(), "intset");
        assert_eq!(
            s.members(),
            vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]
        );
        assert!(!s.contains(b"01") && s.contains(b"2"));
        assert!(s.add(b"4", &lim));
        assert_eq!(s.encoding(), "hashtable");
        let mut t = SetObj::for_member(b"1");
        t.add(b"1", &lim);
        assert!(t.add(b"01", &lim));
        assert_eq!((t.encoding(), t.len()), ("hashtable", 2));
        assert!(t.remove(b"1") && t.remove(b"01") && t.is_empty());
    }
}
