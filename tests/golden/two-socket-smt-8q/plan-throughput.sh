exit 0
#!/bin/sh
# nettune plan --profile throughput: 59 change(s), computed on capture $FIXTURES/two-socket-smt-8q.
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
# rings to maximum: absorb bursts at 40/100G (fasterdata 100G tuning) (was 512)
ethtool -G eth0 rx 4096
# rings to maximum (fasterdata 100G tuning) (was 512)
ethtool -G eth0 tx 4096
# adaptive coalescing on: fewer interrupts for bulk traffic (fasterdata 100G tuning) (was off)
ethtool -C eth0 adaptive-rx on
# adaptive coalescing on (fasterdata 100G tuning) (was off)
ethtool -C eth0 adaptive-tx on
# fq paces each flow (80% of the 10gbit link / 1 stream(s)); pacing gains 2-4x on 50-80 ms paths (fasterdata) (was mq)
tc qdisc replace dev eth0 root fq maxrate 8gbit

# kernel
# bandwidth x RTT: 10 Gbit/s (link speed) x 100 ms = 119.2 MiB / 1 stream(s) = 119.2 MiB per stream -> autotuning max 128 MiB, socket cap 256 MiB (fasterdata: measurement hosts) (was 212992)
sysctl -w net.core.rmem_max=268435456
# bandwidth x RTT: 10 Gbit/s (link speed) x 100 ms = 119.2 MiB / 1 stream(s) = 119.2 MiB per stream -> autotuning max 128 MiB, socket cap 256 MiB (fasterdata: measurement hosts) (was 212992)
sysctl -w net.core.wmem_max=268435456
# bandwidth x RTT: 10 Gbit/s (link speed) x 100 ms = 119.2 MiB / 1 stream(s) = 119.2 MiB per stream -> autotuning max 128 MiB, socket cap 256 MiB (fasterdata: measurement hosts) (was 4096 131072 6291456)
sysctl -w net.ipv4.tcp_rmem='4096 131072 134217728'
# bandwidth x RTT: 10 Gbit/s (link speed) x 100 ms = 119.2 MiB / 1 stream(s) = 119.2 MiB per stream -> autotuning max 128 MiB, socket cap 256 MiB (fasterdata: measurement hosts) (was 4096 16384 4194304)
sysctl -w net.ipv4.tcp_wmem='4096 16384 134217728'
# do not start new connections from an old connection's cached (possibly bad) metrics (fasterdata) (was 0)
sysctl -w net.ipv4.tcp_no_metrics_save=1
# keep the congestion window across idle periods (tuned network-throughput) (was 1)
sysctl -w net.ipv4.tcp_slow_start_after_idle=0
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu1/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu2/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu3/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu4/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu5/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu6/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu7/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu8/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu9/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu10/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu11/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu12/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu13/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu14/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu15/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu16/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu17/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu18/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu19/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu20/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu21/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu22/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu23/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu24/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu25/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu26/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu27/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu28/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu29/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu30/cpufreq/scaling_governor
# performance governor: full clock for 40/100G flows (fasterdata 100G tuning) (was powersave)
echo performance > /sys/devices/system/cpu/cpu31/cpufreq/scaling_governor
