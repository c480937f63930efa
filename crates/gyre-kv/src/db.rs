//! The keyspace: one [`Db`] per logical database (`SELECT n`).
//!
//! Values are strings (inline in the node when short) or typed
//! aggregates ([`crate::object::Object`], in the node's value slot). Commands on
//! aggregates go through a [`Probe`] and [`Db::update_obj`], which keeps
//! `used_memory` in step and deletes an aggregate left empty (Redis
//! deletes empty hashes, lists, sets, sorted sets).
//!
//! # Layout (why it looks like this)
//!
//! Reclaiming an expired key is memory-latency bound: every cache miss and
//! every allocator call per key shows directly in how fast the active
//! expire cycle empties a keyspace. So a key lives in **one** place:
//!
//! * `nodes: Vec<Node>` — every key, dense (72 bytes each). A node holds
//!   the key's hash, its slot in `ttl` (where its TTL is), and the key and
//!   value bytes, both inline when short (keys up to 22 bytes, values up
//!   to 30; an aggregate's 24-byte object in the value's place): a typical
//!   key costs no allocation at all. The dense vector is also what RANDOMKEY samples
//!   in O(1) and what SCAN walks from the top down.
//! * `map: HashMap<u32, u32>` — 32 bits of the key's 64-bit hash (keyed
//!   SipHash-1-2, random per database, so no one can aim collisions: see
//!   [`crate::hash`]; the bits are [`map_key`]'s) to its node index.
//!   The map never touches key bytes: removal and fix-ups go by the stored
//!   hash. Keys whose map keys collide chain through `Node::next` (and are
//!   resolved by comparing key bytes).
//! * `ttl: Vec<TtlRef>` — keys with a TTL as `(expire, node index)`. The
//!   active expire cycle samples random slots here in O(1) whatever the
//!   keyspace size, and a live sample is judged from the slot alone (one
//!   memory access, no node, no map).
//!
//! Removal is `swap_remove` in `nodes` (and `ttl`) plus re-pointing the
//! moved node's map entry and TTL slot: O(1), no key hashing, no frees for
//! inline keys and values. The vectors and the map keep their capacity
//! when keys go (as before): giving back the tables of a million keys
//! stalls the loop for tens of ms (rehash plus unmapping), which would be
//! a latency spike in the middle of an expiry wave; an incremental or
//! background shrink is future work.
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

use std::collections::hash_map::{Entry as MapEntry, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use crate::glob::stringmatch;
use crate::hash::KeyHasher;
use crate::notify::Change;
use crate::object::{Kind, Object};
use crate::util::Rng;

mod snapshot;
/// Aggregates with more elements than this are freed incrementally.
pub const LAZYFREE_MIN: usize = 1024;

/// Estimated per-key overhead in bytes, for the `used_memory` estimate:
/// the 72-byte node, its map bucket (9 bytes at about 57% load) and its
/// access clock (4); a TTL slot adds 16 (not counted). Measured: 300k keys
/// of small sets take 139 bytes of RSS each, this plus the key and the
/// 40-byte intset gives 140.
pub const ENTRY_OVERHEAD: u64 = 92;
const NONE: u32 = u32::MAX;
const NO_EXPIRE: i64 = -1;
/// Keys up to this many bytes are stored inside the node.
const KEY_INLINE: usize = 22;
/// Values up to this many bytes are stored inside the node.
const VAL_INLINE: usize = 30;

/// Immutable key bytes, inline when short.
#[derive(Debug)]
enum KeyBytes {
    Inline(u8, [u8; KEY_INLINE]),
    Heap(Box<[u8]>),
}

impl KeyBytes {
    fn new(b: &[u8]) -> KeyBytes {
        if b.len() <= KEY_INLINE {
            let mut buf = [0; KEY_INLINE];
            buf[..b.len()].copy_from_slice(b);
            KeyBytes::Inline(b.len() as u8, buf)
        } else {
            KeyBytes::Heap(b.into())
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            KeyBytes::Inline(n, buf) => &buf[..usize::from(*n)],
            KeyBytes::Heap(b) => b,
        }
    }
}

/// A value: a string, inline when short, or an aggregate.
#[derive(Clone, Debug)]
enum Value {
    Inline(u8, [u8; VAL_INLINE]),
    Heap(Vec<u8>),
    Obj(Object),
}

impl Value {
    fn from_slice(v: &[u8]) -> Value {
        if v.len() <= VAL_INLINE {
            let mut buf = [0; VAL_INLINE];
            buf[..v.len()].copy_from_slice(v);
            Value::Inline(v.len() as u8, buf)
        } else {
            Value::Heap(v.to_vec())
        }
    }

    fn new(v: Vec<u8>) -> Value {
        if v.len() <= VAL_INLINE {
            let mut buf = [0; VAL_INLINE];
            buf[..v.len()].copy_from_slice(&v);
            Value::Inline(v.len() as u8, buf)
        } else {
            Value::Heap(v)
        }
    }

    fn as_ref(&self) -> Ref<'_> {
        match self {
            Value::Inline(n, buf) => Ref::Str(&buf[..usize::from(*n)]),
            Value::Heap(v) => Ref::Str(v),
            Value::Obj(o) => Ref::Obj(o),
        }
    }

    /// Bytes counted in `used_memory` beyond the node.
    fn mem(&self) -> u64 {
        match self {
            Value::Inline(n, _) => u64::from(*n),
            Value::Heap(v) => v.len() as u64,
            Value::Obj(o) => o.mem(),
        }
    }

    /// Run `f` on a string value as a `Vec` (a heap value in place, so
    /// APPEND stays amortized O(1)); a result that fits goes back inline.
    /// `None` for an aggregate.
    fn update<R>(&mut self, f: impl FnOnce(&mut Vec<u8>) -> R) -> Option<R> {
        let mut v = match self {
            Value::Heap(v) => std::mem::take(v),
            Value::Inline(n, buf) => buf[..usize::from(*n)].to_vec(),
            Value::Obj(_) => return None,
        };
        let r = f(&mut v);
        *self = Value::new(v);
        Some(r)
    }
}

