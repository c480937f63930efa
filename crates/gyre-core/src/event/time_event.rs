//! Redis-style time events (ae.c's `aeCreateTimeEvent`, `aeDeleteTimeEvent`,
//! `aeSearchNearestTimer`, `processTimeEvents`) as a data structure.
//!
//! This module owns [`TimeEvents`]: periodic or one-shot callbacks identified
//! by a never-reused [`TimeEventId`], whose handler decides after each run
//! whether to run again ([`Next`]). Handlers need `&mut Core`, and the core
//! owns this structure, so the loop runs them itself with a take/finish
//! protocol:
//!
//! ```text
//! let pass = core.time_events.begin_pass();
//! while let Some((id, mut h)) = core.time_events.take_due(core.clock.now(), &pass) {
//!     let next = h.run(&mut core, id);          // may create/delete events
//!     core.time_events.finish(id, h, next, core.clock.now());
//! }
//! core.time_events.end_pass(pass);
//! ```
//!
//! # Structure (and why not the timer wheel)
//!
//! ae.c keeps events in an unsorted list and scans all of them both to find
//! the nearest deadline and to find the due ones. Here:
//!
//! * `order`: a `BTreeSet<(deadline, id)>` of scheduled events. `nearest`
//!   must be exact (it *is* `aeSearchNearestTimer`), which the timing wheel
//!   cannot give without a walk (its `next_timeout` is only a lower bound).
//!   Once an ordered set is needed for that, it also yields the due events in
//!   order, and a wheel next to it would only add a second insert/remove to
//!   every reschedule. Time events are few (Redis has a handful, a proxy a
//!   few per upstream), so the `O(log n)` of the tree is a few dozen ns
//!   while the per-iteration cost stays independent of how many events are
//!   not due.
//! * `events`: a `HashMap<id, Event>` holding handlers, so `delete` by id is
//!   `O(1)` (ids are never reused, so a map beats a slab that would need
//!   generations anyway).
//!
//! Deadlines are stored as `msec_diff(deadline, origin)`, signed ms from the
//! structure's creation time, so the set orders correctly across wraparound of
//! the absolute clock (within ±2^63 ms).
//!
//! # Pass rules (from ae.c)
//!
//! * Events created after [`TimeEvents::begin_pass`] (id greater than the
//!   pass's max id) never run in that pass, even when due: a handler that
//!   creates a 0 ms event cannot starve the loop.
//! * Each event runs at most once per pass; one rescheduled with
//!   `Again(0)` runs again in the next pass.
//! * An event deleted while its handler runs is dropped by `finish` instead
//!   of being rescheduled.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::ops::Bound;

use super::clock::{msec_diff, Msec};

/// Longest delay accepted, in ms (2^62, about 146 million years); larger
/// requests are clamped so the signed deadline keys cannot overflow.
const MAX_DELAY_MS: u64 = 1 << 62;

/// What a time event's handler returns (Redis's `AE_NOMORE` or N ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Remove the event.
    NoMore,
    /// Run again this many ms after the handler returned.
    Again(u64),
}

/// Identifies a time event. Strictly increasing from 1 and never reused, so a
/// stale id can only ever fail, never hit a newer event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimeEventId(pub u64);

/// [`TimeEvents::delete`] of an id that does not exist (never created,
/// finished, or already deleted).
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownTimeEvent(pub TimeEventId);

impl fmt::Display for UnknownTimeEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no such time event {}", self.0 .0)
    }
}

impl std::error::Error for UnknownTimeEvent {}

/// Token for one processing pass: remembers the newest id that existed when
/// the pass began (Redis's `maxId`). Not `Clone`, so a pass is ended once.
#[derive(Debug)]
pub struct Pass {
    max_id: u64,
    serial: u64,
}

/// One time event.
struct Event<H> {
    /// Deadline as signed ms from `origin`; meaningful while scheduled.
    key: i64,
    /// `None` while the handler is out (taken by `take_due`).
    handler: Option<H>,
    /// Serial of the last pass that ran it (at most once per pass).
    ran_in: u64,
    /// Deleted while its handler was out: `finish` drops it.
    deleted: bool,
}

/// The time-event table; see the module documentation.
pub struct TimeEvents<H> {
    origin: Msec,
    next_id: u64,
    events: HashMap<u64, Event<H>>,
    /// Scheduled (not running) events by `(deadline key, id)`.
    order: BTreeSet<(i64, u64)>,
    /// Events not deleted (running ones included).
    live: usize,
    /// Serial of the current (or last) pass; 0 before the first.
    pass_serial: u64,
    /// Last `order` key examined by `take_due` in the current pass. Nothing
    /// before it can become eligible again in this pass (see `take_due`), so
    /// each due event is looked at once per pass.
    cursor: Option<(i64, u64)>,
}

