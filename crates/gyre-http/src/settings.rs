//! Per-server HTTP limits and timeouts, with nginx's defaults.
//!
//! The state machine reads only this struct; the configuration layer maps
//! directives onto it, so the machine stays independent of the conf parser.

/// What to do with unread client data when closing after a response
/// (nginx's `lingering_close`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LingeringClose {
    /// Close at once (may RST the client's in-flight data).
    Off,
    /// Linger only when the client may still be sending (nginx default).
    On,
    /// Always linger.
    Always,
}

/// Limits and timeouts of one virtual server. Times are milliseconds.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// `client_header_buffer_size` (1k): the first buffer a head is read into.
    pub client_header_buffer_size: usize,
    /// `large_client_header_buffers` count (4).
    pub large_header_buffers: usize,
    /// `large_client_header_buffers` size (8k): bounds the request line and
    /// each header line.
    pub large_header_buffer_size: usize,
    /// `client_max_body_size` (1m); 0 disables the check.
    pub client_max_body_size: u64,
    /// `client_header_timeout` (60s), counted from a request's first byte.
    pub client_header_timeout: u64,
    /// `client_body_timeout` (60s), between two reads of a body.
    pub client_body_timeout: u64,
    /// `keepalive_timeout` (75s); 0 disables keep-alive.
    pub keepalive_timeout: u64,
    /// `keepalive_requests` (1000): the last one is answered with close.
    pub keepalive_requests: u64,
    /// `keepalive_time` (1h): no keep-alive past this connection age.
    pub keepalive_time: u64,
    /// `lingering_close` (on).
    pub lingering_close: LingeringClose,
    /// `lingering_time` (30s): total lingering.
    pub lingering_time: u64,
    /// `lingering_timeout` (5s): wait for more data while lingering.
    pub lingering_timeout: u64,
    /// `merge_slashes` (on).
    pub merge_slashes: bool,
    /// `underscores_in_headers` (off): names with `_` are ignored.
    pub underscores_in_headers: bool,
    /// `ignore_invalid_headers` (on): names with odd bytes are ignored.
    pub ignore_invalid_headers: bool,
    /// Keep per-request log records ([`take_logs`](crate::Connection::take_logs));
    /// off when no access log is written, which saves their allocations.
    pub log_requests: bool,
    /// `server_tokens`: `Server: gyre/VERSION` and pages signed so (the
    /// configuration's default is nginx's `on`; a machine made without one
    /// says `gyre` alone).
    pub server_tokens: bool,
    /// `send_timeout` of the request being answered (the glue arms it
    /// while output waits; the machine does not use it).
    pub send_timeout: u64,
}

impl Default for HttpSettings {
    fn default() -> HttpSettings {
        HttpSettings {
            client_header_buffer_size: 1024,
            server_tokens: false,
            large_header_buffers: 4,
            large_header_buffer_size: 8192,
            client_max_body_size: 1024 * 1024,
            client_header_timeout: 60_000,
            client_body_timeout: 60_000,
            keepalive_timeout: 75_000,
            keepalive_requests: 1000,
            keepalive_time: 3_600_000,
            lingering_close: LingeringClose::On,
            lingering_time: 30_000,
            lingering_timeout: 5_000,
            merge_slashes: true,
            underscores_in_headers: false,
            ignore_invalid_headers: true,
            log_requests: true,
            send_timeout: 60_000,
        }
    }
}
