//! A large value's RDB record written across many slices of the forkless
//! BGSAVE sweep (see [`crate::db`]'s `snapshot` module), so one hash of a
//! million fields does not stall the loop for the whole of its
//! serialization: [`begin`] writes the record's head (expire, type, key)
//! and [`step`] continues from an element cursor, a bounded number of
//! elements per call, until the record is complete.
//!
//! The cursor is an index into the value (dense dict entries, zset ranks,
//! list elements), valid only while the value does not change: the sweep
//! finishes the record (`step` with no budget) before any write touches
//! the key, so the bytes are exactly the value at snapshot start, and the
//! element count written up front (Redis's loader reads it first) is the
//! count at snapshot start too.
//!
//! The bytes are the same as [`super::save::put_kv`] writes for the value
//! in one go (a unit test compares them).

use super::save::{put_len, put_string, value_type, LIST_NODE_BYTES, LIST_NODE_ENTRIES};
use super::*;
use crate::db::Ref;
use crate::object::Object;
use crate::t_hash::HashObj;
use crate::t_set::SetObj;
use crate::zset::ZSet;

/// Values with more elements than this are written across slices;
/// smaller ones (and the compact encodings) in one go.
pub(crate) const BIG: usize = 1024;

/// Elements written per [`step`] call of the sweep (about the cost of the
/// sweep's [`crate::persist::SWEEP_STEP`] small keys).
pub(crate) const CHUNK: usize = 128;

/// Where the record is.
#[derive(Debug)]
enum At {
    /// Next dict entry / zset rank (counted from the top) written.
    Elems(usize),
    /// A list: counting its nodes (Redis's loader reads the node count
    /// first, and the packing depends on the element sizes), then writing
    /// them from element `next`.
    ListCount {
        next: usize,
        nodes: u64,
        in_node: usize,
        bytes: usize,
    },
    ListWrite(usize),
}

/// A record begun and not finished.
#[derive(Debug)]
pub(crate) struct Big {
    at: At,
    /// Elements of the value when its record began.
    len: usize,
    compress: bool,
}

/// Elements of a value written in the resumable encodings, or None for
/// the encodings written whole.
fn resumable_len(v: Ref<'_>) -> Option<usize> {
    match v {
        Ref::Obj(Object::Hash(HashObj::Table(d))) => Some(d.len()),
        Ref::Obj(Object::Set(SetObj::Table(d))) => Some(d.len()),
        Ref::Obj(Object::Zset(z @ ZSet::Large(_))) => Some(z.len()),
        Ref::Obj(Object::List(l)) => Some(l.len()),
        _ => None,
    }
}

