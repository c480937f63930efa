//! Shared test driver: feeds bytes to a Connection the way the glue would
//! and answers requests with a tiny static-file-like handler.
#![allow(dead_code, clippy::unwrap_used)]

use gyre_http::{Body, Connection, Disposition, Event, HttpSettings, LogRecord, Request, Response};

pub const DATE: &str = "Sun, 29 Nov 2026 22:34:11 GMT";

/// nginx-ish handler: `/` is a 6-byte page, `/file` a 100-byte file,
/// everything else 404; only GET and HEAD are allowed.
pub fn handler(req: &Request) -> Response {
    if req.method() != "GET" && req.method() != "HEAD" {
        return Response::error(405);
    }
    match req.path() {
        b"/" | b"/index.html" => {
            let mut r = Response::new(200);
            r.content_type = Some("text/html".into());
            r.body = Body::Bytes(b"hello\n".to_vec());
            r
        }
        b"/file" => {
            let mut r = Response::new(200);
            r.content_type = Some("application/octet-stream".into());
            r.body = Body::File {
                token: 7,
                offset: 0,
                len: 100,
            };
            r
        }
        _ => Response::error(404),
    }
}

#[derive(Debug)]
pub struct Run {
    pub out: Vec<u8>,
    pub requests: Vec<Request>,
    pub disposition: Disposition,
    pub logs: Vec<LogRecord>,
    pub conn: Connection,
}

impl Run {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.out).into_owned()
    }

    /// Status codes of all responses in the output, in order.
    pub fn statuses(&self) -> Vec<u16> {
        let t = self.text();
        t.match_indices("HTTP/1.1 ")
            .filter_map(|(i, _)| t.get(i + 9..i + 12).and_then(|s| s.parse().ok()))
            .filter(|&s| s != 100)
            .collect()
    }
}

/// Feeds `chunks` one read at a time (time advancing 1 ms per read),
/// answering every request with `handler`.
pub fn run_with(settings: HttpSettings, chunks: &[&[u8]], eof: bool) -> Run {
    let mut conn = Connection::new(settings, 0);
    let mut out = Vec::new();
    let mut requests = Vec::new();
    let mut logs = Vec::new();
    let mut now = 0;
    let step = |conn: &mut Connection,
                now: u64,
                out: &mut Vec<u8>,
                requests: &mut Vec<Request>,
                logs: &mut Vec<LogRecord>| {
        while let Some(ev) = conn.poll(now, DATE) {
            if let Event::Request(r) = ev {
                let resp = handler(&r);
                requests.push(*r);
                conn.respond(resp, now, DATE).unwrap();
            }
        }
        out.extend(conn.take_output().bytes());
        logs.extend(conn.take_logs());
    };
    for c in chunks {
        now += 1;
        conn.on_read(c, now);
        step(&mut conn, now, &mut out, &mut requests, &mut logs);
    }
    if eof {
        now += 1;
        conn.on_eof(now);
        step(&mut conn, now, &mut out, &mut requests, &mut logs);
    }
    let disposition = conn.disposition();
    Run {
        out,
        requests,
        disposition,
        logs,
        conn,
    }
}

pub fn run(input: &[u8]) -> Run {
    run_with(HttpSettings::default(), &[input], false)
}

pub fn bytewise(input: &[u8]) -> Run {
    let chunks: Vec<&[u8]> = input.chunks(1).collect();
    run_with(HttpSettings::default(), &chunks, false)
}

/// Minimal xorshift64 so tests need no dependencies and stay reproducible.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// Splits `input` at random points.
pub fn random_splits<'a>(input: &'a [u8], rng: &mut Rng) -> Vec<&'a [u8]> {
    let mut v = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let n = 1 + rng.below(40) as usize;
        let e = (i + n).min(input.len());
        v.push(&input[i..e]);
        i = e;
    }
    v
}

/// `Read::read` that retries on `EINTR`. A socket with a receive timeout
/// (`SO_RCVTIMEO`) fails with `Interrupted` whenever the test process is
/// stopped and continued, even with no signal handler installed
/// (signal(7)); a loaded CI machine does that. `read_exact` and
/// `read_to_end` already retry; a bare `read` does not.
pub trait ReadSome: std::io::Read {
    fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }
}

impl<R: std::io::Read + ?Sized> ReadSome for R {}
