//! The per-connection HTTP/1.x state machine.
//!
//! Owns everything that happens on one client connection between accept and
//! close, minus the I/O: buffering of unparsed input, request heads,
//! body framing (discarding or collecting), keep-alive and pipelining,
//! nginx's error responses, lingering-close decisions, timeouts expressed
//! as deadlines, and the per-request facts an access log needs.
//!
//! # Driving it
//!
//! ```text
//! conn = Connection::new(settings, now)
//! arm timer at conn.next_deadline()
//! on readable:
//!     if conn.wants_read():
//!         conn.supply_buffer(pool.get())            // optional pooling
//!         n = read(fd, buf); if n == 0 { conn.on_eof(now) } else { conn.on_read(&buf[..n], now) }
//! on timer:  conn.on_timeout(now)
//! then, after either:
//!     while let Some(ev) = conn.poll(now, date):
//!         Request(req) => conn.respond(handler(req), now, date)   // or collect_body() first
//!         Body(bytes) / BodyEnd / BodyError(status) => for handlers that collect
//!     while let Some(chunk) = conn.next_output():          // bytes and file regions, in order
//!         n = send(fd, bytes) or sendfile(fd, file, region); conn.consume_output(n)
//!     (or take it all at once with conn.take_output(), which copies)
//!     for rec in conn.take_logs(): access_log(rec)
//!     once everything is written:
//!         match conn.disposition():
//!             Open   => if conn.is_idle() { pool.put(conn) }       // reuse() it later
//!             Close  => close(fd)
//!             Linger => shutdown(fd, WR); conn.start_lingering(now)   // keep reading until Close
//!     re-arm timer at conn.next_deadline()   // None: no timer (send_timeout is the glue's)
//! ```
//!
//! Times are gyre-core [`Msec`] values and are compared wraparound-safely.
//!
//! Nothing here allocates per request once a machine has served one: the
//! input buffer, the parser's offsets, the [`Request`] (handed back with
//! [`Connection::recycle`]) and the output buffer keep their capacity, and
//! a glue can pool whole machines across connections with
//! [`Connection::reuse`].

use gyre_core::event::clock::{msec_before, Msec};

use crate::body::BodyDecoder;
use crate::parse::{HeadParser, Request};
use crate::response::{bodiless, Response};
use crate::settings::HttpSettings;

mod err_note;
mod head;
mod keepalive;
mod output;
mod request_body;
mod respond;
mod stream;

pub use err_note::{ErrKind, ErrNote};
pub(crate) use err_note::{HeadErr, Line as HeadLine};
pub use stream::StreamFraming;

/// Something the glue must act on, returned by [`Connection::poll`].
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// A complete request head. Answer it with [`Connection::respond`]
    /// (optionally after [`Connection::collect_body`]). No further event
    /// comes until then, which keeps pipelined responses in order.
    Request(Box<Request>),
    /// Decoded body bytes of the current request (collect mode only).
    Body(Vec<u8>),
    /// The current request's body is complete (collect mode only).
    BodyEnd,
    /// The body was refused (400 bad framing, 413 too large); the machine
    /// already queued the error response and will close. Drop the request.
    BodyError(u16),
}

/// One piece of output, in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Bytes to write (heads and in-memory bodies, batched together).
    Bytes(Vec<u8>),
    /// A file region the glue sends itself (sendfile), identified by the
    /// token it gave in [`Body::File`](crate::response::Body::File).
    File {
        /// Glue-defined file identifier.
        token: u64,
        /// First byte.
        offset: u64,
        /// Length.
        len: u64,
    },
}

/// The next piece of output to write, from [`Connection::next_output`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// Bytes to send (all adjacent in-memory output, heads and bodies).
    Bytes(&'a [u8]),
    /// The unsent part of a file region.
    File {
        /// Glue-defined file identifier.
        token: u64,
        /// First unsent byte.
        offset: u64,
        /// Bytes left.
        len: u64,
    },
}

/// Queued output: bytes in one buffer, delimited into segments around
/// file regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutSeg {
    Bytes { start: usize, end: usize },
    File { token: u64, offset: u64, len: u64 },
}

/// Output buffers above this are freed once written, so one large
/// response does not pin memory in a pooled machine.
const KEEP_OUT_CAPACITY: usize = 32 * 1024;
/// Input buffers above this are freed when a pooled machine is reused (the
/// pool is bounded, so at most a few such buffers wait there).
const KEEP_IN_CAPACITY: usize = 16 * 1024;

/// Everything queued for writing since the last [`Connection::take_output`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Output {
    /// Segments in order; adjacent byte segments are merged.
    pub segments: Vec<Segment>,
}

