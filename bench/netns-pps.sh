#!/usr/bin/env bash
# bench/netns-pps.sh: what `nettune apply --profile pps --netns NS` gains in
# a container-like namespace whose only interface is a veth. A benchmark,
# not a test: it prints figures and ratios.
#
# Two namespaces joined by a veth pair (QUEUES RX/TX queues on each end,
# default 1; 4 gives the multi-queue case). `nettune bench udp-flood` sends
# 32-byte packets over FLOWS (16) source ports from one thread pinned to
# SENDER_CPU (0); `nettune bench udp-sink` receives with one thread pinned to
# RECEIVER_CPU (1). The figure is the packets per second the receiver read:
# the receiving namespace's Udp InDatagrams (/proc/net/snmp; counted when
# the application reads a datagram) over a WINDOW (2 s) of each phase.
#
# Flood and sink run for the whole benchmark; the receiving namespace is
# switched between its states while traffic flows, so the states are
# measured alternately under the same background load (the machine is
# shared), the order rotating each round. A round counts only when, in
# each of its windows, other processes used at most QUIET_CPU (0.2)
# seconds of CPU (/proc/stat user+nice+system minus the sink's, the flood's
# and ksoftirqd's own time); rounds go on until ROUNDS (9) are quiet, at
# most MAX_ROUNDS (8 x ROUNDS):
#   before   nothing applied in the namespace
#   default  `nettune apply --profile pps --netns NS`
#   iface    `nettune apply --profile pps --netns NS --iface VETH`
#   untouched  (only with HOST_WIDE=1) the host's values as they were
#            before this script, nothing applied: what the plan's advice
#            as a whole (host command + apply) is compared with
# (each rolled back with `nettune rollback` before the next state). Each
# phase waits SETTLE (0.5 s) after the switch before its window.
# Before the rounds, the host-wide values the plan names (its host_command:
# net.core.rps_sock_flow_entries, which RFS needs, netdev_max_backlog, ...)
# are set on the host, as the plan tells the user to; every one is restored
# on exit, also on failure or Ctrl-C. HOST_WIDE=0 leaves the host alone (the
# plan then leaves RFS out).
#
# Reported: the median received Mpps of each state, the median [range] of
# the per-round ratios default/before and iface/before (and, with
# HOST_WIDE=1, default/untouched), the load average; for the quiet rounds,
# and for all rounds (labelled noisy) so a busy machine still gives figures.
#
# Needs root (namespaces, sysctls), python3. Everything it creates has a
# unique name and is removed on exit. Traffic stays between this script's
# namespaces. Only the processes it started are stopped, by PID.
set -euo pipefail

