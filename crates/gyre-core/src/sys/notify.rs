//! Wake-up fds: an eventfd that another thread or a signal handler writes to
//! end the loop's wait (nginx's `ngx_epoll_notify`), and a timerfd for the
//! `timer_resolution` tick.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use rustix::event::{eventfd, EventfdFlags};
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};

/// A non-blocking eventfd counter.
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        Ok(EventFd(eventfd(
            0,
            EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
        )?))
    }

    /// Adds 1 to the counter, making the fd readable. Never blocks: if the
    /// counter is saturated a wake-up is already pending.
    pub fn signal(&self) -> io::Result<()> {
        match rustix::io::write(&self.0, &1u64.to_ne_bytes()) {
            Ok(_) | Err(rustix::io::Errno::AGAIN) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Resets the counter; returns how many signals were pending.
    pub fn drain(&self) -> u64 {
        let mut buf = [0u8; 8];
        match rustix::io::read(&self.0, &mut buf) {
            Ok(8) => u64::from_ne_bytes(buf),
            _ => 0,
        }
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// A periodic, non-blocking monotonic timerfd.
pub struct TimerFd(OwnedFd);

impl TimerFd {
    /// A timer that becomes readable every `period_ms`.
    pub fn periodic(period_ms: u64) -> io::Result<TimerFd> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )?;
        let ts = Timespec {
            tv_sec: (period_ms / 1000) as i64,
            tv_nsec: ((period_ms % 1000) * 1_000_000) as _,
        };
        timerfd_settime(
            &fd,
            TimerfdTimerFlags::empty(),
            &Itimerspec {
                it_interval: ts,
                it_value: ts,
            },
        )?;
        Ok(TimerFd(fd))
    }

    /// Reads the expiration count (0 if none pending).
    pub fn drain(&self) -> u64 {
        let mut buf = [0u8; 8];
        match rustix::io::read(&self.0, &mut buf) {
            Ok(8) => u64::from_ne_bytes(buf),
            _ => 0,
        }
    }
}

impl AsFd for TimerFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}
