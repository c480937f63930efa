//! The scripted multi-client harness of the kv differential tests: a
//! redis-server and a gyre kv process on 127.0.0.1, the same script run
//! against each, transcripts compared byte for byte.
//!
//! A script line is `N> CMD ARGS...` (client N sends, one reply frame
//! read), `N>K CMD ...` (K frames read; `N>0`: a command with no reply), `N>? CMD ...` (one frame read, not
//! compared: HELLO's client id), `N>s CMD ...` (array reply compared with
//! its elements sorted: Redis's dict order is random), `N>l CMD ...` (an
//! ACL LOG or CLIENT INFO reply: `age-seconds` masked, client lines cut to
//! the fields that do not depend on the connection), `N>i INFO section` (lines sorted,
//! `cmdstat_` times and `latency_percentiles_usec_` values masked),
//! `N>h LATENCY HISTOGRAM ...` (entries sorted by name, each
//! distribution checked and replaced by `<cdf ok>`), `N>t CMD ...` (the
//! latency monitor's times and milliseconds masked: digit runs outside
//! aggregate headers become `N`), `sync N M ...`
//! (each listed client PINGs and everything it received before the PONG
//! is compared: messages others' commands sent it), `sleep MS`; `''` is
//! an empty argument, `\s` a space inside one.
#![allow(dead_code, clippy::unwrap_used)]

use crate::util::ReadSome;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::util::{Prefix, Server};

pub const REDIS: &str = "/usr/bin/redis-server";

/// A redis-server on 127.0.0.1, killed on drop.
pub struct Redis {
    child: Child,
    pub port: u16,
    pub dir: Prefix,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_redis(extra: &[&str]) -> Option<Redis> {
    start_redis_conf(None, extra)
}

/// [`start_redis`] reading a configuration file first.
pub fn start_redis_conf(conf: Option<&Path>, extra: &[&str]) -> Option<Redis> {
    if !Path::new(REDIS).exists() {
        eprintln!("skipping: {REDIS} not installed (apt-get install redis-server)");
        return None;
    }
    let dir = Prefix::new("redis-peer");
    let (child, addr) = crate::util::kv::spawn_redis(|port| {
        let mut cmd = Command::new(REDIS);
        if let Some(c) = conf {
            cmd.arg(c);
        }
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&dir.dir)
            .args(extra);
        cmd
    });
    Some(Redis {
        child,
        port: addr.port(),
        dir,
    })
}

pub struct Gyre {
    pub p: Prefix,
    pub s: Server,
    pub port: u16,
}

/// gyre through [`crate::util::kv::start`]: ready on PING (or -NOAUTH),
/// retried when its port was taken meanwhile.
pub fn start_gyre(name: &str, kv_extra: &str) -> Gyre {
    let kv = crate::util::kv::start(name, kv_extra);
    Gyre {
        port: kv.addr.port(),
        p: kv.p,
        s: kv.s,
    }
}

/// A raw RESP client with a deadline on every read.
pub struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn open(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Conn { s, buf: Vec::new() }
    }

    pub fn send(&mut self, args: &[&str]) {
        let mut b = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            b.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        // A connection the server closed shows as `<closed>` on reading.
        let _ = self.s.write_all(&b);
    }

    /// One whole frame, raw.
    pub fn frame(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(n) = frame_len(&self.buf, 0) {
                return self.buf.drain(..n).collect();
            }
            assert!(Instant::now() < deadline, "no reply frame");
            let mut tmp = [0u8; 16384];
            match self.s.read_some(&mut tmp) {
                Ok(0) => return b"<closed>".to_vec(),
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return b"<closed>".to_vec()
                }
                Err(e) => panic!("read: {e}; have {:?}", String::from_utf8_lossy(&self.buf)),
            }
        }
    }
}

fn line_end(b: &[u8], at: usize) -> Option<usize> {
    b.get(at..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| at + p)
}

