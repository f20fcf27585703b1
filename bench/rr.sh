#!/usr/bin/env bash
# `nettune bench rr` against sockperf, two comparisons:
#  (a) one instance, request/response ping-pong, same pinning for both tools
#      (server CPU / client CPU), TCP and UDP, on loopback and across a veth
#      pair between two namespaces this script creates: transactions/s.
#  (b) N (default 100) concurrent instances on loopback: a shell loop of N
#      `sockperf ping-pong` clients against one epoll sockperf server, versus
#      one `nettune bench rr --instances N` against one rr-server:
#      total transactions/s and the client side's CPU time.
# Message size 14 bytes both ways (sockperf's minimum). Rounds alternate the
# tools; the median of ROUNDS is reported. Traffic stays on loopback and in
# this script's namespaces; only processes this script started are killed.
# Env: SECS (per run, default 5), ROUNDS (default 3), N (default 100),
# PARTS (default ab: which comparisons to run).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${SECS:-5}
rounds=${ROUNDS:-3}
many=${N:-100}
parts=${PARTS:-ab}
size=14

command -v sockperf >/dev/null || { apt-get update; apt-get install -y sockperf; }
cargo build --release --quiet
bin=$PWD/target/release/nettune
work=$(mktemp -d)
nsa=ntrr-a-$$
nsb=ntrr-b-$$
va=rra$$
vb=rrb$$
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
# Fixed (private) MACs and permanent neighbour entries: no first packet
# waits for ARP (sockperf's UDP warm-up does not resend).
mac_a=02:00:00:79:00:01
mac_b=02:00:00:79:00:02
ip link add "$va" netns "$nsa" address "$mac_a" type veth peer name "$vb" netns "$nsb" address "$mac_b"
ip -n "$nsa" addr add 10.79.0.1/24 dev "$va"
ip -n "$nsb" addr add 10.79.0.2/24 dev "$vb"
for ns in "$nsa" "$nsb"; do ip -n "$ns" link set lo up; done
ip -n "$nsa" link set "$va" up
ip -n "$nsb" link set "$vb" up
ip -n "$nsa" neigh add 10.79.0.2 lladdr "$mac_b" dev "$va" nud permanent
ip -n "$nsb" neigh add 10.79.0.1 lladdr "$mac_a" dev "$vb" nud permanent

# A port free for TCP and UDP in the root namespace.
free_port() {
    local p
    for p in $(shuf -i 20000-29999 -n 100); do
        if [ -z "$(ss -Htuln "sport = :$p")" ]; then echo "$p"; return; fi
    done
    echo "no free port" >&2; exit 1
}

# Server and client placement: "lo" (root namespace) or "veth" (server in
# $nsb, client in $nsa). Commands start through these prefixes (no shell
# function in between), so $! is the server's own PID (ip and taskset exec).
place() {
    if [ "$where" = veth ]; then
        in_server=(ip netns exec "$nsb"); in_client=(ip netns exec "$nsa"); server_ip=10.79.0.2
    else
        in_server=(); in_client=(); server_ip=127.0.0.1
    fi
}
# Wait until something listens on the port (TCP or UDP) where the server runs.
wait_listening() { # port
    local i
    for i in $(seq 100); do
        if [ -n "$("${in_server[@]}" ss -Htuln "sport = :$1")" ]; then return; fi
        sleep 0.05
    done
    echo "no server on port $1" >&2
}
# Every server is bounded in time even if this script is killed hard.
life=$((secs + 60))

stop_server() { # pid: Ctrl-C, wait, forget
    kill -INT "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    pids=("${pids[@]/$1}")
}

# sockperf's rate: messages received over its measured time ([Valid Duration]).
sockperf_rate() { # log files...
    cat "$@" | awk '/Valid Duration/ {
        for (i = 1; i <= NF; i++) {
            if ($i ~ /^RunTime=/) { split($i, a, "="); t = a[2] }
            if ($i ~ /^ReceivedMessages=/) { split($i, b, "="); sum += b[2] / t }
        } } END { printf "%.0f\n", sum }'
}

json_rate() { grep -m1 '"transactions_per_sec"' "$1" | tr -dc '0-9.\n' | cut -d. -f1; }

wait_for_address() { # server's stderr file -> the address of its listening line
    local i addr
    for i in $(seq 100); do
        addr=$(sed -n 's/.*: listening on \([^ ]*\).*/\1/p' "$1" 2>/dev/null | head -1)
        if [ -n "$addr" ]; then echo "$addr"; return; fi
        sleep 0.05
    done
    echo "rr-server printed no address" >&2; exit 1
}

sockperf_one() { # proto srv_cpu cli_cpu -> transactions/s
    local proto=$1 flag="" port spid
    [ "$proto" = tcp ] && flag=--tcp
    port=$(free_port)
    "${in_server[@]}" timeout -s INT "$life" taskset -c "$2" \
        sockperf sr $flag -i "$server_ip" -p "$port" >/dev/null 2>&1 &
    spid=$!; pids+=("$spid"); wait_listening "$port"
    "${in_client[@]}" taskset -c "$3" sockperf pp $flag -i "$server_ip" -p "$port" -t "$secs" -m "$size" \
        >"$work/pp.log" 2>&1 || { echo "sockperf pp failed ($where $proto $2/$3):" >&2; tail -3 "$work/pp.log" >&2; }
    stop_server "$spid"
    sockperf_rate "$work/pp.log"
}

