//! Balancer sequences computed from nginx's algorithms.
#![allow(clippy::unwrap_used)]

use super::round_robin::{Outcome, Peer, Peers, RrRequest};
use super::*;
use gyre_core::event::PeerAddr;

fn peer(port: u16, weight: i64) -> Peer {
    Peer::new(
        PeerAddr::Inet(([127, 0, 0, 1], port).into()),
        &format!("127.0.0.1:{port}"),
    )
    .with_weight(weight)
}

fn names(up: &Upstream, picks: &[Chosen]) -> String {
    picks
        .iter()
        .map(|&c| {
            let p = up.peers.peer(c).unwrap();
            (b'a'
                + (p.addr
                    .to_string()
                    .rsplit(':')
                    .next()
                    .unwrap()
                    .parse::<u8>()
                    .unwrap()
                    - 1)) as char
        })
        .collect()
}

/// One request per pick: get, then free as `ok`.
fn run(up: &mut Upstream, n: usize, now: i64) -> Vec<Chosen> {
    let mut out = Vec::new();
    for _ in 0..n {
        let mut r = up.start(b"", None);
        let c = r.get(up, now, &mut || 0).unwrap();
        r.free(up, Outcome::Ok, now);
        out.push(c);
    }
    out
}

fn seq(up: &mut Upstream, n: usize, now: i64) -> String {
    let picks = run(up, n, now);
    names(up, &picks)
}

#[test]
fn smooth_weighted_round_robin_5_1_1() {
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 5), peer(2, 1), peer(3, 1)], vec![]),
        Method::RoundRobin,
    );
    let picks = run(&mut up, 14, 0);
    assert_eq!(names(&up, &picks), "aabacaaaabacaa");
}

#[test]
fn round_robin_equal_and_uneven_weights() {
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 1), peer(3, 1)], vec![]),
        Method::RoundRobin,
    );
    assert_eq!(seq(&mut up, 6, 0), "abcabc");
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 3), peer(2, 2)], vec![]),
        Method::RoundRobin,
    );
    // cw a:3 b:2 -> a (a-2=-2... ) computed by hand from nginx's rule.
    assert_eq!(seq(&mut up, 5, 0), "ababa");
}

#[test]
fn down_peers_are_skipped_and_backup_used_only_when_primaries_fail() {
    let mut d = peer(2, 1);
    d.down = true;
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 1), d], vec![peer(3, 1)]),
        Method::RoundRobin,
    );
    assert_eq!(up.peers.tries(), 2, "down peers do not count as tries");
    assert_eq!(seq(&mut up, 4, 0), "aaaa", "backup unused");
    // The primary fails: the same request goes on to the backup.
    let mut r = up.start(b"", None);
    let c = r.get(&mut up, 0, &mut || 0).unwrap();
    assert_eq!(names(&up, &[c]), "a");
    let f = r.free(&mut up, Outcome::Failed, 0);
    assert!(f.disabled, "max_fails=1 reached: temporarily disabled");
    let c = r.get(&mut up, 0, &mut || 0).unwrap();
    assert_eq!(names(&up, &[c]), "c");
    assert!(c.backup);
    r.free(&mut up, Outcome::Ok, 0);
    // Within fail_timeout new requests go to the backup directly.
    assert_eq!(seq(&mut up, 2, 5), "cc");
    // After fail_timeout (10 s) the primary is probed again, and a success
    // clears its failures.
    assert_eq!(seq(&mut up, 1, 11), "a");
    assert_eq!(up.peers.primary.peers[0].fails, 0);
    assert_eq!(seq(&mut up, 1, 11), "a");
}

