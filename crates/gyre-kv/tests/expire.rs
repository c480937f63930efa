//! Lazy and active expiry with a simulated clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use common::*;
use gyre_kv::server::{CycleKind, ExpireBudget, EXPIRE_SAMPLES_PER_US, EXPIRE_SLOW_TIME_PERC};
use gyre_kv::{Config, Server};

#[test]
fn lazy_expiry_on_access() {
    let mut t = T::new();
    assert_eq!(t.cmd(&["SET", "k", "v", "PX", "1500"]), ok());
    assert_eq!(t.cmd(&["PTTL", "k"]), int(1500));
    assert_eq!(t.cmd(&["TTL", "k"]), int(2)); // (1500 + 500) / 1000
    t.advance(1500);
    // Still alive at exactly the expire time (Redis: expired when now > when).
    assert_eq!(t.cmd(&["GET", "k"]), bulk("v"));
    t.advance(1);
    assert_eq!(t.cmd(&["DBSIZE"]), int(1), "not reclaimed until touched");
    assert_eq!(t.cmd(&["GET", "k"]), null());
    assert_eq!(t.cmd(&["DBSIZE"]), int(0));
    let info = info_text(&mut t, "stats");
    assert!(info.contains("expired_keys:1\r\n"), "{info}");
    assert!(info.contains("keyspace_misses:1\r\n"));
    assert!(
        info.contains("keyspace_hits:3\r\n"),
        "PTTL, TTL and GET are reads"
    );
}

#[test]
fn expired_keys_are_invisible_everywhere() {
    let mut t = T::new();
    for k in ["a", "b", "c"] {
        t.cmd(&["SET", k, "1", "PX", "10"]);
    }
    t.cmd(&["SET", "keep", "1"]);
    t.advance(11);
    assert_eq!(t.cmd(&["KEYS", "*"]), arr(vec![bulk("keep")]));
    assert_eq!(t.cmd(&["EXISTS", "a", "b", "keep"]), int(1));
    assert_eq!(t.cmd(&["RANDOMKEY"]), bulk("keep"));
    assert_eq!(t.cmd(&["TTL", "c"]), int(-2));
    assert_eq!(
        t.cmd(&["INCR", "c"]),
        int(1),
        "an expired key counts as missing"
    );
    assert_eq!(t.cmd(&["TTL", "c"]), int(-1));
}

fn info_text(t: &mut T, section: &str) -> String {
    match t.cmd(&["INFO", section]) {
        gyre_kv::Reply::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    }
}

fn fill(s: &mut Server, n: usize, now: i64, ttl_ms: i64) {
    let db = s.db_mut(0).unwrap();
    for i in 0..n {
        let k = format!("key:{i}");
        db.set(k.as_bytes(), b"v".to_vec(), false);
        db.set_expire(k.as_bytes(), now + ttl_ms);
    }
}

/// 1e6 keys with a 1 s TTL, cron at hz 10 on a simulated clock, work per
/// call bounded by the slow cycle's sample budget (deterministic: no
/// wall-clock limit). The keyspace must be empty well within 3 simulated
/// seconds, and no call may exceed its budget.
#[test]
fn active_expire_reclaims_a_million_keys() {
    let config = Config {
        expire_use_wall_clock: false,
        ..Config::default()
    };
    let mut s = Server::new(config, T0);
    fill(&mut s, 1_000_000, T0, 1000);
    assert_eq!(s.db(0).unwrap().len(), 1_000_000);
    let budget = EXPIRE_SLOW_TIME_PERC * 1_000_000 / 10 / 100 * EXPIRE_SAMPLES_PER_US;
    let mut now = T0;
    let mut calls = 0;
    let mut max_call_us = 0;
    let mut total_us = 0;
    let mut total_expired = 0;
    let mut empty_at = None;
    while now <= T0 + 3000 {
        let o = s.cron(now);
        assert_eq!(o.next_in_ms, 100);
        assert!(
            o.expire.sampled <= budget + 20,
            "each call is bounded: {} > {budget}",
            o.expire.sampled
        );
        if o.expire.expired > 0 {
            calls += 1;
            max_call_us = max_call_us.max(o.expire.elapsed_us);
            total_us += o.expire.elapsed_us;
            total_expired += o.expire.expired;
        }
        if empty_at.is_none() && s.db(0).unwrap().is_empty() {
            empty_at = Some(now - T0);
        }
        now += o.next_in_ms as i64;
    }
    let empty_at = empty_at.expect("keyspace empty within 3 s");
    println!("1e6 keys, 1 s TTL: empty at simulated {empty_at} ms after {calls} reclaiming cron calls (<= {budget} samples each); slowest call {max_call_us} us, {:.0} ns per reclaimed key (this build)", total_us as f64 * 1000.0 / total_expired.max(1) as f64);
    assert!(empty_at <= 2500, "empty at {empty_at} ms");
    assert!(s.db(0).unwrap().check_invariants());
    let expired: u64 = s.db(0).unwrap().stats.expired_keys;
    assert_eq!(expired, 1_000_000);
}

