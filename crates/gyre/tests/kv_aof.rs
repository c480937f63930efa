//! The append-only file through the real binary (the propagated forms
//! against redis-server's are in kv_aof_differential.rs): every type back
//! after a restart; kill -9 with `appendfsync always` losing no
//! acknowledged write; a torn tail loaded with `aof-load-truncated yes`
//! and refused without it; interop both ways with redis-server 7.0 and
//! `redis-check-aof`; an old single-file AOF migrated; BGREWRITEAOF under
//! writes (big keys across slices without the RDB preamble); CONFIG SET appendonly; the automatic rewrite; evictions; a full
//! disk. Peers missing: skipped with a message.
#![allow(clippy::unwrap_used)]

mod util;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use util::kv::*;
use util::{wait_for, Prefix};

const CHECK_AOF: &str = "/usr/bin/redis-check-aof";

/// Wait until the kv process was respawned after kill -9 and answers.
fn kill9_and_wait(kv: &Kv) -> redis::Connection {
    let pid = kv_pid(kv);
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kv.s.logged(
        &format!("kv process {pid} exited on signal 9"),
        Duration::from_secs(5)
    ));
    assert!(
        wait_for(Duration::from_secs(20), || ping(kv.addr)),
        "{}",
        kv.s.log()
    );
    connect(kv.addr)
}

/// One RESP line (a simple reply, an error or a bulk header) and, for a
/// bulk, its body.
fn reply(r: &mut std::io::BufReader<std::net::TcpStream>) -> String {
    use std::io::{BufRead, Read};
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    if let Some(n) = line
        .strip_prefix('$')
        .and_then(|n| n.trim().parse::<usize>().ok())
    {
        let mut body = vec![0; n + 2];
        r.read_exact(&mut body).unwrap();
        line.push_str(&String::from_utf8_lossy(&body));
    }
    line
}

/// A big AOF after kill -9: the respawned kv process replays it in slices
/// and serves between them; every answer before the data is in is
/// `-LOADING` (never a partial or empty dataset), INFO's progress stays
/// within the files' size, and then everything is there.
#[test]
fn a_big_aof_replays_in_slices_answering_loading_until_it_is_in() {
    use std::io::Write;
    let kv = start(
        "kv-aof-bigload",
        "save \"\";\nappendonly yes;\naof-use-rdb-preamble no;",
    );
    let mut c = connect(kv.addr);
    const N: usize = 200_000;
    for chunk in 0..(N / 10_000) {
        let mut p = redis::pipe();
        for i in chunk * 10_000..(chunk + 1) * 10_000 {
            p.cmd("SET")
                .arg(format!("key:{i}"))
                .arg("v".repeat(100))
                .ignore();
        }
        let _: () = query_retry(&mut c, kv.addr, |c| p.query(c));
    }
    let pid = kv_pid(&kv);
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kv.s.logged(
        &format!("kv process {pid} exited on signal 9"),
        Duration::from_secs(5)
    ));
    let deadline = Instant::now() + Duration::from_secs(60);
    let s = loop {
        assert!(Instant::now() < deadline, "{}", kv.s.log());
        match std::net::TcpStream::connect(kv.addr) {
            Ok(s) => break s,
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = std::io::BufReader::new(s);
    let last = format!("key:{}", N - 1);
    let mut loading = 0;
    loop {
        assert!(Instant::now() < deadline, "{}", kv.s.log());
        w.write_all(format!("GET {last}\r\nINFO persistence\r\n").as_bytes())
            .unwrap();
        let got = reply(&mut r);
        let info = reply(&mut r);
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .map(|v| v.trim().parse::<u64>().unwrap())
        };
        if got.starts_with("-LOADING Redis is loading the dataset in memory") {
            loading += 1;
            // INFO is served while loading (it carries the loading flag).
            if field("loading") == Some(1) {
                let (done, total) = (
                    field("loading_loaded_bytes").unwrap(),
                    field("loading_total_bytes").unwrap(),
                );
                assert!(done <= total && total > 20_000_000, "{done} {total}");
            }
            continue;
        }
        assert_eq!(got, format!("$100\r\n{}\r\n", "v".repeat(100)), "{loading}");
        assert_eq!(field("loading"), Some(0));
        break;
    }
    println!("{loading} answers were -LOADING before the AOF was in");
    let mut c = connect(kv.addr);
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, N);
    assert!(kv.s.log().contains("DB loaded from append only file"));
}

