//! The core's timers (nginx's `ngx_event_timer`), as a hierarchical timing
//! wheel instead of nginx's red-black tree.
//!
//! This module owns [`TimerWheel`]: every timeout the event core arms (read,
//! write, keep-alive, lingering close, resolver, ...) lives here, keyed by an
//! absolute [`Msec`] deadline. The loop asks [`TimerWheel::next_timeout`] how
//! long it may sleep and then calls [`TimerWheel::pop_expired`] until it
//! returns `None`, exactly where nginx calls `ngx_event_find_timer` and
//! `ngx_event_expire_timers`.
//!
//! # Why a wheel
//!
//! A server re-arms a timer on nearly every read and write, and most of them
//! are cancelled long before they fire. A tree pays `O(log n)` with a cache
//! miss per level on every arm and every cancel; the wheel pays `O(1)`: an
//! append to a slot's vector on insert and a `swap_remove` on cancel.
//! Expiry walks slot vectors front to back, so the memory accesses of one
//! cascade are independent of each other and the CPU overlaps their cache
//! misses (an intrusive linked list would serialise them).
//!
//! # Layout
//!
//! * [`LEVELS`] = 6 levels of 64 slots. A slot of level `l` spans `64^l` ms,
//!   so level `l` as a whole spans `64^(l+1)` ms and the wheel covers
//!   [`WHEEL_RANGE_MS`] = 2^36 ms (about 795 days) ahead of its current time.
//!   Each level has a `u64` occupancy bitmap, so finding the next non-empty
//!   slot is a mask and a `trailing_zeros`, never a walk over slots or
//!   entries, and an idle gap of any length is crossed in one jump.
//! * Deadlines beyond the current top-level rotation go to an overflow list
//!   (the "clamped" top of the wheel). The overflow is looked at only when
//!   the whole wheel is empty, when it is re-sorted into the levels; an entry
//!   therefore cascades through it at most once per 2^36 ms and still fires
//!   at its exact deadline.
//! * Entries live in a slab (`Vec` + free stack). A [`TimerId`] is the slab
//!   index plus a generation, so a stale id can never reach an entry that
//!   reused the slot; a slot whose generation would wrap is retired instead of
//!   reused, so "never" is literal.
//! * Entries whose deadline is already behind the wheel's current time
//!   (inserted late, or in the middle of an expiry loop that has not caught
//!   up with `now` yet) go to a small min-heap ordered by deadline, so they
//!   pop before anything still in the wheel and in deadline order among
//!   themselves. A deadline equal to the current time goes to the current
//!   level-0 slot, which is served right after the heap. Cancelling one leaves a tombstone that the next pop discards
//!   (the heap only ever holds due entries, so tombstones live for at most
//!   one expiry loop).
//!
//! # Time and wraparound
//!
//! [`Msec`] values may wrap. The wheel never compares them with `<`: it keeps
//! its own tick counter `elapsed` (ms since the wheel's creation time,
//! `origin`), and every deadline is placed from
//! `msec_diff(deadline, origin + elapsed)`. The internal counter itself would
//! wrap only after 2^64 ms (hundreds of millions of years) of wheel uptime.
//! Deadlines must be within 2^63 ms of the wheel's time to be meaningful,
//! which is the contract of [`msec_diff`] anyway.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::clock::{msec_before, msec_diff, Msec};

/// log2 of the slots per level.
const LEVEL_BITS: u32 = 6;
/// Slots per level; a `u64` bitmap covers one level.
const SLOTS: usize = 1 << LEVEL_BITS;
/// Number of levels of the wheel.
pub const LEVELS: usize = 6;
/// Bits of time covered by the whole wheel.
const WHEEL_BITS: u32 = LEVEL_BITS * LEVELS as u32;
/// How far ahead of its current time the wheel sorts entries into slots
/// (2^36 ms, about 795 days). Later deadlines wait in the overflow list and
/// are re-sorted when the wheel gets there.
pub const WHEEL_RANGE_MS: u64 = 1 << WHEEL_BITS;

/// List index of the overflow list (after the `LEVELS * SLOTS` slots).
const OVERFLOW: usize = LEVELS * SLOTS;
/// Tag of entries that sit in the due heap.
const DUE: u16 = OVERFLOW as u16 + 1;
/// Tag of free slab entries.
const FREE: u16 = u16::MAX;

