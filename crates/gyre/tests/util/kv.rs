//! The kv side of the binary tests: a gyre with a `kv {}` block, a
//! redis-server beside it, and the dataset read back as text (shared by
//! kv_persist and kv_aof).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::http::free_port;
use super::{wait_for, Prefix, Server};

pub const REDIS: &str = "/usr/bin/redis-server";

pub struct Kv {
    pub p: Prefix,
    pub s: Server,
    pub addr: SocketAddr,
}

pub fn start(name: &str, kv_extra: &str) -> Kv {
    let p = Prefix::new(name);
    start_in(p, kv_extra)
}

/// Writes the config with a free port and starts gyre, retrying with
/// another port when the master could not bind the one picked (something
/// took it between `free_port` and the bind: "Address already in use").
pub fn start_in(p: Prefix, kv_extra: &str) -> Kv {
    let (s, addr) = start_at(&p, kv_extra);
    Kv { p, s, addr }
}

/// [`start_in`] for a prefix the caller keeps: the server and its address.
pub fn start_at(p: &Prefix, kv_extra: &str) -> (Server, SocketAddr) {
    for _attempt in 0..3 {
        let port = free_port();
        p.conf(&format!(
            "daemon off;\nerror_log logs/error.log info;\nworker_processes 1;\nevents {{}}\n\
             kv {{\n    listen 127.0.0.1:{port};\n{kv_extra}\n}}\n"
        ));
        let before = std::fs::metadata(p.path("logs/error.log")).map_or(0, |m| m.len() as usize);
        let mut s = p.spawn();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let up = wait_for(Duration::from_secs(10), || {
            serving(addr) || matches!(s.child.try_wait(), Ok(Some(_)))
        });
        if up && serving(addr) {
            return (s, addr);
        }
        let log = s.log();
        if !log
            .get(before..)
            .unwrap_or("")
            .contains("Address already in use")
        {
            panic!("gyre's kv did not answer PING; log:\n{log}");
        }
        let _ = s.child.kill();
        let _ = s.child.wait();
    }
    panic!("no free port could be bound in 3 attempts");
}

/// Runs `cmd`, reconnecting and running it again when the socket call was
/// interrupted (EINTR: a socket with a timeout returns it when the test
/// process is stopped and continued, and the `redis` crate does not
/// retry). Only for commands that may run twice (SET, a pipeline of SETs).
pub fn query_retry<T: redis::FromRedisValue>(
    c: &mut redis::Connection,
    addr: SocketAddr,
    run: impl Fn(&mut redis::Connection) -> redis::RedisResult<T>,
) -> T {
    for _ in 0..3 {
        match run(c) {
            Ok(v) => return v,
            Err(e) if e.is_io_error() && interrupted(&e) => {
                *c = connect(addr);
            }
            Err(e) => panic!("{e}"),
        }
    }
    run(c).unwrap()
}

fn interrupted(e: &redis::RedisError) -> bool {
    use std::error::Error;
    let mut src: Option<&(dyn Error + 'static)> = e.source();
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::Interrupted;
        }
        src = s.source();
    }
    e.to_string().contains("Interrupted system call")
}

/// The kv process serves commands: PING answers PONG, or -NOAUTH where a
/// password is required (not -LOADING, not refused).
/// PING answers, or says a password is needed (the server is up).
pub fn serving(addr: SocketAddr) -> bool {
    match ping_reply(addr) {
        Ok(_) => true,
        Err(e) => e.code() == Some("NOAUTH") || e.kind() == redis::ErrorKind::AuthenticationFailed,
    }
}

