//! Server-wide state and the sans-I/O driver: client registry, per-client
//! input parsing and command execution ([`Server::feed`]), and
//! [`Server::cron`] — Redis's `serverCron` minus I/O (in `server/cron.rs`;
//! `processCommand`'s refusals are in `server/refuse.rs`).

mod cron;
mod refuse;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::cmd::{self, CommandTable, Ctx, Resolved};
use crate::db::Db;
use crate::resp::{self, Argv, Limits, RequestParser, Source, Step};

/// Identifies a connected client (Redis's client id, starting at 1).
pub type ClientId = u64;

/// Redis's `CONFIG_MIN_HZ` / `CONFIG_MAX_HZ`.
/// Elements freed per lazyfree step (one step is well under a millisecond).
pub const LAZYFREE_CHUNK: usize = 4096;

pub const MIN_HZ: u32 = 1;
pub const MAX_HZ: u32 = 500;
/// Redis's `MAX_CLIENTS_PER_CLOCK_TICK` (dynamic hz).
pub const MAX_CLIENTS_PER_CLOCK_TICK: usize = 200;
/// Redis's `CLIENTS_CRON_MIN_ITERATIONS`.
pub const CLIENTS_CRON_MIN_ITERATIONS: usize = 5;
/// Keys sampled per loop of the active expire cycle
/// (`ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP`).
pub const EXPIRE_KEYS_PER_LOOP: usize = 20;
/// Keep looping over a database while more than this percentage of the
/// sampled keys were expired (Redis 7's `ACTIVE_EXPIRE_CYCLE_ACCEPTABLE_STALE`
/// at the default effort; Redis before 6 used 25).
pub const EXPIRE_ACCEPTABLE_STALE: u64 = 10;
/// Share of the cron period a slow cycle may use (`..._SLOW_TIME_PERC`).
pub const EXPIRE_SLOW_TIME_PERC: u64 = 25;
/// Budget of a fast cycle in microseconds (`..._FAST_DURATION`).
pub const EXPIRE_FAST_DURATION_US: u64 = 1000;
/// Databases visited per cycle (`CRON_DBS_PER_CALL`).
pub const CRON_DBS_PER_CALL: usize = 16;
/// Work cap of a cycle besides its time budget: keys sampled per
/// microsecond of budget (a sample costs ~0.1-0.3 us in a release build).
/// It bounds each call even if the clock misbehaves, and is the only bound
/// when `Config::expire_use_wall_clock` is off (deterministic simulation).
pub const EXPIRE_SAMPLES_PER_US: u64 = 4;
/// Budget of one expire slice in microseconds (sliced mode, see
/// [`Config::expire_slices`]).
pub const EXPIRE_SLICE_US: u64 = 1000;
/// Pause between two expire slices in milliseconds: a slice of at most
/// 1 ms every ~3 ms bounds the expiry's share of the CPU to about a third
/// while a backlog lasts, and the longest a request waits behind it to
/// about 1 ms.
pub const EXPIRE_SLICE_GAP_MS: u64 = 2;

