#!/usr/bin/env bash
# bench/http-locality.sh: the kernel-vs-DPDK HTTP article's per-core layout
# behind a single-queue veth, before and after `apply --profile http`, as
# docs/benchmarks.md ("An HTTP scenario on two CPUs") reports it. A
# benchmark, not a test: it prints figures and ratios.
#
# A testbed with one RX/TX queue per veth end (`nettune testbed up
# --queues 1`); in its server namespace `nettune bench http-server --pin
# 0-1` (a thread on each CPU, each connection given to the thread of the
# CPU that received its first packet) runs for the whole benchmark. Two
# states alternate, the order swapped each round, ROUNDS (5) rounds, each
# phase one wrk run of WINDOW (5) seconds after SETTLE (0.5 s):
#   before  rps_cpus of the server's rx-0 = 2 (CPU 1 only): every packet,
#           so every connection, lands on CPU 1
#   after   `nettune apply --profile http --netns SERVER` (RPS over both
#           CPUs), undone with `nettune rollback` for the next "before"
# for each load in LOADS: `pinned` (wrk -t1 -c64 pinned to CPU 0 with
# taskset) and `unpinned` (wrk -t2 -c64). Reported: wrk's Requests/sec,
# the median [range] of each state and of the per-round ratios, and the
# connections each server thread accepted in each state (from its JSON
# report: before, all on CPU 1).
#
# The load average at the start and the end is printed, the end once the
# run's own processes have gone (it waits up to 2 minutes for their share
# to decay below 1.5); a run whose load average was 1.5 or more at either
# end is labelled noisy: its figures are not results. Needs root (namespaces), wrk (Debian package), python3 and
# nettune (NETTUNE, else target/release/nettune, else the one on PATH).
# Everything it makes has a unique name and is removed on exit, also on
# failure or Ctrl-C; it stops only the processes it started, by PID.
# Traffic stays between the testbed's namespaces (198.18.0.0/30).
set -euo pipefail

ROUNDS=${ROUNDS:-5}
WINDOW=${WINDOW:-5}
SETTLE=${SETTLE:-0.5}
LOADS=${LOADS:-"pinned unpinned"}

here=$(cd "$(dirname "$0")/.." && pwd)
NETTUNE=${NETTUNE:-}
if [ -z "$NETTUNE" ]; then
    if [ -x "$here/target/release/nettune" ]; then NETTUNE=$here/target/release/nettune
    else NETTUNE=$(command -v nettune || true); fi
fi
[ -x "$NETTUNE" ] || { echo "http-locality.sh: no nettune binary: cargo build --release, or set NETTUNE" >&2; exit 2; }
command -v wrk >/dev/null || { echo "http-locality.sh: wrk is missing: apt-get install wrk" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "http-locality.sh: needs root (network namespaces)" >&2; exit 2; }

work=$(mktemp -d)
bed="ntb-hl$$"
server_pid=""
applied=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    server_pid=""
    "$NETTUNE" testbed down "$bed" >/dev/null 2>&1 || true
}
trap 'cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

load() { cut -d' ' -f1 /proc/loadavg; }
load_start=$(load)
echo "nettune: $("$NETTUNE" --version)"
echo "load average at start: $load_start"

"$NETTUNE" testbed up --name "$bed" --queues 1 >/dev/null
server=$bed-server
client=$bed-client
state_dir=$work/state

set_state() {
    if [ "$1" = after ] && [ -z "$applied" ]; then
        "$NETTUNE" apply --profile http --netns "$server" --state-dir "$state_dir" --json >"$work/apply.json"
        applied=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"]["id"])' "$work/apply.json")
    elif [ "$1" = before ]; then
        if [ -n "$applied" ]; then
            "$NETTUNE" rollback "$applied" --state-dir "$state_dir" >/dev/null
            applied=""
        fi
        ip netns exec "$server" sh -c 'echo 2 > /sys/class/net/tb-server/queues/rx-0/rps_cpus'
    fi
}

