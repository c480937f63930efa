"""Side-by-side: gyre with `events { coalesce on|off; }` and nginx, Connection: close (issue 16).

Run from the repository root after `cargo build --release -p gyre`: python3 bench/coalesce_ab.py
(R=rounds, BENCH_SECS=seconds per wrk run). Prints one line per workers/case, medians."""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as b
rounds = int(os.environ.get("R", "3"))
for workers in (1, 2):
    g_on = b.Server("gyre", workers).start()
    g_off = b.Server("gyre", workers, events="coalesce off;").start()
    n = b.Server("nginx", workers).start()
    for case, path in b.CASES:
        res = {}
        for _ in range(rounds):
            for name, s in (("on", g_on), ("off", g_off), ("nginx", n)):
                r = b.measured_wrk(s, s.url(path), close=True)
                res.setdefault(name, []).append(r)
        line = f"{workers}w {case:13}"
        for name in ("on", "off", "nginx"):
            rs = res[name]
            line += (f" | {name} {b.med([r['rps'] for r in rs]):7.0f} rps p50 {b.med([r['p50'] for r in rs]):5.0f}"
                     f" p99 {b.med([r['p99'] for r in rs]):6.0f} cpu {b.med([r['cpu_us'] for r in rs]):5.2f}")
        print(line, flush=True)
    for s in (g_on, g_off, n):
        s.stop()
