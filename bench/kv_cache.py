#!/usr/bin/env python3
"""The kv process as a cache, gyre vs redis-server 7.0 side by side:

* pub/sub fan-out: 1 publisher, N subscribers on one channel, and C
  channels x S subscribers: messages delivered per second and the
  server's CPU per delivered message;
* MULTI / SET x10 / EXEC pipelined on a few connections: transactions per
  second and the server's CPU per transaction;
* eviction: maxmemory M with allkeys-lru (and allkeys-lfu), every key SET once
  in a random order (not measured), then a working set
  of about 2 x M, Zipf-distributed GETs with a SET on every miss: hit
  ratio, operations per second, CPU per operation, and the largest
  used_memory seen (it must stay near maxmemory).

    bench/kv_cache.py GYRE_BIN [scale]

`scale` (default 1.0) multiplies every count (0.1 for a smoke run). The
clients are Python (one process, threads): on a small machine they are the
bottleneck for the rates, which is why the CPU figures are the server's own
(utime + stime of its process from /proc, per unit of work) and comparable.
Only 127.0.0.1, temp dirs, processes started here and stopped at the end.
"""
import bisect, itertools, os, random, re, selectors, shutil, socket, subprocess, sys, tempfile, threading, time

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def cpu_secs(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def connect(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def roundtrip(port, *args):
    s = connect(port); s.sendall(cmd(*args)); time.sleep(0.05)
    got = s.recv(1 << 20); s.close(); return got


def info(port, section):
    s = connect(port); s.sendall(cmd("INFO", section))
    got = b""
    s.settimeout(5)
    while True:
        got += s.recv(1 << 20)
        m = re.match(rb"\$(\d+)\r\n", got)
        if m and len(got) >= m.end() + int(m.group(1)) + 2:
            break
    s.close()
    return dict(l.split(":", 1) for l in got.decode().splitlines()[1:] if ":" in l)


def wait_ping(port):
    for _ in range(500):
        try:
            if roundtrip(port, "PING").startswith(b"+PONG"):
                return
        except OSError:
            pass
        time.sleep(0.02)
    raise SystemExit(f"no server on {port}")


class Gyre:
    def __init__(self, tmp, name, extra=""):
        self.port = free_port()
        pre = f"{tmp}/{name}"
        for d in ("conf", "logs"):
            os.makedirs(f"{pre}/{d}", exist_ok=True)
        open(f"{pre}/conf/gyre.conf", "w").write(
            "daemon off;\nerror_log logs/error.log info;\nworker_processes 1;\n"
            "events { worker_connections 8192; }\n"
            f"kv {{\n    listen 127.0.0.1:{self.port};\n    save \"\";\n{extra}\n}}\n")
        self.p = subprocess.Popen([GYRE, "-p", pre], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ping(self.port)
        self.pid = None
        for _ in range(200):
            m = re.search(r"start kv process (\d+)", open(f"{pre}/logs/error.log").read())
            if m:
                self.pid = int(m.group(1)); break
            time.sleep(0.05)

    def stop(self):
        stop(self.p)


class Redis:
    def __init__(self, tmp, name, extra=()):
        self.port = free_port()
        d = f"{tmp}/{name}"
        os.makedirs(d, exist_ok=True)
        self.p = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                   "--save", "", "--dir", d, "--logfile", f"{d}/log",
                                   "--appendonly", "no", *extra])
        wait_ping(self.port)
        self.pid = self.p.pid

    def stop(self):
        stop(self.p)


def stop(p):
    p.terminate()
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()


# ------------------------------------------------------------------ pub/sub

def fanout(srv, channels, per_channel, messages, size=32, min_secs=2.0):
    """At least `messages` PUBLISHes (and at least `min_secs` of them, for
    the CPU clock's 10 ms ticks) round-robin over `channels`, each with
    `per_channel` subscribers; (deliveries/s, server CPU us per delivery,
    every message arrived)."""
    subs = []
    for c in range(channels):
        for _ in range(per_channel):
            s = connect(srv.port)
            s.sendall(cmd("SUBSCRIBE", f"ch:{c}"))
            subs.append(s)
    # Drain the subscribe confirmations.
    for s in subs:
        got = b""
        while got.count(b"\r\n") < 6:
            got += s.recv(4096)
    for s in subs:
        s.setblocking(False)
    payload = b"m" * size
    # Each delivery is one push frame of a known size.
    frame = [len(b"*3\r\n$7\r\nmessage\r\n$%d\r\nch:%d\r\n$%d\r\n%s\r\n" % (
        len(b"ch:%d" % c), c, size, payload)) for c in range(channels)]
    want = [None]
    got = [0]
    done = threading.Event()

    def drain():
        sel = selectors.DefaultSelector()
        for s in subs:
            sel.register(s, selectors.EVENT_READ)
        while want[0] is None or got[0] < want[0]:
            for key, _ in sel.select(1):
                try:
                    b = key.fileobj.recv(1 << 20)
                except BlockingIOError:
                    continue
                got[0] += len(b)
        done.set()

    t = threading.Thread(target=drain, daemon=True)
    pub = connect(srv.port)
    c0, t0 = cpu_secs(srv.pid), time.time()
    t.start()
    batch = 200
    sent = expect = 0
    while sent < messages or time.time() - t0 < min_secs:
        pub.sendall(b"".join(cmd("PUBLISH", f"ch:{(sent + i) % channels}", payload) for i in range(batch)))
        expect += sum(frame[(sent + i) % channels] * per_channel for i in range(batch))
        sent += batch
        replies = b""
        while replies.count(b"\r\n") < batch:
            replies += pub.recv(1 << 16)
    want[0] = expect
    done.wait(120)
    secs, cpu = time.time() - t0, cpu_secs(srv.pid) - c0
    deliveries = sent * per_channel
    for s in subs + [pub]:
        s.close()
    return deliveries / secs, cpu / deliveries * 1e6, got[0] >= expect


# ------------------------------------------------------------ transactions

def transactions(srv, conns, per_conn):
    """`per_conn` MULTI / SET x10 / EXEC per connection, pipelined;
    (transactions/s, server CPU us per transaction)."""
    tx = cmd("MULTI") + b"".join(cmd("SET", f"k{i}", "v" * 16) for i in range(10)) + cmd("EXEC")
    reply_len = len(b"+OK\r\n" + b"+QUEUED\r\n" * 10 + b"*10\r\n" + b"+OK\r\n" * 10)
    chunk = 100

    def one():
        s = connect(srv.port)

        def send():
            for start in range(0, per_conn, chunk):
                s.sendall(tx * min(chunk, per_conn - start))

        w = threading.Thread(target=send, daemon=True); w.start()
        left = per_conn * reply_len
        while left > 0:
            left -= len(s.recv(1 << 20))
        w.join(); s.close()

    c0, t0 = cpu_secs(srv.pid), time.time()
    n = 0
    # Rounds until at least 2 s have passed (the CPU clock ticks at 10 ms).
    while n == 0 or time.time() - t0 < 2.0:
        ts = [threading.Thread(target=one) for _ in range(conns)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        n += conns * per_conn
    secs, cpu = time.time() - t0, cpu_secs(srv.pid) - c0
    return n / secs, cpu / n * 1e6


# ---------------------------------------------------------------- eviction

def zipf_sampler(n, s=1.0, seed=7):
    cum = list(itertools.accumulate(1.0 / (i + 1) ** s for i in range(n)))
    rng = random.Random(seed)
    # A fixed random permutation: popular keys are spread over the key space.
    perm = list(range(n)); rng.shuffle(perm)
    total = cum[-1]
    return lambda: perm[bisect.bisect_left(cum, rng.random() * total)]


def eviction(srv, keys, ops, value_size):
    """Zipf GETs over `keys` keys, SET on a miss, pipelined in batches;
    (hit ratio, ops/s, server CPU us per op, max used_memory seen)."""
    pick = zipf_sampler(keys)
    val = b"v" * value_size
    s = connect(srv.port)
    # Fill first, every key once in a random order, so the measured part
    # starts from a full cache (maxmemory reached, evicting) whatever the
    # number of operations: a Zipf run alone touches too few distinct keys
    # to pass maxmemory at full scale.
    order = list(range(keys)); random.Random(11).shuffle(order)
    for i in range(0, keys, 1000):
        part = order[i:i + 1000]
        s.sendall(b"".join(cmd("SET", b"key:%08d" % k, val) for k in part))
        buf = b""
        while buf.count(b"\r\n") < len(part):
            buf += s.recv(1 << 20)
    hits = misses = 0
    peak = 0
    batch = 100
    c0, t0 = cpu_secs(srv.pid), time.time()
    done = loops = 0
    while done < ops or time.time() - t0 < 2.0:
        loops += 1
        ks = [b"key:%08d" % pick() for _ in range(batch)]
        s.sendall(b"".join(cmd("GET", k) for k in ks))
        buf = b""
        replies = []
        while len(replies) < batch:
            buf += s.recv(1 << 20)
            while True:
                if buf.startswith(b"$-1\r\n"):
                    replies.append(None); buf = buf[5:]; continue
                m = re.match(rb"\$(\d+)\r\n", buf)
                if not m or len(buf) < m.end() + int(m.group(1)) + 2:
                    break
                replies.append(True); buf = buf[m.end() + int(m.group(1)) + 2:]
        miss = [k for k, r in zip(ks, replies) if r is None]
        hits += batch - len(miss); misses += len(miss)
        if miss:
            s.sendall(b"".join(cmd("SET", k, val) for k in miss))
            buf = b""
            while buf.count(b"\r\n") < len(miss):
                buf += s.recv(1 << 20)
        done += batch + len(miss)
        if loops % 50 == 0:
            peak = max(peak, int(info(srv.port, "memory")["used_memory"]))
    secs, cpu = time.time() - t0, cpu_secs(srv.pid) - c0
    peak = max(peak, int(info(srv.port, "memory")["used_memory"]))
    s.close()
    return hits / (hits + misses), done / secs, cpu / done * 1e6, peak, rss_kib(srv.pid)


def rss_kib(pid):
    """The process's VmRSS in KiB (0 when unreadable)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


GYRE = None


def main():
    global GYRE
    GYRE = sys.argv[1]
    scale = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    n = lambda x: max(1, int(x * scale))
    tmp = tempfile.mkdtemp(prefix="gyre-kv-cache-")
    # Every start gets its own directory (a reused one would still hold
    # the old kv process's pid in its log).
    seq = itertools.count()
    servers = [("gyre", lambda name, extra="", rextra=(): Gyre(tmp, f"{name}-{next(seq)}", extra)),
               ("redis", lambda name, extra="", rextra=(): Redis(tmp, f"{name}-{next(seq)}", rextra))]
    try:
        for label, chans, per in (("1 channel x %d subscribers" % n(1000), 1, n(1000)),
                                  ("100 channels x 10 subscribers", 100, 10)):
            res = {}
            for who, start in servers:
                srv = start(f"{who}-ps")
                try:
                    res[who] = fanout(srv, chans, per, n(5000))
                finally:
                    srv.stop()
            g, r = res["gyre"], res["redis"]
            print(f"pub/sub fan-out, {label}: gyre {g[0]:,.0f} deliveries/s, {g[1]:.3f} us CPU each; "
                  f"redis {r[0]:,.0f} deliveries/s, {r[1]:.3f} us CPU each "
                  f"(CPU {r[1] / max(g[1], 1e-9):.2f}x of gyre's){'' if g[2] and r[2] else ' [incomplete delivery]'}",
                  flush=True)
        res = {}
        for who, start in servers:
            srv = start(f"{who}-tx")
            try:
                res[who] = transactions(srv, 4, n(20000))
            finally:
                srv.stop()
        g, r = res["gyre"], res["redis"]
        print(f"MULTI / SET x10 / EXEC, 4 connections pipelined: gyre {g[0]:,.0f} tx/s, {g[1]:.2f} us CPU each; "
              f"redis {r[0]:,.0f} tx/s, {r[1]:.2f} us CPU each (CPU {r[1] / max(g[1], 1e-9):.2f}x of gyre's)",
              flush=True)
        maxmem = n(50) * 1024 * 1024
        value = 100
        # About 2 x maxmemory of data: Redis spends ~ 100 B + key + value a key.
        keys = int(2 * maxmem / (value + 80))
        for policy in ("allkeys-lru", "allkeys-lfu"):
            res = {}
            for who, start in servers:
                srv = start(f"{who}-ev-{policy}",
                            f"    maxmemory {maxmem};\n    maxmemory-policy {policy};",
                            ("--maxmemory", str(maxmem), "--maxmemory-policy", policy))
                try:
                    res[who] = eviction(srv, keys, n(1_000_000), value)
                finally:
                    srv.stop()
            g, r = res["gyre"], res["redis"]
            print(f"eviction {policy}, maxmemory {maxmem >> 20} MiB, {keys:,} keys x {value} B (Zipf GETs, SET on miss): "
                  f"gyre hit ratio {100 * g[0]:.1f}%, {g[1]:,.0f} ops/s, {g[2]:.2f} us CPU/op, used_memory max {g[3] / 2**20:.2f} MiB, RSS at the end {g[4] / 1024:.1f} MiB; "
                  f"redis hit ratio {100 * r[0]:.1f}%, {r[1]:,.0f} ops/s, {r[2]:.2f} us CPU/op, used_memory max {r[3] / 2**20:.2f} MiB, RSS at the end {r[4] / 1024:.1f} MiB",
                  flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
