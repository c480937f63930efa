//! Listening sockets (nginx's `ngx_listening_t`) and the protocol hook.
//!
//! A listener is bound (in the master, before fork, or by a library user) with
//! nginx's options; the core registers it and, for every connection it
//! accepts, calls the listener's [`Protocol`] — nginx's `ls->handler`, the
//! function through which `ngx_http_init_connection` or `ngx_mail_init_connection`
//! take over a new connection.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::event::core::{Core, Handler};
use crate::sys::socket;

use super::pool::ConnId;

/// How to bind a listening socket (`listen ADDR [backlog=N] [reuseport] [deferred]`).
#[derive(Clone, Copy, Debug)]
pub struct ListenOptions {
    pub addr: SocketAddr,
    /// Accept queue length; nginx's default is 511.
    pub backlog: i32,
    /// SO_REUSEPORT: one socket per worker, balanced by the kernel.
    pub reuseport: bool,
    /// TCP_DEFER_ACCEPT: accept only once the client has sent data.
    pub deferred: bool,
}

impl ListenOptions {
    pub fn new(addr: SocketAddr) -> ListenOptions {
        ListenOptions {
            addr,
            backlog: 511,
            reuseport: false,
            deferred: false,
        }
    }
}

/// A bound, listening, non-blocking socket.
pub struct Listener {
    fd: OwnedFd,
    addr: SocketAddr,
    opts: ListenOptions,
}

impl Listener {
    /// Creates, configures, binds and listens.
    pub fn bind(opts: ListenOptions) -> io::Result<Listener> {
        let fd = socket::listen(
            &opts.addr,
            &socket::ListenSockOpts {
                backlog: opts.backlog,
                reuseport: opts.reuseport,
                deferred: opts.deferred,
            },
        )?;
        let addr = socket::local_addr(fd.as_fd())?;
        Ok(Listener { fd, addr, opts })
    }

    /// Wraps an inherited listening socket (binary upgrade, tests).
    pub fn from_fd(fd: OwnedFd, opts: ListenOptions) -> io::Result<Listener> {
        socket::set_nonblocking(fd.as_fd())?;
        let addr = socket::local_addr(fd.as_fd())?;
        Ok(Listener { fd, addr, opts })
    }

    /// The bound address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn options(&self) -> &ListenOptions {
        &self.opts
    }

    /// A duplicate sharing the same socket (for handing to a child process or
    /// to a second core).
    pub fn try_clone(&self) -> io::Result<Listener> {
        Ok(Listener {
            fd: self.fd.try_clone()?,
            addr: self.addr,
            opts: self.opts,
        })
    }

    pub(crate) fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// What a listener does with the connections it accepts: the protocol's
/// entry point (nginx's `ls->handler`).
pub trait Protocol {
    /// Called once per accepted connection, already in the pool. Set up the
    /// connection (usually `core.handle_read_event(c)` and a timer) and return
    /// the handler for its events; `None` closes it. With `deferred`, data is
    /// already waiting and the handler is called right after this returns.
    fn init_connection(&mut self, core: &mut Core, c: ConnId) -> Option<Box<dyn Handler>>;
}

/// Identifies a listener registered with a [`Core`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerId(pub(crate) usize);

impl ListenerId {
    pub fn index(self) -> usize {
        self.0
    }
}
