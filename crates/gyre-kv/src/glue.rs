//! Connects the sans-I/O [`Server`] to gyre-core: the kv listeners' protocol,
//! per-connection reads and batched replies, and serverCron as a periodic
//! time event (Redis's `aeCreateTimeEvent(serverCron)`, seed 000: its return
//! value, `1000 / hz` ms, makes it periodic).
//!
//! The keyspace lives in exactly one process: gyre runs this module in the
//! process model's singleton process (the "kv process"), which the master
//! respawns if it dies and replaces on reload only when `kv {}` changed.
//!
//! # Active expiry in slices
//!
//! Redis works off expired keys in one slow cycle per cron tick (25% of
//! the period: 25 ms at hz 10) plus 1 ms fast cycles before sleeping. A
//! request arriving during a slow cycle waits up to 25 ms, and the work is
//! paced by the cron (1e6 keys with a 1 s TTL take Redis ~14 s to reclaim).
//! Here the server runs in sliced mode ([`Config::expire_slices`]): the
//! cron's own expire cycle is a 1 ms slice, and when it reports a backlog
//! ([`crate::server::CronOutcome::expire_backlog`]: out of budget, or many
//! sampled keys stale) the glue starts a second time event that runs one
//! [`Server::expire_slice`] (at most
//! [`EXPIRE_SLICE_US`](crate::server::EXPIRE_SLICE_US)) and re-arms
//! itself [`EXPIRE_SLICE_GAP_MS`] after returning, until the backlog is
//! gone, then removes itself. So expiry gets about a third of the CPU
//! while there is a backlog and none otherwise, and no request waits more
//! than about one slice behind it. It is a time event rather than work in
//! `before_wait` so its pace does not depend on traffic (an idle server
//! still reclaims memory) and so at most one slice runs per loop
//! iteration.
//!
//! A read is parsed and executed whole (every pipelined command in it) and
//! its replies go out in one send, straight from a reply buffer shared by
//! all connections (like the read buffer): a connection only holds replies
//! the socket did not take, in the server's per-client output buffer
//! ([`Server::queue_output`]). While replies are pending (the client is not
//! reading) the connection stops reading, so a pipelining client cannot
//! grow the output without bound.
//!
//! Other clients' commands (PUBLISH) append to a client's output buffer
//! too; after each handler run, cron and loop turn the glue flushes the
//! clients the server lists ([`Server::take_writers`]): one send per
//! receiver per batch, and a receiver whose socket is full waits for
//! writability (its output bounded by `client-output-buffer-limit`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::rc::Rc;

use gyre_core::conn::{ConnId, ListenOptions, Listener, Protocol};
use gyre_core::event::{Core, Ev, Handler, Next};

use crate::conf::KvConf;
use crate::server::{ClientId, Config, Server, EXPIRE_SLICE_GAP_MS};

/// Read buffer shared by every connection.
const READ_BUF: usize = 16 * 1024;

/// Reads per turn of a client before it yields to the others.
const READS_PER_TURN: u32 = 1;
/// The shared reply buffer keeps at most this much capacity after a batch
/// (a large reply, e.g. KEYS, is not held for good).
const REPLY_BUF_KEEP: usize = 64 * 1024;

/// The sockets `conf` listens on.
pub fn listeners(conf: &KvConf) -> Vec<ListenOptions> {
    let mut out: Vec<ListenOptions> = conf
        .listen
        .iter()
        .map(|l| ListenOptions {
            addr: l.addr,
            backlog: l.backlog,
            reuseport: false,
            deferred: l.deferred,
        })
        .collect();
    // The TLS port comes last (crate::tls).
    out.extend(crate::tls::tls_addr(conf).map(ListenOptions::new));
    out
}