/// A borrowed value.
#[derive(Clone, Copy, Debug)]
pub enum Ref<'a> {
    Str(&'a [u8]),
    Obj(&'a Object),
}

/// One key (72 bytes). Its TTL is kept only in its `ttl` slot (Redis
/// keeps expires in a dict apart too): a key without one pays nothing for
/// it, and a lookup reads the slot only when `ttl_slot` says there is one.
#[derive(Debug)]
struct Node {
    hash: u64,
    /// Next node with the same map key (`NONE`: end of chain, see
    /// [`map_key`]).
    next: u32,
    /// Index in `ttl`, `NONE` without a TTL.
    ttl_slot: u32,
    key: KeyBytes,
    value: Value,
}

/// A key with a TTL, as the expire cycle samples it.
#[derive(Clone, Copy, Debug)]
struct TtlRef {
    expire: i64,
    node: u32,
}

/// The map's keys already are keyed hashes: use them as they are.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    /// A [`map_key`]: both halves of the table's hash from its bits
    /// (hashbrown takes the bucket from the low bits, the control tag from
    /// the top seven).
    fn write_u32(&mut self, n: u32) {
        self.0 = (u64::from(n) << 32) | u64::from(n);
    }
}

/// Map key of a 64-bit key hash to its chain's head node. The map keys on
/// 32 bits of the hash (8-byte entries instead of 16: about 14 bytes less
/// per key at the table's load): keys whose hashes share them chain
/// through `Node::next` like full-hash collisions, and lookups compare key
/// bytes anyway.
#[inline(always)]
fn map_key(h: u64) -> u32 {
    (h ^ (h >> 32)) as u32
}

type IdMap = HashMap<u32, u32, BuildHasherDefault<IdHasher>>;

/// Where a key is, found once for a read-modify-write (SET): its hash and
/// its live node, if any. Valid until the database changes.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    hash: u64,
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
    map: IdMap,
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
    /// Per-key access clock, parallel to `nodes` (Redis's `robj->lru`):
    /// the LRU clock in seconds, or under an LFU policy minutes and a
    /// logarithmic counter (see [`crate::evict`]). Kept beside the nodes
    /// rather than in them so a node stays one cache-line-sized record.
    access: Vec<u32>,
    /// How lookups update `access` (set from `maxmemory-policy`).
    pub(crate) access_mode: crate::evict::AccessMode,
    /// Big aggregates removed from the keyspace, freed by `free_some`.
    graveyard: Vec<Object>,
}

/// Node `n`'s absolute expire time in ms, `NO_EXPIRE` without a TTL.
#[inline(always)]
fn expire_of(ttl: &[TtlRef], n: &Node) -> i64 {
    if n.ttl_slot == NONE {
        return NO_EXPIRE;
    }
    ttl.get(n.ttl_slot as usize).map_or(NO_EXPIRE, |t| t.expire)
}

/// A key is expired when `now > expire` (Redis's `keyIsExpired`).
fn is_expired(expire: i64, now: i64) -> bool {
    expire >= 0 && now > expire
}

fn entry_mem(key: &[u8], value: &Value) -> u64 {
    ENTRY_OVERHEAD + key.len() as u64 + value.mem()
}

/// Keys the expire cycle samples (and warms) at once.
const SAMPLE_BATCH: usize = 32;

