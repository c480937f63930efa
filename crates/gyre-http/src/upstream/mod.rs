//! Upstreams: the `upstream {}` block, its peers and their load balancing,
//! and the per-worker cache of idle upstream connections — everything of
//! nginx's upstream machinery that does not need a request.
//!
//! Each balancer is a small module behind one interface, as in nginx:
//! [`Upstream::start`] gives a request its [`PeerRequest`] (nginx's
//! `peer.init`), [`PeerRequest::get`] picks a peer (`peer.get`, None is
//! NGX_BUSY: "no live upstreams"), [`PeerRequest::free`] reports how the
//! attempt went (`peer.free`), and [`PeerRequest::tries`] is how many
//! attempts are left. All of it is sans-I/O: the time (seconds) and, for
//! `random`, the random numbers come from the caller.
//!
//! - [`round_robin`]: the peers, smooth weighted round robin, backup,
//!   max_fails / fail_timeout, max_conns;
//! - [`least_conn`], [`hash`] (`hash KEY [consistent]`), [`ip_hash`],
//!   [`random`] (`random [two [least_conn]]`);
//! - [`keepalive`]: `keepalive N`, `keepalive_timeout`, `keepalive_requests`;
//! - [`zone`]: `zone NAME SIZE`, the peers' state shared by all workers;
//! - [`conf`]: the `upstream {}` block with nginx's errors; [`set`]: the
//!   blocks of an http {} block and the implicit upstreams of `proxy_pass`;
//! - [`http_request`] / [`http_response`]: the HTTP/1.x request head sent
//!   upstream and the response read back, sans-I/O.

pub mod conf;
pub mod crc32;
pub mod hash;
pub mod http_request;
pub mod http_response;
pub mod ip_hash;
pub mod keepalive;
pub mod least_conn;
pub mod random;
pub mod round_robin;
pub mod set;
pub mod zone;

use std::net::IpAddr;

pub use round_robin::{Chosen, Outcome, Peer, Peers};

/// The balancing method of an upstream block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Method {
    RoundRobin,
    LeastConn,
    /// `hash KEY [consistent]`; the key is a complex value the caller
    /// evaluates per request.
    Hash {
        key: String,
        consistent: bool,
    },
    IpHash,
    /// `random [two [least_conn]]`.
    Random {
        two: bool,
    },
}

/// An upstream block, ready to balance.
#[derive(Clone, Debug)]
pub struct Upstream {
    pub peers: Peers,
    pub method: Method,
    /// `keepalive N` and friends, if set.
    pub keepalive: Option<keepalive::KeepaliveConf>,
    /// `zone NAME SIZE`.
    pub zone: Option<(String, usize)>,
    /// The peers' state in shared memory, once [`Upstream::share`] ran.
    shared: Option<zone::SharedPeers>,
    points: Option<hash::Points>,
    ranges: Option<random::Ranges>,
}

impl Upstream {
    pub fn new(peers: Peers, method: Method) -> Upstream {
        let points = matches!(
            method,
            Method::Hash {
                consistent: true,
                ..
            }
        )
        .then(|| hash::Points::new(&peers));
        let ranges = matches!(method, Method::Random { .. }).then(|| random::Ranges::new(&peers));
        Upstream {
            peers,
            method,
            keepalive: None,
            zone: None,
            shared: None,
            points,
            ranges,
        }
    }

    /// Puts the peers' state in a shared zone of `size` bytes (`zone NAME
    /// SIZE`); call before the workers fork. Clones of this upstream (in
    /// this process or a forked one) then share one state.
    pub fn share(&mut self, name: &str, size: usize) -> std::io::Result<()> {
        self.shared = Some(zone::SharedPeers::new(name, size, &self.peers)?);
        self.zone = Some((name.to_string(), size));
        Ok(())
    }

    /// Whether the peers' state is in shared memory.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// The consistent-hash points (for `hash … consistent`).
    pub fn points(&self) -> Option<&hash::Points> {
        self.points.as_ref()
    }