/// Server configuration (Redis names in the docs; CONFIG GET/SET names).
#[derive(Clone, Debug)]
pub struct Config {
    /// The TLS port's configuration (CONFIG SET `tls-*-file` replaces it);
    /// `None` without a TLS port.
    pub tls: Option<std::rc::Rc<crate::tls::TlsSwap>>,
    /// `hz` (configured frequency of `cron`, 1..=500).
    pub hz: u32,
    /// `dynamic-hz`.
    pub dynamic_hz: bool,
    /// `timeout`: close clients idle for more than this many seconds (0 = never).
    pub timeout: u64,
    /// `maxclients`.
    pub maxclients: u64,
    /// `databases` (immutable).
    pub databases: usize,
    /// `proto-max-bulk-len`.
    pub proto_max_bulk_len: u64,
    /// `client-query-buffer-limit`.
    pub client_query_buffer_limit: u64,
    /// `maxmemory` (reported only: no eviction in this module).
    pub maxmemory: u64,
    /// `port` (reported in INFO / CONFIG GET; the glue owns sockets).
    pub port: u16,
    /// `bind` (reported only).
    pub bind: String,
    /// Largest `*N` accepted by the parser.
    pub max_multibulk_len: u64,
    /// Bound the active expire cycle by wall-clock time (Redis's behaviour).
    /// Off: bounded only by the sample budget, fully deterministic.
    pub expire_use_wall_clock: bool,
    /// Latency-flat active expiry: the cron's expire cycle is one short
    /// slice ([`EXPIRE_SLICE_US`]) instead of 25% of the cron period, and
    /// a backlog ([`CronOutcome::expire_backlog`]) is worked off by
    /// [`Server::expire_slice`] calls that the driver schedules every
    /// [`EXPIRE_SLICE_GAP_MS`] (replacing `before_sleep`'s fast cycles).
    /// Off: Redis's schedule.
    pub expire_slices: bool,
    /// Seed for key sampling and the run id.
    pub seed: u64,
    /// `requirepass` (the default user's password; `None`: nopass).
    pub requirepass: Option<Vec<u8>>,
    /// `protected-mode`: with no password, refuse non-loopback clients.
    pub protected_mode: bool,
    /// `notify-keyspace-events` as [`crate::notify`] flags.
    pub notify_keyspace_events: u32,
    /// `maxmemory-policy`, `maxmemory-samples`, ... (see [`crate::evict`]).
    pub evict: crate::evict::EvictConfig,
    /// `client-output-buffer-limit` (normal, replica, pubsub).
    pub client_output_buffer_limit: crate::output::ObufLimits,
    /// Aggregate encoding thresholds (`hash-max-listpack-entries`, ...).
    pub encodings: crate::object::Limits,
    /// RDB and AOF settings (`dir`, `dbfilename`, `save`, `appendonly`, ...).
    pub persist: crate::persist::PersistConfig,
    /// `acllog-max-len`.
    pub acllog_max_len: u64,
    /// `aclfile` (`None`: users come from `user` lines).
    pub aclfile: Option<std::path::PathBuf>,
    /// `user` lines: the name, then its rules.
    pub users: Vec<Vec<Vec<u8>>>,
    /// `lazyfree-lazy-expire`, `lazyfree-lazy-eviction`: keys removed by
    /// expiry / eviction are propagated as UNLINK instead of DEL.
    pub lazyfree_lazy_expire: bool,
    pub lazyfree_lazy_eviction: bool,
    /// `rename-command OLD NEW` lines (NEW empty: the command is gone).
    pub rename_command: Vec<(String, String)>,
    /// The redis.conf read by `redis_conf` (CONFIG REWRITE's file).
    pub redis_conf: Option<std::path::PathBuf>,
    /// `maxmemory-clients` ([`crate::client_evict`]).
    pub maxmemory_clients: crate::client_evict::Limit,
    /// `acl-pubsub-default allchannels` (new users get `&*`).
    pub acl_pubsub_default_all: bool,
    /// `latency-tracking` ([`crate::latency`]).
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`.
    pub latency_percentiles: crate::latency::Percentiles,
    /// `latency-monitor-threshold` in ms, 0 = off
    /// ([`crate::latency_monitor`]).
    pub latency_monitor_threshold: u64,
    /// `slowlog-log-slower-than` in µs (negative: off, 0: every command)
    /// and `slowlog-max-len` ([`crate::slowlog`]).
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    /// `enable-debug-command` ([`crate::debug`]).
    pub enable_debug_command: crate::debug::Protected,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tls: None,
            hz: 10,
            dynamic_hz: true,
            timeout: 0,
            maxclients: 10000,
            databases: 16,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            maxmemory: 0,
            port: 6379,
            bind: "127.0.0.1".into(),
            max_multibulk_len: 1024 * 1024,
            expire_use_wall_clock: true,
            expire_slices: false,
            seed: 0x5EED,
            requirepass: None,
            // Off in the sans-I/O default (tests feed made-up addresses);
            // `kv {}` defaults to `protected-mode yes` as redis.conf does.
            protected_mode: false,
            notify_keyspace_events: 0,
            client_output_buffer_limit: crate::output::DEFAULT_LIMITS,
            evict: crate::evict::EvictConfig::default(),
            encodings: crate::object::Limits::default(),
            persist: crate::persist::PersistConfig::default(),
            acllog_max_len: crate::acl_log::DEFAULT_MAX_LEN,
            aclfile: None,
            users: Vec::new(),
            lazyfree_lazy_expire: false,
            lazyfree_lazy_eviction: false,
            rename_command: Vec::new(),
            redis_conf: None,
            maxmemory_clients: crate::client_evict::Limit::Bytes(0),
            acl_pubsub_default_all: false,
            latency_tracking: true,
            latency_percentiles: Default::default(),
            latency_monitor_threshold: 0,
            slowlog_log_slower_than: crate::slowlog::DEFAULT_SLOWER_THAN,
            slowlog_max_len: crate::slowlog::DEFAULT_MAX_LEN,
            enable_debug_command: Default::default(),
        }
    }
}

impl Config {
    pub fn limits(&self) -> Limits {
        Limits {
            proto_max_bulk_len: self.proto_max_bulk_len,
            max_multibulk_len: self.max_multibulk_len,
            inline_max_size: resp::PROTO_INLINE_MAX_SIZE,
            client_query_buffer_limit: self.client_query_buffer_limit,
        }
    }
}

/// Redis's `inst_metric`: 16 samples of a per-second rate.
#[derive(Clone, Debug, Default)]
pub struct InstMetric {
    samples: [i64; 16],
    idx: usize,
    last_sample_time: i64,
    last_sample_count: i64,
}

impl InstMetric {
    /// `trackInstantaneousMetric`.
    pub fn track(&mut self, now_ms: i64, reading: i64) {
        let t = now_ms - self.last_sample_time;
        let ops = reading - self.last_sample_count;
        let rate = if t > 0 {
            ops.saturating_mul(1000) / t
        } else {
            0
        };
        self.samples[self.idx] = rate;
        self.idx = (self.idx + 1) % self.samples.len();
        self.last_sample_time = now_ms;
        self.last_sample_count = reading;
    }

    /// `getInstantaneousMetric`: mean of the samples.
    pub fn get(&self) -> i64 {
        self.samples.iter().sum::<i64>() / self.samples.len() as i64
    }
}

/// Server-wide counters for INFO.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub rejected_connections: u64,
    pub total_net_input_bytes: u64,
    pub total_net_output_bytes: u64,
    pub total_error_replies: u64,
    pub total_reads_processed: u64,
    /// Writes to clients' sockets (a Cell: the glue counts them while it
    /// holds the server borrowed to read the output it sends).
    pub total_writes_processed: std::cell::Cell<u64>,
    pub expired_time_cap_reached_count: u64,
    /// Keys removed by maxmemory eviction.
    pub evicted_keys: u64,
    /// Clients disconnected by `maxmemory-clients`.
    pub evicted_clients: u64,
    /// Microseconds spent in active expire cycles (wall clock).
    pub expire_cycle_time_used_us: u64,
    /// Running estimate of the share of expired keys among sampled ones.
    pub expired_stale_perc: f64,
    pub used_memory_peak: u64,
    /// The process's resident set in bytes, sampled by serverCron every
    /// 100 ms (Redis's `cron_malloc_stats.process_rss`): INFO's
    /// `used_memory_rss` and the fragmentation ratio.
    pub process_rss: u64,
    pub inst_commands: InstMetric,
    pub inst_net_input: InstMetric,
    pub inst_net_output: InstMetric,
}

/// A connected client as the registry sees it.
#[derive(Debug)]
pub struct Client {
    pub id: ClientId,
    pub addr: String,
    pub laddr: String,
    pub fd: i64,
    pub name: Option<Vec<u8>>,
    pub db: usize,
    pub resp: u8,
    pub created_ms: i64,
    pub last_interaction_ms: i64,
    /// Last command (CLIENT LIST's `cmd=`: [`Resolved::full_name`];
    /// `None` before the first).
    pub last_cmd: Option<Resolved>,
    pub(crate) parser: RequestParser,
    /// Scheduled for closing (killed or timed out).
    pub closing: bool,
    /// Between MULTI and EXEC/DISCARD.
    pub(crate) mstate: Option<Box<crate::multi::MultiState>>,
    /// WATCHed keys as (db, key).
    pub(crate) watched_keys: Vec<(usize, Vec<u8>)>,
    /// A watched key was modified (`CLIENT_DIRTY_CAS`).
    pub(crate) dirty_cas: bool,
    /// Channels, patterns and shard channels subscribed to.
    pub(crate) subs: crate::pubsub::ClientSubs,
    /// Replies and messages the socket has not taken yet (Redis's reply
    /// list): the glue keeps its leftovers here and other clients'
    /// PUBLISHes append here, so one buffer orders both and
    /// `client-output-buffer-limit` sees all of it.
    pub(crate) obuf: Vec<u8>,
    pub(crate) obuf_off: usize,
    /// The longest `obuf` has been since the clients cron last looked.
    pub(crate) obuf_peak: usize,
    /// Since when the output is above the soft limit (ms).
    pub(crate) obuf_soft_since: Option<i64>,
    /// Authenticated as the default user (always, without `requirepass`).
    pub(crate) authenticated: bool,
    /// CLIENT REPLY ON|OFF|SKIP.
    pub(crate) reply_mode: crate::reply_mode::ReplyMode,
    /// The ACL user the client is authenticated as.
    pub(crate) user: String,
    /// CLIENT NO-EVICT ON.
    pub(crate) no_evict: bool,
    /// Running EXEC: the transaction's length and bytes (CLIENT LIST).
    pub(crate) exec_view: Option<(i64, u64)>,
    /// Its memory as last counted in `Server::clients_mem_total`.
    pub(crate) mem_counted: u64,
    /// The parser holds a command CLIENT PAUSE postponed.
    pub(crate) postponed_in_parser: bool,
    /// Replies produced while the client was blocked (served, timed out,
    /// unblocked), for its connection to write.
    pub(crate) pending: Vec<u8>,
}

/// Gate bits of [`Session::gate`]: why a command may not simply run.
pub(crate) const GATE_MULTI: u8 = 1;
pub(crate) const GATE_PUBSUB: u8 = 2;
pub(crate) const GATE_NOAUTH: u8 = 4;
pub(crate) const GATE_REPLY: u8 = 8;

impl Client {
    /// The gate bits for this client's state.
    pub(crate) fn gate(&self) -> u8 {
        let mut g = 0;
        if self.mstate.is_some() {
            g |= GATE_MULTI;
        }
        if self.subs.count() > 0 {
            g |= GATE_PUBSUB;
        }
        if !self.authenticated {
            g |= GATE_NOAUTH;
        }
        if self.reply_mode != crate::reply_mode::ReplyMode::On {
            g |= GATE_REPLY;
        }
        g
    }

    /// Bytes waiting in the output buffer.
    pub fn pending_output(&self) -> &[u8] {
        &self.obuf[self.obuf_off.min(self.obuf.len())..]
    }
}

/// A client's state that commands read and change through [`Ctx`], kept
/// out of the registry while its input is executed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Session {
    pub(crate) db: usize,
    pub(crate) proto: u8,
    pub(crate) last_cmd: Option<Resolved>,
    /// [`GATE_MULTI`] | [`GATE_PUBSUB`] | ...: zero on the fast path.
    pub(crate) gate: u8,
}

impl Session {
    fn store(&self, c: &mut Client) {
        c.db = self.db;
        c.resp = self.proto;
        c.last_cmd = self.last_cmd;
    }
}

/// What the glue must do after [`Server::feed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedOutcome {
    /// Input bytes consumed (drop them from the connection's buffer).
    pub consumed: usize,
    /// Write out the replies, then close the connection.
    pub close: bool,
    /// The client blocked (BLPOP & co.): its timeout in ms, 0 for none.
    /// Input after the blocking command is left unconsumed until
    /// [`Server::take_woken`] lists the client again.
    pub blocked: Option<u64>,
}

/// Whether a command asks for the connection to be closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Not run: CLIENT PAUSE is in force (see [`crate::pause`]); the
    /// command stays in the input.
    Postponed,
    /// Close after the reply is written (QUIT, CLIENT KILL of oneself,
    /// protocol errors).
    CloseAfterReply,
}

