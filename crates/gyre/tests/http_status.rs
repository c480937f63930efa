//! stub_status end to end with the real binary: nginx's exact text, the
//! requests / accepts / handled counters, the gauges, and counters shared by
//! two workers.
#![allow(clippy::unwrap_used)]

mod util;

use std::time::{Duration, Instant};

use util::http::{
    owner_of_socket, parse_status, server_socket_inodes, start_http, status, Raw, Running,
};
use util::Prefix;

fn fixture(name: &str, workers: u32) -> (Running, Prefix) {
    let p = Prefix::new(name);
    p.write("html/index.html", "status index\n");
    let r = start_http(&p, workers, |port| {
        format!(
            "server {{
                listen 127.0.0.1:{port};
                root html;
                location = /status {{ stub_status; }}
            }}"
        )
    });
    (r, p)
}

#[test]
fn format_is_nginx_byte_for_byte() {
    let (r, _p) = fixture("ss-format", 1);
    let mut c = r.raw();
    c.send(b"GET /status HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let resp = c.response(false);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("text/plain"));
    let text = resp.text();
    let s = parse_status(&text).unwrap();
    assert_eq!(s.accepts, s.handled);
    assert!(s.active >= 1 && s.writing >= 1, "{text:?}");
    // The same page rebuilt from the numbers, trailing spaces included.
    assert_eq!(
        text,
        format!(
            "Active connections: {} \nserver accepts handled requests\n {} {} {} \nReading: {} Writing: {} Waiting: {} \n",
            s.active, s.accepts, s.handled, s.requests, s.reading, s.writing, s.waiting
        )
    );
    // HEAD: headers only, with the GET length.
    let h = util::http::raw_request(
        r.port,
        "HEAD /status HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    // The parser itself refuses near misses.
    for bad in [
        "Active connections: 1\nserver accepts handled requests\n 1 1 1 \nReading: 0 Writing: 1 Waiting: 0 \n",
        "Active connections: 1 \nserver accepts handled requests\n 1 1 1\nReading: 0 Writing: 1 Waiting: 0 \n",
        "Active connections: 1 \nserver accepts handled requests\n 1 1 1 \nReading: 0 Writing: 1 Waiting: 0\n",
        "Active connections: 1 \nserver accepts handled requests\n 1 1 1 \nReading: 0 Writing: 1 Waiting: 0 ",
    ] {
        assert!(parse_status(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn requests_on_one_keepalive_connection_are_counted_exactly() {
    let (r, _p) = fixture("ss-requests", 1);
    let (s0, _) = status(r.port, "/status");
    const N: u64 = 7;
    let mut c = r.raw();
    for _ in 0..N {
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let resp = c.response(false);
        assert_eq!(resp.status, 200);
        assert_eq!(resp.header("connection"), Some("keep-alive"));
    }
    let (s1, _) = status(r.port, "/status");
    assert_eq!(
        s1.requests,
        s0.requests + N + 1,
        "N requests and the status request itself: {s0:?} -> {s1:?}"
    );
    assert_eq!(s1.accepts, s0.accepts + 2, "{s0:?} -> {s1:?}");
    assert_eq!(s1.handled, s1.accepts);

    // Gauges with one idle keep-alive connection open: it is Waiting; the
    // status request is Writing; nothing is Reading. The previous status
    // connection's close is asynchronous, hence the retries.
    let end = Instant::now() + Duration::from_secs(3);
    let mut last;
    loop {
        let (s, _) = status(r.port, "/status");
        last = s;
        if (s.active, s.reading, s.writing, s.waiting) == (2, 0, 1, 1) || Instant::now() > end {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        (last.active, last.reading, last.writing, last.waiting),
        (2, 0, 1, 1),
        "{last:?}"
    );
    // A connection with half a request is Reading.
    c.send(b"GET / HTTP/1.1\r\n");
    let end = Instant::now() + Duration::from_secs(3);
    loop {
        let (s, _) = status(r.port, "/status");
        last = s;
        if (s.reading, s.waiting) == (1, 0) || Instant::now() > end {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        (last.reading, last.writing, last.waiting),
        (1, 1, 0),
        "{last:?}"
    );
    drop(c);
}

#[test]
fn accepts_and_handled_count_every_connection() {
    let (r, _p) = fixture("ss-accepts", 1);
    let (s0, _) = status(r.port, "/status");
    const WITH_REQUEST: u64 = 10;
    const EMPTY: u64 = 5;
    for _ in 0..WITH_REQUEST {
        let mut c = r.raw();
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        assert_eq!(c.response(false).status, 200);
    }
    for _ in 0..EMPTY {
        // Connect and close without a request: accepted, handled, no request.
        drop(r.raw());
    }
    let (s1, _) = status(r.port, "/status");
    assert_eq!(
        s1.accepts,
        s0.accepts + WITH_REQUEST + EMPTY + 1,
        "{s0:?} -> {s1:?}"
    );
    assert_eq!(s1.handled, s1.accepts, "{s1:?}");
    assert_eq!(
        s1.requests,
        s0.requests + WITH_REQUEST + 1,
        "{s0:?} -> {s1:?}"
    );
}

#[test]
fn counters_are_shared_by_two_workers() {
    let (r, _p) = fixture("ss-workers", 2);
    assert!(util::wait_for(Duration::from_secs(5), || r
        .server
        .workers()
        .len()
        == 2));
    let workers = r.server.workers();
    let (s0, _) = status(r.port, "/status");
    // Connections since s0, each with two requests; they are held open in
    // batches so one read of /proc/net/tcp finds the worker of each.
    let mut conns = 0u64;
    let mut served_by = std::collections::HashMap::<u32, u64>::new();
    let end = Instant::now() + Duration::from_secs(10);
    while served_by.len() < 2 && conns < 400 && Instant::now() < end {
        let mut batch = Vec::new();
        for _ in 0..20 {
            let mut c = Raw::connect(r.port);
            conns += 1;
            c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(c.response(false).status, 200);
            batch.push(c);
        }
        let ports: Vec<u16> = batch.iter().map(Raw::local_port).collect();
        for w in owners(r.port, &ports, &workers).into_iter().flatten() {
            *served_by.entry(w).or_default() += 1;
        }
        for mut c in batch {
            c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            assert_eq!(c.response(false).status, 200);
        }
    }
    assert_eq!(
        served_by.len(),
        2,
        "both workers served some of {conns} connections: {served_by:?}"
    );
    // Read the status over new connections (held open) until both workers
    // answered one; every reading must count every connection and request
    // made so far, whichever worker served it.
    let mut held = Vec::new();
    let mut readings = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    while held.len() < 200 && Instant::now() < end {
        for _ in 0..10 {
            let mut c = Raw::connect(r.port);
            c.send(b"GET /status HTTP/1.1\r\nHost: t\r\n\r\n");
            let s = parse_status(&c.response(false).text()).unwrap();
            held.push(c);
            readings.push(s);
        }
        let ports: Vec<u16> = held.iter().map(Raw::local_port).collect();
        let who = owners(r.port, &ports, &workers);
        let seen: std::collections::HashSet<u32> = who.iter().flatten().copied().collect();
        if seen.len() == 2 {
            for (k, (s, w)) in readings.iter().zip(&who).enumerate() {
                let k = k as u64 + 1;
                assert_eq!(
                    s.accepts,
                    s0.accepts + conns + k,
                    "reading {k} via worker {w:?}: {s0:?} -> {s:?}"
                );
                assert_eq!(s.handled, s.accepts);
                assert_eq!(
                    s.requests,
                    s0.requests + 2 * conns + k,
                    "reading {k} via worker {w:?}: {s0:?} -> {s:?}"
                );
            }
            return;
        }
    }
    panic!(
        "no status reading from both workers in {} tries",
        held.len()
    );
}

/// The worker holding the server side of each client port's connection.
fn owners(server_port: u16, client_ports: &[u16], workers: &[u32]) -> Vec<Option<u32>> {
    let inodes = server_socket_inodes(server_port, client_ports);
    inodes
        .into_iter()
        .map(|ino| ino.and_then(|i| owner_of_socket(workers, i)))
        .collect()
}
