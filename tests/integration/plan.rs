//! `nettune plan` on the fixture hosts: the planning rules as properties a
//! user would check (distinct CPUs, NIC-local first, cores before SMT
//! siblings, RPS from the NIC's node, rps_flow_cnt arithmetic, buffers
//! from bandwidth x RTT), the output formats, and bad input.

use std::collections::{BTreeMap, BTreeSet};

use nettune::base::cpuset::{parse_list, parse_mask};
use nettune::gather::read_target;
use nettune::host::{Host, Selection};
use nettune::plan::{plan, Change, Plan, PlanOptions, Profile};
use serde_json::Value;

use crate::common::*;

const FIXTURES: [&str; 3] = [
    "vm-2cpu-virtio",
    "two-socket-smt-8q",
    "two-socket-nic-node1",
];
const PROFILES: [Profile; 5] = [
    Profile::Pps,
    Profile::Latency,
    Profile::Throughput,
    Profile::Http,
    Profile::Baseline,
];

fn host(name: &str) -> Host {
    let selection = Selection {
        all: true,
        iface: None,
    };
    read_target(Some(&fixture(name)), None, &selection).expect("read fixture")
}

fn plan_with(host: &Host, profile: Profile, edit: impl FnOnce(&mut PlanOptions)) -> Plan {
    let mut opts = PlanOptions::new(profile);
    edit(&mut opts);
    plan(host, &opts).expect("plan")
}

/// IRQ -> CPU of every affinity change, and the queue each IRQ serves.
fn irq_cpus(host: &Host, plan: &Plan) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for c in &plan.changes {
        let Some(irq) = c.target.irq() else {
            continue;
        };
        let cpus = parse_list(c.to.as_str()).expect("cpu list");
        assert_eq!(cpus.len(), 1, "one CPU per queue IRQ: {c:?}");
        let queue = host
            .interfaces
            .iter()
            .flat_map(|i| &i.irq_vectors)
            .find(|v| v.irq == irq)
            .and_then(|v| v.queue)
            .expect("a queue vector");
        out.push((queue, cpus[0]));
    }
    out
}

fn node_of(host: &Host, cpu: u32) -> Option<u32> {
    host.cpus.iter().find(|c| c.id == cpu).and_then(|c| c.node)
}

/// A CPU that has an eligible SMT sibling with a lower number.
fn is_second_thread(host: &Host, cpu: u32, eligible: &[u32]) -> bool {
    host.cpus
        .iter()
        .find(|c| c.id == cpu)
        .is_some_and(|c| c.siblings.iter().any(|s| *s < cpu && eligible.contains(s)))
}

fn changes_ending<'a>(plan: &'a Plan, suffix: &str) -> Vec<&'a Change> {
    plan.changes
        .iter()
        .filter(|c| c.target.to_string().ends_with(suffix))
        .collect()
}

fn sysctl_to<'a>(plan: &'a Plan, name: &str) -> Option<&'a str> {
    plan.changes
        .iter()
        .find(|c| c.target.sysctl_name() == Some(name))
        .map(|c| c.to.as_str())
}

#[test]
fn every_profile_on_every_fixture_stays_on_network_cpus_and_is_deterministic() {
    for name in FIXTURES {
        let host = host(name);
        let network: Vec<u32> = host
            .online_cpus
            .iter()
            .copied()
            .filter(|c| !host.isolated_cpus.contains(c) && !host.nohz_full_cpus.contains(c))
            .collect();
        for profile in PROFILES {
            let plan = plan_with(&host, profile, |_| {});
            assert_eq!(
                plan,
                plan_with(&host, profile, |_| {}),
                "{name} {profile:?}"
            );
            assert_eq!(plan.cpus, network, "{name}");
            for c in &plan.changes {
                let cpus = if c.target.to_string().ends_with("_list") {
                    parse_list(c.to.as_str()).expect("list")
                } else if c.target.to_string().ends_with("rps_cpus")
                    || c.target.to_string().ends_with("xps_cpus")
                {
                    parse_mask(c.to.as_str()).expect("mask")
                } else {
                    continue;
                };
                assert!(
                    cpus.iter().all(|cpu| network.contains(cpu)),
                    "{name} {profile:?}: {c:?} leaves the network CPUs {network:?}"
                );
            }
            // Per queue: distinct CPUs while there are enough.
            let by_queue: BTreeMap<u32, u32> = irq_cpus(&host, &plan).into_iter().collect();
            let distinct: BTreeSet<u32> = by_queue.values().copied().collect();
            assert_eq!(
                distinct.len(),
                by_queue.len(),
                "{name} {profile:?}: {by_queue:?}"
            );
        }
    }
}

