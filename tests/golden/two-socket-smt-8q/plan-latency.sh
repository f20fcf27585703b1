exit 0
#!/bin/sh
# nettune plan --profile latency: 61 change(s), computed on capture $FIXTURES/two-socket-smt-8q.
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
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-0/rps_flow_cnt
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-1/rps_flow_cnt
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-2/rps_flow_cnt
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-3/rps_flow_cnt
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-4/rps_flow_cnt
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-5/rps_flow_cnt
# RFS: 32768 flow entries / 8 RX queue(s) = 4096 (scaling.rst) (was 0)
echo 4096 > /sys/class/net/eth0/queues/rx-6/rps_flow_cnt
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
# low coalescing: interrupt at once for each packet (talawah.io) (was 1)
ethtool -C eth0 rx-usecs 0

# kernel
# busy polling: a blocking read spins 50 us on the queue instead of sleeping (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_read=50
# busy polling for poll/epoll: 50 us (tuned network-latency; talawah.io) (was 0)
sysctl -w net.core.busy_poll=50
# TCP Fast Open for clients and servers: data in the SYN saves a round trip (tuned network-latency) (was 1)
sysctl -w net.ipv4.tcp_fastopen=3
# RFS: steer each flow to the CPU of the thread reading it; 32768 entries (scaling.rst) (was 0)
sysctl -w net.core.rps_sock_flow_entries=32768
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu1/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu2/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu3/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu4/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu5/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu6/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu7/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu8/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu9/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu10/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu11/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu12/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu13/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu14/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu15/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu16/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu17/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu18/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu19/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu20/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu21/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu22/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu23/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu24/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu25/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu26/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu27/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu28/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu29/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu30/cpufreq/scaling_governor
# performance governor: no wake-up at a low clock (tuned network-latency) (was powersave)
echo performance > /sys/devices/system/cpu/cpu31/cpufreq/scaling_governor
