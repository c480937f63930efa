//! Pipe system calls for moving bytes between sockets inside the kernel:
//! a non-blocking pipe, its size, and splice(2) in and out of it.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::pipe::{self as rpipe, PipeFlags, SpliceFlags};

/// A non-blocking, close-on-exec pipe: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rpipe::pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)?)
}

/// Asks for a pipe of `size` bytes (F_SETPIPE_SZ); returns the size the
/// kernel gave, which may be the old one if the request was refused.
pub fn set_size(fd: BorrowedFd<'_>, size: usize) -> usize {
    match rpipe::fcntl_setpipe_size(fd, size) {
        Ok(n) => n,
        Err(_) => rpipe::fcntl_getpipe_size(fd).unwrap_or(0),
    }
}

/// `splice(2)` of up to `len` bytes from `from` to `to` (one of them a
/// pipe), non-blocking, retried on EINTR.
pub fn splice(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    loop {
        match rpipe::splice(
            from,
            None,
            to,
            None,
            len,
            SpliceFlags::MOVE | SpliceFlags::NONBLOCK,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return Ok(r?),
        }
    }
}