nettune_one() { # proto srv_cpu cli_cpu -> transactions/s
    local spid addr
    rm -f "$work/srv.err"
    "${in_server[@]}" "$bin" bench rr-server --bind "$server_ip:0" --pin "$2" --duration "$life" \
        >/dev/null 2>"$work/srv.err" &
    spid=$!; pids+=("$spid")
    addr=$(wait_for_address "$work/srv.err")
    "${in_client[@]}" "$bin" bench rr --to "$addr" --proto "$1" --size "$size" --pin "$3" \
        --warmup 0.5 --duration "$secs" --json >"$work/rr.json" 2>"$work/rr.err" \
        || { echo "nettune rr failed ($where $1 $2/$3):" >&2; cat "$work/rr.err" >&2; echo '"transactions_per_sec": 0' >"$work/rr.json"; }
    stop_server "$spid"
    json_rate "$work/rr.json"
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $secs s per run, $rounds rounds, median shown"
if [[ $parts == *a* ]]; then
echo
echo "(a) one instance, $size-byte request and reply, transactions/s"
printf '%-5s %-4s %-11s %10s %10s %7s   %s\n' where prot "srv/cli CPU" sockperf nettune ratio "all rounds (sockperf | nettune)"
for where in lo veth; do
    place
    for proto in tcp udp; do
        for cpus in "1 1" "0 1"; do
            set -- $cpus
            sp=""; nt=""
            for _ in $(seq "$rounds"); do
                sp+="$(sockperf_one "$proto" "$1" "$2") "
                nt+="$(nettune_one "$proto" "$1" "$2") "
            done
            spm=$(echo "$sp" | median); ntm=$(echo "$nt" | median)
            printf '%-5s %-4s %-11s %10s %10s %7s   %s| %s\n' "$where" "$proto" "$1/$2" "$spm" "$ntm" \
                "$(awk -v a="$ntm" -v b="$spm" 'BEGIN { printf "%.2f", a / b }')" "$sp" "$nt"
        done
    done
done

fi

# (b): CPU of the client side from the shell's `times` (user and system
# time of the waited-for children) over the wall time of the client side.
cpu_of_times() { # `times` output -> seconds of children user+sys
    tail -1 "$1" | awk '{ n = split($0, f, " "); s = 0
        for (i = 1; i <= n; i++) { split(f[i], p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2] }
        printf "%.2f\n", s }'
}

sockperf_many() { # proto -> "rate cpu_s wall_s"
    local flag="" letter=U spid port t0 t1
    [ "$1" = tcp ] && { flag=--tcp; letter=T; }
    port=$(free_port)
    echo "$letter:127.0.0.1:$port" >"$work/feed"
    timeout -s INT "$life" sockperf sr -f "$work/feed" -F e >/dev/null 2>&1 &
    spid=$!; pids+=("$spid"); wait_listening "$port"
    rm -f "$work"/many.*
    t0=$(date +%s%N)
    bash -c 'for i in $(seq '"$many"'); do
        sockperf pp '"$flag"' -i 127.0.0.1 -p '"$port"' -t '"$secs"' -m '"$size"' >'"$work"'/many.$i 2>&1 &
    done; wait; times' >"$work/times"
    t1=$(date +%s%N)
    stop_server "$spid"
    local missing
    missing=$(grep -L "Valid Duration" "$work"/many.* | wc -l)
    [ "$missing" -gt 0 ] && echo "warning: $missing sockperf clients reported nothing" >&2
    echo "$(sockperf_rate "$work"/many.*) $(cpu_of_times "$work/times") $(( (t1 - t0) / 1000000 ))"
}

nettune_many() { # proto -> "rate cpu_s wall_s"
    local spid addr t0 t1
    rm -f "$work/srv.err"
    "$bin" bench rr-server --bind 127.0.0.1:0 --duration "$life" >/dev/null 2>"$work/srv.err" &
    spid=$!; pids+=("$spid")
    addr=$(wait_for_address "$work/srv.err")
    t0=$(date +%s%N)
    bash -c '"$0" bench rr --to "$1" --proto "$2" --size '"$size"' --instances '"$many"' \
        --threads 1 --warmup 0.5 --duration '"$secs"' --json >"$3" 2>/dev/null; times' \
        "$bin" "$addr" "$1" "$work/rr.json" >"$work/times"
    t1=$(date +%s%N)
    stop_server "$spid"
    echo "$(json_rate "$work/rr.json") $(cpu_of_times "$work/times") $(( (t1 - t0) / 1000000 ))"
}

if [[ $parts == *b* ]]; then
where=lo
place
echo
echo "(b) $many concurrent instances on loopback, unpinned, $size-byte request and reply"
echo "    client CPU = user+sys of the client processes / their wall time (100% = one CPU)"
echo "    servers: sockperf sr with epoll, rr-server with one thread; nettune with one client"
echo "    thread (the default): on 2 CPUs, client and server then take one CPU each"
printf '%-4s %-10s %10s %9s %12s\n' prot tool trans/s "cli CPU%" "CPU us/tr"
for proto in tcp udp; do
    for tool in sockperf nettune; do
        line=""
        for _ in $(seq "$rounds"); do
            set -- $(${tool}_many "$proto")
            line+="$(awk -v r="$1" -v c="$2" -v w="$3" 'BEGIN { printf "%d/%.0f%%/%.1fus ", r, c * 100000 / w, (r > 0 ? c * 1e9 / w / r : 0) }')"
        done
        # Medians of each column over the rounds.
        col() { echo "$line" | tr ' ' '\n' | grep . | cut -d/ -f"$1" | tr -dc '0-9.\n' | median; }
        printf '%-4s %-10s %10s %8s%% %10sus   rounds: %s\n' "$proto" "$tool" "$(col 1)" "$(col 2)" \
            "$(col 3)" "$line"
    done
done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
