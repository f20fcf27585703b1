#!/usr/bin/env bash
# bench/experiment.sh: the goals of `nettune experiment`, on a testbed of
# its own (two namespaces joined by a 2-queue veth, removed on exit).
#
#   (1) overhead: configs current,pps,latency x benches
#       'udp-flood --flows 16' and 'rr --proto tcp --instances 100' x
#       REPEAT repeats at DURATION s per run (1 s warm-up): the wall time
#       against the benches' own warm-up and measured time, as results.json
#       reports it (timing.overhead_percent). Goal: < 5%.
#   (2) search: 'udp-flood --flows 16' to a sink pinned to RECEIVER_CPU;
#       the winner against the host as found, confirmed with REPEAT
#       full-length runs of each (bootstrap 95% interval). Goal: >= 1.3x.
#
# A benchmark, not a test: it prints figures. The load average before and
# after each part is printed: on a machine shared with other work, the
# rates move with it (the ratios less, since runs are interleaved).
#
# Needs root. Environment: DURATION (5), REPEAT (5), RECEIVER_CPU (1),
# SEARCH_MAX (4, the longest search runs, seconds), PARTS (overhead,search:
# which parts to run).
set -euo pipefail

DURATION=${DURATION:-5}
REPEAT=${REPEAT:-5}
RECEIVER_CPU=${RECEIVER_CPU:-1}
SEARCH_MAX=${SEARCH_MAX:-4}
PARTS=${PARTS:-overhead,search}

cd "$(dirname "$0")/.."
cargo build --release --quiet
NT=target/release/nettune
TB="bx$$"
WORK=$(mktemp -d)
cleanup() {
    "$NT" testbed down "$TB" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

load() { cut -d' ' -f1-3 /proc/loadavg; }

"$NT" testbed up --name "$TB" --queues 2 >/dev/null
echo "machine: $(nproc) CPUs, $(uname -r)"

if [[ ,$PARTS, == *,overhead,* ]]; then
echo "== (1) overhead: 3 configs x 2 benches x $REPEAT repeats x ${DURATION}s"
echo "load before: $(load)"
"$NT" experiment run --testbed "$TB" --configs current,pps,latency \
    --bench 'udp-flood --flows 16' --bench 'rr --proto tcp --instances 100' \
    --server-pin "$RECEIVER_CPU" --repeat "$REPEAT" --duration "${DURATION}s" --warmup 1s \
    --out "$WORK/overhead" --state-dir "$WORK/state" 2>"$WORK/overhead.log"
echo "load after: $(load)"
python3 - "$WORK/overhead/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["timing"]
print(f"wall {t['wall_s']:.1f} s, benches' own warm-up and duration {t['bench_s']:.1f} s, "
      f"overhead {t['overhead_s']:.2f} s = {t['overhead_percent']:.2f}% "
      f"(applying and rolling back {t['tuning_s']:.2f} s), {len(r['runs'])} runs")
PY
fi

[[ ,$PARTS, == *,search,* ]] || exit 0
echo "== (2) search: udp-flood --flows 16, sink pinned to CPU $RECEIVER_CPU"
echo "load before: $(load)"
set +e
"$NT" experiment search --testbed "$TB" --bench 'udp-flood --flows 16' \
    --server-pin "$RECEIVER_CPU" --min-duration 1s --duration "${SEARCH_MAX}s" --warmup 1s \
    --repeat "$REPEAT" --out "$WORK/plan.json" --state-dir "$WORK/state" --json \
    >"$WORK/search.json" 2>"$WORK/search.log"
code=$?
set -e
echo "load after: $(load)"
python3 - "$WORK/search.json" "$code" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
f = s["search"]
c = f["comparison"]
print(f"candidates: {len(s['candidates']) - 1}; skipped: {'; '.join(s['skipped'])}"
      + (f"; notes: {'; '.join(s['notes'])}" if s.get("notes") else ""))
for r in f["rounds"]:
    best = r["scores"][0]
    print(f"round {r['round']} ({r['duration_s']:.0f} s): host as found {r['baseline']:.0f} pps, best {best[0]} {best[2]:.2f}x")
print(f"winner {f['winner_name']}: {c['ratio']:.2f}x the host as found "
      f"(95% CI {c['ci_low']:.2f}..{c['ci_high']:.2f}), {c['verdict']}; "
      f"baseline runs {[round(v) for v in f['baseline_runs']]}, winner runs {[round(v) for v in f['winner_runs']]}; exit {sys.argv[2]}")
PY