/// Length of the frame starting at `at`, if complete.
pub fn frame_len(b: &[u8], at: usize) -> Option<usize> {
    let t = *b.get(at)?;
    let e = line_end(b, at)?;
    let head = std::str::from_utf8(&b[at + 1..e]).ok()?;
    match t {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(e + 2 - at),
        b'$' | b'=' | b'!' => {
            let n: i64 = head.parse().ok()?;
            if n < 0 {
                return Some(e + 2 - at);
            }
            let end = e + 2 + n as usize + 2;
            (b.len() >= end).then_some(end - at)
        }
        b'*' | b'>' | b'~' | b'%' | b'|' => {
            let n: i64 = head.parse().ok()?;
            let n = if t == b'%' || t == b'|' { n * 2 } else { n };
            let mut pos = e + 2;
            for _ in 0..n.max(0) {
                pos += frame_len(b, pos)?;
            }
            Some(pos - at)
        }
        _ => Some(b.len() - at),
    }
}

/// An array frame with its elements sorted (order-free replies).
fn sorted_array(f: &[u8]) -> Vec<u8> {
    let e = line_end(f, 0).unwrap();
    let mut items = Vec::new();
    let mut pos = e + 2;
    while pos < f.len() {
        let n = frame_len(f, pos).unwrap();
        items.push(f[pos..pos + n].to_vec());
        pos += n;
    }
    items.sort();
    let mut out = f[..e + 2].to_vec();
    for i in items {
        out.extend_from_slice(&i);
    }
    out
}

/// An INFO reply's lines sorted (commandstats are in Redis's dict order)
/// with the times in `cmdstat_` lines masked; the bulk length dropped.
fn mask_info(f: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(f);
    let body = text.split_once("\r\n").map_or("", |(_, b)| b);
    let mut lines: Vec<String> = body
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|l| {
            if let Some(rest) = l.strip_prefix("latency_percentiles_usec_") {
                return mask_percentiles(rest);
            }
            if !l.starts_with("cmdstat_") {
                return l.to_string();
            }
            l.split(',')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.ends_with("usec") || k == "usec_per_call" => format!("{k}=?"),
                    _ => kv.to_string(),
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    lines.sort();
    format!("INFO<{}>", lines.join(" ; ")).into_bytes()
}

/// A latencystats line (after its prefix) with each `pN=V` value
/// replaced by `<us>` when it is a microsecond figure with 3 decimals.
fn mask_percentiles(rest: &str) -> String {
    let (name, vals) = rest.split_once(':').unwrap_or((rest, ""));
    let masked: Vec<String> = vals
        .split(',')
        .filter(|kv| !kv.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v))
                if v.split_once('.').is_some_and(|(a, b)| {
                    !a.is_empty()
                        && a.bytes().all(|c| c.is_ascii_digit())
                        && b.len() == 3
                        && b.bytes().all(|c| c.is_ascii_digit())
                }) =>
            {
                format!("{k}=<us>")
            }
            _ => format!("<bad {kv}>"),
        })
        .collect();
    format!("latency_percentiles_usec_{name}:{}", masked.join(","))
}

/// A parsed reply, enough for [`mask_histogram`].
#[derive(Debug)]
enum Reply {
    Line(u8, String),
    Bulk(String),
    Agg(u8, Vec<Reply>),
}

fn parse_reply(b: &[u8], at: usize) -> (Reply, usize) {
    let e = line_end(b, at).unwrap();
    let t = b[at];
    let head = String::from_utf8_lossy(&b[at + 1..e]).into_owned();
    match t {
        b'$' => {
            let n: usize = head.parse().unwrap();
            let s = String::from_utf8_lossy(&b[e + 2..e + 2 + n]).into_owned();
            (Reply::Bulk(s), e + 2 + n + 2)
        }
        b'*' | b'%' => {
            let n: usize = head.parse().unwrap();
            let n = if t == b'%' { 2 * n } else { n };
            let mut pos = e + 2;
            let mut items = Vec::new();
            for _ in 0..n {
                let (r, next) = parse_reply(b, pos);
                items.push(r);
                pos = next;
            }
            (Reply::Agg(t, items), pos)
        }
        _ => (Reply::Line(t, head), e + 2),
    }
}

/// The bucket tops LATENCY HISTOGRAM may show (µs): HdrHistogram's
/// range tops at 1024 ns x 2^k, 2 significant digits.
fn cdf_tops() -> Vec<i64> {
    (0..21)
        .map(|k| {
            let level: i64 = 1024 << k;
            let width = 1i64 << (64 - (level | 255).leading_zeros() - 8);
            (level + width - 1) / 1000
        })
        .collect()
}

