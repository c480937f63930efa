"""`bench/run.sh http-conf`: gyre vs Debian's nginx with the directives real
sites configure, side by side in one run (issue 11, "Benchmarks").

- a realistic configuration (`REAL_HTTP` / `real_server()` below, nginx.conf
  syntax, one text for both): 30 regex locations tried in order (the request
  matches the last), a `map` on `$http_user_agent` with regex keys, a
  `log_format` with 10 variables written to a file, `expires`, `add_header`
  with variables, `try_files`; keep-alive, one worker. Server CPU per request
  (/proc), and callgrind instructions per request (one process,
  `master_process off`). Once as sites write it (`access_log` without
  `buffer=`: nginx writes a line per request) and once with `buffer=64k`
  (nginx's best case; gyre always buffers);
- gzip of a 64 KiB text file at `gzip_comp_level` 1 and 6: CPU per response
  (/proc and callgrind) and the compressed size, checked to decompress to the
  file;
- `limit_req` at 1,000 r/s across two workers (one key: every client is
  127.0.0.1), wrk flooding: the rate of 200s held, without and with
  `burst=20 nodelay`.

Before measuring, one request of each kind checks that both servers answer as
the configuration says (status, headers, a log line), so a row never measures
a 404. Access and error logs are truncated while wrk runs (a watcher thread),
so no file grows past a few MB. Everything on 127.0.0.1; every run is bounded
in time (defaults: about 5 minutes for the section). Imported by bench.py,
which owns the servers, wrk and the report. Knobs: BENCH_SECS, BENCH_ROUNDS,
BENCH_CONNS, BENCH_CG_SECS (bench.py's), BENCH_LIMIT_SECS (seconds of each
limit_req run, 10).
"""
import gzip
import http.client
import os
import random
import threading
import time

LIMIT_SECS = int(os.environ.get("BENCH_LIMIT_SECS", "10"))
RATE = 1000

# A phone's browser: the map's `mobile` entry matches it after trying the
# regexes before it.
UA = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 "
      "(KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1")
REAL_HEADERS = (f"User-Agent: {UA}", "Referer: https://www.example.com/blog/")
REAL_PATH = "/s.txt"

REAL_HTTP = r"""
map $http_user_agent $ua_class {
    default                     desktop;
    "~*(bot|crawler|spider)"    bot;
    ~*^curl/                    cli;
    "~*(iphone|android).*mobile" mobile;
}
log_format main '$remote_addr [$time_local] "$request" $status $body_bytes_sent '
                '"$http_referer" "$http_user_agent" $request_time $ua_class $host';
"""

# 30 regex locations as a site's configuration has them (hidden files,
# backups, asset classes with their expiry, API and blog routes); the bench
# request (/s.txt) matches only the last, so all 30 are tried.
REGEX_LOCATIONS = r"""
location ~ ^/api/v1/users/(\d+)$ { return 200 "user $1\n"; }
location ~ ^/api/v1/orders/(?<oid>\d+)/items$ { return 200 "order $oid\n"; }
location ~ ^/api/v2/ { return 410; }
location ~* ^/wp-(?:admin|login|includes|content)/ { return 403; }
location ~ /\.(?!well-known/) { return 404; }
location ~* \.(?:bak|conf|dist|fla|in[ci]|log|orig|psd|sh|sql|sw[op])$ { return 404; }
location ~* \.php$ { return 404; }
location ~* \.(?:cgi|pl|py|rb)$ { return 403; }
location ~* ^/static/.+\.(?:woff2?|ttf|otf|eot)$ { expires 1y; add_header Access-Control-Allow-Origin "*"; }
location ~* \.(?:png|jpe?g|gif|webp|avif|ico|bmp)$ { expires 30d; add_header Cache-Control "public"; }
location ~* \.svgz?$ { expires 30d; }
location ~* \.(?:mp4|webm|ogv|mp3|ogg|m4a)$ { expires 30d; }
location ~* \.(?:zip|tgz|gz|rar|bz2|7z|tar)$ { expires max; }
location ~ "^/blog/(\d{4})/(\d{2})/([\w-]+)/?$" { try_files /blog/$1-$2-$3.html =404; }
location ~ "^/u/(?<user>[a-z0-9_]{1,32})$" { return 302 /users/$user; }
location ~ ^/(?:en|de|fr|es|it)/(.+)$ { try_files /$1 =404; }
location ~* ^/downloads/.+\.pdf$ { expires 1d; add_header Content-Disposition attachment; }
location ~ ^/healthz$ { return 200 "ok\n"; }
location ~ ^/metrics$ { return 403; }
location ~* \.(?:xml|rss|atom)$ { expires 1h; }
location ~* \.json$ { expires -1; add_header X-Content-Type-Options nosniff; }
location ~* \.webmanifest$ { expires 1w; }
location ~* \.(?:htc|cur)$ { expires 1w; }
location ~ ^/search/(?<q>[^/]+)$ { return 302 /search?q=$q; }
location ~ ^/product/(\d+)-([a-z0-9-]+)$ { try_files /product/$1.html =404; }
location ~* /(?:cache|tmp|uploads)/.*\.php$ { return 403; }
location ~* ^/(?:robots\.txt|favicon\.ico)$ { expires 1d; access_log off; }
location ~* \.(?:css|js)$ { expires 7d; add_header Cache-Control "public"; add_header X-UA-Class $ua_class; try_files $uri =404; }
location ~ "^/assets/[0-9a-f]{8,}/" { expires max; }
location ~* \.(?:txt|html?)$ {
    expires 1h;
    add_header X-Host $host;
    add_header X-UA-Class $ua_class;
    try_files $uri $uri/ =404;
}
"""