#[test]
fn pps_on_the_smt_host_puts_queues_on_node0_cores_and_rps_on_node0() {
    let host = host("two-socket-smt-8q");
    let plan = plan_with(&host, Profile::Pps, |_| {});
    let irqs = irq_cpus(&host, &plan);
    assert_eq!(
        irqs.len(),
        8,
        "every queue IRQ starts on CPU 0-31: all move"
    );
    let node0 = &host.numa_nodes[0].cpus;
    for (queue, cpu) in &irqs {
        assert!(
            node0.contains(cpu),
            "queue {queue} on CPU {cpu}, off the NIC's node"
        );
        assert!(
            !is_second_thread(&host, *cpu, &plan.cpus),
            "queue {queue} on SMT sibling {cpu} while node0 cores are free"
        );
    }
    let rps = changes_ending(&plan, "/rps_cpus");
    assert_eq!(rps.len(), 8, "8 RX queues for 32 CPUs: RPS on every queue");
    for c in rps {
        assert_eq!(&parse_mask(c.to.as_str()).expect("mask"), node0, "{c:?}");
    }
    for c in changes_ending(&plan, "/rps_flow_cnt") {
        assert_eq!(c.to.as_str(), (32768 / 8).to_string());
    }
    assert_eq!(
        sysctl_to(&plan, "net.core.rps_sock_flow_entries"),
        Some("32768")
    );
    // udp4/udp6 hash on addresses only: the ports are added.
    let hash: Vec<&Change> = plan
        .changes
        .iter()
        .filter(|c| {
            c.target
                .to_string()
                .starts_with("ethtool:eth0:rx-flow-hash.udp")
        })
        .collect();
    assert_eq!(hash.len(), 2);
    assert!(hash.iter().all(|c| c.from == "sd" && c.to == "sdfn"));
}

#[test]
fn cores_before_siblings_before_the_remote_node() {
    let host = host("two-socket-smt-8q");
    // Node 0 keeps cores 0-1 and their siblings 16-17; node 1 cores 8-9
    // and siblings 24-25: 8 CPUs for 8 queues.
    let plan = plan_with(&host, Profile::Pps, |o| {
        o.cpus = Some(vec![0, 1, 8, 9, 16, 17, 24, 25]);
    });
    let local = &host.numa_nodes[0].cpus;
    let mut irqs = irq_cpus(&host, &plan);
    irqs.sort();
    let ranks: Vec<(bool, bool)> = irqs
        .iter()
        .map(|(_, cpu)| {
            (
                !local.contains(cpu),
                is_second_thread(&host, *cpu, &plan.cpus),
            )
        })
        .collect();
    let mut sorted = ranks.clone();
    sorted.sort();
    assert_eq!(
        ranks, sorted,
        "queue order must follow local core, local sibling, remote core, remote sibling: {irqs:?}"
    );
    let used: BTreeSet<u32> = irqs.iter().map(|(_, c)| *c).collect();
    assert_eq!(used.len(), 8, "8 queues, 8 CPUs: one each");
    assert!(irqs[..4].iter().all(|(_, c)| node_of(&host, *c) == Some(0)));
    // RPS only from the NIC's node, even with remote CPUs allowed.
    for c in changes_ending(&plan, "/rps_cpus") {
        assert_eq!(parse_mask(c.to.as_str()).expect("mask"), [0, 1, 16, 17]);
    }
}

