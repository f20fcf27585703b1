exit 0
#!/bin/sh
# nettune plan --profile http: 10 change(s), computed on capture $FIXTURES/vm-2cpu-busy-poll.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# eth0
# virtio2-input.0 queue 0 -> CPU 0: perfect locality: queue i on the i-th network CPU (talawah.io HTTP tuning) (was 0-1)
echo 0 > /proc/irq/38/smp_affinity_list
# virtio2-output.0 queue 0 -> CPU 0: perfect locality: queue i on the i-th network CPU (talawah.io HTTP tuning) (was 0-1)
echo 0 > /proc/irq/39/smp_affinity_list
# RPS: 1 RX queue(s) for 2 network CPUs; spread over the NIC's node's CPUs 0-1 (scaling.rst) (was 0)
echo 3 > /sys/class/net/eth0/queues/rx-0/rps_cpus
# RFS: 32768 flow entries / 1 RX queue(s) = 32768 (scaling.rst) (was 0)
echo 32768 > /sys/class/net/eth0/queues/rx-0/rps_flow_cnt
# IRQ deferral: after a poll that found packets the device IRQ stays masked for up to 100 empty polls, so busy polling is not interrupted by IRQs and softirqs; a busy server keeps IRQs off while it polls, in batches (napi.rst) (was 0)
# napi:eth0:rx-0:defer-hard-irqs: no shell command sets a NAPI by queue; by hand: ynl --family netdev --do napi-set --json '{"id": ID, "defer-hard-irqs": 100}' with ID the NAPI of eth0 rx queue 0 (ynl --family netdev --dump queue-get), or nettune apply
# the deferral's timer: while IRQs are deferred NAPI is polled again after 50 us when no application busy-polls first (napi.rst) (was 0)
# napi:eth0:rx-0:gro-flush-timeout: no shell command sets a NAPI by queue; by hand: ynl --family netdev --do napi-set --json '{"id": ID, "gro-flush-timeout": 50000}' with ID the NAPI of eth0 rx queue 0 (ynl --family netdev --dump queue-get), or nettune apply
# IRQ suspension: IRQs stay off up to 20 ms while an application that busy-polls with prefer-busy-poll epoll keeps finding events (napi.rst) (was 0)
# napi:eth0:rx-0:irq-suspend-timeout: no shell command sets a NAPI by queue; by hand: ynl --family netdev --do napi-set --json '{"id": ID, "irq-suspend-timeout": 20000000}' with ID the NAPI of eth0 rx queue 0 (ynl --family netdev --dump queue-get), or nettune apply

# kernel
# listen backlog for bursts of new connections: ListenOverflows (talawah.io; tuned: somaxconn >= 2048) (was 4096)
sysctl -w net.core.somaxconn=65535
# SYN queue for bursts of new connections (talawah.io) (was 512)
sysctl -w net.ipv4.tcp_max_syn_backlog=65535
# RFS: steer each flow to the CPU of the thread reading it; 32768 entries (scaling.rst) (was 0)
sysctl -w net.core.rps_sock_flow_entries=32768
