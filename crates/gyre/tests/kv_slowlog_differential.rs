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

/// Sends `args` on `c` without waiting for the reply (a blocking command).
fn send(c: &mut redis::Connection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    c.send_packed_command(&cmd.get_packed_command()).unwrap();
}

/// Waits until client `id` is blocked (CLIENT LIST's `flags=b`), asking
/// on `admin`; the asks are logged too, and left out when comparing.
fn wait_blocked(admin: &mut redis::Connection, id: i64) {
    let want = format!("id={id} ");
    for _ in 0..500 {
        let Value::BulkString(list) = ask(admin, &["CLIENT", "LIST"]) else {
            panic!("CLIENT LIST");
        };
        let list = String::from_utf8_lossy(&list).into_owned();
        if list
            .lines()
            .any(|l| l.starts_with(&want) && l.contains(" flags=b "))
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("client {id} never blocked");
}

/// Blocked commands in the slow log as Redis 7.0 logs them: one served by
/// a push is logged after the push, with its arguments; one ended by
/// CLIENT UNBLOCK (either way) is logged before it with no arguments; a
/// timeout is not logged.
fn blocked_entries(addr: std::net::SocketAddr) -> Vec<(Value, Value)> {
    let mut admin = connect(addr);
    let mut b = connect(addr);
    assert_eq!(ask(&mut b, &["CLIENT", "SETNAME", "blocker"]), Value::Okay);
    let Value::Int(bid) = ask(&mut b, &["CLIENT", "ID"]) else {
        panic!("CLIENT ID");
    };
    let bid_s = bid.to_string();
    ask(&mut admin, &["CONFIG", "RESETSTAT"]);
    ask(&mut admin, &["SLOWLOG", "RESET"]);
    assert_eq!(ask(&mut b, &["BLPOP", "k1", "0.05"]), Value::Nil);
    assert_eq!(ask(&mut b, &["BZPOPMIN", "z", "0.05"]), Value::Nil);
    send(&mut b, &["BLPOP", "k2", "0"]);
    wait_blocked(&mut admin, bid);
    ask(&mut admin, &["LPUSH", "k2", "v"]);
    b.recv_response().unwrap();
    send(&mut b, &["BLMOVE", "a", "b", "LEFT", "RIGHT", "0"]);
    wait_blocked(&mut admin, bid);
    ask(&mut admin, &["RPUSH", "a", "x"]);
    b.recv_response().unwrap();
    send(&mut b, &["BLPOP", "k3", "0"]);
    wait_blocked(&mut admin, bid);
    ask(&mut admin, &["CLIENT", "UNBLOCK", &bid_s, "ERROR"]);
    let unblocked = b.recv_response();
    assert!(
        matches!(unblocked, Err(_) | Ok(Value::ServerError(_))),
        "{unblocked:?}"
    );
    send(&mut b, &["BZPOPMAX", "z", "0"]);
    wait_blocked(&mut admin, bid);
    ask(&mut admin, &["CLIENT", "UNBLOCK", &bid_s]);
    assert_eq!(b.recv_response().unwrap(), Value::Nil);
    let mut entries: Vec<(Value, Value)> = comparable(ask(&mut admin, &["SLOWLOG", "GET", "-1"]))
        .into_iter()
        .map(|(_, argv, name)| (argv, name))
        .filter(|(argv, _)| {
            !matches!(argv, Value::Array(a) if a.len() == 2
                && a[1] == Value::BulkString(b"LIST".to_vec()))
        })
        .collect();
    entries.reverse();
    // The calls, failures and error stats of the blocked commands: an
    // unblocked one failed, CLIENT UNBLOCK ERROR failed too.
    let Value::BulkString(info) = ask(&mut admin, &["INFO", "commandstats"]) else {
        panic!("INFO");
    };
    let mut stats: Vec<String> = String::from_utf8_lossy(&info)
        .lines()
        .filter(|l| {
            ["blpop", "bzpop", "blmove", "unblock"]
                .iter()
                .any(|c| l.contains(c))
        })
        .map(|l| {
            let (name, rest) = l.split_once(':').unwrap();
            let kept: Vec<&str> = rest.split(',').filter(|f| !f.starts_with("usec")).collect();
            format!("{name}:{}", kept.join(","))
        })
        .collect();
    stats.sort();
    let Value::BulkString(errs) = ask(&mut admin, &["INFO", "errorstats"]) else {
        panic!("INFO");
    };
    stats.push(String::from_utf8_lossy(&errs).trim().to_string());
    entries.push((Value::SimpleString(stats.join("\n")), Value::Nil));
    // The CLIENT UNBLOCK entries name the client id, which differs.
    for (argv, _) in &mut entries {
        if let Value::Array(a) = argv {
            if a.len() >= 3 && a[1] == Value::BulkString(b"UNBLOCK".to_vec()) {
                a[2] = Value::BulkString(b"ID".to_vec());
            }
        }
    }
    entries
}

#[test]
fn blocked_commands_are_slow_logged_as_redis_logs_them() {
    if !have(REDIS) {
        return;
    }
    let kv = start("kv-slowlog-blocked", "slowlog-log-slower-than 0;");
    let p = util::Prefix::new("kv-slowlog-blocked-redis");
    let redis = Redis::start_with(
        &p.dir,
        "dump.rdb",
        &["--appendonly", "no", "--slowlog-log-slower-than", "0"],
    );
    let (g, r) = (blocked_entries(kv.addr), blocked_entries(redis.addr));
    assert_eq!(g, r);
    let text = format!("{r:?}");
    assert!(text.contains("BLMOVE") && text.contains("k2"), "{text}");
    assert!(
        text.contains("cmdstat_blpop:calls=3,rejected_calls=0,failed_calls=1"),
        "{text}"
    );
}
