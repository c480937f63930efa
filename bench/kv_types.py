"""`bench/run.sh kv-types`: the kv process's data types against redis-server 7.0
(issue 13), side by side in one run.

- throughput: redis-benchmark's own type tests at -P 1 and -P 16, req/s and
  server CPU per request; LRANGE_100/300/600 run as custom commands on a list
  filled once beforehand, so their CPU is the LRANGE's alone (redis-benchmark's
  `-t lrange_N` would mix in the LPUSH it fills the list with);
- memory: RSS and INFO used_memory for 1e6 small hashes, sets, sorted sets and
  lists, one sorted set of 1e6 members and one hash of 1e6 fields, each loaded
  with `redis-cli --pipe` into a fresh server;
- latency: ZADD and ZRANGEBYSCORE on the 1e6-member sorted set, one command at a
  time from one client;
- stall: DEL, UNLINK and expiry of a 1e7-element set, hash, sorted set and list
  (BENCH_KVT_STALL_N) while a client sends PING every ms: the worst round trip
  (issue 13: no stall over 5 ms), redis-server with its lazyfree options beside.

A test gyre does not answer yet (an error reply to a probe) is recorded as
"not supported", never as a figure. This module is a part of bench.py: it is
handed bench.py's namespace (servers, redis-benchmark, CPU and RSS readers)
rather than importing it, since bench.py runs as __main__.
"""
import json
import os
import random
import re
import socket
import subprocess
import threading
import time

# (name in the report, redis-benchmark -t name, a probe command that must not
# answer an error on a server that has the type)
TESTS = [
    ("LPUSH", "lpush", ["LPUSH", "probe:l", "x"]),
    ("RPUSH", "rpush", ["RPUSH", "probe:l", "x"]),
    ("LPOP", "lpop", ["LPOP", "probe:l"]),
    ("RPOP", "rpop", ["RPOP", "probe:l"]),
    ("SADD", "sadd", ["SADD", "probe:s", "x"]),
    ("HSET", "hset", ["HSET", "probe:h", "f", "v"]),
    ("SPOP", "spop", ["SPOP", "probe:s"]),
    ("ZADD", "zadd", ["ZADD", "probe:z", "1", "x"]),
    ("ZPOPMIN", "zpopmin", ["ZPOPMIN", "probe:z"]),
    ("MSET", "mset", ["MSET", "probe:a", "1", "probe:b", "2"]),
]
LRANGES = [("LRANGE_100", 99), ("LRANGE_300", 299), ("LRANGE_600", 599)]
GOAL_CPU = {"LRANGE_600": 1.5}  # -P 16 CPU ratio goals; 1.3 for the others
GOAL_CPU_DEFAULT = 1.3
RANDOM_KEYSPACE = 100000  # redis-benchmark -r: aggregates really grow


def resp_call(port, *args, timeout=5.0):
    """One command on a fresh connection; the whole first reply (bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(_enc(args))
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if _complete(data):
                break
        return data
    finally:
        s.close()


def _enc(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def _complete(data):
    """Whether `data` holds one whole RESP2 reply (enough for the replies read here)."""
    def walk(i):
        j = data.find(b"\r\n", i)
        if j < 0:
            return None
        t, body = data[i:i + 1], data[i + 1:j]
        if t in (b"+", b"-", b":"):
            return j + 2
        if t == b"$":
            n = int(body)
            end = j + 2 + max(n, 0) + (2 if n >= 0 else 0)
            return end if len(data) >= end else None
        if t == b"*":
            k = j + 2
            for _ in range(max(int(body), 0)):
                k = walk(k)
                if k is None:
                    return None
            return k
        return j + 2
    try:
        return walk(0) is not None
    except ValueError:
        return False


def info_field(port, field):
    txt = resp_call(port, "INFO", "memory").decode(errors="replace")
    for line in txt.split("\r\n"):
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    return None


def supported(port, probe):
    r = resp_call(port, *probe)
    resp_call(port, "DEL", probe[1])
    return not r.startswith(b"-")


def bench_custom(port, n, pipeline, cmd, conns=50, timeout=120):
    """req/s of one redis-benchmark custom-command run (bounded in time)."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(conns),
            "-n", str(n), "-P", str(pipeline), "-q", *cmd]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout).stdout
    except subprocess.TimeoutExpired:
        return None
    for name, rps in _rates(out):
        return rps
    return None


