//! Round trips of every type and encoding through the RDB writer and
//! reader, DUMP/RESTORE payload checks, and corrupt / truncated files.
#![allow(clippy::unwrap_used)]

use super::load::{load, restore_payload};
use super::save::{dump_payload, put_header, put_kv, put_select, Aux};
use super::*;
use crate::db::{Db, Ref};
use crate::object::{Limits, Object};
use crate::quicklist::{Fill, Quicklist};
use crate::t_hash::HashObj;
use crate::t_set::SetObj;

/// A canonical view of a value: kind, encoding, sorted contents.
fn view(v: Ref<'_>) -> View {
    match v {
        Ref::Str(s) => ("string".into(), vec![s.to_vec()]),
        Ref::Obj(o) => {
            let mut items: Vec<Vec<u8>> = match o {
                Object::Hash(h) => h
                    .pairs()
                    .into_iter()
                    .map(|(f, v)| [f, b"=", v].concat())
                    .collect(),
                Object::Set(s) => s.members(),
                Object::List(l) => l.iter().map(|e| e.to_vec()).collect(),
                Object::Zset(z) => z
                    .to_vec()
                    .into_iter()
                    .map(|(m, s)| [&m[..], b"=", s.to_string().as_bytes()].concat())
                    .collect(),
            };
            if !matches!(o, Object::List(_)) {
                items.sort();
            }
            (o.encoding().into(), items)
        }
    }
}

type View = (String, Vec<Vec<u8>>);

fn dump_db(db: &Db) -> Vec<(Vec<u8>, View, Option<i64>)> {
    let mut v: Vec<_> = db
        .entries()
        .map(|(k, v, e)| (k.to_vec(), view(v), e))
        .collect();
    v.sort();
    v
}

fn sample_db(lim: &Limits) -> Db {
    let mut db = Db::new(1);
    let now = 1000;
    db.set(b"s-short", b"v".to_vec(), false);
    db.set(b"s-int", b"-12345".to_vec(), false);
    db.set(b"s-bigint", b"9223372036854775807".to_vec(), false);
    db.set(b"s-empty", Vec::new(), false);
    db.set(b"s-long", vec![b'x'; 5000], false);
    db.set(b"s-ttl", b"t".to_vec(), false);
    db.set_expire(b"s-ttl", 4_000_000_000_000);
    let add = |db: &mut Db, k: &[u8], o: Object| {
        let p = db.probe(k, now);
        db.insert_obj(p, k, o);
    };
    let mut h = HashObj::new();
    h.set(b"f1", b"v1", lim);
    h.set(b"n", b"42", lim);
    add(&mut db, b"h-lp", Object::Hash(h));
    let mut h = HashObj::new();
    for i in 0..300 {
        h.set(
            format!("field{i}").as_bytes(),
            format!("{}", i * 7).as_bytes(),
            lim,
        );
    }
    add(&mut db, b"h-table", Object::Hash(h));
    let mut s = SetObj::for_member(b"1");
    for m in ["1", "-70000", "9000000000", "3"] {
        s.add(m.as_bytes(), lim);
    }
    add(&mut db, b"set-int", Object::Set(s));
    let mut s = SetObj::for_member(b"a");
    for m in ["a", "b", "12", "longer member"] {
        s.add(m.as_bytes(), lim);
    }
    add(&mut db, b"set-table", Object::Set(s));
    let mut l = Quicklist::new();
    let fill = Fill::from_conf(lim.list_max_listpack_size);
    for i in 0..1000 {
        l.push_back(format!("elem-{i}").as_bytes(), fill);
    }
    l.push_back(&vec![b'L'; 20_000], fill);
    l.push_back(b"7", fill);
    add(&mut db, b"list", Object::List(l));
    let zl = crate::zset::Limits::default();
    let mut z = crate::zset::ZSet::for_first(&zl, 1);
    for (m, s) in [
        ("a", 1.0),
        ("b", 1.5),
        ("c", -0.0),
        ("d", f64::INFINITY),
        ("e", -3e-300),
        ("f", 12345678.0),
    ] {
        z.set(m.as_bytes(), s, &zl);
    }
    add(&mut db, b"zset-lp", Object::Zset(z));
    let mut z = crate::zset::ZSet::for_first(&zl, 1);
    for i in 0..300 {
        z.set(format!("member-{i}").as_bytes(), f64::from(i) / 7.0, &zl);
    }
    add(&mut db, b"zset-large", Object::Zset(z));
    db.set_expire(b"list", 4_000_000_000_001);
    db
}

