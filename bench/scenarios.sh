#!/usr/bin/env bash
# bench/scenarios.sh: what the matching profile gains on each testbed
# scenario (`nettune testbed up --scenario NAME`), measured two ways in the
# same testbed: by `nettune experiment run` (the profile against the
# scenario as found, with nettune's own engines), and by tools users already
# trust (sockperf for the UDP and the request-response scenarios, iperf3
# for the bulk TCP one). A benchmark, not a test: it prints figures and
# ratios.
#
# 1. experiment run. For each scenario in SCENARIOS (default: all of them) a
#    testbed is made with it, then
#      nettune experiment run --testbed BED --configs current,PROFILE[:PATH]
#          --bench LINE [--server-pin READER] --repeat ROUNDS
#          --duration EXP_DURATION --warmup 1s
#    where PROFILE is the scenario's profile and PATH the options of its fix
#    (--bandwidth/--rtt, --cpus: as `testbed up --json` prints the fix), and LINE is the scenario's load:
#    `udp-flood --flows FLOWS --pin SENDER` into a sink pinned to the
#    reader's CPU (UDP scenarios; with `--gso N --rate R` where the
#    scenario's printed flood has them: softirq-on-app-cpu's sender sends
#    64 packets per call, so that it costs its CPU little per packet, as a
#    NIC costs the receiving host nothing, at a fixed 1,800,000 packets/s, as
#    a NIC at its line rate), `rr --proto tcp --pin CLIENT` into an
#    rr-server pinned to the server's CPU (rr-irq-deferral: transactions
#    per second of one TCP connection, a closed loop), or `stream` (one
#    bulk TCP flow, unpinned). The experiment alternates the two configs
#    in shuffled rounds, applies and rolls back the profile itself, and
#    judges the ratio of medians with a bootstrap interval
#    (docs/experiment.md).
#    Reported: the median of each config [range] and the ratio with its
#    verdict.
#
# 2. The trusted tool, on the same testbed. For the UDP scenarios sockperf
#    runs for the whole phase: `sockperf sr` in the server namespace pinned
#    to the scenario's reader CPU, `sockperf tp` (32-byte messages, as fast
#    as it can, FLOWS (16) destination ports, so FLOWS flows) in the client
#    namespace pinned to its sender CPU (sockperf cannot send with UDP GSO:
#    where the scenario's flood has `--gso N`, bench/c/udp_sender sends
#    instead, built here with gcc: `udp_sender -g N -r R -f FLOWS -s`, N
#    packets of 32 bytes per send, R per second, to the same FLOWS ports,
#    each with sockperf's message header so that sockperf sr reads them as
#    its own, pinned to the sender CPU); the figure is the datagrams per
#    second the reader took: the server namespace's Udp InDatagrams
#    (/proc/net/snmp, counted when the application reads a datagram) over a
#    WINDOW (2 s); RcvbufErrors beside it. For bulk-small-buffers, `iperf3
#    -s` runs in the server namespace and each phase is one `iperf3 -c` of
#    TCP_WINDOW (5 s: the line has a 30 ms round trip) with a 1 s omit (a
#    new connection, so it autotunes under the state's buffers); the figure
#    is iperf3's received Mbit/s. For rr-irq-deferral `sockperf sr --tcp`
#    runs in the server namespace pinned to the server's CPU, and each
#    phase is one `sockperf ping-pong --tcp --mps=max --full-rtt -m 14` of
#    WINDOW seconds in the client namespace pinned to the client's CPU;
#    the figure is round trips per second (ReceivedMessages / RunTime),
#    its median round trip beside it. Two states alternate (for UDP while
#    the traffic flows), the order swapped each round, ROUNDS (5) rounds,
#    each phase after SETTLE (0.5 s):
#      before  the scenario as built
#      after   `nettune apply --profile P --netns SERVER [PATH]`, undone with
#              `nettune rollback` for the next "before"
#    Reported: the median of each state [range], and the median [range] of
#    the per-round ratios after/before.
#
# --search: instead of the above, the search's regret per scenario. On
# the scenario's testbed, `nettune experiment search --space SEARCH_SPACE
# (rps,xps,napi,buffers) --bench LINE [PATH] --repeat ROUNDS --duration
# EXP_DURATION` runs first (timed; PATH: the scenario's --bandwidth/--rtt,
# for buffers); then the exhaustive grid over the same space: `experiment
# run` with every candidate the search listed (the host as found first,
# each as the settings it names: rps=app+xps=off+napi=latency, ...), with
# the path the search printed where a config sets buffers, at the same
# --repeat, --duration and --warmup (timed). A dimension the scenario lacks is skipped by the search
# and so absent from the grid: the UDP and bulk scenarios' veths have no
# NAPI (GRO off), so napi counts only on rr-irq-deferral; buffers only on
# bulk-small-buffers (the others' TCP maxima already hold the throughput
# profile's sizes within the host's caps). So 32 configurations on
# rr-irq-deferral (4 RPS x 2 XPS x 4 NAPI choices), 8 on each of the others
# (bulk-small-buffers: 2 RPS x 2 XPS x the buffers as found or as the
# throughput profile sizes them). Reported per scenario: the grid's best config and
# median, the search's pick and its median in the grid, the regret (how
# far the pick's grid median is below the best, %), whether the grid itself
# separates the two (the 95% interval of pick / best over its rounds,
# resampled: an interval reaching 1.00 means its repeats do not), the
# search's wall time
# over the grid's, and the ratio expected for the grid's size and ROUNDS
# (docs/benchmarks.md gives the model). The goal: regret within 3%, in at
# most a quarter of the grid's time. A search that finds nothing better
# than the host as found picks the host as found (the row shows the
# rounds' winner and its confirmation's verdict beside it); below ROUNDS=3
# the confirmation gives no verdict, so every search picks it.
#
# The load average at the start and the end is printed; a run whose load
# average was 1.5 or more at either end is labelled noisy: its figures are
# not results. MODES ("experiment tools") picks the parts to run.
#
# Needs root (namespaces), sockperf and iperf3 (Debian packages), gcc (for
# a GSO scenario's sender), python3 and nettune (NETTUNE, else
# target/release/nettune, else the one on PATH).
# Everything it makes has a unique name and is removed on exit, also on
# failure or Ctrl-C; it stops only the processes it started, by PID.
# Traffic stays between the testbed's namespaces (198.18.0.0/30).
set -euo pipefail

