exit 0
#!/bin/sh
# nettune plan --profile throughput: 25 change(s), computed on capture $FIXTURES/one-socket-ice-16q.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# ens801f0
# XPS: CPU 0 sends on tx-0, the queue it serves (scaling.rst) (was 0)
echo 1 > /sys/class/net/ens801f0/queues/tx-0/xps_cpus
# XPS: CPU 1 sends on tx-1, the queue it serves (scaling.rst) (was 0)
echo 2 > /sys/class/net/ens801f0/queues/tx-1/xps_cpus
# XPS: CPU 2 sends on tx-2, the queue it serves (scaling.rst) (was 0)
echo 4 > /sys/class/net/ens801f0/queues/tx-2/xps_cpus
# XPS: CPU 3 sends on tx-3, the queue it serves (scaling.rst) (was 0)
echo 8 > /sys/class/net/ens801f0/queues/tx-3/xps_cpus
# XPS: CPU 4 sends on tx-4, the queue it serves (scaling.rst) (was 0)
echo 10 > /sys/class/net/ens801f0/queues/tx-4/xps_cpus
# XPS: CPU 5 sends on tx-5, the queue it serves (scaling.rst) (was 0)
echo 20 > /sys/class/net/ens801f0/queues/tx-5/xps_cpus
# XPS: CPU 6 sends on tx-6, the queue it serves (scaling.rst) (was 0)
echo 40 > /sys/class/net/ens801f0/queues/tx-6/xps_cpus
# XPS: CPU 7 sends on tx-7, the queue it serves (scaling.rst) (was 0)
echo 80 > /sys/class/net/ens801f0/queues/tx-7/xps_cpus
# XPS: CPU 8 sends on tx-8, the queue it serves (scaling.rst) (was 0)
echo 100 > /sys/class/net/ens801f0/queues/tx-8/xps_cpus
# XPS: CPU 9 sends on tx-9, the queue it serves (scaling.rst) (was 0)
echo 200 > /sys/class/net/ens801f0/queues/tx-9/xps_cpus
# XPS: CPU 10 sends on tx-10, the queue it serves (scaling.rst) (was 0)
echo 400 > /sys/class/net/ens801f0/queues/tx-10/xps_cpus
# XPS: CPU 11 sends on tx-11, the queue it serves (scaling.rst) (was 0)
echo 800 > /sys/class/net/ens801f0/queues/tx-11/xps_cpus
# XPS: CPU 12 sends on tx-12, the queue it serves (scaling.rst) (was 0)
echo 1000 > /sys/class/net/ens801f0/queues/tx-12/xps_cpus
# XPS: CPU 13 sends on tx-13, the queue it serves (scaling.rst) (was 0)
echo 2000 > /sys/class/net/ens801f0/queues/tx-13/xps_cpus
# XPS: CPU 14 sends on tx-14, the queue it serves (scaling.rst) (was 0)
echo 4000 > /sys/class/net/ens801f0/queues/tx-14/xps_cpus
# XPS: CPU 15 sends on tx-15, the queue it serves (scaling.rst) (was 0)
echo 8000 > /sys/class/net/ens801f0/queues/tx-15/xps_cpus
# rings to maximum: absorb bursts at 40/100G (fasterdata 100G tuning) (was 2048)
ethtool -G ens801f0 rx 8160
# rings to maximum (fasterdata 100G tuning) (was 2048)
ethtool -G ens801f0 tx 8160
# fq paces each flow (80% of the 100gbit link / 1 stream(s) = 80gbit, above fq's 32-bit maxrate: no per-flow cap); pacing gains 2-4x on 50-80 ms paths (fasterdata) (was mq)
tc qdisc replace dev ens801f0 root fq

# kernel
# bandwidth x RTT: 100 Gbit/s (link speed) x 100 ms = 1.2 GiB / 1 stream(s) = 1.2 GiB per stream -> autotuning max 1 GiB, socket cap 2 GiB, capped at the largest tier (fasterdata: 40/100G, buffers up to 2 GB) (was 212992)
sysctl -w net.core.rmem_max=2147483647
# bandwidth x RTT: 100 Gbit/s (link speed) x 100 ms = 1.2 GiB / 1 stream(s) = 1.2 GiB per stream -> autotuning max 1 GiB, socket cap 2 GiB, capped at the largest tier (fasterdata: 40/100G, buffers up to 2 GB) (was 212992)
sysctl -w net.core.wmem_max=2147483647
# bandwidth x RTT: 100 Gbit/s (link speed) x 100 ms = 1.2 GiB / 1 stream(s) = 1.2 GiB per stream -> autotuning max 1 GiB, socket cap 2 GiB, capped at the largest tier (fasterdata: 40/100G, buffers up to 2 GB) (was 4096 131072 6291456)
sysctl -w net.ipv4.tcp_rmem='4096 131072 1073741824'
# bandwidth x RTT: 100 Gbit/s (link speed) x 100 ms = 1.2 GiB / 1 stream(s) = 1.2 GiB per stream -> autotuning max 1 GiB, socket cap 2 GiB, capped at the largest tier (fasterdata: 40/100G, buffers up to 2 GB) (was 4096 16384 4194304)
sysctl -w net.ipv4.tcp_wmem='4096 16384 1073741824'
# do not start new connections from an old connection's cached (possibly bad) metrics (fasterdata) (was 0)
sysctl -w net.ipv4.tcp_no_metrics_save=1
# keep the congestion window across idle periods (tuned network-throughput) (was 1)
sysctl -w net.ipv4.tcp_slow_start_after_idle=0
