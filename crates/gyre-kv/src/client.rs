//! CLIENT ID / SETNAME / GETNAME / LIST / INFO / KILL / NO-EVICT / HELP.

use crate::cmd::{
    c_str, eq, help_lines, no_handler, spec, CommandSpec, Ctx, ADMIN, ERR_NOT_INT, FAST,
};
use crate::resp;
use crate::server::{ClientId, Server};
use crate::util::string2ll;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    subcommands: CLIENT_SUBS,
    ..spec!(
        "client",
        -2,
        ADMIN,
        0,
        0,
        0,
        "connection",
        "2.4.0",
        "A container for client connection commands",
        no_handler
    )
}];

static CLIENT_SUBS: &[CommandSpec] = &[
    spec!(
        "id",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "5.0.0",
        "Returns the client ID for the current connection",
        client_id
    ),
    spec!(
        "setname",
        3,
        FAST,
        0,
        0,
        0,
        "connection",
        "2.6.9",
        "Set the current connection name",
        client_setname
    ),
    spec!(
        "getname",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "2.6.9",
        "Get the current connection name",
        client_getname
    ),
    spec!(
        "list",
        -2,
        ADMIN,
        0,
        0,
        0,
        "connection",
        "2.4.0",
        "Get the list of client connections",
        client_list
    ),
    spec!(
        "info",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "6.2.0",
        "Returns information about the current client connection.",
        client_info
    ),
    spec!(
        "kill",
        -3,
        ADMIN,
        0,
        0,
        0,
        "connection",
        "2.4.0",
        "Kill the connection of a client",
        client_kill
    ),
    spec!(
        "pause",
        -3,
        ADMIN,
        0,
        0,
        0,
        "connection",
        "3.0.0",
        "Stop processing commands from clients for some time",
        crate::pause::client_pause
    ),
    spec!(
        "unpause",
        2,
        ADMIN,
        0,
        0,
        0,
        "connection",
        "6.2.0",
        "Resume processing of clients that were paused",
        crate::pause::client_unpause
    ),
    spec!(
        "no-evict",
        3,
        &["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        "connection",
        "7.0.0",
        "Set client eviction mode for the current connection",
        client_no_evict
    ),
    spec!(
        "reply",
        3,
        ADMIN,
        0,
        0,
        0,
        "connection",
        "3.2.0",
        "Instruct the server whether to reply to commands",
        crate::reply_mode::client_reply
    ),
    spec!(
        "unblock",
        -3,
        ADMIN,
        0,
        0,
        0,
        "connection",
        "5.0.0",
        "Unblock a client blocked in a blocking command from a different connection",
        client_unblock
    ),
    spec!(
        "help",
        2,
        FAST,
        0,
        0,
        0,
        "connection",
        "5.0.0",
        "Show helpful text about the different subcommands",
        client_help
    ),
];

/// Client names: printable ASCII without spaces (`'!'..='~'`).
fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

pub(crate) fn set_client_name(server: &mut Server, ctx: &mut Ctx<'_>, name: &[u8]) -> bool {
    if !valid_client_name(name) {
        ctx.err("ERR Client names cannot contain spaces, newlines or special characters.");
        return false;
    }
    if let Some(c) = server.clients.get_mut(&ctx.client_id) {
        c.name = if name.is_empty() {
            None
        } else {
            Some(name.to_vec())
        };
    }
    true
}

fn client_id(_: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.int(ctx.client_id as i64);
}

fn client_setname(server: &mut Server, ctx: &mut Ctx<'_>) {
    let name = ctx.arg(2).to_vec();
    if set_client_name(server, ctx, &name) {
        ctx.ok();
    }
}

fn client_getname(server: &mut Server, ctx: &mut Ctx<'_>) {
    match server
        .clients
        .get(&ctx.client_id)
        .and_then(|c| c.name.clone())
    {
        Some(n) => ctx.bulk(&n),
        None => ctx.null(),
    }
}

/// One CLIENT LIST line (without the trailing newline).
pub(crate) fn client_line(
    server: &Server,
    id: ClientId,
    now: i64,
    cur: Option<(&Ctx<'_>, &str)>,
) -> String {
    let live = cur
        .filter(|(ctx, _)| ctx.client_id == id)
        .map(|(ctx, name)| (ctx.db, ctx.proto, name));
    client_line_as(server, id, now, live)
}

/// [`client_line`] with the client's live db, protocol and command given
/// (the running client's are only written back after its command).
pub(crate) fn client_line_as(
    server: &Server,
    id: ClientId,
    now: i64,
    live: Option<(usize, u8, &str)>,
) -> String {
    let Some(c) = server.clients.get(&id) else {
        return String::new();
    };
    let (db, resp, cmd) = match live {
        Some((db, proto, name)) => (db, proto, name.to_string()),
        None => (
            c.db,
            c.resp,
            c.last_cmd
                .map_or_else(|| "NULL".to_string(), |r| r.full_name()),
        ),
    };
    let name = c
        .name
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let age = (now - c.created_ms).max(0) / 1000;
    let idle = (now - c.last_interaction_ms).max(0) / 1000;
    let qbuf = c.parser.pending_bytes();
    // Redis's flag letters, in its order (pub/sub, MULTI, blocked, dirty
    // CAS, closing).
    let mut flags = String::new();
    if c.subs.count() > 0 {
        flags.push('P');
    }
    if c.mstate.is_some() || c.exec_view.is_some() {
        flags.push('x');
    }
    if server.is_blocked(id) {
        flags.push('b');
    }
    if c.dirty_cas {
        flags.push('d');
    }
    if c.closing {
        flags.push('A');
    }
    if c.no_evict {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let (sub, psub, ssub) = (
        c.subs.channels.len(),
        c.subs.patterns.len(),
        c.subs.shard.len(),
    );
    let (multi, multi_mem) = c
        .mstate
        .as_ref()
        .map(|m| (m.len() as i64, m.bytes))
        .or(c.exec_view)
        .unwrap_or((-1, 0));
    // Output waiting (Redis's reply list); an emptied buffer kept for
    // reuse counts in tot-mem only, as Redis's static reply buffer does.
    let omem = if c.pending_output().is_empty() {
        0
    } else {
        c.obuf.capacity()
    };
    format!(
        "id={id} addr={} laddr={} fd={} name={name} age={age} idle={idle} flags={flags} db={db} sub={sub} psub={psub} ssub={ssub} multi={multi} qbuf={qbuf} qbuf-free=0 argv-mem=0 multi-mem={multi_mem} rbs=0 rbp=0 obl=0 oll=0 omem={omem} tot-mem={} events=r cmd={cmd} user={} redir=-1 resp={resp}",
        c.addr,
        c.laddr,
        c.fd,
        2048 + c.parser.buffered_capacity() + c.obuf.capacity() + multi_mem as usize,
        c.user
    )
}

fn client_list(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut ids: Vec<ClientId> = server.clients.keys().copied().collect();
    let mut j = 2;
    while j < ctx.argc() {
        if eq(ctx.arg(j), "type") && j + 1 < ctx.argc() {
            let t = ctx.arg(j + 1).to_ascii_lowercase();
            match t.as_slice() {
                b"normal" => {
                    ids.retain(|i| server.clients.get(i).is_some_and(|c| c.subs.count() == 0))
                }
                b"pubsub" => {
                    ids.retain(|i| server.clients.get(i).is_some_and(|c| c.subs.count() > 0))
                }
                b"master" | b"replica" | b"slave" => ids.clear(),
                _ => {
                    let m = format!(
                        "ERR Unknown client type '{}'",
                        String::from_utf8_lossy(c_str(ctx.arg(j + 1), 128))
                    );
                    return ctx.err(&m);
                }
            }
            j += 2;
        } else if eq(ctx.arg(j), "id") && j + 1 < ctx.argc() {
            let mut wanted = Vec::new();
            for k in j + 1..ctx.argc() {
                match string2ll(ctx.arg(k)) {
                    Some(v) if v > 0 => wanted.push(v as u64),
                    _ => return ctx.err("ERR Invalid client ID"),
                }
            }
            ids.retain(|i| wanted.contains(i));
            j = ctx.argc();
        } else {
            return ctx.syntax();
        }
    }
    let mut text = String::new();
    for id in ids {
        text.push_str(&client_line(
            server,
            id,
            ctx.now,
            Some((ctx, "client|list")),
        ));
        text.push('\n');
    }
    resp::write_verbatim(ctx.out, text.as_bytes(), ctx.proto);
}

fn client_info(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut text = client_line(server, ctx.client_id, ctx.now, Some((ctx, "client|info")));
    text.push('\n');
    resp::write_verbatim(ctx.out, text.as_bytes(), ctx.proto);
}

fn client_kill(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() == 3 {
        // Old form: CLIENT KILL ip:port
        let addr = ctx.arg(2).to_vec();
        let found = server
            .clients
            .values()
            .find(|c| c.addr.as_bytes() == addr.as_slice())
            .map(|c| c.id);
        return match found {
            None => ctx.err("ERR No such client"),
            Some(id) => {
                ctx.ok();
                if id == ctx.client_id {
                    ctx.close = true;
                } else {
                    server.schedule_close(id);
                }
            }
        };
    }
    let mut id_f: Option<u64> = None;
    let mut addr_f: Option<Vec<u8>> = None;
    let mut laddr_f: Option<Vec<u8>> = None;
    let mut skipme = true;
    let mut type_none = false;
    let mut j = 2;
    while j < ctx.argc() {
        if j + 1 >= ctx.argc() {
            return ctx.syntax();
        }
        let (opt, val) = (ctx.arg(j).to_vec(), ctx.arg(j + 1).to_vec());
        if eq(&opt, "id") {
            match string2ll(&val) {
                Some(v) if v > 0 => id_f = Some(v as u64),
                _ => return ctx.err("ERR client-id should be greater than 0"),
            }
        } else if eq(&opt, "addr") {
            addr_f = Some(val);
        } else if eq(&opt, "laddr") {
            laddr_f = Some(val);
        } else if eq(&opt, "type") {
            let t = val.to_ascii_lowercase();
            match t.as_slice() {
                b"normal" => {}
                b"master" | b"replica" | b"slave" | b"pubsub" => type_none = true,
                _ => {
                    let m = format!(
                        "ERR Unknown client type '{}'",
                        String::from_utf8_lossy(c_str(&val, 128))
                    );
                    return ctx.err(&m);
                }
            }
        } else if eq(&opt, "user") {
            if val != b"default" {
                let m = format!(
                    "ERR No such user '{}'",
                    String::from_utf8_lossy(c_str(&val, 128))
                );
                return ctx.err(&m);
            }
        } else if eq(&opt, "skipme") {
            if eq(&val, "yes") {
                skipme = true;
            } else if eq(&val, "no") {
                skipme = false;
            } else {
                return ctx.syntax();
            }
        } else {
            return ctx.syntax();
        }
        j += 2;
    }
    let victims: Vec<ClientId> = if type_none {
        Vec::new()
    } else {
        server
            .clients
            .values()
            .filter(|c| id_f.is_none_or(|i| c.id == i))
            .filter(|c| addr_f.as_deref().is_none_or(|a| c.addr.as_bytes() == a))
            .filter(|c| laddr_f.as_deref().is_none_or(|a| c.laddr.as_bytes() == a))
            .filter(|c| !(skipme && c.id == ctx.client_id))
            .map(|c| c.id)
            .collect()
    };
    for &v in &victims {
        if v == ctx.client_id {
            ctx.close = true;
        } else {
            server.schedule_close(v);
        }
    }
    ctx.int(victims.len() as i64);
}

fn client_unblock(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() > 4 {
        return ctx.syntax();
    }
    let mut error = false;
    if ctx.argc() == 4 {
        if eq(ctx.arg(3), "error") {
            error = true;
        } else if !eq(ctx.arg(3), "timeout") {
            return ctx.err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
        }
    }
    let Some(id) = string2ll(ctx.arg(2)) else {
        return ctx.err(ERR_NOT_INT);
    };
    let done = u64::try_from(id).is_ok_and(|id| server.unblock_client(id, error, ctx.now));
    // The target's error reply is counted as this command's (Redis counts
    // error replies made during a call against that call).
    if done && error {
        ctx.errors += 1;
    }
    ctx.int(i64::from(done));
}

/// CLIENT HELP: Redis 7.0's text for the subcommands this server has
/// (no CACHING, GETREDIR, TRACKING, TRACKINGINFO).
fn client_help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "CLIENT",
        &[
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
        ],
    );
}

/// CLIENT NO-EVICT ON|OFF: the client is left alone by client eviction
/// (`maxmemory-clients`, [`crate::client_evict`]); shown as flag `e`.
/// RESET keeps it, as in Redis.
fn client_no_evict(server: &mut Server, ctx: &mut Ctx<'_>) {
    let on = match ctx.arg(2) {
        a if eq(a, "on") => true,
        a if eq(a, "off") => false,
        _ => return ctx.syntax(),
    };
    if let Some(c) = server.clients.get_mut(&ctx.client_id) {
        c.no_evict = on;
    }
    ctx.ok();
}
