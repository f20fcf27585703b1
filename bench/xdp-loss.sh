#!/usr/bin/env bash
# bench/xdp-loss.sh: loss when the reader is off its CPU for a while, the
# AF_XDP sink against the recvmmsg sink with the same memory. A benchmark,
# not a test.
#
# A veth pair between two namespaces (one RX queue), one nettune udp-flood
# thread pinned to SENDER_CPU sending 32-byte packets at a steady RATE
# (packets/s, paced) for DURATION seconds; the reader pinned to
# RECEIVER_CPU. A competing process takes the reader's CPU away for OFF ms
# out of every PERIOD_MS ms: a busy loop pinned to RECEIVER_CPU under
# SCHED_FIFO (chrt -f 50), so the reader does not run at all while it
# spins, and the kernel's receive work (which veth does on the sending
# CPU) goes on filling the reader's buffer. Same memory for both readers:
#   af_xdp    nettune bench udp-sink --xdp --ring R: a UMEM of R frames of
#             2048 bytes (R * 2048 bytes), fill and RX rings of R entries;
#   recvmmsg  nettune bench udp-sink --rcvbuf R*1024: the kernel doubles it,
#             so the socket may hold R * 2048 bytes (the report's "granted";
#             it counts each packet's skb truesize, not its 32 bytes).
# Lost = (sent - received) / sent: sent from the flood's report, received
# from the sink's. Rounds alternate the readers; the figure is the median
# of REPEAT runs [range]. The load average is printed before and after.
#
# Needs root, ip, chrt and taskset (util-linux), python3. Everything it
# creates has a unique name and is removed on exit, also on failure or
# Ctrl-C; the competing process is killed by its PID.
#
# Environment: DURATION (5), RATE (200000), PERIOD_MS (100), OFF_MS
# ("0 10 30 60"), RINGS ("2048 8192"), REPEAT (3), SENDER_CPU (0),
# RECEIVER_CPU (1), READERS ("recvmmsg af_xdp"; af_xdp_busy adds the AF_XDP
# sink with --busy-poll 50 --busy-poll-budget 64 --prefer-busy-poll).
set -euo pipefail

DURATION=${DURATION:-5}
RATE=${RATE:-200000}
PERIOD_MS=${PERIOD_MS:-100}
OFF_MS=${OFF_MS:-0 10 30 60}
RINGS=${RINGS:-2048 8192}
REPEAT=${REPEAT:-3}
SENDER_CPU=${SENDER_CPU:-0}
RECEIVER_CPU=${RECEIVER_CPU:-1}
READERS=${READERS:-recvmmsg af_xdp}
LIMIT=$((DURATION + 20))

cd "$(dirname "$0")/.."
for tool in ip chrt taskset python3; do
    command -v "$tool" >/dev/null || { echo "bench/xdp-loss.sh needs $tool" >&2; exit 2; }
done
for off in $OFF_MS; do
    if [ "$off" -ge "$PERIOD_MS" ] || [ $((off * 100)) -gt $((PERIOD_MS * 90)) ]; then
        echo "OFF_MS $off: keep it under 90% of PERIOD_MS ($PERIOD_MS)" >&2
        exit 2
    fi
done
. bench/xdp-veth.sh
xdp_bench_start "nl$$"

echo "building nettune (release)..." >&2
cargo build --release --quiet
NETTUNE=$PWD/target/release/nettune

xdp_veth_up 122 7a

# The competing process: spin OFF ms, sleep the rest of PERIOD_MS, for
# SECS seconds.
HOG='import sys, time
on, period, end = float(sys.argv[1]) / 1e3, float(sys.argv[2]) / 1e3, time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    start = time.monotonic()
    while time.monotonic() - start < on:
        pass
    time.sleep(max(0.0, period - (time.monotonic() - start)))'