#[test]
fn isolated_cpu_is_never_used_and_the_nic_node_comes_first() {
    let host = host("two-socket-nic-node1");
    assert_eq!(host.isolated_cpus, [15]);
    for profile in [Profile::Pps, Profile::Latency, Profile::Throughput] {
        let plan = plan_with(&host, profile, |_| {});
        assert!(!plan.cpus.contains(&15));
        let text = serde_json::to_string(&plan).expect("json");
        for c in &plan.changes {
            assert!(c.to != "15", "{profile:?}: {c:?}");
        }
        // Queues 0-6 already sit on 8-14; queue 7 leaves isolated CPU 15.
        let irqs = irq_cpus(&host, &plan);
        assert_eq!(irqs.len(), 1, "{profile:?}: only queue 7 moves: {text}");
        let (queue, cpu) = irqs[0];
        assert_eq!(queue, 7);
        if profile == Profile::Latency {
            assert_eq!(node_of(&host, cpu), Some(1), "latency keeps NIC-local CPUs");
        } else {
            // Node 1 has 7 usable CPUs for 8 queues: the 8th goes remote.
            assert_eq!(node_of(&host, cpu), Some(0));
        }
    }
    let pps = plan_with(&host, Profile::Pps, |_| {});
    for c in changes_ending(&pps, "/rps_cpus") {
        assert_eq!(
            parse_mask(c.to.as_str()).expect("mask"),
            (8..15).collect::<Vec<_>>()
        );
    }
    assert!(
        changes_ending(&pps, "/rps_flow_cnt").is_empty(),
        "4096 = 32768 / 8 already"
    );
}

#[test]
fn single_queue_vm_gets_rps_over_both_cpus_and_all_flow_entries() {
    let host = host("vm-2cpu-virtio");
    let plan = plan_with(&host, Profile::Pps, |_| {});
    let rps = changes_ending(&plan, "rx-0/rps_cpus");
    assert_eq!(parse_mask(rps[0].to.as_str()).expect("mask"), [0, 1]);
    let cnt = changes_ending(&plan, "rx-0/rps_flow_cnt");
    assert_eq!(cnt[0].to, "32768", "one queue: all entries");
    // Both vectors of queue 0 (input.0, output.0) on one CPU.
    let irqs = irq_cpus(&host, &plan);
    assert_eq!(irqs.len(), 2);
    assert_eq!(irqs[0].1, irqs[1].1);
    // virtio_net has no flow hash: left alone and said so.
    let skipped: Vec<String> = plan.skipped.iter().map(|s| s.target.to_string()).collect();
    assert!(
        skipped
            .iter()
            .any(|s| s == "ethtool:eth0:rx-flow-hash.udp4"),
        "{skipped:?}"
    );
    assert!(plan.skipped.iter().all(|s| !s.reason.is_empty()));
}

#[test]
fn no_rps_where_hardware_queues_cover_the_cpus() {
    let host = host("two-socket-nic-node1");
    // 8 queues, 8 network CPUs: RPS (set on this host) goes off.
    let plan = plan_with(&host, Profile::Pps, |o| {
        o.cpus = Some((8..15).chain([0]).collect())
    });
    let rps = changes_ending(&plan, "/rps_cpus");
    assert_eq!(rps.len(), 8);
    assert!(rps.iter().all(|c| c.to == "0"), "{rps:?}");
    assert!(rps[0].reason.contains("cover"), "{}", rps[0].reason);
}

#[test]
fn latency_polls_and_raises_haltpoll_on_the_vm() {
    let plan = plan_with(&host("vm-2cpu-virtio"), Profile::Latency, |_| {});
    assert_eq!(sysctl_to(&plan, "net.core.busy_read"), Some("50"));
    assert_eq!(sysctl_to(&plan, "net.core.busy_poll"), Some("50"));
    let halt = plan
        .changes
        .iter()
        .find(|c| c.target == "/sys/module/haltpoll/parameters/guest_halt_poll_ns")
        .expect("haltpoll raised");
    assert_eq!((halt.from.as_str(), halt.to.as_str()), ("0", "200000"));
    // No cpufreq in a VM: said, not planned.
    assert!(plan.skipped.iter().any(|s| s.reason.contains("no cpufreq")));

    let smt = host("two-socket-smt-8q");
    let plan = plan_with(&smt, Profile::Latency, |_| {});
    let governors = changes_ending(&plan, "/scaling_governor");
    assert_eq!(governors.len(), 32);
    assert!(governors
        .iter()
        .all(|c| c.from == "powersave" && c.to == "performance"));
}

