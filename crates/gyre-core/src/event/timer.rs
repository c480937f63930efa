//! TEMPORARY stand-in for the timing wheel (same API), replaced on merge.
#![allow(missing_docs)]
use super::clock::{msec_diff, Msec};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId(u64);

pub struct TimerWheel<T> {
    map: BTreeMap<(i64, u64), T>,
    keys: std::collections::HashMap<u64, i64>,
    base: Msec,
    next: u64,
}

impl<T> TimerWheel<T> {
    pub fn new(now: Msec) -> Self {
        TimerWheel {
            map: BTreeMap::new(),
            keys: Default::default(),
            base: now,
            next: 0,
        }
    }
    pub fn with_capacity(now: Msec, _cap: usize) -> Self {
        Self::new(now)
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn insert(&mut self, deadline: Msec, value: T) -> TimerId {
        self.next += 1;
        let k = msec_diff(deadline, self.base);
        self.map.insert((k, self.next), value);
        self.keys.insert(self.next, k);
        TimerId(self.next)
    }
    pub fn remove(&mut self, id: TimerId) -> Option<T> {
        let k = self.keys.remove(&id.0)?;
        self.map.remove(&(k, id.0))
    }
    pub fn deadline(&self, id: TimerId) -> Option<Msec> {
        self.keys
            .get(&id.0)
            .map(|k| self.base.wrapping_add(*k as u64))
    }
    pub fn get(&self, id: TimerId) -> Option<&T> {
        let k = self.keys.get(&id.0)?;
        self.map.get(&(*k, id.0))
    }
    pub fn next_timeout(&self, now: Msec) -> Option<u64> {
        let ((k, _), _) = self.map.first_key_value()?;
        Some(msec_diff(self.base.wrapping_add(*k as u64), now).max(0) as u64)
    }
    pub fn pop_expired(&mut self, now: Msec) -> Option<(TimerId, T)> {
        let (&(k, id), _) = self.map.first_key_value()?;
        if msec_diff(self.base.wrapping_add(k as u64), now) > 0 {
            return None;
        }
        self.keys.remove(&id);
        self.map.remove(&(k, id)).map(|v| (TimerId(id), v))
    }
    pub fn drain(&mut self) -> Vec<(TimerId, T)> {
        self.keys.clear();
        std::mem::take(&mut self.map)
            .into_iter()
            .map(|((_, id), v)| (TimerId(id), v))
            .collect()
    }
}
