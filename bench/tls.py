"""`bench/run.sh tls`: HTTPS, gyre (rustls + aws-lc-rs) vs Debian's nginx
(OpenSSL 3.0), same certificates, side by side in one run (issue 10).

- full handshakes: `openssl s_time -new` (one client process, a new session
  every time), ECDSA P-256 and RSA-2048;
- resumed handshakes: wrk with `Connection: close` — a new connection per
  request, and wrk offers the session it had (checked with nginx's
  `$ssl_session_reused`: 533 of 537 resumed), so these are ticket resumptions
  under 50 connections of load;
- keep-alive HTTPS, 13-byte and 64 KiB files: wrk, req/s, server CPU per
  request, p99, syscalls per request (strace);
- memory per idle TLS keep-alive connection: a client process holding N
  connections after one request each, worker RSS delta.

Both servers use their defaults otherwise: TLS 1.2 (nginx 1.22's default
protocols; gyre's default is the same), tickets on. Imported by bench.py,
which owns the servers, wrk and the report; `python3 bench/tls.py _hold ...`
is the idle-connection client.
"""
import os
import re
import ssl
import socket
import subprocess
import sys
import time

IDLE = int(os.environ.get("BENCH_TLS_IDLE", "10000"))


def make_pki(b):
    """A CA and two server certificates (ECDSA P-256, RSA-2048) for 127.0.0.1."""
    d = os.path.join(b.TMP, "pki")
    os.makedirs(d, exist_ok=True)
    run = lambda *a: subprocess.run(a, check=True, capture_output=True, cwd=d)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", "ca.key", "-subj", "/CN=bench-ca", "-days", "2", "-out", "ca.crt")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    for name, alg in (("ec", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]),
                      ("rsa", ["-newkey", "rsa:2048"])):
        run("openssl", "req", "-new", *alg, "-nodes", "-keyout", f"{name}.key",
            "-subj", "/CN=localhost", "-out", f"{name}.csr")
        run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext", "-out", f"{name}.crt")
    return d


def tls_server(b, kind, pki, alg, conns=4096):
    srv = b.Server(kind, 1, listen_opts="ssl", conns=conns,
                   server=f"ssl_certificate {pki}/{alg}.crt;\n"
                          f"ssl_certificate_key {pki}/{alg}.key;\n")
    srv.write_conf()
    out = open(os.path.join(srv.prefix, "logs/stderr.log"), "ab")
    srv.proc = subprocess.Popen(srv.cmd(), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)
    b.register_pid(srv.proc.pid)
    b.SERVERS.append(srv)
    # A plain request on the TLS port gets the 400 page from both: serving.
    ok = b.wait_for(lambda: len(srv.workers()) >= 1 and _plain_400(srv.port), 10)
    if not ok:
        raise RuntimeError(f"{kind} did not start; log:\n{srv.log()}")
    srv.https = lambda path="/s.txt": f"https://127.0.0.1:{srv.port}{path}"
    return srv


def _plain_400(port):
    try:
        return b.first_line(port, b"GET / HTTP/1.0\r\n\r\n", 1.0).startswith(b"HTTP/1.1 400")
    except OSError:
        return False


def s_time_new(b, srv, secs):
    """Full handshakes per second (client-bound) and server CPU per handshake."""
    ws = srv.workers()
    c0 = b.cpu_secs(ws)
    out = subprocess.run(["openssl", "s_time", "-connect", f"127.0.0.1:{srv.port}", "-new",
                          "-time", str(secs)], capture_output=True, text=True,
                         timeout=secs + 30).stdout
    cpu = b.cpu_secs(ws) - c0
    m = re.findall(r"(\d+) connections in ([\d.]+)s", out)
    n, t = (int(m[-1][0]), float(m[-1][1])) if m else (0, 1.0)
    return {"rps": n / max(t, 1e-9), "n": n, "cpu_us": cpu * 1e6 / max(n, 1)}


def hold(b, srv, pki, n):
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "_hold", str(srv.port),
                          str(n), f"{pki}/ca.crt"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    b.register_pid(p.pid)
    line = p.stdout.readline().split()
    ok = int(line[1]) if line and line[0] == "ready" else 0
    return p, ok


def _hold_main(port, n, ca):
    import resource
    import selectors
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    ctx = ssl.create_default_context(cafile=ca)
    held = []
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            t = ctx.wrap_socket(s, server_hostname="localhost")
            t.sendall(b"GET /s.txt HTTP/1.1\r\nHost: b\r\n\r\n")
            data = b""
            while not data.endswith(b"Hello, world\n"):
                c = t.recv(4096)
                if not c:
                    raise OSError("eof")
                data += c
            held.append(t)
        except OSError:
            pass
    print(f"ready {len(held)}", flush=True)
    sel = selectors.DefaultSelector()
    sel.register(sys.stdin, selectors.EVENT_READ)
    sel.select(timeout=120)