/// Kind of active expire cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CycleKind {
    /// From `cron`: 25% of the cron period.
    Slow,
    /// From `before_sleep`: 1 ms, only when the last slow cycle ran out of
    /// time or many sampled keys were expired.
    Fast,
}

/// Bound on one active expire cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpireBudget {
    /// Wall-clock budget (`None`: unbounded in time).
    pub time_limit: Option<Duration>,
    /// Keys sampled at most (checked after each loop of 20).
    pub max_samples: u64,
}

/// What one expire cycle did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireCycleStats {
    pub ran: bool,
    pub sampled: u64,
    pub expired: u64,
    pub loops: u64,
    /// Stopped by the time or sample budget.
    pub budget_exhausted: bool,
    pub elapsed_us: u64,
}

/// What one `cron` call did and wants.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CronOutcome {
    /// Call `cron` again in this many milliseconds (`1000 / hz`).
    pub next_in_ms: u64,
    /// Clients to close (idle timeout, or killed and not yet closed).
    pub close: Vec<ClientId>,
    /// The slow expire cycle's figures.
    pub expire: ExpireCycleStats,
    /// Effective hz after dynamic scaling.
    pub hz: u32,
    /// Expired keys are piling up (the cycle ran out of budget or many
    /// sampled keys were stale): in sliced mode, schedule
    /// [`Server::expire_slice`] until [`Server::expire_backlog`] is false.
    pub expire_backlog: bool,
    /// A save rule started a background save: schedule
    /// [`Server::bgsave_slice`] until it returns false.
    pub bgsave_started: bool,
}

