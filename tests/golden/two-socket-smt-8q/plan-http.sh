exit 0
#!/bin/sh
# nettune plan --profile http: 6 change(s), computed on capture $FIXTURES/two-socket-smt-8q.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# eth0
# perfect locality: one queue per network CPU (32 CPUs, driver maximum 63) (talawah.io HTTP tuning) (was 8)
ethtool -L eth0 combined 32

# kernel
# listen backlog for bursts of new connections: ListenOverflows (talawah.io; tuned: somaxconn >= 2048) (was 4096)
sysctl -w net.core.somaxconn=65535
# SYN queue for bursts of new connections (talawah.io) (was 512)
sysctl -w net.ipv4.tcp_max_syn_backlog=65535
# busy polling: a blocking read spins 50 us on the queue instead of sleeping (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_read=50
# busy polling for poll/epoll: 50 us (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_poll=50
# RFS: steer each flow to the CPU of the thread reading it; 32768 entries (scaling.rst) (was 0)
sysctl -w net.core.rps_sock_flow_entries=32768