def _rates(out):
    """(test name, req/s) from redis-benchmark -q output: `NAME (note): N requests per second`."""
    for part in out.replace("\r", "\n").split("\n"):
        m = re.match(r"\s*(.*): ([\d.]+) requests per second", part)
        if m:
            yield m.group(1).split(" ")[0], float(m.group(2))


def throughput(b):
    rows = []
    for pipeline, n in ((1, int(os.environ.get("BENCH_KV_N", "200000"))),
                        (16, int(os.environ.get("BENCH_KV_NP", "2000000")))):
        g, r = b.gyre_kv(), b.Redis().start()
        ok = {}
        for name, _, probe in TESTS:
            ok[name] = {s.kind: supported(b.kv_proc(s)[0], probe) for s in (g, r)}
        for name, _ in LRANGES:
            ok[name] = ok["LPUSH"]
        res = {}
        for rnd in range(b.ROUNDS):
            for name, test, _ in TESTS:
                for srv in (g, r):
                    if not ok[name][srv.kind]:
                        continue
                    port, pid = b.kv_proc(srv)
                    c0 = b.cpu_secs([pid])
                    out = _rb(port, test, n, pipeline)
                    cpu = b.cpu_secs([pid]) - c0
                    rps = out.get(name)
                    if rps:
                        res.setdefault((name, srv.kind), []).append((rps, cpu * 1e6 / n))
                        b.log(f"  -P {pipeline:2} round {rnd + 1} {name:10} {srv.kind:5} "
                              f"{rps:10.0f} req/s cpu {cpu * 1e6 / n:.2f} µs/req")
            for srv in (g, r):
                if not ok["LPUSH"][srv.kind]:
                    continue
                port, pid = b.kv_proc(srv)
                resp_call(port, "DEL", "bench:list")
                for i in range(0, 600, 100):
                    resp_call(port, "RPUSH", "bench:list", *[f"e{j}" for j in range(i, i + 100)])
                for name, stop in LRANGES:
                    m = max(n // (10 if stop > 100 else 5), 1000)
                    c0 = b.cpu_secs([pid])
                    rps = bench_custom(port, m, pipeline, ["LRANGE", "bench:list", "0", str(stop)])
                    cpu = b.cpu_secs([pid]) - c0
                    if rps:
                        res.setdefault((name, srv.kind), []).append((rps, cpu * 1e6 / m))
                        b.log(f"  -P {pipeline:2} round {rnd + 1} {name:10} {srv.kind:5} "
                              f"{rps:10.0f} req/s cpu {cpu * 1e6 / m:.2f} µs/req")
        for name in [t[0] for t in TESTS] + [x[0] for x in LRANGES]:
            d = {"pipeline": pipeline, "test": name, "n": n}
            for k in ("gyre", "redis"):
                xs = res.get((name, k), [])
                d[k] = {"rps": b.med([x[0] for x in xs]), "cpu_us": b.med([x[1] for x in xs]),
                        "supported": ok[name][k]}
            d["ratio_rps"] = d["gyre"]["rps"] / max(d["redis"]["rps"], 1e-9)
            d["ratio_cpu"] = d["redis"]["cpu_us"] / max(d["gyre"]["cpu_us"], 1e-9)
            rows.append(d)
        g.stop()
        r.stop()
    return rows


def _rb(port, test, n, pipeline):
    """redis-benchmark -t TEST with a random keyspace (so sets and sorted sets
    grow instead of holding one member)."""
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", test, "-c", "50",
           "-n", str(n), "-P", str(pipeline), "-r", str(RANDOM_KEYSPACE), "-q"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=180).stdout
    except subprocess.TimeoutExpired:
        return {}
    return dict(_rates(out))


