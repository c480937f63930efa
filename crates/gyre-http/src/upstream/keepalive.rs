//! The per-worker cache of idle upstream connections
//! (`ngx_http_upstream_keepalive_module`): `keepalive N` keeps up to N idle
//! connections per upstream in each worker, most recently used first; a
//! full cache closes its least recently used one to take a new one.
//!
//! Two parts: [`Cache`] is the sans-I/O list and [`may_cache`] nginx's rules
//! for keeping a connection after a request; [`park`] / [`unpark`] put a real
//! connection on gyre-core under an idle handler, which drops it from the
//! cache and closes it when the upstream closes it (any read event: EOF,
//! error or unexpected bytes, as nginx's `ngx_http_upstream_keepalive_close_handler`),
//! when `keepalive_timeout` passes, or when the worker shuts down (the
//! connection is marked idle, its timer cancelable).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;

use gyre_core::conn::ConnId;
use gyre_core::event::{Core, Ev, Handler, Msec, PeerAddr};

/// `keepalive`, `keepalive_timeout`, `keepalive_requests`, `keepalive_time`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeepaliveConf {
    /// Idle connections kept per worker.
    pub max_cached: usize,
    /// ms an idle connection is kept (default 60 s).
    pub timeout: u64,
    /// Requests after which a connection is not kept (default 1000).
    pub requests: u64,
    /// ms after which a connection is not kept (default 1 h).
    pub time: u64,
}

impl KeepaliveConf {
    pub fn new(max_cached: usize) -> KeepaliveConf {
        KeepaliveConf {
            max_cached,
            timeout: 60_000,
            requests: 1000,
            time: 3_600_000,
        }
    }
}

/// What is known about a connection when its request is done with it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Finished {
    /// The attempt failed (nginx's NGX_PEER_FAILED).
    pub failed: bool,
    /// EOF, an error or a timeout was seen on the connection.
    pub broken: bool,
    /// Requests made on this connection, this one included.
    pub requests: u64,
    /// ms since the connection was made.
    pub age: u64,
    /// The response allows reuse (nginx's `u->keepalive`: HTTP/1.1 without
    /// `Connection: close`, body read to its announced end).
    pub response_keepalive: bool,
    /// The whole request body went out (`u->request_body_sent`).
    pub body_sent: bool,
    /// The worker is shutting down.
    pub exiting: bool,
}

/// nginx's `ngx_http_upstream_free_keepalive_peer` checks: whether the
/// connection may go back to the cache.
pub fn may_cache(conf: &KeepaliveConf, f: &Finished) -> bool {
    !f.failed
        && !f.broken
        && f.requests < conf.requests
        && f.age <= conf.time
        && f.response_keepalive
        && f.body_sent
        && !f.exiting
}

/// The cached idle connections of one upstream in one worker.
#[derive(Debug)]
pub struct Cache<C> {
    max: usize,
    /// Most recently used first.
    items: VecDeque<(PeerAddr, C)>,
}

