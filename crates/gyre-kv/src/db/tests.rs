#![allow(clippy::unwrap_used)]
use super::*;
use std::collections::HashMap;

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

/// Keys inserted, removed and looked up while the table grows a few
/// chains per insert: every key stays findable in the array its bucket
/// says, at every step (colliding hashes too).
#[test]
fn the_table_grows_incrementally() {
    for mask in [u64::MAX, 0xff, 0] {
        let mut db = Db::new(5);
        db.hash_mask = mask;
        let n = if mask == 0 { 300 } else { 3000 };
        for i in 0..n {
            db.set(format!("k{i}").as_bytes(), b"v".to_vec(), false);
            if i % 3 == 0 {
                assert!(db.remove(format!("k{}", i / 2).as_bytes()) || i / 2 % 3 == 0 || i == 0);
            }
            if i < 700 || i % 97 == 0 {
                assert!(db.check_invariants(), "mask {mask:#x} step {i}");
            }
        }
        let live = (0..n).filter(|i| db.find(format!("k{i}").as_bytes()).is_some());
        assert_eq!(live.count(), db.len());
    }
}

/// A long string under a key of up to 18 bytes keeps the key in the
/// slot and the value in an allocation of its own size (112-byte chunk for
/// 100 bytes, where value and key together took 128), and `used_memory`
/// counts that; a longer key joins the value's allocation; a string grown
/// in place (APPEND) is joined, keeping spare room.
#[test]
fn short_keys_of_long_strings_stay_in_the_slot() {
    let mut db = Db::new(1);
    db.set(b"key:00000001", vec![b'v'; 100], false);
    assert!(matches!(db.nodes[0].slot, Slot::Split { .. }));
    assert_eq!(db.used_memory(), ENTRY_OVERHEAD + 112);
    assert_eq!(db.nodes[0].key(), b"key:00000001");
    assert_eq!(
        db.lookup_write(b"key:00000001", 0).unwrap().str().unwrap(),
        &[b'v'; 100][..]
    );
    let key19 = b"key:000000000000002";
    db.set(key19, vec![b'v'; 100], false);
    assert!(matches!(db.nodes[1].slot, Slot::Joined { .. }));
    assert_eq!(db.used_memory(), 2 * ENTRY_OVERHEAD + 112 + 128);
    db.update_value(b"key:00000001", 0, |v| v.extend_from_slice(b"xyz"));
    assert!(matches!(db.nodes[0].slot, Slot::Joined { .. }));
    assert_eq!(
        db.lookup_write(b"key:00000001", 0)
            .unwrap()
            .str()
            .unwrap()
            .len(),
        103
    );
    assert_eq!(db.nodes[0].key(), b"key:00000001");
    db.set(b"key:00000001", b"short".to_vec(), false);
    assert!(matches!(db.nodes[0].slot, Slot::Inline { .. }));
    assert_eq!(db.used_memory(), 2 * ENTRY_OVERHEAD + 128);
    assert!(db.check_invariants());
}

#[test]
fn inline_values_grow_to_heap_and_back() {
    let mut db = Db::new(1);
    db.set(b"k", vec![b'a'; node::INLINE - 1], false);
    assert!(matches!(db.nodes[0].slot, Slot::Inline { .. }));
    db.update_value(b"k", 0, |v| v.push(b'b'));
    assert!(matches!(db.nodes[0].slot, Slot::Joined { .. }));
    assert_eq!(
        db.lookup_write(b"k", 0).unwrap().str().unwrap().len(),
        node::INLINE
    );
    // APPEND-like growth keeps the key and the value apart.
    for _ in 0..100 {
        db.update_value(b"k", 0, |v| v.extend_from_slice(b"xyz"));
    }
    let v = db.lookup_write(b"k", 0).unwrap().str().unwrap().to_vec();
    let n = node::INLINE - 1;
    assert_eq!(v.len(), n + 301);
    assert!(
        v.starts_with(&[b'a'; node::INLINE - 1])
            && &v[n..n + 4] == b"bxyz"
            && v.ends_with(b"xyzxyz")
    );
    assert_eq!(db.nodes[0].key(), b"k");
    db.update_value(b"k", 0, |v| v.truncate(2));
    assert_eq!(db.lookup_write(b"k", 0).unwrap().str().unwrap(), b"aa");
    assert!(matches!(db.nodes[0].slot, Slot::Inline { .. }));
    let long = vec![b'k'; 40];
    db.set(&long, b"v".to_vec(), false);
    assert!(matches!(db.nodes[1].slot, Slot::Joined { .. }));
    assert_eq!(db.lookup_write(&long, 0).unwrap().str().unwrap(), b"v");
    assert_eq!(
        db.random_key(0).map(|k| k.len() == 1 || k == long),
        Some(true)
    );
    assert!(db.check_invariants());
}

