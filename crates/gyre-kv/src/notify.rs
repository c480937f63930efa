//! Keyspace notifications (Redis's `notify.c`): the
//! `notify-keyspace-events` flags and [`notify_keyspace_event`], which
//! publishes `__keyspace@<db>__:<key>` → event and
//! `__keyevent@<db>__:<event>` → key through [`crate::pubsub`].
//!
//! `expired` events come from the databases themselves: while `x` (with
//! `K` or `E`) is on, each [`crate::db::Db`] logs the keys its lazy and
//! active expiry reclaim, and the server publishes them right after the
//! command or cron step that reclaimed them ([`drain_expired`]), so every
//! expiry path reports without hooks of its own.

use crate::server::Server;

pub const KEYSPACE: u32 = 1 << 0; // K
pub const KEYEVENT: u32 = 1 << 1; // E
pub const GENERIC: u32 = 1 << 2; // g
pub const STRING: u32 = 1 << 3; // $
pub const LIST: u32 = 1 << 4; // l
pub const SET: u32 = 1 << 5; // s
pub const HASH: u32 = 1 << 6; // h
pub const ZSET: u32 = 1 << 7; // z
pub const EXPIRED: u32 = 1 << 8; // x
pub const EVICTED: u32 = 1 << 9; // e
pub const STREAM: u32 = 1 << 10; // t
pub const KEY_MISS: u32 = 1 << 11; // m (not in A)
pub const MODULE: u32 = 1 << 13; // d
pub const NEW: u32 = 1 << 14; // n (not in A)
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Redis's `keyspaceEventsStringToFlags`; `None` on an unknown character.
pub fn string_to_flags(s: &[u8]) -> Option<u32> {
    let mut f = 0;
    for &b in s {
        f |= match b {
            b'A' => ALL,
            b'g' => GENERIC,
            b'$' => STRING,
            b'l' => LIST,
            b's' => SET,
            b'h' => HASH,
            b'z' => ZSET,
            b'x' => EXPIRED,
            b'e' => EVICTED,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => STREAM,
            b'm' => KEY_MISS,
            b'd' => MODULE,
            b'n' => NEW,
            _ => return None,
        };
    }
    Some(f)
}

