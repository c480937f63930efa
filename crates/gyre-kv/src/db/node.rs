//! What the keyspace stores per key (Redis's `robj` and `dictEntry`
//! roles, merged): the [`Node`] with its key bytes and value, inline when
//! short, and the [`TtlRef`] of a key with a TTL.

use crate::object::Object;

use super::NONE;

/// Keys up to this many bytes are stored inside the node.
pub(super) const KEY_INLINE: usize = 22;
/// Values up to this many bytes are stored inside the node.
pub(super) const VAL_INLINE: usize = 30;

#[derive(Debug)]
pub(super) enum KeyBytes {
    Inline(u8, [u8; KEY_INLINE]),
    Heap(Box<[u8]>),
}

impl KeyBytes {
    pub(super) fn new(b: &[u8]) -> KeyBytes {
        if b.len() <= KEY_INLINE {
            let mut buf = [0; KEY_INLINE];
            buf[..b.len()].copy_from_slice(b);
            KeyBytes::Inline(b.len() as u8, buf)
        } else {
            KeyBytes::Heap(b.into())
        }
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        match self {
            KeyBytes::Inline(n, buf) => &buf[..usize::from(*n)],
            KeyBytes::Heap(b) => b,
        }
    }
}

/// A value: a string, inline when short, or an aggregate.
#[derive(Clone, Debug)]
pub(super) enum Value {
    Inline(u8, [u8; VAL_INLINE]),
    Heap(Vec<u8>),
    Obj(Object),
}

impl Value {
    pub(super) fn from_slice(v: &[u8]) -> Value {
        if v.len() <= VAL_INLINE {
            let mut buf = [0; VAL_INLINE];
            buf[..v.len()].copy_from_slice(v);
            Value::Inline(v.len() as u8, buf)
        } else {
            Value::Heap(v.to_vec())
        }
    }

    pub(super) fn new(v: Vec<u8>) -> Value {
        if v.len() <= VAL_INLINE {
            let mut buf = [0; VAL_INLINE];
            buf[..v.len()].copy_from_slice(&v);
            Value::Inline(v.len() as u8, buf)
        } else {
            Value::Heap(v)
        }
    }

    pub(super) fn as_ref(&self) -> Ref<'_> {
        match self {
            Value::Inline(n, buf) => Ref::Str(&buf[..usize::from(*n)]),
            Value::Heap(v) => Ref::Str(v),
            Value::Obj(o) => Ref::Obj(o),
        }
    }

    /// Bytes counted in `used_memory` beyond the node.
    pub(super) fn mem(&self) -> u64 {
        match self {
            Value::Inline(n, _) => u64::from(*n),
            Value::Heap(v) => v.len() as u64,
            Value::Obj(o) => o.mem(),
        }
    }

    /// Run `f` on a string value as a `Vec` (a heap value in place, so
    /// APPEND stays amortized O(1)); a result that fits goes back inline.
    /// `None` for an aggregate.
    pub(super) fn update<R>(&mut self, f: impl FnOnce(&mut Vec<u8>) -> R) -> Option<R> {
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
/// The access clock lives here too (Redis's `robj->lru`): a parallel
/// vector of it cost 4 bytes per key of its own plus a second cache line
/// per lookup.
#[derive(Debug)]
pub(super) struct Node {
    /// 32 bits of the key's keyed hash ([`super::table`]): its bucket, and
    /// what removal and fix-ups go by without hashing the key again.
    pub(super) hash: u32,
    /// Next node in the same bucket (`NONE`: end of chain).
    pub(super) next: u32,
    /// Index in `ttl`, `NONE` without a TTL.
    pub(super) ttl_slot: u32,
    /// The LRU clock in seconds, or under an LFU policy minutes and a
    /// logarithmic counter (see [`crate::evict`]).
    pub(super) access: u32,
    pub(super) key: KeyBytes,
    pub(super) value: Value,
}

/// A key with a TTL, as the expire cycle samples it.
#[derive(Clone, Copy, Debug)]
pub(super) struct TtlRef {
    pub(super) expire: i64,
    pub(super) node: u32,
}

impl TtlRef {
    pub(super) const EMPTY: TtlRef = TtlRef {
        expire: super::NO_EXPIRE,
        node: NONE,
    };
}
