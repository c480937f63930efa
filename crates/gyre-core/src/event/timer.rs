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
//!
//! # Layout
//!
//! * [`LEVELS`] = 4 levels of 256 slots. A slot of level `l` spans `256^l`
//!   ms, so level `l` as a whole spans `256^(l+1)` ms and the wheel covers
//!   [`WHEEL_RANGE_MS`] = 2^32 ms (about 49.7 days) ahead of its current time.
//!   Wide levels mean few cascades: a timeout under 65 s cascades at most
//!   once before it fires. Each level has a 256-bit occupancy bitmap, so
//!   finding the next non-empty slot is a few word tests and a
//!   `trailing_zeros`, never a walk over slots or entries, and an idle gap of
//!   any length is crossed in one jump.
//! * Deadlines beyond the current top-level rotation go to an overflow list
//!   (the "clamped" top of the wheel). The overflow is looked at only when
//!   the whole wheel is empty, when it is re-sorted into the levels; an entry
//!   therefore cascades through it at most once per 2^32 ms and still fires
//!   at its exact deadline.
//! * A timer *lives in its slot vector*: the slot element carries the value,
//!   the internal deadline, the slab index and the generation. The slab
//!   (`Vec` + free stack) holds only each timer's location (slot list and
//!   position), 8 bytes per timer, which is what makes cancel O(1)
//!   (`swap_remove` plus one location fix-up for the element moved into the
//!   hole).
//! * A [`TimerId`] is the slab index plus a generation. An id is live iff
//!   the element at its slab entry's location carries the same index and
//!   generation (one index has at most one live element), so a stale id can
//!   never reach a timer that reused the index; a slab index whose
//!   generation would wrap is retired instead of reused, so "never" is
//!   literal.
//! * Entries whose deadline is already behind the wheel's current time
//!   (inserted late, or in the middle of an expiry loop that has not caught
//!   up with `now` yet) go to a small min-heap ordered by deadline, so they
//!   pop before anything still in the wheel and in deadline order among
//!   themselves; their values wait in a side store the heap refers to. A
//!   deadline equal to the current time goes to the current level-0 slot,
//!   which is served right after the heap. Cancelling one leaves a tombstone
//!   that the next pop discards (the heap only ever holds due entries, so
//!   tombstones live for at most one expiry loop).
//!
//! # Memory traffic on expiry
//!
//! With a million timers the slab and the slot vectors are far bigger than
//! the caches, so what matters is the number of *dependent* cache misses. The
//! expiry path performs no random read at all: a cascade reads its slot
//! vector front to back and appends each element to a lower slot's vector
//! (both sequential), and its only random access is a *write* of the moved
//! timer's new location into the slab, which the store buffer retires in the
//! background while the loop goes on. Popping a due timer reads the level-0
//! slot vector (sequential) and pushes the index on the free stack; the slab
//! is not touched, since a fired timer's stale location already fails the
//! liveness check above.
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
const LEVEL_BITS: u32 = 8;
/// Slots per level (a multiple of 64: the bitmap is made of `u64` words).
const SLOTS: usize = 1 << LEVEL_BITS;
/// `u64` words of one level's occupancy bitmap.
const WORDS: usize = SLOTS / 64;
/// Number of levels of the wheel.
pub const LEVELS: usize = 4;
/// Bits of time covered by the whole wheel.
const WHEEL_BITS: u32 = LEVEL_BITS * LEVELS as u32;
/// How far ahead of its current time the wheel sorts entries into slots
/// (2^32 ms, about 49.7 days). Later deadlines wait in the overflow list and
/// are re-sorted when the wheel gets there.
pub const WHEEL_RANGE_MS: u64 = 1 << WHEEL_BITS;

/// List index of the overflow list (after the `LEVELS * SLOTS` slots).
const OVERFLOW: usize = LEVELS * SLOTS;
/// Location tag of entries that sit in the due store.
const DUE: u32 = OVERFLOW as u32 + 1;

