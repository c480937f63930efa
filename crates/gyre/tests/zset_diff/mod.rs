//! The harness of the sorted-set and bitmap differential tests
//! (`tests/kv_zset_differential.rs`): a seeded generator, a raw RESP
//! connection with deadlines, redis-server and gyre started on free
//! ports, the comparison of replies, and multi-client scenarios.
#![allow(dead_code)]

pub mod gen_bit;
pub mod gen_zset;

use crate::util::ReadSome;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::util::{wait_for, Prefix, Server};

pub(crate) const REDIS: &str = "/usr/bin/redis-server";

/// xorshift64*: the test's own generator, seeded and printed.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
    pub(crate) fn chance(&mut self, pct: usize) -> bool {
        self.below(100) < pct
    }
    pub(crate) fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

/// One RESP connection with a deadline on every read.
pub(crate) struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub(crate) fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Conn { s, buf: Vec::new() }
    }

    pub(crate) fn call(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        self.send(args);
        self.read_reply(args)
    }

    pub(crate) fn send(&mut self, args: &[Vec<u8>]) {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.s.write_all(&req).unwrap();
    }

    /// One complete reply (to `args`, named in a failure).
    pub(crate) fn read_reply(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(n) = reply_len(&self.buf, 0) {
                let r = self.buf[..n].to_vec();
                self.buf.drain(..n);
                return r;
            }
            assert!(Instant::now() < deadline, "no reply to {}", show(args));
            let mut chunk = [0u8; 65536];
            let n = self.s.read_some(&mut chunk).unwrap();
            assert!(n > 0, "connection closed on {}", show(args));
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

pub(crate) fn line_end(b: &[u8], from: usize) -> Option<usize> {
    b[from..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

/// Length of the complete reply starting at `at`, if it is all there.
pub(crate) fn reply_len(b: &[u8], at: usize) -> Option<usize> {
    let t = *b.get(at)?;
    let end = line_end(b, at)?;
    let head = std::str::from_utf8(&b[at + 1..end]).ok()?;
    let after = end + 2;
    match t {
        b'+' | b'-' | b':' | b',' | b'_' | b'#' | b'(' => Some(after - at),
        b'$' | b'=' | b'!' => {
            let n: i64 = head.parse().ok()?;
            if n < 0 {
                return Some(after - at);
            }
            let stop = after + n as usize + 2;
            (b.len() >= stop).then_some(stop - at)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n: i64 = head.parse().ok()?;
            let items = if t == b'%' || t == b'|' { 2 * n } else { n };
            let mut pos = after;
            for _ in 0..items.max(0) {
                pos += reply_len(b, pos)?;
            }
            Some(pos - at)
        }
        _ => Some(after - at),
    }
}

/// The elements of an aggregate reply, raw.
pub(crate) fn elements(r: &[u8]) -> Vec<Vec<u8>> {
    let end = line_end(r, 0).unwrap();
    let mut pos = end + 2;
    let mut out = Vec::new();
    while pos < r.len() {
        let n = reply_len(r, pos).unwrap();
        out.push(r[pos..pos + n].to_vec());
        pos += n;
    }
    out
}

pub(crate) fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) struct Redis {
    child: Child,
    dir: PathBuf,
    pub(crate) addr: SocketAddr,
}

impl Redis {
    pub(crate) fn start(dir: &Path) -> Redis {
        std::fs::create_dir_all(dir).unwrap();
        let (child, addr) = crate::util::kv::spawn_redis(|port| {
            let mut cmd = Command::new(REDIS);
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir);
            cmd
        });
        Redis {
            child,
            dir: dir.to_path_buf(),
            addr,
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// gyre's kv process in `p` ([`crate::util::kv::start_at`]).
pub(crate) fn start_gyre(p: &Prefix) -> (Server, SocketAddr) {
    crate::util::kv::start_at(p, "")
}

pub(crate) fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

pub(crate) fn cmd(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|s| b(s)).collect()
}

/// How a reply is compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Cmp {
    Exact,
    /// Same number of elements (the elements are random picks).
    SameCount,
    /// A ZSCAN from cursor 0: both scans are run to the end and the sets
    /// of pairs compared (a large set's order is its hash order).
    FullScan,
}

/// A raw (member, score) pair of a scan reply.
pub(crate) type Pair = (Vec<u8>, Vec<u8>);

/// Scan to the end (bounded): the sorted, deduplicated pairs, or the
/// first reply when it is not a scan reply.
pub(crate) fn full_scan(conn: &mut Conn, c: &[Vec<u8>]) -> Result<Vec<Pair>, Vec<u8>> {
    let mut args = c.to_vec();
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let rep = conn.call(&args);
        if rep[0] != b'*' {
            return Err(rep);
        }
        let parts = elements(&rep);
        let cursor = parts[0].clone();
        let items = elements(&parts[1]);
        for p in items.chunks(2) {
            out.push((p[0].clone(), p.get(1).cloned().unwrap_or_default()));
        }
        if cursor == b"$1\r\n0\r\n" {
            out.sort();
            out.dedup();
            return Ok(out);
        }
        // The cursor's digits from `$N\r\nDIGITS\r\n`.
        let text = String::from_utf8_lossy(&cursor).into_owned();
        args[2] = b(text.split("\r\n").nth(1).unwrap_or("0"));
    }
    panic!("scan did not end: {}", show(c));
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

pub(crate) fn compare(
    seed: u64,
    step: usize,
    c: &[Vec<u8>],
    how: Cmp,
    g: &mut Conn,
    rd: &mut Conn,
) -> Result<(), String> {
    if std::env::var_os("KV_DIFF_VERBOSE").is_some() {
        eprintln!("{step}> {}", show(c));
    }
    if how == Cmp::FullScan {
        let (a, e) = (full_scan(g, c), full_scan(rd, c));
        if a == e {
            return Ok(());
        }
        return Err(format!(
            "seed {seed} step {step}: {}\n  gyre:  {a:?}\n  redis: {e:?}",
            show(c)
        ));
    }
    let a = g.call(c);
    let e = rd.call(c);
    let same = match how {
        Cmp::Exact => a == e,
        Cmp::SameCount => {
            a[0] == e[0] && (a[0] != b'*' || elements(&a).len() == elements(&e).len())
        }
        Cmp::FullScan => true,
    };
    if same {
        return Ok(());
    }
    Err(format!(
        "seed {seed} step {step}: {}\n  gyre:  {:?}\n  redis: {:?}",
        show(c),
        String::from_utf8_lossy(&a),
        String::from_utf8_lossy(&e)
    ))
}

pub(crate) fn run(
    name: &str,
    gen: fn(&mut Rng) -> (Vec<Vec<u8>>, Cmp),
    setup: &[&[&str]],
    default_steps: usize,
) {
    if !Path::new(REDIS).exists() {
        eprintln!("skipping {name}: {REDIS} not installed");
        return;
    }
    let seed = std::env::var("KV_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            // Fixed seeds unless asked otherwise, so a run (CI's included)
            // is repeatable; KV_DIFF_RANDOM=1 explores new ones.
            if std::env::var_os("KV_DIFF_RANDOM").is_none() {
                return name.bytes().fold(0x5eed_u64, |h, b| {
                    h.wrapping_mul(0x100_0000_01b3) ^ u64::from(b)
                }) | 1;
            }
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    let steps = std::env::var("KV_DIFF_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_steps);
    eprintln!("{name}: seed {seed} ({steps} steps; KV_DIFF_SEED={seed} replays it)");
    let p = Prefix::new(name);
    let redis = Redis::start(&p.path("redis"));
    let (_gyre, gaddr) = start_gyre(&p);
    let mut g = Conn::open(gaddr);
    let mut rd = Conn::open(redis.addr);
    for c in setup {
        let c = cmd(c);
        let (a, e) = (g.call(&c), rd.call(&c));
        // HELLO's reply carries the connection id: not compared.
        if c[0] != b"HELLO" {
            assert_eq!(a, e, "setup {}", show(&c));
        }
    }
    let mut r = Rng(seed);
    let mut failures = Vec::new();
    for step in 0..steps {
        // Part of the run in RESP3 (doubles, maps, nulls differ there).
        if step == steps / 2 {
            let hello = cmd(&["HELLO", "3"]);
            g.call(&hello);
            rd.call(&hello);
        }
        let (c, how) = gen(&mut r);
        if let Err(e) = compare(seed, step, &c, how, &mut g, &mut rd) {
            eprintln!("{e}");
            failures.push(e);
            if failures.len() >= 10 {
                break;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences (seed {seed}); first: {}",
        failures.len(),
        failures[0]
    );
}

/// One step of a multi-client scenario.
pub(crate) enum Step {
    /// Send and read the reply.
    Call(usize, &'static [&'static str]),
    /// Send a command that blocks; wait until the server counts `n`
    /// blocked clients.
    Block(usize, &'static [&'static str], usize),
    /// Read the reply a blocked client got.
    Read(usize),
}

/// `INFO clients`'s `blocked_clients` reaches `n` (bounded wait).
pub(crate) fn wait_blocked(ctl: &mut Conn, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    let ok = wait_for(Duration::from_secs(5), || {
        let r = ctl.call(&cmd(&["INFO", "clients"]));
        String::from_utf8_lossy(&r).contains(&want)
    });
    assert!(ok, "never {want}");
}

/// The replies of a scenario on one server.
pub(crate) fn play(addr: SocketAddr, steps: &[Step]) -> Vec<(String, Vec<u8>)> {
    let mut ctl = Conn::open(addr);
    let mut cs: Vec<Conn> = (0..4).map(|_| Conn::open(addr)).collect();
    let mut last: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 4];
    let mut out = Vec::new();
    for s in steps {
        match s {
            Step::Call(i, c) => {
                let c = cmd(c);
                out.push((format!("{i}: {}", show(&c)), cs[*i].call(&c)));
            }
            Step::Block(i, c, n) => {
                let c = cmd(c);
                cs[*i].send(&c);
                wait_blocked(&mut ctl, *n);
                last[*i] = c;
            }
            Step::Read(i) => {
                let r = cs[*i].read_reply(&last[*i]);
                out.push((format!("{i} woken: {}", show(&last[*i])), r));
            }
        }
    }
    out
}
