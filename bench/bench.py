#!/usr/bin/env python3
"""gyre vs nginx (and gyre's kv process vs redis-server) benchmark and fault
harness (issue 6). Driven by bench/run.sh.

    python3 bench/bench.py SECTION      # http core memory balance ceiling faults kv tls proxy all
    python3 bench/bench.py fuzz [SECS]  # cargo-fuzz targets, SECS each (not part of all)
    python3 bench/bench.py faults-kv    # re-run only the kv kill -9 row of faults
    python3 bench/bench.py report       # rebuild BENCHMARKS.md and bench/results.svg only

Every section writes bench/results/SECTION.md (a Markdown fragment) and
SECTION.json (its numbers); BENCHMARKS.md and bench/results.svg are rebuilt from
all fragments present after every section, so sections can be run separately.
No third-party Python packages. Everything listens on 127.0.0.1; every server
started here is stopped on exit (atexit + SIGTERM/SIGINT handlers, and run.sh's
trap kills whatever pid is left in $TMP/pids).

Environment: BENCH_SECS (wrk seconds per run, default 5), BENCH_ROUNDS
(runs per server, default 3), BENCH_CONNS (wrk connections, default 50),
BENCH_STRACE_SECS (default 2), BENCH_CHURN_SECS (1M-connection test bound, 150),
GYRE (gyre binary), NGINX (nginx binary); kv: BENCH_KV_N (redis-benchmark -n at
-P 1, default 200000), BENCH_KV_NP (at -P 16, 2000000), BENCH_KV_IDLE (idle clients,
10000), BENCH_KV_KEYS (keys with a 1 s TTL for the expiry test, 1000000);
fuzz: BENCH_FUZZ_SECS (seconds per target, 300; `fuzz SECS` overrides).
"""
import atexit
import json
import os
import re
import resource
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import kv_types  # noqa: E402  (bench/ is on sys.path: this script's folder)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
RESULTS = os.path.join(BENCH, "results")
# Where `cargo build --release` put it: CARGO_TARGET_DIR when set.
GYRE = os.environ.get("GYRE", os.path.join(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"),
                                           "release/gyre"))
NGINX = os.environ.get("NGINX", "nginx")
SECS = int(os.environ.get("BENCH_SECS", "5"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
CONNS = int(os.environ.get("BENCH_CONNS", "50"))
STRACE_SECS = int(os.environ.get("BENCH_STRACE_SECS", "2"))
CHURN_SECS = int(os.environ.get("BENCH_CHURN_SECS", "150"))
TICK = os.sysconf("SC_CLK_TCK")
TMP = os.environ.get("BENCH_TMP") or tempfile.mkdtemp(prefix="gyre-bench-")
PIDS_FILE = os.path.join(TMP, "pids")
SERVERS = []
_port = [18080]


def log(*a):
    print(*a, flush=True)


def free_port():
    while True:
        _port[0] += 1
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", _port[0]))
            return _port[0]
        except OSError:
            continue
        finally:
            s.close()


# ------------------------------------------------------------------ processes

def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def cpu_secs(pids):
    t = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            t += int(fields[11]) + int(fields[12])  # utime stime
        except OSError:
            pass
    return t / TICK


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def fd_counts(pid):
    """(all fds, sockets) of a process."""
    n = s = 0
    d = f"/proc/{pid}/fd"
    for name in os.listdir(d):
        n += 1
        try:
            if os.readlink(os.path.join(d, name)).startswith("socket:"):
                s += 1
        except OSError:
            pass
    return n, s


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def first_line(port, payload, timeout):
    """Sends `payload` on a fresh connection; the first line back (no CRLF)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(payload)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return data.split(b"\r\n")[0]
    finally:
        s.close()


def http_get(port, path="/r", close=True, timeout=2.0):
    """One GET; returns the status code or raises."""
    hdr = "Connection: close\r\n" if close else ""
    line = first_line(port, f"GET {path} HTTP/1.1\r\nHost: b\r\n{hdr}\r\n".encode(), timeout)
    return int(line.split(b" ")[1])


def wait_for(fn, secs, step=0.02):
    end = time.time() + secs
    while time.time() < end:
        try:
            if fn():
                return True
        except Exception:
            pass
        time.sleep(step)
    return False


def register_pid(pid):
    with open(PIDS_FILE, "a") as f:
        f.write(f"{pid}\n")


# -------------------------------------------------------------------- servers

SMALL = b"Hello, world\n"            # 13 bytes
LARGE = bytes((i * 7 + 3) % 251 for i in range(64 * 1024))


class Server:
    """gyre, nginx or the C ceiling in a temp prefix."""

    def __init__(self, kind, workers=1, events="", main="", http="", server="",
                 listen_opts="", conns=4096, nofile=20000, port=None):
        self.kind, self.workers_n = kind, workers
        self.port = port or free_port()
        self.prefix = tempfile.mkdtemp(prefix=f"{kind}-", dir=TMP)
        for d in ("conf", "logs", "html", "tmp"):
            os.makedirs(os.path.join(self.prefix, d), exist_ok=True)
        with open(os.path.join(self.prefix, "html/s.txt"), "wb") as f:
            f.write(SMALL)
        with open(os.path.join(self.prefix, "html/64k.bin"), "wb") as f:
            f.write(LARGE)
        self.events, self.main, self.http, self.server = events, main, http, server
        self.listen_opts, self.conns, self.nofile = listen_opts, conns, nofile
        self.proc = None

    def conf_text(self):
        # One text for both servers; nginx only adds what it needs to run
        # as root in a prefix (user, temp paths). open_file_cache is set
        # explicitly because the defaults differ (gyre: on, nginx: off).
        main = (f"worker_processes {self.workers_n};\nworker_rlimit_nofile {self.nofile};\n"
                f"daemon off;\nerror_log logs/error.log notice;\n{self.main}\n")
        http = ("access_log off;\nsendfile on;\ntcp_nodelay on;\n"
                "open_file_cache max=1000 inactive=20s;\nopen_file_cache_valid 1s;\n"
                f"{self.http}\n")
        if self.kind == "nginx":
            main = "user root;\npid logs/nginx.pid;\n" + main
            http += "".join(f"{t}_temp_path tmp/{t};\n" for t in
                            ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        else:
            main = "pid logs/gyre.pid;\n" + main
        return (f"{main}events {{\n worker_connections {self.conns};\n {self.events}\n}}\n"
                f"http {{\n{http}server {{\n listen 127.0.0.1:{self.port} {self.listen_opts};\n"
                f" root html;\n location = /r {{ return 200 \"ok\"; }}\n{self.server}\n}}\n}}\n")

    def write_conf(self):
        name = "nginx.conf" if self.kind == "nginx" else "gyre.conf"
        with open(os.path.join(self.prefix, "conf", name), "w") as f:
            f.write(self.conf_text())

    def cmd(self, *extra):
        if self.kind == "gyre":
            return [GYRE, "-p", self.prefix + "/", *extra]
        if self.kind == "nginx":
            return [NGINX, "-p", self.prefix + "/", "-e", "logs/error.log",
                    "-c", "conf/nginx.conf", *extra]
        return [os.path.join(TMP, "ceiling"), str(self.port)]

    def start(self):
        if self.kind != "ceiling":
            self.write_conf()
        out = open(os.path.join(self.prefix, "logs/stderr.log"), "ab")
        self.proc = subprocess.Popen(self.cmd(), stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=out, start_new_session=True)
        register_pid(self.proc.pid)
        SERVERS.append(self)
        want = 0 if self.kind == "ceiling" else self.workers_n
        ok = wait_for(lambda: len(self.workers()) >= want and http_get(self.port) == 200, 10)
        if not ok:
            raise RuntimeError(f"{self.kind} did not start; log:\n{self.log()}")
        return self

    def workers(self):
        if self.kind == "ceiling":
            return [self.proc.pid]
        return children(self.proc.pid)

    def log(self):
        t = ""
        for n in ("error.log", "stderr.log"):
            try:
                with open(os.path.join(self.prefix, "logs", n), errors="replace") as f:
                    t += f.read()
            except OSError:
                pass
        return t

    def signal(self, name):
        """`-s NAME` through the binary (gyre, nginx)."""
        return subprocess.run(self.cmd("-s", name), capture_output=True, timeout=10)

    def url(self, path="/r"):
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self):
        if not self.proc or self.proc.poll() is not None:
            return
        ws = self.workers()
        try:
            self.proc.terminate()
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        for w in ws:
            try:
                os.kill(w, signal.SIGKILL)
            except OSError:
                pass


def stop_all():
    for s in SERVERS:
        try:
            s.stop()
        except Exception:
            pass


atexit.register(stop_all)
if not os.environ.get("BENCH_TMP"):  # run directly, not from run.sh: clean up ourselves
    import shutil
    atexit.register(lambda: os.getpid() == _MAIN_PID and shutil.rmtree(TMP, ignore_errors=True))
_MAIN_PID = os.getpid()
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, lambda *a: sys.exit(130))


# ------------------------------------------------------------------------ wrk

def to_us(v):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", v)
    if not m:
        return float("nan")
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6, "m": 6e7}[m.group(2)]


def wrk(url, secs=SECS, conns=CONNS, close=False, latency=True, timeout=None, headers=()):
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{secs}s"]
    if latency:
        cmd.append("--latency")
    if close:
        cmd += ["-H", "Connection: close"]
    for h in headers:  # "Name: value"
        cmd += ["-H", h]
    cmd += ["--timeout", "5s", url]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True,
                         timeout=timeout or secs + 30).stdout
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = {"rps": 0.0, "reqs": 0, "errors": 0, "non2xx": 0, "p50": float("nan"),
         "p99": float("nan"), "raw": out,
         "client_cpu": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Requests/sec:"):
            r["rps"] = float(line.split()[1])
        elif re.match(r"\d+ requests in", line):
            r["reqs"] = int(line.split()[0])
        elif line.startswith("Socket errors:"):
            r["errors"] = sum(int(x) for x in re.findall(r"\d+", line))
            r["socket_errors"] = line.split(":", 1)[1].strip()
        elif line.startswith("Non-2xx"):
            r["non2xx"] = int(line.split()[-1])
        elif line.startswith("50%"):
            r["p50"] = to_us(line.split()[1])
        elif line.startswith("99%"):
            r["p99"] = to_us(line.split()[1])
    return r


AB_N = int(os.environ.get("BENCH_AB_N", "100000"))


def ab(url, n=AB_N, conns=CONNS):
    """`ab -n N -c C` (no keep-alive: one request per connection, as health
    checks and HTTP/1.0 clients do): req/s, p50/p99 ms, failed requests."""
    r = {"rps": float("nan"), "p50": float("nan"), "p99": float("nan"), "failed": 0}
    try:
        out = subprocess.run(["ab", "-q", "-n", str(n), "-c", str(conns), url],
                             capture_output=True, text=True, timeout=120).stdout
    except subprocess.TimeoutExpired:
        return r
    for line in out.splitlines():
        p = line.split()
        if line.startswith("Requests per second:"):
            r["rps"] = float(p[3])
        elif line.startswith("Failed requests:"):
            r["failed"] = int(p[2])
        elif len(p) == 2 and p[0] == "50%":
            r["p50"] = float(p[1])
        elif len(p) == 2 and p[0] == "99%":
            r["p99"] = float(p[1])
    return r


def measured_wrk(srv, url, **kw):
    ws = srv.workers()
    c0, v0 = cpu_secs(ws), sleeps(ws)
    r = wrk(url, **kw)
    n = max(r["reqs"], 1)
    r["cpu_us"] = (cpu_secs(ws) - c0) * 1e6 / n
    r["sleeps"] = (sleeps(ws) - v0) / n
    r["client_us"] = r["client_cpu"] * 1e6 / n
    return r


def sleeps(pids):
    """Voluntary context switches (times the process blocked, mostly in
    epoll_wait): each is a wake-up that whoever makes it ready pays for."""
    t = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        t += int(line.split()[1])
        except OSError:
            pass
    return t


SYSCALLS = ["accept4", "recvfrom", "read", "sendto", "sendmsg", "writev", "write", "sendfile64",
            "close", "shutdown", "epoll_ctl", "epoll_wait", "epoll_pwait", "setsockopt", "openat",
            "newfstatat", "statx", "newfstat", "pread64", "nanosleep", "clock_nanosleep"]


def perf_works():
    if not shutil.which("perf"):
        return False
    r = subprocess.run(["perf", "stat", "-x,", "-e", "syscalls:sys_enter_close", "true"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "not supported" not in r.stderr and "<not" not in r.stderr


_PERF = []


def syscall_count(srv, url, secs=STRACE_SECS, **kw):
    """Syscalls per request of the worker(s) over a short wrk run: counted by
    perf's syscall tracepoints (no slowdown) when they work, else strace."""
    if not _PERF:
        _PERF.append(perf_works())
    if not _PERF[0]:
        return strace_count(srv, url, secs, **kw)
    ws = srv.workers()
    names = [x for x in SYSCALLS if os.path.isdir(f"/sys/kernel/tracing/events/syscalls/sys_enter_{x}")]
    ev = ",".join(f"syscalls:sys_enter_{x}" for x in names) + ",raw_syscalls:sys_enter"
    cmd = ["perf", "stat", "-x,", "-e", ev, "-p", ",".join(str(w) for w in ws)]
    st = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    r = wrk(url, secs=secs, latency=False, **kw)
    st.send_signal(signal.SIGINT)
    try:
        err = st.communicate(timeout=20)[1]
    except subprocess.TimeoutExpired:
        st.kill()
        err = st.communicate()[1]
    calls, total = {}, 0
    for line in err.splitlines():
        p = line.split(",")
        if len(p) < 3 or not p[0].strip().isdigit():
            continue
        name = p[2]
        if name == "raw_syscalls:sys_enter":
            total = int(p[0])
        elif name.startswith("syscalls:sys_enter_"):
            calls[name[len("syscalls:sys_enter_"):]] = int(p[0])
    n = max(r["reqs"], 1)
    top = sorted(calls.items(), key=lambda kv: -kv[1])
    return total / n, ", ".join(f"{k} {v / n:.2f}" for k, v in top if v / n >= 0.01)


def strace_count(srv, url, secs=STRACE_SECS, **kw):
    """Syscalls per request of the worker(s) over a short wrk run under strace."""
    ws = srv.workers()
    out = os.path.join(TMP, f"strace-{srv.kind}-{time.time_ns()}.txt")
    cmd = ["strace", "-c", "-f", "-o", out]
    for w in ws:
        cmd += ["-p", str(w)]
    st = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.7)
    r = wrk(url, secs=secs, latency=False, **kw)
    st.send_signal(signal.SIGINT)
    try:
        st.wait(20)
    except subprocess.TimeoutExpired:
        st.kill()
        st.wait()
    calls, total = {}, 0
    with open(out) as f:
        for line in f:
            p = line.split()
            if len(p) >= 5 and p[0][0].isdigit() and p[-1] != "total":
                try:
                    calls[p[-1]] = int(p[3])
                except ValueError:
                    pass
            elif len(p) >= 4 and p[-1] == "total":
                total = int(p[3])
    n = max(r["reqs"], 1)
    top = sorted(calls.items(), key=lambda kv: -kv[1])
    return total / n, ", ".join(f"{k} {v / n:.2f}" for k, v in top if v / n >= 0.01)


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


# ---------------------------------------------------------------- fragments

def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) / 2**20
    load = open("/proc/loadavg").read().split()[:3]
    return {"nproc": os.cpu_count(), "model": model, "kernel": os.uname().release,
            "mem_gib": round(mem, 1), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "load": " ".join(load)}