/// The server configuration for `conf`.
pub fn config(conf: &KvConf) -> Config {
    let first = conf.listen.first();
    Config {
        hz: conf.hz,
        dynamic_hz: conf.dynamic_hz,
        timeout: conf.timeout_secs,
        maxclients: conf.maxclients,
        databases: conf.databases as usize,
        proto_max_bulk_len: conf.proto_max_bulk_len,
        client_query_buffer_limit: conf.client_query_buffer_limit,
        encodings: conf.encodings,
        requirepass: conf.requirepass.clone(),
        protected_mode: conf.protected_mode,
        notify_keyspace_events: conf.notify_keyspace_events,
        client_output_buffer_limit: conf.client_output_buffer_limit,
        maxmemory: conf.maxmemory,
        evict: conf.evict,
        // No plain listener only with `port 0` (TLS only): Redis says 0.
        port: first.map_or(0, |l| l.addr.port()),
        bind: first.map_or_else(|| "127.0.0.1".into(), |l| l.addr.ip().to_string()),
        seed: std::process::id() as u64 ^ 0x5EED,
        expire_slices: true,
        persist: conf.persist.clone(),
        aclfile: conf.aclfile.clone(),
        acllog_max_len: conf.acllog_max_len,
        users: conf.users.clone(),
        lazyfree_lazy_expire: conf.lazyfree_lazy_expire,
        lazyfree_lazy_eviction: conf.lazyfree_lazy_eviction,
        rename_command: conf.rename_command.clone(),
        redis_conf: conf.redis_conf.clone(),
        maxmemory_clients: conf.maxmemory_clients,
        acl_pubsub_default_all: conf.acl_pubsub_default_all,
        latency_tracking: conf.latency_tracking,
        latency_percentiles: conf.latency_percentiles.clone(),
        latency_monitor_threshold: conf.latency_monitor_threshold,
        slowlog_log_slower_than: conf.slowlog_log_slower_than,
        slowlog_max_len: conf.slowlog_max_len,
        enable_debug_command: conf.enable_debug_command,
        ..Config::default()
    }
}

struct Shared {
    server: RefCell<Server>,
    /// Client id → connection, to close clients the cron or CLIENT KILL
    /// picked.
    conns: RefCell<HashMap<ClientId, ConnId>>,
    buf: RefCell<Vec<u8>>,
    /// Replies of the read being executed (see the module documentation).
    out: RefCell<Vec<u8>>,
    /// The expire-slice time event is armed.
    slicing: Cell<bool>,
    /// The background-save slice time event is armed.
    saving: Cell<bool>,
    /// The eviction time event (Redis's `evictionTimeProc`) is armed.
    evicting: Cell<bool>,
}

impl Drop for Shared {
    /// The kv process is exiting (TERM, QUIT, or the master gone): Redis
    /// saves a last snapshot when save rules are set (`prepareForShutdown`).
    /// SHUTDOWN already did what it was asked.
    fn drop(&mut self) {
        let server = self.server.get_mut();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        if !server.persist.load_failed {
            server.aof_shutdown(now);
        }
        if !server.persist.shutdown_asked
            && !server.persist.load_failed
            && !server.config.persist.save.is_empty()
            && !server.is_loading()
        {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            server.save_on_exit(now);
        }
    }
}

fn now_ms(core: &Core) -> i64 {
    core.clock().unix_ms() as i64
}

/// Puts the KV protocol on `listeners` and registers serverCron.
pub fn init(conf: &KvConf, core: &mut Core, listeners: Vec<Listener>) -> io::Result<()> {
    let mut server = Server::new(config(conf), now_ms(core));
    server.aof.group_commit = true;
    let shared = Rc::new(Shared {
        server: RefCell::new(server),
        conns: RefCell::new(HashMap::new()),
        buf: RefCell::new(vec![0; READ_BUF]),
        out: RefCell::new(Vec::with_capacity(READ_BUF)),
        slicing: Cell::new(false),
        saving: Cell::new(false),
        evicting: Cell::new(false),
    });
    start_loading(&shared, core)?;
    for (i, ls) in listeners.into_iter().enumerate() {
        let laddr = ls.local_addr().to_string();
        log::info!("kv listening on {laddr}");
        let id = core.add_listener(
            ls,
            Box::new(KvProtocol {
                shared: shared.clone(),
                laddr,
            }),
        )?;
        if i >= conf.listen.len() {
            let swap = Rc::new(crate::tls::TlsSwap::new(&conf.tls)?);
            shared.server.borrow_mut().config.tls = Some(swap.clone());
            // A reload that keeps the kv process (kv {} unchanged) reads
            // the certificate files again if they changed on disk.
            let s = swap.clone();
            core.on_reload(move || s.reload_if_changed());
            core.set_listener_tls(
                id,
                Some(gyre_core::event::tls::TlsListen {
                    config: swap,
                    handshake_timeout: 60_000,
                    plain_fallback: false,
                }),
            );
        }
    }
    let s = shared.clone();
    let period = 1000 / u64::from(conf.hz.max(1));
    core.create_time_event(period, move |core, _| server_cron(&s, core));
    let s = shared;
    core.before_wait(move |core| {
        let now = now_ms(core);
        s.server.borrow_mut().before_sleep(now);
        wake_writers(&s, core);
        close_scheduled(&s, core);
    });
    Ok(())
}

