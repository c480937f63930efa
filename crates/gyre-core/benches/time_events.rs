//! Time-event benchmark: one event-loop iteration's time-event work
//! (`nearest` for the poll timeout, then a processing pass that runs the one
//! due event) with 1e5 registered events, [`TimeEvents`] against a
//! Redis-style unsorted list scanned in full, as ae.c does in
//! `aeSearchNearestTimer` and `processTimeEvents`.
//!
//! Run with `cargo bench -p gyre-core --bench time_events`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use gyre_core::event::time_event::{Next, TimeEvents};
use gyre_core::event::Msec;

/// Registered events.
const N: u64 = 100_000;
/// Loop iterations per run.
const ITERS: u64 = 20_000;
/// Runs per measurement; the median is reported.
const REPS: usize = 5;
const START: Msec = 1_000;
/// The background events are due between 1e9 and 2e9 ms from now: never
/// during the benchmark.
const FAR: u64 = 1_000_000_000;

/// The handler: a counter, so running it costs next to nothing and the
/// figures are the structure's.
type Handler = u64;

/// Redis ae.c's time-event list, reduced to what the loop touches.
struct AeEvent {
    id: u64,
    when: Msec,
    handler: Handler,
    deleted: bool,
}

/// Like ae.c: a full scan for the nearest deadline, a full scan running due
/// events (skipping ones newer than the pass's max id), reschedule in place.
struct AeList {
    events: Vec<AeEvent>,
    next_id: u64,
}

impl AeList {
    fn create(&mut self, now: Msec, ms: u64, handler: Handler) {
        self.events.push(AeEvent {
            id: self.next_id,
            when: now + ms,
            handler,
            deleted: false,
        });
        self.next_id += 1;
    }

    fn nearest(&self) -> Option<Msec> {
        self.events
            .iter()
            .filter(|e| !e.deleted)
            .map(|e| e.when)
            .min()
    }

    fn process(&mut self, now: Msec) -> u64 {
        let max_id = self.next_id - 1;
        let mut processed = 0;
        for e in &mut self.events {
            if e.deleted || e.id > max_id || e.when > now {
                continue;
            }
            e.handler = black_box(e.handler + 1);
            e.when = now + 1;
            processed += 1;
        }
        processed
    }
}

fn spread(i: u64) -> u64 {
    FAR + i.wrapping_mul(0x9e37_79b9) % FAR
}

fn median(mut f: impl FnMut() -> Duration) -> Duration {
    let mut runs: Vec<Duration> = (0..REPS).map(|_| f()).collect();
    runs.sort_unstable();
    runs[REPS / 2]
}

/// Each iteration: the clock advances 1 ms; the periodic event (every 1 ms)
/// is due, the 1e5 others are not.
fn gyre() -> Duration {
    let mut te: TimeEvents<Handler> = TimeEvents::new(START);
    for i in 0..N {
        te.create(START, spread(i), 0);
    }
    te.create(START, 1, 0);
    let mut now = START;
    let t = Instant::now();
    for _ in 0..ITERS {
        now += 1;
        black_box(te.nearest());
        let pass = te.begin_pass();
        let mut ran = 0;
        while let Some((id, h)) = te.take_due(now, &pass) {
            te.finish(id, black_box(h + 1), Next::Again(1), now);
            ran += 1;
        }
        te.end_pass(pass);
        assert_eq!(ran, 1);
    }
    t.elapsed()
}

fn ae() -> Duration {
    let mut list = AeList {
        events: Vec::new(),
        next_id: 1,
    };
    for i in 0..N {
        list.create(START, spread(i), 0);
    }
    list.create(START, 1, 0);
    let mut now = START;
    let t = Instant::now();
    for _ in 0..ITERS {
        now += 1;
        black_box(list.nearest());
        assert_eq!(list.process(now), 1);
    }
    t.elapsed()
}

fn main() {
    println!(
        "time events: {N} registered, 1 due per iteration, {ITERS} iterations, median of {REPS} runs"
    );
    let g = median(gyre);
    let a = median(ae);
    let per = |d: Duration| d.as_nanos() as f64 / ITERS as f64;
    println!("{:<40} {:>14}", "structure", "ns/iteration");
    println!("{:<40} {:>14.1}", "TimeEvents (ordered set + map)", per(g));
    println!("{:<40} {:>14.1}", "ae.c-style list, full scans", per(a));
    println!("ratio (ae / TimeEvents): {:.0}x", per(a) / per(g));
}
