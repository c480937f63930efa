//! Typed values of the keyspace (Redis's `object.c` role): the aggregate
//! types, their TYPE and OBJECT ENCODING names, their memory estimate, and
//! the encoding thresholds (redis.conf's `*-max-listpack-*`).
//!
//! Strings are not here: they stay inline in the keyspace node
//! ([`crate::db`]) so GET/SET never allocate or chase a pointer. Every
//! other type is an `Object` of 24 bytes held in the node's slot beside
//! its key (the node is 48 bytes): a small hash, set or sorted set is the
//! node plus one exact-size allocation, no box between them (Redis: a
//! dict entry, an robj and the listpack).
//! Each type's module owns its storage and encodings:
//!
//! * [`crate::t_hash::HashObj`] — listpack or hashtable;
//! * [`crate::t_set::SetObj`] — intset or hashtable;
//! * [`crate::t_list::ListObj`] — quicklist (a deque of listpacks).
//!
//! Adding a type (sorted sets: `t_zset.rs`) is: a variant here, its arms
//! in `Object`'s methods below (`kind`, `encoding`, `len`, `mem`,
//! `free_some`), and its module with a `COMMANDS` slice listed in
//! [`crate::cmd::TABLES`]. A type module reads with [`read_kind`], writes
//! through a [`Probe`]: [`check_kind`] (WRONGTYPE), `Db::insert_obj` to
//! create, `Db::update_obj` to change (memory accounting, empty-aggregate
//! deletion). Blocking pops of a new type add a [`crate::blocked::BlockOp`]
//! and call `server.blocked.signal(db, key)` where a key of that type is
//! created, as `t_list::write` does.

use crate::cmd::{Ctx, Replied, ERR_WRONGTYPE};
use crate::db::{Db, Probe, Ref};
use crate::t_hash::HashObj;
use crate::t_list::ListObj;
use crate::t_set::SetObj;
use crate::zset::ZSet;

#[derive(Clone, Debug)]
pub enum Object {
    Hash(HashObj),
    List(ListObj),
    Set(SetObj),
    Zset(ZSet),
}

/// A value's type, as TYPE and SCAN ... TYPE name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    String,
    Hash,
    List,
    Set,
    Zset,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::Zset => "zset",
        }
    }
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::Hash(_) => Kind::Hash,
            Object::List(_) => Kind::List,
            Object::Set(_) => Kind::Set,
            Object::Zset(_) => Kind::Zset,
        }
    }

    /// OBJECT ENCODING's answer.
    pub fn encoding(&self) -> &'static str {
        match self {
            Object::Hash(h) => h.encoding(),
            Object::List(_) => "quicklist",
            Object::Set(s) => s.encoding(),
            Object::Zset(z) => z.encoding(),
        }
    }

    /// Elements (an empty aggregate is deleted from the keyspace).
    pub fn len(&self) -> usize {
        match self {
            Object::Hash(h) => h.len(),
            Object::List(l) => l.len(),
            Object::Set(s) => s.len(),
            Object::Zset(z) => z.len(),
        }
    }

    /// O(1) for every type (a small hash's or sorted set's `len` walks).
    pub fn is_empty(&self) -> bool {
        match self {
            Object::Hash(h) => h.is_empty(),
            Object::List(l) => l.is_empty(),
            Object::Set(s) => s.is_empty(),
            Object::Zset(z) => z.is_empty(),
        }
    }

    /// Free up to `budget` elements of an aggregate already out of the
    /// keyspace (see [`crate::db::LAZYFREE_MIN`]); returns how many went.
    pub fn free_some(&mut self, budget: usize) -> usize {
        match self {
            Object::Hash(h) => h.free_some(budget),
            Object::List(l) => l.free_some(budget),
            Object::Set(s) => s.free_some(budget),
            Object::Zset(z) => z.free_some(budget),
        }
    }

    /// Estimated heap bytes (INFO used_memory); the object itself sits in
    /// the keyspace node, counted with it.
    pub fn mem(&self) -> u64 {
        (match self {
            Object::Hash(h) => h.mem(),
            Object::List(l) => l.mem(),
            Object::Set(s) => s.mem(),
            Object::Zset(z) => z.mem(),
        }) as u64
    }
}

