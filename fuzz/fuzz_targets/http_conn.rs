//! Coverage-guided fuzzing of the HTTP/1.x connection machine
//! (`gyre_http::Connection`), driven only through the entry points the glue
//! uses: bytes in at arbitrary split points, time passing, timeouts, output
//! and logs taken, lingering started, idle buffers released and resumed.
//! Requests are answered without looking inside them: `Request`'s fields are
//! not part of what this target checks.
//!
//! Input: 8 control bytes, then the bytes the client sends.
//! * `ctl[0]` picks the settings (buffer sizes, keep-alive limits, lingering
//!   mode, logging), whether the client half-closes at the end, and whether
//!   an idle machine gives back its buffer or is dropped and resumed;
//! * `ctl[1..8]`, used in turn, give each read's length (1..=63 bytes or all
//!   the rest), the time that passes before it, and how the handler answers
//!   each request.
//!
//! Checked besides "no panic" (cargo fuzz builds with debug assertions): the
//! output is a sequence of complete `HTTP/1.1` responses, bodies matching
//! their Content-Length (or absent, for HEAD), nothing after a
//! `Connection: close` response, one response per answer plus at most one
//! of the machine's own; once the machine decides to close it yields no
//! event and no byte and never reopens; while open with every event handled
//! it wants to read (no stall); a half-close or a fired deadline closes it.
#![no_main]

use gyre_http::{
    Body, Connection, Disposition, Event, HttpSettings, LingeringClose, Response, Segment,
};
use libfuzzer_sys::fuzz_target;

const DATE: &str = "Sun, 29 Nov 2026 22:34:11 GMT";
const CTL: usize = 8;
const PAGE: &[u8] = b"hello\n";
const FILE_LEN: u64 = 100;
/// Time before a read: none, a tick, past lingering_timeout (5 s), past the
/// header/body/keep-alive timeouts (60 s).
const STEP_MS: [u64; 4] = [0, 1, 5_001, 61_000];

fuzz_target!(|data: &[u8]| {
    if data.len() >= CTL {
        let (ctl, wire) = data.split_at(CTL);
        Run::new(ctl).go(wire);
    }
});

fn settings(b: u8) -> HttpSettings {
    let mut st = HttpSettings::default();
    match b & 3 {
        1 => {
            st.client_header_buffer_size = 32;
            st.large_header_buffers = 2;
            st.large_header_buffer_size = 64;
            st.client_max_body_size = 8;
        }
        2 => {
            st.keepalive_requests = 3;
            st.keepalive_timeout = 1_000;
            st.client_body_timeout = 1_000;
        }
        3 => {
            st.client_max_body_size = 0;
            st.keepalive_timeout = 0;
            st.log_requests = false;
        }
        _ => {}
    }
    st.lingering_close = match (b >> 2) & 3 {
        2 => LingeringClose::Off,
        3 => LingeringClose::Always,
        _ => LingeringClose::On,
    };
    st
}

/// How the handler answers; `ctl` byte bits 3..6.
#[derive(Clone, Copy, PartialEq)]
enum Answer {
    Page,
    File,
    NotFound,
    NotModified,
    Close,
    BadRequest,
    /// collect_body(), answer on BodyEnd.
    Collect,
    /// collect_body(), then answer at once with the body unread.
    CollectThenPage,
}

fn answer(b: u8) -> Answer {
    match (b >> 3) & 7 {
        0 => Answer::Page,
        1 => Answer::File,
        2 => Answer::NotFound,
        3 => Answer::NotModified,
        4 => Answer::Close,
        5 => Answer::BadRequest,
        6 => Answer::Collect,
        _ => Answer::CollectThenPage,
    }
}

fn response(a: Answer) -> Response {
    match a {
        Answer::File => {
            let mut r = Response::new(200);
            r.body = Body::File {
                token: 7,
                offset: 0,
                len: FILE_LEN,
            };
            r
        }
        Answer::NotFound => Response::error(404),
        Answer::NotModified => Response::new(304),
        Answer::BadRequest => Response::error(400),
        _ => {
            let mut r = Response::new(200);
            r.content_type = Some("text/html".into());
            r.body = Body::Bytes(PAGE.to_vec());
            r.close = a == Answer::Close;
            r
        }
    }
}

struct Run<'a> {
    ctl: &'a [u8],
    st: HttpSettings,
    c: Connection,
    now: u64,
    /// Everything written, file segments as `F` bytes.
    wire: Vec<u8>,
    /// Responses the handler queued, plus the machine's BodyError answers.
    answered: usize,
    collects: usize,
    requests: usize,
    fed: usize,
    body_bytes: usize,
    closed: bool,
    lingering: bool,
}

