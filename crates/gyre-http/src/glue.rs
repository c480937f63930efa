//! Connects the sans-I/O [`Connection`] to gyre-core (nginx's
//! `ngx_http_init_connection` and the handlers after it): socket reads and
//! writes, the timers, routing to `return` / stub_status / static files, the
//! stub_status gauges and the access log.
//!
//! A connection reads what is available, lets the state machine parse every
//! complete request, answers each, and writes all responses of the batch
//! with one `writev` (files above [`SMALL_FILE`](crate::static_file::SMALL_FILE)
//! go by `sendfile`). Between requests it holds no buffers, is reusable
//! (drained when slots run short) and idle (closed at once on graceful
//! shutdown), and its keep-alive timer is cancelable.

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use gyre_core::conn::{ConnId, ListenOptions, Listener, Protocol};
use gyre_core::event::clock::{msec_before, msec_diff};
use gyre_core::event::{Core, Ev, EvKind, Handler, Next};

use crate::access_log::{AccessLog, Entry};
use crate::conf::{HttpConf, LocConf, ServerConf};
use crate::conn::{Connection, Disposition, LogRecord};
use crate::phases::{self, Status};
use crate::proxy::handler::Flow as ProxyFlow;
use crate::regex::MatchCache;
use crate::request::HttpRequest;
use crate::settings::HttpSettings;
use crate::static_file::{FileCache, FileInfo};

mod err_log;
mod keepalive;
mod log_phase;
mod process_request;
mod read_body;
mod send_chain;
mod upstream;

use process_request::Start;

/// Read buffer shared by every connection of a worker.
const READ_BUF: usize = 16 * 1024;

/// State machines kept for reuse by a worker. A machine is taken when a
/// connection's bytes arrive and given back when it goes idle or closes,
/// so the pool only needs to cover the connections busy at one time; its
/// buffers then make a request cost no allocation.
const MACHINE_POOL: usize = 128;

/// How long an idle keep-alive connection of a gracefully exiting worker
/// waits for one last request.
const LAST_CALL_MS: u64 = 1000;

/// The sockets `conf` listens on: one per distinct address, with the
/// options of its first `listen` (nginx merges them the same way).
pub fn listeners(conf: &HttpConf) -> Vec<ListenOptions> {
    let mut out: Vec<ListenOptions> = Vec::new();
    for s in &conf.servers {
        for l in &s.listen {
            if out.iter().any(|o| o.addr == l.addr) {
                continue;
            }
            out.push(ListenOptions {
                addr: l.addr,
                backlog: l.backlog,
                reuseport: l.reuseport,
                deferred: l.deferred,
            });
        }
    }
    out
}

/// What every connection of a worker shares.
struct Shared {
    conf: Arc<HttpConf>,
    /// Whether any location logs requests (if not, records are dropped
    /// without looking anything up).
    any_access_log: bool,
    files: RefCell<FileCache>,
    /// Every distinct `access_log` path, and its file once opened; a
    /// record's sink `2 + i` is `logs[i]` (1 is `access_log off`).
    log_paths: Vec<PathBuf>,
    logs: RefCell<Vec<Option<AccessLog>>>,
    buf: RefCell<Vec<u8>>,
    /// Boxed because they move in and out of `HttpConn::m` (a pointer,
    /// which keeps an idle connection small).
    #[allow(clippy::vec_box)]
    machines: RefCell<Vec<Box<Connection>>>,
    /// The file path of the request being served (reused buffer).
    fpath: RefCell<PathBuf>,
    /// Regex match buffers.
    matches: RefCell<MatchCache>,
    /// Request objects kept for reuse (see [`MACHINE_POOL`]).
    #[allow(clippy::vec_box)]
    requests: RefCell<Vec<Box<HttpRequest>>>,
    /// Scratch bytes for the phases and log lines.
    scratch: RefCell<Vec<u8>>,
    /// The response the phases fill in (one per worker, reused).
    response: RefCell<crate::response::Response>,
    /// Upstream peers, keep-alive caches, pooled proxy states.
    proxy: crate::proxy::Worker,
}

