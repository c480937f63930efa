//! Timer structure benchmark: [`TimerWheel`] against the ordered-tree design
//! nginx uses (`ngx_event_timer_rbtree`), stood in for by a
//! `BTreeMap<(Msec, u64), T>` (deadline plus a tie-breaking sequence number).
//!
//! Run with `cargo bench -p gyre-core --bench timers` (append `-- expire`
//! etc. to run only some workloads). Each figure is the median of [`REPS`]
//! runs on freshly built structures, wheel and tree runs alternating; a
//! deterministic xorshift generator makes both sides see identical inputs
//! and perform the same operations.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use gyre_core::event::timer::{TimerId, TimerWheel};
use gyre_core::event::Msec;

/// Timers per workload.
const N: usize = 1_000_000;
/// Deadlines are spread over this many ms.
const SPREAD: u64 = 60_000;
/// Runs per measurement; the median is reported.
const REPS: usize = 5;
/// Arbitrary clock start (not 0, so nothing depends on it).
const START: Msec = 1_000_000;

/// xorshift64*, so the benchmark needs no dependency and is reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn shuffle<X>(&mut self, v: &mut [X]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

fn deadlines(seed: u64) -> Vec<Msec> {
    let mut rng = Rng(seed);
    (0..N).map(|_| START + rng.below(SPREAD)).collect()
}

/// Medians of `REPS` runs of `wheel` and of `tree`, each returning the time
/// of the part it measures (setup excluded). The runs alternate, so a
/// background disturbance hits both sides alike instead of one side's
/// whole series.
fn medians(
    mut wheel: impl FnMut() -> Duration,
    mut tree: impl FnMut() -> Duration,
) -> (Duration, Duration) {
    let (mut w, mut t) = (Vec::new(), Vec::new());
    for _ in 0..REPS {
        w.push(wheel());
        t.push(tree());
    }
    w.sort_unstable();
    t.sort_unstable();
    (w[REPS / 2], t[REPS / 2])
}

type Tree = BTreeMap<(Msec, u64), u64>;

fn build_wheel(ds: &[Msec]) -> (TimerWheel<u64>, Vec<TimerId>) {
    let mut w = TimerWheel::new(START);
    let ids = ds
        .iter()
        .enumerate()
        .map(|(i, &d)| w.insert(d, i as u64))
        .collect();
    (w, ids)
}

fn build_tree(ds: &[Msec]) -> (Tree, Vec<(Msec, u64)>) {
    let mut t = Tree::new();
    let keys = ds
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            t.insert((d, i as u64), i as u64);
            (d, i as u64)
        })
        .collect();
    (t, keys)
}

fn add(ds: &[Msec]) -> (Duration, Duration) {
    medians(
        || {
            let mut w = TimerWheel::new(START);
            let t = Instant::now();
            for (i, &d) in ds.iter().enumerate() {
                black_box(w.insert(d, i as u64));
            }
            let e = t.elapsed();
            black_box(&w);
            e
        },
        || {
            let mut m = Tree::new();
            let t = Instant::now();
            for (i, &d) in ds.iter().enumerate() {
                m.insert((d, i as u64), i as u64);
            }
            let e = t.elapsed();
            black_box(&m);
            e
        },
    )
}

fn cancel(ds: &[Msec]) -> (Duration, Duration) {
    medians(
        || {
            let (mut w, mut ids) = build_wheel(ds);
            Rng(99).shuffle(&mut ids);
            let t = Instant::now();
            for &id in &ids {
                black_box(w.remove(id));
            }
            let e = t.elapsed();
            assert!(w.is_empty());
            e
        },
        || {
            let (mut m, mut keys) = build_tree(ds);
            Rng(99).shuffle(&mut keys);
            let t = Instant::now();
            for k in &keys {
                black_box(m.remove(k));
            }
            let e = t.elapsed();
            assert!(m.is_empty());
            e
        },
    )
}

