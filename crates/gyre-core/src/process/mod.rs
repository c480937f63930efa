//! The master/worker process model and the shared-memory zone.
//!
//! Owns what is shared between processes: [`shm`] (the zone with the accept
//! mutex and stub_status counters). The master/worker cycles and the
//! master↔worker channel are added alongside as `master`, `worker` and
//! `channel`.

pub mod shm;
