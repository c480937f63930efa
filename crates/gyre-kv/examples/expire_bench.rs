//! Times the active expire cycle on 1e6 keys with a 1 s TTL (release build:
//! `cargo run --release -p gyre-kv --example expire_bench`).
use std::time::Instant;

use gyre_kv::server::{CycleKind, ExpireBudget};
use gyre_kv::{Config, Server};

fn main() {
    let t0: i64 = 1_700_000_000_000;
    let mut s = Server::new(Config::default(), t0);
    let fill = Instant::now();
    if let Some(db) = s.db_mut(0) {
        for i in 0..1_000_000u32 {
            let k = format!("key:{i}");
            db.set(k.as_bytes(), b"v".to_vec(), false);
            db.set_expire(k.as_bytes(), t0 + 1000);
        }
    }
    println!("fill: {:?}", fill.elapsed());
    let mut now = t0 + 1001;
    let mut calls = 0;
    let start = Instant::now();
    while s.db(0).is_some_and(|d| !d.is_empty()) {
        let st = s.active_expire_cycle(
            now,
            CycleKind::Slow,
            ExpireBudget {
                time_limit: None,
                max_samples: 100_000,
            },
        );
        calls += 1;
        println!(
            "call {calls}: expired {} in {} us ({:.0} ns/key)",
            st.expired,
            st.elapsed_us,
            st.elapsed_us as f64 * 1000.0 / st.expired.max(1) as f64
        );
        now += 100;
    }
    println!("total {:?}", start.elapsed());

    // Redis's real budget: 25 ms of wall clock per slow cycle at hz 10 and
    // one fast cycle (1 ms) per tick; the clock advances 100 ms per call.
    let mut s = Server::new(Config::default(), t0);
    if let Some(db) = s.db_mut(0) {
        for i in 0..1_000_000u32 {
            let k = format!("key:{i}");
            db.set(k.as_bytes(), b"v".to_vec(), false);
            db.set_expire(k.as_bytes(), t0 + 1000);
        }
    }
    let mut now = t0;
    let mut worst = 0;
    while s.db(0).is_some_and(|d| !d.is_empty()) && now < t0 + 60_000 {
        let o = s.cron(now);
        let f = s.before_sleep(now);
        worst = worst.max(o.expire.elapsed_us + f.elapsed_us);
        now += o.next_in_ms as i64;
    }
    println!(
        "wall-clock budget: empty at simulated {} ms (expiry at 1000 ms); worst cron+before_sleep expire time {worst} us",
        now - t0
    );
}
