exit 0
#!/bin/sh
# nettune plan --profile latency: 15 change(s), computed on capture $FIXTURES/two-socket-nic-node1.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# ens1f0
# mlx5_comp7@pci:0000:af:00.0 queue 7 -> CPU 8: one queue IRQ per CPU, a NIC-local core (irq-affinity.rst; fasterdata) (was 15)
echo 8 > /proc/irq/158/smp_affinity_list
# RPS off: with busy polling the application's CPU takes the queue's packets up the stack itself; RPS would hand them to another CPU's backlog, out of the poller's reach (napi.rst "Busy polling", scaling.rst) (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-0/rps_cpus
# RPS off: with busy polling the application's CPU takes the queue's packets up the stack itself; RPS would hand them to another CPU's backlog, out of the poller's reach (napi.rst "Busy polling", scaling.rst) (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-1/rps_cpus
# RPS off: with busy polling the application's CPU takes the queue's packets up the stack itself; RPS would hand them to another CPU's backlog, out of the poller's reach (napi.rst "Busy polling", scaling.rst) (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-2/rps_cpus
# RPS off: with busy polling the application's CPU takes the queue's packets up the stack itself; RPS would hand them to another CPU's backlog, out of the poller's reach (napi.rst "Busy polling", scaling.rst) (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-3/rps_cpus
# RPS off: with busy polling the application's CPU takes the queue's packets up the stack itself; RPS would hand them to another CPU's backlog, out of the poller's reach (napi.rst "Busy polling", scaling.rst) (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-4/rps_cpus
# RPS off: with busy polling the application's CPU takes the queue's packets up the stack itself; RPS would hand them to another CPU's backlog, out of the poller's reach (napi.rst "Busy polling", scaling.rst) (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-5/rps_cpus
# RPS off: with busy polling the application's CPU takes the queue's packets up the stack itself; RPS would hand them to another CPU's backlog, out of the poller's reach (napi.rst "Busy polling", scaling.rst) (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-6/rps_cpus
# RPS off: with busy polling the application's CPU takes the queue's packets up the stack itself; RPS would hand them to another CPU's backlog, out of the poller's reach (napi.rst "Busy polling", scaling.rst) (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-7/rps_cpus
# XPS: CPU 8 sends on tx-7, the queue it serves (scaling.rst) (was 8000)
echo 100 > /sys/class/net/ens1f0/queues/tx-7/xps_cpus
# low coalescing: adaptive moderation holds interrupts back under load (talawah.io) (was on)
ethtool -C ens1f0 adaptive-rx off
# low coalescing: interrupt at once for each packet (talawah.io) (was 8)
ethtool -C ens1f0 rx-usecs 0

# kernel
# busy polling: a blocking read spins 50 us on the queue instead of sleeping (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_read=50
# busy polling for poll/epoll: 50 us (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_poll=50
# TCP Fast Open for clients and servers: data in the SYN saves a round trip (tuned network-latency) (was 1)
sysctl -w net.ipv4.tcp_fastopen=3