impl<H> fmt::Debug for TimeEvents<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimeEvents")
            .field("len", &self.live)
            .field("next_id", &self.next_id)
            .finish_non_exhaustive()
    }
}

impl<H> TimeEvents<H> {
    /// An empty table; `now` anchors the internal deadline keys.
    pub fn new(now: Msec) -> Self {
        TimeEvents {
            origin: now,
            next_id: 1,
            events: HashMap::new(),
            order: BTreeSet::new(),
            live: 0,
            pass_serial: 0,
            cursor: None,
        }
    }

    /// Number of events, counting one whose handler is running and not
    /// counting deleted ones.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when there are no events.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Signed ms from `origin`, the ordering key of a deadline.
    #[inline]
    fn key(&self, at: Msec) -> i64 {
        msec_diff(at, self.origin)
    }

    /// Creates an event due at `now + ms` (`aeCreateTimeEvent`).
    pub fn create(&mut self, now: Msec, ms: u64, handler: H) -> TimeEventId {
        let id = self.next_id;
        self.next_id += 1;
        let key = self.key(now.wrapping_add(ms.min(MAX_DELAY_MS)));
        self.events.insert(
            id,
            Event {
                key,
                handler: Some(handler),
                ran_in: 0,
                deleted: false,
            },
        );
        self.order.insert((key, id));
        self.live += 1;
        TimeEventId(id)
    }

    /// Deletes an event (`aeDeleteTimeEvent`). Error for an unknown or
    /// already-deleted id. Deleting an event whose handler is running is
    /// allowed: [`finish`](Self::finish) then drops it instead of
    /// rescheduling. A handler dropped here is dropped immediately.
    pub fn delete(&mut self, id: TimeEventId) -> Result<(), UnknownTimeEvent> {
        let Some(event) = self.events.get_mut(&id.0) else {
            return Err(UnknownTimeEvent(id));
        };
        if event.handler.is_none() {
            if event.deleted {
                return Err(UnknownTimeEvent(id));
            }
            event.deleted = true;
        } else {
            let key = event.key;
            self.order.remove(&(key, id.0));
            self.events.remove(&id.0);
        }
        self.live -= 1;
        Ok(())
    }

    /// The earliest deadline of a scheduled event (`aeSearchNearestTimer`),
    /// exact; `None` if nothing is scheduled. `O(log n)`, no scan.
    pub fn nearest(&self) -> Option<Msec> {
        self.order
            .first()
            .map(|&(key, _)| self.origin.wrapping_add(key as u64))
    }

    /// How long the loop may sleep from `now`: 0 if something is due, `None`
    /// if nothing is scheduled. Exact, so never later than the nearest
    /// deadline.
    pub fn next_timeout(&self, now: Msec) -> Option<u64> {
        self.nearest().map(|at| msec_diff(at, now).max(0) as u64)
    }

    /// Starts a processing pass (the top of `processTimeEvents`).
    pub fn begin_pass(&mut self) -> Pass {
        self.pass_serial += 1;
        self.cursor = None;
        Pass {
            max_id: self.next_id - 1,
            serial: self.pass_serial,
        }
    }

    /// Takes the next due event's handler out, in deadline order. Events
    /// created after `begin_pass` never run in this pass, and each event runs
    /// at most once per pass. Hand the handler back with
    /// [`finish`](Self::finish).
    ///
    /// Cost: `O(log n)` plus the due-but-ineligible events stepped over, each
    /// of which is stepped over once per pass thanks to the cursor. The
    /// cursor is sound because nothing can appear before it and be eligible:
    /// new events are too young, and rescheduled ones already ran.
    pub fn take_due(&mut self, now: Msec, pass: &Pass) -> Option<(TimeEventId, H)> {
        let now_key = self.key(now);
        let current = pass.serial == self.pass_serial;
        let lower = match self.cursor {
            Some(c) if current => Bound::Excluded(c),
            _ => Bound::Unbounded,
        };
        let mut found = None;
        let mut last = None;
        for &(key, id) in self.order.range((lower, Bound::Unbounded)) {
            if key > now_key {
                break;
            }
            last = Some((key, id));
            if id > pass.max_id {
                continue;
            }
            match self.events.get(&id) {
                Some(e) if e.ran_in != pass.serial => {
                    found = Some((key, id));
                    break;
                }
                _ => continue,
            }
        }
        if current && last.is_some() {
            self.cursor = last;
        }
        let (key, id) = found?;
        self.order.remove(&(key, id));
        let event = self.events.get_mut(&id)?;
        event.ran_in = pass.serial;
        let handler = event.handler.take()?;
        Some((TimeEventId(id), handler))
    }