fn save_bytes(dbs: &[Db], compress: bool) -> Vec<u8> {
    let mut out = Vec::new();
    put_header(
        &mut out,
        &Aux {
            ctime_secs: 1,
            used_mem: 2,
            aof_base: false,
        },
    );
    for (i, db) in dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        put_select(&mut out, i, db.len(), db.expires_len());
        for (k, v, e) in db.entries() {
            put_kv(&mut out, k, v, e, compress);
        }
    }
    out.push(OP_EOF);
    let crc = crc64::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[test]
fn every_type_and_encoding_round_trips() {
    let lim = Limits::default();
    for compress in [false, true] {
        let dbs = vec![sample_db(&lim), Db::new(2), sample_db(&lim)];
        let bytes = save_bytes(&dbs, compress);
        let mut back: Vec<Db> = (0..3).map(Db::new).collect();
        let st = load(&bytes[..], &mut back, &lim, 1000, true).unwrap();
        assert_eq!(st.keys, 2 * dbs[0].len() as u64);
        for i in 0..3 {
            assert_eq!(
                dump_db(&back[i]),
                dump_db(&dbs[i]),
                "db {i} compress {compress}"
            );
        }
    }
}

#[test]
fn compression_shrinks_repetitive_values() {
    let lim = Limits::default();
    let dbs = vec![sample_db(&lim)];
    assert!(save_bytes(&dbs, true).len() + 4000 < save_bytes(&dbs, false).len());
}

#[test]
fn truncated_and_corrupted_files_are_errors() {
    let lim = Limits::default();
    let bytes = save_bytes(&[sample_db(&lim)], true);
    for cut in [
        0,
        5,
        9,
        20,
        bytes.len() / 2,
        bytes.len() - 9,
        bytes.len() - 1,
    ] {
        let mut dbs = vec![Db::new(1)];
        assert!(
            load(&bytes[..cut], &mut dbs, &lim, 0, true).is_err(),
            "cut {cut}"
        );
    }
    // A flipped byte in a value: the checksum catches it (or the parser).
    let mut bad = bytes.clone();
    let at = bytes.len() / 2;
    bad[at] ^= 0x55;
    let mut dbs = vec![Db::new(1)];
    assert!(load(&bad[..], &mut dbs, &lim, 0, true).is_err());
    // The footer alone wrong: Redis's checksum message.
    let mut bad = bytes.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    let e = load(&bad[..], &mut [Db::new(1)], &lim, 0, true).unwrap_err();
    assert!(e.to_string().starts_with("Wrong RDB checksum"), "{e}");
    // With rdbchecksum no it loads; a zero footer is never checked.
    assert!(load(&bad[..], &mut [Db::new(1)], &lim, 0, false).is_ok());
    bad[n - 8..].fill(0);
    assert!(load(&bad[..], &mut [Db::new(1)], &lim, 0, true).is_ok());
    assert!(matches!(
        load(&b"REDIS0011"[..], &mut [Db::new(1)], &lim, 0, true),
        Err(Error::Version(11))
    ));
    assert!(matches!(
        load(&b"NOTREDIS0"[..], &mut [Db::new(1)], &lim, 0, true),
        Err(Error::Signature)
    ));
}

#[test]
fn expired_keys_are_skipped_and_duplicates_refused() {
    let lim = Limits::default();
    let mut db = Db::new(1);
    db.set(b"old", b"v".to_vec(), false);
    db.set_expire(b"old", 500);
    db.set(b"new", b"v".to_vec(), false);
    let bytes = save_bytes(&[db], false);
    let mut back = vec![Db::new(1)];
    let st = load(&bytes[..], &mut back, &lim, 1000, true).unwrap();
    assert_eq!((st.keys, st.expired, back[0].len()), (1, 1, 1));
    let mut dup = Vec::new();
    put_header(
        &mut dup,
        &Aux {
            ctime_secs: 0,
            used_mem: 0,
            aof_base: false,
        },
    );
    put_select(&mut dup, 0, 2, 0);
    put_kv(&mut dup, b"k", Ref::Str(b"a"), None, false);
    put_kv(&mut dup, b"k", Ref::Str(b"b"), None, false);
    dup.push(OP_EOF);
    dup.extend_from_slice(&[0; 8]);
    let e = load(&dup[..], &mut [Db::new(1)], &lim, 0, true).unwrap_err();
    assert!(e.to_string().contains("duplicated key 'k'"), "{e}");
}