ROUNDS=${ROUNDS:-9}
MAX_ROUNDS=${MAX_ROUNDS:-$((ROUNDS * 8))}
QUIET_CPU=${QUIET_CPU:-0.2}
WINDOW=${WINDOW:-2}
SETTLE=${SETTLE:-0.5}
FLOWS=${FLOWS:-16}
QUEUES=${QUEUES:-1}
SENDER_CPU=${SENDER_CPU:-0}
RECEIVER_CPU=${RECEIVER_CPU:-1}
HOST_WIDE=${HOST_WIDE:-1}
STATES=(before default iface)
[ "$HOST_WIDE" = 1 ] && STATES+=(untouched)
N=${#STATES[@]}
# Long enough for every phase (switches take well under a second each).
DURATION=$(awk -v r="$MAX_ROUNDS" -v n="$N" -v w="$WINDOW" -v s="$SETTLE" 'BEGIN { printf "%d", r * n * (w + s + 2) + 10 }')
LIMIT=$((DURATION + 30)) # hard bound on any one process, seconds

cd "$(dirname "$0")/.."
command -v ip >/dev/null || { echo "bench/netns-pps.sh needs ip" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/netns-pps.sh needs root" >&2; exit 2; }
TAG="np$$"
NS_TX="${TAG}tx" NS_RX="${TAG}rx"
VETH_TX="${TAG}t" VETH_RX="${TAG}r"
WORK=$(mktemp -d)
STATE="$WORK/state"
SAVED="$WORK/saved-sysctls"
: >"$SAVED"
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    # Root-namespace values back as they were, last set first.
    if [ -s "$SAVED" ]; then
        tac "$SAVED" | while IFS='=' read -r path value; do
            printf '%s\n' "$value" >"$path" || echo "could not restore $path to $value" >&2
        done
    fi
    for ns in "$NS_TX" "$NS_RX"; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building nettune (release)..." >&2
cargo build --release --quiet
NETTUNE=$PWD/target/release/nettune

ip netns add "$NS_TX"
ip netns add "$NS_RX"
for ns in "$NS_TX" "$NS_RX"; do ip -n "$ns" link set lo up; done
ip link add "$VETH_TX" netns "$NS_TX" numrxqueues "$QUEUES" numtxqueues "$QUEUES" \
    address 02:00:00:7a:00:01 type veth peer name "$VETH_RX" netns "$NS_RX" \
    numrxqueues "$QUEUES" numtxqueues "$QUEUES" address 02:00:00:7a:00:02
ip -n "$NS_TX" addr add 10.122.0.1/24 dev "$VETH_TX"
ip -n "$NS_RX" addr add 10.122.0.2/24 dev "$VETH_RX"
ip -n "$NS_TX" link set "$VETH_TX" up
ip -n "$NS_RX" link set "$VETH_RX" up
# No ARP in the measurement.
ip -n "$NS_TX" neigh add 10.122.0.2 lladdr 02:00:00:7a:00:02 dev "$VETH_TX" nud permanent
# The kernel reports a link up (operstate) up to a second after it is set up.
for _ in $(seq 50); do
    [ "$(ip netns exec "$NS_RX" cat "/sys/class/net/$VETH_RX/operstate")" = up ] && break
    sleep 0.1
done

# set_host PATH VALUE: write a root-namespace value, remembering the old one
# (and the new one, to notice another program changing it during the run).
set_host() {
    printf '%s=%s\n' "$1" "$(cat "$1")" >>"$SAVED"
    printf '%s\n' "$2" >"$1"
    printf '%s=%s\n' "$1" "$(cat "$1")" >>"$WORK/set-sysctls"
}

# host_unchanged: warn when a host value set here no longer holds.
host_unchanged() {
    [ -s "$WORK/set-sysctls" ] || return 0
    while IFS='=' read -r path value; do
        [ "$(cat "$path")" = "$value" ] || echo "WARNING: $path is $(cat "$path"), not $value: changed by another program during the run" >&2
    done <"$WORK/set-sysctls"
}

# The host-wide values the plan names, set on the host as it says.
"$NETTUNE" plan --profile pps --netns "$NS_RX" --json >"$WORK/plan.json"
HOST_COMMAND=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["host_command"] or "")' "$WORK/plan.json")
if [ "$HOST_WIDE" = 1 ]; then
    python3 -c '
import json, sys
for h in json.load(open(sys.argv[1]))["host_wide"]:
    print(h["target"], h["to"])' "$WORK/plan.json" | while read -r path value; do
        case "$path" in
        /proc/sys/*) set_host "$path" "$value" ;;
        *) echo "not set (not a sysctl): $path" >&2 ;;
        esac
    done
fi

# read_count: datagrams the receiving namespace's applications have read.
read_count() {
    ip netns exec "$NS_RX" awk '/^Udp:/ { n++; if (n == 1) { for (i = 1; i <= NF; i++) if ($i == "InDatagrams") c = i } else { print $c } }' /proc/net/snmp
}

now() { date +%s.%N; }

# host_values plan|original: the host-wide values as the plan names them,
# or as they were before this script.
host_values() {
    local file="$WORK/set-sysctls"
    [ "$1" = plan ] || file="$SAVED"
    [ -s "$file" ] || return 0
    while IFS='=' read -r path value; do
        printf '%s\n' "$value" >"$path"
    done <"$file"
}

# switch FROM TO: roll back FROM's apply, make TO's.
switch() {
    case "$1" in
    before) ;;
    untouched) host_values plan ;;
    *) "$NETTUNE" rollback --state-dir "$STATE" >/dev/null ;;
    esac
    case "$2" in
    before) ;;
    untouched) host_values original ;;
    default) "$NETTUNE" apply --profile pps --netns "$NS_RX" --state-dir "$STATE" >"$WORK/apply.out"
        [ -s "$WORK/apply-shown" ] || { sed 's/^/  | /' "$WORK/apply.out"; echo shown >"$WORK/apply-shown"; } ;;
    iface) "$NETTUNE" apply --profile pps --netns "$NS_RX" --iface "$VETH_RX" --state-dir "$STATE" \
        >"$WORK/apply.out" ;;
    esac
}

median() {
    sort -g | awk '{v[NR]=$1} END {if (NR==0) print "0"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'
}

# ratios PREFIX: append this round's ratios (got[]) to the PREFIX ratio files.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f\n", a / b }'; }
ratios() {
    ratio "${got[default]}" "${got[before]}" >>"$WORK/$1ratio-default"
    ratio "${got[iface]}" "${got[before]}" >>"$WORK/$1ratio-iface"
    if [ "$HOST_WIDE" = 1 ]; then
        ratio "${got[default]}" "${got[untouched]}" >>"$WORK/$1ratio-all"
    fi
}

echo "nettune apply --profile pps --netns: $(nproc) CPUs, $(uname -r), veth with $QUEUES queue(s)," \
    "$FLOWS flows of 32-byte UDP, sender on CPU $SENDER_CPU, receiver on CPU $RECEIVER_CPU," \
    "$ROUNDS quiet rounds of each state, ${WINDOW} s windows; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$HOST_WIDE" = 1 ]; then
    echo "host-wide values set on the host for the whole run (restored on exit): ${HOST_COMMAND:-none}"
else
    echo "host left alone; the plan names: ${HOST_COMMAND:-none}"
fi
"$NETTUNE" plan --profile pps --netns "$NS_RX" | sed 's/^/  | /'

timeout "$LIMIT" "$NETTUNE" bench udp-sink --netns "$NS_RX" --bind 10.122.0.2:0 --threads 1 \
    --pin "$RECEIVER_CPU" --duration $((DURATION + 2)) --json >"$WORK/sink" 2>"$WORK/sink.err" &
SINK=$!
PIDS+=("$SINK")
waited=0
until grep -q 'listening on' "$WORK/sink.err" 2>/dev/null; do
    sleep 0.05
    waited=$((waited + 1))
    [ $waited -le 100 ] || { echo "sink did not start: $(cat "$WORK/sink.err")" >&2; exit 2; }
done
port=$(grep -o 'listening on [^ ]*' "$WORK/sink.err" | head -1 | sed 's/.*://')
timeout "$LIMIT" "$NETTUNE" bench udp-flood --netns "$NS_TX" --to "10.122.0.2:$port" --threads 1 \
    --flows "$FLOWS" --size 32 --pin "$SENDER_CPU" --duration "$DURATION" --json \
    >"$WORK/flood" 2>"$WORK/flood.err" &
FLOOD=$!
PIDS+=("$FLOOD")
sleep 1

# busy: user+nice+system jiffies of all CPUs so far.
busy() { awk '/^cpu / { print $2 + $3 + $4 }' /proc/stat; }
# ours: user+system jiffies of the sink, the flood and ksoftirqd (which
# runs this traffic's softirqs when a CPU is otherwise idle).
OURS_PIDS="$(cat "/proc/$SINK/task/$SINK/children" "/proc/$FLOOD/task/$FLOOD/children")"
for comm in /proc/[0-9]*/comm; do
    case "$(cat "$comm" 2>/dev/null || true)" in
    ksoftirqd/*) OURS_PIDS="$OURS_PIDS $(basename "$(dirname "$comm")")" ;;
    esac
done
ours() {
    local pid total=0 t
    for pid in $OURS_PIDS; do
        t=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)
        total=$((total + t))
    done
    echo "$total"
}
HZ=$(getconf CLK_TCK)

current=before
quiet=0 round=0
while [ "$quiet" -lt "$ROUNDS" ] && [ "$round" -lt "$MAX_ROUNDS" ]; do
    round=$((round + 1))
    line="round $round:" noisy=0
    declare -A got=()
    for k in $(seq 0 $((N - 1))); do
        s=${STATES[$(((round + k) % N))]}
        t=$(now)
        switch "$current" "$s"
        current=$s
        took=$(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
        sleep "$SETTLE"
        b0=$(busy) o0=$(ours) c0=$(read_count) t0=$(now)
        sleep "$WINDOW"
        c1=$(read_count) t1=$(now) b1=$(busy) o1=$(ours)
        pps=$(awk -v a="$c0" -v b="$c1" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.0f", (b - a) / (e - s) }')
        foreign=$(awk -v b="$((b1 - b0))" -v o="$((o1 - o0))" -v hz="$HZ" 'BEGIN { f = (b - o) / hz; printf "%.2f", f < 0 ? 0 : f }')
        awk -v f="$foreign" -v q="$QUIET_CPU" 'BEGIN { exit !(f > q) }' && noisy=1
        got[$s]=$pps
        line="$line $s $pps (other CPU ${foreign} s, switch ${took} s)"
    done
    [ "$current" = untouched ] || host_unchanged
    # Every round, quiet or not, for the figures under load.
    for s in "${STATES[@]}"; do echo "${got[$s]}" >>"$WORK/all-$s"; done
    ratios all-
    if [ "$noisy" = 1 ]; then
        echo "$line: noisy, not counted"
        continue
    fi
    quiet=$((quiet + 1))
    echo "$line: quiet"
    for s in "${STATES[@]}"; do echo "${got[$s]}" >>"$WORK/$s"; done
    ratios ""
done
switch "$current" before
kill -TERM "$FLOOD" "$SINK" 2>/dev/null || true
wait "$FLOOD" "$SINK" 2>/dev/null || true
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
mpps() { median <"$WORK/$1" | awk '{ printf "%.3f", $1 / 1e6 }'; }
range() { sort -g "$WORK/$1" | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%s-%s", lo, hi}'; }
# summary PREFIX WHAT: the medians of the rounds recorded under PREFIX.
summary() {
    echo "received Mpps, median of $2: before $(mpps "$1before"), default $(mpps "$1default")," \
        "--iface $(mpps "$1iface")"
    echo "ratio to before, median of the per-round ratios [range]:" \
        "default $(median <"$WORK/$1ratio-default") [$(range "$1ratio-default")]," \
        "--iface $(median <"$WORK/$1ratio-iface") [$(range "$1ratio-iface")]"
    if [ "$HOST_WIDE" = 1 ]; then
        echo "untouched (host values as they were, nothing applied): $(mpps "$1untouched") Mpps;" \
            "host command + apply (default) / untouched: $(median <"$WORK/$1ratio-all") [$(range "$1ratio-all")]"
    fi
}
echo "all $round rounds, quiet or not (under the machine's other load; noisy):"
summary all- "all $round rounds"
[ "$quiet" -gt 0 ] || { echo "no quiet round in $round: the machine is too busy for this benchmark" >&2; exit 1; }
echo "quiet rounds: $quiet of $round (other processes used at most ${QUIET_CPU} s of CPU in each window)"
summary "" "$quiet quiet rounds"
