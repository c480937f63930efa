//! Compatibility sweep with real configuration files (`tests/conf_corpus/`):
//! Debian's `/etc/nginx` as installed, and typical sites written the way
//! people run them. Each case is staged in a temp prefix (paths and ports
//! rewritten, nothing else), then
//!
//! 1. `nginx -t` must accept it (the corpus is valid nginx);
//! 2. `gyre -t` must accept it, or refuse it with nginx's own
//!    `unknown directive "NAME"` for a directive in [`REFUSED`], the
//!    reviewed list of what gyre does not have. The refused line is taken out
//!    and gyre asked again, until it accepts; any other refusal (a message
//!    that is not nginx's "unknown directive", or a name not in the list)
//!    fails the test, so a new gap is seen;
//! 3. for the cases with requests, both servers are started on what they
//!    accepted and the same raw requests go to both: status, the main
//!    headers and small bodies must agree.
//!
//! nginx is `$NGINX` or `/usr/sbin/nginx`; without it the test prints why it
//! skipped.
#![allow(clippy::unwrap_used)]

mod util;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use util::certs::{Alg, Ca};
use util::http::{free_port, Raw, Resp};

/// Directives nginx 1.22 (Debian's build) has and gyre does not, each with
/// who owns the gap. gyre refuses them with nginx's words
/// `unknown directive "NAME"`, as an nginx built without that module does.
const REFUSED: &[(&str, &str)] = &[
    // ngx_http_fastcgi_module: gyre has no FastCGI (PHP-FPM) client.
    ("fastcgi_split_path_info", "no FastCGI module"),
    ("fastcgi_param", "no FastCGI module"),
    ("fastcgi_index", "no FastCGI module"),
    ("fastcgi_pass", "no FastCGI module"),
    ("fastcgi_read_timeout", "no FastCGI module"),
    // ngx_http_sub_module and ngx_http_ssi_module: body filters gyre lacks.
    ("sub_filter", "no sub module"),
    ("sub_filter_once", "no sub module"),
    ("sub_filter_types", "no sub module"),
    ("ssi", "no SSI module"),
    // OCSP stapling and the resolver it uses: not in gyre's TLS layer yet.
    ("ssl_stapling", "no OCSP stapling"),
    ("ssl_stapling_verify", "no OCSP stapling"),
    ("ssl_trusted_certificate", "no OCSP stapling"),
    ("resolver", "no resolver"),
    ("resolver_timeout", "no resolver"),
];

/// Variables of the modules in [`REFUSED`] that the corpus uses: nginx
/// built without the module says `unknown "NAME" variable`, as gyre does.
const REFUSED_VARIABLES: &[(&str, &str)] = &[
    ("fastcgi_script_name", "no FastCGI module"),
    ("fastcgi_path_info", "no FastCGI module"),
];

/// Refusals that are not nginx's words: gyre has the directive but not
/// all of it. Each is a known gap with its owner, not an accepted
/// difference; the line is taken out and gyre asked again.
/// Messages for what gyre has not built yet, with why (none today: the
/// last, per-server `error_log`, is in conf/error_log.rs).
const GAPS: &[(&str, &str)] = &[];

const REFUSED_MESSAGES: &[(&str, &str)] = &[(
    "the \"http2\" parameter requires ngx_http_v2_module",
    "no HTTP/2",
)];

