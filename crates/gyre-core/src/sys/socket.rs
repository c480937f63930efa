//! Socket system calls: listening sockets with nginx's options, accept4, and
//! the non-blocking reads and writes connections use.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::net::{self as rnet, AddressFamily, SocketFlags, SocketType};

/// Options applied to a listening socket before `listen(2)`.
#[derive(Clone, Copy, Debug)]
pub struct ListenSockOpts {
    pub backlog: i32,
    pub reuseport: bool,
    /// TCP_DEFER_ACCEPT: the kernel completes accept only once data arrived.
    pub deferred: bool,
}

/// socket + SO_REUSEADDR (+ SO_REUSEPORT, TCP_DEFER_ACCEPT) + bind + listen,
/// non-blocking and close-on-exec.
pub fn listen(addr: &SocketAddr, o: &ListenSockOpts) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rnet::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    rnet::sockopt::set_socket_reuseaddr(&fd, true)?;
    if o.reuseport {
        rnet::sockopt::set_socket_reuseport(&fd, true)?;
    }
    if addr.is_ipv6() {
        rnet::sockopt::set_ipv6_v6only(&fd, true)?;
    }
    rnet::bind(&fd, addr)?;
    if o.deferred {
        set_int_opt(fd.as_fd(), libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT, 1)?;
    }
    rnet::listen(&fd, o.backlog)?;
    Ok(fd)
}

/// The address a socket is bound to (resolves port 0).
pub fn local_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    let a = rnet::getsockname(fd)?;
    SocketAddr::try_from(a).map_err(|_| io::Error::other("not an inet socket"))
}

/// `setsockopt` for an int option rustix has no wrapper for.
fn set_int_opt(fd: BorrowedFd<'_>, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` lives across the call and its size is passed; the fd is
    // a valid borrowed socket.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The result of one accept attempt.
pub enum Accepted {
    Conn(OwnedFd, Option<SocketAddr>),
    WouldBlock,
    Err(io::Error),
}

/// `accept4(SOCK_NONBLOCK|SOCK_CLOEXEC)`, retried on EINTR.
pub fn accept(ls: BorrowedFd<'_>) -> Accepted {
    loop {
        match rnet::acceptfrom_with(ls, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC) {
            Ok((fd, addr)) => {
                return Accepted::Conn(fd, addr.and_then(|a| SocketAddr::try_from(a).ok()))
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::AGAIN) => return Accepted::WouldBlock,
            Err(e) => return Accepted::Err(e.into()),
        }
    }
}

/// `read(2)`, retried on EINTR.
#[inline]
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return Ok(r?),
        }
    }
}

/// `recv(2)` (cheaper than read(2) on a socket: no file-position and
/// VFS layers), retried on EINTR; falls back to read(2) for an fd that is
/// not a socket (a pipe given to `Core::adopt`).
#[inline]
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match rnet::recv(fd, &mut *buf, rnet::RecvFlags::empty()) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::NOTSOCK) => return read(fd, buf),
            r => return Ok(r?.0),
        }
    }
}

/// `send(2)` with MSG_NOSIGNAL, retried on EINTR; falls back to write(2)
/// for an fd that is not a socket.
#[inline]
/// Looks at the first bytes waiting without taking them (MSG_PEEK): how the
/// TLS layer tells a ClientHello from a plain-text request.
pub fn peek(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match rnet::recv(fd, &mut *buf, rnet::RecvFlags::PEEK) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return Ok(r?.0),
        }
    }
}

/// Reads from a file at `offset` (pread(2)), for sending a file over TLS,
/// where sendfile(2) cannot be used.
pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        match rustix::io::pread(fd, &mut *buf, offset) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return Ok(r?),
        }
    }
}

pub fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    send_flags(fd, buf, rnet::SendFlags::NOSIGNAL)
}

/// `send(2)` with MSG_MORE: more data follows at once (e.g. a file by
/// sendfile), so the kernel may put both in the same segments.
#[inline]
pub fn send_more(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    send_flags(fd, buf, rnet::SendFlags::NOSIGNAL | rnet::SendFlags::MORE)
}

fn send_flags(fd: BorrowedFd<'_>, buf: &[u8], flags: rnet::SendFlags) -> io::Result<usize> {
    loop {
        match rnet::send(fd, buf, flags) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::NOTSOCK) => return write(fd, buf),
            r => return Ok(r?),
        }
    }
}

/// `write(2)`, retried on EINTR.
#[inline]
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    loop {
        match rustix::io::write(fd, buf) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return Ok(r?),
        }
    }
}

