//! Lists (Redis's `t_list.c`): the list commands over a [`Quicklist`],
//! and the blocking pops' entry points (their waiting is
//! [`crate::blocked`]). OBJECT ENCODING answers `quicklist` for every
//! list, as Redis 7.0 does.

use crate::blocked::{bmove, bmpop, bpop};
use crate::cmd::{
    eq, parse_ll, spec, CommandSpec, Ctx, Replied, ERR_NOT_INT, ERR_NO_SUCH_KEY, RO, RO_SLOW, WR,
    WR_FAST, WR_NODENY,
};
use crate::db::Db;
use crate::object::{check_kind, read_kind, Kind, Object};
use crate::quicklist::{Fill, Quicklist};
use crate::resp;
use crate::server::Server;
use crate::util::string2ll;

pub type ListObj = Quicklist;

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "lpush",
        -3,
        WR_FAST,
        1,
        1,
        1,
        "list",
        "1.0.0",
        "Prepend one or multiple elements to a list",
        lpush
    ),
    spec!(
        "rpush",
        -3,
        WR_FAST,
        1,
        1,
        1,
        "list",
        "1.0.0",
        "Append one or multiple elements to a list",
        rpush
    ),
    spec!(
        "lpushx",
        -3,
        WR_FAST,
        1,
        1,
        1,
        "list",
        "2.2.0",
        "Prepend an element to a list, only if the list exists",
        lpushx
    ),
    spec!(
        "rpushx",
        -3,
        WR_FAST,
        1,
        1,
        1,
        "list",
        "2.2.0",
        "Append an element to a list, only if the list exists",
        rpushx
    ),
    spec!(
        "lpop",
        -2,
        WR_NODENY,
        1,
        1,
        1,
        "list",
        "1.0.0",
        "Remove and get the first elements in a list",
        lpop
    ),
    spec!(
        "rpop",
        -2,
        WR_NODENY,
        1,
        1,
        1,
        "list",
        "1.0.0",
        "Remove and get the last elements in a list",
        rpop
    ),
    spec!(
        "llen",
        2,
        RO,
        1,
        1,
        1,
        "list",
        "1.0.0",
        "Get the length of a list",
        llen
    ),
    spec!(
        "lindex",
        3,
        RO_SLOW,
        1,
        1,
        1,
        "list",
        "1.0.0",
        "Get an element from a list by its index",
        lindex
    ),
    spec!(
        "lset",
        4,
        WR,
        1,
        1,
        1,
        "list",
        "1.0.0",
        "Set the value of an element in a list by its index",
        lset
    ),
    spec!(
        "lrange",
        4,
        RO_SLOW,
        1,
        1,
        1,
        "list",
        "1.0.0",
        "Get a range of elements from a list",
        lrange
    ),
    spec!(
        "ltrim",
        4,
        WR_NODENY,
        1,
        1,
        1,
        "list",
        "1.0.0",
        "Trim a list to the specified range",
        ltrim
    ),
    spec!(
        "linsert",
        5,
        WR,
        1,
        1,
        1,
        "list",
        "2.2.0",
        "Insert an element before or after another element in a list",
        linsert
    ),
    spec!(
        "lrem",
        4,
        WR_NODENY,
        1,
        1,
        1,
        "list",
        "1.0.0",
        "Remove elements from a list",
        lrem
    ),
    spec!(
        "lpos",
        -3,
        RO_SLOW,
        1,
        1,
        1,
        "list",
        "6.0.6",
        "Return the index of matching elements on a list",
        lpos
    ),
    spec!(
        "lmove",
        5,
        WR,
        1,
        2,
        1,
        "list",
        "6.2.0",
        "Pop an element from a list, push it to another list and return it",
        lmove
    ),
    spec!(
        "rpoplpush",
        3,
        WR,
        1,
        2,
        1,
        "list",
        "1.2.0",
        "Remove the last element in a list, prepend it to another list and return it",
        rpoplpush
    ),
    spec!(
        "lmpop",
        -4,
        WR_NODENY,
        0,
        0,
        0,
        "list",
        "7.0.0",
        "Pop elements from a list",
        lmpop
    ),
    spec!(
        "blpop",
        -3,
        WR_NODENY,
        1,
        -2,
        1,
        "list",
        "2.0.0",
        "Remove and get the first element in a list, or block until one is available",
        blpop
    ),
    spec!(
        "brpop",
        -3,
        WR_NODENY,
        1,
        -2,
        1,
        "list",
        "2.0.0",
        "Remove and get the last element in a list, or block until one is available",
        brpop
    ),
    spec!(
        "blmove",
        6,
        WR,
        1,
        2,
        1,
        "list",
        "6.2.0",
        "Pop an element from a list, push it to another list and return it; or block until one is available",
        blmove
    ),
    spec!(
        "brpoplpush",
        4,
        WR,
        1,
        2,
        1,
        "list",
        "2.2.0",
        "Pop an element from a list, push it to another list and return it; or block until one is available",
        brpoplpush
    ),
    spec!(
        "blmpop",
        -5,
        WR_NODENY,
        0,
        0,
        0,
        "list",
        "7.0.0",
        "Pop elements from a list, or block until one is available",
        blmpop
    ),
];

