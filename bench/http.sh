#!/usr/bin/env bash
# bench http, on loopback, in one run, pairs alternated:
#  (a) server: `nettune bench http-server` against nginx (same 2 workers,
#      `return 200 "Hello, World!"`), both driven by wrk with the same
#      threads, connections and duration. Goal: nettune >= 1.3x nginx req/s.
#  (b) load generator: `nettune bench http` against wrk, both driving the
#      same nginx in closed loop with the same -t/-c. Goal: req/s >= wrk's,
#      p99 within 10% of wrk's.
# Each pair runs RUNS times (order alternated); the summary gives the median
# and the spread (min-max) of each figure and the ratio of the medians.
#
# CPUs (2 vCPUs: generator and server share them):
#  - nettune http-server: --threads 2 --pin 0-1 (listener i on CPU i, CBPF;
#    threads under SCHED_BATCH, its default).
#  - nginx: worker_processes 2, worker_cpu_affinity 01 10, listen ... reuseport
#    (a listener per worker: the same layout without the CBPF program),
#    access_log off, keepalive_requests unlimited, like nettune; under
#    SCHED_BATCH (chrt -b) like nettune, and once per run as stock
#    SCHED_OTHER ("nginx-other").
#  - wrk in (a), "pinned": two `wrk -t1 -c$((CONNS/2))`, under taskset -c 0 and
#    -c 1 (twrk's --pin-cpus, which stock wrk lacks); "unpinned": one
#    `wrk -t2 -c$CONNS`, threads placed by the scheduler.
#  - (b): wrk and nettune bench http both unpinned, -t2 -c$CONNS.
# Everything listens on 127.0.0.1 only; nginx gets a private config, pid file
# and temp dirs under a mktemp dir; every process is started here and killed
# by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
CONNS=${CONNS:-64}
THREADS=2

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
    apt-get update -qq && apt-get install -y -qq nginx-light wrk >/dev/null
fi
cargo build --release --quiet
bin=$PWD/target/release/nettune
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
results=$work/results.csv
: >"$results"
: >"$work/server.log"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_port() { # port: until something accepts, at most 5 s
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "nothing listens on 127.0.0.1:$1" >&2
    exit 1
}

nginx_port=$(free_port)
start_nginx() { # [policy: batch (default) or other]
    local policy=${1:-batch}
    mkdir -p "$work/nginx/tmp"
    cat >"$work/nginx/nginx.conf" <<EOF
worker_processes $THREADS;
worker_cpu_affinity 01 10;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
daemon off;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/nginx/tmp/body;
    proxy_temp_path $work/nginx/tmp/proxy;
    fastcgi_temp_path $work/nginx/tmp/fastcgi;
    uwsgi_temp_path $work/nginx/tmp/uwsgi;
    scgi_temp_path $work/nginx/tmp/scgi;
    keepalive_requests 1000000000;
    server {
        listen 127.0.0.1:$nginx_port reuseport;
        location / { default_type text/plain; return 200 "Hello, World!"; }
    }
}
EOF
    # chrt execs nginx (same PID); the workers inherit the policy.
    chrt --"$policy" 0 nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" -e "$work/nginx/error.log" &
    nginx_pid=$!
    pids+=("$nginx_pid")
    wait_port "$nginx_port"
}
stop_nginx() {
    kill "$nginx_pid"
    wait "$nginx_pid" 2>/dev/null || true
}

start_nettune() { # extra server options
    "$bin" bench http-server --bind 127.0.0.1:0 --threads $THREADS --pin 0-1 "$@" >"$work/server.out" 2>&1 &
    server_pid=$!
    pids+=("$server_pid")
    for _ in $(seq 100); do
        server_addr=$(sed -n 's/.*: listening on \([^ ]*\).*/\1/p' "$work/server.out" | head -1)
        [ -n "$server_addr" ] && break
        sleep 0.05
    done
    [ -n "$server_addr" ] || { cat "$work/server.out" >&2; exit 1; }
}
stop_nettune() { # label for its per-thread lines
    kill -INT "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    { grep '^thread' "$work/server.out" || true; } | sed "s/^/  $1 /" >>"$work/server.log"
}

# A wrk time ("1.18ms", "950.00us", "1.20s") in microseconds.
to_us() {
    awk -v v="$1" 'BEGIN { u = 1
        if (v ~ /us$/) u = 1; else if (v ~ /ms$/) u = 1000; else if (v ~ /s$/) u = 1000000
        sub(/[a-z]+$/, "", v); printf "%.1f", v * u }'
}
wrk_p99_us() { to_us "$(awk '$1 == "99%" { print $2 }' "$1")"; }
wrk_avg_us() { to_us "$(awk '$1 == "Latency" { print $2; exit }' "$1")"; }
wrk_rps() { awk '/^Requests\/sec/ { printf "%.0f", $2 }' "$1"; }

record() { echo "$1,$2,$3,$4,$5,${6:-}" >>"$results"; } # part,what,run,rps,p99_us,avg_us

