//! nginx's `random [two [least_conn]]` (`ngx_http_upstream_random_module.c`):
//! a peer drawn with probability proportional to its weight; with `two`,
//! two distinct usable peers are drawn and the less loaded one (fewer
//! requests per weight) wins. Unusable draws are retried, 20 times at most,
//! then round robin takes over. The random numbers come from the caller
//! (nginx uses `random()`), so tests can replay a sequence.

use super::round_robin::{Chosen, Peers, RrRequest};

const MAX_TRIES: usize = 20;

/// Cumulative weights of the peers (`rcf->ranges`).
#[derive(Clone, Debug, Default)]
pub struct Ranges(Vec<i64>);

impl Ranges {
    /// nginx's `ngx_http_upstream_update_random`.
    pub fn new(peers: &Peers) -> Ranges {
        let mut total = 0;
        Ranges(
            peers
                .primary
                .peers
                .iter()
                .map(|p| {
                    total += p.weight;
                    total
                })
                .collect(),
        )
    }

    /// nginx's `ngx_http_upstream_peek_random_peer`.
    fn peek(&self, total_weight: i64, r: u32) -> usize {
        if total_weight <= 0 || self.0.is_empty() {
            return 0;
        }
        let x = i64::from(r) % total_weight;
        let (mut i, mut j) = (0usize, self.0.len());
        while j - i > 1 {
            let k = (i + j) / 2;
            if x < self.0[k - 1] {
                j = k;
            } else {
                i = k;
            }
        }
        i
    }
}

/// One request's state for `random`.
#[derive(Clone, Debug, Default)]
pub struct RandomRequest {
    tries: usize,
}

impl RandomRequest {
    /// nginx's `ngx_http_upstream_get_random_peer` (`two`: `..._random2_peer`).
    pub fn get(
        &mut self,
        rr: &mut RrRequest,
        peers: &mut Peers,
        ranges: &Ranges,
        two: bool,
        rng: &mut dyn FnMut() -> u32,
        now: i64,
    ) -> Option<Chosen> {
        let tier = &peers.primary;
        let few = if two {
            tier.peers.len() < 2
        } else {
            tier.single
        };
        if self.tries > MAX_TRIES || few {
            return rr.get(peers, now);
        }
        let mut prev: Option<usize> = None;
        let i = loop {
            let mut i = ranges.peek(tier.total_weight, rng());
            let ok = prev != Some(i) && !rr.tried.has(i) && tier.peers[i].usable(now);
            if ok {
                match prev {
                    None if two => prev = Some(i),
                    None => break i,
                    Some(pi) => {
                        let (p, q) = (&tier.peers[i], &tier.peers[pi]);
                        if i64::from(p.conns) * q.weight > i64::from(q.conns) * p.weight {
                            i = pi;
                        }
                        break i;
                    }
                }
            }
            self.tries += 1;
            if self.tries > MAX_TRIES {
                return rr.get(peers, now);
            }
        };
        let c = Chosen {
            backup: false,
            index: i,
        };
        rr.current = Some(c);
        peers.primary.peers[i].chosen(now);
        rr.tried.set(i);
        Some(c)
    }
}