// ------------------------------------------------------------ commands

fn as_list(o: &Object) -> Option<&ListObj> {
    match o {
        Object::List(l) => Some(l),
        _ => None,
    }
}

/// Read lookup of a list (WRONGTYPE written on `Err`).
fn read<'d>(db: &'d mut Db, ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<&'d ListObj>, Replied> {
    Ok(read_kind(db, ctx, key, Kind::List)?.and_then(as_list))
}

/// Write to the list at `key` through `f`; `create` makes it when missing
/// (and signals the key ready for clients blocked on it). The key is
/// deleted if `f` leaves the list empty.
pub(crate) fn write<R>(
    server: &mut Server,
    db: usize,
    now: i64,
    ctx: &mut Ctx<'_>,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut ListObj, Fill, &mut Ctx<'_>) -> R,
) -> Result<Option<R>, Replied> {
    let fill = Fill::from_conf(server.config.encodings.list_max_listpack_size);
    let d = &mut server.dbs[db];
    let mut p = d.probe(key, now);
    if !check_kind(d, &p, Kind::List, ctx)? {
        if !create {
            return Ok(None);
        }
        p = d.insert_obj(p, key, Object::List(ListObj::new()));
        server.blocked.signal(db, key);
    }
    let d = &mut server.dbs[db];
    Ok(d.update_obj(&p, |o| match o {
        Object::List(l) => Some(f(l, fill, ctx)),
        _ => None,
    })
    .flatten())
}

fn push_generic(server: &mut Server, ctx: &mut Ctx<'_>, left: bool, create: bool) {
    let key = ctx.arg(1);
    let argv = ctx.argv;
    let (db, now) = (ctx.db, ctx.now);
    let r = write(server, db, now, ctx, key, create, |l, fill, _| {
        for v in argv.iter().skip(2) {
            if left {
                l.push_front(v, fill);
            } else {
                l.push_back(v, fill);
            }
        }
        l.len()
    });
    match r {
        Err(Replied) => {}
        Ok(None) => ctx.int(0),
        Ok(Some(n)) => {
            server.dirty += (ctx.argc() - 2) as u64;
            ctx.int(n as i64);
        }
    }
}

fn lpush(server: &mut Server, ctx: &mut Ctx<'_>) {
    push_generic(server, ctx, true, true);
}

fn rpush(server: &mut Server, ctx: &mut Ctx<'_>) {
    push_generic(server, ctx, false, true);
}

fn lpushx(server: &mut Server, ctx: &mut Ctx<'_>) {
    push_generic(server, ctx, true, false);
}

fn rpushx(server: &mut Server, ctx: &mut Ctx<'_>) {
    push_generic(server, ctx, false, false);
}

/// Pop up to `n` elements from one end.
pub(crate) fn pop_n(l: &mut ListObj, left: bool, n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(n.min(l.len()));
    for _ in 0..n {
        let v = if left { l.pop_front() } else { l.pop_back() };
        match v {
            Some(v) => out.push(v),
            None => break,
        }
    }
    out
}