impl<'a> Run<'a> {
    fn new(ctl: &'a [u8]) -> Run<'a> {
        let st = settings(ctl[0]);
        Run {
            ctl,
            c: Connection::new(st.clone(), 0),
            st,
            now: 0,
            wire: Vec::new(),
            answered: 0,
            collects: 0,
            requests: 0,
            fed: 0,
            body_bytes: 0,
            closed: false,
            lingering: false,
        }
    }

    fn go(mut self, mut rest: &[u8]) {
        let mut i = 0;
        while !rest.is_empty() {
            let b = self.ctl[1 + i % (CTL - 1)];
            i += 1;
            let n = match b & 0x3f {
                0x3f => rest.len(),
                k => (usize::from(k) + 1).min(rest.len()),
            };
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            self.advance(STEP_MS[usize::from(b >> 6)]);
            if !self.closed {
                assert!(
                    self.c.wants_read(),
                    "open, all events handled, yet not reading"
                );
            }
            // After a plain close the glue would not read; feed anyway; the
            // machine must ignore it.
            self.c.on_read(chunk, self.now);
            self.fed += n;
            self.pump();
            self.idle();
        }
        if self.ctl[0] & 0x10 != 0 {
            self.c.on_eof(self.now);
            self.pump();
            assert!(
                self.c.wants_close(),
                "half-closed client, machine still open"
            );
        }
        if let Some(d) = self.c.next_deadline() {
            self.now = self.now.max(d);
            self.c.on_timeout(self.now);
            self.pump();
            assert!(self.c.wants_close(), "deadline fired, machine still open");
        }
        self.check_wire();
    }

    fn advance(&mut self, ms: u64) {
        self.now += ms;
        // The glue calls this when its timer fires; early calls must be no-ops.
        self.c.on_timeout(self.now);
        self.pump();
    }

    /// Handles every event, then takes output and logs, as the glue does
    /// after a read or a timeout.
    fn pump(&mut self) {
        let was_closed = self.closed;
        while let Some(ev) = self.c.poll(self.now, DATE) {
            assert!(!was_closed, "event after the close decision: {ev:?}");
            match ev {
                Event::Request(_) => {
                    self.requests += 1;
                    let b = self.ctl[1 + (self.requests * 3) % (CTL - 1)];
                    let a = answer(b);
                    if matches!(a, Answer::Collect | Answer::CollectThenPage) {
                        self.c.collect_body();
                        self.collects += 1;
                    }
                    if a != Answer::Collect {
                        self.respond(response(a));
                    }
                }
                Event::Body(b) => {
                    assert!(!b.is_empty());
                    self.body_bytes += b.len();
                    assert!(self.body_bytes <= self.fed);
                }
                Event::BodyEnd => self.respond(response(Answer::Page)),
                Event::BodyError(s) => {
                    assert!(s == 400 || s == 413, "BodyError({s})");
                    self.answered += 1;
                }
            }
        }
        for s in self.c.take_output().segments {
            assert!(!was_closed, "output after the close decision");
            match s {
                Segment::Bytes(b) => self.wire.extend_from_slice(&b),
                Segment::File { token, offset, len } => {
                    assert_eq!((token, offset, len), (7, 0, FILE_LEN));
                    self.wire.extend(std::iter::repeat_n(b'F', len as usize));
                }
            }
        }
        for l in self.c.take_logs() {
            assert!((100..600).contains(&l.status), "logged status {}", l.status);
        }
        if self.c.wants_close() {
            self.closed = true;
        }
        if was_closed {
            assert_ne!(self.c.disposition(), Disposition::Open, "reopened");
        }
        if self.c.disposition() == Disposition::Linger && !self.lingering {
            // Everything is written: the glue shuts down its write side.
            self.c.start_lingering(self.now);
            self.lingering = true;
        }
    }

    fn respond(&mut self, r: Response) {
        assert!(self.c.respond(r, self.now, DATE).is_ok(), "respond refused");
        self.answered += 1;
    }

    /// Between requests the glue may pool the input buffer, or drop the
    /// machine and rebuild it on the next read.
    fn idle(&mut self) {
        if self.closed || !self.c.is_idle() {
            return;
        }
        if self.ctl[0] & 0x80 != 0 {
            if let Some(buf) = self.c.release_buffers() {
                assert_eq!(self.c.buffered_capacity(), 0);
                self.c.supply_buffer(buf);
            }
        }
        if self.ctl[0] & 0x40 != 0 {
            let (requests, created) = (self.c.requests(), self.c.created());
            self.c = Connection::resume(self.st.clone(), self.now, requests, created);
        }
    }

    fn check_wire(&self) {
        let mut w = &self.wire[..];
        let (mut responses, mut continues) = (0usize, 0usize);
        let mut last_close = false;
        while !w.is_empty() {
            assert!(!last_close, "bytes after a Connection: close response");
            assert!(
                w.starts_with(b"HTTP/1.1 "),
                "not a status line: {:?}",
                lossy(w)
            );
            let end = find(w, b"\r\n\r\n").expect("incomplete head");
            // Every line of the head, its last header's included, ends in CRLF.
            let head = &w[..end + 2];
            w = &w[end + 4..];
            let status: u16 = std::str::from_utf8(&head[9..12])
                .ok()
                .and_then(|s| s.parse().ok())
                .expect("status code");
            let (mut cl, mut close) = (None, false);
            let lines = head.strip_suffix(b"\n").unwrap_or(head);
            for line in lines.split(|&b| b == b'\n').skip(1) {
                let line = line.strip_suffix(b"\r").expect("bare LF in head");
                let colon = find(line, b": ").expect("header without ': '");
                let (name, value) = (&line[..colon], &line[colon + 2..]);
                assert!(!name.is_empty() && !value.contains(&b'\r'));
                if name == b"Content-Length" {
                    cl = Some(lossy(value).parse::<usize>().expect("Content-Length"));
                } else if line == b"Connection: close" {
                    close = true;
                }
            }
            if status == 100 {
                assert!(!close && cl.is_none());
                continues += 1;
                continue;
            }
            responses += 1;
            last_close = close;
            if matches!(status, 204 | 304) {
                assert!(cl.is_none(), "{status} with a Content-Length");
            }
            // A HEAD response has no body: the next response (or the end)
            // follows at once. None of the bodies here starts that way.
            if let Some(n) = cl {
                if !w.is_empty() && !w.starts_with(b"HTTP/1.1 ") {
                    assert!(w.len() >= n, "body shorter than Content-Length");
                    w = &w[n..];
                }
            }
        }
        assert!(continues <= self.collects);
        assert!(
            responses == self.answered || (responses == self.answered + 1 && last_close),
            "{responses} responses for {} answers",
            self.answered
        );
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned()
}
