//! TEMPORARY stand-in for time events (same API), replaced on merge.
use super::clock::Msec;
use super::timer::{TimerId, TimerWheel};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    NoMore,
    Again(u64),
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimeEventId(pub u64);
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownTimeEvent(pub TimeEventId);
impl std::fmt::Display for UnknownTimeEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no such time event {}", self.0 .0)
    }
}
impl std::error::Error for UnknownTimeEvent {}
pub struct Pass {
    max: u64,
}
struct Entry<H> {
    handler: Option<H>,
    timer: Option<TimerId>,
    deleted: bool,
}
pub struct TimeEvents<H> {
    wheel: TimerWheel<u64>,
    map: HashMap<u64, Entry<H>>,
    next_id: u64,
    deferred: Vec<(TimerId, u64)>,
}
impl<H> TimeEvents<H> {
    pub fn new(now: Msec) -> Self {
        TimeEvents {
            wheel: TimerWheel::new(now),
            map: HashMap::new(),
            next_id: 1,
            deferred: vec![],
        }
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn create(&mut self, now: Msec, ms: u64, handler: H) -> TimeEventId {
        let id = self.next_id;
        self.next_id += 1;
        let t = self.wheel.insert(now.wrapping_add(ms), id);
        self.map.insert(
            id,
            Entry {
                handler: Some(handler),
                timer: Some(t),
                deleted: false,
            },
        );
        TimeEventId(id)
    }
    pub fn delete(&mut self, id: TimeEventId) -> Result<(), UnknownTimeEvent> {
        match self.map.get_mut(&id.0) {
            Some(e) if !e.deleted => {
                if e.handler.is_none() {
                    e.deleted = true;
                } else {
                    if let Some(t) = e.timer {
                        self.wheel.remove(t);
                    }
                    self.map.remove(&id.0);
                }
                Ok(())
            }
            _ => Err(UnknownTimeEvent(id)),
        }
    }
    pub fn nearest(&self) -> Option<Msec> {
        None
    }
    pub fn next_timeout(&self, now: Msec) -> Option<u64> {
        self.wheel.next_timeout(now)
    }
    pub fn begin_pass(&mut self) -> Pass {
        Pass {
            max: self.next_id - 1,
        }
    }
    pub fn take_due(&mut self, now: Msec, pass: &Pass) -> Option<(TimeEventId, H)> {
        while let Some((t, id)) = self.wheel.pop_expired(now) {
            if id > pass.max {
                self.deferred.push((t, id));
                continue;
            }
            let e = self.map.get_mut(&id)?;
            e.timer = None;
            return e.handler.take().map(|h| (TimeEventId(id), h));
        }
        None
    }
    pub fn finish(&mut self, id: TimeEventId, handler: H, next: Next, now_after: Msec) {
        let Some(e) = self.map.get_mut(&id.0) else {
            return;
        };
        match next {
            _ if e.deleted => {
                self.map.remove(&id.0);
            }
            Next::NoMore => {
                self.map.remove(&id.0);
            }
            Next::Again(ms) => {
                e.handler = Some(handler);
                e.timer = Some(self.wheel.insert(now_after.wrapping_add(ms), id.0));
            }
        }
    }
    pub fn end_pass(&mut self, _pass: Pass) {
        for (_, id) in std::mem::take(&mut self.deferred) {
            if let Some(e) = self.map.get_mut(&id) {
                e.timer = Some(self.wheel.insert(0, id));
            }
        }
    }
}