#[test]
fn dump_payloads_round_trip_and_are_checked() {
    let lim = Limits::default();
    let db = sample_db(&lim);
    for (_, v, _) in db.entries() {
        let p = dump_payload(v, true);
        let back = restore_payload(&p, &lim).unwrap().unwrap();
        let mut d = Db::new(5);
        assert!(super::load::store(&mut d, b"k", back, None, 0, &lim).unwrap());
        let got = view(d.entries().next().unwrap().1);
        assert_eq!(got, view(v));
        let mut bad = p.clone();
        bad[0] ^= 0xff;
        assert!(matches!(
            restore_payload(&bad, &lim),
            Err(Error::Checksum { .. })
        ));
        let mut newer = p.clone();
        let n = newer.len();
        newer[n - 10] = 11;
        assert!(matches!(
            restore_payload(&newer, &lim),
            Err(Error::Version(11))
        ));
    }
    assert!(restore_payload(b"short", &lim).is_err());
    // Redis 7.0.15's DUMP of the string "hello" (redis-cli --no-raw DUMP).
    let redis = b"\x00\x05hello\n\x00cr\xdfve4 \n";
    assert_eq!(dump_payload(Ref::Str(b"hello"), true), redis);
}

/// Random flips, truncations and splices of a dump: the reader answers an
/// error or a dataset, never panics, and never allocates what a corrupt
/// length announces (the loop would take minutes or abort if it did).
#[test]
fn corrupt_dumps_never_panic() {
    let lim = Limits::default();
    let good = save_bytes(&[sample_db(&lim)], true);
    let mut rng = crate::util::Rng::new(99);
    // An LZF string announcing 2^39 bytes from 3 input bytes.
    let mut lzf = vec![0xc0 | ENC_LZF, 3, 0x81];
    lzf.extend_from_slice(&(1u64 << 39).to_be_bytes());
    lzf.extend_from_slice(&[0, b'a', 0]);
    assert!(super::load::Reader::new(&lzf[..]).string().is_err());
    for round in 0..3000 {
        let mut b = good.clone();
        match round % 3 {
            0 => {
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(b.len());
                    b[i] = rng.below(256) as u8;
                }
            }
            1 => b.truncate(rng.below(b.len())),
            _ => {
                let i = rng.below(b.len());
                let n = rng.below(16);
                b.splice(i..i, (0..n).map(|_| rng.below(256) as u8));
            }
        }
        let mut dbs: Vec<Db> = (0..2).map(Db::new).collect();
        let _ = load(&b[..], &mut dbs, &lim, 0, round % 2 == 0);
        let _ = restore_payload(b.get(9..b.len().min(400)).unwrap_or_default(), &lim);
    }
}

/// Values in the encodings of older Redis versions, as a 7.0 server still
/// loads them: hash as ziplist (13) and zipmap (9), list as ziplist (10)
/// and quicklist of ziplists (14), zset as ziplist (12) and with text
/// scores (3).
#[test]
fn older_encodings_load() {
    use super::load::{value, Reader};
    use super::save::{put_len, put_string};
    let lim = Limits::default();
    // A ziplist of the given small strings (each < 64 bytes, prevlen < 254).
    fn ziplist(items: &[&[u8]]) -> Vec<u8> {
        let mut z = vec![0u8; 10];
        let mut prev = 0u8;
        for it in items {
            let start = z.len();
            z.push(prev);
            z.push(it.len() as u8);
            z.extend_from_slice(it);
            prev = (z.len() - start) as u8;
        }
        z.push(0xff);
        let n = z.len() as u32;
        z[..4].copy_from_slice(&n.to_le_bytes());
        z[8..10].copy_from_slice(&(items.len() as u16).to_le_bytes());
        z
    }
    let decode = |t: u8, payload: Vec<u8>| {
        let mut d = Db::new(1);
        let v = value(&mut Reader::new(&payload[..]), t, &lim)
            .unwrap()
            .unwrap();
        super::load::store(&mut d, b"k", v, None, 0, &lim).unwrap();
        let got = view(d.entries().next().unwrap().1);
        got
    };
    let blob = |b: Vec<u8>| {
        let mut o = Vec::new();
        put_string(&mut o, &b, false);
        o
    };
    let h = decode(TYPE_HASH_ZIPLIST, blob(ziplist(&[b"f", b"v", b"g", b"w"])));
    assert_eq!(
        h,
        ("listpack".into(), vec![b"f=v".to_vec(), b"g=w".to_vec()])
    );
    let zm = vec![1, 1, b'f', 1, 0, b'v', 255];
    assert_eq!(decode(TYPE_HASH_ZIPMAP, blob(zm)).1, vec![b"f=v".to_vec()]);
    let l = decode(TYPE_LIST_ZIPLIST, blob(ziplist(&[b"a", b"b"])));
    assert_eq!(l.1, vec![b"a".to_vec(), b"b".to_vec()]);
    let mut ql = Vec::new();
    put_len(&mut ql, 2);
    ql.extend(blob(ziplist(&[b"a", b"b"])));
    ql.extend(blob(ziplist(&[b"c"])));
    assert_eq!(decode(TYPE_LIST_QUICKLIST, ql).1.len(), 3);
    let z = decode(
        TYPE_ZSET_ZIPLIST,
        blob(ziplist(&[b"m", b"1.5", b"n", b"2"])),
    );
    assert_eq!(
        z,
        ("listpack".into(), vec![b"m=1.5".to_vec(), b"n=2".to_vec()])
    );
    let mut z3 = Vec::new();
    put_len(&mut z3, 2);
    put_string(&mut z3, b"a", false);
    z3.extend_from_slice(&[3, b'2', b'.', b'5']);
    put_string(&mut z3, b"b", false);
    z3.push(254); // +inf
    assert_eq!(
        decode(TYPE_ZSET, z3).1,
        vec![b"a=2.5".to_vec(), b"b=inf".to_vec()]
    );
}

