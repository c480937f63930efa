//! The event loop: one worker's cycle (nginx's `ngx_cycle_t` event state plus
//! `ngx_process_events_and_timers`).
//!
//! [`Core`] owns the multiplexing module, the connection pool, the timers, the
//! time events, the posted queues and the cached clock. Handlers get
//! `&mut Core` and drive everything through it. [`Core::process_events_and_timers`]
//! is the loop body and reads top to bottom as the algorithm in nginx's source.
//!
//! Handler dispatch: a connection's [`Handler`] is taken out of its slot while
//! it runs and put back afterwards unless the handler closed the connection
//! (the slot's generation changed) or installed a replacement. A handler is
//! never re-entered.

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

use super::actions::{Actions, Backend, Interest, Readiness, Trigger};
use super::clock::{monotonic_ms, msec_diff, Clock, Msec};
use super::coalesce::{Coalesce, Wait};
use super::posted::{Posted, Queue};
use super::time_event::{Next, TimeEventId, TimeEvents, UnknownTimeEvent};
use super::timer::TimerWheel;
use crate::conn::listener::{Listener, ListenerId, Protocol};
use crate::conn::pool::{ConnId, Connection, Event, Kind, Pool};
use crate::process::shm::SharedZone;
use crate::sys::notify::{EventFd, TimerFd};

mod accept_mutex;
mod connection;
mod event_timer;
mod listeners;

/// Tokens above every possible connection token (slots are < 2^32 - 1).
const NOTIFY_TOKEN: u64 = u64::MAX;
const TICK_TOKEN: u64 = u64::MAX - 1;

/// nginx's NGX_TIMER_LAZY_DELAY: re-adding a timer this close to its current
/// deadline keeps the old one (keep-alive connections re-arm on every read,
/// and most re-arms then cost nothing). The old deadline may be earlier than
/// the new one, so a timer can fire up to this much early; for timeouts under
/// 1.2 s the window shrinks to a quarter of the timeout (nginx keeps 300 ms),
/// so a 200 ms idle timeout never closes a connection active every 100 ms.
pub const TIMER_LAZY_DELAY: u64 = 300;

/// Which direction of a connection an event is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvKind {
    Read = 0,
    Write = 1,
}

/// An event delivered to a handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ev {
    pub conn: ConnId,
    pub kind: EvKind,
    /// The event's timer fired (nginx's `ev->timedout`); otherwise the event
    /// is ready, or was posted.
    pub timedout: bool,
}

impl Ev {
    pub fn read(conn: ConnId) -> Ev {
        Ev {
            conn,
            kind: EvKind::Read,
            timedout: false,
        }
    }
    pub fn write(conn: ConnId) -> Ev {
        Ev {
            conn,
            kind: EvKind::Write,
            timedout: false,
        }
    }
    #[inline]
    fn index(conn: ConnId, kind: EvKind) -> u32 {
        conn.slot * 2 + kind as u32
    }
}

/// A connection's event handler: its protocol state machine.
pub trait Handler {
    /// Called when `ev` is ready, its timer fired (`ev.timedout`) or it was
    /// posted. With edge-triggered modules, read (or write) until EAGAIN or
    /// the event is not reported again.
    fn handle(&mut self, core: &mut Core, ev: Ev);
}

/// What runs in the loop when a [`Notifier`] fires.
pub type NotifyHandler = Box<dyn FnMut(&mut Core)>;

/// A time event's handler; its return value makes it one-shot or periodic.
pub type TimeEventHandler = Box<dyn FnMut(&mut Core, TimeEventId) -> Next>;

/// The process-wide accept mutex as the loop sees it (filled in by the
/// process model with the shared-memory lock).
pub trait AcceptMutex {
    /// Non-blocking; true when this process now holds the lock.
    fn try_lock(&mut self) -> bool;
    fn unlock(&mut self);
}