/// Handle to an armed timer: slab index plus generation, so an id that
/// outlived its timer (fired or removed) is recognised as stale instead of
/// touching whatever timer reused the slab entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId {
    index: u32,
    gen: u32,
}

/// One slab entry: where the timer's [`Entry`] was last put. Written on
/// every move, read only by the id-based operations (`remove`, `get`, ...).
/// After the timer fires the location goes stale and is simply left alone:
/// the element found there (if any) carries another index or generation.
#[derive(Clone, Copy)]
#[repr(align(8))]
struct Node {
    /// Slot list index, or [`DUE`] (then `pos` indexes the due store).
    list: u32,
    /// Position inside `lists[list]` (or the due store).
    pos: u32,
}

/// A timer, stored inline in its slot vector (or in the due store).
struct Entry<T> {
    /// Internal deadline: ticks since `origin`, so the caller's deadline is
    /// `origin + when` (wrapping) and a cascade re-sorts the entry without
    /// looking anywhere else.
    when: u64,
    value: T,
    /// Slab index, whose location must be updated when the entry moves.
    index: u32,
    /// Generation the entry's [`TimerId`] was issued with.
    gen: u32,
}

impl<T> Entry<T> {
    #[inline]
    fn is(&self, id: TimerId) -> bool {
        self.index == id.index && self.gen == id.gen
    }

    #[inline]
    fn id(&self) -> TimerId {
        TimerId {
            index: self.index,
            gen: self.gen,
        }
    }
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
    /// Location of every slab index's current (or last) entry.
    nodes: Vec<Node>,
    /// Free slab indices with the generation their next id gets, reused LIFO
    /// (the most recently freed entry is the one most likely still in cache).
    free: Vec<(u32, u32)>,
    /// `LEVELS * SLOTS` slot vectors followed by the overflow list.
    lists: Box<[Vec<Entry<T>>]>,
    /// Bit `s` of level `l`'s bitmap is set iff slot `s` of level `l` is
    /// non-empty.
    occupied: [[u64; WORDS]; LEVELS],
    /// Entries already due when placed: `(when, index, gen)` with `when`
    /// read as signed ticks from `origin`, min-first. Stale triples (removed
    /// entries) are skipped lazily.
    due: BinaryHeap<Reverse<(i64, u32, u32)>>,
    /// The due entries themselves; a due node's `pos` indexes this.
    due_store: Vec<Option<Entry<T>>>,
    /// Free positions of `due_store`.
    due_free: Vec<u32>,
    /// Per slot of levels 1 and up: where the slot's last cascade put the
    /// entry that sat at each position (`forward[list][pos]`), so the slab
    /// need not be written when an entry cascades; see [`locate`](Self::locate).
    forward: Box<[Vec<Node>]>,
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

/// Which list an entry with internal deadline `when` (at or after
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

/// The lowest set bit of a level bitmap.
#[inline]
fn first_slot(bits: &[u64; WORDS]) -> Option<usize> {
    bits.iter()
        .enumerate()
        .find(|(_, &w)| w != 0)
        .map(|(i, &w)| i * 64 + w.trailing_zeros() as usize)
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
            free: Vec::with_capacity(cap),
            lists: (0..=OVERFLOW).map(|_| Vec::new()).collect(),
            occupied: [[0; WORDS]; LEVELS],
            due: BinaryHeap::new(),
            due_store: Vec::new(),
            due_free: Vec::new(),
            forward: (0..OVERFLOW).map(|_| Vec::new()).collect(),
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
        let (index, gen) = match self.free.pop() {
            Some(free) => free,
            None => {
                let index = u32::try_from(self.nodes.len())
                    .ok()
                    .filter(|&i| i != u32::MAX)
                    .expect("TimerWheel: more than 2^32 - 1 timers");
                self.nodes.push(Node { list: DUE, pos: 0 });
                (index, 0)
            }
        };
        let diff = msec_diff(deadline, self.now_abs());
        let mut entry = Entry {
            when: self.elapsed.wrapping_add(diff as u64),
            value,
            index,
            gen,
        };
        if diff < 0 {
            self.push_due(entry);
        } else {
            // Saturating only matters after 2^63 ms of wheel uptime.
            entry.when = self.elapsed.saturating_add(diff as u64);
            self.link(entry);
        }
        self.len += 1;
        TimerId { index, gen }
    }