impl Db {
    pub fn new(seed: u64) -> Db {
        Db {
            map: IdMap::default(),
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
            access: Vec::new(),
            access_mode: crate::evict::AccessMode::default(),
            graveyard: Vec::new(),
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

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash(key) & self.hash_mask
    }

    /// Node index of `key` (hash already computed). Inline: every lookup
    /// runs it (a plain `#[inline]` stopped being taken once the map keyed
    /// on 32 bits: 18 instructions more per GET/SET under callgrind).
    #[inline(always)]
    fn find_hashed(&self, h: u64, key: &[u8]) -> Option<usize> {
        let mut i = *self.map.get(&map_key(h))?;
        loop {
            let n = self.nodes.get(i as usize)?;
            if n.key.as_slice() == key {
                return Some(i as usize);
            }
            if n.next == NONE {
                return None;
            }
            i = n.next;
        }
    }

    fn find(&self, key: &[u8]) -> Option<usize> {
        self.find_hashed(self.hash(key), key)
    }

    /// Re-point whatever referenced node `from` (its map entry or its
    /// predecessor in a collision chain) to `to`.
    fn repoint_chain(&mut self, hash: u64, from: u32, to: u32) {
        let Some(head) = self.map.get_mut(&map_key(hash)) else {
            return;
        };
        if *head == from {
            *head = to;
            return;
        }
        let mut j = *head as usize;
        while let Some(n) = self.nodes.get_mut(j) {
            if n.next == from {
                n.next = to;
                return;
            }
            if n.next == NONE {
                return;
            }
            j = n.next as usize;
        }
    }

    /// Drop node `i` from its collision chain (or the map).
    fn unlink_chain(&mut self, i: usize) {
        let (hash, next) = (self.nodes[i].hash, self.nodes[i].next);
        match self.map.entry(map_key(hash)) {
            MapEntry::Occupied(mut e) if *e.get() as usize == i => {
                if next == NONE {
                    e.remove();
                } else {
                    *e.get_mut() = next;
                }
            }
            MapEntry::Occupied(_) => self.repoint_chain(hash, i as u32, next),
            MapEntry::Vacant(_) => {}
        }
    }

    /// swap_remove TTL slot `ts`, fixing the moved slot's node.
    fn unlink_ttl(&mut self, ts: u32) {
        let ts = ts as usize;
        if ts >= self.ttl.len() {
            return;
        }
        self.ttl.swap_remove(ts);
        if let Some(moved) = self.ttl.get(ts) {
            self.nodes[moved.node as usize].ttl_slot = ts as u32;
        }
    }

    /// Remove node `i` everywhere. O(1): the last node moves into its slot
    /// and its map entry (by stored hash) and TTL slot are re-pointed.
    fn remove_at(&mut self, i: usize) -> Node {
        self.cow_remove(i);
        self.unlink_chain(i);
        let ts = self.nodes[i].ttl_slot;
        if ts != NONE {
            self.unlink_ttl(ts);
        }
        let node = self.nodes.swap_remove(i);
        self.access.swap_remove(i);
        if self.noting() {
            let change = if self.expiring {
                None
            } else {
                Some(Change::Deleted)
            };
            self.note(node.key.as_slice(), false, change);
        }
        let from = self.nodes.len() as u32;
        if let Some(moved) = self.nodes.get(i) {
            let (hash, ts) = (moved.hash, moved.ttl_slot);
            self.repoint_chain(hash, from, i as u32);
            if let Some(t) = self.ttl.get_mut(ts as usize) {
                t.node = i as u32;
            }
        }
        self.mem = self
            .mem
            .saturating_sub(entry_mem(node.key.as_slice(), &node.value));
        node
    }

    fn stored_expire(&self, key: &[u8]) -> Option<i64> {
        self.find(key).map(|i| expire_of(&self.ttl, &self.nodes[i]))
    }

    /// Remove `key` if its TTL has passed; true if it did (counts
    /// `expired_keys`).
    pub fn expire_if_needed(&mut self, key: &[u8], now: i64) -> bool {
        match self.find(key) {
            Some(i) => self.expire_at_if_needed(i, now),
            None => false,
        }
    }

    /// Drop a removed value, burying a big aggregate for `free_some`.
    fn bury(&mut self, v: Value) {
        if let Value::Obj(o) = v {
            if o.len() > LAZYFREE_MIN {
                self.graveyard.push(o);
            }
        }
    }

    /// Remove node `i` and drop its value (see [`Db::bury`]).
    fn delete_at(&mut self, i: usize) {
        let n = self.remove_at(i);
        self.bury(n.value);
    }

    /// Free up to `budget` elements of buried aggregates; true while some
    /// remain.
    pub fn free_some(&mut self, mut budget: usize) -> bool {
        while budget > 0 {
            let Some(o) = self.graveyard.last_mut() else {
                return false;
            };
            budget = budget.saturating_sub(o.free_some(budget));
            if o.is_empty() {
                self.graveyard.pop();
            }
        }
        !self.graveyard.is_empty()
    }

    /// Buried aggregates not yet freed (INFO lazyfree_pending_objects).
    pub fn lazyfree_pending(&self) -> usize {
        self.graveyard.len()
    }

    /// Inline: every lookup asks, and the answer is nearly always no.
    #[inline]
    fn expire_at_if_needed(&mut self, i: usize, now: i64) -> bool {
        if is_expired(expire_of(&self.ttl, &self.nodes[i]), now) {
            self.expire_at(i);
            true
        } else {
            false
        }
    }

    /// Remove expired node `i` (an expiry, counted in `expired_keys`).
    #[inline(never)]
    fn expire_at(&mut self, i: usize) {
        self.log_expired(i);
        self.expiring = true;
        self.delete_at(i);
        self.expiring = false;
        self.stats.expired_keys += 1;
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
            log.push(self.nodes[i].key.as_slice().to_vec());
        }
        if let Some(log) = &mut self.deleted_log {
            log.push((self.nodes[i].key.as_slice().to_vec(), false));
        }
    }

