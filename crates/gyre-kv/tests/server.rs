//! Cron duties, client registry, INFO format, SCAN/KEYS, HELLO/RESP3.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use gyre_kv::{Config, Reply, Server};

fn info(t: &mut T, args: &[&str]) -> String {
    let mut v = vec!["INFO"];
    v.extend_from_slice(args);
    match t.cmd(&v) {
        Reply::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    }
}

/// Parse INFO text back: sections with `key:value` lines, CRLF only.
fn parse_info(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    assert!(text.ends_with("\r\n"));
    assert!(!text.replace("\r\n", "").contains('\n'), "bare LF");
    let mut sections = Vec::new();
    for block in text.split("\r\n\r\n") {
        let mut lines = block.split("\r\n").filter(|l| !l.is_empty());
        let head = lines.next().unwrap();
        let name = head.strip_prefix("# ").expect("section header").to_string();
        let kv = lines
            .map(|l| {
                let (k, v) = l.split_once(':').expect("key:value");
                (k.to_string(), v.to_string())
            })
            .collect();
        sections.push((name, kv));
    }
    sections
}

#[test]
fn info_format_and_exporter_fields() {
    let mut t = T::new();
    t.cmd(&["SET", "a", "1"]);
    t.cmd(&["SET", "b", "1", "EX", "100"]);
    t.cmd(&["GET", "a"]);
    t.cmd(&["GET", "zz"]);
    let text = info(&mut t, &[]);
    let secs = parse_info(&text);
    let names: Vec<&str> = secs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Server",
            "Clients",
            "Memory",
            "Persistence",
            "Stats",
            "Replication",
            "CPU",
            "Modules",
            "Errorstats",
            "Cluster",
            "Keyspace"
        ]
    );
    let get = |k: &str| {
        secs.iter()
            .flat_map(|(_, kv)| kv)
            .find(|(kk, _)| kk == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("missing {k}"))
    };
    for k in [
        "redis_version",
        "redis_mode",
        "os",
        "arch_bits",
        "process_id",
        "tcp_port",
        "uptime_in_seconds",
        "hz",
        "connected_clients",
        "blocked_clients",
        "used_memory",
        "used_memory_human",
        "maxmemory",
        "total_connections_received",
        "total_commands_processed",
        "instantaneous_ops_per_sec",
        "rejected_connections",
        "expired_keys",
        "evicted_keys",
        "keyspace_hits",
        "keyspace_misses",
    ] {
        get(k);
    }
    assert_eq!(get("redis_version"), "7.0.15");
    assert_eq!(get("redis_mode"), "standalone");
    assert_eq!(get("arch_bits"), "64");
    assert_eq!(get("connected_clients"), "1");
    assert_eq!(get("keyspace_hits"), "1");
    assert_eq!(get("keyspace_misses"), "1");
    assert_eq!(get("total_commands_processed"), "4");
    assert_eq!(get("db0"), "keys=2,expires=1,avg_ttl=0");
    assert!(text.starts_with("# Server\r\nredis_version:7.0.15\r\n"));

    // Sections by name, case-insensitive, several at once, unknown = empty.
    let k = info(&mut t, &["KEYSPACE"]);
    assert_eq!(k, "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0\r\n");
    let two = parse_info(&info(&mut t, &["clients", "server"]));
    assert_eq!(
        two.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["Server", "Clients"]
    );
    assert_eq!(info(&mut t, &["nosuch"]), "");
}

#[test]
fn instantaneous_ops_from_16_samples_every_100ms() {
    let mut t = T::new();
    // 1000 commands per 100 ms = 10000 ops/sec, sampled by cron at hz 10.
    for _ in 0..20 {
        for _ in 0..1000 {
            t.cmd(&["PING"]);
        }
        t.advance(100);
        let now = t.now;
        t.s.cron(now);
    }
    let text = info(&mut t, &["stats"]);
    assert!(
        text.contains("instantaneous_ops_per_sec:10000\r\n"),
        "{text}"
    );
}