SEARCH=0
case "${1:-}" in
    --search) SEARCH=1 ;;
    "") ;;
    *) echo "usage: bench/scenarios.sh [--search]" >&2; exit 2 ;;
esac
SEARCH_SPACE=${SEARCH_SPACE:-rps,xps,napi,buffers}
# ALLOW_HOST=1: the search and the grid may change host-wide values
# (rps_sock_flow_entries, which SEARCH_SPACE=rps,rfs,xps needs), journaled
# and restored.
host_args=()
[ "${ALLOW_HOST:-0}" = 1 ] && host_args=(--allow-host)
ROUNDS=${ROUNDS:-5}
WINDOW=${WINDOW:-2}
TCP_WINDOW=${TCP_WINDOW:-5}
EXP_DURATION=${EXP_DURATION:-3s}
MODES=${MODES:-"experiment tools"}
SETTLE=${SETTLE:-0.5}
FLOWS=${FLOWS:-16}
SCENARIOS=${SCENARIOS:-"reader-on-softirq-cpu softirq-on-app-cpu bulk-small-buffers rr-irq-deferral"}

here=$(cd "$(dirname "$0")/.." && pwd)
NETTUNE=${NETTUNE:-}
if [ -z "$NETTUNE" ]; then
    if [ -x "$here/target/release/nettune" ]; then NETTUNE=$here/target/release/nettune
    else NETTUNE=$(command -v nettune || true); fi
fi
[ -x "$NETTUNE" ] || { echo "scenarios.sh: no nettune binary: cargo build --release, or set NETTUNE" >&2; exit 2; }
for tool in sockperf iperf3; do
    command -v "$tool" >/dev/null || { echo "scenarios.sh: $tool is missing: apt-get install $tool" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "scenarios.sh: needs root (network namespaces)" >&2; exit 2; }

work=$(mktemp -d)
bed=""
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
    [ -n "$bed" ] && "$NETTUNE" testbed down "$bed" >/dev/null 2>&1 || true
    bed=""
}
trap 'cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

