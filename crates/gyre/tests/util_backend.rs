//! Self-test of the proxy tests' backends (tests/util/backend.rs): what
//! they record and send, checked with raw sockets and ureq.
#![allow(clippy::unwrap_used)]

mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use util::ReadSome;

use util::backend::{Backend, Reply, Scripted, Step};

const T: Duration = Duration::from_secs(5);

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    s.set_write_timeout(Some(T)).unwrap();
    s
}

/// Reads one response whose body is `Content-Length` long; returns the
/// head and the body.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> (String, Vec<u8>) {
    let mut tmp = [0u8; 4096];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        let n = s.read_some(&mut tmp).unwrap();
        assert!(n > 0, "EOF in head");
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8(buf[..end].to_vec()).unwrap();
    buf.drain(..end + 4);
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_string())
        })
        .map_or(0, |v| v.parse().unwrap());
    while buf.len() < len {
        let n = s.read_some(&mut tmp).unwrap();
        assert!(n > 0, "EOF in body");
        buf.extend_from_slice(&tmp[..n]);
    }
    let body = buf.drain(..len).collect();
    (head, body)
}

fn read_to_end(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

#[test]
fn records_requests_and_keeps_connections_alive() {
    let b = Backend::routes(vec![
        ("/", Reply::ok("root\n")),
        ("/a/", Reply::ok("A\n").header("X-Route", "a")),
    ]);
    let mut s = connect(b.port());
    let mut buf = Vec::new();
    s.write_all(b"GET /a/x?q=1 HTTP/1.1\r\nHost: up\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n")
        .unwrap();
    let (head, body) = read_response(&mut s, &mut buf);
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("X-Route: a"));
    assert_eq!(body, b"A\n");
    // The same connection serves the next one: a POST with a chunked body.
    s.write_all(
        b"POST /b HTTP/1.1\r\nHost: up\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n",
    )
    .unwrap();
    let (_, body) = read_response(&mut s, &mut buf);
    assert_eq!(body, b"root\n");
    // Connection: close ends it after the response.
    s.write_all(b"GET /nope HTTP/1.1\r\nHost: up\r\nConnection: close\r\n\r\n")
        .unwrap();
    let rest = read_to_end(&mut s);
    assert!(String::from_utf8_lossy(&rest).contains("Connection: close"));

    let rs = b.wait_requests(3, T);
    assert_eq!(rs.len(), 3);
    assert_eq!(rs[0].request_line, "GET /a/x?q=1 HTTP/1.1");
    assert_eq!(rs[0].path(), "/a/x");
    assert_eq!(rs[0].header("host"), Some("up"));
    assert_eq!(rs[0].header("X-Forwarded-For"), Some("1.2.3.4"));
    assert_eq!(rs[1].method, "POST");
    assert!(rs[1].chunked);
    assert_eq!(rs[1].body, b"abcde");
    assert!(rs.iter().all(|r| r.conn == 0), "one connection");
    assert_eq!(b.connections(), 1);

    // HTTP/1.0 without keep-alive closes; a second client is connection 1.
    let mut s = connect(b.port());
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let out = String::from_utf8(read_to_end(&mut s)).unwrap();
    assert!(out.ends_with("root\n"), "{out}");
    assert_eq!(b.wait_requests(4, T)[3].conn, 1);
}

