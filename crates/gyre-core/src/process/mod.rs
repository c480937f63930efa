//! The master/worker process model (nginx's `ngx_process_cycle.c`) and the
//! shared-memory zone.
//!
//! Owns: [`shm`] (the zone with the accept mutex and stub_status counters),
//! [`listening`] (binding the listeners a configuration asks for, keeping
//! them across reloads), [`worker`] (one worker's life: its own multiplexer
//! after fork, signals turned into loop actions) and [`master`] (binding,
//! forking, signals, respawn, reload).
//!
//! A server built on the core plugs in through [`App`]: the master asks it
//! which sockets to bind, and each worker asks it to put a protocol on each
//! listener. The core knows no protocol.

pub mod listening;
pub mod master;
pub mod shm;
pub mod worker;

use std::io;

use crate::conf::Conf;
use crate::conn::{ListenOptions, Listener};
use crate::event::Core;

/// Exit code of a worker that cannot work (bad configuration in the
/// worker, no multiplexer): the master does not respawn it (nginx's
/// fatal code 2).
pub const EXIT_FATAL: i32 = 2;

/// What a server on the core tells the process model.
pub trait App {
    /// The sockets `conf` listens on, in a stable order.
    fn listeners(&self, conf: &Conf) -> Vec<ListenOptions>;

    /// Runs in each worker once its loop exists (nginx's `init_process`):
    /// put a protocol on each listener — `listeners[i]` is bound for
    /// `self.listeners(conf)[i]` — and create time events.
    fn init_worker(
        &self,
        conf: &Conf,
        core: &mut Core,
        listeners: Vec<Listener>,
        worker: usize,
    ) -> io::Result<()>;

    /// Sockets served by the singleton process instead of the workers: a
    /// protocol whose state must live in exactly one process (a keyspace).
    /// The master runs the singleton beside the workers when this is not
    /// empty, respawns it if it dies, and stops it on quit.
    fn singleton_listeners(&self, _conf: &Conf) -> Vec<ListenOptions> {
        Vec::new()
    }

    /// Runs in the singleton process once its loop exists.
    fn init_singleton(
        &self,
        _conf: &Conf,
        _core: &mut Core,
        _listeners: Vec<Listener>,
    ) -> io::Result<()> {
        Ok(())
    }

    /// Whether a reload from `old` to `new` must replace the singleton
    /// (losing its in-memory state); if not, it keeps running.
    fn singleton_changed(&self, _old: &Conf, _new: &Conf) -> bool {
        true
    }

    /// The singleton's name in log lines ("kv process").
    fn singleton_name(&self) -> &'static str {
        "singleton process"
    }
}

/// What a forked child of the master does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Worker number `n` (0-based).
    Worker(usize),
    /// The singleton process.
    Singleton,
}
