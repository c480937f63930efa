//! Differential test of the sorted-set and bitmap commands: the same
//! seeded random command sequences go to gyre's kv process and to a real
//! redis-server 7.0 (Debian's `/usr/bin/redis-server`), and every reply is
//! compared byte for byte (RESP2, and RESP3 after a `HELLO 3` in part of
//! the run). Replies that Redis itself randomizes (ZRANDMEMBER) or orders
//! by hash (ZSCAN of a large set) are compared by content instead.
//!
//! The seed is printed; `KV_DIFF_SEED=N` replays one, `KV_DIFF_STEPS=N`
//! changes the length. Skips with a message when redis-server is missing.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use util::http::free_port;
use util::{wait_for, Prefix, Server};

const REDIS: &str = "/usr/bin/redis-server";

/// xorshift64*: the test's own generator, seeded and printed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
    fn chance(&mut self, pct: usize) -> bool {
        self.below(100) < pct
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

/// One RESP connection with a deadline on every read.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Conn { s, buf: Vec::new() }
    }

    fn call(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.s.write_all(&req).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(n) = reply_len(&self.buf, 0) {
                let r = self.buf[..n].to_vec();
                self.buf.drain(..n);
                return r;
            }
            assert!(Instant::now() < deadline, "no reply to {}", show(args));
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed on {}", show(args));
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn line_end(b: &[u8], from: usize) -> Option<usize> {
    b[from..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

/// Length of the complete reply starting at `at`, if it is all there.
fn reply_len(b: &[u8], at: usize) -> Option<usize> {
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
fn elements(r: &[u8]) -> Vec<Vec<u8>> {
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

fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

struct Redis {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

impl Redis {
    fn start(dir: &Path) -> Redis {
        let port = free_port();
        std::fs::create_dir_all(dir).unwrap();
        let child = Command::new(REDIS)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        assert!(wait_for(Duration::from_secs(5), || TcpStream::connect(
            addr
        )
        .is_ok()));
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

fn start_gyre(p: &Prefix) -> (Server, SocketAddr) {
    let port = free_port();
    p.conf(&format!(
        "daemon off;\nerror_log logs/error.log notice;\nworker_processes 1;\nevents {{}}\n\
         kv {{\n    listen 127.0.0.1:{port};\n}}\n"
    ));
    let s = p.start();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert!(
        wait_for(Duration::from_secs(5), || TcpStream::connect(addr).is_ok()),
        "{}",
        s.log()
    );
    (s, addr)
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn cmd(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|s| b(s)).collect()
}

/// How a reply is compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cmp {
    Exact,
    /// Same number of elements (the elements are random picks).
    #[allow(dead_code)]
    SameCount,
}

// ---------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------

const BIT_KEYS: &[&str] = &["b0", "b1", "b2", "nokey"];

fn offset_arg(r: &mut Rng) -> String {
    match r.below(20) {
        0 => "-1".into(),
        1 => "abc".into(),
        2 => "4294967296".into(),
        3 => "1.5".into(),
        4 => format!("{}", r.int(100, 300)),
        _ => format!("{}", r.int(0, 70)),
    }
}

fn range_arg(r: &mut Rng) -> String {
    match r.below(12) {
        0 => "x".into(),
        1 => "-100".into(),
        2 => "100".into(),
        3 => "9223372036854775807".into(),
        4 => "-9223372036854775808".into(),
        _ => format!("{}", r.int(-20, 20)),
    }
}

fn bit_unit(r: &mut Rng) -> Option<&'static str> {
    match r.below(6) {
        0 => Some("BYTE"),
        1 | 2 => Some("BIT"),
        3 => Some("bIt"),
        4 if r.chance(30) => Some("bits"),
        _ => None,
    }
}

fn field_type(r: &mut Rng) -> String {
    match r.below(14) {
        0 => "u64".into(),
        1 => "i65".into(),
        2 => "I8".into(),
        3 => "u0".into(),
        4 => "i64".into(),
        5 => "u63".into(),
        6 => "x8".into(),
        _ => {
            let signed = r.chance(50);
            let bits = r.int(1, if signed { 64 } else { 63 });
            format!("{}{}", if signed { 'i' } else { 'u' }, bits)
        }
    }
}

fn field_value(r: &mut Rng) -> String {
    match r.below(12) {
        0 => "9223372036854775807".into(),
        1 => "-9223372036854775808".into(),
        2 => "x".into(),
        3 => format!("{}", r.int(-300, 300)),
        4 => format!("{}", r.next() as i64),
        _ => format!("{}", r.int(-5, 260)),
    }
}

fn gen_bit(r: &mut Rng) -> (Vec<Vec<u8>>, Cmp) {
    let k = r.pick(BIT_KEYS).to_string();
    let mut c: Vec<String> = match r.below(13) {
        0 | 1 => {
            let v = match r.below(8) {
                0 => "2".into(),
                1 => "x".into(),
                _ => format!("{}", r.below(2)),
            };
            vec!["SETBIT".into(), k, offset_arg(r), v]
        }
        2 => vec!["GETBIT".into(), k, offset_arg(r)],
        3 => {
            let mut c = vec!["BITCOUNT".into(), k];
            match r.below(5) {
                0 => {}
                1 => c.push(range_arg(r)),
                _ => {
                    c.push(range_arg(r));
                    c.push(range_arg(r));
                    if let Some(u) = bit_unit(r) {
                        c.push(u.into());
                    }
                }
            }
            c
        }
        4 => {
            let bit = match r.below(10) {
                0 => "2".into(),
                1 => "x".into(),
                _ => format!("{}", r.below(2)),
            };
            let mut c = vec!["BITPOS".into(), k, bit];
            let n = r.below(4);
            for i in 0..n {
                if i == 2 {
                    if let Some(u) = bit_unit(r) {
                        c.push(u.into());
                    }
                } else {
                    c.push(range_arg(r));
                }
            }
            c
        }
        5 => {
            let op = r
                .pick(&["AND", "OR", "XOR", "NOT", "and", "nand"])
                .to_string();
            let n = if op == "NOT" && r.chance(80) {
                1
            } else {
                r.int(1, 3) as usize
            };
            let mut c = vec!["BITOP".into(), op, r.pick(BIT_KEYS).to_string()];
            for _ in 0..n {
                c.push(r.pick(BIT_KEYS).to_string());
            }
            c
        }
        6 | 7 => {
            let name = if r.chance(20) {
                "BITFIELD_RO"
            } else {
                "BITFIELD"
            };
            let mut c = vec![name.into(), k];
            for _ in 0..r.int(0, 4) {
                match r.below(10) {
                    0 | 1 => {
                        c.push("OVERFLOW".into());
                        c.push(
                            r.pick(&["WRAP", "SAT", "FAIL", "sat", "fail", "bad"])
                                .to_string(),
                        );
                    }
                    2..=4 => {
                        c.push(r.pick(&["GET", "get"]).to_string());
                        c.push(field_type(r));
                        c.push(field_off(r));
                    }
                    5..=6 if name == "BITFIELD_RO" && r.chance(70) => {
                        c.push("GET".into());
                        c.push(field_type(r));
                        c.push(field_off(r));
                    }
                    5..=7 => {
                        c.push(r.pick(&["SET", "INCRBY"]).to_string());
                        c.push(field_type(r));
                        c.push(field_off(r));
                        c.push(field_value(r));
                    }
                    8 => {
                        c.push("INCRBY".into());
                        c.push(field_type(r));
                        c.push(field_off(r));
                        if r.chance(50) {
                            c.push(field_value(r));
                        }
                    }
                    _ => c.push(r.pick(&["FOO", "GET", "SET"]).to_string()),
                }
            }
            c
        }
        8 => {
            let v: String = (0..r.below(12))
                .map(|_| *r.pick(&['a', 'b', 'c', '\u{0}', '\u{7f}', 'z']))
                .collect();
            vec![r.pick(&["SET", "APPEND"]).to_string(), k, v]
        }
        9 => vec!["GET".into(), k],
        10 | 11 => {
            let mut c = vec!["LCS".into(), k, r.pick(BIT_KEYS).to_string()];
            for _ in 0..r.below(4) {
                match r.below(6) {
                    0 => c.push("IDX".into()),
                    1 => c.push("LEN".into()),
                    2 => c.push("WITHMATCHLEN".into()),
                    3 => {
                        c.push("MINMATCHLEN".into());
                        if r.chance(90) {
                            c.push(format!("{}", r.int(-2, 4)));
                        }
                    }
                    4 => c.push("idx".into()),
                    _ => c.push("bogus".into()),
                }
            }
            c
        }
        _ => vec!["DEL".into(), k],
    };
    if r.chance(1) {
        c.truncate(1); // wrong arity
    }
    (c.iter().map(|s| b(s)).collect(), Cmp::Exact)
}

fn field_off(r: &mut Rng) -> String {
    match r.below(10) {
        0 => format!("#{}", r.int(0, 12)),
        1 => "#-1".into(),
        2 => "-1".into(),
        _ => format!("{}", r.int(0, 90)),
    }
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

fn compare(
    seed: u64,
    step: usize,
    c: &[Vec<u8>],
    how: Cmp,
    g: &mut Conn,
    rd: &mut Conn,
) -> Result<(), String> {
    let a = g.call(c);
    let e = rd.call(c);
    if std::env::var_os("KV_DIFF_VERBOSE").is_some() {
        eprintln!("{step}: {} -> {:?}", show(c), String::from_utf8_lossy(&e));
    }
    let same = match how {
        Cmp::Exact => a == e,
        Cmp::SameCount => {
            a[0] == e[0] && (a[0] != b'*' || elements(&a).len() == elements(&e).len())
        }
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

fn run(name: &str, gen: fn(&mut Rng) -> (Vec<Vec<u8>>, Cmp), default_steps: usize) {
    if !Path::new(REDIS).exists() {
        eprintln!("skipping {name}: {REDIS} not installed");
        return;
    }
    let seed = std::env::var("KV_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
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

#[test]
fn bit_commands_match_redis() {
    run("kv-bit-diff", gen_bit, 4000);
}
