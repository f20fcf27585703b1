#!/usr/bin/env bash
# bench/scenarios.sh: what the matching profile gains on each testbed
# scenario (`nettune testbed up --scenario NAME`), measured with sockperf
# (UDP scenarios) and iperf3 (the bulk TCP one). A benchmark, not a test:
# it prints figures and ratios.
#
# For each UDP scenario in SCENARIOS (default: all of them), a testbed is made
# with the scenario, and sockperf runs for the whole benchmark: `sockperf sr`
# in the server namespace pinned to the scenario's reader CPU, `sockperf tp`
# (32-byte messages, as fast as it can, FLOWS (16) destination ports, so
# FLOWS flows) in the client namespace pinned to its sender CPU, both as the
# scenario prints them (`nettune testbed up --scenario NAME --json`:
# reader and sender CPUs in its commands). The figure is the datagrams per
# second the reader took: the server namespace's Udp InDatagrams
# (/proc/net/snmp, counted when the application reads a datagram) over a
# WINDOW (2 s); RcvbufErrors beside it.
#
# For bulk-small-buffers, `iperf3 -s` runs in the server namespace and
# each phase is one `iperf3 -c` of WINDOW seconds (a new connection, so it
# autotunes under the state's buffers); the figure is iperf3's received
# Gbit/s.
#
# Two states alternate (for UDP while the traffic flows), the order swapped each
# round, ROUNDS (5) rounds, each phase after SETTLE (0.5 s):
#   before  the scenario as built
#   after   `nettune apply --profile P --netns SERVER` (P: the scenario's
#           profile), undone with `nettune rollback` for the next "before"
# Reported per scenario: the median received kpps of each state [range],
# the median [range] of the per-round ratios after/before, and the load
# average at the start and the end. A run whose load average was 1.5 or
# more at either end is labelled noisy: its figures are not results.
#
# Needs root (namespaces), sockperf and iperf3 (Debian packages), python3 and
# nettune (NETTUNE, else target/release/nettune, else the one on PATH).
# Everything it makes has a unique name and is removed on exit, also on
# failure or Ctrl-C; it stops only the processes it started, by PID.
# Traffic stays between the testbed's namespaces (198.18.0.0/30).
set -euo pipefail

ROUNDS=${ROUNDS:-5}
WINDOW=${WINDOW:-2}
SETTLE=${SETTLE:-0.5}
FLOWS=${FLOWS:-16}
SCENARIOS=${SCENARIOS:-"reader-on-softirq-cpu softirq-on-app-cpu bulk-small-buffers"}

here=$(cd "$(dirname "$0")/.." && pwd)
NETTUNE=${NETTUNE:-}
if [ -z "$NETTUNE" ]; then
    if [ -x "$here/target/release/nettune" ]; then NETTUNE=$here/target/release/nettune
    else NETTUNE=$(command -v nettune || true); fi
fi
[ -x "$NETTUNE" ] || { echo "scenarios.sh: no nettune binary: cargo build --release, or set NETTUNE" >&2; exit 2; }
for tool in sockperf iperf3; do
    command -v "$tool" >/dev/null || { echo "scenarios.sh: $tool is missing: apt-get install $tool" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "scenarios.sh: needs root (network namespaces)" >&2; exit 2; }

work=$(mktemp -d)
bed=""
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
    [ -n "$bed" ] && "$NETTUNE" testbed down "$bed" >/dev/null 2>&1 || true
    bed=""
}
trap 'cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

load() { cut -d' ' -f1 /proc/loadavg; }
# InDatagrams and RcvbufErrors of the server namespace.
udp() { ip netns exec "$1" awk '/^Udp:/ { if (n++) { for (i = 1; i <= NF; i++) v[h[i]] = $i; print v["InDatagrams"], v["RcvbufErrors"] } else for (i = 1; i <= NF; i++) h[i] = $i }' /proc/net/snmp; }

