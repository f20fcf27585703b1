#!/usr/bin/env bash
# `nettune monitor --prometheus` beside prometheus-node-exporter, scraping
# the same host in one run, in turn, as Prometheus scrapes (keep-alive, its
# request headers, gzip accepted):
#   - time per scrape (request to last byte) and bytes on the wire;
#   - each exporter's CPU time per scrape, all it did meanwhile included
#     (utime + stime from /proc/PID/stat);
#   - then whether the series both write agree (same name and labels: equal,
#     or apart by less than one scrape interval of the counter's own rate).
# node_exporter runs twice: with its default collectors (what most hosts
# run) and with only the collectors that export what nettune does
# (cpu, stat, softnet, netdev, netclass, netstat, interrupts).
# nettune reads the host at most once per --interval: 0.5 s here, so every
# scrape (1 s apart) reads the host, as node_exporter's do.
# Environment: ROUNDS (default 60), EVERY (seconds between scrapes of one
# exporter, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-60}
every=${EVERY:-1}
for tool in prometheus-node-exporter; do
    command -v "$tool" >/dev/null || { echo "bench/prometheus.sh: $tool is missing (apt-get install prometheus-node-exporter)" >&2; exit 2; }
done
cargo build --release --quiet
cargo build --release --quiet --example prom_scrape --example prom_render
bin=target/release/nettune
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() { # port
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "bench/prometheus.sh: nothing listens on $1" >&2
    exit 1
}

echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "node_exporter: $(prometheus-node-exporter --version 2>&1 | head -1)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

"$bin" monitor --prometheus --bind 127.0.0.1:0 --interval 0.5 2>"$work/nettune.err" &
pids+=($!)
nettune_pid=$!
for _ in $(seq 100); do
    grep -q 'http://' "$work/nettune.err" && break
    sleep 0.1
done
nettune_addr=$(grep -o '127.0.0.1:[0-9]*' "$work/nettune.err" | head -1)

node_all=$(free_port)
prometheus-node-exporter --web.listen-address="127.0.0.1:$node_all" >/dev/null 2>&1 &
pids+=($!)
node_all_pid=$!
node_few=$(free_port)
prometheus-node-exporter --web.listen-address="127.0.0.1:$node_few" --collector.disable-defaults \
    --collector.cpu --collector.stat --collector.softnet --collector.netdev --collector.netclass \
    --collector.netstat --collector.interrupts >/dev/null 2>&1 &
pids+=($!)
node_few_pid=$!
wait_port "$node_all"
wait_port "$node_few"

echo "scrapes: $rounds rounds, each exporter every ${every} s, in turn"
target/release/examples/prom_scrape "$every" "$rounds" \
    "nettune=$nettune_addr@$nettune_pid" \
    "node_exporter(relevant)=127.0.0.1:$node_few@$node_few_pid" \
    "node_exporter(defaults)=127.0.0.1:$node_all@$node_all_pid"
echo "peak RSS: nettune $(awk '/VmHWM/ {print $2}' /proc/$nettune_pid/status) kB, node_exporter(relevant) $(awk '/VmHWM/ {print $2}' /proc/$node_few_pid/status) kB, node_exporter(defaults) $(awk '/VmHWM/ {print $2}' /proc/$node_all_pid/status) kB"

echo
echo "== render on a generated 256-CPU host with a 128-queue NIC (in-process)"
python3 tests/fixtures/make_hosts.py --big "$work/big" --cpus 256 --queues 128 --samples 2
target/release/examples/prom_render "$work/big"
python3 tests/fixtures/make_hosts.py --big "$work/spread" --cpus 256 --queues 128 --samples 2 --spread-irqs
target/release/examples/prom_render "$work/spread"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
