//! Upstream backends for proxy tests, on 127.0.0.1:0:
//! - [`Backend`]: a threaded HTTP/1.1 server that records every request it
//!   receives (request line, headers, decoded body, which connection) and
//!   answers each with the [`Reply`] a closure or a route table gives:
//!   status, headers, body framed by `Content-Length`, chunked or by
//!   closing, after a delay, with 1xx first, or upgrading to an echo
//!   tunnel after a 101. Keep-alive as HTTP/1.1 says (`Connection: close`,
//!   HTTP/1.0 without `keep-alive`, or a reply that closes).
//! - [`Scripted`]: a raw-socket backend that plays a list of [`Step`]s on
//!   each connection (read a request, send bytes, pause, half-close, close,
//!   reset), for the protocol edge cases.
//!
//! Both are bounded: at most [`MAX_CONNS`] connections at once, a head of
//! at most 64 KiB, bodies of at most 64 MiB, idle connections closed after
//! [`IDLE`], every wait cut short when the backend is dropped. Dropping (or
//! [`Backend::stop`]) closes the listener and every connection and joins
//! every thread, so a test leaks nothing; a stopped backend's port can be
//! bound again by [`Backend::start_on`] (failover tests).
#![allow(dead_code)]

use super::ReadSome;
use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Connections served at once; more are closed on accept.
pub const MAX_CONNS: usize = 512;
/// An idle connection (no byte from the peer) is closed after this.
pub const IDLE: Duration = Duration::from_secs(30);
/// How often blocked reads look at the stop flag.
const TICK: Duration = Duration::from_millis(20);
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One request as the backend received it.
#[derive(Debug, Clone, Default)]
pub struct Received {
    /// Serial of the connection it came on (0 for the first accepted), to
    /// tell keep-alive reuse from new connections.
    pub conn: usize,
    /// `GET /path?a HTTP/1.1`, as sent.
    pub request_line: String,
    pub method: String,
    pub target: String,
    pub version: String,
    /// In order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
    /// The body came chunked.
    pub chunked: bool,
}

impl Received {
    /// The first header named `name` (caseless).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every header named `name`, in order.
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The target without its query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// Whether the client asked for the connection to stay open.
    fn keep_alive(&self) -> bool {
        let conn = self.header("Connection").unwrap_or("").to_ascii_lowercase();
        let has = |t: &str| conn.split(',').any(|x| x.trim() == t);
        if self.version == "HTTP/1.0" {
            has("keep-alive")
        } else {
            !has("close")
        }
    }
}

/// How a reply's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length` (added unless the reply's headers have one).
    Length,
    /// `Transfer-Encoding: chunked`, chunks of at most this many bytes.
    Chunked(usize),
    /// No length: the body ends when the backend closes.
    Close,
    /// Neither a length nor a body (1xx/204/304, or a deliberately
    /// malformed reply); the headers are sent as given.
    Bare,
}

/// What the backend answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub framing: Framing,
    /// Wait before sending the status line (a slow upstream).
    pub delay: Duration,
    /// Wait between body pieces (a trickling upstream).
    pub pause: Duration,
    /// Interim responses sent first (`100`, `103`).
    pub interim: Vec<u16>,
    /// Close the connection after this reply.
    pub close: bool,
    /// After this reply (a 101) the connection echoes every byte back
    /// until either side closes.
    pub echo: bool,
}

impl Reply {
    /// `status` with a text body.
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            reason: reason(status).to_string(),
            headers: Vec::new(),
            body: body.into(),
            framing: Framing::Length,
            delay: Duration::ZERO,
            pause: Duration::ZERO,
            interim: Vec::new(),
            close: false,
            echo: false,
        }
    }

    /// 200 with `body`.
    pub fn ok(body: impl Into<Vec<u8>>) -> Reply {
        Reply::new(200, body)
    }

    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.to_string(), v.to_string()));
        self
    }

    pub fn reason(mut self, r: &str) -> Reply {
        self.reason = r.to_string();
        self
    }

    pub fn chunked(mut self, piece: usize) -> Reply {
        self.framing = Framing::Chunked(piece.max(1));
        self
    }

    /// The body ends by closing the connection.
    pub fn close_delimited(mut self) -> Reply {
        self.framing = Framing::Close;
        self.close = true;
        self
    }

    pub fn bare(mut self) -> Reply {
        self.framing = Framing::Bare;
        self
    }

    pub fn delay(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }

    pub fn pause(mut self, d: Duration) -> Reply {
        self.pause = d;
        self
    }

    pub fn interim(mut self, status: u16) -> Reply {
        self.interim.push(status);
        self
    }

    pub fn close(mut self) -> Reply {
        self.close = true;
        self
    }

    /// `101 Switching Protocols` with `Upgrade: proto`, then an echo tunnel.
    pub fn upgrade(proto: &str) -> Reply {
        let mut r = Reply::new(101, Vec::new())
            .header("Upgrade", proto)
            .header("Connection", "upgrade")
            .bare();
        r.echo = true;
        r
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        103 => "Early Hints",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

type Serve = Arc<dyn Fn(TcpStream, usize, &Shared) + Send + Sync>;

/// State shared by the accept thread and the connection threads.
pub struct Shared {
    stop: AtomicBool,
    /// Connections accepted so far (the next serial).
    accepted: AtomicUsize,
    /// Clones of the open connections, to shut them down on stop.
    open: Mutex<Vec<(usize, TcpStream)>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Sleeps `d`, cut short by a stop.
    fn sleep(&self, d: Duration) {
        let end = Instant::now() + d;
        while !self.stopping() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(TICK));
        }
    }
}