/// Same with Redis's real wall-clock budget (25 ms per slow cycle plus fast
/// cycles from before_sleep): each call stays near its budget and the keys
/// go away. Timing is printed, not asserted (debug builds are slow).
#[test]
fn active_expire_wall_clock_budget_is_respected() {
    let mut s = Server::new(Config::default(), T0);
    fill(&mut s, 200_000, T0, 1000);
    let mut now = T0 + 1001;
    let mut worst = 0u128;
    for _ in 0..400 {
        let t = Instant::now();
        let o = s.cron(now);
        s.before_sleep(now);
        worst = worst.max(t.elapsed().as_micros());
        assert!(
            o.expire.elapsed_us < 250_000,
            "a slow cycle took {} us",
            o.expire.elapsed_us
        );
        if s.db(0).unwrap().is_empty() {
            break;
        }
        now += 100;
    }
    println!("wall-clock budget: worst cron+before_sleep {worst} us");
    assert!(s.db(0).unwrap().is_empty());
}

#[test]
fn expire_cycle_leaves_live_keys_and_samples_o1() {
    let mut s = Server::new(Config::default(), T0);
    fill(&mut s, 1000, T0, 1000);
    fill_live(&mut s);
    let st = s.active_expire_cycle(
        T0 + 2000,
        CycleKind::Slow,
        ExpireBudget {
            time_limit: None,
            max_samples: 100,
        },
    );
    assert!(st.sampled <= 120);
    assert!(st.budget_exhausted);
    let db = s.db(0).unwrap();
    assert!(db.check_invariants());
    assert!(db.len() >= 10);
}

fn fill_live(s: &mut Server) {
    let db = s.db_mut(0).unwrap();
    for i in 0..10 {
        db.set(format!("live:{i}").as_bytes(), b"v".to_vec(), false);
        db.set_expire(format!("live:{i}").as_bytes(), T0 + 1_000_000);
    }
}

#[test]
fn avg_ttl_is_estimated_by_the_cycle() {
    let mut s = Server::new(Config::default(), T0);
    fill(&mut s, 100, T0, 100_000);
    s.cron(T0);
    let avg = s.db(0).unwrap().avg_ttl;
    assert!((99_000..=100_000).contains(&avg), "{avg}");
}

/// The glue's latency-flat schedule on a simulated clock: cron every
/// 100 ms runs one slice; on a backlog, a slice every
/// `1 + EXPIRE_SLICE_GAP_MS` ms until the backlog is gone. 1e6 keys with a
/// 1 s TTL are gone within 3 s of the TTL, every call stays within one
/// slice's budget, before_sleep does nothing, and the slicer stops once
/// the keyspace is clean.
#[test]
fn sliced_expiry_reclaims_a_million_keys_in_short_slices() {
    use gyre_kv::server::{EXPIRE_SLICE_GAP_MS, EXPIRE_SLICE_US};
    let config = Config {
        expire_use_wall_clock: false,
        expire_slices: true,
        ..Config::default()
    };
    let mut s = Server::new(config, T0);
    fill(&mut s, 1_000_000, T0, 1000);
    fill_live(&mut s);
    let budget = EXPIRE_SLICE_US * EXPIRE_SAMPLES_PER_US;
    let period = 1 + EXPIRE_SLICE_GAP_MS as i64;
    let (mut now, mut next_cron, mut next_slice) = (T0, T0, None::<i64>);
    let (mut slices, mut empty_at, mut stopped_at) = (0, None, None);
    while now <= T0 + 6000 {
        let st = match next_slice {
            Some(t) if t < next_cron => {
                now = t;
                slices += 1;
                let st = s.expire_slice(now);
                next_slice = s.expire_backlog().then_some(now + period);
                if next_slice.is_none() && empty_at.is_some() && stopped_at.is_none() {
                    stopped_at = Some(now - T0);
                }
                st
            }
            _ => {
                now = next_cron;
                let o = s.cron(now);
                assert_eq!(o.expire_backlog, s.expire_backlog());
                next_cron = now + o.next_in_ms as i64;
                if o.expire_backlog && next_slice.is_none() {
                    next_slice = Some(now + period);
                }
                o.expire
            }
        };
        assert!(st.sampled <= budget + 20, "{} > {budget}", st.sampled);
        assert!(!s.before_sleep(now).ran, "no fast cycles in sliced mode");
        if empty_at.is_none() && s.db(0).unwrap().len() == 10 {
            empty_at = Some(now - T0);
        }
    }
    let empty_at = empty_at.expect("expired keys reclaimed");
    println!("sliced: 1e6 keys empty at simulated {empty_at} ms after {slices} slices; slicer stopped at {stopped_at:?} ms");
    assert!(empty_at <= 1000 + 3000, "empty at {empty_at} ms");
    assert!(
        stopped_at.is_some(),
        "the slicer stops when the backlog is gone"
    );
    assert!(!s.expire_backlog());
    let db = s.db(0).unwrap();
    assert!(db.check_invariants());
    assert_eq!(db.stats.expired_keys, 1_000_000);
}

#[test]
fn redis_schedule_is_the_default() {
    let config = Config {
        expire_use_wall_clock: false,
        ..Config::default()
    };
    let mut s = Server::new(config, T0);
    fill(&mut s, 200_000, T0, 10);
    let o = s.cron(T0 + 100);
    assert!(o.expire.budget_exhausted && o.expire_backlog);
    assert!(s.before_sleep(T0 + 100).ran, "fast cycle on a backlog");
}
