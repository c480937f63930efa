//! String commands (Redis's `t_string.c`): GET SET (and its options)
//! SETNX SETEX PSETEX GETSET GETDEL GETEX MGET MSET MSETNX APPEND STRLEN
//! INCR DECR INCRBY DECRBY INCRBYFLOAT GETRANGE SUBSTR SETRANGE.

use crate::cmd::{
    eq, expire_error, parse_ll, spec, CommandSpec, Ctx, Replied, ERR_BULK_LEN, ERR_NOT_INT,
    ERR_OVERFLOW, ERR_WRONGTYPE, RO, RO_SLOW, WR, WR_FAST, WR_NODENY,
};
use crate::db::{Db, Entry, Ref};
use crate::float::incr_by_float;
use crate::resp;
use crate::server::Server;
use crate::util::string2ll;

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "get",
        2,
        RO,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Get the value of a key",
        get
    ),
    spec!(
        "set",
        -3,
        WR,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Set the string value of a key",
        set
    ),
    spec!(
        "setnx",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Set the value of a key, only if the key does not exist",
        setnx
    ),
    spec!(
        "setex",
        4,
        WR,
        1,
        1,
        1,
        "string",
        "2.0.0",
        "Set the value and expiration of a key",
        setex
    ),
    spec!(
        "psetex",
        4,
        WR,
        1,
        1,
        1,
        "string",
        "2.6.0",
        "Set the value and expiration in milliseconds of a key",
        psetex
    ),
    spec!(
        "getset",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Set the string value of a key and return its old value",
        getset
    ),
    spec!(
        "getdel",
        2,
        WR_NODENY,
        1,
        1,
        1,
        "string",
        "6.2.0",
        "Get the value of a key and delete the key",
        getdel
    ),
    spec!(
        "getex",
        -2,
        WR_NODENY,
        1,
        1,
        1,
        "string",
        "6.2.0",
        "Get the value of a key and optionally set its expiration",
        getex
    ),
    spec!(
        "mget",
        -2,
        RO,
        1,
        -1,
        1,
        "string",
        "1.0.0",
        "Get the values of all the given keys",
        mget
    ),
    spec!(
        "mset",
        -3,
        WR,
        1,
        -1,
        2,
        "string",
        "1.0.1",
        "Set multiple keys to multiple values",
        mset
    ),
    spec!(
        "msetnx",
        -3,
        WR,
        1,
        -1,
        2,
        "string",
        "1.0.1",
        "Set multiple keys to multiple values, only if none of the keys exist",
        msetnx
    ),
    spec!(
        "append",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "2.0.0",
        "Append a value to a key",
        append
    ),
    spec!(
        "strlen",
        2,
        RO,
        1,
        1,
        1,
        "string",
        "2.2.0",
        "Get the length of the value stored in a key",
        strlen
    ),
    spec!(
        "incr",
        2,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Increment the integer value of a key by one",
        incr
    ),
    spec!(
        "decr",
        2,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Decrement the integer value of a key by one",
        decr
    ),
    spec!(
        "incrby",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Increment the integer value of a key by the given amount",
        incrby
    ),
    spec!(
        "decrby",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Decrement the integer value of a key by the given number",
        decrby
    ),
    spec!(
        "incrbyfloat",
        3,
        WR_FAST,
        1,
        1,
        1,
        "string",
        "2.6.0",
        "Increment the float value of a key by the given amount",
        incrbyfloat
    ),
    spec!(
        "getrange",
        4,
        RO_SLOW,
        1,
        1,
        1,
        "string",
        "2.4.0",
        "Get a substring of the string stored at a key",
        getrange
    ),
    spec!(
        "substr",
        4,
        RO_SLOW,
        1,
        1,
        1,
        "string",
        "1.0.0",
        "Get a substring of the string stored at a key",
        getrange
    ),
    spec!(
        "setrange",
        4,
        WR,
        1,
        1,
        1,
        "string",
        "2.2.0",
        "Overwrite part of a string at key starting at the specified offset",
        setrange
    ),
];

fn get(server: &mut Server, ctx: &mut Ctx<'_>) {
    match server.dbs[ctx.db].lookup_read(ctx.arg(1), ctx.now) {
        Some(Entry {
            value: Ref::Str(v), ..
        }) => resp::write_bulk(ctx.out, v),
        Some(_) => ctx.err(ERR_WRONGTYPE),
        None => ctx.null(),
    }
}

