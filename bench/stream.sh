#!/usr/bin/env bash
# `nettune bench stream` against iperf3 (the Debian package), in one run:
#  (a) throughput and CPU per GB, 1 and 4 streams, on loopback and across a
#      veth pair between two namespaces this script creates. Both tools run
#      with their defaults (iperf3: 128 KiB writes, one thread; nettune: 1 MiB
#      writes, a thread per stream), unpinned, server then client.
#      Throughput: the receiver's bytes over the receiver's time
#      (end.sum_received: nettune writes iperf3's layout). CPU: user + system time of
#      the client and the server process together (bash `times` of each),
#      per 10^9 bytes received.
#  (b) pacing: one stream paced at PACE (default 1gbit): nettune --pace and
#      iperf3 --fq-rate; the achieved rate over the pace.
# Rounds alternate the tools; the median of ROUNDS is reported, with every
# round. Traffic stays on loopback and in this script's namespaces; only
# processes this script started are killed.
# Env: SECS (per run, default 5), ROUNDS (default 3), PACE (default 1gbit),
# PARTS (default ab).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${SECS:-5}
rounds=${ROUNDS:-3}
pace=${PACE:-1gbit}
parts=${PARTS:-ab}

command -v iperf3 >/dev/null || { apt-get update; apt-get -o DPkg::Lock::Timeout=600 install -y iperf3; }
cargo build --release --quiet
bin=$PWD/target/release/nettune
work=$(mktemp -d)
nsa=ntst-a-$$
nsb=ntst-b-$$
va=sta$$
vb=stb$$
pids=()

cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    ip netns del "$nsa" 2>/dev/null || true
    ip netns del "$nsb" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$nsa"
ip netns add "$nsb"
mac_a=02:00:00:81:00:01
mac_b=02:00:00:81:00:02
ip link add "$va" netns "$nsa" address "$mac_a" type veth peer name "$vb" netns "$nsb" address "$mac_b"
ip -n "$nsa" addr add 10.81.0.1/24 dev "$va"
ip -n "$nsb" addr add 10.81.0.2/24 dev "$vb"
for ns in "$nsa" "$nsb"; do ip -n "$ns" link set lo up; done
ip -n "$nsa" link set "$va" up
ip -n "$nsb" link set "$vb" up
ip -n "$nsa" neigh add 10.81.0.2 lladdr "$mac_b" dev "$va" nud permanent
ip -n "$nsb" neigh add 10.81.0.1 lladdr "$mac_a" dev "$vb" nud permanent

# "lo" (root namespace) or "veth" (server in $nsb, client in $nsa).
place() {
    if [ "$where" = veth ]; then
        in_server=(ip netns exec "$nsb"); in_client=(ip netns exec "$nsa"); server_ip=10.81.0.2
    else
        in_server=(); in_client=(); server_ip=127.0.0.1
    fi
}
free_port() {
    local p
    for p in $(shuf -i 30000-39999 -n 100); do
        if [ -z "$("${in_server[@]}" ss -Htln "sport = :$p")" ]; then echo "$p"; return; fi
    done
    echo "no free port" >&2; exit 1
}
wait_listening() { # port
    local i
    for i in $(seq 100); do
        if [ -n "$("${in_server[@]}" ss -Htln "sport = :$1")" ]; then return; fi
        sleep 0.05
    done
    echo "no server on port $1" >&2
}
life=$((secs + 30))

# user+sys seconds of the children, from the last line of bash's `times`.
cpu_of_times() {
    tail -1 "$1" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2] }
        printf "%.3f\n", s }'
}
# "bits_per_second bytes" of the receiver, from a JSON report (the same
# path in both tools' reports).
received() { # file
    python3 - "$1" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    s = d["end"]["sum_received"]
    print(f'{s["bits_per_second"]:.0f} {s["bytes"]}')
except Exception as e:
    print("0 0")
EOF
}