impl Shared {
    /// The sink of a location's records (see [`LogRecord::sink`]).
    fn log_sink(&self, loc: &LocConf) -> u32 {
        match &loc.access_log {
            Some(p) => self.path_sink(p),
            None => 1,
        }
    }

    /// The sink writing to `p`.
    fn path_sink(&self, p: &Path) -> u32 {
        let p = p.as_os_str().as_bytes();
        self.log_paths
            .iter()
            .position(|q| q.as_os_str().as_bytes() == p)
            .map_or(1, |i| i as u32 + 2)
    }

    /// The log file of a sink, opened on first use.
    fn with_log(&self, sink: u32, f: impl FnOnce(&mut AccessLog)) {
        let Some(i) = (sink as usize).checked_sub(2) else {
            return;
        };
        let Some(path) = self.log_paths.get(i) else {
            return;
        };
        let mut logs = self.logs.borrow_mut();
        let Some(slot) = logs.get_mut(i) else {
            return;
        };
        if slot.is_none() {
            match AccessLog::open(path) {
                Ok(l) => *slot = Some(l),
                Err(e) => {
                    log::error!("open() \"{}\" failed ({e})", path.display());
                    return;
                }
            }
        }
        if let Some(l) = slot {
            f(l);
        }
    }

    fn log(&self, sink: u32, rec: &LogRecord, peer: Option<SocketAddr>, now_secs: u64) {
        let Some(i) = (sink as usize).checked_sub(2) else {
            return;
        };
        let Some(path) = self.log_paths.get(i) else {
            return;
        };
        let mut logs = self.logs.borrow_mut();
        let Some(slot) = logs.get_mut(i) else {
            return;
        };
        if slot.is_none() {
            match AccessLog::open(path) {
                Ok(l) => *slot = Some(l),
                Err(e) => {
                    log::error!("open() \"{}\" failed ({e})", path.display());
                    return;
                }
            }
        }
        let Some(l) = slot else {
            return;
        };
        l.log(&Entry {
            remote_addr: peer.map(|p| p.ip()),
            unix_secs: now_secs,
            request_line: &rec.request_line,
            status: rec.status,
            body_bytes_sent: rec.body_bytes_sent,
            referer: rec.referer.as_deref(),
            user_agent: rec.user_agent.as_deref(),
            remote_user: rec.remote_user.as_deref().map(str::as_bytes),
        });
    }

    fn flush_logs(&self) {
        for l in self.logs.borrow_mut().iter_mut().flatten() {
            l.flush();
        }
    }

    /// USR1: the rotated files are reopened under their names.
    fn reopen_logs(&self) {
        for l in self.logs.borrow_mut().iter_mut().flatten() {
            l.reopen();
        }
    }
}

/// Every distinct access-log path of the configuration, in order.
fn log_paths(conf: &HttpConf) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for loc in all_loc_confs(conf) {
        let extra = loc.extra_logs.iter().map(|e| &e.path);
        for p in loc.access_log.iter().chain(extra) {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
    }
    out
}

/// Every resolved location of the configuration (nested and named ones,
/// and each server's own settings).
fn all_loc_confs(conf: &HttpConf) -> Vec<&LocConf> {
    let mut v = Vec::new();
    for s in &conf.servers {
        v.extend(s.fallback.as_deref());
        v.extend(
            phases::all_locations(&s.locations)
                .into_iter()
                .filter_map(|l| l.conf.as_deref())
                .flat_map(LocConf::with_nested),
        );
    }
    v
}

