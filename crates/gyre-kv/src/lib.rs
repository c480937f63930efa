//! gyre's Redis-protocol key-value module, sans I/O.
//!
//! * [`resp`] — incremental RESP2 request parser (multibulk + inline,
//!   pipelined, Redis's limits and protocol error texts) and RESP2/RESP3
//!   reply encoding.
//! * [`db`] — the keyspace: strings with TTLs (one dense node per key,
//!   short keys and values inline), lazy expiry, O(1) random sampling for
//!   the active expire cycle, SCAN cursor.
//! * [`cmd`] — the command table (assembled from the modules' slices),
//!   the per-call context, shared error texts.
//! * [`t_string`], [`keyspace`] — string and generic key commands.
//! * [`sort`] — SORT and SORT_RO (BY / GET patterns, LIMIT, STORE).
//! * [`server_cmds`], [`config`], [`client`], [`command_docs`] — the
//!   connection and server commands (PING HELLO INFO ..., CONFIG, CLIENT,
//!   COMMAND).
//! * [`server`] — server state, client registry, [`server::Server::feed`]
//!   (parse + execute a read's worth of input), [`server::Server::cron`]
//!   (serverCron minus I/O) and [`server::Server::before_sleep`].
//! * [`hash`] — the keyspace hash (keyed SipHash-1-2).
//! * [`object`] — typed values (TYPE, OBJECT ENCODING, thresholds);
//!   [`t_hash`], [`t_list`], [`t_set`] — one module per type, owning its
//!   storage and commands; [`listpack`], [`intset`], [`quicklist`],
//!   [`dict`] — the encodings they are built from.
//! * [`multi`] — MULTI/EXEC/WATCH (the WATCH registry lives in each
//!   [`db::Db`], touched by every write).
//! * [`pubsub`] — channels, patterns, shard channels, message fan-out into
//!   other clients' output buffers, `client-output-buffer-limit`.
//! * [`t_zset`] — sorted-set commands; [`zset`] — the value (listpack,
//!   then a B+tree with a hash index), score parsing and `%.17g` printing.
//! * [`t_bitops`] — bitmap commands and LCS; [`bitops`], [`lcs`] — the
//!   arithmetic on byte strings.
//!   other clients' output buffers; [`output`] — those buffers and
//!   `client-output-buffer-limit`.
//! * [`notify`] — keyspace events (`notify-keyspace-events`).
//! * [`evict`] — `maxmemory` and the eviction policies; [`client_evict`] —
//!   `maxmemory-clients`.
//! * [`auth`], [`acl`] (with [`acl_cats`], [`sha256`]) — AUTH, RESET,
//!   protected mode, ACL users and permissions; [`acl_log`] — ACL LOG;
//!   [`acl_file`] — `aclfile`, ACL LOAD / SAVE and `user` lines.
//! * [`reply_mode`], [`pause`] — CLIENT REPLY, CLIENT PAUSE.
//! * [`info`] — INFO text; [`cmdstats`] — INFO commandstats / errorstats;
//!   [`latency`] / [`histogram`] — latencystats and LATENCY HISTOGRAM.
//! * [`rdb`] — the RDB v10 format (Redis 7.0's encodings, LZF, CRC64,
//!   crash-safe dump files); [`persist`] — SAVE, the forkless BGSAVE, save
//!   rules, loading at start, INFO persistence; [`rdb_cmds`] — SAVE BGSAVE
//!   LASTSAVE SHUTDOWN DUMP RESTORE BGREWRITEAOF.
//! * [`aof`] — the append-only file: command propagation in effect form
//!   ([`aof::propagate`]), Redis 7's multi-part files and manifest,
//!   appendfsync, the forkless rewrite, loading at start.
//! * [`conf`] — the `kv {}` configuration block; [`redis_conf`] — its
//!   `redis_conf FILE;` (a redis.conf in Redis's syntax), written back by
//!   CONFIG REWRITE ([`config_rewrite`]).
//!
//! # Driving it (the socket glue on gyre-core)
//!
//! ```text
//! server = Server::new(config, now_ms)
//! on accept(fd, peer):  match server.connect(peer, local, fd, now_ms) {
//!                          Ok(id) => register conn with id,
//!                          Err(bytes) => write bytes, close }
//! on readable(conn):    read into conn.inbuf (append)
//!                       out = a reply buffer shared by all connections, cleared
//!                       o = server.feed(id, &conn.inbuf, now_ms, &mut out)
//!                       conn.inbuf.drain(..o.consumed)
//!                       send out (one send per read batch); keep what the
//!                       socket did not take in conn.pending
//!                       if o.close { close after the write; server.disconnect(id) }
//!                       for k in server.take_clients_to_close() { close k; server.disconnect(k) }
//! on closed(conn):      server.disconnect(id)
//! timer (periodic):     r = server.cron(now_ms)
//!                       for k in r.close { close k; server.disconnect(k) }
//!                       if r.expire_backlog and no slicer: start the slicer
//!                       Next::Again(r.next_in_ms)
//! slicer (Config::expire_slices):
//!                       server.expire_slice(now_ms)        (<= 1 ms)
//!                       if server.expire_backlog() { Next::Again(EXPIRE_SLICE_GAP_MS) }
//!                       else { Next::NoMore }
//! before epoll_wait:    server.before_sleep(now_ms)        (fast cycle; off when sliced)
//! ```
//!
//! `now_ms` is Unix time in milliseconds (TTLs are absolute Unix times).
#![forbid(unsafe_code)]

pub mod acl;
pub mod acl_cats;
pub mod acl_cmds;
pub mod acl_file;
pub mod acl_log;
pub mod aof;
pub mod auth;
pub mod bitops;
pub mod blocked;
pub mod client;
pub mod client_evict;
pub mod cmd;
pub mod cmdstats;
pub mod command_docs;
pub mod conf;
pub mod config;
pub mod config_rewrite;
pub mod counted;
pub mod db;
pub mod debug;
pub mod dict;
pub mod evict;
pub mod float;
pub mod glob;
pub mod glue;
pub mod hash;
pub mod histogram;
pub mod info;
pub mod intset;
pub mod keyspace;
pub mod latency;
pub mod latency_monitor;
pub mod lcs;
pub mod listpack;
pub mod memory;
pub mod multi;
pub mod notify;
pub mod object;
pub mod output;
pub mod pause;
pub mod persist;
pub mod process_cmd;
pub mod pubsub;
pub mod quicklist;
pub mod rdb;
pub mod rdb_cmds;
pub mod redis_conf;
pub mod reply_mode;
pub mod resp;
pub mod server;
pub mod server_cmds;
pub mod sha256;
pub mod slowlog;
pub mod sort;
pub mod t_bitops;
pub mod t_hash;
pub mod t_list;
pub mod t_set;
pub mod t_string;
pub mod t_zset;
pub mod tls;
pub mod util;
pub mod zset;

/// The Redis version this module answers as (INFO, HELLO).
pub const REDIS_VERSION: &str = "7.0.15";

pub use resp::{Limits, Parsed, ProtocolError, Reply, RequestParser};
pub use server::{ClientId, Config, CronOutcome, FeedOutcome, Flow, Server};
