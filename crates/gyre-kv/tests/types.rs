//! The typed keyspace through `Server`: `used_memory` follows what the
//! aggregates hold (grows with them, back to zero when they go, also
//! through encoding conversions and empty-aggregate deletion), encodings
//! convert at the configured thresholds, and blocking commands through
//! the sans-I/O API (served FIFO, timeouts, disconnects).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{bulk, int, T, T0};
use gyre_kv::Reply;

fn data_bytes(t: &T) -> u64 {
    t.s.db(0).unwrap().used_memory()
}

#[test]
fn used_memory_tracks_aggregates_and_returns_to_zero() {
    let mut t = T::new();
    assert_eq!(data_bytes(&t), 0);
    let mut last = 0;
    for i in 0..300 {
        let f = format!("field{i}");
        t.cmd(&["HSET", "h", &f, "some value"]);
        t.cmd(&["SADD", "s", &i.to_string()]);
        t.cmd(&["SADD", "m", &f]);
        t.cmd(&["RPUSH", "l", &f]);
        if i % 50 == 0 {
            let now = data_bytes(&t);
            assert!(now > last, "used memory grows: {now} after {last}");
            last = now;
        }
    }
    // Conversions happened on the way.
    for (k, enc) in [
        ("h", "hashtable"),
        ("s", "intset"),
        ("m", "hashtable"),
        ("l", "quicklist"),
    ] {
        assert_eq!(t.cmd(&["OBJECT", "ENCODING", k]), bulk(enc), "{k}");
    }
    assert!(data_bytes(&t) > 300 * 4 * 10);
    // Emptying an aggregate element by element deletes it and its bytes.
    for i in 0..300 {
        t.cmd(&["HDEL", "h", &format!("field{i}")]);
        t.cmd(&["SREM", "s", &i.to_string()]);
    }
    assert_eq!(t.cmd(&["EXISTS", "h", "s"]), int(0));
    t.cmd(&["LTRIM", "l", "1", "0"]);
    assert_eq!(t.cmd(&["DEL", "m", "l"]), int(1));
    assert_eq!(data_bytes(&t), 0);
}

#[test]
fn thresholds_from_config_set() {
    let mut t = T::new();
    t.cmd(&["CONFIG", "SET", "hash-max-listpack-entries", "2"]);
    t.cmd(&["CONFIG", "SET", "hash-max-ziplist-value", "4"]);
    assert_eq!(
        t.cmd(&["CONFIG", "GET", "hash-max-listpack-value"]),
        Reply::Array(vec![bulk("hash-max-listpack-value"), bulk("4")])
    );
    t.cmd(&["HSET", "a", "f1", "v", "f2", "v"]);
    assert_eq!(t.cmd(&["OBJECT", "ENCODING", "a"]), bulk("listpack"));
    t.cmd(&["HSET", "a", "f3", "v"]);
    assert_eq!(t.cmd(&["OBJECT", "ENCODING", "a"]), bulk("hashtable"));
    t.cmd(&["HSET", "b", "f", "12345"]);
    assert_eq!(t.cmd(&["OBJECT", "ENCODING", "b"]), bulk("hashtable"));
    t.cmd(&["CONFIG", "SET", "set-max-intset-entries", "1"]);
    t.cmd(&["SADD", "s", "1", "2"]);
    assert_eq!(t.cmd(&["OBJECT", "ENCODING", "s"]), bulk("hashtable"));
}

/// Feed one command; true if it blocked.
fn feed_blocks(t: &mut T, id: u64, line: &str, out: &mut Vec<u8>) -> Option<u64> {
    let o = t.s.feed(id, format!("{line}\r\n").as_bytes(), t.now, out);
    o.blocked
}

#[test]
fn blocked_clients_sans_io() {
    let mut t = T::new();
    let ids: Vec<u64> = (0..3)
        .map(|i| {
            t.s.connect(
                &format!("127.0.0.1:{}", 50001 + i),
                "127.0.0.1:6379",
                10 + i,
                T0,
            )
            .unwrap()
        })
        .collect();
    let mut out = Vec::new();
    for &id in &ids {
        assert_eq!(feed_blocks(&mut t, id, "BLPOP q 0", &mut out), Some(0));
    }
    assert!(out.is_empty());
    // A blocked client's further input is left unconsumed.
    let o = t.s.feed(ids[0], b"PING\r\n", t.now, &mut out);
    assert_eq!(o.consumed, 0);
    assert_eq!(t.s.blocked_counts(), (3, 1));
    // The middle client goes away: forgotten at once.
    t.s.disconnect(ids[1]);
    assert_eq!(t.s.blocked_counts(), (2, 1));
    assert_eq!(t.cmd(&["RPUSH", "q", "a", "b", "c"]), int(3));
    let mut woken = t.s.take_woken();
    woken.sort_unstable();
    assert_eq!(woken, vec![ids[0], ids[2]]);
    assert_eq!(t.s.take_output(ids[0]), b"*2\r\n$1\r\nq\r\n$1\r\na\r\n");
    assert_eq!(t.s.take_output(ids[2]), b"*2\r\n$1\r\nq\r\n$1\r\nb\r\n");
    assert_eq!(t.s.blocked_counts(), (0, 0));
    assert_eq!(
        t.cmd(&["LRANGE", "q", "0", "-1"]),
        Reply::Array(vec![bulk("c")])
    );
    // A timeout.
    assert_eq!(
        feed_blocks(&mut t, ids[0], "BRPOP none 1.5", &mut out),
        Some(1500)
    );
    assert!(t.s.block_timeout(ids[0]));
    assert!(!t.s.block_timeout(ids[0]));
    assert_eq!(t.s.take_output(ids[0]), b"*-1\r\n");
    assert_eq!(t.s.blocked_counts(), (0, 0));
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

#[test]
fn big_aggregates_are_freed_incrementally() {
    let mut t = T::new();
    let fields: Vec<String> = (0..3000).map(|i| format!("f{i}")).collect();
    for chunk in fields.chunks(500) {
        let mut a = vec!["HSET", "big"];
        for f in chunk {
            a.push(f);
            a.push("v");
        }
        t.cmd(&a);
        let mut b = vec!["RPUSH", "biglist"];
        b.extend(chunk.iter().map(String::as_str));
        t.cmd(&b);
    }
    t.cmd(&["PEXPIRE", "biglist", "10"]);
    assert!(data_bytes(&t) > 3000 * 2 * 8);
    // DEL: gone from the keyspace and used_memory at once, freed later.
    assert_eq!(t.cmd(&["DEL", "big"]), int(1));
    t.advance(20);
    assert_eq!(t.cmd(&["EXISTS", "biglist"]), int(0));
    assert_eq!(data_bytes(&t), 0);
    assert_eq!(lazyfree_pending(&mut t), 2);
    // Each step frees a bounded number of elements.
    t.s.lazyfree_step(1000, None);
    assert_eq!(lazyfree_pending(&mut t), 2);
    for _ in 0..10 {
        t.s.lazyfree_step(1000, None);
    }
    assert_eq!(lazyfree_pending(&mut t), 0);
    // An overwrite by SET buries the old aggregate too; serverCron frees it.
    for chunk in fields.chunks(500) {
        let mut a = vec!["SADD", "bigset"];
        a.extend(chunk.iter().map(String::as_str));
        t.cmd(&a);
    }
    t.cmd(&["SET", "bigset", "now a string"]);
    assert_eq!(lazyfree_pending(&mut t), 1);
    t.s.cron(t.now);
    assert_eq!(lazyfree_pending(&mut t), 0);
}
