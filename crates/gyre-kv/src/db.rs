//! The keyspace: one [`Db`] per logical database (`SELECT n`).
//!
//! Values are strings (inline in the node when short) or typed
//! aggregates ([`crate::object::Object`], in the node's value slot). Commands on
//! aggregates go through a [`Probe`] and [`Db::update_obj`], which keeps
//! `used_memory` in step and deletes an aggregate left empty (Redis
//! deletes empty hashes, lists, sets, sorted sets).
//!
//! This file owns lookups, stores and removal (Redis's `db.c` core); the
//! pieces around it are apart, named after Redis's: [`table`] (the
//! bucket array, `dict.c`'s role), [`node`] (what a key holds),
//! [`expire`] (TTLs, lazy and active expiry), [`lazyfree`], [`evict`]
//! (access clocks and eviction samples), [`keys`] (RANDOMKEY, KEYS, SCAN,
//! RENAME, COPY, MOVE) and [`snapshot`] (the forkless save's sweep).
//!
//! # Layout (why it looks like this)
//!
//! Reclaiming an expired key is memory-latency bound: every cache miss and
//! every allocator call per key shows directly in how fast the active
//! expire cycle empties a keyspace. So a key lives in **one** place:
//!
//! * `nodes: Vec<Node>` — every key, dense (48 bytes each). A node holds
//!   32 bits of the key's hash, the next node of its bucket, and one
//!   40-byte slot with the key, the value and one word: the access clock,
//!   or for a key with a TTL its slot in `ttl` (where the TTL and the
//!   clock are) ([`node::Slot`]). A string whose key and value fit 33
//!   bytes together is inline, a longer one is one allocation of value
//!   and key; an aggregate's 24-byte object sits beside its key when the
//!   key is up to 10 bytes. A typical key costs no allocation at all,
//!   and a small aggregate exactly one. The dense vector is also what RANDOMKEY
//!   samples in O(1) and what SCAN walks from the top down.
//! * `table` — a power-of-two array of `u32` bucket heads (keyed
//!   SipHash-1-2, random per database, so no one can aim collisions: see
//!   [`crate::hash`]), chained through `Node::next`: 4-8 bytes per key
//!   (see [`table`]). Removal and fix-ups go by the stored hash, never the
//!   key bytes.
//! * `ttl: Vec<TtlRef>` — keys with a TTL as `(expire, node index)`. The
//!   active expire cycle samples random slots here in O(1) whatever the
//!   keyspace size, and a live sample is judged from the slot alone (one
//!   memory access, no node, no table).
//!
//! Removal is `swap_remove` in `nodes` (and `ttl`) plus re-pointing the
//! moved node's chain link and TTL slot: O(1), no key hashing, no frees for
//! inline keys and values. The vectors and the table keep their capacity
//! when keys go: giving back the tables of a million keys stalls the loop
//! for tens of ms (unmapping and relinking), which would be a latency
//! spike in the middle of an expiry wave; an incremental or background
//! shrink is future work.
//!
//! Expiry is lazy (every lookup checks) plus active ([`Db::expire_sample`],
//! driven by `Server`'s expire cycle).
//!
//! Freeing a big aggregate (DEL, expiry, overwrite) is incremental, like
//! Redis's lazyfree but on the loop instead of a thread: an aggregate of
//! more than [`LAZYFREE_MIN`] elements leaves the keyspace at once (and
//! `used_memory` with it) and is buried in a graveyard that
//! [`Db::free_some`] empties a bounded number of elements at a time (from
//! serverCron and before each wait), so no single step frees millions of
//! allocations.

use crate::glob::stringmatch;
use crate::hash::KeyHasher;
use crate::notify::Change;
use crate::object::{Kind, Object};
use crate::util::Rng;

mod bulk;
mod evict;
mod expire;
mod keys;
mod lazyfree;
mod node;
mod snapshot;
mod table;

pub use bulk::Appended;
use expire::{expire_of, is_expired};
pub use node::Ref;
use node::{New, Node, Slot, TtlRef, Value};
use table::{map_key, Table};

/// Aggregates with more elements than this are freed incrementally.
pub const LAZYFREE_MIN: usize = 1024;

/// Estimated per-key overhead in bytes, for the `used_memory` estimate:
/// the 48-byte node (access clock, key and short values included) and its
/// bucket (4 bytes at a load between 1/2 and 1: about 6 on average); a
/// TTL slot adds 16 (not counted). What a key's allocation adds is counted
/// as malloc's chunk for it (see [`node::Slot::heap_mem`]), so the
/// estimate follows the process's RSS per key.
pub const ENTRY_OVERHEAD: u64 = 54;
const NONE: u32 = u32::MAX;
const NO_EXPIRE: i64 = -1;

