//! Listening sockets in a loop (nginx's `ngx_event_process_init` step 6
//! and `ngx_close_listening_sockets`).

use super::*;

impl Core {
    // -------------------------------------------------------------- listeners

    /// Registers a listener whose accepted connections go to `protocol`
    /// (nginx's `ngx_event_process_init` step 6: the listener gets a slot and
    /// its read handler is the accept handler). Without an accept mutex it is
    /// watched at once.
    pub fn add_listener(
        &mut self,
        ls: Listener,
        protocol: Box<dyn Protocol>,
    ) -> io::Result<ListenerId> {
        let idx = self.listeners.len();
        let (addr, opts) = (ls.local_addr(), *ls.options());
        let fd = ls.into_fd();
        let c = self
            .pool
            .alloc(fd, Kind::Listener(idx as u32))
            .map_err(|_| io::Error::other("worker_connections are not enough for the listeners"))?;
        if let Some(x) = self.pool.get_mut(c) {
            x.handler = Some(Box::new(crate::conn::accept::AcceptHandler {
                ls: ListenerId(idx),
            }));
        }
        self.listeners.push(ListenerSlot {
            opts,
            addr,
            open: true,
            accepts: 0,
            first_read: Default::default(),
            conn: c,
            protocol: Some(protocol),
            tls: None,
        });
        if self.accept_mutex.is_none() {
            self.set_interest(c, Interest::READ)?;
            self.accept_events_enabled = true;
        }
        Ok(ListenerId(idx))
    }

    /// The address a listener is bound to.
    pub fn listener_addr(&self, id: ListenerId) -> Option<std::net::SocketAddr> {
        let l = self.listeners.get(id.0)?;
        l.open.then_some(l.addr)
    }

    /// Stops accepting and closes every listening socket (graceful shutdown).
    pub fn close_listeners(&mut self) {
        for i in 0..self.listeners.len() {
            let c = self.listeners[i].conn;
            self.del_timer(Ev::read(c));
            self.posted.remove(Ev::index(c, EvKind::Read));
            self.release_slot(c);
            self.listeners[i].open = false;
        }
        self.accept_events_enabled = false;
    }
}