/// Puts the HTTP protocol on a worker's listeners (`listeners[i]` is bound
/// for `self::listeners(conf)[i]`) and starts the access-log flush timer.
pub fn init_worker(conf: &HttpConf, core: &mut Core, listeners: Vec<Listener>) -> io::Result<()> {
    let any_access_log = all_loc_confs(conf).iter().any(|l| l.access_log.is_some());
    let shared = Rc::new(Shared {
        any_access_log,
        conf: Arc::new(conf.clone()),
        files: RefCell::new(FileCache::new()),
        log_paths: log_paths(conf),
        logs: RefCell::new(Vec::new()),
        buf: RefCell::new(vec![0; READ_BUF]),
        machines: RefCell::new(Vec::new()),
        fpath: RefCell::new(PathBuf::new()),
        matches: RefCell::new(MatchCache::default()),
        requests: RefCell::new(Vec::new()),
        scratch: RefCell::new(Vec::new()),
        response: RefCell::new(crate::response::Response::new(0)),
        proxy: crate::proxy::Worker::new(conf),
    });
    for ls in listeners {
        let addr = ls.local_addr();
        let servers: Vec<usize> = conf
            .servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.listen.iter().any(|l| l.addr == addr))
            .map(|(i, _)| i)
            .collect();
        let default = conf
            .servers
            .iter()
            .enumerate()
            .find(|(_, s)| s.listen.iter().any(|l| l.addr == addr && l.default_server))
            .map(|(i, _)| i)
            .or_else(|| servers.first().copied())
            .unwrap_or(0);
        let tls = crate::ssl::listener_tls(conf, addr, &servers, default);
        let settings = conf
            .servers
            .get(default)
            .and_then(|s| {
                s.fallback
                    .as_ref()
                    .map(|f| settings_for(s, f, shared.any_access_log))
            })
            .unwrap_or_default();
        let id = core.add_listener(
            ls,
            Box::new(HttpProtocol {
                shared: shared.clone(),
                port: Rc::new(Port {
                    regex_names: servers.iter().any(|&i| {
                        conf.servers
                            .get(i)
                            .is_some_and(|s| !s.name_regexes.is_empty())
                    }),
                    servers,
                    default,
                    addr,
                    settings,
                    tls: tls.is_some(),
                }),
            }),
        )?;
        core.set_listener_tls(id, tls);
    }
    {
        // Opened now, while the worker still has the master's user (`user`
        // gives it up once init is done), as nginx's master opens them; a
        // file that does not open is tried again at its first record.
        let mut logs = shared.logs.borrow_mut();
        *logs = shared
            .log_paths
            .iter()
            .map(|p| match AccessLog::open(p) {
                Ok(l) => Some(l),
                Err(e) => {
                    log::error!("open() \"{}\" failed ({e})", p.display());
                    None
                }
            })
            .collect();
    }
    let s = shared.clone();
    core.create_time_event(1000, move |_, _| {
        s.flush_logs();
        Next::Again(1000)
    });
    let s = shared.clone();
    core.on_reopen(move || s.reopen_logs());
    Ok(())
}

/// A listener's protocol: nginx's `ngx_http_init_connection`.
struct HttpProtocol {
    shared: Rc<Shared>,
    port: Rc<Port>,
}

/// What the connections of one listening address share (nginx's
/// `ngx_http_port_t`): its servers, the default one, the address.
struct Port {
    servers: Vec<usize>,
    default: usize,
    addr: SocketAddr,
    /// A server here has `server_name ~REGEX` (looked up even when it is
    /// the only one, for its captures).
    regex_names: bool,
    /// The machine's settings, from the default server: computed once,
    /// copied into a machine each time one is taken.
    settings: HttpSettings,
    /// `listen ... ssl`: connections here speak TLS (or were refused as
    /// plain HTTP), so requests are checked for that and read its facts.
    tls: bool,
}

fn settings_for(s: &ServerConf, loc: &LocConf, log_requests: bool) -> HttpSettings {
    let mut st = HttpSettings {
        log_requests,
        client_header_buffer_size: s.client_header_buffer_size,
        large_header_buffers: s.large_client_header_buffers.0,
        large_header_buffer_size: s.large_client_header_buffers.1,
        // Checked per location by the glue once the location is known.
        client_max_body_size: 0,
        client_header_timeout: s.client_header_timeout,
        client_body_timeout: loc.client_body_timeout,
        keepalive_timeout: loc.keepalive_timeout,
        keepalive_requests: loc.keepalive_requests,
        server_tokens: loc.server_tokens,
        send_timeout: loc.send_timeout,
        ..HttpSettings::default()
    };
    s.srv.conn.apply(&mut st);
    st
}

