#!/usr/bin/env bash
# bench/sink-buffers.sh: on the softirq-on-app-cpu testbed, why `nettune
# bench udp-sink` (one socket) fed by `udp-flood` takes fewer packets than
# `sockperf sr` on 16 ports fed by bench/c/udp_sender: the receivers fed by
# the same sender, one port against 16, the sink's socket buffer at the
# default against 16 of them, and the sink fed by the scenario's own flood.
# A benchmark, not a test: it prints figures and ratios.
#
# `nettune testbed up --scenario softirq-on-app-cpu`: RPS of the server's
# veth on CPU 1, where each receiver is pinned, so the receive softirq
# and the reader share CPU 1. One sender for all, bench/c/udp_sender (built
# here with gcc) pinned to CPU 0: `-g 64 -r RATE -f 16 -s`, 64 packets of
# 32 bytes per send, RATE (1200000) a second, 16 flows, each packet with
# sockperf's message header (the sink counts them as packets without its
# own header); with `-P` all 16 flows go to one port. The receivers:
#   sink       `udp-sink --pin 1`, one socket on one port (-P)
#   sink-flood the same sink fed by the scenario's flood instead, `nettune
#              bench udp-flood --flows 16 --gso 64 --rate RATE --pin 0`
#   sink-16x   the same with `--rcvbuf` 16 x net.core.rmem_default
#   sr-1       `sockperf sr` on one port (-P)
#   sr-16      `sockperf sr` on 16 ports (no -P): 16 sockets, as
#              bench/scenarios.sh measures the scenario
# Each run: the receiver, then the sender; after SETTLE (1.5 s), the
# server namespace's Udp InDatagrams (datagrams the reader took) and
# RcvbufErrors over WINDOW (2 s). ROUNDS (5) rounds, the receivers' order
# reversed every other round. Reported: the median [range] of each
# receiver's packets/s, and the load average at the start and the end; a
# run whose load average was 1.5 or more at either is labelled noisy.
#
# Needs root (namespaces), sockperf and gcc (Debian packages), and a
# nettune binary (target/release, or NETTUNE). The testbed has a unique
# name and is removed on exit; traffic stays between its namespaces; only
# the processes this script started are stopped, by PID.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
WINDOW=${WINDOW:-2}
SETTLE=${SETTLE:-1.5}
RATE=${RATE:-1200000}
RECEIVERS=${RECEIVERS:-"sink sink-flood sink-16x sr-1 sr-16"}

here=$(cd "$(dirname "$0")/.." && pwd)
NETTUNE=${NETTUNE:-}
if [ -z "$NETTUNE" ]; then
    if [ -x "$here/target/release/nettune" ]; then NETTUNE=$here/target/release/nettune
    else NETTUNE=$(command -v nettune || true); fi
fi
[ -x "$NETTUNE" ] || { echo "sink-buffers.sh: no nettune binary: cargo build --release, or set NETTUNE" >&2; exit 2; }
for tool in sockperf gcc python3; do
    command -v "$tool" >/dev/null || { echo "sink-buffers.sh: $tool is missing: apt-get install $tool" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "sink-buffers.sh: needs root (network namespaces)" >&2; exit 2; }

work=$(mktemp -d)
bed="ntb-skb$$"
pids=()
stop() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
trap 'stop; "$NETTUNE" testbed down "$bed" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

gcc -O2 -Wall -pthread -o "$work/udp_sender" "$here/bench/c/udp_sender.c"
up=$("$NETTUNE" testbed up --name "$bed" --scenario softirq-on-app-cpu --json)
read -r server client < <(python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["server"]["netns"], d["client"]["netns"])' <<<"$up")
addr=198.18.0.1
port=11111
rcvbuf=$((16 * $(cat /proc/sys/net/core/rmem_default)))
for i in $(seq 0 15); do echo "U:$addr:$((port + i))"; done >"$work/feed16"
echo "U:$addr:$port" >"$work/feed1"

load() { cut -d' ' -f1 /proc/loadavg; }
# InDatagrams and RcvbufErrors of the server namespace.
udp() { ip netns exec "$server" awk '/^Udp:/ { if (n++) { for (i = 1; i <= NF; i++) v[h[i]] = $i; print v["InDatagrams"], v["RcvbufErrors"] } else for (i = 1; i <= NF; i++) h[i] = $i }' /proc/net/snmp; }

