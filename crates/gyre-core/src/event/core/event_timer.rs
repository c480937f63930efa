//! The loop's timers (nginx's `ngx_event_timer.c`: add, delete, expire,
//! cancelable timers of an exiting worker) and Redis-style time events
//! (`aeCreateTimeEvent` / `processTimeEvents`) on the cached clock.

use super::*;

impl Core {
    // ----------------------------------------------------------------- timers

    fn event_mut(&mut self, c: ConnId, kind: EvKind) -> Option<&mut Event> {
        let x = self.pool.get_mut(c)?;
        Some(match kind {
            EvKind::Read => &mut x.read,
            EvKind::Write => &mut x.write,
        })
    }

    /// Arms `ev`'s timer `ms` from now (nginx's `ngx_add_timer`). Re-arming
    /// within [`TIMER_LAZY_DELAY`] (or `ms / 4`, if smaller) of the current
    /// deadline does nothing.
    pub fn add_timer(&mut self, ev: Ev, ms: u64) {
        let mut key = self.clock.now().wrapping_add(ms);
        if self.in_expire && ms == 0 {
            // Added while timers are being expired: run it in the next
            // iteration (whose wait will not block) rather than loop here.
            key = key.wrapping_add(1);
        }
        let idx = Ev::index(ev.conn, ev.kind);
        let Some(e) = self.event_mut(ev.conn, ev.kind) else {
            return;
        };
        let old = e.timer.take();
        let cancelable = e.cancelable;
        if let Some(t) = old {
            if msec_diff(key, e.deadline).unsigned_abs() < TIMER_LAZY_DELAY.min(ms / 4) {
                e.timer = Some(t);
                return;
            }
            self.timers.remove(t);
            if !cancelable {
                self.noncancelable_timers -= 1;
            }
        }
        let t = self.timers.insert(key, idx);
        if !cancelable {
            self.noncancelable_timers += 1;
        }
        if let Some(e) = self.event_mut(ev.conn, ev.kind) {
            e.timer = Some(t);
            e.deadline = key;
        }
    }

    /// Disarms `ev`'s timer (nginx's `ngx_del_timer`).
    pub fn del_timer(&mut self, ev: Ev) {
        let Some(e) = self.event_mut(ev.conn, ev.kind) else {
            return;
        };
        let cancelable = e.cancelable;
        if let Some(t) = e.timer.take() {
            self.timers.remove(t);
            if !cancelable {
                self.noncancelable_timers -= 1;
            }
        }
    }

    /// Whether `ev`'s timer is armed.
    pub fn timer_set(&self, ev: Ev) -> bool {
        self.event(ev).is_some_and(Event::timer_set)
    }

    /// The absolute deadline of `ev`'s timer.
    pub fn timer_deadline(&self, ev: Ev) -> Option<Msec> {
        let e = self.event(ev)?;
        e.timer.map(|_| e.deadline)
    }

    /// Marks `ev`'s timers as cancelable: they do not keep an exiting worker
    /// alive (nginx's `ev->cancelable`). Applies to an armed timer too.
    pub fn set_cancelable(&mut self, ev: Ev, on: bool) {
        let Some(e) = self.event_mut(ev.conn, ev.kind) else {
            return;
        };
        if e.cancelable == on {
            return;
        }
        e.cancelable = on;
        if e.timer.is_some() {
            if on {
                self.noncancelable_timers -= 1;
            } else {
                self.noncancelable_timers += 1;
            }
        }
    }

    /// Number of armed connection timers.
    pub fn timers_len(&self) -> usize {
        self.timers.len()
    }

    /// Whether only cancelable timers are left (nginx's
    /// `ngx_event_no_timers_left`).
    pub fn no_timers_left(&self) -> bool {
        self.noncancelable_timers == 0
    }