/// One configuration to try.
struct Case {
    name: &'static str,
    /// A file of `sites/` put alone in `sites-enabled/`, or a file of
    /// `main/` replacing `nginx.conf`; `None`: Debian's files untouched.
    site: Option<&'static str>,
    main: Option<&'static str>,
    /// Requests sent to both servers when both run it: (raw request, label).
    requests: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "debian-default",
        site: None,
        main: None,
        requests: &[
            "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "GET /index.nginx-debian.html HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "GET /nope HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "HEAD / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        ],
    },
    Case {
        name: "static",
        site: Some("static.conf"),
        main: None,
        requests: &[
            "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
            "GET /missing HTTP/1.1\r\nHost: example.com\r\n\r\n",
            "GET /404.html HTTP/1.1\r\nHost: example.com\r\n\r\n",
            "GET /.git/config HTTP/1.1\r\nHost: example.com\r\n\r\n",
            "GET /robots.txt HTTP/1.1\r\nHost: example.com\r\n\r\n",
            "GET /sub HTTP/1.1\r\nHost: example.com\r\n\r\n",
        ],
    },
    Case {
        name: "spa",
        site: Some("spa.conf"),
        main: None,
        requests: &[
            "GET /some/client/route HTTP/1.1\r\nHost: app.example.com\r\n\r\n",
            "GET /app.js HTTP/1.1\r\nHost: app.example.com\r\n\r\n",
            "GET /missing.css HTTP/1.1\r\nHost: app.example.com\r\n\r\n",
            "GET /index.html HTTP/1.1\r\nHost: app.example.com\r\n\r\n",
        ],
    },
    Case {
        name: "wordpress",
        site: Some("wordpress.conf"),
        main: None,
        requests: &[],
    },
    Case {
        name: "reverse-proxy",
        site: Some("reverse-proxy.conf"),
        main: None,
        requests: &["GET /static/a.txt HTTP/1.1\r\nHost: app.example.com\r\n\r\n"],
    },
    Case {
        name: "https-hsts",
        site: Some("https-hsts.conf"),
        main: None,
        requests: &[
            "GET /page?x=1 HTTP/1.1\r\nHost: secure.example.com\r\n\r\n",
            "GET /.well-known/acme-challenge/token HTTP/1.1\r\nHost: secure.example.com\r\n\r\n",
        ],
    },
    Case {
        name: "https-stapling",
        site: Some("https-stapling.conf"),
        main: None,
        requests: &[],
    },
    Case {
        name: "drop-unknown",
        site: Some("drop-unknown.conf"),
        main: None,
        requests: &[
            "GET / HTTP/1.1\r\nHost: unknown.example.net\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: known.example.com\r\n\r\n",
        ],
    },
    Case {
        name: "methods-cors",
        site: Some("methods-cors.conf"),
        main: None,
        requests: &[
            "OPTIONS /api/items HTTP/1.1\r\nHost: api.example.com\r\nOrigin: http://x.test\r\n\r\n",
            "GET /api/items HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
            "DELETE /api/items HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
        ],
    },
    Case {
        name: "alias-named",
        site: Some("alias-named.conf"),
        main: None,
        requests: &[
            "GET /assets/a.txt HTTP/1.1\r\nHost: files.example.com\r\n\r\n",
            "GET /downloads/ HTTP/1.1\r\nHost: files.example.com\r\n\r\n",
            "GET /downloads/a.txt HTTP/1.1\r\nHost: files.example.com\r\n\r\n",
            "GET /old/thing HTTP/1.1\r\nHost: files.example.com\r\n\r\n",
            "GET /zzz HTTP/1.1\r\nHost: files.example.com\r\n\r\n",
        ],
    },
    Case {
        name: "realip",
        site: Some("realip.conf"),
        main: None,
        requests: &[
            "GET / HTTP/1.1\r\nHost: lb.example.com\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: lb.example.com\r\nX-Forwarded-For: 203.0.113.9, 10.1.2.3\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: lb.example.com\r\nX-Forwarded-For: 198.51.100.4, 203.0.113.9, 192.168.1.1\r\n\r\n",
            "GET /admin HTTP/1.1\r\nHost: lb.example.com\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n",
            "GET /admin HTTP/1.1\r\nHost: lb.example.com\r\nX-Forwarded-For: 198.51.100.4\r\n\r\n",
            "GET /admin HTTP/1.1\r\nHost: lb.example.com\r\n\r\n",
        ],
    },
    Case {
        name: "auth-limit",
        site: Some("auth-limit.conf"),
        main: None,
        requests: &[
            "GET /admin/ HTTP/1.1\r\nHost: admin.example.com\r\n\r\n",
            "GET /admin/ HTTP/1.1\r\nHost: admin.example.com\r\nAuthorization: Basic YWRtaW46c2VjcmV0\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: admin.example.com\r\n\r\n",
        ],
    },
    Case {
        name: "sub-ssi",
        site: Some("sub-ssi.conf"),
        main: None,
        requests: &[],
    },
    Case {
        name: "gzip-assets",
        site: Some("gzip-assets.conf"),
        main: None,
        requests: &["GET /a.txt HTTP/1.1\r\nHost: cdn.example.com\r\n\r\n"],
    },
    Case {
        name: "logging",
        site: Some("logging.conf"),
        main: None,
        requests: &[
            "GET /health HTTP/1.1\r\nHost: logs.example.com\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: logs.example.com\r\n\r\n",
        ],
    },
    Case {
        name: "common-idioms",
        site: Some("common-idioms.conf"),
        main: None,
        requests: &[
            "GET /index.html HTTP/1.1\r\nHost: www.example.org\r\n\r\n",
            "GET /app.js HTTP/1.1\r\nHost: example.org\r\n\r\n",
            "GET /a.txt HTTP/1.1\r\nHost: example.org\r\n\r\n",
            "GET /api/x HTTP/1.1\r\nHost: www.example.org\r\n\r\n",
            "GET /sub/ HTTP/1.1\r\nHost: example.org\r\n\r\n",
            "GET /nothing HTTP/1.1\r\nHost: example.org\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n",
        ],
    },
    Case {
        name: "www-redirect",
        site: Some("www-redirect.conf"),
        main: None,
        requests: &[
            "GET /page?x=1 HTTP/1.1\r\nHost: www.Example.net\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: example.net\r\n\r\n",
        ],
    },
    Case {
        name: "tuned",
        site: None,
        main: Some("tuned.conf"),
        requests: &[
            "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "GET /nope HTTP/1.1\r\nHost: localhost\r\n\r\n",
        ],
    },
    Case {
        name: "modules",
        site: None,
        main: Some("modules.conf"),
        requests: &["GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"],
    },
];