fn pop_generic(server: &mut Server, ctx: &mut Ctx<'_>, left: bool) {
    let name = if left { "lpop" } else { "rpop" };
    if ctx.argc() > 3 {
        return ctx.err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let count = if ctx.argc() == 3 {
        match string2ll(ctx.arg(2)).filter(|&n| n >= 0) {
            Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            None => return ctx.err("ERR value is out of range, must be positive"),
        }
    } else {
        None
    };
    let key = ctx.arg(1);
    let (db, now) = (ctx.db, ctx.now);
    let r = write(server, db, now, ctx, key, false, |l, _, _| {
        pop_n(l, left, count.unwrap_or(1))
    });
    match (r, count) {
        (Err(Replied), _) => {}
        (Ok(None), None) => ctx.null(),
        (Ok(None), Some(_)) => resp::write_null_array(ctx.out, ctx.proto),
        (Ok(Some(v)), None) => {
            server.dirty += 1;
            match v.first() {
                Some(x) => ctx.bulk(x),
                None => ctx.null(),
            }
        }
        (Ok(Some(v)), Some(_)) => {
            server.dirty += v.len() as u64;
            ctx.array(v.len());
            for x in &v {
                resp::write_bulk(ctx.out, x);
            }
        }
    }
}

fn lpop(server: &mut Server, ctx: &mut Ctx<'_>) {
    pop_generic(server, ctx, true);
}

fn rpop(server: &mut Server, ctx: &mut Ctx<'_>) {
    pop_generic(server, ctx, false);
}

fn llen(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    if let Ok(l) = read(&mut server.dbs[ctx.db], ctx, key) {
        let n = l.map_or(0, ListObj::len);
        ctx.int(n as i64);
    }
}

/// A Redis index (negative from the tail) as a position, if in range.
fn resolve(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 {
        (len as i64).checked_add(index)?
    } else {
        index
    };
    usize::try_from(i).ok().filter(|&i| i < len)
}

fn lindex(server: &mut Server, ctx: &mut Ctx<'_>) {
    let key = ctx.arg(1);
    let l = match read(&mut server.dbs[ctx.db], ctx, key) {
        Err(Replied) => return,
        Ok(None) => return ctx.null(),
        Ok(Some(l)) => l,
    };
    let Some(index) = string2ll(ctx.arg(2)) else {
        return ctx.err(ERR_NOT_INT);
    };
    match resolve(index, l.len())
        .and_then(|i| l.locate(i))
        .and_then(|p| l.at(p))
    {
        Some(v) => resp::write_bulk(ctx.out, v),
        None => ctx.null(),
    }
}

fn lset(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (key, v) = (ctx.arg(1), ctx.arg(3));
    let (db, now) = (ctx.db, ctx.now);
    let d = &mut server.dbs[db];
    let p = d.probe(key, now);
    match check_kind(d, &p, Kind::List, ctx) {
        Err(Replied) => return,
        Ok(false) => return ctx.err(ERR_NO_SUCH_KEY),
        Ok(true) => {}
    }
    let Some(index) = string2ll(ctx.arg(2)) else {
        return ctx.err(ERR_NOT_INT);
    };
    let done = d.update_obj(&p, |o| match o {
        Object::List(l) => match resolve(index, l.len()).and_then(|i| l.locate(i)) {
            Some(pos) => {
                l.replace(pos, v);
                true
            }
            None => false,
        },
        _ => false,
    });
    if done == Some(true) {
        server.dirty += 1;
        ctx.ok();
    } else {
        ctx.err("ERR index out of range");
    }
}

/// LRANGE's and LTRIM's index normalization: the first index and count.
fn range_of(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 {
        len.saturating_add(start)
    } else {
        start
    };
    let mut end = if end < 0 {
        len.saturating_add(end)
    } else {
        end
    };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, (end - start + 1) as usize))
}

fn lrange(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (Some(start), Some(end)) = (string2ll(ctx.arg(2)), string2ll(ctx.arg(3))) else {
        return ctx.err(ERR_NOT_INT);
    };
    let key = ctx.arg(1);
    let Ok(l) = read(&mut server.dbs[ctx.db], ctx, key) else {
        return;
    };
    let Some((first, n)) = l.and_then(|l| range_of(start, end, l.len())) else {
        return ctx.array(0);
    };
    let Some(l) = l else { return ctx.array(0) };
    // Streamed from the list into the reply: no intermediate copy.
    ctx.array(n);
    for v in l.range(first, n) {
        resp::write_bulk(ctx.out, v);
    }
}