/// Counters the core keeps about itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct CoreStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Accepted connections that got a slot and were handed to a protocol.
    pub handled: u64,
    /// Events dropped because their connection was closed (and maybe its slot
    /// reused) earlier in the same batch.
    pub stale_events: u64,
    /// Loop iterations.
    pub iterations: u64,
    /// Reusable connections closed to free slots.
    pub drained: u64,
    /// TLS connections closed while the socket was full, whose
    /// close_notify was then flushed in the background.
    pub tls_lingered: u64,
    /// Outbound connects started ([`Core::connect`]).
    pub connected: u64,
}

/// Settings for a [`Core`] (the `events {}` block and friends).
#[derive(Clone, Debug)]
pub struct CoreOptions {
    /// `worker_connections`: slots in the pool, listeners included.
    pub connections: usize,
    /// `use`.
    pub backend: Backend,
    /// `epoll_events`: readiness reports taken per wait.
    pub events: usize,
    /// `multi_accept`.
    pub multi_accept: bool,
    /// `accept_mutex_delay` in ms; also the back-off after EMFILE.
    pub accept_mutex_delay: u64,
    /// `timer_resolution` in ms (0: off): wait without a timeout and update
    /// the clock on a periodic tick instead of after every wake-up.
    pub timer_resolution: u64,
    /// Register listeners with EPOLLEXCLUSIVE (several workers, no mutex).
    pub exclusive_accept: bool,
    /// Added to the monotonic clock (tests of wraparound).
    pub clock_offset: Msec,
    /// Coalesce events while they keep coming (src/event/coalesce.rs);
    /// off, every wait blocks until the first event.
    pub coalesce: bool,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            connections: 512,
            backend: Backend::DEFAULT,
            events: 512,
            multi_accept: false,
            accept_mutex_delay: 500,
            timer_resolution: 0,
            exclusive_accept: false,
            clock_offset: 0,
            coalesce: true,
        }
    }
}

/// Wakes a [`Core`] from another thread or a signal handler (nginx's
/// `ngx_notify`). Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Notifier(Arc<EventFd>);

impl Notifier {
    pub fn notify(&self) -> io::Result<()> {
        self.0.signal()
    }

    /// The eventfd, for a signal handler that writes to it directly.
    pub fn raw_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.0.as_raw_fd()
    }
}

pub(crate) struct ListenerSlot {
    /// The listener's options; its socket is owned by the pool slot `conn`.
    pub(crate) opts: crate::conn::ListenOptions,
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) open: bool,
    /// Connections accepted, for re-adding EPOLLEXCLUSIVE sockets.
    pub(crate) accepts: u64,
    /// Whether its clients' first bytes are usually there at accept.
    pub(crate) first_read: crate::conn::first_read::FirstRead,
    pub(crate) conn: ConnId,
    pub(crate) protocol: Option<Box<dyn Protocol>>,
    /// `listen ... ssl`: accepted connections handshake first.
    pub(crate) tls: Option<super::tls::TlsListen>,
}

/// One event loop.
pub struct Core {
    pub(crate) opts: CoreOptions,
    pub(crate) clock: Clock,
    pub(crate) actions: Box<dyn Actions>,
    pub(crate) pool: Pool,
    timers: TimerWheel<u32>,
    /// Timers that keep an exiting worker alive.
    noncancelable_timers: usize,
    in_expire: bool,
    time_events: TimeEvents<TimeEventHandler>,
    posted: Posted,
    ready: Vec<Readiness>,
    pub(crate) listeners: Vec<ListenerSlot>,
    notify: Option<Arc<EventFd>>,
    on_notify: Option<NotifyHandler>,
    before_wait: Option<NotifyHandler>,
    /// What reopens the files protocols write (access logs) on USR1.
    reopen_hooks: Vec<Box<dyn FnMut()>>,
    reload_hooks: Vec<Box<dyn FnMut()>>,
    tick: Option<TimerFd>,
    accept_mutex: Option<Box<dyn AcceptMutex>>,
    pub(crate) accept_mutex_held: bool,
    pub(crate) accept_events_enabled: bool,
    /// nginx's `ngx_accept_disabled`: > 0 while this worker is short of free
    /// connections; it then skips the accept mutex that many iterations.
    pub(crate) accept_disabled: i64,
    pub(crate) stats: CoreStats,
    /// The stub_status counters shared by all workers, when running under
    /// the process model.
    pub(crate) shared: Option<SharedZone>,
    pub(crate) last_pool_warning: Msec,
    stop: bool,
    exiting: bool,
    /// File bytes read for TLS (no sendfile under TLS), kept for reuse.
    pub(crate) tls_scratch: Vec<u8>,
    /// Why a connect failed, while its handler's first call runs
    /// (src/event/connect.rs: kept here, not in every slot).
    pub(crate) connect_error: Option<(ConnId, io::Error)>,
    /// The TLS ciphertext buffer of no connection: taken by the one that
    /// reads, given back when drained (`tls_record::Tls::release_idle`).
    pub(crate) tls_spare: Vec<u8>,
    /// Whether the next wait blocks or polls and sleeps.
    coalesce: Coalesce,
}

