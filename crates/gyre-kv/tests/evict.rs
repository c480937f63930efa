//! maxmemory and the eviction policies on the sans-I/O server with a
//! simulated clock: memory stays at the limit, each policy picks the keys
//! Redis's would (TTL order, recency, frequency, only volatile keys), the
//! OOM refusal (also inside MULTI), `evicted` events, OBJECT IDLETIME /
//! FREQ.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use gyre_kv::evict::{EvictConfig, Policy};
use gyre_kv::{Config, Reply};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// A server whose limit is `room` bytes above its empty footprint.
fn with_policy(policy: Policy, room: u64) -> T {
    let probe = T::new();
    let base = probe.s.used_memory_for_eviction();
    T::with(Config {
        maxmemory: base + room,
        evict: EvictConfig {
            policy,
            ..EvictConfig::default()
        },
        expire_use_wall_clock: false,
        ..Config::default()
    })
}

fn value() -> String {
    "v".repeat(200)
}

fn info_field(t: &mut T, section: &str, field: &str) -> String {
    let Reply::Bulk(b) = t.cmd(&["INFO", section]) else {
        panic!("INFO")
    };
    let text = String::from_utf8(b).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap()
        .to_string()
}

#[test]
fn noeviction_refuses_writes_but_not_reads_or_deletes() {
    let mut t = with_policy(Policy::Noeviction, 20_000);
    let v = value();
    let mut refused = None;
    for i in 0..1000 {
        match t.cmd(&["SET", &format!("k{i}"), &v]) {
            Reply::Simple(_) => {}
            Reply::Error(e) => {
                assert_eq!(String::from_utf8(e).unwrap(), OOM);
                refused = Some(i);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    let n = refused.expect("the limit is reached");
    assert!(n > 10 && n < 200, "refused after {n} keys");
    assert_eq!(t.cmd(&["GET", "k0"]), bulk(&v));
    assert_eq!(t.cmd(&["DEL", "k0"]), int(1));
    // In MULTI the write is refused and the transaction aborted.
    for i in 0..50 {
        t.cmd(&["SET", &format!("again{i}"), &v]);
    }
    assert_eq!(t.cmd(&["MULTI"]), ok());
    assert_eq!(t.cmd(&["SET", "x", "y"]), err(OOM));
    // Queueing costs memory: under OOM even a read is refused in MULTI.
    assert_eq!(t.cmd(&["GET", "k1"]), err(OOM));
    assert_eq!(
        t.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(info_field(&mut t, "stats", "evicted_keys"), "0");
    // The time spent over the limit, on the command clock.
    t.advance(2500);
    assert_eq!(t.cmd(&["SET", "late", "x"]), err(OOM));
    let cur: u64 = info_field(&mut t, "stats", "current_eviction_exceeded_time")
        .parse()
        .unwrap();
    assert!(cur >= 2500, "{cur}");
    t.s.config.maxmemory *= 4;
    assert_eq!(t.cmd(&["SET", "late", "x"]), ok());
    assert_eq!(
        info_field(&mut t, "stats", "current_eviction_exceeded_time"),
        "0"
    );
    let total: u64 = info_field(&mut t, "stats", "total_eviction_exceeded_time")
        .parse()
        .unwrap();
    assert!(total >= 2500, "{total}");
}

#[test]
fn allkeys_random_keeps_memory_at_the_limit() {
    let mut t = with_policy(Policy::AllkeysRandom, 50_000);
    let v = value();
    for i in 0..2000 {
        assert_eq!(t.cmd(&["SET", &format!("k{i}"), &v]), ok());
        let max = t.s.config.maxmemory;
        // At most one write above the limit, evicted before the next.
        assert!(t.s.used_memory_for_eviction() <= max + 1000);
    }
    let evicted: u64 = info_field(&mut t, "stats", "evicted_keys").parse().unwrap();
    let left = t.s.db(0).unwrap().len() as u64;
    assert_eq!(evicted + left, 2000);
    assert!(left > 50 && left < 400, "{left} keys kept");
    assert_eq!(
        info_field(&mut t, "memory", "maxmemory_policy"),
        "allkeys-random"
    );
}

#[test]
fn volatile_ttl_evicts_the_soonest_to_expire_and_never_persistent_keys() {
    let mut t = with_policy(Policy::VolatileTtl, 60_000);
    let v = value();
    for i in 0..50 {
        t.cmd(&["SET", &format!("keep{i}"), &v]);
    }
    // TTLs increasing with i: the smaller i, the sooner it goes.
    for i in 0..400 {
        t.cmd(&[
            "SET",
            &format!("ttl{i:03}"),
            &v,
            "EX",
            &format!("{}", 1000 + i),
        ]);
    }
    for i in 0..50 {
        assert_eq!(t.cmd(&["EXISTS", &format!("keep{i}")]), int(1));
    }
    let alive: Vec<usize> = (0..400)
        .filter(|i| t.cmd(&["EXISTS", &format!("ttl{i:03}")]) == int(1))
        .collect();
    assert!(!alive.is_empty());
    // Sampled, not exact: the survivors are overwhelmingly the late ones.
    let late = alive
        .iter()
        .filter(|&&i| i >= 400 - 2 * alive.len())
        .count();
    assert!(late * 10 >= alive.len() * 8, "{alive:?}");
    // Only persistent keys left to write over: no volatile key to evict.
    for i in 0..400 {
        t.cmd(&["PERSIST", &format!("ttl{i:03}")]);
    }
    let mut oom = false;
    for i in 0..400 {
        if t.cmd(&["SET", &format!("more{i}"), &v]) == err(OOM) {
            oom = true;
            break;
        }
    }
    assert!(oom, "volatile policies never evict persistent keys");
}

#[test]
fn allkeys_lru_keeps_the_recently_used_keys() {
    let mut t = with_policy(Policy::AllkeysLru, 60_000);
    let v = value();
    for i in 0..100 {
        t.cmd(&["SET", &format!("hot{i}"), &v]);
    }
    for round in 0..30 {
        t.advance(2000);
        for i in 0..100 {
            t.cmd(&["GET", &format!("hot{i}")]);
        }
        for j in 0..20 {
            t.cmd(&["SET", &format!("cold{round}-{j}"), &v]);
        }
    }
    let hot = (0..100)
        .filter(|i| t.cmd(&["EXISTS", &format!("hot{i}")]) == int(1))
        .count();
    assert!(hot >= 85, "only {hot} of 100 hot keys survived");
    assert!(t.s.stats.evicted_keys > 300);
    // OBJECT IDLETIME: seconds since the last access, not touched by asking.
    t.advance(7000);
    assert_eq!(t.cmd(&["OBJECT", "IDLETIME", "hot1"]), int(7));
    assert_eq!(t.cmd(&["OBJECT", "IDLETIME", "hot1"]), int(7));
    assert_eq!(t.cmd(&["OBJECT", "IDLETIME", "nokey"]), null());
    assert!(matches!(
        t.cmd(&["OBJECT", "FREQ", "hot1"]),
        Reply::Error(_)
    ));
}

/// Recency within a second counts: the clock ticks every 10 ms, so keys
/// used 50 ms ago rank above keys written a second ago (on a one-second
/// clock they would all tie and the pool would pick blindly).
#[test]
fn allkeys_lru_ranks_keys_within_a_second() {
    let mut t = with_policy(Policy::AllkeysLru, 60_000);
    let v = value();
    for i in 0..100 {
        t.cmd(&["SET", &format!("hot{i}"), &v]);
    }
    for round in 0..18 {
        t.advance(50);
        for i in 0..100 {
            t.cmd(&["GET", &format!("hot{i}")]);
        }
        for j in 0..20 {
            t.cmd(&["SET", &format!("cold{round}-{j}"), &v]);
        }
    }
    let hot = (0..100)
        .filter(|i| t.cmd(&["EXISTS", &format!("hot{i}")]) == int(1))
        .count();
    assert!(t.s.stats.evicted_keys > 150);
    assert!(hot >= 85, "only {hot} of 100 hot keys survived");
}

#[test]
fn allkeys_lfu_keeps_the_frequently_used_keys() {
    let mut t = with_policy(Policy::AllkeysLfu, 60_000);
    let v = value();
    for i in 0..50 {
        t.cmd(&["SET", &format!("hot{i}"), &v]);
        for _ in 0..200 {
            t.cmd(&["GET", &format!("hot{i}")]);
        }
    }
    for j in 0..1000 {
        t.cmd(&["SET", &format!("once{j}"), &v]);
    }
    let hot = (0..50)
        .filter(|i| t.cmd(&["EXISTS", &format!("hot{i}")]) == int(1))
        .count();
    assert!(hot >= 45, "only {hot} of 50 frequent keys survived");
    let Reply::Int(f) = t.cmd(&["OBJECT", "FREQ", "hot3"]) else {
        panic!("freq")
    };
    assert!(f > 5, "{f}");
    assert!(matches!(
        t.cmd(&["OBJECT", "IDLETIME", "hot3"]),
        Reply::Error(_)
    ));
}

#[test]
fn evicted_events_reach_subscribers() {
    let mut t = with_policy(Policy::AllkeysRandom, 20_000);
    assert_eq!(
        t.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]),
        ok()
    );
    let sub =
        t.s.connect("127.0.0.1:1000", "127.0.0.1:6379", 30, T0)
            .unwrap();
    let mut out = Vec::new();
    let now = t.now;
    t.s.feed(sub, b"SUBSCRIBE __keyevent@0__:evicted\r\n", now, &mut out);
    let v = value();
    for i in 0..300 {
        t.cmd(&["SET", &format!("k{i}"), &v]);
    }
    let evicted = t.s.stats.evicted_keys as usize;
    assert!(evicted > 0);
    let msgs = decode_all(t.s.pending_output(sub));
    assert_eq!(msgs.len(), evicted);
    assert!(matches!(&msgs[0], Reply::Array(a) if a[0] == bulk("message")));
}

#[test]
fn policy_settings_through_config() {
    let mut t = T::new();
    assert_eq!(
        t.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]),
        ok()
    );
    assert_eq!(
        t.cmd(&["CONFIG", "GET", "maxmemory-policy"]),
        Reply::Array(vec![bulk("maxmemory-policy"), bulk("allkeys-lfu")])
    );
    assert!(matches!(
        t.cmd(&["CONFIG", "SET", "maxmemory-policy", "lru"]),
        Reply::Error(_)
    ));
    assert_eq!(t.cmd(&["CONFIG", "SET", "maxmemory-samples", "10"]), ok());
    assert!(matches!(
        t.cmd(&["CONFIG", "SET", "maxmemory-eviction-tenacity", "101"]),
        Reply::Error(_)
    ));
    t.cmd(&["SET", "k", "v"]);
    assert_eq!(t.cmd(&["OBJECT", "FREQ", "k"]), int(5), "LFU_INIT_VAL");
}