median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "-"; else print v[int((NR+1)/2)]}'; }
spread() { sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {if (NR==0) print "-"; else printf "%s-%s", lo, hi}'; }
field() { python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d = d[k]
print(d)' "$1" "$2"; }

# run READER RING OFF: one run; appends the loss in percent to its pool.
run() {
    local reader=$1 ring=$2 off=$3 out="$WORK/$1-$RANDOM" secs=$((DURATION + 3))
    case $reader in
    recvmmsg)
        timeout "$LIMIT" "$NETTUNE" bench udp-sink --netns "$NS_RX" --bind 10.122.0.2:9000 \
            --batch 512 --rcvbuf $((ring * 1024)) --pin "$RECEIVER_CPU" --duration "$secs" \
            --json >"$out.rx" 2>"$out.rxerr" &
        ;;
    af_xdp | af_xdp_busy)
        local extra=()
        [ "$reader" = af_xdp_busy ] &&
            extra=(--busy-poll 50 --busy-poll-budget 64 --prefer-busy-poll)
        timeout "$LIMIT" "$NETTUNE" bench udp-sink --xdp --iface "$VETH_RX" --queue 0 \
            --netns "$NS_RX" --bind 10.122.0.2:9000 --ring "$ring" --pin "$RECEIVER_CPU" \
            --duration "$secs" --json "${extra[@]}" >"$out.rx" 2>"$out.rxerr" &
        ;;
    *) echo "READERS: '$reader' is not recvmmsg, af_xdp or af_xdp_busy" >&2; exit 2 ;;
    esac
    local rx_pid=$!
    PIDS+=("$rx_pid")
    xdp_wait_reader "$out.rxerr" "$reader"
    sleep 0.5 # the veth's NAPI restarts as the program attaches
    if [ "$off" -gt 0 ]; then
        chrt -f 50 taskset -c "$RECEIVER_CPU" python3 -c "$HOG" "$off" "$PERIOD_MS" \
            $((DURATION + 1)) &
        PIDS+=("$!")
    fi
    timeout "$LIMIT" ip netns exec "$NS_TX" "$NETTUNE" bench udp-flood --to 10.122.0.2:9000 \
        --size 32 --rate "$RATE" --pin "$SENDER_CPU" --duration "$DURATION" --json \
        >"$out.tx" 2>"$out.txerr" || fail "udp-flood" "$out.txerr"
    wait "$rx_pid" || [ $? -eq 1 ] || fail "$reader" "$out.rxerr"
    local sent received memory
    sent=$(field "$out.tx" packets)
    received=$(field "$out.rx" packets)
    if [ "$reader" = recvmmsg ]; then
        memory=$(field "$out.rx" rcvbuf.granted)
    else
        memory=$(field "$out.rx" umem_bytes)
    fi
    echo "$memory" >"$WORK/memory-$reader-$ring"
    awk -v s="$sent" -v r="$received" 'BEGIN { if (s > 0) printf "%.2f\n", (s - r) * 100 / s; else print "-" }' \
        >>"$WORK/pool-$reader-$ring-$off"
    echo "  $reader ring $ring off $off ms: sent $sent received $received" >&2
}

echo "nettune bench: loss with the reader off its CPU, veth, $(nproc) CPUs, $(uname -r);" \
    "$RATE packets/s of 32 B for ${DURATION} s from CPU $SENDER_CPU, reader on CPU" \
    "$RECEIVER_CPU, a SCHED_FIFO busy loop there OFF ms of every $PERIOD_MS ms;" \
    "$REPEAT runs each; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ring in $RINGS; do
    for off in $OFF_MS; do
        for round in $(seq 1 "$REPEAT"); do
            for reader in $READERS; do
                echo "ring $ring, off $off ms, round $round: $reader (load $(cut -d' ' -f1 /proc/loadavg))" >&2
                run "$reader" "$ring" "$off"
            done
        done
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "lost % of sent: median of $REPEAT runs [range]; memory: the AF_XDP UMEM and the granted SO_RCVBUF, bytes"
header=$(printf '%-7s %-10s %-8s' ring memory "off ms")
for reader in $READERS; do header+=$(printf ' %-20s' "$reader"); done
echo "$header"
for ring in $RINGS; do
    for off in $OFF_MS; do
        line=$(printf '%-7s %-10s %-8s' "$ring" "$(cat "$WORK/memory-af_xdp-$ring" 2>/dev/null ||
            cat "$WORK/memory-recvmmsg-$ring")" "$off/$PERIOD_MS")
        for reader in $READERS; do
            p="$WORK/pool-$reader-$ring-$off"
            line+=$(printf ' %-20s' "$(median <"$p") [$(spread <"$p")]")
        done
        echo "$line"
    done
done
