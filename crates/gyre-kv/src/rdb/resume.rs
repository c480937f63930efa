//! A large value's record written across many slices of the forkless
//! sweep (see [`crate::db`]'s `snapshot` module), so one hash of a
//! million fields does not stall the loop for the whole of its
//! serialization: [`begin`] writes the record's head (expire, type, key)
//! and [`step`] continues from an element cursor, a bounded number of
//! elements per call, until the record is complete. The same for an AOF
//! rewrite without the RDB preamble: the record is then the commands that
//! rebuild the key ([`crate::aof::rewrite::put_rewrite_part`], whole
//! commands of up to 64 elements per step, the `PEXPIREAT` last).
//!
//! The cursor is an index into the value (dense dict entries, zset ranks,
//! list elements), valid only while the value does not change: the sweep
//! finishes the record (`step` with no budget) before any write touches
//! the key, so the bytes are exactly the value at snapshot start, and the
//! element count written up front (Redis's loader reads it first) is the
//! count at snapshot start too.
//!
//! The bytes are the same as [`super::save::put_kv`] (or
//! [`crate::aof::rewrite::put_rewrite_kv`]) writes for the value in one go
//! (a unit test compares them).

use super::save::{put_len, put_string, value_type, NodePacker};
use super::*;
use crate::aof::rewrite::{put_rewrite_expire, put_rewrite_part};
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
    /// Next dict entry / zset rank (counted from the top; from the bottom
    /// in an AOF) / list element (AOF) written.
    Elems(usize),
    /// A list: counting its nodes (Redis's loader reads the node count
    /// first, and the packing depends on the element sizes), then writing
    /// them from element `next`.
    ListCount {
        next: usize,
        nodes: u64,
        packer: NodePacker,
    },
    ListWrite(usize),
}

/// What the record is made of.
#[derive(Debug)]
enum Format {
    /// An RDB key/value record.
    Rdb { compress: bool },
    /// AOF commands; every one names the key, and the expire comes last.
    Aof { key: Box<[u8]>, expire: Option<i64> },
}

/// A record begun and not finished.
#[derive(Debug)]
pub(crate) struct Big {
    at: At,
    /// Elements of the value when its record began.
    len: usize,
    fmt: Format,
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

/// If `v` is large, write its record's head into `out` (nothing for AOF
/// commands) and return the state to continue it with [`step`]; None
/// (nothing written) otherwise.
pub(crate) fn begin(
    out: &mut Vec<u8>,
    key: &[u8],
    v: Ref<'_>,
    expire: Option<i64>,
    compress: bool,
    aof: bool,
) -> Option<Big> {
    let len = resumable_len(v).filter(|&n| n > BIG)?;
    if aof {
        return Some(Big {
            at: At::Elems(0),
            len,
            fmt: Format::Aof {
                key: key.into(),
                expire,
            },
        });
    }
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
            packer: NodePacker::default(),
        }
    } else {
        put_len(out, len as u64);
        At::Elems(0)
    };
    Some(Big {
        at,
        len,
        fmt: Format::Rdb { compress },
    })
}

