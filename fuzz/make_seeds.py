#!/usr/bin/env python3
"""Write the seed corpus of every fuzz target (fuzz/seeds/TARGET/NAME).

Seeds are small, real inputs each target starts from: files of the fixture
hosts (tests/fixtures/hosts), plans and journals nettune wrote for them,
and well-formed wire messages. Run from the repository root after a
`cargo build` (plans and journals come from target/debug/nettune):

    python3 fuzz/make_seeds.py

Findings kept as regressions are added by hand (fuzz/seeds/TARGET/finding-*)
and are never removed by this script.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTS = os.path.join(ROOT, "tests", "fixtures", "hosts")
SEEDS = os.path.join(ROOT, "fuzz", "seeds")
NETTUNE = os.path.join(ROOT, "target", "debug", "nettune")
# The order the host_tree target numbers them in (fuzz/src/common.rs).
FIXTURES = [
    "one-socket-ice-16q",
    "two-socket-nic-node1",
    "two-socket-smt-8q",
    "vm-2cpu-busy-poll",
    "vm-2cpu-virtio",
]


def seed(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(*parts):
    with open(os.path.join(*parts), "rb") as f:
        return f.read()


def frame(obj):
    body = json.dumps(obj, separators=(",", ":")).encode()
    return struct.pack(">I", len(body)) + body


def clear():
    """Remove generated seeds, keep findings."""
    if not os.path.isdir(SEEDS):
        return
    for target in os.listdir(SEEDS):
        d = os.path.join(SEEDS, target)
        for name in os.listdir(d):
            if not name.startswith("finding-"):
                os.remove(os.path.join(d, name))


def kernel_files():
    files = {
        "proc_interrupts": "proc/interrupts",
        "proc_softirqs": "proc/softirqs",
        "proc_softnet": "proc/net/softnet_stat",
        "proc_stat": "proc/stat",
        "proc_snmp": "proc/net/snmp",
        "proc_snmp6": "proc/net/snmp6",
        "proc_packet": "proc/net/packet",
    }
    for target, path in files.items():
        seen = set()
        for host in FIXTURES:
            p = os.path.join(HOSTS, host, path)
            if os.path.isfile(p):
                data = read(p)
                if data not in seen:
                    seen.add(data)
                    seed(target, host, data)
    for host in FIXTURES:
        p = os.path.join(HOSTS, host, "proc/net/netstat")
        if os.path.isfile(p):
            seed("proc_snmp", host + "-netstat", read(p))
            break
    seed(
        "proc_protocols",
        "linux-6.18",
        "protocol  size sockets  memory press maxhdr  slab module     cl co di ac io in de sh ss gs se re sp bi br ha uh gp em\n"
        "XDP       1088      1      -1   NI       0   no   kernel      n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n\n"
        "PACKET    1536      2      -1   NI       0   no   kernel      n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n  n\n"
        "UDP       1088      7       3   NI       0   yes  kernel      y  y  y  n  y  y  y  n  y  y  y  y  y  n  n  y  y  y  n\n",
    )
    seed("irqname", "virtio", "virtio2-input.0\neth0\n\nvirtio2")
    seed("irqname", "i40e", "i40e-eth0-TxRx-3\neth0\n0000:3b:00.0\n")
    seed("irqname", "ice", "ice-ens801f0-TxRx-15\nens801f0\n0000:17:00.0\n")
    seed("irqname", "mlx5", "mlx5_comp7@pci:0000:5e:00.0\nens1f0\n0000:5e:00.0\n")
    seed("irqname", "tab", "eth0-rx-2\teth0")


def numbered(target, texts):
    for i, text in enumerate(texts):
        seed(target, f"seed-{i}", text)


def values():
    numbered("cpuset", ["0-3,8", "ff,00000000", "00000000,00000001", "0", "", "1-2,5-7,64", "3", "f0f0f0f0"])
    numbered("units", ["10gbit", "2.5G", "50ms", "100us", "4M", "1.5", "500ms", "1m", "2h", "8kbps", "1Gi"])
    numbered(
        "driver_values",
        [
            "rings.rx=4096",
            "coalesce.rx-usecs=50",
            "coalesce.adaptive-rx=on",
            "rx-flow-hash.udp4=sdfn",
            "channels.combined=8",
            "features.rx-gro-hw=off",
            "udp dst-port 53",
            "tcp src 10.0.0.1 dst-ip 10.0.0.2 src-port 1000 dst-port 80 action 3",
            "udp dst-ip fd00::2 dst-port 9000 action -1",
            "0 1 2 3 0 1 2 3",
            "gro-flush-timeout",
        ],
    )
    numbered(
        "plan_target",
        [
            "/proc/sys/net/core/rmem_max\n4194304",
            "/proc/sys/net/ipv4/tcp_rmem\n4096 131072 33554432",
            "/sys/class/net/eth0/queues/rx-0/rps_cpus\n3",
            "/sys/class/net/eth0/queues/tx-1/xps_cpus\n2",
            "/proc/irq/74/smp_affinity_list\n1",
            "ethtool:eth0:rings.rx\n4096",
            "ethtool:eth0:rx-flow-hash.udp4\nsdfn",
            "qdisc:eth0:root\nfq maxrate 8gbit",
            "napi:eth0:rx-0:defer-hard-irqs\n100",
            "interfaces\n",
            "/sys/class/net/eth0/queues\n4",
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor\nperformance",
        ],
    )


def host_tree():
    files = [
        "proc/interrupts",
        "proc/softirqs",
        "proc/stat",
        "proc/net/softnet_stat",
        "proc/net/snmp",
        "proc/net/packet",
        "nettune/driver.json",
        "sys/devices/system/cpu/online",
        "proc/sys/net/core/rmem_max",
        "proc/sys/net/ipv4/tcp_rmem",
        "proc/cmdline",
    ]
    command = 0
    for i, host in enumerate(FIXTURES):
        for path in files:
            p = os.path.join(HOSTS, host, path)
            if not os.path.isfile(p):
                continue
            data = bytes([i, command % 10]) + path.encode() + b"\n" + read(p)
            seed("host_tree", f"{host}-{path.replace('/', '_')}", data)
            command += 1
        # Per-interface files of the first interface that has queues.
        net = os.path.join(HOSTS, host, "sys/class/net")
        for iface in sorted(os.listdir(net)):
            base = f"sys/class/net/{iface}"
            for rel in ["queues/rx-0/rps_cpus", "queues/tx-0/xps_cpus", "speed", "mtu", "device/numa_node"]:
                p = os.path.join(HOSTS, host, base, rel)
                if os.path.isfile(p):
                    path = f"{base}/{rel}"
                    data = bytes([i, command % 10]) + path.encode() + b"\n" + read(p)
                    seed("host_tree", f"{host}-{path.replace('/', '_')}", data)
                    command += 1
            if iface != "lo":
                break
        irq = os.path.join(HOSTS, host, "proc/irq")
        if os.path.isdir(irq):
            n = sorted(os.listdir(irq))[0]
            for rel in ["smp_affinity_list", "effective_affinity_list"]:
                p = os.path.join(irq, n, rel)
                if os.path.isfile(p):
                    path = f"proc/irq/{n}/{rel}"
                    data = bytes([i, command % 10]) + path.encode() + b"\n" + read(p)
                    seed("host_tree", f"{host}-{path.replace('/', '_')}", data)
                    command += 1


def neutral(data, tree):
    """The same file as written for a capture at /srv/capture/NAME: no
    path of the machine that made the seeds."""
    real = os.path.realpath(tree).encode()
    data = data.replace(real, b"/srv/capture/" + os.path.basename(tree).encode())
    # A fixed time, so that writing the seeds again changes nothing.
    return re.sub(rb'"(time|rolled_back_at)": "[^"]*"', rb'"\1": "2026-01-01T00:00:00Z"', data)


def two_files():
    """Files that disagree: CPU ids from /proc/stat when the online list
    cannot be read."""
    seed(
        "host_tree",
        "two-files-cpu-ids",
        b"\x04\x04sys/devices/system/cpu/online\ngarbled\0proc/stat\ncpu0 1 1 1 1\ncpu4294967295 1 1 1 1\n",
    )


def driver_files():
    for i, host in enumerate(FIXTURES):
        p = os.path.join(HOSTS, host, "nettune/driver.json")
        if os.path.isfile(p):
            seed("driver_file", host, bytes([i, i * 2 % 10]) + read(p))
            seed("driver_file", host + "-steer", bytes([i, 9]) + read(p))


def plans_and_journals():
    if not os.access(NETTUNE, os.X_OK):
        sys.exit(f"make_seeds: {NETTUNE} is missing; run `cargo build` first")
    host = os.path.join(HOSTS, "vm-2cpu-virtio")
    for profile in ["pps", "latency", "throughput", "http"]:
        out = subprocess.run(
            [NETTUNE, "plan", "--profile", profile, "--root", host, "--json"],
            check=True,
            capture_output=True,
        ).stdout
        seed("saved_plan", f"vm-2cpu-virtio-{profile}", neutral(out, host))
    with tempfile.TemporaryDirectory() as tmp:
        for profile in ["pps", "latency"]:
            tree = os.path.join(tmp, profile)
            shutil.copytree(host, tree, symlinks=True)
            state = os.path.join(tmp, profile + "-state")
            subprocess.run(
                [NETTUNE, "apply", "--profile", profile, "--root", tree, "--state-dir", state],
                check=True,
                capture_output=True,
            )
            seed("journal", f"apply-{profile}", neutral(read(state, "state-0001.json"), tree))
            subprocess.run(
                [NETTUNE, "rollback", "--root", tree, "--state-dir", state],
                check=True,
                capture_output=True,
            )
            seed("journal", f"rolled-back-{profile}", neutral(read(state, "state-0001.json"), tree))


def files():
    for host in ["vm-2cpu-virtio", "two-socket-smt-8q"]:
        seed("series", host, read(HOSTS, host, "nettune/series.json"))
    seed("results", "experiment", read(ROOT, "tests/fixtures/experiment/results.json"))
    seed(
        "prom_text",
        "families",
        "# HELP nettune_softnet_dropped_total Packets dropped: the backlog was full.\n"
        "# TYPE nettune_softnet_dropped_total counter\n"
        'nettune_softnet_dropped_total{cpu="0"} 0\n'
        'nettune_softnet_dropped_total{cpu="1"} 12\n'
        "# HELP nettune_finding A finding at warn or above.\n"
        "# TYPE nettune_finding gauge\n"
        'nettune_finding{id="softnet.backlog",severity="warn",subject="cpu1"} 1\n'
        "# TYPE node_network_receive_bytes_total counter\n"
        'node_network_receive_bytes_total{device="eth0"} 1.234e+09\n'
        "nettune_up 1\n",
    )


def wire():
    preamble = b"NTsv" + struct.pack(">H", 1) + b"\0\0"
    nonce = "ab" * 32
    seed(
        "serve_proto",
        "client",
        preamble
        + frame({"type": "auth", "nonce": nonce, "mac": "cd" * 32})
        + frame(
            {
                "type": "start",
                "side": {"bench": "rr-server", "threads": 1, "max_reply": 64},
                "seconds": 2.5,
                "pin": [0],
            }
        )
        + frame({"type": "finish"}),
    )
    limits = {
        "max_tests": 8,
        "max_seconds": 300.0,
        "max_rate_bits_per_second": 10000000000,
        "max_reply_bytes": 1048576,
        "max_threads": 64,
    }
    seed(
        "serve_proto",
        "daemon",
        preamble
        + frame({"type": "challenge", "version": 1, "nonce": nonce, "auth": "token"})
        + frame({"type": "welcome", "mac": "ef" * 32, "limits": limits})
        + frame({"type": "started", "test": 1, "port": 40000, "detail": "udp-sink"})
        + frame(
            {
                "type": "report",
                "test": 1,
                "bench": "udp-sink",
                "ended": "finished",
                "seconds": 2.0,
                "report": {"packets": 10},
                "host_cpu": None,
                "error": None,
            }
        )
        + frame({"type": "error", "kind": "busy", "message": "8 tests are running"}),
    )
    seed(
        "serve",
        "start-udp-sink",
        preamble
        + frame(
            {
                "type": "start",
                "side": {"bench": "udp-sink", "threads": 1, "reuseport": False, "rcvbuf": None},
                "seconds": 0.5,
            }
        )
        + frame({"type": "finish"}),
    )
    seed(
        "serve",
        "start-rr",
        preamble
        + frame({"type": "start", "side": {"bench": "rr-server", "threads": 1, "max_reply": 64}, "seconds": 0.5})
        + frame({"type": "finish"}),
    )
    seed("serve", "auth", preamble + frame({"type": "auth", "nonce": nonce, "mac": "00" * 32}))

    hello = b"nettrr01" + struct.pack(">II", 1, 1)
    seed("rr_wire", "hello", hello)
    seed("rr_wire", "hello-large", b"nettrr01" + struct.pack(">II", 65507, 4096))
    seed("rr_wire", "stamp", struct.pack(">I", 7) + b"\x04" + b"\0" * 8)
    # rr_server: mode byte (bit 0 io_uring, bit 1 TCP), records of (len, bytes).
    req = b"\0\0\0\x01"
    big = b"nettrr01" + struct.pack(">II", 4, 1024)
    seed("rr_server", "udp-epoll", b"\x00" + bytes([16]) + big + bytes([4]) + req + bytes([4]) + b"\0\0\0\x02")
    seed("rr_server", "udp-uring", b"\x01" + bytes([16]) + big + bytes([4]) + req)
    seed("rr_server", "tcp-epoll", b"\x02" + bytes([16]) + hello + bytes([3]) + b"abc")
    seed("rr_server", "tcp-uring", b"\x03" + bytes([16]) + big + bytes([8]) + b"12345678")

    header = b"NTst" + struct.pack(">H", 1) + b"\x01\0" + struct.pack(">IQ", 0, 0)
    params = {
        "type": "params",
        "streams": 1,
        "reverse": False,
        "seconds": 0.2,
        "size": 131072,
        "window": None,
        "pace": None,
        "cc": None,
        "zerocopy": None,
    }
    seed("stream_wire", "control", header + frame(params) + frame({"type": "stop"}))
    seed(
        "stream_wire",
        "results",
        header + frame({"type": "accepted", "test": 5}) + frame({"type": "ready"}) + frame({"type": "refused", "error": "busy"}),
    )
    ctl = header + frame(params)
    data_header = b"NTst" + struct.pack(">H", 1) + b"\x02\0" + struct.pack(">IQ", 0, 1)
    seed("stream_server", "control", b"".join(bytes([0, len(ctl[i:i + 200])]) + ctl[i:i + 200] for i in range(0, len(ctl), 200)))
    seed("stream_server", "data", bytes([0, len(ctl)]) + ctl + bytes([1, len(data_header)]) + data_header + bytes([1, 4]) + b"data")

    for i, req in enumerate(
        [
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
            b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /metrics HTTP/1.0\r\n\r\n",
            b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
        ]
    ):
        seed("prom_server", f"seed-{i}", bytes([i % 3, len(req)]) + req)
    eth = b"\x02" * 6 + b"\x04" * 6
    udp_payload = b"\0" * 16
    ip4 = bytes([0x45, 0]) + struct.pack(">H", 20 + 8 + len(udp_payload)) + b"\0" * 5 + bytes([17]) + b"\0\0" + bytes([10, 0, 0, 1, 10, 0, 0, 2])
    seed("xsk_frame", "udp4", eth + b"\x08\x00" + ip4 + struct.pack(">HHHH", 1000, 9000, 8 + len(udp_payload), 0) + udp_payload)
    ip6 = bytes([0x60, 0, 0, 0]) + struct.pack(">H", 20) + bytes([6, 64]) + b"\xfd" + b"\0" * 14 + b"\x01" + b"\xfd" + b"\0" * 14 + b"\x02"
    seed("xsk_frame", "tcp6", eth + b"\x86\xdd" + ip6 + struct.pack(">HH", 1000, 80) + b"\0" * 16)

    for i, req in enumerate(
        [
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n",
            b"HEAD /metrics HTTP/1.0\r\n\r\n",
            b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            b"GET http://h/path?q=1 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n\r\n",
            b"GET / HTTP/1.1\nHost: x\n\n",
        ]
    ):
        seed("http_head", f"seed-{i}", bytes([7 + i]) + req)
    for i, resp in enumerate(
        [
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nTrailer: 1\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 204 No Content\r\n\r\n",
        ]
    ):
        seed("http_response", f"seed-{i}", bytes([5 + i]) + resp)


def main():
    clear()
    kernel_files()
    values()
    host_tree()
    two_files()
    driver_files()
    plans_and_journals()
    files()
    wire()


if __name__ == "__main__":
    main()
