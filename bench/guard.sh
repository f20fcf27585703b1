#!/usr/bin/env bash
# bench/guard.sh: how soon `nettune apply --guard` undoes a change after the
# receive path gets worse. A benchmark, not a test: it prints figures.
#
# Two namespaces joined by a veth pair. In the receiving one, `nettune bench
# udp-sink` reads with a 4 KiB receive buffer (SO_RCVBUFFORCE), so that any
# flood loses most of its datagrams at the socket (UDP RcvbufErrors). Each
# round: `nettune apply --profile pps --netns RX --guard 30
# --guard-baseline BASELINE --interval INTERVAL --json` measures a quiet
# baseline and applies the profile; when it says it watches, `nettune bench
# udp-flood` starts sending RATE (20,000) packets/s from the other
# namespace, in UDP GSO messages of 20 packets: each millisecond's 20
# arrive at once, as a NIC's batch does, and overflow the small buffer
# (single packets every 100 us would mostly be read in time). The figure is the time from the flood's start to the guard's
# exit with the profile rolled back (every value read back), in seconds and
# in intervals; the guard's own JSON gives when it fired and when the
# rollback ended, counted from the change. ROUNDS (9) rounds per interval
# in INTERVALS ("1 0.5").
#
#   sudo bench/guard.sh                  # ROUNDS=9 INTERVALS="1 0.5" BASELINE=2 RATE=20000
#
# Needs root (namespaces), python3. Everything it creates has a unique name
# and is removed on exit. Traffic stays between this script's namespaces.
# Only the processes it started are stopped, by PID.
set -euo pipefail

ROUNDS=${ROUNDS:-9}
INTERVALS=${INTERVALS:-"1 0.5"}
BASELINE=${BASELINE:-2}
RATE=${RATE:-20000}

cd "$(dirname "$0")/.."
command -v ip >/dev/null || { echo "bench/guard.sh needs ip" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/guard.sh needs root" >&2; exit 2; }
TAG="gd$$"
NS_TX="${TAG}tx" NS_RX="${TAG}rx"
WORK=$(mktemp -d)
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip netns del "$NS_TX" 2>/dev/null || true
    ip netns del "$NS_RX" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# NETTUNE=PATH runs that binary instead of a fresh release build.
NT=${NETTUNE:-}
if [ -z "$NT" ]; then
    cargo build --release --quiet
    NT=target/release/nettune
fi

ip netns add "$NS_TX"
ip netns add "$NS_RX"
ip link add "${TAG}t" netns "$NS_TX" type veth peer name "${TAG}r" netns "$NS_RX"
ip -n "$NS_TX" addr add 10.251.0.1/24 dev "${TAG}t"
ip -n "$NS_RX" addr add 10.251.0.2/24 dev "${TAG}r"
for ns in "$NS_TX" "$NS_RX"; do ip -n "$ns" link set lo up; done
ip -n "$NS_TX" link set "${TAG}t" up
ip -n "$NS_RX" link set "${TAG}r" up
sleep 1

"$NT" bench udp-sink --netns "$NS_RX" --bind 10.251.0.2:0 --rcvbuf 4096 \
    --duration 100000 2>"$WORK/sink.err" >/dev/null &
PIDS+=($!)
for _ in $(seq 50); do grep -q "listening on" "$WORK/sink.err" && break; sleep 0.1; done
TO=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$WORK/sink.err" | head -1)
[ -n "$TO" ] || { echo "the sink did not start: $(cat "$WORK/sink.err")" >&2; exit 2; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$NT" --version
printf '%-9s %-6s %-22s %-22s %-22s\n' interval round "flood to restored s" "fired after change s" "restored after change s"
for interval in $INTERVALS; do
    for round in $(seq "$ROUNDS"); do
        state="$WORK/state-$interval-$round"
        "$NT" apply --profile pps --netns "$NS_RX" --state-dir "$state" --guard 30 \
            --guard-baseline "$BASELINE" --interval "$interval" --json \
            >"$WORK/apply.json" 2>"$WORK/apply.err" &
        apply=$!
        PIDS+=("$apply")
        for _ in $(seq 600); do grep -q "watching for" "$WORK/apply.err" && break; sleep 0.05; done
        start=$(date +%s.%N)
        "$NT" bench udp-flood --netns "$NS_TX" --to "$TO" --rate "$RATE" --gso 20 --duration 10 \
            >/dev/null 2>&1 &
        flood=$!
        PIDS+=("$flood")
        code=0
        wait "$apply" || code=$?
        end=$(date +%s.%N)
        kill "$flood" 2>/dev/null || true
        wait "$flood" 2>/dev/null || true
        [ "$code" = 1 ] || { echo "round $round: apply exited $code: $(cat "$WORK/apply.err")" >&2; exit 2; }
        python3 - "$interval" "$round" "$start" "$end" "$WORK/apply.json" <<'EOF'
import json, sys
interval, rnd, start, end, path = sys.argv[1:]
guard = json.load(open(path))["guard"]
took = float(end) - float(start)
print(f"{interval:<9} {rnd:<6} {took:6.2f} ({took / float(interval):4.1f} intervals)  "
      f"{guard['fired_after_secs']:<22.2f} {guard['restored_after_secs']:<22.2f}")
EOF
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