impl Output {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Total bytes on the wire.
    pub fn len(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Bytes(b) => b.len() as u64,
                Segment::File { len, .. } => *len,
            })
            .sum()
    }

    /// All byte segments concatenated, with file segments skipped (tests
    /// and simple glues without file bodies).
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        for s in &self.segments {
            if let Segment::Bytes(b) = s {
                v.extend_from_slice(b);
            }
        }
        v
    }
}

/// What the glue should do with the socket once the output is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Keep serving.
    Open,
    /// Close now.
    Close,
    /// Shut down the write side, then keep reading (and discarding) until
    /// EOF or the lingering deadline, so the client sees our response
    /// instead of a reset (nginx's lingering close).
    Linger,
}

/// Per-request facts for the access log (nginx's `combined` fields).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRecord {
    /// `$request`: the request line as sent, empty if none was parsed.
    pub request_line: Vec<u8>,
    /// `$status` as sent on the wire (or 408/400 for requests that got no
    /// response because the client timed out or went away).
    pub status: u16,
    /// `$body_bytes_sent` (as queued; the glue may correct it after a
    /// failed write).
    pub body_bytes_sent: u64,
    /// `$bytes_sent`: head plus body.
    pub bytes_sent: u64,
    /// `$http_referer`.
    pub referer: Option<Vec<u8>>,
    /// `$http_user_agent`.
    pub user_agent: Option<Vec<u8>>,
    /// `$host` when known.
    pub host: Option<String>,
    /// `$remote_user`: the user of an `Authorization: Basic` header.
    pub remote_user: Option<String>,
    /// When the request's first byte was processed.
    pub start: Msec,
    /// When the response was queued.
    pub end: Msec,
    /// Where the glue routes the line: 0 until the glue sets it with
    /// [`Connection::set_log_sink`] when it routes the request (records
    /// the machine makes on its own, for refused heads, stay 0).
    pub sink: u32,
    /// `$remote_addr` when the glue replaced the connection's peer for the
    /// request (the realip module); `None`: the connection's.
    pub peer: Option<std::net::SocketAddr>,
}

/// Returned by [`Connection::respond`] when no request awaits a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotPending;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between requests; holds no request data.
    Idle,
    /// Receiving a request head.
    Head,
    /// A request was handed out; waiting for `respond`.
    Pending,
    /// Response queued; discarding the rest of the request body.
    Discard,
    /// Decided to close (see `disposition`); waiting for the glue.
    Done,
    /// Lingering after shutdown(SHUT_WR).
    Lingering,
}

#[derive(Debug)]
struct Current {
    keep_alive: bool,
    head: bool,
    decoder: BodyDecoder,
    collect: bool,
    body_end_sent: bool,
    expect_continue: bool,
    /// Body bytes still to come of a streamed response
    /// ([`Connection::respond_head`]); `None` when not streaming.
    streaming: Option<u64>,
    /// HTTP/1.1 or later: a body of unknown length can go chunked.
    http11: bool,
    /// The streamed body is sent in chunks ([`Response::chunked`]).
    chunked: bool,
    log: LogRecord,
}

/// One HTTP/1.x server connection, without I/O.
#[derive(Debug)]
pub struct Connection {
    st: HttpSettings,
    state: State,
    /// Unparsed input: a partial head, pipelined requests, body bytes.
    /// Empty (and releasable) while idle.
    inbuf: Vec<u8>,
    head: HeadParser,
    head_start: Msec,
    cur: Option<Current>,
    /// A request handed back by the glue, reused for the next head.
    spare: Option<Box<Request>>,
    /// Queued output bytes; `segs[seg_head..]` are unsent, `out[out_pos..]`
    /// the unsent bytes, `file_off` the sent part of a file segment.
    out: Vec<u8>,
    segs: Vec<OutSeg>,
    seg_head: usize,
    out_pos: usize,
    file_off: u64,
    logs: Vec<LogRecord>,
    requests: u64,
    created: Msec,
    last_read: Msec,
    idle_since: Msec,
    linger_start: Msec,
    eof: bool,
    disposition: Disposition,
    /// Body and total bytes of the last response queued.
    last_sent: (u64, u64),
    /// Facts for the error log, in order (see [`Connection::take_notes`]);
    /// empty and unallocated unless something went wrong.
    notes: Vec<ErrNote>,
    /// The request whose unread body is being discarded, handed over by
    /// the glue so lines about the body name it as nginx's do (see
    /// [`Connection::keep_discarded`]).
    discarded: Option<Box<Request>>,
    /// The status of a request whose body was being read when the machine
    /// ended it itself (408 timed out, 400 the client left); see
    /// [`Connection::ended_status`].
    ended: Option<u16>,
}