# ------------------------------------------------------------------- memory

def _datasets(n_keys, n_big):
    """name → (description, function writing the RESP commands to a file, probe)."""
    def small(cmd, key, members):
        def gen(f):
            rnd = random.Random(7)
            for i in range(n_keys):
                f.write(_enc([cmd, f"{key}:{i}", *members(rnd, i)]))
        return gen

    def big(cmd, key, members_of):
        def gen(f):
            rnd = random.Random(9)
            batch = 1000
            for i in range(0, n_big, batch):
                f.write(_enc([cmd, key, *members_of(rnd, range(i, min(i + batch, n_big)))]))
        return gen

    return {
        "hashes": (f"{n_keys:,} hashes of 10 fields (f0..f9 → 8-byte values)",
                   small("HSET", "h", lambda r, i: [x for k in range(10)
                                                    for x in (f"f{k}", f"v{r.randrange(10**7):07d}")]),
                   ["HSET", "probe:h", "f", "v"]),
        "sets": (f"{n_keys:,} sets of 10 integers",
                 small("SADD", "s", lambda r, i: [str(r.randrange(10**9)) for _ in range(10)]),
                 ["SADD", "probe:s", "1"]),
        "zsets": (f"{n_keys:,} sorted sets of 10 members (8-byte names, integer scores)",
                  small("ZADD", "z", lambda r, i: [x for k in range(10)
                                                   for x in (str(r.randrange(10**6)), f"m{k}{r.randrange(10**6):06d}")]),
                  ["ZADD", "probe:z", "1", "a"]),
        "lists": (f"{n_keys:,} lists of 10 items (8 bytes)",
                  small("RPUSH", "l", lambda r, i: [f"i{r.randrange(10**7):07d}" for _ in range(10)]),
                  ["RPUSH", "probe:l", "a"]),
        "big_zset": (f"one sorted set of {n_big:,} members",
                     big("ZADD", "bigz", lambda r, rng: [x for i in rng
                                                         for x in (str(r.randrange(10**9)), f"member:{i}")]),
                     ["ZADD", "probe:z", "1", "a"]),
        "big_hash": (f"one hash of {n_big:,} fields",
                     big("HSET", "bigh", lambda r, rng: [x for i in rng
                                                         for x in (f"field:{i}", f"v{r.randrange(10**7):07d}")]),
                     ["HSET", "probe:h", "f", "v"]),
    }


def memory(b):
    n_keys = int(os.environ.get("BENCH_KVT_KEYS", "1000000"))
    n_big = int(os.environ.get("BENCH_KVT_BIG", "1000000"))
    out = {"n_keys": n_keys, "n_big": n_big, "rows": []}
    for name, (desc, gen, probe) in _datasets(n_keys, n_big).items():
        path = os.path.join(b.TMP, f"kvt-{name}.resp")
        with open(path, "wb") as f:
            gen(f)
        row = {"name": name, "desc": desc}
        for kind in ("gyre", "redis"):
            srv = b.gyre_kv() if kind == "gyre" else b.Redis().start()
            port, pid = b.kv_proc(srv)
            if not supported(port, probe):
                row[kind] = {"supported": False}
                srv.stop()
                continue
            time.sleep(0.2)
            r0, u0 = b.rss_bytes(pid), info_field(port, "used_memory")
            t0 = time.time()
            with open(path, "rb") as f:
                p = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--pipe"],
                                   stdin=f, capture_output=True, text=True, timeout=600)
            secs = time.time() - t0
            time.sleep(0.5)
            r1, u1 = b.rss_bytes(pid), info_field(port, "used_memory")
            errors = "errors: 0" not in p.stdout
            row[kind] = {"supported": True, "rss": r1 - r0, "used": (u1 or 0) - (u0 or 0),
                         "load_secs": secs, "errors": errors}
            b.log(f"  {name:9} {kind:5} RSS +{(r1 - r0) / 2**20:.1f} MiB, used_memory "
                  f"+{((u1 or 0) - (u0 or 0)) / 2**20:.1f} MiB, load {secs:.1f} s"
                  f"{' (ERRORS in the load)' if errors else ''}")
            if name == "big_zset":
                row[kind]["latency"] = zset_latency(port)
            srv.stop()
        os.unlink(path)
        out["rows"].append(row)
    return out


