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
        self.send(args);
        self.read_reply(args)
    }

    fn send(&mut self, args: &[Vec<u8>]) {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.s.write_all(&req).unwrap();
    }

    /// One complete reply (to `args`, named in a failure).
    fn read_reply(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
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
    SameCount,
    /// A ZSCAN from cursor 0: both scans are run to the end and the sets
    /// of pairs compared (a large set's order is its hash order).
    FullScan,
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

/// Keys any command may read; `lx` holds only score 0 (lex ranges over
/// mixed scores are undefined in Redis: its skiplist walk depends on the
/// node levels), so only [`WKEYS`] are written with other scores and only
/// [`LKEYS`] take lex ranges.
const ZKEYS: &[&str] = &["z0", "z1", "z2", "lx", "str", "nokey", "dst", "st"];
const WKEYS: &[&str] = &["z0", "z1", "z2", "str", "nokey", "dst"];
const LKEYS: &[&str] = &["lx", "nolex"];

fn member(r: &mut Rng) -> String {
    match r.below(30) {
        0 => String::new(),
        1 => "x".repeat(70), // over zset-max-listpack-value
        2 => format!("{}", r.int(-3, 3)),
        3 => "*".into(),
        _ => ((b'a' + r.below(16) as u8) as char).to_string(),
    }
}

fn score_arg(r: &mut Rng) -> String {
    match r.below(40) {
        0 => "inf".into(),
        1 => "-inf".into(),
        2 => "+inf".into(),
        3 => "nan".into(),
        4 => "abc".into(),
        5 => "1e400".into(),
        6 => "0x10".into(),
        7 => "-0".into(),
        8 => "1.1".into(),
        9 => "1e-5".into(),
        10 => "3.0000000000000004".into(),
        11 => "".into(),
        12 => " 1".into(),
        13 => "1e300".into(),
        14 | 15 => {
            // Any finite double, in Rust's shortest form or as `{:e}`:
            // exercises `%.17g` on every magnitude, subnormals included.
            let v = loop {
                let v = f64::from_bits(r.next());
                if v.is_finite() {
                    break v;
                }
            };
            if r.chance(50) {
                format!("{v:e}")
            } else {
                format!("{v}")
            }
        }
        16 => match r.below(4) {
            0 => r
                .pick(&[
                    "1e17",
                    "4e18",
                    "5e18",
                    "4611686018427387904",
                    "-4611686018427387904",
                    "9.5e18",
                ])
                .to_string(),
            _ => format!("{}", (r.next() % 2_000_000) as f64 / 1000.0 - 1000.0),
        },
        17 | 18 => format!("{}.5", r.int(-3, 3)),
        _ => format!("{}", r.int(-5, 5)),
    }
}

fn bound(r: &mut Rng) -> String {
    match r.below(12) {
        0 => "-inf".into(),
        1 => "+inf".into(),
        2 => format!("({}", r.int(-5, 5)),
        3 => "(".into(),
        4 => "x".into(),
        5 => "(inf".into(),
        6 => "nan".into(),
        7 => format!("({}.5", r.int(-3, 3)),
        _ => format!("{}", r.int(-5, 5)),
    }
}

fn lex_bound(r: &mut Rng) -> String {
    match r.below(10) {
        0 => "-".into(),
        1 => "+".into(),
        2 => "x".into(),
        3 => "[".into(),
        4 => "(".into(),
        5 | 6 => format!("({}", member(r)),
        _ => format!("[{}", member(r)),
    }
}

fn rank(r: &mut Rng) -> String {
    match r.below(12) {
        0 => "x".into(),
        1 => "9223372036854775807".into(),
        2 => "-9223372036854775808".into(),
        3 => "100".into(),
        4 => "-100".into(),
        _ => format!("{}", r.int(-6, 6)),
    }
}

fn zkey(r: &mut Rng) -> String {
    r.pick(ZKEYS).to_string()
}

fn wkey(r: &mut Rng) -> String {
    r.pick(WKEYS).to_string()
}

fn lkey(r: &mut Rng) -> String {
    r.pick(LKEYS).to_string()
}

/// LIMIT offset count.
fn limit(r: &mut Rng, c: &mut Vec<String>) {
    c.push("LIMIT".into());
    c.push(r.pick(&["0", "1", "2", "-1", "5", "x"]).to_string());
    if r.chance(95) {
        c.push(r.pick(&["1", "2", "-1", "0", "3", "-5"]).to_string());
    }
}

fn gen_zset(r: &mut Rng) -> (Vec<Vec<u8>>, Cmp) {
    let mut how = Cmp::Exact;
    let k = zkey(r);
    let c: Vec<String> = match r.below(36) {
        0..=5 => {
            let mut c = vec!["ZADD".to_string(), k.clone()];
            for _ in 0..r.below(3) {
                c.push(
                    r.pick(&["NX", "XX", "GT", "LT", "CH", "INCR", "ch", "nx"])
                        .to_string(),
                );
            }
            let n = if r.chance(90) {
                r.int(1, 4) as usize
            } else {
                0
            };
            let lex = k == "lx";
            for _ in 0..n {
                c.push(if lex { "0".into() } else { score_arg(r) });
                c.push(member(r));
            }
            if r.chance(3) {
                c.push(score_arg(r));
            }
            c
        }
        6 => vec!["ZINCRBY".into(), wkey(r), score_arg(r), member(r)],
        7 => {
            let mut c = vec!["ZREM".to_string(), k];
            for _ in 0..r.int(1, 3) {
                c.push(member(r));
            }
            c
        }
        8 => vec!["ZCARD".into(), k],
        9 => vec!["ZSCORE".into(), k, member(r)],
        10 => {
            let mut c = vec!["ZMSCORE".to_string(), k];
            for _ in 0..r.int(1, 3) {
                c.push(member(r));
            }
            c
        }
        11 => vec![r.pick(&["ZRANK", "ZREVRANK"]).to_string(), k, member(r)],
        12 => vec!["ZCOUNT".into(), k, bound(r), bound(r)],
        13 => vec!["ZLEXCOUNT".into(), lkey(r), lex_bound(r), lex_bound(r)],
        14..=17 => {
            // ZRANGE and ZRANGESTORE with every option.
            let store = r.chance(20);
            let by = r.below(3);
            let k = if by == 2 { lkey(r) } else { k };
            let mut c = if store {
                vec!["ZRANGESTORE".to_string(), wkey(r), k]
            } else {
                vec!["ZRANGE".to_string(), k]
            };
            match by {
                0 => {
                    c.push(rank(r));
                    c.push(rank(r));
                }
                1 => {
                    c.push(bound(r));
                    c.push(bound(r));
                    c.push("BYSCORE".into());
                }
                _ => {
                    c.push(lex_bound(r));
                    c.push(lex_bound(r));
                    c.push("BYLEX".into());
                }
            }
            if r.chance(40) {
                c.push("REV".into());
            }
            if r.chance(35) {
                limit(r, &mut c);
            }
            if r.chance(50) {
                c.push("WITHSCORES".into());
            }
            if r.chance(3) {
                c.push(r.pick(&["BYSCORE", "REV", "foo"]).to_string());
            }
            c
        }
        18 => {
            let mut c = vec![
                r.pick(&["ZREVRANGE", "ZRANGE"]).to_string(),
                k,
                rank(r),
                rank(r),
            ];
            if r.chance(50) {
                c.push("WITHSCORES".into());
            }
            c
        }
        19 | 20 => {
            let rev = r.chance(50);
            let mut c = vec![
                if rev {
                    "ZREVRANGEBYSCORE"
                } else {
                    "ZRANGEBYSCORE"
                }
                .to_string(),
                k,
                bound(r),
                bound(r),
            ];
            if r.chance(50) {
                c.push("WITHSCORES".into());
            }
            if r.chance(40) {
                limit(r, &mut c);
            }
            c
        }
        21 => {
            let rev = r.chance(50);
            let mut c = vec![
                if rev { "ZREVRANGEBYLEX" } else { "ZRANGEBYLEX" }.to_string(),
                lkey(r),
                lex_bound(r),
                lex_bound(r),
            ];
            if r.chance(40) {
                limit(r, &mut c);
            }
            if r.chance(5) {
                c.push("WITHSCORES".into());
            }
            c
        }
        22 => vec!["ZREMRANGEBYRANK".into(), k, rank(r), rank(r)],
        23 => vec!["ZREMRANGEBYSCORE".into(), k, bound(r), bound(r)],
        24 => vec!["ZREMRANGEBYLEX".into(), lkey(r), lex_bound(r), lex_bound(r)],
        25 | 26 => {
            let mut c = vec![r.pick(&["ZPOPMIN", "ZPOPMAX"]).to_string(), k];
            if r.chance(60) {
                c.push(r.pick(&["0", "1", "2", "5", "-1", "x", "100"]).to_string());
            }
            if r.chance(3) {
                c.push("1".into());
            }
            c
        }
        27 => {
            let n = r.int(1, 3);
            let mut c = vec![
                "ZMPOP".to_string(),
                if r.chance(5) {
                    "0".into()
                } else {
                    n.to_string()
                },
            ];
            for _ in 0..n {
                c.push(zkey(r));
            }
            c.push(r.pick(&["MIN", "MAX", "max", "foo"]).to_string());
            if r.chance(50) {
                c.push("COUNT".into());
                c.push(r.pick(&["1", "2", "10", "0", "-1", "x"]).to_string());
            }
            c
        }
        28..=30 => {
            let op = r.pick(&[
                "ZUNION",
                "ZINTER",
                "ZDIFF",
                "ZUNIONSTORE",
                "ZINTERSTORE",
                "ZDIFFSTORE",
                "ZINTERCARD",
            ]);
            let mut c = vec![op.to_string()];
            if op.ends_with("STORE") {
                c.push(wkey(r));
            }
            let n = r.int(1, 3);
            c.push(if r.chance(4) {
                r.pick(&["0", "-1", "x", "9"]).to_string()
            } else {
                n.to_string()
            });
            for _ in 0..n {
                c.push(zkey(r));
            }
            if r.chance(40) {
                c.push("WEIGHTS".into());
                for _ in 0..n {
                    c.push(
                        r.pick(&["1", "2", "-1", "0", "0.5", "inf", "x"])
                            .to_string(),
                    );
                }
            }
            if r.chance(40) {
                c.push("AGGREGATE".into());
                c.push(r.pick(&["SUM", "MIN", "MAX", "min", "avg"]).to_string());
            }
            if r.chance(40) {
                c.push("WITHSCORES".into());
            }
            if r.chance(20) {
                c.push("LIMIT".into());
                c.push(r.pick(&["0", "1", "-1", "2"]).to_string());
            }
            c
        }
        31 => {
            how = Cmp::SameCount;
            let mut c = vec!["ZRANDMEMBER".to_string(), k];
            if r.chance(80) {
                c.push(
                    r.pick(&[
                        "0",
                        "1",
                        "-1",
                        "3",
                        "-5",
                        "100",
                        "x",
                        "-9223372036854775808",
                        "9223372036854775807",
                        "-4611686018427387905",
                    ])
                    .to_string(),
                );
                // Without WITHSCORES Redis would really try to send
                // 4.6e18 picks: only with it (an error) for that count.
                if c[2] == "-4611686018427387905" || r.chance(50) {
                    c.push(r.pick(&["WITHSCORES", "withscores"]).to_string());
                } else if r.chance(3) {
                    c.push("foo".into());
                }
            }
            c
        }
        32 => {
            how = Cmp::FullScan;
            let mut c = vec!["ZSCAN".to_string(), k, "0".into()];
            if r.chance(30) {
                c.push("MATCH".into());
                c.push(r.pick(&["a*", "*", "[a-c]", "x*"]).to_string());
            }
            if r.chance(30) {
                c.push("COUNT".into());
                c.push(r.pick(&["1", "5", "0", "x", "100"]).to_string());
            }
            c
        }
        33 => {
            if r.chance(50) {
                // A plain set: a ZUNION/ZINTER/ZDIFF input, WRONGTYPE elsewhere.
                let mut c = vec!["SADD".to_string(), "st".into()];
                for _ in 0..r.int(1, 3) {
                    c.push(member(r));
                }
                c
            } else {
                vec!["OBJECT".into(), "ENCODING".into(), k]
            }
        }
        34 => {
            if r.chance(40) {
                // Blocking pops: served at once, or a null array after
                // 10 ms on both servers.
                if r.chance(50) {
                    vec![
                        r.pick(&["BZPOPMIN", "BZPOPMAX"]).to_string(),
                        k,
                        zkey(r),
                        "0.01".into(),
                    ]
                } else {
                    let mut c = vec!["BZMPOP".to_string(), "0.01".into(), "2".into(), k, zkey(r)];
                    c.push(r.pick(&["MIN", "MAX"]).to_string());
                    if r.chance(50) {
                        c.extend(["COUNT".to_string(), r.int(1, 4).to_string()]);
                    }
                    c
                }
            } else {
                vec![r.pick(&["DEL", "TYPE", "EXISTS"]).to_string(), k]
            }
        }
        _ => {
            // Wrong types: string and bit commands on sorted sets (only
            // `str` is ever a string: OBJECT ENCODING of strings that bit
            // commands made is the string module's business).
            let op = r.pick(&[
                "GET",
                "GETBIT",
                "BITCOUNT",
                "LCS",
                "STRLEN",
                "SET",
                "BITFIELD_RO",
            ]);
            match *op {
                "GETBIT" => vec![op.to_string(), k, "1".into()],
                "BITFIELD_RO" => vec![op.to_string(), k, "GET".into(), "u8".into(), "0".into()],
                "SET" => vec![op.to_string(), "str".into(), "v".into()],
                "LCS" => vec![op.to_string(), k, "str".into()],
                _ => vec![op.to_string(), k],
            }
        }
    };
    (c.iter().map(|s| b(s)).collect(), how)
}

/// Sorted sets of thousands of members (a B+tree several levels deep),
/// many score ties (order by member), ranges and removals in bulk.
fn gen_zset_large(r: &mut Rng) -> (Vec<Vec<u8>>, Cmp) {
    let k = r.pick(&["big", "big", "big2"]).to_string();
    let m = |r: &mut Rng| format!("m{}", r.below(4000));
    let sc = |r: &mut Rng| match r.below(10) {
        0 => format!("{}.25", r.int(-50, 50)),
        1 => "inf".to_string(),
        _ => format!("{}", r.int(-100, 100)),
    };
    let mut how = Cmp::Exact;
    let c: Vec<String> = match r.below(20) {
        0..=6 => {
            let mut c = vec!["ZADD".to_string(), k];
            if r.chance(20) {
                c.push(r.pick(&["NX", "XX", "GT", "LT", "CH"]).to_string());
            }
            for _ in 0..r.int(1, 40) {
                c.push(sc(r));
                c.push(m(r));
            }
            c
        }
        7 => {
            let mut c = vec!["ZREM".to_string(), k];
            for _ in 0..r.int(1, 10) {
                c.push(m(r));
            }
            c
        }
        8 => vec![
            r.pick(&["ZRANK", "ZREVRANK", "ZSCORE"]).to_string(),
            k,
            m(r),
        ],
        9 => {
            let a = r.int(-3000, 3000);
            let mut c = vec![
                r.pick(&["ZRANGE", "ZREVRANGE"]).to_string(),
                k,
                a.to_string(),
                (a + r.int(-5, 30)).to_string(),
            ];
            if r.chance(50) {
                c.push("WITHSCORES".into());
            }
            c
        }
        10 | 11 => {
            let a = r.int(-100, 100);
            let (lo, hi) = (format!("({a}"), format!("{}", a + r.int(0, 10)));
            let mut c = vec!["ZRANGE".to_string(), k, lo, hi, "BYSCORE".into()];
            if r.chance(50) {
                c.swap(2, 3);
                c.push("REV".into());
            }
            if r.chance(50) {
                c.extend([
                    "LIMIT".to_string(),
                    r.int(0, 20).to_string(),
                    r.int(-1, 20).to_string(),
                ]);
            }
            if r.chance(50) {
                c.push("WITHSCORES".into());
            }
            c
        }
        12 => {
            let a = r.int(-100, 100);
            vec![
                "ZCOUNT".to_string(),
                k,
                a.to_string(),
                format!("({}", a + r.int(0, 50)),
            ]
        }
        13 => {
            let a = r.int(-2000, 2000);
            vec![
                "ZREMRANGEBYRANK".to_string(),
                k,
                a.to_string(),
                (a + r.int(0, 20)).to_string(),
            ]
        }
        14 => {
            let a = r.int(-100, 100);
            vec![
                "ZREMRANGEBYSCORE".to_string(),
                k,
                a.to_string(),
                (a + r.int(0, 3)).to_string(),
            ]
        }
        15 => vec![
            r.pick(&["ZPOPMIN", "ZPOPMAX"]).to_string(),
            k,
            r.int(1, 5).to_string(),
        ],
        16 => vec![
            r.pick(&["ZINTERSTORE", "ZUNIONSTORE", "ZDIFFSTORE"])
                .to_string(),
            "out".into(),
            "2".into(),
            "big".into(),
            "big2".into(),
        ],
        17 => vec![r.pick(&["ZCARD", "ZCARD", "OBJECT"]).to_string(), k],
        18 => {
            how = Cmp::FullScan;
            vec![
                "ZSCAN".to_string(),
                k,
                "0".into(),
                "COUNT".into(),
                r.int(1, 200).to_string(),
            ]
        }
        _ => {
            let a = r.int(0, 3000);
            vec![
                "ZRANGESTORE".to_string(),
                "out".into(),
                k,
                a.to_string(),
                (a + r.int(0, 200)).to_string(),
            ]
        }
    };
    let c = if c[0] == "OBJECT" {
        vec!["OBJECT".into(), "ENCODING".into(), c[1].clone()]
    } else {
        c
    };
    (c.iter().map(|s| b(s)).collect(), how)
}

/// A raw (member, score) pair of a scan reply.
type Pair = (Vec<u8>, Vec<u8>);

/// Scan to the end (bounded): the sorted, deduplicated pairs, or the
/// first reply when it is not a scan reply.
fn full_scan(conn: &mut Conn, c: &[Vec<u8>]) -> Result<Vec<Pair>, Vec<u8>> {
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

fn compare(
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

fn run(
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

#[test]
fn bit_commands_match_redis() {
    run("kv-bit-diff", gen_bit, &[], 4000);
}

/// Small listpack thresholds so both encodings and the conversion are
/// exercised by short sequences.
#[test]
fn zset_commands_match_redis() {
    run(
        "kv-zset-diff",
        gen_zset,
        &[
            &["CONFIG", "SET", "zset-max-listpack-entries", "6"],
            &["SET", "str", "abc"],
        ],
        6000,
    );
}

/// Thousands of members: the large form several levels deep.
#[test]
fn large_zsets_match_redis() {
    run("kv-zset-diff-large", gen_zset_large, &[], 4000);
}

/// Tiny thresholds (3 entries, 2-byte members): conversions all the time,
/// and RESP3 from the start.
#[test]
fn zset_commands_match_redis_tiny_limits_resp3() {
    run(
        "kv-zset-diff-tiny",
        gen_zset,
        &[
            &["CONFIG", "SET", "zset-max-listpack-entries", "3"],
            &["CONFIG", "SET", "zset-max-listpack-value", "2"],
            &["SET", "str", "abc"],
            &["HELLO", "3"],
        ],
        3000,
    );
}

/// Redis's default thresholds.
#[test]
fn zset_commands_match_redis_default_limits() {
    run(
        "kv-zset-diff-default",
        gen_zset,
        &[&["SET", "str", "abc"]],
        3000,
    );
}

/// One step of a multi-client scenario.
enum Step {
    /// Send and read the reply.
    Call(usize, &'static [&'static str]),
    /// Send a command that blocks; wait until the server counts `n`
    /// blocked clients.
    Block(usize, &'static [&'static str], usize),
    /// Read the reply a blocked client got.
    Read(usize),
}

/// `INFO clients`'s `blocked_clients` reaches `n` (bounded wait).
fn wait_blocked(ctl: &mut Conn, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    let ok = wait_for(Duration::from_secs(5), || {
        let r = ctl.call(&cmd(&["INFO", "clients"]));
        String::from_utf8_lossy(&r).contains(&want)
    });
    assert!(ok, "never {want}");
}

/// The replies of a scenario on one server.
fn play(addr: SocketAddr, steps: &[Step]) -> Vec<(String, Vec<u8>)> {
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

/// BZPOPMIN / BZPOPMAX / BZMPOP against redis-server: served at once when
/// a key holds a sorted set; blocked clients woken by ZADD (and by a STORE
/// creating the key) in the order they blocked; a list waiter on the same
/// key is not served by a sorted set; timeouts answer a null array.
#[test]
fn blocking_pops_match_redis() {
    use Step::*;
    if !Path::new(REDIS).exists() {
        eprintln!("skipping blocking_pops_match_redis: {REDIS} not installed");
        return;
    }
    let steps = [
        Call(0, &["ZADD", "k", "1", "a", "2", "b", "3", "c"]),
        Call(0, &["BZPOPMIN", "nokey", "k", "0"]),
        Call(0, &["BZPOPMAX", "k", "0"]),
        Call(0, &["BZMPOP", "0", "2", "nokey", "k", "MIN", "COUNT", "5"]),
        Call(0, &["BZPOPMIN", "k", "-1"]),
        Call(0, &["BZPOPMIN", "k", "x"]),
        Call(0, &["BZMPOP", "0", "0", "k", "MIN"]),
        Call(0, &["BZMPOP", "x", "1", "k", "MIN"]),
        Call(0, &["SET", "str", "v"]),
        Call(0, &["BZPOPMIN", "str", "0"]),
        Call(0, &["BZPOPMIN", "nokey", "0.01"]),
        Call(0, &["BZMPOP", "0.01", "1", "nokey", "MAX"]),
        // FIFO: three clients on one key, one ZADD of two members.
        Block(0, &["BZPOPMIN", "k", "0"], 1),
        Block(1, &["BZPOPMAX", "other", "k", "0"], 2),
        Block(2, &["BZMPOP", "0", "1", "k", "MAX", "COUNT", "2"], 3),
        Call(3, &["ZADD", "k", "1", "a", "2", "b"]),
        Read(0),
        Read(1),
        Call(3, &["EXISTS", "k"]),
        Call(3, &["ZADD", "k", "5", "x", "6", "y", "7", "z"]),
        Read(2),
        Call(3, &["ZRANGE", "k", "0", "-1", "WITHSCORES"]),
        // A list waiter and a sorted-set waiter on one key.
        Call(3, &["DEL", "k"]),
        Block(0, &["BLPOP", "k", "0"], 1),
        Block(1, &["BZPOPMIN", "k", "0"], 2),
        Call(3, &["ZADD", "k", "1", "m"]),
        Read(1),
        Call(3, &["LPUSH", "k", "e"]),
        Read(0),
        // A STORE that creates the key wakes the waiter.
        Call(3, &["ZADD", "src", "4", "p", "5", "q"]),
        Block(2, &["BZPOPMAX", "dst", "0"], 1),
        Call(3, &["ZUNIONSTORE", "dst", "1", "src"]),
        Read(2),
        Call(3, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        // RESP3 shapes.
        Call(3, &["HELLO", "3"]),
        Call(3, &["BZPOPMIN", "src", "0"]),
        Call(3, &["BZMPOP", "0", "1", "src", "MIN"]),
        Call(3, &["BZPOPMIN", "nokey", "0.01"]),
    ];
    let p = Prefix::new("kv-zset-block");
    let redis = Redis::start(&p.path("redis"));
    let (_gyre, gaddr) = start_gyre(&p);
    let want = play(redis.addr, &steps);
    let got = play(gaddr, &steps);
    for ((what, e), (_, a)) in want.iter().zip(&got) {
        if what.contains("HELLO") {
            continue;
        }
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(e),
            "{what}"
        );
    }
    assert_eq!(want.len(), got.len());
}
