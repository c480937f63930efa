//! Differential tests of the kv process's cache features against a real
//! redis-server 7.0 (Debian's `/usr/bin/redis-server`): the same scripted
//! multi-client sessions — MULTI/EXEC/WATCH, pub/sub with several
//! subscribers and patterns, AUTH, keyspace events, CONFIG of the new
//! settings — are run against both and the replies compared byte for byte.
//! Skips with a message when redis-server is missing.
//!
//! The script language is [`kv_script`]'s.
#![allow(clippy::unwrap_used)]

mod kv_script;
mod util;

use kv_script::differential;

#[test]
fn transactions_match_redis() {
    differential(
        "kvdiff-multi",
        &[],
        "",
        "
        0> MULTI
        0> SET a 1
        0> INCR a
        0> GET a
        0> EXEC
        0> EXEC
        0> DISCARD
        0> EXEC extra
        0> MULTI
        0> MULTI
        0> WATCH a
        0> SET a 2
        0> EXEC
        0> MULTI
        0> SET a 3
        0> NOSUCHCOMMAND x
        0> GET
        0> EXEC
        0> GET a
        0> MULTI
        0> SET s hello
        0> INCR s
        0> APPEND s !
        0> EXEC
        0> MULTI
        0> PING
        0> DISCARD
        0> MULTI
        0> EXEC
        0> SET w 1
        0> WATCH w
        1> SET w 2
        0> MULTI
        0> GET w
        0> EXEC
        0> WATCH w
        0> SET w 3
        0> MULTI
        0> GET w
        0> EXEC
        0> WATCH w nokey
        1> SET nokey x
        0> MULTI
        0> EXEC
        0> WATCH w
        0> UNWATCH
        1> SET w 4
        0> MULTI
        0> GET w
        0> EXEC
        0> WATCH w
        1> DEL w
        0> MULTI
        0> EXEC
        0> SET w 5
        0> WATCH w
        1> EXPIRE w 100
        0> MULTI
        0> EXEC
        0> WATCH w
        1> PERSIST w
        0> MULTI
        0> EXEC
        0> WATCH w
        1> FLUSHDB
        0> MULTI
        0> EXEC
        0> WATCH missing
        1> FLUSHALL
        0> MULTI
        0> SET missing 1
        0> EXEC
        0> WATCH w
        0> MULTI
        0> DISCARD
        1> SET w 6
        0> MULTI
        0> GET w
        0> EXEC
        0> WATCH w
        1> SELECT 1
        1> SET w other-db
        0> MULTI
        0> GET w
        0> EXEC
        0> SET t v PX 50
        0> WATCH t
        sleep 120
        0> MULTI
        0> EXEC
        0> FLUSHALL
        0> SET w 1
        0> WATCH w
        5> SELECT 1
        5> SET w other
        5> SWAPDB 0 1
        0> MULTI
        0> GET w
        0> EXEC
        0> GET w
        0> WATCH nowhere
        5> SWAPDB 0 1
        0> MULTI
        0> EXEC
        5> SELECT 0
        5> DEL w
        0> WATCH w
        5> SWAPDB 1 0
        0> MULTI
        0> EXEC
        0> SWAPDB 0
        0> SWAPDB a 1
        0> SWAPDB 0 b
        0> SWAPDB 0 99
        0> SWAPDB 3 3
        0> MULTI
        0> BLPOP nolist 0
        0> BRPOPLPUSH nolist other 0
        0> BLMOVE nolist other LEFT RIGHT 0
        0> BLMPOP 0 1 nolist LEFT
        0> RPUSH full x
        0> BLPOP full 0
        0> EXEC
        0> MULTI
        0> QUIT
        ",
    );
}