    /// A request's balancing state (nginx's `peer.init`): `key` is the
    /// evaluated `hash` key, `client` the address `ip_hash` uses.
    pub fn start(&self, key: &[u8], client: Option<IpAddr>) -> PeerRequest {
        let kind = match &self.method {
            Method::RoundRobin => Kind::RoundRobin,
            Method::LeastConn => Kind::LeastConn,
            Method::Hash {
                consistent: false, ..
            } => Kind::Hash(hash::HashRequest::default()),
            Method::Hash {
                consistent: true, ..
            } => match &self.points {
                Some(p) => Kind::Chash(hash::ChashRequest::new(p, key)),
                None => Kind::RoundRobin,
            },
            Method::IpHash => Kind::IpHash(ip_hash::IpHashRequest::new(client)),
            Method::Random { two } => Kind::Random(random::RandomRequest::default(), *two),
        };
        PeerRequest {
            rr: round_robin::RrRequest::new(&self.peers),
            key: key.to_vec(),
            kind,
        }
    }
}

#[derive(Clone, Debug)]
enum Kind {
    RoundRobin,
    LeastConn,
    Hash(hash::HashRequest),
    Chash(hash::ChashRequest),
    IpHash(ip_hash::IpHashRequest),
    Random(random::RandomRequest, bool),
}

/// One request's balancing state across its attempts.
#[derive(Clone, Debug)]
pub struct PeerRequest {
    rr: round_robin::RrRequest,
    key: Vec<u8>,
    kind: Kind,
}

impl PeerRequest {
    /// Picks the next peer; None when none is usable ("no live upstreams").
    /// `rng` is only called by `random`.
    pub fn get(
        &mut self,
        up: &mut Upstream,
        now: i64,
        rng: &mut dyn FnMut() -> u32,
    ) -> Option<Chosen> {
        let Upstream {
            peers,
            shared,
            points,
            ranges,
            ..
        } = up;
        let mut get = |peers: &mut Peers| match &mut self.kind {
            Kind::RoundRobin => self.rr.get(peers, now),
            Kind::LeastConn => least_conn::get(&mut self.rr, peers, now),
            Kind::Hash(h) => h.get(&mut self.rr, peers, &self.key, now),
            Kind::Chash(h) => match points {
                Some(pts) => h.get(&mut self.rr, peers, pts, &self.key, now),
                None => self.rr.get(peers, now),
            },
            Kind::IpHash(h) => h.get(&mut self.rr, peers, now),
            Kind::Random(h, two) => match ranges {
                Some(r) => h.get(&mut self.rr, peers, r, *two, rng, now),
                None => self.rr.get(peers, now),
            },
        };
        match shared {
            Some(z) => z.with(peers, get),
            None => get(peers),
        }
    }

    /// Reports how the attempt on the last chosen peer went.
    pub fn free(&mut self, up: &mut Upstream, outcome: Outcome, now: i64) -> round_robin::Freed {
        let rr = &mut self.rr;
        let f = match &up.shared {
            Some(z) => z.with(&mut up.peers, |p| rr.free(p, outcome, now)),
            None => rr.free(&mut up.peers, outcome, now),
        };
        self.rr.current = None;
        f
    }

    /// Attempts left (nginx's `pc->tries`, bounded further by
    /// `proxy_next_upstream_tries`).
    pub fn tries(&self) -> usize {
        self.rr.tries
    }

    /// The attempt failed on a connection taken from the keepalive cache
    /// (the upstream closed it meanwhile): nginx gives the request one more
    /// try (`u->peer.tries++` in `ngx_http_upstream_next`), so a stale
    /// cached connection does not use up an attempt. Call before `free`.
    pub fn cached_connection_failed(&mut self) {
        self.rr.tries += 1;
    }

    /// The peer chosen last, until it is freed.
    pub fn current(&self) -> Option<Chosen> {
        self.rr.current
    }
}

#[cfg(test)]
mod tests;