fn ltrim(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (Some(start), Some(end)) = (string2ll(ctx.arg(2)), string2ll(ctx.arg(3))) else {
        return ctx.err(ERR_NOT_INT);
    };
    let key = ctx.arg(1);
    let (db, now) = (ctx.db, ctx.now);
    let r = write(server, db, now, ctx, key, false, |l, _, _| {
        let len = l.len();
        match range_of(start, end, len) {
            None => {
                l.drop_front(len);
                len
            }
            Some((first, n)) => {
                l.drop_back(len - first - n);
                l.drop_front(first);
                len - n
            }
        }
    });
    if let Ok(removed) = r {
        // Redis counts the elements trimmed: a trim that keeps the whole
        // list (or finds no key) changes nothing and is not propagated.
        server.dirty += removed.unwrap_or(0) as u64;
        ctx.ok();
    }
}

fn linsert(server: &mut Server, ctx: &mut Ctx<'_>) {
    let after = if eq(ctx.arg(2), "after") {
        true
    } else if eq(ctx.arg(2), "before") {
        false
    } else {
        return ctx.syntax();
    };
    let (key, pivot, v) = (ctx.arg(1), ctx.arg(3), ctx.arg(4));
    let (db, now) = (ctx.db, ctx.now);
    let r = write(server, db, now, ctx, key, false, |l, fill, _| {
        let mut p = l.head();
        while let Some(x) = p {
            if l.at(x) == Some(pivot) {
                l.insert(x, after, v, fill);
                return l.len() as i64;
            }
            p = l.next(x);
        }
        -1
    });
    match r {
        Err(Replied) => {}
        Ok(None) => ctx.int(0),
        Ok(Some(n)) => {
            if n > 0 {
                server.dirty += 1;
            }
            ctx.int(n);
        }
    }
}

fn lrem(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(count) = string2ll(ctx.arg(2)) else {
        return ctx.err(ERR_NOT_INT);
    };
    let (key, v) = (ctx.arg(1), ctx.arg(3));
    let (db, now) = (ctx.db, ctx.now);
    let r = write(server, db, now, ctx, key, false, |l, _, _| {
        let limit = count.unsigned_abs();
        let mut removed = 0u64;
        if count >= 0 {
            let mut p = l.head();
            while let Some(x) = p {
                if limit != 0 && removed == limit {
                    break;
                }
                if l.at(x) == Some(v) {
                    p = l.remove(x);
                    removed += 1;
                } else {
                    p = l.next(x);
                }
            }
        } else {
            let mut p = l.tail();
            while let Some(x) = p {
                if removed == limit {
                    break;
                }
                let prev = l.prev(x);
                if l.at(x) == Some(v) {
                    // Removing x only shifts what follows it: prev stays valid.
                    l.remove(x);
                    removed += 1;
                }
                p = prev;
            }
        }
        removed
    });
    match r {
        Err(Replied) => {}
        Ok(n) => {
            let n = n.unwrap_or(0);
            server.dirty += n;
            ctx.int(n as i64);
        }
    }
}