fn tcp_max(plan: &Plan, name: &str) -> u64 {
    sysctl_to(plan, name)
        .expect("buffer planned")
        .split_whitespace()
        .nth(2)
        .expect("three fields")
        .parse()
        .expect("number")
}

#[test]
fn throughput_buffers_follow_bandwidth_times_rtt() {
    let host = host("two-socket-smt-8q");
    for (bits, rtt_us, streams) in [
        (1_000_000_000u64, 50_000u64, 1u32),
        (10_000_000_000, 100_000, 1),
        (10_000_000_000, 100_000, 4),
        (40_000_000_000, 50_000, 1),
    ] {
        let plan = plan_with(&host, Profile::Throughput, |o| {
            o.bandwidth_bits = Some(bits);
            o.rtt_us = Some(rtt_us);
            o.streams = Some(streams);
        });
        let bdp = bits / 8 * rtt_us / 1_000_000 / u64::from(streams);
        let rmem = tcp_max(&plan, "net.ipv4.tcp_rmem");
        let wmem = tcp_max(&plan, "net.ipv4.tcp_wmem");
        assert!(
            rmem >= bdp,
            "{bits} x {rtt_us}us / {streams}: tcp_rmem max {rmem} < BDP {bdp}"
        );
        assert_eq!(rmem, wmem);
        // The smallest tier that holds it: half of it would not.
        assert!(
            rmem / 2 < bdp.max(16 << 20),
            "tier {rmem} too big for BDP {bdp}"
        );
        let core: u64 = sysctl_to(&plan, "net.core.rmem_max")
            .expect("rmem_max")
            .parse()
            .expect("number");
        assert!(
            core >= rmem,
            "rmem_max {core} below the autotuning max {rmem}"
        );
        // Min and default fields keep the host's values.
        let rmem_text = sysctl_to(&plan, "net.ipv4.tcp_rmem").expect("rmem");
        assert!(rmem_text.starts_with("4096 131072 "), "{rmem_text}");
    }
    // REFERENCE 6's example: 1 Gbit/s x 50 ms = 6.25 MB fits the 16 MB tier.
    let small = plan_with(&host, Profile::Throughput, |o| {
        o.bandwidth_bits = Some(1_000_000_000);
        o.rtt_us = Some(50_000);
    });
    assert_eq!(tcp_max(&small, "net.ipv4.tcp_rmem"), 16 << 20);
}

#[test]
fn throughput_leaves_no_buffer_limit_contradicting_another() {
    // A host tuned by hand: tcp_rmem's maximum 1 GiB above a 4 MiB
    // rmem_max, tcp_wmem out of order, receive autotuning off.
    let mut host = host("two-socket-smt-8q");
    for (name, value) in [
        ("net.ipv4.tcp_rmem", "4096 131072 1073741824"),
        ("net.core.rmem_max", "4194304"),
        ("net.ipv4.tcp_wmem", "4096 67108864 33554432"),
        ("net.ipv4.tcp_moderate_rcvbuf", "0"),
    ] {
        host.sysctls.insert(name.to_string(), value.to_string());
    }
    // 1 Gbit/s x 50 ms: the smallest tier, below what is already set.
    let plan = plan_with(&host, Profile::Throughput, |o| {
        o.bandwidth_bits = Some(1_000_000_000);
        o.rtt_us = Some(50_000);
    });
    // The bigger autotuning maximum is kept and the socket cap follows it.
    assert_eq!(sysctl_to(&plan, "net.ipv4.tcp_rmem"), None);
    assert_eq!(sysctl_to(&plan, "net.core.rmem_max"), Some("1073741824"));
    // The triple is put in order, its maximum kept.
    assert_eq!(
        sysctl_to(&plan, "net.ipv4.tcp_wmem"),
        Some("4096 33554432 67108864")
    );
    let wmem_max: u64 = sysctl_to(&plan, "net.core.wmem_max")
        .expect("wmem_max")
        .parse()
        .expect("number");
    assert!(wmem_max >= 67108864, "{wmem_max}");
    assert_eq!(sysctl_to(&plan, "net.ipv4.tcp_moderate_rcvbuf"), Some("1"));
}