impl Protocol for HttpProtocol {
    fn init_connection(&mut self, core: &mut Core, c: ConnId) -> Option<Box<dyn Handler>> {
        let conf = &self.shared.conf;
        let server = conf.servers.get(self.port.default)?;
        let fallback = server.fallback.clone()?;
        let now = core.now();
        // The handler reads at once (the request is usually there already);
        // interest is registered only if it is not.
        core.assume_readable(c);
        // A fresh connection waits for its first request: reusable (may be
        // drained when slots run short) but not idle, and its header timer
        // keeps a gracefully exiting worker until the request is served.
        core.set_reusable(c, true);
        // The state machine is created when the first bytes arrive; until
        // then only the header timer runs.
        core.add_timer(Ev::read(c), server.client_header_timeout);
        Some(Box::new(HttpConn {
            m: None,
            requests: 0,
            created: now,
            shared: self.shared.clone(),
            port: self.port.clone(),
            r: None,
            delayed: false,
            held: Vec::new(),
            files: Vec::new(),
            stat: Stat::None,
            lingering: false,
            nodelay: !fallback.tcp_nodelay,
            last_call: false,
            head_alone: true,
            idle_deadline: now,
            last_loc: None,
        }))
    }
}

/// Which stub_status gauge a connection is counted in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stat {
    None,
    Reading,
    Writing,
}

/// One HTTP connection's handler.
struct HttpConn {
    /// The protocol state machine; dropped while the connection is idle, so
    /// an idle keep-alive connection costs this small struct only.
    m: Option<Box<Connection>>,
    /// Requests served and accept time, kept while `m` is dropped.
    requests: u64,
    created: gyre_core::event::Msec,
    shared: Rc<Shared>,
    port: Rc<Port>,
    /// A request suspended by its content handler (it holds the
    /// connection: no further request is read until it ends).
    r: Option<Box<HttpRequest>>,
    /// The write event's timer is a suspended request's wake-up (nginx's
    /// `wev->delayed`), not the send timeout.
    delayed: bool,
    /// `limit_conn` counts of finished requests whose output is still
    /// being written: released once it all went out (or on close).
    held: Vec<crate::limit_conn::Hold>,
    /// Files referenced by `Segment::File` tokens.
    files: Vec<(u64, Rc<FileInfo>)>,
    stat: Stat,
    lingering: bool,
    /// TCP_NODELAY is set (or not wanted). Like nginx, it is set when the
    /// connection first goes keep-alive: a connection closed after one
    /// response never pays the system call.
    nodelay: bool,
    /// The worker is shutting down gracefully: answer at most one more
    /// request, with `Connection: close`, or close after a short wait.
    last_call: bool,
    /// Nothing has been sent yet: the first response's head goes in a
    /// segment of its own even when a file follows. The client's TCP sizes
    /// its quick-ACK budget by the first data segment it receives
    /// (`tcp_incr_quickack`: receive window / 2 × that segment's size):
    /// after a ~250-byte head it quick-ACKs the next 16 segments as they
    /// arrive, in our send's context; after a head merged into a 32 KiB
    /// segment it quick-ACKs one, and a 64 KiB file's later segments are
    /// ACKed from the client's own read(2) instead (measured on loopback
    /// under wrk with `Connection: close`: one more packet per request in
    /// the client's context, with our retransmit queue freed there too —
    /// 3.3 µs of client CPU per request, 9% of it). Later responses merge
    /// head and file with MSG_MORE: by then the budget is spent either way.
    head_alone: bool,
    /// When an idle keep-alive connection times out. Its read timer is
    /// left armed across requests when it fires no later than this (a
    /// request answered in one go then costs no timer change); an early
    /// firing re-arms it for the rest ([`HttpConn::handle`]).
    idle_deadline: gyre_core::event::Msec,
    /// The last request's location, for its `error_log`s: nginx's
    /// connection log follows the location (`ngx_http_update_location_config`),
    /// so a kept-alive connection's close is written there, not to the
    /// default server's logs. None: no request ended yet.
    last_loc: Option<Arc<LocConf>>,
}