fn lpos(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (key, v) = (ctx.arg(1), ctx.arg(2));
    let mut rank: i64 = 1;
    let mut count: Option<u64> = None;
    let mut maxlen: u64 = 0;
    let mut j = 3;
    while j < ctx.argc() {
        let more = j + 1 < ctx.argc();
        let opt = ctx.arg(j);
        if eq(opt, "rank") && more {
            let Some(r) = parse_ll(ctx, j + 1) else {
                return;
            };
            if r == 0 {
                return ctx.err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list");
            }
            rank = r;
        } else if eq(opt, "count") && more {
            match string2ll(ctx.arg(j + 1)).filter(|&n| n >= 0) {
                Some(n) => count = Some(n as u64),
                None => return ctx.err("ERR COUNT can't be negative"),
            }
        } else if eq(opt, "maxlen") && more {
            match string2ll(ctx.arg(j + 1)).filter(|&n| n >= 0) {
                Some(n) => maxlen = n as u64,
                None => return ctx.err("ERR MAXLEN can't be negative"),
            }
        } else {
            return ctx.syntax();
        }
        j += 2;
    }
    let l = match read(&mut server.dbs[ctx.db], ctx, key) {
        Err(Replied) => return,
        Ok(None) if count.is_some() => return ctx.array(0),
        Ok(None) => return ctx.null(),
        Ok(Some(l)) => l,
    };
    let from_tail = rank < 0;
    // Redis negates LONG_MIN into itself: every match then qualifies.
    let need = if rank == i64::MIN {
        1
    } else {
        rank.unsigned_abs()
    };
    let len = l.len();
    let mut found: Vec<i64> = Vec::new();
    let mut matches = 0u64;
    let mut examined = 0u64;
    let mut p = if from_tail { l.tail() } else { l.head() };
    while let Some(x) = p {
        if maxlen != 0 && examined >= maxlen {
            break;
        }
        if l.at(x) == Some(v) {
            matches += 1;
            if matches >= need {
                let idx = if from_tail {
                    len as u64 - 1 - examined
                } else {
                    examined
                };
                found.push(idx as i64);
                // Redis stops at `matches - rank + 1 >= count`, which for
                // RANK LONG_MIN overflows and never holds: it returns every
                // match whatever COUNT says.
                let enough = |c: u64| c != 0 && rank != i64::MIN && found.len() as u64 >= c;
                if count.is_none_or(enough) {
                    break;
                }
            }
        }
        examined += 1;
        p = if from_tail { l.prev(x) } else { l.next(x) };
    }
    match count {
        Some(_) => {
            ctx.array(found.len());
            for i in found {
                resp::write_int(ctx.out, i);
            }
        }
        None => match found.first() {
            Some(&i) => ctx.int(i),
            None => ctx.null(),
        },
    }
}

fn side(a: &[u8]) -> Option<bool> {
    if eq(a, "left") {
        Some(true)
    } else if eq(a, "right") {
        Some(false)
    } else {
        None
    }
}

