//! The Redis-protocol module through the real binary with the `redis` crate
//! as client (and raw sockets for protocol errors): commands, pipelining,
//! lazy and active expiry, idle-client timeout, protocol errors closing only
//! the offending client, INFO, and the kv process being respawned.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use util::ReadSome;

use util::kv::{kv_pid, start, Kv};
use util::wait_for;

fn client(kv: &Kv) -> redis::Connection {
    let c = redis::Client::open(format!("redis://{}/", kv.addr)).unwrap();
    c.get_connection_with_timeout(Duration::from_secs(5))
        .unwrap()
}

#[test]
fn strings_keys_and_errors_like_redis() {
    let kv = start("kv-cmds", "");
    let mut c = client(&kv);
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
    let n: i64 = redis::cmd("INCRBY").arg("n").arg(41).query(&mut c).unwrap();
    assert_eq!(n, 41);
    let n: i64 = redis::cmd("INCR").arg("n").query(&mut c).unwrap();
    assert_eq!(n, 42);
    let f: String = redis::cmd("INCRBYFLOAT")
        .arg("f")
        .arg("10.1")
        .query(&mut c)
        .unwrap();
    assert_eq!(f, "10.1");
    let len: i64 = redis::cmd("APPEND")
        .arg("k")
        .arg("xyz")
        .query(&mut c)
        .unwrap();
    assert_eq!(len, 4);
    let r: String = redis::cmd("GETRANGE")
        .arg("k")
        .arg(1)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, "xyz");
    let _: () = redis::cmd("MSET")
        .arg("a")
        .arg(1)
        .arg("b")
        .arg(2)
        .query(&mut c)
        .unwrap();
    let m: Vec<Option<String>> = redis::cmd("MGET")
        .arg("a")
        .arg("b")
        .arg("zz")
        .query(&mut c)
        .unwrap();
    assert_eq!(m, vec![Some("1".into()), Some("2".into()), None]);
    let t: String = redis::cmd("TYPE").arg("a").query(&mut c).unwrap();
    assert_eq!(t, "string");
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    keys.sort();
    assert_eq!(keys, vec!["a", "b", "f", "k", "n"]);
    let d: i64 = redis::cmd("DEL")
        .arg("a")
        .arg("b")
        .arg("zz")
        .query(&mut c)
        .unwrap();
    assert_eq!(d, 2);
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(size, 3);
    // Errors in Redis 7's words.
    let e = redis::cmd("GET").query::<String>(&mut c).unwrap_err();
    assert!(
        e.to_string()
            .contains("wrong number of arguments for 'get' command"),
        "{e}"
    );
    let e = redis::cmd("NOSUCH")
        .arg("x")
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("unknown command 'NOSUCH'"), "{e}");
    let e = redis::cmd("INCR")
        .arg("k")
        .query::<i64>(&mut c)
        .unwrap_err();
    assert!(
        e.to_string().contains("not an integer or out of range"),
        "{e}"
    );
    let e = redis::cmd("SET")
        .arg("x")
        .arg("y")
        .arg("EX")
        .arg(0)
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("invalid expire time in 'set' command"),
        "{e}"
    );
    // SELECT isolates databases.
    let _: () = redis::cmd("SELECT").arg(3).query(&mut c).unwrap();
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(size, 0);
}

#[test]
fn ten_thousand_pipelined_commands() {
    let kv = start("kv-pipe", "");
    let mut c = client(&kv);
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        pipe.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
    }
    for i in (0..10_000).step_by(1000) {
        pipe.cmd("GET").arg(format!("key:{i}"));
    }
    let got: Vec<i64> = pipe.query(&mut c).unwrap();
    assert_eq!(got, (0..10_000).step_by(1000).collect::<Vec<i64>>());
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(size, 10_000);
}