#[test]
fn pubsub_matches_redis() {
    differential(
        "kvdiff-pubsub",
        &[],
        "",
        "
        0> UNSUBSCRIBE
        0> PUNSUBSCRIBE
        0> SUNSUBSCRIBE
        0>2 SUBSCRIBE news sport
        1> SUBSCRIBE news
        2> PSUBSCRIBE n*
        3> PUBLISH news hello
        3> PUBLISH sport goal
        3> PUBLISH nothing x
        3> PUBLISH other y
        sync 0 1 2
        0> GET x
        0> PING
        0> PING hi
        0> PUBSUB NUMSUB news
        3> PUBSUB NUMSUB news sport none
        3> PUBSUB NUMPAT
        3>s PUBSUB CHANNELS
        3>s PUBSUB CHANNELS n*
        0> UNSUBSCRIBE news
        3> PUBLISH news again
        sync 0 1 2
        2> PUNSUBSCRIBE n*
        2> PUNSUBSCRIBE n*
        3> PUBLISH news third
        sync 0 1 2
        0>2 PSUBSCRIBE s* x?
        0>2 PUNSUBSCRIBE
        0> UNSUBSCRIBE
        0> GET x
        4> SSUBSCRIBE shard1
        5> SSUBSCRIBE shard1
        3> SPUBLISH shard1 m1
        3> PUBLISH shard1 notshard
        3> PUBSUB SHARDNUMSUB shard1 shard2
        3>s PUBSUB SHARDCHANNELS
        sync 4 5
        4> SUNSUBSCRIBE shard1
        3> SPUBLISH shard1 m2
        sync 4 5
        5> RESET
        3> SPUBLISH shard1 m3
        3> PUBSUB NOSUCH
        3> PUBLISH
        1> MULTI
        1> QUIT
        3> PUBLISH news after-quit
        6>? HELLO 3
        6> SUBSCRIBE news
        6> GET k
        3> PUBLISH news resp3
        sync 6
        6> PUBLISH news to-self
        sync 6
        6> UNSUBSCRIBE news
        ",
    );
}

#[test]
fn subscribed_context_and_multi_match_redis() {
    differential(
        "kvdiff-subctx",
        &[],
        "",
        "
        0> MULTI
        0> SUBSCRIBE c
        0> EXEC
        0> SET a 1
        0> MULTI
        0> EXEC
        0> UNWATCH
        0> CLIENT ID
        0> RESET
        0> SET a 1
        ",
    );
}

#[test]
fn auth_matches_redis() {
    differential(
        "kvdiff-auth",
        &["--requirepass", "sekret"],
        "requirepass sekret;",
        "
        0> GET a
        0> PING
        0> MULTI
        0> EXEC
        0> HELLO
        0> HELLO 3
        0> AUTH
        0> AUTH a b c
        0> AUTH wrong
        0> AUTH default wrong
        0> AUTH nobody sekret
        0> HELLO 3 AUTH default wrong
        0> HELLO 2 SETNAME x
        0> CLIENT SETNAME y
        0> RESET
        0> AUTH sekret
        0> GET a
        0> AUTH wrong
        0> GET a
        0> RESET
        0> GET a
        0> AUTH default sekret
        0> SET a 1
        1>? HELLO 2 AUTH default sekret SETNAME me
        1> GET a
        1> CLIENT GETNAME
        2> SUBSCRIBE x
        2> AUTH sekret
        2> SUBSCRIBE x
        3> QUIT
        ",
    );
}

#[test]
fn auth_without_password_matches_redis() {
    differential(
        "kvdiff-nopass",
        &[],
        "",
        "
        0> AUTH x
        0> AUTH default x
        0> AUTH foo x
        0>? HELLO 2 AUTH default anything
        0> GET a
        0> HELLO 2 AUTH other anything
        0> CONFIG GET requirepass
        0> CONFIG SET requirepass pw
        1> GET a
        1> AUTH pw
        1> GET a
        0> GET a
        0> CONFIG SET requirepass ''
        2> GET a
        ",
    );
}

#[test]
fn keyspace_events_and_config_match_redis() {
    differential(
        "kvdiff-notify",
        &[],
        "",
        "
        0> CONFIG GET notify-keyspace-events
        0> CONFIG SET notify-keyspace-events KEAn
        0> CONFIG GET notify-keyspace-events
        0> CONFIG SET notify-keyspace-events xyz
        0> CONFIG SET notify-keyspace-events Ex
        0> CONFIG GET notify-keyspace-events
        1> SUBSCRIBE __keyevent@0__:expired
        2> PSUBSCRIBE __key*__:*
        0> SET k v PX 20
        sleep 100
        0> GET k
        sync 1 2
        0> SET k2 v PX 20
        sleep 100
        0> GET k2
        sync 1 2
        0> CONFIG SET notify-keyspace-events Kx
        0> SELECT 3
        0> SET k3 v PX 20
        sleep 100
        0> GET k3
        sync 1 2
        0> CONFIG SET notify-keyspace-events ''
        0> SET k4 v PX 20
        sleep 100
        0> GET k4
        sync 1 2
        0> CONFIG GET client-output-buffer-limit
        0> CONFIG SET client-output-buffer-limit pubsub
        0> CONFIG GET protected-mode
        ",
    );
}

