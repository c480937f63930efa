//! A minimal threaded HTTP/1.1 test backend for the proxy tests (until
//! the shared one in tests/util lands): it records every request it
//! receives and answers with what a closure makes.
#![allow(dead_code, clippy::unwrap_used)]

use crate::util::ReadSome;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as the backend received it.
#[derive(Clone, Debug)]
pub struct Got {
    pub line: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Requests before this one on the same connection.
    pub on_conn: usize,
}

impl Got {
    pub fn header(&self, n: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.as_str())
    }
}

pub type Reply = Arc<dyn Fn(&Got) -> Vec<u8> + Send + Sync>;

/// A threaded HTTP/1.1 backend (keep-alive unless the request says
/// close); `reply` makes each response's bytes.
pub struct Backend {
    pub port: u16,
    pub got: Arc<Mutex<Vec<Got>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

pub fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

pub fn backend(reply: Reply) -> Backend {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (g, st) = (got.clone(), stop.clone());
    std::thread::spawn(move || {
        for s in l.incoming() {
            if st.load(Ordering::SeqCst) {
                break;
            }
            let Ok(s) = s else { continue };
            let (g, reply, st) = (g.clone(), reply.clone(), st.clone());
            std::thread::spawn(move || serve(s, g, reply, st));
        }
    });
    Backend { port, got, stop }
}

/// Serves one connection until it closes; once `stop` is set (the
/// backend was dropped: "killed") a request gets no answer, the
/// connection is just closed.
fn serve(mut s: TcpStream, got: Arc<Mutex<Vec<Got>>>, reply: Reply, stop: Arc<AtomicBool>) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = Vec::new();
    // Bounded: each request consumes bytes; the read timeout ends it.
    for n_on_conn in 0..10_000 {
        let end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i;
            }
            let mut c = [0u8; 8192];
            match s.read_some(&mut c) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&c[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let line = lines.next().unwrap_or("").to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let mut g = Got {
            line,
            headers,
            body: Vec::new(),
            on_conn: n_on_conn,
        };
        let cl: usize = g
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < cl {
            let mut c = [0u8; 8192];
            match s.read_some(&mut c) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&c[..n]),
            }
        }
        g.body = buf.drain(..cl).collect();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let close = g.line.ends_with("HTTP/1.0")
            || g.header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let out = reply(&g);
        got.lock().unwrap().push(g);
        if s.write_all(&out).is_err() || close {
            return;
        }
    }
}

/// Decodes a complete chunked body.
pub fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    // Bounded: each chunk consumes bytes.
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size, 16).unwrap();
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

pub fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nServer: backend\r\nDate: x\r\nContent-Type: text/plain\r\nX-Up: 1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A backend that answers every request with `ok(path)`.
pub fn echo_backend() -> Backend {
    backend(Arc::new(|g: &Got| {
        let path = g.line.split(' ').nth(1).unwrap_or("").to_string();
        ok(&path)
    }))
}
