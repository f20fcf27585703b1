#!/usr/bin/env bash
# The cost of `nettune monitor`:
#  1. one sample plus its rates on a generated 128-CPU host with a 64-queue
#     NIC (a recorded series replayed in-process; target < 5 ms);
#  2. live at a 1 s interval: CPU time and peak RSS over DURATION seconds
#     (target < 0.5% of one CPU and < 20 MiB), beside mpstat -P ALL 1 and
#     sar -n DEV 1 run over the same seconds.
# Environment: DURATION (default 60), PASSES (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-60}
cargo build --release --quiet
bin=target/release/nettune
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "== 1. one sample + rates, 128 CPUs / 64 queues (recorded series, in-process)"
python3 tests/fixtures/make_hosts.py --big "$work/big" --samples 12
cargo run --quiet --release --example monitor_sample -- "$work/big"
t0=$(date +%s%N)
"$bin" monitor --root "$work/big" --json >/dev/null || true
t1=$(date +%s%N)
echo "whole process, 11 intervals as NDJSON: $(( (t1 - t0) / 1000000 )) ms"

echo
echo "== 2. live, 1 s interval, ${duration} s"
hz=$(getconf CLK_TCK)
# CPU seconds (user + system) and peak RSS of a running process.
cost() { # pid
    local stat ticks
    stat=$(cut -d' ' -f14,15 "/proc/$1/stat")
    ticks=$(( ${stat% *} + ${stat#* } ))
    awk -v t="$ticks" -v hz="$hz" -v d="$duration" -v rss="$(awk '/VmHWM/ {print $2}' "/proc/$1/status")" \
        'BEGIN { printf "cpu %.3f s = %.3f%% of one CPU, peak RSS %.1f MiB", t / hz, 100 * t / hz / d, rss / 1024 }'
}
start() { # label, command...
    local label=$1; shift
    "$@" >/dev/null 2>&1 &
    pids+=($!)
    labels+=("$label")
}
labels=()
start "nettune monitor (text)" "$bin" monitor --interval 1
start "nettune monitor --json" "$bin" monitor --interval 1 --json
start "mpstat -P ALL 1" mpstat -P ALL 1
if command -v sar >/dev/null; then
    start "sar -n DEV 1" sar -n DEV 1
fi
sleep "$duration"
for i in "${!pids[@]}"; do
    printf '%-26s %s\n' "${labels[$i]}" "$(cost "${pids[$i]}")"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
