//! nginx's `hash KEY [consistent]` (`ngx_http_upstream_hash_module.c`).
//!
//! Plain hashing is Cache::Memcached's: `((crc32([REHASH] KEY) >> 16) &
//! 0x7fff)` added to the previous value, the sum taken modulo the total
//! weight and walked over the peers by weight; a peer that cannot be used
//! is rehashed with the attempt number in front of the key, 20 times at
//! most, then round robin takes over.
//!
//! Consistent hashing is ketama as in Cache::Memcached::Fast: each peer gets
//! `160 * weight` points, point `j` being the CRC-32 of `HOST \0 PORT`
//! followed by point `j-1`'s four bytes (little-endian; zero for the
//! first), where HOST and PORT split the `server` argument as written at
//! its last `:` (a `unix:` server is all host). The points are sorted and
//! deduplicated; a key goes to the first point at or after `crc32(KEY)`,
//! wrapping, and unusable servers move it to the next point. The same key
//! therefore maps to the same server as in nginx.

use super::crc32::{crc32, Crc32};
use super::round_robin::{Chosen, Peers, RrRequest};

/// nginx's limit on rehashes before falling back to round robin.
const MAX_TRIES: usize = 20;

/// One request's state for `hash KEY`.
#[derive(Clone, Debug, Default)]
pub struct HashRequest {
    tries: usize,
    rehash: u32,
    hash: u32,
}

impl HashRequest {
    /// nginx's `ngx_http_upstream_get_hash_peer`.
    pub fn get(
        &mut self,
        rr: &mut RrRequest,
        peers: &mut Peers,
        key: &[u8],
        now: i64,
    ) -> Option<Chosen> {
        let tier = &peers.primary;
        if self.tries > MAX_TRIES || tier.single || key.is_empty() || tier.total_weight <= 0 {
            return rr.get(peers, now);
        }
        let p = loop {
            let mut c = Crc32::new();
            if self.rehash > 0 {
                c.update(self.rehash.to_string().as_bytes());
            }
            c.update(key);
            let h = (c.finish() >> 16) & 0x7fff;
            self.hash = self.hash.wrapping_add(h);
            self.rehash += 1;
            let mut w = i64::from(self.hash) % tier.total_weight;
            let mut p = 0;
            while p + 1 < tier.peers.len() && w >= tier.peers[p].weight {
                w -= tier.peers[p].weight;
                p += 1;
            }
            if !rr.tried.has(p) && tier.peers[p].usable(now) {
                break p;
            }
            self.tries += 1;
            if self.tries > MAX_TRIES {
                return rr.get(peers, now);
            }
        };
        let c = Chosen {
            backup: false,
            index: p,
        };
        rr.current = Some(c);
        peers.primary.peers[p].chosen(now);
        rr.tried.set(p);
        Some(c)
    }
}

/// The sorted ketama points of an upstream (`hcf->points`).
#[derive(Clone, Debug, Default)]
pub struct Points {
    /// (point, server id): ids index [`Points::servers`].
    points: Vec<(u32, u32)>,
    /// Distinct `server` arguments; a peer's id is its position here.
    servers: Vec<String>,
    /// Each peer's server id, in peer order.
    peer_server: Vec<u32>,
}

impl Points {
    /// nginx's `ngx_http_upstream_init_chash`.
    pub fn new(peers: &Peers) -> Points {
        let mut pts = Points::default();
        for p in &peers.primary.peers {
            let id = match pts.servers.iter().position(|s| *s == p.server) {
                Some(i) => i as u32,
                None => {
                    pts.servers.push(p.server.clone());
                    (pts.servers.len() - 1) as u32
                }
            };
            pts.peer_server.push(id);
            let (host, port) = split_server(&p.server);
            let mut base = Crc32::new();
            base.update(host);
            base.update(b"\0");
            base.update(port);
            let mut prev = 0u32;
            let n = p.weight.max(0) as usize * 160;
            for _ in 0..n {
                let mut h = base;
                h.update(&prev.to_le_bytes());
                let v = h.finish();
                pts.points.push((v, id));
                prev = v;
            }
        }
        // nginx's qsort is not stable, but equal hashes are then collapsed
        // to one; which server keeps a colliding point is the one detail
        // that may differ (a 32-bit collision between two servers).
        pts.points.sort_by_key(|&(h, _)| h);
        pts.points.dedup_by_key(|&mut (h, _)| h);
        pts
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The point values, sorted (for tests and diagnostics).
    pub fn values(&self) -> impl Iterator<Item = u32> + '_ {
        self.points.iter().map(|&(h, _)| h)
    }

