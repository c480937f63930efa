//! The epoll module: Linux's default.
//!
//! Connections are edge-triggered with EPOLLRDHUP, listening sockets level-
//! triggered (optionally EPOLLEXCLUSIVE). An fd about to be closed is not
//! deleted: close(2) removes it from the interest list.

use std::io;
use std::os::fd::BorrowedFd;

use super::actions::{Actions, Interest, Readiness, Trigger};
use crate::sys::epoll::{Epoll, Flags};

pub struct EpollActions {
    ep: Epoll,
}

impl EpollActions {
    pub fn new(nevents: usize) -> io::Result<EpollActions> {
        Ok(EpollActions {
            ep: Epoll::new(nevents)?,
        })
    }
}

fn flags(interest: Interest, trigger: Trigger) -> Flags {
    let mut f = Flags::empty();
    if interest.readable() {
        f |= Flags::IN;
    }
    if interest.writable() {
        f |= Flags::OUT;
    }
    match trigger {
        Trigger::Level => {}
        Trigger::Edge => f |= Flags::ET | Flags::RDHUP,
        Trigger::Exclusive => f |= Flags::EXCLUSIVE,
    }
    f
}

impl Actions for EpollActions {
    fn name(&self) -> &'static str {
        "epoll"
    }

    fn edge_triggered(&self) -> bool {
        true
    }

    fn reports_rdhup(&self) -> bool {
        true
    }

    fn add(&mut self, fd: BorrowedFd<'_>, token: u64, i: Interest, t: Trigger) -> io::Result<()> {
        self.ep.add(fd, token, flags(i, t))
    }

    fn modify(
        &mut self,
        fd: BorrowedFd<'_>,
        token: u64,
        i: Interest,
        t: Trigger,
    ) -> io::Result<()> {
        // EPOLLEXCLUSIVE is refused by EPOLL_CTL_MOD; it only ever changes
        // between "watched" and "not watched", which are add and del.
        let t = if t == Trigger::Exclusive {
            Trigger::Level
        } else {
            t
        };
        self.ep.modify(fd, token, flags(i, t))
    }

    fn del(&mut self, fd: BorrowedFd<'_>, _token: u64, closing: bool) -> io::Result<()> {
        if closing {
            return Ok(());
        }
        self.ep.delete(fd)
    }

    fn process_events(&mut self, timeout: Option<u64>, out: &mut Vec<Readiness>) -> io::Result<()> {
        self.ep.wait(timeout, |token, f| {
            let error = f.intersects(Flags::ERR | Flags::HUP);
            let mut readable = f.contains(Flags::IN);
            let mut writable = f.contains(Flags::OUT);
            if error && !readable && !writable {
                // Deliver the error to whichever handler is active (nginx
                // does the same): the next read or write reports it.
                readable = true;
                writable = true;
            }
            out.push(Readiness {
                token,
                readable,
                writable,
                error,
                rdhup: f.contains(Flags::RDHUP),
            });
        })?;
        Ok(())
    }
}
