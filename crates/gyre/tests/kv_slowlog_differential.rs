//! SLOWLOG against redis-server 7.0, with `slowlog-log-slower-than 0` on
//! both (every command is slow): the same commands leave the same entries
//! — ids, arguments cut at 32 and at 128 bytes as Redis cuts them, the
//! client's name — in the same order, bounded by `slowlog-max-len`, and
//! the subcommands' replies and errors are Redis's. Times and durations
//! differ by nature and are only checked to be numbers; the client address
//! differs by port.
#![allow(clippy::unwrap_used)]

mod util;

use redis::Value;
use util::kv::{connect, have, start, Redis, REDIS};

fn ask(c: &mut redis::Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(c) {
        Ok(v) => v,
        Err(e) => Value::SimpleString(format!("error: {e}")),
    }
}

/// An entry without what cannot match: [id, argv, name].
fn comparable(entries: Value) -> Vec<(i64, Value, Value)> {
    let Value::Array(es) = entries else {
        panic!("not an array: {entries:?}");
    };
    es.into_iter()
        .map(|e| {
            let Value::Array(f) = e else {
                panic!("not an entry: {e:?}");
            };
            assert_eq!(f.len(), 6, "{f:?}");
            let Value::Int(id) = f[0] else {
                panic!("id {:?}", f[0]);
            };
            assert!(
                matches!(f[1], Value::Int(t) if t > 1_600_000_000),
                "{:?}",
                f[1]
            );
            assert!(matches!(f[2], Value::Int(d) if d >= 0), "{:?}", f[2]);
            assert!(matches!(&f[4], Value::BulkString(a) if a.starts_with(b"127.0.0.1:")));
            (id, f[3].clone(), f[5].clone())
        })
        .collect()
}

#[test]
fn the_slow_log_keeps_what_redis_keeps() {
    if !have(REDIS) {
        return;
    }
    let kv = start(
        "kv-slowlog",
        "slowlog-log-slower-than 0;\nslowlog-max-len 5;",
    );
    let p = util::Prefix::new("kv-slowlog-redis");
    let redis = Redis::start_with(
        &p.dir,
        "dump.rdb",
        &[
            "--appendonly",
            "no",
            "--slowlog-log-slower-than",
            "0",
            "--slowlog-max-len",
            "5",
        ],
    );
    let mut g = connect(kv.addr);
    let mut r = connect(redis.addr);
    let long = "x".repeat(300);
    let many: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    let mut script: Vec<Vec<&str>> = vec![
        vec!["SLOWLOG", "RESET"],
        vec!["CLIENT", "SETNAME", "tester"],
        vec!["SET", "k", &long],
        vec!["GET", "k"],
    ];
    let mut sadd = vec!["SADD", "s"];
    sadd.extend(many.iter().map(String::as_str));
    script.push(sadd);
    // Secrets never reach the log: "(redacted)", as Redis writes.
    script.push(vec!["AUTH", "s3cret"]);
    script.push(vec!["AUTH", "someone", "s3cret"]);
    script.push(vec!["HELLO", "2", "AUTH", "default", "s3cret"]);
    script.push(vec!["MULTI"]);
    script.push(vec!["INCR", "n"]);
    script.push(vec!["EXEC"]);
    for args in &script {
        let (a, b) = (ask(&mut g, args), ask(&mut r, args));
        // HELLO's reply carries the client id, which differs.
        if args[0] != "HELLO" {
            assert_eq!(a, b, "{args:?}");
        }
    }
    let (ge, re) = (
        comparable(ask(&mut g, &["SLOWLOG", "GET", "-1"])),
        comparable(ask(&mut r, &["SLOWLOG", "GET", "-1"])),
    );
    assert_eq!(ge, re);
    assert_eq!(ge.len(), 5, "bounded by slowlog-max-len");
    assert!(!format!("{ge:?}").contains("s3cret"), "{ge:?}");
    assert!(format!("{ge:?}").contains("(redacted)"), "{ge:?}");
    for args in [
        &["SLOWLOG", "LEN"][..],
        &["SLOWLOG", "GET", "-2"],
        &["SLOWLOG", "GET", "x"],
        &["SLOWLOG", "GET", "1", "2"],
        &["SLOWLOG", "HELP"],
        &["SLOWLOG", "foo"],
        &["SLOWLOG"],
        // (A pattern's order is Redis's hash table's: one name at a time.)
        &["CONFIG", "GET", "slowlog-max-len"],
        &["CONFIG", "GET", "slowlog-log-slower-than"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
        &["SET", "a", "b"],
        &["SLOWLOG", "LEN"],
        &["SLOWLOG", "RESET"],
        &["SLOWLOG", "LEN"],
    ] {
        assert_eq!(ask(&mut g, args), ask(&mut r, args), "{args:?}");
    }
}
