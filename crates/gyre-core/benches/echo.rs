//! Echo over loopback: the core's `echo` example against a minimal mio echo
//! server, both as separate processes, measured side by side in one run.
//!
//! ```text
//! cargo bench -p gyre-core --bench echo
//! ```
//!
//! The bench builds `--example echo` in release, starts it, and re-executes
//! itself with `GYRE_BENCH_MIO_SERVER=127.0.0.1:0` to start the mio server.
//! A single-threaded mio load generator then drives C client connections
//! doing request/response with 64-byte messages (or keeping several messages
//! in flight per connection), alternating gyre and mio runs. For each server
//! it reports the median messages per second, the server's CPU time
//! (utime+stime from /proc/PID/stat) per message and, when `strace` is
//! installed, the server's system calls per message from one extra
//! `strace -c` run (strace slows the server a lot, which changes how it
//! batches) and, when `perf` can count syscall tracepoints, from one extra
//! `perf stat` run at full speed.
//!
//! Environment knobs: `GYRE_BENCH_SECS` (seconds per run, default 3),
//! `GYRE_BENCH_ROUNDS` (runs per server and case, default 3),
//! `GYRE_BENCH_NO_STRACE=1`, `GYRE_BENCH_NO_PERF=1` (skip those counts).
#![allow(clippy::unwrap_used)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Registry, Token};

/// Set to a listen address, makes this binary run the mio echo server.
const MIO_ENV: &str = "GYRE_BENCH_MIO_SERVER";
/// Message size.
const MSG: usize = 64;
/// Most messages one connection keeps in flight.
const MAX_DEPTH: usize = 16;
/// Safety cap on the messages of one run.
const MSG_CAP: u64 = 50_000_000;
const WARMUP: Duration = Duration::from_millis(300);
const STRACE_RUN: Duration = Duration::from_secs(1);
const PERF_RUN: Duration = Duration::from_secs(2);

fn main() {
    if let Ok(addr) = std::env::var(MIO_ENV) {
        if let Err(e) = mio_server::run(&addr) {
            eprintln!("mio echo: {e}");
            std::process::exit(1);
        }
        return;
    }
    bench();
}

// ---------------------------------------------------------------------------
// The mio echo server (runs in its own process).

mod mio_server {
    use super::*;

    const LISTENER: Token = Token(usize::MAX);

    struct Conn {
        stream: TcpStream,
        /// Echo bytes the socket did not take yet.
        pending: Vec<u8>,
        /// Not drained to WouldBlock since the last readable edge.
        readable: bool,
        /// WRITABLE interest is registered.
        want_write: bool,
    }

