//! Sorted sets through the real binary with the `redis` crate: encodings
//! and their thresholds from `kv {}` and CONFIG SET, `used_memory`
//! following a large set, and a large set's ZSCAN returning every member.
//! (Replies are compared with redis-server in kv_zset_differential.rs.)
#![allow(clippy::unwrap_used)]

mod util;

use std::time::Duration;

use util::kv::{start, Kv};

fn client(kv: &Kv) -> redis::Connection {
    let c = redis::Client::open(format!("redis://{}/", kv.addr)).unwrap();
    let conn = c
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn
}

fn encoding(c: &mut redis::Connection, key: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(c)
        .unwrap()
}

fn used_memory(c: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn thresholds_from_kv_block_and_config_set() {
    let kv = start(
        "kv-zset-limits",
        "    zset-max-listpack-entries 3;\n    zset-max-listpack-value 8;",
    );
    let mut c = client(&kv);
    let n: i64 = redis::cmd("ZADD")
        .arg(&["z", "1", "a", "2", "b", "3", "c"])
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(encoding(&mut c, "z"), "listpack");
    let _: i64 = redis::cmd("ZADD")
        .arg("z")
        .arg("4")
        .arg("d")
        .query(&mut c)
        .unwrap();
    assert_eq!(encoding(&mut c, "z"), "skiplist");
    // A member over the value limit: large from the first ZADD.
    let _: i64 = redis::cmd("ZADD")
        .arg("long")
        .arg("1")
        .arg("123456789")
        .query(&mut c)
        .unwrap();
    assert_eq!(encoding(&mut c, "long"), "skiplist");
    // Removing never converts back; a STORE result that fits is small.
    let _: i64 = redis::cmd("ZREM").arg("z").arg("d").query(&mut c).unwrap();
    assert_eq!(encoding(&mut c, "z"), "skiplist");
    let _: i64 = redis::cmd("ZUNIONSTORE")
        .arg("u")
        .arg("1")
        .arg("z")
        .query(&mut c)
        .unwrap();
    assert_eq!(encoding(&mut c, "u"), "listpack");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("zset-max-listpack-entries")
        .arg("128")
        .query(&mut c)
        .unwrap();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("zset-max-listpack-entries")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, ["zset-max-listpack-entries", "128"]);
    let _: i64 = redis::cmd("ZADD")
        .arg(&["y", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"])
        .query(&mut c)
        .unwrap();
    for m in ["f", "g", "h"] {
        let _: i64 = redis::cmd("ZADD")
            .arg("y")
            .arg("9")
            .arg(m)
            .query(&mut c)
            .unwrap();
    }
    assert_eq!(encoding(&mut c, "y"), "listpack");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("zset-max-listpack-entries")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("ZADD")
        .arg("x")
        .arg("1")
        .arg("a")
        .query(&mut c)
        .unwrap();
    assert_eq!(encoding(&mut c, "x"), "skiplist");
}

#[test]
fn large_set_memory_and_full_scan() {
    let kv = start("kv-zset-large", "");
    let mut c = client(&kv);
    let before = used_memory(&mut c);
    let n = 20_000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("big");
        for i in chunk {
            cmd.arg(i % 977).arg(format!("member:{i}"));
        }
        let _: i64 = cmd.query(&mut c).unwrap();
    }
    let card: i64 = redis::cmd("ZCARD").arg("big").query(&mut c).unwrap();
    assert_eq!(card, n);
    assert_eq!(encoding(&mut c, "big"), "skiplist");
    let grown = used_memory(&mut c) - before;
    // Members of ~12 bytes: well above their bytes, well below redis's
    // ~110 bytes a member.
    assert!(
        grown > 20 * n as u64 && grown < 110 * n as u64,
        "used_memory grew {grown}"
    );
    // Ranks agree with the order: score, then member.
    let r: i64 = redis::cmd("ZRANK")
        .arg("big")
        .arg("member:0")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, 0);
    let first: Vec<String> = redis::cmd("ZRANGE")
        .arg("big")
        .arg(0)
        .arg(2)
        .query(&mut c)
        .unwrap();
    assert_eq!(first, ["member:0", "member:10747", "member:11724"]);
    // ZSCAN returns every member, with cursors, within a bound.
    let mut seen = std::collections::HashSet::new();
    let mut cursor = 0u64;
    for _ in 0..100_000 {
        let (next, items): (u64, Vec<String>) = redis::cmd("ZSCAN")
            .arg("big")
            .arg(cursor)
            .arg("COUNT")
            .arg(500)
            .query(&mut c)
            .unwrap();
        for pair in items.chunks(2) {
            seen.insert(pair[0].clone());
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(cursor, 0);
    assert_eq!(seen.len(), n as usize);
    let _: i64 = redis::cmd("DEL").arg("big").query(&mut c).unwrap();
    let after = used_memory(&mut c);
    assert!(after < before + 1024, "used_memory {before} -> {after}");
}
