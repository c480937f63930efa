//! Shared helpers for the integration tests: spawning the echo example as a
//! real process and reading what it logs.
#![allow(dead_code, clippy::unwrap_used)]

// One certificate maker for the core's and the binary's tests (gyre's copy
// also makes client certificates, which the core's tests leave unused).
#[path = "../../../gyre/tests/util/certs.rs"]
pub mod certs;
pub mod fork;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// target/<profile>/examples/<name>, built by `cargo test` with the tests.
pub fn example_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let p = dir.join("examples").join(name);
    assert!(p.exists(), "{} not built (run via cargo test)", p.display());
    p
}

/// A running echo server; killed on drop.
pub struct EchoProc {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl EchoProc {
    /// Starts the echo example on an ephemeral port with `args`; `nofile`
    /// lowers RLIMIT_NOFILE first (through the shell's ulimit).
    pub fn start(args: &[&str], nofile: Option<u32>) -> EchoProc {
        let bin = example_bin("echo");
        let mut cmd = match nofile {
            Some(n) => {
                let mut c = Command::new("sh");
                let mut line = format!("ulimit -n {n} && exec {}", bin.display());
                for a in args {
                    line.push(' ');
                    line.push_str(a);
                }
                line.push_str(" --listen 127.0.0.1:0");
                c.arg("-c").arg(line);
                c
            }
            None => {
                let mut c = Command::new(bin);
                c.args(args).args(["--listen", "127.0.0.1:0"]);
                c
            }
        };
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(i) = line.find("echo listening on ") {
                    let rest = &line[i + "echo listening on ".len()..];
                    let addr = rest.split(' ').next().unwrap().to_string();
                    let _ = tx.send(addr);
                }
                log2.lock().unwrap().push(line);
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("echo did not start")
            .parse()
            .unwrap();
        EchoProc { child, addr, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether some logged line contains `needle`, waiting up to `within`.
    pub fn logged(&self, needle: &str, within: Duration) -> bool {
        let end = Instant::now() + within;
        loop {
            if self.log.lock().unwrap().iter().any(|l| l.contains(needle)) {
                return true;
            }
            if Instant::now() > end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for EchoProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// User+system CPU time of a process, in clock ticks (1/100 s).
pub fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Open file descriptors of a process.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// `Read::read` that retries on `EINTR`. A socket with a receive timeout
/// (`SO_RCVTIMEO`) fails with `Interrupted` whenever the test process is
/// stopped and continued, even with no signal handler installed
/// (signal(7)); a loaded CI machine does that. `read_exact` and
/// `read_to_end` already retry; a bare `read` does not.
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
