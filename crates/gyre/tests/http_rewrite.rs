//! The rewrite module's log lines on the real binary: the redirect
//! cycle's 500 and its error, `rewrite_log`'s notices,
//! `uninitialized_variable_warn`'s warning (nginx's texts and levels).
#![allow(clippy::unwrap_used)]

mod util;

use std::time::Duration;

use util::http::{raw_request, start_one_server};
use util::Prefix;

#[test]
fn rewrite_logs_and_the_redirect_cycle() {
    let p = Prefix::new("rewrite-log");
    p.write("html/new.txt", "new\n");
    let s = start_one_server(
        &p,
        r#"
        location /loop { rewrite ^ /loop2 last; }
        location /loop2 { rewrite ^ /loop last; }
        location /old/ { rewrite_log on; rewrite ^/old/(.*)$ /$1.txt?k=v last; }
        location = /decl { set $unset_one 1; set $unset_two 2; return 204; }
        location = /v { return 200 "[$unset_one]"; }
        location = /quiet { uninitialized_variable_warn off; return 200 "[$unset_two]"; }
        "#,
    );
    let r = raw_request(s.port, "GET /loop HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 500);
    assert!(
        s.server.logged("[error] ", Duration::from_secs(5))
            && s.server.logged(
                "rewrite or internal redirection cycle while processing \"/loop",
                Duration::from_secs(5)
            ),
        "{}",
        s.log()
    );

    let r = raw_request(s.port, "GET /old/new HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "new\n"));
    assert!(
        s.server.logged("[notice] ", Duration::from_secs(5))
            && s.server.logged(
                "\"^/old/(.*)$\" matches \"/old/new\"",
                Duration::from_secs(5)
            )
            && s.server.logged(
                "rewritten data: \"/new.txt\", args: \"k=v\"",
                Duration::from_secs(5)
            ),
        "{}",
        s.log()
    );

    let r = raw_request(s.port, "GET /v HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "[]"));
    let r = raw_request(s.port, "GET /quiet HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "[]"));
    assert!(
        s.server.logged("[warn] ", Duration::from_secs(5))
            && s.server.logged(
                "using uninitialized \"unset_one\" variable",
                Duration::from_secs(5)
            ),
        "{}",
        s.log()
    );
    assert!(!s.log().contains("unset_two"), "{}", s.log());
}
