#!/usr/bin/env bash
# bench/fast-paths.sh: the fast paths of today's kernels, side by side, in
# one run, rounds interleaved (drift on a shared machine hits all alike).
# A benchmark, not a test: it prints figures and ratios.
#
#   udp   UDP GSO/GRO: `udp-flood` (sendmmsg) and `udp-flood --gso N`
#         (UDP_SEGMENT) into `udp-sink` and `udp-sink --gro` (UDP_GRO), at
#         32 and 1200 bytes, with the epoll and the io_uring sink; iperf3
#         --udp (-b 0, one stream, same payload) beside them. On loopback
#         (a namespace of its own) and across a veth pair between two
#         namespaces: as created (veth), with GRO on at the receiving end
#         (veth-gro), and with GRO, rx-udp-gro-forwarding and threaded NAPI
#         there (veth-napi: what GRO of plain datagrams across veth needs).
#         One sender thread pinned to SENDER_CPU, one receiver thread to
#         RECEIVER_CPU.
#   rr    rr-server --engine epoll vs io_uring: TCP_RR and UDP_RR, 1 and
#         100 instances, client and server unpinned, loopback.
#   http  http-server --engine epoll vs io_uring vs nginx, as a user runs
#         them: nginx-light with worker_processes 2, access_log off,
#         `listen ... reuseport`, no CPU affinity, default scheduling;
#         `http-server --threads 2` without --pin; `wrk -t2 -c64`
#         unpinned.
#
# Figures: medians over REPEAT rounds (the range in brackets). Packets/s are
# what the receiver counted over its traffic time; CPU per packet is the
# receiving (or sending) threads' CPU time over their packets, from the
# reports. The load average is printed before and after: on a machine
# shared with other work, read the ratios, not the absolute rates.
#
# Needs root (namespaces), ip, ethtool, iperf3, wrk, nginx, python3.
# Everything it creates has a unique name and is removed on exit.
#
# Environment: PARTS ("udp rr http"), DURATION (3), REPEAT (3),
# SENDER_CPU (0), RECEIVER_CPU (1); for a focused udp run: ENVS (the
# environments, "loopback veth veth-gro veth-napi"), CASES (a regular
# expression on SIZE-NAME, e.g. '^32-(sendmmsg|gso64|sendmmsg-uring)$';
# a ratio needs its sendmmsg case) and IPERF (1; 0 leaves iperf3 out).
set -euo pipefail
PARTS=${PARTS:-"udp rr http"}
DURATION=${DURATION:-3}
REPEAT=${REPEAT:-3}
SENDER_CPU=${SENDER_CPU:-0}
RECEIVER_CPU=${RECEIVER_CPU:-1}
ENVS=${ENVS:-"loopback veth veth-gro veth-napi"}
CASES=${CASES:-.}
IPERF=${IPERF:-1}
LIMIT=$((DURATION + 20))

cd "$(dirname "$0")/.."
for tool in ip ethtool iperf3 wrk nginx python3; do
    command -v "$tool" >/dev/null || { echo "bench/fast-paths.sh needs $tool" >&2; exit 2; }