wrk_pinned() { # part what run url
    local half=$((CONNS / THREADS))
    taskset -c 0 wrk -t1 -c$half -d"$DURATION" "$4" >"$work/w0.out" &
    local a=$!
    taskset -c 1 wrk -t1 -c$half -d"$DURATION" "$4" >"$work/w1.out" &
    local b=$!
    pids+=("$a" "$b")
    wait "$a" "$b"
    record "$1" "$2" "$3" $(($(wrk_rps "$work/w0.out") + $(wrk_rps "$work/w1.out"))) ""
}
wrk_plain() { # part what run url
    wrk -t$THREADS -c"$CONNS" -d"$DURATION" --latency "$4" >"$work/w.out"
    record "$1" "$2" "$3" "$(wrk_rps "$work/w.out")" "$(wrk_p99_us "$work/w.out")" "$(wrk_avg_us "$work/w.out")"
}
nettune_load() { # part what run url
    "$bin" bench http "$4" -t $THREADS -c "$CONNS" -d "$DURATION" --json >"$work/n.json"
    local figures
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
part, what, run = sys.argv[2:5]
print("%s,%s,%s,%.0f,%.1f,%.1f" % (part, what, run, r["requests_per_s"], r["latency"]["p99_us"], r["latency"]["mean_us"]))
c = r.get("latency_wrk_corrected")
if c:
    print("%s,%s-wrk-corrected,%s,%.0f,%.1f,%.1f" % (part, what, run, r["requests_per_s"], c["p99_us"], c["mean_us"]))
' "$work/n.json" "$1" "$2" "$3" >>"$results"
}

echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), wrk $(wrk -v 2>&1 | head -1 | awk '{print $2}'); $RUNS runs of ${DURATION}s, -t$THREADS -c$CONNS; load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# (a) servers, rotating which goes first. nginx runs under SCHED_BATCH
# (chrt -b), the policy nettune's server threads use by default;
# nginx-other is stock SCHED_OTHER. nettune-hash is nettune with
# --locality none: CBPF steers by the CPU that handles a connection's first
# packet, which for unpinned wrk threads on loopback is wherever the thread
# happened to run when it connected.
servers=(nginx nettune nginx-other nettune-hash)
for run in $(seq "$RUNS"); do
    for k in 0 1 2 3; do
        server=${servers[$(((run + k) % 4))]}
        case $server in
            nginx) start_nginx batch; url="http://127.0.0.1:$nginx_port/plaintext" ;;
            nginx-other) start_nginx other; url="http://127.0.0.1:$nginx_port/plaintext" ;;
            nettune) start_nettune; url="http://$server_addr/plaintext" ;;
            nettune-hash) start_nettune --locality none; url="http://$server_addr/plaintext" ;;
        esac
        if [ "$server" != nettune-hash ]; then
            wrk_pinned a "$server/wrk-pinned" "$run" "$url"
        fi
        if [ "$server" != nginx-other ]; then
            wrk_plain a "$server/wrk-unpinned" "$run" "$url"
        fi
        case $server in
            nginx*) stop_nginx ;;
            *) stop_nettune "$server run $run:" ;;
        esac
    done
done

# (b) load generators against one nginx, alternating which goes first.
start_nginx
url="http://127.0.0.1:$nginx_port/plaintext"
for run in $(seq "$RUNS"); do
    if [ $((run % 2)) -eq 1 ]; then
        wrk_plain b wrk "$run" "$url"
        nettune_load b nettune "$run" "$url"
    else
        nettune_load b nettune "$run" "$url"
        wrk_plain b wrk "$run" "$url"
    fi
done
stop_nginx

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "per-thread requests of the nettune servers (CBPF or hash balance), each run:"
cat "$work/server.log"
python3 - "$results" "$CONNS" <<'EOF'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
def series(part, what, col):
    return [float(r[col]) for r in rows if r[0] == part and r[1] == what and r[col]]
def show(part, what):
    rps, p99 = series(part, what, 3), series(part, what, 4)
    line = f"  {what:22} req/s median {statistics.median(rps):9.0f} (min {min(rps):.0f}, max {max(rps):.0f})"
    if p99:
        line += f"   p99 median {statistics.median(p99)/1000:6.2f} ms (min {min(p99)/1000:.2f}, max {max(p99)/1000:.2f})"
    print(line)
    return statistics.median(rps), (statistics.median(p99) if p99 else None)
print("(a) servers, driven by wrk")
for driver, servers in (("wrk-pinned", ["nettune"]), ("wrk-unpinned", ["nettune", "nettune-hash"])):
    n, _ = show("a", f"nginx/{driver}")
    if driver == "wrk-pinned":
        o, _ = show("a", "nginx-other/wrk-pinned")
    for server in servers:
        t, _ = show("a", f"{server}/{driver}")
        print(f"  ratio {server}/nginx ({driver}): {t / n:.2f}x (goal >= 1.30)")
    if driver == "wrk-pinned":
        print(f"  ratio nettune/nginx-other (wrk-pinned): {t / o:.2f}x")
print("(b) load generators, driving nginx")
w, wp = show("b", "wrk")
t, tp = show("b", "nettune")
_, cp = show("b", "nettune-wrk-corrected")
print(f"  ratio req/s nettune/wrk: {t / w:.2f} (goal >= 1.00)")
print(f"  ratio p99 nettune/wrk: measured {tp / wp:.2f}; corrected afterwards as wrk corrects its own: {cp / wp:.2f} (goal 0.90-1.10)")
# Little's law: in a closed loop each connection has one request out at a
# time, so the mean latency cannot exceed connections / (requests/s).
conns = int(sys.argv[2])
for what in ("wrk", "nettune", "nettune-wrk-corrected"):
    checks = [float(r[5]) / (conns / float(r[3]) * 1e6) for r in rows if r[0] == "b" and r[1] == what and r[5]]
    print(f"  {what:22} mean latency / (connections / req/s): " + ", ".join(f"{c:.2f}" for c in checks) + " (a closed loop cannot exceed 1.00)")
EOF