load() { cut -d' ' -f1 /proc/loadavg; }
# InDatagrams and RcvbufErrors of the server namespace.
udp() { ip netns exec "$1" awk '/^Udp:/ { if (n++) { for (i = 1; i <= NF; i++) v[h[i]] = $i; print v["InDatagrams"], v["RcvbufErrors"] } else for (i = 1; i <= NF; i++) h[i] = $i }' /proc/net/snmp; }

load_start=$(load)
echo "nettune: $("$NETTUNE" --version)"
echo "load average at start: $load_start"
summary=()
# The experiment's figures: "before[range] after[range] ratio verdict"
# from its results.json, the medians divided by $2.
experiment_figures() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
scale = float(sys.argv[2])
cells = {c["config"]: c for c in d["cells"]}
ref, tuned = d["configs"][0]["name"], d["configs"][1]["name"]
s = lambda c: c["summary"]
fmt = lambda c: "%.1f[%.1f-%.1f]" % (s(c)["median"] / scale, s(c)["min"] / scale, s(c)["max"] / scale)
cmp = cells[tuned]["comparison"]
print(fmt(cells[ref]), fmt(cells[tuned]), "%.2fx" % cmp["ratio"], cmp["verdict"])
EOF
}

# Option $1 (--gso: UDP GSO segments per send; --rate: packets per
# second) of the scenario's flood as `testbed up` printed it ($up), or ""
# when the flood has none.
flood_opt() { python3 -c 'import json, re, sys; m = re.search(sys.argv[1] + r" (\d+)", json.load(sys.stdin)["commands"]["client"]); print(m.group(1) if m else "")' "$1" <<<"$up"; }

# The scenario's load for nettune: "LINE" "SERVER-PIN-ARGS" "SCALE".
load_line() {
    if [ "$kind" = rr ]; then
        line="rr --proto tcp --pin $sender"; pin_args=(--server-pin "$reader"); scale=1000
    elif [ "$reader" = - ]; then
        line="stream"; pin_args=(); scale=1000000
    else
        gso=$(flood_opt --gso); rate=$(flood_opt --rate)
        line="udp-flood --flows $FLOWS --pin $sender${gso:+ --gso $gso}${rate:+ --rate $rate}"; pin_args=(--server-pin "$reader"); scale=1000
    fi
}

now() { date +%s.%N; }

if [ "$SEARCH" = 1 ]; then
    [ "$ROUNDS" -ge 3 ] || echo "scenarios.sh: ROUNDS=$ROUNDS: below 3 repeats the confirmation gives no verdict, so every search picks the host as found" >&2
    rows=()
    for scenario in $SCENARIOS; do
        bed="ntb-scb$$"
        up=$("$NETTUNE" testbed up --name "$bed" --scenario "$scenario" --json)
        read -r reader sender kind path < <(python3 -c '
import json, re, sys
c = json.load(sys.stdin)["commands"]
pin = lambda s: (re.search(r"--pin (\d+)", s) or re.search("()", "")).group(1) or "-"
print(pin(c["server"]), pin(c["client"]), "rr" if " rr-server " in c["server"] else "other",
      ",".join(c["doctor"].split()[4:]) or "-")' <<<"$up")
        load_line
        # The scenario's path (--bandwidth/--rtt, as doctor is given it):
        # the search sizes buffers=throughput for it when it searches buffers.
        path_args=()
        if [[ ,$SEARCH_SPACE, == *,buffers,* && $path != - ]]; then
            read -ra path_args <<<"${path//,/ }"
        fi
        echo "$scenario: nettune experiment search --space $SEARCH_SPACE --bench '$line' ${pin_args[*]} ${path_args[*]} --repeat $ROUNDS --duration $EXP_DURATION" >&2
        t0=$(now)
        "$NETTUNE" experiment search --testbed "$bed" --space "$SEARCH_SPACE" --bench "$line" "${pin_args[@]}" "${path_args[@]}" "${host_args[@]}" \
            --repeat "$ROUNDS" --duration "$EXP_DURATION" --warmup 1s --json >"$work/search-$scenario.json" 2>"$work/search-$scenario.log" || true
        t1=$(now)
        [ -s "$work/search-$scenario.json" ] || { echo "scenarios.sh: experiment search failed on $scenario:" >&2; tail -5 "$work/search-$scenario.log" >&2; exit 1; }
        # The search's candidates as experiment configs: "rps=app(1)
        # xps=off" names the same settings as "rps=app+xps=off". A
        # buffers=throughput config is sized for the path the search
        # printed (its "bandwidth" and "rtt"), so the grid is given it too.
        { read -r configs; read -r grid_path; } < <(python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1]))
