//! Drives [`Server::feed`] with redis-benchmark's pipelined requests, no
//! sockets, to count the command path's cost (instructions per command
//! under `valgrind --tool=callgrind`, or time in a release build):
//!
//! ```sh
//! cargo build --release -p gyre-kv --example cmd_cost
//! valgrind --tool=callgrind target/release/examples/cmd_cost get 16 1000
//! valgrind --tool=callgrind target/release/examples/cmd_cost get 16 11000
//! ```
//!
//! Arguments: the test (`ping_inline`, `ping_mbulk`, `set`, `get`, `hset`,
//! `sadd`, or `get_r` / `set_r` / `hset_r` / `sadd_r` for 1e5 random keys as with `redis-benchmark -r
//! 100000`), commands per read (the `-P` pipeline depth) and reads. The
//! instructions per command are the difference of two runs divided by the
//! difference in commands (start-up cancels out). Without valgrind it
//! prints ns per command.
//!
//! `CMD_COST_AOF=always|everysec|no` runs with `appendonly yes` (the AOF
//! in a temp directory, written before each "sleep" as the event loop
//! does): the difference to a run without it is the AOF's cost per write.
use std::time::Instant;

use gyre_kv::util::Rng;
use gyre_kv::{Config, Server};

const T0: i64 = 1_700_000_000_000;
/// Keys for the `_r` tests (`redis-benchmark -r 100000`).
const KEYSPACE: u64 = 100_000;

fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// redis-benchmark's key: `key:__rand_int__`, the placeholder replaced by
/// a 12-digit number with `-r`.
fn key(rng: Option<&mut Rng>) -> Vec<u8> {
    match rng {
        Some(r) => format!("key:{:012}", r.below(KEYSPACE as usize)).into_bytes(),
        None => b"key:__rand_int__".to_vec(),
    }
}

fn request(test: &str, rng: &mut Rng) -> Option<Vec<u8>> {
    let random = test.ends_with("_r");
    let k = key(random.then_some(rng));
    Some(match test.trim_end_matches("_r") {
        "ping_inline" => b"PING\r\n".to_vec(),
        "ping_mbulk" => cmd(&[b"PING"]),
        "set" => cmd(&[b"SET", &k, b"xxx"]),
        "get" => cmd(&[b"GET", &k]),
        // redis-benchmark's `HSET myhash element:__rand_int__ xxx`: one
        // hash, a field per random number (a hashtable under `_r`).
        "hset" => {
            let field = [b"element".as_slice(), &k[3..]].concat();
            cmd(&[b"HSET", b"myhash", &field, b"xxx"])
        }
        // redis-benchmark's `SADD myset element:__rand_int__`.
        "sadd" => {
            let member = [b"element".as_slice(), &k[3..]].concat();
            cmd(&[b"SADD", b"myset", &member])
        }
        _ => return None,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let test = args.get(1).map_or("get", String::as_str);
    let depth: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(16);
    let reads: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let aof = std::env::var("CMD_COST_AOF").ok();
    let mut config = Config::default();
    let aof_dir = std::env::temp_dir().join(format!("gyre-cmd-cost-{}", std::process::id()));
    if let Some(policy) = aof.as_deref() {
        let _ = std::fs::remove_dir_all(&aof_dir);
        let _ = std::fs::create_dir_all(&aof_dir);
        config.persist.dir = aof_dir.clone();
        config.persist.aof.appendonly = true;
        config.persist.aof.appendfsync =
            gyre_kv::aof::Fsync::parse(policy.as_bytes()).unwrap_or(gyre_kv::aof::Fsync::EverySec);
    }
    let mut server = Server::new(config, T0);
    if aof.is_some() {
        server.aof.status = gyre_kv::aof::AofStatus::On;
        if let Err(e) = server.aof_open_at_start(T0) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        server.sync_propagation();
    }
    let Ok(id) = server.connect("127.0.0.1:50000", "127.0.0.1:6379", 9, T0) else {
        return;
    };
    let mut rng = Rng::new(1);
    // GET finds its keys (redis-benchmark runs SET before GET).
    if let Some(db) = server.db_mut(0) {
        db.set(b"key:__rand_int__", b"xxx".to_vec(), false);
        for i in 0..KEYSPACE {
            db.set(format!("key:{i:012}").as_bytes(), b"xxx".to_vec(), false);
        }
    }
    // Distinct batches so the random keys vary: under `_r`, enough that the
    // aggregates grow to most of the keyspace (a hash or set of ~1,000
    // members lives in the cache; redis-benchmark's of ~100,000 does not).
    let nbatches = if test.ends_with("_r") { 8192 } else { 64 };
    let batches: Vec<Vec<u8>> = (0..nbatches)
        .map(|_| {
            (0..depth)
                .filter_map(|_| request(test, &mut rng))
                .flatten()
                .collect()
        })
        .collect();
    if batches[0].is_empty() {
        eprintln!("usage: cmd_cost ping_inline|ping_mbulk|set|get|set_r|get_r [depth] [reads]");
        std::process::exit(2);
    }
    let mut out = Vec::with_capacity(64 * 1024);
    let start = Instant::now();
    let mut replies = 0usize;
    for i in 0..reads {
        out.clear();
        let b = &batches[i % batches.len()];
        let o = server.feed(id, b, T0, &mut out);
        debug_assert_eq!(o.consumed, b.len());
        replies += out.len();
        if aof.is_some() {
            server.aof_before_sleep(T0);
        }
    }
    if aof.is_some() {
        server.aof_shutdown(T0);
        let _ = std::fs::remove_dir_all(&aof_dir);
    }
    let ns = start.elapsed().as_nanos() as f64 / (reads * depth) as f64;
    println!("{test} -P {depth}: {reads} reads, {replies} reply bytes, {ns:.1} ns/command");
}
