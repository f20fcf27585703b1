#!/usr/bin/env bash
# bench/trace-overhead.sh: what `nettune monitor` costs the traffic it
# watches by tracing drop reasons, which it does by default. A benchmark,
# not a test: it prints figures and ratios.
#
# Two namespaces of its own joined by a veth pair. `nettune bench
# udp-flood` sends SIZE-byte (32) packets at full speed from one thread
# pinned to FLOOD_CPU (0) into `nettune bench udp-sink`, one thread pinned
# to SINK_CPU (1) in the other namespace, for the whole run. Beside them,
# `nettune monitor --json --interval 1` runs in turn two ways:
#   notrace  with --no-trace (the counters only)
#   trace    as by default (the counters and the drop tracer on
#            skb:kfree_skb)
# in PAIRS (9) pairs whose order alternates (notrace first in odd pairs,
# trace first in even ones). Each phase starts monitor, waits for its first
# line (the tracer attached), then counts the datagrams the sink read
# (Udp InDatagrams of the sink's namespace) and those dropped at its full
# buffer (Udp RcvbufErrors) over WINDOW (5) seconds, then stops monitor.
# Reported: each pair's sink packets per second both ways and their ratio
# trace/notrace, the median and range of the ratios, and the load average.
#
# MONITOR_ARGS (empty) adds monitor arguments: `--netns NS` is not
# possible (the namespaces are this script's), but e.g. `--all`. SINK_ARGS
# (empty) adds sink arguments: `--rcvbuf 4096` makes the sink's buffer
# overflow so that many packets are dropped (SOCKET_RCVBUFF) and run the
# drop program, the tracer's worst case.
#
# NETTUNE_BIN (empty) runs that nettune binary instead of building a
# release one (figures are for a release build).
#
# Figures are worth publishing only from a quiet machine: the load average
# is printed at the start and the end, and the run is labelled NOT QUIET
# when either is 1.5 or more.
#
# Needs root (namespaces, BPF), ip, python3. Everything it creates has a
# unique name and is removed on exit, also on failure or Ctrl-C; only the
# processes it started are stopped, by PID. Traffic stays between its
# namespaces.
set -euo pipefail

PAIRS=${PAIRS:-9}
WINDOW=${WINDOW:-5}
SIZE=${SIZE:-32}
FLOOD_CPU=${FLOOD_CPU:-0}
SINK_CPU=${SINK_CPU:-1}
MONITOR_ARGS=${MONITOR_ARGS:-}
SINK_ARGS=${SINK_ARGS:-}
# Long enough for every phase (start, window, stop), bounded.
DURATION=$((PAIRS * 2 * (WINDOW + 15) + 30))

cd "$(dirname "$0")/.."
for tool in ip python3; do
    command -v "$tool" >/dev/null || { echo "bench/trace-overhead.sh needs $tool" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "bench/trace-overhead.sh needs root (namespaces, BPF)" >&2; exit 2; }

TAG="nto$$"
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

if [ -n "${NETTUNE_BIN:-}" ]; then
    BIN=$NETTUNE_BIN
else
    echo "building nettune (release)..." >&2
    cargo build --release --quiet --bin nettune
    BIN=$PWD/target/release/nettune
fi
load() { cut -d' ' -f1 /proc/loadavg; }
LOAD_START=$(load)
echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "$("$BIN" --version)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

ip netns add "$NS_TX"
ip netns add "$NS_RX"
ip link add "$VETH_TX" netns "$NS_TX" address 02:00:00:7b:00:01 type veth \
    peer name "$VETH_RX" netns "$NS_RX" address 02:00:00:7b:00:02
ip -n "$NS_TX" addr add 198.18.78.1/24 dev "$VETH_TX"
ip -n "$NS_RX" addr add 198.18.78.2/24 dev "$VETH_RX"
for ns in "$NS_TX" "$NS_RX"; do ip -n "$ns" link set lo up; done
ip -n "$NS_TX" link set "$VETH_TX" up
ip -n "$NS_RX" link set "$VETH_RX" up
# No ARP in the measurement.
ip -n "$NS_TX" neigh add 198.18.78.2 lladdr 02:00:00:7b:00:02 dev "$VETH_TX" nud permanent
for _ in $(seq 50); do
    [ "$(ip netns exec "$NS_RX" cat "/sys/class/net/$VETH_RX/operstate")" = up ] && break
    sleep 0.1
done

# shellcheck disable=SC2086 # SINK_ARGS is a list of arguments
"$BIN" bench udp-sink --netns "$NS_RX" --bind 198.18.78.2:9000 --pin "$SINK_CPU" \
    --duration "$DURATION" $SINK_ARGS >/dev/null 2>"$WORK/sink.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -q "listening on" "$WORK/sink.err" && break; sleep 0.1; done