#[test]
fn throughput_on_the_smt_host_sets_rings_coalescing_and_fq() {
    let host = host("two-socket-smt-8q");
    let plan = plan_with(&host, Profile::Throughput, |o| o.streams = Some(4));
    let get = |t: &str| {
        plan.changes
            .iter()
            .find(|c| c.target == t)
            .map(|c| c.to.to_string())
    };
    assert_eq!(get("ethtool:eth0:rings.rx").as_deref(), Some("4096"));
    assert_eq!(get("ethtool:eth0:rings.tx").as_deref(), Some("4096"));
    assert_eq!(
        get("ethtool:eth0:coalesce.adaptive-rx").as_deref(),
        Some("on")
    );
    // 80% of 10 Gbit/s over 4 streams (REFERENCE 6: 2gbit per stream).
    assert_eq!(get("qdisc:eth0:root").as_deref(), Some("fq maxrate 2gbit"));
    // bbr is not available on this host: said, not planned.
    assert!(plan
        .skipped
        .iter()
        .any(|s| s.target.to_string().ends_with("tcp_congestion_control")
            && s.reason.contains("not available")));
    let paced = plan_with(&host, Profile::Throughput, |o| {
        o.pace_bits = Some(3_000_000_000)
    });
    assert!(paced
        .changes
        .iter()
        .any(|c| c.target == "qdisc:eth0:root" && c.to == "fq maxrate 3gbit"));
}

#[test]
fn namespace_rules_skip_read_only_root_only_and_disallowed_settings() {
    let mut host = host("vm-2cpu-virtio");
    host.source.netns = Some("blue".to_string());
    host.sysctls.insert(
        "net.ipv4.tcp_allowed_congestion_control".to_string(),
        "reno cubic".to_string(),
    );
    host.sysctls.insert(
        "net.ipv4.tcp_available_congestion_control".to_string(),
        "reno cubic bbr".to_string(),
    );
    let reason = |plan: &Plan, name: &str| {
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        plan.skipped
            .iter()
            .find(|s| s.target == path.as_str())
            .map(|s| s.reason.clone())
            .unwrap_or_else(|| panic!("{name} not skipped: {plan:?}"))
    };
    let pps = plan_with(&host, Profile::Pps, |_| {});
    assert!(reason(&pps, "net.core.rmem_max").contains("read-only inside network namespace 'blue'"));
    assert!(reason(&pps, "net.core.netdev_max_backlog").contains("host-wide"));
    assert!(
        sysctl_to(&pps, "net.ipv4.udp_rmem_min").is_some(),
        "per-namespace: planned"
    );
    assert!(pps
        .changes
        .iter()
        .all(|c| !c.target.to_string().starts_with("/proc/sys/net/core/")));
    let tput = plan_with(&host, Profile::Throughput, |_| {});
    assert!(reason(&tput, "net.ipv4.tcp_congestion_control")
        .contains("not allowed inside network namespace 'blue'"));
    let latency = plan_with(&host, Profile::Latency, |_| {});
    assert!(latency
        .changes
        .iter()
        .all(|c| !c.target.to_string().starts_with("/sys/module/")
            && !c.target.to_string().contains("cpufreq")));
}

#[test]
fn baseline_restores_kernel_defaults() {
    let host = host("two-socket-nic-node1");
    let plan = plan_with(&host, Profile::Baseline, |_| {});
    assert!(changes_ending(&plan, "/rps_cpus")
        .iter()
        .all(|c| c.to == "0"));
    assert_eq!(
        sysctl_to(&plan, "net.core.rps_sock_flow_entries"),
        Some("0")
    );
    assert_eq!(
        sysctl_to(&plan, "net.ipv4.tcp_congestion_control"),
        Some("cubic")
    );
    // TCP options turned off by hand come back on.
    let mut off = host.clone();
    for name in [
        "net.ipv4.tcp_window_scaling",
        "net.ipv4.tcp_sack",
        "net.ipv4.tcp_timestamps",
    ] {
        off.sysctls.insert(name.to_string(), "0".to_string());
        let plan = plan_with(&off, Profile::Baseline, |_| {});
        assert_eq!(sysctl_to(&plan, name), Some("1"), "{name}");
    }
    // Nothing the kernel has no default for: IRQs, drivers, qdiscs.
    assert!(plan
        .changes
        .iter()
        .all(|c| !c.target.to_string().starts_with("/proc/irq/")
            && !c.target.to_string().starts_with("ethtool:")
            && !c.target.to_string().starts_with("qdisc:")));
}

