exit 0
#!/bin/sh
# nettune plan --profile pps: 40 change(s), computed on capture $FIXTURES/two-socket-smt-8q.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# eth0
# eth0-TxRx-0 queue 0 -> CPU 0: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-31)
echo 0 > /proc/irq/120/smp_affinity_list
# eth0-TxRx-1 queue 1 -> CPU 1: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-31)
echo 1 > /proc/irq/121/smp_affinity_list
# eth0-TxRx-2 queue 2 -> CPU 2: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-31)
echo 2 > /proc/irq/122/smp_affinity_list
# eth0-TxRx-3 queue 3 -> CPU 3: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-31)
echo 3 > /proc/irq/123/smp_affinity_list
# eth0-TxRx-4 queue 4 -> CPU 4: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-31)
echo 4 > /proc/irq/124/smp_affinity_list
# eth0-TxRx-5 queue 5 -> CPU 5: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-31)
echo 5 > /proc/irq/125/smp_affinity_list
# eth0-TxRx-6 queue 6 -> CPU 6: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-31)
echo 6 > /proc/irq/126/smp_affinity_list
# eth0-TxRx-7 queue 7 -> CPU 7: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-31)
echo 7 > /proc/irq/127/smp_affinity_list
# RPS: 8 RX queue(s) for 32 network CPUs; spread over the NIC's node's CPUs 0-7,16-23 (scaling.rst) (was 0)
echo ff00ff > /sys/class/net/eth0/queues/rx-0/rps_cpus
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-0/rps_flow_cnt
# RPS: 8 RX queue(s) for 32 network CPUs; spread over the NIC's node's CPUs 0-7,16-23 (scaling.rst) (was 0)
echo ff00ff > /sys/class/net/eth0/queues/rx-1/rps_cpus
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-1/rps_flow_cnt
# RPS: 8 RX queue(s) for 32 network CPUs; spread over the NIC's node's CPUs 0-7,16-23 (scaling.rst) (was 0)
echo ff00ff > /sys/class/net/eth0/queues/rx-2/rps_cpus
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-2/rps_flow_cnt
# RPS: 8 RX queue(s) for 32 network CPUs; spread over the NIC's node's CPUs 0-7,16-23 (scaling.rst) (was 0)
echo ff00ff > /sys/class/net/eth0/queues/rx-3/rps_cpus
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-3/rps_flow_cnt
# RPS: 8 RX queue(s) for 32 network CPUs; spread over the NIC's node's CPUs 0-7,16-23 (scaling.rst) (was 0)
echo ff00ff > /sys/class/net/eth0/queues/rx-4/rps_cpus
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-4/rps_flow_cnt
# RPS: 8 RX queue(s) for 32 network CPUs; spread over the NIC's node's CPUs 0-7,16-23 (scaling.rst) (was 0)
echo ff00ff > /sys/class/net/eth0/queues/rx-5/rps_cpus
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-5/rps_flow_cnt
# RPS: 8 RX queue(s) for 32 network CPUs; spread over the NIC's node's CPUs 0-7,16-23 (scaling.rst) (was 0)
echo ff00ff > /sys/class/net/eth0/queues/rx-6/rps_cpus
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-6/rps_flow_cnt
# RPS: 8 RX queue(s) for 32 network CPUs; spread over the NIC's node's CPUs 0-7,16-23 (scaling.rst) (was 0)
echo ff00ff > /sys/class/net/eth0/queues/rx-7/rps_cpus
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-7/rps_flow_cnt
# XPS: CPU 0 sends on tx-0, the queue it serves (scaling.rst) (was 0)
echo 1 > /sys/class/net/eth0/queues/tx-0/xps_cpus
# XPS: CPU 1 sends on tx-1, the queue it serves (scaling.rst) (was 0)
echo 2 > /sys/class/net/eth0/queues/tx-1/xps_cpus
# XPS: CPU 2 sends on tx-2, the queue it serves (scaling.rst) (was 0)
echo 4 > /sys/class/net/eth0/queues/tx-2/xps_cpus
# XPS: CPU 3 sends on tx-3, the queue it serves (scaling.rst) (was 0)
echo 8 > /sys/class/net/eth0/queues/tx-3/xps_cpus
# XPS: CPU 4 sends on tx-4, the queue it serves (scaling.rst) (was 0)
echo 10 > /sys/class/net/eth0/queues/tx-4/xps_cpus
# XPS: CPU 5 sends on tx-5, the queue it serves (scaling.rst) (was 0)
echo 20 > /sys/class/net/eth0/queues/tx-5/xps_cpus
# XPS: CPU 6 sends on tx-6, the queue it serves (scaling.rst) (was 0)
echo 40 > /sys/class/net/eth0/queues/tx-6/xps_cpus
# XPS: CPU 7 sends on tx-7, the queue it serves (scaling.rst) (was 0)
echo 80 > /sys/class/net/eth0/queues/tx-7/xps_cpus
# udp4 hashes on addresses only: all flows between two hosts land on one queue; add the ports (Cloudflare 1M pps) (was sd)
ethtool -N eth0 rx-flow-hash udp4 sdfn
# udp6 hashes on addresses only: all flows between two hosts land on one queue; add the ports (Cloudflare 1M pps) (was sd)
ethtool -N eth0 rx-flow-hash udp6 sdfn

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