load_start=$(load)
echo "nettune: $("$NETTUNE" --version)"
echo "load average at start: $load_start"
summary=()
for scenario in $SCENARIOS; do
    bed="ntb-scb$$"
    up=$("$NETTUNE" testbed up --name "$bed" --scenario "$scenario" --json)
    read -r server client reader sender profile path < <(python3 -c '
import json, re, sys
d = json.load(sys.stdin)
pin = lambda c: (re.search(r"--pin (\d+)", c) or re.search("()", "")).group(1) or "-"
c = d["commands"]
print(d["server"]["netns"], d["client"]["netns"], pin(c["server"]), pin(c["client"]), d["profile"],
      ",".join(c["doctor"].split()[4:]) or "-")' <<<"$up")
    path=${path//,/ }
    [ "$path" = - ] && path=""
    if [ "$reader" = - ]; then
        kind=tcp
        ip netns exec "$server" iperf3 -s -B 198.18.0.1 >"$work/iperf3-s.log" 2>&1 &
        pids+=($!)
        sleep 1
    else
        kind=udp
        feed=$work/feed
        : > "$feed"
        for i in $(seq 0 $((FLOWS - 1))); do echo "U:198.18.0.1:$((11111 + i))" >> "$feed"; done
        total=$(awk -v r="$ROUNDS" -v w="$WINDOW" -v s="$SETTLE" 'BEGIN { printf "%d", r * 2 * (w + s + 3) + 10 }')
        ip netns exec "$server" taskset -c "$reader" sockperf sr -f "$feed" >"$work/sr.log" 2>&1 &
        pids+=($!)
        sleep 1
        ip netns exec "$client" taskset -c "$sender" sockperf tp -f "$feed" -m 32 -t "$total" >"$work/tp.log" 2>&1 &
        pids+=($!)
        sleep 2
    fi
    state_dir=$work/state-$scenario
    applied=""
    set_state() {
        if [ "$1" = after ] && [ -z "$applied" ]; then
            # shellcheck disable=SC2086 # $path is several options
            "$NETTUNE" apply --profile "$profile" --netns "$server" $path --state-dir "$state_dir" --json >"$work/apply.json"
            applied=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"]["id"])' "$work/apply.json")
        elif [ "$1" = before ] && [ -n "$applied" ]; then
            "$NETTUNE" rollback "$applied" --state-dir "$state_dir" >/dev/null
            applied=""
        fi
    }
    : > "$work/rounds"
    for round in $(seq 1 "$ROUNDS"); do
        if [ $((round % 2)) = 1 ]; then order="before after"; else order="after before"; fi
        line="$round"
        for state in $order; do
            set_state "$state"
            sleep "$SETTLE"
            if [ "$kind" = tcp ]; then
                ip netns exec "$client" iperf3 -c 198.18.0.1 -t "$WINDOW" --json >"$work/iperf3.json" || true
                gbit=$(python3 -c 'import json,sys
try: print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9))
except Exception: print("0")' "$work/iperf3.json")
                line="$line $state $gbit 0"
                continue
            fi
            read -r in0 err0 < <(udp "$server")
            t0=$(date +%s.%N)
            sleep "$WINDOW"
            read -r in1 err1 < <(udp "$server")
            t1=$(date +%s.%N)
            line="$line $state $(awk -v a="$in0" -v b="$in1" -v x="$t0" -v y="$t1" 'BEGIN { printf "%.1f", (b - a) / (y - x) / 1000 }') $((err1 - err0))"
        done
        echo "$line" >> "$work/rounds"
    done
    set_state before
    cleanup
    summary+=("$(python3 - "$scenario" "$profile" "$reader" "$sender" "$kind" "$work/rounds" <<'EOF'
import statistics, sys
scenario, profile, reader, sender, kind, path = sys.argv[1:]
rate = {"before": [], "after": []}
errs = {"before": 0, "after": 0}
ratios = []
for line in open(path):
    f = line.split()
    got = {f[i]: (float(f[i + 1]), int(f[i + 2])) for i in (1, 4)}
    for s in rate:
        rate[s].append(got[s][0])
        errs[s] += got[s][1]
    if got["before"][0] > 0:
        ratios.append(got["after"][0] / got["before"][0])
unit, digits = ("Gbit/s", 2) if kind == "tcp" else ("kpps", 0)
fmt = lambda v: f"{statistics.median(v):.{digits}f} [{min(v):.{digits}f}-{max(v):.{digits}f}] {unit}"
pinning = "unpinned (iperf3)" if kind == "tcp" else f"reader CPU {reader}, sender CPU {sender}"
ratio = f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]" if ratios else "-"
drops = "-" if kind == "tcp" else f"{errs['before']} / {errs['after']}"
print(f"| {scenario} | {profile} | {pinning} | {fmt(rate['before'])} | {fmt(rate['after'])} | {ratio} | {drops} |")
EOF
)")
done
load_end=$(load)
echo "load average at end: $load_end"
noisy=$(awk -v a="$load_start" -v b="$load_end" 'BEGIN { print (a >= 1.5 || b >= 1.5) ? "yes" : "no" }')
echo
echo "received: kpps (sockperf, $FLOWS flows of 32 B) or Gbit/s (iperf3, one stream); median [range] of $ROUNDS rounds"
echo
echo "| scenario | profile | pinning | before | after | after / before | RcvbufErrors before / after |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${summary[@]}"
if [ "$noisy" = yes ]; then
    echo
    echo "NOISY: load average $load_start at the start, $load_end at the end (1.5 or more): not a result"
fi
