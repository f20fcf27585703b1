exit 0
#!/bin/sh
# nettune plan --profile pps: 10 change(s), computed on capture $FIXTURES/vm-2cpu-virtio.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# eth0
# virtio2-input.0 queue 0 -> CPU 0: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-1)
echo 0 > /proc/irq/38/smp_affinity_list
# virtio2-output.0 queue 0 -> CPU 0: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-1)
echo 0 > /proc/irq/39/smp_affinity_list
# RPS: 1 RX queue(s) for 2 network CPUs; spread over the NIC's node's CPUs 0-1 (scaling.rst) (was 0)
echo 3 > /sys/class/net/eth0/queues/rx-0/rps_cpus
# RFS: 32768 flow entries / 1 RX queue(s) = 32768 (scaling.rst) (was 0)
echo 32768 > /sys/class/net/eth0/queues/rx-0/rps_flow_cnt

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
# RFS: steer each flow to the CPU of the thread reading it; 32768 entries (scaling.rst) (was 0)
sysctl -w net.core.rps_sock_flow_entries=32768