def zset_latency(port, n=5000):
    """p50/p99/max µs of ZADD and ZRANGEBYSCORE (10 members) on `bigz`, one
    command at a time on one connection."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    rnd = random.Random(3)
    res = {}
    try:
        for name, mk in (("ZADD", lambda: ["ZADD", "bigz", str(rnd.randrange(10**9)), f"new:{rnd.randrange(10**6)}"]),
                         ("ZRANGEBYSCORE", lambda: ["ZRANGEBYSCORE", "bigz", str(rnd.randrange(10**9)),
                                                    "+inf", "LIMIT", "0", "10"])):
            lat = []
            for _ in range(n):
                req = _enc(mk())
                t0 = time.perf_counter()
                s.sendall(req)
                data = b""
                while not _complete(data):
                    chunk = s.recv(65536)
                    if not chunk:
                        raise OSError("closed")
                    data += chunk
                lat.append((time.perf_counter() - t0) * 1e6)
            lat.sort()
            res[name] = {"p50": lat[len(lat) // 2], "p99": lat[int(len(lat) * 0.99)], "max": lat[-1]}
    finally:
        s.close()
    return res


# -------------------------------------------------------------------- stall

STALL_TYPES = tuple(os.environ.get("BENCH_KVT_STALL_TYPES", "set hash zset list").split())
# (label, servers, CONFIG SET pairs sent first, how the copy goes). redis frees
# a big value in its bio thread with lazyfree-lazy-user-del (DEL), UNLINK and
# lazyfree-lazy-expire; its defaults free DEL and expiry on the main thread,
# shown once as the reference for what a stall looks like.
STALL_WAYS = [
    ("DEL", ("gyre",), [], "del"),
    ("UNLINK", ("gyre",), [], "unlink"),
    ("expiry", ("gyre",), [], "expire"),
    ("DEL, lazyfree-lazy-user-del no (default)", ("redis",),
     [("lazyfree-lazy-user-del", "no")], "del"),
    ("DEL, lazyfree-lazy-user-del yes", ("redis",), [("lazyfree-lazy-user-del", "yes")], "del"),
    ("UNLINK", ("redis",), [], "unlink"),
    ("expiry, lazyfree-lazy-expire yes", ("redis",), [("lazyfree-lazy-expire", "yes")], "expire"),
]


def _stall_fill(kind, n, f):
    """RESP commands building key `src`: a `kind` of n elements, 1000 per command."""
    for i in range(0, n, 1000):
        js = range(i, min(i + 1000, n))
        if kind == "set":
            args = [b"SADD", b"src", *(b"m%d" % j for j in js)]
        elif kind == "hash":
            args = [b"HSET", b"src", *(x for j in js for x in (b"f%d" % j, b"v%d" % j))]
        elif kind == "zset":
            args = [b"ZADD", b"src", *(x for j in js for x in (b"%d" % j, b"m%d" % j))]
        else:
            args = [b"RPUSH", b"src", *(b"i%d" % j for j in js)]
        f.write(_enc(args))


class _Conn:
    """One blocking RESP connection (deadline per reply)."""

    def __init__(self, port, timeout):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def call(self, *args):
        self.s.sendall(_enc(args))
        data = b""
        while not _complete(data):
            chunk = self.s.recv(65536)
            if not chunk:
                raise OSError("connection closed")
            data += chunk
        return data

    def close(self):
        self.s.close()


def _field(reply, name):
    for line in reply.decode(errors="replace").split("\r\n"):
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    return None


def _pinger(port, stop, out):
    """PING every millisecond until `stop` is set; (send time, round trip s)."""
    c = _Conn(port, 30)
    try:
        while not stop.is_set():
            t0 = time.perf_counter()
            if c.call("PING") != b"+PONG\r\n":
                raise OSError("PING")
            out.append((t0, time.perf_counter() - t0))
            time.sleep(0.001)
    except OSError as e:
        out.append((time.perf_counter(), float("inf")))
        print(f"  pinger: {e}", flush=True)
    finally:
        c.close()


# PINGs before the command: as long as a freeing takes, so the rare slow
# PING of a shared machine shows in "before" about as often as in "during".
STALL_BEFORE_S = float(os.environ.get("BENCH_KVT_STALL_BEFORE", "2.0"))


def _stall_one(port, way, limit_s=300.0):
    """Copy `src` to `dst`, free `dst` the given way while a client PINGs
    every ms; the worst PING round trip before and while it goes, the
    command's own time, and how long until the memory is given back."""
    c = _Conn(port, 600)
    try:
        if c.call("COPY", "src", "dst") != b":1\r\n":
            return None
        pings, stop = [], threading.Event()
        th = threading.Thread(target=_pinger, args=(port, stop, pings))
        th.start()
        time.sleep(STALL_BEFORE_S)
        t0 = time.perf_counter()
        if way == "expire":
            r = c.call("PEXPIRE", "dst", "1")
        else:
            r = c.call(way.upper(), "dst")
        t_cmd = time.perf_counter() - t0
        ok = r == b":1\r\n"
        # Gone from the keyspace (expiry: the active cycle's work), then
        # from the lazyfree queue.
        t_end = t0 + limit_s
        while time.perf_counter() < t_end:
            keys = c.call("DBSIZE")
            pend = _field(c.call("INFO", "memory"), "lazyfree_pending_objects")
            if keys == b":1\r\n" and (pend or 0) == 0:
                break
            time.sleep(0.005)
        t_free = time.perf_counter() - t0
        time.sleep(0.1)
        stop.set()
        th.join(30)
    finally:
        c.close()
    # A PING answered after the command was sent counts for the command
    # (one sent just before it waits behind it on a server that stalls).
    before = sorted(lat for (t, lat) in pings if t + lat < t0)
    during = sorted(lat for (t, lat) in pings if t + lat >= t0)
    slow = lambda xs: sum(1 for x in xs if x > 0.005)  # noqa: E731
    return {"ok": ok and t_free < limit_s, "cmd_ms": t_cmd * 1e3,
            "worst_before_ms": (before[-1] if before else 0) * 1e3,
            "worst_ms": (during[-1] if during else 0) * 1e3,
            "p99_ms": (during[int(len(during) * 0.99)] if during else 0) * 1e3,
            "pings": len(during), "slow": slow(during), "slow_before": slow(before),
            "pings_before": len(before), "free_s": t_free}


