#!/usr/bin/env bash
# Busy polling and IRQ deferral across a veth pair with GRO on and TSO off
# (so each veth RX queue has a NAPI instance and local traffic goes through
# it), between two namespaces this script creates.
#
# (a) `nettune bench rr` (TCP, one instance, 14-byte request and reply; a
#     closed loop, so the rate follows the latency), four ways:
#       off     no busy polling
#       busy    --busy-poll 50 on server and client (SO_BUSY_POLL, and the
#               same per epoll instance through EPIOCSPARAMS)
#       napi    busy, with `nettune apply --profile latency` on both veth
#               ends and its short per-NAPI deferral (defer-hard-irqs 2,
#               gro-flush-timeout 20 us, irq-suspend-timeout 20 ms), rolled
#               back after each run. The profile itself leaves deferral off
#               and sets RPS as pps does in a namespace whose host does not
#               busy poll (the sysctls are host-wide; this script busy polls
#               per socket, which no plan can see), so it is applied as a
#               site profile that includes latency and leaves RPS and RFS
#               alone (off on these new veths, as with busy polling on the
#               host), and the deferral as a saved plan: the http profile's
#               NAPI changes with the latency values.
#       prefer  napi, and --prefer-busy-poll on both
#     transactions/s, p50, p99 and p99.9 of the round trip.
# (b) The reference tool at one fixed rate (so latency is compared at the same
#     rate): `sockperf ping-pong --mps RATE --full-rtt`, without and with
#     `--lls 50` (SO_BUSY_POLL on its sockets), and with --lls 50 plus the
#     latency profile's NAPI values.
# Placement: server on CPU 0, client on CPU 1 (PIN=yes, default), or
# unpinned (PIN=no). Rounds alternate the variants; the median of ROUNDS is
# shown with every round. Traffic stays in this script's namespaces; only
# processes it started are killed; applied NAPI values are rolled back.
# Env: SECS (per run, default 5), ROUNDS (default 5), RATE (default 5000),
# PIN (yes|no), QUEUES (veth queues each way, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${SECS:-5}
rounds=${ROUNDS:-5}
rate=${RATE:-5000}
pin=${PIN:-yes}
queues=${QUEUES:-2}
size=14

command -v sockperf >/dev/null || { apt-get update; apt-get install -y sockperf; }
command -v jq >/dev/null || { apt-get update; apt-get install -y jq; }
cargo build --release --quiet
bin=$PWD/target/release/nettune
work=$(mktemp -d)
state=$work/state
nss=ntbp-s-$$
nsc=ntbp-c-$$
vs=bps$$
vc=bpc$$
pids=()

rollback_all() {
    while "$bin" rollback --state-dir "$state" >/dev/null 2>&1; do :; done
}
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rollback_all
    ip netns del "$nss" 2>/dev/null || true
    ip netns del "$nsc" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$nss"
ip netns add "$nsc"
mac_s=02:00:00:7a:00:02
mac_c=02:00:00:7a:00:01
# Two queues each way by default, one per CPU. With busy polling the
# latency profile keeps RPS off with any number (RPS would hand each packet
# to another CPU's backlog, which a busy poller cannot reach): QUEUES=1
# shows it.
ip link add "$vc" netns "$nsc" address "$mac_c" numrxqueues "$queues" numtxqueues "$queues" type veth \
    peer name "$vs" netns "$nss" address "$mac_s" numrxqueues "$queues" numtxqueues "$queues"
ip -n "$nsc" addr add 10.122.0.1/24 dev "$vc"
ip -n "$nss" addr add 10.122.0.2/24 dev "$vs"
for ns in "$nss" "$nsc"; do ip -n "$ns" link set lo up; done
ip -n "$nsc" link set "$vc" up
ip -n "$nss" link set "$vs" up
ip -n "$nsc" neigh add 10.122.0.2 lladdr "$mac_s" dev "$vc" nud permanent
ip -n "$nss" neigh add 10.122.0.1 lladdr "$mac_c" dev "$vs" nud permanent
# veth has NAPI only with GRO (or XDP) on, and uses it for a locally sent
# packet only when the sending veth has TSO off (veth_skb_is_eligible_for_gro
# in drivers/net/veth.c): otherwise the packet takes the backlog, its socket
# gets no NAPI id (SO_INCOMING_NAPI_ID 0) and busy polling never engages.
ip netns exec "$nss" ethtool -K "$vs" gro on tso off >/dev/null
ip netns exec "$nsc" ethtool -K "$vc" gro on tso off >/dev/null
server_ip=10.122.0.2
life=$((secs + 60))