/// A Redis listpack hash: built in gyre's listpack at once when it fits
/// the thresholds (integers as decimal text), converted when it does not,
/// and refused with Redis's error when a field repeats.
#[test]
fn listpack_hashes_load_in_either_encoding() {
    use super::blob::lp_build;
    use super::load::{value, Reader};
    use super::save::put_string;
    let lim = Limits::default();
    let load_hash = |entries: &[&[u8]], lim: &Limits| {
        let mut o = Vec::new();
        put_string(&mut o, &lp_build(entries.iter().copied()), false);
        value(&mut Reader::new(&o[..]), TYPE_HASH_LISTPACK, lim).map(|v| {
            let mut d = Db::new(1);
            super::load::store(&mut d, b"k", v.unwrap(), None, 0, lim).unwrap();
            let got = view(d.entries().next().unwrap().1);
            got
        })
    };
    let h = load_hash(&[b"name", b"alice", b"age", b"42", b"n", b"-7"], &lim).unwrap();
    assert_eq!(
        h,
        (
            "listpack".into(),
            vec![b"age=42".to_vec(), b"n=-7".to_vec(), b"name=alice".to_vec()]
        )
    );
    let small = Limits {
        hash_max_listpack_entries: 2,
        ..Limits::default()
    };
    let h = load_hash(&[b"a", b"1", b"b", b"2", b"c", b"3"], &small).unwrap();
    assert_eq!(h.0, "hashtable");
    assert_eq!(h.1.len(), 3);
    let long = [b'v'; 65];
    assert_eq!(load_hash(&[b"a", &long], &lim).unwrap().0, "hashtable");
    let dup = load_hash(&[b"a", b"1", b"b", b"2", b"a", b"3"], &lim);
    assert!(matches!(dup, Err(e) if e.to_string().contains("Duplicate hash fields")));
    assert!(load_hash(&[b"a", b"1", b"b"], &lim).is_err());
}

/// Load speed of small hashes and strings (release build):
/// `cargo test --release -p gyre-kv --lib rdb::tests::measure_load -- --ignored --nocapture`
#[test]
#[ignore]
fn measure_load() {
    let lim = Limits::default();
    for hashes in [false, true] {
        let mut db = Db::new(1);
        for i in 0..300_000 {
            let k = format!("key:{i:012}");
            if hashes {
                let mut h = HashObj::new();
                h.set(b"name", b"alice", &lim);
                h.set(b"age", b"42", &lim);
                h.set(b"city", b"paris", &lim);
                let p = db.probe(k.as_bytes(), 0);
                db.insert_obj(p, k.as_bytes(), Object::Hash(h));
            } else {
                db.set(k.as_bytes(), vec![b'x'; 100], false);
            }
        }
        let bytes = save_bytes(&[db], true);
        let t = std::time::Instant::now();
        let mut back = [Db::new(2)];
        load(&bytes[..], &mut back, &lim, 0, true).unwrap();
        eprintln!(
            "{}: {:.0} ns per key",
            if hashes { "hashes" } else { "strings" },
            t.elapsed().as_nanos() as f64 / 300_000.0
        );
    }
}
