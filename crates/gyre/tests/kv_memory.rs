//! What a big aggregate costs the kv process in resident memory, on the
//! real binary: a hash of many short fields, written by a client and then
//! loaded back from the dump file by a respawned kv process, must stay
//! near its entries' own size (short fields and values inside the table's
//! entries, no allocation of their own, and no garbage left by the loader), and INFO's `used_memory_rss`
//! and `mem_fragmentation_ratio` must report the process's real RSS.
#![allow(clippy::unwrap_used)]

mod util;

use std::time::Duration;

use util::kv::{connect, field_of, kv_pid, ping, start};
use util::{rss_kib, wait_for};

const FIELDS: usize = 200_000;

/// RSS in KiB of the kv process once the hash is there, over its RSS
/// before.
fn per_field(kib: u64) -> u64 {
    kib * 1024 / FIELDS as u64
}

fn info_memory(c: &mut redis::Connection) -> String {
    redis::cmd("INFO").arg("memory").query(c).unwrap()
}

#[test]
fn a_big_hash_of_short_fields_stays_small_written_and_reloaded() {
    let kv = start("kv-mem-hash", "save \"\";");
    let pid = kv_pid(&kv);
    let mut c = connect(kv.addr);
    let before = rss_kib(pid);
    for batch in 0..FIELDS / 1000 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg("bigh");
        for i in batch * 1000..(batch + 1) * 1000 {
            cmd.arg(format!("field:{i}"))
                .arg(format!("v{:07}", i * 7 % 10_000_000));
        }
        let _: usize = cmd.query(&mut c).unwrap();
    }
    let written = rss_kib(pid).saturating_sub(before);
    // 12-byte fields and 8-byte values: both inside the 32-byte entry,
    // the index (a slot and its tag) and the vectors' spare room (~50
    // bytes at this size); one 32-byte chunk for both beside a 16-byte
    // entry were ~70, a field and a value in two chunks beside a 32-byte
    // entry ~115, and ~125 loaded from the dump.
    assert!(
        per_field(written) < 64,
        "{} bytes a field once written ({written} KiB)",
        per_field(written)
    );
    // INFO's RSS is the process's own, and the ratio follows from it.
    let info = info_memory(&mut c);
    let rss: u64 = field_of(&info, "used_memory_rss").parse().unwrap();
    let used: u64 = field_of(&info, "used_memory").parse().unwrap();
    let real = rss_kib(pid) * 1024;
    assert!(
        rss.abs_diff(real) < real / 5,
        "used_memory_rss {rss} vs /proc {real}"
    );
    let ratio: f64 = field_of(&info, "mem_fragmentation_ratio").parse().unwrap();
    assert!(
        (ratio - rss as f64 / used as f64).abs() < 0.02,
        "ratio {ratio} for rss {rss} used {used}"
    );

    // Saved, then a respawned kv process loads it back.
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    assert!(redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .query::<()>(&mut c)
        .is_err());
    assert!(wait_for(Duration::from_secs(20), || {
        ping(kv.addr) && kv_pid(&kv) != pid
    }));
    let pid2 = kv_pid(&kv);
    let mut c = connect(kv.addr);
    let n: usize = redis::cmd("HLEN").arg("bigh").query(&mut c).unwrap();
    assert_eq!(n, FIELDS);
    let v: String = redis::cmd("HGET")
        .arg("bigh")
        .arg("field:4242")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, format!("v{:07}", 4242 * 7));
    let loaded = rss_kib(pid2).saturating_sub(before);
    println!(
        "bytes a field: {} written, {} loaded",
        per_field(written),
        per_field(loaded)
    );
    assert!(
        per_field(loaded) < 64,
        "{} bytes a field once loaded from the dump ({loaded} KiB; written: {written} KiB)",
        per_field(loaded)
    );
}

/// MEMORY against redis-server 7.0: the same replies where they do not
/// depend on the allocator (HELP, errors, nil for a missing key, DOCTOR
/// on an empty instance, PURGE), and the same shape where they do (USAGE
/// is a number, STATS has Redis's fields in Redis's order).
#[test]
fn the_memory_command_answers_as_redis() {
    if !util::kv::have(util::kv::REDIS) {
        println!("skipping: {} is missing", util::kv::REDIS);
        return;
    }
    let kv = start("kv-mem-cmd", "save \"\";");
    let p = util::Prefix::new("kv-mem-cmd-redis");
    let redis = util::kv::Redis::start(&p.dir, "dump.rdb");
    let mut g = connect(kv.addr);
    let mut r = connect(redis.addr);
    let ask = |c: &mut redis::Connection, args: &[&str]| -> redis::Value {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        match cmd.query::<redis::Value>(c) {
            Ok(v) => v,
            Err(e) => redis::Value::SimpleString(format!("error: {e}")),
        }
    };
    for args in [
        &["MEMORY", "HELP"][..],
        &["MEMORY", "DOCTOR"],
        &["MEMORY", "PURGE"],
        &["MEMORY", "USAGE", "nokey"],
        &["MEMORY", "USAGE", "nokey", "SAMPLES", "0"],
        &["MEMORY", "USAGE", "k", "SAMPLES", "-1"],
        &["MEMORY", "USAGE", "k", "SAMPLES", "x"],
        &["MEMORY", "USAGE", "k", "SAMPLES"],
        &["MEMORY", "USAGE", "k", "foo"],
        &["MEMORY", "USAGE"],
        &["MEMORY"],
        &["MEMORY", "foo"],
        &["MEMORY", "STATS", "extra"],
    ] {
        assert_eq!(ask(&mut g, args), ask(&mut r, args), "{args:?}");
    }
    for c in [&mut g, &mut r] {
        let _: () = redis::cmd("SET").arg("k").arg("v").query(c).unwrap();
        let _: () = redis::cmd("HSET")
            .arg("h")
            .arg("f")
            .arg("v")
            .query(c)
            .unwrap();
    }
    for key in ["k", "h"] {
        for c in [&mut g, &mut r] {
            let n: i64 = redis::cmd("MEMORY").arg("USAGE").arg(key).query(c).unwrap();
            assert!(n > 0, "{key}: {n}");
        }
    }
    let names = |v: redis::Value| -> Vec<String> {
        let redis::Value::Array(items) = v else {
            panic!("not an array: {v:?}");
        };
        items
            .iter()
            .step_by(2)
            .map(|x| match x {
                redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("not a name: {other:?}"),
            })
            .collect()
    };
    assert_eq!(
        names(ask(&mut g, &["MEMORY", "STATS"])),
        names(ask(&mut r, &["MEMORY", "STATS"]))
    );
    // INFO memory: Redis's fields in Redis's order (exporters read them).
    let fields = |c: &mut redis::Connection| -> Vec<String> {
        info_memory(c)
            .lines()
            .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
            .collect()
    };
    assert_eq!(fields(&mut g), fields(&mut r));
}
