//! gyre's HTTP/1.1 module.
//!
//! The core of this crate is a sans-I/O server connection ([`conn`]): bytes
//! and the time go in; parsed requests, response bytes, file segments to
//! send, the close decision and the next deadline come out. Sockets, files
//! and timers belong to the [`glue`] that drives it on gyre-core's connections
//! and timers, the way nginx's `ngx_http_init_connection` takes over a
//! listener's connections. Around them: the `http {}` configuration
//! ([`conf`]), static files with the open-file cache ([`static_file`]),
//! stub_status ([`stub_status`]) and the access log ([`access_log`]).
#![forbid(unsafe_code)]

pub mod access;
pub mod access_log;
pub mod auth_basic;
pub mod autoindex;
pub mod body;
pub mod build_info;
pub mod complex_value;
pub mod conf;
pub mod conn;
pub mod date;
pub mod dav;
pub mod glue;
pub mod gzip;
pub mod gzip_static;
pub mod htpasswd;
pub mod limit_conn;
pub mod limit_except;
pub mod limit_req;
pub mod limit_zone;
pub mod location;
pub mod log_error;
pub mod log_format;
pub mod map;
pub mod mime;
pub mod parse;
pub mod phases;
pub mod proxy;
pub mod range;
pub mod realip;
pub mod regex;
pub mod regex_prefilter;
pub mod request;
pub mod request_body;
pub mod response;
pub mod rewrite;
pub mod settings;
pub mod split_geo;
pub mod ssl;
pub mod ssl_session;
pub mod ssl_shared_cache;
pub mod static_file;
pub mod static_handler;
pub mod stub_status;
pub mod temp_file;
pub mod upstream;
pub mod uri;
pub mod variables;

pub use body::BodyKind;
pub use conn::{Chunk, Connection, Disposition, Event, LogRecord, Output, Segment};
pub use parse::{ConnectionOption, Request, Version};
pub use range::RangeDecision;
pub use response::{Body, Headers, Response, Text};
pub use settings::{HttpSettings, LingeringClose};
