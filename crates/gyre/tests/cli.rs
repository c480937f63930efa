//! The command line of the real binary: -t / -T / -v / -h, bad options,
//! errors in nginx's words.
#![allow(clippy::unwrap_used)]

mod util;

use util::Prefix;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn test_flag_on_good_and_bad_configs() {
    let p = Prefix::new("cli-t");
    p.conf("worker_processes 2;\nevents {\n    worker_connections 64;\n}\n");
    let o = p.run(&["-t"]);
    let conf = p.path("conf/gyre.conf");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "gyre: the configuration file {0} syntax is ok\ngyre: configuration file {0} test is successful\n",
            conf.display()
        )
    );

    p.conf("events {\n}\nfoo bar;\n");
    let o = p.run(&["-t"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "gyre: [emerg] unknown directive \"foo\" in {0}:3\ngyre: configuration file {0} test failed\n",
            conf.display()
        )
    );

    p.conf("events {\n    worker_connections 64;\n");
    let o = p.run(&["-t"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unexpected end of file, expecting \"}\""));
}

#[test]
fn dump_prints_every_file() {
    let p = Prefix::new("cli-T");
    p.write("conf/extra.conf", "multi_accept on;\n");
    p.conf("events {\n    include extra.conf;\n}\n");
    let o = p.run(&["-T", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout.clone()).unwrap();
    assert!(out.contains(&format!(
        "# configuration file {}:\nevents {{",
        p.path("conf/gyre.conf").display()
    )));
    assert!(out.contains("multi_accept on;"));
    assert_eq!(stderr(&o), "", "-q keeps -t quiet");
}

#[test]
fn version_help_and_bad_options() {
    let p = Prefix::new("cli-v");
    let o = p.run(&["-v"]);
    assert!(o.status.success());
    assert!(stderr(&o).starts_with("gyre version: gyre/"));
    let o = p.run(&["-h"]);
    assert!(stderr(&o).contains("Usage: gyre"));
    let o = p.run(&["-x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("gyre: invalid option: \"x\""));
    let o = p.run(&["-s", "restart"]);
    assert_eq!(o.status.code(), Some(1));
    let o = p.run(&["-c", "conf/missing.conf", "-t"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("No such file or directory"),
        "{}",
        stderr(&o)
    );
}

/// `-V` has nginx's lines in nginx's order (version, built by, built
/// with, TLS SNI, configure arguments), the last one naming the modules
/// the way nginx's configure does: `--with-` for optional modules gyre
/// has, `--without-` for default ones it has not.
#[test]
fn build_info_has_nginx_form() {
    let p = Prefix::new("cli-bigv");
    let o = p.run(&["-V"]);
    assert!(o.status.success());
    let text = stderr(&o);
    let lines: Vec<&str> = text.lines().collect();
    let shape = |ls: &[&str]| -> Vec<String> {
        ls.iter()
            .map(|l| {
                [
                    "version: ",
                    "built by ",
                    "built with ",
                    "TLS SNI",
                    "configure arguments: ",
                ]
                .iter()
                .find(|k| l.contains(*k))
                .map_or("?".to_string(), |k| k.to_string())
            })
            .collect()
    };
    assert_eq!(
        shape(&lines),
        [
            "version: ",
            "built by ",
            "built with ",
            "TLS SNI",
            "configure arguments: "
        ],
        "{text}"
    );
    assert!(lines[0].starts_with("gyre version: gyre/"), "{text}");
    assert!(lines[1].starts_with("built by rustc "), "{text}");
    let args: Vec<&str> = lines[4]
        .strip_prefix("configure arguments: ")
        .unwrap()
        .split(' ')
        .collect();
    for a in [
        "--with-http_ssl_module",
        "--with-http_stub_status_module",
        "--with-http_gzip_static_module",
    ] {
        assert!(args.contains(&a), "{text}");
    }
    assert!(args
        .iter()
        .all(|a| a.starts_with("--with") && a.ends_with("_module")));
    assert!(!args.iter().any(|a| a.contains("http_gzip_module")));
    // nginx's own -V, where installed: the same line prefixes (Debian's
    // build has no "built by" line; the others appear in this order).
    let Ok(n) = std::process::Command::new("/usr/sbin/nginx")
        .arg("-V")
        .output()
    else {
        eprintln!("no nginx: -V compared with its form only");
        return;
    };
    let nt = String::from_utf8_lossy(&n.stderr).into_owned();
    let ns = shape(&nt.lines().collect::<Vec<_>>());
    let ours: Vec<String> = shape(&lines)
        .into_iter()
        .filter(|k| ns.contains(k))
        .collect();
    assert_eq!(ours, ns, "nginx -V:\n{nt}");
    assert!(nt.starts_with("nginx version: nginx/"));
}

#[test]
fn signal_without_a_running_master_fails_clearly() {
    let p = Prefix::new("cli-s");
    p.conf("events {}\n");
    let o = p.run(&["-s", "reload"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!(
            "open() \"{}\" failed (2: No such file or directory)",
            p.path("logs/gyre.pid").display()
        )),
        "{}",
        stderr(&o)
    );
}

#[test]
fn built_in_default_configuration_tests_ok() {
    let p = Prefix::new("cli-default");
    let o = p.run(&["-t"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("test is successful"));
}

/// The HTTP configuration language's errors, in nginx 1.22's words (each
/// checked against `nginx -t` on the same text).
#[test]
fn http_config_language_errors_as_nginx() {
    let p = Prefix::new("cli-http-t");
    let conf = p.path("conf/gyre.conf");
    let cases = [
        (
            "location ~ ^/(foo { return 200; }",
            "pcre2_compile() failed: missing closing parenthesis in \"^/(foo\" in {F}:4",
        ),
        (
            "location / { if ($a ~ \"a)b\") { return 403; } }",
            "pcre2_compile() failed: unmatched closing parenthesis in \"a)b\" at \")b\" in {F}:4",
        ),
        (
            "location / { return 200 $nope; }",
            "unknown \"nope\" variable",
        ),
        (
            "location = /x { location /x/y { } }",
            "location \"/x/y\" cannot be inside the exact location \"/x\" in {F}:4",
        ),
        (
            "location /a { location /b { } }",
            "location \"/b\" is outside location \"/a\" in {F}:4",
        ),
        (
            "location /a { access_log logs/a.log nosuch; }",
            "unknown log format \"nosuch\" in {F}:4",
        ),
        (
            "location /a { alias $document_root/x; }",
            "the $document_root variable cannot be used in the \"alias\" directive in {F}:4",
        ),
    ];
    for (server_body, want) in cases {
        p.conf(&format!(
            "events {{}}\nhttp {{\n server {{ listen 127.0.0.1:1;\n {server_body}\n }}\n}}\n"
        ));
        let o = p.run(&["-t"]);
        assert_eq!(o.status.code(), Some(1), "{server_body}");
        let want = want.replace("{F}", &conf.display().to_string());
        assert_eq!(
            stderr(&o),
            format!(
                "gyre: [emerg] {want}\ngyre: configuration file {} test failed\n",
                conf.display()
            ),
            "{server_body}"
        );
    }
}
