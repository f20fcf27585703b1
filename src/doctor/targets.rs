//! Which CPUs the rules count as able to take network work, and where a
//! NIC's RPS targets are, following the planning rules of `nettune plan`.
//! The values a fix names come from the plan itself
//! (`crate::plan::values` and the plan's changes: see `planned.rs`).

use crate::host::{Host, Interface};

/// A backlog-style limit that overflowed: double it, as bpftune does while
/// drops continue.
pub fn doubled(current: u64) -> u64 {
    current.saturating_mul(2)
}

/// CPUs that may take network work: online, not isolated, not nohz_full
/// (plan's default `--cpus`).
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
    fn isolated_and_nohz_cpus_are_never_targets() {
        let mut host = two_socket_smt_8q();
        host.isolated_cpus = vec![2, 3];
        host.nohz_full_cpus = vec![4];
        let eligible = eligible_cpus(&host);
        assert_eq!(eligible.len(), 29);
        assert!(!eligible.contains(&2) && !eligible.contains(&4));
        assert!(!rps_cpus(&host, &host.interfaces[0]).contains(&4));
        assert!(is_first_thread(&host, 0) && !is_first_thread(&host, 16));
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
    fn doubling() {
        assert_eq!(doubled(65_536), 131_072);
        assert_eq!(doubled(u64::MAX), u64::MAX);
    }
}
