//! nginx's round-robin balancer (`ngx_http_upstream_round_robin.c`): the
//! peers of an upstream block, their shared state, and the per-request
//! selection every other balancer falls back to.
//!
//! The selection is nginx's smooth weighted round robin: each eligible peer's
//! `current_weight` grows by its `effective_weight`, the largest wins and
//! loses the total, so weights 5/1/1 give `a a b a c a a` (spread out, not
//! `a a a a a b c`). Passive health follows nginx exactly:
//!
//! - a failed attempt (`free` with [`Outcome::Failed`]) counts a fail, stamps
//!   `accessed` and `checked`, and lowers `effective_weight` by
//!   `weight / max_fails` (it climbs back by 1 per selection); reaching
//!   `max_fails` is nginx's "upstream server temporarily disabled" warning
//!   ([`Freed::disabled`]);
//! - a peer with `fails >= max_fails` is skipped while
//!   `now - checked <= fail_timeout`; after that it may be chosen again (one
//!   probe: choosing it stamps `checked`), and a success after the probe
//!   (`accessed < checked`) clears its fails;
//! - `max_conns` skips a peer with that many requests on it; `down` always;
//! - when no primary peer is eligible the backup peers are tried, with a
//!   fresh "tried" set; when neither has one, [`RrRequest::get`] returns None
//!   (nginx's NGX_BUSY, logged by the caller as "no live upstreams").
//!
//! Times are seconds (nginx's `ngx_time()`), given by the caller, so all of
//! this is sans-I/O. The state is per worker (nginx without `zone`).

use gyre_core::event::PeerAddr;
use smallvec::SmallVec;

/// One address of a `server` line and its state.
#[derive(Clone, Debug)]
pub struct Peer {
    pub addr: PeerAddr,
    /// The address as nginx prints it (`$upstream_addr`): `127.0.0.1:8080`.
    pub name: String,
    /// The `server` argument as written: what consistent hashing hashes.
    pub server: String,
    pub weight: i64,
    pub max_fails: u32,
    /// Seconds.
    pub fail_timeout: i64,
    /// 0: unlimited.
    pub max_conns: u32,
    pub down: bool,

    pub current_weight: i64,
    pub effective_weight: i64,
    /// Requests using this peer now.
    pub conns: u32,
    pub fails: u32,
    /// When the last failure happened.
    pub accessed: i64,
    /// When the peer was last chosen or failed.
    pub checked: i64,
}

impl Peer {
    pub fn new(addr: PeerAddr, server: &str) -> Peer {
        Peer {
            name: addr.to_string(),
            addr,
            server: server.to_string(),
            weight: 1,
            max_fails: 1,
            fail_timeout: 10,
            max_conns: 0,
            down: false,
            current_weight: 0,
            effective_weight: 1,
            conns: 0,
            fails: 0,
            accessed: 0,
            checked: 0,
        }
    }

    /// Sets the configured weight (and the effective one it starts from).
    pub fn with_weight(mut self, w: i64) -> Peer {
        self.weight = w;
        self.effective_weight = w;
        self
    }

    /// Skipped for failures: `max_fails` reached within `fail_timeout`.
    #[inline]
    pub fn failed_recently(&self, now: i64) -> bool {
        self.max_fails != 0
            && self.fails >= self.max_fails
            && now - self.checked <= self.fail_timeout
    }

    /// Skipped for load: `max_conns` reached.
    #[inline]
    pub fn full(&self) -> bool {
        self.max_conns != 0 && self.conns >= self.max_conns
    }

    /// Neither down, failed recently nor full.
    #[inline]
    pub fn usable(&self, now: i64) -> bool {
        !self.down && !self.failed_recently(now) && !self.full()
    }

    /// Stamps `checked` when a peer is chosen after `fail_timeout`.
    #[inline]
    pub(crate) fn chosen(&mut self, now: i64) {
        self.conns += 1;
        if now - self.checked > self.fail_timeout {
            self.checked = now;
        }
    }
}

/// The primary or the backup peers of an upstream (nginx's
/// `ngx_http_upstream_rr_peers_t`).
#[derive(Clone, Debug, Default)]
pub struct Tier {
    pub peers: Vec<Peer>,
    /// One peer and no backup: no balancing, no health accounting.
    pub single: bool,
    pub total_weight: i64,
    /// Peers not marked `down`: how many attempts a request gets.
    pub tries: usize,
}

impl Tier {
    pub fn new(peers: Vec<Peer>) -> Tier {
        let total_weight = peers.iter().map(|p| p.weight).sum();
        let tries = peers.iter().filter(|p| !p.down).count();
        Tier {
            single: peers.len() == 1,
            peers,
            total_weight,
            tries,
        }
    }
}

/// All the peers of one upstream.
#[derive(Clone, Debug)]
pub struct Peers {
    /// The upstream's name (what `$upstream_addr` shows when none is live).
    pub name: String,
    pub primary: Tier,
    pub backup: Option<Tier>,
}

impl Peers {
    pub fn new(name: &str, primary: Vec<Peer>, backup: Vec<Peer>) -> Peers {
        let mut primary = Tier::new(primary);
        let backup = if backup.is_empty() {
            None
        } else {
            primary.single = false;
            let mut b = Tier::new(backup);
            b.single = false;
            Some(b)
        };
        Peers {
            name: name.to_string(),
            primary,
            backup,
        }
    }

    pub fn tier(&self, backup: bool) -> &Tier {
        match (&self.backup, backup) {
            (Some(b), true) => b,
            _ => &self.primary,
        }
    }