def stall(b):
    n = int(os.environ.get("BENCH_KVT_STALL_N", "10000000"))
    out = {"n": n, "rows": [], "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
           "before_s": STALL_BEFORE_S}
    for kind in STALL_TYPES:
        path = os.path.join(b.TMP, f"kvt-stall-{kind}.resp")
        with open(path, "wb") as f:
            _stall_fill(kind, n, f)
        for name in ("gyre", "redis"):
            srv = b.gyre_kv() if name == "gyre" else b.Redis().start()
            port, _pid = b.kv_proc(srv)
            try:
                with open(path, "rb") as f:
                    subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--pipe"],
                                   stdin=f, capture_output=True, text=True, timeout=900)
                for label, servers, conf, way in STALL_WAYS:
                    if name not in servers:
                        continue
                    for k, v in conf:
                        resp_call(port, "CONFIG", "SET", k, v)
                    r = _stall_one(port, way)
                    if r is None:
                        b.log(f"  stall {kind} {name} {label}: COPY failed")
                        continue
                    r.update({"type": kind, "server": name, "way": label})
                    out["rows"].append(r)
                    b.log(f"  stall {kind:4} {name:5} {label}: command {r['cmd_ms']:.1f} ms, worst PING "
                          f"{r['worst_ms']:.1f} ms, p99 {r['p99_ms']:.1f}, > 5 ms: {r['slow']} of "
                          f"{r['pings']} (before {r['slow_before']} of {r['pings_before']}, worst "
                          f"{r['worst_before_ms']:.1f}), freed in "
                          f"{r['free_s']:.2f} s{'' if r['ok'] else ' (NOT OK)'}")
            finally:
                srv.stop()
        os.unlink(path)
    return out


