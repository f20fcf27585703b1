//! Which CPUs network work may use, in which order a NIC's queues take them,
//! and the queue -> CPU assignment (irq-affinity.rst and scaling.rst; NUMA
//! locality as in the Cloudflare 1M packets/s post and fasterdata.es.net).

use std::collections::BTreeMap;

use anyhow::bail;

use crate::base::cpuset::format_list;
use crate::host::{Host, Interface};

/// The CPUs network work may use: `--cpus` (every one online), or by
/// default every online CPU except isolated and nohz_full ones (they
/// belong to latency-critical work; irqbalance bans them too).
pub fn network_cpus(host: &Host, asked: Option<&[u32]>) -> anyhow::Result<Vec<u32>> {
    match asked {
        Some(cpus) => {
            if cpus.is_empty() {
                bail!("--cpus names no CPU; give the CPUs network work may use, e.g. --cpus 0-3");
            }
            let offline: Vec<u32> = cpus
                .iter()
                .copied()
                .filter(|c| !host.online_cpus.contains(c))
                .collect();
            if !offline.is_empty() {
                bail!(
                    "--cpus '{}': CPU {} not online on this host (online: {}); name online CPUs only",
                    format_list(cpus),
                    format_list(&offline),
                    format_list(&host.online_cpus)
                );
            }
            let mut cpus = cpus.to_vec();
            cpus.sort_unstable();
            cpus.dedup();
            Ok(cpus)
        }
        None => {
            let cpus: Vec<u32> = host
                .online_cpus
                .iter()
                .copied()
                .filter(|c| !host.isolated_cpus.contains(c) && !host.nohz_full_cpus.contains(c))
                .collect();
            if cpus.is_empty() {
                bail!(
                    "every online CPU ({}) is isolated or nohz_full; name the CPUs network work may use with --cpus",
                    format_list(&host.online_cpus)
                );
            }
            Ok(cpus)
        }
    }
}

/// The CPUs of the NIC's NUMA node (all of them, eligible or not); `None`
/// when the NIC's node is unknown.
pub fn nic_node_cpus(host: &Host, iface: &Interface) -> Option<Vec<u32>> {
    if let Some(node) = iface.numa_node {
        if let Some(n) = host.numa_nodes.iter().find(|n| n.id == node) {
            return Some(n.cpus.clone());
        }
    }
    // Without a node (a VM reports -1), the device's local CPUs stand in.
    iface.local_cpus.clone().filter(|cpus| !cpus.is_empty())
}

/// Order `cpus` for a NIC whose node holds `local`: NIC-local physical
/// cores first, then their SMT siblings, then the remote node(s)' cores,
/// then their siblings. A core's first eligible thread counts as the core.
pub fn preference_order(host: &Host, cpus: &[u32], local: Option<&[u32]>) -> Vec<u32> {
    let node_of = |cpu: u32| {
        host.cpus
            .iter()
            .find(|c| c.id == cpu)
            .and_then(|c| c.node)
            .unwrap_or(u32::MAX)
    };
    let thread_rank = |cpu: u32| -> usize {
        let siblings = host
            .cpus
            .iter()
            .find(|c| c.id == cpu)
            .map(|c| c.siblings.clone())
            .unwrap_or_else(|| vec![cpu]);
        // Position among the core's threads that network work may use.
        siblings
            .iter()
            .filter(|s| cpus.contains(s) && **s < cpu)
            .count()
    };
    let mut keyed: Vec<(bool, usize, u32, u32)> = cpus
        .iter()
        .map(|&cpu| {
            let remote = local.is_some_and(|l| !l.contains(&cpu));
            (remote, thread_rank(cpu), node_of(cpu), cpu)
        })
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, _, _, cpu)| cpu).collect()
}

/// How many queues each CPU carries so far, over all planned interfaces.
pub type Load = BTreeMap<u32, u32>;

