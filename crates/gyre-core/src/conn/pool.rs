//! The preallocated connection pool (nginx's `cycle->connections` with its
//! free list).
//!
//! `worker_connections` slots are allocated once; getting and freeing a slot
//! is O(1) through a LIFO free list. Every slot carries a generation that
//! changes each time it is freed: it is nginx's `instance` bit widened to 32
//! bits, and it goes into the token registered with the multiplexer, so an
//! event reported for a connection that was closed — and whose slot was
//! reused — earlier in the same batch is recognised as stale and dropped.
//!
//! Reusable (idle keep-alive) connections are also kept here, oldest first, so
//! the core can drain them when the pool runs low (nginx's
//! `ngx_reusable_connection` / `ngx_drain_connections`).

use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::event::actions::Interest;
use crate::event::clock::Msec;
use crate::event::core::Handler;
use crate::event::timer::TimerId;

const NIL: u32 = u32::MAX;

/// A connection slot and the generation it had when handed out. Stale ids
/// (the connection was closed since) are refused by every core call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId {
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

impl ConnId {
    /// The slot index, stable while the connection lives (0..connections).
    #[inline]
    pub fn slot(self) -> usize {
        self.slot as usize
    }

    /// The token registered with the multiplexer: generation and slot.
    #[inline]
    pub(crate) fn token(self) -> u64 {
        (u64::from(self.gen) << 32) | u64::from(self.slot)
    }

    #[inline]
    pub(crate) fn from_token(t: u64) -> ConnId {
        ConnId {
            slot: t as u32,
            gen: (t >> 32) as u32,
        }
    }
}

/// One direction of a connection (nginx's `ngx_event_t`, less the handler,
/// which is per connection here).
#[derive(Debug, Default)]
pub struct Event {
    /// Registered with the multiplexer.
    pub active: bool,
    /// The last readiness report has not been consumed by an EAGAIN yet: a
    /// read (or write) may make progress without waiting.
    pub ready: bool,
    /// A read returned 0.
    pub eof: bool,
    /// A read or write failed.
    pub error: bool,
    /// The peer shut down its side (EPOLLRDHUP): reads must go on to EOF.
    pub pending_eof: bool,
    /// This event's timer does not keep an exiting worker alive.
    pub cancelable: bool,
    /// `ready` was assumed, not reported ([`Core::assume_readable`]): the
    /// first read's outcome teaches the listener's estimate.
    ///
    /// [`Core::assume_readable`]: crate::event::Core::assume_readable
    pub(crate) assumed: bool,
    pub(crate) timer: Option<TimerId>,
    /// The armed timer's deadline (valid while `timer` is set): kept here
    /// so re-arming and asking need no walk of the timer wheel.
    pub(crate) deadline: Msec,
}

impl Event {
    /// Whether a timer is pending on this event.
    #[inline]
    pub fn timer_set(&self) -> bool {
        self.timer.is_some()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Free,
    Conn,
    Listener(u32),
}

/// A connection: its socket, its two events, and its protocol handler.
pub struct Connection {
    pub(crate) fd: Option<OwnedFd>,
    pub(crate) gen: u32,
    pub(crate) kind: Kind,
    /// Read direction.
    pub read: Event,
    /// Write direction.
    pub write: Event,
    pub(crate) handler: Option<Box<dyn Handler>>,
    /// The TLS layer, on a connection accepted by a TLS listener.
    pub(crate) tls: Option<Box<crate::event::tls::Tls>>,
    /// Accepted by a TLS listener but spoke plain text.
    pub(crate) plain_on_tls: bool,
    /// What the multiplexer watches for this fd.
    pub(crate) registered: Interest,
    pub(crate) in_backend: bool,
    /// The client's address, for accepted connections.
    pub peer: Option<SocketAddr>,
    /// Index of the listener that accepted it.
    pub listener: Option<usize>,
    /// nginx's `c->number`: unique across the workers of a process model
    /// (taken from the shared zone's counter at accept), else within this
    /// process.
    pub number: u64,
    /// Set when the core asks the handler to close (drain, shutdown): the
    /// handler should finish up and close the connection.
    pub close: bool,
    pub(crate) reusable: bool,
    /// Between requests: closed at once on graceful shutdown (nginx's
    /// `c->idle`).
    pub(crate) idle: bool,
    /// Made by [`Core::connect`](crate::event::Core::connect), not
    /// accepted (counted apart in [`Pool`]).
    pub(crate) outbound: bool,
    lru_prev: u32,
    lru_next: u32,
    next_free: u32,
}

impl Connection {
    fn empty(next_free: u32) -> Connection {
        Connection {
            fd: None,
            gen: 0,
            kind: Kind::Free,
            read: Event::default(),
            write: Event::default(),
            handler: None,
            tls: None,
            plain_on_tls: false,
            registered: Interest::NONE,
            in_backend: false,
            peer: None,
            listener: None,
            number: 0,
            close: false,
            reusable: false,
            idle: false,
            outbound: false,
            lru_prev: NIL,
            lru_next: NIL,
            next_free,
        }
    }