impl<C: Copy + PartialEq> Cache<C> {
    pub fn new(max: usize) -> Cache<C> {
        Cache {
            max: max.max(1),
            items: VecDeque::with_capacity(max.clamp(1, 1024)),
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// A cached connection to `addr`, most recent first (nginx's
    /// `ngx_http_upstream_get_keepalive_peer`, which matches the address
    /// the balancer chose).
    pub fn take(&mut self, addr: &PeerAddr) -> Option<C> {
        let i = self.items.iter().position(|(a, _)| a == addr)?;
        self.items.remove(i).map(|(_, c)| c)
    }

    /// Keeps `c`; when the cache is full, the least recently used one is
    /// returned for the caller to close.
    pub fn put(&mut self, addr: PeerAddr, c: C) -> Option<C> {
        let evicted = if self.items.len() >= self.max {
            self.items.pop_back().map(|(_, c)| c)
        } else {
            None
        };
        self.items.push_front((addr, c));
        evicted
    }

    /// Drops `c` (closed by its upstream, timed out); false if not cached.
    pub fn remove(&mut self, c: C) -> bool {
        self.remove_by(|x| *x == c)
    }

    /// Drops the first entry `f` picks; false if none.
    pub fn remove_by(&mut self, f: impl Fn(&C) -> bool) -> bool {
        match self.items.iter().position(|(_, x)| f(x)) {
            Some(i) => {
                self.items.remove(i);
                true
            }
            None => false,
        }
    }

    /// Empties the cache (worker exit), returning what was in it.
    pub fn drain(&mut self) -> Vec<C> {
        self.items.drain(..).map(|(_, c)| c).collect()
    }
}

/// A cached connection, with what `keepalive_requests` and
/// `keepalive_time` need to know of it when it is taken again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kept {
    pub conn: ConnId,
    /// Requests made on it so far.
    pub requests: u64,
    /// When it was made.
    pub created: Msec,
}

impl Kept {
    /// A connection with no history (requests 0, made at 0).
    pub fn new(conn: ConnId) -> Kept {
        Kept {
            conn,
            requests: 0,
            created: 0,
        }
    }
}

/// A cache shared by the requests of one worker.
pub type SharedCache = Rc<RefCell<Cache<Kept>>>;

/// The handler of a cached connection: nothing is expected from an idle
/// upstream, so any read event ends it.
struct Idle {
    cache: SharedCache,
}

impl Handler for Idle {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        let c = ev.conn;
        let asked = core.conn(c).is_some_and(|x| x.close);
        if !ev.timedout && !asked {
            if ev.kind == gyre_core::event::EvKind::Write {
                return;
            }
            let mut b = [0u8; 1];
            let idle =
                matches!(core.recv(c, &mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
            // Otherwise EOF, an error, or bytes nobody asked for.
            if idle && core.handle_read_event(c).is_ok() {
                return;
            }
        }
        self.cache.borrow_mut().remove_by(|k| k.conn == c);
        core.close(c);
    }
}

/// Puts an idle connection to `addr` in the cache under the idle handler
/// (its previous handler is replaced), with `timeout` ms to live; a
/// connection evicted to make room is closed.
pub fn park(
    core: &mut Core,
    cache: &SharedCache,
    addr: PeerAddr,
    k: Kept,
    timeout: u64,
) -> io::Result<()> {
    let c = k.conn;
    core.set_handler(
        c,
        Box::new(Idle {
            cache: cache.clone(),
        }),
    );
    if let Err(e) = core.handle_read_event(c) {
        core.close(c);
        return Err(e);
    }
    core.del_timer(Ev::write(c));
    core.set_cancelable(Ev::read(c), true);
    core.add_timer(Ev::read(c), timeout);
    core.set_idle(c, true);
    let evicted = cache.borrow_mut().put(addr, k);
    if let Some(old) = evicted {
        core.close(old.conn);
    }
    // Bytes or EOF may already be waiting (the read event came and went
    // while the request's handler owned the connection).
    if core.conn(c).is_some_and(|x| x.read.ready) {
        core.post(Ev::read(c));
    }
    Ok(())
}

/// Takes a cached connection to `addr` for a request: the caller installs
/// its own handler ([`Core::set_handler`]) and timers. Its read timer (the
/// idle timeout) is left armed for the caller to re-arm or delete, which
/// it does before the loop waits again.
pub fn unpark(core: &mut Core, cache: &SharedCache, addr: &PeerAddr) -> Option<Kept> {
    // Bounded by the cache size: stale entries are dropped on the way.
    loop {
        let k = cache.borrow_mut().take(addr)?;
        let c = k.conn;
        if !core.is_live(c) {
            continue;
        }
        core.delete_posted(Ev::read(c));
        core.set_cancelable(Ev::read(c), false);
        core.set_idle(c, false);
        return Some(k);
    }
}

/// Closes every cached connection (worker exit).
pub fn close_all(core: &mut Core, cache: &SharedCache) {
    let all = cache.borrow_mut().drain();
    for k in all {
        core.close(k.conn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(port: u16) -> PeerAddr {
        PeerAddr::Inet(([127, 0, 0, 1], port).into())
    }

    #[test]
    fn most_recent_first_per_address_and_lru_eviction() {
        let mut c: Cache<u32> = Cache::new(2);
        assert_eq!(c.put(a(1), 10), None);
        assert_eq!(c.put(a(2), 20), None);
        // Full: the least recently used (10) goes.
        assert_eq!(c.put(a(1), 11), Some(10));
        assert_eq!(c.take(&a(3)), None);
        assert_eq!(c.take(&a(1)), Some(11));
        assert_eq!(c.take(&a(1)), None);
        assert!(c.remove(20));
        assert!(!c.remove(20));
        assert!(c.is_empty());
        c.put(a(1), 1);
        c.put(a(1), 2);
        assert_eq!(c.take(&a(1)), Some(2), "most recent first");
        assert_eq!(c.drain(), vec![1]);
    }

    #[test]
    fn nginx_rules_for_keeping_a_connection() {
        let conf = KeepaliveConf::new(4);
        let ok = Finished {
            requests: 1,
            response_keepalive: true,
            body_sent: true,
            ..Finished::default()
        };
        assert!(may_cache(&conf, &ok));
        for bad in [
            Finished { failed: true, ..ok },
            Finished { broken: true, ..ok },
            Finished {
                requests: 1000,
                ..ok
            },
            Finished {
                age: 3_600_001,
                ..ok
            },
            Finished {
                response_keepalive: false,
                ..ok
            },
            Finished {
                body_sent: false,
                ..ok
            },
            Finished {
                exiting: true,
                ..ok
            },
        ] {
            assert!(!may_cache(&conf, &bad), "{bad:?}");
        }
        assert!(may_cache(
            &conf,
            &Finished {
                requests: 999,
                ..ok
            }
        ));
    }
}
