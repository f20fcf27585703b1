#!/usr/bin/env bash
# Wall time and peak memory of `nettune fleet report` over HOSTS (1000)
# hosts' doctor --json, made from the fixture hosts: each copy gets its own
# hostname and machine id, one of three kernels, and some findings removed
# at random (a fixed seed), one folder per host as `ansible fetch` writes them.
# Prints the median and the maximum of RUNS (10) runs, and the load
# average before and after. No reference tool: the goal is under 1 s.
set -euo pipefail
cd "$(dirname "$0")/.."
hosts=${HOSTS:-1000}
runs=${RUNS:-10}
cargo build --release --quiet
bin=target/release/nettune
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in one-socket-ice-16q two-socket-nic-node1 two-socket-smt-8q vm-2cpu-busy-poll vm-2cpu-virtio; do
    "$bin" doctor --json --root "tests/fixtures/hosts/$f" >"$work/$f.src" || [ $? -eq 1 ]
done
python3 - "$work" "$hosts" <<'PY'
import glob, json, os, random, sys
work, hosts = sys.argv[1], int(sys.argv[2])
sources = [json.load(open(p)) for p in sorted(glob.glob(work + "/*.src"))]
random.seed(1)
for i in range(hosts):
    d = json.loads(json.dumps(sources[i % len(sources)]))
    d["host"]["hostname"] = f"host{i:05d}"
    d["host"]["machine_id_hash"] = f"id{i:05d}"
    d["host"]["kernel"] = random.choice(["5.15.0", "6.1.0", "6.8.0"])
    if d["findings"] and random.random() < 0.3:
        d["findings"].pop(random.randrange(len(d["findings"])))
    os.makedirs(f"{work}/fleet/host{i:05d}")
    with open(f"{work}/fleet/host{i:05d}/doctor.json", "w") as f:
        json.dump(d, f)
PY
echo "fleet report over $hosts hosts ($(du -sh "$work/fleet" | cut -f1) of JSON), $runs runs;" \
    "$(nproc) CPUs, $(uname -r); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" fleet report "$work/fleet" --json >/dev/null # warm the page cache
for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %M" "$bin" fleet report "$work/fleet" --json 2>>"$work/times" >/dev/null
done
sort -g "$work/times" | awk -v n="$runs" '{ t[NR] = $1; m[NR] = $2 } END {
    printf "wall: median %.3f s, max %.3f s; peak RSS %d KiB\n", t[int((n + 1) / 2)], t[n], m[n] }'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
