exit 0
#!/bin/sh
# nettune plan --profile throughput: 10 change(s), computed on capture $FIXTURES/two-socket-nic-node1.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# ens1f0
# mlx5_comp7@pci:0000:af:00.0 queue 7 -> CPU 0: one queue IRQ per CPU, a core on a remote node (the NIC's node is full) (irq-affinity.rst; fasterdata) (was 15)
echo 0 > /proc/irq/158/smp_affinity_list
# XPS: CPU 0 sends on tx-7, the queue it serves (scaling.rst) (was 8000)
echo 1 > /sys/class/net/ens1f0/queues/tx-7/xps_cpus
# fq paces each flow (80% of the 25gbit link / 1 stream(s)); pacing gains 2-4x on 50-80 ms paths (fasterdata) (was mq)
tc qdisc replace dev ens1f0 root fq maxrate 20gbit

# kernel
# bandwidth x RTT: 25 Gbit/s (link speed) x 100 ms = 298 MiB / 1 stream(s) = 298 MiB per stream -> autotuning max 1 GiB, socket cap 2 GiB (fasterdata: 40/100G, buffers up to 2 GB) (was 212992)
sysctl -w net.core.rmem_max=2147483647
# bandwidth x RTT: 25 Gbit/s (link speed) x 100 ms = 298 MiB / 1 stream(s) = 298 MiB per stream -> autotuning max 1 GiB, socket cap 2 GiB (fasterdata: 40/100G, buffers up to 2 GB) (was 212992)
sysctl -w net.core.wmem_max=2147483647
# bandwidth x RTT: 25 Gbit/s (link speed) x 100 ms = 298 MiB / 1 stream(s) = 298 MiB per stream -> autotuning max 1 GiB, socket cap 2 GiB (fasterdata: 40/100G, buffers up to 2 GB) (was 4096 131072 6291456)
sysctl -w net.ipv4.tcp_rmem='4096 131072 1073741824'
# bandwidth x RTT: 25 Gbit/s (link speed) x 100 ms = 298 MiB / 1 stream(s) = 298 MiB per stream -> autotuning max 1 GiB, socket cap 2 GiB (fasterdata: 40/100G, buffers up to 2 GB) (was 4096 16384 4194304)
sysctl -w net.ipv4.tcp_wmem='4096 16384 1073741824'
# do not start new connections from an old connection's cached (possibly bad) metrics (fasterdata) (was 0)
sysctl -w net.ipv4.tcp_no_metrics_save=1
# keep the congestion window across idle periods (tuned network-throughput) (was 1)
sysctl -w net.ipv4.tcp_slow_start_after_idle=0
# MTU probing with jumbo frames (ens1f0 has MTU 9000); 1, not 2 (fasterdata) (was 0)
sysctl -w net.ipv4.tcp_mtu_probing=1
