//! What the keyspace stores per key (Redis's `robj` and `dictEntry`
//! roles, merged): the [`Node`], whose [`Slot`] holds the key, the value
//! and one word of bookkeeping together, and the [`TtlRef`] of a key with
//! a TTL.
//!
//! Why key and value share one slot: a typical key with its short string
//! value fits 33 bytes, and a small aggregate's key fits 10 beside its
//! 24-byte object, so one 40-byte slot serves both where a key slot (24
//! bytes) beside a value slot (32) made a 72-byte node.
//! A string that does not fit keeps its value in an allocation of its
//! own and the key in the slot when the key has up to 18 bytes (`Split`:
//! the slot's room beside a boxed slice), else key and value in one
//! allocation, value first (`Joined`): one allocation per key either way.
//! A short key kept apart makes the allocation the value's exact size:
//! `key:%08d` with 100-byte values takes 112-byte malloc chunks instead of
//! 128 (Redis 7 counts 187 bytes a key of `used_memory` for that shape,
//! gyre 166), which at one `maxmemory` is more keys held and a higher
//! eviction hit ratio. A string changed in place (APPEND, SETRANGE,
//! INCRBYFLOAT past the inline size) becomes `Joined`, whose `Vec` keeps
//! spare capacity, so repeated APPENDs stay amortized O(1) as Redis's sds.
//!
//! Why the node is 48 bytes: its header is the hash and the chain link
//! (8 bytes), and the access clock or, for a key with a TTL, the index of
//! its TTL slot (whose spare 4 bytes then hold the clock) is one `u32`
//! inside the slot, in the room each variant leaves after its tag. With
//! the clock and the TTL index apart in the header the node was 56 bytes
//! (a million sets of ten integers: 108 bytes a key, 8 of them this).
//!
//! The trade-off: what fitted the 56-byte node's slot (37 bytes of key
//! and string, 14-byte aggregate keys) now takes an allocation when it
//! is over 33 or 10 bytes — a string whose key and value are 34 to 48
//! bytes together (a 48- or 64-byte chunk), an aggregate under a key of
//! 11 to 22 bytes (two 32-byte chunks). Keys of up to 10 bytes with small
//! aggregates, and strings of up to 33 bytes with their key, save 8 bytes
//! each; longer strings save 8 bytes too (their allocation is unchanged).

use crate::object::Object;

use super::NONE;

/// Key and string value together up to this many bytes live in the node.
pub(super) const INLINE: usize = 33;
/// Keys of aggregates up to this many bytes live in the node.
pub(super) const OBJ_KEY: usize = 10;
/// Keys of longer strings up to this many bytes live in the node, beside
/// the value's boxed slice.
pub(super) const SPLIT_KEY: usize = 18;
/// In a slot's `word`: the rest is the key's index in `ttl` (its access
/// clock is in that [`TtlRef`]); without it the word is the clock, which
/// keeps 31 bits ([`crate::evict`]).
pub(super) const HAS_TTL: u32 = 1 << 31;

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

/// A key, its value and its `word` (see the module notes; rustc lays
/// the byte fields out right after the tag, then the word, then what
/// needs 8-byte alignment, so every variant fits 40 bytes).
#[derive(Debug)]
pub(super) enum Slot {
    /// A string whose key and value fit together: `buf[..klen]` is the
    /// key, the `vlen` bytes after it the value.
    Inline {
        word: u32,
        klen: u8,
        vlen: u8,
        buf: [u8; INLINE],
    },
    /// A longer string under a short key: the key here, the value in an
    /// allocation of its exact size.
    Split {
        word: u32,
        klen: u8,
        key: [u8; SPLIT_KEY],
        val: Box<[u8]>,
    },
    /// A longer string under a longer key, or one changed in place: value
    /// then key (`klen` bytes) in one allocation.
    Joined { word: u32, klen: u32, kv: Vec<u8> },
    /// An aggregate under a short key.
    Obj {
        word: u32,
        klen: u8,
        key: [u8; OBJ_KEY],
        obj: Object,
    },
    /// An aggregate under a longer key (two allocations of its own: 32 +
    /// 32 bytes for a key up to 24 bytes, where one box holding both took
    /// 48 + 32).
    LongObj {
        word: u32,
        key: Box<[u8]>,
        obj: Box<Object>,
    },
}

impl Slot {
    pub(super) fn new(key: &[u8], v: New<'_>, word: u32) -> Slot {
        match v {
            New::Bytes(b) => Slot::string(key, b, word),
            New::Owned(Value::Str(s)) => Slot::string_owned(key, s, word),
            New::Owned(Value::Obj(o)) => Slot::obj(key, o, word),
        }
    }

