//! nginx's `ip_hash` (`ngx_http_upstream_ip_hash_module.c`): the client's
//! address picks the peer — the first three octets of an IPv4 address (so a
//! /24 sticks to one server), all sixteen of an IPv6 one — through
//! `hash = (hash * 113 + byte) % 6271` from 89, modulo the total weight and
//! walked by weight. An unusable peer continues the hash; after 20 attempts
//! round robin takes over.

use std::net::IpAddr;

use super::round_robin::{Chosen, Peers, RrRequest};

const MAX_TRIES: usize = 20;

/// One request's state for `ip_hash`.
#[derive(Clone, Debug)]
pub struct IpHashRequest {
    addr: [u8; 16],
    len: usize,
    hash: u32,
    tries: usize,
}

impl IpHashRequest {
    /// nginx's `ngx_http_upstream_init_ip_hash_peer`: a client that is not
    /// on IP (a unix socket) hashes as three zero bytes.
    pub fn new(client: Option<IpAddr>) -> IpHashRequest {
        let mut addr = [0u8; 16];
        let len = match client {
            Some(IpAddr::V4(a)) => {
                addr[..4].copy_from_slice(&a.octets());
                3
            }
            Some(IpAddr::V6(a)) => {
                addr.copy_from_slice(&a.octets());
                16
            }
            None => 3,
        };
        IpHashRequest {
            addr,
            len,
            hash: 89,
            tries: 0,
        }
    }

    /// nginx's `ngx_http_upstream_get_ip_hash_peer`.
    pub fn get(&mut self, rr: &mut RrRequest, peers: &mut Peers, now: i64) -> Option<Chosen> {
        let tier = &peers.primary;
        if self.tries > MAX_TRIES || tier.single || tier.total_weight <= 0 {
            return rr.get(peers, now);
        }
        let mut hash = self.hash;
        let p = loop {
            for &b in &self.addr[..self.len] {
                hash = (hash * 113 + u32::from(b)) % 6271;
            }
            let mut w = i64::from(hash) % tier.total_weight;
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
        self.hash = hash;
        Some(c)
    }
}