impl Core {
    /// Creates the loop and its multiplexing module (nginx's
    /// `ngx_event_process_init`; call it in the process that will run it).
    pub fn new(opts: CoreOptions) -> io::Result<Core> {
        let actions = opts.backend.create(opts.events)?;
        Core::with_actions(opts, actions)
    }

    /// Creates the loop on a multiplexing module of the caller's own.
    pub fn with_actions(opts: CoreOptions, mut actions: Box<dyn Actions>) -> io::Result<Core> {
        let clock = Clock::with_offset(opts.clock_offset);
        let now = clock.now();
        let pool = Pool::new(opts.connections);
        let n = pool.capacity();
        let tick = if opts.timer_resolution > 0 {
            let t = TimerFd::periodic(opts.timer_resolution)?;
            actions.add(t.as_fd(), TICK_TOKEN, Interest::READ, Trigger::Level)?;
            Some(t)
        } else {
            None
        };
        Ok(Core {
            clock,
            actions,
            pool,
            timers: TimerWheel::with_capacity(now, n),
            noncancelable_timers: 0,
            in_expire: false,
            time_events: TimeEvents::new(now),
            posted: Posted::new(n * 2),
            ready: Vec::with_capacity(opts.events.max(1)),
            listeners: Vec::new(),
            notify: None,
            on_notify: None,
            reopen_hooks: Vec::new(),
            reload_hooks: Vec::new(),
            before_wait: None,
            tick,
            accept_mutex: None,
            accept_mutex_held: false,
            accept_events_enabled: false,
            accept_disabled: 0,
            stats: CoreStats::default(),
            shared: None,
            last_pool_warning: now.wrapping_sub(1_000_000),
            stop: false,
            exiting: false,
            tls_scratch: Vec::new(),
            connect_error: None,
            tls_spare: Vec::new(),
            coalesce: Coalesce::new(opts.coalesce),
            opts,
        })
    }

    /// The options the loop was created with.
    pub fn options(&self) -> &CoreOptions {
        &self.opts
    }

