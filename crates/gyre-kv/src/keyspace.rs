//! Generic key commands (Redis's `db.c` / `expire.c` commands): DEL
//! UNLINK EXISTS TYPE RENAME RENAMENX KEYS SCAN RANDOMKEY, the EXPIRE
//! family, TTL family, PERSIST. The store itself is [`crate::db`].

use crate::cmd::{
    c_str, eq, expire_error, help_lines, no_handler, parse_ll, spec, CommandSpec, Ctx, Replied,
    ERR_NO_SUCH_KEY, RO, RO_SLOW, WR, WR_NODENY,
};
use crate::db::{Entry, Ref};
use crate::object::Kind;
use crate::server::Server;
use crate::util::{parse_cursor, string2ll};

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "copy",
        -3,
        WR,
        1,
        2,
        1,
        "generic",
        "6.2.0",
        "Copy a key",
        copy
    ),
    spec!(
        "move",
        3,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "1.0.0",
        "Move a key to another database",
        move_cmd
    ),
    spec!(
        "touch",
        -2,
        RO,
        1,
        -1,
        1,
        "generic",
        "3.2.1",
        "Alters the last access time of a key(s). Returns the number of existing keys specified.",
        touch
    ),
    CommandSpec {
        subcommands: OBJECT_SUBS,
        ..spec!(
            "object",
            -2,
            RO_SLOW,
            0,
            0,
            0,
            "generic",
            "2.2.3",
            "A container for object introspection commands",
            no_handler
        )
    },
    spec!(
        "del",
        -2,
        &["write"],
        1,
        -1,
        1,
        "generic",
        "1.0.0",
        "Delete a key",
        del
    ),
    spec!(
        "unlink",
        -2,
        WR_NODENY,
        1,
        -1,
        1,
        "generic",
        "4.0.0",
        "Delete a key asynchronously in another thread",
        del
    ),
    spec!(
        "exists",
        -2,
        RO,
        1,
        -1,
        1,
        "generic",
        "1.0.0",
        "Determine if a key exists",
        exists
    ),
    spec!(
        "type",
        2,
        RO,
        1,
        1,
        1,
        "generic",
        "1.0.0",
        "Determine the type stored at key",
        type_cmd
    ),
    spec!(
        "rename",
        3,
        &["write"],
        1,
        2,
        1,
        "generic",
        "1.0.0",
        "Rename a key",
        rename
    ),
    spec!(
        "renamenx",
        3,
        WR_NODENY,
        1,
        2,
        1,
        "generic",
        "1.0.0",
        "Rename a key, only if the new key does not exist",
        renamenx
    ),
    spec!(
        "keys",
        2,
        RO_SLOW,
        0,
        0,
        0,
        "generic",
        "1.0.0",
        "Find all keys matching the given pattern",
        keys
    ),
    spec!(
        "scan",
        -2,
        RO_SLOW,
        0,
        0,
        0,
        "generic",
        "2.8.0",
        "Incrementally iterate the keys space",
        scan
    ),
    spec!(
        "randomkey",
        1,
        RO_SLOW,
        0,
        0,
        0,
        "generic",
        "1.0.0",
        "Return a random key from the keyspace",
        randomkey
    ),
    spec!(
        "expire",
        -3,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "1.0.0",
        "Set a key's time to live in seconds",
        expire
    ),
    spec!(
        "pexpire",
        -3,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "2.6.0",
        "Set a key's time to live in milliseconds",
        pexpire
    ),
    spec!(
        "expireat",
        -3,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "1.2.0",
        "Set the expiration for a key as a UNIX timestamp",
        expireat
    ),
    spec!(
        "pexpireat",
        -3,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "2.6.0",
        "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
        pexpireat
    ),
    spec!(
        "ttl",
        2,
        RO,
        1,
        1,
        1,
        "generic",
        "1.0.0",
        "Get the time to live for a key in seconds",
        ttl
    ),
    spec!(
        "pttl",
        2,
        RO,
        1,
        1,
        1,
        "generic",
        "2.6.0",
        "Get the time to live for a key in milliseconds",
        pttl
    ),
    spec!(
        "expiretime",
        2,
        RO,
        1,
        1,
        1,
        "generic",
        "7.0.0",
        "Get the expiration Unix timestamp for a key",
        expiretime
    ),
    spec!(
        "pexpiretime",
        2,
        RO,
        1,
        1,
        1,
        "generic",
        "7.0.0",
        "Get the expiration Unix timestamp for a key in milliseconds",
        pexpiretime
    ),
    spec!(
        "persist",
        2,
        WR_NODENY,
        1,
        1,
        1,
        "generic",
        "2.2.0",
        "Remove the expiration from a key",
        persist
    ),
];