def real_server(buffered):
    buf = " buffer=64k flush=1s" if buffered else ""
    return (f"access_log logs/access.log main{buf};\n"
            "location / { try_files $uri $uri/ /index.html; }\n"
            "location = /index.html { expires epoch; add_header X-Frame-Options SAMEORIGIN; }\n"
            + REGEX_LOCATIONS)


GZIP_LEVELS = (1, 6)
GZIP_HEADERS = ("Accept-Encoding: gzip",)


def gzip_server():
    return "".join(f"location /gz{n}/ {{ gzip on; gzip_comp_level {n}; gzip_types text/plain; "
                   "gzip_min_length 256; gzip_vary on; }\n" for n in GZIP_LEVELS)


LIMIT_HTTP = (f"limit_req_zone $binary_remote_addr zone=plain:10m rate={RATE}r/s;\n"
              f"limit_req_zone $binary_remote_addr zone=burst:10m rate={RATE}r/s;\n")
LIMIT_SERVER = ("location = /lim.txt { limit_req zone=plain; }\n"
                "location = /limb.txt { limit_req zone=burst burst=20 nodelay; }\n")
LIMIT_CASES = (("no burst", "/lim.txt"), ("burst=20 nodelay", "/limb.txt"))


def text_64k():
    """64 KiB of HTML-like English text, the same bytes on every run."""
    rnd = random.Random(11)
    words = ("the of and to in is that for it as was with be by on not he this are or his "
             "from at which but have an they you were her she there been one all we their "
             "request server configuration location variable header response client worker "
             "module nginx compression buffer connection timeout cache static regular "
             "expression gzip level proxy upstream event loop kernel socket").split()
    out = []
    size = 0
    while size < 64 * 1024:
        n = rnd.randint(8, 30)
        line = " ".join(rnd.choice(words) for _ in range(n))
        line = f'<p class="c{rnd.randint(1, 9)}">{line.capitalize()}.</p>\n'
        out.append(line)
        size += len(line)
    return "".join(out).encode()[:64 * 1024]


TEXT = text_64k()


def prepare(srv):
    """The files the configurations serve, in a server's prefix."""
    html = os.path.join(srv.prefix, "html")
    files = {"index.html": b"<!doctype html><title>app</title>\n", "lim.txt": b"ok\n",
             "limb.txt": b"ok\n"}
    for n in GZIP_LEVELS:
        os.makedirs(os.path.join(html, f"gz{n}"), exist_ok=True)
        files[f"gz{n}/t.txt"] = TEXT
    for name, data in files.items():
        with open(os.path.join(html, name), "wb") as f:
            f.write(data)


def server_pair(b, **kw):
    out = []
    for kind in ("gyre", "nginx"):
        s = b.Server(kind, kw.get("workers", 1), http=kw.get("http", ""),
                     server=kw.get("server", ""))
        prepare(s)
        out.append(s.start())
    return out