/// Redis's `lookupKeyReadOrReply` + `checkType(OBJ_STRING)`: the string,
/// `Ok(None)` if missing, `Err` (WRONGTYPE written) for an aggregate.
fn str_read<'d>(
    db: &'d mut Db,
    ctx: &mut Ctx<'_>,
    key: &[u8],
) -> Result<Option<&'d [u8]>, Replied> {
    match db.lookup_read(key, ctx.now) {
        None => Ok(None),
        Some(e) => match e.str() {
            Some(v) => Ok(Some(v)),
            None => {
                ctx.err(ERR_WRONGTYPE);
                Err(Replied)
            }
        },
    }
}

/// [`str_read`] as a write lookup (no hit/miss accounting).
fn str_write<'d>(
    db: &'d mut Db,
    ctx: &mut Ctx<'_>,
    key: &[u8],
) -> Result<Option<&'d [u8]>, Replied> {
    match db.lookup_write(key, ctx.now) {
        None => Ok(None),
        Some(e) => match e.str() {
            Some(v) => Ok(Some(v)),
            None => {
                ctx.err(ERR_WRONGTYPE);
                Err(Replied)
            }
        },
    }
}

const F_NX: u32 = 1;
const F_XX: u32 = 2;
const F_GET: u32 = 4;
const F_KEEPTTL: u32 = 8;
const F_PERSIST: u32 = 16;
const F_EX: u32 = 32;
const F_PX: u32 = 64;
const F_EXAT: u32 = 128;
const F_PXAT: u32 = 256;
const F_ANY_EXPIRE: u32 = F_EX | F_PX | F_EXAT | F_PXAT;

/// The flag of an expire option of SET / GETEX (`EX PX EXAT PXAT`).
fn expire_option(opt: &[u8]) -> Option<u32> {
    [
        ("ex", F_EX),
        ("px", F_PX),
        ("exat", F_EXAT),
        ("pxat", F_PXAT),
    ]
    .into_iter()
    .find(|(name, _)| eq(opt, name))
    .map(|(_, f)| f)
}

/// Redis's `parseExtendedStringArgumentsOrReply` (SET: `is_set`, GETEX
/// otherwise). Returns flags and the index of the expire argument.
fn parse_string_args(
    ctx: &mut Ctx<'_>,
    start: usize,
    is_set: bool,
) -> Option<(u32, Option<usize>)> {
    let mut flags = 0u32;
    let mut expire = None;
    let mut j = start;
    while j < ctx.argc() {
        let opt = ctx.arg(j);
        let has_next = j + 1 < ctx.argc();
        if eq(opt, "nx") && flags & F_XX == 0 && is_set {
            flags |= F_NX;
        } else if eq(opt, "xx") && flags & F_NX == 0 && is_set {
            flags |= F_XX;
        } else if eq(opt, "get") && is_set {
            flags |= F_GET;
        } else if eq(opt, "keepttl") && flags & (F_PERSIST | F_ANY_EXPIRE) == 0 && is_set {
            flags |= F_KEEPTTL;
        } else if eq(opt, "persist") && !is_set && flags & (F_ANY_EXPIRE | F_KEEPTTL) == 0 {
            flags |= F_PERSIST;
        } else if let Some(f) = has_next
            .then(|| expire_option(opt))
            .flatten()
            // One expire option; repeating the same one is accepted, as Redis does.
            .filter(|&f| flags & (F_KEEPTTL | F_PERSIST | (F_ANY_EXPIRE & !f)) == 0)
        {
            flags |= f;
            expire = Some(j + 1);
            j += 1;
        } else {
            ctx.syntax();
            return None;
        }
        j += 1;
    }
    Some((flags, expire))
}

/// Redis's `getExpireMillisecondsOrReply`: absolute ms, or an error reply.
fn expire_ms(ctx: &mut Ctx<'_>, arg: usize, flags: u32, cmd: &str) -> Option<i64> {
    let v = parse_ll(ctx, arg)?;
    let seconds = flags & (F_EX | F_EXAT) != 0;
    if v <= 0 || (seconds && v > i64::MAX / 1000) {
        expire_error(ctx, cmd);
        return None;
    }
    let mut ms = if seconds { v * 1000 } else { v };
    if flags & (F_EX | F_PX) != 0 {
        match ms.checked_add(ctx.now) {
            Some(m) => ms = m,
            None => {
                expire_error(ctx, cmd);
                return None;
            }
        }
    }
    if ms <= 0 {
        expire_error(ctx, cmd);
        return None;
    }
    Some(ms)
}