#[test]
fn chunked_close_delimited_interim_and_delayed_replies() {
    let body: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let b = Backend::routes(vec![
        ("/chunked", Reply::ok(body.clone()).chunked(1000)),
        ("/close", Reply::ok(body.clone()).close_delimited()),
        ("/slow", Reply::ok("late").delay(Duration::from_millis(300))),
        ("/hints", Reply::new(204, "").interim(103)),
    ]);
    let agent = ureq::AgentBuilder::new().timeout(T).build();
    let get = |p: &str| {
        let mut v = Vec::new();
        let r = agent
            .get(&format!("http://{}{p}", b.addr()))
            .call()
            .unwrap();
        let te = r.header("Transfer-Encoding").map(str::to_string);
        r.into_reader().read_to_end(&mut v).unwrap();
        (te, v)
    };
    let (te, got) = get("/chunked");
    assert_eq!(te.as_deref(), Some("chunked"));
    assert_eq!(got, body);
    assert_eq!(get("/close").1, body);
    let t0 = Instant::now();
    assert_eq!(get("/slow").1, b"late");
    assert!(t0.elapsed() >= Duration::from_millis(300));

    // The 1xx comes first, then the final response on the same stream.
    let mut s = connect(b.port());
    s.write_all(b"GET /hints HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let out = String::from_utf8(read_to_end(&mut s)).unwrap();
    assert!(
        out.starts_with("HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 204 No Content\r\n"),
        "{out}"
    );

    // HEAD: the length of the body, no body.
    let mut s = connect(b.port());
    s.write_all(b"HEAD /close HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let out = String::from_utf8(read_to_end(&mut s)).unwrap();
    assert!(out.ends_with("\r\n\r\n"), "{out}");
}

#[test]
fn expect_continue_upgrade_echo_and_bad_requests() {
    let b = Backend::start(|r| {
        if r.header("Upgrade").is_some() {
            Reply::upgrade("websocket")
        } else {
            Reply::ok(format!("got {}", r.body.len()))
        }
    });
    let mut s = connect(b.port());
    s.write_all(b"PUT /u HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 25];
    s.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"body").unwrap();
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut s, &mut buf).1, b"got 4");

    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    )
    .unwrap();
    let (head, _) = read_response(&mut s, &mut buf);
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols"),
        "{head}"
    );
    s.write_all(b"ping").unwrap();
    let mut echo = [0u8; 4];
    s.read_exact(&mut echo).unwrap();
    assert_eq!(&echo, b"ping");
    drop(s);

    let mut s = connect(b.port());
    s.write_all(b"NONSENSE\r\n\r\n").unwrap();
    let out = String::from_utf8(read_to_end(&mut s)).unwrap();
    assert!(out.starts_with("HTTP/1.1 400 Bad Request"), "{out}");
}

#[test]
fn stop_and_restart_on_the_same_port() {
    let mut b = Backend::start(|_| Reply::ok("up"));
    let port = b.port();
    let agent = ureq::AgentBuilder::new().timeout(T).build();
    let url = format!("http://127.0.0.1:{port}/");
    assert_eq!(agent.get(&url).call().unwrap().into_string().unwrap(), "up");
    // A keep-alive connection left open does not keep the backend alive.
    let mut idle = connect(port);
    idle.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    read_response(&mut idle, &mut buf);
    b.stop();
    assert_eq!(read_to_end(&mut idle), b"", "closed by stop");
    assert_eq!(
        TcpStream::connect(("127.0.0.1", port)).unwrap_err().kind(),
        ErrorKind::ConnectionRefused
    );
    b.restart().unwrap();
    assert_eq!(b.port(), port);
    // A new agent: the old one's pooled connection died with the stop.
    let agent = ureq::AgentBuilder::new().timeout(T).build();
    assert_eq!(agent.get(&url).call().unwrap().into_string().unwrap(), "up");
    assert_eq!(b.requests().len(), 3, "the log spans restarts");
}

#[test]
fn scripted_sends_pauses_and_resets() {
    let sc = Scripted::start(vec![
        vec![
            Step::ReadRequest,
            Step::send("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"),
            Step::pause_ms(50),
            Step::Reset,
        ],
        vec![
            Step::ReadRequest,
            Step::send("HTTP/1.1 200 OK\r\n\r\nall"),
            Step::ShutdownWrite,
            Step::WaitClose(T),
        ],
    ]);
    let mut s = connect(sc.port());
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz")
        .unwrap();
    let mut got = Vec::new();
    let mut tmp = [0u8; 256];
    let err = loop {
        match s.read_some(&mut tmp) {
            Ok(0) => panic!("clean EOF instead of a reset"),
            Ok(n) => got.extend_from_slice(&tmp[..n]),
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), ErrorKind::ConnectionReset);
    assert!(got.ends_with(b"partial"));

    // The second connection: FIN after the bytes, then it waits for ours.
    let mut s = connect(sc.port());
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    assert!(out.ends_with(b"\r\n\r\nall"));
    drop(s);
    let conns = sc.wait_done(2, T);
    assert_eq!(conns.len(), 2);
    assert!(conns[0].received.ends_with(b"\r\n\r\nxyz"));
    assert!(conns[1].peer_closed, "saw our close");
    assert!(conns.iter().all(|c| c.done));
}