fn nginx_bin() -> Option<PathBuf> {
    let p = std::env::var_os("NGINX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"));
    p.exists().then_some(p)
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conf_corpus")
}

/// The free ports a staged case listens on, for `listen 80` and `listen 443`.
#[derive(Clone, Copy)]
struct Ports {
    http: u16,
    https: u16,
}

/// Rewrites real paths into `prefix` and the well-known ports onto `ports`;
/// IPv6 listens become comments (the test listens on 127.0.0.1 only). Line
/// numbers are kept, so messages point at the corpus's lines.
fn rewrite(text: &str, prefix: &Path, ports: Ports) -> String {
    let p = prefix.display().to_string();
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("listen [::]") {
            out.push_str("# (IPv6 listen left out by the test)\n");
            continue;
        }
        let l = line
            .replace("/etc/nginx", &format!("{p}/conf"))
            .replace(
                "/etc/letsencrypt/live/secure.example.com",
                &format!("{p}/certs"),
            )
            .replace("/etc/letsencrypt", &format!("{p}/letsencrypt"))
            .replace(
                "/etc/ssl/certs/ssl-cert-snakeoil.pem",
                &format!("{p}/certs/fullchain.pem"),
            )
            .replace(
                "/etc/ssl/private/ssl-cert-snakeoil.key",
                &format!("{p}/certs/privkey.pem"),
            )
            .replace("/var/www", &format!("{p}/www"))
            .replace("/usr/share/nginx/html", &format!("{p}/www/html"))
            .replace("/var/log/nginx", &format!("{p}/logs"))
            .replace("/run/nginx.pid", &format!("{p}/logs/nginx.pid"))
            .replace("listen 80", &format!("listen 127.0.0.1:{}", ports.http))
            .replace("listen 443", &format!("listen 127.0.0.1:{}", ports.https));
        out.push_str(&l);
        out.push('\n');
    }
    out
}

fn copy_tree(from: &Path, to: &Path, prefix: &Path, ports: Ports) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target, prefix, ports);
        } else {
            let text = std::fs::read_to_string(e.path()).unwrap();
            std::fs::write(target, rewrite(&text, prefix, ports)).unwrap();
        }
    }
}