#[test]
fn max_fails_and_fail_timeout() {
    let mut a = peer(1, 1);
    a.max_fails = 2;
    a.fail_timeout = 30;
    let mut up = Upstream::new(
        Peers::new("u", vec![a, peer(2, 1)], vec![]),
        Method::RoundRobin,
    );
    // Two failures of a (each request then succeeds on b).
    for (t, warn) in [(100, false), (101, true)] {
        let mut r = up.start(b"", None);
        let mut c = r.get(&mut up, t, &mut || 0).unwrap();
        if names(&up, &[c]) == "b" {
            r.free(&mut up, Outcome::Ok, t);
            r = up.start(b"", None);
            c = r.get(&mut up, t, &mut || 0).unwrap();
        }
        assert_eq!(names(&up, &[c]), "a");
        assert_eq!(r.free(&mut up, Outcome::Failed, t).disabled, warn);
        let c = r.get(&mut up, t, &mut || 0).unwrap();
        assert_eq!(names(&up, &[c]), "b", "the next try of the same request");
        r.free(&mut up, Outcome::Ok, t);
    }
    // Disabled for fail_timeout after the last failure (checked = 101).
    assert_eq!(seq(&mut up, 3, 131), "bbb");
    // At 132 a is eligible again; b has gathered weight meanwhile, so the
    // smooth order gives b (a 0, b 2) then a, whose failure disables it at
    // once (fails is still 2).
    assert_eq!(seq(&mut up, 1, 132), "b");
    let mut r = up.start(b"", None);
    let c = r.get(&mut up, 132, &mut || 0).unwrap();
    assert_eq!(names(&up, &[c]), "a");
    assert!(r.free(&mut up, Outcome::Failed, 132).disabled);
    assert_eq!(seq(&mut up, 2, 140), "bb");
}

#[test]
fn all_failed_is_busy_and_single_peer_never_disabled() {
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 1)], vec![]),
        Method::RoundRobin,
    );
    let mut r = up.start(b"", None);
    for _ in 0..2 {
        r.get(&mut up, 0, &mut || 0).unwrap();
        r.free(&mut up, Outcome::Failed, 0);
    }
    assert!(r.get(&mut up, 0, &mut || 0).is_none(), "no live upstreams");
    assert_eq!(r.tries(), 0);
    // One server: failures never take it out (nginx's peers->single).
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 1)], vec![]),
        Method::RoundRobin,
    );
    for _ in 0..5 {
        let mut r = up.start(b"", None);
        r.get(&mut up, 0, &mut || 0).unwrap();
        assert!(!r.free(&mut up, Outcome::Failed, 0).disabled);
    }
    assert!(up.start(b"", None).get(&mut up, 0, &mut || 0).is_some());
}

#[test]
fn max_conns_limits_concurrent_requests() {
    let mut a = peer(1, 5);
    a.max_conns = 1;
    let mut up = Upstream::new(
        Peers::new("u", vec![a, peer(2, 1)], vec![]),
        Method::RoundRobin,
    );
    let mut r1 = up.start(b"", None);
    let c1 = r1.get(&mut up, 0, &mut || 0).unwrap();
    assert_eq!(names(&up, &[c1]), "a");
    // a is busy: the next ones go to b while r1 holds a.
    let mut r2 = up.start(b"", None);
    let c2 = r2.get(&mut up, 0, &mut || 0).unwrap();
    assert_eq!(names(&up, &[c2]), "b");
    r1.free(&mut up, Outcome::Ok, 0);
    r2.free(&mut up, Outcome::Ok, 0);
    assert_eq!(up.peers.primary.peers[0].conns, 0);
}