impl Ref<'_> {
    pub fn kind(&self) -> Kind {
        match self {
            Ref::Str(_) => Kind::String,
            Ref::Obj(o) => o.kind(),
        }
    }
}

/// Encoding thresholds (`kv {}` / CONFIG SET, redis.conf spelling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `hash-max-listpack-entries`: fields in a listpack hash.
    pub hash_max_listpack_entries: u64,
    /// `hash-max-listpack-value`: longest field or value in a listpack hash.
    pub hash_max_listpack_value: u64,
    /// `set-max-intset-entries`.
    pub set_max_intset_entries: u64,
    /// `set-max-listpack-entries` (accepted; Redis 7.0 has no listpack
    /// sets, so non-integer sets are hashtables as in 7.0).
    pub set_max_listpack_entries: u64,
    /// `zset-max-listpack-entries` (for t_zset).
    pub zset_max_listpack_entries: u64,
    /// `zset-max-listpack-value` (for t_zset).
    pub zset_max_listpack_value: u64,
    /// `list-max-listpack-size`: > 0 entries per quicklist node, -1..-5 a
    /// node size of 4, 8, 16, 32, 64 KiB.
    pub list_max_listpack_size: i64,
}

impl Default for Limits {
    /// redis.conf's values.
    fn default() -> Self {
        Limits {
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
        }
    }
}

/// Redis's `checkType`: WRONGTYPE unless the probed key is missing or of
/// kind `want`. Returns whether the key exists.
pub fn check_kind(db: &Db, p: &Probe, want: Kind, ctx: &mut Ctx<'_>) -> Result<bool, Replied> {
    match db.probed_ref(p) {
        None => Ok(false),
        Some(r) if r.kind() == want => Ok(true),
        Some(_) => {
            ctx.err(ERR_WRONGTYPE);
            Err(Replied)
        }
    }
}

/// Read lookup of an aggregate of kind `want` (Redis's `lookupKeyRead` +
/// `checkType`): `Ok(None)` if missing, `Err` once WRONGTYPE is written.
pub fn read_kind<'d>(
    db: &'d mut Db,
    ctx: &mut Ctx<'_>,
    key: &[u8],
    want: Kind,
) -> Result<Option<&'d Object>, Replied> {
    match db.lookup_read(key, ctx.now) {
        None => Ok(None),
        Some(e) if e.kind() == want => match e.value {
            Ref::Obj(o) => Ok(Some(o)),
            Ref::Str(_) => Ok(None),
        },
        Some(_) => {
            ctx.err(ERR_WRONGTYPE);
            Err(Replied)
        }
    }
}

/// Most random-member replies a negative count may ask for. Redis builds
/// a reply of any size (and runs out of memory); gyre answers
/// `ERR value is out of range` past this.
pub const MAX_RANDOM_REPLY: u64 = 1 << 24;

#[cfg(test)]
mod tests {
    use super::*;

    /// An aggregate lives in the keyspace node's slot beside its key, with
    /// no box of its own: every type's small form (a list's: one node) is a
    /// 16-byte handle to one exact-size allocation, and the enums pack
    /// their tags into each other's spare values.
    #[test]
    fn object_fits_the_node_value_slot() {
        use std::mem::size_of;
        assert_eq!(size_of::<HashObj>(), 16);
        assert_eq!(size_of::<ZSet>(), 16);
        assert_eq!(size_of::<ListObj>(), 16);
        assert_eq!(size_of::<SetObj>(), 24);
        assert_eq!(size_of::<Object>(), 24);
    }
}