/// Redis's `keyspaceEventsFlagsToString` (CONFIG GET's form).
pub fn flags_to_string(f: u32) -> String {
    let mut s = String::new();
    if f & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if f & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if f & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// Whether events of `class` are published at all.
pub fn enabled(server: &Server, class: u32) -> bool {
    let f = server.config.notify_keyspace_events;
    f & class != 0 && f & (KEYSPACE | KEYEVENT) != 0
}

/// Redis's `notifyKeyspaceEvent`. `own` is the client running the
/// command and its reply buffer (its own copy of a message goes there).
pub fn notify_keyspace_event(
    server: &mut Server,
    class: u32,
    event: &str,
    key: &[u8],
    db: usize,
    own: crate::pubsub::Own<'_>,
    now: i64,
) {
    if !enabled(server, class) || server.pubsub.is_empty() {
        return;
    }
    let f = server.config.notify_keyspace_events;
    let mut own = own;
    if f & KEYSPACE != 0 {
        let mut ch = format!("__keyspace@{db}__:").into_bytes();
        ch.extend_from_slice(key);
        crate::pubsub::publish_message(
            server,
            &ch,
            event.as_bytes(),
            crate::pubsub::reown(&mut own),
            now,
        );
    }
    if f & KEYEVENT != 0 {
        let ch = format!("__keyevent@{db}__:{event}").into_bytes();
        crate::pubsub::publish_message(server, &ch, key, own, now);
    }
}

/// Turn the databases' expiry logs on or off to match the flags.
pub fn sync_expired_log(server: &mut Server) {
    let on = enabled(server, EXPIRED);
    for db in &mut server.dbs {
        if on {
            db.expired_log.get_or_insert_with(Vec::new);
        } else {
            db.expired_log = None;
        }
    }
}

/// Publish `expired` for every key the databases reclaimed since the last
/// call.
pub fn drain_expired(server: &mut Server, own: crate::pubsub::Own<'_>, now: i64) {
    let mut own = own;
    for i in 0..server.dbs.len() {
        let keys = match server.dbs[i].expired_log.as_mut() {
            Some(log) if !log.is_empty() => std::mem::take(log),
            _ => continue,
        };
        for k in keys {
            notify_keyspace_event(
                server,
                EXPIRED,
                "expired",
                &k,
                i,
                crate::pubsub::reown(&mut own),
                now,
            );
        }
    }
}

/// Whether any database has expiry events waiting (cheap check).
#[inline]
pub fn expired_pending(server: &Server) -> bool {
    server.config.notify_keyspace_events & EXPIRED != 0
        && server
            .dbs
            .iter()
            .any(|d| d.expired_log.as_ref().is_some_and(|l| !l.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_like_redis() {
        assert_eq!(flags_to_string(string_to_flags(b"KEAn").unwrap()), "AKE");
        assert_eq!(flags_to_string(string_to_flags(b"Kgx").unwrap()), "gxK");
        assert_eq!(flags_to_string(string_to_flags(b"Em").unwrap()), "Em");
        assert_eq!(flags_to_string(string_to_flags(b"").unwrap()), "");
        assert!(string_to_flags(b"xyz").is_none());
    }
}

/// What a write did to a key, as the database notes it for
/// [`command_events`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The key was created.
    New,
    /// Its value was stored.
    Write,
    /// Its value was modified in place (counted only if the command
    /// changed something, see `Db::settle`).
    Update,
    /// A TTL was set.
    Expire,
    /// Its TTL was removed.
    Persist,
    /// The command removed it (expiry is reported as `expired` instead).
    Deleted,
    /// A read lookup did not find it (`keymiss`, class `m`).
    Miss,
}

/// The event of a value written by `cmd` (`first`: the key is the
/// command's first argument): Redis's per-command `notifyKeyspaceEvent`
/// names. `None`: the command fires nothing for it.
fn write_event(
    cmd: &str,
    first: bool,
    argv: &crate::resp::Argv<'_>,
) -> Option<(u32, &'static str)> {
    let ev = match cmd {
        "set" | "setnx" | "setex" | "psetex" | "getset" | "mset" | "msetnx" => (STRING, "set"),
        "append" => (STRING, "append"),
        "incr" | "decr" | "incrby" | "decrby" => (STRING, "incrby"),
        "incrbyfloat" => (STRING, "incrbyfloat"),
        "setrange" => (STRING, "setrange"),
        "hset" | "hmset" | "hsetnx" => (HASH, "hset"),
        "hincrby" => (HASH, "hincrby"),
        "hincrbyfloat" => (HASH, "hincrbyfloat"),
        "hdel" => (HASH, "hdel"),
        "sadd" => (SET, "sadd"),
        "srem" => (SET, "srem"),
        "spop" => (SET, "spop"),
        "smove" => (SET, if first { "srem" } else { "sadd" }),
        "sinterstore" => (SET, "sinterstore"),
        "sunionstore" => (SET, "sunionstore"),
        "sdiffstore" => (SET, "sdiffstore"),
        "lpush" | "lpushx" => (LIST, "lpush"),
        "rpush" | "rpushx" => (LIST, "rpush"),
        "linsert" => (LIST, "linsert"),
        "lset" => (LIST, "lset"),
        "lpop" | "blpop" => (LIST, "lpop"),
        "rpop" | "brpop" => (LIST, "rpop"),
        "lrem" => (LIST, "lrem"),
        "ltrim" => (LIST, "ltrim"),
        "rpoplpush" | "brpoplpush" => (LIST, if first { "rpop" } else { "lpush" }),
        "lmove" | "blmove" => {
            let side = |i: usize| {
                let left = argv.get(i).is_some_and(|a| a.eq_ignore_ascii_case(b"left"));
                match (i, left) {
                    (3, true) => "lpop",
                    (3, false) => "rpop",
                    (_, true) => "lpush",
                    (_, false) => "rpush",
                }
            };
            (LIST, if first { side(3) } else { side(4) })
        }
        "zadd" => (ZSET, "zadd"),
        "zincrby" => (ZSET, "zincr"),
        "zrem" => (ZSET, "zrem"),
        "zpopmin" | "bzpopmin" => (ZSET, "zpopmin"),
        "zpopmax" | "bzpopmax" => (ZSET, "zpopmax"),
        "zremrangebyscore" => (ZSET, "zrembyscore"),
        "zremrangebyrank" => (ZSET, "zrembyrank"),
        "zremrangebylex" => (ZSET, "zrembylex"),
        "zunionstore" => (ZSET, "zunionstore"),
        "zinterstore" => (ZSET, "zinterstore"),
        "zdiffstore" => (ZSET, "zdiffstore"),
        "zrangestore" => (ZSET, "zrangestore"),
        "sort" => (LIST, "sortstore"),
        "rename" | "renamenx" => (GENERIC, "rename_to"),
        "copy" => (GENERIC, "copy_to"),
        "move" => (GENERIC, "move_to"),
        "restore" => (GENERIC, "restore"),
        _ => return None,
    };
    Some(ev)
}

/// The event of a key `cmd` removed.
fn delete_event(cmd: &str) -> (u32, &'static str) {
    match cmd {
        "rename" | "renamenx" => (GENERIC, "rename_from"),
        "move" => (GENERIC, "move_from"),
        _ => (GENERIC, "del"),
    }
}

/// Whether the changes log must be kept (any class but `expired`).
pub fn changes_wanted(server: &Server) -> bool {
    enabled(server, (ALL & !EXPIRED) | NEW | KEY_MISS)
}

/// Turn the databases' change logs on or off to match the flags.
pub fn sync_change_log(server: &mut Server) {
    let on = changes_wanted(server);
    for db in &mut server.dbs {
        if on {
            db.changes.get_or_insert_with(Vec::new);
        } else {
            db.changes = None;
        }
    }
}

/// Turn what command `cmd` changed into Redis's keyspace events, in the
/// order the changes happened. A key deleted and then created again in
/// the same command (a STORE replacing its destination, RENAME over an
/// existing key) is an overwrite: neither `del` nor `new`.
pub fn command_events(
    server: &mut Server,
    cmd: &str,
    argv: crate::resp::Argv<'_>,
    own: crate::pubsub::Own<'_>,
    now: i64,
) {
    let mut own = own;
    let first = argv.get(1).unwrap_or_default();
    for dbi in 0..server.dbs.len() {
        let mut log = match server.dbs[dbi].changes.as_mut() {
            Some(l) if !l.is_empty() => std::mem::take(l),
            _ => continue,
        };
        // RENAME deletes an existing destination silently and adds it anew
        // (Redis's dbAdd sends `new` at once), then fires its two events.
        if matches!(cmd, "rename" | "renamenx") {
            log.sort_by_key(|(_, c)| *c != Change::New);
            log.retain(|(k, c)| *c != Change::Deleted || k.as_slice() == first);
        }
        for (i, (key, change)) in log.iter().enumerate() {
            // A new aggregate is stored, then filled (`insert_obj` then
            // `update_obj`): one write.
            if *change == Change::Update
                && i >= 2
                && log[i - 1] == (key.clone(), Change::Write)
                && log[i - 2] == (key.clone(), Change::New)
            {
                continue;
            }
            let recreated = |from: usize| {
                log[from..]
                    .iter()
                    .any(|(k, c)| k == key && *c == Change::New)
            };
            let deleted_before = || {
                log[..i]
                    .iter()
                    .any(|(k, c)| k == key && *c == Change::Deleted)
            };
            let ev = match change {
                Change::New if deleted_before() && !matches!(cmd, "rename" | "renamenx") => None,
                Change::New => Some((NEW, "new")),
                Change::Write | Change::Update => write_event(cmd, key.as_slice() == first, &argv),
                Change::Expire => match cmd {
                    "rename" | "renamenx" | "copy" | "move" | "restore" => None,
                    _ => Some((GENERIC, "expire")),
                },
                Change::Persist => match cmd {
                    "persist" | "getex" => Some((GENERIC, "persist")),
                    _ => None,
                },
                Change::Miss => Some((KEY_MISS, "keymiss")),
                Change::Deleted if recreated(i + 1) => None,
                Change::Deleted => Some(delete_event(cmd)),
            };
            if let Some((class, event)) = ev {
                notify_keyspace_event(
                    server,
                    class,
                    event,
                    key,
                    dbi,
                    crate::pubsub::reown(&mut own),
                    now,
                );
            }
        }
        if let Some(l) = server.dbs[dbi].changes.as_mut() {
            if l.is_empty() {
                let mut log = log;
                log.clear();
                *l = log;
            }
        }
    }
}

/// Forget changes noted since the last events (work done on behalf of
/// other clients, e.g. pops that served blocked clients).
pub fn discard_changes(server: &mut Server) {
    for db in &mut server.dbs {
        if let Some(l) = db.changes.as_mut() {
            l.clear();
        }
    }
}