/// Continue the record with up to `budget` elements (`usize::MAX`: all
/// the rest); true once it is complete. `v` must be the value [`begin`]
/// saw, unchanged.
pub(crate) fn step(b: &mut Big, out: &mut Vec<u8>, v: Ref<'_>, budget: usize) -> bool {
    let len = b.len;
    let compress = match &b.fmt {
        Format::Rdb { compress } => *compress,
        Format::Aof { key, expire } => {
            let (At::Elems(next), Ref::Obj(o)) = (&mut b.at, v) else {
                return true;
            };
            *next = put_rewrite_part(out, key, o, *next, len, budget);
            if *next < len.min(o.len()) {
                return false;
            }
            if let Some(ms) = *expire {
                put_rewrite_expire(out, key, ms);
            }
            return true;
        }
    };
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
                packer,
            },
            Ref::Obj(Object::List(l)),
        ) => {
            // Counting is cheaper than writing: more elements per call.
            let n = budget.saturating_mul(8).min(len - *next);
            for e in l.range(*next, n) {
                if packer.starts_node(e.len()) {
                    *nodes += 1;
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
            // Whole nodes only, cut as `put_payload` cuts them.
            let mut it = l.range(*next, len - *next).peekable();
            let mut done = 0;
            let mut node: Vec<&[u8]> = Vec::with_capacity(128);
            while done < budget {
                let Some(first) = it.next() else {
                    break;
                };
                let mut packer = NodePacker::default();
                packer.starts_node(first.len());
                node.clear();
                node.push(first);
                while let Some(e) = it.peek() {
                    if packer.starts_node(e.len()) {
                        break;
                    }
                    node.push(e);
                    it.next();
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
        sliced_as(key, v, e, c, false, budget)
    }

    fn sliced_as(
        key: &[u8],
        v: Ref<'_>,
        e: Option<i64>,
        c: bool,
        aof: bool,
        budget: usize,
    ) -> Vec<u8> {
        let mut o = Vec::new();
        let mut b = begin(&mut o, key, v, e, c, aof).unwrap();
        let mut calls = 0;
        while !step(&mut b, &mut o, v, budget) {
            calls += 1;
            assert!(calls < 1_000_000);
        }
        o
    }

    #[test]
    fn sliced_records_are_the_whole_ones() {
        let mut h = crate::dict::Pairs::new();
        let mut s = crate::dict::Dict::<()>::new();
        let mut z = ZSet::Large(Box::default());
        let zl = crate::zset::Limits::default();
        let mut l = Quicklist::new();
        for i in 0..5000u32 {
            let m = format!("member-{i}-{}", "x".repeat((i % 7) as usize * 9));
            h.insert(m.as_bytes(), i.to_string().as_bytes());
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
        assert!(begin(&mut small, b"k", Ref::Str(b"v"), None, false, false).is_none());
        assert!(begin(&mut small, b"k", Ref::Str(b"v"), None, false, true).is_none());
        assert!(small.is_empty());

        // AOF commands: sliced at any budget, the commands of a whole
        // rewrite, and those are Redis's (64 elements per command, in
        // the value's order, PEXPIREAT last), built here independently.
        let e = Some(1_700_000_000_000);
        for (o, cmd, width) in [
            (&h, "HMSET", 2),
            (&s, "SADD", 1),
            (&z, "ZADD", 2),
            (&l, "RPUSH", 1),
        ] {
            let mut items: Vec<Vec<u8>> = Vec::new();
            match o {
                Object::Hash(HashObj::Table(d)) => d.iter().for_each(|(f, v)| {
                    items.push(f.to_vec());
                    items.push(v.to_vec());
                }),
                Object::Set(SetObj::Table(d)) => d.iter().for_each(|(m, _)| items.push(m.to_vec())),
                Object::Zset(z) => z.visit(0, z.len(), false, |m, sc| {
                    items.push(crate::zset::score::format(sc).into_bytes());
                    items.push(m.to_vec());
                }),
                Object::List(l) => l.iter().for_each(|x| items.push(x.to_vec())),
                _ => unreachable!(),
            }
            let mut want = Vec::new();
            for batch in items.chunks(64 * width) {
                let mut args: Vec<&[u8]> = vec![cmd.as_bytes(), b"key"];
                args.extend(batch.iter().map(Vec::as_slice));
                crate::aof::propagate::cat_command(&mut want, &args);
            }
            crate::aof::propagate::cat_command(
                &mut want,
                &[b"PEXPIREAT", b"key", b"1700000000000"],
            );
            let mut whole = Vec::new();
            crate::aof::rewrite::put_rewrite_kv(&mut whole, b"key", Ref::Obj(o), e);
            assert_eq!(whole, want, "{cmd}");
            for budget in [1, 7, 64, CHUNK, usize::MAX] {
                assert_eq!(
                    sliced_as(b"key", Ref::Obj(o), e, false, true, budget),
                    want,
                    "{cmd} {budget}"
                );
            }
        }
    }
}