#[test]
fn idle_clients_are_selected_for_close_spread_over_cron_runs() {
    let mut s = Server::new(
        Config {
            timeout: 10,
            dynamic_hz: false,
            ..Config::default()
        },
        T0,
    );
    let ids: Vec<u64> = (0..100)
        .map(|i| s.connect(&format!("10.0.0.1:{i}"), "l", i, T0).unwrap())
        .collect();
    // Half of them talk at T0 + 5 s.
    for id in ids.iter().step_by(2) {
        s.touch(*id, T0 + 5_000);
    }
    // At T0 + 12 s the silent half is idle 12 s > 10 s.
    let mut closed = Vec::new();
    let mut now = T0 + 12_000;
    for _ in 0..10 {
        let o = s.cron(now);
        // numclients / hz = 100 / 10 = 10 clients checked per call
        assert!(o.close.len() <= 10);
        closed.extend(o.close);
        now += 100;
    }
    closed.sort();
    let want: Vec<u64> = ids.iter().skip(1).step_by(2).copied().collect();
    assert_eq!(closed, want);
    // Closing is the glue's job; a client is reported once.
    assert!(s.cron(now).close.is_empty());
    for id in closed {
        s.disconnect(id);
    }
    assert_eq!(s.connected_clients(), 50);
    // timeout 0 disables the check.
    s.config.timeout = 0;
    assert!(s.cron(T0 + 1_000_000).close.is_empty());
}

#[test]
fn dynamic_hz_scales_with_clients() {
    let mut s = Server::new(
        Config {
            maxclients: 1_000_000,
            ..Config::default()
        },
        T0,
    );
    assert_eq!(s.cron(T0).next_in_ms, 100);
    for i in 0..2000 {
        s.connect("a:1", "l", i, T0).unwrap();
    }
    // 2000 / 10 = 200: not more than 200 per tick yet.
    assert_eq!(s.cron(T0).hz, 10);
    s.connect("a:1", "l", 0, T0).unwrap();
    for i in 0..9 {
        s.connect("a:1", "l", i, T0).unwrap();
    }
    // 2010 / 10 = 201 > 200 -> hz 20; 2010 / 20 = 100.
    let o = s.cron(T0);
    assert_eq!(o.hz, 20);
    assert_eq!(o.next_in_ms, 50);
    for i in 0..200_000 {
        s.connect("a:1", "l", i, T0).unwrap();
    }
    let o = s.cron(T0);
    assert_eq!(o.hz, 500, "capped at 500");
    assert_eq!(o.next_in_ms, 2);
    s.config.dynamic_hz = false;
    assert_eq!(s.cron(T0).hz, 10);
}

#[test]
fn maxclients_rejects_with_redis_error() {
    let mut s = Server::new(
        Config {
            maxclients: 1,
            ..Config::default()
        },
        T0,
    );
    s.connect("a:1", "l", 1, T0).unwrap();
    assert_eq!(
        s.connect("a:2", "l", 2, T0).unwrap_err(),
        b"-ERR max number of clients reached\r\n".to_vec()
    );
    assert_eq!(s.stats.rejected_connections, 1);
}

#[test]
fn client_commands() {
    let mut t = T::new();
    let other =
        t.s.connect("10.1.1.1:4000", "127.0.0.1:6379", 11, T0)
            .unwrap();
    assert_eq!(t.cmd(&["CLIENT", "ID"]), int(t.id as i64));
    assert_eq!(t.cmd(&["client", "setname", "worker-1"]), ok());
    assert_eq!(t.cmd(&["CLIENT", "GETNAME"]), bulk("worker-1"));
    t.advance(3000);
    let list = match t.cmd(&["CLIENT", "LIST"]) {
        Reply::Bulk(b) => String::from_utf8(b).unwrap(),
        r => panic!("{r:?}"),
    };
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with(&format!("id={} addr=127.0.0.1:50000 laddr=127.0.0.1:6379 fd=9 name=worker-1 age=3 idle=3 flags=N db=0 ", t.id)), "{}", lines[0]);
    assert!(lines[0].contains(" cmd=client|list "));
    assert!(lines[0].ends_with(" resp=2"));
    assert!(lines[1].contains("addr=10.1.1.1:4000"));
    assert_eq!(
        t.cmd(&["CLIENT", "KILL", "ID", "abc"]),
        err("ERR client-id should be greater than 0")
    );
    assert_eq!(t.cmd(&["CLIENT", "KILL", "ADDR", "10.1.1.1:4000"]), int(1));
    assert_eq!(t.s.take_clients_to_close(), vec![other]);
    assert_eq!(
        t.cmd(&["CLIENT", "KILL", "ADDR", "10.1.1.1:4000"]),
        int(1),
        "still listed until the glue disconnects it"
    );
    t.s.disconnect(other);
    assert_eq!(
        t.cmd(&["CLIENT", "KILL", "10.1.1.1:4000"]),
        err("ERR No such client")
    );
    // Killing oneself by ID skips me by default; the old form closes after +OK.
    assert_eq!(t.cmd(&["CLIENT", "KILL", "ID", &t.id.to_string()]), int(0));
    let (r, o) = t.raw(b"CLIENT KILL 127.0.0.1:50000\r\nPING\r\n");
    assert_eq!(r, vec![ok()]);
    assert!(o.close);
}