/// Handle to an armed timer: slab index plus generation, so an id that
/// outlived its timer (fired or removed) is recognised as stale instead of
/// touching whatever timer reused the slab entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId {
    index: u32,
    gen: u32,
}

/// One slab entry. `list`/`pos` locate the entry's index inside its slot
/// vector, which is what makes `remove` O(1) (`swap_remove` + one fix-up).
struct Node<T> {
    /// The absolute deadline as given, kept so it can be re-placed on
    /// cascade and reported by [`TimerWheel::deadline`].
    deadline: Msec,
    /// Position inside `lists[list]` (unused while in the due heap).
    pos: u32,
    /// Bumped on every free, so old [`TimerId`]s go stale.
    gen: u32,
    /// Slot list index, [`DUE`], or [`FREE`].
    list: u16,
    value: Option<T>,
}

/// A slot vector element. Carrying the low bits of the deadline next to the
/// index lets a cascade re-sort a slot by reading only the (sequential) slot
/// vector: the node is written (new position) but never read, so cascading
/// does not wait on a cache miss per entry.
#[derive(Clone, Copy)]
struct Entry {
    index: u32,
    /// Low 32 bits of the internal deadline. A level-`l` slot's start time
    /// supplies the bits above `6 * l <= 30`, so these are enough to rebuild
    /// the deadline; overflow entries re-read the node instead.
    low: u32,
}

/// Hierarchical timing wheel keyed by absolute [`Msec`] deadlines; see the
/// module documentation for the layout and the wraparound rules.
pub struct TimerWheel<T> {
    /// The caller's time when the wheel was created; internal ticks count
    /// from here so slot arithmetic never sees a wrapped value.
    origin: Msec,
    /// Internal ticks up to which the wheel has been advanced: everything
    /// still in a slot is strictly later than this.
    elapsed: u64,
    nodes: Vec<Node<T>>,
    /// Free slab indices, reused LIFO (the most recently freed entry is the
    /// one most likely still in cache).
    free: Vec<u32>,
    /// `LEVELS * SLOTS` slot vectors followed by the overflow list.
    lists: Box<[Vec<Entry>]>,
    /// Bit `s` of `occupied[l]` is set iff slot `s` of level `l` is
    /// non-empty.
    occupied: [u64; LEVELS],
    /// Entries already due when placed: `(deadline - origin, index, gen)`,
    /// min-first. Stale triples (removed entries) are skipped lazily.
    due: BinaryHeap<Reverse<(i64, u32, u32)>>,
    len: usize,
}

