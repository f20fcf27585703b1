exit 0
#!/bin/sh
# nettune plan --profile latency: 38 change(s), computed on capture $FIXTURES/one-socket-ice-16q.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# ens801f0
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-0/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-1/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-2/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-3/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-4/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-5/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-6/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-7/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-8/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-9/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-10/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-11/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-12/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-13/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-14/rps_flow_cnt
# RFS: 32768 flow entries / 16 RX queue(s) = 2048 (scaling.rst) (was 0)
echo 2048 > /sys/class/net/ens801f0/queues/rx-15/rps_flow_cnt
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
# low coalescing: adaptive moderation holds interrupts back under load (talawah.io) (was on)
ethtool -C ens801f0 adaptive-rx off
# low coalescing: interrupt at once for each packet (talawah.io) (was 50)
ethtool -C ens801f0 rx-usecs 0

# kernel
# busy polling: a blocking read spins 50 us on the queue instead of sleeping (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_read=50
# busy polling for poll/epoll: 50 us (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_poll=50
# TCP Fast Open for clients and servers: data in the SYN saves a round trip (tuned network-latency) (was 1)
sysctl -w net.ipv4.tcp_fastopen=3
# RFS: steer each flow to the CPU of the thread reading it; 32768 entries (scaling.rst) (was 0)
sysctl -w net.core.rps_sock_flow_entries=32768