def mline(m):
    return (f"{m['nproc']} × {m['model']}, {m['mem_gib']} GiB, Linux {m['kernel']}; "
            f"run {m['date']}, load average at start {m['load']}")


def save(section, md, data):
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"{section}.md"), "w") as f:
        f.write(md.rstrip() + "\n")
    with open(os.path.join(RESULTS, f"{section}.json"), "w") as f:
        json.dump(data, f, indent=1, default=str)
    report()


def fmt(x, nd=1):
    if x != x:
        return "–"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{nd}f}"


def table(head, rows):
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ------------------------------------------------------------------------ http

CASES = [("return 200", "/r"), ("13-byte file", "/s.txt"), ("64 KiB file", "/64k.bin")]
CG_SECS = int(os.environ.get("BENCH_CG_SECS", "5"))


def callgrind_total(out):
    with open(out) as f:
        for line in f:
            m = re.match(r"(?:summary|totals):\s+(\d+)", line)
            if m:
                return int(m.group(1))
    return 0


def callgrind_per_request(kind, path, close, headers=(), prepare=None, conns=CONNS, **conf):
    """User-space instructions per request of a single-process server
    (`master_process off`) under callgrind: wrk for CG_SECS, minus a run that
    only starts, answers the readiness probe and stops. Instruction counts
    do not depend on what else the machine is doing, unlike time. `conf`
    (http=, server=) adds to the configuration, `prepare(server)` writes
    the files it needs, `headers` go on wrk's requests. Work still in flight
    when wrk stops is counted but its requests are not: slow responses
    want few `conns`."""
    s = Server(kind, 1, main="master_process off;", **conf)
    if prepare:
        prepare(s)
    s.write_conf()

    def run(load):
        out = os.path.join(s.prefix, f"cg-{time.time_ns()}.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *s.cmd()]
        err = open(os.path.join(s.prefix, "logs/valgrind.log"), "ab")
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                             start_new_session=True)
        register_pid(p.pid)
        n = 0
        try:
            if not wait_for(lambda: http_get(s.port) == 200, 60):
                raise RuntimeError(f"{kind} did not start under valgrind")
            if load:
                r = wrk(s.url(path), secs=CG_SECS, conns=conns, latency=False, close=close,
                        headers=headers)
                n = r["reqs"]
        finally:
            p.send_signal(signal.SIGQUIT)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return callgrind_total(out), n

    base, _ = run(False)
    total, n = run(True)
    return (total - base) / max(n, 1)


def goal_for(case, conn):
    if conn.startswith("close"):
        return 1.1  # issue 16
    if case == "return 200":
        return 1.3
    if case == "13-byte file":
        return 2.0
    return 1.0


def sec_http():
    m = machine()
    log(f"== http: gyre vs nginx, wrk -t1 -c{CONNS} -d{SECS}s, {ROUNDS} rounds alternating")
    rows, data = [], []
    for workers in (1, 2):
        # Connection: close also with `listen … deferred` on both (the best
        # setting for one request per connection: TCP_DEFER_ACCEPT wakes the
        # server once per connection, with the request there).
        for close, deferred in ((False, False), (True, False), (True, True)):
            opts = "deferred" if deferred else ""
            g = Server("gyre", workers, listen_opts=opts).start()
            n = Server("nginx", workers, listen_opts=opts).start()
            for case, path in CASES:
                res = {"gyre": [], "nginx": []}
                for _ in range(ROUNDS):
                    for s in (g, n):
                        r = measured_wrk(s, s.url(path), close=close)
                        res[s.kind].append(r)
                        log(f"  {workers}w {'close' if close else 'keep-alive':10} {case:13} "
                            f"{s.kind:5} {r['rps']:10.0f} req/s p50 {fmt(r['p50'])} µs "
                            f"p99 {fmt(r['p99'])} µs cpu {r['cpu_us']:.2f} µs/req "
                            f"sleeps {r['sleeps']:.2f}/req wrk {r['client_us']:.2f} µs/req "
                            f"err {r['errors']} non2xx {r['non2xx']}")
                sc = {}
                for s in (g, n):
                    sc[s.kind] = syscall_count(s, s.url(path), close=close)
                    log(f"  syscalls {s.kind}: {sc[s.kind][0]:.2f}/req ({sc[s.kind][1]})")
                abr = {}
                if close and shutil.which("ab"):
                    for _ in range(ROUNDS):
                        for s in (g, n):
                            abr.setdefault(s.kind, []).append(ab(s.url(path)))
                    log(f"  ab -n {AB_N} -c {CONNS}: " + ", ".join(
                        f"{k} {med([x['rps'] for x in v]):.0f} req/s p50 {med([x['p50'] for x in v]):.0f} ms "
                        f"p99 {med([x['p99'] for x in v]):.0f} ms" for k, v in abr.items()))
                instr = {}
                if workers == 1 and not deferred and shutil.which("valgrind"):
                    for k in ("gyre", "nginx"):
                        instr[k] = callgrind_per_request(k, path, close)
                        log(f"  callgrind {k}: {instr[k]:,.0f} instructions/req")
                d = {"workers": workers, "case": case,
                     "conn": ("close, deferred" if deferred else "close") if close else "keep-alive"}
                for k in ("gyre", "nginx"):
                    rs = res[k]
                    d[k] = {"rps": med([r["rps"] for r in rs]), "p50": med([r["p50"] for r in rs]),
                            "p99": med([r["p99"] for r in rs]),
                            "cpu_us": med([r["cpu_us"] for r in rs]),
                            "sleeps": med([r["sleeps"] for r in rs]),
                            "client_us": med([r["client_us"] for r in rs]),
                            "ab": ({"rps": med([x["rps"] for x in abr[k]]),
                                    "p50": med([x["p50"] for x in abr[k]]),
                                    "p99": med([x["p99"] for x in abr[k]]),
                                    "failed": sum(x["failed"] for x in abr[k])} if k in abr else None),
                            "errors": sum(r["errors"] + r["non2xx"] for r in rs),
                            "sys": sc[k][0], "sys_top": sc[k][1], "instr": instr.get(k)}
                d["ratio_rps"] = d["gyre"]["rps"] / max(d["nginx"]["rps"], 1e-9)
                d["ratio_cpu"] = d["nginx"]["cpu_us"] / max(d["gyre"]["cpu_us"], 1e-9)
                d["ratio_p99"] = d["gyre"]["p99"] / max(d["nginx"]["p99"], 1e-9)
                data.append(d)
            g.stop()
            n.stop()
    save("http", http_md(m, data), {"machine": m, "rows": data})


def _epoll_share(top):
    m = re.search(r"epoll_p?wait ([\d.]+)", top)
    return float(m.group(1)) if m else 0.0