/// Replies the socket does not take at once (the client is not reading)
/// are kept for the connection and all arrive, in order, once it reads.
#[test]
fn replies_to_a_client_that_does_not_read_all_arrive() {
    let kv = start("kv-slow-reader", "");
    let mut c = client(&kv);
    let big = "v".repeat(1 << 20);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    let mut s = TcpStream::connect(kv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let n = 40;
    let mut req = Vec::new();
    for i in 0..n {
        req.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
        req.extend_from_slice(format!("*2\r\n$4\r\nECHO\r\n$4\r\n{i:04}\r\n").as_bytes());
    }
    s.write_all(&req).unwrap();
    // Let the kv process fill the socket buffers and keep the rest.
    std::thread::sleep(Duration::from_millis(300));
    let one = format!("${}\r\n{big}\r\n", big.len());
    let mut want = Vec::new();
    for i in 0..n {
        want.extend_from_slice(one.as_bytes());
        want.extend_from_slice(format!("$4\r\n{i:04}\r\n").as_bytes());
    }
    let mut got = vec![0; want.len()];
    s.read_exact(&mut got).unwrap();
    assert!(got == want, "replies differ");
    // The connection still serves.
    s.write_all(b"PING\r\n").unwrap();
    let mut pong = [0; 7];
    s.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
}

#[test]
fn keys_expire_lazily_and_actively() {
    let kv = start("kv-expire", "    hz 10;");
    let mut c = client(&kv);
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SET")
            .arg(format!("t:{i}"))
            .arg("x")
            .arg("PX")
            .arg(100)
            .ignore();
    }
    pipe.cmd("SET").arg("keep").arg("y").ignore();
    pipe.cmd("SET")
        .arg("lazy")
        .arg("z")
        .arg("PX")
        .arg(50)
        .ignore();
    let _: () = pipe.query(&mut c).unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg("t:1").query(&mut c).unwrap();
    assert!(ttl > 0 && ttl <= 100);
    std::thread::sleep(Duration::from_millis(60));
    let v: Option<String> = redis::cmd("GET").arg("lazy").query(&mut c).unwrap();
    assert_eq!(v, None, "an expired key is gone on access");
    // Untouched keys disappear from DBSIZE within 1 s (active expiry).
    let t0 = Instant::now();
    let gone = wait_for(Duration::from_secs(1), || {
        redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap() == 1
    });
    assert!(gone, "keys left after {:?}", t0.elapsed());
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert!(info.contains("expired_keys:1001"), "{info}");
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let kv = start("kv-timeout", "    timeout 1;");
    let mut idle = TcpStream::connect(kv.addr).unwrap();
    // Taken before the PING: the server's last interaction with the client
    // cannot be earlier, however late this thread runs again after it (on
    // a loaded machine it once resumed ~1 s after the PONG had arrived).
    let t0 = Instant::now();
    idle.write_all(b"PING\r\n").unwrap();
    let mut b = [0u8; 16];
    let n = idle.read_some(&mut b).unwrap();
    assert_eq!(&b[..n], b"+PONG\r\n");
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n = idle.read_some(&mut b).unwrap_or(0);
    assert_eq!(n, 0, "closed by the server");
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(990),
        "closed too early: {waited:?}"
    );
}