/// Redis's `setGenericCommand`.
#[allow(clippy::too_many_arguments)]
fn set_generic(
    server: &mut Server,
    ctx: &mut Ctx<'_>,
    flags: u32,
    key: usize,
    val: usize,
    expire: Option<usize>,
    cmd: &str,
    replies: Option<(i64, i64)>,
) {
    let when = match expire {
        Some(i) => match expire_ms(ctx, i, flags, cmd) {
            Some(w) => Some(w),
            None => return,
        },
        None => None,
    };
    let (key, value) = (ctx.arg(key), ctx.arg(val));
    // One hash and lookup (with lazy expiry) for the whole command.
    let d = &mut server.dbs[ctx.db];
    let p = d.probe(key, ctx.now);
    let found = p.found();
    if flags & F_GET != 0 {
        d.count_read_key(key, found);
        match d.probed_ref(&p) {
            Some(Ref::Str(v)) => resp::write_bulk(ctx.out, v),
            Some(Ref::Obj(_)) => return ctx.err(ERR_WRONGTYPE),
            None => ctx.null(),
        }
    }
    if (flags & F_NX != 0 && found) || (flags & F_XX != 0 && !found) {
        if flags & F_GET == 0 {
            match replies {
                Some((_, abort)) => ctx.int(abort),
                None => ctx.null(),
            }
        }
        return;
    }
    let p = d.set_probed(p, key, value, flags & F_KEEPTTL != 0);
    if let Some(w) = when {
        d.set_expire_probed(&p, w);
    }
    server.dirty += 1;
    if server.propagating() {
        prop_set(server, ctx, flags, key, value, when);
    }
    if flags & F_GET == 0 {
        match replies {
            Some((ok, _)) => ctx.int(ok),
            None => ctx.ok(),
        }
    }
}

/// SET's propagated form (Redis 7.0's `setGenericCommand`): a TTL other
/// than PXAT as `SET key value PXAT ms`; otherwise without GET.
fn prop_set(
    server: &mut Server,
    ctx: &Ctx<'_>,
    flags: u32,
    key: &[u8],
    value: &[u8],
    when: Option<i64>,
) {
    if let Some(ms) = when {
        // Redis 7.0.15 rewrites a SET with GET and PXAT too (seen in its
        // AOF); PXAT alone goes as written.
        if flags & F_PXAT == 0 || flags & F_GET != 0 {
            let ms = ms.to_string();
            server.prop_rewrite([&b"SET"[..], key, value, b"PXAT", ms.as_bytes()]);
        }
        return;
    }
    if flags & F_GET != 0 {
        let args: Vec<&[u8]> = (0..ctx.argc())
            .filter(|&j| j < 3 || !eq(ctx.arg(j), "get"))
            .map(|j| ctx.arg(j))
            .collect();
        server.prop_rewrite(args);
    }
}

fn set(server: &mut Server, ctx: &mut Ctx<'_>) {
    // A plain `SET key value` has no options to parse.
    let parsed = if ctx.argc() == 3 {
        Some((0, None))
    } else {
        parse_string_args(ctx, 3, true)
    };
    let Some((flags, expire)) = parsed else {
        return;
    };
    set_generic(server, ctx, flags, 1, 2, expire, "set", None);
}

fn setnx(server: &mut Server, ctx: &mut Ctx<'_>) {
    set_generic(server, ctx, F_NX, 1, 2, None, "setnx", Some((1, 0)));
}

fn setex(server: &mut Server, ctx: &mut Ctx<'_>) {
    set_generic(server, ctx, F_EX, 1, 3, Some(2), "setex", None);
}

fn psetex(server: &mut Server, ctx: &mut Ctx<'_>) {
    set_generic(server, ctx, F_PX, 1, 3, Some(2), "psetex", None);
}