done
cargo build --release --quiet
BIN=$PWD/target/release/nettune
TAG="nf$$"
NS_LO="${TAG}lo" NS_TX="${TAG}tx" NS_RX="${TAG}rx"
VETH_TX="${TAG}t" VETH_RX="${TAG}r"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in "$NS_LO" "$NS_TX" "$NS_RX"; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# json FILE EXPR: a value from a JSON report (EXPR in Python, `r` the report).
json() {
    python3 -c "import json,sys; t=open(sys.argv[1]).read(); r=json.loads(t[t.index('{'):]); v=$2; print(v if v is not None else 0)" "$1"
}
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "0"; else print v[int((NR+1)/2)]}'; }
spread() { sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%s-%s", lo, hi}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# record POOL VALUE: add a number to a pool (a run that produced none, e.g.
# a tool that failed, adds nothing).
record() { [[ $2 =~ ^-?[0-9.]+$ ]] && echo "$2" >>"$WORK/pool-$1" || true; }
stat() { [ -s "$WORK/pool-$1" ] && echo "$(median <"$WORK/pool-$1") [$(spread <"$WORK/pool-$1")]" || echo "-"; }
med() { [ -s "$WORK/pool-$1" ] && median <"$WORK/pool-$1" || echo 0; }

echo "fast paths: $(nproc) CPUs, $(uname -r), $REPEAT x ${DURATION} s per combination;" \
    "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- udp
udp_setup() {
    ip netns add "$NS_LO"
    ip -n "$NS_LO" link set lo up
    ip netns add "$NS_TX"
    ip netns add "$NS_RX"
    ip link add "$VETH_TX" netns "$NS_TX" address 02:00:00:7a:00:01 type veth \
        peer name "$VETH_RX" netns "$NS_RX" address 02:00:00:7a:00:02
    ip -n "$NS_TX" addr add 10.122.0.1/24 dev "$VETH_TX"
    ip -n "$NS_RX" addr add 10.122.0.2/24 dev "$VETH_RX"
    ip -n "$NS_TX" link set "$VETH_TX" up
    ip -n "$NS_RX" link set "$VETH_RX" up
    ip -n "$NS_TX" neigh add 10.122.0.2 lladdr 02:00:00:7a:00:02 dev "$VETH_TX" nud permanent
}

# udp_run ENV NAME SIZE "SINK ARGS" "FLOOD ARGS": one sink+flood run; pools
# NAME's received pps and CPU per packet on each side.
udp_run() {
    local env=$1 name=$2 size=$3 sink_args=$4 flood_args=$5 ns_rx ns_tx bind to
    if [ "$env" = loopback ]; then
        ns_rx=$NS_LO ns_tx=$NS_LO bind=127.0.0.1:0 to=127.0.0.1
    else
        ns_rx=$NS_RX ns_tx=$NS_TX bind=10.122.0.2:0 to=10.122.0.2
    fi
    local out="$WORK/udp-$RANDOM"
    # shellcheck disable=SC2086
    timeout "$LIMIT" ip netns exec "$ns_rx" "$BIN" bench udp-sink --bind "$bind" --pin "$RECEIVER_CPU" \
        --rcvbuf 8388608 --duration $((DURATION + 1)) --json $sink_args >"$out.rx" 2>"$out.rxerr" &
    local rx=$!
    PIDS+=("$rx")
    until grep -q 'listening on' "$out.rxerr" 2>/dev/null; do sleep 0.05; done
    local port
    port=$(grep -o 'listening on [^ ]*' "$out.rxerr" | head -1 | sed 's/.*://')
    # shellcheck disable=SC2086
    timeout "$LIMIT" ip netns exec "$ns_tx" "$BIN" bench udp-flood --to "$to:$port" --size "$size" \
        --pin "$SENDER_CPU" --duration "$DURATION" --json $flood_args >"$out.tx" 2>"$out.txerr" || true
    wait "$rx" || true
    record "$env-$name-pps" "$(json "$out.rx" "round(r['pps'])")"
    record "$env-$name-sent" "$(json "$out.tx" "round(r['pps'])")"
    record "$env-$name-rxns" "$(json "$out.rx" "round(r['cpu_ns_per_packet'] or 0)")"
    record "$env-$name-txns" "$(json "$out.tx" "round(r['cpu_ns_per_packet'] or 0)")"
}

# iperf_run LABEL ENV SIZE: iperf3 --udp -b 0 one stream; pools received pps.
iperf_run() {
    local label=$1 env=$2 size=$3 ns_rx ns_tx to
    if [ "$env" = loopback ]; then ns_rx=$NS_LO ns_tx=$NS_LO to=127.0.0.1; else ns_rx=$NS_RX ns_tx=$NS_TX to=10.122.0.2; fi
    local out="$WORK/iperf-$RANDOM" port=$((20000 + RANDOM % 20000))
    timeout "$LIMIT" ip netns exec "$ns_rx" iperf3 -s -1 -p "$port" -A "$RECEIVER_CPU" >/dev/null 2>&1 &
    local srv=$!
    PIDS+=("$srv")
    sleep 0.3
    timeout "$LIMIT" ip netns exec "$ns_tx" iperf3 -c "$to" -p "$port" -u -b 0 -l "$size" -t "$DURATION" \
        -A "$SENDER_CPU" -J >"$out" 2>/dev/null || true
    wait "$srv" 2>/dev/null || true
    record "iperf-$label-$size" "$(json "$out" "round((r['end']['sum']['packets'] - r['end']['sum']['lost_packets']) / r['end']['sum']['seconds'])")"
}

# veth_rx GRO FWD THREADED: the receiving veth end's GRO, UDP GRO
# forwarding and threaded NAPI (1/0; threaded NAPI needs GRO, which gives
# veth its NAPI).
veth_rx() {
    ip netns exec "$NS_RX" sh -c "echo 0 > /sys/class/net/$VETH_RX/threaded" 2>/dev/null || true
    ip netns exec "$NS_RX" ethtool -K "$VETH_RX" gro "$1" rx-udp-gro-forwarding "$2" >/dev/null
    if [ "$3" = on ]; then
        ip netns exec "$NS_RX" sh -c "echo 1 > /sys/class/net/$VETH_RX/threaded"
    fi
}

UDP_CASES=(
    "32|sendmmsg|--engine epoll|"
    "32|gso64|--engine epoll|--gso 64"
    "32|gso64-gro|--engine epoll --gro|--gso 64"
    "32|sendmmsg-uring|--engine io_uring|"
    "32|gso64-uring|--engine io_uring|--gso 64"
    "32|gso64-gro-uring|--engine io_uring --gro|--gso 64"
    "32|sendmmsg-gro|--engine epoll --gro|"
    "1200|sendmmsg|--engine epoll|"
    "1200|gso54-gro|--engine epoll --gro|--gso 54"
)
# The cases where the receiving veth end's settings matter.
GRO_CASES=(
    "32|sendmmsg|--engine epoll|"
    "32|sendmmsg-gro|--engine epoll --gro|"
    "32|sendmmsg-gro-uring|--engine io_uring --gro|"
    "32|gso64-gro|--engine epoll --gro|--gso 64"
    "1200|sendmmsg|--engine epoll|"
    "1200|sendmmsg-gro|--engine epoll --gro|"
)

udp_part() {
    udp_setup
    for round in $(seq 1 "$REPEAT"); do
        for env in $ENVS; do
            local where=$env cases=("${UDP_CASES[@]}")
            case $env in
            veth) veth_rx off off off ;;
            veth-gro) veth_rx on off off; cases=("${GRO_CASES[@]}") ;;
            veth-napi) veth_rx on on on; cases=("${GRO_CASES[@]}") ;;
            esac
            [ "$env" = loopback ] || where=veth
            for c in "${cases[@]}"; do
                IFS='|' read -r size name sink flood <<<"$c"
                [[ "$size-$name" =~ $CASES ]] || continue
                echo "udp round $round $env $size $name" >&2
                udp_run "$where" "$env-$size-$name" "$size" "$sink" "$flood"
            done
            if [ "$IPERF" = 1 ]; then
                for size in 32 1200; do iperf_run "$env" "$where" "$size"; done
            fi
        done
    done
    echo
    echo "UDP: received packets/s, median [range]; CPU ns per packet (receiver / sender), medians"
    printf '%-9s %-5s %-17s %-27s %-9s %-9s %s\n' env bytes case "received pps" "rx ns/p" "tx ns/p" "x sendmmsg"
    for env in $ENVS; do
        local where=$env cases=("${UDP_CASES[@]}")
        [ "$env" = loopback ] || where=veth
        case $env in veth-gro | veth-napi) cases=("${GRO_CASES[@]}") ;; esac
        for c in "${cases[@]}"; do
            IFS='|' read -r size name _ _ <<<"$c"
            [[ "$size-$name" =~ $CASES ]] || continue
            local key="$where-$env-$size-$name" base="$where-$env-$size-sendmmsg"
            printf '%-9s %-5s %-17s %-27s %-9s %-9s %s\n' "$env" "$size" "$name" "$(stat "$key-pps")" \
                "$(med "$key-rxns")" "$(med "$key-txns")" "$(ratio "$(med "$key-pps")" "$(med "$base-pps")")"
        done
        [ "$IPERF" = 1 ] || continue
        for size in 32 1200; do
            printf '%-9s %-5s %-17s %-27s\n' "$env" "$size" "iperf3 -u -b 0" "$(stat "iperf-$env-$size")"
        done
    done
}