enum Flow {
    Continue,
    Closed,
}

impl HttpConn {
    /// The state machine, taken from the worker's pool (or made) if the
    /// connection was idle.
    fn machine(&mut self, now: gyre_core::event::Msec) -> &mut Connection {
        let (shared, port, requests, created) =
            (&self.shared, &self.port, self.requests, self.created);
        self.m.get_or_insert_with(|| {
            let settings = port.settings.clone();
            match shared.machines.borrow_mut().pop() {
                Some(mut m) => {
                    m.reuse(settings, now, requests, created);
                    m
                }
                None => Box::new(Connection::resume(settings, now, requests, created)),
            }
        })
    }

    /// Gives the machine back to the worker's pool (the connection is idle
    /// or closing), keeping what outlives a request.
    fn release_machine(&mut self) {
        if let Some(m) = self.m.take() {
            self.requests = m.requests();
            self.created = m.created();
            let mut pool = self.shared.machines.borrow_mut();
            if pool.len() < MACHINE_POOL {
                pool.push(m);
            }
        }
    }

    fn is_idle(&self) -> bool {
        self.m.as_ref().is_none_or(|m| m.is_idle())
    }

    /// Accepted, and no byte of a first request yet: not an idle keep-alive
    /// connection (its header timer runs; a graceful shutdown waits for it).
    fn is_fresh(&self) -> bool {
        self.m.is_none() && self.requests == 0
    }

    fn has_output(&self) -> bool {
        self.m.as_ref().is_some_and(|m| m.has_output())
    }

    fn set_stat(&mut self, core: &Core, to: Stat) {
        if self.stat == to {
            return;
        }
        if let Some(z) = core.shared() {
            let s = z.stats();
            match self.stat {
                Stat::Reading => s.reading.dec(),
                Stat::Writing => s.writing.dec(),
                Stat::None => {}
            }
            match to {
                Stat::Reading => s.reading.inc(),
                Stat::Writing => s.writing.inc(),
                Stat::None => {}
            }
        }
        self.stat = to;
    }

    fn close(&mut self, core: &mut Core, c: ConnId) {
        self.set_stat(core, Stat::None);
        self.flush_logs(core, c);
        if let Some(r) = self.r.as_mut() {
            // A proxied request's upstream connection goes with it.
            crate::proxy::handler::abandon(core, &self.shared.proxy, r);
        }
        self.r = None;
        self.held.clear();
        self.release_machine();
        core.close(c);
    }

    /// nginx's server selection: exact name, then `*.suffix`, then
    /// `prefix.*`, then the default server of the address.
    fn pick_server(&self, host: Option<&str>) -> usize {
        self.find_server(host).0
    }