# ------------------------------------------------------------------- report

def kept(d, part):
    """The note for a part whose rows come from an earlier run."""
    k = d.get("kept", {}).get(part)
    return f"\n*Not rerun this time: these rows are from the earlier run ({k}).*\n" if k else ""


def md(b, d):
    m = d["machine"]
    rows = []
    for r in d.get("throughput", []):
        if not r["gyre"]["supported"]:
            rows.append([f"{r['test']}, -P {r['pipeline']}", "not supported by gyre yet", "", "", ""])
            continue
        goal = GOAL_CPU.get(r["test"], GOAL_CPU_DEFAULT) if r["pipeline"] == 16 else None
        mark = "" if goal is None else (f" {'✓' if r['ratio_cpu'] >= goal else '✗'} (≥ {goal})")
        rows.append([f"{r['test']}, -P {r['pipeline']}",
                     f"{b.fmt(r['gyre']['rps'], 0)} / {b.fmt(r['redis']['rps'], 0)}",
                     f"{r['ratio_rps']:.2f}×",
                     f"{r['gyre']['cpu_us']:.2f} / {r['redis']['cpu_us']:.2f}",
                     f"**{r['ratio_cpu']:.2f}×**{mark}"])
    mem = d.get("memory", {})
    mrows, lrows = [], []
    for r in mem.get("rows", []):
        g, x = r.get("gyre", {}), r.get("redis", {})
        if not g.get("supported"):
            mrows.append([r["desc"], "not supported by gyre yet", "", "", ""])
            continue
        goal = 0.7 if r["name"] == "big_zset" else (0.8 if r["name"] in ("hashes", "sets", "zsets", "lists") else None)
        ratio = g["rss"] / max(x.get("rss", 0), 1)
        mark = "" if goal is None else f" {'✓' if ratio <= goal else '✗'} (≤ {goal})"
        mrows.append([r["desc"], f"{g['rss'] / 2**20:.1f} / {x.get('rss', 0) / 2**20:.1f}",
                      f"**{ratio:.2f}×**{mark}",
                      f"{g['used'] / 2**20:.1f} / {x.get('used', 0) / 2**20:.1f}",
                      f"{g['load_secs']:.1f} / {x.get('load_secs', 0):.1f}"])
        for k in ("gyre", "redis"):
            for cmd, v in r.get(k, {}).get("latency", {}).items():
                lrows.append([k, cmd, f"{v['p50']:.0f}", f"{v['p99']:.0f}", f"{v['max']:.0f}"])
    st = d.get("stall", {})
    srows = [[r["type"], r["server"], r["way"], f"{r['cmd_ms']:.1f}",
              f"**{r['worst_ms']:.1f}**" + ("" if r["server"] != "gyre" else
                                            (" ✓" if r["worst_ms"] <= 5 else " ✗") + " (≤ 5)"),
              f"{r.get('p99_ms', 0):.1f}",
              f"{r.get('slow', 0)} of {r['pings']:,} / {r.get('slow_before', 0)} of {r.get('pings_before', 0)}",
              f"{r['worst_before_ms']:.1f}", f"{r['free_s']:.2f}" + ("" if r["ok"] else " (not done)")]
             for r in st.get("rows", [])]
    stall_md = ""
    if srows:
        stall_md = f"""
### Freeing a {st['n']:,}-element key while a client sends PING every ms
{kept(d, "stall")}
Each type's key `src` is loaded with `redis-cli --pipe`, then for every row `COPY src dst`
and `dst` goes the row's way (expiry: `PEXPIRE dst 1`, left to the active expire cycle),
while another connection sends PING, waits for PONG and sleeps 1 ms. Worst PING is the
longest round trip answered from the command on until the key is gone and
`lazyfree_pending_objects` is 0 ("freed in"), with the 99th percentile and how many PINGs took
over 5 ms then and in the {st.get('before_s', 0.3):g} s before; "before" is the worst before, the noise floor of the
machine (load average at the start: {st.get('load', '?')}). Goal: no stall over 5 ms in gyre.
redis runs its bio thread for the lazyfree rows; its default DEL frees on the main thread.
On a loaded machine single PINGs wait for a CPU: the kv process's own lazyfree turns (4,096
elements each) are timed in-process by `cargo test --release -p gyre-kv --lib
db::tests::measure_lazyfree -- --ignored --nocapture` (median, p99, longest, turns over 1 and 5 ms).

{b.table(["type", "server", "way", "command ms", "worst PING ms", "p99 ms", "> 5 ms during / before", "worst before ms", "freed in s"], srows)}
"""
    return f"""## KV data types vs redis (`bench/run.sh kv-types`)

{b.mline(m)}. gyre (release, 1 worker, `kv {{ listen …; hz 10; maxclients 20000; }}`)
against redis-server {b.redis_version()} from Debian (`--save '' --appendonly no`), fresh
per table. CPU is utime+stime of gyre's kv process or of redis-server.

### Throughput: redis-benchmark's type tests, `-c 50 -r {RANDOM_KEYSPACE}`
{kept(d, "throughput")}
One run per test and server, alternating, {b.ROUNDS} rounds, medians. LRANGE_N is
`LRANGE bench:list 0 N-1` on a 600-item list filled once (a custom command, so the CPU is
the LRANGE's alone). Goal at -P 16: CPU per request ≥ 1.3× less than redis (LRANGE_600 ≥ 1.5×).
Cells are gyre / redis.

{b.table(["test", "req/s gyre / redis", "req/s ratio", "µs CPU/req", "CPU ratio redis/gyre"], rows)}

### Memory: each data set loaded with `redis-cli --pipe` into a fresh server
{kept(d, "memory")}
RSS and INFO used_memory growth over the empty server, MiB, gyre / redis. Goals: RSS
≤ 0.8× redis's for the 1e6 small aggregates, ≤ 0.7× for the large sorted set.

{b.table(["data set", "RSS MiB gyre / redis", "RSS ratio", "used_memory MiB", "load s"], mrows)}

### Latency on the large sorted set (one client, one command at a time, µs)

{b.table(["server", "command", "p50", "p99", "max"], lrows)}
{stall_md}"""


def sec_kv_types(b):
    """BENCH_KVT_PARTS ("throughput memory stall" by default) picks the parts to
    run; a part left out keeps its rows from the last saved run, named as
    such in the report."""
    data = {"machine": b.machine()}
    b.log("== kv-types: gyre kv process vs redis-server " + b.redis_version())
    parts = os.environ.get("BENCH_KVT_PARTS", "throughput memory stall").split()
    try:
        with open(os.path.join(b.RESULTS, "kv_types.json")) as f:
            last = json.load(f)
    except (OSError, ValueError):
        last = {}
    for part, run in (("throughput", throughput), ("memory", memory), ("stall", stall)):
        if part in parts:
            data[part] = run(b)
        elif part in last:
            data[part] = last[part]
            data.setdefault("kept", {})[part] = last.get("kept", {}).get(part) or b.mline(last["machine"])
    b.save("kv_types", md(b, data), data)
