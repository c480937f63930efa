//! Times BGREWRITEAOF's work for a dataset of strings, no sockets: the
//! sweep's slices back to back (as the kv process runs them when idle)
//! until the writer thread has the new base on disk and the manifest is
//! swapped.
//!
//! ```sh
//! cargo build --release -p gyre-kv --example aof_rewrite
//! target/release/examples/aof_rewrite 1000000 3 rdb   # or: aof (no preamble)
//! ```
use std::time::Instant;

use gyre_kv::{Config, Server};

const T0: i64 = 1_700_000_000_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let keys: usize = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let size: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let rdb = args.get(3).is_none_or(|a| a != "aof");
    let dir = std::env::temp_dir().join(format!("gyre-aof-rewrite-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    let mut config = Config::default();
    config.persist.dir = dir.clone();
    config.persist.aof.appendonly = true;
    config.persist.aof.use_rdb_preamble = rdb;
    let mut server = Server::new(config, T0);
    if let Some(db) = server.db_mut(0) {
        db.reserve(keys, 0);
        for i in 0..keys {
            db.set(format!("key:{i:012}").as_bytes(), vec![b'x'; size], false);
        }
    }
    server.aof.status = gyre_kv::aof::AofStatus::On;
    if let Err(e) = server.aof_open_at_start(T0) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    server.sync_propagation();
    let t = Instant::now();
    if let Err(e) = server.rewrite_background(T0) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    let mut slices = 0u64;
    while server.bgsave_slice(T0) {
        slices += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    let base: u64 = std::fs::read_dir(dir.join("appendonlydir"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().contains(".base."))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    println!(
        "{keys} keys ({size}-byte values), {} base: rewrite {secs:.3} s in {slices} slices, base {base} bytes, status {}",
        if rdb { "RDB" } else { "command" },
        if server.aof.last_rewrite_ok { "ok" } else { "err" }
    );
    let _ = std::fs::remove_dir_all(&dir);
}
