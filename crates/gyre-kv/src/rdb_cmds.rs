//! The persistence commands: SAVE, BGSAVE, LASTSAVE, SHUTDOWN (Redis's
//! `rdb.c` / `server.c`), DUMP and RESTORE (`cluster.c`), over
//! [`crate::persist`] and [`crate::rdb`].

use crate::cmd::{eq, spec, CommandSpec, Ctx, ADMIN, ERR_NOT_INT, RO_SLOW, WR};
use crate::rdb::load::{restore_payload, store};
use crate::rdb::save::dump_payload;
use crate::rdb::Error as RdbError;
use crate::server::Server;
use crate::util::string2ll;

const NOSCRIPT: &[&str] = &["admin", "noscript"];

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "save",
        1,
        NOSCRIPT,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Synchronously save the dataset to disk",
        save
    ),
    spec!(
        "bgsave",
        -1,
        NOSCRIPT,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Asynchronously save the dataset to disk",
        bgsave
    ),
    spec!(
        "bgrewriteaof",
        1,
        NOSCRIPT,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Asynchronously rewrite the append-only file",
        bgrewriteaof
    ),
    spec!(
        "lastsave",
        1,
        ADMIN,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Get the UNIX time stamp of the last successful save to disk",
        lastsave
    ),
    spec!(
        "shutdown",
        -1,
        ADMIN,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Synchronously save the dataset to disk and then shut down the server",
        shutdown
    ),
    spec!(
        "dump",
        2,
        RO_SLOW,
        1,
        1,
        1,
        "generic",
        "2.6.0",
        "Return a serialized version of the value stored at the specified key.",
        dump
    ),
    spec!(
        "restore",
        -4,
        WR,
        1,
        1,
        1,
        "generic",
        "2.6.0",
        "Create a key using the provided serialized value, previously obtained using DUMP.",
        restore
    ),
];

const ERR_IN_PROGRESS: &str = "ERR Background save already in progress";

fn save(server: &mut Server, ctx: &mut Ctx<'_>) {
    if server.rdb_bgsave_in_progress() {
        ctx.err(ERR_IN_PROGRESS);
        return;
    }
    match server.rdb_save(ctx.now) {
        Ok(_) => ctx.ok(),
        Err(e) => {
            log::warn!("Failed saving the DB: {e}");
            ctx.err("ERR");
        }
    }
}

fn bgsave(server: &mut Server, ctx: &mut Ctx<'_>) {
    match ctx.argc() {
        1 => {}
        2 if eq(ctx.arg(1), "schedule") => {}
        _ => return ctx.syntax(),
    }
    if server.rdb_bgsave_in_progress() {
        // SCHEDULE only waits for another kind of child (an AOF rewrite);
        // with an RDB save running Redis refuses either way.
        return ctx.err(ERR_IN_PROGRESS);
    }
    if server.bgsave_in_progress() {
        if ctx.argc() == 2 {
            server.persist.scheduled = true;
            return ctx.simple("Background saving scheduled");
        }
        return ctx.err("ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.");
    }
    match server.bgsave_start(ctx.now) {
        Ok(()) => ctx.simple("Background saving started"),
        Err(_) => ctx.err("ERR"),
    }
}

/// BGREWRITEAOF (`bgrewriteaofCommand`): scheduled while a BGSAVE runs.
fn bgrewriteaof(server: &mut Server, ctx: &mut Ctx<'_>) {
    if server.aof_rewrite_in_progress() {
        return ctx.err(crate::aof::rewrite::ERR_REWRITE_IN_PROGRESS);
    }
    if server.bgsave_in_progress() {
        server.aof.rewrite_scheduled = true;
        return ctx.simple("Background append only file rewriting scheduled");
    }
    match server.rewrite_background(ctx.now) {
        Ok(()) => ctx.simple("Background append only file rewriting started"),
        Err(_) => ctx.err(
            "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.",
        ),
    }
}