if [ "$pin" = yes ]; then
    on_server=(taskset -c 0); on_client=(taskset -c 1); placement="server CPU 0, client CPU 1"
else
    on_server=(); on_client=(); placement="unpinned"
fi

# The latency profile's short deferral per NAPI, as a saved plan: the
# http profile's NAPI changes (it defers in any namespace) with the
# latency profile's values.
napi_plan() { # netns dev -> plan file
    "$bin" plan --profile http --netns "$1" --iface "$2" --json | jq '
        .profile = "custom" | .host_wide = [] | .host_command = null | .skipped = []
        | .changes |= map(select(.target | startswith("napi:"))
            | .to = ({"defer-hard-irqs": "2", "gro-flush-timeout": "20000",
                      "irq-suspend-timeout": "20000000"}[.target | split(":")[3]])
            | .reason = "the latency profile'"'"'s short deferral (bench/busy_poll.sh)")' \
        >"$work/napi-$2.json"
    echo "$work/napi-$2.json"
}

# The latency profile as it is where busy polling is on: RPS and RFS
# left alone (off on these veths).
cat >"$work/latency-busy.toml" <<'EOF'
include = "latency"
description = "latency with busy polling per socket: RPS and RFS stay off"
rps = "off"
rfs = "off"
EOF

apply_napi() {
    local ns dev
    for pair in "$nss/$vs" "$nsc/$vc"; do
        ns=${pair%%/*}; dev=${pair#*/}
        "$bin" apply --profile-file "$work/latency-busy.toml" --netns "$ns" --iface "$dev" --state-dir "$state" >/dev/null
        "$bin" apply --plan "$(napi_plan "$ns" "$dev")" --netns "$ns" --state-dir "$state" >/dev/null
    done
}

stop_server() { # pid
    kill -INT "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

wait_for_address() { # server's stderr file -> the address of its listening line
    local i addr
    for i in $(seq 100); do
        addr=$(sed -n 's/.*: listening on \([^ ]*\).*/\1/p' "$1" 2>/dev/null | head -1)
        if [ -n "$addr" ]; then echo "$addr"; return; fi
        sleep 0.05
    done
    echo "rr-server printed no address" >&2; exit 1
}

# A JSON number by key from nettune's report (first match).
field() { grep -m1 "\"$2\":" "$1" | sed -E 's/.*: *([0-9.]+).*/\1/'; }

rr_one() { # variant -> "rate p50 p99 p999"
    local v=$1 busy=() spid addr
    case $v in
        busy) busy=(--busy-poll 50) ;;
        napi) busy=(--busy-poll 50); apply_napi ;;
        prefer) busy=(--busy-poll 50 --prefer-busy-poll); apply_napi ;;
    esac
    rm -f "$work/srv.err"
    ip netns exec "$nss" "${on_server[@]}" "$bin" bench rr-server --bind "$server_ip:0" \
        --duration "$life" "${busy[@]}" >/dev/null 2>"$work/srv.err" &
    spid=$!; pids+=("$spid")
    addr=$(wait_for_address "$work/srv.err")
    ip netns exec "$nsc" "${on_client[@]}" "$bin" bench rr --to "$addr" --proto tcp --size "$size" \
        --warmup 1 --duration "$secs" "${busy[@]}" --json >"$work/rr.json" 2>"$work/rr.err" \
        || { echo "nettune rr failed ($v):" >&2; cat "$work/rr.err" >&2; }
    stop_server "$spid"
    case $v in napi | prefer) rollback_all ;; esac
    echo "$(field "$work/rr.json" transactions_per_sec | cut -d. -f1) $(field "$work/rr.json" p50_us) $(field "$work/rr.json" p99_us) $(field "$work/rr.json" p999_us)"
}

