exit 0
#!/bin/sh
# nettune plan --profile baseline: 18 change(s), computed on capture $FIXTURES/two-socket-nic-node1.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# ens1f0
# kernel default: RPS off (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-0/rps_cpus
# kernel default: RFS off (was 4096)
echo 0 > /sys/class/net/ens1f0/queues/rx-0/rps_flow_cnt
# kernel default: RPS off (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-1/rps_cpus
# kernel default: RFS off (was 4096)
echo 0 > /sys/class/net/ens1f0/queues/rx-1/rps_flow_cnt
# kernel default: RPS off (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-2/rps_cpus
# kernel default: RFS off (was 4096)
echo 0 > /sys/class/net/ens1f0/queues/rx-2/rps_flow_cnt
# kernel default: RPS off (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-3/rps_cpus
# kernel default: RFS off (was 4096)
echo 0 > /sys/class/net/ens1f0/queues/rx-3/rps_flow_cnt
# kernel default: RPS off (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-4/rps_cpus
# kernel default: RFS off (was 4096)
echo 0 > /sys/class/net/ens1f0/queues/rx-4/rps_flow_cnt
# kernel default: RPS off (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-5/rps_cpus
# kernel default: RFS off (was 4096)
echo 0 > /sys/class/net/ens1f0/queues/rx-5/rps_flow_cnt
# kernel default: RPS off (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-6/rps_cpus
# kernel default: RFS off (was 4096)
echo 0 > /sys/class/net/ens1f0/queues/rx-6/rps_flow_cnt
# kernel default: RPS off (was ff00)
echo 0 > /sys/class/net/ens1f0/queues/rx-7/rps_cpus
# kernel default: RFS off (was 4096)
echo 0 > /sys/class/net/ens1f0/queues/rx-7/rps_flow_cnt

# kernel
# kernel default (was 32768)
sysctl -w net.core.rps_sock_flow_entries=0
# kernel default (CONFIG_DEFAULT_TCP_CONG) (was bbr)
sysctl -w net.ipv4.tcp_congestion_control=cubic