#[test]
fn every_type_comes_back_after_a_restart() {
    let kv = start("kv-aof-restart", "save \"\";\nappendonly yes;");
    let mut c = connect(kv.addr);
    populate(&mut c, true);
    let before = contents(&mut c);
    assert!(before.len() > 20);
    // SHUTDOWN NOSAVE: no RDB; the exit flushes and fsyncs the AOF.
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
    assert!(kv
        .s
        .logged("Calling fsync() on the AOF file.", Duration::from_secs(5)));
    assert!(wait_for(Duration::from_secs(20), || ping(kv.addr)));
    let mut c = connect(kv.addr);
    same(&contents(&mut c), &before);
    assert!(!kv.p.path("dump.rdb").exists());
    assert!(kv.s.log().contains("DB loaded from append only file"));
    // And once more from a rewritten base (the RDB preamble).
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_rewrite(&mut c);
    let mut c = kill9_and_wait(&kv);
    same(&contents(&mut c), &before);
}

fn wait_rewrite(c: &mut redis::Connection) {
    assert!(wait_for(Duration::from_secs(60), || {
        info_field(c, "aof_rewrite_in_progress") == "0"
            && info_field(c, "aof_rewrite_scheduled") == "0"
    }));
}

#[test]
fn kill_9_with_appendfsync_always_loses_no_acknowledged_write() {
    let kv = start(
        "kv-aof-kill",
        "save \"\";\nappendonly yes;\nappendfsync always;",
    );
    let addr = kv.addr;
    // A writer: every acknowledged SET and INCR is recorded.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let t = std::thread::spawn(move || {
        let mut c = connect(addr);
        let mut acked = 0u64;
        while !st.load(std::sync::atomic::Ordering::Relaxed) && acked < 200_000 {
            let r1 = redis::cmd("SET")
                .arg(format!("k:{acked}"))
                .arg(acked)
                .query::<()>(&mut c);
            let r2 = redis::cmd("INCR").arg("counter").query::<i64>(&mut c);
            match (r1, r2) {
                (Ok(()), Ok(n)) => {
                    assert_eq!(n as u64, acked + 1);
                    acked += 1;
                }
                _ => break,
            }
        }
        acked
    });
    std::thread::sleep(Duration::from_millis(700 + (now_ms() % 600) as u64));
    let pid = kv_pid(&kv);
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acked = t.join().unwrap();
    assert!(acked > 10, "too few writes: {acked}");
    assert!(wait_for(Duration::from_secs(20), || ping(addr)));
    let mut c = connect(addr);
    let counter: i64 = redis::cmd("GET").arg("counter").query(&mut c).unwrap();
    assert!(
        counter as u64 >= acked,
        "counter {counter} < {acked} acknowledged"
    );
    // At most the one write in flight beyond the acknowledged ones.
    assert!(counter as u64 <= acked + 1);
    for i in [0, acked / 2, acked - 1] {
        let v: String = redis::cmd("GET")
            .arg(format!("k:{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(v, i.to_string());
    }
}

/// Start a gyre on `p` that may refuse to start: its log after the try.
fn start_refused(p: &Prefix, extra: &str, expect: &str) -> String {
    let port = util::http::free_port();
    p.conf(&format!(
        "daemon off;\nerror_log logs/error.log info;\nworker_processes 1;\nevents {{}}\n\
         kv {{\n    listen 127.0.0.1:{port};\n{extra}\n}}\n"
    ));
    let s = p.start();
    assert!(s.logged(expect, Duration::from_secs(10)), "{}", s.log());
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert!(!ping(addr));
    s.log()
}

fn incr_path(p: &Prefix) -> PathBuf {
    p.path("appendonlydir/appendonly.aof.1.incr.aof")
}

#[test]
fn a_torn_tail_loads_with_aof_load_truncated_and_stops_the_start_without() {
    let conf = "save \"\";\nappendonly yes;\nappendfsync always;";
    let kv = start("kv-aof-torn", conf);
    let mut c = connect(kv.addr);
    for i in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("t1").arg("x").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("t2").arg("y").query(&mut c).unwrap();
    let _: redis::Value = redis::cmd("EXEC").query(&mut c).unwrap();
    let p = Prefix {
        dir: kv.p.dir.clone(),
    };
    drop(c);
    drop(kv.s);
    let full = std::fs::read(incr_path(&p)).unwrap();
    // A command cut in the middle of its last argument.
    let mut torn = full.clone();
    torn.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\nlast\r\n$5\r\nval");
    std::fs::write(incr_path(&p), &torn).unwrap();
    let log = start_refused(
        &p,
        &format!("aof-load-truncated no;\n{conf}"),
        "Unexpected end of file reading the append only file appendonly.aof.1.incr.aof",
    );
    assert!(log.contains("redis-check-aof --fix"));
    // With aof-load-truncated yes (the default): loaded, cut back, logged.
    let kv = start_in(p, conf);
    assert!(kv.s.logged(
        "!!! Warning: short read while loading the AOF file appendonly.aof.1.incr.aof!!!",
        Duration::from_secs(5)
    ));
    assert!(kv.s.log().contains(&format!(
        "!!! Truncating the AOF appendonly.aof.1.incr.aof at offset {} !!!",
        full.len()
    )));
    assert!(kv.s.log().contains(
        "AOF appendonly.aof.1.incr.aof loaded anyway because aof-load-truncated is enabled"
    ));
    let mut c = connect(kv.addr);
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 52);
    let v: Option<String> = redis::cmd("GET").arg("last").query(&mut c).unwrap();
    assert_eq!(v, None);
    assert_eq!(std::fs::read(incr_path(&kv.p)).unwrap().len(), full.len());
    // New writes follow the cut and load again.
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let mut c = kill9_and_wait(&kv);
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 53);
    // A transaction torn before its EXEC is not applied.
    let p = Prefix {
        dir: kv.p.dir.clone(),
    };
    drop(c);
    drop(kv.s);
    let mut b = std::fs::read(incr_path(&p)).unwrap();
    let before = b.len();
    b.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$2\r\nt3\r\n$1\r\nz\r\n");
    std::fs::write(incr_path(&p), &b).unwrap();
    let kv = start_in(p, conf);
    assert!(kv.s.logged(
        "Revert incomplete MULTI/EXEC transaction in AOF file appendonly.aof.1.incr.aof",
        Duration::from_secs(5)
    ));
    let mut c = connect(kv.addr);
    let v: Option<String> = redis::cmd("GET").arg("t3").query(&mut c).unwrap();
    assert_eq!(v, None);
    assert_eq!(std::fs::read(incr_path(&kv.p)).unwrap().len(), before);
    // Garbage in the middle is a bad format: the start stops.
    let p = Prefix {
        dir: kv.p.dir.clone(),
    };
    drop(c);
    drop(kv.s);
    let mut b = std::fs::read(incr_path(&p)).unwrap();
    b.extend_from_slice(b"+garbage\r\n*1\r\n$4\r\nPING\r\n");
    std::fs::write(incr_path(&p), &b).unwrap();
    start_refused(
        &p,
        conf,
        "Bad file format reading the append only file appendonly.aof.1.incr.aof",
    );
}