/// serverCron: Redis's periodic duties; returns when to run again.
fn server_cron(s: &Rc<Shared>, core: &mut Core) -> Next {
    let now = now_ms(core);
    let out = s.server.borrow_mut().cron(now);
    for id in out.close {
        close_client(s, core, id);
    }
    if out.bgsave_started {
        arm_bgsave(s, core);
    }
    wake_writers(s, core);
    maybe_evict_later(s, core);
    // A CLIENT PAUSE that ran out resumes its clients.
    wake(s, core);
    if out.expire_backlog && !s.slicing.get() {
        s.slicing.set(true);
        let sh = s.clone();
        core.create_time_event(EXPIRE_SLICE_GAP_MS, move |core, _| expire_slice(&sh, core));
    }
    Next::Again(out.next_in_ms.max(1))
}

/// One expire slice (see the module documentation); runs again
/// `EXPIRE_SLICE_GAP_MS` after returning while the backlog lasts.
fn expire_slice(s: &Rc<Shared>, core: &mut Core) -> Next {
    let now = now_ms(core);
    let mut server = s.server.borrow_mut();
    server.expire_slice(now);
    if server.expire_backlog() {
        Next::Again(EXPIRE_SLICE_GAP_MS)
    } else {
        s.slicing.set(false);
        Next::NoMore
    }
}

/// Clients a command served, timed out or unblocked (BLPOP & co.): their
/// block timer goes and their connection is posted, so its handler writes
/// the reply and resumes the input it held back.
fn wake(s: &Rc<Shared>, core: &mut Core) {
    let ids = {
        let mut server = s.server.borrow_mut();
        let mut ids = server.take_woken();
        ids.extend(server.take_resumed());
        ids
    };
    for id in ids {
        if let Some(&c) = s.conns.borrow().get(&id) {
            core.del_timer(Ev::read(c));
            core.post(Ev::read(c));
        }
    }
}

/// Loading at start (Redis's `loadDataFromDisk`): a slice of keys per
/// turn, answering `-LOADING` meanwhile. A file that cannot be read stops
/// the kv process for good (EXIT_FATAL: the master does not respawn it),
/// as Redis refuses to start: no silent empty dataset.
fn start_loading(s: &Rc<Shared>, core: &mut Core) -> io::Result<()> {
    let now = now_ms(core);
    if s.server.borrow().config.persist.aof.appendonly {
        // With `appendonly yes` the AOF is the dataset (the RDB file is
        // not read): its RDB base in slices (`-LOADING` meanwhile), then
        // the incremental files, then it is open for appending.
        let mut server = s.server.borrow_mut();
        server.aof.status = crate::aof::AofStatus::On;
        let r = server.aof_load_begin(now).and_then(|loading| {
            if loading {
                Ok(true)
            } else {
                server.aof_open_at_start(now).map(|()| false)
            }
        });
        match r {
            Err(e) => {
                log::error!("{e}");
                server.persist.load_failed = true;
                return Err(io::Error::other(e));
            }
            Ok(false) => {
                server.sync_propagation();
                return Ok(());
            }
            Ok(true) => {}
        }
        drop(server);
        let sh = s.clone();
        core.create_time_event(0, move |core, _| {
            let now = now_ms(core);
            let r = sh.server.borrow_mut().aof_load_slice(now);
            match r {
                Ok(false) => Next::Again(0),
                Ok(true) => Next::NoMore,
                Err(e) => {
                    log::error!("{e}");
                    std::process::exit(gyre_core::process::EXIT_FATAL);
                }
            }
        });
        return Ok(());
    }
    let path = s.server.borrow().config.persist.path();
    match s.server.borrow_mut().load_begin(now) {
        Ok(false) => return Ok(()),
        Ok(true) => {}
        Err(e) => {
            log::error!("Fatal error loading the DB: {e}. Exiting.");
            return Err(io::Error::other(format!(
                "Fatal error loading the DB {}: {e}",
                path.display()
            )));
        }
    }
    let sh = s.clone();
    core.create_time_event(0, move |core, _| {
        let now = now_ms(core);
        let r = sh.server.borrow_mut().load_slice(now);
        match r {
            Ok(false) => Next::Again(0),
            Ok(true) => Next::NoMore,
            Err(e) => {
                log::error!("Fatal error loading the DB: {e}. Exiting.");
                std::process::exit(gyre_core::process::EXIT_FATAL);
            }
        }
    });
    Ok(())
}

