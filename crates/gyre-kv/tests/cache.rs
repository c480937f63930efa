//! The cache features on the sans-I/O server with a simulated clock: WATCH
//! against active and lazy expiry, output-buffer limits (hard, soft with
//! the cron's clock), the MULTI queue bound, protected mode's decision,
//! and pub/sub state released on disconnect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use gyre_kv::output::ObufLimit;
use gyre_kv::{Config, Reply, Server};

fn no_wall_clock() -> Config {
    Config {
        expire_use_wall_clock: false,
        ..Config::default()
    }
}

fn exec_result(t: &mut T) -> Reply {
    assert_eq!(t.cmd(&["MULTI"]), ok());
    assert_eq!(t.cmd(&["GET", "k"]), st("QUEUED"));
    t.cmd(&["EXEC"])
}

#[test]
fn watch_is_broken_by_active_expiry() {
    let mut t = T::with(no_wall_clock());
    t.cmd(&["SET", "k", "v", "PX", "100"]);
    assert_eq!(t.cmd(&["WATCH", "k"]), ok());
    t.advance(200);
    for _ in 0..50 {
        let now = t.now;
        t.s.cron(now);
        if t.s.db(0).unwrap().is_empty() {
            break;
        }
    }
    assert!(t.s.db(0).unwrap().is_empty(), "active expiry reclaimed k");
    assert_eq!(exec_result(&mut t), Reply::NullArray);
}

#[test]
fn watch_is_broken_by_expiry_not_yet_reclaimed() {
    let mut t = T::with(no_wall_clock());
    t.cmd(&["SET", "k", "v", "PX", "100"]);
    t.cmd(&["WATCH", "k"]);
    t.advance(200);
    assert_eq!(exec_result(&mut t), Reply::NullArray);
}

#[test]
fn a_key_already_expired_when_watched_is_no_change_when_reclaimed() {
    let mut t = T::with(no_wall_clock());
    t.cmd(&["SET", "k", "v", "PX", "100"]);
    t.advance(200);
    t.cmd(&["WATCH", "k"]);
    // The lazy expiry of GET reclaims it: logically nothing changed.
    assert_eq!(t.cmd(&["GET", "k"]), null());
    assert_eq!(exec_result(&mut t), Reply::Array(vec![null()]));
}

#[test]
fn multi_queue_is_bounded_by_the_query_buffer_limit() {
    let mut t = T::with(Config {
        client_query_buffer_limit: 4096,
        ..Config::default()
    });
    let mut input = b"MULTI\r\n".to_vec();
    for i in 0..200 {
        input.extend_from_slice(format!("SET key:{i} value-{i}\r\n").as_bytes());
    }
    let (replies, o) = t.raw(&input);
    assert!(o.close, "the client is closed");
    assert_eq!(replies[0], ok());
    assert!(replies.len() < 200, "stopped queueing at the limit");
    assert!(replies[1..].iter().all(|r| *r == st("QUEUED")));
}

fn subscriber(s: &mut Server, addr: &str, ch: &str) -> u64 {
    let id = s.connect(addr, "127.0.0.1:6379", 20, T0).unwrap();
    let mut out = Vec::new();
    s.feed(id, format!("SUBSCRIBE {ch}\r\n").as_bytes(), T0, &mut out);
    assert!(out.starts_with(b"*3\r\n$9\r\nsubscribe\r\n"));
    id
}

#[test]
fn a_subscriber_that_does_not_read_is_cut_at_its_hard_limit() {
    let mut cfg = Config::default();
    cfg.client_output_buffer_limit[2] = ObufLimit {
        hard: 64 * 1024,
        soft: 0,
        soft_secs: 0,
    };
    let mut t = T::with(cfg);
    let slow = subscriber(&mut t.s, "127.0.0.1:1001", "ch");
    let fast = subscriber(&mut t.s, "127.0.0.1:1002", "ch");
    let msg = "x".repeat(1000);
    let mut delivered = 0usize;
    for _ in 0..200 {
        assert!(matches!(t.cmd(&["PUBLISH", "ch", &msg]), Reply::Int(1 | 2)));
        // The fast subscriber's socket takes everything.
        let n = t.s.pending_output(fast).len();
        delivered += n;
        t.s.output_sent(fast, n);
    }
    assert!(
        delivered >= 200 * 1000,
        "the other subscriber got every message"
    );
    let closing = t.s.take_clients_to_close();
    assert_eq!(closing, vec![slow]);
    assert!(
        t.s.pending_output(slow).is_empty(),
        "the slow client's buffer is released at once"
    );
    // Nothing more piles up for it while it waits to be closed.
    t.cmd(&["PUBLISH", "ch", &msg]);
    assert!(t.s.pending_output(slow).is_empty());
    t.s.disconnect(slow);
    assert_eq!(
        t.cmd(&["PUBSUB", "NUMSUB", "ch"]),
        Reply::Array(vec![bulk("ch"), int(1)])
    );
}

