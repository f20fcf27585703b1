exit 0
#!/bin/sh
# nettune plan --profile http: 5 change(s), computed on capture $FIXTURES/two-socket-nic-node1.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# ens1f0
# perfect locality: one queue per network CPU (15 CPUs, driver maximum 63) (talawah.io HTTP tuning) (was 8)
ethtool -L ens1f0 combined 15

# kernel
# listen backlog for bursts of new connections: ListenOverflows (talawah.io; tuned: somaxconn >= 2048) (was 4096)
sysctl -w net.core.somaxconn=65535
# SYN queue for bursts of new connections (talawah.io) (was 512)
sysctl -w net.ipv4.tcp_max_syn_backlog=65535
# busy polling: a blocking read spins 50 us on the queue instead of sleeping (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_read=50
# busy polling for poll/epoll: 50 us (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_poll=50
