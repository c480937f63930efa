//! The built-in default configuration: `gyre -p DIR` with no conf/ at all
//! serves DIR/html and /status on 127.0.0.1:8080.
#![allow(clippy::unwrap_used)]

mod util;

use std::net::TcpListener;
use std::time::Duration;

use util::http::{parse_status, probe, raw_request};
use util::{wait_for, Prefix};

#[test]
fn built_in_default_config_serves_html_and_status_on_8080() {
    // Another program (or a parallel run) may hold 8080: then there is
    // nothing to test here.
    for port in [8080, 6380] {
        match TcpListener::bind(("127.0.0.1", port)) {
            Ok(l) => drop(l),
            Err(e) => {
                eprintln!(
                    "SKIPPED: 127.0.0.1:{port} is busy ({e}); cannot test the built-in default"
                );
                return;
            }
        }
    }
    let p = Prefix::new("default-conf");
    std::fs::remove_dir_all(p.path("conf")).unwrap();
    std::fs::remove_dir_all(p.path("logs")).unwrap();
    let unique = format!(
        "<h1>gyre built-in default {} {:?}</h1>\n",
        std::process::id(),
        std::time::SystemTime::now()
    );
    p.write("html/index.html", &unique);
    let s = p.start();
    assert!(
        wait_for(Duration::from_secs(10), || probe(8080)),
        "nothing serves 127.0.0.1:8080"
    );

    let r = raw_request(
        8080,
        "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), unique, "it is our server on 8080");
    // server_tokens on (nginx's default): the version too.
    assert_eq!(
        r.header("server"),
        Some(concat!("gyre/", env!("CARGO_PKG_VERSION")))
    );

    let st = raw_request(
        8080,
        "GET /status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(st.status, 200);
    let counts = parse_status(&st.text()).unwrap();
    assert!(counts.requests >= 2, "{counts:?}");

    // worker_processes auto: one per core, plus the kv process (RESP on
    // 127.0.0.1:6380).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        wait_for(Duration::from_secs(5), || s.workers().len() == cores + 1),
        "workers {:?}, cores {cores}",
        s.workers()
    );
    let mut kv = std::net::TcpStream::connect("127.0.0.1:6380").unwrap();
    kv.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    std::io::Write::write_all(&mut kv, b"PING\r\n").unwrap();
    let mut pong = [0u8; 7];
    std::io::Read::read_exact(&mut kv, &mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n", "the kv process serves 127.0.0.1:6380");
    // The pid file's directory was created; access_log off writes nothing.
    assert!(p.path("logs/gyre.pid").exists());
    std::thread::sleep(Duration::from_millis(1200));
    assert!(!p.path("logs/access.log").exists());
}