/// A staged prefix: Debian's `/etc/nginx` as `conf/`, the case's site or
/// main file, document roots, certificates, logs.
fn stage(case: &Case, tag: &str, ports: Ports) -> util::Prefix {
    let pf = util::Prefix::new(&format!("compat-{}-{tag}", case.name));
    let dir = pf.dir.clone();
    let c = corpus();
    copy_tree(&c.join("debian"), &dir.join("conf"), &dir, ports);
    copy_tree(
        &c.join("letsencrypt"),
        &dir.join("letsencrypt"),
        &dir,
        ports,
    );
    for d in ["conf/conf.d", "conf/modules-enabled", "conf/sites-enabled"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let conf = dir.join("conf");
    match (case.site, case.main) {
        (Some(site), _) => {
            let text = std::fs::read_to_string(c.join("sites").join(site)).unwrap();
            std::fs::write(
                conf.join("sites-enabled").join(site),
                rewrite(&text, &dir, ports),
            )
            .unwrap();
        }
        (None, Some(main)) => {
            let text = std::fs::read_to_string(c.join("main").join(main)).unwrap();
            std::fs::write(conf.join("nginx.conf"), rewrite(&text, &dir, ports)).unwrap();
        }
        (None, None) => {
            // Debian's symlink sites-enabled/default -> sites-available/default.
            std::os::unix::fs::symlink(
                conf.join("sites-available/default"),
                conf.join("sites-enabled/default"),
            )
            .unwrap();
        }
    }
    pf.write("conf/.htpasswd", "admin:{PLAIN}secret\n");
    pf.write("www/html/index.html", "<html><body>home</body></html>\n");
    pf.write(
        "www/html/index.nginx-debian.html",
        "<!DOCTYPE html>\n<title>Welcome</title>\n",
    );
    pf.write("www/html/404.html", "custom not found\n");
    pf.write("www/html/50x.html", "custom server error\n");
    pf.write("www/html/app.js", "console.log(1);\n");
    pf.write("www/html/a.txt", "plain text file\n");
    pf.write("www/html/sub/index.html", "sub index\n");
    pf.write("www/html/.git/config", "[core]\n");
    pf.write("www/html/robots.txt", "User-agent: *\n");
    pf.write("www/static/a.txt", "static a\n");
    pf.write(
        "www/letsencrypt/.well-known/acme-challenge/token",
        "token-body\n",
    );
    // One modification time for both servers' copies (ETag, Last-Modified).
    set_mtimes(&dir.join("www"));
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let ca = Ca::new(&certs, "ca");
    let leaf = ca.leaf(
        &certs,
        "leaf",
        &["secure.example.com", "stapled.example.com"],
        Alg::Ecdsa,
    );
    std::fs::copy(&leaf.cert, certs.join("fullchain.pem")).unwrap();
    std::fs::copy(&leaf.key, certs.join("privkey.pem")).unwrap();
    std::fs::copy(&ca.pem, certs.join("chain.pem")).unwrap();
    pf
}

fn set_mtimes(dir: &Path) {
    let t = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            set_mtimes(&p);
        } else {
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
    }
}

fn run_t(bin: &Path, prefix: &Path) -> Output {
    Command::new(bin)
        .arg("-p")
        .arg(prefix)
        .args(["-c", "conf/nginx.conf", "-t"])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The first `[emerg]` message: (message, file and line if it has them).
fn emerg(out: &str) -> Option<(String, Option<(PathBuf, usize)>)> {
    let line = out.lines().find(|l| l.contains("[emerg] "))?;
    let msg = line.split_once("[emerg] ")?.1;
    let at = msg.rsplit_once(" in ").and_then(|(m, at)| {
        let (file, n) = at.rsplit_once(':')?;
        Some((m, (PathBuf::from(file), n.trim().parse().ok()?)))
    });
    Some(match at {
        Some((m, at)) => (m.to_string(), Some(at)),
        None => (msg.to_string(), None),
    })
}

/// Takes directive line `n` (1-based) out of `file`: the line becomes a
/// comment, or, when it opens a block, the whole block does.
fn take_out(file: &Path, n: usize) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let i = n - 1;
    let mut depth = 0i32;
    let mut j = i;
    loop {
        depth += lines[j].matches('{').count() as i32 - lines[j].matches('}').count() as i32;
        lines[j] = format!("# (refused by gyre) {}", lines[j]);
        if depth <= 0 || j + 1 >= lines.len() {
            break;
        }
        j += 1;
    }
    std::fs::write(file, lines.join("\n") + "\n").unwrap();
}

/// Drops one `listen` parameter from line `n` of `file`.
fn take_out_listen_param(file: &Path, n: usize, param: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[n - 1] = lines[n - 1].replace(&format!(" {param}"), "");
    std::fs::write(file, lines.join("\n") + "\n").unwrap();
}

