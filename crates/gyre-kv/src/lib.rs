//! gyre's Redis-protocol key-value module, sans I/O.
//!
//! * [`resp`] — incremental RESP2 request parser (multibulk + inline,
//!   pipelined, Redis's limits and protocol error texts) and RESP2/RESP3
//!   reply encoding.
//! * [`db`] — the keyspace: strings with TTLs, lazy expiry, O(1) random
//!   sampling for the active expire cycle, SCAN cursor.
//! * [`cmd`] — the command table and Redis 7.0 command semantics.
//! * [`server`] — server state, client registry, [`server::Server::feed`]
//!   (parse + execute a read's worth of input), [`server::Server::cron`]
//!   (serverCron minus I/O) and [`server::Server::before_sleep`].
//! * [`info`] — INFO text.
//!
//! The socket glue (on gyre-core) owns connections and timers; see the
//! crate README section in `server.rs` docs for how to drive it.
#![forbid(unsafe_code)]

pub mod cmd;
pub mod db;
pub mod float;
pub mod glob;
pub mod info;
pub mod resp;
pub mod server;
pub mod util;

/// The Redis version this module answers as (INFO, HELLO).
pub const REDIS_VERSION: &str = "7.0.15";

pub use resp::{Limits, Parsed, ProtocolError, Reply, RequestParser};
pub use server::{ClientId, Config, CronOutcome, FeedOutcome, Flow, Server};
