//! The accept path (nginx's `ngx_event_accept`) and turning the listeners'
//! events on and off (`ngx_enable_accept_events` / `ngx_disable_accept_events`).

use crate::event::actions::Interest;
use crate::event::core::{Core, Ev, Handler};
use crate::sys::socket::{self, Accepted};

use super::listener::ListenerId;

/// The read handler of every listening connection.
pub(crate) struct AcceptHandler {
    pub(crate) ls: ListenerId,
}

impl Handler for AcceptHandler {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        core.event_accept(self.ls, ev);
    }
}

impl Core {
    /// Accepts connections on `ls` and hands each to the listener's protocol.
    /// Loops while `multi_accept` is on. On EMFILE/ENFILE every listener is
    /// turned off for `accept_mutex_delay` instead of spinning on a socket
    /// that stays readable.
    pub(crate) fn event_accept(&mut self, ls: ListenerId, ev: Ev) {
        if ev.timedout {
            // The back-off after EMFILE/ENFILE is over.
            if let Err(e) = self.enable_accept_events() {
                log::error!("cannot re-enable accept events ({e})");
                return;
            }
        }
        let multi = self.opts.multi_accept;
        loop {
            let Some(slot) = self.listeners.get(ls.0) else {
                return;
            };
            if !slot.open {
                return;
            }
            let deferred = slot.opts.deferred;
            let lc = slot.conn;
            let Some(fd) = self.pool.get(lc).and_then(|x| x.fd()) else {
                return;
            };
            let res = socket::accept(fd);
            match res {
                Accepted::Conn(fd, peer) => {
                    self.stats.accepted += 1;
                    if let Some(z) = &self.shared {
                        z.stats().accepted.inc();
                    }
                    let got = self.get_connection(fd);
                    // Recomputed after every accept, a failed one included
                    // (an empty pool makes this worker leave accepting to
                    // the others).
                    self.accept_disabled =
                        (self.pool.capacity() / 8) as i64 - self.pool.free_n as i64;
                    let Ok(c) = got else {
                        // Logged by get_connection; the fd was closed.
                        return;
                    };
                    self.stats.handled += 1;
                    if let Some(z) = &self.shared {
                        z.stats().handled.inc();
                        z.stats().active.inc();
                    }
                    // nginx's `c->number`: one counter in the shared zone,
                    // so `*N` in the error log and `$connection` are unique
                    // across workers (without a zone, the pool's own serial).
                    let number = self
                        .shared
                        .as_ref()
                        .map(|z| z.connection_counter().fetch_add(1) + 1);
                    if let Some(x) = self.pool.get_mut(c) {
                        if let Some(n) = number {
                            x.number = n;
                        }
                        x.peer = peer;
                        x.listener = Some(ls.0);
                        x.read.ready = deferred;
                        // A new socket can be written at once (nginx sets
                        // wev->ready on accept); it turns false on EAGAIN.
                        x.write.ready = true;
                    }
                    self.init_connection(ls, c);
                    self.reorder_accept_events(ls);
                }
                Accepted::WouldBlock => return,
                Accepted::Err(e) => {
                    let errno = e.raw_os_error().unwrap_or(0);
                    if errno == libc::ECONNABORTED {
                        log::error!("accept4() failed ({e})");
                        continue;
                    }
                    if errno == libc::EMFILE || errno == libc::ENFILE {
                        log::error!("accept4() failed ({e})");
                        if let Err(e) = self.disable_accept_events() {
                            log::error!("cannot disable accept events ({e})");
                        }
                        let delay = self.opts.accept_mutex_delay.max(1);
                        self.add_timer(Ev::read(lc), delay);
                        return;
                    }
                    log::error!("accept4() failed ({e})");
                    return;
                }
            }
            if !multi {
                return;
            }
        }
    }

    /// Starts the handshake on a TLS listener, or hands the connection to
    /// the protocol at once.
    fn init_connection(&mut self, ls: ListenerId, c: super::ConnId) {
        let timeout = self
            .listeners
            .get(ls.0)
            .and_then(|s| s.tls.as_ref())
            .map(|t| t.handshake_timeout);
        match timeout {
            Some(ms) => self.start_tls(ls.0, c, ms),
            None => self.init_connection_plain(ls, c),
        }
    }

    /// Hands a new connection to its listener's protocol; runs the read
    /// handler at once when data is already there (deferred accept).
    pub(crate) fn init_connection_plain(&mut self, ls: ListenerId, c: super::ConnId) {
        let Some(mut p) = self.listeners.get_mut(ls.0).and_then(|s| s.protocol.take()) else {
            self.close(c);
            return;
        };
        let h = p.init_connection(self, c);
        if let Some(s) = self.listeners.get_mut(ls.0) {
            if s.protocol.is_none() {
                s.protocol = Some(p);
            }
        }
        match h {
            Some(h) => {
                if !self.is_live(c) {
                    return;
                }
                self.set_handler(c, h);
                if self.conn(c).is_some_and(|x| x.read.ready) {
                    if self.accept_mutex_held {
                        self.post(Ev::read(c));
                    } else {
                        self.call(c, crate::event::EvKind::Read, false);
                    }
                }
            }
            None => self.close(c),
        }
    }

    /// With EPOLLEXCLUSIVE the kernel tends to wake the process that added
    /// the socket first, so one worker would take nearly every connection;
    /// re-adding the socket every 16 accepts (or when short of connections)
    /// moves this worker to the back of the queue (nginx's
    /// `ngx_reorder_accept_events`).
    fn reorder_accept_events(&mut self, ls: ListenerId) {
        if !self.opts.exclusive_accept || self.accept_mutex_is_set() {
            return;
        }
        let Some(slot) = self.listeners.get_mut(ls.0) else {
            return;
        };
        if slot.opts.reuseport || !slot.open {
            return;
        }
        slot.accepts += 1;
        if slot.accepts % 16 != 0 && self.accept_disabled <= 0 {
            return;
        }
        let c = slot.conn;
        if let Err(e) = self
            .set_interest(c, Interest::NONE)
            .and_then(|_| self.set_interest(c, Interest::READ))
        {
            log::error!("re-adding a listening socket failed ({e})");
        }
    }

    /// Starts watching every listener.
    pub(crate) fn enable_accept_events(&mut self) -> std::io::Result<()> {
        for i in 0..self.listeners.len() {
            if !self.listeners[i].open {
                continue;
            }
            let c = self.listeners[i].conn;
            self.set_interest(c, Interest::READ)?;
        }
        self.accept_events_enabled = true;
        Ok(())
    }

    /// Stops watching every listener.
    pub(crate) fn disable_accept_events(&mut self) -> std::io::Result<()> {
        for i in 0..self.listeners.len() {
            if !self.listeners[i].open {
                continue;
            }
            let c = self.listeners[i].conn;
            self.set_interest(c, Interest::NONE)?;
        }
        self.accept_events_enabled = false;
        Ok(())
    }
}
