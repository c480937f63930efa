//! The connection slots of a loop (nginx's `ngx_connection.c`): lookup,
//! handlers, getting a slot for a new socket, reusable and idle
//! connections drained when slots run short, close, and what the
//! multiplexer watches for each (`set_interest`).

use super::*;

impl Core {
    // ------------------------------------------------------------ connections

    /// The live connection `c`, or None if it was closed.
    #[inline]
    pub fn conn(&self, c: ConnId) -> Option<&Connection> {
        self.pool.get(c)
    }

    #[inline]
    pub fn conn_mut(&mut self, c: ConnId) -> Option<&mut Connection> {
        self.pool.get_mut(c)
    }

    /// The event `ev` refers to, if its connection is live.
    pub fn event(&self, ev: Ev) -> Option<&Event> {
        let x = self.pool.get(ev.conn)?;
        Some(match ev.kind {
            EvKind::Read => &x.read,
            EvKind::Write => &x.write,
        })
    }

    /// Whether `c` refers to a live connection.
    #[inline]
    pub fn is_live(&self, c: ConnId) -> bool {
        self.pool.get(c).is_some()
    }

    /// Slots in the pool.
    pub fn connections(&self) -> usize {
        self.pool.capacity()
    }

    /// Free slots.
    pub fn free_connections(&self) -> usize {
        self.pool.free_n
    }

    /// Slots in use (listeners included).
    pub fn connections_in_use(&self) -> usize {
        self.pool.capacity() - self.pool.free_n
    }

    /// Runs `target`'s handler with `ev`, whose `conn` may be another
    /// connection: how a connection that serves another (an upstream
    /// connection of a proxied request) passes its events to the handler
    /// that owns both (nginx's `r->read_event_handler` of the upstream
    /// calling into the request). False when `target` is closed or its
    /// handler is running (the caller then posts or drops the event).
    pub fn dispatch(&mut self, target: ConnId, ev: Ev) -> bool {
        let Some(mut h) = self.pool.get_mut(target).and_then(|x| x.handler.take()) else {
            return false;
        };
        h.handle(self, ev);
        if let Some(x) = self.pool.get_mut(target) {
            if x.handler.is_none() {
                x.handler = Some(h);
            }
        }
        true
    }

    /// Whether the events module is edge-triggered (epoll): a watched
    /// socket reports new input once, so watching an idle client costs
    /// nothing until it sends or closes.
    pub fn edge_triggered(&self) -> bool {
        self.actions.edge_triggered()
    }

    /// Replaces a connection's handler (also from inside that handler).
    pub fn set_handler(&mut self, c: ConnId, h: Box<dyn Handler>) {
        if let Some(x) = self.pool.get_mut(c) {
            x.handler = Some(h);
        }
    }

    /// Adds an fd that was not accepted from a listener (an upstream socket,
    /// a pipe) to the pool with a handler. The fd is made non-blocking; call
    /// [`Core::handle_read_event`] to start watching it.
    pub fn adopt(&mut self, fd: std::os::fd::OwnedFd, h: Box<dyn Handler>) -> io::Result<ConnId> {
        crate::sys::socket::set_nonblocking(fd.as_fd())?;
        let c = self.get_connection(fd)?;
        if let Some(x) = self.pool.get_mut(c) {
            x.write.ready = true;
        }
        self.set_handler(c, h);
        Ok(c)
    }

    /// Takes a slot for `fd` (nginx's `ngx_get_connection`): drains reusable
    /// connections when fewer than 1/16 of the slots are free, and logs (at
    /// most once a second) when none is left.
    pub(crate) fn get_connection(&mut self, fd: std::os::fd::OwnedFd) -> io::Result<ConnId> {
        if self.pool.free_n < self.pool.capacity() / 16 || self.pool.free_n == 0 {
            self.drain_connections();
        }
        match self.pool.alloc(fd, Kind::Conn) {
            Ok(c) => Ok(c),
            Err(_fd) => {
                let now = self.clock.now();
                if msec_diff(now, self.last_pool_warning) >= 1000 {
                    self.last_pool_warning = now;
                    log::warn!("{} worker_connections are not enough", self.pool.capacity());
                }
                Err(io::Error::other("worker_connections are not enough"))
            }
        }
    }

    /// Asks up to 32 of the oldest reusable connections to close (nginx's
    /// `ngx_drain_connections`).
    fn drain_connections(&mut self) {
        let mut n = self.pool.reusable_n.min(32);
        while n > 0 {
            n -= 1;
            let Some(c) = self.pool.oldest_reusable() else {
                break;
            };
            self.stats.drained += 1;
            self.ask_to_close(c, true);
        }
    }

    /// Sets `close` and runs the read handler, which should close the
    /// connection. With `force` (slots are short) the core closes it if the
    /// handler did not; on graceful shutdown the handler may keep it a
    /// little longer (to answer one more request with `Connection: close`
    /// instead of racing the client), provided it arms a non-cancelable
    /// timer so the exiting worker waits for it.
    pub(super) fn ask_to_close(&mut self, c: ConnId, force: bool) {
        if let Some(x) = self.pool.get_mut(c) {
            x.close = true;
            x.idle = false;
        }
        self.set_reusable(c, false);
        self.call(c, EvKind::Read, false);
        let timer_held = self
            .pool
            .get(c)
            .is_some_and(|x| x.read.timer_set() && !x.read.cancelable);
        if force || !timer_held {
            self.close(c);
        }
    }