#[test]
fn hello_3_switches_to_resp3() {
    let mut t = T::new();
    let mut out = Vec::new();
    t.s.feed(
        t.id,
        b"HELLO 3 SETNAME me\r\nGET nokey\r\nCONFIG GET maxclients\r\nHELLO 2\r\nGET nokey\r\n",
        t.now,
        &mut out,
    );
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n"), "{text}");
    assert!(text.contains("_\r\n%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n*14\r\n"));
    assert!(text.ends_with("$-1\r\n"));
    assert_eq!(t.cmd(&["CLIENT", "GETNAME"]), bulk("me"));
    assert_eq!(
        t.cmd(&["HELLO", "4"]),
        err("NOPROTO unsupported protocol version")
    );
}

#[test]
fn select_keeps_databases_apart() {
    let mut t = T::new();
    t.cmd(&["SET", "k", "0"]);
    assert_eq!(t.cmd(&["SELECT", "3"]), ok());
    assert_eq!(t.cmd(&["GET", "k"]), null());
    t.cmd(&["SET", "k", "3"]);
    assert_eq!(t.cmd(&["DBSIZE"]), int(1));
    assert_eq!(t.cmd(&["FLUSHDB"]), ok());
    t.cmd(&["SELECT", "0"]);
    assert_eq!(t.cmd(&["GET", "k"]), bulk("0"));
    assert_eq!(t.cmd(&["FLUSHALL", "ASYNC"]), ok());
    assert_eq!(t.cmd(&["DBSIZE"]), int(0));
}

