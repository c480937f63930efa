//! RDB persistence through the real binary: dumps exchanged both ways with
//! redis-server 7.0 and checked by redis-check-rdb (skipped with a message
//! when they are missing), BGSAVE as a point-in-time snapshot under
//! writes, the respawned kv process loading the last snapshot after
//! kill -9, a corrupt dump stopping the start, save rules, MISCONF, SHUTDOWN.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use util::ReadSome;

use util::http::free_port;
use util::kv::*;
use util::{wait_for, Prefix};

const CHECK_RDB: &str = "/usr/bin/redis-check-rdb";

#[test]
fn dumps_move_between_redis_and_gyre_both_ways() {
    if !have(REDIS) || !have(CHECK_RDB) {
        return;
    }
    let rdir = Prefix::new("kv-persist-redis-a");
    let a = Redis::start(&rdir.dir, "a.rdb");
    let mut ca = connect(a.addr);
    populate(&mut ca, true);
    let want = contents(&mut ca);
    let _: () = redis::cmd("SAVE").query(&mut ca).unwrap();

    // redis → gyre.
    let p = Prefix::new("kv-persist-interop");
    copy(&rdir.dir.join("a.rdb"), &p.dir.join("dump.rdb"));
    let kv = start_in(p, "save \"\";");
    let mut cg = connect(kv.addr);
    let got = contents(&mut cg);
    same(&got, &want);
    assert!(
        kv.s.log().contains("Done loading RDB, keys loaded: "),
        "{}",
        kv.s.log()
    );

    // gyre → redis-check-rdb and redis.
    let _: () = redis::cmd("SAVE").query(&mut cg).unwrap();
    let dump = kv.p.dir.join("dump.rdb");
    let check = Command::new(CHECK_RDB).arg(&dump).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout).to_string();
    assert!(
        check.status.success() && text.contains("RDB looks OK"),
        "{text}"
    );
    let b = Redis::start(&kv.p.dir, "dump.rdb");
    let mut cb = connect(b.addr);
    same(&contents(&mut cb), &want);

    // Absolute expire times survive both trips.
    for db in [0, 5] {
        let _: () = redis::cmd("SELECT").arg(db).query(&mut cb).unwrap();
        let t: i64 = redis::cmd("PEXPIRETIME")
            .arg("zbig")
            .query(&mut cb)
            .unwrap();
        assert_eq!(t, 4_000_000_000_123);
    }

    // The same with rdbcompression no / rdbchecksum no.
    let _: () = redis::cmd("SELECT").arg(0).query(&mut cb).unwrap();
    drop(cg);
    let p = Prefix::new("kv-persist-nocomp");
    copy(&rdir.dir.join("a.rdb"), &p.dir.join("dump.rdb"));
    let kv2 = start_in(p, "save \"\";\nrdbcompression no;\nrdbchecksum no;");
    let mut c2 = connect(kv2.addr);
    let _: () = redis::cmd("SAVE").query(&mut c2).unwrap();
    let check = Command::new(CHECK_RDB)
        .arg(kv2.p.dir.join("dump.rdb"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let c = Redis::start(&kv2.p.dir, "dump.rdb");
    let mut cc = connect(c.addr);
    same(&contents(&mut cc), &want);
}

#[test]
fn dump_and_restore_interoperate_with_redis() {
    if !have(REDIS) {
        return;
    }
    let rdir = Prefix::new("kv-persist-redis-dump");
    let r = Redis::start(&rdir.dir, "x.rdb");
    let mut cr = connect(r.addr);
    populate(&mut cr, true);
    let kv = start("kv-persist-dump", "save \"\";");
    let mut cg = connect(kv.addr);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut cr).unwrap();
    // redis DUMP → gyre RESTORE → gyre DUMP → redis RESTORE under a new name.
    for k in &keys {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut cr).unwrap();
        let _: () = redis::cmd("RESTORE")
            .arg(k)
            .arg(0)
            .arg(&payload)
            .query(&mut cg)
            .unwrap();
        let back: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut cg).unwrap();
        let _: () = redis::cmd("RESTORE")
            .arg(format!("copy:{k}"))
            .arg(0)
            .arg(&back)
            .query(&mut cr)
            .unwrap();
    }
    let all = contents(&mut cr);
    for k in &keys {
        let orig = all[&format!("0/{k}")].replace("ttl=true", "ttl=false");
        assert_eq!(all[&format!("0/copy:{k}")], orig, "{k}");
    }
    // Redis's payload checks and errors.
    let payload: Vec<u8> = redis::cmd("DUMP").arg("str").query(&mut cg).unwrap();
    let e = redis::cmd("RESTORE")
        .arg("str")
        .arg(0)
        .arg(&payload)
        .query::<()>(&mut cg)
        .unwrap_err();
    assert_eq!(e.code(), Some("BUSYKEY"));
    let mut bad = payload.clone();
    bad[2] ^= 1;
    let e = redis::cmd("RESTORE")
        .arg("n1")
        .arg(0)
        .arg(&bad)
        .query::<()>(&mut cg)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("DUMP payload version or checksum are wrong"),
        "{e}"
    );
    let mut newer = payload.clone();
    let n = newer.len();
    newer[n - 10] = 11;
    let e = redis::cmd("RESTORE")
        .arg("n2")
        .arg(0)
        .arg(&newer)
        .query::<()>(&mut cg)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("DUMP payload version or checksum are wrong"),
        "{e}"
    );
    let e = redis::cmd("RESTORE")
        .arg("n3")
        .arg(-1)
        .arg(&payload)
        .query::<()>(&mut cg)
        .unwrap_err();
    assert!(
        e.to_string().contains("Invalid TTL value, must be >= 0"),
        "{e}"
    );
    let e = redis::cmd("RESTORE")
        .arg("n4")
        .arg(0)
        .arg(&payload)
        .arg("FREQ")
        .arg(300)
        .query::<()>(&mut cg)
        .unwrap_err();
    assert!(e.to_string().contains("Invalid FREQ value"), "{e}");
    let _: () = redis::cmd("RESTORE")
        .arg("str")
        .arg(4_000_000_000_000i64)
        .arg(&payload)
        .arg("REPLACE")
        .arg("ABSTTL")
        .arg("IDLETIME")
        .arg(5)
        .query(&mut cg)
        .unwrap();
    let t: i64 = redis::cmd("PEXPIRETIME")
        .arg("str")
        .query(&mut cg)
        .unwrap_or(-3);
    let pttl: i64 = redis::cmd("PTTL").arg("str").query(&mut cg).unwrap();
    assert!(t == 4_000_000_000_000 || t == -3, "{t}");
    assert!(pttl > 0);
    // An absolute TTL in the past stores nothing.
    let _: () = redis::cmd("RESTORE")
        .arg("gone")
        .arg(1)
        .arg(&payload)
        .arg("ABSTTL")
        .query(&mut cg)
        .unwrap();
    let n: i64 = redis::cmd("EXISTS").arg("gone").query(&mut cg).unwrap();
    assert_eq!(n, 0);
}

