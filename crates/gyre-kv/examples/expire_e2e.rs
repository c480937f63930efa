//! End-to-end active expiry against a live server (gyre's kv or
//! redis-server):
//!
//! ```text
//! cargo run --release -p gyre-kv --example expire_e2e -- HOST:PORT [KEYS] [TTL_MS] [px|pxat]
//! ```
//!
//! 1. `SET e2e:live v` (no TTL) and notes `DBSIZE` (the baseline).
//! 2. Loads `KEYS` (default 1e6) keys `e2e:k:<i>` pipelined in batches of
//!    10,000: with `SET ... PX TTL_MS` (default 1000; mode `px`, the
//!    default), so keys loaded first may expire while the load goes on;
//!    or (mode `pxat`) with `SET ... PXAT D`, one absolute deadline for
//!    all keys, D = load start + 10 s + TTL_MS (loads slower than 10 s are
//!    reported), so that every key expires at the same instant whatever the
//!    server's load speed: the harshest case for active expiry.
//! 3. Polls `DBSIZE` every 100 ms until it is back at the baseline, while
//!    another connection sends `GET e2e:live` about every millisecond and
//!    times each round trip.
//!
//! It prints the load time, the time to empty counted from the moment the
//! last loaded key expired (load end + TTL, or D), and GET latency
//! p50/p99/max over three windows: idle (before loading), during the load,
//! and during expiry (from load end, or D, until empty). The last line is a `key=value` summary
//! for scripts. Uses DB 0 of the target and leaves it as it found it
//! (apart from `e2e:live`).

use std::error::Error;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

const BATCH: usize = 10_000;

struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn open(addr: &str) -> Res<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        Ok(Conn {
            r: BufReader::new(s.try_clone()?),
            w: s,
        })
    }

    /// One reply: a simple string, error, integer or bulk payload (nil as
    /// an empty vector). Errors become `Err`.
    fn reply(&mut self) -> Res<Vec<u8>> {
        let mut line = Vec::new();
        self.r.read_until(b'\n', &mut line)?;
        if line.len() < 3 {
            return Err("connection closed".into());
        }
        line.truncate(line.len() - 2);
        match line[0] {
            b'+' | b':' => Ok(line[1..].to_vec()),
            b'$' => {
                let n: i64 = std::str::from_utf8(&line[1..])?.parse()?;
                if n < 0 {
                    return Ok(Vec::new());
                }
                let mut b = vec![0; n as usize + 2];
                self.r.read_exact(&mut b)?;
                b.truncate(n as usize);
                Ok(b)
            }
            _ => Err(format!("reply {}", String::from_utf8_lossy(&line)).into()),
        }
    }

    fn cmd(&mut self, args: &[&[u8]]) -> Res<Vec<u8>> {
        let mut out = Vec::new();
        encode(&mut out, args);
        self.w.write_all(&out)?;
        self.reply()
    }

    fn int(&mut self, args: &[&[u8]]) -> Res<i64> {
        Ok(std::str::from_utf8(&self.cmd(args)?)?.parse()?)
    }
}

fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// A GET round trip: when it started (since the run's start) and its time.
#[derive(Clone, Copy)]
struct Sample {
    at: Duration,
    rtt: Duration,
}

fn prober(addr: String, start: Instant, stop: Arc<AtomicBool>) -> Res<Vec<Sample>> {
    let mut c = Conn::open(&addr)?;
    let mut v = Vec::new();
    let mut get = Vec::new();
    encode(&mut get, &[b"GET", b"e2e:live"]);
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        c.w.write_all(&get)?;
        let r = c.reply()?;
        let rtt = t.elapsed();
        if r != b"v" {
            return Err("GET e2e:live: wrong value".into());
        }
        v.push(Sample { at: t - start, rtt });
        thread::sleep(Duration::from_millis(1));
    }
    Ok(v)
}