/// Where a key is, found once for a read-modify-write (SET): its hash and
/// its live node, if any. Valid until the database changes.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    hash: u32,
    index: Option<usize>,
}

impl Probe {
    /// The key exists (and is live).
    pub fn found(&self) -> bool {
        self.index.is_some()
    }
}

/// A looked-up key: its value and TTL.
#[derive(Debug)]
pub struct Entry<'a> {
    pub value: Ref<'a>,
    expire: i64,
}

impl<'a> Entry<'a> {
    /// Absolute expire time in ms, if any.
    pub fn expire(&self) -> Option<i64> {
        (self.expire >= 0).then_some(self.expire)
    }

    /// The string value; `None` for an aggregate.
    pub fn str(&self) -> Option<&'a [u8]> {
        match self.value {
            Ref::Str(s) => Some(s),
            Ref::Obj(_) => None,
        }
    }

    pub fn kind(&self) -> Kind {
        self.value.kind()
    }
}

/// A value taken out of one key to be stored under another (COPY, MOVE).
#[derive(Debug)]
pub struct Copied(Value);

/// Counters kept per database and summed for INFO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbStats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub expired_keys: u64,
}

/// Result of sampling keys with a TTL (one loop of the active expire cycle).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleOutcome {
    pub sampled: u64,
    pub expired: u64,
    pub ttl_sum: i64,
    pub ttl_samples: u64,
}

#[derive(Debug)]
pub struct Db {
    table: Table,
    nodes: Vec<Node>,
    ttl: Vec<TtlRef>,
    hasher: KeyHasher,
    /// All ones; tests clear bits to force full-hash collisions.
    hash_mask: u64,
    /// Running average TTL of sampled keys (Redis's `avg_ttl`), in ms.
    pub avg_ttl: i64,
    pub stats: DbStats,
    mem: u64,
    rng: Rng,
    /// A background save's sweep (see [`snapshot`]).
    snap: Option<Box<snapshot::Sweep>>,
    /// WATCHed keys of this database (Redis's `db->watched_keys`): every
    /// write below touches it, so every command gets WATCH for free.
    pub(crate) watched: crate::multi::Watched,
    /// Keys removed by expiry since the server last drained them, kept
    /// only while `expired` keyspace events are enabled.
    pub(crate) expired_log: Option<Vec<Vec<u8>>>,
    /// Keys removed by expiry (false) or eviction (true) since the
    /// server last propagated them as DEL, kept only while the AOF is on
    /// ([`crate::aof::propagate`]).
    pub(crate) deleted_log: Option<Vec<(Vec<u8>, bool)>>,
    /// What the running command changed, in order, kept only while
    /// keyspace events other than `expired` are enabled
    /// ([`crate::notify`] turns it into events after the command).
    pub(crate) changes: Option<Vec<(Vec<u8>, Change)>>,
    /// A removal in progress is an expiry (not a command's change).
    expiring: bool,
    /// Watched keys updated in place by the running command, touched by
    /// [`Db::settle`] if the command changed anything.
    soft_touched: Vec<Vec<u8>>,
    /// How lookups update `access` (set from `maxmemory-policy`).
    pub(crate) access_mode: crate::evict::AccessMode,
    /// Big aggregates removed from the keyspace, freed by `free_some`.
    graveyard: Vec<Object>,
    /// Aggregates freed from the graveyard (INFO lazyfreed_objects).
    lazyfreed: u64,
}

fn entry_mem(slot: &Slot) -> u64 {
    ENTRY_OVERHEAD + slot.heap_mem()
}

impl Db {
    pub fn new(seed: u64) -> Db {
        Db {
            table: Table::default(),
            nodes: Vec::new(),
            ttl: Vec::new(),
            hasher: KeyHasher::random(),
            hash_mask: u64::MAX,
            avg_ttl: 0,
            stats: DbStats::default(),
            mem: 0,
            rng: Rng::new(seed),
            snap: None,
            watched: crate::multi::Watched::default(),
            expired_log: None,
            deleted_log: None,
            changes: None,
            expiring: false,
            soft_touched: Vec::new(),
            access_mode: crate::evict::AccessMode::default(),
            graveyard: Vec::new(),
            lazyfreed: 0,
        }
    }

