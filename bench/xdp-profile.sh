#!/usr/bin/env bash
# bench/xdp-profile.sh: where the CPUs' time goes per packet, the recvmmsg
# sink against the AF_XDP sink (and the AF_XDP sink with busy polling), on
# the traffic of bench/xdp.sh: a veth pair between two namespaces, one
# nettune udp-flood thread (16 flows of 32 B) pinned to SENDER_CPU, the
# reader pinned to RECEIVER_CPU, as fast as they go. A benchmark, not a
# test.
#
# For each reader, perf samples both CPUs on the cpu-clock software event
# (perf record -e cpu-clock -a -F FREQ: no hardware counters needed) for
# WINDOW seconds in the middle of the run. Each sample stands for 1/FREQ s
# of one CPU; a function's time per packet is its samples / FREQ divided by
# the packets the reader received in the window (its per-second rates).
# On veth the receive softirq (the veth's NAPI: the XDP program and the
# copy into the UMEM, or the IP/UDP stack and the socket queue) runs on
# the sending CPU, so both CPUs are shown: the sending CPU's time is the
# flood's and the receive path's, the reading CPU's is the reader's.
#
# Needs root, ip, perf (Debian: linux-perf). Everything it creates has a
# unique name and is removed on exit, also on failure or Ctrl-C.
#
# Environment: DURATION (8), WINDOW (4), FREQ (4999), TOP (8), SENDER_CPU
# (0), RECEIVER_CPU (1), READERS ("recvmmsg af_xdp af_xdp_busy").
set -euo pipefail

DURATION=${DURATION:-8}
WINDOW=${WINDOW:-4}
FREQ=${FREQ:-4999}
TOP=${TOP:-8}
SENDER_CPU=${SENDER_CPU:-0}
RECEIVER_CPU=${RECEIVER_CPU:-1}
READERS=${READERS:-recvmmsg af_xdp af_xdp_busy}
LIMIT=$((DURATION + 20))

cd "$(dirname "$0")/.."
for tool in ip perf python3; do
    command -v "$tool" >/dev/null || { echo "bench/xdp-profile.sh needs $tool" >&2; exit 2; }
done
[ "$WINDOW" -le $((DURATION - 3)) ] || { echo "WINDOW must be at most DURATION - 3" >&2; exit 2; }
. bench/xdp-veth.sh
xdp_bench_start "np$$"

echo "building nettune (release)..." >&2
cargo build --release --quiet
NETTUNE=$PWD/target/release/nettune

xdp_veth_up 123 7b


# profile READER: one run with perf over the window; prints its table.
profile() {
    local reader=$1 out="$WORK/$1" secs=$((DURATION + 3))
    case $reader in
    recvmmsg)
        timeout "$LIMIT" "$NETTUNE" bench udp-sink --netns "$NS_RX" --bind 10.123.0.2:9000 \
            --batch 512 --rcvbuf 33554432 --pin "$RECEIVER_CPU" --duration "$secs" --json \
            >"$out.rx" 2>"$out.rxerr" &
        ;;
    af_xdp | af_xdp_busy)
        local extra=()
        [ "$reader" = af_xdp_busy ] &&
            extra=(--busy-poll 50 --busy-poll-budget 64 --prefer-busy-poll)
        timeout "$LIMIT" "$NETTUNE" bench udp-sink --xdp --iface "$VETH_RX" --queue 0 \
            --netns "$NS_RX" --bind 10.123.0.2:9000 --pin "$RECEIVER_CPU" --duration "$secs" \
            --json "${extra[@]}" >"$out.rx" 2>"$out.rxerr" &
        ;;
    *) echo "READERS: '$reader' is not recvmmsg, af_xdp or af_xdp_busy" >&2; exit 2 ;;
    esac
    local rx_pid=$!
    PIDS+=("$rx_pid")
    xdp_wait_reader "$out.rxerr" "$reader"
    sleep 0.5
    timeout "$LIMIT" ip netns exec "$NS_TX" "$NETTUNE" bench udp-flood --to 10.123.0.2:9000 \
        --flows 16 --size 32 --batch 1024 --pin "$SENDER_CPU" --duration "$DURATION" --json \
        >"$out.tx" 2>"$out.txerr" &
    local tx_pid=$!
    PIDS+=("$tx_pid")
    # The window: whole seconds 2 .. 2+WINDOW of the flood.
    sleep 2
    local start_s
    start_s=$(date +%s.%N)
    perf record -q -e cpu-clock -F "$FREQ" -a -C "$SENDER_CPU,$RECEIVER_CPU" -o "$out.data" \
        -- sleep "$WINDOW" 2>"$out.perferr" || fail "perf record" "$out.perferr"
    wait "$tx_pid" || fail "udp-flood" "$out.txerr"
    wait "$rx_pid" || [ $? -eq 1 ] || fail "$reader" "$out.rxerr"
    perf report -i "$out.data" --stdio --no-children -n --sort cpu,comm,sym -q 2>/dev/null \
        >"$out.report" || fail "perf report" "$out.report"
    python3 - "$reader" "$out.rx" "$out.report" "$FREQ" "$WINDOW" "$TOP" \
        "$SENDER_CPU" "$RECEIVER_CPU" <<'EOF'