#[derive(Debug, Default)]
struct CronState {
    hz: u32,
    cronloops: u64,
    clients_cursor: ClientId,
    current_db: usize,
    timelimit_exit: bool,
    last_fast_cycle_ms: i64,
}

/// The whole KV server state; one per process that serves the protocol.
#[derive(Debug)]
pub struct Server {
    pub config: Config,
    pub(crate) dbs: Vec<Db>,
    pub stats: Stats,
    pub(crate) clients: BTreeMap<ClientId, Client>,
    next_client_id: ClientId,
    to_close: Vec<ClientId>,
    cron: CronState,
    pub(crate) table: CommandTable,
    /// Argument spans of the command being executed (reused: a command
    /// costs no allocation for its argv).
    spans: Vec<(usize, usize)>,
    pub(crate) start_ms: i64,
    pub(crate) run_id: String,
    /// Changes since the last save (`rdb_changes_since_last_save`).
    pub dirty: u64,
    pub(crate) last_save_ms: i64,
    /// SAVE/BGSAVE/loading state ([`crate::persist`]).
    pub persist: crate::persist::PersistState,
    /// The append-only file ([`crate::aof`]).
    pub aof: crate::aof::AofState,
    /// Command propagation ([`crate::aof::propagate`]).
    pub(crate) prop: crate::aof::propagate::Propagate,
    /// Channel and pattern registries.
    pub(crate) pubsub: crate::pubsub::PubSub,
    /// Clients given output by others, for the glue to flush.
    pub(crate) writers: Vec<ClientId>,
    /// ACL users.
    pub(crate) users: crate::acl::Users,
    /// Some user has restrictions: every command is checked against its
    /// client's user (off: no per-command cost).
    pub(crate) acl_restricted: bool,
    /// ACL LOG ([`crate::acl_log`]).
    pub(crate) acl_log: crate::acl_log::AclLog,
    /// INFO commandstats / errorstats ([`crate::cmdstats`]).
    pub(crate) cmdstats: crate::cmdstats::CommandStats,
    /// LATENCY LATEST / HISTORY / ... ([`crate::latency_monitor`]).
    pub(crate) latmon: crate::latency_monitor::LatencyMonitor,
    pub(crate) slowlog: crate::slowlog::SlowLog,
    /// The clients' memory for `maxmemory-clients` ([`crate::client_evict`]).
    pub(crate) clients_mem_total: u64,
    /// The eviction pool and the state of a time-limited run.
    pub(crate) evict_state: crate::evict::EvictState,
    /// The clients' share of memory as of the last cron (eviction reads
    /// it per command without walking every client).
    pub(crate) clients_mem_cached: u64,
    /// Random picks of the commands (SPOP, SRANDMEMBER, HRANDFIELD ...).
    pub(crate) rng: crate::util::Rng,
    /// Clients blocked in BLPOP & co. ([`crate::blocked`]).
    pub(crate) blocked: crate::blocked::BlockState,
    /// CLIENT PAUSE.
    pub(crate) pause: crate::pause::PauseState,
}