/// Runs background-save slices until the save is over (see
/// [`crate::persist`]).
fn arm_bgsave(s: &Rc<Shared>, core: &mut Core) {
    if s.saving.get() || !s.server.borrow().bgsave_in_progress() {
        return;
    }
    s.saving.set(true);
    let sh = s.clone();
    core.create_time_event(0, move |core, _| {
        let now = now_ms(core);
        if sh.server.borrow_mut().bgsave_slice(now) {
            // Next turn of the loop: one slice per turn, after the
            // clients' events (an idle loop runs them back to back).
            Next::Again(0)
        } else {
            sh.saving.set(false);
            Next::NoMore
        }
    });
}

/// Closes clients CLIENT KILL picked from another connection.
fn close_scheduled(s: &Rc<Shared>, core: &mut Core) {
    let ids = s.server.borrow_mut().take_clients_to_close();
    for id in ids {
        close_client(s, core, id);
    }
}

/// Starts the eviction time event when a time-limited eviction run left
/// work: it continues every millisecond until memory is under the limit,
/// so no single command pays for a large eviction.
fn maybe_evict_later(s: &Rc<Shared>, core: &mut Core) {
    if s.evicting.get() || !s.server.borrow().eviction_pending() {
        return;
    }
    s.evicting.set(true);
    let sh = s.clone();
    core.create_time_event(1, move |core, _| {
        let now = now_ms(core);
        let r = sh.server.borrow_mut().evict_slice(now);
        wake_writers(&sh, core);
        if r == crate::evict::Outcome::Running {
            Next::Again(1)
        } else {
            sh.evicting.set(false);
            Next::NoMore
        }
    });
}

/// Flushes the clients that others gave output (PUBLISH); one whose
/// socket is full stops reading and waits for writability.
fn wake_writers(s: &Rc<Shared>, core: &mut Core) {
    let ids = s.server.borrow_mut().take_writers();
    for id in ids {
        let Some(c) = s.conns.borrow().get(&id).copied() else {
            continue;
        };
        match flush_client(s, core, c, id) {
            Ok(true) => {}
            Ok(false) => {
                let r = core
                    .disable_read(c)
                    .and_then(|_| core.handle_write_event(c));
                core.set_idle(c, false);
                if r.is_err() {
                    close_client(s, core, id);
                }
            }
            Err(_) => close_client(s, core, id),
        }
    }
}

/// Writes client `id`'s pending output; true when all went out.
fn flush_client(s: &Rc<Shared>, core: &mut Core, c: ConnId, id: ClientId) -> io::Result<bool> {
    let n = {
        let server = s.server.borrow();
        let pending = server.pending_output(id);
        if pending.is_empty() {
            return Ok(true);
        }
        let n = send_all(core, c, pending)?;
        let w = &server.stats.total_writes_processed;
        w.set(w.get() + 1);
        if n == pending.len() {
            drop(server);
            s.server.borrow_mut().output_sent(id, n);
            return Ok(true);
        }
        n
    };
    s.server.borrow_mut().output_sent(id, n);
    Ok(false)
}

fn close_client(s: &Rc<Shared>, core: &mut Core, id: ClientId) {
    s.server.borrow_mut().disconnect(id);
    if let Some(c) = s.conns.borrow_mut().remove(&id) {
        core.close(c);
    }
}

struct KvProtocol {
    shared: Rc<Shared>,
    /// The listener's address: every connection it accepts has this local
    /// address (CLIENT LIST's laddr), so no getsockname per connection.
    laddr: String,
}