fn read_dump(path: &Path) -> Vec<gyre_kv::db::Db> {
    let mut dbs: Vec<gyre_kv::db::Db> = (0..16).map(gyre_kv::db::Db::new).collect();
    let f = std::fs::File::open(path).unwrap();
    gyre_kv::rdb::load::load(
        std::io::BufReader::new(f),
        &mut dbs,
        &gyre_kv::object::Limits::default(),
        0,
        true,
    )
    .unwrap();
    dbs
}

#[test]
fn bgsave_is_a_point_in_time_snapshot_under_writes() {
    let kv = start("kv-persist-bgsave", "save \"\";");
    let mut c = connect(kv.addr);
    const N: usize = 40_000;
    let mut p = redis::pipe();
    for i in 0..N {
        p.cmd("SET")
            .arg(format!("key:{i}"))
            .arg(format!("old-{i}"))
            .ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("old")
        .query(&mut c)
        .unwrap();
    // A second BGSAVE in the same read finds the first one running.
    let mut raw = TcpStream::connect(kv.addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    raw.write_all(b"BGSAVE\r\nBGSAVE\r\n").unwrap();
    let want = "+Background saving started\r\n-ERR Background save already in progress\r\n";
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while got.len() < want.len() {
        let n = raw.read_some(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(String::from_utf8_lossy(&got), want);
    // Writes after the BGSAVE reply are after the snapshot point, however
    // far the save has got: overwrite, delete, create, change a hash.
    let mut w = redis::pipe();
    for i in (0..N).rev().step_by(3) {
        w.cmd("SET").arg(format!("key:{i}")).arg("new").ignore();
        w.cmd("DEL")
            .arg(format!("key:{}", i.saturating_sub(1)))
            .ignore();
        w.cmd("SET").arg(format!("fresh:{i}")).arg("x").ignore();
    }
    w.cmd("HSET").arg("h").arg("f").arg("new").ignore();
    w.cmd("FLUSHDB").ignore();
    let _: () = w.query(&mut c).unwrap();
    wait_bgsave_done(&mut c);
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    let dbs = read_dump(&kv.p.dir.join("dump.rdb"));
    let sizes: Vec<usize> = dbs.iter().map(|d| d.len()).collect();
    assert_eq!(dbs[0].len(), N + 1, "{sizes:?} {}", kv.s.log());
    for (k, v, _) in dbs[0].entries() {
        let k = String::from_utf8_lossy(k).to_string();
        match v {
            gyre_kv::db::Ref::Str(s) => {
                let i = k.strip_prefix("key:").unwrap();
                assert_eq!(s, format!("old-{i}").as_bytes(), "{k}");
            }
            gyre_kv::db::Ref::Obj(o) => assert_eq!(o.len(), 1),
        }
    }
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
}

/// The sliced save with a tiny per-turn budget (`bgsave-slice-us 20`:
/// many slices) while another connection keeps writing every type: the
/// dump is the dataset as it was at BGSAVE, redis-check-rdb accepts it and
/// redis-server loads exactly that.
#[test]
fn a_finely_sliced_bgsave_under_writes_loads_identically_in_redis() {
    if !have(REDIS) || !have(CHECK_RDB) {
        return;
    }
    let kv = start("kv-persist-sliced", "save \"\";\nbgsave-slice-us 20;");
    let mut c = connect(kv.addr);
    let slice: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("bgsave-slice-us")
        .query(&mut c)
        .unwrap();
    assert_eq!(slice, ["bgsave-slice-us", "20"]);
    populate(&mut c, true);
    let mut p = redis::pipe();
    for i in 0..30_000 {
        // Compressible values (the LZF path) and some TTLs.
        p.cmd("SET")
            .arg(format!("s:{i}"))
            .arg(format!("{i}-{}", "x".repeat(i % 200)))
            .ignore();
        if i % 7 == 0 {
            p.cmd("PEXPIREAT")
                .arg(format!("s:{i}"))
                .arg(4_000_000_000_000i64 + i as i64)
                .ignore();
        }
    }
    for i in 0..300 {
        p.cmd("HSET")
            .arg(format!("h:{i}"))
            .arg("f")
            .arg(i)
            .arg("g")
            .arg("y".repeat(80))
            .ignore();
        p.cmd("RPUSH")
            .arg(format!("l:{i}"))
            .arg("a")
            .arg(i)
            .ignore();
        p.cmd("ZADD").arg(format!("z:{i}")).arg(i).arg("m").ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let want = contents(&mut c);
    let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    // Writes of every kind until the save is over (bounded).
    let mut round = 0;
    while info_field(&mut c, "rdb_bgsave_in_progress") == "1" {
        assert!(round < 10_000, "the save did not end: {}", kv.s.log());
        let mut w = redis::pipe();
        for j in 0..50 {
            let i = (round * 50 + j) % 30_000;
            w.cmd("SET").arg(format!("s:{i}")).arg("new").ignore();
            w.cmd("DEL")
                .arg(format!("s:{}", (i + 13) % 30_000))
                .ignore();
            w.cmd("SET")
                .arg(format!("fresh:{round}:{j}"))
                .arg("x")
                .ignore();
        }
        let i = round % 300;
        w.cmd("HSET")
            .arg(format!("h:{i}"))
            .arg("f")
            .arg("new")
            .ignore();
        w.cmd("RPUSH").arg(format!("l:{i}")).arg("more").ignore();
        w.cmd("ZINCRBY")
            .arg(format!("z:{i}"))
            .arg(1)
            .arg("m")
            .ignore();
        w.cmd("EXPIRE")
            .arg(format!("h:{}", (i + 1) % 300))
            .arg(1000)
            .ignore();
        let _: () = w.query(&mut c).unwrap();
        round += 1;
    }
    assert!(
        round > 3,
        "the save ended too soon to overlap the writes ({round})"
    );
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    let dump = kv.p.dir.join("dump.rdb");
    let check = Command::new(CHECK_RDB).arg(&dump).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout).to_string();
    assert!(
        check.status.success() && text.contains("RDB looks OK"),
        "{text}"
    );
    let r = Redis::start(&kv.p.dir, "dump.rdb");
    let mut cr = connect(r.addr);
    same(&contents(&mut cr), &want);
}

/// Large values (a 200k-field hash, big list, skiplist zset and set
/// table) are written across many slices; writes to them while their
/// record is half-written, and to other keys and another database, must
/// leave the dump exactly the dataset at BGSAVE: redis-check-rdb accepts
/// it and redis-server loads exactly that. `untouched:*` keys are never
/// written, so their records complete slice by slice.
#[test]
fn a_bgsave_of_big_keys_under_writes_to_them_loads_identically_in_redis() {
    if !have(REDIS) || !have(CHECK_RDB) {
        return;
    }
    let kv = start("kv-persist-bigkeys", "save \"\";\nbgsave-slice-us 20;");
    let mut c = connect(kv.addr);
    let fill = |c: &mut redis::Connection, prefix: &str, n: usize| {
        for b in 0..n.div_ceil(2000) {
            let range = b * 2000..((b + 1) * 2000).min(n);
            let mut p = redis::pipe();
            let mut h = redis::cmd("HSET");
            h.arg(format!("{prefix}:hash"));
            let mut l = redis::cmd("RPUSH");
            l.arg(format!("{prefix}:list"));
            let mut z = redis::cmd("ZADD");
            z.arg(format!("{prefix}:zset"));
            let mut s = redis::cmd("SADD");
            s.arg(format!("{prefix}:set"));
            for i in range {
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
            let _: () = p.query(c).unwrap();
        }
    };
    fill(&mut c, "big", 200_000);
    fill(&mut c, "untouched", 60_000);
    for i in 0..2000 {
        let _: () = redis::cmd("SET")
            .arg(format!("s:{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let _: () = redis::cmd("PEXPIREAT")
        .arg("big:hash")
        .arg(4_000_000_000_000i64)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut c).unwrap();
    let _: () = redis::cmd("SET")
        .arg("other")
        .arg("db")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(&mut c).unwrap();
    let want = contents(&mut c);
    let _: () = redis::cmd("SELECT").arg(0).query(&mut c).unwrap();
    let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    let mut round = 0;
    while info_field(&mut c, "rdb_bgsave_in_progress") == "1" {
        assert!(round < 100_000, "the save did not end: {}", kv.s.log());
        let mut w = redis::pipe();
        for j in 0..20 {
            w.cmd("SET")
                .arg(format!("s:{}", (round * 20 + j) % 2000))
                .arg("new")
                .ignore();
        }
        // Each big key is first written a few rounds in (likely while its
        // record is half-written), then keeps changing.
        match round % 4 {
            0 if round >= 4 => {
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
            1 if round >= 9 => {
                w.cmd("RPUSH").arg("big:list").arg("more").ignore();
                w.cmd("LPOP").arg("big:list").ignore();
                w.cmd("LSET")
                    .arg("big:list")
                    .arg(100)
                    .arg("changed")
                    .ignore();
            }
            2 if round >= 14 => {
                w.cmd("ZINCRBY")
                    .arg("big:zset")
                    .arg(1000)
                    .arg(format!("m:{round}"))
                    .ignore();
                w.cmd("ZREM")
                    .arg("big:zset")
                    .arg(format!("m:{}", round + 3))
                    .ignore();
            }
            3 if round >= 19 => {
                w.cmd("SADD")
                    .arg("big:set")
                    .arg(format!("new:{round}"))
                    .ignore();
                w.cmd("SREM")
                    .arg("big:set")
                    .arg(format!("s:{round}"))
                    .ignore();
            }
            _ => {}
        }
        if round == 30 {
            w.cmd("PERSIST").arg("big:hash").ignore();
            w.cmd("SELECT").arg(3).ignore();
            w.cmd("SET").arg("other").arg("changed").ignore();
            w.cmd("SET").arg("new-in-3").arg("x").ignore();
            w.cmd("SELECT").arg(0).ignore();
        }
        let _: () = w.query(&mut c).unwrap();
        round += 1;
    }
    assert!(
        round > 25,
        "the save ended too soon to overlap the writes ({round})"
    );
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    let dump = kv.p.dir.join("dump.rdb");
    let check = Command::new(CHECK_RDB).arg(&dump).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout).to_string();
    assert!(
        check.status.success() && text.contains("RDB looks OK"),
        "{text}"
    );
    let r = Redis::start(&kv.p.dir, "dump.rdb");
    let mut cr = connect(r.addr);
    same(&contents(&mut cr), &want);
    let ttl: i64 = redis::cmd("PEXPIRETIME")
        .arg("big:hash")
        .query(&mut cr)
        .unwrap();
    assert_eq!(ttl, 4_000_000_000_000);
}

#[test]
fn the_respawned_kv_process_loads_the_last_snapshot() {
    let kv = start("kv-persist-respawn", "save \"\";");
    let mut c = connect(kv.addr);
    let _: () = redis::cmd("SET")
        .arg("saved")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("a")
        .arg("b")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("bg").arg("2").query(&mut c).unwrap();
    let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    wait_bgsave_done(&mut c);
    let last: i64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
    assert!(last > 1_600_000_000);
    let _: () = redis::cmd("SET")
        .arg("unsaved")
        .arg("3")
        .query(&mut c)
        .unwrap();
    let pid = kv_pid(&kv);
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kv.s.logged(
        &format!("kv process {pid} exited on signal 9"),
        Duration::from_secs(5)
    ));
    assert!(wait_for(Duration::from_secs(10), || ping(kv.addr)));
    let mut c = connect(kv.addr);
    let v: Option<String> = redis::cmd("GET").arg("saved").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("1"));
    let v: Option<String> = redis::cmd("GET").arg("bg").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("2"));
    let v: Option<String> = redis::cmd("HGET").arg("h").arg("a").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("b"));
    let v: Option<String> = redis::cmd("GET").arg("unsaved").query(&mut c).unwrap();
    assert_eq!(v, None);
}

#[test]
fn a_corrupt_or_truncated_dump_stops_the_start() {
    let good = {
        let kv = start("kv-persist-good", "save \"\";");
        let mut c = connect(kv.addr);
        for i in 0..100 {
            let _: () = redis::cmd("SET")
                .arg(format!("k{i}"))
                .arg("v".repeat(50))
                .query(&mut c)
                .unwrap();
        }
        let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
        std::fs::read(kv.p.dir.join("dump.rdb")).unwrap()
    };
    let mut footer = good.clone();
    let n = footer.len();
    footer[n - 1] ^= 0x20;
    let mut mid = good.clone();
    mid[n / 2] ^= 0x20;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", good[..good.len() - 30].to_vec(), "Short read"),
        ("footer", footer, "Wrong RDB checksum"),
        // A flipped byte inside the data: a parse error or the checksum.
        ("flipped", mid, "Fatal error loading the DB"),
        ("signature", b"NOTREDIS-at-all".to_vec(), "Wrong signature"),
    ];
    for (name, bytes, msg) in cases {
        let p = Prefix::new(&format!("kv-persist-{name}"));
        std::fs::write(p.dir.join("dump.rdb"), &bytes).unwrap();
        let port = free_port();
        p.conf(&format!(
            "daemon off;\nerror_log logs/error.log info;\nworker_processes 1;\nevents {{}}\n\
             kv {{\n    listen 127.0.0.1:{port};\n}}\n"
        ));
        let s = p.start();
        assert!(
            s.logged("cannot be respawned", Duration::from_secs(10)),
            "{name}: {}",
            s.log()
        );
        let log = s.log();
        assert!(log.contains("Fatal error loading the DB"), "{name}: {log}");
        assert!(log.contains(msg), "{name}: {log}");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        assert!(!ping(addr));
        // The file is left as it was for inspection.
        assert_eq!(std::fs::read(p.dir.join("dump.rdb")).unwrap(), bytes);
    }
}

#[test]
fn save_rules_run_from_the_cron_and_info_reports_them() {
    let kv = start("kv-persist-rules", "save 1 2;");
    let mut c = connect(kv.addr);
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "0");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("b").arg("1").query(&mut c).unwrap();
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "2");
    assert!(wait_for(Duration::from_secs(10), || {
        info_field(&mut c, "rdb_changes_since_last_save") == "0"
            && info_field(&mut c, "rdb_saves") != "0"
    }));
    assert!(kv
        .s
        .logged("2 changes in 1 seconds. Saving...", Duration::from_secs(2)));
    assert!(kv.s.logged(
        "Background saving terminated with success",
        Duration::from_secs(5)
    ));
    let dbs = read_dump(&kv.p.dir.join("dump.rdb"));
    assert_eq!(dbs[0].len(), 2);
}