def get(port, path, headers=()):
    """One request: (status, lowercased headers, body as received)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.putrequest("GET", path, skip_accept_encoding=True)
        for h in headers:
            k, v = h.split(": ", 1)
            c.putheader(k, v)
        c.endheaders()
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


class Truncator:
    """Keeps the servers' log files small while wrk runs: truncated to zero
    when past 4 MB, every 0.3 s (both servers append with O_APPEND, so a
    truncated file is written from its start)."""

    def __init__(self, servers):
        self.paths = [os.path.join(s.prefix, "logs", n) for s in servers
                      for n in ("access.log", "error.log")]
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.wait(0.3):
            for p in self.paths:
                try:
                    if os.path.getsize(p) > 4 << 20:
                        os.truncate(p, 0)
                except OSError:
                    pass

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *a):
        self.stop.set()
        self.t.join(5)


def check_real(b, s):
    """The bench request goes through the 30th regex location, the map and
    the log format: 200, the location's headers, a log line with `mobile`."""
    log = os.path.join(s.prefix, "logs/access.log")
    st, h, body = get(s.port, REAL_PATH, REAL_HEADERS)
    ok = (st == 200 and body == b.SMALL and h.get("x-ua-class") == "mobile"
          and h.get("cache-control") == "max-age=3600" and "expires" in h
          and h.get("x-host", "").startswith("127.0.0.1"))
    st2, _, body2 = get(s.port, "/app/route", REAL_HEADERS)  # try_files' SPA fallback
    ok = ok and st2 == 200 and body2.startswith(b"<!doctype")
    st3, _, body3 = get(s.port, "/api/v1/users/42")
    ok = ok and st3 == 200 and body3 == b"user 42\n"
    # The log line may be buffered (gyre always, nginx with buffer=): a
    # second later it has been flushed.
    line = ""
    for _ in range(30):
        try:
            with open(log) as f:
                line = next((x for x in f if REAL_PATH in x), "")
        except OSError:
            pass
        if line:
            break
        time.sleep(0.1)
    ok = ok and " mobile 127.0.0.1" in line and UA in line
    if not ok:
        b.log(f"  check {s.kind}: FAILED {st} {h} {body!r} / {st2} {body2[:20]!r} / {st3} "
              f"{body3!r} / log {line!r}")
    return ok


def realistic(b):
    rows = []
    for buffered in (False, True):
        case = "realistic config" + (", access_log buffer=64k" if buffered else "")
        g, n = server_pair(b, http=REAL_HTTP, server=real_server(buffered))
        checks = {s.kind: check_real(b, s) for s in (g, n)}
        res = {"gyre": [], "nginx": []}
        with Truncator([g, n]):
            for _ in range(b.ROUNDS):
                for s in (g, n):
                    r = b.measured_wrk(s, s.url(REAL_PATH), headers=REAL_HEADERS)
                    res[s.kind].append(r)
                    b.log(f"  {case:40} {s.kind:5} {r['rps']:8.0f} req/s cpu "
                          f"{r['cpu_us']:.2f} µs/req p99 {b.fmt(r['p99'])} µs "
                          f"err {r['errors']} non2xx {r['non2xx']}")
        g.stop()
        n.stop()
        d = _row(b, case, res, checks)
        if not buffered and b.shutil.which("valgrind"):
            for k in ("gyre", "nginx"):
                d[k]["instr"] = b.callgrind_per_request(
                    k, REAL_PATH, False, headers=REAL_HEADERS, prepare=prepare,
                    http=REAL_HTTP, server=real_server(False))
                b.log(f"  callgrind {k}: {d[k]['instr']:,.0f} instructions/req")
        rows.append(d)
    return rows


def gzip_rows(b):
    rows = []
    g, n = server_pair(b, server=gzip_server())
    for level in GZIP_LEVELS:
        path = f"/gz{level}/t.txt"
        checks, size = {}, {}
        for s in (g, n):
            st, h, body = get(s.port, path, GZIP_HEADERS)
            try:
                same = gzip.decompress(body) == TEXT
            except (OSError, EOFError):
                same = False
            checks[s.kind] = (st == 200 and h.get("content-encoding") == "gzip" and same
                              and h.get("vary") == "Accept-Encoding")
            size[s.kind] = len(body)
            if not checks[s.kind]:
                b.log(f"  check {s.kind} gzip {level}: FAILED {st} {h} {len(body)} B")
        res = {"gyre": [], "nginx": []}
        for _ in range(b.ROUNDS):
            for s in (g, n):
                r = b.measured_wrk(s, s.url(path), headers=GZIP_HEADERS)
                res[s.kind].append(r)
                b.log(f"  gzip level {level} {s.kind:5} {r['rps']:8.0f} resp/s cpu "
                      f"{r['cpu_us']:.1f} µs/resp, {size[s.kind]} B err {r['errors']}")
        d = _row(b, f"gzip, 64 KiB text, gzip_comp_level {level}", res, checks)
        d["level"] = level
        for k in ("gyre", "nginx"):
            d[k]["bytes"] = size[k]
        d["ratio_bytes"] = size["gyre"] / max(size["nginx"], 1)
        if b.shutil.which("valgrind"):
            for k in ("gyre", "nginx"):
                d[k]["instr"] = b.callgrind_per_request(
                    k, path, False, headers=GZIP_HEADERS, prepare=prepare, server=gzip_server(),
                    conns=1)  # ~100 responses in the run: none left in flight uncounted
                b.log(f"  callgrind {k}: {d[k]['instr']:,.0f} instructions/response")
        rows.append(d)
    g.stop()
    n.stop()
    return rows