impl Server {
    pub fn new(mut config: Config, now_ms: i64) -> Server {
        config.hz = config.hz.clamp(MIN_HZ, MAX_HZ);
        config.databases = config.databases.max(1);
        let mut rng = crate::util::Rng::new(config.seed);
        let dbs = (0..config.databases)
            .map(|_| Db::new(rng.next_u64()))
            .collect();
        let run_id = (0..40)
            .map(|_| char::from(b"0123456789abcdef"[rng.below(16)]))
            .collect();
        // The configuration checked the renames (`conf.rs`).
        let table = CommandTable::with_renames(cmd::all(), &config.rename_command)
            .unwrap_or_else(|_| CommandTable::new(cmd::all()));
        let hz = config.hz;
        let mut server = Server {
            config,
            dbs,
            stats: Stats::default(),
            clients: BTreeMap::new(),
            next_client_id: 1,
            to_close: Vec::new(),
            cron: CronState {
                hz,
                ..Default::default()
            },
            table,
            spans: Vec::new(),
            start_ms: now_ms,
            run_id,
            dirty: 0,
            last_save_ms: now_ms,
            persist: crate::persist::PersistState::default(),
            aof: Default::default(),
            prop: Default::default(),
            rng: crate::util::Rng::new(rng.next_u64()),
            blocked: crate::blocked::BlockState::default(),
            pause: Default::default(),
            pubsub: Default::default(),
            writers: Vec::new(),
            evict_state: Default::default(),
            clients_mem_cached: 0,
            users: Default::default(),
            acl_restricted: false,
            acl_log: Default::default(),
            cmdstats: crate::cmdstats::CommandStats::new(0),
            latmon: Default::default(),
            slowlog: Default::default(),
            clients_mem_total: 0,
        };
        server.cmdstats = crate::cmdstats::CommandStats::new(server.table.ids().len());
        server.cmdstats.tracking = server.config.latency_tracking;
        let t = server.config.latency_monitor_threshold;
        server.latmon.set_threshold(t);
        let pass = server.config.requirepass.clone();
        server.users.set_default_password(pass.as_deref());
        let all = server.config.acl_pubsub_default_all;
        server.users.set_pubsub_default(all);
        crate::acl_file::load_at_startup(&mut server);
        crate::evict::sync_policy(&mut server);
        crate::notify::sync_expired_log(&mut server);
        crate::notify::sync_change_log(&mut server);
        server
    }

    // ---------------------------------------------------------------- clients

    /// Register a new connection. `Err(reply bytes)` when `maxclients` is
    /// reached: write them and close (Redis's behaviour).
    pub fn connect(
        &mut self,
        addr: &str,
        laddr: &str,
        fd: i64,
        now_ms: i64,
    ) -> Result<ClientId, Vec<u8>> {
        if self.clients.len() as u64 >= self.config.maxclients {
            self.stats.rejected_connections += 1;
            return Err(b"-ERR max number of clients reached\r\n".to_vec());
        }
        if crate::auth::protected_refuses(self, addr) {
            return Err(crate::auth::DENIED.as_bytes().to_vec());
        }
        let authenticated = self.users.default_is_open();
        let id = self.next_client_id;
        self.next_client_id += 1;
        self.stats.total_connections_received += 1;
        self.clients.insert(
            id,
            Client {
                id,
                addr: addr.to_string(),
                laddr: laddr.to_string(),
                fd,
                name: None,
                db: 0,
                resp: 2,
                created_ms: now_ms,
                last_interaction_ms: now_ms,
                last_cmd: None,
                parser: RequestParser::new(self.config.limits()),
                closing: false,
                mstate: None,
                watched_keys: Vec::new(),
                dirty_cas: false,
                subs: Default::default(),
                obuf: Vec::new(),
                obuf_off: 0,
                obuf_peak: 0,
                obuf_soft_since: None,
                authenticated,
                reply_mode: Default::default(),
                user: "default".to_string(),
                no_evict: false,
                exec_view: None,
                mem_counted: 0,
                postponed_in_parser: false,
                pending: Vec::new(),
            },
        );
        Ok(id)
    }