    /// Cancels a timer. O(1). `None` if the id is stale (already fired or
    /// removed), in which case nothing is touched.
    pub fn remove(&mut self, id: TimerId) -> Option<T> {
        let node = self.locate(id)?;
        let pos = node.pos as usize;
        let entry = if node.list == DUE {
            let stored = self.due_store.get_mut(pos)?;
            if !stored.as_ref().is_some_and(|e| e.is(id)) {
                return None;
            }
            let entry = stored.take()?;
            // The heap keeps a tombstone; the next pop discards it.
            self.due_free.push(node.pos);
            entry
        } else {
            let list = node.list as usize;
            let slot = self.lists.get_mut(list)?;
            let entry = slot.swap_remove(pos);
            if let Some(moved) = slot.get(pos) {
                // Its slab entry may still point at a slot it cascaded out
                // of; the full location replaces that forwarding chain.
                self.nodes[moved.index as usize] = node;
            }
            if slot.is_empty() && list < OVERFLOW {
                self.occupied[list / SLOTS][(list % SLOTS) / 64] &= !(1 << (list % 64));
            }
            entry
        };
        self.release(id);
        Some(entry.value)
    }

    /// The deadline a live timer was armed with.
    pub fn deadline(&self, id: TimerId) -> Option<Msec> {
        self.find(id).map(|e| self.origin.wrapping_add(e.when))
    }

    /// The value of a live timer.
    pub fn get(&self, id: TimerId) -> Option<&T> {
        self.find(id).map(|e| &e.value)
    }

    /// The value of a live timer, mutably.
    pub fn get_mut(&mut self, id: TimerId) -> Option<&mut T> {
        let node = self.locate(id)?;
        let entry = if node.list == DUE {
            self.due_store.get_mut(node.pos as usize)?.as_mut()?
        } else {
            self.lists
                .get_mut(node.list as usize)?
                .get_mut(node.pos as usize)?
        };
        entry.is(id).then_some(&mut entry.value)
    }

    /// How long the loop may sleep: `None` when empty (wait forever),
    /// otherwise `Some(ms)` from `now`, 0 if something is already due.
    ///
    /// The answer may be earlier than the true nearest deadline (it is the
    /// start of the first occupied slot, and a higher-level slot starts
    /// before its entries' deadlines; after it the entries cascade and the
    /// next answer is sharper) but never later. Cost: a few bitmap tests per
    /// level.
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

    /// Where the live entry for `id` is: a slot list and position holding an
    /// entry with `id`'s index and generation, or a due-store position (not
    /// checked here). `None` if `id` is stale.
    ///
    /// The slab holds the location an entry was given when it was inserted
    /// or last moved by a `swap_remove`; a cascade does not update it but
    /// records in the cascaded slot's `forward` table where each position's
    /// entry went. An entry leaves a slot of level `l` for a lower level and
    /// fires (or is removed) before that slot cascades again a whole level-`l`
    /// rotation later, so following `forward` from the slab's location,
    /// at most one hop per level, reaches a live entry. Elements met on the
    /// way may belong to other timers (the slot was refilled); they are only
    /// compared, by index and generation, which are unique to one timer, so a
    /// stale id never matches anything.
    #[inline]
    fn locate(&self, id: TimerId) -> Option<Node> {
        let mut at = *self.nodes.get(id.index as usize)?;
        if at.list == DUE {
            return Some(at);
        }
        for _ in 0..LEVELS {
            let list = at.list as usize;
            if self
                .lists
                .get(list)?
                .get(at.pos as usize)
                .is_some_and(|e| e.is(id))
            {
                return Some(at);
            }
            at = *self.forward.get(list)?.get(at.pos as usize)?;
        }
        None
    }

