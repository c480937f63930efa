//! The "actions" seam between the event loop and an I/O multiplexing module
//! (nginx's `ngx_event_actions_t`).
//!
//! A module only watches fds and reports readiness tagged with the caller's
//! 64-bit token; everything else (which event is active, posting, handler
//! dispatch, the stale-event check) happens above the seam in
//! [`Core`](super::Core), so a backend is a page of code. nginx's table maps
//! onto this trait as:
//!
//! | nginx                 | here                                            |
//! |-----------------------|-------------------------------------------------|
//! | `init`                | the module's constructor ([`Backend::create`])  |
//! | `add` / `enable`      | [`Actions::add`] (or [`Actions::modify`] when the fd is already watched) |
//! | `del` / `disable`     | [`Actions::modify`] to the remaining interest, or [`Actions::del`] |
//! | `add_conn`            | [`Actions::add`] with read+write, edge-triggered |
//! | `del_conn`            | [`Actions::del`] with `closing`                 |
//! | `notify`              | [`Notifier`](super::core::Notifier): an eventfd the core watches |
//! | `process_events`      | [`Actions::process_events`]                     |
//! | `done`                | [`Actions::done`] / drop                        |

use std::io;
use std::os::fd::BorrowedFd;

/// Which directions to watch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interest(u8);

impl Interest {
    pub const NONE: Interest = Interest(0);
    pub const READ: Interest = Interest(1);
    pub const WRITE: Interest = Interest(2);
    pub const BOTH: Interest = Interest(3);

    #[inline]
    pub fn readable(self) -> bool {
        self.0 & 1 != 0
    }
    #[inline]
    pub fn writable(self) -> bool {
        self.0 & 2 != 0
    }
    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    #[inline]
    pub fn with(self, o: Interest) -> Interest {
        Interest(self.0 | o.0)
    }
    #[inline]
    pub fn without(self, o: Interest) -> Interest {
        Interest(self.0 & !o.0)
    }
}

/// How readiness is reported for one fd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Reported while the condition holds (listening sockets; every fd with
    /// a level-only module such as poll).
    Level,
    /// Reported once per change (nginx's NGX_CLEAR_EVENT): the handler must
    /// read or write until EAGAIN. Also asks for peer-shutdown reports.
    Edge,
    /// Level-triggered with EPOLLEXCLUSIVE: of several processes watching one
    /// listening socket, only one is woken per connection.
    Exclusive,
}

/// One ready fd, as reported by a module.
#[derive(Clone, Copy, Debug, Default)]
pub struct Readiness {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// EPOLLERR/EPOLLHUP (or POLLERR/POLLHUP/POLLNVAL). A module sets
    /// `readable`/`writable` as well when neither was reported, so the error
    /// reaches whichever handler is active.
    pub error: bool,
    /// The peer shut down its side (EPOLLRDHUP/POLLRDHUP): a short read has
    /// not drained the socket, the next read returns 0.
    pub rdhup: bool,
}

/// An I/O multiplexing module.
pub trait Actions {
    /// The module's name, as in `use epoll;`.
    fn name(&self) -> &'static str;

    /// Whether connections are edge-triggered (epoll) or level-triggered
    /// (poll). The core changes interest accordingly: with level triggering
    /// an event that is ready and unwanted must be deleted or it fires again.
    fn edge_triggered(&self) -> bool;

    /// Whether [`Readiness::rdhup`] is reported, which lets a short read skip
    /// the extra read that would only return EAGAIN.
    fn reports_rdhup(&self) -> bool;

    /// Starts watching `fd`, which is not watched yet.
    fn add(
        &mut self,
        fd: BorrowedFd<'_>,
        token: u64,
        interest: Interest,
        trigger: Trigger,
    ) -> io::Result<()>;

    /// Changes what a watched fd is watched for.
    fn modify(
        &mut self,
        fd: BorrowedFd<'_>,
        token: u64,
        interest: Interest,
        trigger: Trigger,
    ) -> io::Result<()>;

    /// Stops watching `fd`. `closing`: the fd is about to be closed, so a
    /// module whose kernel drops closed fds by itself (epoll) may skip the
    /// system call (nginx's NGX_CLOSE_EVENT).
    fn del(&mut self, fd: BorrowedFd<'_>, token: u64, closing: bool) -> io::Result<()>;

    /// Waits at most `timeout_ms` (None: until something happens) and appends
    /// what became ready to `out`. A signal ends the wait with no events.
    fn process_events(
        &mut self,
        timeout_ms: Option<u64>,
        out: &mut Vec<Readiness>,
    ) -> io::Result<()>;

    /// Releases the module's resources (nginx's `done`); drop does the same.
    fn done(&mut self) {}
}

/// The built-in modules, selectable at run time (`use epoll|poll;`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Epoll,
    Poll,
}

impl Backend {
    /// The default on this platform.
    pub const DEFAULT: Backend = Backend::Epoll;

    /// Parses a module name as `use` takes it.
    pub fn from_name(name: &str) -> Option<Backend> {
        match name {
            "epoll" => Some(Backend::Epoll),
            "poll" => Some(Backend::Poll),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Epoll => "epoll",
            Backend::Poll => "poll",
        }
    }

    /// Creates the module (nginx's `init`, run in each worker after fork so
    /// nothing is shared through fork). `nevents` is the batch size.
    pub fn create(self, nevents: usize) -> io::Result<Box<dyn Actions>> {
        Ok(match self {
            Backend::Epoll => Box::new(super::epoll::EpollActions::new(nevents)?),
            Backend::Poll => Box::new(super::poll::PollActions::new(nevents)),
        })
    }
}