/// A note about `req`'s body, naming it (when known) as nginx's lines
/// about a request do, without an action.
fn request_note(kind: ErrKind, req: Option<&Request>) -> ErrNote {
    let header = |name: &str| {
        req.and_then(|r| r.header(name))
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    ErrNote {
        kind,
        request_line: req
            .map(|r| String::from_utf8_lossy(r.request_line()).into_owned())
            .unwrap_or_default(),
        host: header("Host"),
        detail: None,
        action: None,
        referrer: header("Referer"),
        about_request: true,
    }
}

fn reached(now: Msec, deadline: Msec) -> bool {
    !msec_before(now, deadline)
}

/// Whether a response goes chunked (nginx's chunked filter): a body of
/// unknown length to an HTTP/1.1 client, not for HEAD or bodiless statuses.
pub(crate) fn chunked_for(resp: &Response, http11: bool, head_only: bool) -> bool {
    resp.chunked && http11 && !head_only && !bodiless(resp.status)
}

impl Connection {
    /// A freshly accepted connection.
    pub fn new(settings: HttpSettings, now: Msec) -> Connection {
        let head = HeadParser::new(&settings);
        Connection {
            st: settings,
            state: State::Idle,
            inbuf: Vec::new(),
            head,
            head_start: now,
            cur: None,
            spare: None,
            out: Vec::new(),
            segs: Vec::new(),
            seg_head: 0,
            out_pos: 0,
            file_off: 0,
            logs: Vec::new(),
            requests: 0,
            created: now,
            last_read: now,
            idle_since: now,
            linger_start: now,
            eof: false,
            disposition: Disposition::Open,
            last_sent: (0, 0),
            notes: Vec::new(),
            discarded: None,
            ended: None,
        }
    }

    /// Rebuilds the machine of a kept-alive connection whose glue dropped it
    /// while idle (so an idle connection holds no parser state): the request
    /// count and the connection's creation time carry over.
    pub fn resume(settings: HttpSettings, now: Msec, requests: u64, created: Msec) -> Connection {
        let mut c = Connection::new(settings, now);
        c.requests = requests;
        c.created = created;
        c
    }

    /// Makes this machine serve another connection (or the same one after
    /// an idle period), as [`Connection::resume`] would, but keeping the
    /// capacity of its buffers: pooled machines make requests allocation
    /// free.
    pub fn reuse(&mut self, settings: HttpSettings, now: Msec, requests: u64, created: Msec) {
        self.head.reset(&settings);
        self.st = settings;
        self.state = State::Idle;
        self.inbuf.clear();
        if self.inbuf.capacity() > KEEP_IN_CAPACITY {
            self.inbuf = Vec::new();
        }
        self.head_start = now;
        self.cur = None;
        self.clear_output();
        self.logs.clear();
        self.requests = requests;
        self.created = created;
        self.last_read = now;
        self.idle_since = now;
        self.linger_start = now;
        self.eof = false;
        self.disposition = Disposition::Open;
        self.notes.clear();
        self.ended = None;
        if let Some(d) = self.discarded.take() {
            self.recycle(d);
        }
    }

    /// Hands a request back after it was answered, so the next one reuses
    /// its buffers.
    pub fn recycle(&mut self, req: Box<Request>) {
        if self.spare.is_none() {
            self.spare = Some(req);
        }
    }

    /// When the connection was accepted.
    pub fn created(&self) -> Msec {
        self.created
    }

    /// The settings in force.
    pub fn settings(&self) -> &HttpSettings {
        &self.st
    }

    /// Adjusts the settings once the request's location is known (nginx's
    /// keep-alive and body limits are per location).
    pub fn settings_mut(&mut self) -> &mut HttpSettings {
        &mut self.st
    }

    /// Bytes received from the client.
    pub fn on_read(&mut self, data: &[u8], now: Msec) {
        if data.is_empty() {
            return;
        }
        self.last_read = now;
        match self.state {
            State::Done | State::Lingering => {}
            State::Idle => {
                self.state = State::Head;
                self.head_start = now;
                self.inbuf.extend_from_slice(data);
            }
            _ => self.inbuf.extend_from_slice(data),
        }
    }

    /// The client closed its sending side (read returned 0).
    pub fn on_eof(&mut self, _now: Msec) {
        self.eof = true;
        match self.state {
            State::Idle => self.close(Disposition::Close),
            State::Lingering => self.disposition = Disposition::Close,
            _ => {}
        }
    }

    /// Call when the timer armed at [`Connection::next_deadline`] fires.
    /// Timeouts never produce a response (nginx's `client timed out`): the
    /// connection is closed, and a request in progress is logged as 408.
    pub fn on_timeout(&mut self, now: Msec) {
        let Some(d) = self.next_deadline() else {
            return;
        };
        if !reached(now, d) {
            return;
        }
        match self.state {
            State::Head if self.head.started() => {
                let kind = if self.head.line_parsed() {
                    ErrKind::TimedOutHeaders
                } else {
                    ErrKind::TimedOutLine
                };
                self.note_head(err_note::note(kind, &self.head, &self.inbuf));
                let rec = self.bare_log(408, now);
                self.logs.push(rec);
            }
            State::Pending => {
                self.ended = Some(408);
                if let Some(cur) = self.cur.take() {
                    let mut log = cur.log;
                    log.status = 408;
                    log.end = now;
                    self.logs.push(log);
                }
            }
            _ => {}
        }
        self.close(Disposition::Close);
        self.disposition = Disposition::Close;
    }

    /// When the glue must call [`Connection::on_timeout`], if ever.
    pub fn next_deadline(&self) -> Option<Msec> {
        let st = &self.st;
        match self.state {
            State::Idle if self.requests == 0 => {
                Some(self.created.wrapping_add(st.client_header_timeout))
            }
            State::Idle => Some(self.idle_since.wrapping_add(st.keepalive_timeout)),
            State::Head => Some(self.head_start.wrapping_add(st.client_header_timeout)),
            State::Pending => match &self.cur {
                Some(c) if c.collect && !c.decoder.is_done() => {
                    Some(self.last_read.wrapping_add(st.client_body_timeout))
                }
                _ => None,
            },
            State::Discard => Some(self.last_read.wrapping_add(st.client_body_timeout)),
            State::Done => None,
            State::Lingering => {
                let total = self.linger_start.wrapping_add(st.lingering_time);
                let each = self.last_read.wrapping_add(st.lingering_timeout);
                Some(if msec_before(each, total) {
                    each
                } else {
                    total
                })
            }
        }
    }

    /// Whether the glue should read from the socket now. False while a
    /// request awaits its response (unless its body is being collected), so
    /// a slow handler cannot make the machine buffer unbounded input, and
    /// after a plain close decision.
    pub fn wants_read(&self) -> bool {
        match self.state {
            State::Pending => self
                .cur
                .as_ref()
                .is_some_and(|c| c.collect && !c.decoder.is_done()),
            State::Done => self.disposition == Disposition::Linger,
            _ => !self.eof,
        }
    }

    /// True between requests: no request state and no buffered input.
    pub fn is_idle(&self) -> bool {
        self.state == State::Idle && self.inbuf.is_empty()
    }

    /// Hands the (empty) input buffer back for pooling when idle, so an
    /// idle keep-alive connection holds no request memory.
    pub fn release_buffers(&mut self) -> Option<Vec<u8>> {
        if self.is_idle() && self.inbuf.capacity() > 0 {
            Some(std::mem::take(&mut self.inbuf))
        } else {
            None
        }
    }

    /// Lends a pooled buffer for input; ignored if one is already held.
    pub fn supply_buffer(&mut self, mut buf: Vec<u8>) {
        if self.inbuf.capacity() == 0 {
            buf.clear();
            self.inbuf = buf;
        }
    }

    /// Ends the pending request without a response: the client went away
    /// (nginx logs it with `status`, 499), and the connection closes.
    pub fn abandon_request(&mut self, status: u16, now: Msec) {
        if let Some(cur) = self.cur.take() {
            let mut log = cur.log;
            log.status = status;
            log.end = now;
            if self.st.log_requests {
                self.logs.push(log);
            }
        }
        self.close(Disposition::Close);
    }

    /// Takes the unparsed input (bytes a client sent after a request that
    /// switched protocols: they belong to the tunnel, not to HTTP).
    pub fn take_input(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.inbuf);
        self.inbuf.clear();
        if self.state == State::Head {
            self.state = State::Idle;
            self.head.reset(&self.st);
        }
    }

    /// Capacity of the input buffer currently held (0 after release).
    pub fn buffered_capacity(&self) -> usize {
        self.inbuf.capacity()
    }

    /// The status the machine logged for the request it ended while its
    /// body was being read (408: `client_body_timeout`, 400: the client
    /// closed or reset the connection), for the handler that was reading.
    pub fn ended_status(&self) -> Option<u16> {
        self.ended
    }

    /// Requests started on this connection so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Takes the access-log records of requests finished since last time.
    pub fn take_logs(&mut self) -> Vec<LogRecord> {
        std::mem::take(&mut self.logs)
    }

    /// Removes the finished requests' records, keeping the vector.
    pub fn drain_logs(&mut self) -> std::vec::Drain<'_, LogRecord> {
        self.logs.drain(..)
    }

    /// What the machine met that nginx writes to the error log (a refused
    /// request line, a client that timed out sending its head), once.
    pub fn take_notes(&mut self) -> Vec<ErrNote> {
        std::mem::take(&mut self.notes)
    }

    /// True when there are facts for the error log.
    pub fn has_notes(&self) -> bool {
        !self.notes.is_empty()
    }

    /// A note about the head being read, after those about the header
    /// lines it ignored (nginx logs each as it parses it).
    fn note_head(&mut self, n: ErrNote) {
        self.note_ignored();
        self.notes.push(n);
    }

    fn note_ignored(&mut self) {
        if !self.head.ignored.is_empty() {
            err_note::ignored_notes(&self.head, &self.inbuf, &mut self.notes);
            self.head.ignored.clear();
        }
    }

    /// recv() failed (`ECONNRESET` from a client's RST): nginx's
    /// `recv() failed (104: Connection reset by peer)` with the action of
    /// the moment, and the close. Between requests there is nothing to
    /// say here (the glue writes nginx's keep-alive and waiting lines).
    pub fn on_recv_error(&mut self, err: &std::io::Error, now: Msec) {
        let text = format!("recv() failed ({})", gyre_core::sys_error_text(err));
        match self.state {
            State::Head if self.head.started() => {
                let kind = if self.head.line_parsed() {
                    ErrKind::TimedOutHeaders
                } else {
                    ErrKind::TimedOutLine
                };
                let mut n = err_note::note(kind, &self.head, &self.inbuf);
                n.kind = ErrKind::RecvFailed;
                n.detail = Some(text);
                self.note_head(n);
                let rec = self.bare_log(400, now);
                self.logs.push(rec);
            }
            // Lingering after a response: nginx's lingering handler names
            // the request it answered.
            State::Lingering | State::Done if self.discarded.is_none() => {}
            State::Pending | State::Discard | State::Lingering | State::Done => {
                let mut n = self.body_note(ErrKind::RecvFailed);
                n.detail = Some(text);
                self.notes.push(n);
                if let Some(cur) = self.cur.take() {
                    if self.state == State::Pending {
                        self.ended = Some(400);
                        let mut log = cur.log;
                        log.status = 400;
                        log.end = now;
                        self.logs.push(log);
                    }
                }
            }
            _ => {}
        }
        self.close(Disposition::Close);
    }

    /// True when records are waiting.
    pub fn has_logs(&self) -> bool {
        !self.logs.is_empty()
    }

    /// Tags the pending request's record with a glue-defined destination
    /// (see [`LogRecord::sink`]).
    pub fn set_log_sink(&mut self, sink: u32) {
        if let Some(cur) = &mut self.cur {
            cur.log.sink = sink;
        }
    }

    /// Tags the pending request's record with the client address the glue
    /// took for it (see [`LogRecord::peer`]).
    pub fn set_log_peer(&mut self, peer: Option<std::net::SocketAddr>) {
        if let Some(cur) = &mut self.cur {
            cur.log.peer = peer;
        }
    }

    /// Advances the machine over buffered input. Call until `None` after
    /// every read, timeout or respond. `date` is the cached `Date:` value
    /// used if the machine has to answer an error itself.
    pub fn poll(&mut self, now: Msec, date: &str) -> Option<Event> {
        loop {
            match self.state {
                State::Done | State::Lingering => return None,
                State::Idle => {
                    if self.inbuf.is_empty() {
                        if self.eof {
                            self.close(Disposition::Close);
                        }
                        return None;
                    }
                    self.state = State::Head;
                    self.head_start = now;
                }
                State::Head => return self.poll_head(now, date),
                State::Pending => return self.poll_pending(now, date),
                State::Discard => {
                    if !self.poll_discard(now) {
                        return None;
                    }
                }
            }
        }
    }

    fn bare_log(&self, status: u16, now: Msec) -> LogRecord {
        LogRecord {
            request_line: self.head.logged_line(&self.inbuf).to_vec(),
            status,
            body_bytes_sent: 0,
            bytes_sent: 0,
            referer: None,
            user_agent: None,
            host: None,
            remote_user: None,
            start: self.head_start,
            end: now,
            sink: 0,
            peer: None,
        }
    }
}