    /// Forget a closed connection.
    pub fn disconnect(&mut self, id: ClientId) {
        if !self.clients.contains_key(&id) {
            return;
        }
        crate::multi::discard_transaction(self, id);
        crate::pubsub::unsubscribe_all(self, id, None);
        if let Some(c) = self.clients.remove(&id) {
            crate::client_evict::forget(self, c.mem_counted);
        }
        self.forget_blocked(id);
        self.forget_postponed(id);
    }

    /// Move the clients the databases found with a modified watched key
    /// onto their `dirty_cas` flag.
    pub(crate) fn sync_dirty_cas(&mut self) {
        for db in &mut self.dbs {
            for id in db.watched.dirty.drain(..) {
                if let Some(c) = self.clients.get_mut(&id) {
                    c.dirty_cas = true;
                }
            }
        }
    }

    pub fn client(&self, id: ClientId) -> Option<&Client> {
        self.clients.get(&id)
    }

    pub fn connected_clients(&self) -> usize {
        self.clients.len()
    }

    /// Clients killed by CLIENT KILL (from another connection) since the
    /// last call: the glue closes them.
    pub fn take_clients_to_close(&mut self) -> Vec<ClientId> {
        std::mem::take(&mut self.to_close)
    }

    pub(crate) fn schedule_close(&mut self, id: ClientId) {
        if let Some(c) = self.clients.get_mut(&id) {
            if !c.closing {
                c.closing = true;
                self.to_close.push(id);
            }
        }
    }

    /// Mark activity without input (e.g. a completed write), as Redis does.
    pub fn touch(&mut self, id: ClientId, now_ms: i64) {
        if let Some(c) = self.clients.get_mut(&id) {
            c.last_interaction_ms = now_ms;
        }
    }

    // ---------------------------------------------------------------- input

    /// Parse and execute every complete command in `input` for client `id`,
    /// appending the replies to `out`. Drop `consumed` bytes from the input
    /// buffer; the rest is an incomplete header or inline line (at most
    /// 64 KiB, else a protocol error). A partial bulk payload is held inside
    /// the parser, so the input buffer never needs to grow to a bulk's size.
    pub fn feed(
        &mut self,
        id: ClientId,
        input: &[u8],
        now_ms: i64,
        out: &mut Vec<u8>,
    ) -> FeedOutcome {
        let out_start = out.len();
        let limits = self.config.limits();
        let Some(c) = self.clients.get_mut(&id) else {
            return FeedOutcome {
                consumed: input.len(),
                close: true,
                blocked: None,
            };
        };
        if c.closing {
            return FeedOutcome {
                consumed: input.len(),
                close: true,
                blocked: None,
            };
        }
        if self.blocked.is_blocked(id) {
            return FeedOutcome {
                consumed: 0,
                close: false,
                blocked: None,
            };
        }
        c.last_interaction_ms = now_ms;
        c.parser.set_limits(limits);
        let mut parser = std::mem::take(&mut c.parser);
        // The client's per-command state lives here for the whole read and
        // is written back once: commands see it through `Ctx`.
        let mut st = Session {
            db: c.db,
            proto: c.resp,
            last_cmd: c.last_cmd,
            gate: c.gate(),
        };
        let mut spans = std::mem::take(&mut self.spans);
        self.stats.total_reads_processed += 1;
        self.cmdstats.start();
        let mut pos = 0;
        let mut close = false;
        let mut blocked = None;
        // A command the parser assembled was postponed by CLIENT PAUSE: it
        // runs first (or waits again).
        if self.clients.get(&id).is_some_and(|c| c.postponed_in_parser) {
            let flow = self.run(id, parser.argv(), now_ms, out, &mut st);
            if flow == Flow::Postponed {
                blocked = Some(0);
            } else {
                parser.clear_command();
                if let Some(c) = self.clients.get_mut(&id) {
                    c.postponed_in_parser = false;
                }
                close = flow == Flow::CloseAfterReply;
            }
        }
        while blocked.is_none() && !close {
            let rest = &input[pos..];
            let (n, step) = parser.next(rest, &mut spans);
            pos += n;
            let src = match step {
                Step::Command(src) => src,
                Step::NeedMore => break,
                Step::Error(e) => {
                    let reply = e.reply_bytes();
                    if !reply.is_empty() {
                        self.stats.total_error_replies += 1;
                        self.cmdstats.errors_in(&reply);
                    }
                    out.extend_from_slice(&reply);
                    close = true;
                    break;
                }
            };
            let argv = match src {
                Source::Input => Argv::new(rest, &spans),
                Source::Parser => parser.argv(),
            };
            let flow = self.run(id, argv, now_ms, out, &mut st);
            if flow == Flow::Postponed {
                // Leave the command where it is for when the pause ends.
                match src {
                    Source::Input => pos -= n,
                    Source::Parser => {
                        if let Some(c) = self.clients.get_mut(&id) {
                            c.postponed_in_parser = true;
                        }
                    }
                }
                blocked = Some(0);
                break;
            }
            if src == Source::Parser {
                parser.clear_command();
            }
            if flow == Flow::CloseAfterReply {
                close = true;
                break;
            }
            if let Some(t) = self.blocked.just_blocked.take() {
                blocked = Some(t);
                break;
            }
            // Only CLIENT KILL marks a client closing during a command, and
            // it queues the client in `to_close`.
            if !self.to_close.is_empty() && self.clients.get(&id).is_none_or(|c| c.closing) {
                close = true;
                break;
            }
        }
        self.spans = spans;
        self.aof_after_batch(now_ms);
        if let Some(c) = self.clients.get_mut(&id) {
            c.parser = parser;
            st.store(c);
        }
        self.stats.total_net_input_bytes += pos as u64;
        self.stats.total_net_output_bytes += (out.len() - out_start) as u64;
        if crate::client_evict::limit_bytes(self) > 0
            && crate::client_evict::after_feed(self, id, now_ms)
        {
            close = true;
        }
        FeedOutcome {
            consumed: if close { input.len() } else { pos },
            close,
            blocked,
        }
    }

