//! Every system call the core makes, and every `unsafe` block in the crate.
//!
//! OS quirks are absorbed here and `io::Result` is returned upward.

pub mod epoll;
pub mod notify;
pub mod pipe;
pub mod poll;
pub mod process;
pub mod shm;
pub mod signal;
pub mod socket;