# ---------------------------------------------------------------- rr
rr_part() {
    for round in $(seq 1 "$REPEAT"); do
        for engine in epoll io_uring; do
            local out="$WORK/rr-$RANDOM"
            timeout $((LIMIT * 5)) "$BIN" bench rr-server --bind 127.0.0.1:0 --threads 2 --engine "$engine" \
                --duration $((DURATION * 5 + 10)) >/dev/null 2>"$out.srv" &
            local srv=$!
            PIDS+=("$srv")
            until grep -q 'listening on' "$out.srv" 2>/dev/null; do sleep 0.05; done
            local addr
            addr=$(sed -n 's/.*: listening on \([^ ]*\).*/\1/p' "$out.srv" | head -1)
            for proto in tcp udp; do
                for n in 1 100; do
                    echo "rr round $round $engine $proto $n" >&2
                    timeout "$LIMIT" "$BIN" bench rr --to "$addr" --proto "$proto" --instances "$n" \
                        --threads $((n > 1 ? 2 : 1)) --duration "$DURATION" --json >"$out.$proto$n" 2>/dev/null || true
                    record "rr-$engine-$proto-$n" "$(json "$out.$proto$n" "round(r['transactions_per_sec'])")"
                    record "rr-$engine-$proto-$n-p99" "$(json "$out.$proto$n" "r['latency']['p99_us']")"
                done
            done
            kill -INT "$srv" 2>/dev/null || true
            wait "$srv" 2>/dev/null || true
        done
    done
    echo
    echo "rr-server: transactions/s, median [range]; p99 us median; io_uring / epoll"
    printf '%-5s %-9s %-25s %-9s %-25s %-9s %s\n' proto instances "epoll tps" p99 "io_uring tps" p99 ratio
    for proto in tcp udp; do
        for n in 1 100; do
            printf '%-5s %-9s %-25s %-9s %-25s %-9s %s\n' "$proto" "$n" "$(stat "rr-epoll-$proto-$n")" \
                "$(med "rr-epoll-$proto-$n-p99")" "$(stat "rr-io_uring-$proto-$n")" "$(med "rr-io_uring-$proto-$n-p99")" \
                "$(ratio "$(med "rr-io_uring-$proto-$n")" "$(med "rr-epoll-$proto-$n")")"
        done
    done
}