    /// Marks `c` as reusable (an idle keep-alive connection that may be closed
    /// when slots run short) or not (nginx's `ngx_reusable_connection`).
    ///
    /// Reusable connections are what stub_status counts as "Waiting".
    pub fn set_reusable(&mut self, c: ConnId, on: bool) {
        let Some(x) = self.pool.get(c) else {
            return;
        };
        if x.reusable == on {
            return;
        }
        self.pool.set_reusable(c, on);
        if let Some(z) = &self.shared {
            if on {
                z.stats().waiting.inc();
            } else {
                z.stats().waiting.dec();
            }
        }
    }

    /// Marks `c` as idle (between requests) or busy: a graceful shutdown
    /// closes idle connections at once and waits for busy ones.
    pub fn set_idle(&mut self, c: ConnId, on: bool) {
        if let Some(x) = self.pool.get_mut(c) {
            x.idle = on;
        }
    }

    /// Marks `c` as waiting between requests, or busy again: reusable
    /// (drained first when slots run short, counted as Waiting), idle (closed
    /// at once on graceful shutdown) and its read timer (the keep-alive
    /// timeout) cancelable — what nginx's keep-alive handler sets together.
    pub fn set_keepalive(&mut self, c: ConnId, on: bool) {
        self.set_reusable(c, on);
        self.set_idle(c, on);
        self.set_cancelable(Ev::read(c), on);
    }

    /// Closes a connection (nginx's `ngx_close_connection`): disarms its
    /// timers, unposts its events, stops watching it, frees the slot (the
    /// generation changes) and closes the fd. A no-op for a stale id.
    pub fn close(&mut self, c: ConnId) {
        let Some(x) = self.pool.get(c) else {
            return;
        };
        let c = if x.tls.is_some() {
            // close_notify first; when it cannot all go out now, the slot
            // lingers under a new generation and closes itself.
            match self.tls_close(c) {
                Some(c) => c,
                None => return,
            }
        } else {
            c
        };
        let Some(x) = self.pool.get(c) else {
            return;
        };
        if let Kind::Listener(_) = x.kind {
            log::error!("close() called on a listening connection");
            return;
        }
        self.del_timer(Ev::read(c));
        self.del_timer(Ev::write(c));
        self.posted.remove(Ev::index(c, EvKind::Read));
        self.posted.remove(Ev::index(c, EvKind::Write));
        self.release_slot(c);
    }

    /// Stops watching, frees and closes a slot of any kind.
    pub(crate) fn release_slot(&mut self, c: ConnId) {
        let Some(x) = self.pool.get(c) else {
            return;
        };
        // Only a socket this process accepted or connected itself is surely
        // gone from epoll when closed (nginx closes those without
        // EPOLL_CTL_DEL): a listening socket is also open in the master, an
        // adopted fd may have duplicates, so those are deleted explicitly.
        let accepted = x.listener.is_some();
        let own = accepted || x.outbound;
        if let Some(z) = &self.shared {
            if accepted {
                z.stats().active.dec();
            }
            if x.reusable {
                z.stats().waiting.dec();
            }
        }
        if x.in_backend {
            if let Some(fd) = x.fd() {
                if let Err(e) = self.actions.del(fd, c.token(), own) {
                    log::error!("{} del failed ({e})", self.actions.name());
                }
            }
        }
        // The fd closes here, after the handler (if not running) is dropped.
        drop(self.pool.free(c));
    }

    // ------------------------------------------------------------- interest

    /// Sets what the multiplexer watches for `c`: add, modify or delete.
    pub(crate) fn set_interest(&mut self, c: ConnId, want: Interest) -> io::Result<()> {
        let edge = self.actions.edge_triggered();
        let exclusive = self.opts.exclusive_accept;
        let Some(x) = self.pool.get_mut(c) else {
            return Ok(());
        };
        if want == x.registered && (x.in_backend || want.is_empty()) {
            return Ok(());
        }
        let trigger = match x.kind {
            Kind::Listener(_) if exclusive => Trigger::Exclusive,
            Kind::Listener(_) => Trigger::Level,
            _ if edge => Trigger::Edge,
            _ => Trigger::Level,
        };
        let Some(fd) = x.fd.as_ref() else {
            return Ok(());
        };
        let token = c.token();
        let r = if !x.in_backend {
            self.actions.add(fd.as_fd(), token, want, trigger)
        } else if want.is_empty() {
            self.actions.del(fd.as_fd(), token, false)
        } else {
            self.actions.modify(fd.as_fd(), token, want, trigger)
        };
        r?;
        x.in_backend = !want.is_empty();
        x.registered = want;
        x.read.active = want.readable();
        x.write.active = want.writable();
        Ok(())
    }
}
