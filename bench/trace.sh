#!/usr/bin/env bash
# bench/trace.sh: what `nettune trace drops` costs. A benchmark, not a test:
# it prints figures and ratios.
#
#  1. A 32-byte UDP flood at full speed (`nettune bench udp-flood`, one
#     thread pinned to FLOOD_CPU) across a veth pair between two namespaces
#     of its own, into a socket whose tiny buffer is always full: every
#     packet is dropped (SOCKET_RCVBUFF), so every packet runs the drop
#     program. Three ways, alternated in each of PAIRS rounds (the order
#     rotates): no tracer, `trace drops --netns RX` (the namespace filter
#     reads the device's namespace per drop), `trace drops` host-wide. The
#     flood's packets per second each time and, per round, traced/untraced
#     (target: at least 0.97, i.e. at most 3% fewer packets).
#  2. From the traced runs' JSON: the time each snapshot took to read the
#     counters (read_ms) and the keys read (map_keys); the tracer's peak RSS
#     (VmHWM; target < 20 MiB).
#  3. The cost of reading per key and per possible CPU
#     (bench/trace_read.rs), and from it the read on hosts with more CPUs
#     (target < 1 ms here).
#
# The veth's receive softirq runs on the sender's CPU: the flood's rate is
# what the receive path costs there, tracer included. The tracer's own
# process is pinned to TRACER_CPU.
#
# Figures are worth publishing only from a quiet machine: the load average
# is printed at the start and the end, and the run is labelled NOT QUIET
# when either is 1.5 or more.
#
# Needs root (namespaces, BPF), ip, python3, taskset. Everything it creates
# has a unique name and is removed on exit, also on failure or Ctrl-C.
#
# Environment: PAIRS (5), SECONDS_EACH (5), FLOOD_CPU (1), TRACER_CPU (0),
# KEYS (50: keys for part 3).
set -euo pipefail

PAIRS=${PAIRS:-5}
SECONDS_EACH=${SECONDS_EACH:-5}
FLOOD_CPU=${FLOOD_CPU:-1}
TRACER_CPU=${TRACER_CPU:-0}
KEYS=${KEYS:-50}

cd "$(dirname "$0")/.."
for tool in ip python3 taskset; do
    command -v "$tool" >/dev/null || { echo "bench/trace.sh needs $tool" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "bench/trace.sh needs root (namespaces, BPF)" >&2; exit 2; }

TAG="nbt$$"
NS_TX="${TAG}tx" NS_RX="${TAG}rx"
VETH_TX="${TAG}t" VETH_RX="${TAG}r"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in "$NS_TX" "$NS_RX"; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cargo build --release --quiet --bin nettune --example trace_read
BIN=target/release/nettune
load() { cut -d' ' -f1 /proc/loadavg; }
LOAD_START=$(load)
echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

ip netns add "$NS_TX"
ip netns add "$NS_RX"
ip link add "$VETH_TX" netns "$NS_TX" type veth peer name "$VETH_RX" netns "$NS_RX"
ip -n "$NS_TX" addr add 198.18.77.1/24 dev "$VETH_TX"
ip -n "$NS_RX" addr add 198.18.77.2/24 dev "$VETH_RX"
for ns in "$NS_TX" "$NS_RX"; do ip -n "$ns" link set lo up; done
ip -n "$NS_TX" link set "$VETH_TX" up
ip -n "$NS_RX" link set "$VETH_RX" up
# A socket whose buffer is always full: it never reads.
ip netns exec "$NS_RX" python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
s.bind(("198.18.77.2", 9000))
time.sleep(86400)
' &
PIDS+=($!)
sleep 1

flood() { # -> packets per second
    "$BIN" bench udp-flood --netns "$NS_TX" --to 198.18.77.2:9000 --pin "$FLOOD_CPU" \
        --size 32 --duration "$SECONDS_EACH" --json 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["pps"])'
}

# Start a tracer with ARGS, wait until it is attached (its first line on
# stderr), flood, stop it with SIGINT; prints the pps, leaves the report in
# $WORK/NAME.json and the peak RSS (KiB) in $WORK/NAME.rss.
traced() { # name args...
    local name=$1; shift
    taskset -c "$TRACER_CPU" "$BIN" trace drops --duration 1h --json "$@" \
        >"$WORK/$name.json" 2>"$WORK/$name.err" &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 100); do
        grep -q '^trace drops:' "$WORK/$name.err" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || { cat "$WORK/$name.err" >&2; exit 1; }
        sleep 0.1
    done
    flood
    awk '/VmHWM/ {print $2}' "/proc/$pid/status" >"$WORK/$name.rss"
    kill -INT "$pid"
    wait "$pid" || true
}

echo
echo "== 1. flood pps with and without the tracer, $PAIRS rounds of ${SECONDS_EACH} s each, flood on CPU $FLOOD_CPU, tracer on CPU $TRACER_CPU"
printf '%-6s %12s %12s %12s %9s %9s\n' round off netns host-wide netns/off host/off
for round in $(seq "$PAIRS"); do
    declare -A pps=()
    modes=(off netns host)
    shift_by=$(( (round - 1) % 3 ))
    order=("${modes[@]:$shift_by}" "${modes[@]:0:$shift_by}")
    for mode in "${order[@]}"; do
        case $mode in
            off) pps[off]=$(flood) ;;
            netns) pps[netns]=$(traced "netns-$round" --netns "$NS_RX") ;;
            host) pps[host]=$(traced "host-$round") ;;
        esac
    done
    python3 - "$round" "${pps[off]}" "${pps[netns]}" "${pps[host]}" <<'EOF' | tee -a "$WORK/rounds"
import sys
r, off, ns, host = sys.argv[1], *map(float, sys.argv[2:])
print(f"{r:<6} {off:12.0f} {ns:12.0f} {host:12.0f} {ns / off:9.3f} {host / off:9.3f}")
EOF
done
python3 - "$WORK" <<'EOF'
import glob, json, os, statistics, sys
work = sys.argv[1]
rows = [line.split() for line in open(os.path.join(work, "rounds"))]
for col, name in [(4, "--netns"), (5, "host-wide")]:
    ratios = sorted(float(r[col]) for r in rows)
    print(f"traced/untraced, {name}: median {statistics.median(ratios):.3f} (range {ratios[0]:.3f}-{ratios[-1]:.3f})")
print()
print("== 2. the tracer's own cost (from its JSON snapshots)")
for kind in ["netns", "host"]:
    reads, keys, rss, drops = [], [], [], 0
    for path in glob.glob(os.path.join(work, f"{kind}-*.json")):
        report = json.load(open(path))
        drops += report["total"]
        for i in report["intervals"]:
            reads.append(i["read_ms"])
            keys.append(i["map_keys"])
        rss.append(int(open(path[:-5] + ".rss").read() or 0))
    if not reads:
        continue
    reads.sort()
    print(f"{kind:>6}: read_ms median {statistics.median(reads):.3f}, max {reads[-1]:.3f} over {len(reads)} snapshots; "
          f"keys {min(keys)}-{max(keys)}; peak RSS {max(rss) / 1024:.1f} MiB; {drops:,} drops counted")
EOF

echo
echo "== 3. reading per-CPU counters: per key and per possible CPU"
target/release/examples/trace_read "$KEYS" 500

LOAD_END=$(load)
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if python3 -c "import sys; sys.exit(0 if max($LOAD_START, $LOAD_END) < 1.5 else 1)"; then
    echo "quiet: load average below 1.5 at the start and the end"
else
    echo "NOT QUIET: load average $LOAD_START at the start, $LOAD_END at the end; do not publish these figures"
fi
