"""`bench/run.sh proxy`: gyre vs Debian's nginx as the reverse proxy in front
of the same backend, side by side in one run (issue 12).

The backend is an nginx (one worker) serving `return 200` and static files of
13 B, 64 KiB, 1 MiB and a sparse 1 GiB one. Both proxies read one
configuration text (`PROXY_HTTP` / `PROXY_SERVER` below, nginx.conf syntax):
- keep-alive clients (wrk -c CONNS) through `upstream { keepalive 32; }`
  with `proxy_http_version 1.1` and an empty `Connection`, and the same
  without upstream keep-alive (a connect per proxied request): req/s, the
  proxy worker's CPU per request (/proc), p99, syscalls per proxied request
  (perf tracepoints, else strace);
- 100 slow clients each downloading the 1 GiB file at ~256 KiB/s for
  BENCH_PROXY_SLOW_SECS (buffering on, `proxy_max_temp_file_size 0` so the
  bound is the buffers, not a disk file): the proxy worker's RSS before and at
  its peak, and per in-flight request;
- failover: two backends behind `proxy_next_upstream error timeout`, one
  killed (SIGKILL) and restarted every 2 s for BENCH_PROXY_FAILOVER_SECS
  while wrk runs; failed client requests counted (socket errors + non-2xx).

gyre's side runs only if gyre accepts the configuration (`gyre -t`); until
its proxy module exists it is skipped with gyre's own error. BENCH_PROXY_KINDS
(default "gyre nginx") picks the proxies. Everything on 127.0.0.1; every
loop is bounded in time. Imported by bench.py, which owns servers, wrk and the
report; `python3 bench/proxy.py _slow ...` is the slow-client process.
"""
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

SLOW_N = int(os.environ.get("BENCH_PROXY_SLOW_N", "100"))
SLOW_SECS = int(os.environ.get("BENCH_PROXY_SLOW_SECS", "15"))
SLOW_RATE = int(os.environ.get("BENCH_PROXY_SLOW_RATE", str(256 * 1024)))
FO_SECS = int(os.environ.get("BENCH_PROXY_FAILOVER_SECS", "20"))
KINDS = os.environ.get("BENCH_PROXY_KINDS", "gyre nginx").split()
BIG = 1 << 30
MIB = bytes((i * 13 + 5) % 251 for i in range(1 << 20))

CASES = [("return 200", "r"), ("13-byte file", "s.txt"), ("64 KiB file", "64k.bin"),
         ("1 MiB file", "1m.bin")]
MODES = [("upstream keepalive 32", "/ka/"), ("no upstream keep-alive", "/noka/")]


def proxy_http(bport, fo_port):
    return f"""upstream ka {{ server 127.0.0.1:{bport}; keepalive 32; }}
upstream noka {{ server 127.0.0.1:{bport}; }}
upstream fo {{
    server 127.0.0.1:{bport} max_fails=1 fail_timeout=2s;
    server 127.0.0.1:{fo_port} max_fails=1 fail_timeout=2s;
    keepalive 32;
}}
"""


PROXY_SERVER = """location /ka/ { proxy_pass http://ka/; proxy_http_version 1.1;
    proxy_set_header Connection ""; }
location /noka/ { proxy_pass http://noka/; }
location /slow/ { proxy_pass http://ka/; proxy_http_version 1.1;
    proxy_set_header Connection ""; proxy_max_temp_file_size 0; }
location /fo/ { proxy_pass http://fo/; proxy_http_version 1.1;
    proxy_set_header Connection ""; proxy_next_upstream error timeout;
    proxy_connect_timeout 1s; }
"""


def backend(b, port=None):
    """An nginx backend (one worker) with the bench files, a 1 MiB one and a
    sparse 1 GiB one (no disk blocks: reading it costs no I/O)."""
    s = b.Server("nginx", 1, http="keepalive_requests 1000000;", port=port)
    with open(os.path.join(s.prefix, "html/1m.bin"), "wb") as f:
        f.write(MIB)
    with open(os.path.join(s.prefix, "html/big.bin"), "wb") as f:
        f.truncate(BIG)
    return s.start()


