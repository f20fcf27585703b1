//! The values doctor's fixes name, in one place, following the planning
//! rules of `nettune plan` (issue 4) so that a fix says exactly what the plan
//! will write. The plan engine should use these too; a test then checks that
//! the two agree.

use crate::host::{Host, Interface};

/// net.core.rps_sock_flow_entries for RFS: REFERENCE section 2's
/// recommended value, also perftune's.
pub const RPS_SOCK_FLOW_ENTRIES: u32 = 32768;

/// /sys/module/haltpoll/parameters/guest_halt_poll_ns for the latency
/// profile: on these VMs it took cross-CPU TCP_RR from ~14k to ~78k
/// transactions/s (ENVIRONMENT.md).
pub const GUEST_HALT_POLL_NS: u64 = 200_000;

/// net.core.rmem_max / rmem_default for the pps profile: REFERENCE section 6
/// uses 4 MB UDP socket buffers at 10G.
pub const UDP_RCVBUF_BYTES: u64 = 4 << 20;

/// net.ipv4.tcp_mtu_probing with jumbo frames: 1, not 2 (REFERENCE section 6).
pub const TCP_MTU_PROBING: u32 = 1;

/// Largest value a buffer sysctl takes (they are C ints).
const MAX_BUFFER_BYTES: u64 = i32::MAX as u64;

/// rps_flow_cnt per RX queue: rps_sock_flow_entries / number of RX queues
/// (REFERENCE section 2; the entries themselves on a single-queue NIC).
pub fn rps_flow_cnt(rx_queues: usize) -> u32 {
    RPS_SOCK_FLOW_ENTRIES / rx_queues.max(1) as u32
}

/// A TCP buffer maximum for a bandwidth-delay product: the BDP rounded up
/// to a power of two (the kernel's own sizes and REFERENCE section 6's
/// tiers are powers of two), at most what the sysctl holds.
pub fn tcp_buffer_bytes(bdp_bytes: u64) -> u64 {
    bdp_bytes.max(1).next_power_of_two().min(MAX_BUFFER_BYTES)
}

/// A backlog-style limit that overflowed: double it, as bpftune does while
/// drops continue (ANCHORS.md).
pub fn doubled(current: u64) -> u64 {
    current.saturating_mul(2)
}

/// CPUs that may take network work: online, not isolated, not nohz_full
/// (issue 4's default `--cpus`).
pub fn eligible_cpus(host: &Host) -> Vec<u32> {
    let online: Vec<u32> = if host.online_cpus.is_empty() {
        host.cpus.iter().map(|c| c.id).collect()
    } else {
        host.online_cpus.clone()
    };
    let mut cpus: Vec<u32> = online
        .into_iter()
        .filter(|c| !host.isolated_cpus.contains(c) && !host.nohz_full_cpus.contains(c))
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// The NUMA node of a CPU, when the kernel says.
pub fn cpu_node(host: &Host, cpu: u32) -> Option<u32> {
    host.cpus
        .iter()
        .find(|c| c.id == cpu)
        .and_then(|c| c.node)
        .or_else(|| {
            host.numa_nodes
                .iter()
                .find(|n| n.cpus.contains(&cpu))
                .map(|n| n.id)
        })
}

/// True when `cpu` is the first thread of its physical core (or its
/// siblings are unknown).
pub fn is_first_thread(host: &Host, cpu: u32) -> bool {
    host.cpus
        .iter()
        .find(|c| c.id == cpu)
        .and_then(|c| c.siblings.iter().min())
        .is_none_or(|&first| first == cpu)
}

/// The order in which queue IRQs of `iface` get CPUs, one each: the NIC's
/// node first, physical cores before their SMT siblings, then the other
/// nodes the same way (issue 4's planning rules). When the NIC's node is
/// unknown every CPU counts as local.
pub fn irq_cpu_order(host: &Host, iface: &Interface) -> Vec<u32> {
    let eligible = eligible_cpus(host);
    let local = |cpu: u32| match iface.numa_node {
        Some(node) => cpu_node(host, cpu).is_none_or(|n| n == node),
        None => true,
    };
    let mut order = Vec::with_capacity(eligible.len());
    for want_local in [true, false] {
        for want_first in [true, false] {
            order.extend(
                eligible
                    .iter()
                    .copied()
                    .filter(|&c| local(c) == want_local && is_first_thread(host, c) == want_first),
            );
        }
    }
    order
}

/// CPUs for an RPS mask of `iface`: the eligible CPUs of the NIC's node
/// (every eligible CPU when the node is unknown or has none).
pub fn rps_cpus(host: &Host, iface: &Interface) -> Vec<u32> {
    let eligible = eligible_cpus(host);
    let local: Vec<u32> = match iface.numa_node {
        Some(node) => eligible
            .iter()
            .copied()
            .filter(|&c| cpu_node(host, c) == Some(node))
            .collect(),
        None => Vec::new(),
    };
    if local.is_empty() {
        eligible
    } else {
        local
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::testkit::{iface, nic_on_node1, two_socket_smt_8q, vm_2cpu_single_queue};

    #[test]
    fn irq_order_is_local_cores_then_siblings_then_remote() {
        let host = two_socket_smt_8q();
        let order = irq_cpu_order(&host, &host.interfaces[0]);
        let expected: Vec<u32> = (0..8).chain(16..24).chain(8..16).chain(24..32).collect();
        assert_eq!(order, expected);

        let host = nic_on_node1();
        let order = irq_cpu_order(&host, &host.interfaces[0]);
        assert_eq!(&order[..4], &[8, 9, 10, 11]);
        assert_eq!(order[8], 24);
        assert_eq!(order[16], 0);
    }

    #[test]
    fn isolated_and_nohz_cpus_are_never_targets() {
        let mut host = two_socket_smt_8q();
        host.isolated_cpus = vec![2, 3];
        host.nohz_full_cpus = vec![4];
        let order = irq_cpu_order(&host, &host.interfaces[0]);
        assert_eq!(&order[..5], &[0, 1, 5, 6, 7]);
        assert!(!rps_cpus(&host, &host.interfaces[0]).contains(&4));
        assert_eq!(order.len(), 29);
    }

    #[test]
    fn rps_cpus_from_the_nic_node_or_all() {
        let mut host = nic_on_node1();
        let eth0 = iface(&mut host, "eth0").clone();
        assert_eq!(
            rps_cpus(&host, &eth0),
            (8..16).chain(24..32).collect::<Vec<u32>>()
        );
        let vm = vm_2cpu_single_queue();
        assert_eq!(rps_cpus(&vm, &vm.interfaces[0]), vec![0, 1]);
    }

    #[test]
    fn sizes() {
        assert_eq!(rps_flow_cnt(8), 4096);
        assert_eq!(rps_flow_cnt(1), 32768);
        assert_eq!(rps_flow_cnt(0), 32768);
        // 10 Gbit/s x 50 ms = 62.5 MB -> 64 MiB; REFERENCE's 1 Gbit/s x 50 ms -> 8 MiB.
        assert_eq!(tcp_buffer_bytes(62_500_000), 64 << 20);
        assert_eq!(tcp_buffer_bytes(6_250_000), 8 << 20);
        assert_eq!(tcp_buffer_bytes(3 << 30), i32::MAX as u64);
        assert_eq!(doubled(1000), 2000);
    }
}