#[test]
fn least_conn_prefers_the_least_loaded_then_round_robin() {
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 1), peer(3, 1)], vec![]),
        Method::LeastConn,
    );
    // All idle: smooth round robin among equals.
    assert_eq!(seq(&mut up, 3, 0), "abc");
    // Hold one on a and one on b: c has the fewest.
    let mut ra = up.start(b"", None);
    let a = ra.get(&mut up, 0, &mut || 0).unwrap();
    let mut rb = up.start(b"", None);
    let b = rb.get(&mut up, 0, &mut || 0).unwrap();
    let mut rc = up.start(b"", None);
    let c = rc.get(&mut up, 0, &mut || 0).unwrap();
    assert_eq!(names(&up, &[a, b, c]), "abc");
    ra.free(&mut up, Outcome::Ok, 0);
    // a is now idle, b and c busy.
    assert_eq!(seq(&mut up, 2, 0), "aa");
    // Weights: conns / weight.
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 3), peer(2, 1)], vec![]),
        Method::LeastConn,
    );
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut r = up.start(b"", None);
        let c = r.get(&mut up, 0, &mut || 0).unwrap();
        held.push((r, c));
    }
    let seq: Vec<Chosen> = held.iter().map(|&(_, c)| c).collect();
    // By hand from nginx: a (tie, smooth), b (0/1 < 1/3), a, a.
    assert_eq!(names(&up, &seq), "abaa", "a takes 3 of 4 with weight 3");
}

#[test]
fn ip_hash_uses_three_octets_and_is_sticky() {
    let up0 = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 1), peer(3, 1)], vec![]),
        Method::IpHash,
    );
    // nginx's hash by hand for 192.168.1.x: 89 -> ... % 6271 % 3.
    let mut h: u32 = 89;
    for b in [192u32, 168, 1] {
        h = (h * 113 + b) % 6271;
    }
    let expect = (h % 3) as usize;
    let mut up = up0.clone();
    for last in [1u8, 77, 254] {
        let mut r = up.start(b"", Some(std::net::IpAddr::from([192, 168, 1, last])));
        let c = r.get(&mut up, 0, &mut || 0).unwrap();
        assert_eq!(c.index, expect, "same /24, same peer");
        r.free(&mut up, Outcome::Ok, 0);
    }
    // A failed peer: the hash continues to the next candidate.
    let mut r = up.start(b"", Some(std::net::IpAddr::from([192, 168, 1, 1])));
    let c = r.get(&mut up, 0, &mut || 0).unwrap();
    r.free(&mut up, Outcome::Failed, 0);
    let c2 = r.get(&mut up, 0, &mut || 0).unwrap();
    assert_ne!(c2.index, c.index);
    let mut h2 = h;
    let next = loop {
        for b in [192u32, 168, 1] {
            h2 = (h2 * 113 + b) % 6271;
        }
        if (h2 % 3) as usize != c.index {
            break (h2 % 3) as usize;
        }
    };
    assert_eq!(c2.index, next);
}

#[test]
fn hash_is_cache_memcached_compatible() {
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 2), peer(3, 1)], vec![]),
        Method::Hash {
            key: "$uri".into(),
            consistent: false,
        },
    );
    for key in [&b"/a"[..], b"/index.html", b"user42"] {
        let h = (super::crc32::crc32(key) >> 16) & 0x7fff;
        let mut w = h as i64 % 4;
        let mut p = 0;
        for (i, wt) in [1i64, 2, 1].iter().enumerate() {
            if w < *wt {
                p = i;
                break;
            }
            w -= wt;
        }
        let mut r = up.start(key, None);
        let c = r.get(&mut up, 0, &mut || 0).unwrap();
        assert_eq!(c.index, p, "key {:?}", String::from_utf8_lossy(key));
        r.free(&mut up, Outcome::Ok, 0);
    }
    // An empty key falls back to round robin.
    let mut r = up.start(b"", None);
    assert!(r.get(&mut up, 0, &mut || 0).is_some());
}

#[test]
fn ketama_points_follow_nginx() {
    let up = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 1)], vec![]),
        Method::Hash {
            key: "$uri".into(),
            consistent: true,
        },
    );
    let pts = up.points().unwrap();
    assert_eq!(pts.len(), 320);
    // The first point of 127.0.0.1:1 is crc32("127.0.0.1\0" "1" 00000000).
    let mut c = super::crc32::Crc32::new();
    c.update(b"127.0.0.1\x001\x00\x00\x00\x00");
    let first = c.finish();
    assert!(pts.values().any(|v| v == first));
    // And the second continues from the first's little-endian bytes.
    let mut c = super::crc32::Crc32::new();
    c.update(b"127.0.0.1\x001");
    c.update(&first.to_le_bytes());
    let second = c.finish();
    assert!(pts.values().any(|v| v == second));
    let v: Vec<u32> = pts.values().collect();
    assert!(v.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
}