    /// The socket.
    #[inline]
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|f| f.as_fd())
    }

    /// Whether this connection is marked reusable (may be closed to free
    /// its slot when the pool runs short).
    #[inline]
    pub fn is_reusable(&self) -> bool {
        self.reusable
    }

    /// Whether this connection is idle (closed at once on graceful shutdown).
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.idle
    }
}

pub(crate) struct Pool {
    pub(crate) conns: Vec<Connection>,
    free_head: u32,
    pub(crate) free_n: usize,
    lru_head: u32,
    lru_tail: u32,
    pub(crate) reusable_n: usize,
    /// Outbound connections in use (nginx counts them in
    /// `worker_connections` with the accepted ones).
    pub(crate) outbound_n: usize,
    serial: u64,
}

impl Pool {
    pub(crate) fn new(n: usize) -> Pool {
        let n = n.clamp(1, NIL as usize - 1);
        let conns = (0..n)
            .map(|i| Connection::empty(if i + 1 < n { i as u32 + 1 } else { NIL }))
            .collect();
        Pool {
            conns,
            free_head: 0,
            free_n: n,
            lru_head: NIL,
            lru_tail: NIL,
            reusable_n: 0,
            outbound_n: 0,
            serial: 0,
        }
    }

    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.conns.len()
    }

    /// The live connection `c` refers to, if it has not been closed.
    #[inline]
    pub(crate) fn get(&self, c: ConnId) -> Option<&Connection> {
        match self.conns.get(c.slot as usize) {
            Some(x) if x.gen == c.gen && x.kind != Kind::Free => Some(x),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, c: ConnId) -> Option<&mut Connection> {
        match self.conns.get_mut(c.slot as usize) {
            Some(x) if x.gen == c.gen && x.kind != Kind::Free => Some(x),
            _ => None,
        }
    }

    /// Takes a free slot for `fd` (nginx's `ngx_get_connection`).
    pub(crate) fn alloc(&mut self, fd: OwnedFd, kind: Kind) -> Result<ConnId, OwnedFd> {
        let slot = self.free_head;
        if slot == NIL {
            return Err(fd);
        }
        self.serial += 1;
        let serial = self.serial;
        let x = &mut self.conns[slot as usize];
        self.free_head = x.next_free;
        self.free_n -= 1;
        let gen = x.gen;
        *x = Connection::empty(NIL);
        x.gen = gen;
        x.fd = Some(fd);
        x.kind = kind;
        x.number = serial;
        Ok(ConnId { slot, gen })
    }

    /// Returns a slot to the free list (nginx's `ngx_free_connection`) and
    /// hands back its fd for the caller to close. The generation changes, so
    /// every outstanding [`ConnId`] and token for it goes stale.
    pub(crate) fn free(&mut self, c: ConnId) -> Option<OwnedFd> {
        self.get(c)?;
        self.set_reusable(c, false);
        let head = self.free_head;
        let x = &mut self.conns[c.slot as usize];
        x.gen = x.gen.wrapping_add(1);
        x.kind = Kind::Free;
        let outbound = std::mem::replace(&mut x.outbound, false);
        x.next_free = head;
        x.handler = None;
        x.tls = None;
        x.peer = None;
        let fd = x.fd.take();
        self.free_head = c.slot;
        self.free_n += 1;
        if outbound {
            self.outbound_n -= 1;
        }
        fd
    }

    /// Gives a live slot a new generation, so every outstanding id and token
    /// for it goes stale while the slot stays in use (a TLS connection whose
    /// protocol closed it, flushing close_notify on its own).
    pub(crate) fn renew(&mut self, c: ConnId) -> Option<ConnId> {
        self.get(c)?;
        self.set_reusable(c, false);
        let x = &mut self.conns[c.slot as usize];
        x.gen = x.gen.wrapping_add(1);
        Some(ConnId {
            slot: c.slot,
            gen: x.gen,
        })
    }

    /// Marks or unmarks `c` as reusable; a newly reusable connection goes to
    /// the young end of the LRU list.
    pub(crate) fn set_reusable(&mut self, c: ConnId, on: bool) {
        let s = c.slot;
        let x = &self.conns[s as usize];
        if x.reusable == on {
            return;
        }
        if on {
            let tail = self.lru_tail;
            let x = &mut self.conns[s as usize];
            x.reusable = true;
            x.lru_prev = tail;
            x.lru_next = NIL;
            if tail == NIL {
                self.lru_head = s;
            } else {
                self.conns[tail as usize].lru_next = s;
            }
            self.lru_tail = s;
            self.reusable_n += 1;
        } else {
            let (p, n) = (x.lru_prev, x.lru_next);
            if p == NIL {
                self.lru_head = n;
            } else {
                self.conns[p as usize].lru_next = n;
            }
            if n == NIL {
                self.lru_tail = p;
            } else {
                self.conns[n as usize].lru_prev = p;
            }
            let x = &mut self.conns[s as usize];
            x.reusable = false;
            x.lru_prev = NIL;
            x.lru_next = NIL;
            self.reusable_n -= 1;
        }
    }

    /// The oldest reusable connection.
    pub(crate) fn oldest_reusable(&self) -> Option<ConnId> {
        if self.lru_head == NIL {
            return None;
        }
        let x = &self.conns[self.lru_head as usize];
        Some(ConnId {
            slot: self.lru_head,
            gen: x.gen,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fd() -> OwnedFd {
        rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).unwrap()
    }

    #[test]
    fn exhaustion_and_lifo_reuse_with_new_generation() {
        let mut p = Pool::new(3);
        let a = p.alloc(fd(), Kind::Conn).unwrap();
        let b = p.alloc(fd(), Kind::Conn).unwrap();
        let c = p.alloc(fd(), Kind::Conn).unwrap();
        assert_eq!(p.free_n, 0);
        assert!(p.alloc(fd(), Kind::Conn).is_err(), "pool exhausted");
        assert!(p.free(b).is_some());
        assert!(p.free(b).is_none(), "double free refused");
        let d = p.alloc(fd(), Kind::Conn).unwrap();
        assert_eq!(d.slot, b.slot, "LIFO free list");
        assert_ne!(d.gen, b.gen);
        assert!(p.get(b).is_none(), "stale id refused");
        assert!(p.get(d).is_some());
        assert_eq!(ConnId::from_token(d.token()), d);
        assert!(p.get(a).unwrap().number < p.get(d).unwrap().number);
        let _ = c;
    }

    #[test]
    fn reusable_lru_order() {
        let mut p = Pool::new(4);
        let ids: Vec<_> = (0..4).map(|_| p.alloc(fd(), Kind::Conn).unwrap()).collect();
        for &i in &ids {
            p.set_reusable(i, true);
        }
        p.set_reusable(ids[0], false);
        p.set_reusable(ids[0], true); // young again
        assert_eq!(p.oldest_reusable(), Some(ids[1]));
        p.free(ids[1]);
        assert_eq!(p.oldest_reusable(), Some(ids[2]));
        assert_eq!(p.reusable_n, 3);
    }
}