#[test]
fn a_failing_save_refuses_writes_until_a_save_succeeds() {
    let kv = start("kv-persist-misconf", "dir data;\nsave 1 1;");
    let data: PathBuf = kv.p.dir.join("data");
    let mut c = connect(kv.addr);
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
    assert!(wait_for(Duration::from_secs(10), || info_field(
        &mut c,
        "rdb_last_bgsave_status"
    ) == "err"));
    assert!(
        kv.s.logged("Failed opening the temp RDB file", Duration::from_secs(2)),
        "{}",
        kv.s.log()
    );
    let e = redis::cmd("SET")
        .arg("b")
        .arg("1")
        .query::<()>(&mut c)
        .unwrap_err();
    assert_eq!(e.code(), Some("MISCONF"));
    let v: Option<String> = redis::cmd("GET").arg("a").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("1"));
    // Space (here: the directory) comes back: the rule retries after 5 s.
    std::fs::create_dir_all(&data).unwrap();
    assert!(wait_for(Duration::from_secs(15), || {
        redis::cmd("SET")
            .arg("b")
            .arg("1")
            .query::<()>(&mut c)
            .is_ok()
    }));
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert!(data.join("dump.rdb").exists());
}

#[test]
fn shutdown_saves_and_the_new_kv_process_loads_it() {
    let kv = start("kv-persist-shutdown", "save \"\";");
    let mut c = connect(kv.addr);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    for (args, err) in [
        (vec!["ABORT"], "No shutdown in progress."),
        (vec!["SAVE", "NOSAVE"], "syntax error"),
        (vec!["NOW", "ABORT"], "syntax error"),
        (vec!["BOGUS"], "syntax error"),
    ] {
        let e = redis::cmd("SHUTDOWN")
            .arg(&args)
            .query::<()>(&mut c)
            .unwrap_err();
        assert!(e.to_string().contains(err), "{args:?}: {e}");
    }
    let pid = kv_pid(&kv);
    // SHUTDOWN SAVE closes the connection without a reply.
    assert!(redis::cmd("SHUTDOWN")
        .arg("SAVE")
        .query::<()>(&mut c)
        .is_err());
    assert!(
        kv.s.logged(&format!("kv process {pid} exited"), Duration::from_secs(5)),
        "{}",
        kv.s.log()
    );
    assert!(kv.s.logged(
        "Redis is now ready to exit, bye bye...",
        Duration::from_secs(1)
    ));
    assert!(wait_for(Duration::from_secs(10), || ping(kv.addr)));
    let mut c = connect(kv.addr);
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    // NOSAVE: the change is not kept.
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("changed")
        .query(&mut c)
        .unwrap();
    assert!(redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .query::<()>(&mut c)
        .is_err());
    assert!(wait_for(Duration::from_secs(10), || {
        ping(kv.addr) && kv_pid(&kv) != pid
    }));
    std::thread::sleep(Duration::from_millis(200));
    assert!(wait_for(Duration::from_secs(10), || ping(kv.addr)));
    let mut c = connect(kv.addr);
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
}