# ---------------------------------------------------------------- http
# server_cpu PID: user+system ticks of PID and its child processes (nginx's
# workers), all threads included.
server_cpu() {
    local total=0 p
    for p in "$1" $(pgrep -P "$1" || true); do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

http_part() {
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$WORK/nginx/tmp"
    cat >"$WORK/nginx/nginx.conf" <<EOF
worker_processes 2;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
daemon off;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/tmp/body;
    proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/nginx/tmp/scgi;
    keepalive_requests 1000000000;
    server {
        listen 127.0.0.1:$port reuseport;
        location / { default_type text/plain; return 200 "Hello, World!"; }
    }
}
EOF
    for round in $(seq 1 "$REPEAT"); do
        for server in nginx epoll io_uring; do
            echo "http round $round $server" >&2
            local url pid out="$WORK/http-$RANDOM"
            if [ "$server" = nginx ]; then
                nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" -e "$WORK/nginx/error.log" &
                pid=$!
                url="http://127.0.0.1:$port/plaintext"
                sleep 0.5
            else
                "$BIN" bench http-server --bind 127.0.0.1:0 --threads 2 --engine "$server" >"$out.srv" 2>&1 &
                pid=$!
                until grep -q 'listening on' "$out.srv" 2>/dev/null; do sleep 0.05; done
                url="http://$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$out.srv" | head -1)/plaintext"
            fi
            PIDS+=("$pid")
            local before used
            before=$(server_cpu "$pid")
            wrk -t2 -c64 -d"${DURATION}s" "$url" >"$out.wrk"
            used=$(($(server_cpu "$pid") - before))
            kill -INT "$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            local rps
            rps=$(awk '/^Requests\/sec/ {printf "%d", $2}' "$out.wrk")
            record "http-$server" "$rps"
            # The server's own CPU (all its threads and worker processes)
            # per request, microseconds.
            record "http-$server-us" "$(awk -v u="$used" -v r="$rps" -v d="$DURATION" -v hz="$(getconf CLK_TCK)" \
                'BEGIN { if (r > 0) printf "%.2f", u / hz * 1e6 / (r * d); else print 0 }')"
        done
    done
    echo
    echo "http: wrk -t2 -c64 unpinned, requests/s median [range]; server CPU us per request (median)"
    for server in nginx epoll io_uring; do
        printf '%-9s %-27s %-8s %s\n' "$server" "$(stat "http-$server")" "$(med "http-$server-us")" \
            "x nginx $(ratio "$(med "http-$server")" "$(med http-nginx)")"
    done
    echo "io_uring / epoll: $(ratio "$(med http-io_uring)" "$(med http-epoll)")"
}

for part in $PARTS; do
    "${part}_part"
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