/// Asks gyre until it accepts, taking out each refused allow-listed
/// directive; returns the names taken out and whether gyre ended by
/// accepting (false: refused for a variable of a module it lacks).
fn gyre_accepts(prefix: &Path, case: &str) -> (BTreeSet<String>, bool) {
    let gyre = Path::new(util::gyre_bin());
    let mut refused = BTreeSet::new();
    for _ in 0..100 {
        let o = run_t(gyre, prefix);
        let out = text(&o);
        if o.status.success() {
            return (refused, true);
        }
        let (msg, at) =
            emerg(&out).unwrap_or_else(|| panic!("{case}: gyre -t failed without [emerg]:\n{out}"));
        // nginx checks variables once every file is read, and names none:
        // a variable of a module gyre lacks ends the case as refused.
        if let Some(var) = msg
            .strip_prefix("unknown \"")
            .and_then(|r| r.strip_suffix("\" variable"))
        {
            assert!(
                REFUSED_VARIABLES.iter().any(|(n, _)| *n == var),
                "{case}: gyre lacks variable \"${var}\", not in the reviewed list:\n{out}"
            );
            refused.insert(format!("${var}"));
            return (refused, false);
        }
        let (file, line) =
            at.unwrap_or_else(|| panic!("{case}: gyre refuses with no place:\n{out}"));
        // COMPAT_SURVEY=1 lists every refusal instead of stopping at the
        // first one outside the list (for finding the gaps of a new case).
        if std::env::var_os("COMPAT_SURVEY").is_some() {
            eprintln!("SURVEY {case}: {msg} ({}:{line})", file.display());
            refused.insert(msg.clone());
            take_out(&file, line);
            continue;
        }
        if REFUSED_MESSAGES.iter().any(|(m, _)| *m == msg) {
            refused.insert(msg.clone());
            take_out_listen_param(&file, line, "http2");
            continue;
        }
        if GAPS.iter().any(|(m, _)| *m == msg) {
            refused.insert(format!("gap: {msg}"));
            take_out(&file, line);
            continue;
        }
        let name = msg
            .strip_prefix("unknown directive \"")
            .and_then(|r| r.strip_suffix('"'))
            .unwrap_or_else(|| {
                panic!(
                    "{case}: gyre refuses what nginx accepts, not as a missing directive:\n{out}"
                )
            });
        assert!(
            REFUSED.iter().any(|(n, _)| *n == name),
            "{case}: gyre lacks directive \"{name}\", not in the reviewed REFUSED list:\n{out}"
        );
        refused.insert(name.to_string());
        take_out(&file, line);
    }
    panic!("{case}: gyre kept refusing after 100 directives taken out");
}

/// A server under test, stopped (TERM, then KILL) on drop.
struct Daemon {
    child: Child,
    port: u16,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = self.child.id();
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let workers = util::children(pid);
        let _ = self.child.kill();
        let _ = self.child.wait();
        for w in workers {
            let _ = Command::new("kill").args(["-9", &w.to_string()]).status();
        }
    }
}

/// `$remote_addr` and `$status` of each line of `logs/access.log` (the
/// combined and Debian-style formats start with the address and have the
/// status after the quoted request).
fn log_fields(prefix: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(prefix.join("logs/access.log")).unwrap_or_default();
    // Sorted: each worker writes its own buffered lines.
    let mut v: Vec<(String, String)> = text
        .lines()
        .map(|l| {
            let addr = l.split(' ').next().unwrap_or("").to_string();
            let status = l
                .splitn(3, '"')
                .nth(2)
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or("")
                .to_string();
            (addr, status)
        })
        .collect();
    v.sort();
    v
}

/// Each access log file under `logs/` with lines, and how many (nginx
/// also creates the files no location writes to; gyre does not).
fn log_files(prefix: &Path) -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = std::fs::read_dir(prefix.join("logs"))
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            let access =
                name.ends_with(".log") && !name.contains("error") && !name.contains("stderr");
            access.then(|| {
                let n = std::fs::read_to_string(prefix.join("logs").join(&name))
                    .unwrap_or_default()
                    .lines()
                    .count();
                (name, n)
            })
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    v.sort();
    v
}

