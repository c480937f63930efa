//! Transactions (Redis's `multi.c`): MULTI EXEC DISCARD WATCH UNWATCH, the
//! per-client command queue, and the per-database WATCH registry.
//!
//! What it owns: [`Watched`] (one per [`crate::db::Db`], Redis's
//! `db->watched_keys`), [`MultiState`] (a client's queue) and the five
//! commands. What it does not: the gate that queues commands instead of
//! running them is in `Server::run` (Redis's `processCommand`), because it
//! sits with the other checks every command passes (NOAUTH, pub/sub
//! context).
//!
//! # WATCH without per-command hooks
//!
//! Redis calls `signalModifiedKey` from every write command. Here the
//! database itself touches its registry on every mutation (store, in-place
//! update, delete, expiry, TTL change, flush), so a command added later
//! breaks WATCH without doing anything. Stores, deletes, TTL changes and
//! flushes touch at once; an in-place update of a value (which may turn
//! out a no-op: SREM of a missing member) touches after the command only
//! if the command counted a change in `server.dirty` (`Db::settle`), the
//! same condition under which Redis calls `signalModifiedKey`.

use std::collections::HashMap;

use crate::cmd::{spec, CommandSpec, Ctx};
use crate::resp::{self, Argv};
use crate::server::{ClientId, Server};

/// Redis's `watchedKey` for one client: `expired` says the key was already
/// logically expired when it was watched (so reclaiming it is no change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Watcher {
    client: ClientId,
    expired: bool,
}

/// The WATCHed keys of one database.
#[derive(Debug, Default)]
pub struct Watched {
    keys: HashMap<Vec<u8>, Vec<Watcher>>,
    /// Clients whose watched key was modified, not yet flagged
    /// (`Server::sync_dirty_cas` moves them to `Client::dirty_cas`). A
    /// client is dropped from a key's list when it is put here, so this
    /// holds at most one entry per watch.
    pub(crate) dirty: Vec<ClientId>,
}

impl Watched {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.keys.keys()
    }

    /// Redis's `touchWatchedKey`: `key` was modified; `exists_after` says
    /// whether it is still stored. A watcher that saw the key already
    /// expired and now sees it reclaimed keeps watching (no logical change).
    pub fn touch(&mut self, key: &[u8], exists_after: bool) {
        let Some(ws) = self.keys.get_mut(key) else {
            return;
        };
        let dirty = &mut self.dirty;
        ws.retain_mut(|w| {
            if w.expired && !exists_after {
                w.expired = false;
                true
            } else {
                dirty.push(w.client);
                false
            }
        });
        if ws.is_empty() {
            self.keys.remove(key);
        }
    }

    /// Add a watch; false if the client already watches `key` here.
    fn add(&mut self, key: &[u8], client: ClientId, expired: bool) -> bool {
        let ws = self.keys.entry(key.to_vec()).or_default();
        if ws.iter().any(|w| w.client == client) {
            return false;
        }
        ws.push(Watcher { client, expired });
        true
    }

    fn remove(&mut self, key: &[u8], client: ClientId) {
        if let Some(ws) = self.keys.get_mut(key) {
            ws.retain(|w| w.client != client);
            if ws.is_empty() {
                self.keys.remove(key);
            }
        }
    }

    /// Whether `client`'s watch of `key` started on an expired key.
    fn watched_expired(&self, key: &[u8], client: ClientId) -> bool {
        self.keys
            .get(key)
            .and_then(|ws| ws.iter().find(|w| w.client == client))
            .is_some_and(|w| w.expired)
    }

    /// Redis's `touchAllWatchedKeysInDb(emptied, replaced_with)` for a
    /// SWAPDB: this database's content is replaced with another's; `here`
    /// and `there` tell whether a key is stored (and expired) in each.
    fn touch_all_swapped(
        &mut self,
        here: impl Fn(&[u8]) -> bool,
        there: impl Fn(&[u8]) -> (bool, bool),
    ) {
        let dirty = &mut self.dirty;
        self.keys.retain(|key, ws| {
            let exists_here = here(key);
            let (exists_there, expired_there) = there(key);
            if !exists_here && !exists_there {
                return true;
            }
            ws.retain_mut(|w| {
                if w.expired {
                    if !exists_there {
                        // Expired key now deleted: no logical change.
                        w.expired = false;
                        return true;
                    }
                    if expired_there {
                        return true;
                    }
                } else if !exists_here && expired_there {
                    // A missing key replaced with an expired one.
                    w.expired = true;
                    return true;
                }
                dirty.push(w.client);
                false
            });
            !ws.is_empty()
        });
    }

    /// Number of keys watched (tests).
    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