/// A LATENCY HISTOGRAM reply with its entries sorted by command name and
/// each `histogram_usec` checked (known bucket tops, rising, cumulative
/// counts rising to `calls`) and replaced by `<cdf ok>`: the values are
/// timings, the structure and the call counts are compared.
fn mask_histogram(f: &[u8]) -> Vec<u8> {
    let (r, _) = parse_reply(f, 0);
    let Reply::Agg(kind, items) = r else {
        return f.to_vec();
    };
    let tops = cdf_tops();
    let mut entries: Vec<String> = items
        .chunks(2)
        .map(|kv| {
            let name = format!("{:?}", kv[0]);
            let Reply::Agg(ik, inner) = &kv[1] else {
                return format!("{name} => <not a map>");
            };
            let mut calls = -1;
            let mut shown = Vec::new();
            for p in inner.chunks(2) {
                match (&p[0], &p[1]) {
                    (Reply::Bulk(k), Reply::Line(b':', n)) if k == "calls" => {
                        calls = n.parse().unwrap();
                        shown.push(format!("calls={n}"));
                    }
                    (Reply::Bulk(k), Reply::Agg(hk, cdf)) if k == "histogram_usec" => {
                        let nums: Vec<i64> = cdf
                            .iter()
                            .map(|x| match x {
                                Reply::Line(b':', n) => n.parse().unwrap(),
                                _ => -1,
                            })
                            .collect();
                        let pairs: Vec<(i64, i64)> = nums.chunks(2).map(|c| (c[0], c[1])).collect();
                        let ok = !pairs.is_empty()
                            && pairs.iter().all(|(t, _)| tops.contains(t))
                            && pairs.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1)
                            && pairs.last().unwrap().1 == calls;
                        shown.push(format!(
                            "histogram_usec({})={}",
                            *hk as char,
                            if ok {
                                "<cdf ok>".into()
                            } else {
                                format!("<bad {pairs:?}>")
                            }
                        ));
                    }
                    (k, v) => shown.push(format!("{k:?}={v:?}")),
                }
            }
            format!("{name} => {}({})", *ik as char, shown.join(", "))
        })
        .collect();
    entries.sort();
    format!("HIST{}<{}>", kind as char, entries.join(" ; ")).into_bytes()
}

/// CLIENT LIST fields that do not depend on the connection, timing or
/// buffering.
const STABLE_CLIENT_FIELDS: &[&str] = &[
    "name", "flags", "db", "sub", "psub", "ssub", "multi", "oll", "events", "cmd", "user", "redir",
    "resp",
];

/// An ACL LOG reply with `age-seconds` masked and `client-info` cut to
/// [`STABLE_CLIENT_FIELDS`] (the field names are all kept, in order).
fn mask_acl_log(f: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(f);
    let lines: Vec<&str> = text.split("\r\n").collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        i += 1;
        let next = lines.get(i).copied().unwrap_or_default();
        // A bulk header before a masked value goes (its length differs).
        if l.starts_with('$')
            && (next.starts_with("id=") || out.last().is_some_and(|p| p == "age-seconds"))
        {
            continue;
        }
        if out.last().is_some_and(|p| p == "age-seconds") {
            out.push("<age>".into());
            continue;
        }
        if l.starts_with("id=") {
            let kept: Vec<String> = l
                .split(' ')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if !STABLE_CLIENT_FIELDS.contains(&k) => format!("{k}=?"),
                    _ => kv.to_string(),
                })
                .collect();
            out.push(kept.join(" "));
            continue;
        }
        out.push(l.to_string());
    }
    out.join("\r\n").into_bytes()
}

/// Digit runs become `N`, except in aggregate headers (`*2`, `%1`):
/// LATENCY LATEST / HISTORY / GRAPH / DOCTOR with their unix times,
/// milliseconds, "3s" labels and bulk lengths masked, their shape kept.
fn mask_digits(f: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(f);
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with(['*', '%']) {
            out.push_str(line);
            continue;
        }
        let mut prev_digit = false;
        for ch in line.chars() {
            if ch.is_ascii_digit() {
                if !prev_digit {
                    out.push('N');
                }
                prev_digit = true;
            } else {
                out.push(ch);
                prev_digit = false;
            }
        }
    }
    out.into_bytes()
}