    /// nginx's `ngx_http_find_virtual_server`: the server for a host, and
    /// whether a `server_name ~REGEX` chose it (its captures are then the
    /// request's).
    fn find_server(&self, host: Option<&str>) -> (usize, bool) {
        let conf = &self.shared.conf;
        let Some(host) = host else {
            return (self.port.default, false);
        };
        if self.port.servers.len() <= 1 && !self.port.regex_names {
            return (self.port.default, false);
        }
        let host = host.to_ascii_lowercase();
        let host = host.trim_end_matches('.');
        // nginx's order: the exact name, then the longest leading wildcard
        // (`*.example.com`, `.example.com`), then the longest trailing one
        // (`www.*`), then the default server.
        let mut leading: Option<(usize, usize)> = None;
        let mut trailing: Option<(usize, usize)> = None;
        for &i in self.port.servers.iter() {
            let Some(s) = conf.servers.get(i) else {
                continue;
            };
            for n in &s.server_names {
                if n == host {
                    return (i, false);
                }
                let lead = if let Some(suffix) = n.strip_prefix('*') {
                    host.ends_with(suffix).then_some(suffix.len())
                } else if let Some(bare) = n.strip_prefix('.') {
                    (host == bare || host.ends_with(n.as_str())).then_some(n.len())
                } else {
                    None
                };
                if let Some(len) = lead {
                    if leading.is_none_or(|(_, l)| len > l) {
                        leading = Some((i, len));
                    }
                }
                if let Some(prefix) = n.strip_suffix('*') {
                    if host.starts_with(prefix) && trailing.is_none_or(|(_, l)| prefix.len() > l) {
                        trailing = Some((i, prefix.len()));
                    }
                }
            }
        }
        let regex = || {
            self.port.servers.iter().copied().find(|&i| {
                conf.servers
                    .get(i)
                    .is_some_and(|s| s.name_regexes.iter().any(|re| re.is_match(host.as_bytes())))
            })
        };
        match leading.or(trailing) {
            Some((i, _)) => (i, false),
            None => regex().map_or((self.port.default, false), |i| (i, true)),
        }
    }

