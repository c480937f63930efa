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
use crate::parse::{HeadParser, HeadStatus, Request};
use crate::response::{bodiless, versioned_page, wire_status, write_head, Body, Response};
use crate::settings::{HttpSettings, LingeringClose};

mod err_note;
mod output;
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
    /// token it gave in [`Body::File`].
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

    /// What to do with the socket once the output is written.
    pub fn disposition(&self) -> Disposition {
        self.disposition
    }

    /// True once the machine decided to close (Close or Linger).
    pub fn wants_close(&self) -> bool {
        self.disposition != Disposition::Open
    }

    /// The glue wrote everything and shut down its write side; from now on
    /// reads are discarded until EOF or the lingering deadline.
    pub fn start_lingering(&mut self, now: Msec) {
        if self.disposition == Disposition::Linger {
            self.state = State::Lingering;
            self.linger_start = now;
            self.last_read = now;
            if self.eof {
                self.disposition = Disposition::Close;
            }
        }
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

    /// A note about the body of the current request (nginx names the
    /// request, without an action): its line and headers come from the
    /// request kept while discarding; while a module reads the body the
    /// glue has the request and names it itself.
    fn body_note(&self, kind: ErrKind) -> ErrNote {
        request_note(kind, self.discarded.as_deref())
    }

    /// Takes the answered request while its body is still being discarded
    /// or the connection lingers (the glue's request object goes back to
    /// its pool): nginx's lines about the rest of the input name it. `req` gets the spare request in
    /// exchange, so nothing is allocated once the machine has one.
    pub fn keep_discarded(&mut self, req: &mut Box<Request>) {
        let reading_on = self.state == State::Discard || self.disposition == Disposition::Linger;
        if !reading_on || self.discarded.is_some() {
            return;
        }
        let other = self.spare.take().unwrap_or_default();
        self.discarded = Some(std::mem::replace(req, other));
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

    /// Switches the current request to collecting its body: following
    /// [`Connection::poll`] calls yield `Body`/`BodyEnd`. Sends
    /// `100 Continue` when the client asked for it. Only meaningful before
    /// [`Connection::respond`].
    pub fn collect_body(&mut self) {
        if self.state != State::Pending {
            return;
        }
        let Some(cur) = &mut self.cur else {
            return;
        };
        let send_continue = !cur.collect && cur.expect_continue && !cur.decoder.is_done();
        cur.collect = true;
        // nginx checks a chunked body's size against client_max_body_size
        // chunk by chunk while reading it (not while discarding it).
        cur.decoder.set_limit(self.st.client_max_body_size);
        if send_continue {
            self.push_bytes(b"HTTP/1.1 100 Continue\r\n\r\n");
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

    fn poll_head(&mut self, now: Msec, date: &str) -> Option<Event> {
        let mut req = self.spare.take().unwrap_or_default();
        let end = match self.head.advance(&self.inbuf, &self.st, &mut req) {
            HeadStatus::Complete(end) => end,
            other => {
                self.spare = Some(req);
                self.head_not_complete(other, now, date);
                return None;
            }
        };
        self.note_ignored();
        if end == self.inbuf.len() {
            // The usual case: nothing pipelined behind the head.
            self.inbuf.clear();
        } else {
            self.inbuf.drain(..end);
        }
        self.head.reset(&self.st);
        self.requests += 1;
        self.ended = None;
        let st = &self.st;
        if st.keepalive_timeout == 0
            || self.requests >= st.keepalive_requests
            || now.wrapping_sub(self.created) > st.keepalive_time
        {
            req.keep_alive = false;
        }
        // nginx's static handler discards the body of a GET or HEAD
        // before answering, so a framing error already buffered with the
        // head earns a 400 instead of the page (other methods get their
        // 405 first; `respond` then closes).
        if req.is_get_or_head() && self.body_is_bad(&BodyDecoder::new(req.body)) {
            self.notes
                .push(request_note(ErrKind::InvalidChunked, Some(&req)));
            let mut rec = self.bare_log(400, now);
            rec.request_line = req.request_line().to_vec();
            let (body, all) = self.queue(&Response::error(400), false, req.is_head(), false, date);
            rec.body_bytes_sent = body;
            rec.bytes_sent = all;
            self.logs.push(rec);
            self.close_after_response(false);
            self.spare = Some(req);
            return None;
        }
        let expect_continue = req.version >= crate::Version::HTTP_11
            && req
                .header("Expect")
                .is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue"));
        self.cur = Some(Current {
            keep_alive: req.keep_alive,
            head: req.is_head(),
            decoder: BodyDecoder::new(req.body),
            collect: false,
            body_end_sent: false,
            expect_continue,
            streaming: None,
            http11: req.version >= crate::Version::HTTP_11,
            chunked: false,
            log: if self.st.log_requests {
                LogRecord {
                    request_line: req.request_line().to_vec(),
                    status: 0,
                    body_bytes_sent: 0,
                    bytes_sent: 0,
                    referer: req.referer(),
                    user_agent: req.user_agent(),
                    host: req.host().map(str::to_string),
                    remote_user: crate::auth_basic::basic_user(&req).map(|(cred, n)| {
                        String::from_utf8_lossy(cred.get(..n).unwrap_or(&[])).into_owned()
                    }),
                    start: self.head_start,
                    end: now,
                    sink: 0,
                    peer: None,
                }
            } else {
                LogRecord::default()
            },
        });
        self.state = State::Pending;
        self.last_read = now;
        Some(Event::Request(req))
    }

    /// An incomplete head (waiting, or the client left) or a refused one.
    fn head_not_complete(&mut self, status: HeadStatus, now: Msec, date: &str) {
        match status {
            HeadStatus::Incomplete => {
                if self.eof {
                    // nginx: "client prematurely closed connection", 400
                    // in the log, nothing sent.
                    if self.head.started() {
                        let kind = if self.head.line_parsed() {
                            ErrKind::ClosedHeaders
                        } else {
                            ErrKind::ClosedLine
                        };
                        self.note_head(err_note::note(kind, &self.head, &self.inbuf));
                        let rec = self.bare_log(400, now);
                        self.logs.push(rec);
                    }
                    self.close(Disposition::Close);
                }
            }
            HeadStatus::Error(status) => {
                if !self.head.line_parsed() && matches!(status, 400 | 505) {
                    let kind = err_note::line_error(self.head.line_so_far(&self.inbuf), status);
                    self.note_head(err_note::note(kind, &self.head, &self.inbuf));
                } else if let Some(n) = err_note::head_note(&self.head, &self.inbuf) {
                    self.note_head(n);
                } else {
                    self.note_ignored();
                }
                // A body announced with the refused head is still coming
                // (nginx sets lingering for 413); other leftovers are
                // whatever was pipelined behind the error.
                let pending_input = status == 413 && self.head.body_may_follow();
                let mut rec = self.bare_log(status, now);
                let resp = Response::error(status);
                let (body, all) = self.queue(&resp, false, false, false, date);
                rec.status = wire_status(status);
                rec.body_bytes_sent = body;
                rec.bytes_sent = all;
                self.logs.push(rec);
                self.close_after_response(pending_input);
            }
            HeadStatus::Complete(_) => {}
        }
    }

    fn poll_pending(&mut self, now: Msec, date: &str) -> Option<Event> {
        let max = self.st.client_max_body_size;
        let cur = self.cur.as_mut()?;
        if !cur.collect {
            return None;
        }
        if cur.decoder.is_done() {
            if cur.body_end_sent {
                return None;
            }
            cur.body_end_sent = true;
            return Some(Event::BodyEnd);
        }
        let mut data = Vec::new();
        let res = cur.decoder.decode(&self.inbuf, Some(&mut data));
        let status = match res {
            Ok(n) => {
                self.inbuf.drain(..n);
                if max != 0 && cur.decoder.total() > max {
                    413
                } else if !data.is_empty() {
                    return Some(Event::Body(data));
                } else if cur.decoder.is_done() {
                    cur.body_end_sent = true;
                    return Some(Event::BodyEnd);
                } else {
                    if self.eof {
                        // Client went away mid-body: nginx logs 400 and
                        // says so (the glue names the request).
                        self.notes.push(request_note(ErrKind::BodyClosed, None));
                        self.ended = Some(400);
                        if let Some(cur) = self.cur.take() {
                            let mut log = cur.log;
                            log.status = 400;
                            log.end = now;
                            self.logs.push(log);
                        }
                        self.close(Disposition::Close);
                    }
                    return None;
                }
            }
            Err(_) => match cur.decoder.over() {
                Some((before, size)) => {
                    let mut n = request_note(ErrKind::TooLargeChunked, None);
                    n.detail = Some(format!(
                        "client intended to send too large chunked body: {before}+{size} bytes"
                    ));
                    self.notes.push(n);
                    413
                }
                None => {
                    self.notes.push(request_note(ErrKind::InvalidChunked, None));
                    400
                }
            },
        };
        let mut resp = Response::error(status);
        resp.close = true;
        let head = cur.head;
        let mut log = cur.log.clone();
        let (body, all) = self.queue(&resp, false, head, false, date);
        log.status = status;
        log.body_bytes_sent = body;
        log.bytes_sent = all;
        log.end = now;
        self.logs.push(log);
        self.cur = None;
        self.close_after_response(status == 413);
        Some(Event::BodyError(status))
    }

    /// Discards body bytes after the response; true when the body is done
    /// and the next request may be parsed.
    fn poll_discard(&mut self, _now: Msec) -> bool {
        let Some(cur) = self.cur.as_mut() else {
            self.state = State::Idle;
            return true;
        };
        match cur.decoder.decode(&self.inbuf, None) {
            Ok(n) => {
                self.inbuf.drain(..n);
            }
            Err(_) => {
                // The response is already out; nginx logs the body's
                // error and closes.
                let n = self.body_note(ErrKind::InvalidChunked);
                self.notes.push(n);
                self.cur = None;
                self.close(Disposition::Close);
                return false;
            }
        }
        if cur.decoder.is_done() {
            self.cur = None;
            self.next_request();
            return true;
        }
        if self.eof {
            self.cur = None;
            self.close(Disposition::Close);
        }
        false
    }

    /// Queues the response to the pending request. `date` is the cached
    /// `Date:` header value. A HEAD request gets the head only, with the
    /// Content-Length the body would have had.
    pub fn respond(&mut self, resp: Response, now: Msec, date: &str) -> Result<(), NotPending> {
        self.respond_ref(&resp, now, date)
    }

    /// [`Connection::respond`] without taking the response (a response is
    /// a few hundred bytes: the phases hand it down by reference).
    pub fn respond_ref(
        &mut self,
        resp: &Response,
        now: Msec,
        date: &str,
    ) -> Result<(), NotPending> {
        if self.state != State::Pending || self.is_streaming() {
            return Err(NotPending);
        }
        // The request's state stays in place (it holds the log record,
        // a few hundred bytes): only its flags are copied out.
        let Some(cur) = self.cur.as_ref() else {
            return Err(NotPending);
        };
        let (cur_keep_alive, http11, head) = (cur.keep_alive, cur.http11, cur.head);
        // A body whose framing is already known to be broken cannot be
        // discarded: say so with Connection: close (nginx's special
        // response handler does the same when discarding fails).
        let bad_body = self.body_is_bad(&cur.decoder);
        if bad_body {
            // nginx discards the body before answering and says why it
            // could not (the glue names the request it still holds).
            self.notes.push(request_note(ErrKind::InvalidChunked, None));
        }
        if resp.status == 444 {
            // nginx's NGX_HTTP_CLOSE (`return 444`): no response at all,
            // the connection is closed; the access log says 444, 0 bytes.
            self.last_sent = (0, 0);
            self.finish_in_place(444, (0, 0), false, now);
            return Ok(());
        }
        let keep_alive = cur_keep_alive && !resp.close && (http11 || !resp.chunked) && !bad_body;
        let chunked = chunked_for(resp, http11, head);
        let sent = self.queue(resp, keep_alive, head, chunked, date);
        self.last_sent = sent;
        self.finish_in_place(wire_status(resp.status), sent, keep_alive, now);
        Ok(())
    }

    /// The tail of a response with `status` and `(body, all)` bytes sent:
    /// its log record, then the next request, the discarding of an unread
    /// body, or the close ([`Connection::finish_request`] with the request
    /// state left in place).
    fn finish_in_place(&mut self, status: u16, sent: (u64, u64), keep_alive: bool, now: Msec) {
        let Some(cur) = self.cur.as_mut() else {
            return;
        };
        cur.log.status = status;
        cur.log.body_bytes_sent = sent.0;
        cur.log.bytes_sent = sent.1;
        cur.log.end = now;
        if self.st.log_requests {
            self.logs.push(std::mem::take(&mut cur.log));
        }
        let done = cur.decoder.is_done();
        if !keep_alive {
            self.close_after_response(!done);
            return;
        }
        if !done {
            cur.collect = false;
            self.state = State::Discard;
            self.last_read = now;
            return;
        }
        self.cur = None;
        self.next_request();
        self.idle_since = now;
    }

    /// The tail of a response whose request state was taken out (a
    /// streamed response): its log record, then the next request, the
    /// discarding of an unread body, or the close.
    fn finish_request(&mut self, mut cur: Current, keep_alive: bool, now: Msec) {
        if self.st.log_requests {
            self.logs.push(std::mem::take(&mut cur.log));
        }
        if !keep_alive {
            let unread = !cur.decoder.is_done();
            self.close_after_response(unread);
            return;
        }
        if !cur.decoder.is_done() {
            cur.collect = false;
            self.cur = Some(cur);
            self.state = State::Discard;
            self.last_read = now;
            return;
        }
        self.next_request();
        self.idle_since = now;
    }

    /// True when the buffered bytes already break the rest of the body
    /// `decoder` expects (checked on a copy, consuming nothing).
    fn body_is_bad(&self, decoder: &BodyDecoder) -> bool {
        !decoder.is_done() && decoder.clone().decode(&self.inbuf, None).is_err()
    }

    /// Convenience: answer the pending request with nginx's page for
    /// `status`.
    pub fn respond_error(&mut self, status: u16, now: Msec, date: &str) -> Result<(), NotPending> {
        self.respond(Response::error(status), now, date)
    }

    fn next_request(&mut self) {
        if let Some(d) = self.discarded.take() {
            self.recycle(d);
        }
        self.state = if self.inbuf.is_empty() {
            State::Idle
        } else {
            // nginx's `reading client pipelined request line`.
            self.head.pipelined = true;
            State::Head
        };
        if self.state == State::Idle && self.eof {
            self.close(Disposition::Close);
        }
    }

    /// Serializes a response into the output; returns (body bytes, total).
    /// `chunked` (from [`chunked_for`]) writes `Transfer-Encoding: chunked`
    /// and frames the body as one chunk and the last one.
    fn queue(
        &mut self,
        resp: &Response,
        keep_alive: bool,
        head_only: bool,
        chunked: bool,
        date: &str,
    ) -> (u64, u64) {
        let no_body = bodiless(resp.status);
        let tokens = self.st.server_tokens;
        let page = if tokens {
            versioned_page(resp.status, &resp.body)
        } else {
            None
        };
        let cl = if no_body || resp.chunked {
            None
        } else if let Some(p) = page {
            Some(p.len() as u64)
        } else {
            Some(resp.content_length.unwrap_or_else(|| resp.body.len()))
        };
        let start = self.out.len();
        write_head(resp, cl, chunked, keep_alive, tokens, date, &mut self.out);
        let head_len = (self.out.len() - start) as u64;
        if head_only || no_body {
            self.extend_bytes_seg(start);
            return (0, head_len);
        }
        if chunked {
            return self.queue_chunked_body(resp, start, head_len);
        }
        match &resp.body {
            Body::File { token, offset, len } => {
                self.extend_bytes_seg(start);
                if *len > 0 {
                    self.segs.push(OutSeg::File {
                        token: *token,
                        offset: *offset,
                        len: *len,
                    });
                }
                (*len, head_len + *len)
            }
            body => {
                let b = page.unwrap_or_else(|| body.bytes().unwrap_or(&[]));
                self.out.extend_from_slice(b);
                self.extend_bytes_seg(start);
                (b.len() as u64, head_len + b.len() as u64)
            }
        }
    }

    /// [`Connection::queue`]'s body as one chunk and the last one (kept
    /// apart: the common response does not pay for it).
    #[cold]
    fn queue_chunked_body(&mut self, resp: &Response, start: usize, head_len: u64) -> (u64, u64) {
        let framed = !resp.body.is_empty();
        if framed {
            stream::chunk_size_line(&mut self.out, resp.body.len());
        }
        let file = match &resp.body {
            Body::File { token, offset, len } => {
                self.extend_bytes_seg(start);
                if *len > 0 {
                    self.segs.push(OutSeg::File {
                        token: *token,
                        offset: *offset,
                        len: *len,
                    });
                }
                *len
            }
            body => {
                self.out.extend_from_slice(body.bytes().unwrap_or(&[]));
                self.extend_bytes_seg(start);
                0
            }
        };
        let t: &[u8] = if framed {
            b"\r\n0\r\n\r\n"
        } else {
            b"0\r\n\r\n"
        };
        self.push_bytes(t);
        // With a file, `out` grew by the head, the size line and the tail.
        let all = (self.out.len() - start) as u64 + file;
        (all - head_len, all)
    }

    /// After a `Connection: close` response: linger when the client may
    /// still be sending, as nginx's `lingering_close on` does.
    fn close_after_response(&mut self, unread_body: bool) {
        let unread = unread_body || !self.inbuf.is_empty();
        let d = match self.st.lingering_close {
            LingeringClose::Always => Disposition::Linger,
            LingeringClose::On if unread && !self.eof => Disposition::Linger,
            _ => Disposition::Close,
        };
        self.close(d);
    }

    fn close(&mut self, d: Disposition) {
        self.state = State::Done;
        self.disposition = d;
        self.cur = None;
        self.inbuf.clear();
        // The parser's offsets pointed into the input just dropped.
        self.head.reset(&self.st);
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