/// Every slot form stores, reads back, overwrites into another form,
/// renames and copies, with `used_memory` back to zero at the end.
#[test]
fn slot_forms_round_trip() {
    use crate::t_set::SetObj;
    let mut db = Db::new(2);
    let short_obj = |n: i64| {
        let mut s = SetObj::for_member(b"1");
        for i in 0..n {
            s.add(i.to_string().as_bytes(), &crate::object::Limits::default());
        }
        Object::Set(s)
    };
    let keys: [&[u8]; 4] = [b"", b"ten-bytes!", b"eleven-byte", &[b'q'; 300]];
    for (n, k) in keys.iter().enumerate() {
        for v in [&b""[..], b"x", &[b'v'; node::INLINE], &[b'w'; 1000]] {
            db.set(k, v.to_vec(), false);
            assert_eq!(db.lookup_write(k, 0).unwrap().str().unwrap(), v);
            assert_eq!(db.nodes[db.find(k).unwrap()].key(), *k);
        }
        let p = db.probe(k, 0);
        db.store(p, k, New::Owned(Value::Obj(short_obj(n as i64 + 3))), false);
        let e = db.lookup_write(k, 0).unwrap();
        assert!(matches!(e.value, Ref::Obj(o) if o.len() == n + 3));
        assert_eq!(db.nodes[db.find(k).unwrap()].key(), *k);
    }
    assert!(db.check_invariants());
    for k in keys {
        let mut to = k.to_vec();
        to.extend_from_slice(b"-renamed-to-something-longer");
        assert!(db.rename(k, &to));
        let (c, _) = db.copy_out(&to, 0).unwrap();
        db.store_copy(b"c", c, None);
        assert!(db.lookup_write(b"c", 0).is_some());
        assert!(db.delete(&to, 0) && db.delete(b"c", 0));
    }
    assert!(db.check_invariants() && db.is_empty());
    assert_eq!(db.used_memory(), 0);
}

/// The longest single insert while 2^21 keys go in (growing the table
/// relinks a few chains per insert, never all of them), release build:
/// `cargo test --release -p gyre-kv --lib db::tests::measure_growth -- --ignored --nocapture`
#[test]
#[ignore]
fn measure_growth() {
    let mut db = Db::new(1);
    let mut worst = (std::time::Duration::ZERO, 0);
    for i in 0..(1usize << 21) {
        let k = format!("key:{i:012}");
        let t = std::time::Instant::now();
        db.set(k.as_bytes(), b"v".to_vec(), false);
        let e = t.elapsed();
        if e > worst.0 {
            worst = (e, i);
        }
    }
    println!("longest insert {:?} at key {}", worst.0, worst.1);
}

/// An aggregate of `n` members `member:0..` of `kind` (0 hash, 1 set,
/// 2 sorted set, 3 list).
fn big_aggregate(kind: usize, n: usize) -> Object {
    use crate::quicklist::{Fill, Quicklist};
    use crate::t_hash::HashObj;
    use crate::t_set::SetObj;
    use crate::zset::{Limits as ZLimits, ZSet};
    let lim = crate::object::Limits::default();
    let m = |i: usize| format!("member:{i}").into_bytes();
    match kind {
        0 => {
            let mut h = HashObj::new();
            for i in 0..n {
                h.set(&m(i), b"value", &lim);
            }
            Object::Hash(h)
        }
        1 => {
            let mut s = SetObj::for_member(b"member:0");
            for i in 0..n {
                s.add(&m(i), &lim);
            }
            Object::Set(s)
        }
        2 => {
            let zl = ZLimits::default();
            let mut z = ZSet::for_first(&zl, 8);
            for i in 0..n {
                z.set(&m(i), i as f64, &zl);
            }
            Object::Zset(z)
        }
        _ => {
            let mut l = Quicklist::new();
            for i in 0..n {
                l.push_back(&m(i), Fill::from_conf(-2));
            }
            Object::List(l)
        }
    }
}