def limit_rows(b):
    rows = []
    g, n = server_pair(b, workers=2, http=LIMIT_HTTP, server=LIMIT_SERVER)
    with Truncator([g, n]):
        for case, path in LIMIT_CASES:
            d = {"case": f"limit_req rate={RATE}r/s, {case}, 2 workers"}
            for s in (g, n):
                ws = s.workers()
                c0 = [b.cpu_secs([w]) for w in ws]
                r = b.wrk(s.url(path), secs=LIMIT_SECS, latency=False)
                busy = [b.cpu_secs([w]) - c for w, c in zip(ws, c0)]
                secs = r["reqs"] / r["rps"] if r["rps"] else float(LIMIT_SECS)
                ok200 = r["reqs"] - r["non2xx"]
                d[s.kind] = {"rate": ok200 / max(secs, 1e-9), "accepted": ok200,
                             "rejected": r["non2xx"], "reqs": r["reqs"], "secs": secs,
                             "errors": r["errors"], "worker_cpu": busy,
                             "dev": ok200 / max(secs, 1e-9) / RATE - 1}
                b.log(f"  {d['case']:44} {s.kind:5} {d[s.kind]['rate']:7.1f} r/s held "
                      f"({ok200} of {r['reqs']} in {secs:.2f} s), worker CPU "
                      + ", ".join(f"{x:.2f}" for x in busy) + " s")
            rows.append(d)
    g.stop()
    n.stop()
    return rows


def _row(b, case, res, checks):
    d = {"case": case, "checks": checks}
    for k in ("gyre", "nginx"):
        rs = res[k]
        d[k] = {"rps": b.med([r["rps"] for r in rs]), "cpu_us": b.med([r["cpu_us"] for r in rs]),
                "p99": b.med([r["p99"] for r in rs]),
                "errors": sum(r["errors"] + r["non2xx"] for r in rs)}
    d["ratio_cpu"] = d["nginx"]["cpu_us"] / max(d["gyre"]["cpu_us"], 1e-9)
    d["ratio_rps"] = d["gyre"]["rps"] / max(d["nginx"]["rps"], 1e-9)
    return d


def sec_http_conf(bm):
    b = bm
    m = b.machine()
    b.log(f"== http-conf: gyre vs nginx, wrk -t1 -c{b.CONNS} -d{b.SECS}s, {b.ROUNDS} rounds "
          "alternating")
    real = realistic(b)
    gz = gzip_rows(b)
    lim = limit_rows(b)
    b.save("http_conf", md(b, m, real, gz, lim),
           {"machine": m, "realistic": real, "gzip": gz, "limit_req": lim})


def _mark(ok):
    return "✓" if ok else "✗"


def _bytes_mark(r):
    """✓ within the goal's band; a smaller output than nginx's by more is
    outside it but not worse, and says so."""
    if abs(r - 1) <= 0.02:
        return "✓"
    return "✗ (smaller)" if r < 1 else "✗"


def _instr(d):
    g, n = d["gyre"].get("instr"), d["nginx"].get("instr")
    if not g or not n:
        return "–", "–"
    return f"{g:,.0f} / {n:,.0f}", f"**{n / g:.2f}×**"


