#!/usr/bin/env bash
# gyre vs nginx (and gyre's kv process vs redis-server) benchmarks and fault tests; issue 6.
#   bench/run.sh [http|http-conf|core|memory|balance|ceiling|faults|faults-kv|kv|kv-fair|kv-types|kv-persist|kv-cache|tls|proxy|all|report]...
#   bench/run.sh fuzz [seconds]   cargo-fuzz targets in fuzz/, each for seconds (300);
#                                 not part of all (nightly Rust, 3 x 5 minutes)
# Needs: Debian's nginx wrk apache2-utils linux-perf strace valgrind redis-server redis-tools (installed with
# apt-get when missing), gcc, python3 (no packages), cargo. Runs everything on
# 127.0.0.1; rewrites BENCHMARKS.md and bench/results.svg from bench/results/.
# Knobs: BENCH_SECS BENCH_ROUNDS BENCH_CONNS BENCH_STRACE_SECS BENCH_CHURN_SECS
#        BENCH_FAULTS_QUICK=1 (skip the long connection-churn test);
#        kv: BENCH_KV_N BENCH_KV_NP (redis-benchmark -n at -P 1 / -P 16),
#        BENCH_KV_IDLE (idle clients), BENCH_KV_KEYS (keys for the expiry test);
#        kv-types: BENCH_KVT_KEYS (small aggregates, 1e6), BENCH_KVT_BIG (members of the big ones, 1e6),
#        BENCH_KVT_PARTS ("throughput memory stall"; a part left out keeps its last rows),
#        BENCH_KVT_STALL_N (elements of the key freed in the stall part, 1e7);
#        kv-persist: BENCH_PERSIST_KEYS (the dataset, 1e6);
#        kv-cache: BENCH_KV_CACHE_SCALE (multiplies its counts, 1.0; 0.1 for a smoke run);
#        fuzz: BENCH_FUZZ_SECS (seconds per target when none is given);
#        http-conf: BENCH_LIMIT_SECS (seconds of each limit_req run, 10; see bench/http_conf.py);
#        proxy: BENCH_PROXY_KINDS ("gyre nginx"), BENCH_PROXY_SLOW_N/_SLOW_SECS/_SLOW_RATE,
#        BENCH_PROXY_FAILOVER_SECS (see bench/proxy.py).
set -euo pipefail
cd "$(dirname "$0")/.."

# fuzz and report need neither the servers nor gyre's release build.
servers=0 fuzz=0
for a in "${@:-all}"; do
    case $a in
        fuzz) fuzz=1 ;;
        report | [0-9]*) ;;
        *) servers=1 ;;
    esac
done

if ((servers)); then
    need=()
    for t in nginx:nginx wrk:wrk ab:apache2-utils perf:linux-perf strace:strace valgrind:valgrind redis-server:redis-server redis-cli:redis-tools; do
        command -v "${t%%:*}" >/dev/null 2>&1 || need+=("${t#*:}")
    done
    if ((${#need[@]})); then
        echo "installing: ${need[*]}"
        apt-get install -y "${need[@]}" || { apt-get update && apt-get install -y "${need[@]}"; }
    fi
    command -v gcc >/dev/null || { echo "gcc is needed for bench/ceiling.c" >&2; exit 1; }

    cargo build --release -p gyre
fi

if ((fuzz)); then
    cargo +nightly --version >/dev/null 2>&1 || rustup toolchain install nightly --profile minimal
    cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz
fi

export BENCH_TMP
BENCH_TMP=$(mktemp -d /tmp/gyre-bench-XXXXXX)
cleanup() {
    # bench.py stops its servers itself; this catches anything left behind.
    if [[ -f "$BENCH_TMP/pids" ]]; then
        # Only processes that are still ours: their command line names the
        # temp dir (servers, the ceiling) or bench.py (client processes).
        ours() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qE "$BENCH_TMP|bench/bench.py"; }
        for sig in TERM KILL; do
            while read -r pid; do
                ours "$pid" || continue
                kill -"$sig" -- "-$pid" 2>/dev/null || kill -"$sig" "$pid" 2>/dev/null || true
            done <"$BENCH_TMP/pids"
            sleep 0.5
        done
    fi
    rm -rf "$BENCH_TMP"
}
trap cleanup EXIT

ulimit -n 20000 2>/dev/null || true
python3 bench/bench.py "${@:-all}"