    pub fn tier_mut(&mut self, backup: bool) -> &mut Tier {
        match (&mut self.backup, backup) {
            (Some(b), true) => b,
            _ => &mut self.primary,
        }
    }

    /// The peer a [`Chosen`] refers to.
    pub fn peer(&self, c: Chosen) -> Option<&Peer> {
        self.tier(c.backup).peers.get(c.index)
    }

    /// nginx's `ngx_http_upstream_tries`: attempts a request may make.
    pub fn tries(&self) -> usize {
        self.primary.tries + self.backup.as_ref().map_or(0, |b| b.tries)
    }
}

/// The peer a request got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chosen {
    pub backup: bool,
    pub index: usize,
}

/// How an attempt ended, for [`RrRequest::free`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// nginx's NGX_PEER_FAILED: an error or timeout that counts against the
    /// peer (per `proxy_next_upstream`).
    Failed,
}

/// What freeing a peer means for the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Freed {
    /// Log "upstream server temporarily disabled" (warn) with the request.
    pub disabled: bool,
}

/// The peers a request has tried (nginx's `rrp->tried` bitmap).
#[derive(Clone, Debug, Default)]
pub struct Tried(SmallVec<[u64; 1]>);

impl Tried {
    fn with_len(n: usize) -> Tried {
        let mut v = SmallVec::new();
        v.resize(n.div_ceil(64).max(1), 0);
        Tried(v)
    }
    #[inline]
    pub fn has(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    #[inline]
    pub fn set(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w |= 1 << (i % 64);
        }
    }
    fn clear(&mut self) {
        self.0.iter_mut().for_each(|w| *w = 0);
    }
}

/// One request's round-robin state (nginx's `ngx_http_upstream_rr_peer_data_t`).
#[derive(Clone, Debug)]
pub struct RrRequest {
    /// Choosing among the backup peers now.
    pub backup: bool,
    pub tried: Tried,
    pub current: Option<Chosen>,
    /// Attempts left (nginx's `pc->tries`).
    pub tries: usize,
}

impl RrRequest {
    /// nginx's `ngx_http_upstream_init_round_robin_peer`.
    pub fn new(peers: &Peers) -> RrRequest {
        let n = peers
            .primary
            .peers
            .len()
            .max(peers.backup.as_ref().map_or(0, |b| b.peers.len()));
        RrRequest {
            backup: false,
            tried: Tried::with_len(n),
            current: None,
            tries: peers.tries(),
        }
    }

    /// nginx's `ngx_http_upstream_get_round_robin_peer`: None is NGX_BUSY.
    pub fn get(&mut self, peers: &mut Peers, now: i64) -> Option<Chosen> {
        let tier = peers.tier_mut(self.backup);
        let got = if tier.single {
            let p = &mut tier.peers[0];
            if p.down || p.full() {
                None
            } else {
                p.conns += 1;
                Some(0)
            }
        } else {
            self.smooth(tier, now)
        };
        if let Some(index) = got {
            let c = Chosen {
                backup: self.backup,
                index,
            };
            self.current = Some(c);
            return Some(c);
        }
        if self.switch_to_backup(peers) {
            return self.get(peers, now);
        }
        None
    }

    /// No primary peer was eligible: go on with the backup peers, none of
    /// them tried yet. False when there are none (or already there).
    pub fn switch_to_backup(&mut self, peers: &Peers) -> bool {
        if self.backup || peers.backup.is_none() {
            return false;
        }
        self.backup = true;
        self.tried.clear();
        true
    }

    /// nginx's `ngx_http_upstream_get_peer`: smooth weighted round robin
    /// over the eligible, untried peers.
    fn smooth(&mut self, tier: &mut Tier, now: i64) -> Option<usize> {
        let mut best: Option<usize> = None;
        let mut total = 0i64;
        for i in 0..tier.peers.len() {
            if self.tried.has(i) || !tier.peers[i].usable(now) {
                continue;
            }
            let p = &mut tier.peers[i];
            p.current_weight += p.effective_weight;
            total += p.effective_weight;
            if p.effective_weight < p.weight {
                p.effective_weight += 1;
            }
            let cw = p.current_weight;
            // Strictly greater wins: the first of equals stays best.
            match best {
                Some(b) if cw <= tier.peers[b].current_weight => {}
                _ => best = Some(i),
            }
        }
        let b = best?;
        self.tried.set(b);
        let p = &mut tier.peers[b];
        p.current_weight -= total;
        p.chosen(now);
        Some(b)
    }

    /// nginx's `ngx_http_upstream_free_round_robin_peer`.
    pub fn free(&mut self, peers: &mut Peers, outcome: Outcome, now: i64) -> Freed {
        let mut freed = Freed::default();
        let Some(c) = self.current else {
            return freed;
        };
        let tier = peers.tier_mut(c.backup);
        let single = tier.single;
        let Some(p) = tier.peers.get_mut(c.index) else {
            return freed;
        };
        if single {
            p.conns = p.conns.saturating_sub(1);
            self.tries = 0;
            return freed;
        }
        match outcome {
            Outcome::Failed => {
                p.fails += 1;
                p.accessed = now;
                p.checked = now;
                if p.max_fails != 0 {
                    p.effective_weight -= p.weight / i64::from(p.max_fails);
                    if p.fails >= p.max_fails {
                        freed.disabled = true;
                    }
                }
                if p.effective_weight < 0 {
                    p.effective_weight = 0;
                }
            }
            Outcome::Ok => {
                // The probe after fail_timeout succeeded: the peer is live.
                if p.accessed < p.checked {
                    p.fails = 0;
                }
            }
        }
        p.conns = p.conns.saturating_sub(1);
        self.tries = self.tries.saturating_sub(1);
        freed
    }
}