/// The real and effective uids of a master's children (its workers).
fn worker_users(d: &Daemon) -> BTreeSet<String> {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let users: BTreeSet<String> = util::children(d.child.id())
            .iter()
            .filter_map(|w| std::fs::read_to_string(format!("/proc/{w}/status")).ok())
            .filter_map(|st| {
                st.lines().find(|l| l.starts_with("Uid:")).map(|l| {
                    l.split_whitespace()
                        .skip(1)
                        .take(2)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
            })
            .collect();
        // Workers come after the listening socket, and give up root once
        // started: wait for them.
        let settled = !users.is_empty() && !users.iter().any(|u| u.starts_with("0 "));
        if settled || Instant::now() > end {
            return users;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start(bin: &Path, prefix: &Path, port: u16, extra: &[&str]) -> Option<Daemon> {
    let mut child = Command::new(bin)
        .arg("-p")
        .arg(prefix)
        .args(["-c", "conf/nginx.conf", "-g", "daemon off;"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        // Listening is enough (`return 444` answers no probe request).
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(Daemon { child, port });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// What is compared of one answer; `None` when the server closed without
/// answering (`return 444`).
fn answer(port: u16, req: &str) -> Option<String> {
    let mut c = Raw::connect(port);
    // One request per connection, so a body without a length (nginx's
    // chunked autoindex) ends at the close.
    let req = req.replacen("\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1);
    c.send(req.as_bytes());
    let head_only = req.starts_with("HEAD ");
    let mut r: Resp = c.try_response(head_only).ok()??;
    let chunked = r
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if chunked {
        // The same bytes as a length would have framed them (the test
        // client has decoded the chunks).
        r.headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("transfer-encoding"));
        r.headers
            .push(("Content-Length".into(), r.body.len().to_string()));
    }
    let mut a = format!("{}\n", r.status);
    for name in [
        "content-type",
        "content-length",
        "location",
        "cache-control",
        "www-authenticate",
        "access-control-allow-origin",
        "access-control-allow-methods",
        "access-control-allow-headers",
        "access-control-max-age",
        "strict-transport-security",
        "x-frame-options",
        "etag",
        "last-modified",
        "accept-ranges",
        "connection",
    ] {
        let values: Vec<&str> = r
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect();
        if !values.is_empty() {
            a.push_str(&format!("{name}: {}\n", values.join(" | ")));
        }
    }
    if r.headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("expires"))
    {
        a.push_str("expires: (present)\n");
    }
    // Error pages name the server; autoindex pages hold times of day.
    let body = r
        .text()
        .replace("nginx/1.22.1", "SERVER")
        .replace("nginx", "SERVER");
    if body.contains("<hr><center>") {
        // A built-in error page: its length depends on the server's name.
        a = a
            .lines()
            .filter(|l| !l.starts_with("content-length:"))
            .map(|l| format!("{l}\n"))
            .collect();
    }
    a.push_str(&body);
    Some(a.replace(&port.to_string(), "PORT"))
}

fn normalise_gyre(a: Option<String>) -> Option<String> {
    a.map(|s| {
        let mut out = s.clone();
        // gyre's error pages say gyre/VERSION where nginx says nginx/1.22.1.
        if let Some(i) = out.find("gyre/") {
            let end = out[i..].find('<').map_or(out.len(), |e| i + e);
            out.replace_range(i..end, "SERVER");
        }
        out.replace("gyre", "SERVER")
    })
}

#[test]
fn real_configurations_are_accepted_as_nginx_accepts_them() {
    let Some(nginx) = nginx_bin() else {
        eprintln!("skipped: nginx not installed (apt-get install nginx)");
        return;
    };
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut served = 0;
    for case in CASES {
        let ports = Ports {
            http: free_port(),
            https: free_port(),
        };
        let n = stage(case, "nginx", ports);
        let o = run_t(&nginx, &n.dir);
        assert!(
            o.status.success(),
            "{}: the corpus is not valid nginx:\n{}",
            case.name,
            text(&o)
        );
        let g = stage(case, "gyre", ports);
        let (refused, accepted) = gyre_accepts(&g.dir, case.name);
        eprintln!(
            "{}: {}; refused: {refused:?}",
            case.name,
            if accepted { "accepted" } else { "refused" }
        );
        assert!(
            accepted || case.requests.is_empty(),
            "{}: a case with requests must end accepted",
            case.name
        );
        used.extend(refused.iter().cloned());

        if case.requests.is_empty() || std::env::var_os("COMPAT_SURVEY").is_some() {
            continue;
        }
        let err = n.dir.join("logs/nginx-stderr.log");
        let Some(nd) = start(&nginx, &n.dir, ports.http, &["-e", err.to_str().unwrap()]) else {
            panic!(
                "{}: nginx did not start: {}",
                case.name,
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        };
        let answers_n: Vec<_> = case.requests.iter().map(|r| answer(nd.port, r)).collect();
        let users_n = worker_users(&nd);
        drop(nd);
        let Some(gd) = start(Path::new(util::gyre_bin()), &g.dir, ports.http, &[]) else {
            panic!(
                "{}: gyre did not start: {}",
                case.name,
                std::fs::read_to_string(g.dir.join("logs/error.log")).unwrap_or_default()
            );
        };
        // `user www-data;` under a root master: the workers run as it.
        assert_eq!(
            worker_users(&gd),
            users_n,
            "{}: gyre's workers (left) and nginx's (right) run as different users",
            case.name
        );
        for (req, want) in case.requests.iter().zip(answers_n) {
            let got = normalise_gyre(answer(gd.port, req));
            assert_eq!(
                got, want,
                "{}: gyre (left) and nginx (right) answer {req:?} differently",
                case.name
            );
            served += 1;
        }
        // The access log's client and status fields, once both servers
        // stopped (gyre buffers lines until exit).
        drop(gd);
        assert_eq!(
            log_fields(&g.dir),
            log_fields(&n.dir),
            "{}: gyre's access log (left) and nginx's (right) differ",
            case.name
        );
        assert_eq!(
            log_files(&g.dir),
            log_files(&n.dir),
            "{}: gyre's access log files (left) and nginx's (right) differ",
            case.name
        );
    }
    for (name, why) in REFUSED {
        if !used.contains(*name) {
            eprintln!("note: REFUSED entry \"{name}\" ({why}) is no longer refused by any case");
        }
    }
    eprintln!("{} cases, {served} requests compared", CASES.len());
}

/// What gyre does not have, refused in the words nginx uses when built
/// without it (no nginx needed).
#[test]
fn what_gyre_lacks_is_refused_in_nginx_words() {
    let p = util::Prefix::new("compat-refusals");
    let cases: &[(&str, &str)] = &[
        (
            "load_module modules/ngx_http_geoip2_module.so;\nevents {}\n",
            "[emerg] \"load_module\" is not supported on this platform in ",
        ),
        (
            "events {}\nhttp { server { listen 127.0.0.1:8443 ssl http2; } }\n",
            "[emerg] the \"http2\" parameter requires ngx_http_v2_module in ",
        ),
        (
            "events {}\nhttp { server { location ~ \\.php$ { fastcgi_pass 127.0.0.1:9000; } } }\n",
            "[emerg] unknown directive \"fastcgi_pass\" in ",
        ),
        (
            "events {}\nhttp { server { aio on; } }\n",
            "[emerg] \"aio on\" is unsupported on this platform in ",
        ),
        (
            "events {}\nhttp { lingering_close maybe; }\n",
            "[emerg] invalid value \"maybe\" in ",
        ),
        (
            "events {}\nhttp { real_ip_recursive maybe; }\n",
            "[emerg] invalid value \"maybe\" in \"real_ip_recursive\" directive, it must be \"on\" or \"off\" in ",
        ),
        (
            "events {}\nhttp { server { location / { if ($x) { add_header A b; } } } }\n",
            "[emerg] unknown \"x\" variable",
        ),
        (
            "events {}\nhttp { server { if ($uri) { add_header A b; } } }\n",
            "[emerg] \"add_header\" directive is not allowed here in ",
        ),
    ];
    for (conf, want) in cases {
        p.conf(conf);
        let o = p.run(&["-t"]);
        let out = text(&o);
        assert!(!o.status.success(), "{conf}: accepted:\n{out}");
        assert!(out.contains(want), "{conf}: want {want:?}, got:\n{out}");
    }
    // `user` is looked up as nginx does when the master is root.
    if util_is_root() {
        p.conf("user no-such-user-here;\nevents {}\n");
        let out = text(&p.run(&["-t"]));
        assert!(
            out.contains("[emerg] getpwnam(\"no-such-user-here\") failed in "),
            "{out}"
        );
        p.conf("user nobody no-such-group-here;\nevents {}\n");
        let out = text(&p.run(&["-t"]));
        assert!(
            out.contains("[emerg] getgrnam(\"no-such-group-here\") failed in "),
            "{out}"
        );
    }
}

fn util_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}
