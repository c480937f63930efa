//! Helpers for tests that run the real `gyre` binary: a throw-away prefix
//! directory with a configuration, the running server, its log and pids.
#![allow(dead_code, clippy::unwrap_used)]

pub mod backend;
pub mod certs;
pub mod http;
pub mod kv;
pub mod nginx;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn gyre_bin() -> &'static str {
    env!("CARGO_BIN_EXE_gyre")
}

/// A prefix directory with `conf/`, `logs/` and `html/`.
pub struct Prefix {
    pub dir: PathBuf,
}

impl Prefix {
    /// A fresh directory, unique per call: tests of one binary run in
    /// parallel and may ask for the same name (`Instant::now().elapsed()`,
    /// used here before, is always about 0, so two tests starting nginx
    /// through one helper shared — and removed — each other's prefix).
    pub fn new(name: &str) -> Prefix {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("gyre-test-{name}-{}-{seq}", std::process::id(),));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["conf", "logs", "html"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        Prefix { dir }
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn conf(&self, text: &str) {
        self.write("conf/gyre.conf", text);
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Runs gyre to completion with `args` (after `-p PREFIX`).
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(gyre_bin())
            .arg("-p")
            .arg(&self.dir)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Starts gyre in the foreground (the config must say `daemon off;`)
    /// and waits for its pid file.
    pub fn start(&self) -> Server {
        let s = self.spawn();
        assert!(
            wait_for(Duration::from_secs(10), || s.pid_file_pid().is_some()),
            "gyre did not write its pid file; log:\n{}",
            s.log()
        );
        s
    }

    /// Starts gyre on this prefix without waiting for anything.
    pub fn spawn(&self) -> Server {
        let child = Command::new(gyre_bin())
            .arg("-p")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Server {
            child,
            prefix: self.dir.clone(),
        }
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running gyre master; killed (with its workers) on drop.
pub struct Server {
    pub child: Child,
    pub prefix: PathBuf,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn pid_file_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.prefix.join("logs/gyre.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("logs/error.log")).unwrap_or_default()
    }

    /// Waits until the error log contains `needle`.
    pub fn logged(&self, needle: &str, within: Duration) -> bool {
        wait_for(within, || self.log().contains(needle))
    }

    /// The master's live child processes.
    pub fn workers(&self) -> Vec<u32> {
        children(self.pid())
    }

    /// Runs `gyre -p PREFIX -s SIGNAL`.
    pub fn signal(&self, sig: &str) -> Output {
        Command::new(gyre_bin())
            .arg("-p")
            .arg(&self.prefix)
            .args(["-s", sig])
            .output()
            .unwrap()
    }

    /// Waits for the master to exit; returns whether it did.
    pub fn wait_exit(&mut self, within: Duration) -> bool {
        wait_for(within, || matches!(self.child.try_wait(), Ok(Some(_))))
    }
}

impl Drop for Server {
    /// Kills the master and its workers; when the test is failing, first
    /// prints whether the master was still running and its error log's tail
    /// (the harness shows it with the panic), so a flake in CI explains itself.
    fn drop(&mut self) {
        if std::thread::panicking() {
            let state = match self.child.try_wait() {
                Ok(Some(st)) => format!("had exited ({st})"),
                _ => "was running".to_string(),
            };
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            eprintln!(
                "gyre {} ({}) {state}; the last lines of its error log:\n{tail}",
                self.child.id(),
                self.prefix.display()
            );
        }
        let workers = self.workers();
        let _ = self.child.kill();
        let _ = self.child.wait();
        for w in workers {
            let _ = Command::new("kill").args(["-9", &w.to_string()]).status();
        }
    }
}

pub fn children(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        // A zombie that is not reaped yet is not a live worker.
        .filter(|c| !is_zombie(*c))
        .collect()
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rfind(')')
                .and_then(|i| s.get(i + 2..i + 3))
                .is_none_or(|st| st == "Z")
        })
        .unwrap_or(true)
}

pub fn wait_for(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// `Read::read` that retries on `EINTR`. A socket with a receive timeout
/// (`SO_RCVTIMEO`, which every test client sets) fails with `Interrupted`
/// whenever the test process is stopped and continued — even with no signal
/// handler installed (signal(7)); a loaded CI machine does that. `read_exact`
/// and `read_to_end` already retry; a bare `read` does not.
pub trait ReadSome: std::io::Read {
    fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }
}

impl<R: std::io::Read + ?Sized> ReadSome for R {}

/// Regular files below `dir`, its subdirectories included (the temporary
/// files a test expects gone: they are unlinked at once or at the end).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// VmRSS of process `pid` in KiB (0 when it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