    /// One thread, edge-triggered Poll, connections in a Vec indexed by
    /// Token with a free list, one shared read buffer.
    pub fn run(addr: &str) -> io::Result<()> {
        let addr: SocketAddr = addr
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad address"))?;
        let mut poll = Poll::new()?;
        let mut events = Events::with_capacity(1024);
        let mut listener = TcpListener::bind(addr)?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        eprintln!("mio echo listening on {}", listener.local_addr()?);

        let mut conns: Vec<Option<Conn>> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match poll.poll(&mut events, None) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for ev in events.iter() {
                if ev.token() == LISTENER {
                    accept(&listener, poll.registry(), &mut conns, &mut free);
                    continue;
                }
                let i = ev.token().0;
                let Some(Some(c)) = conns.get_mut(i) else {
                    continue;
                };
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    c.readable = true;
                }
                if !serve(c, Token(i), &mut buf, poll.registry()) {
                    // Dropping the stream closes it, which also removes it
                    // from the epoll set.
                    conns[i] = None;
                    free.push(i);
                }
            }
        }
    }

    fn accept(
        listener: &TcpListener,
        registry: &Registry,
        conns: &mut Vec<Option<Conn>>,
        free: &mut Vec<usize>,
    ) {
        loop {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let i = free.pop().unwrap_or_else(|| {
                        conns.push(None);
                        conns.len() - 1
                    });
                    if registry
                        .register(&mut stream, Token(i), Interest::READABLE)
                        .is_err()
                    {
                        free.push(i);
                        continue;
                    }
                    conns[i] = Some(Conn {
                        stream,
                        pending: Vec::new(),
                        readable: false,
                        want_write: false,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    eprintln!("mio echo: accept: {e}");
                    return;
                }
            }
        }
    }

    /// Writes as much of `data` as the socket takes.
    fn write_some(s: &mut TcpStream, data: &[u8]) -> io::Result<usize> {
        let mut off = 0;
        while off < data.len() {
            match s.write(&data[off..]) {
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(off)
    }

    /// Flushes, then reads until WouldBlock echoing each read; false closes.
    fn serve(c: &mut Conn, token: Token, buf: &mut [u8], registry: &Registry) -> bool {
        if !c.pending.is_empty() {
            match write_some(&mut c.stream, &c.pending) {
                Ok(n) => {
                    c.pending.drain(..n);
                }
                Err(_) => return false,
            }
            if !c.pending.is_empty() {
                // WRITABLE is registered already.
                return true;
            }
        }
        while c.readable {
            match c.stream.read(buf) {
                Ok(0) => return false,
                Ok(n) => match write_some(&mut c.stream, &buf[..n]) {
                    Ok(sent) if sent < n => {
                        // Stop reading until the peer takes its echo.
                        c.pending.extend_from_slice(&buf[sent..n]);
                        break;
                    }
                    Ok(_) => {}
                    Err(_) => return false,
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        let want_write = !c.pending.is_empty();
        if want_write != c.want_write {
            let interest = if want_write {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if registry.reregister(&mut c.stream, token, interest).is_err() {
                return false;
            }
            c.want_write = want_write;
        }
        true
    }
}

// ---------------------------------------------------------------------------
// Server processes.

/// A child process killed (and reaped) on drop.
struct Proc {
    child: Child,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Server {
    name: &'static str,
    proc: Proc,
    addr: SocketAddr,
}

/// Spawns `cmd`, keeps draining its stderr (the gyre example logs once a
/// second) and waits for its "listening on ADDR" line.
fn spawn_server(name: &'static str, mut cmd: Command) -> Server {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning the {name} server: {e}"));
    let stderr = child.stderr.take().unwrap();
    let proc = Proc { child };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(i) = line.find("listening on ") {
                let rest = &line[i + "listening on ".len()..];
                let addr = rest.split(' ').next().unwrap_or("").to_string();
                let _ = tx.send(addr);
            } else if line.contains("[error]") || line.contains("[emerg]") {
                eprintln!("{name} server: {line}");
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("the {name} server did not start"))
        .parse()
        .unwrap();
    Server { name, proc, addr }
}

fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| manifest.to_path_buf())
}

/// Builds the echo example in release and returns its path.
fn build_gyre_echo() -> PathBuf {
    let root = workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("building the echo example: {cargo} build --release -p gyre-core --example echo");
    let status = Command::new(&cargo)
        .args(["build", "--release", "-p", "gyre-core", "--example", "echo"])
        .current_dir(&root)
        .status()
        .unwrap_or_else(|e| panic!("running {cargo}: {e}"));
    assert!(status.success(), "building the echo example failed");
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => root.join(d),
        None => root.join("target"),
    };
    let mut candidates = vec![target.join("release/examples/echo")];
    // A target dir set in a cargo config: the bench itself lives in
    // <target>/release/deps.
    if let Ok(exe) = std::env::current_exe() {
        if let Some(profile) = exe.parent().and_then(Path::parent) {
            candidates.push(profile.join("examples/echo"));
        }
    }
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .unwrap_or_else(|| panic!("echo example not found in {candidates:?}"))
}

fn start_gyre(bin: &Path) -> Server {
    let mut cmd = Command::new(bin);
    cmd.args(["--listen", "127.0.0.1:0", "--connections", "2048"]);
    spawn_server("gyre", cmd)
}

fn start_mio() -> Server {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env(MIO_ENV, "127.0.0.1:0");
    spawn_server("mio", cmd)
}

fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Times the process blocked (voluntary context switches): each is a sleep
/// in epoll_wait and a wake-up, which cost far more than a syscall in a VM.
fn voluntary_switches(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------
// The load generator: one thread, one mio Poll, all client sockets.

static PAYLOAD: [u8; MSG * MAX_DEPTH] = [b'g'; MSG * MAX_DEPTH];

struct ClientConn {
    stream: TcpStream,
    connected: bool,
    /// Bytes to write.
    unsent: usize,
    /// Bytes written (or to write) whose echo has not arrived.
    outstanding: usize,
    /// Echoed bytes of a message not complete yet.
    partial: usize,
}

struct Client {
    poll: Poll,
    events: Events,
    conns: Vec<ClientConn>,
    buf: Vec<u8>,
    depth: usize,
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_string())
}

impl Client {
    /// Opens `n` connections and waits until all are established.
    fn connect(addr: SocketAddr, n: usize, depth: usize) -> io::Result<Client> {
        assert!((1..=MAX_DEPTH).contains(&depth));
        let poll = Poll::new()?;
        let mut conns = Vec::with_capacity(n);
        for i in 0..n {
            let mut stream = TcpStream::connect(addr)?;
            poll.registry().register(
                &mut stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )?;
            conns.push(ClientConn {
                stream,
                connected: false,
                unsent: 0,
                outstanding: 0,
                partial: 0,
            });
        }
        let mut c = Client {
            poll,
            events: Events::with_capacity(1024),
            conns,
            buf: vec![0; 64 * 1024],
            depth,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut waiting = n;
        while waiting > 0 {
            if Instant::now() > deadline {
                return Err(timed_out("connecting"));
            }
            c.poll
                .poll(&mut c.events, Some(Duration::from_millis(100)))?;
            for ev in c.events.iter() {
                let x = &mut c.conns[ev.token().0];
                if x.connected || !(ev.is_writable() || ev.is_error()) {
                    continue;
                }
                if let Some(e) = x.stream.take_error()? {
                    return Err(e);
                }
                match x.stream.peer_addr() {
                    Ok(_) => {
                        x.connected = true;
                        x.stream.set_nodelay(true)?;
                        waiting -= 1;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(c)
    }

    fn flush(x: &mut ClientConn) -> io::Result<()> {
        while x.unsent > 0 {
            match x.stream.write(&PAYLOAD[..x.unsent.min(PAYLOAD.len())]) {
                Ok(n) => x.unsent -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Runs the load for `dur` (or until `MSG_CAP` messages), then stops
    /// sending and waits for the echoes in flight. Returns the messages
    /// echoed and the time taken.
    fn run(&mut self, dur: Duration) -> io::Result<(u64, Duration)> {
        let start = Instant::now();
        let stop_at = start + dur;
        let hard_deadline = stop_at + Duration::from_secs(5);
        let mut done = 0u64;
        let mut in_flight = 0usize;
        let mut sending = true;
        for x in &mut self.conns {
            x.unsent += self.depth * MSG;
            x.outstanding += self.depth * MSG;
            in_flight += self.depth * MSG;
            Self::flush(x)?;
        }
        loop {
            let now = Instant::now();
            if sending && (now >= stop_at || done >= MSG_CAP) {
                sending = false;
            }
            if !sending && in_flight == 0 {
                break;
            }
            if now >= hard_deadline {
                return Err(timed_out("echoes did not come back"));
            }
            let wait = if sending {
                stop_at - now
            } else {
                hard_deadline - now
            };
            self.poll
                .poll(&mut self.events, Some(wait.min(Duration::from_millis(50))))?;
            for ev in self.events.iter() {
                let x = &mut self.conns[ev.token().0];
                // Read only while echoes are due: a connection whose echo is
                // complete has nothing to read (no EAGAIN read).
                while x.outstanding > x.unsent {
                    match x.stream.read(&mut self.buf) {
                        Ok(0) => {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "server closed a connection",
                            ))
                        }
                        Ok(n) => {
                            if n > x.outstanding - x.unsent {
                                return Err(io::Error::other("more bytes echoed than sent"));
                            }
                            x.outstanding -= n;
                            in_flight -= n;
                            x.partial += n;
                            let m = x.partial / MSG;
                            x.partial %= MSG;
                            done += m as u64;
                            if sending {
                                x.unsent += m * MSG;
                                x.outstanding += m * MSG;
                                in_flight += m * MSG;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                if x.unsent > 0 {
                    Self::flush(x)?;
                }
            }
        }
        Ok((done, start.elapsed()))
    }
}

// ---------------------------------------------------------------------------
// Measurements.

#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    conns: usize,
    depth: usize,
}

const CASES: [Case; 3] = [
    Case {
        name: "ping-pong c=50",
        conns: 50,
        depth: 1,
    },
    Case {
        name: "ping-pong c=500",
        conns: 500,
        depth: 1,
    },
    Case {
        name: "pipelined c=50 d=16",
        conns: 50,
        depth: 16,
    },
];

struct Sample {
    msgs_per_sec: f64,
    cpu_us_per_msg: f64,
    /// Server sleeps (voluntary context switches) per message.
    sleeps_per_msg: f64,
}

fn measure(server: &Server, case: Case, dur: Duration, tck: f64) -> io::Result<Sample> {
    let mut client = Client::connect(server.addr, case.conns, case.depth)?;
    client.run(WARMUP)?;
    let pid = server.proc.pid();
    let (t0, v0) = (cpu_ticks(pid), voluntary_switches(pid));
    let (msgs, took) = client.run(dur)?;
    let (t1, v1) = (cpu_ticks(pid), voluntary_switches(pid));
    drop(client);
    // Let the server close the connections before the next run.
    std::thread::sleep(Duration::from_millis(150));
    let msgs = msgs.max(1) as f64;
    Ok(Sample {
        msgs_per_sec: msgs / took.as_secs_f64(),
        cpu_us_per_msg: (t1 - t0) as f64 / tck * 1e6 / msgs,
        sleeps_per_msg: (v1 - v0) as f64 / msgs,
    })
}

struct SyscallRow {
    name: String,
    calls: u64,
    errors: u64,
}

struct SyscallSample {
    msgs: u64,
    total: u64,
    rows: Vec<SyscallRow>,
}

impl SyscallSample {
    fn per_msg(&self) -> f64 {
        self.total as f64 / self.msgs.max(1) as f64
    }
}

/// The number right-aligned to column `end` of a `strace -c` row.
fn column_before(line: &str, end: usize) -> u64 {
    let end = end.min(line.len());
    line.get(..end)
        .and_then(|s| s.split_whitespace().last())
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

/// Parses a `strace -c` summary: the calls and errors columns are found by
/// their header, since empty cells leave no token.
fn parse_strace(text: &str) -> Option<(u64, Vec<SyscallRow>)> {
    let header = text.lines().find(|l| l.contains("calls"))?;
    let calls_end = header.find("calls")? + "calls".len();
    let errors_end = header.find("errors")? + "errors".len();
    let mut total = None;
    let mut rows = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if !t.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let Some(name) = line.split_whitespace().last() else {
            continue;
        };
        let calls = column_before(line, calls_end);
        if name == "total" {
            total = Some(calls);
            continue;
        }
        let errors = if line.len() >= errors_end && line[calls_end..errors_end].trim().is_empty() {
            0
        } else {
            column_before(line, errors_end)
        };
        rows.push(SyscallRow {
            name: name.to_string(),
            calls,
            errors,
        });
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.calls));
    let total = total.unwrap_or_else(|| rows.iter().map(|r| r.calls).sum());
    Some((total, rows))
}

/// One load run with a tracer attached to the server: `tracer` builds its
/// command from the server's pid and the output file; the tracer is stopped
/// with SIGINT (both strace and perf then write their summary). Returns the
/// messages echoed during the run and the tracer's output.
fn run_traced(
    server: &Server,
    case: Case,
    tool: &str,
    run: Duration,
    tracer: impl FnOnce(u32, &Path) -> Command,
) -> io::Result<(u64, String)> {
    let mut client = Client::connect(server.addr, case.conns, case.depth)?;
    client.run(Duration::from_millis(200))?;
    let file = std::env::temp_dir().join(format!(
        "gyre-bench-echo-{tool}-{}-{}.txt",
        std::process::id(),
        server.name
    ));
    let _ = std::fs::remove_file(&file);
    let child = tracer(server.proc.pid(), &file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut tracer = Proc { child };
    // Time to attach.
    std::thread::sleep(Duration::from_millis(500));
    let (msgs, _) = client.run(run)?;
    Command::new("kill")
        .args(["-INT", &tracer.pid().to_string()])
        .status()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while tracer.child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            return Err(timed_out("the tracer did not exit"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(tracer);
    drop(client);
    std::thread::sleep(Duration::from_millis(150));
    let text = std::fs::read_to_string(&file)?;
    let _ = std::fs::remove_file(&file);
    Ok((msgs, text))
}

/// One run with `strace -c -f -p PID` attached to the server.
fn count_syscalls_strace(server: &Server, case: Case) -> io::Result<Option<SyscallSample>> {
    let (msgs, text) = run_traced(server, case, "strace", STRACE_RUN, |pid, file| {
        let mut c = Command::new("strace");
        c.args(["-c", "-f", "-p", &pid.to_string(), "-o"]).arg(file);
        c
    })?;
    Ok(parse_strace(&text).map(|(total, rows)| SyscallSample { msgs, total, rows }))
}

/// Syscall tracepoints counted by `perf stat` (no slowdown to speak of,
/// so the server batches as it does untraced).
const PERF_SYSCALLS: [&str; 10] = [
    "read",
    "write",
    "recvfrom",
    "sendto",
    "epoll_wait",
    "epoll_pwait",
    "epoll_ctl",
    "accept4",
    "close",
    "getpid",
];

/// One run with `perf stat -e raw_syscalls:sys_enter,...` attached to the
/// server; also counts syscalls that returned EAGAIN. The rows' `errors`
/// are unknown (0) except for the "EAGAIN (any)" row.
fn count_syscalls_perf(
    server: &Server,
    case: Case,
    run: Duration,
) -> io::Result<Option<SyscallSample>> {
    let (msgs, text) = run_traced(server, case, "perf", run, |pid, file| {
        let mut c = Command::new("perf");
        c.args(["stat", "-x", ",", "-o"]).arg(file);
        c.args(["-e", "raw_syscalls:sys_enter"]);
        c.args(["-e", "raw_syscalls:sys_exit", "--filter", "ret == -11"]);
        for name in PERF_SYSCALLS {
            c.args(["-e", &format!("syscalls:sys_enter_{name}")]);
        }
        c.args(["-p", &pid.to_string()]);
        c
    })?;
    let mut total = None;
    let mut eagain = 0;
    let mut rows = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 3 {
            continue;
        }
        let Ok(v) = f[0].trim().parse::<u64>() else {
            continue;
        };
        match f[2] {
            "raw_syscalls:sys_enter" => total = Some(v),
            "raw_syscalls:sys_exit" => eagain = v,
            e => {
                if let Some(name) = e.strip_prefix("syscalls:sys_enter_") {
                    if v > 0 {
                        rows.push(SyscallRow {
                            name: name.to_string(),
                            calls: v,
                            errors: 0,
                        });
                    }
                }
            }
        }
    }
    let Some(total) = total else {
        return Ok(None);
    };
    rows.sort_by_key(|r| std::cmp::Reverse(r.calls));
    rows.push(SyscallRow {
        name: "EAGAIN (any)".into(),
        calls: eagain,
        errors: eagain,
    });
    Ok(Some(SyscallSample { msgs, total, rows }))
}

fn have_tool(name: &str, arg: &str) -> bool {
    Command::new(name)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `perf stat` can count syscall tracepoints here.
fn have_perf() -> bool {
    if std::env::var_os("GYRE_BENCH_NO_PERF").is_some() {
        return false;
    }
    Command::new("perf")
        .args([
            "stat",
            "-x",
            ",",
            "-e",
            "raw_syscalls:sys_enter",
            "--",
            "true",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stderr).lines().any(|l| {
                    l.contains("raw_syscalls:sys_enter")
                        && l.starts_with(|c: char| c.is_ascii_digit())
                })
        })
}

fn have_strace() -> bool {
    std::env::var_os("GYRE_BENCH_NO_STRACE").is_none() && have_tool("strace", "-V")
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct CaseResult {
    case: Case,
    gyre_rate: f64,
    mio_rate: f64,
    gyre_cpu: f64,
    mio_cpu: f64,
    gyre_sleeps: f64,
    mio_sleeps: f64,
    /// From `strace -c` (slowed server).
    gyre_strace: Option<SyscallSample>,
    mio_strace: Option<SyscallSample>,
    /// From `perf stat` syscall tracepoints (server at speed).
    gyre_perf: Option<SyscallSample>,
    mio_perf: Option<SyscallSample>,
}

fn print_breakdown(
    title: &str,
    results: &[CaseResult],
    pick: impl Fn(&CaseResult) -> [&Option<SyscallSample>; 2],
) {
    println!("\n{title}");
    for r in results {
        for (name, s) in ["gyre", "mio"].into_iter().zip(pick(r)) {
            let Some(s) = s else {
                println!("  {:<20} {name:<4} no summary", r.case.name);
                continue;
            };
            println!(
                "  {:<20} {name:<4} {} msgs, {} calls, {:.3}/msg:",
                r.case.name,
                s.msgs,
                s.total,
                s.per_msg()
            );
            let msgs = s.msgs.max(1) as f64;
            for row in s.rows.iter().take(6) {
                println!(
                    "      {:<14} {:>10} calls {:>7.3}/msg   errors {:>8} ({:.3}/msg)",
                    row.name,
                    row.calls,
                    row.calls as f64 / msgs,
                    row.errors,
                    row.errors as f64 / msgs
                );
            }
        }
    }
}

fn bench() {
    let secs = env_num("GYRE_BENCH_SECS", 3).max(1);
    let rounds = env_num("GYRE_BENCH_ROUNDS", 3).max(1) as usize;
    let dur = Duration::from_secs(secs);
    let tck = clock_ticks_per_sec();
    let strace = have_strace();
    let perf = have_perf();

    let gyre_bin = build_gyre_echo();
    let gyre = start_gyre(&gyre_bin);
    let mio = start_mio();
    eprintln!(
        "gyre echo (pid {}) on {}, mio echo (pid {}) on {}",
        gyre.proc.pid(),
        gyre.addr,
        mio.proc.pid(),
        mio.addr
    );
    eprintln!(
        "{rounds} rounds of {secs} s per server and case, {MSG}-byte messages, \
         alternating gyre and mio"
    );

    let mut results = Vec::new();
    for case in CASES {
        let mut rate = [Vec::new(), Vec::new()];
        let mut cpu = [Vec::new(), Vec::new()];
        let mut sleeps = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            for (k, server) in [&gyre, &mio].into_iter().enumerate() {
                let s = measure(server, case, dur, tck)
                    .unwrap_or_else(|e| panic!("{} {}: {e}", case.name, server.name));
                eprintln!(
                    "  {:<20} round {} {:<4} {:>10.0} msgs/s {:>6.2} us CPU/msg {:>6.3} sleeps/msg",
                    case.name,
                    round + 1,
                    server.name,
                    s.msgs_per_sec,
                    s.cpu_us_per_msg,
                    s.sleeps_per_msg
                );
                sleeps[k].push(s.sleeps_per_msg);
                rate[k].push(s.msgs_per_sec);
                cpu[k].push(s.cpu_us_per_msg);
            }
        }
        let traced = |on: bool, f: &dyn Fn(&Server) -> io::Result<Option<SyscallSample>>| {
            if !on {
                return [None, None];
            }
            [&gyre, &mio].map(|server| {
                f(server)
                    .unwrap_or_else(|e| panic!("traced run {} {}: {e}", case.name, server.name))
            })
        };
        let [gyre_perf, mio_perf] = traced(perf, &|s| count_syscalls_perf(s, case, PERF_RUN));
        let [gyre_strace, mio_strace] = traced(strace, &|s| count_syscalls_strace(s, case));
        let [gr, mr] = &mut rate;
        let [gc, mc] = &mut cpu;
        let [gs, ms] = &mut sleeps;
        results.push(CaseResult {
            case,
            gyre_rate: median(gr),
            mio_rate: median(mr),
            gyre_cpu: median(gc),
            mio_cpu: median(mc),
            gyre_sleeps: median(gs),
            mio_sleeps: median(ms),
            gyre_strace,
            mio_strace,
            gyre_perf,
            mio_perf,
        });
    }
    drop(gyre);
    drop(mio);

    if perf {
        print_breakdown(
            &format!("Syscalls per message, perf stat syscall tracepoints ({PERF_RUN:?} run at full speed):"),
            &results,
            |r| [&r.gyre_perf, &r.mio_perf],
        );
    } else {
        println!("\nperf with syscall tracepoints not available: perf counts skipped");
    }
    if strace {
        print_breakdown(
            &format!("Syscalls per message, strace -c -f -p ({STRACE_RUN:?} run; strace slows the server, which then batches differently):"),
            &results,
            |r| [&r.gyre_strace, &r.mio_strace],
        );
    } else {
        println!(
            "\nstrace not found: strace syscall counts skipped \
             (install it with `apt-get install strace`)"
        );
    }

    println!("\nServer sleeps (voluntary context switches, i.e. blocking epoll waits) per message, median:");
    for r in &results {
        println!(
            "  {:<20} gyre {:.4}  mio {:.4}",
            r.case.name, r.gyre_sleeps, r.mio_sleeps
        );
    }
    println!(
        "\nMedian of {rounds} runs of {secs} s each, gyre/mio alternating; \
         CPU = server utime+stime per message; sc/m = server syscalls per message"
    );
    println!(
        "{:<20} {:>11} {:>11} {:>6} {:>9} {:>9} {:>6} {:>9} {:>9} {:>9} {:>9}",
        "case",
        "gyre msg/s",
        "mio msg/s",
        "ratio",
        "gyre us/m",
        "mio us/m",
        "ratio",
        "gyre sc/m",
        "mio sc/m",
        "gyre sc/m",
        "mio sc/m"
    );
    println!(
        "{:<20} {:>11} {:>11} {:>6} {:>9} {:>9} {:>6} {:>19} {:>19}",
        "", "", "", "", "", "", "", "(strace -c)", "(perf stat)"
    );
    let sc = |s: &Option<SyscallSample>| match s {
        Some(s) => format!("{:.3}", s.per_msg()),
        None => "-".to_string(),
    };
    for r in &results {
        println!(
            "{:<20} {:>11.0} {:>11.0} {:>6.3} {:>9.3} {:>9.3} {:>6.3} {:>9} {:>9} {:>9} {:>9}",
            r.case.name,
            r.gyre_rate,
            r.mio_rate,
            r.gyre_rate / r.mio_rate,
            r.gyre_cpu,
            r.mio_cpu,
            r.gyre_cpu / r.mio_cpu,
            sc(&r.gyre_strace),
            sc(&r.mio_strace),
            sc(&r.gyre_perf),
            sc(&r.mio_perf)
        );
    }
}
