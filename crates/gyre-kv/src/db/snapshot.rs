//! Point-in-time serialization of one database while it keeps changing:
//! the forkless background save (BGSAVE) and the plain walk SAVE uses.
//!
//! A sweep walks the dense node vector upwards from `cursor`, serializing
//! each node into `out` (RDB key/value records). Writes keep the snapshot
//! point-in-time with copy-before-write on *keys*, not pages: before a node
//! changes or is removed, its old value is saved first if the sweep has
//! not passed it, and its bit in `saved_bits` (one per node index) is set.
//! The invariant:
//!
//! * an old key at index `< cursor` has been saved;
//! * a key at index `>= cursor` has been saved iff its bit is set (keys
//!   created during the sweep are pushed with their bit set, so the sweep
//!   skips them).
//!
//! Removal moves the last node into the hole ([`Db::remove_at`]) and its
//! bit with it; if that carries an unsaved node below the cursor, it is
//! saved first.
//!
//! Why a bitmap by node index and not a set of the keys' hashes (as
//! before): the set grew with the writes ahead of the sweep, one entry
//! per key, and its growth rehashed it inside a command (measured: a
//! client's turn of 16 SETs took up to 5.7 ms instead of ~1.2 while a save
//! ran, at about 400,000 entries), and a write that inserted a key had to
//! save every other node of its hash first. The bitmap is one bit per key
//! (125 KiB for a million), allocated once when the sweep starts, and the
//! sweep reads it in order.
//!
//! A large value (a hash or set table, a skiplist zset, a quicklist of
//! over [`resume::BIG`] elements) is written across slices
//! ([`crate::rdb::resume`]; its RDB record, or an AOF rewrite's commands
//! for it): the sweep stops at it with the cursor *on* it
//! (`big`) and writes [`resume::CHUNK`] elements per step. Its record is
//! half-written in `out`, so records saved ahead of the sweep meanwhile
//! wait in `held` / `raw` until it is complete (the output stays a
//! sequence of whole records), and the driver drains only this database
//! meanwhile ([`Db::snapshot_in_record`]: no SELECTDB inside a record).
//! A write to the half-written key goes through [`Db::cow`] like any
//! write ahead of the sweep (the key is at the cursor), which finishes
//! the record at once before the write applies: a one-off cost bounded by
//! that key's size, paid only when that very key is written during its
//! few slices, and no copy of the value is kept.
//!
//! Extra memory is therefore the bitmap plus `out` and the raw copies
//! until the writer takes them, instead of one copied 4 KiB page per page
//! touched as with `fork()`; the cost is one `Option` test per write while
//! no sweep runs.

use super::*;
use crate::rdb::resume;
use crate::rdb::save::put_kv;

#[derive(Debug, Default)]
pub(crate) struct Sweep {
    cursor: usize,
    /// Bit `i`: node `i` (at or above the cursor) is saved or new.
    saved_bits: Bits,
    out: Vec<u8>,
    /// Old strings a write copied ahead of the sweep, raw (key length,
    /// key, value length, value, expire): the write only copies bytes;
    /// the next slices serialize and compress them
    /// ([`Db::snapshot_drain_some`]), a few at a time inside their time
    /// budget; `raw[..raw_off]` is done.
    raw: Vec<u8>,
    raw_off: usize,
    /// The large value being written across slices: its node (always
    /// the cursor) and where its record is.
    big: Option<(usize, resume::Big)>,
    /// Whole records saved ahead of the sweep while `big` is half-written.
    held: Vec<u8>,
    compress: bool,
    /// Records as AOF commands instead of RDB key/value pairs.
    aof: bool,
    /// Records written (swept plus saved before a write).
    pub(crate) saved: u64,
    /// Records saved ahead of the sweep because a write came first.
    pub(crate) copied: u64,
}

/// One bit per node index, growing with the node vector.
#[derive(Debug, Default)]
struct Bits(Vec<u64>);

impl Bits {
    fn with_len(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }

    #[inline]
    fn get(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    #[inline]
    fn set(&mut self, i: usize, on: bool) {
        let w = i / 64;
        if w >= self.0.len() {
            if !on {
                return;
            }
            self.0.resize((w + 1).next_power_of_two(), 0);
        }
        if on {
            self.0[w] |= 1 << (i % 64);
        } else {
            self.0[w] &= !(1 << (i % 64));
        }
    }
}

/// A string record in `Sweep::raw`'s layout.
fn put_raw(raw: &mut Vec<u8>, key: &[u8], val: &[u8], e: Option<i64>) {
    raw.extend_from_slice(&(key.len() as u32).to_le_bytes());
    raw.extend_from_slice(key);
    raw.extend_from_slice(&(val.len() as u32).to_le_bytes());
    raw.extend_from_slice(val);
    raw.extend_from_slice(&e.unwrap_or(-1).to_le_bytes());
}

/// Serialize up to `max` records of `raw` from offset `p` into `out`;
/// the offset after them.
fn drain_raw(
    raw: &[u8],
    mut p: usize,
    max: usize,
    out: &mut Vec<u8>,
    compress: bool,
    aof: bool,
) -> usize {
    fn take<'a>(raw: &'a [u8], p: &mut usize, n: usize) -> &'a [u8] {
        let b = raw.get(*p..*p + n).unwrap_or_default();
        *p += n;
        b
    }
    let len = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as usize;
    let mut n = 0;
    while p < raw.len() && n < max {
        n += 1;
        let kl = len(take(raw, &mut p, 4));
        let key = take(raw, &mut p, kl);
        let vl = len(take(raw, &mut p, 4));
        let val = take(raw, &mut p, vl);
        let e = i64::from_le_bytes(take(raw, &mut p, 8).try_into().unwrap_or([0xff; 8]));
        put_record(
            out,
            key,
            Ref::Str(val),
            (e >= 0).then_some(e),
            compress,
            aof,
        );
    }
    p
}

/// One key in the sweep's format.
#[inline]
fn put_record(
    out: &mut Vec<u8>,
    key: &[u8],
    v: Ref<'_>,
    e: Option<i64>,
    compress: bool,
    aof: bool,
) {
    if aof {
        crate::aof::rewrite::put_rewrite_kv(out, key, v, e);
    } else {
        put_kv(out, key, v, e, compress);
    }
}

