#![allow(dead_code)]
use gyre_kv::resp::decode_reply;
use gyre_kv::{ClientId, Config, FeedOutcome, Reply, Server};

pub const T0: i64 = 1_700_000_000_000;

/// One server and one connected client with a simulated clock.
pub struct T {
    pub s: Server,
    pub id: ClientId,
    pub now: i64,
}

impl T {
    pub fn new() -> T {
        T::with(Config::default())
    }

    pub fn with(config: Config) -> T {
        let mut s = Server::new(config, T0);
        let id = s
            .connect("127.0.0.1:50000", "127.0.0.1:6379", 9, T0)
            .unwrap();
        T { s, id, now: T0 }
    }

    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        let v: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.cmdb(&v)
    }

    pub fn cmdb(&mut self, args: &[&[u8]]) -> Reply {
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let mut out = Vec::new();
        self.s.execute(self.id, &argv, self.now, &mut out);
        let (r, n) = decode_reply(&out).expect("one complete reply");
        assert_eq!(n, out.len(), "exactly one reply");
        r
    }

    /// Feed raw bytes; decode every reply.
    pub fn raw(&mut self, input: &[u8]) -> (Vec<Reply>, FeedOutcome) {
        let mut out = Vec::new();
        let o = self.s.feed(self.id, input, self.now, &mut out);
        (decode_all(&out), o)
    }

    pub fn advance(&mut self, ms: i64) {
        self.now += ms;
    }
}

pub fn decode_all(mut b: &[u8]) -> Vec<Reply> {
    let mut v = Vec::new();
    while !b.is_empty() {
        let (r, n) = decode_reply(b).expect("well-formed reply");
        v.push(r);
        b = &b[n..];
    }
    v
}

pub fn ok() -> Reply {
    Reply::Simple(b"OK".to_vec())
}
pub fn st(s: &str) -> Reply {
    Reply::Simple(s.as_bytes().to_vec())
}
pub fn err(s: &str) -> Reply {
    Reply::Error(s.as_bytes().to_vec())
}
pub fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}
pub fn int(n: i64) -> Reply {
    Reply::Int(n)
}
pub fn null() -> Reply {
    Reply::Null
}
pub fn arr(v: Vec<Reply>) -> Reply {
    Reply::Array(v)
}