#[test]
fn quit_saves_when_save_rules_exist() {
    let mut kv = start("kv-persist-quit", "");
    let mut c = connect(kv.addr);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("kept")
        .query(&mut c)
        .unwrap();
    drop(c);
    kv.s.signal("quit");
    assert!(kv.s.wait_exit(Duration::from_secs(10)), "{}", kv.s.log());
    assert!(
        kv.s.log()
            .contains("Saving the final RDB snapshot before exiting."),
        "{}",
        kv.s.log()
    );
    let dbs = read_dump(&kv.p.dir.join("dump.rdb"));
    assert_eq!(dbs[0].len(), 1);
    let _ = TcpStream::connect(kv.addr);
}

/// kill -9 at a moment that depends on the run while a client writes
/// `k:0, k:1, ...` one after the other and the save rule snapshots every
/// second or so: the respawned kv process has exactly `k:0 .. k:m` for
/// some m — one whole point-in-time snapshot, never a torn or mixed one.
#[test]
fn kill_9_under_writes_leaves_a_whole_snapshot() {
    let kv = start("kv-persist-crash", "save 1 1;");
    let mut c = connect(kv.addr);
    let pid = kv_pid(&kv);
    let mut n = 0u64;
    let t0 = std::time::Instant::now();
    // Write until two background saves have finished and a bit more.
    while t0.elapsed() < Duration::from_secs(20) {
        let _: () = query_retry(&mut c, kv.addr, |c| {
            redis::cmd("SET").arg(format!("k:{n}")).arg(n).query(c)
        });
        n += 1;
        if n % 500 == 0
            && kv
                .s
                .log()
                .matches("Background saving terminated with success")
                .count()
                >= 2
        {
            break;
        }
    }
    // A few more writes so the kill lands while the next save may run.
    for _ in 0..(n % 700) {
        let _: () = query_retry(&mut c, kv.addr, |c| {
            redis::cmd("SET").arg(format!("k:{n}")).arg(n).query(c)
        });
        n += 1;
    }
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kv.s.logged(
        &format!("kv process {pid} exited on signal 9"),
        Duration::from_secs(5)
    ));
    assert!(wait_for(Duration::from_secs(20), || ping(kv.addr)));
    let mut c = connect(kv.addr);
    assert!(wait_for(Duration::from_secs(20), || {
        redis::cmd("GET")
            .arg("k:0")
            .query::<Option<String>>(&mut c)
            .is_ok()
    }));
    let keys: Vec<String> = redis::cmd("KEYS").arg("k:*").query(&mut c).unwrap();
    let mut idx: Vec<u64> = keys.iter().map(|k| k[2..].parse().unwrap()).collect();
    idx.sort();
    let m = idx.len() as u64;
    assert!(m > 0, "no snapshot survived: {}", kv.s.log());
    assert!(m <= n);
    assert_eq!(
        idx,
        (0..m).collect::<Vec<_>>(),
        "not a prefix of the writes"
    );
    for i in [0, m / 2, m - 1] {
        let v: String = redis::cmd("GET")
            .arg(format!("k:{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(v, i.to_string());
    }
}

/// A mounted tmpfs, unmounted (lazily: gyre may still hold it) on drop.
/// A full disk: the background save fails with a log line and writes get
/// MISCONF; no temp file is left behind; once there is room again the
/// save rule's retry succeeds and writes are accepted, without any help.
#[test]
fn a_full_disk_fails_the_save_and_gyre_recovers_when_space_returns() {
    let p = Prefix::new("kv-persist-full");
    let Some(fs) = Tmpfs::mount(&p.dir.join("data"), "1m") else {
        eprintln!("skipping: cannot mount a tmpfs (needs root)");
        return;
    };
    let kv = start_in(p, "dir data;\nsave 1 1;");
    let mut c = connect(kv.addr);
    // 3 MB of values LZF cannot shrink (xorshift bytes).
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut pipe = redis::pipe();
    for i in 0..30_000 {
        let v: Vec<u8> = (0..100)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        pipe.cmd("SET").arg(format!("key:{i}")).arg(v).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    assert!(
        wait_for(Duration::from_secs(15), || info_field(
            &mut c,
            "rdb_last_bgsave_status"
        ) == "err"),
        "{}",
        kv.s.log()
    );
    assert!(kv
        .s
        .logged("Background saving error", Duration::from_secs(2)));
    assert!(
        kv.s.log().contains("No space left on device"),
        "{}",
        kv.s.log()
    );
    let e = redis::cmd("SET")
        .arg("x")
        .arg("1")
        .query::<()>(&mut c)
        .unwrap_err();
    assert_eq!(e.code(), Some("MISCONF"));
    let v: Option<Vec<u8>> = redis::cmd("GET").arg("key:7").query(&mut c).unwrap();
    assert_eq!(v.map(|v| v.len()), Some(100));
    let left: Vec<String> = std::fs::read_dir(&fs.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.iter().all(|n| !n.starts_with("temp-")), "{left:?}");
    fs.resize("64m");
    assert!(wait_for(Duration::from_secs(20), || {
        redis::cmd("SET")
            .arg("x")
            .arg("1")
            .query::<()>(&mut c)
            .is_ok()
    }));
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    let dbs = read_dump(&fs.0.join("dump.rdb"));
    assert!(dbs[0].len() >= 30_000);
}

/// A reload that changes `kv {}` replaces the kv process: the old one saves
/// on its way out (save rules are set) and the new one starts only after
/// that, so it loads every write acknowledged before the reload. Started
/// together, the new one loaded the older dump, which the old one's exit
/// save then overwrote: the last writes were gone from memory.
#[test]
fn a_reload_that_replaces_the_kv_process_keeps_the_last_writes() {
    let kv = start("kv-persist-reload", "save 3600 1;");
    let mut c = connect(kv.addr);
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("b").arg("2").query(&mut c).unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let old = kv_pid(&kv);
    let port = kv.addr.port();
    kv.p.conf(&format!(
        "daemon off;\nerror_log logs/error.log info;\nworker_processes 1;\nevents {{}}\n\
         kv {{\n    listen 127.0.0.1:{port};\nsave 3600 1;\nhz 20;\n}}\n"
    ));
    kv.s.signal("reload");
    assert!(
        kv.s.logged(&format!("kv process {old} exited"), Duration::from_secs(10)),
        "{}",
        kv.s.log()
    );
    assert!(wait_for(Duration::from_secs(10), || ping(kv.addr)));
    assert_ne!(kv_pid(&kv), old, "the kv process was replaced");
    let mut c = connect(kv.addr);
    for (k, want) in [("a", "1"), ("b", "2")] {
        let v: Option<String> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
        assert_eq!(v.as_deref(), Some(want), "{k}\n{}", kv.s.log());
    }
    let v: Option<String> = redis::cmd("HGET").arg("h").arg("f").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
}
