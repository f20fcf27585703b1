#!/usr/bin/env bash
# The nettune.tune collection (contrib/ansible) over HOSTS (5) hosts that
# are network namespaces of this machine, each with a veth pair of QUEUES
# (2) queues: ansible-playbook's wall time and play recap for check mode,
# the first run, the second run (must change nothing) and the rollback
# (must restore every namespace byte for byte), with the profile PROFILE
# (pps) guarded for GUARD seconds after a BASELINE of seconds (1, 1) at
# INTERVAL (0.5), SERIAL hosts at a time (1). Prints one line per run and
# the load average before and after; exits 1 when the second run changed
# something or the rollback left a value different.
# Needs root, ip and ansible-playbook (Debian package ansible-core).
# NETTUNE=PATH drives that binary instead of a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
hosts=${HOSTS:-5}
queues=${QUEUES:-2}
profile=${PROFILE:-pps}
guard=${GUARD:-1}
baseline=${BASELINE:-1}
interval=${INTERVAL:-0.5}
serial=${SERIAL:-1}
if [ "$(id -u)" -ne 0 ]; then
    echo "bench/ansible.sh: needs root (network namespaces)" >&2
    exit 2
fi
command -v ansible-playbook >/dev/null || {
    echo "bench/ansible.sh: needs ansible-playbook (apt-get install ansible-core)" >&2
    exit 2
}
# NETTUNE: a nettune binary to drive instead of the release build.
if [ -n "${NETTUNE:-}" ]; then
    bin=$(realpath "$NETTUNE")
else
    cargo build --release --quiet
    bin=$PWD/target/release/nettune
fi
tag="nta$$"
work=$(mktemp -d)
made=()
cleanup() {
    for ns in "${made[@]}"; do
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

{
    echo '{"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",'
    echo "  \"ansible_become\": false, \"nettune_binary\": \"$bin\", \"nettune_profile\": \"$profile\","
    echo "  \"nettune_guard\": \"$guard\", \"nettune_guard_baseline\": \"$baseline\","
    echo "  \"nettune_interval\": \"$interval\", \"nettune_serial\": \"$serial\"}, \"hosts\": {"
    for i in $(seq "$hosts"); do
        ns="$tag-$i"
        ip netns add "$ns"
        made+=("$ns")
        ip -n "$ns" link set lo up
        ip -n "$ns" link add "${tag}a$i" numrxqueues "$queues" numtxqueues "$queues" type veth \
            peer name "${tag}b$i" numrxqueues "$queues" numtxqueues "$queues"
        ip -n "$ns" link set "${tag}a$i" up
        ip -n "$ns" link set "${tag}b$i" up
        sep=","
        [ "$i" -eq "$hosts" ] && sep=""
        echo "  \"host-$i\": {\"nettune_netns\": \"$ns\", \"nettune_state_dir\": \"$work/state-$i\"}$sep"
    done
    echo '}}}'
} >"$work/inventory.json"
: >"$work/ansible.cfg"
sleep 1 # operstate follows `ip link set up` with a delay

values() {
    for ns in "${made[@]}"; do
        ip netns exec "$ns" sh -c "grep -r -H '' /proc/sys/net /sys/class/net/*/queues 2>/dev/null | grep -v /byte_queue_limits/; true"
    done
}

play() {
    local name=$1
    shift
    local start end
    start=$(date +%s.%N)
    ANSIBLE_COLLECTIONS_PATH=$PWD/contrib/ansible ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false \
        ANSIBLE_CONFIG=$work/ansible.cfg ANSIBLE_HOME=$work/home ANSIBLE_LOCAL_TEMP=$work/tmp \
        ANSIBLE_REMOTE_TEMP=$work/tmp ANSIBLE_STDOUT_CALLBACK=default ANSIBLE_NOCOLOR=1 LC_ALL=C.UTF-8 \
        timeout 600 ansible-playbook -i "$work/inventory.json" "$@" >"$work/$name.out" 2>"$work/$name.err" || true
    end=$(date +%s.%N)
    python3 - "$work/$name.out" "$name" "$start" "$end" <<'PY'
import sys
path, name, start, end = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
# The play recap: `HOST : ok=1 changed=1 unreachable=0 failed=0 ...`.
recap = open(path).read().split("PLAY RECAP")[-1]
stats = {}
for line in recap.splitlines():
    if " : " in line:
        host, counts = line.split(" : ", 1)
        stats[host.strip()] = {k: int(v) for k, v in (kv.split("=") for kv in counts.split())}
total = lambda k: sum(s.get(k, 0) for s in stats.values())
print(f"{name:<10} {end - start:7.1f} s  hosts {len(stats)}  changed {total('changed')}  "
      f"ok {total('ok')}  failed {total('failed')}")
with open(path + ".changed", "w") as f:
    f.write(str(total("changed")))
PY
}

echo "nettune.tune over $hosts namespace hosts ($queues queues each), profile $profile," \
    "guard ${guard}s after ${baseline}s at ${interval}s, serial $serial;" \
    "$(nproc) CPUs, $(uname -r), $(ansible-playbook --version | sed -n 1p);" \
    "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
values >"$work/before"
play check nettune.tune.tune --check
play first nettune.tune.tune
play second nettune.tune.tune
play rollback nettune.tune.rollback
values >"$work/after"
status=0
second_changed=$(cat "$work/second.out.changed")
if [ "$second_changed" != 0 ]; then
    echo "the second run changed $second_changed task(s): not idempotent" >&2
    status=1
fi
if ! cmp -s "$work/before" "$work/after"; then
    echo "the rollback left values different:" >&2
    diff "$work/before" "$work/after" >&2 || true
    status=1
else
    echo "rollback: $(wc -l <"$work/before") values in $hosts namespaces the same, byte for byte"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
