//! What one loop turn costs while a forkless BGSAVE runs under a SET load,
//! no sockets: `clients` connections each feed a `-P 16` batch of SETs to
//! random keys of a `keys`-string dataset (redis-benchmark's
//! `-t set -r keys -d 100 -P 16`), then the loop's save slice runs, as in
//! the kv process. Prints the slice's and the whole turn's durations
//! (p50 / p99 / max) before and during the save, how many turns it took,
//! and the records saved ahead of the sweep by writes. The GET latency a
//! client sees under this load is about one to two turns.
//!
//! ```sh
//! cargo build --release -p gyre-kv --example bgsave_ticks
//! target/release/examples/bgsave_ticks 1000000 50 [slice_us [rounds [hash_fields]]]
//! ```
//!
//! `hash_fields`: also one hash `big:hash` of that many fields (the
//! large-value case: its record is written across slices).
use std::time::Instant;

use gyre_kv::{Config, Server};

const T0: i64 = 1_700_000_000_000;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
}

fn line(what: &str, v: &mut [f64]) {
    println!(
        "{what}: p50 {:.1} p99 {:.1} max {:.1} us ({} samples)",
        pct(v, 0.5),
        pct(v, 0.99),
        pct(v, 1.0),
        v.len()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let keys: u64 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let clients: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(50);
    let dir = std::env::temp_dir().join(format!("gyre-bgsave-ticks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    let mut config = Config::default();
    config.persist.dir = dir.clone();
    if let Some(us) = args.get(3).and_then(|a| a.parse().ok()) {
        config.persist.bgsave_slice_us = us;
    }
    let mut server = Server::new(config, T0);
    let val = vec![b'x'; 100];
    if let Some(db) = server.db_mut(0) {
        db.reserve(keys as usize, 0);
        for i in 0..keys {
            db.set(format!("key:{i:012}").as_bytes(), val.clone(), false);
        }
    }
    let ids: Vec<_> = (0..clients)
        .filter_map(|i| {
            server
                .connect(&format!("127.0.0.1:{}", 50000 + i), "127.0.0.1:6379", 9, T0)
                .ok()
        })
        .collect();
    let fields: usize = args.get(5).and_then(|a| a.parse().ok()).unwrap_or(0);
    if let Some(&id) = ids.first() {
        let mut out = Vec::new();
        for b in 0..fields.div_ceil(1000) {
            let n = 1000.min(fields - b * 1000);
            let mut cmd = format!("*{}\r\n$4\r\nHSET\r\n$8\r\nbig:hash\r\n", 2 + 2 * n);
            for i in b * 1000..b * 1000 + n {
                let f = format!("field:{i}");
                let v = format!("value:{i}");
                cmd.push_str(&format!("${}\r\n{f}\r\n${}\r\n{v}\r\n", f.len(), v.len()));
            }
            out.clear();
            server.feed(id, cmd.as_bytes(), T0, &mut out);
        }
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let batch = |rng: &mut Rng| {
        let mut b = Vec::new();
        for _ in 0..16 {
            let k = format!("key:{:012}", rng.below(keys));
            b.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$16\r\n");
            b.extend_from_slice(k.as_bytes());
            b.extend_from_slice(b"\r\n$100\r\n");
            b.extend_from_slice(&val);
            b.extend_from_slice(b"\r\n");
        }
        b
    };
    let mut out = Vec::with_capacity(64 * 1024);
    let mut turn = |server: &mut Server, rng: &mut Rng| {
        for &id in &ids {
            let b = batch(rng);
            out.clear();
            server.feed(id, &b, T0, &mut out);
        }
        server.before_sleep(T0);
    };
    let mut before = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        turn(&mut server, &mut rng);
        before.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let rounds: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(1);
    let t_save = Instant::now();
    let (mut slices, mut turns, mut feeds) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        if let Err(e) = server.bgsave_start(T0) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        loop {
            let t = Instant::now();
            turn(&mut server, &mut rng);
            let s = Instant::now();
            let more = server.bgsave_slice(T0);
            let now = Instant::now();
            slices.push((now - s).as_secs_f64() * 1e6);
            feeds.push((s - t).as_secs_f64() * 1e6);
            turns.push((now - t).as_secs_f64() * 1e6);
            if !more {
                break;
            }
        }
    }
    let secs = t_save.elapsed().as_secs_f64();
    println!(
        "{keys} keys, {clients} clients x 16 SETs per turn: save {secs:.2} s in {} turns, {} records saved before a write, status {}",
        turns.len(),
        server.persist.last_copied,
        if server.persist.last_bgsave_ok { "ok" } else { "err" }
    );
    line("turn before the save", &mut before);
    line("turn during the save", &mut turns);
    line("clients' part of a turn during the save", &mut feeds);
    line("save slice", &mut slices);
    let _ = std::fs::remove_dir_all(&dir);
}
