#!/usr/bin/env bash
# bench/xdp.sh: the single-RX-queue bypass on a veth pair between two
# network namespaces. One steered UDP flow (16 source ports, 32-byte
# packets, one nettune udp-flood thread) is read by
#   recvmmsg  nettune bench udp-sink            (the kernel stack, a UDP socket)
#   af_xdp    nettune bench udp-sink --xdp      (XDP redirect to an AF_XDP socket)
#   af_xdp_generic  the same with --xdp-mode generic (the program runs after
#             the kernel built the packet's skb)
#   af_xdp_busy     the same (native) with --busy-poll 50 --busy-poll-budget 64
#             --prefer-busy-poll: the reader polls the veth's NAPI itself, with
#             the NAPI's IRQ deferral set for the run (and restored), so the
#             program and the copy run on the reader's CPU, not the sender's
#   recvmmsg_deferred  the recvmmsg sink with af_xdp_busy's IRQ deferral
#             (2 empty polls, 200 us) on the veth's NAPI, which UDP from a
#             local socket goes through only with GRO on at the receiving
#             end and TSO off at the sending one (veth_skb_is_eligible_for_gro);
#             set for the run and restored. The recvmmsg sink cannot busy
#             poll (its socket options are the AF_XDP sink's), so this is the
#             deferral alone, without the bypass
#   xsk_c     bench/c/xsk_rxdrop (xdpsock's rxdrop loop on libxdp's xsk API,
#             with xdpsock's queue-wide program: every packet of the queue,
#             TCP included, goes to the socket; only if it builds)
# while a TCP connection (iperf3 at 1 Mbit/s) runs through the same veth
# queue the whole time: with the AF_XDP sink it must keep working (the
# program passes it to the stack; xsk_c's program takes it, so it stops
# there). A benchmark, not a test.
#
# The veth has one RX queue, so every packet arrives on queue 0. Each
# reader can hold at least as many packets as the other while it is off the
# CPU: the AF_XDP readers 16384 frames, the recvmmsg sink a 32 MiB
# SO_RCVBUF (64 MiB granted: at some 1 KiB of accounting per small
# packet, more than 16384 of them). Rounds
# alternate the readers (drift on a shared machine hits all alike). Rates:
# median over the whole seconds 2..DURATION of all rounds [range of the
# per-run medians]; CPU: user+system of the reader process per packet it
# received (/usr/bin/time), median of the runs; the load average is
# printed before and after.
#
# Needs root, ip, ethtool, iperf3, /usr/bin/time; gcc, libxdp-dev and libbpf-dev for
# the C reader. Everything it creates has a unique name and is removed on
# exit, also on failure or Ctrl-C.
#
# Environment: DURATION (5), REPEAT (3), SENDER_CPU (0), RECEIVER_CPU (1),
# ONLY (the readers to run, space separated; default all).
set -euo pipefail

DURATION=${DURATION:-5}
REPEAT=${REPEAT:-3}
SENDER_CPU=${SENDER_CPU:-0}
RECEIVER_CPU=${RECEIVER_CPU:-1}
LIMIT=$((DURATION + 20))

cd "$(dirname "$0")/.."
for tool in ip iperf3 /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "bench/xdp.sh needs $tool" >&2; exit 2; }
done
. bench/xdp-veth.sh
xdp_bench_start "nx$$"

echo "building nettune (release) and the C reader..." >&2
cargo build --release --quiet
NETTUNE=$PWD/target/release/nettune
READERS="recvmmsg af_xdp af_xdp_generic af_xdp_busy recvmmsg_deferred"
if gcc -O2 -Wall -o "$WORK/xsk_rxdrop" bench/c/xsk_rxdrop.c -lxdp -lbpf 2>"$WORK/gcc.err"; then
    READERS="$READERS xsk_c"
else
    echo "xsk_rxdrop does not build here (libxdp-dev, libbpf-dev?): $(head -1 "$WORK/gcc.err")" >&2
fi

if [ -n "${ONLY:-}" ]; then
    for reader in $ONLY; do
        case " $READERS " in
        *" $reader "*) ;;
        *) echo "ONLY: '$reader' is not one of: $READERS" >&2; exit 2 ;;
        esac
    done
    READERS=$ONLY