def http_md(m, data):
    rows = []
    for d in data:
        goal = goal_for(d["case"], d["conn"])
        small = d["case"] != "64 KiB file"
        ok_rps = d["ratio_rps"] >= goal
        ok_cpu = d["ratio_cpu"] >= goal
        nonwait = d["gyre"]["sys"] - _epoll_share(d["gyre"]["sys_top"])
        syscall_goal = (f" (goal ≤ 2 besides epoll waits: {nonwait:.2f} "
                        + ("✓" if nonwait <= 2.02 else "✗") + ")"
                        if small and d["conn"] == "keep-alive" else "")
        rows.append([
            f"{d['case']}, {d['conn']}, {d['workers']}w",
            f"{fmt(d['gyre']['rps'], 0)} / {fmt(d['nginx']['rps'], 0)}",
            f"**{d['ratio_rps']:.2f}×** {'✓' if ok_rps else '✗'} (≥ {goal})",
            f"{fmt(d['gyre']['p50'])} / {fmt(d['nginx']['p50'])}",
            f"{fmt(d['gyre']['p99'])} / {fmt(d['nginx']['p99'])} "
            f"{'✓' if d['ratio_p99'] <= 1.0 else '✗'}",
            f"{d['gyre']['cpu_us']:.2f} / {d['nginx']['cpu_us']:.2f}",
            f"**{d['ratio_cpu']:.2f}×** {'✓' if ok_cpu else '✗'}",
            f"{d['gyre']['sys']:.2f} / {d['nginx']['sys']:.2f}{syscall_goal}",
            f"{fmt(d['gyre'].get('sleeps', float('nan')), 2)} / {fmt(d['nginx'].get('sleeps', float('nan')), 2)}",
            f"{fmt(d['gyre'].get('client_us', float('nan')), 2)} / {fmt(d['nginx'].get('client_us', float('nan')), 2)}",
            f"{d['gyre']['errors']} / {d['nginx']['errors']}",
        ])
    head = ["case", "req/s gyre / nginx", "req/s ratio (goal)", "p50 µs", "p99 µs (goal: no worse)",
            "µs CPU/req", "CPU ratio nginx/gyre", "syscalls/req", "server sleeps/req",
            "wrk µs CPU/req", "errors"]
    abrows = [[f"{d['case']}, {d['conn']}, {d['workers']}w",
               f"{fmt(d['gyre']['ab']['rps'], 0)} / {fmt(d['nginx']['ab']['rps'], 0)}",
               f"**{d['gyre']['ab']['rps'] / max(d['nginx']['ab']['rps'], 1e-9):.2f}×**",
               f"{fmt(d['gyre']['ab']['p50'], 0)} / {fmt(d['nginx']['ab']['p50'], 0)}",
               f"{fmt(d['gyre']['ab']['p99'], 0)} / {fmt(d['nginx']['ab']['p99'], 0)}",
               f"{d['gyre']['ab']['failed']} / {d['nginx']['ab']['failed']}"]
              for d in data if d["gyre"].get("ab") and d["nginx"].get("ab")]
    detail = "\n".join(f"- {d['case']}, {d['conn']}, {d['workers']}w — gyre: {d['gyre']['sys_top']}; "
                       f"nginx: {d['nginx']['sys_top']}" for d in data)
    instr = "\n".join(
        f"| {d['case']}, {d['conn']} | {d['gyre']['instr']:,.0f} | {d['nginx']['instr']:,.0f} | "
        f"**{d['nginx']['instr'] / max(d['gyre']['instr'], 1):.2f}×** |"
        for d in data if d["gyre"].get("instr") and d["nginx"].get("instr"))
    if instr:
        instr = ("User-space instructions per request (callgrind, one process with "
                 f"`master_process off`, wrk {CG_SECS} s minus a start/stop run; the kernel's "
                 "share is not counted — it is the same syscalls for both):\n\n"
                 "| case | gyre | nginx | nginx/gyre |\n|---|---:|---:|---:|\n" + instr + "\n")
    md = f"""## HTTP: gyre vs nginx (`bench/run.sh http`)

{mline(m)}. gyre (release) and nginx {nginx_version()} with the same
configuration text (`worker_processes N`, `access_log off`, `sendfile on`,
`tcp_nodelay on`, `open_file_cache max=1000 inactive=20s` + `open_file_cache_valid
1s` on both because their defaults differ, keep-alive defaults, `worker_connections
4096`), both running at once, `wrk -t1 -c{CONNS} -d{SECS}s --latency`, alternating
gyre, nginx for {ROUNDS} rounds; medians. CPU is utime+stime of the worker(s) from
/proc per request; syscalls per request from one extra {STRACE_SECS} s run counted by
perf's syscall tracepoints (`perf stat -e syscalls:sys_enter_*`, which does not slow
the server down; strace does, and then finds requests already waiting that at full
speed have not arrived yet) or, without perf, `strace -c -f`. "Server sleeps" are the
workers' voluntary context switches per request (each is a wake-up that the other side
pays for in its own syscall); "wrk µs CPU/req" is the load generator's own CPU. wrk
takes about one of the two cores, so req/s with 2 workers is bounded by the machine,
and with `Connection: close` by wrk itself: read the ratios, CPU/req and syscalls/req.
"close, deferred" rows put `deferred` (TCP_DEFER_ACCEPT) on both servers' `listen`,
the best setting for one request per connection.
Goals (issue 6): req/s and CPU ≥ 1.3× nginx on `return 200`, ≥ 2× on the 13-byte
file, ≥ 1.0× on 64 KiB; p99 no worse; ≤ 2 syscalls per small keep-alive request.
Cells are gyre / nginx.

{table(head, rows)}

Syscalls per request ("besides epoll waits" also includes the few
calls that set up wrk's {CONNS} connections during the traced run, about 0.01/request):

{detail}

`ab -n {AB_N} -c {CONNS}` (no keep-alive), {ROUNDS} runs each, medians; p50/p99 in ms:

{table(["case", "req/s gyre / nginx", "ratio", "p50 ms", "p99 ms", "failed"], abrows)}

{instr}"""
    return md


def nginx_version():
    r = subprocess.run([NGINX, "-v"], capture_output=True, text=True)
    return (r.stderr.strip().split("/")[-1]) or "?"


# -------------------------------------------------------------------- ceiling

def sec_ceiling():
    m = machine()
    build_ceiling()
    log("== ceiling: minimal epoll server vs gyre vs nginx (1 worker, return 200)")
    data = []
    for close in (False, True):
        srvs = [Server("ceiling").start(), Server("gyre", 1).start(), Server("nginx", 1).start()]
        res = {s.kind: [] for s in srvs}
        for _ in range(ROUNDS):
            for s in srvs:
                r = measured_wrk(s, s.url("/r"), close=close)
                res[s.kind].append(r)
                log(f"  {'close' if close else 'keep-alive':10} {s.kind:7} {r['rps']:10.0f} req/s "
                    f"cpu {r['cpu_us']:.2f} µs/req p99 {fmt(r['p99'])} err {r['errors']}")
        d = {"conn": "close" if close else "keep-alive"}
        for s in srvs:
            rs = res[s.kind]
            sysc = syscall_count(s, s.url("/r"), close=close)
            d[s.kind] = {"rps": med([r["rps"] for r in rs]), "cpu_us": med([r["cpu_us"] for r in rs]),
                         "p99": med([r["p99"] for r in rs]), "sys": sysc[0], "sys_top": sysc[1]}
        data.append(d)
        for s in srvs:
            s.stop()
    rows = []
    for d in data:
        c = d["ceiling"]
        for k in ("ceiling", "gyre", "nginx"):
            x = d[k]
            rows.append([f"{d['conn']}: {k}", fmt(x["rps"], 0), f"{x['rps'] / c['rps']:.0%}",
                         f"{x['cpu_us']:.2f}", f"{c['cpu_us'] / x['cpu_us']:.0%}",
                         fmt(x["p99"]), f"{x['sys']:.2f}"])
    md = f"""## Ceiling: a minimal epoll server (`bench/run.sh ceiling`)

{mline(m)}. `bench/ceiling.c`: one process, edge-triggered epoll, no parsing, a
canned `200 ok` per read (closing when the read holds `Connection: close`), one recv
and one send per request. Same wrk load as the HTTP table (`return 200`, one worker
each, {ROUNDS} rounds alternating). "of ceiling" = req/s ÷ the ceiling's req/s;
"CPU efficiency" = ceiling's µs CPU/req ÷ the server's.

{table(["server", "req/s", "of ceiling", "µs CPU/req", "CPU efficiency", "p99 µs", "syscalls/req"], rows)}
"""
    save("ceiling", md, {"machine": m, "rows": data})


def build_ceiling():
    subprocess.run(["gcc", "-O2", "-o", os.path.join(TMP, "ceiling"),
                    os.path.join(BENCH, "ceiling.c")], check=True)


# --------------------------------------------------------------------- memory

