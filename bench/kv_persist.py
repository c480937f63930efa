#!/usr/bin/env python3
"""RDB persistence, gyre's kv process vs redis-server 7.0 side by side:

* SAVE time, dump size and load time (start to serving) for `keys` strings
  of `value_bytes` and for `keys` small hashes (3 fields);
* BGSAVE under a full-speed SET load: extra memory of gyre's forkless
  snapshot vs redis-server's fork (copy-on-write), the save time, and the
  GET round trips of another client (one GET every ms) while it runs;
  `rounds` times, gyre and redis back to back (the machine may be shared:
  one round says little about a p99);
* SET throughput and server CPU per SET (utime + stime of the whole
  process, its threads included, from /proc) with `appendonly yes` and
  `appendfsync everysec` / `always`, `redis-benchmark -t set -P 16`;
* BGREWRITEAOF time of the `keys`-string dataset (command to INFO showing
  no rewrite).

    bench/kv_persist.py GYRE_BIN [keys] [value_bytes] [rounds]

Knobs: BENCH_PERSIST_PARTS ("load bgsave aof": which parts run),
BENCH_PERSIST_LOADS (restarts per dump whose load times are reported, 3),
BENCH_PERSIST_GYRE_CONF (lines added to gyre's kv block in the BGSAVE
part, e.g. "bgsave-slice-us 100;").

Loads `keys` strings (redis-benchmark's key names) into each server, starts
`redis-benchmark -t set -r keys -P 16` against it, waits a second, runs
BGSAVE and samples memory every 10 ms until the save ends:
  gyre:  VmRSS of the kv process (the writer thread included);
  redis: VmRSS of the server plus the child's private dirty pages (what
         copy-on-write copied), and the child's own "copy-on-write" log line.
Only 127.0.0.1, temp dirs, processes started here and stopped at the end.
"""
import os, re, shutil, socket, subprocess, sys, tempfile, time

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=60).stdout

def wait_ping(port):
    for _ in range(500):
        if cli(port, "PING").strip() == "PONG":
            return
        time.sleep(0.02)
    raise SystemExit(f"no server on {port}")

def rss_kb(pid):
    try:
        for l in open(f"/proc/{pid}/status"):
            if l.startswith("VmRSS:"):
                return int(l.split()[1])
    except OSError:
        pass
    return 0

def private_dirty_kb(pid):
    try:
        for l in open(f"/proc/{pid}/smaps_rollup"):
            if l.startswith("Private_Dirty:"):
                return int(l.split()[1])
    except OSError:
        pass
    return 0

def children(pid):
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []

def load(port, keys, size, hashes=False):
    val = b"x" * size
    buf = bytearray()
    for i in range(keys):
        k = b"key:%012d" % i
        if hashes:
            buf += (b"*8\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n$4\r\nname\r\n$5\r\nalice\r\n"
                    b"$3\r\nage\r\n$2\r\n42\r\n$4\r\ncity\r\n$5\r\nparis\r\n") % (len(k), k)
        else:
            buf += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(val), val)
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=bytes(buf), capture_output=True, check=True)

# The GET probe runs in a process of its own: as a thread of this script it
# shared the GIL with the loop that polls INFO and /proc during the save
# (and only then), so its round trips during the save included waits for
# this process's other thread (preempted while holding the GIL on a busy
# machine), for gyre and redis alike.
PROBE = r"""
import signal, socket, sys, time
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
q = b"*2\r\n$3\r\nGET\r\n$16\r\nkey:000000000007\r\n"
rtts = []
sys.stdout.write("ready\n"); sys.stdout.flush()
while not stop:
    t = time.perf_counter()
    s.sendall(q)
    got = b""
    while not got.endswith(b"\r\n") or got.count(b"\r\n") < (2 if got.startswith(b"$") and not got.startswith(b"$-1") else 1):
        got += s.recv(65536)
    rtts.append(time.perf_counter() - t)
    time.sleep(0.001)
sys.stdout.write(" ".join("%.7f" % x for x in rtts) + "\n")
"""

