//! Differential test of `allow` / `deny` / `satisfy` (ngx_http_access_module)
//! against the real nginx: the same configuration text and the same raw
//! requests to both, from 127.0.0.1, with rules on 127.0.0.0/8 and on other
//! networks and families, inherited or replaced at each level, nested and
//! regex locations, `error_page 403`; the answers (status, body with the
//! server name normalised) must agree, and both logs say
//! `access forbidden by rule` at `[error]`.
//!
//! nginx is found at `$NGINX` or `/usr/sbin/nginx`; without it the test
//! prints why it skipped.
#![allow(clippy::unwrap_used)]

mod util;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use util::http::{free_port, start_http, Raw};
use util::nginx::{nginx_bin, Nginx, Site};
use util::Prefix;

/// The server body both get. The server level denies 127.0.0.1; locations
/// with rules of their own replace that.
const SERVER: &str = r#"
    deny 127.0.0.1;
    error_page 403 /e403.html;
    location = /e403.html { allow all; }
    location /open/ { allow all; }
    location /inherit/ { }
    location /a/ { deny 127.0.0.1; }
    location /b/ { allow 127.0.0.1; deny all; }
    location /c/ { deny 127.0.0.0/8; allow all; }
    location /d/ { allow 10.0.0.0/8; deny all; }
    location /e/ { allow ::1; deny all; }
    location /f/ { allow ::1; }
    location /g/ { deny 10.0.0.1/8; }
    location /h/ { allow all; deny 127.0.0.1; }
    location /i/ { deny 127.0.0.2; allow 127.0.0.0/30; deny all; }
    location /u/ { deny unix:; }
    location /v6/ { deny ::/0; }
    location /s/ { satisfy any; deny all; }
    location /sa/ { satisfy any; allow 127.0.0.1; }
    location /n/ {
        allow all;
        location /n/in/ { deny all; }
        location /n/out/ { }
    }
    location ~ \.secret$ { allow 192.168.0.0/16; deny all; }
    location /noerr/ {
        allow all;
        error_page 403 /open/t.txt;
        location /noerr/x/ { deny 127.0.0.1; }
    }
"#;

const DIRS: &[&str] = &[
    "open", "inherit", "a", "b", "c", "d", "e", "f", "g", "h", "i", "u", "v6", "s", "sa", "n",
    "n/in", "n/out", "noerr", "noerr/x",
];

/// `name` keeps the prefixes of tests running at once apart.
fn start_nginx(bin: &Path, root: &Path, server: &str, name: &str) -> Option<Nginx> {
    let site = Site {
        root,
        http: "",
        server,
    };
    util::nginx::start(bin, name, &site)
}