fn getset(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let _ = now;
    match str_read(&mut server.dbs[db], ctx, &key) {
        Err(Replied) => return,
        Ok(Some(v)) => resp::write_bulk(ctx.out, v),
        Ok(None) => ctx.null(),
    }
    server.dbs[db].set(&key, ctx.arg(2).to_vec(), false);
    server.dirty += 1;
    server.prop_rewrite([&b"SET"[..], &key, ctx.arg(2)]);
}

fn getdel(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let _ = now;
    let Ok(old) = str_read(&mut server.dbs[db], ctx, &key) else {
        return;
    };
    match old {
        Some(v) => {
            resp::write_bulk(ctx.out, v);
            server.dbs[db].remove(&key);
            server.dirty += 1;
            server.prop_rewrite([&b"DEL"[..], &key]);
        }
        None => ctx.null(),
    }
}

fn getex(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some((flags, expire)) = parse_string_args(ctx, 2, false) else {
        return;
    };
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let v = match str_read(&mut server.dbs[db], ctx, &key) {
        Err(Replied) => return,
        Ok(None) => return ctx.null(),
        Ok(Some(v)) => v.to_vec(),
    };
    let when = match expire {
        Some(i) => match expire_ms(ctx, i, flags, "getex") {
            Some(w) => Some(w),
            None => return,
        },
        None => None,
    };
    ctx.bulk(&v);
    let d = &mut server.dbs[db];
    if let Some(w) = when {
        if flags & (F_EXAT | F_PXAT) != 0 && w <= now {
            d.remove(&key);
            let name: &[u8] = if server.config.lazyfree_lazy_expire {
                b"UNLINK"
            } else {
                b"DEL"
            };
            server.prop_rewrite([name, &key]);
        } else {
            d.set_expire(&key, w);
            let ms = w.to_string();
            server.prop_rewrite([&b"PEXPIREAT"[..], &key, ms.as_bytes()]);
        }
        server.dirty += 1;
    } else if flags & F_PERSIST != 0 && d.remove_expire(&key) {
        server.dirty += 1;
        server.prop_rewrite([&b"PERSIST"[..], &key]);
    }
}

fn mget(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    ctx.array(ctx.argc() - 1);
    for i in 1..ctx.argc() {
        // MGET answers nil for a key of another type, no WRONGTYPE.
        match server.dbs[db]
            .lookup_read(ctx.arg(i), now)
            .and_then(|e| e.str())
        {
            Some(v) => resp::write_bulk(ctx.out, v),
            None => ctx.null(),
        }
    }
}

fn mset_generic(server: &mut Server, ctx: &mut Ctx<'_>, nx: bool, name: &str) {
    if ctx.argc() % 2 == 0 {
        return ctx.err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let (db, now) = (ctx.db, ctx.now);
    if nx
        && (1..ctx.argc())
            .step_by(2)
            .any(|i| server.dbs[db].exists(&ctx.argv[i], now))
    {
        return ctx.int(0);
    }
    for i in (1..ctx.argc()).step_by(2) {
        server.dbs[db].set(ctx.arg(i), ctx.arg(i + 1).to_vec(), false);
        server.dirty += 1;
    }
    if nx {
        ctx.int(1)
    } else {
        ctx.ok()
    }
}

fn mset(server: &mut Server, ctx: &mut Ctx<'_>) {
    mset_generic(server, ctx, false, "mset");
}

fn msetnx(server: &mut Server, ctx: &mut Ctx<'_>) {
    mset_generic(server, ctx, true, "msetnx");
}

fn check_len(server: &Server, ctx: &mut Ctx<'_>, a: u64, b: u64) -> bool {
    if a.saturating_add(b) > server.config.proto_max_bulk_len {
        ctx.err(ERR_BULK_LEN);
        return false;
    }
    true
}

fn append(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let add = ctx.arg(2).to_vec();
    let Ok(cur) = str_write(&mut server.dbs[db], ctx, &key).map(|v| v.map(<[u8]>::len)) else {
        return;
    };
    let len = match cur {
        None => {
            let n = add.len();
            server.dbs[db].set(&key, add, false);
            n
        }
        Some(l) => {
            if !check_len(server, ctx, l as u64, add.len() as u64) {
                return;
            }
            server.dbs[db]
                .update_value(&key, now, |v| {
                    v.extend_from_slice(&add);
                    v.len()
                })
                .unwrap_or(0)
        }
    };
    server.dirty += 1;
    ctx.int(len as i64);
}

fn strlen(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let _ = now;
    if let Ok(v) = str_read(&mut server.dbs[db], ctx, ctx.arg(1)) {
        let n = v.map_or(0, <[u8]>::len);
        ctx.int(n as i64);
    }
}

fn incr_decr(server: &mut Server, ctx: &mut Ctx<'_>, by: i64) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let cur = match str_write(&mut server.dbs[db], ctx, &key) {
        Err(Replied) => return,
        Ok(None) => None,
        Ok(Some(v)) => match string2ll(v) {
            Some(v) => Some(v),
            None => return ctx.err(ERR_NOT_INT),
        },
    };
    let old = cur.unwrap_or(0);
    let Some(new) = old.checked_add(by) else {
        return ctx.err(ERR_OVERFLOW);
    };
    let bytes = new.to_string().into_bytes();
    if cur.is_some() {
        server.dbs[db].update_value(&key, now, |v| *v = bytes);
    } else {
        server.dbs[db].set(&key, bytes, false);
    }
    server.dirty += 1;
    ctx.int(new);
}