pub fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace("\r\n", "\\r\\n")
}

/// Runs `script` against the server on `port`; the transcript.
pub fn run_script(port: u16, script: &str) -> Vec<String> {
    let mut conns: Vec<Conn> = Vec::new();
    let mut out = Vec::new();
    let trace = std::env::var_os("KVDIFF_TRACE").is_some();
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if trace {
            eprintln!("{port}: {line}");
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if words[0] == "sleep" {
            std::thread::sleep(Duration::from_millis(words[1].parse().unwrap()));
            continue;
        }
        if words[0] == "sync" {
            for w in &words[1..] {
                let i: usize = w.parse().unwrap();
                let c = &mut conns[i];
                c.send(&["PING"]);
                let mut got = Vec::new();
                loop {
                    let f = c.frame();
                    if f == b"+PONG\r\n" || f == b"*2\r\n$4\r\npong\r\n$0\r\n\r\n" {
                        break;
                    }
                    if f == b"<closed>" {
                        got.push(f);
                        break;
                    }
                    got.push(f);
                }
                let shown: Vec<String> = got.iter().map(|f| show(f)).collect();
                out.push(format!("sync {i}: {}", shown.join(" | ")));
            }
            continue;
        }
        let (who, mode) = words[0].split_once('>').unwrap();
        let i: usize = who.parse().unwrap();
        while conns.len() <= i {
            conns.push(Conn::open(port));
        }
        let c = &mut conns[i];
        let args: Vec<String> = words[1..]
            .iter()
            .map(|w| {
                if *w == "''" {
                    String::new()
                } else {
                    w.replace("\\s", " ")
                }
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        c.send(&args);
        let (n, compare, sort) = match mode {
            "" | "l" | "i" | "h" | "t" => (1, true, false),
            "?" => (1, false, false),
            "s" => (1, true, true),
            k => (k.parse().unwrap(), true, false),
        };
        let mut frames = Vec::new();
        for _ in 0..n {
            let f = c.frame();
            frames.push(if sort {
                sorted_array(&f)
            } else if mode == "l" {
                mask_acl_log(&f)
            } else if mode == "i" {
                mask_info(&f)
            } else if mode == "h" {
                mask_histogram(&f)
            } else if mode == "t" {
                mask_digits(&f)
            } else {
                f
            });
        }
        let shown: Vec<String> = frames.iter().map(|f| show(f)).collect();
        out.push(if compare {
            format!("{line} -> {}", shown.join(" | "))
        } else {
            format!("{line} -> (not compared)")
        });
    }
    out
}

/// Runs `script` on both servers and asserts identical transcripts.
pub fn differential(name: &str, redis_args: &[&str], kv_extra: &str, script: &str) {
    let Some(redis) = start_redis(redis_args) else {
        return;
    };
    let gyre = start_gyre(name, kv_extra);
    let want = run_script(redis.port, script);
    let got = run_script(gyre.port, script);
    assert_same(name, &want, &got, &gyre.s.log());
}

/// Asserts two transcripts are the same, showing where they part.
pub fn assert_same(name: &str, want: &[String], got: &[String], gyre_log: &str) {
    // Shown with --nocapture: what was compared.
    for l in got {
        eprintln!("{name}: {l}");
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if w != g {
            // Where they part: the frames from the first difference on.
            let (wf, gf): (Vec<&str>, Vec<&str>) =
                (w.split(" | ").collect(), g.split(" | ").collect());
            let k = wf.iter().zip(&gf).take_while(|(a, b)| a == b).count();
            panic!(
                "{name}: step {i} differs at frame {k}\nredis: {}\ngyre:  {}\nwhole redis: {w}\ngyre log:\n{}",
                wf[k.min(wf.len())..].join(" | "),
                gf[k.min(gf.len())..].join(" | "),
                gyre_log
            );
        }
    }
    assert_eq!(want.len(), got.len());
}
