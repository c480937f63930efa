//! The engine without sockets: a configuration read from text, a
//! connection machine fed raw bytes, a virtual clock.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::conn::Event;
use crate::settings::HttpSettings;
use crate::variables::ConnInfo;

struct Site {
    conf: HttpConf,
    dir: PathBuf,
}

fn site(name: &str, server_body: &str, files: &[(&str, &str)]) -> Site {
    let dir = std::env::temp_dir().join(format!("gyre-phases-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (f, text) in files {
        let p = dir.join("html").join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::create_dir_all(dir.join("html")).unwrap();
    let text = format!(
        "events {{}}\nhttp {{ access_log off; server {{ listen 127.0.0.1:1; root html;\n{server_body}\n}} }}\n"
    );
    let cf = gyre_core::conf::load_str(
        &text,
        "conf/gyre.conf".as_ref(),
        &dir,
        None,
        &[&crate::conf::HTTP_MODULE],
    )
    .unwrap();
    Site {
        conf: cf.module::<HttpConf>().unwrap().clone(),
        dir,
    }
}

/// One request through the phases: its status, the machine's output so
/// far, and the request (to resume).
struct Run {
    m: Connection,
    r: HttpRequest,
    files: FileCache,
    matches: MatchCache,
    open: Vec<(u64, Rc<FileInfo>)>,
    fpath: PathBuf,
    scratch: Vec<u8>,
}

impl Run {
    fn new(s: &Site, raw: &str) -> (Run, Status) {
        let mut m = Connection::new(HttpSettings::default(), 0);
        m.on_read(raw.as_bytes(), 0);
        let Some(Event::Request(req)) = m.poll(0, "D") else {
            panic!("no request")
        };
        let loc = HttpConf::server_loc(&s.conf.servers[0]).clone();
        let mut r = HttpRequest::new(req, 0, loc, ConnInfo::default(), 0);
        r.reset_vars(&s.conf);
        let mut run = Run {
            m,
            r,
            files: FileCache::new(),
            matches: MatchCache::default(),
            open: Vec::new(),
            fpath: PathBuf::new(),
            scratch: Vec::new(),
        };
        let st = run.step(s, 0, false);
        (run, st)
    }

    fn step(&mut self, s: &Site, now: Msec, resume: bool) -> Status {
        let sink = |_: &crate::conf::LocConf| 1;
        let mut cx = Ctx {
            conf: &s.conf,
            files: &mut self.files,
            matches: &mut self.matches,
            m: &mut self.m,
            open: &mut self.open,
            zone: None,
            now,
            unix_ms: 0,
            date: "D",
            fpath: &mut self.fpath,
            scratch: &mut self.scratch,
            last_call: false,
            sink: &sink,
            proxies: None,
        };
        let mut out = Response::new(0);
        if resume {
            super::resume(&mut cx, &mut self.r, &mut out)
        } else {
            super::run(&mut cx, &mut self.r, &mut out)
        }
    }

    fn output(&mut self) -> String {
        String::from_utf8_lossy(&self.m.take_output().bytes()).into_owned()
    }
}

fn body(out: &str) -> &str {
    out.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[test]
fn rewrite_last_finds_a_regex_location_and_return_reads_its_captures() {
    let s = site(
        "rewrite",
        r#"location /old/ { rewrite ^/old/(.*)$ /new/$1?x=1 last; }
           location ~ ^/new/(?<name>[a-z]+)$ { set $v "$name-$1"; return 200 "$v $uri $args $arg_x\n"; }"#,
        &[],
    );
    let (mut run, st) = Run::new(&s, "GET /old/abc?y=2 HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(st, Status::Done);
    let out = run.output();
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert_eq!(body(&out), "abc-abc /new/abc x=1&y=2 1\n");
    std::fs::remove_dir_all(&s.dir).unwrap();
}

#[test]
fn a_rewrite_cycle_ends_with_500_after_ten_changes() {
    let s = site(
        "cycle",
        "location /a { rewrite ^ /b last; }\nlocation /b { rewrite ^ /a last; }",
        &[],
    );
    let (mut run, st) = Run::new(&s, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(st, Status::Done);
    assert!(run.output().starts_with("HTTP/1.1 500 "));
    assert_eq!(run.r.st.uri_changes, 0);
    std::fs::remove_dir_all(&s.dir).unwrap();
}

#[test]
fn spa_try_files_falls_back_and_error_page_goes_to_a_named_location() {
    let s = site(
        "spa",
        "location / { try_files $uri $uri/ /index.html; }\n\
         location /api/ { error_page 404 = @api; }\n\
         location @api { return 200 \"api $uri\"; }\n\
         location /x/ { try_files $uri =404; }",
        &[("index.html", "spa\n"), ("a.txt", "a\n")],
    );
    let (mut run, _) = Run::new(&s, "GET /deep/route HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(body(&run.output()), "spa\n");
    assert_eq!(run.r.st.uri, b"/index.html");
    let (mut run, _) = Run::new(&s, "GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(body(&run.output()), "a\n");
    let (mut run, _) = Run::new(&s, "GET /api/none HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(body(&run.output()), "api /api/none");
    let (mut run, _) = Run::new(&s, "GET /x/none HTTP/1.1\r\nHost: h\r\n\r\n");
    assert!(run.output().starts_with("HTTP/1.1 404 "));
    std::fs::remove_dir_all(&s.dir).unwrap();
}

#[test]
fn limit_rate_suspends_and_resumes_on_the_virtual_clock() {
    let data = "x".repeat(2500);
    let s = site(
        "rate",
        "location / { limit_rate 1000; }",
        &[("f.txt", &data)],
    );
    let (mut run, st) = Run::new(&s, "GET /f.txt HTTP/1.1\r\nHost: h\r\n\r\n");
    // The head and the first second's 1000 bytes, then a wait for
    // the output to drain.
    assert_eq!(st, Status::Again);
    assert_eq!(run.r.wake, Some(Wake::Drained));
    let out = run.output();
    assert!(out.contains("Content-Length: 2500\r\n"), "{out}");
    assert_eq!(body(&out).len(), 1000);
    // Drained at t=10: nothing more is due until the second is over
    // (nginx's delay: 1 ms past the allowance, rounded to seconds).
    assert_eq!(run.step(&s, 10, true), Status::Again);
    assert_eq!(run.r.wake, Some(Wake::At(11)));
    assert_eq!(run.step(&s, 11, true), Status::Again);
    assert_eq!(run.output().len(), 0);
    // A second later: the next 1000 bytes; then the last 500.
    assert_eq!(run.step(&s, 1000, true), Status::Again);
    assert_eq!(run.output().len(), 1000);
    assert_eq!(run.step(&s, 1001, true), Status::Again);
    assert_eq!(run.step(&s, 2000, true), Status::Done);
    assert_eq!(run.output().len(), 500);
    assert!(!run.m.is_streaming());
    std::fs::remove_dir_all(&s.dir).unwrap();
}

/// Decodes a chunked body (test output only).
fn unchunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let i = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let n = usize::from_str_radix(std::str::from_utf8(&b[..i]).unwrap(), 16).unwrap();
        out.extend_from_slice(&b[i + 2..i + 2 + n]);
        b = &b[i + 2 + n + 2..];
        if n == 0 {
            return out;
        }
    }
}

#[test]
fn limit_rate_paces_a_gzipped_body_on_the_virtual_clock() {
    use std::io::Read;
    let mut x = 7u32;
    let data: String = (0..6000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (b'a' + (x % 26) as u8) as char
        })
        .collect();
    let s = site(
        "gzrate",
        "location / { gzip on; gzip_types text/plain; limit_rate 1000; }",
        &[("f.txt", &data)],
    );
    let (mut run, mut st) = Run::new(
        &s,
        "GET /f.txt HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip\r\n\r\n",
    );
    let mut out: Vec<u8> = run.m.take_output().bytes();
    let mut now = 0;
    let mut waits = 0;
    let body_len = |o: &[u8]| {
        o.windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(0, |i| o.len() - i - 4) as u64
    };
    for _ in 0..200 {
        // Never ahead of the rate by more than one piece (1 KiB of
        // input, its chunk framing and the gzip header).
        let body = body_len(&out);
        assert!(
            body <= 1000 * (now / 1000 + 1) + 1100,
            "{body} bytes at {now} ms"
        );
        if st == Status::Done {
            break;
        }
        if let Some(Wake::At(t)) = run.r.wake {
            now = t;
            waits += 1;
        }
        st = run.step(&s, now, true);
        out.extend(run.m.take_output().bytes());
    }
    assert_eq!(st, Status::Done);
    assert!(waits >= 2, "{waits} waits");
    let i = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&out[..i]).into_owned();
    assert!(head.contains("Content-Encoding: gzip"), "{head}");
    assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
    let gz = unchunk(&out[i + 4..]);
    let mut back = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut back)
        .unwrap();
    assert_eq!(back, data);
    std::fs::remove_dir_all(&s.dir).unwrap();
}

#[test]
fn only_the_phases_in_use_are_built() {
    let s = site("build", "location = /r { return 200 ok; }", &[]);
    assert_eq!(
        &*s.conf.phases,
        &[Phase::FindConfig, Phase::Rewrite, Phase::Content]
    );
    let s3 = site("build3", "location /a { rewrite ^ /b; }", &[]);
    assert_eq!(
        &*s3.conf.phases,
        &[
            Phase::FindConfig,
            Phase::Rewrite,
            Phase::PostRewrite,
            Phase::Content
        ]
    );
    std::fs::remove_dir_all(&s3.dir).unwrap();
    let s2 = site("build2", "location / { }", &[]);
    assert_eq!(&*s2.conf.phases, &[Phase::FindConfig, Phase::Content]);
    // `allow`/`deny` anywhere (here the server level only) add access.
    let s4 = site("build4", "deny 10.0.0.0/8; location / { }", &[]);
    assert_eq!(
        &*s4.conf.phases,
        &[Phase::FindConfig, Phase::Access, Phase::Content]
    );
    std::fs::remove_dir_all(&s4.dir).unwrap();
    std::fs::remove_dir_all(&s.dir).unwrap();
    std::fs::remove_dir_all(&s2.dir).unwrap();
}
