//! Event coalescing: how the loop waits while events keep coming (the
//! user-space counterpart of NAPI's deferred interrupts). It is the wait
//! policy only; the wait itself is the multiplexing module's.
//!
//! A process blocked in epoll_wait(2) is on the wait queue of every socket
//! it watches, so the first packet that makes one ready wakes it, and that
//! wake-up is paid by whoever sent the packet: in its own system call the
//! kernel sends an IPI to this process's CPU (on a VM a trap to the host).
//! Measured on loopback with wrk and `Connection: close`, the client's
//! connect(2) woke a server that had caught up once every 3–6 requests,
//! and each wake-up cost the client an estimated ~10 µs of its own CPU
//! (the IPI's share of its profile): the faster the
//! server, the more often it caught up, so a server using less CPU than
//! nginx completed fewer requests per second (issue 16).
//!
//! So after a wait that found events, when nothing is ready at once the
//! loop sleeps [`SLEEP_US`] off the wait queues and polls again: what came
//! meanwhile is taken in one batch, and nobody paid to wake us. The sleep
//! only pays when more than one event arrives during it, so the core keeps
//! an exponentially weighted count of the events taken after each sleep,
//! until a poll finds nothing again (over roughly the last 16 sleeps; a
//! listener reports one queued connection per accept, so a queue of them
//! counts as many), and sleeps while it is at least [`WORTH`]; below that
//! (one client at a time, where a sleep is only
//! latency) it blocks as before and still tries one burst in
//! [`PROBE_EVERY`], so a change in the load is noticed. An idle loop
//! (the last wait found nothing) always blocks.

use std::time::Duration;

/// How long the loop sleeps before polling again. Short against a busy
/// server's queueing delay (~1 ms at 50 clients), long enough for several
/// connections to arrive; the kernel's default timer slack (50 µs) may add
/// to it.
pub const SLEEP_US: u64 = 20;

/// Fixed point: one event.
const ONE: u32 = 1 << 8;
/// Events counted per sleep are capped here (a batch bigger than this
/// says no more about the load).
const CAP: u32 = 8;
/// Sleeping pays from two events per sleep on average.
const WORTH: u32 = 2 * ONE;
/// Weight of one observation: the estimate moves 1/16 of the way to it.
const SHIFT: u32 = 4;
/// While sleeping does not pay, still try once in this many bursts.
const PROBE_EVERY: u32 = 16;

/// What the next wait should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Block until an event or the timer (the loop is idle, or sleeping
    /// would not pay).
    Block,
    /// Poll without blocking; if nothing is ready, sleep [`SLEEP_US`] and
    /// poll once more.
    Poll,
}

/// One loop's coalescing state.
#[derive(Clone, Copy, Debug)]
pub struct Coalesce {
    /// The last wait found events: more are likely.
    busy: bool,
    /// Events per sleep, weighted (fixed point, [`ONE`] = 1): counted from
    /// the poll after a sleep until a poll finds nothing (a listener's
    /// queue is one event per accept, so a batch of queued connections
    /// counts as many).
    found: u32,
    /// Events of the batch that began with the last sleep, while it lasts.
    batch: Option<u32>,
    skipped: u32,
    on: bool,
}

impl Coalesce {
    /// `on` false: always block (the old behaviour).
    pub fn new(on: bool) -> Coalesce {
        Coalesce {
            busy: false,
            // Starts pessimistic: the first bursts are probes.
            found: 0,
            batch: None,
            skipped: 0,
            on,
        }
    }

    /// How to wait next.
    pub fn how(&mut self) -> Wait {
        let wait = if !self.on || !self.busy {
            Wait::Block
        } else if self.found >= WORTH {
            Wait::Poll
        } else {
            self.skipped += 1;
            if self.skipped >= PROBE_EVERY {
                self.skipped = 0;
                Wait::Poll
            } else {
                Wait::Block
            }
        };
        if wait == Wait::Block {
            self.end_batch();
        }
        wait
    }

    /// A blocking wait, or a poll, found `n` events.
    pub fn waited(&mut self, n: usize) {
        self.busy = n > 0;
        match self.batch.as_mut() {
            Some(b) if n > 0 => *b = b.saturating_add(n as u32),
            Some(_) => self.end_batch(),
            None => {}
        }
    }

    /// A poll found nothing: the loop is about to sleep.
    pub fn polled_empty(&mut self) {
        self.end_batch();
    }