class GetProbe:
    """Another connection, in another process, sending one GET per
    millisecond; round trips."""
    def __init__(self, port):
        self.p = subprocess.Popen([sys.executable, "-c", PROBE, str(port)],
                                  stdout=subprocess.PIPE, text=True)
        self.p.stdout.readline()
    def finish(self):
        self.p.terminate()
        out, _ = self.p.communicate(timeout=30)
        r = sorted(float(x) for x in out.split()) or [0.0]
        return r[len(r) // 2] * 1000, r[min(len(r) - 1, int(len(r) * 0.99))] * 1000, r[-1] * 1000, len(r)

def measure(name, port, pid, keys, size, log=None):
    load(port, keys, size)
    bench = subprocess.Popen(["redis-benchmark", "-p", str(port), "-t", "set", "-r", str(keys),
                              "-d", str(size), "-P", "16", "-n", "100000000", "-q"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    base = rss_kb(pid)
    probe = GetProbe(port)
    time.sleep(2.0)
    b50, b99, bmax, bn = probe.finish()
    probe = GetProbe(port)
    t0 = time.time()
    cli(port, "BGSAVE")
    peak_total, peak_child = base, 0
    # One connection for INFO (no redis-cli process per poll: spawning
    # them would compete for the CPU with what is measured).
    info_s = socket.create_connection(("127.0.0.1", port))
    while True:
        kids = [c for c in children(pid) if c != bench.pid]
        cow = sum(private_dirty_kb(c) for c in kids)
        total = rss_kb(pid) + cow
        peak_total, peak_child = max(peak_total, total), max(peak_child, cow)
        info_s.sendall(b"*2\r\n$4\r\nINFO\r\n$11\r\npersistence\r\n")
        got = b""
        while b"aof_enabled" not in got:
            got += info_s.recv(65536)
        if b"rdb_bgsave_in_progress:0" in got:
            break
        time.sleep(0.02)
    info_s.close()
    secs = time.time() - t0
    p50, p99, pmax, n = probe.finish()
    bench.terminate(); bench.wait()
    extra = peak_total - base
    line = (f"{name}: BGSAVE under SET load, {keys} keys x {size} B: RSS before {base/1024:.0f} MiB, "
            f"peak extra {extra/1024:.1f} MiB ({100*extra/max(base,1):.1f}%), "
            f"save {secs:.2f} s; GET during it p50 {p50:.2f} p99 {p99:.2f} max {pmax:.2f} ms ({n} GETs), "
            f"before it (same load, no save) p50 {b50:.2f} p99 {b99:.2f} max {bmax:.2f} ms")
    if log:
        m = re.findall(r"RDB: (\d+) MB of memory used by copy-on-write", open(log).read())
        if m:
            line += f"; redis's own log: {m[-1]} MB copy-on-write"
    print(line, flush=True)

def cpu_ticks(pid):
    """utime + stime of a process (all its threads), in clock ticks."""
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    except (OSError, IndexError, ValueError):
        return 0

def info_field(port, section, name):
    m = re.search(rf"^{name}:(\S+)", cli(port, "INFO", section), re.M)
    return m.group(1) if m else None

def aof_set_cost(name, port, pid, n, policy):
    """SET rate and server CPU per SET under redis-benchmark -P 16."""
    t0, c0 = time.time(), cpu_ticks(pid)
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set", "-r", "100000",
                          "-P", "16", "-n", str(n), "-q"], capture_output=True, text=True, timeout=600).stdout
    secs, ticks = time.time() - t0, cpu_ticks(pid) - c0
    m = re.findall(r"SET: ([0-9.]+) requests per second", out)
    rate = float(m[-1]) if m else n / secs
    us = ticks * 1e6 / os.sysconf("SC_CLK_TCK") / n
    size = info_field(port, "persistence", "aof_current_size")
    print(f"{name}: appendfsync {policy}: SET -P 16 {rate:,.0f}/s, server CPU {us:.2f} us per SET "
          f"({n} SETs; AOF {int(size or 0)/2**20:.1f} MiB)", flush=True)
    return us

def rewrite_time(name, port, keys, size):
    load(port, keys, size)
    t0 = time.time()
    cli(port, "BGREWRITEAOF")
    for _ in range(60000):
        if (info_field(port, "persistence", "aof_rewrite_in_progress") == "0"
                and info_field(port, "persistence", "aof_rewrite_scheduled") == "0"):
            break
        time.sleep(0.005)
    secs = time.time() - t0
    base = info_field(port, "persistence", "aof_base_size")
    print(f"{name}: BGREWRITEAOF of {keys} strings x {size} B: {secs:.2f} s "
          f"(base {int(base or 0)/2**20:.1f} MiB, status {info_field(port, 'persistence', 'aof_last_bgrewrite_status')})",
          flush=True)
    return secs

def aof_rows(tmp, keys, size):
    n = int(os.environ.get("BENCH_PERSIST_AOF_SETS", "2000000"))
    cost = {}
    for policy in ("everysec", "always"):
        g, port, kvpid, _, _ = start_gyre(tmp, f"g-aof-{policy}",
                                          f"    appendonly yes;\n    appendfsync {policy};")
        try:
            cost[("gyre", policy)] = aof_set_cost("gyre", port, kvpid, n if policy == "everysec" else n // 10, policy)
        finally:
            stop(g)
        r, port, d, _ = start_redis(tmp, f"r-aof-{policy}", ["--appendonly", "yes", "--appendfsync", policy])
        try:
            cost[("redis", policy)] = aof_set_cost("redis-server 7.0", port, r.pid, n if policy == "everysec" else n // 10, policy)
        finally:
            stop(r)
    for policy in ("everysec", "always"):
        g, r = cost[("gyre", policy)], cost[("redis", policy)]
        print(f"CPU per SET with appendfsync {policy}: gyre {g:.2f} us / redis {r:.2f} us "
              f"({r/max(g,1e-9):.2f}x less)", flush=True)
    g, port, _, _, _ = start_gyre(tmp, "g-rw", "    appendonly yes;")
    try:
        gs = rewrite_time("gyre", port, keys, size)
    finally:
        stop(g)
    r, port, d, _ = start_redis(tmp, "r-rw", ["--appendonly", "yes"])
    try:
        rs = rewrite_time("redis-server 7.0", port, keys, size)
    finally:
        stop(r)
    print(f"BGREWRITEAOF: gyre {gs:.2f} s / redis {rs:.2f} s ({rs/max(gs,1e-9):.2f}x)", flush=True)

def start_gyre(tmp, name, extra=""):
    port = free_port()
    pre = f"{tmp}/{name}"
    for d in ("conf", "logs"):
        os.makedirs(f"{pre}/{d}", exist_ok=True)
    open(f"{pre}/conf/gyre.conf", "w").write(
        "daemon off;\nerror_log logs/error.log info;\nworker_processes 1;\nevents {}\n"
        f"kv {{\n    listen 127.0.0.1:{port};\n    save \"\";\n{extra}\n}}\n")
    t0 = time.time()
    g = subprocess.Popen([GYRE, "-p", pre], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ping(port)
    ready = time.time() - t0
    kvpid = None
    for _ in range(200):
        m = re.search(r"start kv process (\d+)", open(f"{pre}/logs/error.log").read())
        if m:
            kvpid = int(m.group(1)); break
        time.sleep(0.05)
    return g, port, kvpid, pre, ready

def start_redis(tmp, name, extra=None):
    port = free_port()
    d = f"{tmp}/{name}"
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    r = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--dir", d, "--logfile", f"{d}/log",
                          "--hash-max-listpack-entries", "128"] + (extra or ["--appendonly", "no"]))
    wait_ping(port)
    return r, port, d, time.time() - t0

def stop(p):
    p.terminate()
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()

def loaded_secs(logtext):
    m = re.findall(r"DB loaded from disk: ([0-9.]+) seconds", logtext)
    return float(m[-1]) if m else float("nan")

def proc_cost(pid):
    """(CPU seconds, minor page faults) of a process so far, from /proc."""
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"), int(f[7])
    except (OSError, IndexError, ValueError):
        return float("nan"), 0

def wait_loaded(logfile):
    """Until the server's own "DB loaded from disk" line (60 s at most)."""
    for _ in range(6000):
        try:
            if "DB loaded from disk" in open(logfile).read():
                return
        except OSError:
            pass
        time.sleep(0.01)

def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]

def save_load(tmp, keys, size, hashes, loads):
    """SAVE once, then `loads` restarts on the same file; the load time is
    each server's own "DB loaded from disk: N seconds" line (both time
    the same span: the file opened to the last key stored), the median
    of the restarts, with the CPU time and minor page faults of the
    process at that point (start-up included, which is small)."""
    what = f"{keys} small hashes (3 fields)" if hashes else f"{keys} strings x {size} B"
    # gyre
    g, port, _, pre, _ = start_gyre(tmp, f"g-sl-{hashes}")
    load(port, keys, size, hashes)
    t0 = time.time(); cli(port, "SAVE"); gsave = time.time() - t0
    gsize = os.path.getsize(f"{pre}/dump.rdb")
    stop(g)
    gl, gcost = [], []
    for _ in range(loads):
        g, port, kvpid, pre, _ = start_gyre(tmp, f"g-sl-{hashes}")
        wait_loaded(f"{pre}/logs/error.log")
        gcost.append(proc_cost(kvpid))
        gl.append(loaded_secs(open(f"{pre}/logs/error.log").read()))
        n = cli(port, "DBSIZE").strip()
        stop(g)
        open(f"{pre}/logs/error.log", "w").close()
    # redis
    r, port, d, _ = start_redis(tmp, f"r-sl-{hashes}")
    load(port, keys, size, hashes)
    t0 = time.time(); cli(port, "SAVE"); rsave = time.time() - t0
    rsize = os.path.getsize(f"{d}/dump.rdb")
    stop(r)
    rl, rcost = [], []
    for _ in range(loads):
        r, port, d, _ = start_redis(tmp, f"r-sl-{hashes}")
        wait_loaded(f"{d}/log")
        rcost.append(proc_cost(r.pid))
        rl.append(loaded_secs(open(f"{d}/log").read()))
        stop(r)
        open(f"{d}/log", "w").close()
    gload, rload = median(gl), median(rl)
    print(f"{what}: SAVE gyre {gsave:.2f} s / redis {rsave:.2f} s ({rsave/gsave:.2f}x); "
          f"file gyre {gsize/2**20:.1f} MiB / redis {rsize/2**20:.1f} MiB; "
          f"load gyre {gload:.2f} s / redis {rload:.2f} s ({rload/max(gload,1e-9):.2f}x; median of "
          f"{loads}: gyre {' '.join(f'{x:.2f}' for x in gl)}, redis {' '.join(f'{x:.2f}' for x in rl)}); "
          f"process CPU after the load gyre {median([c for c, _ in gcost]):.2f} s / redis "
          f"{median([c for c, _ in rcost]):.2f} s, minor faults gyre {median([f for _, f in gcost]):,} / "
          f"redis {median([f for _, f in rcost]):,}; gyre DBSIZE after load {n}", flush=True)

GYRE = None

def main():
    global GYRE
    GYRE = sys.argv[1]
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    parts = os.environ.get("BENCH_PERSIST_PARTS", "load bgsave aof").split()
    loads = int(os.environ.get("BENCH_PERSIST_LOADS", "3"))
    tmp = tempfile.mkdtemp(prefix="gyre-kv-persist-")
    try:
        if "load" in parts:
            save_load(tmp, keys, size, False, loads)
            save_load(tmp, keys, size, True, loads)
        for i in range(rounds if "bgsave" in parts else 0):
            g, port, kvpid, _, _ = start_gyre(tmp, f"g-bg{i}",
                                              os.environ.get("BENCH_PERSIST_GYRE_CONF", ""))
            try:
                measure(f"gyre (forkless), round {i + 1}", port, kvpid, keys, size)
            finally:
                stop(g)
            r, port, d, _ = start_redis(tmp, f"r-bg{i}")
            try:
                measure(f"redis-server 7.0 (fork), round {i + 1}", port, r.pid, keys, size, log=f"{d}/log")
            finally:
                stop(r)
        if "aof" in parts:
            aof_rows(tmp, keys, size)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    main()