#[test]
fn consistent_hash_moves_only_the_removed_servers_keys() {
    let three = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 1), peer(3, 1)], vec![]),
        Method::Hash {
            key: "k".into(),
            consistent: true,
        },
    );
    let two = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 1)], vec![]),
        Method::Hash {
            key: "k".into(),
            consistent: true,
        },
    );
    let (p3, p2) = (three.points().unwrap(), two.points().unwrap());
    let mut moved = 0;
    for i in 0..500 {
        let key = format!("/key/{i}");
        let a = p3.server_for(key.as_bytes()).unwrap();
        let b = p2.server_for(key.as_bytes()).unwrap();
        if a != "127.0.0.1:3" {
            assert_eq!(a, b, "{key} moved though its server stayed");
        } else {
            moved += 1;
        }
    }
    assert!(moved > 0);
    // A down server's keys go to the next point's server.
    let mut up = three.clone();
    up.peers.primary.peers[2].down = true;
    for i in 0..100 {
        let key = format!("/key/{i}");
        let mut r = up.start(key.as_bytes(), None);
        let c = r.get(&mut up, 0, &mut || 0).unwrap();
        assert_ne!(c.index, 2);
        r.free(&mut up, Outcome::Ok, 0);
    }
}

#[test]
fn random_follows_the_ranges_and_two_picks_the_less_loaded() {
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 3)], vec![]),
        Method::Random { two: false },
    );
    // Ranges 1, 4: x % 4 == 0 -> a, 1..3 -> b.
    let mut seq = [0u32, 1, 2, 3, 4, 5].into_iter();
    let mut picks = Vec::new();
    for _ in 0..6 {
        let mut r = up.start(b"", None);
        let c = r.get(&mut up, 0, &mut || seq.next().unwrap()).unwrap();
        r.free(&mut up, Outcome::Ok, 0);
        picks.push(c);
    }
    assert_eq!(names(&up, &picks), "abbbab");

    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 1), peer(3, 1)], vec![]),
        Method::Random { two: true },
    );
    // Both idle: of the two drawn (a, then b) the second stays unless it
    // is more loaded (nginx compares the second against the first).
    let mut ra = up.start(b"", None);
    let mut d = [0u32, 1].into_iter();
    let c = ra.get(&mut up, 0, &mut || d.next().unwrap()).unwrap();
    assert_eq!(names(&up, &[c]), "b");
    // b is busy now: drawing a then b keeps a; drawing a twice draws again.
    let mut rb = up.start(b"", None);
    let mut d = [0u32, 1].into_iter();
    let c = rb.get(&mut up, 0, &mut || d.next().unwrap()).unwrap();
    assert_eq!(names(&up, &[c]), "a");
    let mut rc = up.start(b"", None);
    let mut d = [1u32, 1, 2].into_iter();
    let c = rc.get(&mut up, 0, &mut || d.next().unwrap()).unwrap();
    assert_eq!(names(&up, &[c]), "c", "b twice, then c (idle) beats busy b");
}

#[test]
fn rr_request_counts_tries_like_nginx() {
    let peers = Peers::new("u", vec![peer(1, 1), peer(2, 1)], vec![peer(3, 1)]);
    let r = RrRequest::new(&peers);
    assert_eq!(r.tries, 3);
}

