//! Connection and server commands (Redis's `server.c` / `networking.c`
//! pieces): PING ECHO QUIT HELLO SELECT DBSIZE FLUSHDB FLUSHALL INFO TIME
//! LASTSAVE FUNCTION FLUSH.

use crate::cmd::{
    c_str, eq, no_handler, parse_ll, spec, CommandSpec, Ctx, ADMIN, FAST, RO, WR_NODENY,
};
use crate::resp::{self, Proto};
use crate::server::Server;
use crate::util::string2ll;

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "role",
        1,
        &["noscript", "loading", "stale", "fast"],
        0,
        0,
        0,
        "server",
        "2.8.12",
        "Return the role of the instance in the context of replication",
        role
    ),
    spec!(
        "ping",
        -1,
        // Redis 7.0's PING is `fast` only: not `loading` (-LOADING while a
        // dump loads) nor `stale`.
        &["fast"],
        0,
        0,
        0,
        "connection",
        "1.0.0",
        "Ping the server",
        ping
    ),
    spec!(
        "echo",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "1.0.0",
        "Echo the given string",
        echo
    ),
    spec!(
        "quit",
        -1,
        FAST,
        0,
        0,
        0,
        "connection",
        "1.0.0",
        "Close the connection",
        quit
    ),
    spec!(
        "hello",
        -1,
        FAST,
        0,
        0,
        0,
        "connection",
        "6.0.0",
        "Handshake with Redis",
        hello
    ),
    spec!(
        "select",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "1.0.0",
        "Change the selected database for the current connection",
        select
    ),
    spec!(
        "dbsize",
        1,
        RO,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Return the number of keys in the selected database",
        dbsize
    ),
    spec!(
        "flushdb",
        -1,
        WR_NODENY,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Remove all keys from the current database",
        flushdb
    ),
    spec!(
        "flushall",
        -1,
        WR_NODENY,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Remove all keys from all databases",
        flushall
    ),
    spec!(
        "info",
        -1,
        ADMIN,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Get information and statistics about the server",
        info
    ),
    spec!(
        "time",
        1,
        FAST,
        0,
        0,
        0,
        "server",
        "2.6.0",
        "Return the current server time",
        time
    ),
    spec!(
        "lastsave",
        1,
        FAST,
        0,
        0,
        0,
        "server",
        "1.0.0",
        "Get the UNIX time stamp of the last successful save to disk",
        lastsave
    ),
    CommandSpec {
        subcommands: FUNCTION_SUBS,
        ..spec!(
            "function",
            -2,
            ADMIN,
            0,
            0,
            0,
            "scripting",
            "7.0.0",
            "A container for function commands",
            no_handler
        )
    },
];

static FUNCTION_SUBS: &[CommandSpec] = &[spec!(
    "flush",
    -2,
    WR_NODENY,
    0,
    0,
    0,
    "scripting",
    "7.0.0",
    "Deleting all functions",
    function_flush
)];

// ------------------------------------------------------------ connection

/// ROLE: a master without replicas (the kv process has no replication):
/// `master`, its replication offset, no replicas.
fn role(_: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.array(3);
    ctx.bulk(b"master");
    ctx.int(0);
    ctx.array(0);
}

fn ping(server: &mut Server, ctx: &mut Ctx<'_>) {
    // A RESP2 subscriber gets `[pong, arg]` (its replies are messages).
    if ctx.proto == 2
        && ctx.argc() <= 2
        && server
            .clients
            .get(&ctx.client_id)
            .is_some_and(|c| c.subs.count() > 0)
    {
        let m = ctx.arg(1);
        ctx.array(2);
        ctx.bulk(b"pong");
        return ctx.bulk(m);
    }
    match ctx.argc() {
        1 => ctx.simple("PONG"),
        2 => {
            let m = ctx.arg(1);
            ctx.bulk(m)
        }
        _ => ctx.err("ERR wrong number of arguments for 'ping' command"),
    }
}

fn echo(_: &mut Server, ctx: &mut Ctx<'_>) {
    let m = ctx.arg(1);
    ctx.bulk(m);
}

fn quit(_: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.ok();
    ctx.close = true;
}

