//! Thin epoll(7) wrapper: create, ctl, wait. The policy (which fds are edge-
//! or level-triggered, when interest changes) lives in `event::actions`.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};

pub use rustix::event::epoll::EventFlags as Flags;

/// An epoll instance plus its preallocated event list (nginx's `event_list`,
/// sized by `epoll_events`).
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<Event>,
}

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)` with room for `nevents` events per wait.
    pub fn new(nevents: usize) -> io::Result<Epoll> {
        let fd = epoll::create(CreateFlags::CLOEXEC)?;
        Ok(Epoll {
            fd,
            events: Vec::with_capacity(nevents.max(1)),
        })
    }

    /// `EPOLL_CTL_ADD`.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64, flags: EventFlags) -> io::Result<()> {
        Ok(epoll::add(&self.fd, fd, EventData::new_u64(token), flags)?)
    }

    /// `EPOLL_CTL_MOD`.
    pub fn modify(&self, fd: BorrowedFd<'_>, token: u64, flags: EventFlags) -> io::Result<()> {
        Ok(epoll::modify(
            &self.fd,
            fd,
            EventData::new_u64(token),
            flags,
        )?)
    }

    /// `EPOLL_CTL_DEL`.
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        Ok(epoll::delete(&self.fd, fd)?)
    }

    /// `epoll_wait` for at most `timeout_ms` (None: forever). EINTR is
    /// reported as zero events, so a signal only ends the wait early.
    pub fn wait(
        &mut self,
        timeout_ms: Option<u64>,
        mut f: impl FnMut(u64, EventFlags),
    ) -> io::Result<usize> {
        let ts = timeout_ms.map(|ms| rustix::time::Timespec {
            tv_sec: (ms / 1000) as i64,
            tv_nsec: ((ms % 1000) * 1_000_000) as _,
        });
        self.events.clear();
        match epoll::wait(
            &self.fd,
            rustix::buffer::spare_capacity(&mut self.events),
            ts.as_ref(),
        ) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(0),
            Err(e) => return Err(e.into()),
        }
        for ev in &self.events {
            // Copy out of the packed struct before use.
            let flags = ev.flags;
            let data = ev.data;
            f(data.u64(), flags);
        }
        Ok(self.events.len())
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
