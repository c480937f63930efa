//! What the keyspace stores per key (Redis's `robj` and `dictEntry`
//! roles, merged): the [`Node`], whose [`Slot`] holds the key and the
//! value together, and the [`TtlRef`] of a key with a TTL.
//!
//! Why key and value share one slot: a typical key with its short string
//! value fits 37 bytes, and a small aggregate's key fits 14 beside its
//! 24-byte object, so one 40-byte slot serves both where a key slot (24
//! bytes) beside a value slot (32) made a 72-byte node.
//! A string that does not fit keeps key and value in one allocation,
//! value first: still one allocation per key, and APPEND grows the value
//! in place (amortized, as Redis's sds).
//!
//! The trade-off: what fitted the 72-byte node only because its key and
//! value slots were apart now takes an allocation — a string whose key
//! and value are 38 to 52 bytes together (+32 or +48 bytes: 56 and a 48-
//! or 64-byte chunk against 72), an aggregate under a key of 15 to 22
//! bytes (+48: two 32-byte chunks). Keys of up to 14 bytes with small
//! aggregates, and strings of up to 37 bytes with their key, save 16
//! bytes each.

use crate::object::Object;

use super::NONE;

/// Key and string value together up to this many bytes live in the node.
pub(super) const INLINE: usize = 37;
/// Keys of aggregates up to this many bytes live in the node.
pub(super) const OBJ_KEY: usize = 14;

/// A value moving out of or into the keyspace (removed, copied, renamed).
#[derive(Clone, Debug)]
pub(super) enum Value {
    Str(Vec<u8>),
    Obj(Object),
}

/// A value to store: borrowed bytes (copied once, into the node or the
/// key's allocation) or an owned value.
pub(super) enum New<'a> {
    Bytes(&'a [u8]),
    Owned(Value),
}

/// A key and its value (see the module notes).
#[derive(Debug)]
pub(super) enum Slot {
    /// A string whose key and value fit together: `buf[..klen]` is the
    /// key, the `vlen` bytes after it the value.
    Inline {
        klen: u8,
        vlen: u8,
        buf: [u8; INLINE],
    },
    /// A longer string: value then key (`klen` bytes) in one allocation.
    Joined { klen: u32, kv: Vec<u8> },
    /// An aggregate under a short key.
    Obj {
        klen: u8,
        key: [u8; OBJ_KEY],
        obj: Object,
    },
    /// An aggregate under a longer key (two allocations of its own: 32 +
    /// 32 bytes for a key up to 24 bytes, where one box holding both took
    /// 48 + 32).
    LongObj { key: Box<[u8]>, obj: Box<Object> },
}

impl Slot {
    pub(super) fn new(key: &[u8], v: New<'_>) -> Slot {
        match v {
            New::Bytes(b) => Slot::string(key, b),
            New::Owned(Value::Str(s)) => Slot::string_owned(key, s),
            New::Owned(Value::Obj(o)) => Slot::obj(key, o),
        }
    }

    fn string(key: &[u8], val: &[u8]) -> Slot {
        let (k, n) = (key.len(), val.len());
        if k + n <= INLINE {
            let mut buf = [0; INLINE];
            buf[..k].copy_from_slice(key);
            buf[k..k + n].copy_from_slice(val);
            Slot::Inline {
                klen: k as u8,
                vlen: n as u8,
                buf,
            }
        } else {
            let mut kv = Vec::with_capacity(n + k);
            kv.extend_from_slice(val);
            kv.extend_from_slice(key);
            Slot::Joined { klen: k as u32, kv }
        }
    }

    /// A string from owned bytes: a long value keeps its allocation (the
    /// key is appended to it).
    fn string_owned(key: &[u8], mut val: Vec<u8>) -> Slot {
        if key.len() + val.len() <= INLINE {
            return Slot::string(key, &val);
        }
        val.reserve_exact(key.len());
        val.extend_from_slice(key);
        Slot::Joined {
            klen: key.len() as u32,
            kv: val,
        }
    }

    fn obj(key: &[u8], obj: Object) -> Slot {
        if key.len() <= OBJ_KEY {
            let mut k = [0; OBJ_KEY];
            k[..key.len()].copy_from_slice(key);
            Slot::Obj {
                klen: key.len() as u8,
                key: k,
                obj,
            }
        } else {
            Slot::LongObj {
                key: key.into(),
                obj: Box::new(obj),
            }
        }
    }

    #[inline(always)]
    pub(super) fn key(&self) -> &[u8] {
        match self {
            Slot::Inline { klen, buf, .. } => &buf[..usize::from(*klen)],
            Slot::Joined { klen, kv } => &kv[kv.len() - *klen as usize..],
            Slot::Obj { klen, key, .. } => &key[..usize::from(*klen)],
            Slot::LongObj { key, .. } => key,
        }
    }