fn hello(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut ver = i64::from(ctx.proto);
    let mut next = 1;
    if ctx.argc() >= 2 {
        match string2ll(ctx.arg(1)) {
            Some(v) => ver = v,
            None => return ctx.err("ERR Protocol version is not an integer or out of range"),
        }
        next = 2;
        if !(2..=3).contains(&ver) {
            return ctx.err("NOPROTO unsupported protocol version");
        }
    }
    let mut name: Option<Vec<u8>> = None;
    let mut j = next;
    while j < ctx.argc() {
        let more = ctx.argc() - 1 - j;
        let opt = ctx.arg(j);
        if eq(opt, "auth") && more >= 2 {
            let (user, pass) = (ctx.arg(j + 1), ctx.arg(j + 2));
            if !crate::auth::authenticate(server, ctx, user, pass) {
                return;
            }
            j += 2;
        } else if eq(opt, "setname") && more >= 1 {
            name = Some(ctx.arg(j + 1).to_vec());
            j += 1;
        } else {
            let m = format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(c_str(opt, 128))
            );
            return ctx.err(&m);
        }
        j += 1;
    }
    if server
        .clients
        .get(&ctx.client_id)
        .is_some_and(|c| !c.authenticated)
    {
        return ctx.err(crate::auth::ERR_HELLO_NOAUTH);
    }
    if let Some(n) = name {
        if !crate::client::set_client_name(server, ctx, &n) {
            return;
        }
    }
    ctx.proto = ver as Proto;
    ctx.map(7);
    ctx.bulk(b"server");
    ctx.bulk(b"redis");
    ctx.bulk(b"version");
    ctx.bulk(crate::REDIS_VERSION.as_bytes());
    ctx.bulk(b"proto");
    ctx.int(ver);
    ctx.bulk(b"id");
    ctx.int(ctx.client_id as i64);
    ctx.bulk(b"mode");
    ctx.bulk(b"standalone");
    ctx.bulk(b"role");
    ctx.bulk(b"master");
    ctx.bulk(b"modules");
    ctx.array(0);
}

fn select(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(id) = parse_ll(ctx, 1) else { return };
    if i32::try_from(id).is_err() {
        return ctx.err("ERR value is out of range, value must between -2147483648 and 2147483647");
    }
    match usize::try_from(id) {
        Ok(i) if i < server.dbs.len() => {
            ctx.db = i;
            ctx.ok();
        }
        _ => ctx.err("ERR DB index is out of range"),
    }
}

// ------------------------------------------------------------ server

fn dbsize(server: &mut Server, ctx: &mut Ctx<'_>) {
    let n = server.dbs.get(ctx.db).map_or(0, |d| d.len());
    ctx.int(n as i64);
}

fn flush_flags_ok(ctx: &mut Ctx<'_>) -> bool {
    match ctx.argc() {
        1 => true,
        2 if eq(ctx.arg(1), "sync") || eq(ctx.arg(1), "async") => true,
        _ => {
            ctx.syntax();
            false
        }
    }
}

fn flushdb(server: &mut Server, ctx: &mut Ctx<'_>) {
    if !flush_flags_ok(ctx) {
        return;
    }
    if let Some(db) = server.dbs.get_mut(ctx.db) {
        server.dirty += db.flush() as u64;
    }
    ctx.ok();
}

fn flushall(server: &mut Server, ctx: &mut Ctx<'_>) {
    if !flush_flags_ok(ctx) {
        return;
    }
    // Redis's flushAllDataAndResetRDB: a running save is cancelled and,
    // with save rules, an (empty) dump written at once. An AOF rewrite
    // goes on (FLUSHALL is in the new incr file after its base).
    if server.rdb_bgsave_in_progress() {
        server.abort_bgsave("FLUSHALL");
    }
    for db in &mut server.dbs {
        server.dirty += db.flush() as u64;
    }
    server.save_after_flushall(ctx.now);
    server.dirty += 1;
    ctx.ok();
}

fn info(server: &mut Server, ctx: &mut Ctx<'_>) {
    let sections: Vec<Vec<u8>> = ctx
        .argv
        .iter()
        .skip(1)
        .map(|a| a.to_ascii_lowercase())
        .collect();
    let text = crate::info::render(server, ctx.now, &sections);
    resp::write_verbatim(ctx.out, text.as_bytes(), ctx.proto);
}

fn time(_: &mut Server, ctx: &mut Ctx<'_>) {
    let secs = ctx.now.div_euclid(1000);
    let us = ctx.now.rem_euclid(1000) * 1000;
    ctx.array(2);
    ctx.bulk(secs.to_string().as_bytes());
    ctx.bulk(us.to_string().as_bytes());
}

fn lastsave(server: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.int(server.last_save_ms.div_euclid(1000));
}

fn function_flush(_: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() > 3 {
        return ctx.err(
            "ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP.",
        );
    }
    if ctx.argc() == 3 && !eq(ctx.arg(2), "sync") && !eq(ctx.arg(2), "async") {
        return ctx.err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
    }
    ctx.ok();
}