def gyre_refusal(b, bport, fo_port):
    """None if gyre accepts the proxy configuration, else its message."""
    if not os.path.exists(b.GYRE):
        return f"no gyre binary at {b.GYRE}"
    s = b.Server("gyre", 1, http=proxy_http(bport, fo_port), server=PROXY_SERVER)
    s.write_conf()
    r = subprocess.run(s.cmd("-t"), capture_output=True, text=True, timeout=30)
    if r.returncode == 0:
        return None
    lines = [x for x in (r.stderr + r.stdout).splitlines() if "emerg" in x or "error" in x]
    msg = (lines[0] if lines else r.stderr.strip() or f"exit {r.returncode}").strip()
    return re.sub(r" in /\S+:\d+$", "", msg)  # the temp prefix says nothing


def proxy(b, kind, bport, fo_port):
    return b.Server(kind, 1, http=proxy_http(bport, fo_port), server=PROXY_SERVER).start()


def _row(b, case, mode, res, sc):
    d = {"case": case, "mode": mode}
    for k, rs in res.items():
        d[k] = {"rps": b.med([r["rps"] for r in rs]), "cpu_us": b.med([r["cpu_us"] for r in rs]),
                "p99": b.med([r["p99"] for r in rs]),
                "errors": sum(r["errors"] + r["non2xx"] for r in rs),
                "sys": sc[k][0], "sys_top": sc[k][1]}
    if "gyre" in d and "nginx" in d:
        d["ratio_cpu"] = d["nginx"]["cpu_us"] / max(d["gyre"]["cpu_us"], 1e-9)
        d["ratio_rps"] = d["gyre"]["rps"] / max(d["nginx"]["rps"], 1e-9)
    return d


def throughput(b, proxies):
    rows = []
    for mode, prefix in MODES:
        for case, path in CASES:
            res = {k: [] for k in proxies}
            for _ in range(b.ROUNDS):
                for k, s in proxies.items():
                    r = b.measured_wrk(s, s.url(prefix + path))
                    res[k].append(r)
                    b.log(f"  {mode:22} {case:12} {k:5} {r['rps']:8.0f} req/s cpu "
                          f"{r['cpu_us']:.2f} µs/req p99 {b.fmt(r['p99'])} µs "
                          f"err {r['errors']} non2xx {r['non2xx']}")
            sc = {}
            for k, s in proxies.items():
                sc[k] = b.syscall_count(s, s.url(prefix + path))
                b.log(f"  syscalls {k}: {sc[k][0]:.2f}/req ({sc[k][1]})")
            rows.append(_row(b, case, mode, res, sc))
    return rows


