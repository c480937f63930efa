//! The propagated forms, differentially: the same command sequence to
//! redis-server 7.0 and gyre with `appendonly yes`, then their incremental
//! files compared command by command (absolute times normalised). Skipped
//! with a message when redis-server is missing.
#![allow(clippy::unwrap_used)]

mod util;

use std::time::Duration;

use util::kv::*;
use util::{wait_for, Prefix};

/// Commands as text, with absolute times (within a day of now) as `<ms>`
/// and the command name upper-cased where the server chose it.
fn normalised(cmds: &[Vec<Vec<u8>>]) -> Vec<String> {
    let now = now_ms();
    cmds.iter()
        .map(|argv| {
            argv.iter()
                .map(|a| {
                    let s: String = a.escape_ascii().to_string();
                    match s.parse::<i64>() {
                        Ok(v) if (v - now).abs() < 86_400_000 => "<ms>".into(),
                        Ok(v) if (v - now / 1000).abs() < 86_400 => "<s>".into(),
                        _ => s,
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Blocked clients as INFO says.
fn blocked(c: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("clients").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The differential sequence: writes of every kind whose propagated form
/// differs from their text, no-op writes, transactions, databases, and a
/// pop served to a blocked client.
fn sequence(addr: std::net::SocketAddr, payload: &[u8]) {
    let mut c = connect(addr);
    let soon_s = (now_ms() / 1000 + 3600).to_string();
    let soon_ms = (now_ms() + 3_600_000).to_string();
    let steps = [
        "SET a 1",
        "SET a 1 EX 100",
        "SETEX b 100 x",
        "PSETEX b2 100000 x",
        "EXPIRE a 50",
        "EXPIRE a 200 XX",
        "EXPIRE a 10 NX",
        "EXPIRE nokey 10",
        "PEXPIRE a 100000 GT",
        &format!("EXPIREAT a {soon_s}"),
        &format!("PEXPIREAT a {soon_ms}"),
        "GET nokey",
        "INCRBYFLOAT f 1.5",
        "INCRBYFLOAT f 1e3",
        "HINCRBYFLOAT h f 2.5",
        "SADD s1 only",
        "SPOP s1",
        "SADD s2 a b c",
        "SPOP s2 10",
        "SADD s3 a b c d",
        "SPOP s3 0",
        "SRANDMEMBER s3 2",
        "GETEX a PX 1000",
        "GETEX a PERSIST",
        "GETEX a PERSIST",
        &format!("GETEX b EXAT {soon_s}"),
        "GETEX b2 PXAT 1",
        "SET g 1",
        "GETSET g 2",
        "GETDEL g",
        "GETDEL g",
        "SET k v KEEPTTL GET",
        &format!("SET k v2 PXAT {soon_ms} GET"),
        "SET k v3 NX",
        "SETNX n 2",
        "SETNX n 3",
        "MSETNX n 1 q 2",
        "MSET m1 1 m2 2",
        "DEL nokey",
        "DEL n nokey",
        "INCR cnt",
        "DECRBY cnt 3",
        "APPEND ap x",
        "SETRANGE nokey2 0 ",
        "RPUSH l a b c d e f g h",
        "LPOP l",
        "RPOP l 2",
        "LMPOP 2 nol l LEFT COUNT 2",
        "BLMPOP 1 2 nol l RIGHT COUNT 1",
        "BLPOP l 1",
        "BRPOP nol l 1",
        "RPUSH l a b c",
        "BLMOVE l l2 LEFT RIGHT 1",
        "BRPOPLPUSH l l2 1",
        "LMOVE l l2 left left",
        "LREM l2 0 zz",
        "LTRIM l2 0 -1",
        "ZADD z 1 a 2 b 3 c 4 d 5 e 6 f",
        "ZPOPMIN z",
        "BZPOPMIN z 1",
        "ZMPOP 1 z MAX COUNT 1",
        "BZMPOP 1 1 z MIN",
        "ZPOPMAX z 5",
        "ZADD z2 1 a",
        "ZINCRBY z2 2 a",
        "ZREM z2 nosuch",
        "HSET h a 1",
        "HSETNX h a 2",
        "HDEL h nofield",
        "HDEL h a",
        "COPY l2 l3",
        "MOVE l3 1",
        "RENAME l2 l4",
        "SINTERSTORE dst s3 s3",
        "PERSIST b",
        "PERSIST nokey",
        "EXPIRE ap 0",
        "SELECT 3",
        "SET y 1",
        "SELECT 0",
        "SWAPDB 0 1",
        "SWAPDB 0 1",
        "SETBIT bm 7 1",
        "SETBIT bm 7 1",
    ];
    for s in steps {
        run(&mut c, s);
    }
    // A lazily expired key (or the expire cycle's: DEL either way, and
    // nothing else runs before the GET, so the DEL has one place).
    run(&mut c, "SET e 1 PX 1");
    std::thread::sleep(Duration::from_millis(50));
    run(&mut c, "GET e");
    // RESTORE with a relative TTL: absolute, with ABSTTL.
    q(&mut c, &[b"RESTORE", b"r", b"5000", payload]);
    q(&mut c, &[b"RESTORE", b"r", b"0", payload, b"REPLACE"]);
    // Transactions: one write alone, several wrapped, reads only: nothing.
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    run(&mut c, "SET x 1");
    let _: redis::Value = redis::cmd("EXEC").query(&mut c).unwrap();
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    run(&mut c, "SET x 1");
    run(&mut c, "INCR x");
    run(&mut c, "EXPIRE x 100");
    let _: redis::Value = redis::cmd("EXEC").query(&mut c).unwrap();
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    run(&mut c, "GET x");
    let _: redis::Value = redis::cmd("EXEC").query(&mut c).unwrap();
    // lazyfree: deletions by expiry as UNLINK.
    run(&mut c, "CONFIG SET lazyfree-lazy-expire yes");
    run(&mut c, "SET e2 1");
    run(&mut c, "EXPIRE e2 -1");
    run(&mut c, "CONFIG SET lazyfree-lazy-expire no");
    // A pop served to a blocked client, after the push that served it.
    let t = std::thread::spawn(move || {
        let mut b = connect(addr);
        let v: redis::Value = redis::cmd("BLPOP").arg("bl").arg(5).query(&mut b).unwrap();
        v
    });
    assert!(wait_for(Duration::from_secs(5), || blocked(&mut c) == 1));
    run(&mut c, "RPUSH bl x y");
    t.join().unwrap();
    let t = std::thread::spawn(move || {
        let mut b = connect(addr);
        let v: redis::Value = redis::cmd("BZPOPMAX")
            .arg("bz")
            .arg(5)
            .query(&mut b)
            .unwrap();
        v
    });
    assert!(wait_for(Duration::from_secs(5), || blocked(&mut c) == 1));
    run(&mut c, "ZADD bz 1 a 2 b");
    t.join().unwrap();
    for l in SEQUENCE_2 {
        run(&mut c, l);
    }
    run(&mut c, "FLUSHDB");
    run(&mut c, "FLUSHALL");
}

/// More writes of every type, each with its no-op variant (a change that
/// changes nothing is not propagated: a missing one would be a lost
/// write on replay, an extra one a divergence from Redis's file).
const SEQUENCE_2: &[&str] = &[
    "HSET h a 1 b 2 c 3",
    "HSET h a 1",
    "HMSET h a 1",
    "HINCRBY h n 5",
    "HINCRBY h n 0",
    "HDEL h a b c n",
    "HDEL h a",
    "HSETNX h2 f v",
    "LPUSH l a b c",
    "LPUSHX nol a",
    "RPUSHX l z",
    "LSET l 0 q",
    "LINSERT l BEFORE q p",
    "LINSERT l BEFORE nosuch p",
    "LREM l 1 p",
    "LTRIM l 1 -1",
    "LTRIM l 0 -1",
    "RPOPLPUSH l l",
    "RPOPLPUSH nol l",
    "LMOVE nol l LEFT LEFT",
    "SADD s a b c d",
    "SADD s a",
    "SREM s a nosuch",
    "SREM s nosuch",
    "SMOVE s s2 b",
    "SMOVE s s2 nosuch",
    "SUNIONSTORE su s s2",
    "SDIFFSTORE sd s s2",
    "SINTERSTORE si s nosuch",
    "SINTERSTORE si2 nosuch nosuch",
    "ZADD z 1 a 2 b 3 c 4 d 5 e",
    "ZADD z 1 a",
    "ZADD z NX 9 a",
    "ZADD z XX CH 7 a",
    "ZADD z INCR 1 b",
    "ZINCRBY z 0 c",
    "ZREM z nosuch",
    "ZREMRANGEBYSCORE z 100 200",
    "ZREMRANGEBYSCORE z 0 1",
    "ZREMRANGEBYRANK z 0 0",
    "ZREMRANGEBYLEX z [x [y",
    "ZADD zl 0 a 0 b 0 c",
    "ZREMRANGEBYLEX zl [a [b",
    "ZUNIONSTORE zu 2 z zl",
    "ZINTERSTORE zi 2 z zl",
    "ZDIFFSTORE zd 1 z",
    "ZRANGESTORE zr z 0 -1",
    "ZRANGESTORE zr2 nosuch 0 -1",
    "SET s1 hello",
    "SETRANGE s1 0 J",
    "SETRANGE s1 10 x",
    "APPEND s1 !",
    "APPEND s1 ",
    "INCRBY c 10",
    "DECR c",
    "MSET a 1 b 2",
    "MSETNX x1 1 x2 2",
    "GETSET s1 again",
    "SETBIT bits 100 1",
    "SETBIT bits 100 0",
    "SETBIT bits 100 0",
    "BITOP OR dest bits bits",
    "BITOP AND empty nosuch nosuch",
    "BITFIELD bf SET u8 0 255",
    "BITFIELD bf GET u8 0",
    "RENAME a ra",
    "RENAMENX b ra",
    "RENAMENX b rb",
    "COPY rb rc",
    "COPY rb rc",
    "COPY rb rc REPLACE",
    "MOVE rc 4",
    "MOVE nosuch 4",
    "UNLINK rb nosuch",
    "UNLINK nosuch",
    "EXPIRE ra 100",
    "EXPIRE ra 200 GT",
    "EXPIRE ra 300 LT",
    "EXPIRE ra 50 LT",
    "PERSIST ra",
    "TOUCH ra",
    "SELECT 4",
    "FLUSHDB",
    "SELECT 0",
    "SWAPDB 0 0",
];

#[test]
fn incr_files_match_redis_command_by_command() {
    if !have(REDIS) {
        return;
    }
    let rdir = Prefix::new("kv-aof-diff-redis");
    let r = Redis::start_with(
        &rdir.dir,
        "dump.rdb",
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let mut rc = connect(r.addr);
    let _: () = redis::cmd("SET")
        .arg("src")
        .arg("v")
        .query(&mut rc)
        .unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("src").query(&mut rc).unwrap();
    let _: () = redis::cmd("DEL").arg("src").query(&mut rc).unwrap();
    let kv = start(
        "kv-aof-diff",
        "save \"\";\nappendonly yes;\nappendfsync always;",
    );
    let mut gc = connect(kv.addr);
    let _: () = redis::cmd("SET")
        .arg("src")
        .arg("v")
        .query(&mut gc)
        .unwrap();
    let _: () = redis::cmd("DEL").arg("src").query(&mut gc).unwrap();
    sequence(r.addr, &payload);
    sequence(kv.addr, &payload);
    let want = normalised(&incr_commands(&rdir.dir.join("appendonlydir")));
    let got = normalised(&incr_commands(&kv.p.path("appendonlydir")));
    if got != want {
        let n = got.len().max(want.len());
        let mut rows = Vec::new();
        for i in 0..n {
            let (g, w) = (got.get(i), want.get(i));
            let mark = if g == w { " " } else { "!" };
            rows.push(format!(
                "{mark} {:<50} | {}",
                w.map_or("", |s| s),
                g.map_or("", |s| s)
            ));
        }
        panic!("redis (left) and gyre (right) differ:\n{}", rows.join("\n"));
    }
    assert!(want.len() > 80, "{want:?}");
}
