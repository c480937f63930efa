//! nginx's `least_conn` (`ngx_http_upstream_least_conn_module.c`): the peer
//! with the fewest requests relative to its weight (`conns / weight`,
//! compared as `a.conns * b.weight < b.conns * a.weight`); among equals,
//! smooth weighted round robin. Backup peers when no primary is eligible;
//! one peer alone goes straight to round robin.

use super::round_robin::{Chosen, Peers, RrRequest, Tier};

/// nginx's `ngx_http_upstream_get_least_conn_peer`: None is NGX_BUSY.
pub fn get(rr: &mut RrRequest, peers: &mut Peers, now: i64) -> Option<Chosen> {
    if peers.tier(rr.backup).single {
        return rr.get(peers, now);
    }
    if let Some(index) = pick(rr, peers.tier_mut(rr.backup), now) {
        let c = Chosen {
            backup: rr.backup,
            index,
        };
        rr.current = Some(c);
        return Some(c);
    }
    if rr.switch_to_backup(peers) {
        return get(rr, peers, now);
    }
    None
}

fn pick(rr: &mut RrRequest, tier: &mut Tier, now: i64) -> Option<usize> {
    let mut best: Option<usize> = None;
    let mut many = false;
    for (i, p) in tier.peers.iter().enumerate() {
        if rr.tried.has(i) || !p.usable(now) {
            continue;
        }
        match best {
            None => best = Some(i),
            Some(b) => {
                let bp = &tier.peers[b];
                let (l, r) = (
                    i64::from(p.conns) * bp.weight,
                    i64::from(bp.conns) * p.weight,
                );
                if l < r {
                    best = Some(i);
                    many = false;
                } else if l == r {
                    many = true;
                }
            }
        }
    }
    let mut b = best?;
    let mut total = 0i64;
    if many {
        let first = b;
        for i in first..tier.peers.len() {
            if rr.tried.has(i) || !tier.peers[i].usable(now) {
                continue;
            }
            let (bc, bw) = (tier.peers[b].conns, tier.peers[b].weight);
            let p = &tier.peers[i];
            if i64::from(p.conns) * bw != i64::from(bc) * p.weight {
                continue;
            }
            let p = &mut tier.peers[i];
            p.current_weight += p.effective_weight;
            total += p.effective_weight;
            if p.effective_weight < p.weight {
                p.effective_weight += 1;
            }
            if p.current_weight > tier.peers[b].current_weight {
                b = i;
            }
        }
    }
    let p = &mut tier.peers[b];
    p.current_weight -= total;
    p.chosen(now);
    rr.tried.set(b);
    Some(b)
}
