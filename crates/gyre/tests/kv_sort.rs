//! SORT and SORT_RO beyond single replies, compared with a real
//! redis-server 7.0 (Debian's `/usr/bin/redis-server`) scenario by
//! scenario: ACL key permissions (BY and GET patterns need every key
//! readable, STORE's key needs write access, SORT_RO's only key is the
//! sorted one), a client blocked on the STORE key woken by it, WATCH
//! aborted by a STORE but not by SORT_RO's encoding conversion, and the
//! `sortstore` / `del` keyspace events. (The random differential of the
//! replies themselves is `sort_like_redis` in kv_differential.rs.) Skips
//! with a message when redis-server is missing.
#![allow(clippy::unwrap_used)]

mod util;
mod zset_diff;

use util::Prefix;
use zset_diff::Step::{self, Block, Call, Read};
use zset_diff::{play, start_gyre, Redis, REDIS};

#[test]
fn sort_acl_blocking_watch_and_events_like_redis() {
    if !std::path::Path::new(REDIS).exists() {
        println!("skipping: {REDIS} is missing (apt-get install redis-server)");
        return;
    }
    let steps: Vec<Step> = vec![
        Call(0, &["RPUSH", "src", "3", "1", "2"]),
        Call(0, &["MSET", "w_1", "9", "w_2", "8", "w_3", "7"]),
        Call(0, &["HSET", "h_2", "f", "x"]),
        Call(
            0,
            &["ACL", "SETUSER", "ro", "on", "nopass", "~src*", "+@all"],
        ),
        Call(
            0,
            &[
                "ACL", "SETUSER", "rd", "on", "nopass", "%R~*", "~dst*", "+@all",
            ],
        ),
        Call(0, &["ACL", "SETUSER", "r", "on", "nopass", "%R~*", "+@all"]),
        Call(1, &["AUTH", "ro", "x"]),
        Call(1, &["SORT", "src"]),
        Call(1, &["SORT", "src", "BY", "w_*"]),
        Call(1, &["SORT", "src", "BY", "nosort", "DESC"]),
        Call(1, &["SORT", "src", "GET", "#"]),
        Call(1, &["SORT", "src", "BY", "nosort", "GET", "w_*"]),
        Call(1, &["SORT", "src", "LIMIT", "x", "1", "BY", "w_*"]),
        Call(1, &["SORT", "src", "STORE", "dst"]),
        Call(1, &["SORT", "src", "STORE", "dst", "STORE", "src2"]),
        Call(1, &["SORT", "src", "STORE", "src2", "STORE", "dst"]),
        Call(1, &["LRANGE", "src2", "0", "-1"]),
        Call(2, &["AUTH", "rd", "x"]),
        Call(
            2,
            &[
                "SORT", "src", "BY", "w_*", "GET", "#", "GET", "h_*->f", "STORE", "dst",
            ],
        ),
        Call(2, &["LRANGE", "dst", "0", "-1"]),
        Call(2, &["SORT", "src", "STORE", "other"]),
        Call(
            2,
            &["SORT", "src", "LIMIT", "0", "1", "GET", "STORE", "other"],
        ),
        Call(2, &["SORT_RO", "src", "BY", "w_*", "GET", "h_*->f"]),
        Call(2, &["SORT_RO", "src", "STORE", "other"]),
        Call(3, &["AUTH", "r", "x"]),
        Call(3, &["SORT", "src", "BY", "w_*", "GET", "w_*"]),
        Call(3, &["SORT", "src", "STORE", "dst"]),
        Call(3, &["SORT_RO", "w_1"]),
        Call(3, &["SORT_RO", "nokey", "BY", "w_*"]),
        Call(3, &["AUTH", "default", "x"]),
        // A client blocked on the destination is served by the STORE.
        Block(3, &["BLPOP", "dst2", "0"], 1),
        Call(0, &["SORT", "src", "DESC", "STORE", "dst2"]),
        Read(3),
        Call(0, &["LRANGE", "dst2", "0", "-1"]),
        // WATCH: a STORE touches its key, SORT_RO's conversion of a small
        // sorted set does not.
        Call(0, &["WATCH", "dst"]),
        Call(2, &["SORT", "src", "ALPHA", "STORE", "dst"]),
        Call(0, &["MULTI"]),
        Call(0, &["PING"]),
        Call(0, &["EXEC"]),
        Call(0, &["ZADD", "z", "2", "a", "1", "b"]),
        Call(0, &["OBJECT", "ENCODING", "z"]),
        Call(0, &["WATCH", "z"]),
        Call(2, &["SORT_RO", "z", "BY", "nosort", "DESC"]),
        Call(0, &["MULTI"]),
        Call(0, &["OBJECT", "ENCODING", "z"]),
        Call(0, &["EXEC"]),
        // Keyspace events of a STORE and of an empty result.
        Call(0, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
        Call(3, &["PSUBSCRIBE", "__key*@0__:*"]),
        Call(0, &["SORT", "src", "STORE", "dst3"]),
        Read(3),
        Read(3),
        Call(0, &["SORT", "nokey", "STORE", "dst3"]),
        Read(3),
        Read(3),
        Call(0, &["SORT", "nokey", "STORE", "dst3"]),
        Call(0, &["SET", "marker", "1"]),
        Read(3),
        Read(3),
        Call(0, &["CONFIG", "SET", "notify-keyspace-events", ""]),
        // STORE replaces any type and drops the TTL.
        Call(0, &["SET", "dst4", "v", "EX", "100"]),
        Call(0, &["SORT", "src", "STORE", "dst4"]),
        Call(0, &["TTL", "dst4"]),
        Call(0, &["TYPE", "dst4"]),
    ];
    let p = Prefix::new("kv-sort-scenario");
    let redis = Redis::start(&p.path("redis"));
    let (_gyre, gaddr) = start_gyre(&p);
    let want = play(redis.addr, &steps);
    let got = play(gaddr, &steps);
    assert_eq!(want.len(), got.len());
    for ((what, e), (_, a)) in want.iter().zip(&got) {
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(e),
            "{what}"
        );
    }
}
