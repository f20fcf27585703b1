#!/usr/bin/env bash
# Wall time of `nettune inspect` and `nettune doctor`, process start-up
# included: live on this host (driver queries and the qdisc dump included)
# and on a generated 128-CPU host with a 64-queue NIC. Prints the median
# and the maximum of RUNS runs (30), and the load average before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-30}
cargo build --release --quiet
bin=target/release/nettune
big=$(mktemp -d)
trap 'rm -rf "$big"' EXIT
python3 tests/fixtures/make_hosts.py --big "$big/host"

measure() { # label, command...
    local label=$1; shift
    local times=()
    # Warm the page cache once; exit 1 (findings) is a normal answer.
    local rc=0
    "$@" >/dev/null || rc=$?
    if [ "$rc" -gt 1 ]; then echo "$label: exit status $rc" >&2; exit 1; fi
    for _ in $(seq "$runs"); do
        local t0 t1
        t0=$(date +%s%N)
        "$@" >/dev/null || true
        t1=$(date +%s%N)
        times+=($(( (t1 - t0) / 1000 )))
    done
    printf '%s\n' "${times[@]}" | sort -n | awk -v label="$label" -v n="$runs" '
        { a[NR] = $1 } END { printf "%-45s median %6.1f ms  max %6.1f ms  (%d runs)\n", label, a[int((n + 1) / 2)] / 1000, a[n] / 1000, n }'
}

echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//');" \
    "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
measure "inspect (live)" "$bin" inspect
measure "inspect --json (live)" "$bin" inspect --json
measure "inspect (128 CPUs, 64 queues, --root)" "$bin" inspect --root "$big/host"
measure "inspect --json (128 CPUs, 64 queues)" "$bin" inspect --json --root "$big/host"
measure "doctor --interval 0 (live)" "$bin" doctor --interval 0
measure "doctor (128 CPUs, 64 queues, --root)" "$bin" doctor --root "$big/host"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