static OBJECT_SUBS: &[CommandSpec] = &[
    spec!(
        "encoding",
        3,
        RO_SLOW,
        2,
        2,
        1,
        "generic",
        "2.2.3",
        "Inspect the internal encoding of a Redis object",
        object_encoding
    ),
    spec!(
        "refcount",
        3,
        RO_SLOW,
        2,
        2,
        1,
        "generic",
        "2.2.3",
        "Get the number of references to the value of the key",
        object_refcount
    ),
    spec!(
        "freq",
        3,
        RO_SLOW,
        2,
        2,
        1,
        "generic",
        "4.0.0",
        "Get the logarithmic access frequency counter of a Redis object",
        crate::evict::object_freq
    ),
    spec!(
        "idletime",
        3,
        RO_SLOW,
        2,
        2,
        1,
        "generic",
        "2.2.3",
        "Get the time since a Redis object was last accessed",
        crate::evict::object_idletime
    ),
    spec!(
        "help",
        2,
        RO_SLOW,
        0,
        0,
        0,
        "generic",
        "6.2.0",
        "Show helpful text about the different subcommands",
        object_help
    ),
];

fn del(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let mut n = 0;
    for k in ctx.argv.iter().skip(1) {
        if server.dbs[db].delete(k, now) {
            n += 1;
        }
    }
    server.dirty += n as u64;
    ctx.int(n);
}

fn exists(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let n = ctx
        .argv
        .iter()
        .skip(1)
        .filter(|k| server.dbs[db].lookup_read(k, now).is_some())
        .count();
    ctx.int(n as i64);
}

fn type_cmd(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let kind = server.dbs[db].kind_of(ctx.arg(1), now);
    ctx.simple(kind.map_or("none", Kind::name));
}

fn rename_generic(server: &mut Server, ctx: &mut Ctx<'_>, nx: bool) {
    let (db, now) = (ctx.db, ctx.now);
    let (src, dst) = (ctx.arg(1).to_vec(), ctx.arg(2).to_vec());
    if !server.dbs[db].exists(&src, now) {
        return ctx.err(ERR_NO_SUCH_KEY);
    }
    if src == dst {
        return if nx { ctx.int(0) } else { ctx.ok() };
    }
    if server.dbs[db].exists(&dst, now) && nx {
        return ctx.int(0);
    }
    server.dbs[db].rename(&src, &dst);
    server.blocked.signal(db, &dst);
    server.dirty += 1;
    if nx {
        ctx.int(1)
    } else {
        ctx.ok()
    }
}

fn rename(server: &mut Server, ctx: &mut Ctx<'_>) {
    rename_generic(server, ctx, false);
}

fn renamenx(server: &mut Server, ctx: &mut Ctx<'_>) {
    rename_generic(server, ctx, true);
}

fn keys(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let ks = server.dbs[db].keys_matching(ctx.arg(1), now);
    ctx.array(ks.len());
    for k in ks {
        ctx.bulk(&k);
    }
}

fn scan(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(cursor) = parse_cursor(ctx.arg(1)) else {
        return ctx.err("ERR invalid cursor");
    };
    let mut count: i64 = 10;
    let mut pattern: Option<Vec<u8>> = None;
    let mut kind: Option<Vec<u8>> = None;
    let mut j = 2;
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
            let p = ctx.arg(j + 1).to_vec();
            pattern = if p == b"*" { None } else { Some(p) };
        } else if eq(ctx.arg(j), "type") && more >= 1 {
            kind = Some(ctx.arg(j + 1).to_vec());
        } else {
            return ctx.syntax();
        }
        j += 2;
    }
    let (db, now) = (ctx.db, ctx.now);
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let (next, ks) = server.dbs[db].scan(cursor, count, pattern.as_deref(), kind.as_deref(), now);
    ctx.array(2);
    ctx.bulk(next.to_string().as_bytes());
    ctx.array(ks.len());
    for k in ks {
        ctx.bulk(&k);
    }
}

fn randomkey(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    match server.dbs[db].random_key(now) {
        Some(k) => ctx.bulk(&k),
        None => ctx.null(),
    }
}

const E_NX: u32 = 1;
const E_XX: u32 = 2;
const E_GT: u32 = 4;
const E_LT: u32 = 8;

