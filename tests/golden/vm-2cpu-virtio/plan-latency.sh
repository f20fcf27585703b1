exit 0
#!/bin/sh
# nettune plan --profile latency: 11 change(s), computed on capture $FIXTURES/vm-2cpu-virtio.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# eth0
# virtio2-input.0 queue 0 -> CPU 0: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-1)
echo 0 > /proc/irq/38/smp_affinity_list
# virtio2-output.0 queue 0 -> CPU 0: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 0-1)
echo 0 > /proc/irq/39/smp_affinity_list
# RFS: 32768 flow entries / 1 RX queue(s) = 32768 (scaling.rst) (was 0)
echo 32768 > /sys/class/net/eth0/queues/rx-0/rps_flow_cnt
# IRQ deferral: after a poll that found packets the device IRQ stays masked for up to 2 empty polls, so busy polling is not interrupted by IRQs and softirqs; a short deferral: a packet nobody polls for waits one timer at most (napi.rst) (was 0)
# napi:eth0:rx-0:defer-hard-irqs: no shell command sets a NAPI by queue; by hand: ynl --family netdev --do napi-set --json '{"id": ID, "defer-hard-irqs": 2}' with ID the NAPI of eth0 rx queue 0 (ynl --family netdev --dump queue-get), or nettune apply
# the deferral's timer: while IRQs are deferred NAPI is polled again after 20 us when no application busy-polls first (napi.rst) (was 0)
# napi:eth0:rx-0:gro-flush-timeout: no shell command sets a NAPI by queue; by hand: ynl --family netdev --do napi-set --json '{"id": ID, "gro-flush-timeout": 20000}' with ID the NAPI of eth0 rx queue 0 (ynl --family netdev --dump queue-get), or nettune apply
# IRQ suspension: IRQs stay off up to 20 ms while an application that busy-polls with prefer-busy-poll epoll keeps finding events (napi.rst) (was 0)
# napi:eth0:rx-0:irq-suspend-timeout: no shell command sets a NAPI by queue; by hand: ynl --family netdev --do napi-set --json '{"id": ID, "irq-suspend-timeout": 20000000}' with ID the NAPI of eth0 rx queue 0 (ynl --family netdev --dump queue-get), or nettune apply

# kernel
# busy polling: a blocking read spins 50 us on the queue instead of sleeping (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_read=50
# busy polling for poll/epoll: 50 us (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_poll=50
# TCP Fast Open for clients and servers: data in the SYN saves a round trip (tuned network-latency) (was 1)
sysctl -w net.ipv4.tcp_fastopen=3
# RFS: steer each flow to the CPU of the thread reading it; 32768 entries (scaling.rst) (was 0)
sysctl -w net.core.rps_sock_flow_entries=32768
# poll 200 us before halting the vCPU: a cross-CPU wake-up without a VM exit (guest-halt-polling.rst) (was 0)
echo 200000 > /sys/module/haltpoll/parameters/guest_halt_poll_ns
