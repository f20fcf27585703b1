# Sourced by bench/xdp.sh, bench/xdp-loss.sh and bench/xdp-profile.sh: the
# one-queue veth pair between two namespaces that the AF_XDP benchmarks
# send across, with unique names and a cleanup that removes everything on
# exit, failure or Ctrl-C and stops only the processes in PIDS.

# xdp_bench_start TAG: the names (NS_TX, NS_RX, VETH_TX, VETH_RX), a work
# directory (WORK, also nettune's state dir), PIDS, and the cleanup traps.
xdp_bench_start() {
    NS_TX="${1}tx" NS_RX="${1}rx" VETH_TX="${1}t" VETH_RX="${1}r"
    WORK=$(mktemp -d)
    PIDS=()
    export NETTUNE_STATE_DIR="$WORK/state"
    trap xdp_bench_cleanup EXIT
    trap 'exit 130' INT TERM
}

xdp_bench_cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in "$NS_TX" "$NS_RX"; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$WORK"
}

# xdp_veth_up NET MAC: the pair with one RX and one TX queue each way,
# 10.NET.0.1 (sender, MAC 02:00:00:MAC:00:01) and 10.NET.0.2 (receiver), and
# a permanent neighbour entry so that no ARP packet reaches the reader.
xdp_veth_up() {
    local net=$1 mac=$2
    ip netns add "$NS_TX"
    ip netns add "$NS_RX"
    ip link add "$VETH_TX" netns "$NS_TX" address "02:00:00:$mac:00:01" numrxqueues 1 numtxqueues 1 \
        type veth peer name "$VETH_RX" netns "$NS_RX" address "02:00:00:$mac:00:02" \
        numrxqueues 1 numtxqueues 1
    ip -n "$NS_TX" addr add "10.$net.0.1/24" dev "$VETH_TX"
    ip -n "$NS_RX" addr add "10.$net.0.2/24" dev "$VETH_RX"
    for ns in "$NS_TX" "$NS_RX"; do ip -n "$ns" link set lo up; done
    ip -n "$NS_TX" link set "$VETH_TX" up
    ip -n "$NS_RX" link set "$VETH_RX" up
    ip -n "$NS_TX" neigh add "10.$net.0.2" lladdr "02:00:00:$mac:00:02" dev "$VETH_TX" nud permanent
}

# A step that failed: its name and its log, exit 2.
fail() { echo "$1 failed: $(cat "$2")" >&2; exit 2; }

# Wait (up to 10 s) until the reader started in the background says on
# stderr (FILE) that it listens or reads; else fail naming READER.
xdp_wait_reader() { # FILE READER
    local waited=0
    until grep -qE 'listening on|reading' "$1" 2>/dev/null; do
        sleep 0.05
        waited=$((waited + 1))
        [ $waited -le 200 ] || fail "$2 start" "$1"
    done
}