/// Status and body (server name normalised) of one request.
fn ask(port: u16, path: &str) -> (u16, String) {
    let mut r = Raw::connect(port);
    r.send(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    match r.try_response(false) {
        Ok(Some(resp)) => (
            resp.status,
            resp.text()
                .replace("<center>nginx</center>", "<center>gyre</center>"),
        ),
        _ => (0, String::new()),
    }
}

/// Waits until `path`'s text holds `n` lines containing `needle`.
fn count_lines(path: &Path, needle: &str, n: usize) -> usize {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let c = text.lines().filter(|l| l.contains(needle)).count();
        if c >= n || Instant::now() > end {
            return c;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn allow_deny_answer_like_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the access differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    let p = Prefix::new("access-gyre");
    p.write("html/e403.html", "custom forbidden page\n");
    p.write("html/t.txt", "top\n");
    p.write("html/x.secret", "secret\n");
    for d in DIRS {
        p.write(&format!("html/{d}/t.txt"), &format!("{d}\n"));
        p.write(&format!("html/{d}/y.secret"), "s\n");
    }
    let root = p.path("html");
    let Some(nginx) = start_nginx(&bin, &root, SERVER, "access-nginx") else {
        panic!(
            "{} did not start on the access configuration",
            bin.display()
        );
    };
    let root_s = root.display().to_string();
    let gyre = start_http(&p, 1, move |port| {
        format!(
            "access_log off;\nserver_tokens off;\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{SERVER}\n}}"
        )
    });
    let mut paths: Vec<String> = vec!["/t.txt".into(), "/x.secret".into(), "/e403.html".into()];
    for d in DIRS {
        paths.push(format!("/{d}/t.txt"));
        paths.push(format!("/{d}/y.secret"));
    }
    let mut differences = Vec::new();
    let mut forbidden = 0;
    let mut allowed = 0;
    for path in &paths {
        let want = ask(nginx.port, path);
        let got = ask(gyre.port, path);
        match want.0 {
            403 => forbidden += 1,
            200 => allowed += 1,
            _ => {}
        }
        if want != got {
            differences.push(format!("{path}:\n  nginx {want:?}\n  gyre  {got:?}"));
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
    // The matrix exercises both outcomes (nginx decides which).
    assert!(
        forbidden >= 10 && allowed >= 10,
        "{forbidden} forbidden, {allowed} allowed"
    );
    // One `access forbidden by rule` line per denial in each log (the
    // error_page requests deny once, then serve the page). Under `satisfy
    // any` nginx logs it too (post-access).
    let needle = "[error]";
    let n_nginx = count_lines(
        &nginx.prefix.path("logs/error.log"),
        "access forbidden by rule",
        1,
    );
    let n_gyre = count_lines(
        &p.path("logs/error.log"),
        "access forbidden by rule",
        n_nginx,
    );
    assert_eq!(
        n_gyre,
        n_nginx,
        "access forbidden lines, gyre log:\n{}",
        gyre.log()
    );
    let gyre_log = gyre.log();
    assert!(gyre_log
        .lines()
        .filter(|l| l.contains("access forbidden by rule"))
        .all(|l| l.contains(needle)));
}

#[test]
fn bad_rules_are_config_errors_like_nginx() {
    let p = Prefix::new("access-bad");
    for (rule, want) in [
        ("allow 10.0.0.0/33;", "invalid parameter \"10.0.0.0/33\""),
        ("deny 10.0.0/8;", "invalid parameter \"10.0.0/8\""),
        ("deny localhost;", "invalid parameter \"localhost\""),
        ("satisfy some;", "invalid value \"some\""),
        (
            "allow;",
            "invalid number of arguments in \"allow\" directive",
        ),
    ] {
        p.conf(&format!(
            "{}http {{ server {{ listen 127.0.0.1:{}; location / {{ {rule} }} }} }}\n",
            util::http::main_conf(1),
            free_port()
        ));
        let out = p.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{rule} accepted");
        assert!(
            err.contains(&format!("[emerg] {want} in ")),
            "{rule}: {err}"
        );
    }
    // Low bits set: a warning, and the configuration is fine.
    p.conf(&format!(
        "{}http {{ server {{ listen 127.0.0.1:{}; location / {{ deny 10.0.0.1/8; }} }} }}\n",
        util::http::main_conf(1),
        free_port()
    ));
    let out = p.run(&["-t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("[warn]")
            && err.contains("low address bits of 10.0.0.1/8 are meaningless in "),
        "{err}"
    );
}

/// The auth_basic areas (the user file at `@FILE@`, one relative to the
/// configuration's directory).
const AUTH_SERVER: &str = r#"
    add_header X-User "$remote_user" always;
    location /p/ { auth_basic "Plain area"; auth_basic_user_file @FILE@; }
    location /var/ { auth_basic "Area $uri"; auth_basic_user_file @FILE@; }
    location /rel/ { auth_basic "rel"; auth_basic_user_file htpasswd; }
    location /nofile/ { auth_basic "x"; auth_basic_user_file /nonexistent/htpasswd; }
    location /srv/ {
        auth_basic "outer";
        auth_basic_user_file @FILE@;
        location /srv/off/ { auth_basic off; }
        location /srv/inner/ { auth_basic "inner"; }
    }
    location /any/ { satisfy any; deny all; auth_basic "any"; auth_basic_user_file @FILE@; }
    location /anyok/ { satisfy any; allow 127.0.0.1; auth_basic "any"; auth_basic_user_file @FILE@; }
    location /all/ { allow 127.0.0.1; deny all; auth_basic "all"; auth_basic_user_file @FILE@; }
    location /alldeny/ { deny all; auth_basic "all"; auth_basic_user_file @FILE@; }
    location /open/ { }
"#;

const AUTH_DIRS: &[&str] = &[
    "p",
    "var",
    "rel",
    "nofile",
    "srv",
    "srv/off",
    "srv/inner",
    "any",
    "anyok",
    "all",
    "alldeny",
    "open",
];

fn hash_of(args: &[&str]) -> Option<String> {
    let out = Command::new("openssl").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn b64(data: &[u8]) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            s.push(if i <= c.len() {
                T[((v >> (18 - 6 * i)) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    s
}

/// Status, `WWW-Authenticate`, `X-User` and the body of one request.
fn ask_auth(
    port: u16,
    path: &str,
    auth: Option<&str>,
) -> (u16, Option<String>, Option<String>, String) {
    let mut r = Raw::connect(port);
    let h = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    r.send(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{h}Connection: close\r\n\r\n")
            .as_bytes(),
    );
    match r.try_response(false) {
        Ok(Some(resp)) => (
            resp.status,
            resp.header("WWW-Authenticate").map(str::to_string),
            resp.header("X-User").map(str::to_string),
            resp.text()
                .replace("<center>nginx</center>", "<center>gyre</center>"),
        ),
        _ => (0, None, None, String::new()),
    }
}

#[test]
fn auth_basic_answers_like_nginx() {
    let Some(bin) = nginx_bin() else {
        eprintln!("skipping the auth_basic differential test: no nginx at $NGINX or /usr/sbin/nginx (apt-get install nginx)");
        return;
    };
    // Each format nginx reads, for the password "secret" (openssl makes
    // the crypt ones; without it those users are left out).
    let mut users: Vec<(String, String)> = vec![
        ("plain".into(), "{PLAIN}secret".into()),
        ("sha".into(), "{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=".into()),
    ];
    let sha1 = |data: &[u8]| -> Option<Vec<u8>> {
        use std::io::Write;
        let mut c = Command::new("openssl")
            .args(["sha1", "-binary"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        c.stdin.take()?.write_all(data).ok()?;
        let out = c.wait_with_output().ok()?;
        out.status.success().then_some(out.stdout)
    };
    if let Some(mut h) = sha1(b"secretNaCl42") {
        h.extend_from_slice(b"NaCl42");
        users.push(("ssha".into(), format!("{{SSHA}}{}", b64(&h))));
    }
    for (name, flag) in [
        ("apr", "-apr1"),
        ("md5", "-1"),
        ("s256", "-5"),
        ("s512", "-6"),
    ] {
        match hash_of(&["passwd", flag, "-salt", "gyreSalt", "secret"]) {
            Some(h) => users.push((name.into(), h)),
            None => eprintln!("openssl passwd {flag} unavailable: {name} left out"),
        }
    }
    let mut file = String::from("# a comment\n\nali\n");
    // `ali` (a prefix of `alice:`) hides the next line from nginx's reader.
    file.push_str("alice:{PLAIN}hidden\nalice:{PLAIN}wonder:comment field\r\n");
    for (u, h) in &users {
        file.push_str(&format!("{u}:{h}\n"));
    }
    file.push_str("nopass:\nlast:{PLAIN}end");
    let p = Prefix::new("auth-gyre");
    let file_path = p.write("conf/htpasswd", &file);
    let server = AUTH_SERVER.replace("@FILE@", &file_path.display().to_string());
    for d in AUTH_DIRS {
        p.write(&format!("html/{d}/t.txt"), &format!("{d}\n"));
    }
    let root = p.path("html");
    let nginx = {
        // nginx's own conf directory gets the same relative file.
        let n = start_nginx(&bin, &root, &server, "auth-nginx");
        let Some(n) = n else {
            panic!("{} did not start on the auth configuration", bin.display());
        };
        n.prefix.write("conf/htpasswd", &file);
        n
    };
    let root_s = root.display().to_string();
    let srv = server.clone();
    let gyre = start_http(&p, 1, move |port| {
        format!("access_log off;\nserver_tokens off;\nserver {{\n listen 127.0.0.1:{port};\n root {root_s};\n{srv}\n}}")
    });
    let basic = |u: &str, pw: &str| format!("Basic {}", b64(format!("{u}:{pw}").as_bytes()));
    let mut creds: Vec<(String, Option<String>)> = vec![
        ("none".into(), None),
        ("unknown user".into(), Some(basic("nobody", "secret"))),
        ("hidden line".into(), Some(basic("alice", "hidden"))),
        ("after hidden line".into(), Some(basic("alice", "wonder"))),
        ("empty password".into(), Some(basic("nopass", ""))),
        ("last line".into(), Some(basic("last", "end"))),
        ("bearer".into(), Some("Bearer abc".into())),
        ("bad base64".into(), Some("Basic !!!!".into())),
        ("no colon".into(), Some(format!("Basic {}", b64(b"plain")))),
        (
            "empty user".into(),
            Some(format!("Basic {}", b64(b":secret"))),
        ),
        (
            "lower case, spaces".into(),
            Some(format!("basic    {}", b64(b"plain:secret"))),
        ),
        (
            "padding then junk".into(),
            Some(format!("Basic {} junk", b64(b"plain:secret"))),
        ),
    ];
    for (u, _) in &users {
        creds.push((format!("{u} right"), Some(basic(u, "secret"))));
        creds.push((format!("{u} wrong"), Some(basic(u, "Secret"))));
    }
    let mut differences = Vec::new();
    let (mut ok, mut challenged) = (0, 0);
    for d in AUTH_DIRS {
        let path = format!("/{d}/t.txt");
        for (name, auth) in &creds {
            let want = ask_auth(nginx.port, &path, auth.as_deref());
            let got = ask_auth(gyre.port, &path, auth.as_deref());
            match want.0 {
                200 => ok += 1,
                401 => challenged += 1,
                _ => {}
            }
            if want != got {
                differences.push(format!("{path} {name}:\n  nginx {want:?}\n  gyre  {got:?}"));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
    assert!(
        ok >= 20 && challenged >= 40,
        "{ok} ok, {challenged} challenged"
    );
    // The same log lines (message text; counted).
    let nlog = nginx.prefix.path("logs/error.log");
    for needle in [
        "password mismatch",
        "was not found in",
        "no user/password was provided for basic authentication",
        "access forbidden by rule",
        "open() \"/nonexistent/htpasswd\" failed (2: No such file or directory)",
    ] {
        let n = count_lines(&nlog, needle, 1);
        let g = count_lines(&p.path("logs/error.log"), needle, n);
        assert_eq!(g, n, "lines with {needle:?}: gyre {g}, nginx {n}");
        assert!(n > 0, "{needle}");
    }
    let line = |path: &Path, needle: &str| -> Option<String> {
        let t = std::fs::read_to_string(path).unwrap_or_default();
        let l = t.lines().find(|l| l.contains(needle))?;
        let msg = l.split_once(": ").map(|x| x.1).unwrap_or(l);
        // nginx's `*N ` connection number (gyre's lines get it with the
        // HTTP log context).
        let msg = match msg.strip_prefix('*').and_then(|m| m.split_once(' ')) {
            Some((n, rest)) if n.bytes().all(|b| b.is_ascii_digit()) => rest,
            _ => msg,
        };
        Some(msg.split(", client:").next().unwrap_or(msg).to_string())
    };
    for needle in [
        "user \"sha\": password mismatch",
        "user \"nobody\" was not found in",
    ] {
        let n = line(&nlog, needle);
        let g = line(&p.path("logs/error.log"), needle);
        assert_eq!(
            g,
            n.map(|s| s.replace(
                &nginx.prefix.path("conf").display().to_string(),
                &p.path("conf").display().to_string()
            ))
        );
    }
}