import json, re, sys
reader, rx, report, freq, window, top, sender, receiver = sys.argv[1:9]
freq, window, top = float(freq), float(window), int(top)
d = json.load(open(rx))
# The reader's packets per second over the window: the per-second counts
# of seconds 3 .. 2+WINDOW of the sink (it starts ~0.5 s before the flood).
per_s = [i["packets"] for i in d["intervals"]][2:2 + int(window)]
pps = sorted(per_s)[len(per_s) // 2] if per_s else 0
packets = pps * window
idle = re.compile(r"idle|halt|mwait|cpuidle|poll_idle|safe_halt")
# Ours: the nettune processes (the flood on the sending CPU, the sink on
# the reading one) and the kernel threads that run receive work
# (ksoftirqd, threaded NAPI); the rest is whatever else the host ran.
ours = re.compile(r"^(nettune|ksoftirqd|napi/)")
rows = {}
for line in open(report):
    m = re.match(r"\s*([\d.]+)%\s+(\d+)\s+(\d+)\s+(.+?)\s+\[(.)\]\s+(\S+)", line)
    if not m:
        continue
    _, samples, cpu, comm, where, sym = m.groups()
    rows.setdefault(int(cpu), []).append((int(samples), comm.strip(), where, sym))
print(f"{reader}: {pps / 1e6:.3f} Mpps received (median second of the window)")
per = lambda n: (n / freq) * 1e9 / packets if packets else float("nan")
for cpu, role in ((int(sender), "sending CPU"), (int(receiver), "reading CPU")):
    entries = sorted(rows.get(cpu, []), reverse=True)
    total = sum(e[0] for e in entries)
    mine = [e for e in entries if ours.search(e[1]) and not idle.search(e[3])]
    idle_n = sum(e[0] for e in entries if idle.search(e[3]))
    other_n = total - idle_n - sum(e[0] for e in mine)
    share = lambda n: 100 * n / max(total, 1)
    print(f"  CPU {cpu} ({role}): nettune and receive work {share(sum(e[0] for e in mine)):.0f}% "
          f"of the window, {per(sum(e[0] for e in mine)):.0f} ns per packet; other processes "
          f"{share(other_n):.0f}%, idle {share(idle_n):.0f}%")
    for samples, comm, where, sym in mine[:top]:
        kind = "kernel" if where == "k" else "user"
        print(f"    {per(samples):7.1f} ns  {share(samples):5.1f}%  {sym} ({kind}, {comm})")
EOF
}

echo "nettune bench: per-packet CPU profile on veth, $(nproc) CPUs, $(uname -r), perf" \
    "cpu-clock at $FREQ Hz over ${WINDOW} s; sender (udp-flood, 16 flows, 32 B) on CPU" \
    "$SENDER_CPU, reader on CPU $RECEIVER_CPU; load average before:" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
for reader in $READERS; do
    echo "profiling $reader (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    profile "$reader"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
