//! The real nginx for differential tests: found at `$NGINX` or
//! `/usr/sbin/nginx`, run in the foreground in its own prefix on a free
//! loopback port with one server block, killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::http::{free_port, probe};
use super::Prefix;

/// nginx's binary, if installed (tests skip with a message without it).
pub fn nginx_bin() -> Option<PathBuf> {
    let p = std::env::var_os("NGINX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"));
    p.exists().then_some(p)
}

/// A running nginx; killed on drop.
pub struct Nginx {
    pub child: Child,
    pub port: u16,
    pub prefix: Prefix,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    /// Its error log's path.
    pub fn error_log(&self) -> PathBuf {
        self.prefix.path("logs/error.log")
    }
}

/// The uid and gid [`command_as`] runs a server as.
pub const NOBODY: u32 = 65534;

/// `setpriv` running `bin` as [`NOBODY`] when `nobody`, or `bin` itself.
pub fn command_as(bin: &Path, nobody: bool) -> Command {
    if !nobody {
        return Command::new(bin);
    }
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        "--clear-groups",
        "--",
    ])
    .arg(bin);
    c
}

/// What nginx serves: `http` inside `http {}` (zones, maps), `server`
/// inside its server block after `listen` and `root`.
pub struct Site<'a> {
    pub root: &'a Path,
    pub http: &'a str,
    pub server: &'a str,
}

/// Starts nginx in a fresh prefix (`name` keeps the prefixes of tests
/// running at once apart), retrying with another port if the one picked
/// was taken meanwhile; None (after printing its log) if it never served.
pub fn start(bin: &Path, name: &str, site: &Site<'_>) -> Option<Nginx> {
    start_as(bin, name, site, false)
}

/// [`start`], as [`NOBODY`] when `nobody` (its log and temp directories
/// are then given to it).
pub fn start_as(bin: &Path, name: &str, site: &Site<'_>, nobody: bool) -> Option<Nginx> {
    let root = site.root.display().to_string();
    let http = |port: u16| {
        format!(
            "{}\nserver {{\n  listen 127.0.0.1:{port};\n  root {root};\n{}\n }}",
            site.http, site.server
        )
    };
    start_conf(bin, name, nobody, &http)
}

/// nginx with `http(port)` as the whole inside of its `http {}` block
/// (upstreams and several servers; `port` is the one to listen on).
pub fn start_http(bin: &Path, name: &str, http: &dyn Fn(u16) -> String) -> Option<Nginx> {
    start_conf(bin, name, false, http)
}

fn start_conf(bin: &Path, name: &str, nobody: bool, http: &dyn Fn(u16) -> String) -> Option<Nginx> {
    let p = Prefix::new(name);
    for t in ["cb", "px", "fc", "uw", "sc"] {
        std::fs::create_dir_all(p.path(&format!("tmp/{t}"))).unwrap();
        if nobody {
            std::os::unix::fs::chown(p.path(&format!("tmp/{t}")), Some(NOBODY), None).unwrap();
        }
    }
    if nobody {
        std::os::unix::fs::chown(p.path("logs"), Some(NOBODY), None).unwrap();
    }
    for _attempt in 0..3 {
        let port = free_port();
        let conf = format!(
            "daemon off;\nmaster_process off;\nerror_log logs/error.log info;\npid logs/nginx.pid;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n access_log off;\n server_tokens off;\n client_body_temp_path tmp/cb;\n proxy_temp_path tmp/px;\n\
             fastcgi_temp_path tmp/fc;\n uwsgi_temp_path tmp/uw;\n scgi_temp_path tmp/sc;\n{}\n}}\n",
            http(port)
        );
        p.write("conf/nginx.conf", &conf);
        let mut child = command_as(bin, nobody)
            .arg("-p")
            .arg(&p.dir)
            .args(["-c", "conf/nginx.conf", "-e", "logs/error.log"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            if probe(port) {
                return Some(Nginx {
                    child,
                    port,
                    prefix: p,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    eprintln!(
        "nginx did not start: {}",
        std::fs::read_to_string(p.path("logs/error.log")).unwrap_or_default()
    );
    None
}
