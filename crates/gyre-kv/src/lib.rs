//! gyre's Redis-protocol key-value module (being written).
#![forbid(unsafe_code)]

pub mod conf;
