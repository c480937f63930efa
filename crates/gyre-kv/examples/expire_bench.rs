//! Times active expiry of 1e6 keys with a 1 s TTL (release build:
//! `cargo run --release -p gyre-kv --example expire_bench [runs]`).
//!
//! Per run it prints:
//! * `hashmap_remove`: a plain `HashMap<Box<[u8]>, Vec<u8>>::remove` of the
//!   same 1e6 keys in random order, per key (the memory-latency floor).
//! * `expire_per_key`: the expire cycle without a time budget, per
//!   reclaimed key.
//! * `redis_schedule`: simulated clock, Redis's schedule (25 ms slow cycle
//!   per 100 ms cron at hz 10 plus one 1 ms fast cycle per tick): when the
//!   keyspace is empty, and the longest expire stall.
//! * `sliced_schedule`: simulated clock, the glue's schedule (1 ms slice in
//!   the cron, then a 1 ms slice every 1 + `EXPIRE_SLICE_GAP_MS` ms while
//!   there is a backlog).
//!
//! With several runs it ends with the medians.
use std::collections::HashMap;
use std::time::Instant;

use gyre_kv::server::{CycleKind, ExpireBudget, EXPIRE_SLICE_GAP_MS};
use gyre_kv::util::Rng;
use gyre_kv::{Config, Server};

const N: u32 = 1_000_000;
const T0: i64 = 1_700_000_000_000;

fn filled(config: Config) -> Server {
    let mut s = Server::new(config, T0);
    if let Some(db) = s.db_mut(0) {
        for i in 0..N {
            let k = format!("key:{i}");
            db.set(k.as_bytes(), b"v".to_vec(), false);
            db.set_expire(k.as_bytes(), T0 + 1000);
        }
    }
    s
}

fn empty(s: &Server) -> bool {
    s.db(0).is_none_or(|d| d.is_empty())
}

fn hashmap_remove_ns() -> f64 {
    let mut m: HashMap<Box<[u8]>, Vec<u8>> = HashMap::new();
    let mut keys: Vec<Vec<u8>> = (0..N).map(|i| format!("key:{i}").into_bytes()).collect();
    for k in &keys {
        m.insert(k.as_slice().into(), b"v".to_vec());
    }
    let mut rng = Rng::new(7);
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.below(i + 1));
    }
    let t = Instant::now();
    for k in &keys {
        m.remove(k.as_slice());
    }
    t.elapsed().as_nanos() as f64 / f64::from(N)
}

fn expire_per_key_ns() -> f64 {
    let mut s = filled(Config::default());
    let mut now = T0 + 1001;
    let t = Instant::now();
    while !empty(&s) {
        s.active_expire_cycle(
            now,
            CycleKind::Slow,
            ExpireBudget {
                time_limit: None,
                max_samples: 100_000,
            },
        );
        now += 100;
    }
    t.elapsed().as_nanos() as f64 / f64::from(N)
}

/// 99th percentile of expire stalls (us).
fn p99(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() * 99 / 100).copied().unwrap_or(0)
}

/// (ms after the TTL when empty, longest expire stall in us, p99 stall)
fn redis_schedule() -> (i64, u64, u64) {
    let mut s = filled(Config::default());
    let mut now = T0;
    let mut worst = 0;
    let mut stalls = Vec::new();
    while !empty(&s) && now < T0 + 60_000 {
        let o = s.cron(now);
        let f = s.before_sleep(now);
        worst = worst.max(o.expire.elapsed_us + f.elapsed_us);
        stalls.push(o.expire.elapsed_us + f.elapsed_us);
        now += o.next_in_ms as i64;
    }
    (now - T0 - 1000, worst, p99(stalls))
}

/// Like the glue: cron every 100 ms with a 1 ms slice; on a backlog a
/// slice timer firing every `1 + EXPIRE_SLICE_GAP_MS` ms (slice time
/// rounded up to 1 ms) until the backlog is gone.
fn sliced_schedule() -> (i64, u64, u64) {
    let mut s = filled(Config {
        expire_slices: true,
        ..Config::default()
    });
    let mut now = T0;
    let mut next_cron = T0;
    let mut next_slice: Option<i64> = None;
    let mut worst = 0;
    let mut stalls = Vec::new();
    while !empty(&s) && now < T0 + 60_000 {
        if next_slice.is_some_and(|t| t < next_cron) {
            now = next_slice.unwrap_or(now);
            let st = s.expire_slice(now);
            worst = worst.max(st.elapsed_us);
            stalls.push(st.elapsed_us);
            next_slice = s
                .expire_backlog()
                .then_some(now + 1 + EXPIRE_SLICE_GAP_MS as i64);
        } else {
            now = next_cron;
            let o = s.cron(now);
            worst = worst.max(o.expire.elapsed_us);
            stalls.push(o.expire.elapsed_us);
            next_cron = now + o.next_in_ms as i64;
            if o.expire_backlog && next_slice.is_none() {
                next_slice = Some(now + 1 + EXPIRE_SLICE_GAP_MS as i64);
            }
        }
    }
    (now - T0 - 1000, worst, p99(stalls))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let mut cols: [Vec<f64>; 8] = Default::default();
    for run in 1..=runs {
        let h = hashmap_remove_ns();
        let e = expire_per_key_ns();
        let (r_empty, r_worst, r_p99) = redis_schedule();
        let (s_empty, s_worst, s_p99) = sliced_schedule();
        println!(
            "run {run}: hashmap_remove {h:.0} ns/key; expire_per_key {e:.0} ns/key; \
             redis_schedule empty {r_empty} ms after TTL, stall p99 {r_p99} us max {r_worst} us; \
             sliced_schedule empty {s_empty} ms after TTL, stall p99 {s_p99} us max {s_worst} us"
        );
        for (c, v) in cols.iter_mut().zip([
            h,
            e,
            r_empty as f64,
            r_worst as f64,
            s_empty as f64,
            s_worst as f64,
            r_p99 as f64,
            s_p99 as f64,
        ]) {
            c.push(v);
        }
    }
    if runs > 1 {
        let m: Vec<f64> = cols.iter_mut().map(|c| median(c)).collect();
        println!(
            "median of {runs}: hashmap_remove {:.0} ns/key; expire_per_key {:.0} ns/key; \
             redis_schedule empty {:.0} ms, stall p99 {:.0} us max {:.0} us; \
             sliced_schedule empty {:.0} ms, stall p99 {:.0} us max {:.0} us",
            m[0], m[1], m[2], m[6], m[3], m[4], m[7], m[5]
        );
    }
}