/// One CPU per queue: each queue takes the least-loaded CPU of `order`,
/// the earlier one on a tie. So no CPU gets a second queue while one in
/// `order` has none, and several NICs spread over the CPUs together.
pub fn assign_queues(order: &[u32], queues: usize, load: &mut Load) -> Vec<u32> {
    let mut assigned = Vec::with_capacity(queues);
    for _ in 0..queues {
        let Some(&cpu) = order
            .iter()
            .min_by_key(|cpu| load.get(cpu).copied().unwrap_or(0))
        else {
            break;
        };
        *load.entry(cpu).or_insert(0) += 1;
        assigned.push(cpu);
    }
    assigned
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{Cpu, NumaNode, Source};

    /// 2 sockets x 2 cores x 2 threads, Linux numbering: 0-3 first threads,
    /// 4-7 their siblings; node0 = 0,1,4,5.
    fn host() -> Host {
        let mut host = Host {
            schema_version: 1,
            source: Source {
                root: "/".to_string(),
                netns: None,
            },
            kernel: None,
            cpus: Vec::new(),
            online_cpus: (0..8).collect(),
            numa_nodes: Vec::new(),
            isolated_cpus: Vec::new(),
            nohz_full_cpus: Vec::new(),
            cpuidle: Default::default(),
            cpufreq: Default::default(),
            mitigations: Default::default(),
            interfaces: Vec::new(),
            sysctls: Default::default(),
            irqbalance: Default::default(),
            packet_sockets: Vec::new(),
            af_xdp_sockets: None,
            conntrack: Default::default(),
            counters: Default::default(),
            sources: Vec::new(),
            host_sysctls: Default::default(),
        };
        host.cpus = (0..8)
            .map(|id| Cpu {
                id,
                node: Some(if id % 4 < 2 { 0 } else { 1 }),
                siblings: vec![id % 4, id % 4 + 4],
                package: Some(if id % 4 < 2 { 0 } else { 1 }),
                core: Some(id % 2),
            })
            .collect();
        host.numa_nodes = vec![
            NumaNode {
                id: 0,
                cpus: vec![0, 1, 4, 5],
            },
            NumaNode {
                id: 1,
                cpus: vec![2, 3, 6, 7],
            },
        ];
        host
    }

    #[test]
    fn local_cores_then_siblings_then_remote() {
        let host = host();
        let all: Vec<u32> = (0..8).collect();
        let order = preference_order(&host, &all, Some(&[0, 1, 4, 5]));
        assert_eq!(order, [0, 1, 4, 5, 2, 3, 6, 7]);
        // CPU 0 not eligible: its sibling 4 stands for the core.
        let some = [1, 2, 3, 4, 5, 6, 7];
        let order = preference_order(&host, &some, Some(&[0, 1, 4, 5]));
        assert_eq!(order, [1, 4, 5, 2, 3, 6, 7]);
    }

    #[test]
    fn assignment_never_doubles_up_while_a_cpu_is_free() {
        let mut load = Load::new();
        assert_eq!(assign_queues(&[4, 2, 9], 5, &mut load), [4, 2, 9, 4, 2]);
        // A second NIC continues where the first left off.
        assert_eq!(assign_queues(&[4, 2, 9], 2, &mut load), [9, 4]);
        assert!(assign_queues(&[], 3, &mut Load::new()).is_empty());
    }

    #[test]
    fn cpus_option_is_checked_against_online_cpus() {
        let mut host = host();
        host.online_cpus = vec![0, 1];
        let err = network_cpus(&host, Some(&(0..=300).collect::<Vec<_>>())).expect_err("0-300");
        assert!(err.to_string().contains("'0-300'"), "{err}");
        assert!(err.to_string().contains("CPU 2-300 not online"), "{err}");
        assert!(network_cpus(&host, Some(&[])).is_err());
        host.isolated_cpus = vec![1];
        assert_eq!(network_cpus(&host, None).expect("default"), [0]);
        host.nohz_full_cpus = vec![0];
        assert!(network_cpus(&host, None).is_err());
        assert_eq!(
            network_cpus(&host, Some(&[1, 1, 0])).expect("explicit"),
            [0, 1]
        );
    }
}