/// nginx (`$NGINX` or /usr/sbin/nginx) in front of a backend: what a real
/// proxy sends is what the backend records — the baseline the proxy's
/// differential tests compare gyre with. Skips without nginx.
#[test]
fn nginx_in_front_records_what_a_proxy_sends() {
    let bin = std::env::var_os("NGINX")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/usr/sbin/nginx".into());
    if !bin.exists() {
        eprintln!(
            "skipped: no nginx at {} (apt-get install nginx)",
            bin.display()
        );
        return;
    }
    let b = Backend::start(|r| {
        if r.path().starts_with("/chunk") {
            Reply::ok("0123456789".repeat(100)).chunked(7)
        } else {
            Reply::ok(format!("{} {}", r.method, r.target))
        }
    });
    let p = util::Prefix::new("backend-nginx");
    let port = util::http::free_port();
    p.write(
        "conf/nginx.conf",
        &format!(
            "daemon off;\nmaster_process off;\nerror_log logs/error.log info;\npid logs/nginx.pid;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; proxy_temp_path {d}/px; client_body_temp_path {d}/cb;\n\
             upstream ka {{ server {a}; keepalive 4; }}\n\
             server {{ listen 127.0.0.1:{port};\n\
             location /ka/ {{ proxy_pass http://ka/; proxy_http_version 1.1; proxy_set_header Connection \"\"; }}\n\
             location /plain/ {{ proxy_pass http://{a}/x/; }}\n\
             location /chunk/ {{ proxy_pass http://{a}; }}\n\
             }} }}\n",
            d = p.dir.display(),
            a = b.addr()
        ),
    );
    let mut child = std::process::Command::new(&bin)
        .arg("-p")
        .arg(&p.dir)
        .args(["-c", "conf/nginx.conf", "-e", "logs/error.log"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = util::wait_for(T, || util::http::probe(port));
    let agent = ureq::AgentBuilder::new().timeout(T).build();
    let get = |path: &str| {
        agent
            .get(&format!("http://127.0.0.1:{port}{path}"))
            .set("X-Forwarded-For", "10.0.0.1")
            .call()
            .map(|r| r.into_string().unwrap())
            .map_err(|e| e.to_string())
    };
    let results = up.then(|| {
        (
            get("/plain/a?b=1"),
            get("/ka/one"),
            get("/ka/two"),
            get("/chunk/z"),
        )
    });
    let _ = child.kill();
    let _ = child.wait();
    let (plain, one, two, chunk) = results.expect("nginx did not start");
    assert_eq!(plain.unwrap(), "GET /x/a?b=1");
    assert_eq!(one.unwrap(), "GET /one");
    assert_eq!(two.unwrap(), "GET /two");
    assert_eq!(chunk.unwrap(), "0123456789".repeat(100));

    let rs = b.wait_requests(4, T);
    assert_eq!(rs.len(), 4);
    // nginx's defaults: HTTP/1.0, Host $proxy_host, Connection close, the
    // client's other headers passed.
    assert_eq!(rs[0].request_line, "GET /x/a?b=1 HTTP/1.0");
    assert_eq!(rs[0].header("Host"), Some(b.addr().as_str()));
    assert_eq!(rs[0].header("Connection"), Some("close"));
    assert_eq!(rs[0].header("X-Forwarded-For"), Some("10.0.0.1"));
    // Upstream keep-alive: HTTP/1.1, no Connection header, one connection.
    assert_eq!(rs[1].request_line, "GET /one HTTP/1.1");
    assert_eq!(rs[1].header("Connection"), None);
    assert_eq!(rs[1].conn, rs[2].conn);
    assert_ne!(rs[0].conn, rs[1].conn);
    assert_eq!(rs[3].request_line, "GET /chunk/z HTTP/1.0");
}
