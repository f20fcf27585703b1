exit 0
#!/bin/sh
# nettune plan --profile pps: 15 change(s), computed on capture $FIXTURES/two-socket-nic-node1.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# ens1f0
# mlx5_comp7@pci:0000:af:00.0 queue 7 -> CPU 0: one queue IRQ per CPU, a core on a remote node (the NIC's node is full) (irq-affinity.rst; fasterdata) (was 15)
echo 0 > /proc/irq/158/smp_affinity_list
# RPS: 8 RX queue(s) for 15 network CPUs; spread over the NIC's node's CPUs 8-14 (scaling.rst) (was ff00)
echo 7f00 > /sys/class/net/ens1f0/queues/rx-0/rps_cpus
# RPS: 8 RX queue(s) for 15 network CPUs; spread over the NIC's node's CPUs 8-14 (scaling.rst) (was ff00)
echo 7f00 > /sys/class/net/ens1f0/queues/rx-1/rps_cpus
# RPS: 8 RX queue(s) for 15 network CPUs; spread over the NIC's node's CPUs 8-14 (scaling.rst) (was ff00)
echo 7f00 > /sys/class/net/ens1f0/queues/rx-2/rps_cpus
# RPS: 8 RX queue(s) for 15 network CPUs; spread over the NIC's node's CPUs 8-14 (scaling.rst) (was ff00)
echo 7f00 > /sys/class/net/ens1f0/queues/rx-3/rps_cpus
# RPS: 8 RX queue(s) for 15 network CPUs; spread over the NIC's node's CPUs 8-14 (scaling.rst) (was ff00)
echo 7f00 > /sys/class/net/ens1f0/queues/rx-4/rps_cpus
# RPS: 8 RX queue(s) for 15 network CPUs; spread over the NIC's node's CPUs 8-14 (scaling.rst) (was ff00)
echo 7f00 > /sys/class/net/ens1f0/queues/rx-5/rps_cpus
# RPS: 8 RX queue(s) for 15 network CPUs; spread over the NIC's node's CPUs 8-14 (scaling.rst) (was ff00)
echo 7f00 > /sys/class/net/ens1f0/queues/rx-6/rps_cpus
# RPS: 8 RX queue(s) for 15 network CPUs; spread over the NIC's node's CPUs 8-14 (scaling.rst) (was ff00)
echo 7f00 > /sys/class/net/ens1f0/queues/rx-7/rps_cpus
# XPS: CPU 0 sends on tx-7, the queue it serves (scaling.rst) (was 8000)
echo 1 > /sys/class/net/ens1f0/queues/tx-7/xps_cpus

# kernel
# room for sockets that ask for big receive buffers: RcvbufErrors (Cloudflare 1M pps) (was 212992)
sysctl -w net.core.rmem_max=16777216
# 4 MB receive buffer for UDP sockets that do not set one (fasterdata UDP tuning; Cloudflare's udpreceiver never sets one) (was 212992)
sysctl -w net.core.rmem_default=4194304
# each UDP socket keeps 64 KB of receive buffer under udp_mem pressure: bursts of small packets (Cloudflare 1M pps) (was 4096)
sysctl -w net.ipv4.udp_rmem_min=65536
# per-CPU backlog for RPS and bursts: softnet drops (bpftune raises it on drops) (was 1000)
sysctl -w net.core.netdev_max_backlog=10000
# more packets per softirq round: time_squeeze (bpftune raises it) (was 300)
sysctl -w net.core.netdev_budget=600