/// The listener and its threads, common to both backends.
struct Acceptor {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    fn start(port: u16, serve: Serve) -> io::Result<Acceptor> {
        let l = TcpListener::bind(("127.0.0.1", port))?;
        let addr = l.local_addr()?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            open: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("test-backend-accept".into())
            .spawn(move || accept_loop(l, sh, serve))?;
        Ok(Acceptor {
            addr,
            shared,
            thread: Some(thread),
        })
    }

    fn stop(&mut self) {
        let Some(t) = self.thread.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::Release);
        // Wakes the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        let _ = t.join();
        for (_, s) in lock(&self.shared.open).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads: Vec<_> = lock(&self.shared.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_loop(l: TcpListener, sh: Arc<Shared>, serve: Serve) {
    for s in l.incoming() {
        if sh.stopping() {
            break;
        }
        let Ok(s) = s else { continue };
        if lock(&sh.open).len() >= MAX_CONNS {
            continue;
        }
        let serial = sh.accepted.fetch_add(1, Ordering::AcqRel);
        if let Ok(c) = s.try_clone() {
            lock(&sh.open).push((serial, c));
        }
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(TICK));
        let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
        let (sh2, serve2) = (sh.clone(), serve.clone());
        let t = std::thread::Builder::new()
            .name("test-backend-conn".into())
            .spawn(move || {
                serve2(s, serial, &sh2);
                lock(&sh2.open).retain(|(n, _)| *n != serial);
            });
        if let Ok(t) = t {
            let mut ts = lock(&sh.threads);
            ts.retain(|t| !t.is_finished());
            ts.push(t);
        }
    }
}

/// Reads more bytes into `buf`: `Ok(0)` at EOF, an error on a stop, after
/// [`IDLE`] without a byte, or a socket error.
fn fill(s: &mut TcpStream, buf: &mut Vec<u8>, sh: &Shared) -> io::Result<usize> {
    fill_until(s, buf, sh, Instant::now() + IDLE)
}

/// [`fill`] giving up (`TimedOut`) at `end`.
fn fill_until(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    sh: &Shared,
    end: Instant,
) -> io::Result<usize> {
    let mut tmp = [0u8; 16 * 1024];
    loop {
        if sh.stopping() || Instant::now() > end {
            return Err(io::ErrorKind::TimedOut.into());
        }
        match s.read_some(&mut tmp) {
            Ok(n) => {
                buf.extend_from_slice(&tmp[..n]);
                return Ok(n);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Why a request could not be read.
enum ReadErr {
    /// The peer closed (or the backend stops) between requests.
    Gone,
    /// Malformed or too big: answer 400 and close.
    Bad,
}

/// Reads one request from `s` (bytes already read in `buf`), sending
/// `100 Continue` when the client expects it before reading the body.
fn read_request(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    conn: usize,
    sh: &Shared,
) -> Result<Received, ReadErr> {
    let head_end = loop {
        if let Some(p) = find(buf, b"\r\n\r\n") {
            break p;
        }
        if buf.len() > MAX_HEAD {
            return Err(ReadErr::Bad);
        }
        match fill(s, buf, sh) {
            Ok(0) | Err(_) if buf.is_empty() => return Err(ReadErr::Gone),
            Ok(0) | Err(_) => return Err(ReadErr::Bad),
            Ok(_) => {}
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("").to_string();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadErr::Bad);
    };
    let mut r = Received {
        conn,
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        request_line: request_line.clone(),
        ..Received::default()
    };
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            return Err(ReadErr::Bad);
        };
        r.headers.push((k.to_string(), v.trim().to_string()));
    }
    if r.header("Expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
        && r.version == "HTTP/1.1"
    {
        let _ = s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let te = r.header("Transfer-Encoding").map(str::to_ascii_lowercase);
    if te.as_deref().is_some_and(|t| t.contains("chunked")) {
        r.chunked = true;
        r.body = read_chunked(s, buf, sh)?;
    } else if let Some(cl) = r.header("Content-Length") {
        let n: usize = cl.parse().map_err(|_| ReadErr::Bad)?;
        if n > MAX_BODY {
            return Err(ReadErr::Bad);
        }
        while buf.len() < n {
            if !matches!(fill(s, buf, sh), Ok(n) if n > 0) {
                return Err(ReadErr::Bad);
            }
        }
        r.body = buf.drain(..n).collect();
    }
    Ok(r)
}

fn read_chunked(s: &mut TcpStream, buf: &mut Vec<u8>, sh: &Shared) -> Result<Vec<u8>, ReadErr> {
    let mut body = Vec::new();
    let mut more = |buf: &mut Vec<u8>| match fill(s, buf, sh) {
        Ok(n) if n > 0 => Ok(()),
        _ => Err(ReadErr::Bad),
    };
    loop {
        let line_end = loop {
            if let Some(p) = find(buf, b"\r\n") {
                break p;
            }
            if buf.len() > MAX_HEAD {
                return Err(ReadErr::Bad);
            }
            more(buf)?;
        };
        let line = String::from_utf8_lossy(&buf[..line_end]).into_owned();
        let size = line.split(';').next().unwrap_or("").trim();
        let n = usize::from_str_radix(size, 16).map_err(|_| ReadErr::Bad)?;
        buf.drain(..line_end + 2);
        if n == 0 {
            // Trailers, up to the empty line.
            loop {
                if let Some(p) = find(buf, b"\r\n") {
                    buf.drain(..p + 2);
                    if p == 0 {
                        return Ok(body);
                    }
                    continue;
                }
                more(buf)?;
            }
        }
        if body.len() + n > MAX_BODY {
            return Err(ReadErr::Bad);
        }
        while buf.len() < n + 2 {
            more(buf)?;
        }
        body.extend(buf.drain(..n));
        if buf.drain(..2).as_slice() != b"\r\n" {
            return Err(ReadErr::Bad);
        }
    }
}

/// Writes `reply` to a request; `false` when the connection must close.
fn send(s: &mut TcpStream, req: &Received, reply: &Reply, sh: &Shared) -> io::Result<bool> {
    sh.sleep(reply.delay);
    for st in &reply.interim {
        write!(s, "HTTP/1.1 {st} {}\r\n\r\n", reason(*st))?;
    }
    let keep = req.keep_alive() && !reply.close && reply.framing != Framing::Close;
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reply.reason);
    let has = |n: &str| reply.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    match reply.framing {
        Framing::Length if !has("Content-Length") => {
            head.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
        }
        Framing::Chunked(_) if !has("Transfer-Encoding") => {
            head.push_str("Transfer-Encoding: chunked\r\n");
        }
        _ => {}
    }
    if !keep && !has("Connection") && !reply.echo {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    let body: &[u8] = if req.method == "HEAD" {
        &[]
    } else {
        &reply.body
    };
    match reply.framing {
        Framing::Chunked(piece) => {
            for c in body.chunks(piece) {
                write!(s, "{:x}\r\n", c.len())?;
                s.write_all(c)?;
                s.write_all(b"\r\n")?;
                sh.sleep(reply.pause);
            }
            if req.method != "HEAD" {
                s.write_all(b"0\r\n\r\n")?;
            }
        }
        Framing::Bare => {}
        Framing::Length | Framing::Close => {
            let piece = if reply.pause.is_zero() {
                usize::MAX
            } else {
                16 * 1024
            };
            for c in body.chunks(piece.min(body.len().max(1))) {
                s.write_all(c)?;
                sh.sleep(reply.pause);
            }
        }
    }
    s.flush()?;
    Ok(keep || reply.echo)
}

/// Echoes bytes back until EOF, an error, idleness or a stop.
fn echo(s: &mut TcpStream, buf: Vec<u8>, sh: &Shared) {
    if !buf.is_empty() && s.write_all(&buf).is_err() {
        return;
    }
    let mut b = Vec::new();
    while let Ok(n) = fill(s, &mut b, sh) {
        if n == 0 || s.write_all(&b).is_err() {
            return;
        }
        b.clear();
    }
}

type Handler = Arc<dyn Fn(&Received) -> Reply + Send + Sync>;

/// The threaded HTTP/1.1 backend.
pub struct Backend {
    acc: Acceptor,
    log: Arc<Mutex<Vec<Received>>>,
    handler: Handler,
}

impl Backend {
    /// Answers every request with `handler`'s reply, on a free port.
    pub fn start(handler: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Backend {
        Backend::start_on(0, Arc::new(handler)).unwrap()
    }

    /// Answers by the longest route prefix of the path; 404 otherwise.
    pub fn routes(table: Vec<(&str, Reply)>) -> Backend {
        let table: Vec<(String, Reply)> =
            table.into_iter().map(|(p, r)| (p.to_string(), r)).collect();
        Backend::start(move |req| {
            table
                .iter()
                .filter(|(p, _)| req.path().starts_with(p.as_str()))
                .max_by_key(|(p, _)| p.len())
                .map_or_else(|| Reply::new(404, "not found\n"), |(_, r)| r.clone())
        })
    }

    /// On `port` (0: a free one) — a stopped backend's port again, for
    /// failover tests. Fails if the port is taken.
    pub fn start_on(port: u16, handler: Handler) -> io::Result<Backend> {
        let log: Arc<Mutex<Vec<Received>>> = Arc::default();
        let (lg, h) = (log.clone(), handler.clone());
        let serve: Serve = Arc::new(move |s, conn, sh| serve_http(s, conn, sh, &h, &lg));
        Ok(Backend {
            acc: Acceptor::start(port, serve)?,
            log,
            handler,
        })
    }

    /// The same handler on the same port, after [`Backend::stop`].
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop();
        let serve: Serve = {
            let (lg, h) = (self.log.clone(), self.handler.clone());
            Arc::new(move |s, conn, sh| serve_http(s, conn, sh, &h, &lg))
        };
        self.acc = Acceptor::start(self.port(), serve)?;
        Ok(())
    }

    pub fn port(&self) -> u16 {
        self.acc.addr.port()
    }

    /// `127.0.0.1:PORT`, for `proxy_pass http://…` and `server …;`.
    pub fn addr(&self) -> String {
        self.acc.addr.to_string()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Received> {
        lock(&self.log).clone()
    }

    /// Waits (at most `within`) until `n` requests arrived; returns them.
    pub fn wait_requests(&self, n: usize, within: Duration) -> Vec<Received> {
        let end = Instant::now() + within;
        while lock(&self.log).len() < n && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.requests()
    }

    /// Connections accepted so far (since the last start).
    pub fn connections(&self) -> usize {
        self.acc.shared.accepted.load(Ordering::Acquire)
    }

    /// Connections open right now.
    pub fn open_connections(&self) -> usize {
        lock(&self.acc.shared.open).len()
    }

    /// Closes the listener and every connection (a killed backend).
    pub fn stop(&mut self) {
        self.acc.stop();
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.acc.stop();
    }
}

fn serve_http(
    mut s: TcpStream,
    conn: usize,
    sh: &Shared,
    handler: &Handler,
    log: &Mutex<Vec<Received>>,
) {
    let mut buf = Vec::new();
    loop {
        let req = match read_request(&mut s, &mut buf, conn, sh) {
            Ok(r) => r,
            Err(ReadErr::Gone) => return,
            Err(ReadErr::Bad) => {
                let _ = s.write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                return;
            }
        };
        lock(log).push(req.clone());
        let reply = handler(&req);
        match send(&mut s, &req, &reply, sh) {
            Ok(true) if reply.echo => return echo(&mut s, std::mem::take(&mut buf), sh),
            Ok(true) => {}
            _ => {
                let _ = s.shutdown(Shutdown::Write);
                return;
            }
        }
    }
}

/// One step of a [`Scripted`] connection.
#[derive(Debug, Clone)]
pub enum Step {
    /// Reads a request head and its `Content-Length` body (or up to EOF).
    ReadRequest,
    /// Reads exactly this many bytes (or up to EOF).
    Read(usize),
    Send(Vec<u8>),
    Pause(Duration),
    /// Half-close: FIN, reading still possible.
    ShutdownWrite,
    /// Close (FIN) and end the script.
    Close,
    /// Close with a reset (SO_LINGER 0): the peer sees ECONNRESET.
    Reset,
    /// Waits until the peer closes, at most this long.
    WaitClose(Duration),
}

impl Step {
    pub fn send(b: impl AsRef<[u8]>) -> Step {
        Step::Send(b.as_ref().to_vec())
    }

    pub fn pause_ms(ms: u64) -> Step {
        Step::Pause(Duration::from_millis(ms))
    }
}

/// What one scripted connection saw.
#[derive(Debug, Clone, Default)]
pub struct ScriptedConn {
    /// Every byte read from the peer.
    pub received: Vec<u8>,
    /// The peer closed its side (EOF seen) while the script read.
    pub peer_closed: bool,
    /// The script ran to its end.
    pub done: bool,
}

/// The raw-socket backend: connection `i` plays `scripts[i]` (the last
/// script for every later connection); a script ending without `Close` or
/// `Reset` closes normally.
pub struct Scripted {
    acc: Acceptor,
    conns: Arc<Mutex<Vec<ScriptedConn>>>,
}

impl Scripted {
    pub fn start(scripts: Vec<Vec<Step>>) -> Scripted {
        let conns: Arc<Mutex<Vec<ScriptedConn>>> = Arc::default();
        let cs = conns.clone();
        let scripts = Arc::new(scripts);
        let serve: Serve = Arc::new(move |s, conn, sh| {
            let i = conn.min(scripts.len().saturating_sub(1));
            let steps = scripts.get(i).cloned().unwrap_or_default();
            {
                let mut c = lock(&cs);
                if c.len() <= conn {
                    c.resize_with(conn + 1, ScriptedConn::default);
                }
            }
            play(s, conn, &steps, sh, &cs);
        });
        Scripted {
            acc: Acceptor::start(0, serve).unwrap(),
            conns,
        }
    }

    /// Every connection plays `script`.
    pub fn each(script: Vec<Step>) -> Scripted {
        Scripted::start(vec![script])
    }

    pub fn port(&self) -> u16 {
        self.acc.addr.port()
    }

    pub fn addr(&self) -> String {
        self.acc.addr.to_string()
    }

    /// What each connection saw so far, by accept order.
    pub fn conns(&self) -> Vec<ScriptedConn> {
        lock(&self.conns).clone()
    }

    /// Waits (at most `within`) until `n` connections finished their script.
    pub fn wait_done(&self, n: usize, within: Duration) -> Vec<ScriptedConn> {
        let end = Instant::now() + within;
        while lock(&self.conns).iter().filter(|c| c.done).count() < n && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.conns()
    }

    pub fn connections(&self) -> usize {
        self.acc.shared.accepted.load(Ordering::Acquire)
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.acc.stop();
    }
}

fn play(mut s: TcpStream, conn: usize, steps: &[Step], sh: &Shared, cs: &Mutex<Vec<ScriptedConn>>) {
    let mut buf = Vec::new();
    let mut eof = false;
    let record = |buf: &[u8], eof: bool, done: bool| {
        if let Some(c) = lock(cs).get_mut(conn) {
            c.received = buf.to_vec();
            c.peer_closed = eof;
            c.done = done;
        }
    };
    // Bytes of `buf` a ReadRequest / Read step has consumed.
    let mut used = 0;
    for st in steps {
        match st {
            Step::ReadRequest => {
                let target = loop {
                    if let Some(p) = find(&buf[used..], b"\r\n\r\n") {
                        let head =
                            String::from_utf8_lossy(&buf[used..used + p]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break used + p + 4 + len.min(MAX_BODY);
                    }
                    if eof || buf.len() > MAX_HEAD + used {
                        break buf.len();
                    }
                    match fill(&mut s, &mut buf, sh) {
                        Ok(0) => eof = true,
                        Ok(_) => {}
                        Err(_) => break buf.len(),
                    }
                };
                while buf.len() < target && !eof {
                    match fill(&mut s, &mut buf, sh) {
                        Ok(0) => eof = true,
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                used = target.min(buf.len());
            }
            Step::Read(n) => {
                let target = used + n;
                while buf.len() < target && !eof {
                    match fill(&mut s, &mut buf, sh) {
                        Ok(0) => eof = true,
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                used = target.min(buf.len());
            }
            Step::Send(b) => {
                if s.write_all(b).is_err() {
                    break;
                }
            }
            Step::Pause(d) => sh.sleep(*d),
            Step::ShutdownWrite => {
                let _ = s.shutdown(Shutdown::Write);
            }
            Step::Close => {
                let _ = s.shutdown(Shutdown::Both);
                record(&buf, eof, true);
                return;
            }
            Step::Reset => {
                let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                record(&buf, eof, true);
                drop(s);
                return;
            }
            Step::WaitClose(d) => {
                let end = Instant::now() + *d;
                while !eof && Instant::now() < end && !sh.stopping() {
                    match fill_until(&mut s, &mut buf, sh, end) {
                        Ok(0) => eof = true,
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::TimedOut => break,
                        Err(_) => {
                            eof = true;
                        }
                    }
                }
            }
        }
        record(&buf, eof, false);
    }
    record(&buf, eof, true);
}
