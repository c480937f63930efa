//! Coverage-guided fuzzing of command dispatch: bytes into `Server::feed`
//! the way the kv glue feeds them, so arbitrary argv reach every command.
//!
//! Input: 1 control byte, then the bytes one client sends (a dictionary of
//! command names and options helps: `fuzz/dict/kv.dict`). Bits 0..5 give the
//! read size (1..=63 bytes, or everything at once), bits 6..7 how much the
//! clock moves between reads (serverCron runs whenever it is due, so keys
//! expire and the idle timeout applies).
//!
//! Checked besides "no panic": `feed` never consumes more than it was
//! given; the output is a sequence of well-formed RESP2/RESP3 replies;
//! after `feed` says close (QUIT, CLIENT KILL, protocol error) the client
//! is not fed again.
//!
//! `proto-max-bulk-len` starts at its 1 MiB minimum and inputs that mention
//! it are skipped: raising it would let `SETRANGE k 4000000000 x` allocate
//! gigabytes, which Redis does too and libFuzzer would report as a crash.
#![no_main]

use gyre_kv::resp::decode_reply;
use gyre_kv::{Config, Server};
use libfuzzer_sys::fuzz_target;

const T0: i64 = 1_700_000_000_000;
const STEP_MS: [i64; 4] = [0, 1, 150, 2_000];

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, input)) = data.split_first() else {
        return;
    };
    if input
        .windows(9)
        .any(|w| w.eq_ignore_ascii_case(b"proto-max"))
    {
        return;
    }
    let config = Config {
        proto_max_bulk_len: 1024 * 1024,
        databases: 4,
        expire_use_wall_clock: false,
        ..Config::default()
    };
    let mut s = Server::new(config, T0);
    let mut now = T0;
    let Ok(id) = s.connect("127.0.0.1:50000", "127.0.0.1:6379", 9, now) else {
        panic!("first client refused");
    };
    // A second client, so CLIENT LIST/KILL have someone else to see.
    let other = s.connect("127.0.0.1:50001", "127.0.0.1:6379", 10, now).ok();
    let read = match ctl & 0x3f {
        0 => input.len().max(1),
        n => usize::from(n),
    };
    let step = STEP_MS[usize::from(ctl >> 6)];
    let mut next_cron = now;
    let mut inbuf = Vec::new();
    let mut out = Vec::new();
    for chunk in input.chunks(read) {
        now += step;
        if now >= next_cron {
            let r = s.cron(now);
            assert!(r.next_in_ms > 0);
            next_cron = now + r.next_in_ms as i64;
            if r.close.contains(&id) {
                break;
            }
        }
        s.before_sleep(now);
        inbuf.extend_from_slice(chunk);
        let o = s.feed(id, &inbuf, now, &mut out);
        assert!(o.consumed <= inbuf.len());
        inbuf.drain(..o.consumed);
        if o.close || s.take_clients_to_close().contains(&id) {
            break;
        }
        if s.config.proto_max_bulk_len > 1024 * 1024 {
            break;
        }
    }
    let mut w = &out[..];
    while !w.is_empty() {
        let Some((_, n)) = decode_reply(w) else {
            panic!(
                "malformed reply: {:?}",
                String::from_utf8_lossy(&w[..w.len().min(200)])
            );
        };
        w = &w[n..];
    }
    if let Some(o) = other {
        s.disconnect(o);
    }
    s.disconnect(id);
});