# One run: echo "gbit/s cpu_s_per_gb". Extra client arguments after $1.
one() { # tool streams [client args...]
    local tool=$1 streams=$2 port spid
    shift 2
    port=$(free_port)
    rm -f "$work"/srv.times "$work"/cli.times "$work"/cli.json
    if [ "$tool" = iperf3 ]; then
        "${in_server[@]}" bash -c 'timeout -s INT '"$life"' iperf3 -s -1 -B '"$server_ip"' -p '"$port"' >/dev/null 2>&1; times' \
            >"$work/srv.times" &
    else
        "${in_server[@]}" bash -c 'timeout -s INT '"$life"' "$0" bench stream-server -1 --bind '"$server_ip:$port"' >/dev/null 2>&1; times' \
            "$bin" >"$work/srv.times" &
    fi
    spid=$!; pids+=("$spid"); wait_listening "$port"
    if [ "$tool" = iperf3 ]; then
        "${in_client[@]}" bash -c 'iperf3 -c '"$server_ip"' -p '"$port"' -t '"$secs"' -P '"$streams"' -J "$@" >'"$work"'/cli.json 2>&1; times' \
            _ "$@" >"$work/cli.times" || true
    else
        "${in_client[@]}" bash -c '"$0" bench stream --to '"$server_ip:$port"' --duration '"$secs"' -P '"$streams"' --json "$@" >'"$work"'/cli.json 2>'"$work"'/cli.err; times' \
            "$bin" "$@" >"$work/cli.times" || true
    fi
    wait "$spid" 2>/dev/null || true
    pids=("${pids[@]/$spid}")
    local bps bytes cpu
    read -r bps bytes <<<"$(received "$work/cli.json")"
    cpu=$(awk -v a="$(cpu_of_times "$work/cli.times")" -v b="$(cpu_of_times "$work/srv.times")" 'BEGIN { print a + b }')
    awk -v b="$bps" -v n="$bytes" -v c="$cpu" 'BEGIN { printf "%.2f/%.3f ", b / 1e9, (n > 0 ? c / (n / 1e9) : 0) }'
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
col() { echo "$1" | tr ' ' '\n' | grep . | cut -d/ -f"$2" | median; }

echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "iperf3: $(iperf3 --version | head -1); congestion control: $(cat /proc/sys/net/ipv4/tcp_congestion_control)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $secs s per run, $rounds rounds, median shown"
if [[ $parts == *a* ]]; then
    echo
    echo "(a) throughput (Gbit/s, receiver's count) and CPU-seconds per GB (client + server processes)"
    printf '%-5s %-3s %9s %9s %6s %10s %10s %6s   %s\n' where P iperf3 nettune ratio "ip3 s/GB" "nt s/GB" ratio "rounds (Gbit/s/s-per-GB: iperf3 | nettune)"
    for where in lo veth; do
        place
        for streams in 1 4; do
            ip3=""; nt=""
            for _ in $(seq "$rounds"); do
                ip3+="$(one iperf3 "$streams")"
                nt+="$(one nettune "$streams")"
            done
            ig=$(col "$ip3" 1); ng=$(col "$nt" 1); ic=$(col "$ip3" 2); nc=$(col "$nt" 2)
            printf '%-5s %-3s %9s %9s %6s %10s %10s %6s   %s| %s\n' "$where" "$streams" "$ig" "$ng" \
                "$(awk -v a="$ng" -v b="$ig" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" "$ic" "$nc" \
                "$(awk -v a="$nc" -v b="$ic" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" "$ip3" "$nt"
        done
    done
fi
if [[ $parts == *b* ]]; then
    pace_bits=$(python3 -c "
import re,sys
t='$pace'.lower(); m=re.match(r'([0-9.]+)\s*([kmgt]?)bit', t)
print(int(float(m.group(1)) * {'':1,'k':1e3,'m':1e6,'g':1e9,'t':1e12}[m.group(2)]))")
    echo
    echo "(b) one stream paced at $pace: achieved Gbit/s (receiver) and achieved / pace"
    printf '%-5s %-8s %9s %7s   %s\n' where tool Gbit/s ratio rounds
    for where in lo veth; do
        place
        ip3=""; nt=""
        for _ in $(seq "$rounds"); do
            ip3+="$(one iperf3 1 --fq-rate "$pace_bits")"
            nt+="$(one nettune 1 --pace "$pace")"
        done
        for tool in iperf3 nettune; do
            line=$ip3; [ "$tool" = nettune ] && line=$nt
            g=$(col "$line" 1)
            printf '%-5s %-8s %9s %7s   %s\n' "$where" "$tool" "$g" \
                "$(awk -v a="$g" -v p="$pace_bits" 'BEGIN { printf "%.3f", a * 1e9 / p }')" "$line"
        done
    done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