def hold_client(port, n, path="/s.txt", request=True, batch=200, hold_secs=120,
                connect_timeout=5.0):
    """Starts this file as a client process holding n connections; returns
    (process, ok, failed) once they are set up."""
    p = subprocess.Popen([sys.executable, __file__, "_hold", str(port), str(n), path,
                          "1" if request else "0", str(batch), str(hold_secs), str(connect_timeout)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    register_pid(p.pid)
    line = p.stdout.readline().split()
    if not line or line[0] != "ready":
        return p, 0, n
    return p, int(line[1]), int(line[2])


def release(p):
    try:
        p.stdin.close()
        p.wait(30)
    except Exception:
        p.kill()
        p.wait()


def _hold_main(port, n, path, request, batch, hold_secs, connect_timeout):
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    socks, ok, failed = [], 0, 0
    req = f"GET {path} HTTP/1.1\r\nHost: b\r\n\r\n".encode()
    if not request:  # a flood: non-blocking connects, wait for them together
        sel = selectors.DefaultSelector()
        for _ in range(n):
            s = socket.socket()
            s.setblocking(False)
            if s.connect_ex(("127.0.0.1", port)) in (0, 115):  # EINPROGRESS
                sel.register(s, selectors.EVENT_WRITE)
                socks.append(s)
            else:
                failed += 1
                s.close()
        end = time.time() + connect_timeout
        while sel.get_map() and time.time() < end:
            for key, _ in sel.select(timeout=0.1):
                sel.unregister(key.fileobj)
                if key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    ok += 1
                else:
                    failed += 1
        failed += len(sel.get_map())
        n = 0
    for i in range(0, n, batch):
        group = []
        for _ in range(min(batch, n - i)):
            s = socket.socket()
            s.settimeout(connect_timeout)
            try:
                s.connect(("127.0.0.1", port))
                if request:
                    s.sendall(req)
                group.append(s)
            except OSError:
                failed += 1
                s.close()
        for s in group:
            if not request:
                socks.append(s)
                ok += 1
                continue
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    c = s.recv(65536)
                    if not c:
                        raise OSError("eof")
                    data += c
                head, body = data.split(b"\r\n\r\n", 1)
                clen = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                while len(body) < clen:
                    c = s.recv(65536)
                    if not c:
                        raise OSError("eof")
                    body += c
                socks.append(s)
                ok += 1
            except (OSError, AttributeError):
                failed += 1
                s.close()
    print(f"ready {ok} {failed}", flush=True)
    sel = selectors.DefaultSelector()
    sel.register(sys.stdin, selectors.EVENT_READ)
    sel.select(timeout=hold_secs)
    for s in socks:
        s.close()


def sec_memory():
    m = machine()
    N = int(os.environ.get("BENCH_IDLE_CONNS", "10000"))
    log(f"== memory: {N} idle keep-alive connections, worker RSS delta")
    data = {}
    for kind in ("gyre", "nginx", "gyre", "nginx"):
        s = Server(kind, 1, conns=N + 2000).start()
        w = s.workers()[0]
        time.sleep(0.3)
        r0 = rss_bytes(w)
        p, ok, failed = hold_client(s.port, N)
        time.sleep(0.5)
        r1 = rss_bytes(w)
        fds = fd_counts(w)[1]
        release(p)
        time.sleep(1.0)
        r2 = rss_bytes(w)
        s.stop()
        per = (r1 - r0) / max(ok, 1)
        log(f"  {kind}: {ok} held ({failed} failed), worker sockets {fds}, RSS {r0 / 2**20:.1f} → "
            f"{r1 / 2**20:.1f} MiB ({per:.0f} B/conn), after close {r2 / 2**20:.1f} MiB")
        data.setdefault(kind, []).append({"ok": ok, "failed": failed, "rss0": r0, "rss1": r1,
                                          "rss2": r2, "per_conn": per, "sockets": fds})
    rows = []
    for kind in ("gyre", "nginx"):
        rs = data[kind]
        rows.append([kind, " / ".join(str(r["ok"]) for r in rs),
                     " / ".join(f"{r['rss0'] / 2**20:.1f} → {r['rss1'] / 2**20:.1f}" for r in rs),
                     " / ".join(f"{r['per_conn']:.0f}" for r in rs),
                     " / ".join(f"{r['rss2'] / 2**20:.1f}" for r in rs)])
    g = med([r["per_conn"] for r in data["gyre"]])
    n = med([r["per_conn"] for r in data["nginx"]])
    data["ratio"] = n / g if g > 0 else float("nan")
    md = f"""## Memory per idle keep-alive connection (`bench/run.sh memory`)

{mline(m)}. One worker, `worker_connections {N + 2000}`, a fresh server per run
(two runs each, gyre and nginx alternating). A separate client process opens {N}
connections, sends one `GET /s.txt` on each, reads the response and holds the
connection open; worker VmRSS before and while holding.

{table(["server", "connections held", "worker RSS MiB (before → holding)", "bytes/conn", "RSS after the client closed, MiB"], rows)}

Median bytes per idle connection: gyre **{g:.0f}**, nginx **{n:.0f}** (nginx / gyre
= **{data['ratio']:.2f}×**). Idle RESP clients against redis: see the kv section.
"""
    save("memory", md, {"machine": m, **data})


# -------------------------------------------------------------------- balance

def sec_balance():
    m = machine()
    N = int(os.environ.get("BENCH_BALANCE_CONNS", "1000"))
    modes = [("accept_mutex on", "accept_mutex on;", ""),
             ("accept_mutex off (EPOLLEXCLUSIVE)", "accept_mutex off;", ""),
             ("listen … reuseport", "accept_mutex off;", "reuseport")]
    log(f"== balance: {N} keep-alive connections over 2 workers")
    rows, data = [], []
    for label, ev, lo in modes:
        for kind in ("gyre", "nginx"):
            s = Server(kind, 2, events=ev, listen_opts=lo, conns=4096).start()
            ws = s.workers()
            time.sleep(0.3)
            base = {w: fd_counts(w)[1] for w in ws}
            p, ok, failed = hold_client(s.port, N, path="/r", batch=50)
            time.sleep(0.3)
            split = [fd_counts(w)[1] - base[w] for w in ws]
            release(p)
            s.stop()
            log(f"  {label:34} {kind:5} held {ok} failed {failed}: per worker {split}")
            data.append({"mode": label, "server": kind, "ok": ok, "failed": failed, "split": split})
            tot = max(sum(split), 1)
            rows.append([label, kind, str(ok), " / ".join(str(x) for x in sorted(split, reverse=True)),
                         f"{max(split) / tot:.0%}"])
    md = f"""## Accept balance over 2 workers (`bench/run.sh balance`)

{mline(m)}. Two workers; a client opens {N} keep-alive connections in batches of
50 (one `GET /r` on each) and holds them; established sockets per worker counted
from /proc/PID/fd (minus each worker's sockets before).

{table(["accept mode", "server", "held", "connections per worker", "busiest worker's share"], rows)}
"""
    save("balance", md, {"machine": m, "rows": data})


# --------------------------------------------------------------------- faults

def recorder(rows):
    """A `record(name, ok, figures, server)` that logs a fault result and
    appends it to `rows` (ok: True/False, or a status such as "SKIPPED")."""
    def record(name, ok, figures, server="gyre"):
        status = "PASS" if ok is True else ("FAIL" if ok is False else ok)
        log(f"  [{status}] {name} ({server}): {figures}")
        rows.append({"name": name, "server": server, "status": status, "figures": figures})
    return record


def sec_faults():
    m = machine()
    build_ceiling()
    results = []
    record = recorder(results)

    quick = os.environ.get("BENCH_FAULTS_QUICK") == "1"
    for f in (fault_kill9, fault_reload, fault_quit, fault_slowloris, fault_flood):
        try:
            f(record)
        except Exception as e:  # a harness failure is reported, not hidden
            record(f.__name__, False, f"harness error: {e!r}")
    if quick:
        record("1,000,000 connections opened and closed", "SKIPPED", "BENCH_FAULTS_QUICK=1")
    else:
        try:
            fault_churn(record)
        except Exception as e:
            record("churn", False, f"harness error: {e!r}")
    try:
        kv_fault_kill9(record)
    except Exception as e:
        record("kill -9 of the kv process", False, f"harness error: {e!r}")
    fuzz_row(record)
    save("faults", faults_md(m, results), {"machine": m, "rows": results})


def fuzz_row(record):
    """The fuzzing row of faults: a summary of the last `bench/run.sh fuzz`."""
    p = os.path.join(RESULTS, "fuzz.json")
    if not os.path.exists(p):
        record("fuzzing (cargo fuzz)", "SKIPPED", "not run yet: `bench/run.sh fuzz`")
        return
    j = json.load(open(p))
    crashes = sum(len(r["crashes"]) for r in j["rows"])
    figures = "; ".join(f"{r['target']} {r['runs']:,} runs" for r in j["rows"])
    record("fuzzing (cargo fuzz)", crashes == 0,
           f"{j['secs']} s per target, {crashes} crashes ({figures}; {j['machine']['date']}, "
           f"see Fuzzing)")


def faults_md(m, results, note=""):
    rows = [[r["name"], r["server"], f"**{r['status']}**", r["figures"]] for r in results]
    return f"""## Faults (`bench/run.sh faults`)

{mline(m)}. Each test on a fresh server; nginx runs the same test where that
says something about gyre's figures (nginx's rows are comparisons: PASS/FAIL uses
the same criteria).{note}

{table(["test", "server", "result", "figures"], rows)}
"""


def sec_faults_kv():
    """Re-runs only the kv kill -9 row and splices it into faults.json/md
    (`bench/run.sh faults-kv`), so the row can be refreshed without the
    ~5 minutes of the other fault tests."""
    p = os.path.join(RESULTS, "faults.json")
    j = json.load(open(p)) if os.path.exists(p) else {"machine": machine(), "rows": []}
    new = []
    kv_fault_kill9(recorder(new))
    rows = [r for r in j["rows"] if not r["name"].startswith("kill -9 of the kv process")]
    at = next((i for i, r in enumerate(rows) if r["name"].startswith("fuzzing")), len(rows))
    rows[at:at] = new
    j["rows"] = rows
    mk = machine()
    j["kv_row_run"] = mk["date"]
    save("faults", faults_md(j["machine"], rows, f" The kv kill -9 row was re-run alone "
                             f"(`bench/run.sh faults-kv`) on {mk['date']}."), j)


def fault_kill9(record):
    """kill -9 of the only worker under wrk load."""
    for kind in ("gyre", "nginx"):
        s = Server(kind, 1).start()
        old = s.workers()[0]
        wp = subprocess.Popen(["wrk", "-t1", f"-c{CONNS}", "-d6s", "--timeout", "5s", s.url("/r")],
                              stdout=subprocess.PIPE, text=True)
        time.sleep(2)
        t0 = time.time()
        os.kill(old, signal.SIGKILL)
        served = wait_for(lambda: any(w != old for w in s.workers()) and http_get(s.port) == 200,
                          5, step=0.002)
        dt = (time.time() - t0) * 1000
        out = wp.communicate(timeout=30)[0]
        errs = re.search(r"Socket errors:(.*)", out)
        non2 = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        reqs = re.search(r"(\d+) requests in", out)
        nerr = sum(int(x) for x in re.findall(r"\d+", errs.group(1))) if errs else 0
        nerr += int(non2.group(1)) if non2 else 0
        ok = served and dt < 1000 and nerr <= 2 * CONNS
        record("kill -9 of the worker under load (1 worker, wrk -c50)", ok,
               f"replacement served after {dt:.0f} ms; wrk {reqs.group(1) if reqs else '?'} requests, "
               f"{nerr} failed ({errs.group(1).strip() if errs else 'no socket errors'}); "
               f"criteria: served < 1 s, failures ≤ the {CONNS} connections open at the kill × 2", kind)
        s.stop()


def fault_reload(record):
    for close in (False, True):
        for kind in ("gyre", "nginx"):
            _reload_one(record, kind, close)


def _reload_one(record, kind, close):
    if True:
        s = Server(kind, 2).start()
        hdr = ["-H", "Connection: close"] if close else []
        wp = subprocess.Popen(["wrk", "-t1", f"-c{CONNS}", "-d12s", "--timeout", "5s", *hdr,
                               s.url("/r")], stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        bad = 0
        for _ in range(10):
            if s.signal("reload").returncode != 0:
                bad += 1
            time.sleep(1)
        out = wp.communicate(timeout=30)[0]
        errs = re.search(r"Socket errors:(.*)", out)
        non2 = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        reqs = re.search(r"(\d+) requests in", out)
        nerr = (sum(int(x) for x in re.findall(r"\d+", errs.group(1))) if errs else 0) + \
            (int(non2.group(1)) if non2 else 0)
        time.sleep(1)
        nworkers = len(s.workers())
        record(f"`-s reload` every second for 10 s under wrk load (2 workers, "
               f"{'Connection: close' if close else 'keep-alive'})", nerr == 0 and bad == 0,
               f"{reqs.group(1) if reqs else '?'} requests, {nerr} failed "
               f"({errs.group(1).strip() if errs else 'no socket errors'}"
               f"{', non-2xx ' + non2.group(1) if non2 else ''}); {bad} failed `-s reload`; "
               f"{nworkers} workers after", kind)
        s.stop()


def fault_quit(record):
    N, SIZE = 100, 4 * 2**20
    for kind in ("gyre", "nginx"):
        s = Server(kind, 1).start()
        with open(os.path.join(s.prefix, "html/big.bin"), "wb") as f:
            f.write(bytes(i % 253 for i in range(SIZE)))
        p = subprocess.Popen([sys.executable, __file__, "_slowget", str(s.port), str(N), str(SIZE)],
                             stdout=subprocess.PIPE, text=True)
        register_pid(p.pid)
        line = p.stdout.readline()  # "started S": every download has its first bytes
        t_quit = float(line.split()[1]) if len(line.split()) > 1 else float("nan")
        q = s.signal("quit")
        refused = wait_for(lambda: not _connects(s.port), 3)
        out = p.communicate(timeout=120)[0].split()
        done, bad, secs = int(out[1]), int(out[2]), float(out[3])
        exited = wait_for(lambda: s.proc.poll() is not None, 10)
        record(f"`-s quit` with {N} slow in-flight 4 MiB downloads", done == N and bad == 0
               and q.returncode == 0 and exited,
               f"{done}/{N} complete and intact, {bad} short or broken, last finished "
               f"{secs:.1f} s after the client started (quit sent at {t_quit:.1f} s, once all had "
               f"their first bytes; ~1 MiB/s each); new connections refused after quit: "
               f"{'yes' if refused else 'no'}; master exited: {'yes' if exited else 'no'}", kind)
        s.stop()


def _connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _slowget_main(port, n, size):
    """n downloads of /big.bin, each read at ~1 MiB/s with a small receive
    buffer; prints 'started' once every one has its first bytes, then
    'done OK BAD SECS'."""
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    t0 = time.time()
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
        socks.append(s)
    got = {s: s.recv(4096) for s in socks}
    print(f"started {time.time() - t0:.2f}", flush=True)
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    done = bad = 0
    end = time.time() + 100
    rate = 1 << 20  # bytes per second per connection
    while sel.get_map() and time.time() < end:
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            try:
                c = s.recv(rate // 50)
            except BlockingIOError:
                continue
            except OSError:
                c = b""
            if c:
                got[s] += c
                continue
            sel.unregister(s)
            data = got[s]
            i = data.find(b"\r\n\r\n")
            body = data[i + 4:] if i >= 0 else b""
            if len(body) == size and body[:253] == bytes(range(253)):
                done += 1
            else:
                bad += 1
            s.close()
        time.sleep(0.02)  # ~50 reads per second of rate/50 bytes: ~1 MiB/s each
    bad += len(sel.get_map())
    print(f"done {done} {bad} {time.time() - t0:.2f}", flush=True)


def _slowloris_main(port, n, interval, limit):
    """n connections sending a request header one byte every `interval`
    seconds; prints 'ready', then when all are closed (or `limit` s) 'closed
    N MAXSECS MEDSECS STILL_OPEN'."""
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    hdr = b"GET /r HTTP/1.1\r\nHost: b\r\nX-Slow: " + b"a" * 4000
    socks = {}
    for _ in range(n):
        s = socket.socket()
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        socks[s] = [time.time(), 0]
    print("ready", flush=True)
    closed = []
    end = time.time() + limit
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    nxt = time.time()
    while socks and time.time() < end:
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                c = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                c = b""
            if not c:
                closed.append(time.time() - socks.pop(s)[0])
                sel.unregister(s)
                s.close()
        if time.time() >= nxt:
            nxt += interval
            for s, st in list(socks.items()):
                try:
                    s.send(hdr[st[1]:st[1] + 1])
                    st[1] += 1
                except OSError:
                    pass
    closed.sort()
    print(f"closed {len(closed)} {closed[-1] if closed else 0:.2f} "
          f"{closed[len(closed) // 2] if closed else 0:.2f} {len(socks)}", flush=True)


def fault_slowloris(record):
    N, TIMEOUT = 2000, 5
    for kind in ("gyre", "nginx"):
        s = Server(kind, 1, http=f"client_header_timeout {TIMEOUT}s;", conns=4096).start()
        base = wrk(s.url("/r"), secs=5, latency=False)
        p = subprocess.Popen([sys.executable, __file__, "_slowloris", str(s.port), str(N), "1", "20"],
                             stdout=subprocess.PIPE, text=True)
        register_pid(p.pid)
        p.stdout.readline()
        w = s.workers()[0]
        under = wrk(s.url("/r"), secs=5, latency=False)
        out = p.communicate(timeout=60)[0].split()
        nclosed, mx, md_, still = int(out[1]), float(out[2]), float(out[3]), int(out[4])
        ratio = under["rps"] / max(base["rps"], 1)
        ok = ratio >= 0.8 and nclosed == N and mx <= TIMEOUT + 2 and under["errors"] == 0
        record(f"slowloris: {N} connections trickling a header byte/s, wrk alongside",
               ok, f"wrk {under['rps']:.0f} req/s vs {base['rps']:.0f} without = {ratio:.2f}× "
               f"(criterion ≥ 0.8×, {under['errors']} wrk errors); {nclosed}/{N} closed by the server, "
               f"median {md_:.1f} s, last {mx:.1f} s after connect (client_header_timeout {TIMEOUT}s); "
               f"{still} still open at 20 s", kind)
        s.stop()


def fault_flood(record):
    """Connection flood past worker_rlimit_nofile 256."""
    N = 2000
    for kind in ("gyre", "nginx"):
        _flood_one(record, kind, N)


def _flood_one(record, kind, N):
    s = Server(kind, 1, nofile=256, conns=1024).start()
    w = s.workers()[0]
    c0 = cpu_secs([w])
    t0 = time.time()
    p, held, failed = hold_client(s.port, N, path="/r", request=False, connect_timeout=3.0,
                                  hold_secs=30)
    time.sleep(5)
    served_during = _try_get(s.port)
    cpu = cpu_secs([w]) - c0
    wall = time.time() - t0
    socks = fd_counts(w)[1]
    t_rel = time.time()
    release(p)
    recovered = wait_for(lambda: http_get(s.port) == 200, 10)
    rec_ms = (time.time() - t_rel) * 1000
    lg = s.log()
    emfile = len(re.findall(r"accept4?\(\) failed.*(Too many open files|os error 24)", lg))
    alive_w = alive(w)
    ok = cpu / wall < 0.2 and emfile > 0 and recovered and alive_w
    record(f"connection flood: {N} connections against worker_rlimit_nofile 256", ok,
           f"{held} client connects completed ({failed} not), worker held {socks} sockets; worker CPU "
           f"{cpu:.2f} s over {wall:.1f} s of flood ({cpu / wall:.0%} of a core; criterion < 20%); "
           f"{emfile} EMFILE lines logged; a GET during the flood: {served_during}; served again "
           f"{rec_ms:.0f} ms after the flood ended: {'yes' if recovered else 'no'}; worker "
           f"survived: {'yes' if alive_w else 'no'}", kind)
    s.stop()


def _try_get(port):
    try:
        return f"status {http_get(port, timeout=1.0)}"
    except Exception as e:
        return f"failed ({type(e).__name__})"


def fault_churn(record):
    """As many connections as fit in CHURN_SECS, each opened and closed after
    one request (wrk with Connection: close): worker fds and RSS must not grow."""
    s = Server("gyre", 1).start()
    w = s.workers()[0]
    wrk(s.url("/r"), secs=3, close=True, latency=False)  # warm-up
    time.sleep(1)
    f0, r0 = fd_counts(w)[0], rss_bytes(w)
    total, errors, t0 = 0, 0, time.time()
    while total < 1_000_000 and time.time() - t0 < CHURN_SECS:
        left = min(10, CHURN_SECS - (time.time() - t0))
        if left < 1:
            break
        r = wrk(s.url("/r"), secs=int(left), close=True, latency=False, conns=CONNS)
        total += r["reqs"]
        errors += r["errors"] + r["non2xx"]
    secs = time.time() - t0
    time.sleep(2)
    f1, r1 = fd_counts(w)[0], rss_bytes(w)
    ok = f1 <= f0 and r1 - r0 <= 512 * 1024 and alive(w)
    record("connections opened and closed (wrk, Connection: close)", ok,
           f"{total:,} connections in {secs:.0f} s ({total / secs:,.0f}/s; bounded at {CHURN_SECS} s"
           f"{', the 1,000,000 did not fit' if total < 1_000_000 else ''}), {errors} errors; worker fds "
           f"{f0} → {f1}; RSS {r0 / 1024:.0f} → {r1 / 1024:.0f} KiB ({(r1 - r0) / 1024:+.0f} KiB; "
           f"criterion: fds equal, RSS growth ≤ 512 KiB)")
    s.stop()


# ----------------------------------------------------------------------- core

def sec_core():
    m = machine()
    parts = []
    for b in ("timers", "time_events", "echo"):
        log(f"== core: cargo bench -p gyre-core --bench {b}")
        r = subprocess.run(["cargo", "bench", "-p", "gyre-core", "--bench", b], cwd=ROOT,
                           capture_output=True, text=True, timeout=1800)
        out = r.stdout.strip()
        log(out)
        if r.returncode != 0:
            out += f"\n(cargo bench exited {r.returncode}: {r.stderr.strip()[-500:]})"
        parts.append(f"### `cargo bench -p gyre-core --bench {b}`\n\n```text\n{out}\n```\n")
    md = f"## Core (`bench/run.sh core`)\n\n{mline(m)}. The benches' own output.\n\n" + "\n".join(parts)
    save("core", md, {"machine": m})


# ------------------------------------------------------------------------- kv

KV_GOALS = {1: 1.1, 16: 1.3}


class Redis:
    """redis-server from Debian as a child (no persistence), in a temp dir
    named on its command line (set-proc-title no) so run.sh's trap finds it."""

    def __init__(self, port=None):
        self.kind = "redis"
        self.port = port or free_port()
        self.prefix = tempfile.mkdtemp(prefix="redis-", dir=TMP)
        self.proc = None

    def start(self):
        out = open(os.path.join(self.prefix, "redis.log"), "ab")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--maxclients", "20000",
             "--set-proc-title", "no", "--dir", self.prefix],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
        register_pid(self.proc.pid)
        SERVERS.append(self)
        if not wait_for(lambda: resp_cmd(self.port, b"PING") == b"+PONG", 10):
            raise RuntimeError("redis-server did not start")
        return self

    def kv_pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def gyre_kv(kv_extra=""):
    """gyre with one worker and a kv block; .kv_port, .kv_pid()."""
    kp = free_port()
    s = Server("gyre", 1, conns=20000, nofile=20000,
               main=f"kv {{\n listen 127.0.0.1:{kp};\n hz 10;\n maxclients 20000;\n{kv_extra}\n}}")
    s.kv_port = kp
    s.start()
    if not wait_for(lambda: resp_cmd(kp, b"PING") == b"+PONG", 10):
        raise RuntimeError(f"gyre kv did not answer PING; log:\n{s.log()}")
    return s


def kv_pids(srv):
    """The kv process pids the master logged, oldest first."""
    return [int(x) for x in re.findall(r"start kv process (\d+)", srv.log())]


def kv_proc(srv):
    """(port, pid of the serving process) of gyre's kv process or redis-server."""
    if srv.kind == "redis":
        return srv.port, srv.proc.pid
    return srv.kv_port, kv_pids(srv)[-1]


def resp_cmd(port, *args, timeout=1.0):
    """One command on a fresh connection; the first reply line (no CRLF)."""
    return first_line(port, resp_enc(*args), timeout)


def resp_enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def redis_benchmark(port, test, n, pipeline, conns=50, timeout=120):
    """{TEST: req/s} from one `redis-benchmark -q` run (bounded by timeout:
    redis-benchmark spins forever against a dead port)."""
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", test, "-c", str(conns),
           "-n", str(n), "-P", str(pipeline), "-q"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout
    except subprocess.TimeoutExpired:
        return {}
    res = {}
    for part in re.split(r"[\r\n]", out):
        m = re.match(r"\s*([A-Z_]+): ([\d.]+) requests per second", part)
        if m:
            res[m.group(1)] = float(m.group(2))
    return res


def sec_kv():
    m = machine()
    data = {"machine": m}
    log("== kv: gyre kv process vs redis-server " + redis_version())
    data["throughput"] = kv_throughput()
    data["memory"] = kv_memory()
    data["expiry"] = kv_expiry()
    res = []
    kv_fault_kill9(lambda name, ok, fig, server="gyre": res.append(
        {"name": name, "server": server, "status": "PASS" if ok else "FAIL", "figures": fig}))
    data["faults"] = res
    save("kv", kv_md(data), data)


# ------------------------------------------------------------------ kv-fair

FAIR_KEYS = 200_000  # SETs per pipeline, sent 3 times


def _kvbulk_main(port):
    """One client pipelines 3 × FAIR_KEYS SETs as fast as the server takes
    them, reading the replies in a thread; prints the seconds it took."""
    import threading
    s = socket.create_connection(("127.0.0.1", port))
    cmd = b"".join(resp_enc(b"SET", b"k%d" % i, b"valuevalue") for i in range(FAIR_KEYS))
    need = 3 * FAIR_KEYS * len(b"+OK\r\n")
    t0 = time.time()

    def reader():
        got = 0
        while got < need:
            d = s.recv(1 << 20)
            if not d:
                break
            got += len(d)
    t = threading.Thread(target=reader)
    t.start()
    for _ in range(3):
        s.sendall(cmd)
    t.join(60)
    print(f"{time.time() - t0:.3f}", flush=True)


def _reply_complete(data):
    """A whole RESP reply to GET: a line, or a bulk header and its payload."""
    if not data.endswith(b"\r\n"):
        return False
    if data.startswith(b"$") and not data.startswith(b"$-1"):
        return data.count(b"\r\n") >= 2
    return True


def kv_fair_once(srv):
    """GET round trips on one connection (one per ms) while another process
    bulk-loads: (p50, p99, max) in ms, GETs done, bulk seconds."""
    port, _ = kv_proc(srv)
    g = socket.create_connection(("127.0.0.1", port), timeout=5)
    g.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    p = subprocess.Popen([sys.executable, __file__, "_kvbulk", str(port)],
                         stdout=subprocess.PIPE, text=True)
    register_pid(p.pid)
    lat = []
    time.sleep(0.2)  # the bulk client builds its pipeline first
    while p.poll() is None:
        t = time.perf_counter()
        g.sendall(b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n")
        data = b""
        while not _reply_complete(data):
            c = g.recv(4096)
            if not c:
                break
            data += c
        lat.append((time.perf_counter() - t) * 1e3)
        time.sleep(0.001)
    bulk = float((p.communicate()[0] or "nan").strip() or "nan")
    g.close()
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(len(lat) * q))] if lat else float("nan")
    return pick(0.5), pick(0.99), (lat[-1] if lat else float("nan")), len(lat), bulk


def sec_kv_persist():
    """RDB persistence side by side (bench/kv_persist.py does the work)."""
    m = machine()
    keys = int(os.environ.get("BENCH_PERSIST_KEYS", "1000000"))
    log(f"== kv-persist: SAVE/load of {keys:,} strings and hashes, BGSAVE under a SET load")
    out = subprocess.run([sys.executable, os.path.join(BENCH, "kv_persist.py"), GYRE, str(keys), "100"],
                         capture_output=True, text=True, timeout=1800)
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    for l in lines:
        log("  " + l)
    md = f"""## KV persistence (`bench/run.sh kv-persist`)

{mline(m)}. gyre's kv process and redis-server {redis_version()} in turn, one run
(`bench/kv_persist.py`): SAVE time, dump size and load time of {keys:,} strings of
100 B and of {keys:,} hashes of 3 fields; then BGSAVE while `redis-benchmark -t set
-P 16` overwrites random keys of the 1e6-string dataset: extra memory over the RSS
before the save (redis: the server's RSS plus the fork child's private dirty pages,
i.e. copy-on-write), and the round trips of a GET sent every millisecond on another
connection, during the save and before it under the same load (3 rounds, gyre and
redis back to back); SET rate and server CPU per SET (utime + stime from /proc) with
`appendonly yes` and `appendfsync everysec` / `always`; BGREWRITEAOF time.

""" + "\n".join(f"- {l}" for l in lines) + "\n"
    save("kv_persist", md, {"machine": m, "lines": lines, "stderr": out.stderr[-2000:]})


def sec_kv_cache():
    """The kv process as a cache, side by side (bench/kv_cache.py does the work)."""
    m = machine()
    scale = os.environ.get("BENCH_KV_CACHE_SCALE", "1.0")
    log(f"== kv-cache: pub/sub fan-out, MULTI/EXEC, eviction (scale {scale})")
    out = subprocess.run([sys.executable, os.path.join(BENCH, "kv_cache.py"), GYRE, scale],
                         capture_output=True, text=True, timeout=3600)
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    for l in lines:
        log("  " + l)
    if out.returncode != 0:
        log(f"  kv_cache.py failed ({out.returncode}): {out.stderr[-2000:]}")
    smoke = ("" if float(scale) >= 1 else
             f" **A smoke run** (counts x{scale}, maxmemory {max(1, int(50 * float(scale)))} MiB instead of 50,"
             " on a shared machine): the figures say the paths work and give an order of magnitude,"
             " not a verdict on the goals.")
    md = f"""## KV as a cache (`bench/run.sh kv-cache`)

{mline(m)}. gyre's kv process and redis-server {redis_version()} in turn, one run
(`bench/kv_cache.py`, scale {scale}): pub/sub fan-out (1 publisher; 1 channel with
many subscribers, and 100 channels x 10 subscribers), MULTI / SET x10 / EXEC pipelined
on 4 connections, and maxmemory eviction (allkeys-lru, allkeys-lfu) with Zipf GETs and
a SET on every miss over about twice maxmemory of data. The clients are one Python
process: the rates are theirs as much as the servers'; the CPU figures are the
server's own (utime + stime from /proc per delivered message, transaction or
operation) and are the comparable ones.{smoke}

""" + "\n".join(f"- {l}" for l in lines) + "\n"
    save("kv_cache", md, {"machine": m, "lines": lines, "stderr": out.stderr[-2000:]})


def sec_kv_fair():
    m = machine()
    log(f"== kv-fair: GET latency while another client pipelines 3 × {FAIR_KEYS:,} SETs")
    g, r = gyre_kv(), Redis().start()
    res = {"gyre": [], "redis": []}
    for rnd in range(ROUNDS):
        for srv in (g, r):
            x = kv_fair_once(srv)
            res[srv.kind].append(x)
            log(f"  round {rnd + 1} {srv.kind:5} GET p50 {x[0]:.2f} p99 {x[1]:.2f} max {x[2]:.2f} ms "
                f"({x[3]} GETs), bulk {x[4]:.2f} s")
    g.stop()
    r.stop()
    rows = []
    for k in ("gyre", "redis"):
        xs = res[k]
        rows.append([k, f"{med([x[0] for x in xs]):.2f}", f"{med([x[1] for x in xs]):.2f}",
                     f"{med([x[2] for x in xs]):.2f}", f"{med([x[4] for x in xs]):.2f}",
                     " · ".join(f"{x[1]:.2f}/{x[2]:.1f}" for x in xs)])
    md = f"""## KV fairness under a bulk load (`bench/run.sh kv-fair`)

{mline(m)}. gyre's kv process and redis-server {redis_version()} in turn, {ROUNDS} rounds:
one client (its own process) pipelines 3 × {FAIR_KEYS:,} `SET`s as fast as the server
takes them while another connection sends a `GET` every millisecond; medians of the
GET round-trip times and of the bulk load's duration. gyre reads a client once per
turn (16 KiB) and lets the others go before reading more, as Redis does.

{table(["server", "GET p50 ms", "GET p99 ms", "GET max ms", "bulk s", "every round p99/max"], rows)}
"""
    save("kv_fair", md, {"machine": m, "rounds": res})


def redis_version():
    r = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"v=([\d.]+)", r)
    return m.group(1) if m else "?"


def kv_throughput():
    rows = []
    for pipeline, n in ((1, int(os.environ.get("BENCH_KV_N", "200000"))),
                        (16, int(os.environ.get("BENCH_KV_NP", "2000000")))):
        g, r = gyre_kv(), Redis().start()
        res = {}  # (test, kind) -> [(rps, cpu_us)]
        for rnd in range(ROUNDS):
            for test in ("ping", "set", "get"):
                for srv in (g, r):
                    port, pid = kv_proc(srv)
                    c0 = cpu_secs([pid])
                    t0 = time.time()
                    out = redis_benchmark(port, test, n, pipeline)
                    cpu = cpu_secs([pid]) - c0
                    wall = time.time() - t0
                    for name, rps in out.items():
                        # CPU is shared between the names of one run (PING_INLINE
                        # and PING_MBULK): split by their share of the requests.
                        cpu_us = cpu * 1e6 / (n * len(out))
                        res.setdefault((name, srv.kind), []).append((rps, cpu_us))
                        log(f"  -P {pipeline:2} round {rnd + 1} {name:11} {srv.kind:5} {rps:10.0f} req/s "
                            f"cpu {cpu_us:.2f} µs/req (run {wall:.1f} s)")
                    if not out:
                        log(f"  -P {pipeline} {test} {srv.kind}: redis-benchmark gave no result")
        for name in ("PING_INLINE", "PING_MBULK", "SET", "GET"):
            d = {"pipeline": pipeline, "test": name, "n": n}
            for k in ("gyre", "redis"):
                xs = res.get((name, k), [])
                d[k] = {"rps": med([x[0] for x in xs]), "cpu_us": med([x[1] for x in xs]),
                        "runs": [round(x[0]) for x in xs]}
            d["ratio_rps"] = d["gyre"]["rps"] / max(d["redis"]["rps"], 1e-9)
            d["ratio_cpu"] = d["redis"]["cpu_us"] / max(d["gyre"]["cpu_us"], 1e-9)
            rows.append(d)
        g.stop()
        r.stop()
    return rows


def kv_hold(port, n):
    p = subprocess.Popen([sys.executable, __file__, "_kvhold", str(port), str(n)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    register_pid(p.pid)
    return p


def _kvhold_main(port, n):
    """Connects n sockets (prints 'connected OK FAILED'); on a stdin line sends
    one PING on each and reads +PONG (prints 'pinged OK'); exits on stdin EOF."""
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    socks, failed = [], 0
    for _ in range(n):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            socks.append(s)
        except OSError:
            failed += 1
            s.close()
    # redis accepts asynchronously: make sure every connection is registered.
    time.sleep(0.5)
    print(f"connected {len(socks)} {failed}", flush=True)
    if sys.stdin.readline():
        ok = 0
        for i in range(0, len(socks), 200):
            group = socks[i:i + 200]
            for s in group:
                s.sendall(b"PING\r\n")
            for s in group:
                try:
                    d = b""
                    while not d.endswith(b"\r\n"):
                        c = s.recv(64)
                        if not c:
                            break
                        d += c
                    ok += d == b"+PONG\r\n"
                except OSError:
                    pass
        print(f"pinged {ok}", flush=True)
        sys.stdin.readline()
    for s in socks:
        s.close()


def kv_memory():
    N = int(os.environ.get("BENCH_KV_IDLE", "10000"))
    log(f"== kv memory: {N} idle clients")
    out = {}
    for kind in ("gyre", "redis", "gyre", "redis"):
        srv = gyre_kv() if kind == "gyre" else Redis().start()
        port, pid = kv_proc(srv)
        time.sleep(0.3)
        r0 = rss_bytes(pid)
        p = kv_hold(port, N)
        line = p.stdout.readline().split()
        ok = int(line[1]) if len(line) > 2 else 0
        time.sleep(0.5)
        r1 = rss_bytes(pid)
        p.stdin.write("ping\n")
        p.stdin.flush()
        line = p.stdout.readline().split()
        pinged = int(line[1]) if len(line) > 1 else 0
        time.sleep(0.5)
        r2 = rss_bytes(pid)
        release(p)
        srv.stop()
        d = {"clients": ok, "pinged": pinged, "rss0": r0, "rss1": r1, "rss2": r2,
             "per_connected": (r1 - r0) / max(ok, 1), "per_after_cmd": (r2 - r0) / max(ok, 1)}
        log(f"  {kind}: {ok} connected, {pinged} PONGs; RSS {r0 / 2**20:.1f} → {r1 / 2**20:.1f} → "
            f"{r2 / 2**20:.1f} MiB: {d['per_connected']:.0f} B/client connected, "
            f"{d['per_after_cmd']:.0f} B after one command")
        out.setdefault(kind, []).append(d)
    return {"n": N, **out}


def kv_expiry():
    KEYS = int(os.environ.get("BENCH_KV_KEYS", "1000000"))
    out = {}
    for kind in ("gyre", "redis"):
        srv = gyre_kv() if kind == "gyre" else Redis().start()
        port, pid = kv_proc(srv)
        log(f"== kv expiry: {kind}, {KEYS} keys with PX 1000")
        out[kind] = _expiry_one(port, pid, KEYS)
        log(f"  {kind}: {out[kind]}")
        srv.stop()
    return out


def _read_n_replies(s, n, buf):
    """Reads n simple-string/integer replies; returns the leftover bytes."""
    while buf.count(b"\r\n") < n:
        c = s.recv(1 << 20)
        if not c:
            raise OSError("eof")
        buf += c
    i = 0
    for _ in range(n):
        i = buf.index(b"\r\n", i) + 2
    return buf[i:]


def _expiry_one(port, pid, keys):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(resp_enc("SET", "stay", "x"))
    _read_n_replies(s, 1, b"")
    # Commands built before the clock starts, and one batch kept in flight
    # (write batch i, then read batch i-1's replies): the load must be short
    # next to the 1 s TTL or most keys expire while it runs.
    B = 10000
    batches = [b"".join(b"*5\r\n$3\r\nSET\r\n$%d\r\nk:%d\r\n$1\r\nv\r\n$2\r\nPX\r\n$4\r\n1000\r\n"
                        % (len(b"k:%d" % j), j) for j in range(i, min(i + B, keys)))
               for i in range(0, keys, B)]
    t0 = time.time()
    buf, pending = b"", 0
    for i, batch in enumerate(batches):
        s.sendall(batch)
        if pending:
            buf = _read_n_replies(s, pending, buf)
        pending = min(B, keys - i * B)
    buf = _read_n_replies(s, pending, buf)
    t_last = time.time()
    ttl_end = t_last + 1.0  # the last key's TTL ends here
    probe = subprocess.Popen([sys.executable, __file__, "_kvprobe", str(port)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    register_pid(probe.pid)
    probe.stdout.readline()
    c0 = cpu_secs([pid])

    def dbsize():
        s.sendall(b"*1\r\n$6\r\nDBSIZE\r\n")
        d = b""
        while not d.endswith(b"\r\n"):
            d += s.recv(64)
        return int(d[1:-2])

    peak = dbsize()
    t_empty, end, trace = None, ttl_end + 60, []
    while time.time() < end:
        n = dbsize() - 1  # minus "stay"
        now = time.time()
        trace.append((round(now - ttl_end, 2), n))
        if n <= 0 and now >= ttl_end:
            t_empty = now
            break
        time.sleep(0.1)
    cpu = cpu_secs([pid]) - c0
    probe.stdin.close()
    lat = [float(x) for x in probe.stdout.read().split()]
    probe.wait(10)
    s.close()
    lat.sort()
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] if lat else float("nan")  # noqa: E731
    # keep ~40 points of the DBSIZE trace
    step = max(1, len(trace) // 40)
    return {"keys": keys, "load_secs": round(t_last - t0, 2), "dbsize_after_load": peak - 1,
            "secs_after_ttl": (t_empty - ttl_end) if t_empty else None,
            "gets": len(lat), "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": lat[-1] if lat else float("nan"),
            "cpu_secs": round(cpu, 2), "trace": trace[::step]}


def _kvprobe_main(port):
    """GET of a key that never expires about every 1 ms until stdin closes;
    prints one latency in ms per line."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print("ready", flush=True)
    sel = selectors.DefaultSelector()
    sel.register(sys.stdin, selectors.EVENT_READ)
    lat = []
    req = b"*2\r\n$3\r\nGET\r\n$4\r\nstay\r\n"
    end = time.time() + 120
    while time.time() < end and len(lat) < 200000:
        t = time.perf_counter()
        s.sendall(req)
        d = b""
        while not d.endswith(b"x\r\n"):
            d += s.recv(64)
        lat.append((time.perf_counter() - t) * 1000)
        if sel.select(timeout=0.001):
            break
    sys.stdout.write("\n".join(f"{x:.3f}" for x in lat) + "\n")


def kv_fault_kill9(record):
    """kill -9 of gyre's kv process under redis-benchmark load."""
    g = gyre_kv()
    old = kv_pids(g)[-1]
    bp = subprocess.Popen(["redis-benchmark", "-h", "127.0.0.1", "-p", str(g.kv_port), "-t", "set,get",
                           "-c", "50", "-n", "100000000", "-q"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    register_pid(bp.pid)
    time.sleep(2)
    c_before = cpu_secs([old])
    t0 = time.time()
    os.kill(old, signal.SIGKILL)
    logged = wait_for(lambda: f"kv process {old} exited on signal 9" in g.log(), 5, step=0.002)
    answered = wait_for(lambda: resp_cmd(g.kv_port, b"PING", timeout=0.5) == b"+PONG", 5, step=0.002)
    dt = (time.time() - t0) * 1000
    new = [p for p in kv_pids(g) if p != old]
    time.sleep(1)
    bp_alive = bp.poll() is None
    try:
        os.killpg(bp.pid, signal.SIGKILL)
    except OSError:
        pass
    bp.wait(5)
    after = resp_cmd(g.kv_port, b"PING") if answered else b""
    ok = logged and answered and len(new) == 1 and alive(new[0]) and dt < 1000
    record("kill -9 of the kv process under redis-benchmark load (-t set,get -c 50)", ok,
           f"master logged `kv process {old} exited on signal 9`: {'yes' if logged else 'no'}; "
           f"new kv process {new[0] if new else '–'} answered PING {dt:.0f} ms after the kill "
           f"(criterion < 1 s); old process had used {c_before:.1f} s CPU; redis-benchmark "
           f"{'still running (reconnecting)' if bp_alive else 'had exited'} 1 s later; PING after "
           f"stopping it: {after.decode(errors='replace') or '–'}")
    g.stop()


def kv_md(d):
    m = d["machine"]
    rows = []
    for r in d.get("throughput", []):
        goal = KV_GOALS[r["pipeline"]]
        rows.append([f"{r['test']}, -P {r['pipeline']}",
                     f"{fmt(r['gyre']['rps'], 0)} / {fmt(r['redis']['rps'], 0)}",
                     f"**{r['ratio_rps']:.2f}×** {'✓' if r['ratio_rps'] >= goal else '✗'} (≥ {goal})",
                     f"{r['gyre']['cpu_us']:.2f} / {r['redis']['cpu_us']:.2f}",
                     f"**{r['ratio_cpu']:.2f}×** {'✓' if r['ratio_cpu'] >= goal else '✗'}",
                     f"{' '.join(fmt(x, 0) for x in r['gyre']['runs'])} / "
                     f"{' '.join(fmt(x, 0) for x in r['redis']['runs'])}"])
    mem = d.get("memory", {})
    mrows = []
    for k in ("gyre", "redis"):
        for x in mem.get(k, []):
            mrows.append([k, f"{x['clients']} ({x['pinged']} PONG)",
                          f"{x['rss0'] / 2**20:.1f} → {x['rss1'] / 2**20:.1f} → {x['rss2'] / 2**20:.1f}",
                          f"{x['per_connected']:,.0f}", f"{x['per_after_cmd']:,.0f}"])
    gc = med([x["per_connected"] for x in mem.get("gyre", [])])
    ga = med([x["per_after_cmd"] for x in mem.get("gyre", [])])
    ex = d.get("expiry", {})
    erows = []
    for k in ("gyre", "redis"):
        e = ex.get(k)
        if not e:
            continue
        secs = e["secs_after_ttl"]
        ok = "" if k != "gyre" else (" ✓" if secs is not None and secs <= 3 else " ✗")
        lok = "" if k != "gyre" else (" ✓" if e["p99_ms"] <= 2 else " ✗")
        erows.append([k, f"{e['load_secs']:.1f}", f"{e['dbsize_after_load']:,}",
                      (f"**{secs:.1f}**" if secs is not None else "**not empty after 60 s**") + ok,
                      f"{e['gets']:,}", f"{e['p50_ms']:.2f}", f"{e['p99_ms']:.2f}{lok}",
                      f"{e['max_ms']:.2f}", f"{e['cpu_secs']:.1f}"])
    frows = [[f["name"], f["server"], f"**{f['status']}**", f["figures"]] for f in d.get("faults", [])]
    return f"""## KV vs redis (`bench/run.sh kv`)

{mline(m)}. gyre (release, 1 worker, `kv {{ listen 127.0.0.1:P; hz 10; maxclients 20000; }}`,
`worker_connections 20000`) against redis-server {redis_version()} from Debian (`--save ''
--appendonly no --maxclients 20000`; the fd limit here is 20000, so redis lowers
maxclients to ~19,968), each fresh per table. CPU is utime+stime from /proc of gyre's
kv process (found from the master's `start kv process PID` line) or of redis-server.
redis-benchmark takes about one of the two cores, so read the ratios and CPU/request.

### Throughput: `redis-benchmark -t ping|set|get -c 50 -q`

-P 1 with `-n {d['throughput'][0]['n'] if d.get('throughput') else '?'}`, -P 16 with `-n
{d['throughput'][-1]['n'] if d.get('throughput') else '?'}`; one redis-benchmark run per
test, alternating gyre, redis, {ROUNDS} rounds; medians (the ping run's CPU is split
evenly between PING_INLINE and PING_MBULK). Goals: ≥ 1.1× redis at -P 1, ≥ 1.3× at -P 16
(applied to req/s and to CPU per request). Cells are gyre / redis.

{table(["test", "req/s gyre / redis", "req/s ratio (goal)", "µs CPU/req", "CPU ratio redis/gyre", "every round's req/s"], rows)}

### Memory per idle client

A separate client process opens {mem.get('n', '?')} connections and holds them, then
sends one `PING` on each and reads `+PONG`; RSS of the serving process before →
connected → after one command; two fresh runs per server, alternating. Goal: ≤ 1 KB per
idle client.

{table(["server", "clients", "RSS MiB", "B/client connected", "B/client after one command"], mrows)}

gyre median: **{gc:,.0f} B** per connected client, **{ga:,.0f} B** after one command
(goal ≤ 1,024 {'✓' if ga <= 1024 else '✗'}).

### Active expiry: 1e6 keys `SET k:i v PX 1000`

Loaded over one connection, 10,000 pipelined commands per write (one write's replies
read while the next is in flight; "load s" is how long that took, and keys set first
begin to expire before it ends, hence "DBSIZE after load"); then `DBSIZE` every
100 ms until it reaches 0 (bounded at 60 s), while a second process GETs a key without
TTL about every 1 ms. "Empty after" counts from the last key's TTL (load end + 1 s);
keys loaded first start expiring during the load. Goal: empty within 3 s at hz 10,
GET p99 ≤ 2 ms.

{table(["server", "load s", "DBSIZE after load", "empty after (s)", "GETs", "GET p50 ms", "GET p99 ms", "GET max ms", "server CPU s"], erows)}

### Fault

{table(["test", "server", "result", "figures"], frows)}
"""


# ------------------------------------------------------------------------ fuzz

# (target, dictionary, what it drives); the crate is fuzz/ (its own workspace).
FUZZ_TARGETS = [
    ("http_conn", "http.dict", "gyre_http::Connection: reads at arbitrary splits, pipelining, "
                               "timeouts, lingering, idle resume"),
    ("resp_parse", "kv.dict", "gyre_kv::RequestParser alone: multibulk and inline, tiny and "
                              "default limits"),
    ("kv_server", "kv.dict", "gyre_kv::Server::feed: every command on arbitrary argv, serverCron"),
    ("upstream_response", "http.dict", "gyre_http::upstream::http_response: upstream heads at "
                                       "every limit, prefix decisions, body framing splits"),
]
FUZZ_SECS = int(os.environ.get("BENCH_FUZZ_SECS", "300"))


def sec_fuzz():
    """Each cargo-fuzz target for FUZZ_SECS seconds, one after the other,
    libFuzzer in-process (one core: what `-jobs=1 -workers=1` amounts to
    without the extra parent process), starting from the checked-in seeds
    only, so runs are comparable. New corpus units are then added to
    fuzz/corpus/TARGET (ignored by git) for manual runs to continue from."""
    m = machine()
    fuzz = os.path.join(ROOT, "fuzz")
    version = subprocess.run(["cargo", "fuzz", "--version"], capture_output=True,
                             text=True).stdout.strip()
    log(f"fuzz: building the targets ({version})")
    subprocess.run(["cargo", "+nightly", "fuzz", "build"], cwd=ROOT, check=True)
    rows = []
    for name, dic, what in FUZZ_TARGETS:
        kept = os.path.join(fuzz, "corpus", name)  # seeds + what earlier runs found
        corpus = os.path.join(TMP, "corpus", name)
        os.makedirs(corpus)
        for f in os.listdir(kept):
            if f.startswith("seed-"):
                shutil.copyfile(os.path.join(kept, f), os.path.join(corpus, f))
        log(f"fuzz: {name} for {FUZZ_SECS} s")
        logf = os.path.join(TMP, f"fuzz-{name}.log")
        t0 = time.time()
        with open(logf, "w") as out:
            rc = subprocess.run(
                ["cargo", "+nightly", "fuzz", "run", name, corpus, "--",
                 f"-max_total_time={FUZZ_SECS}", "-timeout=10", "-print_final_stats=1",
                 f"-dict={os.path.join(fuzz, 'dict', dic)}"],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
        row = fuzz_stats(open(logf, errors="replace").read())
        row.update(target=name, what=what, secs=round(time.time() - t0), rc=rc)
        if rc != 0 and not row["crashes"]:
            row["crashes"].append({"artifact": None, "reason": f"exit status {rc}"})
        if row["crashes"]:  # keep the log beside the crash input
            os.makedirs(os.path.join(fuzz, "artifacts", name), exist_ok=True)
            shutil.copyfile(logf, os.path.join(fuzz, "artifacts", name, "run.log"))
        for f in os.listdir(corpus):
            if not os.path.exists(os.path.join(kept, f)):
                shutil.copyfile(os.path.join(corpus, f), os.path.join(kept, f))
        log(f"  {name}: {row['runs']:,} runs, {row['exec_s']:,} exec/s, cov {row['cov']}, "
            f"ft {row['ft']}, crashes {len(row['crashes'])}")
        rows.append(row)
    save("fuzz", fuzz_md(m, version, rows), {"machine": m, "cargo_fuzz": version,
                                             "secs": FUZZ_SECS, "rows": rows})
    refresh_fuzz_row()


def refresh_fuzz_row():
    """Splices the new fuzzing summary into faults.json/md without re-running
    the fault tests (as faults-kv does for its row)."""
    p = os.path.join(RESULTS, "faults.json")
    if not os.path.exists(p):
        return
    j = json.load(open(p))
    new = []
    fuzz_row(recorder(new))
    j["rows"] = [r for r in j["rows"] if not r["name"].startswith("fuzzing")] + new
    note = (f" The kv kill -9 row was re-run alone (`bench/run.sh faults-kv`) on "
            f"{j['kv_row_run']}." if "kv_row_run" in j else "")
    save("faults", faults_md(j["machine"], j["rows"], note), j)


def fuzz_stats(text):
    """Figures from a libFuzzer log: the last status line and the final stats."""
    row = {"runs": 0, "exec_s": 0, "cov": 0, "ft": 0, "corpus": 0, "new_units": 0,
           "rss_mb": 0, "counters": 0, "crashes": []}
    for k, pat in (("runs", r"stat::number_of_executed_units: *(\d+)"),
                   ("exec_s", r"stat::average_exec_per_sec: *(\d+)"),
                   ("new_units", r"stat::new_units_added: *(\d+)"),
                   ("rss_mb", r"stat::peak_rss_mb: *(\d+)"),
                   ("counters", r"\((\d+) inline 8-bit counters\)")):
        mm = re.search(pat, text)
        if mm:
            row[k] = int(mm.group(1))
    status = re.findall(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/", text, re.M)
    if status:
        runs, row["cov"], row["ft"], row["corpus"] = (int(x) for x in status[-1])
        row["runs"] = row["runs"] or runs
    lines = text.splitlines()
    reason = next((f"{l.strip()} {lines[i + 1].strip()}" for i, l in enumerate(lines[:-1])
                   if "panicked at" in l), None)
    reason = reason or next((l.strip() for l in lines
                             if re.search(r"ERROR: (libFuzzer|AddressSanitizer)", l)), None)
    for line in lines:
        mm = re.search(r"Test unit written to (\S+)", line)
        if mm and not os.path.basename(mm.group(1)).startswith("slow-unit-"):
            row["crashes"].append({"artifact": os.path.relpath(mm.group(1), ROOT),
                                   "reason": reason})
    return row


def fuzz_md(m, version, rows):
    t = table(["target", "drives", "runs", "exec/s", "cov", "ft", "corpus", "peak RSS",
               "crashes"],
              [[f"`{r['target']}`", r["what"], f"{r['runs']:,}", f"{r['exec_s']:,}",
                f"{r['cov']:,} of {r['counters']:,}", f"{r['ft']:,}", r["corpus"],
                f"{r['rss_mb']} MiB", f"**{len(r['crashes'])}**"] for r in rows])
    crashes = [f"- `{r['target']}`: `{c['artifact']}`: {c['reason']}"
               for r in rows for c in r["crashes"]]
    secs = rows[0]["secs"] if rows else 0
    return f"""## Fuzzing (`bench/run.sh fuzz [seconds]`)

{mline(m)}. {version} on nightly Rust: libFuzzer in-process on one core, AddressSanitizer,
debug assertions and overflow checks; each target alone for {FUZZ_SECS} s (≈{secs} s with
startup), starting from its checked-in seeds (`fuzz/corpus/TARGET/seed-*`) with its
dictionary (`fuzz/dict/`). `cov` counts the instrumented edges reached (of all edges
in the binary, libFuzzer's and std's included), `ft` libFuzzer's finer features. A crash
stops its target's run; the input is kept in `fuzz/artifacts/TARGET/`.

{t}
{chr(10).join(crashes) if crashes else ""}
Reproduce one target: `cargo +nightly fuzz run http_conn -- -max_total_time=300
-dict=fuzz/dict/http.dict` (from the repository root; `resp_parse` and `kv_server`
take `fuzz/dict/kv.dict`). Replay a crash: `cargo +nightly fuzz run TARGET ARTIFACT`.
"""


# --------------------------------------------------------------------- report

ORDER = ["http", "http_conf", "ceiling", "memory", "balance", "tls", "proxy", "faults", "fuzz", "kv",
         "kv_fair", "kv_types", "kv_persist", "kv_cache", "core"]



def sec_tls():
    """HTTPS vs nginx: bench/tls.py (one file per section)."""
    sys.path.insert(0, BENCH)
    import tls
    tls.sec_tls(sys.modules[__name__])


def sec_http_conf():
    """A realistic configuration, gzip and limit_req vs nginx: bench/http_conf.py."""
    sys.path.insert(0, BENCH)
    import http_conf
    http_conf.sec_http_conf(sys.modules[__name__])


def sec_proxy():
    """The reverse proxy vs nginx: bench/proxy.py (one file per section)."""
    sys.path.insert(0, BENCH)
    import proxy
    proxy.sec_proxy(sys.modules[__name__])


def report():
    m = machine()
    frags = []
    for sec in ORDER:
        p = os.path.join(RESULTS, f"{sec}.md")
        if os.path.exists(p):
            frags.append(open(p).read())
        elif sec == "core":
            kept = os.path.join(BENCH, "core-preserved.md")
            if os.path.exists(kept):
                frags.append(open(kept).read())
        else:
            frags.append(f"## {sec}\n\nNot run yet: `bench/run.sh {sec.replace('_', '-')}`.\n")
    svg_ok = write_svg()
    head = f"""<!-- Generated by bench/run.sh (bench/bench.py report); edits are overwritten.
     Machine: nproc {m['nproc']}, {m['model']}, kernel {m['kernel']}, generated {m['date']}. -->
# Benchmarks

Speed goals are judged here, never in timed tests. Every figure below comes from
`bench/run.sh [http|core|memory|balance|ceiling|faults|kv|fuzz|all]`; each section names
the machine and time of its run. The machine is a {m['nproc']}-core {m['model']} VM
where wrk (or redis-benchmark) itself takes about one core, so gyre and nginx (or
redis-server) are always measured side by side in one run and compared as ratios; server CPU per request and syscalls per
request are steadier than req/s.
"""
    if svg_ok:
        head += "\n![gyre / nginx and gyre / redis ratios](bench/results.svg)\n"
    notes = os.path.join(BENCH, "notes.md")  # hand-written reading of the latest runs
    if os.path.exists(notes):
        frags.insert(0, open(notes).read())
    with open(os.path.join(ROOT, "BENCHMARKS.md"), "w") as f:
        f.write(head + "\n" + "\n".join(x.rstrip() + "\n" for x in frags))


def write_svg():
    bars = []  # (group, label, value)
    p = os.path.join(RESULTS, "http.json")
    if os.path.exists(p):
        for d in json.load(open(p))["rows"]:
            lab = f"{d['case']}, {d['conn']}, {d['workers']}w"
            bars.append((lab, d["ratio_rps"], d["ratio_cpu"], goal_for(d["case"], d["conn"])))
    p = os.path.join(RESULTS, "http_conf.json")
    if os.path.exists(p):  # the realistic configuration and gzip rows (bench/http_conf.py)
        j = json.load(open(p))
        for d in j.get("realistic", []) + j.get("gzip", []):
            bars.append((d["case"].replace(", gzip_comp_level", ", level"), d["ratio_rps"],
                         d["ratio_cpu"], 1.3 if d["case"].startswith("realistic") else 1.0))
    p = os.path.join(RESULTS, "kv.json")
    if os.path.exists(p):  # kv rows: the ratios are gyre / redis-server
        for d in json.load(open(p)).get("throughput", []):
            if d["ratio_rps"] == d["ratio_rps"]:
                bars.append((f"kv vs redis: {d['test']}, -P {d['pipeline']}", d["ratio_rps"],
                             d["ratio_cpu"], KV_GOALS[d["pipeline"]]))
    p = os.path.join(RESULTS, "ceiling.json")
    cbars = []
    if os.path.exists(p):
        for d in json.load(open(p))["rows"]:
            for k in ("gyre", "nginx"):
                cbars.append((f"{k}, {d['conn']}", d[k]["rps"] / d["ceiling"]["rps"],
                              d["ceiling"]["cpu_us"] / d[k]["cpu_us"]))
    if not bars and not cbars:
        return False
    rowh, left, width = 26, 230, 420
    vmax = max([2.5] + [max(b[1], b[2]) for b in bars] + [max(b[1], b[2]) for b in cbars])
    h = 70 + rowh * (len(bars) + len(cbars)) + (50 if cbars else 0)
    x = lambda v: left + width * v / vmax  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 40}" height="{h}" '
           'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="18" font-size="13" font-weight="bold">gyre vs nginx (kv: vs redis): '
           f'req/s ratio (blue), CPU-per-request ratio other/gyre (orange); | = goal</text>']
    y = 34
    for t in range(0, int(vmax) + 1):
        out.append(f'<line x1="{x(t)}" y1="{y}" x2="{x(t)}" y2="{h - 20}" stroke="#ddd"/>'
                   f'<text x="{x(t) - 4}" y="{h - 6}">{t}×</text>')
    out.append(f'<line x1="{x(1)}" y1="{y}" x2="{x(1)}" y2="{h - 20}" stroke="#888"/>')
    for lab, r, c, goal in bars:
        out.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{lab}</text>')
        out.append(f'<rect x="{left}" y="{y + 3}" width="{x(r) - left:.1f}" height="9" fill="#3b6fb6"/>')
        out.append(f'<rect x="{left}" y="{y + 13}" width="{x(c) - left:.1f}" height="9" fill="#e08a2c"/>')
        out.append(f'<text x="{x(max(r, c)) + 4:.1f}" y="{y + 16}">{r:.2f} / {c:.2f}</text>')
        out.append(f'<line x1="{x(goal):.1f}" y1="{y + 1}" x2="{x(goal):.1f}" y2="{y + 24}" '
                   'stroke="#c00" stroke-width="2"/>')
        y += rowh
    if cbars:
        y += 14
        out.append(f'<text x="10" y="{y + 12}" font-size="13" font-weight="bold">Fraction of the '
                   'epoll ceiling (return 200, 1 worker): req/s (blue), CPU efficiency (orange)</text>')
        y += 22
        for lab, r, c in cbars:
            out.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{lab}</text>')
            out.append(f'<rect x="{left}" y="{y + 3}" width="{x(r) - left:.1f}" height="9" fill="#3b6fb6"/>')
            out.append(f'<rect x="{left}" y="{y + 13}" width="{x(c) - left:.1f}" height="9" fill="#e08a2c"/>')
            out.append(f'<text x="{x(max(r, c)) + 4:.1f}" y="{y + 16}">{r:.0%} / {c:.0%}</text>')
            y += rowh
    out.append("</svg>")
    with open(os.path.join(BENCH, "results.svg"), "w") as f:
        f.write("\n".join(out) + "\n")
    return True


SECTIONS = {"http": sec_http, "http-conf": sec_http_conf, "core": sec_core, "memory": sec_memory,
            "balance": sec_balance,
            "ceiling": sec_ceiling, "faults": sec_faults, "faults-kv": sec_faults_kv, "kv": sec_kv,
            "kv-fair": sec_kv_fair, "tls": sec_tls, "proxy": sec_proxy,
            "kv-types": lambda: kv_types.sec_kv_types(sys.modules[__name__]),
            "kv-persist": sec_kv_persist,
            "kv-cache": sec_kv_cache,
            "fuzz": sec_fuzz, "report": report}


def main():
    args = sys.argv[1:] or ["all"]
    if args[0] == "_hold":
        return _hold_main(int(args[1]), int(args[2]), args[3], args[4] == "1", int(args[5]),
                          float(args[6]), float(args[7]))
    if args[0] == "_render_http":  # re-render the http fragment from its json
        j = json.load(open(os.path.join(RESULTS, "http.json")))
        return save("http", http_md(j["machine"], j["rows"]), j)
    if args[0] == "_kvhold":
        return _kvhold_main(int(args[1]), int(args[2]))
    if args[0] == "_kvprobe":
        return _kvprobe_main(int(args[1]))
    if args[0] == "_kvbulk":
        return _kvbulk_main(int(args[1]))
    if args[0] == "_slowget":
        return _slowget_main(int(args[1]), int(args[2]), int(args[3]))
    if args[0] == "_slowloris":
        return _slowloris_main(int(args[1]), int(args[2]), float(args[3]), float(args[4]))
    global FUZZ_SECS
    for i, a in enumerate(args):
        if a.isdigit():  # `fuzz SECONDS`
            continue
        if a == "fuzz" and i + 1 < len(args) and args[i + 1].isdigit():
            FUZZ_SECS = int(args[i + 1])
        # fuzz is not part of all: it needs nightly Rust and 3 × 5 minutes.
        todo = (["http", "http-conf", "ceiling", "memory", "balance", "faults", "core", "kv", "kv-fair", "kv-types"]
                if a == "all" else [a])
        for sec in todo:
            if sec not in SECTIONS:
                sys.exit(f"unknown section {sec!r}; one of {', '.join(SECTIONS)} or all")
            SECTIONS[sec]()
            stop_all()


if __name__ == "__main__":
    main()