fi

xdp_veth_up 79 79
ip netns exec "$NS_RX" iperf3 -s -p 5201 >"$WORK/iperf-server" 2>&1 &
PIDS+=("$!")
sleep 0.5

# napi_deferral on|off: the veth NAPI the recvmmsg_deferred reader goes through (GRO on
# at the receiving end, TSO off at the sending one) with the AF_XDP sink's
# IRQ deferral, or the pair as created. The cleanup deletes the namespaces,
# so an interrupted run leaves nothing either way.
napi_deferral() {
    local gro=off tso=on defer=0 timeout=0
    if [ "$1" = on ]; then gro=on tso=off defer=2 timeout=200000; fi
    ip netns exec "$NS_RX" ethtool -K "$VETH_RX" gro "$gro" >/dev/null
    ip netns exec "$NS_TX" ethtool -K "$VETH_TX" tso "$tso" >/dev/null
    ip netns exec "$NS_RX" sh -c "echo $defer >/sys/class/net/$VETH_RX/napi_defer_hard_irqs &&
        echo $timeout >/sys/class/net/$VETH_RX/gro_flush_timeout"
}

# seconds FILE: the per-second "X.XXXM pps" values of seconds 2..DURATION.
seconds() {
    grep -Eo '^ *[0-9.]+M pps' "$1" | sed -n "2,${DURATION}p" | awk '{sub("M","",$1); print $1}'
}
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "0"; else print v[int((NR+1)/2)]}'; }
spread() { sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%s-%s", lo, hi}'; }

# run READER: one run; pools its per-second rates, CPU per packet, loss and
# whether the TCP connection kept working.
run() {
    local reader=$1 out="$WORK/$1-$RANDOM" secs=$((DURATION + 3))
    local timed=(/usr/bin/time -f "cpu %U %S")
    case $reader in
    recvmmsg)
        timeout "$LIMIT" ip netns exec "$NS_RX" "${timed[@]}" "$NETTUNE" bench udp-sink \
            --bind 10.79.0.2:9000 --batch 512 --rcvbuf 33554432 --pin "$RECEIVER_CPU" \
            --duration "$secs" >"$out.rx" 2>"$out.rxerr" &
        ;;
    recvmmsg_deferred)
        napi_deferral on
        timeout "$LIMIT" ip netns exec "$NS_RX" "${timed[@]}" "$NETTUNE" bench udp-sink \
            --bind 10.79.0.2:9000 --batch 512 --rcvbuf 33554432 --pin "$RECEIVER_CPU" \
            --duration "$secs" >"$out.rx" 2>"$out.rxerr" &
        ;;
    af_xdp | af_xdp_generic | af_xdp_busy)
        local extra=()
        case $reader in
        af_xdp_generic) extra=(--xdp-mode generic) ;;
        af_xdp_busy) extra=(--busy-poll 50 --busy-poll-budget 64 --prefer-busy-poll) ;;
        esac
        timeout "$LIMIT" "${timed[@]}" "$NETTUNE" bench udp-sink --xdp --iface "$VETH_RX" \
            --queue 0 --netns "$NS_RX" --bind 10.79.0.2:9000 --pin "$RECEIVER_CPU" \
            --duration "$secs" "${extra[@]}" >"$out.rx" 2>"$out.rxerr" &
        ;;
    xsk_c)
        timeout "$LIMIT" ip netns exec "$NS_RX" "${timed[@]}" "$WORK/xsk_rxdrop" "$VETH_RX" 0 \
            "$RECEIVER_CPU" "$secs" >"$out.rx" 2>"$out.rxerr" &
        ;;
    esac
    local rx_pid=$!
    PIDS+=("$rx_pid")
    xdp_wait_reader "$out.rxerr" "$reader"
    timeout "$LIMIT" ip netns exec "$NS_TX" iperf3 -c 10.79.0.2 -p 5201 -b 1M -t "$DURATION" -J \
        >"$out.tcp" 2>&1 &
    local tcp_pid=$!
    PIDS+=("$tcp_pid")
    timeout "$LIMIT" ip netns exec "$NS_TX" "$NETTUNE" bench udp-flood --to 10.79.0.2:9000 \
        --flows 16 --size 32 --batch 1024 --pin "$SENDER_CPU" --duration "$DURATION" --json \
        >"$out.tx" 2>"$out.txerr" || fail "udp-flood" "$out.txerr"
    local tcp_ok=no
    wait "$tcp_pid" && python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if "error" not in d and d["end"]["sum_received"]["bytes"] > 0 else 1)' "$out.tcp" &&
        tcp_ok=yes
    # A run that measured nothing exits 1 with its report; keep going.
    wait "$rx_pid" || [ $? -eq 1 ] || fail "$reader" "$out.rxerr"
    [ "$reader" != recvmmsg_deferred ] || napi_deferral off
    local pool="$WORK/pool-$reader"
    seconds "$out.rx" | tee -a "$pool" | median >>"$pool-runs"
    local packets
    packets=$(grep -Eo '^(udp-sink[^:]*: |total )[0-9]+' "$out.rx" | grep -Eo '[0-9]+$' | head -1)
    awk -v p="${packets:-0}" '/^cpu / { if (p > 0) printf "%.3f\n", ($2 + $3) * 1e6 / p; else print "0" }' \
        "$out.rxerr" >>"$pool-cpu"
    python3 -c 'import json,sys; print("%.3f" % (json.load(open(sys.argv[1]))["pps"] / 1e6))' "$out.tx" >>"$pool-sent"
    echo "$tcp_ok" >>"$pool-tcp"
    grep -E '^(sequence|drops|program|path|where|busy poll)' "$out.rx" | sed "s/^/  $reader: /" >&2 || true
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "nettune bench: single-RX-queue bypass on veth, $(nproc) CPUs, $(uname -r), $REPEAT x" \
    "${DURATION} s per reader, sender (udp-flood, 16 flows, 32 B) on CPU $SENDER_CPU, reader on" \
    "CPU $RECEIVER_CPU, iperf3 TCP at 1 Mbit/s alongside; load average before:" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$REPEAT"); do
    for reader in $READERS; do
        echo "round $round: $reader (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        run "$reader"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Mpps: median of whole seconds 2..$DURATION of all runs [range of per-run medians];" \
    "us/pkt: reader process CPU per packet received, median of runs"