    /// The name of the multiplexing module in use.
    pub fn backend_name(&self) -> &'static str {
        self.actions.name()
    }

    /// The cached time in ms (updated once per wake-up).
    #[inline]
    pub fn now(&self) -> Msec {
        self.clock.now()
    }

    /// The cached clock (also the cached HTTP date).
    #[inline]
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn stats(&self) -> CoreStats {
        self.stats
    }

    /// Makes the loop count accepted, handled and active connections in the
    /// shared zone (nginx's `ngx_stat_*`), where protocol modules count the
    /// rest (requests, reading, writing, waiting) through [`Core::shared`].
    pub fn set_shared(&mut self, zone: SharedZone) {
        self.shared = Some(zone);
    }

    /// The shared zone, if any.
    pub fn shared(&self) -> Option<&SharedZone> {
        self.shared.as_ref()
    }

    // ---------------------------------------------------------------- the loop

    /// One iteration of the loop (nginx's `ngx_process_events_and_timers`).
    pub fn process_events_and_timers(&mut self) -> io::Result<()> {
        self.stats.iterations += 1;
        let mut timer = self.find_timer();
        let mut post_events = false;

        if self.accept_mutex.is_some() {
            if self.accept_disabled > 0 {
                // Short of connections: leave accepting to the others
                // (nginx's ngx_accept_disabled).
                self.accept_disabled -= 1;
                if self.accept_events_enabled {
                    self.disable_accept_events()?;
                }
                self.accept_mutex_held = false;
            } else {
                self.trylock_accept_mutex()?;
                if self.accept_mutex_held {
                    post_events = true;
                } else {
                    let delay = self.opts.accept_mutex_delay;
                    if timer.is_none_or(|t| t > delay) {
                        timer = Some(delay);
                    }
                }
            }
        }

        if !self.posted.is_empty(Queue::Events) || !self.posted.is_empty(Queue::Accept) {
            timer = Some(0);
        }

        self.run_before_wait();
        self.process_events(timer, post_events)?;

        self.process_posted(Queue::Accept);

        if self.accept_mutex_held {
            if let Some(m) = self.accept_mutex.as_mut() {
                m.unlock();
            }
            // The listeners stay registered until another process takes the
            // lock; trylock disables them when this process fails to.
        }

        self.expire_timers();
        self.process_time_events();

        self.process_posted(Queue::Events);
        Ok(())
    }

    /// Runs the loop until [`Core::stop`] is called, or, after
    /// [`Core::shutdown`], until no connection and no non-cancelable timer is
    /// left.
    pub fn run(&mut self) -> io::Result<()> {
        while !self.stop {
            if self.exiting && self.exit_ready() {
                break;
            }
            self.process_events_and_timers()?;
        }
        Ok(())
    }

    /// Makes [`Core::run`] return after the current iteration.
    pub fn stop(&mut self) {
        self.stop = true;
    }

    pub fn is_stopped(&self) -> bool {
        self.stop
    }

    /// Graceful shutdown (nginx's `ngx_exiting`): closes the listeners and
    /// asks idle (reusable) connections to close; the loop then runs until
    /// the remaining connections finish and only cancelable timers are left.
    pub fn shutdown(&mut self) {
        if self.exiting {
            return;
        }
        self.exiting = true;
        self.close_listeners();
        self.close_idle_connections();
    }

    /// Asks every idle connection to close (nginx's
    /// `ngx_close_idle_connections`); busy ones finish first.
    pub fn close_idle_connections(&mut self) {
        for slot in 0..self.pool.capacity() {
            let x = &self.pool.conns[slot];
            if x.idle && x.kind == Kind::Conn {
                let c = ConnId {
                    slot: slot as u32,
                    gen: x.gen,
                };
                self.ask_to_close(c, false);
            }
        }
    }

    /// True once [`Core::shutdown`] was called.
    pub fn is_exiting(&self) -> bool {
        self.exiting
    }

    /// nginx's rule: an exiting worker leaves once only cancelable timers
    /// remain; a connection busy with a request always has a timer armed.
    fn exit_ready(&self) -> bool {
        self.noncancelable_timers == 0
    }

    /// The timeout for the wait: the nearest timer or time event; None when
    /// there is none (nginx's `ngx_event_find_timer`). In `timer_resolution`
    /// mode the tick wakes the loop instead.
    fn find_timer(&self) -> Option<u64> {
        if self.tick.is_some() {
            return None;
        }
        let now = self.clock.now();
        // A time event is rescheduled from the clock read after its handler
        // returned (ae.c), which is ahead of the cached time by the
        // handler's length: measured from the cached time, an `Again(0)`
        // after a 2 ms slice waited 2 ms (the kv process's loading slices
        // sat idle half the time). So, as ae.c's `usUntilEarliestTimer`,
        // read the clock, unless the nearest event is due anyway.
        let events = match self.time_events.next_timeout(now) {
            Some(0) => Some(0),
            Some(_) => self
                .time_events
                .next_timeout(monotonic_ms().wrapping_add(self.opts.clock_offset)),
            None => None,
        };
        match (self.timers.next_timeout(now), events) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Waits and dispatches (nginx's `ngx_epoll_process_events`): each report
    /// goes to its connection's handler, or to a posted queue while this
    /// process holds the accept mutex.
    fn process_events(&mut self, timer: Option<u64>, post_events: bool) -> io::Result<()> {
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        let r = self.wait(timer, post_events, &mut ready);
        if self.tick.is_none() {
            self.clock.update();
        }
        if let Err(e) = r {
            self.ready = ready;
            log::error!("{}_wait() failed ({e})", self.actions.name());
            return Err(e);
        }
        for r in &ready {
            match r.token {
                NOTIFY_TOKEN => {
                    self.process_notify();
                    continue;
                }
                TICK_TOKEN => {
                    if let Some(t) = &self.tick {
                        t.drain();
                    }
                    self.clock.update();
                    continue;
                }
                _ => {}
            }
            let c = ConnId::from_token(r.token);
            let Some(x) = self.pool.get_mut(c) else {
                self.stats.stale_events += 1;
                continue;
            };
            let accept = matches!(x.kind, Kind::Listener(_));
            if r.readable && x.read.active {
                x.read.ready = true;
                if r.rdhup {
                    x.read.pending_eof = true;
                }
                if post_events {
                    let q = if accept { Queue::Accept } else { Queue::Events };
                    self.posted.post(Ev::index(c, EvKind::Read), q);
                } else {
                    self.call(c, EvKind::Read, false);
                }
            }
            if r.writable {
                // The read handler may have closed the connection.
                let Some(x) = self.pool.get_mut(c) else {
                    continue;
                };
                if x.write.active {
                    x.write.ready = true;
                    if post_events {
                        self.posted.post(Ev::index(c, EvKind::Write), Queue::Events);
                    } else {
                        self.call(c, EvKind::Write, false);
                    }
                }
            }
        }
        self.ready = ready;
        Ok(())
    }

    /// The wait itself: blocking as asked, or, while events keep coming,
    /// a poll and a short sleep off the wait queues (coalesce.rs says which
    /// and why). Holding the accept mutex, or with a timer due, the loop
    /// waits as asked: a sleep would keep the lock from the others.
    fn wait(
        &mut self,
        timer: Option<u64>,
        holding: bool,
        ready: &mut Vec<Readiness>,
    ) -> io::Result<()> {
        if holding || timer == Some(0) || self.coalesce.how() == Wait::Block {
            let r = self.actions.process_events(timer, ready);
            self.coalesce.waited(ready.len());
            return r;
        }
        self.actions.process_events(Some(0), ready)?;
        if !ready.is_empty() {
            self.coalesce.waited(ready.len());
            return Ok(());
        }
        self.coalesce.polled_empty();
        Coalesce::sleep();
        let r = self.actions.process_events(Some(0), ready);
        self.coalesce.slept(ready.len());
        r
    }

    /// Runs a connection's handler for one event.
    pub(crate) fn call(&mut self, c: ConnId, kind: EvKind, timedout: bool) {
        let Some(x) = self.pool.get_mut(c) else {
            return;
        };
        if kind == EvKind::Write
            && !timedout
            && x.tls.is_some()
            && !self.tls_before_write_handler(c)
        {
            return;
        }
        let Some(x) = self.pool.get_mut(c) else {
            return;
        };
        let Some(mut h) = x.handler.take() else {
            return;
        };
        h.handle(
            self,
            Ev {
                conn: c,
                kind,
                timedout,
            },
        );
        if let Some(x) = self.pool.get_mut(c) {
            if x.handler.is_none() {
                x.handler = Some(h);
            }
        }
    }

    fn process_notify(&mut self) {
        if let Some(n) = &self.notify {
            n.drain();
        }
        if let Some(mut f) = self.on_notify.take() {
            f(self);
            if self.on_notify.is_none() {
                self.on_notify = Some(f);
            }
        }
    }

    // ---------------------------------------------------------- posted events

    /// Queues `ev` to run later in this iteration, or in the next one when
    /// posted from a posted event (how a handler yields: it keeps its turn
    /// for after everyone else's); a no-op if it is already queued.
    pub fn post(&mut self, ev: Ev) {
        if self.pool.get(ev.conn).is_some() {
            self.posted.post(Ev::index(ev.conn, ev.kind), Queue::Events);
        }
    }

    /// Removes `ev` from the posted queues.
    pub fn delete_posted(&mut self, ev: Ev) {
        if self.pool.get(ev.conn).is_some() {
            self.posted.remove(Ev::index(ev.conn, ev.kind));
        }
    }

    /// Whether `ev` is queued.
    pub fn is_posted(&self, ev: Ev) -> bool {
        self.pool.get(ev.conn).is_some() && self.posted.is_posted(Ev::index(ev.conn, ev.kind))
    }

    /// Runs a posted queue until empty (nginx's `ngx_event_process_posted`);
    /// events posted meanwhile run too.
    /// Runs the events posted before this call. Events posted while they
    /// run wait for the next iteration (whose wait then does not block), so
    /// a handler can yield by posting itself: a client with a long backlog
    /// gets one turn per iteration, like everyone else.
    fn process_posted(&mut self, q: Queue) {
        let mut turns = self.posted.len(q);
        while turns > 0 {
            turns -= 1;
            let Some(i) = self.posted.pop(q) else {
                break;
            };
            let slot = i / 2;
            let kind = if i % 2 == 0 {
                EvKind::Read
            } else {
                EvKind::Write
            };
            let gen = self.pool.conns[slot as usize].gen;
            self.call(ConnId { slot, gen }, kind, false);
        }
    }

    // ----------------------------------------------------------------- notify

    /// A handle that wakes this loop from another thread or a signal
    /// handler. `on_notify` (if set) runs in the loop after each wake-up.
    pub fn notifier(&mut self) -> io::Result<Notifier> {
        if let Some(n) = &self.notify {
            return Ok(Notifier(n.clone()));
        }
        let n = Arc::new(EventFd::new()?);
        self.actions
            .add(n.as_fd(), NOTIFY_TOKEN, Interest::READ, Trigger::Level)?;
        self.notify = Some(n.clone());
        Ok(Notifier(n))
    }

    /// Sets what runs just before each wait (Redis's `beforeSleep`: the
    /// fast expire cycle). Keep it short: it runs every iteration.
    pub fn before_wait(&mut self, f: impl FnMut(&mut Core) + 'static) {
        self.before_wait = Some(Box::new(f));
    }

    fn run_before_wait(&mut self) {
        if let Some(mut f) = self.before_wait.take() {
            f(self);
            if self.before_wait.is_none() {
                self.before_wait = Some(f);
            }
        }
    }

    /// Sets what runs in the loop when a [`Notifier`] fires.
    pub fn on_notify(&mut self, f: impl FnMut(&mut Core) + 'static) {
        self.on_notify = Some(Box::new(f));
    }

    /// Registers what a process kept across a reload re-reads in place (the
    /// singleton's certificates; its state stays): run on HUP.
    pub fn on_reload(&mut self, f: impl FnMut() + 'static) {
        self.reload_hooks.push(Box::new(f));
    }

    /// Runs every [`Core::on_reload`] hook.
    pub fn reload_in_place(&mut self) {
        for f in &mut self.reload_hooks {
            f();
        }
    }

    /// Registers how a protocol reopens the files it writes (nginx's
    /// cycle-wide list of open files, reopened on USR1 for log rotation).
    pub fn on_reopen(&mut self, f: impl FnMut() + 'static) {
        self.reopen_hooks.push(Box::new(f));
    }

    /// Runs every [`Core::on_reopen`] hook.
    pub fn reopen_files(&mut self) {
        for f in &mut self.reopen_hooks {
            f();
        }
    }
}