/// Redis's `expireGenericCommand`. `base` is added to the given time
/// (now for relative forms, 0 for absolute), `seconds` selects the unit.
fn expire_generic(server: &mut Server, ctx: &mut Ctx<'_>, base: i64, seconds: bool, cmd: &str) {
    let mut flags = 0;
    for j in 3..ctx.argc() {
        let o = ctx.arg(j);
        if eq(o, "nx") {
            flags |= E_NX;
        } else if eq(o, "xx") {
            flags |= E_XX;
        } else if eq(o, "gt") {
            flags |= E_GT;
        } else if eq(o, "lt") {
            flags |= E_LT;
        } else {
            let m = format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(c_str(o, 128))
            );
            return ctx.err(&m);
        }
    }
    if flags & E_NX != 0 && flags & (E_XX | E_GT | E_LT) != 0 {
        return ctx.err("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if flags & E_GT != 0 && flags & E_LT != 0 {
        return ctx.err("ERR GT and LT options at the same time are not compatible");
    }
    let Some(mut when) = parse_ll(ctx, 2) else {
        return;
    };
    if seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return expire_error(ctx, cmd);
        }
        when *= 1000;
    }
    let Some(w) = when.checked_add(base) else {
        return expire_error(ctx, cmd);
    };
    when = w;
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let d = &mut server.dbs[db];
    if !d.exists(&key, now) {
        return ctx.int(0);
    }
    if flags != 0 {
        let cur = d.get_expire(&key);
        if flags & E_NX != 0 && cur.is_some() {
            return ctx.int(0);
        }
        if flags & E_XX != 0 && cur.is_none() {
            return ctx.int(0);
        }
        if flags & E_GT != 0 && cur.is_none_or(|c| when <= c) {
            return ctx.int(0);
        }
        if flags & E_LT != 0 && cur.is_some_and(|c| when >= c) {
            return ctx.int(0);
        }
    }
    if when <= now {
        d.remove(&key);
        let name: &[u8] = if server.config.lazyfree_lazy_expire {
            b"UNLINK"
        } else {
            b"DEL"
        };
        server.prop_rewrite([name, &key]);
    } else {
        d.set_expire(&key, when);
        if server.propagating() && cmd != "pexpireat" {
            // PEXPIREAT key ms, the options kept (Redis rewrites
            // arguments 0 and 2 only).
            let ms = when.to_string();
            let mut args: Vec<&[u8]> = vec![b"PEXPIREAT", &key, ms.as_bytes()];
            args.extend((3..ctx.argc()).map(|j| ctx.arg(j)));
            server.prop_rewrite(args);
        }
    }
    server.dirty += 1;
    ctx.int(1);
}

fn expire(server: &mut Server, ctx: &mut Ctx<'_>) {
    let now = ctx.now;
    expire_generic(server, ctx, now, true, "expire");
}

fn pexpire(server: &mut Server, ctx: &mut Ctx<'_>) {
    let now = ctx.now;
    expire_generic(server, ctx, now, false, "pexpire");
}

fn expireat(server: &mut Server, ctx: &mut Ctx<'_>) {
    expire_generic(server, ctx, 0, true, "expireat");
}

fn pexpireat(server: &mut Server, ctx: &mut Ctx<'_>) {
    expire_generic(server, ctx, 0, false, "pexpireat");
}

/// Redis's `ttlGenericCommand`.
fn ttl_generic(server: &mut Server, ctx: &mut Ctx<'_>, ms: bool, abs: bool) {
    let (db, now) = (ctx.db, ctx.now);
    let Some(exp) = server.dbs[db]
        .lookup_read(ctx.arg(1), now)
        .map(|e| e.expire())
    else {
        return ctx.int(-2);
    };
    let Some(exp) = exp else { return ctx.int(-1) };
    let t = if abs { exp } else { (exp - now).max(0) };
    ctx.int(if ms { t } else { (t + 500) / 1000 });
}

fn ttl(server: &mut Server, ctx: &mut Ctx<'_>) {
    ttl_generic(server, ctx, false, false);
}

fn pttl(server: &mut Server, ctx: &mut Ctx<'_>) {
    ttl_generic(server, ctx, true, false);
}

fn expiretime(server: &mut Server, ctx: &mut Ctx<'_>) {
    ttl_generic(server, ctx, false, true);
}

fn pexpiretime(server: &mut Server, ctx: &mut Ctx<'_>) {
    ttl_generic(server, ctx, true, true);
}

fn persist(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let key = ctx.arg(1).to_vec();
    let d = &mut server.dbs[db];
    if d.exists(&key, now) && d.remove_expire(&key) {
        server.dirty += 1;
        ctx.int(1)
    } else {
        ctx.int(0)
    }
}

// ------------------------------------------------------------ OBJECT