impl Db {
    /// Every stored key: bytes, value, expire (ms).
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], Ref<'_>, Option<i64>)> {
        self.nodes.iter().map(|n| {
            (n.key(), n.value(), {
                let e = expire_of(&self.ttl, n);
                (e >= 0).then_some(e)
            })
        })
    }

    /// Make room for `keys` keys, `expires` of them with a TTL (the RDB
    /// loader's RESIZEDB hint, as Redis's `dictExpand`): growing the node
    /// vector and the map one doubling at a time was a third of loading.
    pub fn reserve(&mut self, keys: usize, expires: usize) {
        let keys = keys.saturating_sub(self.nodes.len());
        self.nodes.reserve(keys);
        self.table_reserve(self.nodes.len() + keys);
        self.ttl.reserve(expires.saturating_sub(self.ttl.len()));
    }

    /// Start a point-in-time sweep of this database.
    pub fn snapshot_begin(&mut self, compress: bool) {
        self.snapshot_begin_as(compress, false);
    }

    /// Start a sweep; `aof`: records as the commands of an AOF rewrite.
    pub fn snapshot_begin_as(&mut self, compress: bool, aof: bool) {
        self.snap = Some(Box::new(Sweep {
            compress,
            aof,
            saved_bits: Bits::with_len(self.nodes.len()),
            ..Sweep::default()
        }));
    }

    pub fn snapshot_active(&self) -> bool {
        self.snap.is_some()
    }

    /// Serialize up to `n` more nodes; true once the sweep has passed the
    /// end (the output may still hold records: [`Db::snapshot_take`]).
    pub fn snapshot_step(&mut self, n: usize) -> bool {
        let Some(s) = self.snap.as_mut() else {
            return true;
        };
        if let Some((p, b)) = s.big.as_mut() {
            let p = *p;
            let done = match self.nodes.get(p) {
                Some(node) => resume::step(b, &mut s.out, node.value(), resume::CHUNK),
                None => true,
            };
            if done {
                s.big = None;
                s.saved += 1;
                s.cursor = p + 1;
            }
            return false;
        }
        // After a FLUSHDB the cursor is past the (new, unsaved) keys.
        let start = s.cursor.min(self.nodes.len());
        let end = (start + n).min(self.nodes.len());
        for (i, node) in self.nodes[start..end].iter().enumerate() {
            if !s.saved_bits.get(start + i) {
                let e = expire_of(&self.ttl, node);
                let e = (e >= 0).then_some(e);
                let (key, v) = (node.key(), node.value());
                if let Some(b) = resume::begin(&mut s.out, key, v, e, s.compress, s.aof) {
                    s.big = Some((start + i, b));
                    s.cursor = start + i;
                    return false;
                }
                put_record(&mut s.out, key, v, e, s.compress, s.aof);
                s.saved += 1;
            }
        }
        s.cursor = s.cursor.max(end);
        s.cursor >= self.nodes.len()
    }

    /// Bytes of records produced so far (taken out).
    pub fn snapshot_take(&mut self) -> Vec<u8> {
        let mut v = Vec::new();
        self.snapshot_drain_into(&mut v);
        v
    }

    /// Move the records produced so far to the end of `out` (the output
    /// keeps its capacity for the next ones).
    pub fn snapshot_drain_into(&mut self, out: &mut Vec<u8>) {
        self.snapshot_drain_some(out, usize::MAX);
    }

    /// [`Db::snapshot_drain_into`] with at most `max_copies` of the old
    /// strings copied ahead of the sweep serialized (the costly part:
    /// compression), so a slice can keep to its time budget however
    /// many writes came since the last one. Returns the copies' bytes
    /// still waiting that could have been drained (none while a big
    /// record is half-written: they wait for it).
    pub fn snapshot_drain_some(&mut self, out: &mut Vec<u8>, max_copies: usize) -> usize {
        let Some(s) = self.snap.as_mut() else {
            return 0;
        };
        out.extend_from_slice(&s.out);
        s.out.clear();
        if s.big.is_some() {
            return 0;
        }
        out.extend_from_slice(&s.held);
        s.held.clear();
        if s.raw_off < s.raw.len() {
            s.raw_off = drain_raw(&s.raw, s.raw_off, max_copies, out, s.compress, s.aof);
            if s.raw_off >= s.raw.len() {
                s.raw.clear();
                s.raw_off = 0;
            } else if s.raw_off >= 64 * 1024 && s.raw_off * 2 >= s.raw.len() {
                // Writes keep appending: give the drained front back.
                s.raw.drain(..s.raw_off);
                s.raw_off = 0;
            }
        }
        s.raw.len() - s.raw_off
    }

    /// Records saved so far by the running sweep.
    pub fn snapshot_saved(&self) -> u64 {
        self.snap.as_ref().map_or(0, |s| s.saved)
    }

    /// Bytes waiting in the output (raw copies included).
    pub fn snapshot_pending(&self) -> usize {
        self.snap.as_ref().map_or(0, |s| {
            s.out.len()
                + if s.big.is_some() {
                    0
                } else {
                    s.raw.len() - s.raw_off + s.held.len()
                }
        })
    }

    /// A large value's record is half-written: the output must get this
    /// database's records only until it is complete.
    pub fn snapshot_in_record(&self) -> bool {
        self.snap.as_ref().is_some_and(|s| s.big.is_some())
    }

    /// End the sweep; (records saved, of which saved before a write).
    pub fn snapshot_end(&mut self) -> (u64, u64) {
        self.snap.take().map_or((0, 0), |s| (s.saved, s.copied))
    }

    /// Before node `i` changes or goes: save its old value if the sweep
    /// has not (a node below the cursor is saved already, or new).
    #[inline]
    pub(super) fn cow(&mut self, i: usize) {
        if self
            .snap
            .as_ref()
            .is_some_and(|s| i >= s.cursor && !s.saved_bits.get(i))
        {
            self.cow_slow(i);
        }
    }

    #[cold]
    fn cow_slow(&mut self, i: usize) {
        let (Some(s), Some(n)) = (self.snap.as_mut(), self.nodes.get(i)) else {
            return;
        };
        s.saved_bits.set(i, true);
        s.saved += 1;
        s.copied += 1;
        if s.big.as_ref().is_some_and(|(p, _)| *p == i) {
            // The half-written key: finish its record now.
            if let Some((_, mut b)) = s.big.take() {
                resume::step(&mut b, &mut s.out, n.value(), usize::MAX);
            }
            return;
        }
        let e = expire_of(&self.ttl, n);
        let e = (e >= 0).then_some(e);
        let sink = if s.big.is_some() {
            &mut s.held
        } else {
            &mut s.out
        };
        match n.value() {
            Ref::Str(v) => put_raw(&mut s.raw, n.key(), v, e),
            v => put_record(sink, n.key(), v, e, s.compress, s.aof),
        }
    }

    /// A key was pushed at node `i` during a sweep: the sweep skips it.
    #[inline]
    pub(super) fn cow_new(&mut self, i: usize) {
        if let Some(s) = self.snap.as_mut() {
            if i >= s.cursor {
                s.saved_bits.set(i, true);
            }
        }
    }

    /// Node `i` is about to be removed and the last node moved into its
    /// slot: save what would otherwise be lost or skipped, and move the
    /// last node's bit with it.
    pub(super) fn cow_remove(&mut self, i: usize) {
        let Some(cursor) = self.snap.as_ref().map(|s| s.cursor) else {
            return;
        };
        self.cow(i);
        let last = self.nodes.len() - 1;
        if i < cursor && last >= cursor {
            self.cow(last);
        }
        if let Some(s) = self.snap.as_mut() {
            let moved = s.saved_bits.get(last);
            s.saved_bits.set(i, moved);
            s.saved_bits.set(last, false);
        }
    }

    /// Before the whole database goes (FLUSHDB): finish the sweep.
    pub(super) fn cow_all(&mut self) {
        while self.snap.is_some() && !self.snapshot_step(4096) {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::object::{Limits, Object};
    use crate::rdb::save::{put_header, put_select, Aux};
    use crate::t_hash::HashObj;

    fn strings(db: &Db) -> Vec<(Vec<u8>, Vec<u8>, Option<i64>)> {
        let mut v: Vec<_> = db
            .entries()
            .map(|(k, v, e)| match v {
                Ref::Str(s) => (k.to_vec(), s.to_vec(), e),
                Ref::Obj(_) => (k.to_vec(), b"<obj>".to_vec(), e),
            })
            .collect();
        v.sort();
        v
    }

    /// Writes of every kind during a sweep; the records must be exactly
    /// the database as it was when the sweep began (the loader refuses
    /// duplicate keys, so a key saved twice fails too).
    fn sweep_is_point_in_time(mask: u64, seed: u64) {
        let mut db = Db::new(seed);
        db.hash_mask = mask;
        let mut rng = Rng::new(seed);
        for i in 0..500 {
            db.set(format!("k{i}").as_bytes(), vec![b'a'; i % 40], false);
            if i % 3 == 0 {
                db.set_expire(format!("k{i}").as_bytes(), 10_000 + i as i64);
            }
        }
        let before = strings(&db);
        db.snapshot_begin(false);
        let mut out = Vec::new();
        put_header(
            &mut out,
            &Aux {
                ctime_secs: 0,
                used_mem: 0,
                aof_base: false,
            },
        );
        put_select(&mut out, 0, db.len(), db.expires_len());
        let mut steps = 0;
        loop {
            for _ in 0..rng.below(6) {
                let k = format!("k{}", rng.below(800)).into_bytes();
                match rng.below(6) {
                    0 => db.set(&k, b"new".to_vec(), rng.below(2) == 0),
                    1 => {
                        db.remove(&k);
                    }
                    2 => {
                        db.set_expire(&k, 50_000);
                    }
                    3 => {
                        db.remove_expire(&k);
                    }
                    4 => {
                        db.update_value(&k, 0, |v| v.push(b'z'));
                    }
                    _ => {
                        db.rename(&k, format!("r{}", rng.below(50)).as_bytes());
                    }
                }
            }
            steps += 1;
            let done = db.snapshot_step(7);
            out.extend_from_slice(&db.snapshot_take());
            if done {
                break;
            }
        }
        assert!(steps > 10);
        db.snapshot_end();
        out.push(crate::rdb::OP_EOF);
        out.extend_from_slice(&[0; 8]);
        let mut back = [Db::new(1)];
        crate::rdb::load::load(&out[..], &mut back, &Limits::default(), 0, true).unwrap();
        assert_eq!(strings(&back[0]), before);
        assert!(db.check_invariants());
    }

    #[test]
    fn a_sweep_saves_the_keyspace_as_it_was() {
        for seed in 1..6 {
            sweep_is_point_in_time(u64::MAX, seed);
        }
    }

    #[test]
    fn a_sweep_with_colliding_hashes() {
        sweep_is_point_in_time(0b111, 7);
        sweep_is_point_in_time(0, 8);
    }

    /// Every key as text, hash fields sorted.
    fn dump(db: &Db) -> Vec<String> {
        let mut v: Vec<String> = db
            .entries()
            .map(|(k, v, e)| {
                let body = match v {
                    Ref::Str(s) => format!("{s:?}"),
                    Ref::Obj(Object::Hash(HashObj::Table(d))) => {
                        let mut f: Vec<_> =
                            d.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                        f.sort();
                        format!("{f:?}")
                    }
                    Ref::Obj(_) => "<other>".to_string(),
                };
                format!("{:?} {e:?} {body}", k)
            })
            .collect();
        v.sort();
        v
    }

    /// Large hashes are written across steps; a write to the half-written
    /// one (and to others, and removals moving nodes) mid-record leaves
    /// the records the database at sweep start, in whole records.
    /// An AOF rewrite's commands (SET, HMSET, PEXPIREAT) replayed into
    /// [`dump`]'s text.
    fn replay(mut b: &[u8]) -> Vec<String> {
        use std::collections::BTreeMap;
        fn line<'a>(b: &mut &'a [u8]) -> &'a [u8] {
            let n = b.windows(2).position(|w| w == b"\r\n").unwrap();
            let l = &b[..n];
            *b = &b[n + 2..];
            l
        }
        fn num(l: &[u8]) -> usize {
            std::str::from_utf8(l).unwrap().parse().unwrap()
        }
        let mut strs: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut hashes: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>> = BTreeMap::new();
        let mut exp: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        while !b.is_empty() {
            let n = num(&line(&mut b)[1..]);
            let mut args = Vec::new();
            for _ in 0..n {
                let len = num(&line(&mut b)[1..]);
                args.push(b[..len].to_vec());
                b = &b[len + 2..];
            }
            match args[0].as_slice() {
                b"SET" => assert!(strs.insert(args[1].clone(), args[2].clone()).is_none()),
                b"HMSET" => {
                    let h = hashes.entry(args[1].clone()).or_default();
                    for fv in args[2..].chunks(2) {
                        assert!(h.insert(fv[0].clone(), fv[1].clone()).is_none());
                    }
                }
                b"PEXPIREAT" => {
                    let ms = num(&args[2]) as i64;
                    assert!(exp.insert(args[1].clone(), ms).is_none());
                }
                c => panic!("{}", String::from_utf8_lossy(c)),
            }
        }
        let mut v: Vec<String> = strs
            .iter()
            .map(|(k, s)| format!("{k:?} {:?} {s:?}", exp.get(k)))
            .chain(hashes.iter().map(|(k, h)| {
                let f: Vec<(Vec<u8>, Vec<u8>)> = h.clone().into_iter().collect();
                format!("{k:?} {:?} {f:?}", exp.get(k))
            }))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn big_values_are_written_across_steps_and_finished_before_a_write() {
        big_values_across_steps(false);
    }

    /// The same for an AOF rewrite without the RDB preamble: a big key's
    /// commands are written a few at a time too.
    #[test]
    fn big_values_of_an_aof_rewrite_are_written_across_steps() {
        big_values_across_steps(true);
    }

    fn big_values_across_steps(aof: bool) {
        for write_at in [None, Some(2), Some(5), Some(30), Some(60)] {
            let mut db = Db::new(5);
            for (name, n) in [("h1", 3000), ("h2", 5000)] {
                let mut d = crate::dict::Pairs::new();
                for i in 0..n {
                    d.insert(format!("f{i}").as_bytes(), b"v");
                }
                let p = db.probe(name.as_bytes(), 0);
                db.insert_obj(
                    p,
                    name.as_bytes(),
                    Object::Hash(HashObj::Table(Box::new(d))),
                );
            }
            db.set_expire(b"h2", 9_000_000);
            for i in 0..40 {
                db.set(format!("k{i}").as_bytes(), b"old".to_vec(), false);
            }
            let before = dump(&db);
            db.snapshot_begin_as(false, aof);
            let mut out = Vec::new();
            if !aof {
                put_header(
                    &mut out,
                    &Aux {
                        ctime_secs: 0,
                        used_mem: 0,
                        aof_base: false,
                    },
                );
                put_select(&mut out, 0, db.len(), db.expires_len());
            }
            let (mut steps, mut in_record) = (0, 0);
            loop {
                if Some(steps) == write_at || write_at.is_some_and(|w| steps == w + 40) {
                    // h2 first: while h1 is half-written, h2's whole
                    // record must wait (held), not land inside h1's.
                    for name in [&b"h2"[..], b"h1"] {
                        let p = db.probe(name, 0);
                        db.update_obj(&p, |o| {
                            if let Object::Hash(HashObj::Table(d)) = o {
                                d.insert(b"f7", b"new");
                                d.remove(b"f8");
                                d.insert(b"brand-new", b"x");
                            }
                        });
                    }
                    db.remove(b"k3");
                    db.set(b"k5", b"new".to_vec(), false);
                    db.remove_expire(b"h2");
                }
                steps += 1;
                let done = db.snapshot_step(3);
                in_record += usize::from(db.snapshot_in_record());
                db.snapshot_drain_into(&mut out);
                if done {
                    break;
                }
                assert!(steps < 100_000);
            }
            if write_at.is_none() {
                assert!(in_record > 50, "{in_record}");
            }
            db.snapshot_end();
            assert!(db.check_invariants());
            if aof {
                assert_eq!(replay(&out), before, "write at {write_at:?}");
                continue;
            }
            out.push(crate::rdb::OP_EOF);
            out.extend_from_slice(&[0; 8]);
            let mut back = [Db::new(1)];
            crate::rdb::load::load(&out[..], &mut back, &Limits::default(), 0, true).unwrap();
            assert_eq!(dump(&back[0]), before, "write at {write_at:?}");
        }
    }

    /// Old values copied ahead of the sweep are serialized a few at a
    /// time when asked (a slice's budget), and all of them end up saved.
    #[test]
    fn copies_drain_a_few_at_a_time() {
        let mut db = Db::new(4);
        for i in 0..100 {
            db.set(format!("k{i}").as_bytes(), b"old".to_vec(), false);
        }
        let before = strings(&db);
        db.snapshot_begin(false);
        for i in 0..100 {
            db.set(format!("k{i}").as_bytes(), b"new".to_vec(), false);
        }
        let mut out = Vec::new();
        put_header(
            &mut out,
            &Aux {
                ctime_secs: 0,
                used_mem: 0,
                aof_base: false,
            },
        );
        put_select(&mut out, 0, 100, 0);
        let mut calls = 1;
        let mut left = db.snapshot_drain_some(&mut out, 10);
        while left > 0 {
            let l = db.snapshot_drain_some(&mut out, 10);
            assert!(l < left);
            left = l;
            calls += 1;
        }
        assert_eq!(calls, 10);
        assert!(db.snapshot_step(1000));
        db.snapshot_drain_into(&mut out);
        assert_eq!(db.snapshot_end(), (100, 100));
        out.push(crate::rdb::OP_EOF);
        out.extend_from_slice(&[0; 8]);
        let mut back = [Db::new(1)];
        crate::rdb::load::load(&out[..], &mut back, &Limits::default(), 0, true).unwrap();
        assert_eq!(strings(&back[0]), before);
    }

    #[test]
    fn flush_during_a_sweep_saves_the_rest_first() {
        let mut db = Db::new(3);
        for i in 0..100 {
            db.set(format!("k{i}").as_bytes(), b"v".to_vec(), false);
        }
        db.snapshot_begin(false);
        db.snapshot_step(10);
        db.flush();
        db.set(b"after", b"x".to_vec(), false);
        assert!(db.snapshot_step(10));
        assert_eq!(db.snapshot_end().0, 100);
    }
}