    /// Number of keys WATCHed in this database.
    pub fn watched_len(&self) -> usize {
        self.watched.len()
    }

    /// A stored key whose TTL has passed, not yet reclaimed (Redis's
    /// `keyIsExpired`; WATCH and EXEC ask).
    pub fn key_is_expired(&self, key: &[u8], now: i64) -> bool {
        self.find(key)
            .is_some_and(|i| is_expired(expire_of(&self.ttl, &self.nodes[i]), now))
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

    /// A lookup touched node `i` (Redis's `updateLFU` / `LRU_CLOCK()`).
    #[inline]
    fn touch_access(&mut self, i: usize, now: i64) {
        let mode = self.access_mode;
        if let Some(a) = self.access.get_mut(i) {
            *a = mode.touch(*a, now, &mut self.rng);
        }
    }

    /// A stored, live key's access clock without touching it (OBJECT
    /// IDLETIME / FREQ use LOOKUP_NOTOUCH).
    pub fn access_of(&self, key: &[u8], now: i64) -> Option<u32> {
        let i = self.find(key)?;
        if is_expired(expire_of(&self.ttl, &self.nodes[i]), now) {
            return None;
        }
        self.access.get(i).copied()
    }

    /// Up to `n` random keys (from the keys with a TTL when `volatile`)
    /// with their access clock and expire time, for the eviction pool.
    pub fn sample_for_eviction(
        &mut self,
        n: usize,
        volatile: bool,
        out: &mut Vec<(Vec<u8>, u32, i64)>,
    ) {
        for _ in 0..n {
            let i = if volatile {
                if self.ttl.is_empty() {
                    return;
                }
                self.ttl[self.rng.below(self.ttl.len())].node as usize
            } else {
                if self.nodes.is_empty() {
                    return;
                }
                self.rng.below(self.nodes.len())
            };
            let node = &self.nodes[i];
            out.push((
                node.key.as_slice().to_vec(),
                self.access.get(i).copied().unwrap_or(0),
                expire_of(&self.ttl, node),
            ));
        }
    }

    /// A random key (with a TTL when `volatile`) for the random policies.
    pub fn random_for_eviction(&mut self, volatile: bool) -> Option<Vec<u8>> {
        let i = if volatile {
            if self.ttl.is_empty() {
                return None;
            }
            self.ttl[self.rng.below(self.ttl.len())].node as usize
        } else {
            if self.nodes.is_empty() {
                return None;
            }
            self.rng.below(self.nodes.len())
        };
        Some(self.nodes[i].key.as_slice().to_vec())
    }

    /// Evict `key` (maxmemory): removed like a delete for WATCH, not
    /// logged as the running command's change. The bytes freed.
    pub fn evict(&mut self, key: &[u8]) -> Option<u64> {
        let i = self.find(key)?;
        let before = self.mem;
        if let Some(log) = &mut self.deleted_log {
            log.push((key.to_vec(), true));
        }
        self.expiring = true;
        self.delete_at(i);
        self.expiring = false;
        Some(before.saturating_sub(self.mem))
    }

    fn entry_at(&self, i: usize) -> Entry<'_> {
        let n = &self.nodes[i];
        Entry {
            value: n.value.as_ref(),
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
        let v = &mut self.nodes[i].value;
        let before = v.mem();
        let r = v.update(f);
        let after = v.mem();
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
        self.store(p, key, Value::new(value), keep_ttl);
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
        p.index.map(|i| self.nodes[i].value.as_ref())
    }

    /// Store a new aggregate under a probed key that does not exist.
    pub fn insert_obj(&mut self, p: Probe, key: &[u8], obj: Object) -> Probe {
        self.store(p, key, Value::Obj(obj), false)
    }

    /// Run `f` on a probed aggregate, then account its new size and delete
    /// the key if `f` left it empty. `None` if the key is missing or a
    /// string. The probe is stale afterwards.
    pub fn update_obj<R>(&mut self, p: &Probe, f: impl FnOnce(&mut Object) -> R) -> Option<R> {
        let i = p.index?;
        if matches!(self.nodes[i].value, Value::Obj(_)) {
            self.cow(i);
        }
        let Value::Obj(o) = &mut self.nodes[i].value else {
            return None;
        };
        let before = o.mem();
        let r = f(o);
        let (after, empty) = (o.mem(), o.is_empty());
        self.mem = self.mem.saturating_sub(before) + after;
        if self.noting() {
            let key = self.nodes[i].key.as_slice().to_vec();
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
        self.store(p, key, Value::from_slice(value), keep_ttl)
    }

    fn store(&mut self, p: Probe, key: &[u8], value: Value, keep_ttl: bool) -> Probe {
        if self.noting() {
            if p.index.is_none() {
                self.note(key, true, Some(Change::New));
            }
            self.note(key, true, Some(Change::Write));
        }
        let vlen = value.mem();
        if let Some(i) = p.index {
            self.cow(i);
            let n = &mut self.nodes[i];
            self.mem = self.mem.saturating_sub(n.value.mem()) + vlen;
            let old = std::mem::replace(&mut n.value, value);
            if matches!(old, Value::Obj(_)) {
                self.bury(old);
            }
            // The TTL test inline: most keys have none.
            if !keep_ttl && self.nodes[i].ttl_slot != NONE {
                self.remove_expire_at(i);
            }
            return p;
        }
        let h = p.hash;
        self.cow_hash(h);
        let idx = self.nodes.len() as u32;
        let next = match self.map.entry(map_key(h)) {
            MapEntry::Occupied(mut e) => std::mem::replace(e.get_mut(), idx),
            MapEntry::Vacant(e) => {
                e.insert(idx);
                NONE
            }
        };
        self.mem += ENTRY_OVERHEAD + key.len() as u64 + vlen;
        let now_ms = self.access_mode.now_ms;
        self.access.push(self.access_mode.new_key(now_ms));
        self.nodes.push(Node {
            hash: h,
            next,
            ttl_slot: NONE,
            key: KeyBytes::new(key),
            value,
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

    /// Set an absolute expire time (ms, clamped to >= 0) on an existing key.
    pub fn set_expire(&mut self, key: &[u8], when: i64) -> bool {
        match self.find(key) {
            Some(i) => {
                self.set_expire_at(i, when);
                true
            }
            None => false,
        }
    }

    /// [`Db::set_expire`] on a probed key; false if it does not exist.
    pub fn set_expire_probed(&mut self, p: &Probe, when: i64) -> bool {
        match p.index {
            Some(i) => {
                self.set_expire_at(i, when);
                true
            }
            None => false,
        }
    }

    fn set_expire_at(&mut self, i: usize, when: i64) {
        self.cow(i);
        if self.noting() {
            let key = self.nodes[i].key.as_slice().to_vec();
            self.note(&key, true, Some(Change::Expire));
        }
        let when = when.max(0);
        let n = &mut self.nodes[i];
        if n.ttl_slot == NONE {
            n.ttl_slot = self.ttl.len() as u32;
            self.ttl.push(TtlRef {
                expire: when,
                node: i as u32,
            });
        } else if let Some(t) = self.ttl.get_mut(n.ttl_slot as usize) {
            t.expire = when;
        }
    }

    fn remove_expire_at(&mut self, i: usize) -> bool {
        let slot = self.nodes[i].ttl_slot;
        if slot == NONE {
            return false;
        }
        self.cow(i);
        if self.noting() {
            let key = self.nodes[i].key.as_slice().to_vec();
            self.note(&key, true, Some(Change::Persist));
        }
        let n = &mut self.nodes[i];
        n.ttl_slot = NONE;
        self.unlink_ttl(slot);
        true
    }

    /// Remove a key's TTL; true if it had one.
    pub fn remove_expire(&mut self, key: &[u8]) -> bool {
        match self.find(key) {
            Some(i) => self.remove_expire_at(i),
            None => false,
        }
    }

    /// Absolute expire time of a stored key (no expiry check).
    pub fn get_expire(&self, key: &[u8]) -> Option<i64> {
        self.stored_expire(key).filter(|&e| e >= 0)
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
        self.map = IdMap::default();
        self.nodes = Vec::new();
        self.access = Vec::new();
        self.ttl = Vec::new();
        self.avg_ttl = 0;
        self.mem = 0;
        n
    }

    /// RANDOMKEY: a random live key. Expired picks are reclaimed; after 100
    /// of them in one call it gives up and answers none (bounded work).
    pub fn random_key(&mut self, now: i64) -> Option<Vec<u8>> {
        for _ in 0..100 {
            if self.nodes.is_empty() {
                return None;
            }
            let i = self.rng.below(self.nodes.len());
            if !self.expire_at_if_needed(i, now) {
                return Some(self.nodes[i].key.as_slice().to_vec());
            }
        }
        None
    }

    /// The kind of a live key (TYPE), counted as a read lookup.
    pub fn kind_of(&mut self, key: &[u8], now: i64) -> Option<Kind> {
        self.lookup_read(key, now).map(|e| e.kind())
    }

    /// KEYS pattern: all live keys matching `pattern`.
    pub fn keys_matching(&self, pattern: &[u8], now: i64) -> Vec<Vec<u8>> {
        let all = pattern == b"*";
        self.nodes
            .iter()
            .filter(|n| {
                !is_expired(expire_of(&self.ttl, n), now)
                    && (all || stringmatch(pattern, n.key.as_slice(), false))
            })
            .map(|n| n.key.as_slice().to_vec())
            .collect()
    }

    /// One SCAN step. The cursor is an upper bound into the dense node
    /// vector, walked from the top down (cursor 0 starts at the top and a
    /// returned 0 means done). Removal only moves the *last* key (already
    /// visited) down, and inserts append at the top, so like Redis's SCAN:
    /// a key present during the whole iteration is returned at least once,
    /// keys may be returned more than once, keys added meanwhile may be
    /// missed. `count` key slots are visited per call.
    pub fn scan(
        &mut self,
        cursor: u64,
        count: usize,
        pattern: Option<&[u8]>,
        kind: Option<&[u8]>,
        now: i64,
    ) -> (u64, Vec<Vec<u8>>) {
        let len = self.nodes.len() as u64;
        let upper = if cursor == 0 || cursor > len {
            len
        } else {
            cursor
        };
        let lower = upper.saturating_sub(count.max(1) as u64);
        let mut out = Vec::new();
        let mut expired = Vec::new();
        for i in (lower..upper).rev() {
            let Some(n) = self.nodes.get(i as usize) else {
                continue;
            };
            let key = n.key.as_slice();
            if is_expired(expire_of(&self.ttl, n), now) {
                expired.push(key.to_vec());
                continue;
            }
            if kind
                .is_some_and(|k| !k.eq_ignore_ascii_case(n.value.as_ref().kind().name().as_bytes()))
            {
                continue;
            }
            if let Some(p) = pattern {
                if !stringmatch(p, key, false) {
                    continue;
                }
            }
            out.push(key.to_vec());
        }
        for k in expired {
            self.expire_if_needed(&k, now);
        }
        (lower, out)
    }

    /// Sample up to `n` random keys with a TTL, reclaim the expired ones.
    /// O(n) whatever the database size; a live sample reads one TTL slot.
    ///
    /// Samples are drawn in batches and [`Db::warm`] first touches what
    /// reclaiming them will touch, so their cache misses overlap instead of
    /// being paid one after the other.
    pub fn expire_sample(&mut self, now: i64, n: usize) -> SampleOutcome {
        let mut o = SampleOutcome::default();
        let mut left = n;
        let mut picks = [0usize; SAMPLE_BATCH];
        while left > 0 && !self.ttl.is_empty() {
            let m = left.min(SAMPLE_BATCH);
            left -= m;
            let len = self.ttl.len();
            for p in &mut picks[..m] {
                *p = self.rng.below(len);
            }
            self.warm(&picks[..m], now);
            for &p in &picks[..m] {
                if self.ttl.is_empty() {
                    break;
                }
                // Reclaiming shrank the vector: draw again past its end.
                let s = if p < self.ttl.len() {
                    p
                } else {
                    self.rng.below(self.ttl.len())
                };
                let t = self.ttl[s];
                o.sampled += 1;
                if is_expired(t.expire, now) {
                    self.log_expired(t.node as usize);
                    self.expiring = true;
                    self.delete_at(t.node as usize);
                    self.expiring = false;
                    self.stats.expired_keys += 1;
                    o.expired += 1;
                } else {
                    o.ttl_sum = o.ttl_sum.saturating_add(t.expire - now);
                    o.ttl_samples += 1;
                }
            }
        }
        o
    }

    /// Software prefetch without `unsafe`: read, with loads that do not
    /// depend on each other, the TTL slots of `picks`, the nodes and map
    /// entries of the expired ones, and the tail nodes (and their map
    /// entries and TTL slots) that their removal will move. The CPU runs
    /// these misses in parallel; the removals that follow then hit cache.
    fn warm(&self, picks: &[usize], now: i64) {
        let mut refs = [TtlRef {
            expire: NO_EXPIRE,
            node: NONE,
        }; SAMPLE_BATCH];
        for (r, &p) in refs.iter_mut().zip(picks) {
            if let Some(t) = self.ttl.get(p) {
                *r = *t;
            }
        }
        let mut hashes = [0u64; 2 * SAMPLE_BATCH];
        let mut k = 0;
        let mut acc = 0u64;
        for r in &refs[..picks.len()] {
            if is_expired(r.expire, now) {
                if let Some(n) = self.nodes.get(r.node as usize) {
                    hashes[k] = n.hash;
                    k += 1;
                }
            }
        }
        let expired = k;
        if expired == 0 {
            return;
        }
        // Each removal moves the current last node (and last TTL slot).
        for n in self.nodes.iter().rev().take(expired) {
            hashes[k] = n.hash;
            k += 1;
            if let Some(t) = self.ttl.get(n.ttl_slot as usize) {
                acc = acc.wrapping_add(t.expire as u64);
            }
        }
        for t in self.ttl.iter().rev().take(expired) {
            if let Some(n) = self.nodes.get(t.node as usize) {
                acc = acc.wrapping_add(u64::from(n.ttl_slot));
            }
        }
        for h in &hashes[..k] {
            acc = acc.wrapping_add(self.map.get(&map_key(*h)).map_or(0, |&i| u64::from(i)));
        }
        std::hint::black_box(acc);
    }

    /// Move `src` to `dst` keeping the TTL (RENAME), whatever the type.
    /// Both were looked up.
    pub fn rename(&mut self, src: &[u8], dst: &[u8]) -> bool {
        let expire = self.get_expire(src);
        let Some(i) = self.find(src) else {
            return false;
        };
        let v = self.remove_at(i).value;
        self.remove(dst);
        let h = self.hash(dst);
        let p = Probe {
            hash: h,
            index: self.find_hashed(h, dst),
        };
        let p = self.store(p, dst, v, false);
        if let Some(t) = expire {
            self.set_expire_probed(&p, t);
        }
        true
    }

    /// A copy of a live key's value and TTL (COPY).
    pub fn copy_out(&mut self, key: &[u8], now: i64) -> Option<(Copied, Option<i64>)> {
        let i = self.find_live(key, now)?;
        let n = &self.nodes[i];
        let e = expire_of(&self.ttl, n);
        Some((Copied(n.value.clone()), (e >= 0).then_some(e)))
    }

    /// Take a live key out (MOVE): its value and TTL.
    pub fn take(&mut self, key: &[u8], now: i64) -> Option<(Copied, Option<i64>)> {
        let i = self.find_live(key, now)?;
        let e = expire_of(&self.ttl, &self.nodes[i]);
        let expire = (e >= 0).then_some(e);
        let n = self.remove_at(i);
        Some((Copied(n.value), expire))
    }

    /// Store a [`Copied`] value (COPY / MOVE), replacing what is there.
    pub fn store_copy(&mut self, key: &[u8], v: Copied, expire: Option<i64>) {
        let h = self.hash(key);
        let p = Probe {
            hash: h,
            index: self.find_hashed(h, key),
        };
        let p = self.store(p, key, v.0, false);
        if let Some(t) = expire {
            self.set_expire_probed(&p, t);
        }
    }

    /// Check internal index invariants (tests).
    pub fn check_invariants(&self) -> bool {
        if self.access.len() != self.nodes.len() {
            return false;
        }
        let nodes_ok = self.nodes.iter().enumerate().all(|(i, n)| {
            let key = n.key.as_slice();
            n.hash == self.hash(key)
                && self.find(key) == Some(i)
                && match n.ttl_slot {
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
                    .is_some_and(|n| n.ttl_slot as usize == s)
        });
        let mut chained = 0;
        for &head in self.map.values() {
            let mut i = head;
            while let Some(n) = self.nodes.get(i as usize) {
                chained += 1;
                i = n.next;
            }
        }
        nodes_ok && ttl_ok && chained == self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Random operations against a plain map model; with `mask` the hashes
    /// collide a lot, exercising the collision chains.
    fn model_check(mask: u64, seed: u64) {
        let mut db = Db::new(seed);
        db.hash_mask = mask;
        let mut model: HashMap<Vec<u8>, (Vec<u8>, Option<i64>)> = HashMap::new();
        let mut rng = Rng::new(seed);
        let now = 1000;
        for step in 0..20_000 {
            // Short and long keys and values (inline and heap).
            let key = if rng.below(4) == 0 {
                format!("a-rather-long-key-{:032}", rng.below(200)).into_bytes()
            } else {
                format!("k{}", rng.below(200)).into_bytes()
            };
            let val = vec![b'x'; [0, 1, 30, 31, 100][rng.below(5)]];
            match rng.below(8) {
                0 | 1 => {
                    let keep = rng.below(2) == 0;
                    db.set(&key, val.clone(), keep);
                    let e = model.get(&key).and_then(|x| x.1).filter(|_| keep);
                    model.insert(key.clone(), (val, e));
                }
                2 => assert_eq!(db.remove(&key), model.remove(&key).is_some()),
                3 => {
                    let when = now + rng.below(3) as i64 - 1;
                    let had = model.contains_key(&key);
                    assert_eq!(db.set_expire(&key, when), had);
                    if let Some(x) = model.get_mut(&key) {
                        x.1 = Some(when);
                    }
                }
                4 => {
                    let had = model.get(&key).is_some_and(|x| x.1.is_some());
                    assert_eq!(db.remove_expire(&key), had);
                    if let Some(x) = model.get_mut(&key) {
                        x.1 = None;
                    }
                }
                5 => {
                    let r = db.update_value(&key, 0, |v| {
                        v.extend_from_slice(b"yy");
                        v.len()
                    });
                    let m = model.get_mut(&key).map(|x| {
                        x.0.extend_from_slice(b"yy");
                        x.0.len()
                    });
                    assert_eq!(r, m);
                }
                6 => {
                    let o = db.expire_sample(now, 20);
                    // Only expired keys went, and as many as reported.
                    let before = model.len();
                    model.retain(|k, x| {
                        let kept = db.find(k).is_some();
                        assert!(kept || x.1.is_some_and(|e| now > e));
                        kept
                    });
                    assert_eq!((before - model.len()) as u64, o.expired);
                }
                _ => {
                    let got = db.entry_at_key(&key);
                    let want = model.get(&key).map(|x| (x.0.clone(), x.1));
                    assert_eq!(got, want);
                }
            }
            assert_eq!(db.len(), model.len());
            if step % 500 == 0 {
                assert!(db.check_invariants(), "step {step}");
            }
        }
        assert!(db.check_invariants());
        assert_eq!(
            db.expires_len(),
            model.values().filter(|x| x.1.is_some()).count()
        );
    }

    impl Db {
        fn entry_at_key(&self, key: &[u8]) -> Option<(Vec<u8>, Option<i64>)> {
            let i = self.find(key)?;
            let e = self.entry_at(i);
            Some((e.str().unwrap().to_vec(), e.expire()))
        }
    }

    #[test]
    fn matches_a_plain_map() {
        model_check(u64::MAX, 1);
    }

    #[test]
    fn matches_a_plain_map_with_colliding_hashes() {
        model_check(0b111, 2);
        model_check(0, 3);
    }

    #[test]
    fn expire_sample_reclaims_expired_keys_only() {
        let mut db = Db::new(9);
        db.hash_mask = 0xf;
        for i in 0..1000 {
            let k = format!("k{i}");
            db.set(k.as_bytes(), b"v".to_vec(), false);
            db.set_expire(k.as_bytes(), if i % 2 == 0 { 10 } else { 1_000_000 });
        }
        while db.len() > 500 {
            db.expire_sample(100, 20);
        }
        assert_eq!(db.len(), 500);
        assert!(db.check_invariants());
        assert!(db.nodes.iter().all(|n| expire_of(&db.ttl, n) == 1_000_000));
        assert_eq!(db.stats.expired_keys, 500);
    }

    #[test]
    fn node_stays_72_bytes() {
        assert_eq!(std::mem::size_of::<Node>(), 72);
    }

    #[test]
    fn inline_values_grow_to_heap_and_back() {
        let mut db = Db::new(1);
        db.set(b"k", vec![b'a'; 30], false);
        db.update_value(b"k", 0, |v| v.push(b'b'));
        assert_eq!(db.lookup_write(b"k", 0).unwrap().str().unwrap().len(), 31);
        db.update_value(b"k", 0, |v| v.truncate(2));
        assert_eq!(db.lookup_write(b"k", 0).unwrap().str().unwrap(), b"aa");
        assert!(matches!(db.nodes[0].value, Value::Inline(..)));
        let long = vec![b'k'; 23];
        db.set(&long, b"v".to_vec(), false);
        assert!(matches!(db.nodes[1].key, KeyBytes::Heap(_)));
        assert_eq!(
            db.random_key(0).map(|k| k.len() == 1 || k == long),
            Some(true)
        );
    }
}