/// A big aggregate leaves the keyspace at once, by DEL, by an overwrite or
/// by expiry, `used_memory` with it, and is then freed a bounded slice per
/// turn (issue 13's "no stall" for big keys): every `free_some` turn drops
/// at most about its budget of elements and gives back part of the
/// object's memory, so the work is spread over many turns.
#[test]
fn big_aggregates_are_freed_over_several_turns() {
    let n = 30_000;
    for kind in 0..4 {
        for way in 0..3 {
            let mut db = Db::new(3);
            let p = db.probe(b"big", 0);
            db.insert_obj(p, b"big", big_aggregate(kind, n));
            assert!(db.used_memory() > n as u64 * 8);
            match way {
                0 => assert!(db.delete(b"big", 0)),
                1 => db.set(b"big", b"small".to_vec(), false),
                _ => {
                    assert!(db.set_expire(b"big", 5));
                    assert!(db.expire_if_needed(b"big", 10));
                }
            }
            let left = db.lookup_write(b"big", 10).map(|e| e.kind());
            assert!(matches!(left, None | Some(Kind::String)), "{kind} {way}");
            assert!(db.used_memory() < 100, "{kind} {way}: {}", db.used_memory());
            assert_eq!(db.lazyfree_pending(), 1);
            let (mut turns, mut last) = (0, db.graveyard[0].mem());
            let mut elems = db.graveyard[0].len();
            while db.free_some(1000) {
                turns += 1;
                let o = &db.graveyard[0];
                assert!(o.mem() < last, "{kind} {way}: memory comes back each turn");
                assert!(
                    elems - o.len() <= 1000 + 1024,
                    "{kind} {way}: a bounded slice"
                );
                (last, elems) = (o.mem(), o.len());
                assert!(turns < 1000);
            }
            assert!(turns >= 10, "{kind} {way}: {turns} turns");
            assert_eq!(db.lazyfree_pending(), 0);
        }
    }
}

/// The longest lazyfree turn (the server's `LAZYFREE_CHUNK` elements)
/// while a 10-million-member hash, set, sorted set and list are freed,
/// and the DEL itself, release build:
/// `cargo test --release -p gyre-kv --lib db::tests::measure_lazyfree -- --ignored --nocapture`
#[test]
#[ignore]
fn measure_lazyfree() {
    let n: usize = std::env::var("LAZYFREE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    for (kind, name) in ["hash", "set", "zset", "list"].iter().enumerate() {
        let mut db = Db::new(4);
        let p = db.probe(b"big", 0);
        db.insert_obj(p, b"big", big_aggregate(kind, n));
        let t = std::time::Instant::now();
        assert!(db.delete(b"big", 0));
        let del = t.elapsed();
        let mut times = Vec::new();
        loop {
            let t = std::time::Instant::now();
            let more = db.free_some(crate::server::LAZYFREE_CHUNK);
            times.push(t.elapsed());
            if !more {
                break;
            }
        }
        let (turns, mut sorted) = (times.len(), times.clone());
        sorted.sort();
        let worst_at = times.iter().position(|t| *t == sorted[turns - 1]);
        let over = |ms: u64| times.iter().filter(|t| t.as_millis() as u64 >= ms).count();
        println!(
            "{name} of {n}: DEL {del:?}, {turns} turns, median {:?}, p99 {:?}, longest {:?} (turn {worst_at:?}), >= 1 ms: {}, >= 5 ms: {}",
            sorted[turns / 2],
            sorted[turns * 99 / 100],
            sorted[turns - 1],
            over(1),
            over(5)
        );
    }
}

/// A key's access clock moves into its TTL slot with a TTL and back with
/// PERSIST or SET; removals that move nodes and TTL slots keep each
/// key's clock and TTL with it.
#[test]
fn access_clock_follows_the_ttl() {
    let mut db = Db::new(3);
    let key = |i: u32| format!("k{i}").into_bytes();
    for i in 0..60 {
        db.set(&key(i), b"v".to_vec(), false);
        let j = db.find(&key(i)).unwrap();
        db.nodes[j].slot.set_word(1000 + i);
    }
    for i in (0..60).step_by(2) {
        assert!(db.set_expire(&key(i), 1_000_000 + i64::from(i)));
    }
    for i in (0..60).step_by(3) {
        assert!(db.remove(&key(i)));
    }
    for i in (0..60).step_by(4) {
        db.remove_expire(&key(i));
    }
    // SET without KEEPTTL drops the TTL: the clock comes back to the node.
    let p = db.probe(&key(10), 0);
    db.set_probed(p, &key(10), b"w", false);
    assert!(db.check_invariants());
    for i in 0..60 {
        if i % 3 == 0 {
            assert!(db.find(&key(i)).is_none());
            continue;
        }
        let ttl = i % 2 == 0 && i % 4 != 0 && i != 10;
        assert_eq!(
            db.get_expire(&key(i)),
            ttl.then_some(1_000_000 + i64::from(i))
        );
        if i != 10 {
            assert_eq!(db.access_of(&key(i), 0), Some(1000 + i), "key {i}");
        }
    }
}
