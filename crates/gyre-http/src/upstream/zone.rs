//! `zone NAME SIZE` (`ngx_http_upstream_zone_module`): the peers' run-time
//! state — fails, requests in progress, the round-robin weights, the
//! failure and check times — kept in shared memory so that every worker
//! balances and counts failures as one, as nginx does with a zone.
//!
//! The region is mapped when the configuration is read (in the master, so
//! workers inherit it across `fork`). Each balancer call copies the state in
//! under a spin lock, runs the same per-worker code as without a zone, and
//! copies it back: O(peers) per call, which is what nginx's write lock over
//! the peer list costs too. The first user initialises the region from the
//! configuration (a fresh mapping is all zeros).

use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use gyre_core::sys::shm::ShmRegion;

use super::round_robin::{Peer, Peers};

/// Words per peer: fails, conns, current_weight, effective_weight,
/// accessed, checked (padded to a cache line).
const WORDS: usize = 8;
/// Words before the peers: the lock and the "initialised" flag.
const HEADER: usize = 2;

/// The shared state of one upstream's peers.
#[derive(Clone, Debug)]
pub struct SharedPeers {
    region: Arc<ShmRegion>,
    n: usize,
}

fn all(peers: &mut Peers) -> impl Iterator<Item = &mut Peer> {
    let backup = peers.backup.as_mut().map(|b| b.peers.iter_mut());
    peers
        .primary
        .peers
        .iter_mut()
        .chain(backup.into_iter().flatten())
}

impl SharedPeers {
    /// Maps a zone of `size` bytes for `peers`; refused when they do not
    /// fit (nginx's `zone "NAME" is too small`).
    pub fn new(name: &str, size: usize, peers: &Peers) -> io::Result<SharedPeers> {
        let n = peers.primary.peers.len() + peers.backup.as_ref().map_or(0, |b| b.peers.len());
        let need = (HEADER + n * WORDS) * 8;
        if need > size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("zone \"{name}\" is too small"),
            ));
        }
        Ok(SharedPeers {
            region: Arc::new(ShmRegion::new(size)?),
            n,
        })
    }

    fn words(&self) -> &[AtomicI64] {
        // `new` checked the size; an empty slice only if that changed.
        self.region
            .slice::<AtomicI64>(HEADER + self.n * WORDS)
            .unwrap_or(&[])
    }

    /// Runs `f` on `peers` holding the zone's lock, with the shared state
    /// loaded before and stored after.
    pub fn with<R>(&self, peers: &mut Peers, f: impl FnOnce(&mut Peers) -> R) -> R {
        let w = self.words();
        if w.len() < HEADER + self.n * WORDS {
            return f(peers);
        }
        // Bounded in practice: the holder runs a few hundred instructions.
        let mut spins = 0u32;
        while w[0]
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins % 64 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        if w[1].load(Ordering::Relaxed) == 1 {
            for (i, p) in all(peers).enumerate() {
                let s = &w[HEADER + i * WORDS..HEADER + (i + 1) * WORDS];
                p.fails = s[0].load(Ordering::Relaxed) as u32;
                p.conns = s[1].load(Ordering::Relaxed) as u32;
                p.current_weight = s[2].load(Ordering::Relaxed);
                p.effective_weight = s[3].load(Ordering::Relaxed);
                p.accessed = s[4].load(Ordering::Relaxed);
                p.checked = s[5].load(Ordering::Relaxed);
            }
        }
        let r = f(peers);
        for (i, p) in all(peers).enumerate() {
            let s = &w[HEADER + i * WORDS..HEADER + (i + 1) * WORDS];
            s[0].store(i64::from(p.fails), Ordering::Relaxed);
            s[1].store(i64::from(p.conns), Ordering::Relaxed);
            s[2].store(p.current_weight, Ordering::Relaxed);
            s[3].store(p.effective_weight, Ordering::Relaxed);
            s[4].store(p.accessed, Ordering::Relaxed);
            s[5].store(p.checked, Ordering::Relaxed);
        }
        w[1].store(1, Ordering::Relaxed);
        w[0].store(0, Ordering::Release);
        r
    }
}