fn check_aof(dir: &Path) {
    let out = Command::new(CHECK_AOF)
        .arg(dir.join("appendonly.aof.manifest"))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "redis-check-aof: {text}");
    assert!(text.contains("valid"), "{text}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Writes after the base, so the incr file has every type too.
fn more_writes(c: &mut redis::Connection) {
    for l in [
        "SET after1 v EX 1000",
        "RPUSH after2 a b c",
        "HSET after3 f v",
        "SADD after4 1 2 3",
        "ZADD after5 1.5 m",
        "INCRBYFLOAT after6 2.5",
        "DEL str",
        "SELECT 5",
        "SET in5 yes",
        "SELECT 0",
    ] {
        run(c, l);
    }
}

#[test]
fn aof_directories_move_between_redis_and_gyre_both_ways() {
    if !have(REDIS) || !have(CHECK_AOF) {
        return;
    }
    // gyre → redis-check-aof and redis-server.
    let kv = start(
        "kv-aof-interop",
        "save \"\";\nappendonly yes;\nappendfsync always;",
    );
    let mut c = connect(kv.addr);
    populate(&mut c, true);
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_rewrite(&mut c);
    run(&mut c, "CONFIG SET aof-timestamp-enabled yes");
    more_writes(&mut c);
    let want = contents(&mut c);
    let incr = std::fs::read(kv.p.path("appendonlydir/appendonly.aof.2.incr.aof")).unwrap();
    assert!(
        incr.starts_with(b"#TS:"),
        "{:?}",
        incr.escape_ascii().to_string()
    );
    check_aof(&kv.p.path("appendonlydir"));
    let rdir = Prefix::new("kv-aof-interop-redis");
    copy_dir(&kv.p.path("appendonlydir"), &rdir.dir.join("appendonlydir"));
    {
        let r = Redis::start_with(&rdir.dir, "dump.rdb", &["--appendonly", "yes"]);
        let mut rc = connect(r.addr);
        same(&contents(&mut rc), &want);
    }
    // The same without the RDB preamble: a base of commands.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("aof-use-rdb-preamble")
        .arg("no")
        .query(&mut c)
        .unwrap();
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_rewrite(&mut c);
    let m = std::fs::read_to_string(kv.p.path("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert!(m.contains(".base.aof seq 3 type b"), "{m}");
    check_aof(&kv.p.path("appendonlydir"));
    let rdir2 = Prefix::new("kv-aof-interop-redis2");
    copy_dir(
        &kv.p.path("appendonlydir"),
        &rdir2.dir.join("appendonlydir"),
    );
    {
        let r = Redis::start_with(&rdir2.dir, "dump.rdb", &["--appendonly", "yes"]);
        let mut rc = connect(r.addr);
        same(&contents(&mut rc), &want);
    }
    let mut c = kill9_and_wait(&kv);
    same(&contents(&mut c), &want);

    // redis-server → gyre.
    let rdir3 = Prefix::new("kv-aof-interop-redis3");
    let want = {
        let r = Redis::start_with(
            &rdir3.dir,
            "dump.rdb",
            &["--appendonly", "yes", "--appendfsync", "always"],
        );
        let mut rc = connect(r.addr);
        populate(&mut rc, true);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut rc).unwrap();
        wait_rewrite(&mut rc);
        more_writes(&mut rc);
        contents(&mut rc)
    };
    let p = Prefix::new("kv-aof-from-redis");
    copy_dir(&rdir3.dir.join("appendonlydir"), &p.path("appendonlydir"));
    let kv = start_in(p, "save \"\";\nappendonly yes;");
    let mut c = connect(kv.addr);
    same(&contents(&mut c), &want);
}

#[test]
fn bgrewriteaof_under_writes_keeps_every_write() {
    let kv = start("kv-aof-rewrite-load", "save \"\";\nappendonly yes;");
    let addr = kv.addr;
    let mut c = connect(addr);
    for i in 0..20_000 {
        if i % 1000 == 0 {
            let mut p = redis::pipe();
            for j in i..i + 1000 {
                p.cmd("SET").arg(format!("pre:{j}")).arg(j).ignore();
            }
            let _: () = p.query(&mut c).unwrap();
        }
    }
    // The writer keeps a model of what it wrote.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let t = std::thread::spawn(move || {
        let mut c = connect(addr);
        let mut model: BTreeMap<String, String> = BTreeMap::new();
        let mut i = 0u64;
        while !st.load(std::sync::atomic::Ordering::Relaxed) && i < 1_000_000 {
            let k = format!("pre:{}", (i * 7919) % 25_000);
            match i % 4 {
                0 | 1 => {
                    let _: () = redis::cmd("SET").arg(&k).arg(i).query(&mut c).unwrap();
                    model.insert(k, i.to_string());
                }
                2 => {
                    let _: i64 = redis::cmd("DEL").arg(&k).query(&mut c).unwrap();
                    model.insert(k, String::new());
                }
                _ => {
                    let n: i64 = redis::cmd("RPUSH").arg("log").arg(i).query(&mut c).unwrap();
                    model.insert(format!("log#{n}"), i.to_string());
                }
            }
            i += 1;
        }
        model
    });
    for _ in 0..3 {
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
        wait_rewrite(&mut c);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let model = t.join().unwrap();
    assert_eq!(info_field(&mut c, "aof_rewrites"), "3");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    let m = std::fs::read_to_string(kv.p.path("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert_eq!(
        m,
        "file appendonly.aof.4.base.rdb seq 4 type b\nfile appendonly.aof.4.incr.aof seq 4 type i\n"
    );
    let files: Vec<String> = std::fs::read_dir(kv.p.path("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 3, "history files left: {files:?}");
    // Everything written, after a crash (everysec: wait for the fsync).
    std::thread::sleep(Duration::from_millis(1500));
    let mut c = kill9_and_wait(&kv);
    let list: Vec<String> = redis::cmd("LRANGE")
        .arg("log")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    for (k, v) in &model {
        if let Some(n) = k.strip_prefix("log#") {
            let n: usize = n.parse().unwrap();
            assert_eq!(&list[n - 1], v);
            continue;
        }
        let got: Option<String> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
        assert_eq!(got.unwrap_or_default(), *v, "{k}");
    }
}

#[test]
fn config_set_appendonly_yes_starts_with_a_rewrite() {
    if !have(REDIS) {
        return;
    }
    let kv = start("kv-aof-config", "save \"\";");
    let mut c = connect(kv.addr);
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    populate(&mut c, false);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query(&mut c)
        .unwrap();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, ["appendonly", "yes"]);
    assert_eq!(info_field(&mut c, "aof_enabled"), "1");
    wait_rewrite(&mut c);
    assert!(kv.s.logged(
        "Background AOF rewrite finished successfully",
        Duration::from_secs(5)
    ));
    more_writes(&mut c);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendfsync")
        .arg("always")
        .query(&mut c)
        .unwrap();
    run(&mut c, "SET last 1");
    let want = contents(&mut c);
    assert!(
        info_field(&mut c, "aof_current_size")
            .parse::<u64>()
            .unwrap()
            > 0
    );
    let rdir = Prefix::new("kv-aof-config-redis");
    copy_dir(&kv.p.path("appendonlydir"), &rdir.dir.join("appendonlydir"));
    let r = Redis::start_with(&rdir.dir, "dump.rdb", &["--appendonly", "yes"]);
    let mut rc = connect(r.addr);
    same(&contents(&mut rc), &want);
    // Turned off: no more writes reach the file.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("no")
        .query(&mut c)
        .unwrap();
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    let m = std::fs::read_to_string(kv.p.path("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert_eq!(
        m,
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let incr = kv.p.path("appendonlydir/appendonly.aof.1.incr.aof");
    let size = std::fs::metadata(&incr).unwrap().len();
    assert!(size > 0);
    run(&mut c, "SET later 1");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), size);
}

#[test]
fn the_cron_rewrites_a_grown_aof() {
    let kv = start(
        "kv-aof-auto",
        "save \"\";\nappendonly yes;\nauto-aof-rewrite-percentage 100;\nauto-aof-rewrite-min-size 64kb;",
    );
    let mut c = connect(kv.addr);
    let t0 = Instant::now();
    let mut i = 0;
    // Overwrites of few keys: the AOF grows, the dataset does not.
    while kv
        .s
        .log()
        .matches("Starting automatic rewriting of AOF on")
        .count()
        < 2
    {
        assert!(t0.elapsed() < Duration::from_secs(60), "{}", kv.s.log());
        let mut p = redis::pipe();
        for j in 0..200 {
            p.cmd("SET")
                .arg(format!("k{}", j % 10))
                .arg("x".repeat(100))
                .ignore();
        }
        let _: () = p.query(&mut c).unwrap();
        i += 1;
        if i % 10 == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    wait_rewrite(&mut c);
    let cur: u64 = info_field(&mut c, "aof_current_size").parse().unwrap();
    let base: u64 = info_field(&mut c, "aof_base_size").parse().unwrap();
    assert!(base > 0 && base < 64 * 1024, "base {base}");
    assert!(cur >= base);
    assert!(info_field(&mut c, "aof_rewrites").parse::<u64>().unwrap() >= 2);
}

/// A full disk: the AOF write fails with Redis's log line, writes get
/// `-MISCONF Errors writing to the AOF file`, and once there is room the
/// cron's retry writes what was buffered and writes are accepted again;
/// nothing acknowledged is lost.
#[test]
fn a_full_disk_refuses_writes_until_the_aof_can_be_written_again() {
    let p = Prefix::new("kv-aof-full");
    let Some(fs) = Tmpfs::mount(&p.dir.join("data"), "1m") else {
        eprintln!("skipping: cannot mount a tmpfs (needs root)");
        return;
    };
    let kv = start_in(p, "dir data;\nsave \"\";\nappendonly yes;");
    let mut c = connect(kv.addr);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut acked = 0;
    let t0 = Instant::now();
    // Batches of 100-byte values until a write is refused.
    'fill: while t0.elapsed() < Duration::from_secs(20) {
        for _ in 0..100 {
            let v: Vec<u8> = (0..100)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            match redis::cmd("SET")
                .arg(format!("key:{acked}"))
                .arg(v)
                .query::<()>(&mut c)
            {
                Ok(()) => acked += 1,
                Err(e) => {
                    assert_eq!(e.code(), Some("MISCONF"), "{e}");
                    assert!(
                        e.to_string()
                            .contains("Errors writing to the AOF file: No space left on device"),
                        "{e}"
                    );
                    break 'fill;
                }
            }
        }
    }
    assert!(acked > 1000, "{acked} writes before the disk was full");
    assert_eq!(info_field(&mut c, "aof_last_write_status"), "err");
    assert!(kv
        .s
        .log()
        .contains("Error writing to the AOF file: No space left on device"));
    // Reads still work.
    let v: Option<Vec<u8>> = redis::cmd("GET").arg("key:7").query(&mut c).unwrap();
    assert_eq!(v.map(|v| v.len()), Some(100));
    fs.resize("64m");
    assert!(wait_for(Duration::from_secs(20), || {
        redis::cmd("SET")
            .arg("x")
            .arg("1")
            .query::<()>(&mut c)
            .is_ok()
    }));
    assert_eq!(info_field(&mut c, "aof_last_write_status"), "ok");
    assert!(kv.s.logged(
        "AOF write error looks solved, Redis can write again.",
        Duration::from_secs(2)
    ));
    // Everything acknowledged reaches the file (everysec: wait a second).
    std::thread::sleep(Duration::from_millis(1500));
    let mut c = kill9_and_wait(&kv);
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n as u64, acked + 1, "{}", kv.s.log());
}

/// An old single-file AOF (before Redis 7.0: an RDB preamble, then
/// commands, `dir/appendonly.aof`) is moved into the AOF directory as the
/// base, as redis-server 7.0 does; both load the same dataset from it.
#[test]
fn an_old_style_aof_is_migrated_into_the_directory() {
    if !have(REDIS) {
        return;
    }
    let src = Prefix::new("kv-aof-old-src");
    let rdb = {
        let r = Redis::start_with(&src.dir, "dump.rdb", &["--appendonly", "no"]);
        let mut rc = connect(r.addr);
        populate(&mut rc, true);
        let _: () = redis::cmd("SAVE").query(&mut rc).unwrap();
        std::fs::read(src.dir.join("dump.rdb")).unwrap()
    };
    let mut old = rdb;
    let mut tail = Vec::new();
    for args in [
        &["SELECT", "2"][..],
        &["SET", "tail", "1"],
        &["RPUSH", "tl", "a", "b"],
        &["SELECT", "0"],
        &["DEL", "str"],
    ] {
        tail.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            tail.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    old.extend_from_slice(&tail);
    let rdir = Prefix::new("kv-aof-old-redis");
    std::fs::write(rdir.dir.join("appendonly.aof"), &old).unwrap();
    let want = {
        let r = Redis::start_with(&rdir.dir, "dump.rdb", &["--appendonly", "yes"]);
        let mut rc = connect(r.addr);
        contents(&mut rc)
    };
    assert!(want.contains_key("2/tail") && !want.contains_key("0/str"));
    let p = Prefix::new("kv-aof-old");
    std::fs::write(p.dir.join("appendonly.aof"), &old).unwrap();
    let kv = start_in(p, "save \"\";\nappendonly yes;");
    assert!(kv.s.logged(
        "Successfully migrated an old-style AOF into the AOF directory appendonlydir.",
        Duration::from_secs(5)
    ));
    assert!(kv.s.log().contains("Reading RDB preamble from AOF file..."));
    let mut c = connect(kv.addr);
    same(&contents(&mut c), &want);
    assert!(!kv.p.path("appendonly.aof").exists());
    let m = std::fs::read_to_string(kv.p.path("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert_eq!(
        m,
        "file appendonly.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let rm =
        std::fs::read_to_string(rdir.dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert_eq!(m, rm, "redis-server's manifest after its migration");
    // The first rewrite replaces the migrated base.
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_rewrite(&mut c);
    assert!(!kv.p.path("appendonlydir/appendonly.aof").exists());
    let mut c = kill9_and_wait(&kv);
    same(&contents(&mut c), &want);
}

/// Keys evicted by `maxmemory` are in the AOF as DEL (UNLINK with
/// `lazyfree-lazy-eviction yes`): the dataset after a replay is the one
/// before, without the evicted keys coming back.
#[test]
fn evicted_keys_stay_evicted_after_a_replay() {
    let kv = start(
        "kv-aof-evict",
        "save \"\";\nappendonly yes;\nappendfsync always;\nmaxmemory 4mb;\nmaxmemory-policy allkeys-random;\nlazyfree-lazy-eviction yes;",
    );
    let mut c = connect(kv.addr);
    for batch in 0..40 {
        let mut p = redis::pipe();
        for i in 0..500 {
            p.cmd("SET")
                .arg(format!("k:{batch}:{i}"))
                .arg("v".repeat(200))
                .ignore();
        }
        let _: () = p.query(&mut c).unwrap();
    }
    // Eviction goes on from a time event after the writes while over the
    // limit: wait for it to end (the count stays put), then read the count
    // and the keys in one transaction.
    let evicted_now = |c: &mut redis::Connection| -> String {
        let info: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
        info.lines()
            .find(|l| l.starts_with("evicted_keys:"))
            .unwrap_or_default()
            .to_string()
    };
    let mut last = evicted_now(&mut c);
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = evicted_now(&mut c);
        if now == last {
            break;
        }
        last = now;
    }
    let (info, keys): (String, i64) = redis::pipe()
        .atomic()
        .cmd("INFO")
        .arg("stats")
        .cmd("DBSIZE")
        .query(&mut c)
        .unwrap();
    let evicted: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(evicted > 1000, "evicted {evicted}");
    assert_eq!(keys as u64 + evicted, 20_000);
    let unlinks = incr_commands(&kv.p.path("appendonlydir"))
        .iter()
        .filter(|a| a[0] == b"UNLINK")
        .count() as u64;
    assert_eq!(unlinks, evicted);
    let before: Vec<String> = {
        let mut k: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
        k.sort();
        k
    };
    let mut c = kill9_and_wait(&kv);
    let mut after: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    after.sort();
    assert_eq!(after, before);
}

/// BGREWRITEAOF without the RDB preamble writes big keys (a 150k-field
/// hash, list, skiplist zset and set table) a few commands per slice,
/// not whole in one turn; writes to them while their commands are
/// half-written, and to other keys, leave base + incr file the dataset:
/// redis-check-aof accepts the directory, the respawned kv process and
/// redis-server load exactly what was written.
#[test]
fn a_rewrite_without_the_preamble_writes_big_keys_across_slices_under_writes() {
    let kv = start(
        "kv-aof-bigkeys",
        "save \"\";\nappendonly yes;\nappendfsync always;\naof-use-rdb-preamble no;\nbgsave-slice-us 20;",
    );
    let mut c = connect(kv.addr);
    let n = 150_000;
    for b in 0..n / 2000 {
        let mut p = redis::pipe();
        let mut h = redis::cmd("HSET");
        h.arg("big:hash");
        let mut l = redis::cmd("RPUSH");
        l.arg("big:list");
        let mut z = redis::cmd("ZADD");
        z.arg("big:zset");
        let mut s = redis::cmd("SADD");
        s.arg("big:set");
        for i in b * 2000..(b + 1) * 2000 {
            h.arg(format!("field:{i}"))
                .arg(format!("{i}-{}", "v".repeat(i % 50)));
            l.arg(format!("{i}-{}", "e".repeat(i % 30)));
            z.arg(i as f64 * 0.25 - 7.0).arg(format!("m:{i}"));
            s.arg(format!("s:{i}"));
        }
        p.add_command(h).ignore();
        p.add_command(l).ignore();
        p.add_command(z).ignore();
        p.add_command(s).ignore();
        let _: () = p.query(&mut c).unwrap();
    }
    for i in 0..2000 {
        run(&mut c, &format!("SET s:{i} {i}"));
    }
    run(&mut c, "PEXPIREAT big:hash 4000000000000");
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    let mut round = 0;
    while info_field(&mut c, "aof_rewrite_in_progress") == "1" {
        assert!(round < 100_000, "the rewrite did not end: {}", kv.s.log());
        let mut w = redis::pipe();
        for j in 0..20 {
            w.cmd("SET")
                .arg(format!("s:{}", (round * 20 + j) % 2000))
                .arg("new")
                .ignore();
        }
        match round % 4 {
            0 => {
                w.cmd("HSET")
                    .arg("big:hash")
                    .arg(format!("field:{round}"))
                    .arg("new")
                    .ignore();
                w.cmd("HDEL")
                    .arg("big:hash")
                    .arg(format!("field:{}", round + 7))
                    .ignore();
            }
            1 => {
                w.cmd("RPUSH").arg("big:list").arg("more").ignore();
                w.cmd("LPOP").arg("big:list").ignore();
            }
            2 => {
                w.cmd("ZINCRBY")
                    .arg("big:zset")
                    .arg(1000)
                    .arg(format!("m:{round}"))
                    .ignore();
            }
            _ => {
                w.cmd("SADD")
                    .arg("big:set")
                    .arg(format!("new:{round}"))
                    .ignore();
                w.cmd("SREM")
                    .arg("big:set")
                    .arg(format!("s:{round}"))
                    .ignore();
            }
        }
        let _: () = w.query(&mut c).unwrap();
        round += 1;
    }
    // Every kind of big-key write (round % 4) came while the rewrite
    // ran. (It was `> 10` while the loop idled 1 ms after each 20 us
    // slice; slices now run back to back between the client's rounds.)
    assert!(
        round >= 4,
        "the rewrite ended too soon to overlap the writes ({round})"
    );
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    let m = std::fs::read_to_string(kv.p.path("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert!(m.contains(".base.aof seq 2 type b"), "{m}");
    let want = contents(&mut c);
    let ttl: i64 = redis::cmd("PEXPIRETIME")
        .arg("big:hash")
        .query(&mut c)
        .unwrap();
    assert_eq!(ttl, 4_000_000_000_000);
    if have(CHECK_AOF) {
        check_aof(&kv.p.path("appendonlydir"));
    }
    if have(REDIS) {
        let rdir = Prefix::new("kv-aof-bigkeys-redis");
        copy_dir(&kv.p.path("appendonlydir"), &rdir.dir.join("appendonlydir"));
        let r = Redis::start_with(&rdir.dir, "dump.rdb", &["--appendonly", "yes"]);
        let mut rc = connect(r.addr);
        same(&contents(&mut rc), &want);
    }
    let mut c = kill9_and_wait(&kv);
    same(&contents(&mut c), &want);
}