fn lastsave(server: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.int(server.last_save_ms / 1000);
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. The kv process exits
/// after the save; gyre's master starts a new one, which loads the file
/// (a difference from Redis, where the whole server stops).
fn shutdown(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (mut nosave, mut save, mut now, mut force, mut abort) = (false, false, false, false, false);
    for i in 1..ctx.argc() {
        let a = ctx.arg(i);
        if eq(a, "nosave") {
            nosave = true;
        } else if eq(a, "save") {
            save = true;
        } else if eq(a, "now") {
            now = true;
        } else if eq(a, "force") {
            force = true;
        } else if eq(a, "abort") {
            abort = true;
        } else {
            return ctx.syntax();
        }
    }
    if (abort && (nosave || save || now || force)) || (nosave && save) {
        return ctx.syntax();
    }
    if abort {
        // No shutdown ever waits (no replicas to wait for).
        return ctx.err("ERR No shutdown in progress.");
    }
    if server.is_loading() {
        save = false;
        nosave = true;
    }
    let want_save = (!server.config.persist.save.is_empty() && !nosave) || save;
    if want_save && !server.save_on_exit(ctx.now) && !force {
        return ctx.err("ERR Errors trying to SHUTDOWN. Check logs.");
    }
    log::info!("Redis is now ready to exit, bye bye...");
    server.persist.shutdown_asked = true;
    ctx.close = true;
}

fn dump(server: &mut Server, ctx: &mut Ctx<'_>) {
    let compress = server.config.persist.rdbcompression;
    let key = ctx.arg(1);
    let db = &mut server.dbs[ctx.db];
    let payload = db
        .lookup_read(key, ctx.now)
        .map(|e| dump_payload(e.value, compress));
    match payload {
        Some(p) => ctx.bulk(&p),
        None => ctx.null(),
    }
}

fn restore(server: &mut Server, ctx: &mut Ctx<'_>) {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (false, false);
    let mut j = 4;
    while j < ctx.argc() {
        let a = ctx.arg(j);
        let more = ctx.argc() - j - 1;
        if eq(a, "replace") {
            replace = true;
        } else if eq(a, "absttl") {
            absttl = true;
        } else if eq(a, "idletime") && more >= 1 && !freq {
            let Some(v) = string2ll(ctx.arg(j + 1)) else {
                return ctx.err(ERR_NOT_INT);
            };
            if v < 0 {
                return ctx.err("ERR Invalid IDLETIME value, must be >= 0");
            }
            idle = true;
            j += 1;
        } else if eq(a, "freq") && more >= 1 && !idle {
            let Some(v) = string2ll(ctx.arg(j + 1)) else {
                return ctx.err(ERR_NOT_INT);
            };
            if !(0..=255).contains(&v) {
                return ctx.err("ERR Invalid FREQ value, must be >= 0 and <= 255");
            }
            freq = true;
            j += 1;
        } else {
            return ctx.syntax();
        }
        j += 1;
    }
    // gyre keeps no LRU clock or LFU counter: IDLETIME and FREQ are checked
    // and have nothing to set.
    let key = ctx.arg(1);
    let now = ctx.now;
    if !replace && server.dbs[ctx.db].exists(key, now) {
        return ctx.err("BUSYKEY Target key name already exists.");
    }
    let Some(mut ttl) = string2ll(ctx.arg(2)) else {
        return ctx.err(ERR_NOT_INT);
    };
    if ttl < 0 {
        return ctx.err("ERR Invalid TTL value, must be >= 0");
    }
    let lim = server.config.encodings;
    let v = match restore_payload(ctx.arg(3), &lim) {
        Err(RdbError::Checksum { .. } | RdbError::Version(_)) => {
            return ctx.err("ERR DUMP payload version or checksum are wrong")
        }
        Err(_) | Ok(None) => return ctx.err("ERR Bad data format"),
        Ok(Some(v)) => v,
    };
    let db = &mut server.dbs[ctx.db];
    let deleted = replace && db.delete(key, now);
    if ttl != 0 && !absttl {
        ttl = ttl.saturating_add(now);
    }
    if ttl != 0 && ttl <= now {
        // Already expired: nothing is stored (and a replaced key is gone).
        if deleted {
            server.dirty += 1;
            server.prop_rewrite([&b"DEL"[..], key]);
        }
        return ctx.ok();
    }
    match store(db, key, v, (ttl != 0).then_some(ttl), now, &lim) {
        Ok(_) => {
            server.dirty += 1;
            if ttl != 0 && !absttl && server.propagating() {
                // The TTL as an absolute time, with ABSTTL added.
                let t = ttl.to_string();
                let mut args: Vec<&[u8]> = (0..ctx.argc()).map(|j| ctx.arg(j)).collect();
                args[2] = t.as_bytes();
                args.push(b"ABSTTL");
                server.prop_rewrite(args);
            }
            ctx.ok();
        }
        Err(_) => ctx.err("ERR Bad data format"),
    }
}
