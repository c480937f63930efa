//! The request path allocates nothing once warm: a counting allocator
//! watches the phases answering `return 200`, a static file through a
//! regex location, and variables read from the cache (the glue's loop,
//! without sockets: the same machine, request object and buffers reused).
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::rc::Rc;

use gyre_http::conf::{HttpConf, HTTP_MODULE};
use gyre_http::phases::{self, Ctx, Status};
use gyre_http::regex::MatchCache;
use gyre_http::request::HttpRequest;
use gyre_http::static_file::{FileCache, FileInfo};
use gyre_http::variables::ConnInfo;
use gyre_http::{Connection, Event, HttpSettings, Response};

// dhat's counting allocator (so the test needs no unsafe of its own).
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Heap blocks allocated while `f` runs.
fn counted<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = dhat::HeapStats::get().total_blocks;
    let r = f();
    (r, dhat::HeapStats::get().total_blocks - before)
}

struct World {
    conf: HttpConf,
    m: Connection,
    r: Option<Box<HttpRequest>>,
    files: FileCache,
    matches: MatchCache,
    open: Vec<(u64, Rc<FileInfo>)>,
    fpath: PathBuf,
    scratch: Vec<u8>,
    out: Response,
}

impl World {
    /// One request through the machine and the phases; the output bytes.
    fn serve(&mut self, raw: &[u8]) -> usize {
        self.m.on_read(raw, 0);
        let Some(Event::Request(req)) = self.m.poll(0, "D") else {
            panic!("no request")
        };
        let loc = HttpConf::server_loc(&self.conf.servers[0]).clone();
        let mut r = match self.r.take() {
            Some(mut r) => {
                let old = r.reuse(req, 0, loc, ConnInfo::default(), 0);
                self.m.recycle(old);
                r
            }
            None => Box::new(HttpRequest::new(req, 0, loc, ConnInfo::default(), 0)),
        };
        r.reset_vars(&self.conf);
        let sink = |_: &gyre_http::conf::LocConf| 1;
        let mut cx = Ctx {
            conf: &self.conf,
            files: &mut self.files,
            matches: &mut self.matches,
            m: &mut self.m,
            open: &mut self.open,
            zone: None,
            now: 0,
            unix_ms: 0,
            date: "D",
            fpath: &mut self.fpath,
            scratch: &mut self.scratch,
            last_call: false,
            sink: &sink,
            proxies: None,
        };
        assert_eq!(phases::run(&mut cx, &mut r, &mut self.out), Status::Done);
        self.out.reset(0);
        self.r = Some(r);
        let mut n = 0;
        while let Some(gyre_http::Chunk::Bytes(b)) = self.m.next_output() {
            let len = b.len();
            n += len;
            self.m.consume_output(len as u64);
        }
        n
    }
}

#[test]
fn a_warm_request_path_allocates_nothing() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let dir = std::env::temp_dir().join(format!("gyre-noalloc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("html/img")).unwrap();
    std::fs::write(dir.join("html/s.txt"), "hello world!\n").unwrap();
    std::fs::write(dir.join("html/img/a.png"), "png").unwrap();
    let text = "events {}\nhttp { access_log off; server { listen 127.0.0.1:1; root html;\n\
                location = /r { return 200 \"ok\"; }\n\
                location ~* \\.(png|jpg)$ { add_header X-Kind $1; }\n\
                location = /v { set $x \"$host:$arg_a\"; return 204; } } }\n";
    let cf =
        gyre_core::conf::load_str(text, "conf/gyre.conf".as_ref(), &dir, None, &[&HTTP_MODULE])
            .unwrap();
    let mut w = World {
        conf: cf.module::<HttpConf>().unwrap().clone(),
        // As the glue sets it with `access_log off` (log records are the
        // access log's, measured apart).
        m: Connection::new(
            HttpSettings {
                log_requests: false,
                ..HttpSettings::default()
            },
            0,
        ),
        r: None,
        files: FileCache::new(),
        matches: MatchCache::default(),
        open: Vec::new(),
        fpath: PathBuf::new(),
        scratch: Vec::new(),
        out: Response::new(0),
    };
    let cases: [&[u8]; 3] = [
        b"GET /r HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET /s.txt HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET /v?a=1 HTTP/1.1\r\nHost: h\r\n\r\n",
    ];
    for raw in cases {
        // Warm up: buffers grow, the file cache opens, match data is made.
        w.serve(raw);
        w.serve(raw);
        let (n, allocs) = counted(|| w.serve(raw));
        assert!(n > 0);
        assert_eq!(
            allocs,
            0,
            "{} allocated",
            String::from_utf8_lossy(raw).lines().next().unwrap()
        );
    }
    // A regex location whose add_header has a variable builds that
    // header's text: one allocation, and nothing else.
    let png: &[u8] = b"GET /img/a.png HTTP/1.1\r\nHost: h\r\n\r\n";
    w.serve(png);
    w.serve(png);
    let (_, allocs) = counted(|| w.serve(png));
    assert_eq!(allocs, 1, "{allocs} allocations");
    std::fs::remove_dir_all(&dir).unwrap();
}
