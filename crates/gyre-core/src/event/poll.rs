//! The poll module: a portable, level-triggered fallback (`use poll;`).
//!
//! The `pollfd` array is dense: an fd's index is found through a table indexed
//! by fd number, and deletion moves the last entry into the hole (nginx's
//! ngx_poll_module does the same), so add and del are O(1) and each wait is
//! O(watched fds).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::actions::Trigger;
use super::actions::{Actions, Interest, Readiness};
use crate::sys::poll::{self as sys, PollFd};

const ABSENT: u32 = u32::MAX;

pub struct PollActions {
    fds: Vec<PollFd>,
    tokens: Vec<u64>,
    /// fd number -> index in `fds`.
    index: Vec<u32>,
}

impl PollActions {
    /// poll reports every ready fd at once, so there is no batch size.
    pub fn new(_nevents: usize) -> PollActions {
        PollActions {
            fds: Vec::new(),
            tokens: Vec::new(),
            index: Vec::new(),
        }
    }

    fn slot(&self, fd: i32) -> Option<usize> {
        match self.index.get(fd as usize) {
            Some(&i) if i != ABSENT => Some(i as usize),
            _ => None,
        }
    }
}

fn events(i: Interest) -> i16 {
    let mut e = 0;
    if i.readable() {
        e |= sys::POLLIN | sys::POLLRDHUP;
    }
    if i.writable() {
        e |= sys::POLLOUT;
    }
    e
}

impl Actions for PollActions {
    fn name(&self) -> &'static str {
        "poll"
    }

    fn edge_triggered(&self) -> bool {
        false
    }

    fn reports_rdhup(&self) -> bool {
        true
    }

    fn add(&mut self, fd: BorrowedFd<'_>, token: u64, i: Interest, _t: Trigger) -> io::Result<()> {
        let raw = fd.as_raw_fd();
        if self.slot(raw).is_some() {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        let n = raw as usize;
        if self.index.len() <= n {
            self.index.resize(n + 1, ABSENT);
        }
        self.index[n] = self.fds.len() as u32;
        self.fds.push(sys::pollfd(raw, events(i)));
        self.tokens.push(token);
        Ok(())
    }

    fn modify(
        &mut self,
        fd: BorrowedFd<'_>,
        token: u64,
        i: Interest,
        _t: Trigger,
    ) -> io::Result<()> {
        let Some(k) = self.slot(fd.as_raw_fd()) else {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        };
        self.fds[k].events = events(i);
        self.tokens[k] = token;
        Ok(())
    }

    fn del(&mut self, fd: BorrowedFd<'_>, _token: u64, _closing: bool) -> io::Result<()> {
        let raw = fd.as_raw_fd();
        let Some(k) = self.slot(raw) else {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        };
        self.fds.swap_remove(k);
        self.tokens.swap_remove(k);
        self.index[raw as usize] = ABSENT;
        if let Some(moved) = self.fds.get(k) {
            self.index[moved.fd as usize] = k as u32;
        }
        Ok(())
    }

    fn process_events(&mut self, timeout: Option<u64>, out: &mut Vec<Readiness>) -> io::Result<()> {
        for p in &mut self.fds {
            p.revents = 0;
        }
        let mut n = sys::poll(&mut self.fds, timeout)?;
        for (p, &token) in self.fds.iter().zip(&self.tokens) {
            if n == 0 {
                break;
            }
            let r = p.revents;
            if r == 0 {
                continue;
            }
            n -= 1;
            let error = r & (sys::POLLERR | sys::POLLHUP | sys::POLLNVAL) != 0;
            let mut readable = r & (sys::POLLIN | sys::POLLRDHUP) != 0;
            let mut writable = r & sys::POLLOUT != 0;
            if error && !readable && !writable {
                readable = p.events & sys::POLLIN != 0;
                writable = p.events & sys::POLLOUT != 0;
            }
            out.push(Readiness {
                token,
                readable,
                writable,
                error,
                rdhup: r & sys::POLLRDHUP != 0,
            });
        }
        Ok(())
    }
}