    /// Execute one command (`argv[0]` is the name) for client `id`, appending
    /// the reply to `out`. An unknown `id` runs with a default state (db 0,
    /// RESP2) and no client to update.
    pub fn execute(
        &mut self,
        id: ClientId,
        argv: &[Vec<u8>],
        now_ms: i64,
        out: &mut Vec<u8>,
    ) -> Flow {
        let mut buf = Vec::new();
        let mut spans = Vec::with_capacity(argv.len());
        for a in argv {
            let s = buf.len();
            buf.extend_from_slice(a);
            spans.push((s, buf.len()));
        }
        let mut st = self.clients.get(&id).map_or(
            Session {
                db: 0,
                proto: 2,
                last_cmd: None,
                gate: 0,
            },
            |c| Session {
                db: c.db,
                proto: c.resp,
                last_cmd: c.last_cmd,
                gate: c.gate(),
            },
        );
        self.cmdstats.start();
        let flow = self.run(id, Argv::new(&buf, &spans), now_ms, out, &mut st);
        self.aof_after_batch(now_ms);
        // A blocking command leaves the client blocked (see `feed`); the
        // caller learns it from `is_blocked`.
        self.blocked.just_blocked = None;
        if let Some(c) = self.clients.get_mut(&id) {
            st.store(c);
        }
        flow
    }

    /// Run one command, then apply the client's CLIENT REPLY mode to what
    /// it wrote (only when a mode is set: the gate bit).
    fn run(
        &mut self,
        id: ClientId,
        argv: Argv<'_>,
        now_ms: i64,
        out: &mut Vec<u8>,
        st: &mut Session,
    ) -> Flow {
        let mark = out.len();
        let before = st.gate & GATE_REPLY;
        let flow = self.run_command(id, argv, now_ms, out, st);
        if flow == Flow::Postponed {
            return flow;
        }
        if (before | st.gate) & GATE_REPLY != 0 {
            if let Some(c) = self.clients.get_mut(&id) {
                let (drop, next) = crate::reply_mode::after_command(c.reply_mode);
                if drop {
                    out.truncate(mark);
                }
                c.reply_mode = next;
                st.gate = c.gate();
            }
        }
        flow
    }