    /// Gives a handler back with its verdict. `NoMore` removes the event;
    /// `Again(ms)` reschedules it at `now_after + ms` (`now_after` is the time
    /// after the handler returned, as ae.c re-reads the clock); an event
    /// deleted while running is dropped. A `finish` for an event that is not
    /// running is a caller bug: the handler is dropped and nothing changes.
    pub fn finish(&mut self, id: TimeEventId, handler: H, next: Next, now_after: Msec) {
        let key = match next {
            Next::Again(ms) => self.key(now_after.wrapping_add(ms.min(MAX_DELAY_MS))),
            Next::NoMore => 0,
        };
        let Some(event) = self.events.get_mut(&id.0) else {
            debug_assert!(false, "finish of unknown time event {}", id.0);
            return;
        };
        if event.handler.is_some() {
            debug_assert!(false, "finish of time event {} that is not running", id.0);
            return;
        }
        match next {
            _ if event.deleted => {
                self.events.remove(&id.0);
            }
            Next::NoMore => {
                self.events.remove(&id.0);
                self.live -= 1;
            }
            Next::Again(_) => {
                event.key = key;
                event.handler = Some(handler);
                self.order.insert((key, id.0));
            }
        }
    }

    /// Ends a pass. Handlers still taken out keep their events alive until
    /// their `finish`.
    pub fn end_pass(&mut self, pass: Pass) {
        if pass.serial == self.pass_serial {
            self.cursor = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one pass the way the loop does; `run` plays the handler and gets
    /// the table so it can create/delete events. Returns the ids that ran.
    fn pass<H>(
        te: &mut TimeEvents<H>,
        now: Msec,
        mut run: impl FnMut(&mut TimeEvents<H>, TimeEventId, &mut H) -> Next,
    ) -> Vec<TimeEventId> {
        let p = te.begin_pass();
        let mut ran = Vec::new();
        while let Some((id, mut h)) = te.take_due(now, &p) {
            ran.push(id);
            let next = run(te, id, &mut h);
            te.finish(id, h, next, now);
        }
        te.end_pass(p);
        ran
    }

    #[test]
    fn periodic_and_one_shot() {
        let mut te = TimeEvents::new(0);
        let periodic = te.create(0, 100, "tick");
        let once = te.create(0, 250, "once");
        let mut fired = Vec::new();
        for now in 0..=1_000u64 {
            for id in pass(&mut te, now, |_, _, h| {
                if *h == "tick" {
                    Next::Again(100)
                } else {
                    Next::NoMore
                }
            }) {
                fired.push((now, id));
            }
        }
        let ticks: Vec<u64> = fired
            .iter()
            .filter(|(_, id)| *id == periodic)
            .map(|&(t, _)| t)
            .collect();
        assert_eq!(ticks, (1..=10).map(|i| i * 100).collect::<Vec<_>>());
        assert_eq!(
            fired
                .iter()
                .filter(|(_, id)| *id == once)
                .collect::<Vec<_>>(),
            [&(250, once)]
        );
        assert_eq!(te.len(), 1);
        assert_eq!(te.nearest(), Some(1_100));
    }

    #[test]
    fn ids_strictly_increase_and_are_never_reused() {
        let mut te = TimeEvents::new(0);
        let mut last = TimeEventId(0);
        for i in 0..100 {
            let id = te.create(0, i, ());
            assert!(id > last);
            last = id;
            if i % 2 == 0 {
                te.delete(id).expect("exists");
            }
        }
        let all_deleted: Vec<TimeEventId> = (1..=100).map(TimeEventId).collect();
        for id in all_deleted {
            let _ = te.delete(id);
        }
        assert!(te.is_empty());
        assert_eq!(te.create(0, 1, ()), TimeEventId(101));
    }

    #[test]
    fn delete_errors() {
        let mut te: TimeEvents<()> = TimeEvents::new(0);
        assert_eq!(
            te.delete(TimeEventId(7)),
            Err(UnknownTimeEvent(TimeEventId(7)))
        );
        let id = te.create(0, 5, ());
        assert_eq!(te.delete(id), Ok(()));
        let err = te.delete(id).expect_err("second delete");
        assert_eq!(err.to_string(), format!("no such time event {}", id.0));
        let _: &dyn std::error::Error = &err;
        assert_eq!(te.nearest(), None);
        assert_eq!(te.next_timeout(0), None);
    }

    #[test]
    fn deleting_the_running_event_stops_it() {
        let mut te = TimeEvents::new(0);
        let id = te.create(0, 0, ());
        let ran = pass(&mut te, 0, |te, me, _| {
            assert_eq!(te.delete(me), Ok(()));
            assert!(te.delete(me).is_err(), "delete twice");
            assert!(te.is_empty());
            Next::Again(0)
        });
        assert_eq!(ran, [id]);
        assert!(te.is_empty());
        assert_eq!(te.nearest(), None);
        assert!(pass(&mut te, 10, |_, _, _| Next::Again(0)).is_empty());
    }

    #[test]
    fn deleting_another_due_event_during_the_pass() {
        let mut te = TimeEvents::new(0);
        let a = te.create(0, 1, 'a');
        let b = te.create(0, 2, 'b');
        let ran = pass(&mut te, 10, |te, me, _| {
            let other = if me == a { b } else { a };
            assert_eq!(te.delete(other), Ok(()));
            Next::NoMore
        });
        assert_eq!(ran, [a]);
        assert!(te.is_empty());
    }

    #[test]
    fn events_created_during_a_pass_wait_for_the_next() {
        let mut te = TimeEvents::new(0);
        let first = te.create(0, 0, 0u32);
        let mut created = Vec::new();
        let ran = pass(&mut te, 0, |te, _, _| {
            created.push(te.create(0, 0, 1));
            Next::Again(0)
        });
        assert_eq!(ran, [first], "new 0 ms event and Again(0) wait");
        assert_eq!(te.next_timeout(0), Some(0));
        let ran = pass(&mut te, 0, |_, _, _| Next::NoMore);
        assert_eq!(ran, [first, created[0]]);
        assert!(te.is_empty());
    }

    #[test]
    fn delete_all_events() {
        let mut te = TimeEvents::new(0);
        let ids: Vec<TimeEventId> = (0..50).map(|i| te.create(0, i * 7 % 13, i)).collect();
        let ran = pass(&mut te, 3, |te, _, _| {
            for &id in &ids {
                let _ = te.delete(id);
            }
            Next::Again(1)
        });
        assert_eq!(ran.len(), 1);
        assert!(te.is_empty());
        assert_eq!(te.nearest(), None);
        assert!(pass(&mut te, 100, |_, _, _| Next::NoMore).is_empty());
    }

    #[test]
    fn nearest_is_exact() {
        let mut te = TimeEvents::new(1_000);
        assert_eq!(te.nearest(), None);
        let a = te.create(1_000, 500, ());
        assert_eq!(te.nearest(), Some(1_500));
        let b = te.create(1_000, 3, ());
        assert_eq!(te.nearest(), Some(1_003));
        assert_eq!(te.next_timeout(1_001), Some(2));
        assert_eq!(te.next_timeout(2_000), Some(0));
        te.delete(b).expect("exists");
        assert_eq!(te.nearest(), Some(1_500));
        // A running event is not scheduled; its reschedule is.
        let p = te.begin_pass();
        let (id, h) = te.take_due(1_600, &p).expect("due");
        assert_eq!(id, a);
        assert_eq!(te.nearest(), None);
        te.finish(id, h, Next::Again(40), 1_610);
        te.end_pass(p);
        assert_eq!(te.nearest(), Some(1_650));
    }

    #[test]
    fn clock_wraparound() {
        let start = u64::MAX - 150;
        let mut te = TimeEvents::new(start);
        let late = te.create(start, 400, "late");
        let early = te.create(start, 100, "early");
        assert_eq!(te.nearest(), Some(start.wrapping_add(100)));
        let mut order = Vec::new();
        let mut now = start;
        for _ in 0..500 {
            now = now.wrapping_add(1);
            order.extend(
                pass(&mut te, now, |_, _, _| Next::Again(200))
                    .into_iter()
                    .map(|id| (now, id)),
            );
        }
        assert_eq!(
            order,
            [
                (start.wrapping_add(100), early),
                (start.wrapping_add(300), early),
                (start.wrapping_add(400), late),
                (start.wrapping_add(500), early),
            ]
        );
        assert!(now < start, "the clock wrapped");
        assert_eq!(te.nearest(), Some(start.wrapping_add(600)));
    }

    #[test]
    fn each_event_runs_once_per_pass_with_a_moving_clock() {
        let mut te = TimeEvents::new(0);
        let a = te.create(0, 0, ());
        let p = te.begin_pass();
        let (id, h) = te.take_due(0, &p).expect("due");
        te.finish(id, h, Next::Again(0), 5);
        assert!(te.take_due(10, &p).is_none(), "ran already in this pass");
        te.end_pass(p);
        let p = te.begin_pass();
        assert_eq!(te.take_due(10, &p).map(|(id, _)| id), Some(a));
        te.end_pass(p);
        assert_eq!(te.len(), 1, "still counted while running");
    }
}