    /// The live entry for `id`, or `None` if `id` is stale.
    #[inline]
    fn find(&self, id: TimerId) -> Option<&Entry<T>> {
        let node = self.locate(id)?;
        let entry = if node.list == DUE {
            self.due_store.get(node.pos as usize)?.as_ref()?
        } else {
            self.lists.get(node.list as usize)?.get(node.pos as usize)?
        };
        entry.is(id).then_some(entry)
    }

    /// Puts an already-due entry into the due store and heap.
    fn push_due(&mut self, entry: Entry<T>) {
        self.due
            .push(Reverse((entry.when as i64, entry.index, entry.gen)));
        let index = entry.index;
        let pos = match self.due_free.pop() {
            Some(pos) => {
                self.due_store[pos as usize] = Some(entry);
                pos
            }
            None => {
                // Never more due entries than slab entries, whose count fits.
                let pos = self.due_store.len() as u32;
                self.due_store.push(Some(entry));
                pos
            }
        };
        self.nodes[index as usize] = Node { list: DUE, pos };
    }

    /// Appends an entry to the list for its internal deadline
    /// `when >= elapsed` (`when == elapsed` lands in the current level-0
    /// slot, which the next pop serves first) and records its location: a
    /// write to the slab, never a read.
    #[inline]
    fn link(&mut self, entry: Entry<T>) {
        let list = list_for(self.elapsed, entry.when);
        let slot = &mut self.lists[list];
        // A slot never holds more entries than the slab, whose size fits u32.
        self.nodes[entry.index as usize] = Node {
            list: list as u32,
            pos: slot.len() as u32,
        };
        slot.push(entry);
        if list < OVERFLOW {
            self.occupied[list / SLOTS][(list % SLOTS) / 64] |= 1 << (list % 64);
        }
    }

    /// Returns an unlinked entry's slab index to the free stack with its
    /// next generation; an index whose generation is exhausted is never
    /// reused. The slab itself is not touched: the index's stale location
    /// fails the liveness check by itself.
    #[inline]
    fn release(&mut self, id: TimerId) {
        if let Some(gen) = id.gen.checked_add(1) {
            self.free.push((id.index, gen));
        }
        self.len -= 1;
    }

