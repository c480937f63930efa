//! The kv process's cache features through the real binary with the
//! `redis` crate's own helpers: `redis::transaction` (WATCH/MULTI/EXEC
//! optimistic locking under contention), `PubSub`, AUTH through the
//! client URL, one PUBLISH fanned out to 100 channel and pattern
//! subscribers in order, the redis.conf spellings of every cache setting
//! in `kv {}`, and a subscriber that never reads being cut off at its
//! hard output limit (logged as Redis logs it) while other clients keep
//! being served.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use util::ReadSome;

use util::http::free_port;
use util::kv::{start, Kv};
use util::Prefix;

fn client_url(url: &str) -> redis::Connection {
    let c = redis::Client::open(url).unwrap();
    c.get_connection_with_timeout(Duration::from_secs(5))
        .unwrap()
}

fn client(kv: &Kv) -> redis::Connection {
    client_url(&format!("redis://{}/", kv.addr))
}

#[test]
fn transaction_helper_is_atomic_under_contention() {
    let kv = start("kvc-tx", "");
    const PER_THREAD: i64 = 100;
    let url = format!("redis://{}/", kv.addr);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut c = client_url(&url);
                let mut retries = 0u64;
                for _ in 0..PER_THREAD {
                    let _: () = redis::transaction(&mut c, &["counter"], |c, pipe| {
                        let v: Option<i64> = redis::cmd("GET").arg("counter").query(c)?;
                        // A read-modify-write that is only correct under WATCH.
                        let r: Option<()> = pipe
                            .cmd("SET")
                            .arg("counter")
                            .arg(v.unwrap_or(0) + 1)
                            .ignore()
                            .query(c)?;
                        if r.is_none() {
                            retries += 1;
                        }
                        Ok(r)
                    })
                    .unwrap();
                }
                retries
            })
        })
        .collect();
    let retries: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let mut c = client(&kv);
    let total: i64 = redis::cmd("GET").arg("counter").query(&mut c).unwrap();
    assert_eq!(total, 3 * PER_THREAD, "no lost update ({retries} retries)");
}

#[test]
fn exec_errors_and_aborts_through_the_client() {
    let kv = start("kvc-exec", "");
    let mut c = client(&kv);
    // Runtime errors do not roll back: the SET stays, INCR's error is in place.
    let r: redis::RedisResult<(String, i64)> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("s")
        .arg("text")
        .cmd("INCR")
        .arg("s")
        .query(&mut c);
    let e = r.unwrap_err();
    assert!(e.to_string().contains("not an integer"), "{e}");
    let v: String = redis::cmd("GET").arg("s").query(&mut c).unwrap();
    assert_eq!(v, "text");
    // A queueing error aborts the whole transaction.
    let r: redis::RedisResult<()> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("s")
        .arg("other")
        .cmd("NOSUCHCMD")
        .query(&mut c);
    // The client reports the queueing error (the EXEC answered EXECABORT).
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("EXECABORT") || e.contains("unknown command"),
        "{e}"
    );
    let v: String = redis::cmd("GET").arg("s").query(&mut c).unwrap();
    assert_eq!(v, "text");
}