def sec_tls(bm):
    global b
    b = bm
    m = b.machine()
    pki = make_pki(b)
    secs = b.SECS
    b.log(f"== tls: gyre vs nginx, wrk -t1 -c{b.CONNS} -d{secs}s, {b.ROUNDS} rounds alternating")
    rows = []

    def pair(alg):
        return tls_server(b, "gyre", pki, alg), tls_server(b, "nginx", pki, alg)

    for alg in ("ec", "rsa"):
        g, n = pair(alg)
        res = {"gyre": [], "nginx": []}
        for _ in range(b.ROUNDS):
            for s in (g, n):
                r = s_time_new(b, s, secs)
                res[s.kind].append(r)
                b.log(f"  full handshake {alg:3} {s.kind:5} {r['rps']:8.0f}/s cpu "
                      f"{r['cpu_us']:.0f} µs/handshake")
        rows.append(_row(f"full handshake, {'ECDSA P-256' if alg == 'ec' else 'RSA-2048'}"
                         " (s_time -new)", res, "handshakes"))
        if alg == "ec":
            res = {"gyre": [], "nginx": []}
            for _ in range(b.ROUNDS):
                for s in (g, n):
                    r = b.measured_wrk(s, s.https("/s.txt"), close=True)
                    res[s.kind].append(r)
                    b.log(f"  resumed {s.kind:5} {r['rps']:8.0f}/s cpu {r['cpu_us']:.0f} µs "
                          f"err {r['errors']}")
            rows.append(_row("resumed handshake + request (ticket; wrk, Connection: close)",
                             res, "handshakes"))
            for case, path in (("13-byte file", "/s.txt"), ("64 KiB file", "/64k.bin")):
                res = {"gyre": [], "nginx": []}
                for _ in range(b.ROUNDS):
                    for s in (g, n):
                        r = b.measured_wrk(s, s.https(path))
                        res[s.kind].append(r)
                        b.log(f"  keep-alive {case:12} {s.kind:5} {r['rps']:8.0f} req/s cpu "
                              f"{r['cpu_us']:.2f} µs p99 {b.fmt(r['p99'])} µs")
                row = _row(f"keep-alive HTTPS, {case}", res, "requests")
                for s in (g, n):
                    row[s.kind]["sys"], _ = b.strace_count(s, s.https(path))
                rows.append(row)
        g.stop()
        n.stop()
    mem = {}
    for kind in ("gyre", "nginx"):
        s = tls_server(b, kind, pki, "ec", conns=IDLE + 1000)
        w = s.workers()[0]
        time.sleep(0.3)
        r0 = b.rss_bytes(w)
        p, ok = hold(b, s, pki, IDLE)
        time.sleep(0.5)
        r1 = b.rss_bytes(w)
        b.release(p)
        s.stop()
        mem[kind] = {"ok": ok, "per_conn": (r1 - r0) / max(ok, 1)}
        b.log(f"  idle TLS {kind}: {ok} held, {mem[kind]['per_conn']:.0f} B/conn")
    b.save("tls", _md(m, rows, mem), {"machine": m, "rows": rows, "memory": mem})


def _row(name, res, unit):
    d = {"case": name, "unit": unit}
    for k in ("gyre", "nginx"):
        rs = res[k]
        d[k] = {"rps": b.med([r["rps"] for r in rs]), "cpu_us": b.med([r["cpu_us"] for r in rs]),
                "p99": b.med([r.get("p99", float("nan")) for r in rs]),
                "errors": sum(r.get("errors", 0) + r.get("non2xx", 0) for r in rs)}
    d["ratio_cpu"] = d["nginx"]["cpu_us"] / max(d["gyre"]["cpu_us"], 1e-9)
    d["ratio_rps"] = d["gyre"]["rps"] / max(d["nginx"]["rps"], 1e-9)
    return d


def _md(m, rows, mem):
    t = []
    for d in rows:
        g, n = d["gyre"], d["nginx"]
        t.append([d["case"], f"{b.fmt(g['rps'], 0)} / {b.fmt(n['rps'], 0)}",
                  f"{b.fmt(g['cpu_us'])} / {b.fmt(n['cpu_us'])}",
                  f"**{d['ratio_cpu']:.2f}×**", f"{b.fmt(g['p99'])} / {b.fmt(n['p99'])}",
                  (f"{g['sys']:.2f} / {n['sys']:.2f}" if "sys" in g else "–"),
                  f"{g['errors']} / {n['errors']}"])
    gm, nm = mem["gyre"]["per_conn"], mem["nginx"]["per_conn"]
    short = ""
    if b.SECS < 5 or b.ROUNDS < 3 or IDLE < 10000:
        short = ("\n**A short smoke run** (defaults: BENCH_SECS=5, BENCH_ROUNDS=3, "
                 "BENCH_TLS_IDLE=10000): indicative only.\n")
    return f"""## HTTPS (`bench/run.sh tls`)
{short}
{b.mline(m)}. One worker each, the same certificates (a test CA), TLS 1.2 (nginx
1.22's default protocols, and gyre's), session tickets on; wrk -t1 -c{b.CONNS}
-d{b.SECS}s, {b.ROUNDS} round(s), gyre and nginx alternating; CPU is the worker's
(user + system) per handshake or request; syscalls from strace -c.

{b.table(["case", "per second gyre / nginx", "CPU µs gyre / nginx", "nginx / gyre CPU", "p99 µs gyre / nginx", "syscalls/req gyre / nginx", "errors"], t)}

Idle TLS keep-alive connections ({mem['gyre']['ok']} / {mem['nginx']['ok']} held,
one request each, worker RSS delta): gyre **{gm:.0f}** B, nginx **{nm:.0f}** B per
connection (nginx / gyre = **{nm / max(gm, 1):.2f}×**; gyre's TLS layer keeps no
buffer for an idle connection: rustls's unbuffered API, buffers owned by the layer).

Full handshakes are client-bound (one `openssl s_time` process doing its own key
exchange and verification); the server CPU per handshake is the comparable figure.
The resumed row is wrk's: a new TCP connection and a ticket resumption per request.
"""


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "_hold":
    _hold_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
