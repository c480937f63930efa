//! HTTP helpers for end-to-end tests of the real binary: starting gyre on a
//! free loopback port, a `ureq` agent, a raw-socket client that parses
//! responses itself (for malformed input, pipelining and keep-alive), and
//! stub_status parsing.

use super::ReadSome;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{gyre_bin, Prefix, Server};

/// Every read and write of a test client gives up after this.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A port nobody listens on right now (bind 127.0.0.1:0, drop).
/// A port to listen on. Picked below the kernel's ephemeral range
/// (32768-60999 by default), so no client connection of a test running at
/// the same time can take it between here and the server's bind (a port
/// from `bind(0)` was taken so, now and then, under load: "Address already
/// in use"); a process-wide counter keeps the threads of one test binary
/// apart, and a start derived from the pid keeps binaries apart. Each
/// candidate must still be bindable.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(7_919) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + n) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The main-context lines every HTTP test config starts with.
pub fn main_conf(workers: u32) -> String {
    format!(
        "daemon off;\nerror_log logs/error.log info;\npid logs/gyre.pid;\n\
         worker_processes {workers};\nevents {{ worker_connections 256; }}\n"
    )
}

/// A running gyre and the port its (first) server listens on.
pub struct Running {
    pub server: Server,
    pub port: u16,
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }

    pub fn log(&self) -> String {
        self.server.log()
    }
}

/// Writes `main_conf(workers)` + `http { <http(port)> }` and starts gyre,
/// retrying with another port if the one picked was taken meanwhile. Returns
/// once a request has been answered (so a worker is serving).
pub fn start_http(p: &Prefix, workers: u32, http: impl Fn(u16) -> String) -> Running {
    let mut last_log = String::new();
    for _attempt in 0..3 {
        let port = free_port();
        p.conf(&format!(
            "{}http {{\n{}\n}}\n",
            main_conf(workers),
            http(port)
        ));
        let child = Command::new(gyre_bin())
            .arg("-p")
            .arg(&p.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(p.path("logs/stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let mut server = Server {
            child,
            prefix: p.dir.clone(),
        };
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if matches!(server.child.try_wait(), Ok(Some(_))) {
                break;
            }
            if probe(port) {
                return Running { server, port };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        last_log = format!(
            "{}\nstderr:\n{}",
            server.log(),
            std::fs::read_to_string(p.path("logs/stderr.log")).unwrap_or_default()
        );
        drop(server);
    }
    panic!("gyre did not start serving; log:\n{last_log}");
}

/// Starts one worker with a single `server` on a free port, root `html`,
/// and `extra` inside the server block.
pub fn start_one_server(p: &Prefix, extra: &str) -> Running {
    let extra = extra.to_string();
    start_http(p, 1, move |port| {
        format!(
            "server {{
                listen 127.0.0.1:{port};
                root html;
                {extra}
            }}"
        )
    })
}

/// One full request/response round trip on a fresh connection.
pub fn probe(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /__probe__ HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 5];
    matches!(s.read_exact(&mut buf), Ok(()) if &buf == b"HTTP/")
}

// ---------------------------------------------------------------- ureq

pub fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(IO_TIMEOUT)
        .redirects(0)
        .build()
}