# The server runs through every phase of one load; its report (on SIGTERM)
# counts the connections each thread accepted.
start_server() {
    "$NETTUNE" bench http-server --netns "$server" --bind 198.18.0.1:8080 --pin 0-1 --json \
        >"$work/server-$1.json" 2>"$work/server-$1.log" &
    server_pid=$!
    for _ in $(seq 50); do
        ip netns exec "$server" ss -Hltn 'sport = :8080' | grep -q . && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "http-locality.sh: the http-server did not listen on 198.18.0.1:8080 in $server:" >&2
    tail -5 "$work/server-$1.log" >&2
    exit 1
}
stop_server() {
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}
# Connections per server CPU in the report $1, as "CPU0:N CPU1:M".
per_cpu() {
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join("CPU%s:%d" % (t["cpu"], t["connections"]) for t in d["per_thread"]))' "$1" 2>/dev/null || echo "-"
}

rows=()
for loadname in $LOADS; do
    case "$loadname" in
        pinned) wrk_cmd=(taskset -c 0 wrk -t1 -c64) ;;
        unpinned) wrk_cmd=(wrk -t2 -c64) ;;
        *) echo "http-locality.sh: unknown load '$loadname': pinned or unpinned" >&2; exit 2 ;;
    esac
    : >"$work/rounds"
    set_state before
    start_server "$loadname"
    for round in $(seq 1 "$ROUNDS"); do
        if [ $((round % 2)) = 1 ]; then order="before after"; else order="after before"; fi
        line="$round"
        for state in $order; do
            set_state "$state"
            sleep "$SETTLE"
            rate=$(ip netns exec "$client" "${wrk_cmd[@]}" -d "${WINDOW}s" http://198.18.0.1:8080/plaintext 2>&1 \
                | awk '/Requests\/sec/ { print $2 }')
            if [ -z "$rate" ]; then
                echo "http-locality.sh: wrk printed no Requests/sec ($loadname, $state, round $round): is the server up? see $work" >&2
                exit 1
            fi
            line="$line $state $rate"
        done
        echo "$line" >>"$work/rounds"
        echo "$loadname round $round: $line" >&2
    done
    stop_server
    set_state before
    # The connections of one more short run in each state, each with a
    # server of its own, so that its report counts that state's alone.
    conns=""
    for state in before after; do
        set_state "$state"
        start_server "$loadname-$state"
        ip netns exec "$client" "${wrk_cmd[@]}" -d 1s http://198.18.0.1:8080/plaintext >/dev/null 2>&1 || true
        stop_server
        conns="$conns $state=$(per_cpu "$work/server-$loadname-$state.json" | tr ' ' ',')"
    done
    set_state before
    rows+=("$(python3 - "$loadname" "${wrk_cmd[*]}" "$work/rounds" $conns <<'EOF'
import statistics, sys
name, cmd, path = sys.argv[1:4]
conns = dict(c.split("=", 1) for c in sys.argv[4:])
rate = {"before": [], "after": []}
ratios = []
for line in open(path):
    f = line.split()
    got = {f[i]: float(f[i + 1]) for i in (1, 3)}
    for s in rate:
        rate[s].append(got[s] / 1000)
    if got["before"] > 0:
        ratios.append(got["after"] / got["before"])
fmt = lambda v, u="": f"{statistics.median(v):.1f}{u} [{min(v):.1f}-{max(v):.1f}]" if v else "-"
ratio = f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]" if ratios else "-"
print(f"| {name} (`{cmd.replace('taskset -c 0 ', '')}`{', CPU 0' if 'taskset' in cmd else ''}) | {fmt(rate['before'])} | {fmt(rate['after'])} | {ratio} "
      f"| {conns.get('before', '-').replace(',', ' ')} / {conns.get('after', '-').replace(',', ' ')} |")
EOF
)")
done
cleanup
# The run's own wrk and server (up to four busy threads on two CPUs) raise
# the 1-minute load average; it is a measure of everything else only once
# they are gone and it has decayed (about half a minute from 2.5 to 1.5).
for waited in $(seq 0 5 120); do
    awk '{ exit !($1 < 1.5) }' /proc/loadavg && break
    sleep 5
done
load_end=$(load)
echo "load average at end: $load_end (read $waited s after the run's own processes ended)"
echo
echo "wrk against nettune bench http-server --pin 0-1 across a one-queue veth: k requests/s, median [range] of $ROUNDS alternated rounds of ${WINDOW} s"
echo
echo "| load | before (RPS CPU 1) | after (apply --profile http) | after / before | connections per server CPU before / after |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
if awk -v a="$load_start" -v b="$load_end" 'BEGIN { exit !(a >= 1.5 || b >= 1.5) }'; then
    echo
    echo "NOISY: load average $load_start at the start, $load_end at the end (1.5 or more): not a result"
fi