#[test]
fn a_failed_cached_connection_gives_one_more_try() {
    let mut up = Upstream::new(
        Peers::new("u", vec![peer(1, 1), peer(2, 1)], vec![]),
        Method::RoundRobin,
    );
    let mut r = up.start(b"", None);
    assert_eq!(r.tries(), 2);
    r.get(&mut up, 0, &mut || 0).unwrap();
    r.cached_connection_failed();
    r.free(&mut up, Outcome::Failed, 0);
    assert_eq!(r.tries(), 2, "the stale cached connection did not count");
}

#[test]
fn a_zone_makes_copies_balance_as_one() {
    let peers = Peers::new("u", vec![peer(1, 5), peer(2, 1), peer(3, 1)], vec![]);
    // Without a zone two workers each run their own sequence.
    let mut a = Upstream::new(peers.clone(), Method::RoundRobin);
    let mut b = a.clone();
    let mut s = String::new();
    for i in 0..7 {
        let up = if i % 2 == 0 { &mut a } else { &mut b };
        s += &seq(up, 1, 0);
    }
    // a a b a … in each, interleaved.
    assert_eq!(s, "aaaabba", "separate states");
    // With one, the interleaved picks are the single sequence.
    let mut a = Upstream::new(peers, Method::RoundRobin);
    a.share("z", 64 * 1024).unwrap();
    assert!(a.is_shared());
    let mut b = a.clone();
    let mut s = String::new();
    for i in 0..14 {
        let up = if i % 2 == 0 { &mut a } else { &mut b };
        s += &seq(up, 1, 0);
    }
    assert_eq!(s, "aabacaaaabacaa");
    // A failure seen by one is seen by the other.
    let mut r = a.start(b"", None);
    let c = r.get(&mut a, 0, &mut || 0).unwrap();
    assert!(r.free(&mut a, Outcome::Failed, 0).disabled);
    for _ in 0..6 {
        let mut r = b.start(b"", None);
        let c2 = r.get(&mut b, 0, &mut || 0).unwrap();
        assert_ne!(c2, c, "disabled in the other copy too");
        r.free(&mut b, Outcome::Ok, 0);
    }
}

#[test]
fn a_zone_too_small_for_its_peers_is_refused() {
    let many: Vec<Peer> = (1..=600).map(|p| peer(p, 1)).collect();
    let mut up = Upstream::new(Peers::new("u", many, vec![]), Method::RoundRobin);
    let e = up.share("z", 32 * 1024).unwrap_err();
    assert_eq!(e.to_string(), "zone \"z\" is too small");
}

/// `conf::DIRECTIVES` (what `gyre -V` reads) is what the block's parser
/// takes: each listed name is accepted, an unlisted one is refused.
#[test]
fn the_directive_list_is_what_the_parser_takes() {
    use gyre_core::conf::{Directive, Location};
    let d = |name: &str, args: &[&str]| Directive {
        name: name.to_string(),
        args: args.iter().map(|a| a.to_string()).collect(),
        block: None,
        location: Location::CommandLine,
    };
    let sample = |name: &str| -> Vec<&'static str> {
        match name {
            "server" => vec!["127.0.0.1:1"],
            "hash" => vec!["$remote_addr"],
            "keepalive" | "keepalive_requests" => vec!["4"],
            "keepalive_timeout" | "keepalive_time" => vec!["60s"],
            "zone" => vec!["z", "64k"],
            _ => vec![],
        }
    };
    let block = |inner: Directive| Directive {
        name: "upstream".to_string(),
        args: vec!["u".to_string()],
        block: Some(vec![d("server", &["127.0.0.1:2"]), inner]),
        location: Location::CommandLine,
    };
    for &name in conf::DIRECTIVES {
        let r = conf::parse(&block(d(name, &sample(name))));
        if let Err(e) = r {
            assert!(!e.to_string().contains("unknown directive"), "{name}: {e}");
        }
    }
    let e = conf::parse(&block(d("sticky", &[]))).err().unwrap();
    assert!(
        e.to_string().contains("unknown directive \"sticky\""),
        "{e}"
    );
}