printf '%-15s %-10s %-21s %-9s %s\n' reader "sent Mpps" "received Mpps" "us/pkt" "TCP kept working"
for reader in $READERS; do
    p="$WORK/pool-$reader"
    printf '%-15s %-10s %-21s %-9s %s\n' "$reader" "$(median <"$p-sent")" \
        "$(median <"$p") [$(spread <"$p-runs")]" "$(median <"$p-cpu")" \
        "$(sort "$p-tcp" | uniq -c | tr '\n' ' ')"
done
pooled() { if [ -f "$WORK/pool-$1" ]; then median <"$WORK/pool-$1"; else echo 0; fi; }
for reader in af_xdp af_xdp_generic af_xdp_busy recvmmsg_deferred; do
    [ -f "$WORK/pool-$reader" ] && [ -f "$WORK/pool-recvmmsg" ] || continue
    label="AF_XDP sink"
    case $reader in
    af_xdp_generic) label="AF_XDP sink, generic XDP" ;;
    af_xdp_busy) label="AF_XDP sink, busy polling" ;;
    recvmmsg_deferred) label="recvmmsg sink with the same IRQ deferral" ;;
    esac
    echo "$label / recvmmsg sink: $(ratio "$(pooled "$reader")" "$(pooled recvmmsg)")"
done
if [ -f "$WORK/pool-af_xdp_busy" ] && [ -f "$WORK/pool-recvmmsg_deferred" ]; then
    echo "AF_XDP sink, busy polling / recvmmsg sink, same IRQ deferral:" \
        "$(ratio "$(pooled af_xdp_busy)" "$(pooled recvmmsg_deferred)")"
fi
if [ -f "$WORK/pool-xsk_c" ] && [ -f "$WORK/pool-af_xdp" ]; then
    echo "AF_XDP sink / xsk_rxdrop (C, libxdp): $(ratio "$(pooled af_xdp)" "$(pooled xsk_c)")"
fi
