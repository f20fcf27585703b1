//! Property test over random topologies (1-256 CPUs, 1-8 NUMA nodes,
//! SMT or not, 1-128 queues per NIC, some isolated / nohz_full CPUs, an
//! optional --cpus): the plan never targets a CPU outside the network CPUs,
//! never puts two queues on one CPU while an eligible CPU has none, and is
//! deterministic.

use std::collections::{BTreeMap, BTreeSet};

use nettune::base::cpuset::{format_list, format_mask, parse_list, parse_mask};
use nettune::base::driver::DriverSettings;
use nettune::base::Probe;
use nettune::host::{
    Cpu, Host, Interface, IrqVector, NumaNode, RxQueue, Source, TxQueue, VectorRole,
};
use nettune::plan::{plan, PlanOptions, Profile};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Topology {
    cores: u32,
    threads: u32,
    nodes: u32,
    /// Per NIC: queue count and NUMA node (None: unknown).
    nics: Vec<(u32, Option<u32>)>,
    isolated: Vec<u32>,
    nohz_full: Vec<u32>,
    cpus_option: Option<Vec<u32>>,
    profile: Profile,
}

impl Topology {
    fn n_cpus(&self) -> u32 {
        self.cores * self.threads
    }
}

fn topology() -> impl Strategy<Value = Topology> {
    (1u32..=128, prop_oneof![Just(1u32), Just(2u32)], 1u32..=8)
        .prop_filter(
            "at most 256 CPUs, a core per node",
            |(cores, threads, nodes)| cores * threads <= 256 && *nodes <= *cores,
        )
        .prop_flat_map(|(cores, threads, nodes)| {
            let n = cores * threads;
            let profile = prop_oneof![
                Just(Profile::Pps),
                Just(Profile::Throughput),
                Just(Profile::Http),
                Just(Profile::Latency),
            ];
            (
                Just((cores, threads, nodes)),
                profile,
                prop::collection::vec((1u32..=128, prop::option::of(0..nodes)), 1..=2),
                prop::collection::vec(0..n, 0..=(n as usize / 4)),
                prop::collection::vec(0..n, 0..=(n as usize / 8)),
                prop::option::of(prop::collection::vec(0..n, 1..=n as usize)),
            )
        })
        .prop_map(
            |((cores, threads, nodes), profile, nics, isolated, nohz_full, cpus_option)| {
                // latency keeps each NIC on its own node's CPUs: one NIC, so
                // the eligible pool is that node's.
                let nics = if profile == Profile::Latency {
                    nics[..1].to_vec()
                } else {
                    nics
                };
                Topology {
                    cores,
                    threads,
                    nodes,
                    nics,
                    isolated,
                    nohz_full,
                    cpus_option,
                    profile,
                }
            },
        )
}

/// Linux numbering: CPUs 0..cores are first threads, then their siblings;
/// cores split into `nodes` contiguous blocks.
fn build(t: &Topology) -> Host {
    let n = t.n_cpus();
    let node_of_core = |core: u32| core * t.nodes / t.cores;
    let cpus: Vec<Cpu> = (0..n)
        .map(|id| {
            let core = id % t.cores;
            Cpu {
                id,
                node: Some(node_of_core(core)),
                siblings: (0..t.threads).map(|k| core + k * t.cores).collect(),
                package: Some(node_of_core(core)),
                core: Some(core),
            }
        })
        .collect();
    let numa_nodes = (0..t.nodes)
        .map(|node| NumaNode {
            id: node,
            cpus: cpus
                .iter()
                .filter(|c| c.node == Some(node))
                .map(|c| c.id)
                .collect(),
        })
        .collect();
    let all: Vec<u32> = (0..n).collect();
    let mut next_irq = 100;
    let interfaces = t
        .nics
        .iter()
        .enumerate()
        .map(|(i, &(queues, node))| {
            let name = format!("eth{i}");
            let irq_vectors: Vec<IrqVector> = (0..queues)
                .map(|q| {
                    next_irq += 1;
                    IrqVector {
                        irq: next_irq,
                        name: format!("{name}-TxRx-{q}"),
                        role: VectorRole::Combined,
                        queue: Some(q),
                        affinity: Some(all.clone()),
                        effective: Some(vec![0]),
                        affinity_hint: None,
                        per_cpu: Vec::new(),
                    }
                })
                .collect();
            Interface {
                name,
                ifindex: Some(i as u32 + 2),
                driver: Some("synthetic".to_string()),
                physical: true,
                devtype: None,
                mtu: Some(1500),
                speed_mbps: Some(25_000),
                operstate: Some("up".to_string()),
                pci_address: None,
                numa_node: node,
                local_cpus: None,
                rx_queues: irq_vectors
                    .iter()
                    .map(|v| RxQueue {
                        index: v.queue.unwrap_or_default(),
                        irq: Some(v.irq),
                        affinity: v.affinity.clone(),
                        effective: None,
                        affinity_hint: None,
                        rps_cpus: Some(Vec::new()),
                        rps_flow_cnt: Some(0),
                    })
                    .collect(),
                tx_queues: irq_vectors
                    .iter()
                    .map(|v| TxQueue {
                        index: v.queue.unwrap_or_default(),
                        irq: Some(v.irq),
                        affinity: v.affinity.clone(),
                        effective: None,
                        affinity_hint: None,
                        xps_cpus: (queues > 1).then(Vec::new),
                        xps_rxqs: None,
                        tx_maxrate: Some(0),
                    })
                    .collect(),
                irq_vectors,
                root_qdisc: Probe::UNKNOWN,
                xdp: Probe::UNKNOWN,
                driver_settings: DriverSettings::default(),
                netdev: Default::default(),
                gro_flush_timeout: None,
                napi_defer_hard_irqs: None,
                threaded: None,
                statistics: BTreeMap::new(),
            }
        })
        .collect();
    let sorted = |v: &[u32]| -> Vec<u32> {
        let set: BTreeSet<u32> = v.iter().copied().collect();
        set.into_iter().collect()
    };
    Host {
        schema_version: 1,
        source: Source {
            root: "synthetic".to_string(),
            netns: None,
        },
        kernel: None,
        cpus,
        online_cpus: all,
        numa_nodes,
        isolated_cpus: sorted(&t.isolated),
        nohz_full_cpus: sorted(&t.nohz_full),
        cpuidle: Default::default(),
        cpufreq: Default::default(),
        mitigations: Default::default(),
        interfaces,
        sysctls: BTreeMap::new(),
        irqbalance: Default::default(),
        packet_sockets: Vec::new(),
        af_xdp_sockets: None,
        conntrack: Default::default(),
        counters: Default::default(),
        sources: Vec::new(),
        host_sysctls: BTreeMap::new(),
    }
}

