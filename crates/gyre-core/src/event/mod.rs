//! The event loop and everything it schedules.

pub mod actions;
pub mod clock;
pub mod core;
pub mod posted;
pub mod time_event;
pub mod timer;

pub use self::clock::{msec_before, msec_diff, Clock, Msec};