configs = ["+".join(re.sub(r"\([^)]*\)", "", c).split()) for c in d["candidates"]]
print(",".join(configs))
buffers = any("buffers=" in c for c in configs)
print(" ".join(f"--{k} {d[k]}" for k in ("bandwidth", "rtt") if buffers and d.get(k)) or "-")' "$work/search-$scenario.json")
        grid_args=()
        [ "$grid_path" = - ] || read -ra grid_args <<<"$grid_path"
        echo "$scenario: the grid: nettune experiment run --configs '$configs' ${grid_args[*]} --bench '$line' ${pin_args[*]} --repeat $ROUNDS --duration $EXP_DURATION" >&2
        t2=$(now)
        "$NETTUNE" experiment run --testbed "$bed" --configs "$configs" "${grid_args[@]}" --bench "$line" "${pin_args[@]}" "${host_args[@]}" \
            --repeat "$ROUNDS" --duration "$EXP_DURATION" --warmup 1s --out "$work/grid-$scenario" >"$work/grid-$scenario.log" 2>&1 \
            || { echo "scenarios.sh: the grid failed on $scenario:" >&2; tail -5 "$work/grid-$scenario.log" >&2; exit 1; }
        t3=$(now)
        cleanup
        rows+=("$(python3 - "$scenario" "$work/search-$scenario.json" "$work/grid-$scenario/results.json" "$t0" "$t1" "$t2" "$t3" "$scale" <<'EOF'
import json, re, sys
scenario, search, grid, t0, t1, t2, t3, scale = sys.argv[1:]
s = json.load(open(search))
g = json.load(open(grid))
scale = float(scale)
medians = {c["config"]: c["summary"]["median"] for c in g["cells"]}
best = max(medians, key=medians.get)
found = s["search"]
better = found["comparison"]["verdict"] == "better"
winner = "+".join(re.sub(r"\([^)]*\)", "", found["winner_name"]).split())
pick = winner if better else "current"
regret = (medians[best] - medians[pick]) / medians[best] * 100 if pick in medians else float("nan")
# Not better: the host as found is the pick; the winner of the rounds and
# its confirmation's verdict beside it (below 3 repeats there is none).
if not better:
    verdict = found["comparison"]["verdict"].replace("_", " ")
    pick_text = f"current {medians.get('current', float('nan')) / scale:.1f} (rounds' winner {winner} {medians.get(winner, float('nan')) / scale:.1f}: {verdict})"
else:
    pick_text = f"{pick} {medians.get(pick, float('nan')) / scale:.1f}"
# Can the grid itself tell the pick from its best? Their runs paired by
# round (every round runs each config once), rounds resampled with
# replacement: the 95% interval of the ratio of medians, pick / best. An
# interval reaching 1.00 means the grid's repeats do not separate the two:
# the best is then the luckiest of configurations alike (with several
# that steer the same way, their largest median sits above their common
# level), and the regret measures the grid's spread, not the search.
import random, statistics
by_round = {}
for r in g["runs"]:
    by_round.setdefault(r["round"], {})[r["config"]] = r["value"]
pairs = [(v[pick], v[best]) for v in by_round.values() if pick in v and best in v]
if pick == best:
    sep = "1.00 (the best)"
elif len(pairs) >= 3:
    rng = random.Random(1)
    boot = []
    for _ in range(2000):
        sample = [rng.choice(pairs) for _ in pairs]
        boot.append(statistics.median(a for a, _ in sample) / statistics.median(b for _, b in sample))
    boot.sort()
    point = statistics.median(a for a, _ in pairs) / statistics.median(b for _, b in pairs)
    sep = f"{point:.2f} [{boot[49]:.2f}-{boot[1949]:.2f}]"
else:
    sep = "-"
ratio = (float(t1) - float(t0)) / (float(t3) - float(t2))
# The ratio the schedule predicts (docs/benchmarks.md): per run its warm-up
# (a short run's share of it) and 0.15 s of applying, rolling back and
# starting the server; the rounds keep a third, their runs double from
# --min-duration (1 s) up to --duration; then --repeat pairs at --duration.
settings = g["settings"]
repeat, dur, warm = settings["repeat"], settings["duration_s"], settings["warmup_s"]
run = lambda d: d + warm * min(d / dur, 1.0) + 0.15
n, d, rounds = len(medians) - 1, min(1.0, dur), 0.0
while True:
    rounds += (n + 1) * run(d)
    n, d = -(-n // 3), min(2 * d, dur)
    if n <= 1:
        break
expected = (rounds + 2 * repeat * run(dur)) / (len(medians) * repeat * run(dur))
print(f"| {scenario} | {len(medians)} | {best} {medians[best] / scale:.1f} | {pick_text} "
      f"| {regret:.1f} | {sep} | {float(t1) - float(t0):.0f} s / {float(t3) - float(t2):.0f} s = {ratio:.2f} | {expected:.2f} |")
EOF
)")
    done
    # KEEP=DIR: keep each search's JSON and log and each grid's result
    # directory (report.md, report.html) there.
    if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP" && cp -r "$work"/search-* "$work"/grid-* "$KEEP"/
    fi
    load_end=$(load)
    echo "load average at end: $load_end"
    echo
    echo "search regret: SEARCH_SPACE=$SEARCH_SPACE, $ROUNDS repeats of $EXP_DURATION, medians in kpps (udp-flood), k transactions/s (rr) or Mbit/s (stream)"
    echo
    echo "| scenario | grid configs | grid best | search pick (its grid median) | regret % | pick / best in the grid (95% interval) | time: search / grid | expected |"
    echo "|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    if awk -v a="$load_start" -v b="$load_end" 'BEGIN { exit !(a >= 1.5 || b >= 1.5) }'; then
        echo
        echo "NOISY: load average $load_start at the start, $load_end at the end (1.5 or more): not a result"
    fi
    exit 0
fi

for scenario in $SCENARIOS; do
    bed="ntb-scb$$"
    up=$("$NETTUNE" testbed up --name "$bed" --scenario "$scenario" --json)
    read -r server client reader sender profile path kind < <(python3 -c '
import json, re, sys
d = json.load(sys.stdin)
pin = lambda c: (re.search(r"--pin (\d+)", c) or re.search("()", "")).group(1) or "-"
c = d["commands"]
kind = "rr" if " rr-server " in c["server"] else "tcp" if pin(c["server"]) == "-" else "udp"
print(d["server"]["netns"], d["client"]["netns"], pin(c["server"]), pin(c["client"]), d["profile"],
      ",".join(c["fix"].split()[6:]) or "-", kind)' <<<"$up")
    path=${path//,/ }
    [ "$path" = - ] && path=""
    gso=$(flood_opt --gso); rate=$(flood_opt --rate)

    exp="- - - -"
    if [[ " $MODES " == *" experiment "* ]]; then
        configs="current,$profile"
        [ -n "$path" ] && configs="current,$profile:$path"
        load_line
        echo "$scenario: nettune experiment run --configs '$configs' --bench '$line' ${pin_args[*]} --repeat $ROUNDS --duration $EXP_DURATION" >&2
        # A journal directory of its own: another apply on this host (on
        # its own testbed) holds the default one's lock while it runs.
        "$NETTUNE" experiment run --testbed "$bed" --configs "$configs" --bench "$line" "${pin_args[@]}" \
            --repeat "$ROUNDS" --duration "$EXP_DURATION" --warmup 1s --state-dir "$work/state-exp-$scenario" \
            --out "$work/exp-$scenario" >"$work/exp-$scenario.log" 2>&1 \
            || { echo "scenarios.sh: experiment run failed on $scenario:" >&2; tail -5 "$work/exp-$scenario.log" >&2; exit 1; }
        exp=$(experiment_figures "$work/exp-$scenario/results.json" "$scale")
    fi

    : > "$work/rounds"
    if [[ " $MODES " == *" tools "* ]]; then
        if [ "$kind" = tcp ]; then
            ip netns exec "$server" iperf3 -s -B 198.18.0.1 >"$work/iperf3-s.log" 2>&1 &
            pids+=($!)
            sleep 1
        elif [ "$kind" = rr ]; then
            ip netns exec "$server" taskset -c "$reader" sockperf sr --tcp -i 198.18.0.1 -p 11111 >"$work/sr.log" 2>&1 &
            pids+=($!)
            sleep 1
        else
            feed=$work/feed
            : > "$feed"
            for i in $(seq 0 $((FLOWS - 1))); do echo "U:198.18.0.1:$((11111 + i))" >> "$feed"; done
            total=$(awk -v r="$ROUNDS" -v w="$WINDOW" -v s="$SETTLE" 'BEGIN { printf "%d", r * 2 * (w + s + 3) + 10 }')
            ip netns exec "$server" taskset -c "$reader" sockperf sr -f "$feed" >"$work/sr.log" 2>&1 &
            pids+=($!)
            sleep 1
            if [ -n "$gso" ]; then
                if [ ! -x "$work/udp_sender" ]; then
                    command -v gcc >/dev/null || { echo "scenarios.sh: gcc is missing (the GSO sender of $scenario): apt-get install gcc" >&2; exit 2; }
                    gcc -O2 -Wall -pthread -o "$work/udp_sender" "$here/bench/c/udp_sender.c"
                fi
                ip netns exec "$client" "$work/udp_sender" -g "$gso" ${rate:+-r "$rate"} -f "$FLOWS" -s 198.18.0.1:11111 1 1024 32 "$sender" "$total" >"$work/tp.log" 2>&1 &
            else
                ip netns exec "$client" taskset -c "$sender" sockperf tp -f "$feed" -m 32 -t "$total" >"$work/tp.log" 2>&1 &
            fi
            pids+=($!)
            sleep 2
        fi
        state_dir=$work/state-$scenario
        applied=""
        set_state() {
            if [ "$1" = after ] && [ -z "$applied" ]; then
                # shellcheck disable=SC2086 # $path is several options
                "$NETTUNE" apply --profile "$profile" --netns "$server" $path --state-dir "$state_dir" --json >"$work/apply.json"
                applied=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"]["id"])' "$work/apply.json")
            elif [ "$1" = before ] && [ -n "$applied" ]; then
                "$NETTUNE" rollback "$applied" --state-dir "$state_dir" >/dev/null
                applied=""
            fi
        }
        : > "$work/rounds"
        for round in $(seq 1 "$ROUNDS"); do
            if [ $((round % 2)) = 1 ]; then order="before after"; else order="after before"; fi
            line="$round"
            for state in $order; do
                set_state "$state"
                sleep "$SETTLE"
                if [ "$kind" = tcp ]; then
                    ip netns exec "$client" iperf3 -c 198.18.0.1 -t "$TCP_WINDOW" -O 1 --json >"$work/iperf3.json" || true
                    mbit=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print("%.1f" % (d["end"]["sum_received"]["bits_per_second"] / 1e6))' "$work/iperf3.json" 2>/dev/null || echo 0)
                    line="$line $state $mbit 0"
                    continue
                fi
                if [ "$kind" = rr ]; then
                    ip netns exec "$client" taskset -c "$sender" sockperf ping-pong --tcp -i 198.18.0.1 -p 11111 \
                        -t "$WINDOW" -m 14 --mps=max --full-rtt >"$work/pp.log" 2>&1 || true
                    # Round trips per second (thousands) and the median
                    # round trip (us) in the place of the drop count.
                    line="$line $state $(awk '/Valid Duration/ { for (i = 1; i <= NF; i++) {
                        if ($i ~ /^RunTime=/) { split($i, a, "="); t = a[2] }
                        if ($i ~ /^ReceivedMessages=/) { split($i, b, "="); n = b[2] } } }
                        /percentile 50.000 =/ { p = $NF }
                        END { printf "%.2f %s", (t > 0 ? n / t / 1000 : 0), (p == "" ? 0 : p) }' "$work/pp.log")"
                    continue
                fi
                read -r in0 err0 < <(udp "$server")
                t0=$(date +%s.%N)
                sleep "$WINDOW"
                read -r in1 err1 < <(udp "$server")
                t1=$(date +%s.%N)
                line="$line $state $(awk -v a="$in0" -v b="$in1" -v x="$t0" -v y="$t1" 'BEGIN { printf "%.1f", (b - a) / (y - x) / 1000 }') $((err1 - err0))"
            done
            echo "$line" >> "$work/rounds"
        done
        set_state before
    fi
    cleanup
    # shellcheck disable=SC2086 # $exp is four words
    summary+=("$(GSO="$gso" RATE="$rate" python3 - "$scenario" "$profile" "$reader" "$sender" "$kind" "$work/rounds" $exp <<'EOF'
import os, statistics, sys
scenario, profile, reader, sender, kind, path, e_before, e_after, e_ratio, e_verdict = sys.argv[1:]
rate = {"before": [], "after": []}
errs = {"before": 0, "after": 0}
rtt = {"before": [], "after": []}
ratios = []
for line in open(path):
    f = line.split()
    got = {f[i]: (float(f[i + 1]), float(f[i + 2])) for i in (1, 4)}
    for s in rate:
        rate[s].append(got[s][0])
        if kind == "rr":
            rtt[s].append(got[s][1])
        else:
            errs[s] += int(got[s][1])
    if got["before"][0] > 0:
        ratios.append(got["after"][0] / got["before"][0])
unit, digits = {"tcp": ("Mbit/s", 1), "rr": ("k round trips/s", 2)}.get(kind, ("kpps", 0))
fmt = lambda v, d=digits: f"{statistics.median(v):.{d}f} [{min(v):.{d}f}-{max(v):.{d}f}]" if v else "-"
pinning = {"tcp": "unpinned", "rr": f"server CPU {reader}, client CPU {sender}"}.get(kind, f"reader CPU {reader}, sender CPU {sender}")
gso = os.environ["GSO"] if kind == "udp" else ""
paced = f" --rate {os.environ['RATE']}" if gso and os.environ["RATE"] else ""
tool = "iperf3" if kind == "tcp" else f"udp_sender -g {gso}{paced.replace('--rate', '-r')} -> sockperf sr" if gso else "sockperf"
ratio = f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]" if ratios else "-"
if kind == "rr":
    # The median round trip (us) of each state, in the drops column.
    drops = f"median RTT us {fmt(rtt['before'], 1)} / {fmt(rtt['after'], 1)}" if ratios else "-"
else:
    drops = "-" if kind == "tcp" or not ratios else f"{errs['before']} / {errs['after']}"
engine = {"tcp": "stream", "rr": "rr"}.get(kind, f"udp-flood --gso {gso}{paced}" if gso else "udp-flood")
e = lambda x: x.replace("[", " [") if x != "-" else x
print(f"| {scenario} | {profile} | {pinning} | {unit} | {engine}: {e(e_before)} | {e(e_after)} | {e_ratio} ({e_verdict.replace('_', ' ')}) "
      f"| {tool}: {fmt(rate['before'])} | {fmt(rate['after'])} | {ratio} | {drops} |")
EOF
)")
done
load_end=$(load)
echo "load average at end: $load_end"
noisy=$(awk -v a="$load_start" -v b="$load_end" 'BEGIN { print (a >= 1.5 || b >= 1.5) ? "yes" : "no" }')
echo
echo "experiment run: nettune's engines, median [range] of $ROUNDS runs per config, ratio of medians with the experiment's verdict"
echo "tools: sockperf ($FLOWS flows of 32 B, kpps the reader took, sent by sockperf tp or, with UDP GSO, by bench/c/udp_sender; TCP ping-pong, k round trips/s and median RTT) or iperf3 (one stream, Mbit/s received), median [range] of $ROUNDS alternated rounds"
echo
echo "| scenario | profile | pinning | unit | experiment: before | after | after / before | tool: before | after | after / before | RcvbufErrors (or median RTT) before / after |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${summary[@]}"
if [ "$noisy" = yes ]; then
    echo
    echo "NOISY: load average $load_start at the start, $load_end at the end (1.5 or more): not a result"
fi