/// The CPUs network work may use, by the documented rule.
fn network_cpus(t: &Topology, host: &Host) -> Vec<u32> {
    match &t.cpus_option {
        Some(cpus) => parse_list(&format_list(cpus)).expect("list"),
        None => host
            .online_cpus
            .iter()
            .copied()
            .filter(|c| !host.isolated_cpus.contains(c) && !host.nohz_full_cpus.contains(c))
            .collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn plans_respect_the_cpu_set_spread_queues_and_repeat(t in topology()) {
        let host = build(&t);
        let mut opts = PlanOptions::new(t.profile);
        opts.cpus = t.cpus_option.clone();
        let network = network_cpus(&t, &host);
        let result = plan(&host, &opts);
        if network.is_empty() {
            // Every CPU isolated: a clear error, not a plan.
            let err = result.expect_err("no network CPUs");
            prop_assert!(err.to_string().contains("--cpus"), "{}", err);
            return Ok(());
        }
        let p = result.expect("plan");
        prop_assert_eq!(&p, &plan(&host, &opts).expect("again"), "not deterministic");
        prop_assert_eq!(&p.cpus, &network);

        // Every change passes the gate of a saved plan on this host (up to
        // 256 CPUs, 128 queues): a plan nettune writes is always admitted.
        let scope = nettune::plan::admit::Scope::of(&host);
        let limits = nettune::plan::admit::Limits::of(&host);
        for c in &p.changes {
            let admitted = nettune::plan::admit::admit_change(c, &scope, &limits);
            prop_assert!(admitted.is_ok(), "{:?}", admitted);
        }

        // No CPU outside the network CPUs, in any CPU-valued change.
        for c in &p.changes {
            let text = c.target.to_string();
            let cpus = if text.ends_with("_list") {
                parse_list(c.to.as_str()).expect("list")
            } else if text.ends_with("_cpus") {
                parse_mask(c.to.as_str()).expect("mask")
            } else {
                continue;
            };
            prop_assert!(!cpus.is_empty(), "{:?}", c);
            for cpu in cpus {
                prop_assert!(network.contains(&cpu), "CPU {} outside {:?}: {:?}", cpu, network, c);
            }
        }

        // Final CPU of every queue IRQ (changed or already right).
        let mut load: BTreeMap<u32, u32> = BTreeMap::new();
        for iface in &host.interfaces {
            for v in &iface.irq_vectors {
                let to = p.changes.iter().find(|c| c.target.irq() == Some(v.irq)).map(|c| c.to.to_string());
                let cpus = match to {
                    Some(text) => parse_list(&text).expect("list"),
                    None => v.affinity.clone().unwrap_or_default(),
                };
                prop_assert_eq!(cpus.len(), 1, "queue IRQ {} not on one CPU: {:?}", v.irq, cpus);
                *load.entry(cpus[0]).or_insert(0) += 1;
            }
        }
        // The pool the queues may use: the NIC's node for latency (when it
        // has network CPUs), all network CPUs otherwise.
        let pool: Vec<u32> = match (t.profile, host.interfaces[0].numa_node) {
            (Profile::Latency, Some(node)) => {
                let local: Vec<u32> = network
                    .iter()
                    .copied()
                    .filter(|c| host.cpus[*c as usize].node == Some(node))
                    .collect();
                if local.is_empty() { network.clone() } else { local }
            }
            _ => network.clone(),
        };
        if load.values().any(|&n| n >= 2) {
            for cpu in &pool {
                prop_assert!(
                    load.contains_key(cpu),
                    "two queues share a CPU while eligible CPU {} has none: {:?}",
                    cpu,
                    load
                );
            }
        }

        // RPS masks come from the NIC's node when it has network CPUs.
        for iface in &host.interfaces {
            let Some(node) = iface.numa_node else { continue };
            let local: Vec<u32> = network
                .iter()
                .copied()
                .filter(|c| host.cpus[*c as usize].node == Some(node))
                .collect();
            if local.is_empty() {
                continue;
            }
            let prefix = format!("/sys/class/net/{}/queues/", iface.name);
            for c in p.changes.iter().filter(|c| c.target.to_string().starts_with(&prefix) && c.target.to_string().ends_with("rps_cpus")) {
                if c.to != "0" {
                    prop_assert_eq!(c.to.as_str(), &format_mask(&local));
                }
            }
        }
    }
}
