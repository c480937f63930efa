//! gyre-core: an nginx-architecture event core.
//!
//! What this crate owns, top to bottom (data flows one way: config → cycle →
//! workers → event loop → connection → protocol handler):
//!
//! - [`conf`]: nginx-syntax configuration (lexer, parser, directive tables).
//! - [`process`]: the master/worker process model and the shared-memory zone
//!   (accept mutex, stub_status counters).
//! - [`event`]: the event loop (`ngx_process_events_and_timers`), the
//!   multiplexing "actions" ([`event::Actions`]: epoll, poll), timers, Redis
//!   style time events, posted queues and the cached clock.
//! - [`conn`]: the preallocated connection pool, listening sockets, the accept
//!   path and connection I/O.
//! - [`sys`]: every system call and every `unsafe` block.
//!
//! The core knows nothing of HTTP or RESP: a protocol plugs in by giving each
//! listener a [`conn::Protocol`], whose `init_connection` is called for every
//! accepted connection (nginx's `ls->handler`).

pub mod conf;
pub mod conn;
pub mod errlog;
pub mod event;
pub mod process;
pub mod sys;

/// An OS error as nginx prints it: `98: Address already in use`.
pub fn sys_error_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let s = e.to_string();
            // std formats "Address already in use (os error 98)".
            let text = s.split(" (os error").next().unwrap_or(&s);
            format!("{code}: {text}")
        }
        None => e.to_string(),
    }
}
