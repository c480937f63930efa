//! gyre's HTTP/1.1 module.
//!
//! The protocol logic is a sans-I/O state machine (bytes and a time in;
//! requests, bytes and deadlines out); `glue` connects it to gyre-core's
//! connections and timers the way nginx's `ngx_http_init_connection` hooks a
//! listener.
#![forbid(unsafe_code)]

pub mod access_log;
pub mod conf;
pub mod mime;
pub mod static_file;
pub mod stub_status;