/// Gathered write: `send(2)` for one buffer, `sendmsg(2)` for several (both
/// skip writev(2)'s VFS layers on a socket), with MSG_NOSIGNAL, retried on
/// EINTR; falls back to writev(2) for an fd that is not a socket.
#[inline]
pub fn writev(fd: BorrowedFd<'_>, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    if let [one] = bufs {
        return send(fd, one);
    }
    loop {
        let r = rnet::sendmsg(
            fd,
            bufs,
            &mut rnet::SendAncillaryBuffer::default(),
            rnet::SendFlags::NOSIGNAL,
        );
        match r {
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::NOTSOCK) => loop {
                match rustix::io::writev(fd, bufs) {
                    Err(rustix::io::Errno::INTR) => continue,
                    r => return Ok(r?),
                }
            },
            r => return Ok(r?),
        }
    }
}

/// `sendfile(2)` of up to `count` bytes from `file` at `*offset`, which the
/// kernel advances. Retried on EINTR.
#[inline]
pub fn sendfile(
    out: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    loop {
        match rustix::fs::sendfile(out, file, Some(&mut *offset), count) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return Ok(r?),
        }
    }
}

/// Makes an fd adopted from elsewhere non-blocking.
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    Ok(rustix::io::ioctl_fionbio(fd, true)?)
}

/// Sets SO_LINGER {on, 0} so close(2) sends RST (used for timed-out clients,
/// nginx's `reset_timedout_connection`).
pub fn set_linger_zero(fd: BorrowedFd<'_>) -> io::Result<()> {
    Ok(rnet::sockopt::set_socket_linger(
        fd,
        Some(std::time::Duration::ZERO),
    )?)
}

/// TCP_NODELAY.
pub fn set_nodelay(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    Ok(rnet::sockopt::set_tcp_nodelay(fd, on)?)
}

/// `shutdown(SHUT_WR)`: sends FIN after what is queued (lingering close).
pub fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    Ok(rnet::shutdown(fd, rnet::Shutdown::Write)?)
}

/// Sets or clears FD_CLOEXEC.
pub fn set_cloexec(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let flags = if on {
        rustix::io::FdFlags::CLOEXEC
    } else {
        rustix::io::FdFlags::empty()
    };
    Ok(rustix::io::fcntl_setfd(fd, flags)?)
}

/// Whether a raw fd is an open socket in the listening state.
pub fn is_listening_socket(fd: std::os::fd::RawFd) -> bool {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `v`, which lives
    // across the call; an invalid fd only makes it fail with EBADF.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    rc == 0 && v != 0
}

/// Whether SO_REUSEPORT is set.
pub fn reuseport(fd: BorrowedFd<'_>) -> bool {
    rnet::sockopt::socket_reuseport(fd).unwrap_or(false)
}

/// A non-blocking, close-on-exec stream socket for an outbound connection:
/// the family of `inet`, or AF_UNIX for `None`.
pub fn stream_socket(inet: Option<&SocketAddr>) -> io::Result<OwnedFd> {
    let family = match inet {
        Some(SocketAddr::V4(_)) => AddressFamily::INET,
        Some(SocketAddr::V6(_)) => AddressFamily::INET6,
        None => AddressFamily::UNIX,
    };
    Ok(rnet::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?)
}

/// How a non-blocking connect(2) started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectStart {
    /// Connected at once (usual for unix-domain sockets).
    Done,
    /// EINPROGRESS: the outcome comes as write readiness, then SO_ERROR.
    InProgress,
}

fn connect_outcome(r: rustix::io::Result<()>) -> io::Result<ConnectStart> {
    match r {
        Ok(()) => Ok(ConnectStart::Done),
        // EINTR on a non-blocking connect: the kernel goes on in the
        // background, as after EINPROGRESS.
        Err(e) if e == rustix::io::Errno::INPROGRESS || e == rustix::io::Errno::INTR => {
            Ok(ConnectStart::InProgress)
        }
        Err(e) => Err(e.into()),
    }
}

/// connect(2) of a non-blocking TCP socket.
pub fn connect_inet(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<ConnectStart> {
    connect_outcome(rnet::connect(fd, addr))
}

/// connect(2) of a non-blocking unix-domain socket. Linux says EAGAIN (not
/// ECONNREFUSED) when the listener's queue is full; it is returned as is.
pub fn connect_unix(fd: BorrowedFd<'_>, path: &std::path::Path) -> io::Result<ConnectStart> {
    let a = rnet::SocketAddrUnix::new(path)?;
    connect_outcome(rnet::connect(fd, &a))
}

/// The pending error of a socket (getsockopt SO_ERROR), which also clears
/// it: how a non-blocking connect's outcome is read.
pub fn take_error(fd: BorrowedFd<'_>) -> io::Result<()> {
    match rnet::sockopt::socket_error(fd)? {
        Ok(()) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
