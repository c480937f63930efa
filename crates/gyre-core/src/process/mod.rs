//! The master/worker process model and the shared-memory zone (being written).