/// A response read by ureq, error statuses included.
#[derive(Debug)]
pub struct UResp {
    pub status: u16,
    /// Names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl UResp {
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The first header called `name` (any case).
fn header_in<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Runs a ureq request; a 4xx/5xx is a response, a transport error panics.
pub fn call(req: ureq::Request) -> UResp {
    finish(req.call())
}

pub fn finish(r: Result<ureq::Response, ureq::Error>) -> UResp {
    let resp = match r {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("transport error: {e}"),
    };
    let status = resp.status();
    let headers = resp
        .headers_names()
        .into_iter()
        .flat_map(|n| {
            resp.all(&n)
                .into_iter()
                .map(|v| (n.to_ascii_lowercase(), v.to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut body = Vec::new();
    resp.into_reader()
        .take(64 << 20)
        .read_to_end(&mut body)
        .unwrap();
    UResp {
        status,
        headers,
        body,
    }
}

pub fn get(r: &Running, path: &str) -> UResp {
    call(agent().get(&r.url(path)))
}

// ---------------------------------------------------------------- raw

/// A response parsed off a raw socket.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    /// The status line and headers, without the blank line.
    pub head: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A plain TCP client with a buffer of bytes received but not yet parsed.
pub struct Raw {
    pub s: TcpStream,
    pub buf: Vec<u8>,
    pub eof: bool,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        Raw {
            s,
            buf: Vec::new(),
            eof: false,
        }
    }

    pub fn local_port(&self) -> u16 {
        self.s.local_addr().unwrap().port()
    }

    pub fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    /// Tries to send; false when the peer has gone (EPIPE / reset).
    pub fn try_send(&mut self, b: &[u8]) -> bool {
        self.s.write_all(b).is_ok()
    }

    /// Reads more into the buffer; Ok(0) at EOF.
    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 64 * 1024];
        let n = self.s.read_some(&mut chunk)?;
        if n == 0 {
            self.eof = true;
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// The next response; `head_only` for a HEAD request.
    pub fn response(&mut self, head_only: bool) -> Resp {
        match self.try_response(head_only) {
            Ok(Some(r)) => r,
            Ok(None) => panic!(
                "connection closed before a full response; got {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
            Err(e) => panic!(
                "reading a response: {e}; got {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
        }
    }

    /// The next response, or None if the server closed first.
    pub fn try_response(&mut self, head_only: bool) -> io::Result<Option<Resp>> {
        let end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            if self.eof || self.fill()? == 0 {
                return Ok(None);
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        self.buf.drain(..end + 4);
        let cl = header_in(&headers, "content-length").and_then(|v| v.parse::<usize>().ok());
        let bodiless = head_only || status < 200 || status == 204 || status == 304;
        let chunked = header_in(&headers, "transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let body = if bodiless {
            Vec::new()
        } else if chunked {
            self.read_chunked()?
        } else if let Some(n) = cl {
            while self.buf.len() < n {
                if self.eof || self.fill()? == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("body: {} of {n} bytes", self.buf.len()),
                    ));
                }
            }
            self.buf.drain(..n).collect()
        } else {
            // Delimited by close.
            while !self.eof {
                self.fill()?;
            }
            std::mem::take(&mut self.buf)
        };
        Ok(Some(Resp {
            status,
            head,
            headers,
            body,
        }))
    }

    /// A chunked body, decoded (the chunk sizes and the last chunk
    /// checked; no trailers expected).
    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        let mut body = Vec::new();
        for _ in 0..1_000_000 {
            let line_end = loop {
                if let Some(i) = find(&self.buf, b"\r\n") {
                    break i;
                }
                if self.eof || self.fill()? == 0 {
                    return Err(bad("chunked body cut short"));
                }
            };
            let size = std::str::from_utf8(&self.buf[..line_end])
                .ok()
                .and_then(|l| usize::from_str_radix(l.trim(), 16).ok())
                .ok_or_else(|| bad("bad chunk size line"))?;
            self.buf.drain(..line_end + 2);
            while self.buf.len() < size + 2 {
                if self.eof || self.fill()? == 0 {
                    return Err(bad("chunk cut short"));
                }
            }
            if &self.buf[size..size + 2] != b"\r\n" {
                return Err(bad("chunk not followed by CRLF"));
            }
            body.extend(self.buf.drain(..size));
            self.buf.drain(..2);
            if size == 0 {
                return Ok(body);
            }
        }
        Err(bad("too many chunks"))
    }

    /// Waits up to `within` for the server to close (EOF or reset). Bytes
    /// that arrive meanwhile are kept in `buf`.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        if self.eof {
            return true;
        }
        let end = Instant::now() + within;
        let r = loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            self.s
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            match self.fill() {
                Ok(0) => break true,
                Ok(_) => {}
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut =>
                {
                    break false
                }
                Err(_) => {
                    self.eof = true;
                    break true;
                }
            }
        };
        self.s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        r
    }

    pub fn shutdown_write(&self) {
        let _ = self.s.shutdown(Shutdown::Write);
    }
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One request on a fresh connection with `Connection: close`.
/// The head's bytes as the server sent them for `input` (up to the blank
/// line), one line each, the `Date` and `Server` lines dropped and
/// `:PORT` in place of the server's port: for comparing raw heads.
pub fn raw_head(port: u16, input: &[u8]) -> Vec<Vec<u8>> {
    let mut r = Raw::connect(port);
    r.send(input);
    while find(&r.buf, b"\r\n\r\n").is_none() && !r.eof && r.fill().is_ok_and(|n| n > 0) {}
    let end = find(&r.buf, b"\r\n\r\n").unwrap_or(r.buf.len());
    let port_s = format!(":{port}");
    r.buf[..end]
        .split(|&b| b == b'\n')
        .filter(|l| !l.starts_with(b"Date:") && !l.starts_with(b"Server:"))
        .map(|l| {
            let mut l = l.to_vec();
            if let Some(i) = find(&l, port_s.as_bytes()) {
                l.splice(i..i + port_s.len(), *b":PORT");
            }
            l
        })
        .collect()
}

pub fn raw_request(port: u16, req: &str) -> Resp {
    let mut c = Raw::connect(port);
    c.send(req.as_bytes());
    let head_only = req.starts_with("HEAD ");
    c.response(head_only)
}

// ---------------------------------------------------------------- stub_status

/// The numbers of a stub_status page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    pub active: u64,
    pub accepts: u64,
    pub handled: u64,
    pub requests: u64,
    pub reading: u64,
    pub writing: u64,
    pub waiting: u64,
}