def md(b, m, real, gz, lim):
    t = []
    for d in real:
        ins, ratio = _instr(d)
        t.append([d["case"], f"{b.fmt(d['gyre']['rps'], 0)} / {b.fmt(d['nginx']['rps'], 0)}",
                  f"{d['gyre']['cpu_us']:.2f} / {d['nginx']['cpu_us']:.2f}",
                  f"**{d['ratio_cpu']:.2f}×** {_mark(d['ratio_cpu'] >= 1.3)} (≥ 1.3)",
                  ins, ratio, f"{b.fmt(d['gyre']['p99'])} / {b.fmt(d['nginx']['p99'])}",
                  f"{d['gyre']['errors']} / {d['nginx']['errors']}",
                  " / ".join(_mark(d["checks"][k]) for k in ("gyre", "nginx"))])
    z = []
    for d in gz:
        ins, ratio = _instr(d)
        z.append([f"level {d['level']}", f"{b.fmt(d['gyre']['rps'], 0)} / {b.fmt(d['nginx']['rps'], 0)}",
                  f"{d['gyre']['cpu_us']:.1f} / {d['nginx']['cpu_us']:.1f}",
                  f"**{d['ratio_cpu']:.2f}×** {_mark(d['ratio_cpu'] >= 1.0)} (≥ 1.0)",
                  ins, ratio,
                  f"{d['gyre']['bytes']:,} / {d['nginx']['bytes']:,}",
                  f"**{d['ratio_bytes']:.3f}** {_bytes_mark(d['ratio_bytes'])} (1 ± 0.02)",
                  " / ".join(_mark(d["checks"][k]) for k in ("gyre", "nginx"))])
    lr = []
    for d in lim:
        g, n = d["gyre"], d["nginx"]
        lr.append([d["case"], f"**{g['rate']:.1f}** {_mark(abs(g['dev']) <= 0.05)}",
                   f"**{n['rate']:.1f}** {_mark(abs(n['dev']) <= 0.05)}",
                   f"{g['dev']:+.1%} / {n['dev']:+.1%}",
                   f"{g['accepted']:,} of {g['reqs']:,} / {n['accepted']:,} of {n['reqs']:,}",
                   " + ".join(f"{x:.2f}" for x in g["worker_cpu"]) + " / "
                   + " + ".join(f"{x:.2f}" for x in n["worker_cpu"]),
                   f"{g['errors']} / {n['errors']}"])
    short = ""
    if b.SECS < 5 or b.ROUNDS < 3 or LIMIT_SECS < 10:
        short = ("\n**A short smoke run** (defaults: BENCH_SECS=5, BENCH_ROUNDS=3, "
                 "BENCH_LIMIT_SECS=10): indicative only.\n")
    return f"""## HTTP with a real site's directives (`bench/run.sh http-conf`)
{short}
{b.mline(m)}. gyre (release) and nginx {b.nginx_version()}, one configuration text for
both (bench/http_conf.py), both running at once, wrk -t1 -c{b.CONNS} -d{b.SECS}s,
{b.ROUNDS} round(s) alternating; medians. CPU is the worker's utime+stime from /proc
per request; instructions are callgrind's (user space, one process with
`master_process off`, wrk {b.CG_SECS} s minus a start/stop run; one connection for
gzip, whose responses are slow under valgrind). "checks" is one
request of each kind answered as the configuration says (status, headers, log line;
for gzip: `Content-Encoding`, `Vary` and a body that decompresses to the file).
Cells are gyre / nginx.

**A realistic configuration** (keep-alive, 1 worker): 30 regex locations in order
(the request, `GET {REAL_PATH}` with a phone's User-Agent and a Referer, matches the
30th: `expires 1h`, two `add_header` with variables, `try_files $uri $uri/ =404`), a
`map $http_user_agent` with regex keys, `log_format` with 10 variables written to
logs/access.log (nginx writes a line per request without `buffer=`; gyre buffers
always, 32 KiB or a second). Goal: nginx's CPU per request ≥ 1.3× gyre's.

{b.table(["case", "req/s", "µs CPU/req", "nginx/gyre CPU (goal)", "instructions/req", "nginx/gyre instr", "p99 µs", "errors", "checks"], t)}

**gzip of a 64 KiB text file** (`gzip on; gzip_types text/plain; gzip_vary on`,
keep-alive, 1 worker, `Accept-Encoding: gzip`): goals CPU per response ≤ nginx's and
the same bytes ± 2%.

{b.table(["gzip_comp_level", "responses/s", "µs CPU/resp", "nginx/gyre CPU (goal)", "instructions/resp", "nginx/gyre instr", "bytes", "bytes gyre/nginx (goal)", "checks"], z)}

**limit_req across two workers** (`limit_req_zone $binary_remote_addr rate={RATE}r/s`,
one key: every client is 127.0.0.1; wrk -c{b.CONNS} flooding for {LIMIT_SECS} s, the
excess answered 503): the rate of 200s over wrk's run (`burst=20` adds its 20 once).
Goal: within 5% of {RATE} r/s, as nginx. Without a burst nginx itself holds only about
half the rate under a flood (a request is refused unless a whole millisecond passed since
the key's last one by the refusing worker's cached clock, and two workers' clocks
differ); gyre, counting as nginx does, holds the same. With `burst=20` both hold it.

{b.table(["case", "gyre r/s", "nginx r/s", "off the rate gyre / nginx", "200s of all", "worker CPU s gyre / nginx", "socket errors"], lr)}
"""