    #[inline]
    pub(super) fn value(&self) -> Ref<'_> {
        match self {
            Slot::Inline { klen, vlen, buf } => {
                let k = usize::from(*klen);
                Ref::Str(&buf[k..k + usize::from(*vlen)])
            }
            Slot::Joined { klen, kv } => Ref::Str(&kv[..kv.len() - *klen as usize]),
            Slot::Obj { obj, .. } => Ref::Obj(obj),
            Slot::LongObj { obj, .. } => Ref::Obj(obj),
        }
    }

    pub(super) fn is_obj(&self) -> bool {
        matches!(self, Slot::Obj { .. } | Slot::LongObj { .. })
    }

    pub(super) fn obj_mut(&mut self) -> Option<&mut Object> {
        match self {
            Slot::Obj { obj, .. } => Some(obj),
            Slot::LongObj { obj, .. } => Some(obj),
            _ => None,
        }
    }

    /// Bytes counted in `used_memory` beyond the node: the allocation of a
    /// joined string, or an aggregate's estimate, as glibc's malloc chunks
    /// ([`chunk`]; for a small aggregate, one allocation, exact).
    pub(super) fn heap_mem(&self) -> u64 {
        match self {
            Slot::Inline { .. } => 0,
            Slot::Joined { kv, .. } => chunk(kv.capacity()),
            Slot::Obj { obj, .. } => chunk(obj.mem() as usize),
            Slot::LongObj { key, obj } => {
                chunk(key.len()) + chunk(std::mem::size_of::<Object>()) + chunk(obj.mem() as usize)
            }
        }
    }

    /// Store `v` under the same key; the aggregate it replaced, if any
    /// (for [`super::Db::bury`]).
    pub(super) fn replace_value(&mut self, v: New<'_>) -> Option<Object> {
        // SET over a short string: the new bytes go in place, key untouched.
        if let (Slot::Inline { klen, vlen, buf }, New::Bytes(b)) = (&mut *self, &v) {
            let k = usize::from(*klen);
            if k + b.len() <= INLINE {
                buf[k..k + b.len()].copy_from_slice(b);
                *vlen = b.len() as u8;
                return None;
            }
        }
        let new = Slot::new(self.key(), v);
        std::mem::replace(self, new).into_obj()
    }

    pub(super) fn into_obj(self) -> Option<Object> {
        match self {
            Slot::Obj { obj, .. } => Some(obj),
            Slot::LongObj { obj, .. } => Some(*obj),
            _ => None,
        }
    }

    pub(super) fn into_value(self) -> Value {
        match self {
            Slot::Inline { klen, vlen, buf } => {
                let k = usize::from(klen);
                Value::Str(buf[k..k + usize::from(vlen)].to_vec())
            }
            Slot::Joined { klen, mut kv } => {
                kv.truncate(kv.len() - klen as usize);
                Value::Str(kv)
            }
            Slot::Obj { obj, .. } => Value::Obj(obj),
            Slot::LongObj { obj, .. } => Value::Obj(*obj),
        }
    }

    pub(super) fn clone_value(&self) -> Value {
        match self.value() {
            Ref::Str(s) => Value::Str(s.to_vec()),
            Ref::Obj(o) => Value::Obj(o.clone()),
        }
    }

    /// Run `f` on a string value as a `Vec` (a joined value in place, so
    /// APPEND stays amortized O(1)); the result goes inline when it fits.
    /// `None` for an aggregate.
    pub(super) fn update_str<R>(&mut self, f: impl FnOnce(&mut Vec<u8>) -> R) -> Option<R> {
        match self {
            Slot::Inline { klen, vlen, buf } => {
                let (k, buf) = (usize::from(*klen), *buf);
                let mut v = buf[k..k + usize::from(*vlen)].to_vec();
                let r = f(&mut v);
                *self = Slot::string_owned(&buf[..k], v);
                Some(r)
            }
            Slot::Joined { klen, kv } => {
                let key = kv.split_off(kv.len() - *klen as usize);
                let r = f(kv);
                if key.len() + kv.len() <= INLINE {
                    let v = std::mem::take(kv);
                    *self = Slot::string(&key, &v);
                } else {
                    kv.extend_from_slice(&key);
                }
                Some(r)
            }
            Slot::Obj { .. } | Slot::LongObj { .. } => None,
        }
    }
}

/// What glibc's malloc takes for a request of `n` bytes (0: none): 8
/// bytes of size header, rounded up to 16, at least 32.
pub(super) fn chunk(n: usize) -> u64 {
    if n == 0 {
        0
    } else {
        ((n + 8 + 15) & !15).max(32) as u64
    }
}

/// A borrowed value.
#[derive(Clone, Copy, Debug)]
pub enum Ref<'a> {
    Str(&'a [u8]),
    Obj(&'a Object),
}

/// One key (56 bytes). Its TTL is kept only in its `ttl` slot (Redis
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
    pub(super) slot: Slot,
}

impl Node {
    #[inline(always)]
    pub(super) fn key(&self) -> &[u8] {
        self.slot.key()
    }

    #[inline]
    pub(super) fn value(&self) -> Ref<'_> {
        self.slot.value()
    }
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