    /// Disarms every connection timer (on worker exit).
    pub fn cancel_timers(&mut self) {
        for (_, idx) in self.timers.drain() {
            let slot = idx / 2;
            let x = &mut self.pool.conns[slot as usize];
            if idx % 2 == 0 {
                x.read.timer = None;
            } else {
                x.write.timer = None;
            }
        }
        self.noncancelable_timers = 0;
    }

    /// Pops every due timer, sets `timedout` and calls the handler that also
    /// serves the event's I/O (nginx's `ngx_event_expire_timers`).
    pub(super) fn expire_timers(&mut self) {
        let now = self.clock.now();
        self.in_expire = true;
        while let Some((_, idx)) = self.timers.pop_expired(now) {
            let slot = idx / 2;
            let kind = if idx % 2 == 0 {
                EvKind::Read
            } else {
                EvKind::Write
            };
            let x = &mut self.pool.conns[slot as usize];
            let gen = x.gen;
            let e = if kind == EvKind::Read {
                &mut x.read
            } else {
                &mut x.write
            };
            e.timer = None;
            if !e.cancelable {
                self.noncancelable_timers -= 1;
            }
            self.call(ConnId { slot, gen }, kind, true);
        }
        self.in_expire = false;
    }

    // ------------------------------------------------------------ time events

    /// Creates a time event due `ms` from now (Redis's `aeCreateTimeEvent`).
    /// The handler's return value decides: [`Next::NoMore`] deletes it,
    /// [`Next::Again`]`(n)` runs it again `n` ms after it returned.
    pub fn create_time_event(
        &mut self,
        ms: u64,
        handler: impl FnMut(&mut Core, TimeEventId) -> Next + 'static,
    ) -> TimeEventId {
        let now = self.clock.now();
        self.time_events.create(now, ms, Box::new(handler))
    }

    /// Deletes a time event (Redis's `aeDeleteTimeEvent`); safe from inside
    /// any handler, the event's own included.
    pub fn delete_time_event(&mut self, id: TimeEventId) -> Result<(), UnknownTimeEvent> {
        self.time_events.delete(id)
    }

    /// The deadline of the nearest time event (Redis's `aeSearchNearestTimer`).
    pub fn nearest_time_event(&self) -> Option<Msec> {
        self.time_events.nearest()
    }

    /// Number of registered time events.
    pub fn time_events_len(&self) -> usize {
        self.time_events.len()
    }

    /// Runs every due time event once (Redis's `processTimeEvents`). Events
    /// created meanwhile wait for the next pass.
    pub(super) fn process_time_events(&mut self) {
        if self.time_events.is_empty() {
            return;
        }
        let now = self.clock.now();
        let pass = self.time_events.begin_pass();
        while let Some((id, mut h)) = self.time_events.take_due(now, &pass) {
            let next = h(self, id);
            let after = monotonic_ms().wrapping_add(self.opts.clock_offset);
            self.time_events.finish(id, h, next, after);
        }
        self.time_events.end_pass(pass);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A handler that ran past the cached clock and asked to run again at
    /// once leaves the next wait at 0 ms (it once waited the handler's own
    /// length: the cached time lagged the deadline it was given).
    #[test]
    fn again_zero_after_a_long_handler_does_not_wait() {
        let mut core = Core::new(CoreOptions::default()).unwrap();
        core.create_time_event(0, |_, _| {
            // Until the millisecond clock has moved on by 2 (bounded: 1 s).
            let t0 = monotonic_ms();
            let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
            while monotonic_ms().wrapping_sub(t0) < 2 && std::time::Instant::now() < end {
                std::hint::spin_loop();
            }
            Next::Again(0)
        });
        core.process_events_and_timers().unwrap();
        assert_eq!(core.find_timer(), Some(0));
        // A later deadline still gives a positive wait.
        let mut core = Core::new(CoreOptions::default()).unwrap();
        core.create_time_event(10_000, |_, _| Next::NoMore);
        let t = core.find_timer().unwrap();
        assert!(t > 9_000 && t <= 10_000, "{t}");
    }
}
