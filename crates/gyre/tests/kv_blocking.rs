//! Blocking list operations through the real binary over raw sockets:
//! many clients blocked on one key are served in the order they blocked,
//! a timeout answers nil, a client that disconnects while blocked leaves
//! nothing behind (INFO blocked_clients, CLIENT LIST, the pushed element
//! stays), CLIENT UNBLOCK TIMEOUT|ERROR, BLMOVE served by a push, and input
//! pipelined after a blocking command runs once the client is served.
//!
//! Every scenario runs against gyre and, when Debian's redis-server is
//! installed, against it too: the expected replies are Redis's.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use util::ReadSome;

use gyre_kv::resp::{decode_reply, Reply};
use util::kv::{Redis, REDIS};
use util::wait_for;

struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn new(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client { s, buf: Vec::new() }
    }

    fn send(&mut self, args: &[&str]) {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.s.write_all(&req).unwrap();
    }

    fn read(&mut self) -> Reply {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some((r, n)) = decode_reply(&self.buf) {
                self.buf.drain(..n);
                return r;
            }
            assert!(Instant::now() < deadline, "no reply");
            let mut chunk = [0u8; 4096];
            let n = self.s.read_some(&mut chunk).unwrap();
            assert!(n > 0, "closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn cmd(&mut self, args: &[&str]) -> Reply {
        self.send(args);
        self.read()
    }
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn key_value(k: &str, v: &str) -> Reply {
    Reply::Array(vec![bulk(k), bulk(v)])
}

fn blocked_clients(c: &mut Client) -> usize {
    let Reply::Bulk(info) = c.cmd(&["INFO", "clients"]) else {
        panic!("INFO");
    };
    let text = String::from_utf8(info).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Waits (bounded) until `n` clients are blocked.
fn wait_blocked(c: &mut Client, n: usize) {
    assert!(
        wait_for(Duration::from_secs(5), || blocked_clients(c) == n),
        "expected {n} blocked clients, have {}",
        blocked_clients(c)
    );
}

fn scenarios(addr: SocketAddr) {
    let mut admin = Client::new(addr);
    assert_eq!(admin.cmd(&["FLUSHALL"]), Reply::Simple(b"OK".to_vec()));

    // Five clients block on one key, one after the other; one push of five
    // elements serves them in that order, one element each.
    let mut waiters: Vec<Client> = (0..5).map(|_| Client::new(addr)).collect();
    for (i, w) in waiters.iter_mut().enumerate() {
        w.send(&["BLPOP", "q", "0"]);
        wait_blocked(&mut admin, i + 1);
    }
    assert_eq!(
        admin.cmd(&["RPUSH", "q", "e0", "e1", "e2", "e3", "e4", "e5"]),
        Reply::Int(6)
    );
    for (i, w) in waiters.iter_mut().enumerate() {
        assert_eq!(w.read(), key_value("q", &format!("e{i}")), "waiter {i}");
    }
    assert_eq!(blocked_clients(&mut admin), 0);
    assert_eq!(
        admin.cmd(&["LRANGE", "q", "0", "-1"]),
        Reply::Array(vec![bulk("e5")])
    );

    // A timeout answers a null array; the client then works normally.
    let mut t = Client::new(addr);
    assert_eq!(t.cmd(&["BLPOP", "none", "0.05"]), Reply::NullArray);
    assert_eq!(
        t.cmd(&["BRPOPLPUSH", "none", "x", "0.05"]),
        Reply::NullArray
    );
    assert_eq!(
        t.cmd(&["BLMPOP", "0.05", "1", "none", "LEFT"]),
        Reply::NullArray
    );
    assert_eq!(t.cmd(&["PING"]), Reply::Simple(b"PONG".to_vec()));

    // A client that disconnects while blocked is forgotten at once.
    {
        let mut gone = Client::new(addr);
        gone.send(&["BRPOP", "k2", "0"]);
        wait_blocked(&mut admin, 1);
    }
    wait_blocked(&mut admin, 0);
    assert_eq!(admin.cmd(&["LPUSH", "k2", "v"]), Reply::Int(1));
    assert_eq!(admin.cmd(&["LLEN", "k2"]), Reply::Int(1));
    let Reply::Bulk(list) = admin.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST");
    };
    let list = String::from_utf8(list).unwrap();
    assert!(!list.contains("flags=b"), "{list}");

    // CLIENT UNBLOCK: TIMEOUT answers nil, ERROR the UNBLOCKED error; an
    // unblocked client is 0.
    let mut u = Client::new(addr);
    let Reply::Int(uid) = u.cmd(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID");
    };
    let uid = uid.to_string();
    u.send(&["BLPOP", "k3", "0"]);
    wait_blocked(&mut admin, 1);
    let Reply::Bulk(list) = admin.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST");
    };
    let list = String::from_utf8(list).unwrap();
    assert!(
        list.lines()
            .any(|l| l.contains("flags=b") && l.contains("cmd=blpop")),
        "{list}"
    );
    assert_eq!(
        admin.cmd(&["CLIENT", "UNBLOCK", &uid, "TIMEOUT"]),
        Reply::Int(1)
    );
    assert_eq!(u.read(), Reply::NullArray);
    u.send(&["BLMOVE", "k3", "dst", "LEFT", "RIGHT", "0"]);
    wait_blocked(&mut admin, 1);
    assert_eq!(
        admin.cmd(&["CLIENT", "UNBLOCK", &uid, "ERROR"]),
        Reply::Int(1)
    );
    assert_eq!(
        u.read(),
        Reply::Error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK".to_vec())
    );
    assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &uid]), Reply::Int(0));
    assert_eq!(
        admin.cmd(&["CLIENT", "UNBLOCK", &uid, "BAD"]),
        Reply::Error(b"ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR".to_vec())
    );

    // BLMOVE is served by a push into its source; input pipelined after a
    // blocking command runs once the client is served.
    u.send(&["BLMOVE", "src", "dst", "RIGHT", "LEFT", "0"]);
    u.send(&["LRANGE", "dst", "0", "-1"]);
    wait_blocked(&mut admin, 1);
    assert_eq!(admin.cmd(&["LPUSH", "src", "a", "b"]), Reply::Int(2));
    assert_eq!(u.read(), bulk("a"));
    assert_eq!(u.read(), Reply::Array(vec![bulk("a")]));
    assert_eq!(
        admin.cmd(&["LRANGE", "src", "0", "-1"]),
        Reply::Array(vec![bulk("b")])
    );

    // A client blocked on two keys is served by the first that gets a list,
    // and only once; BLMPOP takes up to COUNT.
    u.send(&["BLMPOP", "0", "2", "m1", "m2", "LEFT", "COUNT", "2"]);
    wait_blocked(&mut admin, 1);
    assert_eq!(admin.cmd(&["RPUSH", "m2", "x", "y", "z"]), Reply::Int(3));
    assert_eq!(
        u.read(),
        Reply::Array(vec![bulk("m2"), Reply::Array(vec![bulk("x"), bulk("y")])])
    );
    assert_eq!(admin.cmd(&["RPUSH", "m1", "w"]), Reply::Int(1));
    assert_eq!(blocked_clients(&mut admin), 0);
    assert_eq!(admin.cmd(&["LLEN", "m1"]), Reply::Int(1));
}

#[test]
fn blocking_pops_like_redis() {
    let kv = util::kv::start("kv-blocking", "");
    scenarios(kv.addr);

    if !std::path::Path::new(REDIS).exists() {
        println!("skipping the redis-server run: {REDIS} is missing");
        return;
    }
    let redis = Redis::start_with(&kv.p.dir, "dump.rdb", &["--appendonly", "no"]);
    scenarios(redis.addr);
}