#[test]
fn command_keyspace_events_match_redis() {
    differential(
        "kvdiff-events",
        &[],
        "notify-keyspace-events KEA;",
        "
        0> CONFIG SET notify-keyspace-events KEA
        1> PSUBSCRIBE __key*__:*
        0> SET s v
        0> SET s v2 EX 100
        0> SETEX s2 100 v
        0> APPEND s !
        0> SET n 1
        0> INCR n
        0> DECRBY n 5
        0> INCRBYFLOAT n 1.5
        0> SETRANGE s 0 X
        0> MSET a 1 b 2
        0> GETSET a 3
        0> EXPIRE a 100
        0> PERSIST a
        0> PERSIST a
        0> DEL a b nokey
        0> GETDEL s2
        0> RENAME s s3
        0> SET dst x
        0> RENAME s3 dst
        0> SETNX dst y
        0> EXPIRE dst -1
        sync 1
        0> HSET h f v g w
        0> HINCRBY h n 1
        0> HDEL h f nofield
        0> HDEL h g n
        0> SADD st a b c
        0> SREM st a
        0> SMOVE st st2 b
        0> SADD other c d
        0> SINTERSTORE out st other
        0> SINTERSTORE out st nokey
        0> SUNIONSTORE out st other
        0> SPOP st2
        sync 1
        0> CONFIG SET notify-keyspace-events Kgn
        0> SET fresh 1
        0> SET fresh 2
        0> DEL fresh
        0> MULTI
        0> SET inmulti 1
        0> DEL inmulti
        0> EXEC
        sync 1
        ",
    );
}

#[test]
fn maxmemory_settings_and_oom_match_redis() {
    differential(
        "kvdiff-oom",
        &[],
        "",
        "
        0> SET k v
        0> CONFIG SET maxmemory-policy foo
        0> CONFIG SET maxmemory-samples 0
        0> CONFIG SET maxmemory-eviction-tenacity 101
        0> CONFIG SET lfu-log-factor -1
        0> CONFIG GET maxmemory-policy
        0> CONFIG GET lfu-decay-time
        0> OBJECT FREQ k
        0> OBJECT FREQ nokey
        0> OBJECT IDLETIME nokey
        0> CONFIG SET maxmemory-policy allkeys-lfu
        0> CONFIG GET maxmemory-policy
        0> OBJECT IDLETIME k
        0> CONFIG SET maxmemory-policy noeviction
        0> CONFIG SET maxmemory 1
        0> SET a b
        0> GET k
        0> MULTI
        0> SET a b
        0> GET a
        0> EXEC
        0> MULTI
        0> GET a
        0> EXEC
        0> DEL k
        0> CONFIG SET maxmemory 0
        0> SET a b
        ",
    );
}

#[test]
fn client_reply_matches_redis() {
    differential(
        "kvdiff-reply",
        &[],
        "",
        "
        0> CLIENT REPLY ON
        1> SUBSCRIBE ch
        0> CLIENT REPLY foo
        0> CLIENT REPLY
        0>0 CLIENT REPLY SKIP
        0> CLIENT REPLY ON
        0>0 CLIENT REPLY SKIP
        0>0 SET skipped 1
        0> GET skipped
        0>0 CLIENT REPLY OFF
        0>0 SET a 1
        0>0 NOSUCH
        0>0 PUBLISH ch quiet
        0> CLIENT REPLY ON
        0> GET a
        sync 1
        0>0 CLIENT REPLY OFF
        0> RESET
        0> GET a
        2>0 CLIENT REPLY SKIP
        2>0 CLIENT REPLY SKIP
        2>0 PING one
        2> PING two
        ",
    );
}