/// (count, p50, p99, max) in microseconds of the samples in `[from, to)`.
fn stats(v: &[Sample], from: Duration, to: Duration) -> (usize, u128, u128, u128) {
    let mut x: Vec<u128> = v
        .iter()
        .filter(|s| s.at >= from && s.at < to)
        .map(|s| s.rtt.as_micros())
        .collect();
    x.sort_unstable();
    let q = |p: usize| {
        x.get((x.len() * p / 100).min(x.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    (x.len(), q(50), q(99), x.last().copied().unwrap_or(0))
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let addr = args
        .next()
        .ok_or("usage: expire_e2e HOST:PORT [KEYS] [TTL_MS]")?;
    let keys: usize = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let ttl_ms: u64 = args.next().map_or(Ok(1000), |a| a.parse())?;
    let pxat = match args.next().as_deref() {
        None | Some("px") => false,
        Some("pxat") => true,
        Some(m) => return Err(format!("unknown mode {m}: px or pxat").into()),
    };

    let mut c = Conn::open(&addr)?;
    c.cmd(&[b"SET", b"e2e:live", b"v"])?;
    let base = c.int(&[b"DBSIZE"])?;

    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let probe = {
        let (a, s) = (addr.clone(), stop.clone());
        thread::spawn(move || prober(a, start, s))
    };
    thread::sleep(Duration::from_millis(1000));

    // Load.
    let load_start = start.elapsed();
    let unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    const ALLOWANCE_MS: u64 = 10_000;
    let (opt, ttl): (&[u8], String) = if pxat {
        (b"PXAT", (unix_ms + ALLOWANCE_MS + ttl_ms).to_string())
    } else {
        (b"PX", ttl_ms.to_string())
    };
    let mut buf = Vec::new();
    let mut i = 0;
    while i < keys {
        let n = BATCH.min(keys - i);
        buf.clear();
        for j in i..i + n {
            let k = format!("e2e:k:{j}");
            encode(&mut buf, &[b"SET", k.as_bytes(), b"v", opt, ttl.as_bytes()]);
        }
        c.w.write_all(&buf)?;
        for _ in 0..n {
            c.reply()?;
        }
        i += n;
    }
    let load_end = start.elapsed();
    let peak = c.int(&[b"DBSIZE"])?;

    // Poll until empty.
    let expired_at = if pxat {
        if load_end - load_start > Duration::from_millis(ALLOWANCE_MS) {
            println!("load slower than the {ALLOWANCE_MS} ms allowance: keys expired during it");
        }
        load_start + Duration::from_millis(ALLOWANCE_MS + ttl_ms)
    } else {
        load_end + Duration::from_millis(ttl_ms)
    };
    let mut empty = None;
    while start.elapsed() < expired_at + Duration::from_secs(120) {
        thread::sleep(Duration::from_millis(100));
        if c.int(&[b"DBSIZE"])? <= base {
            empty = Some(start.elapsed());
            break;
        }
    }
    thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let samples = probe.join().map_err(|_| "prober panicked")??;

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mode = if pxat { "pxat" } else { "px" };
    println!(
        "{addr}: loaded {keys} keys ({mode}, TTL {ttl_ms} ms) in {:.0} ms; DBSIZE after load {peak}",
        ms(load_end - load_start)
    );
    let end = empty.unwrap_or_else(|| start.elapsed());
    match empty {
        Some(e) => println!(
            "empty {:.0} ms after the last key's TTL ({:.0} ms after the load began)",
            ms(e.saturating_sub(expired_at)),
            ms(e - load_start)
        ),
        None => println!("NOT empty 120 s after the last key's TTL"),
    }
    let windows = [
        ("idle", Duration::ZERO, load_start),
        ("load", load_start, load_end),
        ("expiry", if pxat { expired_at } else { load_end }, end),
    ];
    let mut summary = format!(
        "addr={addr} mode={mode} keys={keys} ttl_ms={ttl_ms} load_ms={:.0} empty_after_ttl_ms={}",
        ms(load_end - load_start),
        empty.map_or("none".to_string(), |e| format!(
            "{:.0}",
            ms(e.saturating_sub(expired_at))
        ))
    );
    for (name, from, to) in windows {
        let (n, p50, p99, max) = stats(&samples, from, to);
        println!("GET during {name}: {n} samples, p50 {p50} us, p99 {p99} us, max {max} us");
        summary.push_str(&format!(
            " {name}_p50_us={p50} {name}_p99_us={p99} {name}_max_us={max}"
        ));
    }
    println!("{summary}");
    c.cmd(&[b"DEL", b"e2e:live"])?;
    Ok(())
}