fn ping_reply(addr: SocketAddr) -> redis::RedisResult<String> {
    redis::Client::open(format!("redis://{addr}/"))
        .and_then(|cl| cl.get_connection_with_timeout(Duration::from_millis(500)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
}

/// PING answers PONG (not -LOADING, not refused).
pub fn ping(addr: SocketAddr) -> bool {
    ping_reply(addr).is_ok()
}

pub fn connect(addr: SocketAddr) -> redis::Connection {
    let c = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let c = c
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

pub fn kv_pid(kv: &Kv) -> u32 {
    assert!(kv.s.logged("start kv process", Duration::from_secs(5)));
    kv.s.log()
        .lines()
        .rev()
        .filter_map(|l| l.split("start kv process ").nth(1))
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

pub fn info_field(c: &mut redis::Connection, field: &str) -> String {
    info_in(c, "persistence", field)
}

/// Field `field` of INFO section `section`.
pub fn info_in(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    field_of(&info, field)
}

/// Field `field` of an INFO reply already read (several fields of one
/// snapshot).
pub fn field_of(info: &str, field: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .to_string()
}

pub fn wait_bgsave_done(c: &mut redis::Connection) {
    assert!(wait_for(Duration::from_secs(30), || info_field(
        c,
        "rdb_bgsave_in_progress"
    ) == "0"));
}

/// A redis-server on a free port in `dir`, loading `dir/file` if present.
pub struct Redis {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Redis {
    pub fn start(dir: &Path, file: &str) -> Redis {
        Redis::start_with(dir, file, &["--appendonly", "no"])
    }

    /// With more arguments (`--appendonly yes`, ...); retried on another
    /// port when redis-server exits at once (its port was taken meanwhile).
    pub fn start_with(dir: &Path, file: &str, extra: &[&str]) -> Redis {
        let (child, addr) = spawn_redis(|port| {
            let mut cmd = Command::new(REDIS);
            cmd.args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--daemonize", "no"])
            .args(extra)
            // redis.conf's value, gyre's default (the compiled-in default
            // of Debian's 7.0.15 is 512).
            .args(["--hash-max-listpack-entries", "128"])
            .arg("--dir")
            .arg(dir)
            .args(["--dbfilename", file]);
            cmd
        });
        Redis { child, addr }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the redis-server that `command(port)` describes (output
/// discarded) on a free port, ready when it answers PING or -NOAUTH (not
/// on a connect, which another test's server on a reused port accepts
/// too); retried on another port when it exits at once (its port was
/// taken meanwhile).
pub fn spawn_redis(mut command: impl FnMut(u16) -> Command) -> (Child, SocketAddr) {
    for _attempt in 0..3 {
        let port = free_port();
        let mut child = command(port)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut exited = false;
        wait_for(Duration::from_secs(10), || {
            exited = matches!(child.try_wait(), Ok(Some(_)));
            exited || serving(addr)
        });
        if !exited && serving(addr) {
            return (child, addr);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(exited, "redis-server did not start");
    }
    panic!("redis-server could not bind a free port in 3 attempts");
}

pub fn have(bin: &str) -> bool {
    if Path::new(bin).exists() {
        true
    } else {
        eprintln!("skipping: {bin} not installed");
        false
    }
}

/// Strings, integers, long compressible and binary values, TTLs, and every
/// aggregate in both of its encodings, in databases 0 and 5.
pub fn populate(c: &mut redis::Connection, lists: bool) {
    for db in [0, 5] {
        let _: () = redis::cmd("SELECT").arg(db).query(c).unwrap();
        let mut p = redis::pipe();
        p.cmd("SET").arg("str").arg("hello").ignore();
        p.cmd("SET").arg("int").arg("-123456").ignore();
        p.cmd("SET").arg("bigint").arg("12345678901234").ignore();
        p.cmd("SET").arg("long").arg("abc".repeat(3000)).ignore();
        p.cmd("SET")
            .arg("bin")
            .arg(vec![0u8, 255, 10, 13, 0])
            .ignore();
        p.cmd("SET").arg("empty").arg("").ignore();
        p.cmd("SET").arg("ttl").arg("t").ignore();
        p.cmd("PEXPIREAT")
            .arg("ttl")
            .arg(4_000_000_000_000i64)
            .ignore();
        p.cmd("HSET")
            .arg("hsmall")
            .arg("f1")
            .arg("v1")
            .arg("n")
            .arg("7")
            .ignore();
        for i in 0..300 {
            p.cmd("HSET")
                .arg("hbig")
                .arg(format!("field:{i}"))
                .arg(i * 3)
                .ignore();
        }
        p.cmd("HSET")
            .arg("hlongval")
            .arg("f")
            .arg("x".repeat(100))
            .ignore();
        p.cmd("SADD")
            .arg("sint")
            .arg(1)
            .arg(-70000)
            .arg(9_000_000_000i64)
            .ignore();
        p.cmd("SADD")
            .arg("sstr")
            .arg("a")
            .arg("b")
            .arg("12")
            .ignore();
        for i in 0..600 {
            p.cmd("SADD").arg("sbigint").arg(i).ignore();
        }
        p.cmd("ZADD")
            .arg("zsmall")
            .arg(1)
            .arg("a")
            .arg(1.5)
            .arg("b")
            .arg("-inf")
            .arg("c")
            .ignore();
        for i in 0..200 {
            p.cmd("ZADD")
                .arg("zbig")
                .arg(f64::from(i) / 3.0)
                .arg(format!("m{i}"))
                .ignore();
        }
        p.cmd("PEXPIREAT")
            .arg("zbig")
            .arg(4_000_000_000_123i64)
            .ignore();
        if lists {
            p.cmd("RPUSH")
                .arg("lsmall")
                .arg("x")
                .arg("1")
                .arg("yy")
                .ignore();
            for i in 0..2000 {
                p.cmd("RPUSH")
                    .arg("lbig")
                    .arg(format!("element-{i}"))
                    .ignore();
            }
            p.cmd("RPUSH").arg("lbig").arg("z".repeat(20_000)).ignore();
        }
        let _: () = p.query(c).unwrap();
    }
    let _: () = redis::cmd("SELECT").arg(0).query(c).unwrap();
}

/// Every key of every database as text: type, encoding, contents, TTL.
pub fn contents(c: &mut redis::Connection) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for db in 0..16 {
        let _: () = redis::cmd("SELECT").arg(db).query(c).unwrap();
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
        for k in keys {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).unwrap();
            let enc: String = redis::cmd("OBJECT")
                .arg("ENCODING")
                .arg(&k)
                .query(c)
                .unwrap();
            let body = match t.as_str() {
                "string" => {
                    let v: Vec<u8> = redis::cmd("GET").arg(&k).query(c).unwrap();
                    format!("{v:?}")
                }
                "hash" => {
                    let v: BTreeMap<String, String> =
                        redis::cmd("HGETALL").arg(&k).query(c).unwrap();
                    format!("{v:?}")
                }
                "set" => {
                    let mut v: Vec<String> = redis::cmd("SMEMBERS").arg(&k).query(c).unwrap();
                    v.sort();
                    format!("{v:?}")
                }
                "zset" => {
                    let v: Vec<String> = redis::cmd("ZRANGE")
                        .arg(&k)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES")
                        .query(c)
                        .unwrap();
                    format!("{v:?}")
                }
                "list" => {
                    let v: Vec<String> = redis::cmd("LRANGE")
                        .arg(&k)
                        .arg(0)
                        .arg(-1)
                        .query(c)
                        .unwrap();
                    format!("{v:?}")
                }
                other => panic!("unexpected type {other}"),
            };
            let ttl: i64 = redis::cmd("PTTL").arg(&k).query(c).unwrap();
            out.insert(
                format!("{db}/{}", String::from_utf8_lossy(&k)),
                format!("{t} {enc} ttl={} {body}", ttl > 0),
            );
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(c).unwrap();
    out
}

/// Equal maps, reporting only the keys that differ.
pub fn same(got: &BTreeMap<String, String>, want: &BTreeMap<String, String>) {
    let mut diff = Vec::new();
    for k in got.keys().chain(want.keys()) {
        let (g, w) = (got.get(k), want.get(k));
        if g != w {
            let cut = |v: Option<&String>| v.map(|s| s.chars().take(160).collect::<String>());
            diff.push(format!("{k}: got {:?} want {:?}", cut(g), cut(w)));
        }
    }
    diff.dedup();
    assert!(
        diff.is_empty(),
        "{} keys differ:\n{}",
        diff.len(),
        diff.join("\n")
    );
}

pub fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap();
}

/// A small tmpfs (needs root: `None` otherwise) for full-disk tests.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }

    pub fn resize(&self, size: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

// ---- AOF files and commands (kv_aof, kv_aof_differential)

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The commands of a RESP command file, `#` annotations skipped.
pub fn parse_commands(b: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    let line = |pos: usize| -> (Vec<u8>, usize) {
        let e = b[pos..].windows(2).position(|w| w == b"\r\n").unwrap();
        (b[pos..pos + e].to_vec(), pos + e + 2)
    };
    while pos < b.len() {
        let (l, next) = line(pos);
        pos = next;
        if l.first() == Some(&b'#') {
            continue;
        }
        assert_eq!(l[0], b'*', "not a command at {pos}");
        let n: usize = std::str::from_utf8(&l[1..]).unwrap().parse().unwrap();
        let mut argv = Vec::new();
        for _ in 0..n {
            let (l, next) = line(pos);
            let len: usize = std::str::from_utf8(&l[1..]).unwrap().parse().unwrap();
            argv.push(b[next..next + len].to_vec());
            pos = next + len + 2;
        }
        out.push(argv);
    }
    out
}

/// The incremental files of an AOF directory, in manifest order.
pub fn incr_commands(dir: &Path) -> Vec<Vec<Vec<u8>>> {
    let m = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).unwrap();
    let mut out = Vec::new();
    for l in m.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.get(5) == Some(&"i") {
            out.extend(parse_commands(&std::fs::read(dir.join(w[1])).unwrap()));
        }
    }
    out
}

pub fn q(c: &mut redis::Connection, args: &[&[u8]]) -> redis::Value {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or(redis::Value::Nil)
}

pub fn run(c: &mut redis::Connection, line: &str) -> redis::Value {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    q(c, &args)
}
