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
    let node = w.nodes[a.index as usize];
    w.lists[node.list as usize][node.pos as usize].gen = u32::MAX;
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

/// Cascades do not write the slab; ids must still reach their timers
/// through the forwarding tables (two hops here: level 2 -> 1 -> 0),
/// `swap_remove` fix-ups must override the chain, and stale ids must
/// match nothing on the way.
#[test]
fn ids_follow_cascades() {
    let mut w = TimerWheel::new(0);
    // Level 2 (>= 2^16 ms), then level 1, then level 0 after cascades.
    let far: Vec<(TimerId, u64)> = (0..300u64)
        .map(|i| {
            let d = 70_000 + i * 7;
            (w.insert(d, d), d)
        })
        .collect();
    assert_eq!(w.pop_expired(69_999), None);
    // More timers arrive meanwhile, a level-2 rotation later.
    let refill: Vec<TimerId> = (0..300u64)
        .map(|i| w.insert(70_000 + (1 << 16) + i, 0))
        .collect();
    let fired = w.pop_expired(70_000).expect("first far timer");
    assert_eq!(fired.1, 70_000);
    assert_eq!(w.get(fired.0), None);
    assert_eq!(w.remove(fired.0), None);
    for &(id, d) in &far[1..] {
        assert_eq!(w.deadline(id), Some(d));
        assert_eq!(w.get(id), Some(&d));
    }
    // Remove every other one (swap_remove fixes up moved entries), then
    // the rest must still fire in order and stay reachable until then.
    for &(id, d) in far[1..].iter().step_by(2) {
        assert_eq!(w.remove(id), Some(d));
        assert_eq!(w.remove(id), None);
    }
    for &(id, d) in far[2..].iter().step_by(2) {
        *w.get_mut(id).expect("live") += 1;
        assert_eq!(w.deadline(id), Some(d));
    }
    let got: Vec<u64> = pop_all(&mut w, 80_000)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    let want: Vec<u64> = far[2..].iter().step_by(2).map(|&(_, d)| d + 1).collect();
    assert_eq!(got, want);
    for &(id, _) in &far {
        assert_eq!(w.get(id), None);
    }
    assert_eq!(w.len(), refill.len());
    for id in refill {
        assert_eq!(w.remove(id), Some(0));
    }
    assert!(w.is_empty());
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