def slow_clients(b, srv):
    """RSS of the proxy worker while SLOW_N clients trickle-download 1 GiB."""
    w = srv.workers()[0]
    time.sleep(0.3)
    r0 = b.rss_bytes(w)
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "_slow", str(srv.port),
                          "/slow/big.bin", str(SLOW_N), str(SLOW_SECS), str(SLOW_RATE)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    b.register_pid(p.pid)
    peak, samples = r0, []
    end = time.time() + SLOW_SECS + 30
    while p.poll() is None and time.time() < end:
        try:
            r = b.rss_bytes(w)
        except OSError:
            break
        peak = max(peak, r)
        samples.append(r)
        time.sleep(0.25)
    try:
        out, _ = p.communicate(timeout=max(1, end - time.time()))
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    f = (out.strip().splitlines() or [""])[-1].split()
    started = int(f[1]) if len(f) >= 4 and f[0] == "done" else 0
    got = int(f[2]) if len(f) >= 4 else 0
    late = b.med(samples[len(samples) // 2:]) if samples else float("nan")
    d = {"rss0": r0, "peak": peak, "late": late, "started": started, "bytes": got,
         "per_req": (peak - r0) / max(started, 1)}
    b.log(f"  slow clients {srv.kind}: {started}/{SLOW_N} streaming, {got / 2**20:.0f} MiB read, "
          f"worker RSS {r0 / 2**20:.1f} → peak {peak / 2**20:.1f} MiB "
          f"({d['per_req'] / 1024:.1f} KiB per in-flight request)")
    return d


def _kill9(srv):
    ws = srv.workers()
    for pid in [srv.proc.pid, *ws]:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        srv.proc.wait(5)
    except subprocess.TimeoutExpired:
        pass


def failover(b, srv, fo_port):
    """wrk through upstream `fo` while its second backend is killed and
    restarted every 2 s; returns the failed client requests."""
    stop = threading.Event()
    cycles = [0]
    box = [backend(b, fo_port)]

    def flap():
        t0 = time.time()
        while not stop.is_set() and time.time() - t0 < FO_SECS + 5:
            _kill9(box[0])
            cycles[0] += 1
            if stop.wait(1.0):
                break
            try:
                box[0] = backend(b, fo_port)
            except RuntimeError as e:
                b.log(f"  failover: backend restart failed: {e}")
            stop.wait(1.0)

    t = threading.Thread(target=flap, daemon=True)
    t.start()
    r = b.wrk(srv.url("/fo/s.txt"), secs=FO_SECS, conns=10)
    stop.set()
    t.join(15)
    _kill9(box[0])
    d = {"reqs": r["reqs"], "errors": r["errors"], "non2xx": r["non2xx"], "cycles": cycles[0],
         "socket_errors": r.get("socket_errors", "")}
    b.log(f"  failover {srv.kind}: {r['reqs']} requests, {r['errors']} socket errors, "
          f"{r['non2xx']} non-2xx, {cycles[0]} kills")
    return d


def sec_proxy(bm):
    global b
    b = bm
    m = b.machine()
    # connect/socket/getsockopt name the upstream side in the breakdown.
    b.SYSCALLS.extend(x for x in ("connect", "socket", "getsockopt", "ioctl", "readv", "recvmsg")
                      if x not in b.SYSCALLS)
    be = backend(b)
    fo_port = b.free_port()
    kinds = [k for k in ("gyre", "nginx") if k in KINDS]
    skipped = None
    if "gyre" in kinds:
        skipped = gyre_refusal(b, be.port, fo_port)
        if skipped:
            b.log(f"== proxy: gyre side skipped: gyre refuses the proxy configuration: {skipped}")
            kinds.remove("gyre")
    b.log(f"== proxy: {' vs '.join(kinds)} as the proxy, wrk -t1 -c{b.CONNS} -d{b.SECS}s, "
          f"{b.ROUNDS} round(s), backend nginx on {be.port}")
    proxies = {k: proxy(b, k, be.port, fo_port) for k in kinds}
    for s in proxies.values():  # both see the same warm backend
        b.wrk(s.url("/ka/s.txt"), secs=1, latency=False)
    rows = throughput(b, proxies)
    slow = {k: slow_clients(b, s) for k, s in proxies.items()}
    fo = {k: failover(b, s, fo_port) for k, s in proxies.items()}
    for s in proxies.values():
        s.stop()
    be.stop()
    b.save("proxy", _md(m, rows, slow, fo, skipped),
           {"machine": m, "rows": rows, "slow": slow, "failover": fo, "gyre_skipped": skipped})


def _md(m, rows, slow, fo, skipped):
    kinds = [k for k in ("gyre", "nginx") if k in slow]

    def pair(d, f):
        return " / ".join(f(d[k]) if k in d else "–" for k in ("gyre", "nginx"))

    t = []
    for d in rows:
        t.append([d["mode"], d["case"], pair(d, lambda x: b.fmt(x["rps"], 0)),
                  pair(d, lambda x: b.fmt(x["cpu_us"])),
                  f"**{d['ratio_cpu']:.2f}×**" if "ratio_cpu" in d else "–",
                  pair(d, lambda x: b.fmt(x["p99"])), pair(d, lambda x: f"{x['sys']:.2f}"),
                  pair(d, lambda x: str(x["errors"]))])
    st = [[k, f"{s['started']} / {SLOW_N}", f"{s['bytes'] / 2**20:.0f}",
           f"{s['rss0'] / 2**20:.1f} → {s['peak'] / 2**20:.1f}",
           f"{s['per_req'] / 1024:.1f}"] for k, s in slow.items()]
    ft = [[k, str(f["reqs"]), str(f["errors"] + f["non2xx"]), str(f["cycles"]),
           f.get("socket_errors") or "–"] for k, f in fo.items()]
    short = ""
    if b.SECS < 5 or b.ROUNDS < 3:
        short = ("\n**A short smoke run** (defaults: BENCH_SECS=5, BENCH_ROUNDS=3): "
                 "indicative only.\n")
    gnote = ""
    if skipped:
        gnote = (f"\n**gyre not measured**: it refuses the proxy configuration "
                 f"(`{skipped}`); the nginx figures are the baseline to beat.\n")
    return f"""## Reverse proxy (`bench/run.sh proxy`)
{short}{gnote}
{b.mline(m)}. {' and '.join(kinds)} as the proxy (one worker each) in front of the
same nginx backend (one worker: `return 200`, static files), one configuration
text for both; wrk -t1 -c{b.CONNS} -d{b.SECS}s keep-alive clients, {b.ROUNDS}
round(s), proxies alternating. CPU is the proxy worker's (user + system) per
request; syscalls per proxied request are the proxy worker's (perf tracepoints,
else strace -c). With {b.CONNS} clients and `keepalive 32`, connections beyond the
32 cached ones are closed after their request (the `close`/`epoll_ctl` share in
the keep-alive rows), the same for both proxies.

{b.table(["upstream", "case", "req/s gyre / nginx", "proxy CPU µs gyre / nginx", "nginx / gyre CPU", "p99 µs gyre / nginx", "syscalls/req gyre / nginx", "errors"], t)}

{SLOW_N} slow clients each reading `/slow/big.bin` (1 GiB, proxy buffering on,
`proxy_max_temp_file_size 0`) at ~{SLOW_RATE // 1024} KiB/s for {SLOW_SECS} s (16 KiB
receive buffers), proxy worker VmRSS:

{b.table(["proxy", "streaming", "MiB read", "worker RSS MiB (before → peak)", "KiB per in-flight request"], st)}

Failover: upstream of two backends (`max_fails=1 fail_timeout=2s`,
`proxy_next_upstream error timeout`, keepalive 32), the second SIGKILLed and
restarted every 2 s for {FO_SECS} s under wrk -c10 (`/fo/s.txt`):

{b.table(["proxy", "requests", "failed (socket errors + non-2xx)", "kills", "wrk socket errors"], ft)}
"""


def _slow_main(port, path, n, secs, rate):
    """n GETs of `path`, each read at ~rate B/s with a 16 KiB receive
    buffer, for `secs`; prints 'done STARTED BYTES SECS'."""
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    t0 = time.time()
    sel = selectors.DefaultSelector()
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n".encode())
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, [0])
    started = total = 0
    per_tick = max(rate // 20, 1)  # 20 reads a second
    end = t0 + secs
    while sel.get_map() and time.time() < end:
        for key, _ in sel.select(timeout=0.05):
            try:
                c = key.fileobj.recv(per_tick)
            except BlockingIOError:
                continue
            except OSError:
                c = b""
            if not c:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                continue
            if key.data[0] == 0:
                started += 1
            key.data[0] += len(c)
            total += len(c)
        time.sleep(0.05)
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    print(f"done {started} {total} {time.time() - t0:.1f}", flush=True)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "_slow":
    _slow_main(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
               int(sys.argv[6]))