impl Protocol for KvProtocol {
    fn init_connection(&mut self, core: &mut Core, c: ConnId) -> Option<Box<dyn Handler>> {
        let (addr, fd) = {
            let x = core.conn(c)?;
            let addr = x.peer.map(|p| p.to_string()).unwrap_or_default();
            let fd = x.fd().map_or(-1, |fd| {
                use std::os::fd::AsRawFd;
                i64::from(fd.as_raw_fd())
            });
            (addr, fd)
        };
        if let Some(fd) = core.fd(c) {
            let _ = gyre_core::sys::socket::set_nodelay(fd, true);
        }
        let now = now_ms(core);
        let id = match self
            .shared
            .server
            .borrow_mut()
            .connect(&addr, &self.laddr, fd, now)
        {
            Ok(id) => id,
            Err(reply) => {
                // maxclients: Redis answers and closes.
                let _ = core.send(c, &reply);
                return None;
            }
        };
        self.shared.conns.borrow_mut().insert(id, c);
        core.handle_read_event(c).ok()?;
        core.set_idle(c, true);
        Some(Box::new(KvConn {
            id,
            shared: self.shared.clone(),
            inbuf: Vec::new(),
            close_after: false,
            held: false,
        }))
    }
}

/// One client connection.
struct KvConn {
    id: ClientId,
    shared: Rc<Shared>,
    /// An incomplete command line kept between reads (bulk payloads are
    /// held by the parser itself).
    inbuf: Vec<u8>,
    close_after: bool,
    /// The client blocked with input after the blocking command still in
    /// `inbuf`: run it once the server unblocks the client.
    held: bool,
}

impl KvConn {
    fn close(&mut self, core: &mut Core, c: ConnId) {
        self.shared.server.borrow_mut().disconnect(self.id);
        self.shared.conns.borrow_mut().remove(&self.id);
        core.close(c);
    }

    /// Writes pending replies; true when all went out.
    fn flush(&mut self, core: &mut Core, c: ConnId) -> io::Result<bool> {
        flush_client(&self.shared, core, c, self.id)
    }

    /// The connection ends (EOF, QUIT, closed) with replies waiting for
    /// the turn's fsync: fsync now and send them first.
    fn settle_held(&mut self, core: &mut Core, c: ConnId) {
        let held = self.shared.server.borrow().output_held(self.id);
        if held {
            let now = now_ms(core);
            let mut server = self.shared.server.borrow_mut();
            server.aof_flush(true, now);
            server.release_held();
            drop(server);
            let _ = self.flush(core, c);
        }
    }

    fn has_pending(&self) -> bool {
        !self
            .shared
            .server
            .borrow()
            .pending_output(self.id)
            .is_empty()
    }

    /// Reads and executes one read's worth of commands (Redis reads up to
    /// 16 KiB per readable event too); a client with more waiting yields its
    /// turn by posting its read event, so a bulk loader cannot hold up the
    /// other clients for the whole of its pipeline.
    fn step(&mut self, core: &mut Core, c: ConnId) -> io::Result<bool> {
        let mut reads = 0;
        loop {
            // Replies made while blocked (served, timed out) go first.
            self.shared
                .server
                .borrow_mut()
                .deliver_blocked_output(self.id, now_ms(core));
            if !self.flush(core, c)? {
                return Ok(true);
            }
            if self.close_after {
                self.settle_held(core, c);
                return Ok(false);
            }
            let waiting = {
                let server = self.shared.server.borrow();
                server.is_blocked(self.id) || server.is_postponed(self.id)
            };
            if self.held && !waiting {
                self.held = false;
                if !self.inbuf.is_empty() {
                    self.run_input(core, c, None)?;
                    continue;
                }
            }
            if !core.conn(c).is_some_and(|x| x.read.ready) {
                return Ok(true);
            }
            if reads == READS_PER_TURN {
                core.post(Ev::read(c));
                return Ok(true);
            }
            reads += 1;
            let shared = self.shared.clone();
            let mut buf = shared.buf.borrow_mut();
            let n = match core.recv(c, &mut buf) {
                Ok(0) => {
                    drop(buf);
                    self.settle_held(core, c);
                    return Ok(false);
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) => return Err(e),
            };
            self.run_input(core, c, Some(&buf[..n]))?;
            drop(buf);
            // A blocked client's input waits in `inbuf`, within the query
            // buffer limit as Redis's does.
            let limit = shared.server.borrow().config.client_query_buffer_limit;
            if self.inbuf.len() as u64 > limit {
                return Ok(false);
            }
        }
    }

