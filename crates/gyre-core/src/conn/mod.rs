//! Connections: the pool, listening sockets, accept, and I/O.

pub mod accept;
pub(crate) mod first_read;
pub mod io;
pub mod listener;
pub mod pool;
pub mod splice;

pub use self::listener::{ListenOptions, Listener, ListenerId, Protocol};
pub use self::pool::{ConnId, Connection, Event};
