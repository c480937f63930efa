//! Seeded mutation fuzzing of the connection machine: 100k random and
//! mutated heads, fed in random splits, must never panic and must always
//! leave the machine in a sane state.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use gyre_http::{Connection, Disposition, Event, HttpSettings, Segment};

const SEEDS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a/b/../c%20d?q=1#f HTTP/1.1\r\nHost: example.com:80\r\nConnection: keep-alive\r\n\r\n",
    b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: 1\r\n\r\n",
    b"HEAD /file HTTP/1.0\r\nConnection: keep-alive\r\nRange: bytes=0-10\r\n\r\n",
    b"GET http://h/p HTTP/1.1\r\nHost: h\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
];

const INTERESTING: &[u8] = b"\r\n :%./?#\x00\x7f\xff09aAzZ-_,;\t\"";

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    let n = 1 + rng.below(6);
    for _ in 0..n {
        let len = v.len() as u64;
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(len) as usize;
                v[i] = rng.next() as u8;
            }
            1 if !v.is_empty() => {
                let i = rng.below(len) as usize;
                v[i] = INTERESTING[rng.below(INTERESTING.len() as u64) as usize];
            }
            2 => {
                let i = rng.below(len + 1) as usize;
                v.insert(i, INTERESTING[rng.below(INTERESTING.len() as u64) as usize]);
            }
            3 if !v.is_empty() => {
                let i = rng.below(len) as usize;
                v.remove(i);
            }
            4 if !v.is_empty() => {
                let i = rng.below(len) as usize;
                let j = (i + rng.below(30) as usize).min(v.len());
                let seg = v[i..j].to_vec();
                let k = rng.below(v.len() as u64 + 1) as usize;
                for (o, b) in seg.into_iter().enumerate() {
                    v.insert(k + o, b);
                }
            }
            5 => v.truncate(rng.below(len + 1) as usize),
            _ => {
                let extra = SEEDS[rng.below(SEEDS.len() as u64) as usize];
                v.extend_from_slice(extra);
            }
        }
    }
    v
}

fn random_bytes(rng: &mut Rng) -> Vec<u8> {
    let n = rng.below(200) as usize;
    (0..n)
        .map(|_| {
            if rng.below(2) == 0 {
                INTERESTING[rng.below(INTERESTING.len() as u64) as usize]
            } else {
                rng.next() as u8
            }
        })
        .collect()
}

fn check(input: &[u8], rng: &mut Rng, settings: &HttpSettings) {
    let mut c = Connection::new(settings.clone(), 0);
    let mut now = 0u64;
    let mut responses = 0usize;
    let mut requests = 0usize;
    let mut out = Vec::new();
    let chunks = random_splits(input, rng);
    for chunk in chunks {
        now += rng.below(3);
        if c.wants_read() {
            c.on_read(chunk, now);
        }
        while let Some(ev) = c.poll(now, DATE) {
            match ev {
                Event::Request(r) => {
                    requests += 1;
                    assert!(r.path().starts_with(b"/"));
                    assert!(!r.path().contains(&0));
                    assert!(!r.path().windows(2).any(|w| w == b"//"));
                    assert!(!r
                        .path()
                        .split(|&b| b == b'/')
                        .any(|s| s == b".." || s == b"."));
                    if rng.below(4) == 0 {
                        c.collect_body();
                        continue;
                    }
                    c.respond(handler(&r), now, DATE).unwrap();
                    responses += 1;
                }
                Event::Body(_) => {}
                Event::BodyEnd => {
                    c.respond(gyre_http::Response::error(404), now, DATE)
                        .unwrap();
                    responses += 1;
                }
                Event::BodyError(s) => {
                    assert!(s == 400 || s == 413);
                    responses += 1;
                }
            }
        }
        for s in c.take_output().segments {
            if let Segment::Bytes(b) = s {
                out.extend(b);
            }
        }
    }
    if let Some(d) = c.next_deadline() {
        c.on_timeout(d);
        assert!(c.wants_close() || c.next_deadline().is_some());
    }
    c.on_eof(now);
    while let Some(Event::Request(r)) = c.poll(now, DATE) {
        requests += 1;
        let _ = c.respond(handler(&r), now, DATE);
    }
    assert!(requests <= input.len());
    if !out.is_empty() {
        assert!(
            out.starts_with(b"HTTP/1.1 "),
            "{:?}",
            String::from_utf8_lossy(&out)
        );
    }
    // Every response the glue queued is on the wire, plus the machine's own.
    let heads = out.windows(9).filter(|w| *w == b"HTTP/1.1 ").count()
        - out.windows(12).filter(|w| *w == b"HTTP/1.1 100").count();
    assert!(heads >= responses, "{heads} < {responses}");
    let logs = c.take_logs();
    assert!(logs.iter().all(|l| (100..600).contains(&l.status)));
    if c.disposition() == Disposition::Open && c.is_idle() {
        let _ = c.release_buffers();
        assert_eq!(c.buffered_capacity(), 0);
    }
}

#[test]
fn hundred_thousand_heads_do_not_panic() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let small = HttpSettings {
        client_header_buffer_size: 32,
        large_header_buffers: 2,
        large_header_buffer_size: 64,
        client_max_body_size: 8,
        ..Default::default()
    };
    let default = HttpSettings::default();
    for i in 0..100_000u32 {
        let input = if i % 5 == 0 {
            random_bytes(&mut rng)
        } else {
            let base = SEEDS[rng.below(SEEDS.len() as u64) as usize];
            mutate(&mut rng, base)
        };
        let st = if i % 3 == 0 { &small } else { &default };
        check(&input, &mut rng, st);
    }
}