    /// Executes `new` input (after what `inbuf` holds; `None`: `inbuf`
    /// alone) and sends the replies.
    fn run_input(&mut self, core: &mut Core, c: ConnId, new: Option<&[u8]>) -> io::Result<()> {
        let shared = self.shared.clone();
        let now = now_ms(core);
        let mut out = shared.out.borrow_mut();
        out.clear();
        let mut server = shared.server.borrow_mut();
        let outcome = match new {
            Some(data) if self.inbuf.is_empty() => {
                let r = server.feed(self.id, data, now, &mut out);
                if r.consumed < data.len() && !r.close {
                    self.inbuf.extend_from_slice(&data[r.consumed..]);
                }
                r
            }
            _ => {
                if let Some(data) = new {
                    self.inbuf.extend_from_slice(data);
                }
                let r = server.feed(self.id, &self.inbuf, now, &mut out);
                self.inbuf.drain(..r.consumed.min(self.inbuf.len()));
                if self.inbuf.is_empty() {
                    self.inbuf = Vec::new();
                }
                r
            }
        };
        let (bgsave, shutdown) = (server.bgsave_in_progress(), server.persist.shutdown_asked);
        drop(server);
        if bgsave {
            arm_bgsave(&shared, core);
        }
        if shutdown {
            core.stop();
        }
        if outcome.close {
            self.close_after = true;
        }
        if let Some(ms) = outcome.blocked {
            self.held = true;
            if ms > 0 {
                core.add_timer(Ev::read(c), ms);
            }
        }
        if shared.server.borrow().aof_hold_replies() {
            // appendfsync always: out after the turn's fsync (before_wait).
            shared.server.borrow_mut().hold_output(self.id, &out, now);
            if out.capacity() > REPLY_BUF_KEEP {
                *out = Vec::with_capacity(READ_BUF);
            }
            return Ok(());
        }
        let sent = send_all(core, c, &out)?;
        if !out.is_empty() {
            // A command that blocked or replied nothing made no write.
            let server = shared.server.borrow();
            let w = &server.stats.total_writes_processed;
            w.set(w.get() + 1);
        }
        if sent < out.len() {
            shared
                .server
                .borrow_mut()
                .queue_output(self.id, &out[sent..], now);
        }
        if out.capacity() > REPLY_BUF_KEEP {
            *out = Vec::with_capacity(READ_BUF);
        }
        Ok(())
    }
}

/// Sends as much of `b` as the socket takes; the bytes sent.
fn send_all(core: &mut Core, c: ConnId, b: &[u8]) -> io::Result<usize> {
    let mut off = 0;
    while off < b.len() {
        match core.send(c, &b[off..]) {
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(off)
}

impl Handler for KvConn {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        let c = ev.conn;
        if core.conn(c).is_some_and(|x| x.close) && !self.has_pending() {
            self.settle_held(core, c);
            self.close(core, c);
            return;
        }
        if ev.timedout {
            // The block timeout (the only timer a kv connection arms).
            self.shared.server.borrow_mut().block_timeout(self.id);
        }
        match self.step(core, c) {
            Ok(true) => {}
            Ok(false) | Err(_) => {
                self.close(core, c);
                wake_writers(&self.shared, core);
                close_scheduled(&self.shared, core);
                wake(&self.shared, core);
                return;
            }
        }
        wake_writers(&self.shared, core);
        maybe_evict_later(&self.shared, core);
        close_scheduled(&self.shared, core);
        wake(&self.shared, core);
        if !core.is_live(c) {
            return;
        }
        let pending = self.has_pending();
        let r = if pending {
            core.disable_read(c)
                .and_then(|_| core.handle_write_event(c))
        } else {
            core.handle_read_event(c)
        };
        core.set_idle(c, !pending);
        if r.is_err() {
            self.close(core, c);
        }
    }
}

/// Whether a reload from `old` to `new` must restart the kv process.
pub fn changed(old: Option<&KvConf>, new: Option<&KvConf>) -> bool {
    old != new
}

/// `KvConf` for a module's configuration lookups.
pub fn conf_of(conf: &gyre_core::conf::Conf) -> Option<&KvConf> {
    conf.module::<KvConf>().filter(|k| k.present)
}
