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
//! an exponentially weighted count of the events found after each sleep
//! (over roughly the last 16) and sleeps while it is at least
//! [`WORTH`]; below that (one client at a time, where a sleep is only
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
    /// Events found after a sleep, weighted (fixed point, [`ONE`] = 1).
    found: u32,
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
            skipped: 0,
            on,
        }
    }

    /// How to wait next.
    pub fn how(&mut self) -> Wait {
        if !self.on || !self.busy {
            return Wait::Block;
        }
        if self.found >= WORTH {
            return Wait::Poll;
        }
        self.skipped += 1;
        if self.skipped >= PROBE_EVERY {
            self.skipped = 0;
            return Wait::Poll;
        }
        Wait::Block
    }

    /// A wait (blocking, or the first poll) found `n` events.
    pub fn waited(&mut self, n: usize) {
        self.busy = n > 0;
    }

    /// The poll after a sleep found `n` events; none makes the loop idle.
    pub fn slept(&mut self, n: usize) {
        let n = (n as u32).min(CAP);
        // found += (n - found) / 16, in fixed point.
        self.found = self.found - (self.found >> SHIFT) + ((n * ONE) >> SHIFT);
        self.busy = n > 0;
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

    /// Runs `bursts` bursts in which each sleep finds `per_sleep` events;
    /// returns how many bursts slept.
    fn run(c: &mut Coalesce, bursts: u32, per_sleep: usize) -> u32 {
        let mut slept = 0;
        for _ in 0..bursts {
            c.waited(1);
            if c.how() == Wait::Poll {
                // Nothing ready at once: sleep, then poll.
                c.waited(0);
                c.slept(per_sleep);
                slept += 1;
            }
        }
        slept
    }

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
        assert_eq!(run(&mut c, 1000, 8), 0);
    }

    #[test]
    fn many_events_per_sleep_keep_it_sleeping() {
        let mut c = Coalesce::new(true);
        let first = run(&mut c, 200, 6);
        // Probes (1 in 16) until the estimate passes two events a sleep,
        // then every burst.
        assert!(c.found() >= 2.0, "{}", c.found());
        let next = run(&mut c, 100, 6);
        assert_eq!(next, 100);
        assert!(first > 50, "{first}");
    }

    #[test]
    fn one_event_per_sleep_only_probes() {
        // A serial client: a sleep only adds latency.
        let mut c = Coalesce::new(true);
        let slept = run(&mut c, 1600, 1);
        assert!(c.found() < 2.0);
        assert!((95..=105).contains(&slept), "slept {slept}");
    }

    #[test]
    fn stops_when_the_load_goes() {
        let mut c = Coalesce::new(true);
        run(&mut c, 300, 8);
        assert!(c.found() >= 2.0);
        // Sleeps now find one event each: the estimate falls below two
        // within a few dozen sleeps and the loop blocks again.
        let mut n = 0;
        while c.found() >= 2.0 {
            run(&mut c, 1, 1);
            n += 1;
            assert!(n < 100, "never stopped");
        }
        assert_eq!(run(&mut c, 15, 1), 0);
    }

    #[test]
    fn a_sleep_that_finds_nothing_makes_the_loop_idle() {
        let mut c = Coalesce::new(true);
        run(&mut c, 300, 8);
        c.waited(1);
        assert_eq!(c.how(), Wait::Poll);
        c.waited(0);
        c.slept(0);
        assert_eq!(c.how(), Wait::Block);
    }
}
