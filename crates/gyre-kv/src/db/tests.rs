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