#[test]
fn keys_glob_table() {
    let mut t = T::new();
    for k in [
        "hello", "hallo", "hxllo", "hllo", "heeeello", "h*llo", "user:1", "user:22", "a[b",
    ] {
        t.cmd(&["SET", k, "1"]);
    }
    let keys = |t: &mut T, p: &str| -> Vec<String> {
        let Reply::Array(v) = t.cmd(&["KEYS", p]) else {
            panic!()
        };
        let mut v: Vec<String> = v
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => String::from_utf8(b).unwrap(),
                _ => panic!(),
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(keys(&mut t, "h?llo"), ["h*llo", "hallo", "hello", "hxllo"]);
    assert_eq!(
        keys(&mut t, "h*llo"),
        ["h*llo", "hallo", "heeeello", "hello", "hllo", "hxllo"]
    );
    assert_eq!(keys(&mut t, "h[ae]llo"), ["hallo", "hello"]);
    assert_eq!(keys(&mut t, "h[^e]llo"), ["h*llo", "hallo", "hxllo"]);
    assert_eq!(keys(&mut t, "h[a-b]llo"), ["hallo"]);
    assert_eq!(keys(&mut t, "h\\*llo"), ["h*llo"]);
    assert_eq!(keys(&mut t, "user:?"), ["user:1"]);
    assert_eq!(keys(&mut t, "user:*"), ["user:1", "user:22"]);
    assert_eq!(keys(&mut t, "a\\[b"), ["a[b"]);
    assert_eq!(keys(&mut t, "*").len(), 9);
}

#[test]
fn scan_returns_every_stable_key_despite_churn() {
    let mut t = T::new();
    for i in 0..1000 {
        t.cmd(&["SET", &format!("stable:{i}"), "1"]);
        t.cmd(&["SET", &format!("churn:{i}"), "1"]);
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        let Reply::Array(v) = t.cmd(&["SCAN", &cursor, "COUNT", "50", "MATCH", "stable:*"]) else {
            panic!()
        };
        let Reply::Bulk(c) = &v[0] else { panic!() };
        cursor = String::from_utf8(c.clone()).unwrap();
        let Reply::Array(ks) = &v[1] else { panic!() };
        for k in ks {
            let Reply::Bulk(k) = k else { panic!() };
            assert!(k.starts_with(b"stable:"));
            seen.insert(k.clone());
        }
        // Churn between calls: delete some, add new ones.
        t.cmd(&["DEL", &format!("churn:{round}")]);
        t.cmd(&["SET", &format!("new:{round}"), "1"]);
        round += 1;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 1000, "every key present throughout is returned");
    // TYPE hash matches nothing (strings only), COUNT 10 per step.
    let Reply::Array(v) = t.cmd(&["SCAN", "0", "TYPE", "hash"]) else {
        panic!()
    };
    assert_ne!(v[0], bulk("0"));
    assert_eq!(v[1], arr(vec![]));
}

#[test]
fn unknown_command_and_arity_texts() {
    let mut t = T::new();
    assert_eq!(
        t.cmd(&["foo", "a", "b"]),
        err("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")
    );
    assert_eq!(
        t.cmd(&["get"]),
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(t.cmd(&["GeT", "x"]), null(), "names are case-insensitive");
    assert_eq!(
        t.cmd(&["config", "get"]),
        err("ERR wrong number of arguments for 'config|get' command")
    );
    assert_eq!(
        t.cmd(&["config", "foo"]),
        err("ERR unknown subcommand 'foo'. Try CONFIG HELP.")
    );
    let long = "x".repeat(200);
    let Reply::Error(e) = t.cmd(&["nope", &long]) else {
        panic!()
    };
    assert_eq!(
        e.len(),
        "ERR unknown command 'nope', with args beginning with: ".len() + 1 + 128 + 2
    );
}

#[test]
fn config_set_get_resetstat() {
    let mut t = T::new();
    assert_eq!(t.cmd(&["CONFIG", "SET", "hz", "20", "timeout", "7"]), ok());
    assert_eq!(t.s.config.hz, 20);
    assert_eq!(
        t.cmd(&["CONFIG", "GET", "timeout"]),
        arr(vec![bulk("timeout"), bulk("7")])
    );
    assert_eq!(
        t.cmd(&["CONFIG", "GET", "max*"]),
        arr(vec![
            bulk("maxclients"),
            bulk("10000"),
            bulk("maxmemory-clients"),
            bulk("0"),
            bulk("maxmemory"),
            bulk("0"),
            bulk("maxmemory-policy"),
            bulk("noeviction"),
            bulk("maxmemory-samples"),
            bulk("5"),
            bulk("maxmemory-eviction-tenacity"),
            bulk("10")
        ])
    );
    assert_eq!(t.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]), ok());
    assert_eq!(t.s.config.proto_max_bulk_len, 1 << 20);
    assert_eq!(
        t.cmd(&["SETRANGE", "k", "1048576", "x"]),
        err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    let (r, o) = t.raw(b"*1\r\n$1048577\r\n");
    assert_eq!(r, vec![err("ERR Protocol error: invalid bulk length")]);
    assert!(o.close);
    let mut t = T::new();
    t.cmd(&["GET", "x"]);
    assert_eq!(t.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert!(info(&mut t, &["stats"]).contains("keyspace_misses:0\r\n"));
}

#[test]
fn time_and_command_introspection() {
    let mut t = T::new();
    assert_eq!(t.cmd(&["TIME"]), arr(vec![bulk("1700000000"), bulk("0")]));
    let Reply::Int(n) = t.cmd(&["COMMAND", "COUNT"]) else {
        panic!()
    };
    assert!(n > 50);
    let Reply::Array(v) = t.cmd(&["COMMAND", "INFO", "get", "nosuch"]) else {
        panic!()
    };
    assert_eq!(v[1], null());
    let Reply::Array(get) = &v[0] else { panic!() };
    assert_eq!(get[0], bulk("get"));
    assert_eq!(get[1], int(2));
    let Reply::Array(d) = t.cmd(&["COMMAND", "DOCS", "set"]) else {
        panic!()
    };
    assert_eq!(d[0], bulk("set"));
    assert_eq!(t.cmd(&["FUNCTION", "FLUSH"]), ok());
}

#[test]
fn quit_replies_ok_then_closes_and_ignores_the_rest() {
    let mut t = T::new();
    let (r, o) = t.raw(b"PING\r\nQUIT\r\nSET a b\r\n");
    assert_eq!(r, vec![st("PONG"), ok()]);
    assert!(o.close);
    assert_eq!(t.s.db(0).unwrap().len(), 0);
}