    /// Keys stored, including expired ones not yet reclaimed (DBSIZE).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Keys with a TTL.
    pub fn expires_len(&self) -> usize {
        self.ttl.len()
    }

    /// Estimated bytes used by this database's data.
    pub fn used_memory(&self) -> u64 {
        self.mem
    }

    /// The 32 bits of `key`'s keyed hash the keyspace keeps.
    #[inline(always)]
    fn hash(&self, key: &[u8]) -> u32 {
        map_key(self.hasher.hash(key) & self.hash_mask)
    }

    /// Remove node `i` everywhere. O(1): the last node moves into its slot
    /// and its map entry (by stored hash) and TTL slot are re-pointed.
    fn remove_at(&mut self, i: usize) -> Node {
        self.cow_remove(i);
        self.unlink_chain(i);
        let ts = self.nodes[i].ttl_slot();
        if ts != NONE {
            self.unlink_ttl(ts);
        }
        let node = self.nodes.swap_remove(i);
        if self.noting() {
            let change = if self.expiring {
                None
            } else {
                Some(Change::Deleted)
            };
            self.note(node.key(), false, change);
        }
        let from = self.nodes.len() as u32;
        if let Some(moved) = self.nodes.get(i) {
            let (hash, ts) = (moved.hash, moved.ttl_slot());
            self.repoint_chain(hash, from, i as u32);
            if let Some(t) = self.ttl.get_mut(ts as usize) {
                t.node = i as u32;
            }
        }
        self.mem = self.mem.saturating_sub(entry_mem(&node.slot));
        node
    }

    /// Whether a change must be noted (WATCH or keyspace events).
    #[inline]
    fn noting(&self) -> bool {
        !self.watched.is_empty() || self.changes.is_some()
    }

    /// A write to `key`: touch its watchers, log the change for keyspace
    /// events.
    fn note(&mut self, key: &[u8], exists_after: bool, change: Option<Change>) {
        if !self.watched.is_empty() {
            match change {
                Some(Change::New) => {}
                // An in-place update may turn out to be a no-op (SREM of a
                // missing member): it counts once the command is known to
                // have changed something ([`Db::settle`]).
                Some(Change::Update) => self.soft_touched.push(key.to_vec()),
                _ => self.watched.touch(key, exists_after),
            }
        }
        if let (Some(log), Some(c)) = (&mut self.changes, change) {
            log.push((key.to_vec(), c));
        }
    }

    /// After a command: its in-place updates count (touch their watchers,
    /// keep their events) when it `changed` something (Redis signals a
    /// modified key exactly when it counts a change in `server.dirty`),
    /// and are forgotten otherwise.
    pub(crate) fn settle(&mut self, changed: bool) {
        if !self.soft_touched.is_empty() {
            let keys = std::mem::take(&mut self.soft_touched);
            if changed {
                for k in &keys {
                    let exists = self.find(k).is_some();
                    self.watched.touch(k, exists);
                }
            }
        }
        if !changed {
            if let Some(log) = &mut self.changes {
                log.retain(|(_, c)| *c != Change::Update);
            }
        }
    }

    /// Note node `i`'s key for an `expired` keyspace event.
    fn log_expired(&mut self, i: usize) {
        if let Some(log) = &mut self.expired_log {
            log.push(self.nodes[i].key().to_vec());
        }
        if let Some(log) = &mut self.deleted_log {
            log.push((self.nodes[i].key().to_vec(), false));
        }
    }

    /// Number of keys WATCHed in this database.
    pub fn watched_len(&self) -> usize {
        self.watched.len()
    }

    /// Bytes a stored key costs, expired or not (MEMORY USAGE, which
    /// Redis answers from `dictFind` too): its node and what its value owns.
    pub fn key_memory(&self, key: &[u8]) -> Option<u64> {
        let i = self.find(key)?;
        Some(std::mem::size_of::<Node>() as u64 + entry_mem(&self.nodes[i].slot))
    }

    /// A key is stored, expired or not (Redis's `dictFind(db->dict)`).
    pub fn contains_stored(&self, key: &[u8]) -> bool {
        self.find(key).is_some()
    }

    /// Live node index of `key` after lazy expiry.
    fn find_live(&mut self, key: &[u8], now: i64) -> Option<usize> {
        self.access_mode.now_ms = now;
        let i = self.find(key)?;
        if self.expire_at_if_needed(i, now) {
            None
        } else {
            self.touch_access(i, now);
            Some(i)
        }
    }

