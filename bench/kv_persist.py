#!/usr/bin/env python3
"""BGSAVE under a full-speed SET load: extra memory of gyre's forkless
snapshot vs redis-server's fork (copy-on-write), and the save time.

    bench/kv_persist.py GYRE_BIN [keys] [value_bytes]

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

def load(port, keys, size):
    val = b"x" * size
    buf = bytearray()
    for i in range(keys):
        k = b"key:%012d" % i
        buf += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(val), val)
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=bytes(buf), capture_output=True, check=True)

def measure(name, port, pid, keys, size, log=None):
    load(port, keys, size)
    bench = subprocess.Popen(["redis-benchmark", "-p", str(port), "-t", "set", "-r", str(keys),
                              "-d", str(size), "-P", "16", "-n", "100000000", "-q"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    base = rss_kb(pid)
    t0 = time.time()
    cli(port, "BGSAVE")
    peak_total, peak_child = base, 0
    while True:
        kids = [c for c in children(pid) if c != bench.pid]
        cow = sum(private_dirty_kb(c) for c in kids)
        total = rss_kb(pid) + cow
        peak_total, peak_child = max(peak_total, total), max(peak_child, cow)
        info = cli(port, "INFO", "persistence")
        if "rdb_bgsave_in_progress:0" in info:
            break
        time.sleep(0.01)
    secs = time.time() - t0
    bench.terminate(); bench.wait()
    extra = peak_total - base
    line = (f"{name}: {keys} keys x {size} B, RSS before {base/1024:.0f} MiB, "
            f"peak extra during BGSAVE {extra/1024:.1f} MiB ({100*extra/max(base,1):.1f}%), "
            f"save took {secs:.2f} s under the SET load")
    if log:
        m = re.findall(r"RDB: (\d+) MB of memory used by copy-on-write", open(log).read())
        if m:
            line += f"; redis's own log: {m[-1]} MB copy-on-write"
    print(line, flush=True)

def main():
    gyre = sys.argv[1]
    keys = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    tmp = tempfile.mkdtemp(prefix="gyre-kv-persist-")
    procs = []
    try:
        # gyre
        port = free_port()
        for d in ("conf", "logs"):
            os.makedirs(f"{tmp}/g/{d}")
        open(f"{tmp}/g/conf/gyre.conf", "w").write(
            "daemon off;\nerror_log logs/error.log info;\nworker_processes 1;\nevents {}\n"
            f"kv {{\n    listen 127.0.0.1:{port};\n    save \"\";\n}}\n")
        g = subprocess.Popen([gyre, "-p", f"{tmp}/g"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(g)
        wait_ping(port)
        kvpid = None
        for _ in range(100):
            m = re.search(r"start kv process (\d+)", open(f"{tmp}/g/logs/error.log").read())
            if m:
                kvpid = int(m.group(1)); break
            time.sleep(0.05)
        measure("gyre (forkless)", port, kvpid, keys, size)
        g.terminate(); g.wait()
        # redis
        port = free_port()
        os.makedirs(f"{tmp}/r")
        r = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--dir", f"{tmp}/r", "--logfile", f"{tmp}/r/log", "--appendonly", "no"])
        procs.append(r)
        wait_ping(port)
        measure("redis-server 7.0 (fork)", port, r.pid, keys, size, log=f"{tmp}/r/log")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    main()