#[test]
fn pubsub_helper_receives_channel_and_pattern_messages() {
    let kv = start("kvc-pubsub", "");
    let mut sub_conn = client(&kv);
    let mut ps = sub_conn.as_pubsub();
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    ps.subscribe("jobs").unwrap();
    ps.psubscribe("cache:*").unwrap();
    let mut publ = client(&kv);
    let n: i64 = redis::cmd("PUBLISH")
        .arg("jobs")
        .arg("job-1")
        .query(&mut publ)
        .unwrap();
    assert_eq!(n, 1);
    let n: i64 = redis::cmd("PUBLISH")
        .arg("cache:user:7")
        .arg("invalidate")
        .query(&mut publ)
        .unwrap();
    assert_eq!(n, 1);
    let m = ps.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "jobs");
    assert_eq!(m.get_payload::<String>().unwrap(), "job-1");
    let m = ps.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "cache:user:7");
    assert_eq!(m.get_pattern::<String>().unwrap(), "cache:*");
    assert_eq!(m.get_payload::<String>().unwrap(), "invalidate");
    ps.unsubscribe("jobs").unwrap();
    ps.punsubscribe("cache:*").unwrap();
    drop(ps);
    // Back in normal mode on the same connection.
    let pong: String = redis::cmd("PING").query(&mut sub_conn).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn requirepass_through_the_client_url() {
    let kv = start("kvc-auth", "requirepass \"s3cret\";\nprotected-mode yes;");
    let mut c = client(&kv);
    let e = redis::cmd("GET")
        .arg("a")
        .query::<Option<String>>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("NOAUTH"), "{e}");
    let mut c = client_url(&format!("redis://:s3cret@{}/", kv.addr));
    let v: Option<String> = redis::cmd("GET").arg("a").query(&mut c).unwrap();
    assert_eq!(v, None);
    let mut c = client_url(&format!("redis://default:s3cret@{}/", kv.addr));
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
    let bad = redis::Client::open(format!("redis://default:nope@{}/", kv.addr))
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(5));
    assert!(bad.is_err());
    assert!(
        !kv.s.log().contains("s3cret"),
        "the password is never logged"
    );
}

#[test]
fn a_subscriber_that_never_reads_is_cut_at_its_hard_limit() {
    let kv = start("kvc-slow", "client-output-buffer-limit pubsub 1mb 0 0;");
    // The slow subscriber: subscribes, then never reads again.
    let mut slow = TcpStream::connect(kv.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    slow.write_all(b"SUBSCRIBE firehose\r\n").unwrap();
    let mut ack = [0u8; 64];
    let n = slow.read_some(&mut ack).unwrap();
    assert!(ack[..n].starts_with(b"*3\r\n$9\r\nsubscribe\r\n"));
    // A subscriber that keeps reading.
    let mut fast_conn = client(&kv);
    let mut fast = fast_conn.as_pubsub();
    fast.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    fast.subscribe("firehose").unwrap();
    let mut publ = client(&kv);
    let payload = "z".repeat(16 * 1024);
    // Far more than the socket buffers plus the 1 MB limit.
    let total = 1500;
    let mut cut_at = None;
    for i in 0..total {
        let n: i64 = redis::cmd("PUBLISH")
            .arg("firehose")
            .arg(&payload)
            .query(&mut publ)
            .unwrap();
        if n == 1 && cut_at.is_none() {
            cut_at = Some(i);
        }
        let m = fast.get_message().unwrap();
        assert_eq!(m.get_payload::<String>().unwrap().len(), payload.len());
    }
    let cut_at = cut_at.expect("the slow subscriber was dropped");
    assert!(cut_at > 10, "kept while under the limit (cut at {cut_at})");
    assert!(
        kv.s.logged(
            "scheduled to be closed ASAP for overcoming of output buffer limits.",
            Duration::from_secs(5)
        ),
        "{}",
        kv.s.log()
    );
    // Its socket reaches EOF after whatever the kernel had buffered.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0usize;
    loop {
        assert!(Instant::now() < deadline, "slow subscriber not closed");
        match slow.read_some(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => panic!("read: {e}"),
        }
    }
    assert!(got < total * payload.len(), "it did not get everything");
    // Everybody else is still served.
    let pong: String = redis::cmd("PING").query(&mut publ).unwrap();
    assert_eq!(pong, "PONG");
    let n: i64 = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("firehose")
        .query::<(String, i64)>(&mut publ)
        .unwrap()
        .1;
    assert_eq!(n, 1);
}

#[test]
fn redis_conf_spellings_in_kv_block_reach_config_get() {
    let kv = start(
        "kvc-conf",
        "protected-mode no;\nnotify-keyspace-events \"Ex\";\n\
         client-output-buffer-limit pubsub 4mb 1mb 30;\nclient-output-buffer-limit normal 0 0 0;\n\
         maxmemory 64mb;\nmaxmemory-policy allkeys-lfu;\nmaxmemory_samples 7;\n\
         maxmemory-eviction-tenacity 20;\nlfu-log-factor 5;\nlfu_decay_time 2;\n\
         dynamic-hz no;\nproto-max-bulk-len 64mb;\nclient-query-buffer-limit 32mb;",
    );
    let mut c = client(&kv);
    let get = |c: &mut redis::Connection, name: &str| -> String {
        let v: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
        assert_eq!(v.len(), 2, "{name}: {v:?}");
        v[1].clone()
    };
    assert_eq!(get(&mut c, "protected-mode"), "no");
    assert_eq!(get(&mut c, "notify-keyspace-events"), "xE");
    assert_eq!(
        get(&mut c, "client-output-buffer-limit"),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 4194304 1048576 30"
    );
    assert_eq!(get(&mut c, "maxmemory"), (64u64 << 20).to_string());
    assert_eq!(get(&mut c, "maxmemory-policy"), "allkeys-lfu");
    assert_eq!(get(&mut c, "maxmemory-samples"), "7");
    assert_eq!(get(&mut c, "maxmemory-eviction-tenacity"), "20");
    assert_eq!(get(&mut c, "lfu-log-factor"), "5");
    assert_eq!(get(&mut c, "lfu-decay-time"), "2");
    assert_eq!(get(&mut c, "dynamic-hz"), "no");
    assert_eq!(get(&mut c, "proto-max-bulk-len"), (64u64 << 20).to_string());
    assert_eq!(
        get(&mut c, "client-query-buffer-limit"),
        (32u64 << 20).to_string()
    );
}

#[test]
fn a_bad_cache_setting_is_refused_at_startup() {
    let p = Prefix::new("kvc-badconf");
    let port = free_port();
    p.conf(&format!(
        "daemon off;\nerror_log logs/error.log notice;\nworker_processes 1;\nevents {{}}\n\
         kv {{\n    listen 127.0.0.1:{port};\n    maxmemory-policy lru;\n}}\n"
    ));
    let out = p.run(&["-t"]);
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("must be one of the following"), "{text}");
}

