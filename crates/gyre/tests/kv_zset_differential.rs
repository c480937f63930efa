//! Differential test of the sorted-set and bitmap commands: the same
//! seeded random command sequences go to gyre's kv process and to a real
//! redis-server 7.0 (Debian's `/usr/bin/redis-server`), and every reply is
//! compared byte for byte (RESP2, and RESP3 after a `HELLO 3` in part of
//! the run). Replies that Redis itself randomizes (ZRANDMEMBER) or orders
//! by hash (ZSCAN of a large set) are compared by content instead.
//!
//! The seed is printed; `KV_DIFF_SEED=N` replays one, `KV_DIFF_STEPS=N`
//! changes the length. Skips with a message when redis-server is missing.
#![allow(clippy::unwrap_used)]

mod util;
mod zset_diff;

use std::path::Path;

use util::Prefix;
use zset_diff::gen_bit::gen_bit;
use zset_diff::gen_zset::{gen_zset, gen_zset_large};
use zset_diff::Step;
use zset_diff::{play, run, start_gyre, Redis, REDIS};

#[test]
fn bit_commands_match_redis() {
    run("kv-bit-diff", gen_bit, &[], 4000);
}

/// Small listpack thresholds so both encodings and the conversion are
/// exercised by short sequences.
#[test]
fn zset_commands_match_redis() {
    run(
        "kv-zset-diff",
        gen_zset,
        &[
            &["CONFIG", "SET", "zset-max-listpack-entries", "6"],
            &["SET", "str", "abc"],
        ],
        6000,
    );
}

/// Thousands of members: the large form several levels deep.
#[test]
fn large_zsets_match_redis() {
    run("kv-zset-diff-large", gen_zset_large, &[], 4000);
}

/// Tiny thresholds (3 entries, 2-byte members): conversions all the time,
/// and RESP3 from the start.
#[test]
fn zset_commands_match_redis_tiny_limits_resp3() {
    run(
        "kv-zset-diff-tiny",
        gen_zset,
        &[
            &["CONFIG", "SET", "zset-max-listpack-entries", "3"],
            &["CONFIG", "SET", "zset-max-listpack-value", "2"],
            &["SET", "str", "abc"],
            &["HELLO", "3"],
        ],
        3000,
    );
}

/// Redis's default thresholds.
#[test]
fn zset_commands_match_redis_default_limits() {
    run(
        "kv-zset-diff-default",
        gen_zset,
        &[&["SET", "str", "abc"]],
        3000,
    );
}

/// BZPOPMIN / BZPOPMAX / BZMPOP against redis-server: served at once when
/// a key holds a sorted set; blocked clients woken by ZADD (and by a STORE
/// creating the key) in the order they blocked; a list waiter on the same
/// key is not served by a sorted set; timeouts answer a null array.
#[test]
fn blocking_pops_match_redis() {
    use Step::*;
    if !Path::new(REDIS).exists() {
        eprintln!("skipping blocking_pops_match_redis: {REDIS} not installed");
        return;
    }
    let steps = [
        Call(0, &["ZADD", "k", "1", "a", "2", "b", "3", "c"]),
        Call(0, &["BZPOPMIN", "nokey", "k", "0"]),
        Call(0, &["BZPOPMAX", "k", "0"]),
        Call(0, &["BZMPOP", "0", "2", "nokey", "k", "MIN", "COUNT", "5"]),
        Call(0, &["BZPOPMIN", "k", "-1"]),
        Call(0, &["BZPOPMIN", "k", "x"]),
        Call(0, &["BZMPOP", "0", "0", "k", "MIN"]),
        Call(0, &["BZMPOP", "x", "1", "k", "MIN"]),
        Call(0, &["SET", "str", "v"]),
        Call(0, &["BZPOPMIN", "str", "0"]),
        Call(0, &["BZPOPMIN", "nokey", "0.01"]),
        Call(0, &["BZMPOP", "0.01", "1", "nokey", "MAX"]),
        // FIFO: three clients on one key, one ZADD of two members.
        Block(0, &["BZPOPMIN", "k", "0"], 1),
        Block(1, &["BZPOPMAX", "other", "k", "0"], 2),
        Block(2, &["BZMPOP", "0", "1", "k", "MAX", "COUNT", "2"], 3),
        Call(3, &["ZADD", "k", "1", "a", "2", "b"]),
        Read(0),
        Read(1),
        Call(3, &["EXISTS", "k"]),
        Call(3, &["ZADD", "k", "5", "x", "6", "y", "7", "z"]),
        Read(2),
        Call(3, &["ZRANGE", "k", "0", "-1", "WITHSCORES"]),
        // A list waiter and a sorted-set waiter on one key.
        Call(3, &["DEL", "k"]),
        Block(0, &["BLPOP", "k", "0"], 1),
        Block(1, &["BZPOPMIN", "k", "0"], 2),
        Call(3, &["ZADD", "k", "1", "m"]),
        Read(1),
        Call(3, &["LPUSH", "k", "e"]),
        Read(0),
        // A STORE that creates the key wakes the waiter.
        Call(3, &["ZADD", "src", "4", "p", "5", "q"]),
        Block(2, &["BZPOPMAX", "dst", "0"], 1),
        Call(3, &["ZUNIONSTORE", "dst", "1", "src"]),
        Read(2),
        Call(3, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        // RESP3 shapes.
        Call(3, &["HELLO", "3"]),
        Call(3, &["BZPOPMIN", "src", "0"]),
        Call(3, &["BZMPOP", "0", "1", "src", "MIN"]),
        Call(3, &["BZPOPMIN", "nokey", "0.01"]),
    ];
    let p = Prefix::new("kv-zset-block");
    let redis = Redis::start(&p.path("redis"));
    let (_gyre, gaddr) = start_gyre(&p);
    let want = play(redis.addr, &steps);
    let got = play(gaddr, &steps);
    for ((what, e), (_, a)) in want.iter().zip(&got) {
        if what.contains("HELLO") {
            continue;
        }
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(e),
            "{what}"
        );
    }
    assert_eq!(want.len(), got.len());
}