fn nums(s: &str) -> Option<Vec<u64>> {
    s.split(' ').map(|n| n.parse().ok()).collect()
}

/// Parses nginx's exact format (trailing spaces included), or says why not:
///
/// ```text
/// Active connections: N \n
/// server accepts handled requests\n
///  A H R \n
/// Reading: r Writing: w Waiting: x \n
/// ```
pub fn parse_status(text: &str) -> Result<Status, String> {
    let bad = || format!("not nginx's stub_status format: {text:?}");
    let lines: Vec<&str> = text
        .strip_suffix('\n')
        .ok_or_else(bad)?
        .split('\n')
        .collect();
    let [l1, l2, l3, l4] = lines.as_slice() else {
        return Err(bad());
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let active = l1
        .strip_prefix("Active connections: ")
        .and_then(|r| r.strip_suffix(' '))
        .filter(|n| digits(n))
        .and_then(|n| n.parse().ok())
        .ok_or_else(bad)?;
    if *l2 != "server accepts handled requests" {
        return Err(bad());
    }
    let three = l3
        .strip_prefix(' ')
        .and_then(|r| r.strip_suffix(' '))
        .filter(|r| r.split(' ').all(digits))
        .and_then(nums)
        .filter(|v| v.len() == 3)
        .ok_or_else(bad)?;
    let rest = l4
        .strip_prefix("Reading: ")
        .and_then(|r| r.strip_suffix(' '))
        .ok_or_else(bad)?;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [r, w_label, w, x_label, x] = parts.as_slice() else {
        return Err(bad());
    };
    if *w_label != "Writing:" || *x_label != "Waiting:" || ![r, w, x].iter().all(|n| digits(n)) {
        return Err(bad());
    }
    Ok(Status {
        active,
        accepts: three[0],
        handled: three[1],
        requests: three[2],
        reading: r.parse().map_err(|_| bad())?,
        writing: w.parse().map_err(|_| bad())?,
        waiting: x.parse().map_err(|_| bad())?,
    })
}

/// Reads `path` (a stub_status location) on a fresh raw connection that
/// closes after the response; returns the numbers and the local port used.
pub fn status(port: u16, path: &str) -> (Status, u16) {
    let mut c = Raw::connect(port);
    let lp = c.local_port();
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
    let r = c.response(false);
    assert_eq!(r.status, 200, "{}", r.head);
    (parse_status(&r.text()).unwrap(), lp)
}

// ---------------------------------------------------------------- /proc

/// The inodes of the server sides of the loopback connections from
/// `client_ports` to `server_port`, from one read of /proc/net/tcp.
pub fn server_socket_inodes(server_port: u16, client_ports: &[u16]) -> Vec<Option<u64>> {
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let local = format!("0100007F:{server_port:04X}");
    let mut found = vec![None; client_ports.len()];
    for l in tcp.lines().skip(1) {
        if !l.contains(&local) {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.get(1) != Some(&local.as_str()) {
            continue;
        }
        let Some(remote) = f.get(2).and_then(|r| r.strip_prefix("0100007F:")) else {
            continue;
        };
        let Ok(port) = u16::from_str_radix(remote, 16) else {
            continue;
        };
        if let Some(i) = client_ports.iter().position(|&p| p == port) {
            found[i] = f
                .get(9)
                .and_then(|n| n.parse().ok())
                .filter(|&n: &u64| n != 0);
        }
    }
    found
}

/// Which of `pids` has socket `inode` open.
pub fn owner_of_socket(pids: &[u32], inode: u64) -> Option<u32> {
    let want = format!("socket:[{inode}]");
    pids.iter().copied().find(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.flatten().any(|e| {
                    std::fs::read_link(e.path())
                        .map(|l| l.to_string_lossy() == want)
                        .unwrap_or(false)
                })
            })
            .unwrap_or(false)
    })
}
