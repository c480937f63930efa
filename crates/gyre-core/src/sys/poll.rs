//! Thin poll(2) wrapper over a caller-owned `pollfd` array.
//!
//! rustix's `PollFd` borrows each fd for the array's lifetime, which does not
//! fit an array that lives as long as the event loop, so this one uses libc.

use std::io;
use std::os::fd::RawFd;

/// One entry of the array passed to poll(2).
pub type PollFd = libc::pollfd;

pub const POLLIN: i16 = libc::POLLIN;
pub const POLLOUT: i16 = libc::POLLOUT;
pub const POLLERR: i16 = libc::POLLERR;
pub const POLLHUP: i16 = libc::POLLHUP;
pub const POLLNVAL: i16 = libc::POLLNVAL;
pub const POLLRDHUP: i16 = libc::POLLRDHUP;

/// A `pollfd` watching `fd` for `events`.
pub fn pollfd(fd: RawFd, events: i16) -> PollFd {
    PollFd {
        fd,
        events,
        revents: 0,
    }
}

/// poll(2) on `fds` for at most `timeout_ms` (None: forever). EINTR is
/// reported as zero ready fds.
pub fn poll(fds: &mut [PollFd], timeout_ms: Option<u64>) -> io::Result<usize> {
    let timeout = match timeout_ms {
        None => -1,
        Some(ms) => ms.min(i32::MAX as u64) as libc::c_int,
    };
    // SAFETY: `fds` is a valid, exclusively borrowed array of `pollfd` of the
    // length passed; the kernel writes only the `revents` fields.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}
