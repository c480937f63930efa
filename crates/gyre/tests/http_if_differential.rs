//! `if` in a location as nginx has it: a matching `if` makes its block the
//! request's configuration (nginx's `ngx_http_script_if_code`), merged over
//! the location's — its `root`, `add_header`, `expires`, `charset`,
//! `error_page`, `access_log` — and without the location's `try_files`
//! ("if is evil"). The same `http {}` text and raw requests go to gyre and
//! to nginx 1.22; answers must agree.
//!
//! nginx is found at `$NGINX` or `/usr/sbin/nginx`; without it the test
//! prints why it skipped.
#![allow(clippy::unwrap_used)]

mod util;

use std::time::Duration;

use util::http::{start_http, Raw};
use util::nginx::nginx_bin;
use util::Prefix;

fn http_conf(port: u16) -> String {
    format!(
        "server {{
           listen 127.0.0.1:{port};
           server_tokens off;
           root html;
           access_log off;
           location /t/ {{
             add_header X-Loc loc;
             if ($arg_a) {{ add_header X-If yes; expires 1h; }}
             if ($arg_r) {{ root other; }}
             if ($arg_e) {{ error_page 404 =200 /t/f.txt; }}
             if ($arg_c) {{ charset utf-8; }}
             if ($arg_l) {{ access_log logs/if.log; }}
             if ($arg_g) {{ return 200 \"g\"; }}
           }}
           location /al/ {{
             alias html/t/;
             if ($arg_a) {{ add_header X-If al; }}
             if ($arg_r) {{ root other; }}
           }}
           location /tf/ {{
             try_files $uri /t/f.txt;
             if ($arg_x) {{ add_header X-If x; }}
           }}
         }}"
    )
}

fn ask(port: u16, req: &str) -> Vec<String> {
    let mut r = Raw::connect(port);
    r.send(req.as_bytes());
    let resp = r.response(false);
    let mut v = vec![resp.status.to_string()];
    for h in ["X-Loc", "X-If", "Cache-Control", "Content-Type"] {
        v.push(format!("{h}: {:?}", resp.header(h)));
    }
    v.push(format!("Expires: {}", resp.header("Expires").is_some()));
    v.push(
        resp.text()
            .replace("<center>nginx</center>", "<center>gyre</center>"),
    );
    v
}

#[test]
fn if_blocks_match_nginx() {
    let Some(bin) = nginx_bin() else {
        println!("skipped: no nginx binary (set NGINX or install nginx)");
        return;
    };
    let Some(ng) = util::nginx::start_http(&bin, "if-nginx", &http_conf) else {
        println!("skipped: nginx did not start");
        return;
    };
    let p = Prefix::new("if-gyre");
    for d in [&p.dir, &ng.prefix.dir] {
        for (f, t) in [
            ("html/t/f.txt", "html\n"),
            ("other/t/f.txt", "other\n"),
            ("html/tf/g.txt", "tf\n"),
        ] {
            let path = d.join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, t).unwrap();
        }
    }
    let g = start_http(&p, 1, http_conf);
    let paths = [
        "/t/f.txt",
        "/t/f.txt?a=1",
        "/t/f.txt?r=1",
        "/t/f.txt?a=1&r=1",
        "/t/none.txt",
        "/t/none.txt?e=1",
        "/t/f.txt?c=1",
        "/t/f.txt?l=1",
        "/t/f.txt?l=1&a=1",
        "/t/f.txt?g=1",
        "/t/f.txt?a=1&g=1",
        "/al/f.txt",
        "/al/f.txt?a=1",
        "/al/t/f.txt?r=1",
        "/tf/g.txt",
        "/tf/none.txt",
        "/tf/none.txt?x=1",
    ];
    let mut diffs = Vec::new();
    for path in paths {
        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let want = ask(ng.port, &req);
        let got = ask(g.port, &req);
        if want != got {
            diffs.push(format!("{path}:\n  nginx {want:?}\n  gyre  {got:?}"));
        }
    }
    let lines = |path: std::path::PathBuf| {
        let end = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let n = std::fs::read_to_string(&path)
                .unwrap_or_default()
                .lines()
                .count();
            if n >= 2 || std::time::Instant::now() > end {
                return n;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let (a, b) = (
        lines(ng.prefix.path("logs/if.log")),
        lines(p.path("logs/if.log")),
    );
    if a != b {
        diffs.push(format!("if.log lines: nginx {a}, gyre {b}"));
    }
    assert!(diffs.is_empty(), "{}\n{}", diffs.join("\n"), g.log());
}