/// Redis's string encodings as `tryObjectEncoding` picks them for a value
/// stored by SET: `int` for a canonical integer, `embstr` up to 44 bytes,
/// `raw` beyond. (Redis also says `raw` for a short string grown by
/// APPEND/SETRANGE; gyre does not keep that history.)
fn string_encoding(v: &[u8]) -> &'static str {
    if v.len() <= 20 && string2ll(v).is_some() {
        "int"
    } else if v.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

fn object_encoding(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    // OBJECT looks the key up without touching hit/miss counters.
    let enc = match server.dbs[db].lookup_write(ctx.arg(2), now) {
        None => return ctx.null(),
        Some(Entry {
            value: Ref::Str(v), ..
        }) => string_encoding(v),
        Some(Entry {
            value: Ref::Obj(o), ..
        }) => o.encoding(),
    };
    ctx.bulk(enc.as_bytes());
}

fn object_refcount(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let shared = |v: &[u8]| v.len() <= 20 && string2ll(v).is_some_and(|n| (0..10_000).contains(&n));
    match server.dbs[db].lookup_write(ctx.arg(2), now) {
        None => ctx.null(),
        // Shared integers (0..9999) have refcount INT_MAX in Redis.
        Some(e) if e.str().is_some_and(shared) => ctx.int(i64::from(i32::MAX)),
        Some(_) => ctx.int(1),
    }
}

fn object_help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "OBJECT",
        &["ENCODING <key>", "FREQ <key>", "REFCOUNT <key>"],
    );
}

// ------------------------------------------------------------ COPY MOVE TOUCH

const ERR_SAME_OBJECT: &str = "ERR source and destination objects are the same";

/// A DB index argument (Redis's `selectDb` checks): `Err` once replied.
fn db_index(server: &Server, ctx: &mut Ctx<'_>, i: usize) -> Result<usize, Replied> {
    let Some(v) = parse_ll(ctx, i) else {
        return Err(Replied);
    };
    if i32::try_from(v).is_err() {
        ctx.err("ERR value is out of range");
        return Err(Replied);
    }
    match usize::try_from(v) {
        Ok(d) if d < server.dbs.len() => Ok(d),
        _ => {
            ctx.err("ERR DB index is out of range");
            Err(Replied)
        }
    }
}

fn copy(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (src_db, now) = (ctx.db, ctx.now);
    let mut dst_db = src_db;
    let mut replace = false;
    let mut j = 3;
    while j < ctx.argc() {
        if eq(ctx.arg(j), "replace") {
            replace = true;
        } else if eq(ctx.arg(j), "db") && j + 1 < ctx.argc() {
            // COPY reports a bad DB number with getLongFromObject's text.
            let Some(v) = parse_ll(ctx, j + 1) else {
                return;
            };
            match usize::try_from(v) {
                Ok(d) if d < server.dbs.len() => dst_db = d,
                _ => return ctx.err("ERR DB index is out of range"),
            }
            j += 1;
        } else {
            return ctx.syntax();
        }
        j += 1;
    }
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    if src_db == dst_db && src == dst {
        return ctx.err(ERR_SAME_OBJECT);
    }
    if server.dbs[src_db].lookup_read(src, now).is_none() {
        return ctx.int(0);
    }
    let Some((v, expire)) = server.dbs[src_db].copy_out(src, now) else {
        return ctx.int(0);
    };
    if server.dbs[dst_db].exists(dst, now) {
        if !replace {
            return ctx.int(0);
        }
        server.dbs[dst_db].delete(dst, now);
    }
    server.dbs[dst_db].store_copy(dst, v, expire);
    server.blocked.signal(dst_db, dst);
    server.dirty += 1;
    ctx.int(1);
}

fn move_cmd(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Ok(dst_db) = db_index(server, ctx, 2) else {
        return;
    };
    let (src_db, now) = (ctx.db, ctx.now);
    if src_db == dst_db {
        return ctx.err(ERR_SAME_OBJECT);
    }
    let key = ctx.arg(1);
    if !server.dbs[src_db].exists(key, now) || server.dbs[dst_db].exists(key, now) {
        return ctx.int(0);
    }
    let Some((v, expire)) = server.dbs[src_db].take(key, now) else {
        return ctx.int(0);
    };
    server.dbs[dst_db].store_copy(key, v, expire);
    server.blocked.signal(dst_db, key);
    server.dirty += 1;
    ctx.int(1);
}

fn touch(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (db, now) = (ctx.db, ctx.now);
    let n = ctx
        .argv
        .iter()
        .skip(1)
        .filter(|k| server.dbs[db].lookup_read(k, now).is_some())
        .count();
    ctx.int(n as i64);
}