    /// Reads what is there, answers every complete request, writes.
    fn run(&mut self, core: &mut Core, c: ConnId) -> Flow {
        let mut turns = 0u32;
        loop {
            // A proxied body goes on reading its upstream while the client
            // is slow (into its temp file): it decides itself to wait.
            let mut blocked = false;
            let reads_on = self.proxy_reads_while_blocked();
            if reads_on && self.has_output() && !core.conn(c).is_some_and(|x| x.write.ready) {
                // An upstream event while the client's socket is full: no
                // send just to hear EAGAIN.
                blocked = true;
            } else if self.has_output() {
                match self.write(core, c) {
                    Ok(true) => self.held.clear(),
                    Ok(false) if reads_on => blocked = true,
                    Ok(false) => return Flow::Continue,
                    Err(_) => {
                        self.close(core, c);
                        return Flow::Closed;
                    }
                }
            }
            if self.is_proxied() {
                turns += 1;
                match self.proxy_step(core, c) {
                    ProxyFlow::Wait { progress } => {
                        if progress && !blocked && turns < 64 {
                            continue;
                        }
                        if progress && !blocked {
                            // Yield to the other connections.
                            core.post(Ev::write(c));
                        }
                        return Flow::Continue;
                    }
                    ProxyFlow::Done => {
                        if let Some(r) = self.r.take() {
                            self.end_request(core, c, r);
                        }
                        self.answer(core, c);
                        continue;
                    }
                    flow @ (ProxyFlow::Error(_) | ProxyFlow::Redirect(_)) => {
                        let start = match flow {
                            ProxyFlow::Redirect(to) => Start::Redirect(to),
                            ProxyFlow::Error(code) => Start::Error(code),
                            _ => Start::Error(500),
                        };
                        if let Some(mut r) = self.r.take() {
                            match self.run_phases(core, &mut r, start) {
                                Status::Done => self.end_request(core, c, r),
                                Status::Again => self.r = Some(r),
                            }
                        }
                        self.answer(core, c);
                        continue;
                    }
                }
            }
            if self.r.is_some() {
                if self.delayed || self.wake_request(core, c) {
                    return Flow::Continue;
                }
                continue;
            }
            let disposition = self
                .m
                .as_ref()
                .map_or(Disposition::Open, |m| m.disposition());
            match disposition {
                Disposition::Close => {
                    self.close(core, c);
                    return Flow::Closed;
                }
                Disposition::Linger if !self.lingering => {
                    self.lingering = true;
                    if core.shutdown_write(c).is_err() {
                        self.close(core, c);
                        return Flow::Closed;
                    }
                    let now = core.now();
                    self.machine(now).start_lingering(now);
                }
                _ => {}
            }
            let ready = core.conn(c).is_some_and(|x| x.read.ready);
            if !ready || !self.m.as_ref().is_none_or(|m| m.wants_read()) {
                return Flow::Continue;
            }
            let shared = self.shared.clone();
            let mut buf = shared.buf.borrow_mut();
            let now = core.now();
            match core.recv(c, &mut buf) {
                Ok(0) => {
                    self.log_eof(core, c);
                    self.machine(now).on_eof(now)
                }
                Ok(n) => {
                    if self.is_idle() {
                        core.set_keepalive(c, false);
                    }
                    self.machine(now).on_read(&buf[..n], now);
                    if self.stat == Stat::None {
                        self.set_stat(core, Stat::Reading);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    drop(buf);
                    self.log_recv_error(core, c, &e);
                    if let Some(m) = self.m.as_mut() {
                        m.on_recv_error(&e, now);
                    }
                    self.flush_logs(core, c);
                    self.close(core, c);
                    return Flow::Closed;
                }
            }
            drop(buf);
            self.answer(core, c);
        }
    }
}

impl Handler for HttpConn {
    fn handle(&mut self, core: &mut Core, ev: Ev) {
        // Events of a proxied request's upstream connection come here
        // too (crate::proxy::handler::Relay), with that connection's id.
        if let Some(client) = self.upstream_owner(ev.conn) {
            self.upstream_event(core, ev, client);
            return;
        }
        let c = ev.conn;
        let closing = core.conn(c).is_some_and(|x| x.close);
        if closing && self.is_idle() && !self.has_output() && !self.last_call {
            if core.is_exiting() && !ev.timedout {
                // Graceful shutdown: closing now would race a client that is
                // sending its next request on this connection (it would see
                // a reset). Give it a moment to send one, answered with
                // `Connection: close`; the non-cancelable timer keeps the
                // exiting worker until then.
                self.last_call = true;
                core.set_cancelable(Ev::read(c), false);
                core.add_timer(Ev::read(c), LAST_CALL_MS);
                return;
            }
            self.close(core, c);
            return;
        }
        if self.last_call && ev.timedout && self.is_idle() {
            self.close(core, c);
            return;
        }
        if ev.timedout && ev.kind == EvKind::Read && self.m.is_none() && self.requests > 0 {
            // An idle keep-alive connection's timer armed for an earlier
            // request's deadline (see `idle_deadline`): not yet timed out.
            let now = core.now();
            if msec_before(now, self.idle_deadline) {
                core.add_timer(Ev::read(c), msec_diff(self.idle_deadline, now) as u64);
                return;
            }
        }
        if ev.kind == EvKind::Write && self.delayed && (ev.timedout || !core.timer_set(ev)) {
            // A suspended request's wake-up: its timer, or the posted
            // event of work done in slices (no timer then).
            self.delayed = false;
        } else if ev.timedout {
            if ev.kind == EvKind::Write {
                self.log_send_timeout(core, c);
                self.close(core, c);
                return;
            }
            if self.is_fresh() {
                self.log_wait_timeout(core, c);
            }
            let Some(m) = self.m.as_mut() else {
                // Idle (keep-alive) or fresh (no byte yet): nothing to answer.
                self.close(core, c);
                return;
            };
            let now = core.now();
            m.on_timeout(now);
        }
        if let Flow::Closed = self.run(core, c) {
            return;
        }
        self.after(core, c);
    }
}

#[cfg(test)]
mod size_tests {
    /// An idle keep-alive connection is this handler and nothing else (the
    /// state machine went back to the worker's pool): keep it small, it is
    /// most of the per-connection memory of a server with many idle
    /// clients. 120 bytes at the time of writing (the last location, for
    /// the keep-alive close's log, is the latest pointer).
    #[test]
    fn idle_connection_state_stays_small() {
        assert!(
            std::mem::size_of::<super::HttpConn>() <= 120,
            "{}",
            std::mem::size_of::<super::HttpConn>()
        );
    }
}