# sockperf percentile line "---> percentile 99.000 =   12.345" (usec, RTT).
sp_pct() { awk -v p="$2" '$0 ~ "percentile " p " =" { print $NF; exit }' "$1"; }

# A TCP port free in the server's namespace.
free_port() {
    local p
    for p in $(shuf -i 20000-29999 -n 100); do
        if [ -z "$(ip netns exec "$nss" ss -Htln "sport = :$p")" ]; then echo "$p"; return; fi
    done
    echo "no free port" >&2; exit 1
}

sockperf_one() { # variant -> "rate p50 p99 p999"
    local v=$1 lls=() spid port
    port=$(free_port)
    case $v in
        lls) lls=(--lls 50) ;;
        napi) lls=(--lls 50); apply_napi ;;
    esac
    ip netns exec "$nss" timeout -s INT "$life" "${on_server[@]}" \
        sockperf sr --tcp -i "$server_ip" -p "$port" "${lls[@]}" >/dev/null 2>&1 &
    spid=$!; pids+=("$spid")
    local i
    for i in $(seq 100); do
        [ -n "$(ip netns exec "$nss" ss -Htln "sport = :$port")" ] && break
        sleep 0.05
    done
    ip netns exec "$nsc" "${on_client[@]}" sockperf pp --tcp -i "$server_ip" -p "$port" -t "$secs" \
        -m "$size" --mps "$rate" --full-rtt "${lls[@]}" >"$work/pp.log" 2>&1 \
        || { echo "sockperf pp failed ($v):" >&2; tail -3 "$work/pp.log" >&2; }
    stop_server "$spid"
    [ "$v" = napi ] && rollback_all
    local got
    got=$(awk '/Valid Duration/ { for (i = 1; i <= NF; i++) {
        if ($i ~ /^RunTime=/) { split($i, a, "="); t = a[2] }
        if ($i ~ /^ReceivedMessages=/) { split($i, b, "="); n = b[2] } } }
        END { if (t > 0) printf "%.0f", n / t; else print 0 }' "$work/pp.log")
    echo "$got $(sp_pct "$work/pp.log" 50.000) $(sp_pct "$work/pp.log" 99.000) $(sp_pct "$work/pp.log" 99.900)"
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

declare -A runs
echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "veth pair ($queues queue(s) each way) with GRO on, TSO off between two namespaces; $placement; TCP, $size-byte request and reply"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $secs s per run, $rounds rounds alternating, median shown"
for r in $(seq "$rounds"); do
    for v in off busy napi prefer; do runs[rr_$v]+="$(rr_one "$v");"; done
    for v in plain lls napi; do runs[sp_$v]+="$(sockperf_one "$v");"; done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

report() { # key label
    local all=${runs[$1]} col meds=()
    for col in 1 2 3 4; do
        meds+=("$(echo "$all" | tr ';' '\n' | grep . | awk -v c="$col" '{ print $c }' | median)")
    done
    printf '%-34s %10s %8s %8s %8s   %s\n' "$2" "${meds[0]}" "${meds[1]}" "${meds[2]}" "${meds[3]}" \
        "$(echo "$all" | tr ';' '\n' | grep . | awk '{ printf "%s/%s ", $1, $3 }')"
}
echo
echo "(a) nettune bench rr, closed loop (one instance)"
printf '%-34s %10s %8s %8s %8s   %s\n' variant "trans/s" "p50 us" "p99 us" "p99.9 us" "rounds (trans/s / p99)"
report rr_off "off"
report rr_busy "busy-poll 50"
report rr_napi "busy-poll 50 + NAPI values"
report rr_prefer "busy-poll 50 + NAPI + prefer"
echo
echo "(b) sockperf ping-pong --mps $rate --full-rtt (fixed rate, round-trip latency)"
printf '%-34s %10s %8s %8s %8s   %s\n' variant "msgs/s" "p50 us" "p99 us" "p99.9 us" "rounds (msgs/s / p99)"
report sp_plain "no busy polling"
report sp_lls "--lls 50"
report sp_napi "--lls 50 + NAPI values"