#[test]
fn acl_matches_redis() {
    differential(
        "kvdiff-acl",
        &[],
        "",
        "
        0> ACL LIST
        0> ACL WHOAMI
        0> ACL USERS
        0> ACL GETUSER default
        0> ACL GETUSER nobody
        0> ACL SETUSER alice on >p1 ~cached:* +get
        0> ACL LIST
        0> ACL SETUSER bob
        0> ACL SETUSER carol on nopass allkeys allchannels +@all -@dangerous
        0> ACL SETUSER dave on >pw resetkeys %R~r* %W~w* &news* +@string +@pubsub -set
        0> ACL LIST
        0> ACL GETUSER alice
        0> ACL GETUSER dave
        0> ACL USERS
        0> ACL SETUSER x badrule
        0> ACL SETUSER x +nosuchcmd
        0> ACL SETUSER x +@nosuch
        0> ACL SETUSER x <nope
        0> ACL SETUSER x #abc
        0> ACL SETUSER x allkeys ~k
        0> ACL SETUSER x allchannels &c
        0> ACL SETUSER x +client|nosuch
        0> ACL USERS
        0> ACL SETUSER e reset
        0> ACL LIST
        0> ACL SETUSER f on nopass +@all -get
        0> ACL SETUSER g on nopass +client -client|kill
        0> ACL SETUSER h on nopass -@all +@hash +get
        0> ACL GETUSER f
        0> ACL GETUSER g
        0> ACL GETUSER h
        0> ACL SETUSER p1 #f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a
        0> ACL GETUSER p1
        0> ACL SETUSER p1 !f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a
        0> ACL DELUSER default
        0> ACL DELUSER bob nobody
        0> ACL CAT foo
        0> ACL GENPASS 0
        0> ACL GENPASS 5000
        0> ACL SAVE
        0> ACL LOAD
        0> ACL SETUSER \"a b\"
        1> AUTH alice p1
        1> ACL WHOAMI
        1> GET cached:1
        1> GET other
        1> SET cached:1 v
        1> MULTI
        1> AUTH alice wrong
        2> AUTH dave pw
        2> GET r1
        2> GET w1
        2> SET w1 v
        2> SET r1 v
        2> PUBLISH news1 m
        2> PUBLISH other m
        2> SUBSCRIBE other
        2> SUBSCRIBE news-x
        3> AUTH carol anything
        3> FLUSHALL
        3> CONFIG GET maxmemory
        3> GET k
        3> KEYS *
        4> HELLO 2 AUTH bob x
        4> AUTH nobody x
        0> ACL SETUSER ex on nopass ~* +multi +exec +get +set +publish
        5> AUTH ex x
        5> MULTI
        5> GET a
        5> SET b 1
        5> SET c 1
        0> ACL SETUSER ex -get resetkeys ~b
        5> EXEC
        0> ACL SETUSER dry on nopass ~k* &c* +get +publish
        0> ACL DRYRUN dry get k1
        0> ACL DRYRUN dry get x
        0> ACL DRYRUN dry set k1 v
        0> ACL DRYRUN nobody get k
        0> ACL DRYRUN dry nosuch
        0> ACL DRYRUN dry get
        0> ACL DRYRUN dry
        0> ACL DRYRUN dry publish x m
        0> ACL DRYRUN dry publish c1 m
        0> ACL DRYRUN dry client list
        0> ACL SETUSER dry resetkeys %R~r* +set
        0> ACL DRYRUN dry set r1 v
        0> ACL DRYRUN dry get r1
        0> ACL DELUSER alice
        1> PING
        0> CLIENT LIST ID 1
        ",
    );
}