/// Pops every timer while the clock advances 1 ms at a time, as a loop that
/// wakes up every millisecond would.
fn expire(ds: &[Msec]) -> (Duration, Duration) {
    medians(
        || {
            let (mut w, _) = build_wheel(ds);
            let t = Instant::now();
            for now in START..=START + SPREAD {
                while let Some(x) = w.pop_expired(now) {
                    black_box(x);
                }
            }
            let e = t.elapsed();
            assert!(w.is_empty());
            e
        },
        || {
            let (mut m, _) = build_tree(ds);
            let t = Instant::now();
            for now in START..=START + SPREAD {
                while let Some(entry) = m.first_entry() {
                    if entry.key().0 > now {
                        break;
                    }
                    black_box(entry.remove());
                }
            }
            let e = t.elapsed();
            assert!(m.is_empty());
            e
        },
    )
}

/// Keep-alive-like: 1e6 connections each hold a timer. Every ms, 1000
/// random connections see activity (cancel + re-arm 30-60 s ahead) and the
/// expired ones are popped and re-armed (a new connection took the slot).
/// Returns the total time and the number of timer operations (insert,
/// cancel, or expire each count as one).
fn mixed(ds: &[Msec]) -> ((Duration, u64), (Duration, u64)) {
    const STEPS: u64 = 3_000;
    const ACTIVE: usize = 1_000;
    let mut ops_w = 0;
    let mut ops_t = 0;
    let (wheel, tree) = medians(
        || {
            let (mut w, mut ids) = build_wheel(ds);
            let mut rng = Rng(5);
            let mut ops = 0u64;
            let t = Instant::now();
            for now in START..START + STEPS {
                for _ in 0..ACTIVE {
                    let c = rng.below(N as u64) as usize;
                    black_box(w.remove(ids[c]));
                    ids[c] = w.insert(now + 30_000 + rng.below(30_000), c as u64);
                    ops += 2;
                }
                while let Some((_, c)) = w.pop_expired(now) {
                    ids[c as usize] = w.insert(now + 30_000 + rng.below(30_000), c);
                    ops += 2;
                }
            }
            let e = t.elapsed();
            ops_w = ops;
            e
        },
        || {
            let (mut m, mut keys) = build_tree(ds);
            let mut seq = N as u64;
            let mut rng = Rng(5);
            let mut ops = 0u64;
            let t = Instant::now();
            for now in START..START + STEPS {
                for _ in 0..ACTIVE {
                    let c = rng.below(N as u64) as usize;
                    black_box(m.remove(&keys[c]));
                    seq += 1;
                    keys[c] = (now + 30_000 + rng.below(30_000), seq);
                    m.insert(keys[c], c as u64);
                    ops += 2;
                }
                while let Some(entry) = m.first_entry() {
                    if entry.key().0 > now {
                        break;
                    }
                    let c = entry.remove();
                    seq += 1;
                    keys[c as usize] = (now + 30_000 + rng.below(30_000), seq);
                    m.insert(keys[c as usize], c);
                    ops += 2;
                }
            }
            let e = t.elapsed();
            ops_t = ops;
            e
        },
    );
    assert_eq!(ops_w, ops_t, "both sides must do the same work");
    ((wheel, ops_w), (tree, ops_t))
}

fn ns_per(d: Duration, ops: u64) -> f64 {
    d.as_nanos() as f64 / ops as f64
}

fn row(name: &str, wheel: Duration, tree: Duration, ops: u64) {
    let (w, t) = (ns_per(wheel, ops), ns_per(tree, ops));
    println!("{name:<34} {w:>12.1} {t:>12.1} {:>9.1}x", t / w);
}

fn main() {
    // `cargo bench --bench timers -- expire` runs only the named workloads
    // (cargo itself passes `--bench`, which is ignored).
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| name.starts_with(o.as_str()));
    let ds = deadlines(0x5eed);
    println!("timers: {N} timers, deadlines uniform over {SPREAD} ms, median of {REPS} runs");
    println!(
        "{:<34} {:>12} {:>12} {:>10}",
        "workload", "wheel ns/op", "btree ns/op", "btree/wheel"
    );
    if wanted("add") {
        let (w, t) = add(&ds);
        row("add 1e6", w, t, N as u64);
    }
    if wanted("cancel") {
        let (w, t) = cancel(&ds);
        row("cancel 1e6 (random order)", w, t, N as u64);
    }
    if wanted("expire") {
        let (w, t) = expire(&ds);
        row("expire 1e6 (1 ms steps)", w, t, N as u64);
    }
    if wanted("mixed") {
        let ((w, ops), (t, _)) = mixed(&ds);
        row("mixed keep-alive (per timer op)", w, t, ops);
    }
}