#[test]
fn json_lists_changes_and_skipped_with_exact_values() {
    let root = fixture("vm-2cpu-virtio");
    let root = root.to_str().expect("path");
    let v = run_json(&["plan", "--profile", "pps", "--root", root, "--json"]);
    let changes = v["changes"].as_array().expect("changes");
    assert!(!changes.is_empty());
    for c in changes {
        for field in ["target", "from", "to", "reason"] {
            assert!(c[field].is_string(), "{field} in {c}");
        }
    }
    let targets: Vec<&str> = changes
        .iter()
        .map(|c| c["target"].as_str().expect("t"))
        .collect();
    assert!(
        targets.contains(&"/proc/irq/38/smp_affinity_list"),
        "{targets:?}"
    );
    assert!(targets.contains(&"/sys/class/net/eth0/queues/rx-0/rps_cpus"));
    assert!(targets.contains(&"/proc/sys/net/core/rps_sock_flow_entries"));
    assert!(v["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .all(|s| s["reason"].is_string()));
    // Same input, same bytes.
    let (_, a, _) = run(&["plan", "--profile", "pps", "--root", root, "--json"]);
    let (_, b, _) = run(&["plan", "--profile", "pps", "--root", root, "--json"]);
    assert_eq!(a, b);
}

#[test]
fn text_groups_by_interface_then_kernel_and_sh_has_the_commands() {
    let root = fixture("two-socket-smt-8q");
    let root = root.to_str().expect("path");
    let (code, text, err) = run(&["plan", "--profile", "throughput", "--root", root]);
    assert_eq!(code, 0, "{err}");
    let eth0 = text.find("\neth0\n").expect("eth0 group");
    let kernel = text.find("\nkernel\n").expect("kernel group");
    assert!(eth0 < kernel);
    assert!(text.contains("rings.rx"), "{text}");
    assert!(text.contains("512 -> 4096"), "{text}");
    assert!(text.contains("net.ipv4.tcp_rmem"), "{text}");

    let (code, sh, err) = run(&[
        "plan",
        "--profile",
        "throughput",
        "--root",
        root,
        "--format",
        "sh",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(sh.starts_with("#!/bin/sh\n"));
    for expected in [
        "echo 0 > /proc/irq/120/smp_affinity_list",
        "ethtool -G eth0 rx 4096",
        "ethtool -C eth0 adaptive-rx on",
        "tc qdisc replace dev eth0 root fq maxrate 8gbit",
        "sysctl -w net.ipv4.tcp_rmem='4096 131072 134217728'",
    ] {
        assert!(sh.contains(expected), "missing {expected:?} in:\n{sh}");
    }
    // One command per change.
    let json = run_json(&["plan", "--profile", "throughput", "--root", root, "--json"]);
    let commands = sh
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty() && *l != "set -e")
        .count();
    assert_eq!(commands, json["changes"].as_array().expect("changes").len());
}

#[test]
fn bad_input_is_a_clear_error_and_exit_2() {
    let root = fixture("vm-2cpu-virtio");
    let root = root.to_str().expect("path");
    for (args, expected) in [
        (vec!["--profile", "fast"], "'fast'"),
        (
            vec!["--profile", "pps", "--cpus", "0-300"],
            "CPU 2-300 not online",
        ),
        (vec!["--profile", "pps", "--cpus", ""], "names no CPU"),
        (vec!["--profile", "pps", "--cpus", "1-0"], "'1-0'"),
        (
            vec!["--profile", "pps", "--iface", "eth9"],
            "interface 'eth9' does not exist",
        ),
        (vec!["--profile", "throughput", "--rtt", "100"], "no unit"),
        (
            vec!["--profile", "throughput", "--bandwidth", "1GB/s"],
            "bytes/s as in tc",
        ),
        (
            vec!["--profile", "pps", "--pace", "1gbit"],
            "throughput profile only",
        ),
    ] {
        let mut all = vec!["plan"];
        all.extend(args.iter().copied());
        all.extend(["--root", root]);
        let (code, _, err) = run(&all);
        assert_eq!(code, 2, "{all:?}: {err}");
        assert!(err.contains(expected), "{all:?}: {err}");
    }
}

#[test]
fn read_only_sysctl_in_the_tree_is_left_alone_with_the_reason() {
    let (_dir, tree) = fixture_copy("vm-2cpu-virtio");
    let file = tree.join("proc/sys/net/core/rmem_max");
    let mut perms = std::fs::metadata(&file).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o444);
    std::fs::set_permissions(&file, perms).expect("chmod");
    let v = run_json(&[
        "plan",
        "--profile",
        "pps",
        "--root",
        tree.to_str().expect("path"),
        "--json",
    ]);
    let skipped: Vec<&Value> = v["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .filter(|s| s["target"] == "/proc/sys/net/core/rmem_max")
        .collect();
    assert_eq!(skipped.len(), 1, "{v}");
    assert!(skipped[0]["reason"]
        .as_str()
        .expect("reason")
        .contains("read-only"));
    assert!(v["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .all(|c| c["target"] != "/proc/sys/net/core/rmem_max"));
}

#[test]
fn queues_already_alone_on_planned_cpus_keep_them() {
    let mut host = host("two-socket-nic-node1");
    // Queues 0 and 1 swapped by hand (CPU 9 and 8): still one queue per
    // NIC-local CPU, so the profile accepts it.
    for v in &mut host.interfaces[0].irq_vectors {
        match v.queue {
            Some(0) => v.affinity = Some(vec![9]),
            Some(1) => v.affinity = Some(vec![8]),
            _ => {}
        }
    }
    let plan = plan_with(&host, Profile::Pps, |_| {});
    assert_eq!(
        irq_cpus(&host, &plan),
        [(7, 0)],
        "only queue 7 (on isolated CPU 15) moves"
    );
    // XPS follows where the queue is.
    let xps0 = changes_ending(&plan, "tx-0/xps_cpus");
    assert_eq!(parse_mask(xps0[0].to.as_str()).expect("mask"), [9]);
    // http wants queue i on CPU i: the swap is undone there.
    // (8 network CPUs for 8 queues: the queue count stays.)
    let http = plan_with(&host, Profile::Http, |o| o.cpus = Some((8..16).collect()));
    let moved: BTreeMap<u32, u32> = irq_cpus(&host, &http).into_iter().collect();
    assert_eq!(moved, BTreeMap::from([(0, 8), (1, 9)]));
}

/// Busy polling takes the queue's packets up the stack on the polling
/// application's CPU; RPS would hand them to another CPU's backlog. The
/// latency profile (which turns busy polling on) turns RPS off where pps
/// spreads it.
#[test]
fn latency_turns_rps_off_where_it_busy_polls() {
    let mut host = host("vm-2cpu-virtio");
    let eth0 = host
        .interfaces
        .iter_mut()
        .find(|i| i.name == "eth0")
        .expect("eth0");
    eth0.rx_queues[0].rps_cpus = Some(vec![0, 1]);
    let pps = plan_with(&host, Profile::Pps, |_| {});
    assert!(changes_ending(&pps, "eth0/queues/rx-0/rps_cpus").is_empty());
    let latency = plan_with(&host, Profile::Latency, |_| {});
    assert_eq!(sysctl_to(&latency, "net.core.busy_poll"), Some("50"));
    let rps = changes_ending(&latency, "eth0/queues/rx-0/rps_cpus");
    assert_eq!(rps.len(), 1, "{:?}", latency.changes);
    assert_eq!(rps[0].to, "0");
    assert!(rps[0].reason.contains("busy polling"), "{}", rps[0].reason);
}
