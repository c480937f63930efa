//! Relaying bytes from one connection to another through a pipe with
//! splice(2), so they never cross into user space: what a proxy uses for a
//! body it passes unchanged (the kernel hands the socket buffers' pages on
//! instead of copying them out with recv and back in with send).
//!
//! [`Pipe`] counts what it holds, so a caller can keep it empty between
//! uses: whatever it could not pass on is taken back with [`Pipe::read`].
//! [`Core::splice_in`] and [`Core::splice_out`] keep the events' `ready`
//! flags as [`Core::recv`] and [`Core::send`] do. Plain sockets only: a TLS
//! connection's bytes are records to decrypt ([`Core::can_splice`]).

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use crate::event::core::Core;
use crate::sys::pipe as sys;

use super::pool::ConnId;

/// The size asked for a pipe: room for the pages of one relayed read with
/// plenty to spare, so a short splice into it means the socket had no more
/// (not that the pipe's slots ran out).
const PIPE_SIZE: usize = 256 * 1024;

/// A non-blocking pipe and how many bytes are in it.
#[derive(Debug)]
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    held: usize,
    capacity: usize,
}

impl Pipe {
    pub fn new() -> io::Result<Pipe> {
        let (read, write) = sys::pipe()?;
        let capacity = sys::set_size(write.as_fd(), PIPE_SIZE);
        Ok(Pipe {
            read,
            write,
            held: 0,
            capacity,
        })
    }

    /// Bytes spliced in and not yet out.
    pub fn held(&self) -> usize {
        self.held
    }

    /// The pipe's size in bytes, as the kernel reports it.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Takes bytes the pipe holds into `buf` (what could not be spliced
    /// out goes this way). `Ok(0)` when it holds none.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.held == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf.len().min(self.held);
        let n = crate::sys::socket::read(self.read.as_fd(), &mut buf[..want])?;
        self.held -= n;
        Ok(n)
    }
}

impl Core {
    /// Whether `c` is a plain socket that splice(2) can read or write.
    pub fn can_splice(&self, c: ConnId) -> bool {
        self.pool
            .get(c)
            .is_some_and(|x| x.tls.is_none() && x.fd().is_some())
    }

    /// Moves up to `len` bytes waiting on `c` into `pipe`, as
    /// [`Core::recv`] reads them: `Ok(0)` is end of stream, a
    /// `WouldBlock` error means wait for the next read event.
    pub fn splice_in(&mut self, c: ConnId, pipe: &mut Pipe, len: usize) -> io::Result<usize> {
        let rdhup = self.actions.reports_rdhup();
        let x = self
            .pool
            .get_mut(c)
            .filter(|x| x.tls.is_none())
            .ok_or_else(unsupported)?;
        let fd = x.fd().ok_or_else(unsupported)?;
        let r = sys::splice(fd, pipe.write.as_fd(), len);
        if let Ok(n) = r {
            pipe.held += n;
        }
        // Short with room to spare in the pipe: the socket had no more (as
        // recv's short read with RDHUP reporting).
        let roomy = pipe.capacity >= 4 * len;
        Core::after_read(x, r, |n| n < len && rdhup && roomy)
    }

    /// Moves up to `len` of the bytes in `pipe` out to `c`, as
    /// [`Core::send`] writes them (a short write clears `write.ready`).
    pub fn splice_out(&mut self, c: ConnId, pipe: &mut Pipe, len: usize) -> io::Result<usize> {
        let x = self
            .pool
            .get_mut(c)
            .filter(|x| x.tls.is_none())
            .ok_or_else(unsupported)?;
        let fd = x.fd().ok_or_else(unsupported)?;
        let len = len.min(pipe.held);
        let r = sys::splice(pipe.read.as_fd(), fd, len);
        if let Ok(n) = r {
            pipe.held -= n;
        }
        Self::after_write(x, r, len)
    }
}

fn unsupported() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, "not a plain socket connection")
}