/// LMOVE's work (also BLMOVE's when served): pop from `src` at `from_left`,
/// push onto `dst` at `to_left`. `Ok(None)` if `src` is missing.
pub(crate) fn lmove_generic(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> Result<Option<Vec<u8>>, Replied> {
    let (db, now) = (ctx.db, ctx.now);
    let d = &mut server.dbs[db];
    let ps = d.probe(src, now);
    if !check_kind(d, &ps, Kind::List, ctx)? {
        return Ok(None);
    }
    let pd = d.probe(dst, now);
    check_kind(d, &pd, Kind::List, ctx)?;
    let v = d
        .update_obj(&ps, |o| match o {
            Object::List(l) => {
                if from_left {
                    l.pop_front()
                } else {
                    l.pop_back()
                }
            }
            _ => None,
        })
        .flatten();
    let Some(v) = v else { return Ok(None) };
    write(server, db, now, ctx, dst, true, |l, fill, _| {
        if to_left {
            l.push_front(&v, fill);
        } else {
            l.push_back(&v, fill);
        }
    })?;
    server.dirty += 1;
    Ok(Some(v))
}

fn lmove(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (Some(from), Some(to)) = (side(ctx.arg(3)), side(ctx.arg(4))) else {
        return ctx.syntax();
    };
    lmove_reply(server, ctx, from, to);
}

fn rpoplpush(server: &mut Server, ctx: &mut Ctx<'_>) {
    lmove_reply(server, ctx, false, true);
}

fn lmove_reply(server: &mut Server, ctx: &mut Ctx<'_>, from: bool, to: bool) {
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    match lmove_generic(server, ctx, src, dst, from, to) {
        Err(Replied) => {}
        Ok(None) => ctx.null(),
        Ok(Some(v)) => ctx.bulk(&v),
    }
}

/// LMPOP / BLMPOP arguments: keys (argument indexes), side, count.
pub(crate) struct MpopArgs {
    pub keys: std::ops::Range<usize>,
    pub left: bool,
    pub count: usize,
}

/// Parse `numkeys key... LEFT|RIGHT [COUNT n]` starting at `at`.
pub(crate) fn parse_mpop(ctx: &mut Ctx<'_>, at: usize) -> Result<MpopArgs, Replied> {
    let numkeys = match string2ll(ctx.arg(at)) {
        Some(n) if n >= 1 => n as u64,
        _ => {
            ctx.err("ERR numkeys should be greater than 0");
            return Err(Replied);
        }
    };
    // No "Number of keys" error here: Redis answers a syntax error when
    // the side is missing.
    if numkeys >= (ctx.argc() - at - 1) as u64 {
        ctx.syntax();
        return Err(Replied);
    }
    let first = at + 1;
    let end = first + numkeys as usize;
    let Some(left) = (end < ctx.argc()).then(|| side(ctx.arg(end))).flatten() else {
        ctx.syntax();
        return Err(Replied);
    };
    let mut count = 1usize;
    let mut j = end + 1;
    let mut seen_count = false;
    while j < ctx.argc() {
        if eq(ctx.arg(j), "count") && j + 1 < ctx.argc() && !seen_count {
            match string2ll(ctx.arg(j + 1)).filter(|&n| n > 0) {
                Some(n) => count = usize::try_from(n).unwrap_or(usize::MAX),
                None => {
                    ctx.err("ERR count should be greater than 0");
                    return Err(Replied);
                }
            }
            seen_count = true;
            j += 2;
        } else {
            ctx.syntax();
            return Err(Replied);
        }
    }
    Ok(MpopArgs {
        keys: first..end,
        left,
        count,
    })
}

/// A key and the elements popped from it.
pub(crate) type Popped = (Vec<u8>, Vec<Vec<u8>>);

/// Pop from the first non-empty list of `a.keys`: `Ok(Some((key, elements)))`.
pub(crate) fn mpop_generic(
    server: &mut Server,
    db: usize,
    now: i64,
    ctx: &mut Ctx<'_>,
    a: &MpopArgs,
) -> Result<Option<Popped>, Replied> {
    for i in a.keys.clone() {
        let key = ctx.arg(i);
        if let Some(v) = write(server, db, now, ctx, key, false, |l, _, _| {
            pop_n(l, a.left, a.count)
        })? {
            server.dirty += v.len() as u64;
            return Ok(Some((key.to_vec(), v)));
        }
    }
    Ok(None)
}

/// LMPOP / BLMPOP propagate as `LPOP|RPOP key count` (the count popped).
pub(crate) fn prop_mpop(server: &mut Server, left: bool, key: &[u8], n: usize) {
    if server.propagating() {
        let name: &[u8] = if left { b"LPOP" } else { b"RPOP" };
        let c = n.to_string();
        server.prop_rewrite([name, key, c.as_bytes()]);
    }
}

pub(crate) fn reply_key_elements(ctx: &mut Ctx<'_>, key: &[u8], v: &[Vec<u8>]) {
    ctx.array(2);
    ctx.bulk(key);
    ctx.array(v.len());
    for x in v {
        resp::write_bulk(ctx.out, x);
    }
}

fn lmpop(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Ok(a) = parse_mpop(ctx, 1) else {
        return;
    };
    let (db, now) = (ctx.db, ctx.now);
    match mpop_generic(server, db, now, ctx, &a) {
        Err(Replied) => {}
        Ok(None) => resp::write_null_array(ctx.out, ctx.proto),
        Ok(Some((k, v))) => {
            prop_mpop(server, a.left, &k, v.len());
            reply_key_elements(ctx, &k, &v)
        }
    }
}

fn blpop(server: &mut Server, ctx: &mut Ctx<'_>) {
    bpop(server, ctx, true);
}

fn brpop(server: &mut Server, ctx: &mut Ctx<'_>) {
    bpop(server, ctx, false);
}

fn blmove(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (Some(from), Some(to)) = (side(ctx.arg(3)), side(ctx.arg(4))) else {
        return ctx.syntax();
    };
    bmove(server, ctx, from, to, 5);
}

fn brpoplpush(server: &mut Server, ctx: &mut Ctx<'_>) {
    bmove(server, ctx, false, true, 3);
}

fn blmpop(server: &mut Server, ctx: &mut Ctx<'_>) {
    bmpop(server, ctx);
}