#[test]
fn protocol_errors_close_only_that_client() {
    let kv = start("kv-proto", "");
    let mut good = client(&kv);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut good)
        .unwrap();
    for (bad, reply) in [
        (
            &b"*1\r\n$-5\r\n"[..],
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            &b"*99999999999\r\n"[..],
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            &b"*1\r\nxyz\r\n"[..],
            "-ERR Protocol error: expected '$', got 'x'\r\n",
        ),
        (
            &b"*1\r\n$536870913\r\n"[..],
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
    ] {
        let mut s = TcpStream::connect(kv.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(bad).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        assert_eq!(String::from_utf8_lossy(&got), reply);
    }
    // A huge announced bulk is not allocated: the kv process stays small.
    let mut s = TcpStream::connect(kv.addr).unwrap();
    s.write_all(b"*2\r\n$3\r\nSET\r\n$536870911\r\nabc")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let kvp = kv_pid(&kv);
    let rss_kb: u64 = std::fs::read_to_string(format!("/proc/{kvp}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(
        rss_kb < 64 * 1024,
        "RSS {rss_kb} KiB after a 512 MB announcement"
    );
    drop(s);
    let v: String = redis::cmd("GET").arg("k").query(&mut good).unwrap();
    assert_eq!(v, "v", "other clients unaffected");
}

#[test]
fn info_and_inline_commands() {
    let kv = start("kv-info", "");
    let mut c = client(&kv);
    let _: () = redis::cmd("SET")
        .arg("x")
        .arg(1)
        .arg("EX")
        .arg(100)
        .query(&mut c)
        .unwrap();
    let info: String = redis::cmd("INFO").query(&mut c).unwrap();
    for field in [
        "# Server\r\n",
        "redis_version:7.0.15\r\n",
        &format!("tcp_port:{}\r\n", kv.addr.port()),
        "connected_clients:1\r\n",
        "# Keyspace\r\ndb0:keys=1,expires=1,avg_ttl=",
        "total_connections_received:",
        "instantaneous_ops_per_sec:",
        "keyspace_hits:",
    ] {
        assert!(info.contains(field), "missing {field:?} in INFO:\n{info}");
    }
    // Inline commands, as telnet sends them.
    let mut s = TcpStream::connect(kv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"set \"a b\" 'c d'\r\nget \"a b\"\r\nquit\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n$3\r\nc d\r\n+OK\r\n");
}

#[test]
fn the_kv_process_is_respawned_after_kill_9() {
    let kv = start("kv-respawn", "");
    let mut c = client(&kv);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    // The master's children: one worker and the kv process; the kv process
    // is the one holding the kv port's connection.
    let kids = util::children(kv.s.pid());
    assert_eq!(kids.len(), 2, "{kids:?}");
    let kvpid = kv_pid(&kv);
    std::process::Command::new("kill")
        .args(["-9", &kvpid.to_string()])
        .status()
        .unwrap();
    assert!(kv.s.logged(
        &format!("kv process {kvpid} exited on signal 9"),
        Duration::from_secs(5)
    ));
    assert!(wait_for(Duration::from_secs(2), || {
        redis::Client::open(format!("redis://{}/", kv.addr))
            .and_then(|cl| cl.get_connection_with_timeout(Duration::from_millis(500)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok()
    }));
    let mut c = client(&kv);
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(
        v, None,
        "a new kv process starts empty (no persistence yet)"
    );
}

/// Against redis-server 7.0: every INFO section has its fields in its
/// order (what exporters and dashboards read), besides the `gyre_module`
/// line of the server section, and the CPU times are real (they were
/// zero); ROLE; COMMAND LIST with subcommands and FILTERBY.
#[test]
fn info_role_and_command_list_answer_as_redis() {
    if !util::kv::have(util::kv::REDIS) {
        return;
    }
    let kv = start("kv-info-fields", "");
    let p = util::Prefix::new("kv-info-fields-redis");
    let redis = util::kv::Redis::start(&p.dir, "dump.rdb");
    let mut g = client(&kv);
    let mut r = util::kv::connect(redis.addr);
    let fields = |c: &mut redis::Connection, section: &str| -> Vec<String> {
        let info: String = redis::cmd("INFO").arg(section).query(c).unwrap();
        info.lines()
            .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
            .filter(|k| k != "gyre_module")
            .collect()
    };
    for section in [
        "server",
        "clients",
        "memory",
        "persistence",
        "stats",
        "replication",
        "cpu",
        "modules",
        "errorstats",
        "cluster",
    ] {
        assert_eq!(
            fields(&mut g, section),
            fields(&mut r, section),
            "{section}"
        );
    }
    // ROLE: a master with no replicas, as a lone redis-server says.
    for args in [&["ROLE"][..], &["ROLE", "x"]] {
        let ask = |c: &mut redis::Connection| {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            cmd.query::<redis::Value>(c).map_err(|e| e.to_string())
        };
        assert_eq!(ask(&mut g), ask(&mut r), "{args:?}");
    }
    // COMMAND LIST names subcommands as Redis 7.0 does (`memory|usage`),
    // every name is one of Redis's, and FILTERBY filters as Redis's.
    let list = |c: &mut redis::Connection, extra: &[&str]| -> Result<Vec<String>, String> {
        let mut cmd = redis::cmd("COMMAND");
        cmd.arg("LIST");
        for a in extra {
            cmd.arg(*a);
        }
        let mut v: Vec<String> = cmd.query(c).map_err(|e| e.to_string())?;
        v.sort();
        Ok(v)
    };
    let (gl, rl) = (list(&mut g, &[]).unwrap(), list(&mut r, &[]).unwrap());
    assert!(gl.iter().any(|n| n == "memory|usage"), "{gl:?}");
    for n in &gl {
        assert!(rl.contains(n), "gyre lists {n}, redis-server does not");
    }
    for f in [
        &["FILTERBY", "PATTERN", "memory*"][..],
        &["FILTERBY", "PATTERN", "SLOWLOG|*"],
        &["FILTERBY", "ACLCAT", "list"],
        &["FILTERBY", "ACLCAT", "nosuch"],
        &["FILTERBY", "MODULE", "foo"],
        &["FILTERBY", "foo", "bar"],
        &["FILTERBY", "PATTERN"],
    ] {
        assert_eq!(list(&mut g, f), list(&mut r, f), "{f:?}");
    }
    // A busy loop shows in the CPU times.
    for _ in 0..2000 {
        let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut g).unwrap();
    }
    let info: String = redis::cmd("INFO").arg("cpu").query(&mut g).unwrap();
    let total: f64 = info
        .lines()
        .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
        .filter_map(|l| {
            l.split_once(':')
                .and_then(|(_, v)| v.trim().parse::<f64>().ok())
        })
        .sum();
    assert!(total > 0.0, "{info}");
}