#[test]
fn the_soft_limit_closes_after_its_seconds_from_the_cron() {
    let mut cfg = Config::default();
    cfg.client_output_buffer_limit[2] = ObufLimit {
        hard: 0,
        soft: 10 * 1024,
        soft_secs: 2,
    };
    let mut t = T::with(cfg);
    let slow = subscriber(&mut t.s, "127.0.0.1:1001", "ch");
    let msg = "y".repeat(20 * 1024);
    t.cmd(&["PUBLISH", "ch", &msg]);
    assert!(
        t.s.take_clients_to_close().is_empty(),
        "over soft, not yet long"
    );
    t.advance(1500);
    let now = t.now;
    assert!(t.s.cron(now).close.is_empty());
    t.advance(2000);
    let now = t.now;
    assert_eq!(t.s.cron(now).close, vec![slow]);
}

#[test]
fn reading_again_below_the_soft_limit_resets_its_clock() {
    let mut cfg = Config::default();
    cfg.client_output_buffer_limit[2] = ObufLimit {
        hard: 0,
        soft: 10 * 1024,
        soft_secs: 2,
    };
    let mut t = T::with(cfg);
    let slow = subscriber(&mut t.s, "127.0.0.1:1001", "ch");
    t.cmd(&["PUBLISH", "ch", &"y".repeat(20 * 1024)]);
    t.advance(1500);
    let n = t.s.pending_output(slow).len();
    t.s.output_sent(slow, n);
    t.advance(5000);
    let now = t.now;
    assert!(t.s.cron(now).close.is_empty());
}

#[test]
fn protected_mode_refuses_non_loopback_without_a_password() {
    let mut s = Server::new(
        Config {
            protected_mode: true,
            ..Config::default()
        },
        T0,
    );
    let denied = s
        .connect("10.0.0.7:5000", "0.0.0.0:6379", 1, T0)
        .unwrap_err();
    assert!(denied.starts_with(b"-DENIED Redis is running in protected mode"));
    assert!(denied.ends_with(b"from the outside.\r\n"));
    assert!(s.connect("127.0.0.2:5000", "127.0.0.1:6379", 2, T0).is_ok());
    assert!(s.connect("[::1]:5000", "[::1]:6379", 3, T0).is_ok());
    let mut s = Server::new(
        Config {
            protected_mode: true,
            requirepass: Some(b"pw".to_vec()),
            ..Config::default()
        },
        T0,
    );
    assert!(s.connect("10.0.0.7:5000", "0.0.0.0:6379", 1, T0).is_ok());
}

#[test]
fn a_password_set_at_run_time_applies_to_new_clients() {
    let mut t = T::new();
    assert_eq!(t.cmd(&["CONFIG", "SET", "requirepass", "pw"]), ok());
    assert_eq!(t.cmd(&["GET", "a"]), null(), "already authenticated");
    let other =
        t.s.connect("127.0.0.1:2000", "127.0.0.1:6379", 5, T0)
            .unwrap();
    let mut out = Vec::new();
    t.s.feed(other, b"GET a\r\nAUTH pw\r\nGET a\r\n", T0, &mut out);
    assert_eq!(
        decode_all(&out),
        vec![err("NOAUTH Authentication required."), ok(), null()]
    );
}

#[test]
fn disconnect_releases_subscriptions_and_watches() {
    let mut t = T::new();
    let c = subscriber(&mut t.s, "127.0.0.1:1001", "a");
    let mut out = Vec::new();
    t.s.feed(c, b"PSUBSCRIBE p*\r\n", T0, &mut out);
    let w =
        t.s.connect("127.0.0.1:1003", "127.0.0.1:6379", 7, T0)
            .unwrap();
    t.s.feed(w, b"WATCH k1 k2\r\n", T0, &mut out);
    assert_eq!(t.cmd(&["PUBSUB", "NUMPAT"]), int(1));
    t.s.disconnect(c);
    t.s.disconnect(w);
    assert_eq!(t.cmd(&["PUBSUB", "NUMPAT"]), int(0));
    assert_eq!(t.cmd(&["PUBSUB", "CHANNELS"]), Reply::Array(vec![]));
    assert_eq!(t.s.db(0).unwrap().watched_len(), 0);
}