/// A small xorshift generator: the random scripts are reproducible per seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// One random data command over a few keys of every type (replies whose
/// order is deterministic in Redis only).
fn random_command(r: &mut Rng) -> String {
    let k = r.pick(&["k1", "k2", "h1", "s1", "l1"]);
    let k2 = r.pick(&["k1", "k2", "h1", "s1", "l1"]);
    let v = r.pick(&["a", "b", "7", "x y"]).replace(' ', "_");
    let f = r.pick(&["f1", "f2"]);
    match r.below(26) {
        0 => format!("SET {k} {v}"),
        1 => format!("SET {k} {v} EX 100"),
        2 => format!("GET {k}"),
        3 => format!("DEL {k} {k2}"),
        4 => format!("INCR {k}"),
        5 => format!("APPEND {k} {v}"),
        6 => format!("EXPIRE {k} 100"),
        7 => format!("PERSIST {k}"),
        8 => format!("EXISTS {k}"),
        9 => format!("HSET {k} {f} {v}"),
        10 => format!("HDEL {k} {f}"),
        11 => format!("HINCRBY {k} {f} 2"),
        12 => format!("SADD {k} {v}"),
        13 => format!("SREM {k} {v}"),
        14 => format!("LPUSH {k} {v}"),
        15 => format!("RPOP {k}"),
        16 => format!("LREM {k} 0 {v}"),
        17 => format!("RENAME {k} {k2}"),
        18 => format!("SETNX {k} {v}"),
        19 => format!("GETDEL {k}"),
        20 => format!("MSET {k} {v} {k2} {v}"),
        21 => format!("TYPE {k}"),
        22 => format!("SCARD {k}"),
        23 => format!("HGET {k} {f}"),
        24 => format!("LLEN {k}"),
        _ => format!("SINTERSTORE {k} {k2} s1"),
    }
}

/// A random two-client session of WATCH / MULTI / EXEC / DISCARD /
/// UNWATCH around data commands; with `events`, a third client watches
/// every keyspace event and is synced after each step.
fn random_session(seed: u64, steps: usize, events: bool) -> String {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut s = String::new();
    if events {
        s.push_str("9> CONFIG SET notify-keyspace-events KEAmn\n2> PSUBSCRIBE __key*__:*\n");
    }
    for _ in 0..steps {
        let c = r.below(2);
        let line = match r.below(12) {
            0 => format!(
                "WATCH {} {}",
                r.pick(&["k1", "k2", "h1"]),
                r.pick(&["s1", "l1", "nokey"])
            ),
            1 => "MULTI".to_string(),
            2 => "EXEC".to_string(),
            3 if r.below(3) == 0 => "DISCARD".to_string(),
            4 if r.below(3) == 0 => "UNWATCH".to_string(),
            _ => random_command(&mut r),
        };
        s.push_str(&format!("{c}> {line}\n"));
        if events {
            s.push_str("sync 2\n");
        }
    }
    s.push_str("0> EXEC\n1> EXEC\n");
    s
}

/// Seeds `from..from+n`; `KVDIFF_SEEDS=n` runs more of them.
fn seeds(from: u64, n: u64) -> std::ops::Range<u64> {
    let n = std::env::var("KVDIFF_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(n);
    from..from + n
}

#[test]
fn random_transactions_match_redis() {
    for seed in seeds(1, 4) {
        differential(
            &format!("kvdiff-rnd-tx-{seed}"),
            &[],
            "",
            &random_session(seed, 400, false),
        );
    }
}

#[test]
fn random_keyspace_events_match_redis() {
    for seed in seeds(11, 3) {
        differential(
            &format!("kvdiff-rnd-ev-{seed}"),
            &[],
            "",
            &random_session(seed, 250, true),
        );
    }
}

#[test]
fn client_pause_matches_redis() {
    differential(
        "kvdiff-pause",
        &[],
        "",
        "
        0> CLIENT PAUSE x
        0> CLIENT PAUSE 10 FOO
        0> CLIENT PAUSE -1
        0> CLIENT PAUSE
        0> SET x old
        0> CLIENT PAUSE 400 WRITE
        1>0 SET x new
        1>0 GET x
        2> GET x
        2> MULTI
        2>0 SET y 1
        3>0 PUBLISH ch m
        4> PING
        sleep 700
        sync 1 3
        2>2 EXEC
        0> CLIENT PAUSE 300 ALL
        1>0 PING during
        2>0 CLIENT UNPAUSE
        sleep 600
        sync 1 2
        0> CLIENT PAUSE 100000 WRITE
        1>0 INCR counter
        0> CLIENT UNPAUSE
        sync 1
        0> GET counter
        ",
    );
}