/// One queued command: its arguments, copied out of the input.
#[derive(Debug)]
struct Queued {
    buf: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

/// A client between MULTI and EXEC/DISCARD (Redis's `multiState`).
#[derive(Debug, Default)]
pub struct MultiState {
    cmds: Vec<Queued>,
    /// A command was refused while queueing (`CLIENT_DIRTY_EXEC`).
    pub(crate) dirty_exec: bool,
    /// Bytes held by the queue (arguments plus per-command overhead),
    /// bounded by `client-query-buffer-limit`.
    pub(crate) bytes: u64,
    /// A `denyoom` command is queued (Redis's `cmd_flags`): EXEC is
    /// refused under OOM.
    pub(crate) denyoom: bool,
    /// A write (or PUBLISH) is queued: EXEC waits out a WRITE pause.
    pub(crate) writes: bool,
}

/// Per-command overhead counted against the limit (spans and headers).
const QUEUED_OVERHEAD: u64 = 64;

impl MultiState {
    /// Commands queued (CLIENT LIST's `multi=`).
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// Queue `argv`; the queue's size in bytes afterwards.
    pub(crate) fn queue(&mut self, argv: Argv<'_>) -> u64 {
        let mut q = Queued {
            buf: Vec::new(),
            spans: Vec::with_capacity(argv.len()),
        };
        for a in argv.iter() {
            let s = q.buf.len();
            q.buf.extend_from_slice(a);
            q.spans.push((s, q.buf.len()));
        }
        self.bytes += q.buf.len() as u64 + QUEUED_OVERHEAD + 16 * q.spans.len() as u64;
        self.cmds.push(q);
        self.bytes
    }
}

pub static COMMANDS: &[CommandSpec] = &[
    spec!(
        "swapdb",
        3,
        &["write", "fast"],
        0,
        0,
        0,
        "server",
        "4.0.0",
        "Swaps two Redis databases",
        swapdb
    ),
    spec!(
        "multi",
        1,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        0,
        0,
        0,
        "transactions",
        "1.2.0",
        "Start a transaction",
        multi
    ),
    spec!(
        "exec",
        1,
        &["noscript", "loading", "stale", "skip_slowlog"],
        0,
        0,
        0,
        "transactions",
        "1.2.0",
        "Execute all commands issued after MULTI",
        exec
    ),
    spec!(
        "discard",
        1,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        0,
        0,
        0,
        "transactions",
        "2.0.0",
        "Discard all commands issued after MULTI",
        discard
    ),
    spec!(
        "watch",
        -2,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        1,
        -1,
        1,
        "transactions",
        "2.2.0",
        "Monitor changes to keys to determine execution of the MULTI/EXEC block",
        watch
    ),
    spec!(
        "unwatch",
        1,
        &["noscript", "loading", "stale", "fast", "allow_busy"],
        0,
        0,
        0,
        "transactions",
        "2.2.0",
        "Forget about all watched keys",
        unwatch
    ),
];

/// Commands that run at once inside MULTI instead of being queued
/// (Redis's `processCommand` list).
pub(crate) fn runs_inside_multi(name: &str) -> bool {
    matches!(
        name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

fn multi(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(c) = server.clients.get_mut(&ctx.client_id) else {
        return ctx.err("ERR MULTI without a client");
    };
    if c.mstate.is_some() {
        return ctx.err("ERR MULTI calls can not be nested");
    }
    c.mstate = Some(Box::default());
    ctx.resync = true;
    ctx.ok();
}

fn discard(server: &mut Server, ctx: &mut Ctx<'_>) {
    if server
        .clients
        .get(&ctx.client_id)
        .is_none_or(|c| c.mstate.is_none())
    {
        return ctx.err("ERR DISCARD without MULTI");
    }
    discard_transaction(server, ctx.client_id);
    ctx.resync = true;
    ctx.ok();
}

/// Redis's `discardTransaction`: drop the queue and every watch.
pub(crate) fn discard_transaction(server: &mut Server, id: ClientId) {
    if let Some(c) = server.clients.get_mut(&id) {
        c.mstate = None;
    }
    unwatch_all_keys(server, id);
}

fn watch(server: &mut Server, ctx: &mut Ctx<'_>) {
    let id = ctx.client_id;
    let Some(c) = server.clients.get(&id) else {
        return ctx.ok();
    };
    if c.mstate.is_some() {
        return ctx.err("ERR WATCH inside MULTI is not allowed");
    }
    // Redis 7.0: once a watched key changed, more WATCHes are pointless.
    server.sync_dirty_cas();
    if server.clients.get(&id).is_some_and(|c| c.dirty_cas) {
        return ctx.ok();
    }
    let dbi = ctx.db;
    for i in 1..ctx.argc() {
        let key = ctx.arg(i);
        let Some(db) = server.dbs.get_mut(dbi) else {
            break;
        };
        let expired = db.key_is_expired(key, ctx.now);
        if db.watched.add(key, id, expired) {
            if let Some(c) = server.clients.get_mut(&id) {
                c.watched_keys.push((dbi, key.to_vec()));
            }
        }
    }
    ctx.ok();
}

fn unwatch(server: &mut Server, ctx: &mut Ctx<'_>) {
    unwatch_all_keys(server, ctx.client_id);
    if let Some(c) = server.clients.get_mut(&ctx.client_id) {
        c.dirty_cas = false;
    }
    ctx.ok();
}

/// Redis's `unwatchAllKeys` (also clears the CAS flag, as a new WATCH
/// cycle starts clean).
pub(crate) fn unwatch_all_keys(server: &mut Server, id: ClientId) {
    let Some(c) = server.clients.get_mut(&id) else {
        return;
    };
    let keys = std::mem::take(&mut c.watched_keys);
    c.dirty_cas = false;
    for (dbi, key) in keys {
        if let Some(db) = server.dbs.get_mut(dbi) {
            db.watched.remove(&key, id);
            db.watched.dirty.retain(|&d| d != id);
        }
    }
}

/// Redis's `isWatchedKeyExpired`: a key watched while alive has expired
/// since (reclaimed or not), which breaks the transaction too.
fn watched_key_expired(server: &Server, id: ClientId, now: i64) -> bool {
    let Some(c) = server.clients.get(&id) else {
        return false;
    };
    c.watched_keys.iter().any(|(dbi, key)| {
        server
            .dbs
            .get(*dbi)
            .is_some_and(|db| !db.watched.watched_expired(key, id) && db.key_is_expired(key, now))
    })
}

fn exec(server: &mut Server, ctx: &mut Ctx<'_>) {
    let id = ctx.client_id;
    let Some(mstate) = server.clients.get_mut(&id).and_then(|c| c.mstate.take()) else {
        return ctx.err("ERR EXEC without MULTI");
    };
    ctx.resync = true;
    server.sync_dirty_cas();
    let cas = watched_key_expired(server, id, ctx.now)
        || server.clients.get(&id).is_some_and(|c| c.dirty_cas);
    unwatch_all_keys(server, id);
    if mstate.dirty_exec {
        return ctx.err("EXECABORT Transaction discarded because of previous errors.");
    }
    if cas {
        resp::write_null_array(ctx.out, ctx.proto);
        return;
    }
    ctx.array(mstate.cmds.len());
    // While it runs the client is still in MULTI for CLIENT LIST (flag
    // `x`, `multi=N`), as in Redis.
    if let Some(c) = server.clients.get_mut(&id) {
        c.exec_view = Some((mstate.len() as i64, mstate.bytes));
    }
    for q in &mstate.cmds {
        let argv = Argv::new(&q.buf, &q.spans);
        server.call_queued(ctx, argv);
        if ctx.close {
            break;
        }
    }
    if let Some(c) = server.clients.get_mut(&id) {
        c.exec_view = None;
    }
}

/// SWAPDB: the two databases trade contents; watchers stay with the
/// index and are touched as Redis's `touchAllWatchedKeysInDb` does.
fn swapdb(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(a) = crate::util::string2ll(ctx.arg(1)) else {
        return ctx.err("ERR invalid first DB index");
    };
    let Some(b) = crate::util::string2ll(ctx.arg(2)) else {
        return ctx.err("ERR invalid second DB index");
    };
    let n = server.dbs.len() as i64;
    if !(0..n).contains(&a) || !(0..n).contains(&b) {
        return ctx.err("ERR DB index is out of range");
    }
    let (a, b) = (a as usize, b as usize);
    if a != b {
        swap_dbs(server, a, b, ctx.now);
    }
    // Redis counts (and propagates) SWAPDB a a too.
    server.dirty += 1;
    ctx.ok();
}

/// Swap databases `a` and `b`, keeping each index's WATCH registry.
pub(crate) fn swap_dbs(server: &mut Server, a: usize, b: usize, now: i64) {
    for (x, y) in [(a, b), (b, a)] {
        let mut w = std::mem::take(&mut server.dbs[x].watched);
        {
            let (dx, dy) = (&server.dbs[x], &server.dbs[y]);
            w.touch_all_swapped(
                |k| dx.contains_stored(k),
                |k| (dy.contains_stored(k), dy.key_is_expired(k, now)),
            );
        }
        server.dbs[x].watched = w;
    }
    server.dbs.swap(a, b);
    let wa = std::mem::take(&mut server.dbs[a].watched);
    let wb = std::mem::take(&mut server.dbs[b].watched);
    server.dbs[a].watched = wb;
    server.dbs[b].watched = wa;
    server.sync_dirty_cas();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_marks_watchers_dirty_once() {
        let mut w = Watched::default();
        assert!(w.add(b"k", 1, false));
        assert!(!w.add(b"k", 1, false));
        assert!(w.add(b"k", 2, false));
        w.touch(b"other", true);
        assert!(w.dirty.is_empty());
        w.touch(b"k", true);
        assert_eq!(w.dirty, vec![1, 2]);
        w.touch(b"k", true);
        assert_eq!(w.dirty, vec![1, 2]);
        assert!(w.is_empty());
    }

    #[test]
    fn reclaiming_a_key_watched_expired_is_no_change() {
        let mut w = Watched::default();
        w.add(b"k", 1, true);
        w.touch(b"k", false);
        assert!(w.dirty.is_empty());
        assert!(!w.watched_expired(b"k", 1));
        // Created again afterwards: a real change.
        w.touch(b"k", true);
        assert_eq!(w.dirty, vec![1]);
    }
}