    /// The poll after a sleep found `n` events (none makes the loop idle).
    pub fn slept(&mut self, n: usize) {
        self.busy = n > 0;
        self.batch = Some(n as u32);
        if n == 0 {
            self.end_batch();
        }
    }

    /// Counts the batch that began with the last sleep.
    fn end_batch(&mut self) {
        if let Some(b) = self.batch.take() {
            let n = b.min(CAP);
            // found += (n - found) / 16, in fixed point.
            self.found = self.found - (self.found >> SHIFT) + ((n * ONE) >> SHIFT);
        }
    }

    /// The sleep itself.
    pub fn sleep() {
        std::thread::sleep(Duration::from_micros(SLEEP_US));
    }

    #[cfg(test)]
    fn found(&self) -> f64 {
        f64::from(self.found) / f64::from(ONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is ready when the loop looks: at a blocking wait (something
    /// always comes), at a poll right after serving, and at the poll after
    /// a sleep.
    struct World {
        at_poll: usize,
        after_sleep: usize,
    }

    /// Runs `iterations` of the core's wait as `Core::wait` does; returns
    /// how many of them slept.
    fn run(c: &mut Coalesce, w: &World, iterations: u32) -> u32 {
        let mut slept = 0;
        for _ in 0..iterations {
            match c.how() {
                Wait::Block => c.waited(1),
                Wait::Poll if w.at_poll > 0 => c.waited(w.at_poll),
                Wait::Poll => {
                    c.polled_empty();
                    slept += 1;
                    c.slept(w.after_sleep);
                }
            }
        }
        slept
    }

    /// Many clients: a poll right after serving finds nothing, but a sleep
    /// finds several connections queued (the listener reports them one per
    /// poll: modelled as a batch of `after_sleep`).
    const BUSY: World = World {
        at_poll: 0,
        after_sleep: 6,
    };
    /// One client at a time: the sleep finds its one next event.
    const SERIAL: World = World {
        at_poll: 0,
        after_sleep: 1,
    };

    #[test]
    fn idle_loop_always_blocks() {
        let mut c = Coalesce::new(true);
        for _ in 0..100 {
            c.waited(0);
            assert_eq!(c.how(), Wait::Block);
        }
    }

    #[test]
    fn off_always_blocks() {
        let mut c = Coalesce::new(false);
        assert_eq!(run(&mut c, &BUSY, 1000), 0);
    }

    #[test]
    fn many_events_per_sleep_keep_it_sleeping() {
        let mut c = Coalesce::new(true);
        let first = run(&mut c, &BUSY, 400);
        // Probes (1 in 16 waits) until the estimate passes two events a
        // sleep, then every wait that finds nothing sleeps.
        assert!(c.found() >= 2.0, "{}", c.found());
        assert_eq!(run(&mut c, &BUSY, 100), 100);
        assert!(first > 200, "{first}");
    }

    #[test]
    fn a_batch_counts_the_polls_until_one_finds_nothing() {
        // Each poll finds one event (a queued connection per accept): the
        // batch after a sleep is all of them.
        let mut c = Coalesce::new(true);
        for _ in 0..200 {
            c.waited(1);
            c.polled_empty();
            c.slept(1);
            for _ in 0..4 {
                c.waited(1);
            }
        }
        assert!(c.found() >= 4.0, "{}", c.found());
    }

    #[test]
    fn one_event_per_sleep_only_probes() {
        let mut c = Coalesce::new(true);
        let slept = run(&mut c, &SERIAL, 1600);
        assert!(c.found() < 2.0);
        assert!((80..=110).contains(&slept), "slept {slept}");
    }

    #[test]
    fn stops_when_the_load_goes() {
        let mut c = Coalesce::new(true);
        run(&mut c, &BUSY, 600);
        assert!(c.found() >= 2.0);
        let mut n = 0;
        while c.found() >= 2.0 {
            run(&mut c, &SERIAL, 1);
            n += 1;
            assert!(n < 200, "never stopped");
        }
        // At most the probe that may fall due.
        assert!(run(&mut c, &SERIAL, 15) <= 1);
    }

    #[test]
    fn a_sleep_that_finds_nothing_makes_the_loop_idle() {
        let mut c = Coalesce::new(true);
        run(&mut c, &BUSY, 600);
        c.waited(1);
        assert_eq!(c.how(), Wait::Poll);
        c.polled_empty();
        c.slept(0);
        assert_eq!(c.how(), Wait::Block);
    }
}