# run RECEIVER: one run; appends "RECEIVER PPS DROPS_PER_S" to $work/runs.
run() {
    local seconds one_port=-P flood=0
    seconds=$(awk -v s="$SETTLE" -v w="$WINDOW" 'BEGIN { printf "%d", s + w + 2 }')
    case $1 in
        sink) ip netns exec "$server" "$NETTUNE" bench udp-sink --bind "$addr:$port" --pin 1 --duration $((seconds + 2)) >/dev/null 2>&1 & ;;
        sink-flood) flood=1; ip netns exec "$server" "$NETTUNE" bench udp-sink --bind "$addr:$port" --pin 1 --duration $((seconds + 2)) >/dev/null 2>&1 & ;;
        sink-16x) ip netns exec "$server" "$NETTUNE" bench udp-sink --bind "$addr:$port" --pin 1 --rcvbuf "$rcvbuf" --duration $((seconds + 2)) >/dev/null 2>&1 & ;;
        sr-1) ip netns exec "$server" taskset -c 1 sockperf sr -f "$work/feed1" >/dev/null 2>&1 & ;;
        sr-16) one_port=""; ip netns exec "$server" taskset -c 1 sockperf sr -f "$work/feed16" >/dev/null 2>&1 & ;;
        *) echo "sink-buffers.sh: unknown receiver '$1' (sink, sink-flood, sink-16x, sr-1, sr-16)" >&2; exit 2 ;;
    esac
    pids+=($!)
    # Until the receiver holds its port (at most 5 s), then a moment more.
    for _ in $(seq 50); do
        ip netns exec "$server" ss -Hlun "sport = :$port" | grep -q . && break
        sleep 0.1
    done
    sleep 0.5
    if [ "$flood" = 1 ]; then
        ip netns exec "$client" "$NETTUNE" bench udp-flood --to "$addr:$port" --flows 16 --gso 64 --rate "$RATE" --pin 0 --duration "$seconds" >/dev/null 2>&1 &
    else
        ip netns exec "$client" "$work/udp_sender" -g 64 -r "$RATE" -f 16 $one_port -s "$addr:$port" 1 1024 32 0 "$seconds" >/dev/null 2>&1 &
    fi
    pids+=($!)
    sleep "$SETTLE"
    local d0 e0 d1 e1 t0 t1
    read -r d0 e0 < <(udp); t0=$(date +%s.%N)
    sleep "$WINDOW"
    read -r d1 e1 < <(udp); t1=$(date +%s.%N)
    stop
    awk -v r="$1" -v a="$d0" -v b="$d1" -v x="$e0" -v y="$e1" -v s="$t0" -v e="$t1" \
        'BEGIN { printf "%s %.0f %.0f\n", r, (b - a) / (e - s), (y - x) / (e - s) }' >>"$work/runs"
    sleep 0.5
}

load_start=$(load)
echo "nettune: $("$NETTUNE" --version); $(nproc) CPUs, $(uname -r); load average at start: $load_start"
read -r -a order <<<"$RECEIVERS"
for round in $(seq 1 "$ROUNDS"); do
    list=("${order[@]}")
    if [ $((round % 2)) = 0 ]; then
        list=()
        for ((i = ${#order[@]} - 1; i >= 0; i--)); do list+=("${order[i]}"); done
    fi
    for r in "${list[@]}"; do run "$r"; done
    echo "round $round/$ROUNDS done, load average $(load)" >&2
done
load_end=$(load)
echo "load average at end: $load_end"
echo
echo "softirq-on-app-cpu, udp_sender -g 64 -r $RATE -f 16 (or udp-flood) on CPU 0, receiver on CPU 1; kpps the reader took (InDatagrams), median [range] of $ROUNDS runs"
python3 - "$work/runs" "$RECEIVERS" "$rcvbuf" <<'EOF'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
what = {
    "sink": "udp-sink, 1 socket (default buffer), flows to 1 port",
    "sink-flood": "udp-sink, 1 socket (default buffer), fed by udp-flood",
    "sink-16x": f"udp-sink --rcvbuf {sys.argv[3]}, 1 socket, flows to 1 port",
    "sr-1": "sockperf sr, 1 socket (default buffer), flows to 1 port",
    "sr-16": "sockperf sr, 16 sockets (default buffers), flows to 16 ports",
}
print("| receiver | kpps | RcvbufErrors kpps |")
print("|---|---|---|")
for r in sys.argv[2].split():
    got = [float(p) / 1e3 for n, p, _ in runs if n == r]
    drops = [float(d) / 1e3 for n, _, d in runs if n == r]
    if got:
        print(f"| {what.get(r, r)} | {statistics.median(got):.0f} [{min(got):.0f}-{max(got):.0f}] | {statistics.median(drops):.0f} |")
EOF
if awk -v a="$load_start" -v b="$load_end" 'BEGIN { exit !(a >= 1.5 || b >= 1.5) }'; then
    echo
    echo "NOISY: load average $load_start at the start, $load_end at the end (1.5 or more): not a result"
fi