    /// nginx's `ngx_http_upstream_find_chash_point`: the first point `>=
    /// hash` (may be `len()`, which wraps to 0).
    pub fn find(&self, hash: u32) -> usize {
        self.points.partition_point(|&(h, _)| h < hash)
    }

    /// The `server` argument a key maps to first (before health checks).
    pub fn server_for(&self, key: &[u8]) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let i = self.find(crc32(key)) % self.points.len();
        self.servers
            .get(self.points[i].1 as usize)
            .map(String::as_str)
    }
}

/// Splits `host:port` at the last colon followed only by digits, as nginx
/// does; `unix:PATH` is all host.
fn split_server(s: &str) -> (&[u8], &[u8]) {
    let b = s.as_bytes();
    if b.len() >= 5 && b[..5].eq_ignore_ascii_case(b"unix:") {
        return (&b[5..], b"");
    }
    for j in 0..b.len() {
        let c = b[b.len() - j - 1];
        if c == b':' {
            return (&b[..b.len() - j - 1], &b[b.len() - j..]);
        }
        if !c.is_ascii_digit() {
            break;
        }
    }
    (b, b"")
}

/// One request's state for `hash KEY consistent`.
#[derive(Clone, Debug, Default)]
pub struct ChashRequest {
    tries: usize,
    /// The point index being tried.
    hash: usize,
}

impl ChashRequest {
    /// nginx's `ngx_http_upstream_init_chash_peer`.
    pub fn new(points: &Points, key: &[u8]) -> ChashRequest {
        ChashRequest {
            tries: 0,
            hash: points.find(crc32(key)),
        }
    }

    /// nginx's `ngx_http_upstream_get_chash_peer`.
    pub fn get(
        &mut self,
        rr: &mut RrRequest,
        peers: &mut Peers,
        points: &Points,
        key: &[u8],
        now: i64,
    ) -> Option<Chosen> {
        if self.tries > MAX_TRIES
            || peers.primary.single
            || key.is_empty()
            || points.points.is_empty()
        {
            return rr.get(peers, now);
        }
        let tier = &mut peers.primary;
        let best = loop {
            let server = points.points[self.hash % points.points.len()].1;
            let mut best: Option<usize> = None;
            let mut total = 0i64;
            for i in 0..tier.peers.len() {
                if rr.tried.has(i)
                    || !tier.peers[i].usable(now)
                    || points.peer_server.get(i) != Some(&server)
                {
                    continue;
                }
                let p = &mut tier.peers[i];
                p.current_weight += p.effective_weight;
                total += p.effective_weight;
                if p.effective_weight < p.weight {
                    p.effective_weight += 1;
                }
                let cw = p.current_weight;
                match best {
                    Some(b) if cw <= tier.peers[b].current_weight => {}
                    _ => best = Some(i),
                }
            }
            if let Some(b) = best {
                tier.peers[b].current_weight -= total;
                break b;
            }
            self.hash = self.hash.wrapping_add(1);
            self.tries += 1;
            if self.tries > MAX_TRIES {
                return rr.get(peers, now);
            }
        };
        let c = Chosen {
            backup: false,
            index: best,
        };
        rr.current = Some(c);
        tier.peers[best].chosen(now);
        rr.tried.set(best);
        Some(c)
    }
}
