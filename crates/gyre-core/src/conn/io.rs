//! Connection I/O (nginx's `ngx_unix_recv`, `ngx_writev`, `ngx_linux_sendfile`
//! and `ngx_handle_read_event` / `ngx_handle_write_event`).
//!
//! Every call keeps the event's `ready` flag true to the socket: it is cleared
//! on EAGAIN, so handlers know when to stop and wait. With a module that
//! reports peer shutdown (EPOLLRDHUP), a read shorter than the buffer means the
//! socket was drained, so `ready` is cleared without the extra read(2) that
//! would only return EAGAIN.
//!
//! Interest is registered lazily: read interest when a handler first waits
//! for data, write interest only once a send would block.

use std::io::{self, IoSlice};
use std::os::fd::BorrowedFd;

use crate::event::actions::Interest;
use crate::event::core::Core;
use crate::sys::socket;

use super::pool::{ConnId, Connection};

fn stale() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "connection closed")
}

fn fd_of(x: &Connection) -> io::Result<BorrowedFd<'_>> {
    x.fd().ok_or_else(stale)
}

impl Core {
    /// Reads into `buf`. `Ok(0)` is end of stream (`read.eof` is set); an
    /// `ErrorKind::WouldBlock` error means wait for the next read event.
    pub fn recv(&mut self, c: ConnId, buf: &mut [u8]) -> io::Result<usize> {
        let rdhup = self.actions.reports_rdhup();
        let x = self.pool.get_mut(c).ok_or_else(stale)?;
        if x.tls.is_some() {
            return self.tls_recv(c, buf);
        }
        let r = socket::recv(fd_of(x)?, buf);
        let rev = &mut x.read;
        if rev.assumed {
            rev.assumed = false;
            let hit = !matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock);
            if let Some(ls) = x.listener.and_then(|i| self.listeners.get_mut(i)) {
                ls.first_read.record(hit);
            }
        }
        let want = buf.len();
        Self::after_read(x, r, |n| n < want && rdhup)
    }

    /// Keeps `read.ready` true to the socket after a read: end of stream
    /// sets `read.eof`, EAGAIN clears `ready`, an error marks it, and a read
    /// of `n` bytes for which `drained(n)` says the socket had no more (a
    /// short read where EPOLLRDHUP reports a close) clears `ready` unless
    /// a close is already pending.
    pub(crate) fn after_read(
        x: &mut Connection,
        r: io::Result<usize>,
        drained: impl FnOnce(usize) -> bool,
    ) -> io::Result<usize> {
        let rev = &mut x.read;
        match r {
            Ok(0) => {
                rev.ready = false;
                rev.eof = true;
                Ok(0)
            }
            Ok(n) => {
                if !rev.pending_eof && drained(n) {
                    rev.ready = false;
                }
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                rev.ready = false;
                Err(e)
            }
            Err(e) => {
                rev.ready = false;
                rev.error = true;
                Err(e)
            }
        }
    }

    /// Writes from `buf`; a short write clears `write.ready`.
    pub fn send(&mut self, c: ConnId, buf: &[u8]) -> io::Result<usize> {
        let x = self.pool.get_mut(c).ok_or_else(stale)?;
        if x.tls.is_some() {
            return self.tls_send(c, &[IoSlice::new(buf)]);
        }
        let r = socket::send(fd_of(x)?, buf);
        Self::after_write(x, r, buf.len())
    }

    /// [`Core::send`] with MSG_MORE, for bytes followed at once by more
    /// (a response head before its file): the kernel sends them together
    /// instead of a small segment for the head.
    pub fn send_more(&mut self, c: ConnId, buf: &[u8]) -> io::Result<usize> {
        let x = self.pool.get_mut(c).ok_or_else(stale)?;
        if x.tls.is_some() {
            return self.tls_send(c, &[IoSlice::new(buf)]);
        }
        let r = socket::send_more(fd_of(x)?, buf);
        Self::after_write(x, r, buf.len())
    }

    /// Gathers `bufs` into one writev(2); a short write clears `write.ready`.
    pub fn writev(&mut self, c: ConnId, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let x = self.pool.get_mut(c).ok_or_else(stale)?;
        if x.tls.is_some() {
            return self.tls_send(c, bufs);
        }
        let want = bufs.iter().map(|b| b.len()).sum();
        let r = socket::writev(fd_of(x)?, bufs);
        Self::after_write(x, r, want)
    }

    /// Sends up to `count` bytes of `file` from `*offset` (advanced by the
    /// amount sent) with sendfile(2) (on TLS: read and encrypted, at most 64 KiB per call).
    pub fn sendfile(
        &mut self,
        c: ConnId,
        file: BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        let x = self.pool.get_mut(c).ok_or_else(stale)?;
        if x.tls.is_some() {
            return self.tls_sendfile(c, file, offset, count);
        }
        let r = socket::sendfile(fd_of(x)?, file, offset, count);
        Self::after_write(x, r, count)
    }

    /// Keeps `write.ready` true to the socket after a write of `want`
    /// bytes (a short write or EAGAIN clears it; an error marks it).
    pub(crate) fn after_write(
        x: &mut Connection,
        r: io::Result<usize>,
        want: usize,
    ) -> io::Result<usize> {
        let wev = &mut x.write;
        match r {
            Ok(n) => {
                if n < want {
                    wev.ready = false;
                }
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wev.ready = false;
                Err(e)
            }
            Err(e) => {
                wev.ready = false;
                wev.error = true;
                Err(e)
            }
        }
    }

    /// Call after handling a read event: makes sure the next read readiness
    /// is reported (nginx's `ngx_handle_read_event`). Edge-triggered: read
    /// interest is added once, when the handler first has to wait. Level-
    /// triggered: interest is dropped while the event is ready but unread
    /// (the handler chose to stop), so the loop does not spin.
    pub fn handle_read_event(&mut self, c: ConnId) -> io::Result<()> {
        let edge = self.actions.edge_triggered();
        let Some(x) = self.pool.get(c) else {
            return Ok(());
        };
        let (active, ready, cur) = (x.read.active, x.read.ready, x.registered);
        if !active && !ready {
            self.set_interest(c, cur.with(Interest::READ))
        } else if !edge && active && ready {
            self.set_interest(c, cur.without(Interest::READ))
        } else {
            Ok(())
        }
    }

    /// For protocols whose clients speak first (HTTP, RESP), called from
    /// `Protocol::init_connection`: when the client's first bytes are
    /// likely there already, the handler runs as soon as the connection is
    /// set up and reads before any interest is registered, so a connection
    /// answered and closed on its first read costs no epoll_ctl and no
    /// wait. Whether they are likely is learnt per listener from how such
    /// first reads went (`first_read.rs`: on an idle server the request
    /// usually arrives a little after the accept, on a busy one it is
    /// there); when they are not, read interest is registered here and the
    /// handler runs on the read event, as nginx does without `deferred`.
    /// With `deferred` the data is there and nothing changes.
    pub fn assume_readable(&mut self, c: ConnId) {
        let Some(x) = self.pool.get_mut(c) else {
            return;
        };
        if x.read.ready {
            return;
        }
        let try_now = x
            .listener
            .and_then(|i| self.listeners.get_mut(i))
            .is_none_or(|ls| ls.first_read.should_try());
        if try_now {
            x.read.ready = true;
            x.read.assumed = true;
        } else if let Err(e) = self.handle_read_event(c) {
            log::error!("cannot watch a new connection ({e})");
        }
    }

    /// Call after a write: registers write interest once a send would block
    /// (nginx's `ngx_handle_write_event`); level-triggered modules drop it
    /// again once the socket is writable and nothing is pending.
    pub fn handle_write_event(&mut self, c: ConnId) -> io::Result<()> {
        let edge = self.actions.edge_triggered();
        let Some(x) = self.pool.get(c) else {
            return Ok(());
        };
        let (active, ready, cur) = (x.write.active, x.write.ready, x.registered);
        if !active && !ready {
            self.set_interest(c, cur.with(Interest::WRITE))
        } else if !edge && active && ready {
            self.set_interest(c, cur.without(Interest::WRITE))
        } else {
            Ok(())
        }
    }

    /// Stops watching `c` for reads (a level-triggered module would otherwise
    /// keep reporting data the handler does not want yet).
    pub fn disable_read(&mut self, c: ConnId) -> io::Result<()> {
        let Some(x) = self.pool.get(c) else {
            return Ok(());
        };
        if !x.read.active || self.actions.edge_triggered() {
            return Ok(());
        }
        let cur = x.registered;
        self.set_interest(c, cur.without(Interest::READ))
    }

    /// Shuts down the write side (FIN after queued data), for a lingering
    /// close.
    pub fn shutdown_write(&mut self, c: ConnId) -> io::Result<()> {
        let x = self.pool.get(c).ok_or_else(stale)?;
        if x.tls.is_some() {
            return self.tls_shutdown_write(c);
        }
        socket::shutdown_write(fd_of(x)?)
    }

    /// The connection's socket (for options, or I/O the core does not wrap).
    pub fn fd(&self, c: ConnId) -> Option<BorrowedFd<'_>> {
        self.pool.get(c)?.fd()
    }
}