grep -q "listening on" "$WORK/sink.err" || { echo "the sink did not start: $(cat "$WORK/sink.err")" >&2; exit 2; }
"$BIN" bench udp-flood --netns "$NS_TX" --to 198.18.78.2:9000 --pin "$FLOOD_CPU" \
    --size "$SIZE" --duration "$DURATION" >/dev/null 2>"$WORK/flood.err" &
PIDS+=($!)
sleep 2

# The sink namespace's Udp InDatagrams and RcvbufErrors.
udp_counters() {
    ip netns exec "$NS_RX" python3 -c '
lines = [l.split() for l in open("/proc/net/snmp") if l.startswith("Udp:")]
names, values = lines[0][1:], lines[1][1:]
c = dict(zip(names, map(int, values)))
print(c["InDatagrams"], c["RcvbufErrors"])'
}

# phase MODE: start monitor (with --no-trace for notrace), wait for its
# first line, measure WINDOW seconds, stop it; prints "pps drops_per_sec".
phase() {
    local mode=$1 extra=()
    [ "$mode" = notrace ] && extra=(--no-trace)
    # shellcheck disable=SC2086 # MONITOR_ARGS is a list of arguments
    "$BIN" monitor --json --interval 1 "${extra[@]}" $MONITOR_ARGS \
        >"$WORK/monitor.out" 2>"$WORK/monitor.err" &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 300); do
        [ -s "$WORK/monitor.out" ] && break
        kill -0 "$pid" 2>/dev/null || { cat "$WORK/monitor.err" >&2; exit 1; }
        sleep 0.1
    done
    [ -s "$WORK/monitor.out" ] || { echo "monitor printed nothing: $(cat "$WORK/monitor.err")" >&2; exit 1; }
    if [ "$mode" = trace ] && grep -q "not traced" "$WORK/monitor.err"; then
        echo "monitor could not trace: $(cat "$WORK/monitor.err")" >&2
        exit 1
    fi
    local before after t0 t1
    before=$(udp_counters)
    t0=$(date +%s.%N)
    sleep "$WINDOW"
    after=$(udp_counters)
    t1=$(date +%s.%N)
    kill -TERM "$pid"
    wait "$pid" || true
    python3 -c '
import sys
b0, d0, b1, d1, t0, t1 = map(float, sys.argv[1:])
print(f"{(b1 - b0) / (t1 - t0):.0f} {(d1 - d0) / (t1 - t0):.0f}")' \
        $before $after "$t0" "$t1"
}

echo
echo "== sink packets per second with monitor beside it, --no-trace and tracing (the default)"
echo "   $PAIRS pairs of ${WINDOW} s windows, ${SIZE}-byte packets, flood on CPU $FLOOD_CPU, sink on CPU $SINK_CPU"
echo "   monitor: --json --interval 1 ${MONITOR_ARGS:-(no other arguments)}; sink: ${SINK_ARGS:-(defaults)}"
printf '%-5s %-14s %12s %12s %12s %12s %8s\n' pair order notrace_pps trace_pps notrace_drop trace_drop ratio
for pair in $(seq "$PAIRS"); do
    if [ $((pair % 2)) = 1 ]; then order=(notrace trace); else order=(trace notrace); fi
    declare -A pps=() drop=()
    for mode in "${order[@]}"; do
        read -r p d < <(phase "$mode")
        pps[$mode]=$p
        drop[$mode]=$d
    done
    python3 - "$pair" "${order[0]}-first" "${pps[notrace]}" "${pps[trace]}" \
        "${drop[notrace]}" "${drop[trace]}" <<'EOF' | tee -a "$WORK/pairs"
import sys
pair, order, off, on, doff, don = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
ratio = on / off if off else float("nan")
print(f"{pair:<5} {order:<14} {off:12.0f} {on:12.0f} {doff:12.0f} {don:12.0f} {ratio:8.3f}")
EOF
done
python3 - "$WORK/pairs" <<'EOF'
import statistics, sys
ratios = sorted(float(line.split()[-1]) for line in open(sys.argv[1]))
print(f"trace/notrace sink pps: median {statistics.median(ratios):.3f} "
      f"(range {ratios[0]:.3f}-{ratios[-1]:.3f}, {len(ratios)} pairs)")
EOF

LOAD_END=$(load)
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if python3 -c "import sys; sys.exit(0 if max($LOAD_START, $LOAD_END) < 1.5 else 1)"; then
    echo "quiet: load average below 1.5 at the start and the end"
else
    echo "NOT QUIET: load average $LOAD_START at the start, $LOAD_END at the end; do not publish these figures"
fi