#[test]
fn a_publish_reaches_every_one_of_many_subscribers_in_order() {
    let kv = start("kvc-fanout", "");
    const SUBS: usize = 100;
    const MSGS: usize = 50;
    let mut subs: Vec<TcpStream> = (0..SUBS)
        .map(|i| {
            let mut s = TcpStream::connect(kv.addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            // Half by channel, half by pattern.
            let cmd = if i % 2 == 0 {
                "SUBSCRIBE news\r\n"
            } else {
                "PSUBSCRIBE ne*\r\n"
            };
            s.write_all(cmd.as_bytes()).unwrap();
            s
        })
        .collect();
    for s in &mut subs {
        let mut ack = [0u8; 64];
        let n = s.read_some(&mut ack).unwrap();
        assert!(ack[..n].starts_with(b"*3\r\n$"), "{:?}", &ack[..n]);
    }
    let mut publ = client(&kv);
    for m in 0..MSGS {
        let n: i64 = redis::cmd("PUBLISH")
            .arg("news")
            .arg(format!("m{m}"))
            .query(&mut publ)
            .unwrap();
        assert_eq!(n, SUBS as i64);
    }
    for (i, s) in subs.iter_mut().enumerate() {
        let mut expect = Vec::new();
        for m in 0..MSGS {
            let body = format!("m{m}");
            if i % 2 == 0 {
                expect.extend_from_slice(
                    format!(
                        "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n${}\r\n{body}\r\n",
                        body.len()
                    )
                    .as_bytes(),
                );
            } else {
                expect.extend_from_slice(
                    format!(
                        "*4\r\n$8\r\npmessage\r\n$3\r\nne*\r\n$4\r\nnews\r\n${}\r\n{body}\r\n",
                        body.len()
                    )
                    .as_bytes(),
                );
            }
        }
        let mut got = vec![0u8; expect.len()];
        s.read_exact(&mut got).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expect),
            "subscriber {i}"
        );
    }
}