fn incr(server: &mut Server, ctx: &mut Ctx<'_>) {
    incr_decr(server, ctx, 1);
}

fn decr(server: &mut Server, ctx: &mut Ctx<'_>) {
    incr_decr(server, ctx, -1);
}

fn incrby(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(by) = parse_ll(ctx, 2) else { return };
    incr_decr(server, ctx, by);
}

fn decrby(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(by) = parse_ll(ctx, 2) else { return };
    if by == i64::MIN {
        return ctx.err("ERR decrement would overflow");
    }
    incr_decr(server, ctx, -by);
}

fn incrbyfloat(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let Ok(cur) = str_write(&mut server.dbs[db], ctx, &key).map(|v| v.map(<[u8]>::to_vec)) else {
        return;
    };
    let exists = cur.is_some();
    let new = match incr_by_float(cur.as_deref().unwrap_or(b"0"), ctx.arg(2)) {
        Ok(s) => s.into_bytes(),
        Err(e) => return ctx.err(e),
    };
    if exists {
        let n = new.clone();
        server.dbs[db].update_value(&key, now, |v| *v = n);
    } else {
        server.dbs[db].set(&key, new.clone(), false);
    }
    server.dirty += 1;
    server.prop_rewrite([&b"SET"[..], &key, &new, b"KEEPTTL"]);
    ctx.bulk(&new);
}

fn getrange(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(mut start) = parse_ll(ctx, 2) else {
        return;
    };
    let Some(mut end) = parse_ll(ctx, 3) else {
        return;
    };
    let (db, now) = (ctx.db, ctx.now);
    let _ = now;
    let v = match str_read(&mut server.dbs[db], ctx, ctx.arg(1)) {
        Err(Replied) => return,
        Ok(None) => return ctx.bulk(b""),
        Ok(Some(v)) => v,
    };
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        return ctx.bulk(b"");
    }
    if start < 0 {
        start = len.saturating_add(start);
    }
    if end < 0 {
        end = len.saturating_add(end);
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return ctx.bulk(b"");
    }
    resp::write_bulk(ctx.out, &v[start as usize..=end as usize]);
}

fn setrange(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(offset) = parse_ll(ctx, 2) else {
        return;
    };
    if offset < 0 {
        return ctx.err("ERR offset is out of range");
    }
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let val = ctx.arg(3).to_vec();
    let Ok(cur) = str_write(&mut server.dbs[db], ctx, &key).map(|v| v.map(<[u8]>::len)) else {
        return;
    };
    let olen = cur.unwrap_or(0);
    if val.is_empty() {
        return ctx.int(olen as i64);
    }
    if !check_len(server, ctx, offset as u64, val.len() as u64) {
        return;
    }
    let off = offset as usize;
    let write = |v: &mut Vec<u8>| {
        let need = off + val.len();
        if v.len() < need {
            v.resize(need, 0);
        }
        v[off..need].copy_from_slice(&val);
        v.len()
    };
    let n = if cur.is_some() {
        server.dbs[db].update_value(&key, now, write).unwrap_or(0)
    } else {
        let mut v = Vec::new();
        let n = write(&mut v);
        server.dbs[db].set(&key, v, false);
        n
    };
    server.dirty += 1;
    ctx.int(n as i64);
}