/// If `v` is large, write its record's head into `out` and return the
/// state to continue it with [`step`]; None (nothing written) otherwise.
pub(crate) fn begin(
    out: &mut Vec<u8>,
    key: &[u8],
    v: Ref<'_>,
    expire: Option<i64>,
    compress: bool,
) -> Option<Big> {
    let len = resumable_len(v).filter(|&n| n > BIG)?;
    if let Some(t) = expire {
        out.push(OP_EXPIRETIME_MS);
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.push(value_type(v));
    put_string(out, key, compress);
    let at = if matches!(v, Ref::Obj(Object::List(_))) {
        At::ListCount {
            next: 0,
            nodes: 0,
            in_node: 0,
            bytes: 0,
        }
    } else {
        put_len(out, len as u64);
        At::Elems(0)
    };
    Some(Big { at, len, compress })
}

/// Continue the record with up to `budget` elements (`usize::MAX`: all
/// the rest); true once it is complete. `v` must be the value [`begin`]
/// saw, unchanged.
pub(crate) fn step(b: &mut Big, out: &mut Vec<u8>, v: Ref<'_>, budget: usize) -> bool {
    let (len, compress) = (b.len, b.compress);
    match (&mut b.at, v) {
        (At::Elems(next), Ref::Obj(Object::Hash(HashObj::Table(d)))) => {
            let end = next.saturating_add(budget).min(len);
            for i in *next..end {
                if let Some((f, val)) = d.entry(i) {
                    put_string(out, f, compress);
                    put_string(out, val, compress);
                }
            }
            *next = end;
            end >= len
        }
        (At::Elems(next), Ref::Obj(Object::Set(SetObj::Table(d)))) => {
            let end = next.saturating_add(budget).min(len);
            for i in *next..end {
                if let Some((m, _)) = d.entry(i) {
                    put_string(out, m, compress);
                }
            }
            *next = end;
            end >= len
        }
        (At::Elems(next), Ref::Obj(Object::Zset(z @ ZSet::Large(_)))) => {
            // Greatest to smallest, as `put_payload`: ranks
            // `len - end .. len - next`, top down.
            let end = next.saturating_add(budget).min(len);
            z.visit(len - end, len - *next, true, |m, s| {
                put_string(out, m, compress);
                out.extend_from_slice(&s.to_le_bytes());
            });
            *next = end;
            end >= len
        }
        (
            At::ListCount {
                next,
                nodes,
                in_node,
                bytes,
            },
            Ref::Obj(Object::List(l)),
        ) => {
            // Counting is cheaper than writing: more elements per call.
            let n = budget.saturating_mul(8).min(len - *next);
            for e in l.range(*next, n) {
                if *nodes > 0 && *in_node < LIST_NODE_ENTRIES && *bytes + e.len() <= LIST_NODE_BYTES
                {
                    *bytes += e.len() + 2;
                    *in_node += 1;
                } else {
                    *nodes += 1;
                    *in_node = 1;
                    *bytes = e.len() + 2;
                }
            }
            *next += n;
            if *next >= len {
                put_len(out, *nodes);
                b.at = At::ListWrite(0);
                if budget == usize::MAX {
                    return step(b, out, v, budget);
                }
            }
            false
        }
        (At::ListWrite(next), Ref::Obj(Object::List(l))) => {
            // Whole nodes only, packed as `put_payload` packs them.
            let mut it = l.range(*next, len - *next).peekable();
            let mut done = 0;
            let mut node: Vec<&[u8]> = Vec::with_capacity(LIST_NODE_ENTRIES);
            while done < budget {
                let Some(first) = it.next() else {
                    break;
                };
                node.clear();
                node.push(first);
                let mut bytes = first.len() + 2;
                while let Some(e) = it.peek() {
                    if node.len() < LIST_NODE_ENTRIES && bytes + e.len() <= LIST_NODE_BYTES {
                        bytes += e.len() + 2;
                        node.push(e);
                        it.next();
                    } else {
                        break;
                    }
                }
                done += node.len();
                put_len(out, QUICKLIST_PACKED);
                put_string(out, &blob::lp_build(node.iter().copied()), compress);
            }
            *next += done;
            *next >= len
        }
        // Not reachable while the value is unchanged: end the record
        // rather than loop (the file would fail its load checks).
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::quicklist::{Fill, Quicklist};

    fn whole(key: &[u8], v: Ref<'_>, e: Option<i64>, c: bool) -> Vec<u8> {
        let mut o = Vec::new();
        super::super::save::put_kv(&mut o, key, v, e, c);
        o
    }

    fn sliced(key: &[u8], v: Ref<'_>, e: Option<i64>, c: bool, budget: usize) -> Vec<u8> {
        let mut o = Vec::new();
        let mut b = begin(&mut o, key, v, e, c).unwrap();
        let mut calls = 0;
        while !step(&mut b, &mut o, v, budget) {
            calls += 1;
            assert!(calls < 1_000_000);
        }
        o
    }

    #[test]
    fn sliced_records_are_the_whole_ones() {
        let mut h = crate::dict::Dict::<Box<[u8]>>::new();
        let mut s = crate::dict::Dict::<()>::new();
        let mut z = ZSet::Large(Box::default());
        let zl = crate::zset::Limits::default();
        let mut l = Quicklist::new();
        for i in 0..5000u32 {
            let m = format!("member-{i}-{}", "x".repeat((i % 7) as usize * 9));
            h.insert(m.as_bytes(), i.to_string().into_bytes().into_boxed_slice());
            s.insert(m.as_bytes(), ());
            z.set(m.as_bytes(), f64::from(i) * 0.5 - 100.0, &zl);
            // Some elements big enough to close a node by bytes.
            let big = if i % 97 == 0 {
                "y".repeat(3000)
            } else {
                m.clone()
            };
            l.push_back(big.as_bytes(), Fill::Bytes(8192));
        }
        let h = Object::Hash(HashObj::Table(Box::new(h)));
        let s = Object::Set(SetObj::Table(Box::new(s)));
        let z = Object::Zset(z);
        let l = Object::List(l);
        for o in [&h, &s, &z, &l] {
            for (e, c) in [(None, false), (Some(1_700_000_000_000), true)] {
                let want = whole(b"key", Ref::Obj(o), e, c);
                for budget in [1, 7, CHUNK, usize::MAX] {
                    assert_eq!(sliced(b"key", Ref::Obj(o), e, c, budget), want);
                }
            }
        }
        let mut small = Vec::new();
        assert!(begin(&mut small, b"k", Ref::Str(b"v"), None, false).is_none());
        assert!(small.is_empty());
    }
}