    /// The first occupied list and the internal time at which the wheel must
    /// look at it (slot start, or the next top-level rotation for the
    /// overflow). The lowest non-empty level always holds the earliest slot:
    /// a level-`l` slot ahead of the current one starts after the whole
    /// current rotation of level `l - 1`.
    #[inline]
    fn next_expiration(&self) -> Option<(usize, u64)> {
        for level in 0..LEVELS {
            if let Some(slot) = first_slot(&self.occupied[level]) {
                let shift = level as u32 * LEVEL_BITS;
                debug_assert!(
                    slot as u64 >= (self.elapsed >> shift) & (SLOTS as u64 - 1),
                    "slot behind the wheel"
                );
                let rotation = (1u64 << (shift + LEVEL_BITS)) - 1;
                let time = (self.elapsed & !rotation) + ((slot as u64) << shift);
                return Some((level * SLOTS + slot, time.max(self.elapsed)));
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

    /// Pops the top of the due heap if it is live and due by `now`.
    /// `Err(())` when the heap is empty, `Ok(None)` when its top is not due
    /// yet (only when the caller's clock is behind the wheel's).
    fn pop_due(&mut self, now: Option<Msec>) -> Result<Option<(TimerId, T)>, ()> {
        while let Some(&Reverse((key, index, gen))) = self.due.peek() {
            let id = TimerId { index, gen };
            let pos = match self.nodes.get(index as usize) {
                Some(node) if node.list == DUE => node.pos as usize,
                _ => {
                    self.due.pop();
                    continue;
                }
            };
            let Some(stored) = self.due_store.get_mut(pos) else {
                self.due.pop();
                continue;
            };
            if !stored.as_ref().is_some_and(|e| e.is(id)) {
                self.due.pop();
                continue;
            }
            if let Some(now) = now {
                if msec_before(now, self.origin.wrapping_add(key as u64)) {
                    return Ok(None);
                }
            }
            self.due.pop();
            let Some(entry) = stored.take() else {
                continue;
            };
            self.due_free.push(pos as u32);
            self.release(id);
            return Ok(Some((id, entry.value)));
        }
        Err(())
    }

    /// The expiry engine behind [`pop_expired`](Self::pop_expired) (`now`
    /// given) and [`drain`](Self::drain) (`None`: no time limit).
    fn pop_next(&mut self, now: Option<Msec>) -> Option<(TimerId, T)> {
        if !self.due.is_empty() {
            // Already-due entries first: their deadlines are at or before
            // `elapsed`, everything in the slots is at or after it.
            if let Ok(popped) = self.pop_due(now) {
                return popped;
            }
        } else if let Some(popped) = self.pop_current() {
            // The common case in an expiry loop: more timers of the
            // millisecond the wheel stands at.
            return Some(popped);
        }
        let limit = now.map(|now| {
            let ahead = msec_diff(now, self.now_abs());
            if ahead > 0 {
                self.elapsed.saturating_add(ahead as u64)
            } else {
                self.elapsed
            }
        });
        loop {
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
                return self.pop_current();
            }
            self.cascade(list, time, limit);
        }
    }

    /// Pops an entry of the current level-0 slot, which holds exactly the
    /// entries due at `elapsed` (nothing but the due heap comes earlier).
    #[inline]
    fn pop_current(&mut self) -> Option<(TimerId, T)> {
        let list = (self.elapsed as usize) & (SLOTS - 1);
        let slot = &mut self.lists[list];
        let entry = slot.pop()?;
        if slot.is_empty() {
            self.occupied[0][list / 64] &= !(1 << (list % 64));
        }
        let id = entry.id();
        self.release(id);
        Some((id, entry.value))
    }

    /// Re-sorts the entries of a higher-level slot (or the overflow) now that
    /// the wheel has reached it; each lands in a lower level or (overflow
    /// only) back in the overflow. One sequential pass over the slot vector;
    /// the only random accesses are the location writes in `link`.
    fn cascade(&mut self, list: usize, start: u64, limit: Option<u64>) {
        let mut entries = std::mem::take(&mut self.lists[list]);
        if list < OVERFLOW {
            self.occupied[list / SLOTS][(list % SLOTS) / 64] &= !(1 << (list % 64));
            debug_assert!(entries.iter().all(|e| e.when >= start));
        } else {
            // The wheel is empty here. Jump straight to the rotation holding
            // the earliest overflow entry (bounded by the caller's `now`), so
            // a far-future timer costs one cascade, not one per rotation.
            let earliest = entries.iter().map(|e| e.when).min().unwrap_or(0);
            let mut target = earliest & !(WHEEL_RANGE_MS - 1);
            if let Some(limit) = limit {
                target = target.min(limit & !(WHEEL_RANGE_MS - 1));
            }
            self.elapsed = self.elapsed.max(target);
        }
        if list < OVERFLOW {
            // The slab is not written: `forward` remembers where each entry
            // went (a sequential append), and `locate` follows it. The loop
            // reads one slot vector and appends to others, all sequential.
            let forward = &mut self.forward[list];
            forward.clear();
            forward.reserve(entries.len());
            for entry in entries.drain(..) {
                let to = list_for(self.elapsed, entry.when);
                let slot = &mut self.lists[to];
                // A slot never holds more entries than the slab (fits u32).
                forward.push(Node {
                    list: to as u32,
                    pos: slot.len() as u32,
                });
                slot.push(entry);
                if to < OVERFLOW {
                    self.occupied[to / SLOTS][(to % SLOTS) / 64] |= 1 << (to % 64);
                }
            }
        } else {
            // An entry can go through the overflow more than once, so the
            // (rare) overflow cascade writes the slab directly.
            for entry in entries.drain(..) {
                self.link(entry);
            }
        }
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
        self.wheel.due_store.clear();
        self.wheel.due_free.clear();
        self.wheel.elapsed = self.saved_elapsed;
    }
}

#[cfg(test)]
mod tests;