    /// Look up and run one command with the client's state in `st`
    /// (Redis's `processCommand`): refusals, then MULTI queueing, then the
    /// call.
    fn run_command(
        &mut self,
        id: ClientId,
        argv: Argv<'_>,
        now_ms: i64,
        out: &mut Vec<u8>,
        st: &mut Session,
    ) -> Flow {
        if argv.is_empty() {
            return Flow::Continue;
        }
        let cmd = match self.lookup_command(argv) {
            Ok(cmd) => cmd,
            Err(msg) => {
                let exec = argv.get(0).is_some_and(|n| n.eq_ignore_ascii_case(b"exec"));
                let stat = self.rejected_id(argv);
                self.reject(id, stat, st, exec, out, &msg);
                return Flow::Continue;
            }
        };
        // The refusals only apply while one of their conditions holds
        // (a client gate bit, maxmemory, a failed bgsave, loading): the
        // common case is this one test.
        if st.gate & (GATE_NOAUTH | GATE_PUBSUB | GATE_MULTI) != 0
            || self.config.maxmemory > 0
            || self.writes_denied()
            || self.is_loading()
            || self.acl_restricted
            || self.pause_pending()
        {
            if let Some(flow) = self.refuse_or_queue(id, cmd, argv, now_ms, out, st) {
                return flow;
            }
        }
        let mark = out.len();
        let mut ctx = Ctx {
            argv,
            now: now_ms,
            out,
            client_id: id,
            db: st.db,
            proto: st.proto,
            close: false,
            errors: 0,
            resync: false,
            deny_blocking: false,
        };
        let dirty_before = self.dirty;
        (cmd.spec.handler)(self, &mut ctx);
        self.settle_dbs(st.db, ctx.db, self.dirty != dirty_before);
        if self.prop.on {
            self.propagate_command(&cmd, argv, st.db, ctx.db, dirty_before);
        }
        if self.config.notify_keyspace_events != 0 || !self.blocked.ready_is_empty() {
            self.after_command(id, cmd, argv, now_ms, &mut ctx);
        }
        self.stats.total_commands_processed += 1;
        self.stats.total_error_replies += ctx.errors;
        // EXEC's queued commands counted their own errors.
        let own_errors = ctx.errors > std::mem::take(&mut self.cmdstats.nested_errors);
        if self.blocked.just_blocked.is_some() {
            // Counted now; its latency when it is served.
            let ns = self.cmdstats.ran_untimed(cmd.id, own_errors);
            self.blocked.set_call(id, cmd.id, ns);
        } else {
            let ns = self.cmdstats.ran(cmd.id, own_errors);
            if ns >= self.latmon.threshold_ns {
                self.latmon.command_spike(cmd.spec, ns);
            }
            if !cmd.spec.flags.contains(&"skip_slowlog") {
                self.slowlog_push(id, argv.iter(), ns, now_ms);
            }
        }
        if self.blocked.served_pending() {
            // After the command that served them, as Redis logs them.
            self.log_served(now_ms);
        }
        if own_errors {
            self.cmdstats.errors_in(&ctx.out[mark..]);
        }
        st.db = ctx.db;
        st.proto = ctx.proto;
        st.last_cmd = Some(cmd);
        if ctx.resync {
            st.gate = self.clients.get(&id).map_or(0, Client::gate);
        }
        if ctx.close {
            Flow::CloseAfterReply
        } else {
            Flow::Continue
        }
    }

    /// A command that took `ns` into the slow log, if it was slow enough.
    #[inline]
    pub(crate) fn slowlog_push<'a>(
        &mut self,
        id: ClientId,
        argv: impl Iterator<Item = &'a [u8]>,
        ns: u64,
        now_ms: i64,
    ) {
        let c = self.clients.get(&id);
        self.slowlog.push_if_needed(
            self.config.slowlog_log_slower_than,
            self.config.slowlog_max_len,
            argv,
            ns / 1000,
            now_ms.div_euclid(1000),
            c.map_or("", |c| c.addr.as_str()),
            c.and_then(|c| c.name.as_deref()).unwrap_or_default(),
        );
    }

    /// After a command, when keyspace events are on or it made blocked
    /// clients ready: its keyspace events, then the blocked clients served
    /// (out of line, see [`Server::run_command`]).
    #[inline(never)]
    fn after_command(
        &mut self,
        id: ClientId,
        cmd: Resolved,
        argv: Argv<'_>,
        now_ms: i64,
        ctx: &mut Ctx<'_>,
    ) {
        if self.config.notify_keyspace_events != 0 {
            if crate::notify::expired_pending(self) {
                crate::notify::drain_expired(self, Some((id, ctx.proto, &mut *ctx.out)), now_ms);
            }
            let name = cmd.parent.unwrap_or(cmd.spec).name;
            crate::notify::command_events(
                self,
                name,
                argv,
                Some((id, ctx.proto, &mut *ctx.out)),
                now_ms,
            );
        }
        if !self.blocked.ready_is_empty() {
            self.serve_ready(now_ms);
            // Pops that served blocked clients are not this command's.
            crate::notify::discard_changes(self);
        }
    }

    pub fn db(&self, index: usize) -> Option<&Db> {
        self.dbs.get(index)
    }

    pub fn db_mut(&mut self, index: usize) -> Option<&mut Db> {
        self.dbs.get_mut(index)
    }

    /// Estimated memory in use: data plus a fixed base plus per-client state.
    pub fn used_memory(&self) -> u64 {
        const BASE: u64 = crate::memory::STARTUP;
        const PER_CLIENT: u64 = 2 * 1024;
        let data: u64 = self.dbs.iter().map(Db::used_memory).sum();
        let clients: u64 = self
            .clients
            .values()
            .map(|c| PER_CLIENT + c.parser.buffered_capacity() as u64)
            .sum();
        BASE + data + clients + self.output_memory()
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&mut self) {
        let peak = self.stats.used_memory_peak;
        self.stats = Stats {
            used_memory_peak: peak,
            ..Default::default()
        };
        for db in &mut self.dbs {
            db.stats = Default::default();
        }
        self.cmdstats.reset();
    }
}
