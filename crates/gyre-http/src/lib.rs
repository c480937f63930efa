//! gyre's HTTP/1.1 module.
//!
//! The core of this crate is a sans-I/O server connection ([`conn`]): bytes
//! and the time go in; parsed requests, response bytes, file segments to
//! send, the close decision and the next deadline come out. Sockets, files
//! and timers belong to the glue that drives it.
#![forbid(unsafe_code)]

pub mod body;
pub mod conn;
pub mod date;
pub mod parse;
pub mod range;
pub mod response;
pub mod settings;
pub mod uri;

pub use body::BodyKind;
pub use conn::{Connection, Disposition, Event, LogRecord, Output, Segment};
pub use parse::{ConnectionOption, Header, Request, Version};
pub use range::RangeDecision;
pub use response::{Body, Response};
pub use settings::{HttpSettings, LingeringClose};
