//! In-process cost of sorted-set commands through `Server::execute`
//! (no sockets), next to SET for scale. Prints figures; run with
//! `cargo test --release -p gyre-kv --test zset_speed -- --ignored --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use common::T;

fn per_op(t: &mut T, n: usize, mut argv: impl FnMut(usize) -> Vec<Vec<u8>>) -> f64 {
    let mut out = Vec::new();
    let start = Instant::now();
    for i in 0..n {
        out.clear();
        let a = argv(i);
        t.s.execute(t.id, &a, t.now, &mut out);
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

#[test]
#[ignore]
fn zset_command_costs() {
    let mut t = T::new();
    let n = 200_000;
    let mut x: u64 = 88172645463325252;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % 100_000
    };
    let set = per_op(&mut t, n, |i| {
        vec![
            b"SET".to_vec(),
            format!("key:{i}").into_bytes(),
            b"xxx".to_vec(),
        ]
    });
    let zadd = per_op(&mut t, n, |_| {
        let r = rnd();
        vec![
            b"ZADD".to_vec(),
            b"myzset".to_vec(),
            r.to_string().into_bytes(),
            format!("element:{r:012}").into_bytes(),
        ]
    });
    let zrank = per_op(&mut t, n, |i| {
        vec![
            b"ZRANK".to_vec(),
            b"myzset".to_vec(),
            format!("element:{:012}", i % 100_000).into_bytes(),
        ]
    });
    let zrange = per_op(&mut t, n / 10, |i| {
        let s = (i * 7919) % 60_000;
        vec![
            b"ZRANGEBYSCORE".to_vec(),
            b"myzset".to_vec(),
            s.to_string().into_bytes(),
            (s + 100).to_string().into_bytes(),
        ]
    });
    let zpop = per_op(&mut t, n / 4, |_| {
        vec![b"ZPOPMIN".to_vec(), b"myzset".to_vec()]
    });
    println!("SET {set:.0} ns, ZADD {zadd:.0} ns, ZRANK {zrank:.0} ns, ZRANGEBYSCORE(100) {zrange:.0} ns, ZPOPMIN {zpop:.0} ns");
}