    fn entry_at(&self, i: usize) -> Entry<'_> {
        let n = &self.nodes[i];
        Entry {
            value: n.value(),
            expire: expire_of(&self.ttl, n),
        }
    }

    /// Read lookup: lazy expiry, counts keyspace hits/misses.
    pub fn lookup_read(&mut self, key: &[u8], now: i64) -> Option<Entry<'_>> {
        match self.find_live(key, now) {
            Some(i) => {
                self.stats.keyspace_hits += 1;
                Some(self.entry_at(i))
            }
            None => {
                self.stats.keyspace_misses += 1;
                self.note_miss(key);
                None
            }
        }
    }

    /// A read lookup missed: a `keymiss` event when they are on.
    fn note_miss(&mut self, key: &[u8]) {
        if let Some(log) = &mut self.changes {
            log.push((key.to_vec(), Change::Miss));
        }
    }

    /// [`Db::count_read`] naming the key (a miss is a `keymiss` event).
    pub fn count_read_key(&mut self, key: &[u8], hit: bool) {
        self.count_read(hit);
        if !hit {
            self.note_miss(key);
        }
    }

    /// Write lookup: lazy expiry, no hit/miss accounting.
    pub fn lookup_write(&mut self, key: &[u8], now: i64) -> Option<Entry<'_>> {
        let i = self.find_live(key, now)?;
        Some(self.entry_at(i))
    }

    /// True if a live key exists (write lookup).
    pub fn exists(&mut self, key: &[u8], now: i64) -> bool {
        self.find_live(key, now).is_some()
    }

    /// Modify a live string's value in place (keeps its TTL). `None` if
    /// the key does not exist or holds an aggregate.
    pub fn update_value<R>(
        &mut self,
        key: &[u8],
        now: i64,
        f: impl FnOnce(&mut Vec<u8>) -> R,
    ) -> Option<R> {
        let i = self.find_live(key, now)?;
        self.cow(i);
        if self.noting() {
            self.note(key, true, Some(Change::Update));
        }
        let v = &mut self.nodes[i].slot;
        let before = v.heap_mem();
        let r = v.update_str(f);
        let after = v.heap_mem();
        self.mem = self.mem.saturating_sub(before) + after;
        r
    }

    /// Store `value` under `key`. Without `keep_ttl` any TTL is removed
    /// (SET semantics). Does not check expiry: callers did a lookup.
    pub fn set(&mut self, key: &[u8], value: Vec<u8>, keep_ttl: bool) {
        let h = self.hash(key);
        let p = Probe {
            hash: h,
            index: self.find_hashed(h, key),
        };
        self.store(p, key, New::Owned(Value::Str(value)), keep_ttl);
    }

    /// Find `key` once for a write: hash, lookup and lazy expiry (an
    /// expired key is reclaimed and counted, as a write lookup does). No
    /// hit/miss accounting (see [`Db::count_read`]).
    pub fn probe(&mut self, key: &[u8], now: i64) -> Probe {
        self.access_mode.now_ms = now;
        let hash = self.hash(key);
        let mut index = self.find_hashed(hash, key);
        if let Some(i) = index {
            if self.expire_at_if_needed(i, now) {
                index = None;
            } else {
                self.touch_access(i, now);
            }
        }
        Probe { hash, index }
    }

    /// The value of a probed key.
    pub fn probed_ref(&self, p: &Probe) -> Option<Ref<'_>> {
        p.index.map(|i| self.nodes[i].value())
    }

    /// Store a new aggregate under a probed key that does not exist.
    pub fn insert_obj(&mut self, p: Probe, key: &[u8], obj: Object) -> Probe {
        self.store(p, key, New::Owned(Value::Obj(obj)), false)
    }

    /// Run `f` on a probed aggregate, then account its new size and delete
    /// the key if `f` left it empty. `None` if the key is missing or a
    /// string. The probe is stale afterwards.
    pub fn update_obj<R>(&mut self, p: &Probe, f: impl FnOnce(&mut Object) -> R) -> Option<R> {
        let i = p.index?;
        if self.nodes[i].slot.is_obj() {
            self.cow(i);
        }
        let before = self.nodes[i].slot.heap_mem();
        let o = self.nodes[i].slot.obj_mut()?;
        let r = f(o);
        let empty = o.is_empty();
        let after = self.nodes[i].slot.heap_mem();
        self.mem = self.mem.saturating_sub(before) + after;
        if self.noting() {
            let key = self.nodes[i].key().to_vec();
            self.note(&key, true, Some(Change::Update));
        }
        if empty {
            self.delete_at(i);
        }
        Some(r)
    }

    /// The aggregate of a probed key, read-only.
    pub fn probed_obj(&self, p: &Probe) -> Option<&Object> {
        match self.probed_ref(p)? {
            Ref::Obj(o) => Some(o),
            Ref::Str(_) => None,
        }
    }

    /// Count a read lookup's hit or miss (INFO keyspace_hits/misses) for a
    /// command that read through [`Db::probe`].
    pub fn count_read(&mut self, hit: bool) {
        if hit {
            self.stats.keyspace_hits += 1;
        } else {
            self.stats.keyspace_misses += 1;
        }
    }

    /// [`Db::set`] at a place [`Db::probe`] found for `key` (nothing
    /// changed the database since), from a borrowed value; returns the
    /// probe of the stored key.
    pub fn set_probed(&mut self, p: Probe, key: &[u8], value: &[u8], keep_ttl: bool) -> Probe {
        self.store(p, key, New::Bytes(value), keep_ttl)
    }

    /// Store a new string under a probed key that does not exist, taking
    /// the bytes (the RDB loader: no copy of a value that goes to the heap).
    pub fn insert_str(&mut self, p: Probe, key: &[u8], value: Vec<u8>) -> Probe {
        self.store(p, key, New::Owned(Value::Str(value)), false)
    }

    fn store(&mut self, p: Probe, key: &[u8], value: New<'_>, keep_ttl: bool) -> Probe {
        if self.noting() {
            if p.index.is_none() {
                self.note(key, true, Some(Change::New));
            }
            self.note(key, true, Some(Change::Write));
        }
        if let Some(i) = p.index {
            self.cow(i);
            let slot = &mut self.nodes[i].slot;
            let before = slot.heap_mem();
            let old = slot.replace_value(value);
            self.mem = self.mem.saturating_sub(before) + slot.heap_mem();
            if let Some(o) = old {
                self.bury_obj(o);
            }
            // The TTL test inline: most keys have none.
            if !keep_ttl && self.nodes[i].ttl_slot() != NONE {
                self.remove_expire_at(i);
            }
            return p;
        }
        let h = p.hash;
        let idx = self.nodes.len() as u32;
        self.cow_new(idx as usize);
        let next = self.link_new(h);
        let now_ms = self.access_mode.now_ms;
        let slot = Slot::new(key, value, self.access_mode.new_key(now_ms));
        self.mem += entry_mem(&slot);
        self.nodes.push(Node {
            hash: h,
            next,
            slot,
        });
        Probe {
            hash: h,
            index: Some(idx as usize),
        }
    }

    /// Remove a key unconditionally; true if it was stored.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        match self.find(key) {
            Some(i) => {
                self.delete_at(i);
                true
            }
            None => false,
        }
    }

    /// Delete a live key (DEL): true if something was deleted.
    pub fn delete(&mut self, key: &[u8], now: i64) -> bool {
        match self.find(key) {
            Some(i) if self.expire_at_if_needed(i, now) => false,
            Some(i) => {
                self.delete_at(i);
                true
            }
            None => false,
        }
    }

    /// FLUSHDB: drop everything (counters are kept).
    pub fn flush(&mut self) -> usize {
        self.cow_all();
        if !self.watched.is_empty() {
            let stored: Vec<Vec<u8>> = self
                .watched
                .keys()
                .filter(|k| self.find(k).is_some())
                .cloned()
                .collect();
            for k in stored {
                self.watched.touch(&k, false);
            }
        }
        let n = self.nodes.len();
        self.table_clear();
        self.nodes = Vec::new();
        self.ttl = Vec::new();
        self.avg_ttl = 0;
        self.mem = 0;
        n
    }

    /// Check internal index invariants (tests).
    pub fn check_invariants(&self) -> bool {
        let nodes_ok = self.nodes.iter().enumerate().all(|(i, n)| {
            let key = n.key();
            n.hash == self.hash(key)
                && self.find(key) == Some(i)
                && match n.ttl_slot() {
                    NONE => true,
                    ts => self
                        .ttl
                        .get(ts as usize)
                        .is_some_and(|t| t.node as usize == i && t.expire >= 0),
                }
        });
        let ttl_ok = self.ttl.iter().enumerate().all(|(s, t)| {
            t.expire >= 0
                && self
                    .nodes
                    .get(t.node as usize)
                    .is_some_and(|n| n.ttl_slot() as usize == s)
        });
        nodes_ok && ttl_ok && self.table_ok()
    }
}

#[cfg(test)]
mod tests;
