//! Sorted sets and the keyspace's memory accounting through
//! `Server::execute`: `used_memory` follows a set through the listpack →
//! B+tree conversion and back to 0 when it is emptied member by member;
//! a big set leaves the keyspace at once on DEL, expiry or overwrite and
//! is freed in bounded slices (lazyfree).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{int, T};
use gyre_kv::Reply;

fn data_bytes(t: &T) -> u64 {
    t.s.db(0).unwrap().used_memory()
}

fn lazyfree_pending(t: &mut T) -> usize {
    let Reply::Bulk(info) = t.cmd(&["INFO", "memory"]) else {
        panic!("INFO");
    };
    String::from_utf8(info)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("lazyfree_pending_objects:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn fill(t: &mut T, key: &str, n: usize) {
    let members: Vec<String> = (0..n).map(|i| format!("member-{i}")).collect();
    for chunk in members.chunks(500) {
        let mut a = vec!["ZADD".to_string(), key.to_string()];
        for (i, m) in chunk.iter().enumerate() {
            a.push((i % 50).to_string());
            a.push(m.clone());
        }
        let v: Vec<&str> = a.iter().map(String::as_str).collect();
        t.cmd(&v);
    }
}

#[test]
fn used_memory_follows_a_set_and_returns_to_zero() {
    let mut t = T::new();
    let mut last = 0;
    let mut first = 0;
    for i in 0..300 {
        let m = format!("m{i}");
        t.cmd(&["ZADD", "z", &i.to_string(), &m]);
        let now = data_bytes(&t);
        // Never shrinks while members are added (the conversion at 129
        // included); allocations are counted at their malloc chunk size,
        // so a member that fits the chunk it lands in adds nothing.
        assert!(now >= last, "member {i}: {last} -> {now}");
        if i == 0 {
            first = now;
        }
        last = now;
    }
    assert!(last > first + 300 * 8, "300 members: {first} -> {last}");
    assert_eq!(
        t.cmd(&["OBJECT", "ENCODING", "z"]),
        Reply::Bulk(b"skiplist".to_vec())
    );
    for i in 0..300 {
        let m = format!("m{i}");
        assert_eq!(t.cmd(&["ZREM", "z", &m]), int(1));
    }
    assert_eq!(t.cmd(&["EXISTS", "z"]), int(0));
    assert_eq!(data_bytes(&t), 0);
}

#[test]
fn big_sets_are_freed_incrementally() {
    let mut t = T::new();
    fill(&mut t, "big", 5000);
    fill(&mut t, "exp", 3000);
    t.cmd(&["PEXPIRE", "exp", "10"]);
    assert!(data_bytes(&t) > 8000 * 20);
    assert_eq!(t.cmd(&["DEL", "big"]), int(1));
    t.advance(20);
    assert_eq!(t.cmd(&["EXISTS", "exp"]), int(0));
    assert_eq!(data_bytes(&t), 0);
    assert_eq!(lazyfree_pending(&mut t), 2);
    // One bounded step does not free 8000 members.
    t.s.lazyfree_step(1000, None);
    assert_eq!(lazyfree_pending(&mut t), 2);
    for _ in 0..20 {
        t.s.lazyfree_step(1000, None);
    }
    assert_eq!(lazyfree_pending(&mut t), 0);
    // A STORE over a big set buries it too; serverCron frees it.
    fill(&mut t, "big", 3000);
    t.cmd(&["ZADD", "small", "1", "a"]);
    assert_eq!(t.cmd(&["ZUNIONSTORE", "big", "1", "small"]), int(1));
    assert_eq!(lazyfree_pending(&mut t), 1);
    t.s.cron(t.now);
    assert_eq!(lazyfree_pending(&mut t), 0);
    assert_eq!(t.cmd(&["ZCARD", "big"]), int(1));
}