impl<T> std::fmt::Debug for TimerWheel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerWheel")
            .field("now", &self.now_abs())
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Which list an entry with internal deadline `when` (strictly after
/// `elapsed`) belongs in: the level is chosen by the highest bit in which
/// `when` differs from `elapsed`, so every entry of level `l` shares all bits
/// above level `l` with the current time and sits in a slot strictly ahead
/// of the current one (level 0: at or ahead).
#[inline]
fn list_for(elapsed: u64, when: u64) -> usize {
    let differ = elapsed ^ when;
    if differ >> WHEEL_BITS != 0 {
        return OVERFLOW;
    }
    let level = ((63 - (differ | (SLOTS as u64 - 1)).leading_zeros()) / LEVEL_BITS) as usize;
    let slot = ((when >> (level as u32 * LEVEL_BITS)) as usize) & (SLOTS - 1);
    level * SLOTS + slot
}

impl<T> TimerWheel<T> {
    /// An empty wheel whose current time is `now`.
    pub fn new(now: Msec) -> Self {
        Self::with_capacity(now, 0)
    }

    /// An empty wheel with slab room for `cap` timers, so a server that knows
    /// its connection limit never reallocates while running.
    pub fn with_capacity(now: Msec, cap: usize) -> Self {
        TimerWheel {
            origin: now,
            elapsed: 0,
            nodes: Vec::with_capacity(cap),
            free: Vec::new(),
            lists: (0..=OVERFLOW).map(|_| Vec::new()).collect(),
            occupied: [0; LEVELS],
            due: BinaryHeap::new(),
            len: 0,
        }
    }

    /// Number of armed timers.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no timer is armed (the loop may wait forever).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The wheel's current time as an absolute [`Msec`].
    #[inline]
    fn now_abs(&self) -> Msec {
        self.origin.wrapping_add(self.elapsed)
    }

    /// Arms a timer. O(1). A deadline at or before the wheel's current time
    /// is due at the next [`pop_expired`](Self::pop_expired).
    ///
    /// # Panics
    /// If more than `u32::MAX - 1` slab entries would be needed (ids are
    /// 32-bit to keep entries small).
    pub fn insert(&mut self, deadline: Msec, value: T) -> TimerId {
        let index = match self.free.pop() {
            Some(index) => {
                let node = &mut self.nodes[index as usize];
                node.deadline = deadline;
                node.value = Some(value);
                index
            }
            None => {
                let index = u32::try_from(self.nodes.len())
                    .ok()
                    .filter(|&i| i != u32::MAX)
                    .expect("TimerWheel: more than 2^32 - 1 timers");
                self.nodes.push(Node {
                    deadline,
                    pos: 0,
                    gen: 0,
                    list: FREE,
                    value: Some(value),
                });
                index
            }
        };
        self.place(index);
        self.len += 1;
        TimerId {
            index,
            gen: self.nodes[index as usize].gen,
        }
    }

    /// Cancels a timer. O(1). `None` if the id is stale (already fired or
    /// removed), in which case nothing is touched.
    pub fn remove(&mut self, id: TimerId) -> Option<T> {
        self.live(id)?;
        self.unlink(id.index);
        self.release(id.index)
    }

    /// The deadline a live timer was armed with.
    pub fn deadline(&self, id: TimerId) -> Option<Msec> {
        self.live(id).map(|n| n.deadline)
    }

    /// The value of a live timer.
    pub fn get(&self, id: TimerId) -> Option<&T> {
        self.live(id).and_then(|n| n.value.as_ref())
    }

    /// The value of a live timer, mutably.
    pub fn get_mut(&mut self, id: TimerId) -> Option<&mut T> {
        let node = self.nodes.get_mut(id.index as usize)?;
        if node.gen != id.gen || node.list == FREE {
            return None;
        }
        node.value.as_mut()
    }

    /// How long the loop may sleep: `None` when empty (wait forever),
    /// otherwise `Some(ms)` from `now`, 0 if something is already due.
    ///
    /// The answer may be earlier than the true nearest deadline (it is the
    /// start of the first occupied slot, and a higher-level slot starts
    /// before its entries' deadlines; after it the entries cascade and the
    /// next answer is sharper) but never later. Cost: at most one bitmap test
    /// per level.
    pub fn next_timeout(&self, now: Msec) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let at = if let Some(&Reverse((key, _, _))) = self.due.peek() {
            // Everything in the heap is at or before `elapsed`, hence before
            // anything in the slots. A tombstone on top only makes the
            // answer earlier, which is allowed.
            self.origin.wrapping_add(key as u64)
        } else if let Some((_, time)) = self.next_expiration() {
            self.origin.wrapping_add(time)
        } else {
            return Some(0);
        };
        Some(msec_diff(at, now).max(0) as u64)
    }

    /// Advances the wheel to `now` and pops one timer whose deadline is at or
    /// before `now`, in deadline order across different milliseconds (any
    /// order within one). Call repeatedly until `None`. Timers inserted
    /// between calls with a deadline `<= now` come out of later calls of the
    /// same loop, still in order relative to what is left.
    ///
    /// The cost is per entry moved (each entry cascades at most once per
    /// level) plus one bitmap scan per call, never per elapsed millisecond.
    pub fn pop_expired(&mut self, now: Msec) -> Option<(TimerId, T)> {
        self.pop_next(Some(now))
    }

    /// Removes every timer, yielding them in deadline order (nginx's
    /// cancel-all on worker exit, where each timer's handler is told it was
    /// cancelled). Order costs nothing extra here: draining is expiry with no
    /// time limit, so it goes through the same slot-by-slot path.
    ///
    /// Dropping the iterator early removes the rest. The wheel keeps its
    /// current time afterwards.
    pub fn drain(&mut self) -> Drain<'_, T> {
        let saved_elapsed = self.elapsed;
        Drain {
            wheel: self,
            saved_elapsed,
        }
    }

    /// The live node for `id`, or `None` if `id` is stale.
    #[inline]
    fn live(&self, id: TimerId) -> Option<&Node<T>> {
        let node = self.nodes.get(id.index as usize)?;
        (node.gen == id.gen && node.list != FREE).then_some(node)
    }

    /// Sorts a node into the due heap (deadline already passed), a slot, or
    /// the overflow list, relative to the wheel's current time.
    #[inline]
    fn place(&mut self, index: u32) {
        let node = &mut self.nodes[index as usize];
        let diff = msec_diff(node.deadline, self.origin.wrapping_add(self.elapsed));
        if diff < 0 {
            node.list = DUE;
            let key = msec_diff(node.deadline, self.origin);
            self.due.push(Reverse((key, index, node.gen)));
            return;
        }
        self.link(index, self.elapsed.saturating_add(diff as u64));
    }

    /// Appends a node to the list for internal deadline `when >= elapsed`
    /// (`when == elapsed` lands in the current level-0 slot, which the next
    /// pop serves first).
    #[inline]
    fn link(&mut self, index: u32, when: u64) {
        let list = list_for(self.elapsed, when);
        let slot = &mut self.lists[list];
        let node = &mut self.nodes[index as usize];
        // A slot never holds more entries than the slab, whose size fits u32.
        node.pos = slot.len() as u32;
        node.list = list as u16;
        slot.push(Entry {
            index,
            low: when as u32,
        });
        if list < OVERFLOW {
            self.occupied[list / SLOTS] |= 1 << (list % SLOTS);
        }
    }

    /// Takes a live node out of its slot (the due heap drops it lazily).
    #[inline]
    fn unlink(&mut self, index: u32) {
        let node = &self.nodes[index as usize];
        let list = node.list as usize;
        if node.list == DUE {
            return;
        }
        let pos = node.pos as usize;
        let slot = &mut self.lists[list];
        slot.swap_remove(pos);
        if let Some(moved) = slot.get(pos) {
            self.nodes[moved.index as usize].pos = pos as u32;
        }
        if slot.is_empty() && list < OVERFLOW {
            self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
        }
    }

    /// Frees an unlinked node and returns its value. The generation bump is
    /// what turns every outstanding id (and due-heap triple) stale; an entry
    /// whose generation is exhausted is never reused.
    #[inline]
    fn release(&mut self, index: u32) -> Option<T> {
        let node = &mut self.nodes[index as usize];
        node.list = FREE;
        let value = node.value.take();
        if node.gen != u32::MAX {
            node.gen += 1;
            self.free.push(index);
        }
        self.len -= 1;
        value
    }

    /// Unlinked-by-caller pop of `index` as an `(id, value)` pair.
    #[inline]
    fn take(&mut self, index: u32) -> Option<(TimerId, T)> {
        let id = TimerId {
            index,
            gen: self.nodes[index as usize].gen,
        };
        self.release(index).map(|v| (id, v))
    }

    /// The first occupied list and the internal time at which the wheel must
    /// look at it (slot start, or the next top-level rotation for the
    /// overflow). The lowest non-empty level always holds the earliest slot:
    /// a level-`l` slot ahead of the current one starts after the whole
    /// current rotation of level `l - 1`.
    #[inline]
    fn next_expiration(&self) -> Option<(usize, u64)> {
        for level in 0..LEVELS {
            let shift = level as u32 * LEVEL_BITS;
            let current = (self.elapsed >> shift) & (SLOTS as u64 - 1);
            let bits = self.occupied[level] & (u64::MAX << current);
            debug_assert_eq!(bits, self.occupied[level], "slot behind the wheel");
            if bits != 0 {
                let slot = u64::from(bits.trailing_zeros());
                let rotation = (1u64 << (shift + LEVEL_BITS)) - 1;
                let time = (self.elapsed & !rotation) + (slot << shift);
                return Some((level * SLOTS + slot as usize, time.max(self.elapsed)));
            }
        }
        if self.lists[OVERFLOW].is_empty() {
            None
        } else {
            Some((
                OVERFLOW,
                (self.elapsed | (WHEEL_RANGE_MS - 1)).saturating_add(1),
            ))
        }
    }

    /// The expiry engine behind [`pop_expired`](Self::pop_expired) (`now`
    /// given) and [`drain`](Self::drain) (`None`: no time limit).
    fn pop_next(&mut self, now: Option<Msec>) -> Option<(TimerId, T)> {
        let limit = now.map(|now| {
            let ahead = msec_diff(now, self.now_abs());
            if ahead > 0 {
                self.elapsed.saturating_add(ahead as u64)
            } else {
                self.elapsed
            }
        });
        loop {
            // Already-due entries first: their deadlines are at or before
            // `elapsed`, everything in the slots is at or after it.
            while let Some(&Reverse((_, index, gen))) = self.due.peek() {
                let node = &self.nodes[index as usize];
                if node.gen != gen || node.list != DUE {
                    self.due.pop();
                    continue;
                }
                if let Some(now) = now {
                    if msec_before(now, node.deadline) {
                        // Only when the caller's clock is behind the wheel's.
                        return None;
                    }
                }
                self.due.pop();
                return self.take(index);
            }
            let next = self.next_expiration();
            let (list, time) = match (next, limit) {
                (Some((_, time)), Some(limit)) if time > limit => {
                    self.elapsed = self.elapsed.max(limit);
                    return None;
                }
                (Some(found), _) => found,
                (None, limit) => {
                    if let Some(limit) = limit {
                        self.elapsed = self.elapsed.max(limit);
                    }
                    return None;
                }
            };
            self.elapsed = self.elapsed.max(time);
            if list < SLOTS {
                // A level-0 slot holds exactly the entries due at `time`.
                let slot = &mut self.lists[list];
                let entry = slot.pop()?;
                if slot.is_empty() {
                    self.occupied[0] &= !(1 << list);
                }
                return self.take(entry.index);
            }
            self.cascade(list, time, limit);
        }
    }

    /// Re-sorts the entries of a higher-level slot starting at internal time
    /// `start` (or the overflow) now that the wheel has reached it; each lands
    /// in a lower level or (overflow only) back in the overflow.
    fn cascade(&mut self, list: usize, start: u64, limit: Option<u64>) {
        let mut entries = std::mem::take(&mut self.lists[list]);
        if list < OVERFLOW {
            self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
            let level_mask = (1u64 << ((list / SLOTS) as u32 * LEVEL_BITS)) - 1;
            for e in &entries {
                self.link(e.index, start | (u64::from(e.low) & level_mask));
            }
        } else {
            // The wheel is empty here. Jump straight to the rotation holding
            // the earliest overflow entry (bounded by the caller's `now`), so
            // a far-future timer costs one cascade, not one per rotation.
            let now = self.now_abs();
            let earliest = entries
                .iter()
                .map(|e| msec_diff(self.nodes[e.index as usize].deadline, now).max(0) as u64)
                .min()
                .unwrap_or(0);
            let mut target = self.elapsed.saturating_add(earliest) & !(WHEEL_RANGE_MS - 1);
            if let Some(limit) = limit {
                target = target.min(limit & !(WHEEL_RANGE_MS - 1));
            }
            self.elapsed = self.elapsed.max(target);
            for e in &entries {
                self.place(e.index);
            }
        }
        entries.clear();
        if self.lists[list].is_empty() {
            // Keep the allocation: this slot fills up again next rotation.
            self.lists[list] = entries;
        }
    }
}