    fn string(key: &[u8], val: &[u8], word: u32) -> Slot {
        let (k, n) = (key.len(), val.len());
        if k + n <= INLINE {
            let mut buf = [0; INLINE];
            buf[..k].copy_from_slice(key);
            buf[k..k + n].copy_from_slice(val);
            Slot::Inline {
                word,
                klen: k as u8,
                vlen: n as u8,
                buf,
            }
        } else if k <= SPLIT_KEY {
            Slot::split(key, val.into(), word)
        } else {
            let mut kv = Vec::with_capacity(n + k);
            kv.extend_from_slice(val);
            kv.extend_from_slice(key);
            Slot::Joined {
                word,
                klen: k as u32,
                kv,
            }
        }
    }

    /// A short key beside its (long) value's exact allocation.
    fn split(key: &[u8], val: Box<[u8]>, word: u32) -> Slot {
        let mut k = [0; SPLIT_KEY];
        k[..key.len()].copy_from_slice(key);
        Slot::Split {
            word,
            klen: key.len() as u8,
            key: k,
            val,
        }
    }

    /// A string from owned bytes: a long value keeps its allocation (the
    /// key beside it in the slot, or appended to it).
    fn string_owned(key: &[u8], mut val: Vec<u8>, word: u32) -> Slot {
        if key.len() + val.len() <= INLINE {
            return Slot::string(key, &val, word);
        }
        if key.len() <= SPLIT_KEY && val.len() == val.capacity() {
            return Slot::split(key, val.into_boxed_slice(), word);
        }
        val.reserve_exact(key.len());
        Slot::joined(key, val, word)
    }

    /// Value then key in the value's `Vec` (which keeps its spare room).
    fn joined(key: &[u8], mut val: Vec<u8>, word: u32) -> Slot {
        val.extend_from_slice(key);
        Slot::Joined {
            word,
            klen: key.len() as u32,
            kv: val,
        }
    }

    fn obj(key: &[u8], obj: Object, word: u32) -> Slot {
        if key.len() <= OBJ_KEY {
            let mut k = [0; OBJ_KEY];
            k[..key.len()].copy_from_slice(key);
            Slot::Obj {
                word,
                klen: key.len() as u8,
                key: k,
                obj,
            }
        } else {
            Slot::LongObj {
                word,
                key: key.into(),
                obj: Box::new(obj),
            }
        }
    }

    /// The access clock, or `HAS_TTL` and the TTL slot.
    #[inline(always)]
    pub(super) fn word(&self) -> u32 {
        match self {
            Slot::Inline { word, .. }
            | Slot::Split { word, .. }
            | Slot::Joined { word, .. }
            | Slot::Obj { word, .. }
            | Slot::LongObj { word, .. } => *word,
        }
    }

    #[inline(always)]
    pub(super) fn set_word(&mut self, w: u32) {
        *self.word_mut() = w;
    }

    /// The word in place (one match for a read-modify-write: every
    /// lookup touches the access clock).
    #[inline(always)]
    pub(super) fn word_mut(&mut self) -> &mut u32 {
        match self {
            Slot::Inline { word, .. }
            | Slot::Split { word, .. }
            | Slot::Joined { word, .. }
            | Slot::Obj { word, .. }
            | Slot::LongObj { word, .. } => word,
        }
    }

    #[inline(always)]
    pub(super) fn key(&self) -> &[u8] {
        match self {
            Slot::Inline { klen, buf, .. } => &buf[..usize::from(*klen)],
            Slot::Split { klen, key, .. } => &key[..usize::from(*klen)],
            Slot::Joined { klen, kv, .. } => &kv[kv.len() - *klen as usize..],
            Slot::Obj { klen, key, .. } => &key[..usize::from(*klen)],
            Slot::LongObj { key, .. } => key,
        }
    }

