//! Whether to read a new connection before waiting for it: a per-listener
//! estimate of how often the client's first bytes are already there when
//! the connection is accepted.
//!
//! nginx reads at once only with `deferred` (TCP_DEFER_ACCEPT, when the
//! kernel holds the connection until data arrives); otherwise it registers
//! the socket and waits. Reading at once saves the epoll_ctl and a wait
//! when the request is there, and wastes a recv(2) that says EAGAIN when it
//! is not. Which one happens depends on the load, not the protocol:
//! measured on loopback with wrk and `Connection: close`, 89% of the reads
//! right after accept4 found nothing (the client writes its request only
//! after its own connect returns and its loop sees the socket writable),
//! while a busy server — or one slowed down under strace — finds the
//! request there nearly every time. So the core learns it per listener.
//!
//! The estimate is an exponentially weighted hit rate over roughly the last
//! 16 tries. Below one hit in four the core stops trying and registers the
//! connection instead, but still tries one connection in 64, so a change in
//! the load is noticed (about five hits in a row bring it back: a few
//! hundred connections). One in 16 cost 0.06 recv(2) per connection at full
//! speed under wrk `Connection: close` (perf: 1.07 recvfrom per request
//! against nginx's 1.00); one in 64 costs 0.016.

/// Weight of one observation: the rate moves 1/16 of the way to it.
const SHIFT: u32 = 4;
/// The rate is in [0, ONE].
const ONE: u32 = 1 << 12;
/// Read at once while the estimated hit rate is at least a quarter.
const THRESHOLD: u32 = ONE / 4;
/// While not reading at once, still try one connection in this many.
const PROBE_EVERY: u32 = 64;

/// One listener's estimate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FirstRead {
    rate: u32,
    skipped: u32,
}

impl Default for FirstRead {
    /// Starts optimistic: clients speak first.
    fn default() -> FirstRead {
        FirstRead {
            rate: ONE,
            skipped: 0,
        }
    }
}

impl FirstRead {
    /// Whether to read the next accepted connection at once.
    pub(crate) fn should_try(&mut self) -> bool {
        if self.rate >= THRESHOLD {
            return true;
        }
        self.skipped += 1;
        if self.skipped >= PROBE_EVERY {
            self.skipped = 0;
            return true;
        }
        false
    }

    /// The outcome of a read tried at once: data (or EOF) was there, or it
    /// would have blocked.
    pub(crate) fn record(&mut self, hit: bool) {
        let target = if hit { ONE } else { 0 };
        // rate += (target - rate) / 16, in integers.
        self.rate = self.rate - (self.rate >> SHIFT) + (target >> SHIFT);
    }

    #[cfg(test)]
    fn rate(&self) -> f64 {
        f64::from(self.rate) / f64::from(ONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_at_once_while_clients_speak_first() {
        let mut f = FirstRead::default();
        for _ in 0..1000 {
            assert!(f.should_try());
            f.record(true);
        }
        assert!(f.rate() > 0.99);
    }

    #[test]
    fn stops_after_misses_and_probes_one_in_sixty_four() {
        let mut f = FirstRead::default();
        let mut tried = 0;
        for _ in 0..6400 {
            if f.should_try() {
                tried += 1;
                f.record(false);
            }
        }
        // 22 tries while the rate falls below a quarter, then 1 in 64.
        assert!((110..=130).contains(&tried), "tried {tried}");
        assert!(f.rate() < 0.25);
    }

    #[test]
    fn recovers_when_requests_are_there_again() {
        let mut f = FirstRead::default();
        for _ in 0..200 {
            if f.should_try() {
                f.record(false);
            }
        }
        assert!(!(0..63).all(|_| f.should_try()));
        // Now every probe finds data: after a few probes it reads at once
        // again.
        let mut n = 0;
        while f.rate() < 0.25 {
            if f.should_try() {
                f.record(true);
            }
            n += 1;
            assert!(n < 16 * 64, "never recovered");
        }
        assert!(f.should_try());
    }

    #[test]
    fn a_mostly_hitting_listener_keeps_reading_at_once() {
        // One miss in three: the rate settles near two thirds.
        let mut f = FirstRead::default();
        for i in 0..3000 {
            assert!(f.should_try());
            f.record(i % 3 != 0);
        }
        assert!((0.55..0.8).contains(&f.rate()), "{}", f.rate());
    }
}