/// Iterator returned by [`TimerWheel::drain`]: yields every timer in deadline
/// order; dropping it removes whatever was not consumed.
pub struct Drain<'a, T> {
    wheel: &'a mut TimerWheel<T>,
    /// Draining advances the wheel through its slots; the wheel's time is put
    /// back once it is empty so later inserts are judged against real time.
    saved_elapsed: u64,
}

impl<T> Iterator for Drain<'_, T> {
    type Item = (TimerId, T);

    fn next(&mut self) -> Option<(TimerId, T)> {
        self.wheel.pop_next(None)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.wheel.len, Some(self.wheel.len))
    }
}

impl<T> Drop for Drain<'_, T> {
    fn drop(&mut self) {
        while self.wheel.pop_next(None).is_some() {}
        self.wheel.due.clear();
        self.wheel.elapsed = self.saved_elapsed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// xorshift64*: deterministic randomness without a dependency.
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
    }

    fn pop_all<T>(w: &mut TimerWheel<T>, now: Msec) -> Vec<(TimerId, T)> {
        std::iter::from_fn(|| w.pop_expired(now)).collect()
    }

    #[test]
    fn orders_across_levels_and_overflow() {
        let start = 1_000;
        let mut w = TimerWheel::new(start);
        let offsets = [
            WHEEL_RANGE_MS + 5,
            1,
            4096,
            63,
            300_000,
            64,
            20_000_000,
            65,
            4095,
            0,
            1 << 30,
            (1 << 30) + 1,
            WHEEL_RANGE_MS - 1,
        ];
        for &o in &offsets {
            w.insert(start + o, o);
        }
        assert_eq!(w.len(), offsets.len());
        let got: Vec<u64> = pop_all(&mut w, start + (1 << 40))
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        let mut want = offsets.to_vec();
        want.sort_unstable();
        assert_eq!(got, want);
        assert!(w.is_empty());
        assert_eq!(w.next_timeout(0), None);
    }

    /// Steps the clock by 1 ms: every timer must pop exactly at its
    /// deadline (not before: never early; not after: never late).
    #[test]
    fn fires_exactly_at_deadline() {
        let start = 77;
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut w = TimerWheel::new(start);
        let mut want = 0;
        for _ in 0..5_000 {
            let d = start + rng.below(300_000);
            w.insert(d, d);
            want += 1;
        }
        let mut got = 0;
        for now in start..=start + 300_000 {
            while let Some((id, d)) = w.pop_expired(now) {
                assert_eq!(d, now, "timer popped at {now}, deadline {d}");
                assert_eq!(w.deadline(id), None);
                got += 1;
            }
        }
        assert_eq!(got, want);
        assert!(w.is_empty());
    }

    /// Random clock jumps: a timer pops at the first `now` at or after its
    /// deadline, and pops come out in deadline order.
    #[test]
    fn never_early_never_late_with_jumps() {
        let start = 5;
        let mut rng = Rng(12345);
        let mut w = TimerWheel::new(start);
        for _ in 0..20_000 {
            let d = start + rng.below(10_000_000);
            w.insert(d, d);
        }
        let mut prev_now = start;
        let mut now = start;
        let mut last = 0;
        while !w.is_empty() {
            now += 1 + rng.below(5_000);
            for (_, d) in pop_all(&mut w, now) {
                assert!(d <= now, "early: {d} at {now}");
                assert!(d > prev_now, "late: {d} was due at {prev_now}");
                assert!(d >= last, "out of order");
                last = d;
            }
            prev_now = now;
        }
    }

    #[test]
    fn wraps_around_u64() {
        let start = u64::MAX - 1000;
        let mut rng = Rng(7);
        let mut w = TimerWheel::new(start);
        let offsets: Vec<u64> = (0..3_000)
            .map(|i| match i % 3 {
                0 => rng.below(2_000),      // around the wrap, levels 0-1
                1 => rng.below(300_000),    // level 2-3, after the wrap
                _ => rng.below(50_000_000), // levels 3-4
            })
            .chain([1000, 1001, 999, 0, WHEEL_RANGE_MS + 3])
            .collect();
        for &o in &offsets {
            let id = w.insert(start.wrapping_add(o), o);
            assert_eq!(w.deadline(id), Some(start.wrapping_add(o)));
        }
        let mut got: Vec<u64> = pop_all(&mut w, start).into_iter().map(|(_, o)| o).collect();
        assert!(got.iter().all(|&o| o == 0));
        let mut elapsed = 0u64;
        while !w.is_empty() {
            let step = if elapsed < 100_000 { 7 } else { 100_003 };
            elapsed += step;
            let now = start.wrapping_add(elapsed);
            for (_, o) in pop_all(&mut w, now) {
                assert!(
                    o <= elapsed && o + step > elapsed,
                    "{o} popped at {elapsed}"
                );
                got.push(o);
            }
        }
        let mut want = offsets.clone();
        want.sort_unstable();
        assert_eq!(got, want);
    }

    #[test]
    fn stale_ids_never_touch_reused_entries() {
        let mut w = TimerWheel::new(0);
        let a = w.insert(10, "a");
        assert_eq!(w.remove(a), Some("a"));
        assert_eq!(w.remove(a), None);
        let b = w.insert(20, "b");
        assert_eq!(b.index, a.index, "slab entry is reused");
        assert_ne!(a, b);
        assert_eq!(w.remove(a), None);
        assert_eq!(w.get(a), None);
        assert_eq!(w.get_mut(a), None);
        assert_eq!(w.deadline(a), None);
        assert_eq!(w.get(b), Some(&"b"));
        assert_eq!(w.len(), 1);
        // A fired id is stale too.
        let (fired, v) = w.pop_expired(20).expect("b is due");
        assert_eq!((fired, v), (b, "b"));
        let c = w.insert(30, "c");
        assert_eq!(c.index, b.index);
        assert_eq!(w.remove(b), None);
        assert_eq!(w.get(c), Some(&"c"));
        // Due-heap tombstones are stale as well.
        let d = w.insert(5, "d");
        assert_eq!(w.remove(d), Some("d"));
        let e = w.insert(5, "e");
        assert_eq!(e.index, d.index);
        assert_eq!(w.pop_expired(20).map(|(_, v)| v), Some("e"));
        assert_eq!(w.pop_expired(20), None);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn exhausted_generation_is_retired() {
        let mut w = TimerWheel::new(0);
        let a = w.insert(1, 1);
        w.nodes[a.index as usize].gen = u32::MAX;
        let a = TimerId {
            index: a.index,
            gen: u32::MAX,
        };
        assert_eq!(w.remove(a), Some(1));
        let b = w.insert(1, 2);
        assert_ne!(b.index, a.index);
        assert_eq!(w.remove(a), None);
    }

    #[test]
    fn removal_during_expiry_loop() {
        let mut w = TimerWheel::new(0);
        let ids: Vec<TimerId> = (0..4).map(|i| w.insert(100, i)).collect();
        let late = w.insert(101, 9);
        let (first, _) = w.pop_expired(200).expect("due");
        let other = *ids.iter().find(|&&i| i != first).expect("another");
        assert!(w.remove(other).is_some());
        assert!(w.remove(late).is_some());
        let rest: Vec<TimerId> = pop_all(&mut w, 200).into_iter().map(|(i, _)| i).collect();
        assert_eq!(rest.len(), 2);
        assert!(!rest.contains(&other) && !rest.contains(&first));
        assert!(w.is_empty());
    }

    #[test]
    fn past_deadlines_pop_next_in_order() {
        let mut w = TimerWheel::new(0);
        assert_eq!(w.pop_expired(1_000), None);
        w.insert(1_000, 3);
        w.insert(500, 1);
        w.insert(800, 2);
        assert_eq!(w.next_timeout(1_000), Some(0));
        // Inserted mid-loop, after the wheel has passed 1_000.
        assert_eq!(w.pop_expired(1_000).map(|(_, v)| v), Some(1));
        w.insert(700, 15);
        w.insert(1_001, 4);
        let got: Vec<i32> = pop_all(&mut w, 1_000).into_iter().map(|(_, v)| v).collect();
        assert_eq!(got, [15, 2, 3]);
        assert_eq!(w.next_timeout(1_000), Some(1));
        // A caller clock behind the wheel never pops early.
        w.insert(900, 5);
        assert_eq!(w.pop_expired(899), None);
        assert_eq!(w.pop_expired(900).map(|(_, v)| v), Some(5));
    }

    /// Randomised model check: `next_timeout` never later than the earliest
    /// deadline, pops agree with a BTreeMap, len agrees.
    #[test]
    fn matches_btreemap_model() {
        for seed in 1..=4u64 {
            let start = if seed % 2 == 0 {
                u64::MAX - 50_000
            } else {
                seed
            };
            let mut rng = Rng(seed * 0x1234_5678_9abc);
            let mut w = TimerWheel::new(start);
            let mut model: BTreeMap<(i64, u64), TimerId> = BTreeMap::new();
            let mut ids: Vec<(TimerId, (i64, u64))> = Vec::new();
            let mut now = start;
            let mut serial = 0u64;
            let key = |d: Msec| msec_diff(d, start);
            for _ in 0..60_000 {
                match rng.below(10) {
                    0..=4 => {
                        let span = [10, 5_000, 400_000, 30_000_000][rng.below(4) as usize];
                        let d = now.wrapping_add(rng.below(span)).wrapping_sub(3);
                        serial += 1;
                        let id = w.insert(d, serial);
                        model.insert((key(d), serial), id);
                        ids.push((id, (key(d), serial)));
                    }
                    5..=6 if !ids.is_empty() => {
                        let (id, k) = ids.swap_remove(rng.below(ids.len() as u64) as usize);
                        let live = model.remove(&k).is_some();
                        assert_eq!(w.remove(id).is_some(), live);
                    }
                    _ => {
                        let step = [0, 1, 50, 3_000, 1_000_000][rng.below(5) as usize];
                        now = now.wrapping_add(rng.below(step + 1));
                        while let Some((id, v)) = w.pop_expired(now) {
                            let (&(k, first), _) = model.iter().next().expect("model has it");
                            assert!(k <= key(now), "popped early");
                            let got_key = model
                                .iter()
                                .find(|(_, &i)| i == id)
                                .map(|(&k, _)| k)
                                .expect("popped id is in the model");
                            assert_eq!(got_key.0, k, "not the earliest ms ({first})");
                            assert_eq!(got_key.1, v);
                            model.remove(&got_key);
                        }
                        if let Some((&(k, _), _)) = model.iter().next() {
                            assert!(k > key(now), "late: due entry not popped");
                        }
                    }
                }
                assert_eq!(w.len(), model.len());
                match (w.next_timeout(now), model.keys().next()) {
                    (None, None) => {}
                    (Some(t), Some(&(k, _))) => {
                        let want = (k - key(now)).max(0) as u64;
                        assert!(t <= want, "next_timeout {t} later than {want}");
                    }
                    (t, m) => panic!("next_timeout {t:?} vs model {m:?}"),
                }
            }
        }
    }

    #[test]
    fn long_idle_jumps() {
        let mut w = TimerWheel::new(0);
        let a = w.insert(10_000_000, 'a');
        w.insert(10_000_005, 'b');
        w.insert(1 << 40, 'c');
        w.insert(1 << 50, 'd');
        assert!(w.next_timeout(0).expect("armed") <= 10_000_000);
        assert_eq!(w.pop_expired(9_999_999), None);
        assert_eq!(w.next_timeout(9_999_999), Some(1));
        assert_eq!(w.deadline(a), Some(10_000_000));
        assert_eq!(w.pop_expired(10_000_000).map(|(_, v)| v), Some('a'));
        assert_eq!(w.pop_expired(10_000_004), None);
        assert_eq!(w.pop_expired(20_000_000).map(|(_, v)| v), Some('b'));
        assert_eq!(w.pop_expired((1 << 40) - 1), None);
        assert_eq!(w.pop_expired(1 << 40).map(|(_, v)| v), Some('c'));
        assert!(w.next_timeout(1 << 40).expect("armed") <= (1 << 50) - (1 << 40));
        assert_eq!(w.pop_expired((1 << 50) - 1), None);
        assert_eq!(w.pop_expired(1 << 50).map(|(_, v)| v), Some('d'));
        assert!(w.is_empty());
    }

    #[test]
    fn drain_in_order_and_keeps_time() {
        let mut w = TimerWheel::new(500);
        for o in [70_000u64, 3, WHEEL_RANGE_MS * 3, 0, 64, 5_000] {
            w.insert(500 + o, o);
        }
        let removed = w.insert(600, 1);
        w.remove(removed);
        let got: Vec<u64> = w.drain().map(|(_, v)| v).collect();
        assert_eq!(got, [0, 3, 64, 5_000, 70_000, WHEEL_RANGE_MS * 3]);
        assert!(w.is_empty());
        assert_eq!(w.next_timeout(500), None);
        // Time did not move: a timer 2 ms ahead is not due yet.
        w.insert(502, 9);
        assert_eq!(w.pop_expired(501), None);
        assert_eq!(w.next_timeout(500), Some(2));
        // A dropped, half-consumed drain still empties the wheel.
        w.insert(900, 10);
        let mut d = w.drain();
        assert!(d.next().is_some());
        drop(d);
        assert!(w.is_empty());
        assert_eq!(w.pop_expired(10_000), None);
    }

    #[test]
    fn len_bookkeeping() {
        let mut w = TimerWheel::with_capacity(0, 16);
        assert!(w.is_empty());
        let a = w.insert(5, ());
        let b = w.insert(0, ());
        let _c = w.insert(70, ());
        assert_eq!(w.len(), 3);
        w.remove(a);
        w.remove(a);
        assert_eq!(w.len(), 2);
        assert!(w.pop_expired(0).is_some());
        assert_eq!(w.remove(b), None);
        assert_eq!(w.len(), 1);
        *w.get_mut(_c).expect("live") = ();
        assert!(w.pop_expired(100).is_some());
        assert_eq!(w.len(), 0);
        assert!(w.is_empty());
    }
}
