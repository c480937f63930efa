//! The event loop and everything it schedules.

pub mod actions;
pub mod clock;
pub mod coalesce;
pub mod connect;
pub mod core;
pub mod epoll;
pub mod poll;
pub mod posted;
pub mod time_event;
pub mod timer;
pub mod tls;
pub mod tls_ciphers;
pub mod tls_client;
pub mod tls_conf;
mod tls_record;
pub mod tls_x509;

pub use self::actions::{Actions, Backend, Interest, Readiness, Trigger};
pub use self::clock::{msec_before, msec_diff, Clock, Msec};
pub use self::connect::{ConnectOptions, PeerAddr, TlsConnect};
pub use self::core::{
    AcceptMutex, Core, CoreOptions, CoreStats, Ev, EvKind, Handler, Notifier, TimeEventHandler,
};
pub use self::time_event::{Next, TimeEventId, UnknownTimeEvent};