    #[inline]
    pub(super) fn value(&self) -> Ref<'_> {
        match self {
            Slot::Inline {
                klen, vlen, buf, ..
            } => {
                let k = usize::from(*klen);
                Ref::Str(&buf[k..k + usize::from(*vlen)])
            }
            Slot::Split { val, .. } => Ref::Str(val),
            Slot::Joined { klen, kv, .. } => Ref::Str(&kv[..kv.len() - *klen as usize]),
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
            Slot::Split { val, .. } => chunk(val.len()),
            Slot::Joined { kv, .. } => chunk(kv.capacity()),
            Slot::Obj { obj, .. } => chunk(obj.mem() as usize),
            Slot::LongObj { key, obj, .. } => {
                chunk(key.len()) + chunk(std::mem::size_of::<Object>()) + chunk(obj.mem() as usize)
            }
        }
    }

    /// Store `v` under the same key; the aggregate it replaced, if any
    /// (for [`super::Db::bury`]).
    pub(super) fn replace_value(&mut self, v: New<'_>) -> Option<Object> {
        // SET over a short string: the new bytes go in place, key untouched.
        if let (
            Slot::Inline {
                klen, vlen, buf, ..
            },
            New::Bytes(b),
        ) = (&mut *self, &v)
        {
            let k = usize::from(*klen);
            if k + b.len() <= INLINE {
                buf[k..k + b.len()].copy_from_slice(b);
                *vlen = b.len() as u8;
                return None;
            }
        }
        let new = Slot::new(self.key(), v, self.word());
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
            Slot::Inline {
                klen, vlen, buf, ..
            } => {
                let k = usize::from(klen);
                Value::Str(buf[k..k + usize::from(vlen)].to_vec())
            }
            Slot::Split { val, .. } => Value::Str(val.into_vec()),
            Slot::Joined { klen, mut kv, .. } => {
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
            Slot::Inline {
                word,
                klen,
                vlen,
                buf,
            } => {
                let (w, k, buf) = (*word, usize::from(*klen), *buf);
                let mut v = buf[k..k + usize::from(*vlen)].to_vec();
                let r = f(&mut v);
                // Grown in place: joined, so further growth is amortized.
                *self = if k + v.len() <= INLINE {
                    Slot::string(&buf[..k], &v, w)
                } else {
                    Slot::joined(&buf[..k], v, w)
                };
                Some(r)
            }
            Slot::Split {
                word,
                klen,
                key,
                val,
            } => {
                // Changed in place: a `Vec` with room to grow from now on.
                let (w, k, key) = (*word, usize::from(*klen), *key);
                let mut v = std::mem::take(val).into_vec();
                let r = f(&mut v);
                *self = if k + v.len() <= INLINE {
                    Slot::string(&key[..k], &v, w)
                } else {
                    Slot::joined(&key[..k], v, w)
                };
                Some(r)
            }
            Slot::Joined { word, klen, kv } => {
                let key = kv.split_off(kv.len() - *klen as usize);
                let r = f(kv);
                if key.len() + kv.len() <= INLINE {
                    let (w, v) = (*word, std::mem::take(kv));
                    *self = Slot::string(&key, &v, w);
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

/// One key (48 bytes). Its TTL is kept only in its `ttl` slot (Redis
/// keeps expires in a dict apart too): a key without one pays nothing for
/// it, and a lookup reads the slot only when the slot's word says there
/// is one. The access clock (Redis's `robj->lru`: the LRU clock, or under
/// an LFU policy minutes and a logarithmic counter, see [`crate::evict`])
/// is that word for a key without a TTL, and sits in the key's
/// [`TtlRef`] otherwise: one lookup touches one place either way (a
/// parallel vector of clocks cost a second cache line per lookup).
#[derive(Debug)]
pub(super) struct Node {
    /// 32 bits of the key's keyed hash ([`super::table`]): its bucket, and
    /// what removal and fix-ups go by without hashing the key again.
    pub(super) hash: u32,
    /// Next node in the same bucket (`NONE`: end of chain).
    pub(super) next: u32,
    pub(super) slot: Slot,
}

impl Node {
    /// Index in `ttl`, `NONE` without a TTL.
    #[inline(always)]
    pub(super) fn ttl_slot(&self) -> u32 {
        let w = self.slot.word();
        if w & HAS_TTL != 0 {
            w & !HAS_TTL
        } else {
            NONE
        }
    }

    #[inline(always)]
    pub(super) fn key(&self) -> &[u8] {
        self.slot.key()
    }

    #[inline]
    pub(super) fn value(&self) -> Ref<'_> {
        self.slot.value()
    }
}

/// A key with a TTL, as the expire cycle samples it (16 bytes: the
/// access clock fills what was padding).
#[derive(Clone, Copy, Debug)]
pub(super) struct TtlRef {
    pub(super) expire: i64,
    pub(super) node: u32,
    /// The key's access clock (see [`Node`]).
    pub(super) access: u32,
}

impl TtlRef {
    pub(super) const EMPTY: TtlRef = TtlRef {
        expire: super::NO_EXPIRE,
        node: NONE,
        access: 0,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word fits each variant's spare room: the node stays 48 bytes
    /// (see the module notes) and a TTL slot 16.
    #[test]
    fn node_is_48_bytes() {
        use std::mem::size_of;
        assert_eq!(size_of::<Slot>(), 40);
        assert_eq!(size_of::<Node>(), 48);
        assert_eq!(size_of::<TtlRef>(), 16);
    }
}
