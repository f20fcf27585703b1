//! Host models for rule tests, shaped after real machines:
//! - [`vm_2cpu_single_queue`]: this project's Firecracker VM (virtio_net with
//!   one queue, haltpoll with guest_halt_poll_ns 0, mitigations on, no
//!   irqbalance, pfifo_fast, the sysctls it really has).
//! - [`two_socket_smt_8q`]: a 2-socket, 32-CPU SMT host with an 8-queue
//!   ixgbe NIC on node 0, tuned the way `nettune plan` would leave it.
//! - [`nic_on_node1`]: the same host with the NIC in a node-1 slot while
//!   its IRQs, RPS and XPS still point at node 0.

use std::collections::BTreeMap;

use super::{AppliedState, Context, Finding, Rates, Severity};
use crate::base::driver::{Channels, Coalesce, DriverSettings, FlowHash, Qdisc, QueueStats, Rings};
use crate::base::Probe;
use crate::host::softnet::SoftnetCpu;
use crate::host::*;

pub fn vm_2cpu_single_queue() -> Host {
    let vulnerabilities = [
        ("meltdown", "Not affected"),
        ("retbleed", "Not affected"),
        ("spec_store_bypass", "Vulnerable"),
        (
            "spectre_v1",
            "Mitigation: usercopy/swapgs barriers and __user pointer sanitization",
        ),
        (
            "spectre_v2",
            "Mitigation: Retpolines; STIBP: disabled; RSB filling; PBRSB-eIBRS: Not affected; BHI: Not affected",
        ),
    ];
    let eth0 = Interface {
        name: "eth0".into(),
        ifindex: Some(2),
        driver: Some("virtio_net".into()),
        physical: true,
        devtype: None,
        mtu: Some(1400),
        speed_mbps: None,
        operstate: Some("up".into()),
        pci_address: Some("0000:00:03.0".into()),
        numa_node: None,
        local_cpus: None,
        rx_queues: vec![RxQueue {
            index: 0,
            irq: Some(38),
            affinity: Some(vec![0, 1]),
            effective: Some(vec![1]),
            affinity_hint: None,
            rps_cpus: Some(vec![]),
            rps_flow_cnt: Some(0),
        }],
        tx_queues: vec![TxQueue {
            index: 0,
            irq: Some(39),
            affinity: Some(vec![0, 1]),
            effective: Some(vec![0]),
            affinity_hint: None,
            xps_cpus: None,
            xps_rxqs: Some(vec![]),
            tx_maxrate: None,
        }],
        irq_vectors: vec![
            vector(
                37,
                "virtio2-config",
                VectorRole::Other,
                None,
                &[0, 1],
                0,
                vec![0, 0],
            ),
            vector(
                38,
                "virtio2-input.0",
                VectorRole::Rx,
                Some(0),
                &[0, 1],
                1,
                vec![0, 2839],
            ),
            vector(
                39,
                "virtio2-output.0",
                VectorRole::Tx,
                Some(0),
                &[0, 1],
                0,
                vec![2114, 0],
            ),
        ],
        xdp: Probe::UNKNOWN,
        root_qdisc: Probe::Value(Qdisc {
            kind: "pfifo_fast".into(),
            handle: "0:".into(),
        }),
        driver_settings: DriverSettings {
            channels: Probe::Value(Channels {
                rx: 0,
                tx: 0,
                other: 0,
                combined: 1,
                max_rx: 0,
                max_tx: 0,
                max_other: 0,
                max_combined: 1,
            }),
            rings: Probe::NOT_SUPPORTED,
            coalesce: Probe::NOT_SUPPORTED,
            rss_indirection: Probe::NOT_SUPPORTED,
            rx_flow_hash: [
                ("udp4", Probe::NOT_SUPPORTED),
                ("tcp4", Probe::NOT_SUPPORTED),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            ..DriverSettings::default()
        },
        netdev: Default::default(),
        gro_flush_timeout: Some(0),
        napi_defer_hard_irqs: Some(0),
        threaded: Some("0".into()),
        statistics: zero_loss_statistics(),
    };
    Host {
        schema_version: SCHEMA_VERSION,
        source: Source {
            root: "/".into(),
            netns: None,
        },
        kernel: Some("6.18.0".into()),
        cpus: (0..2)
            .map(|id| Cpu {
                id,
                node: Some(0),
                siblings: vec![id],
                package: Some(0),
                core: Some(id),
            })
            .collect(),
        online_cpus: vec![0, 1],
        numa_nodes: vec![NumaNode {
            id: 0,
            cpus: vec![0, 1],
        }],
        isolated_cpus: vec![],
        nohz_full_cpus: vec![],
        cpuidle: CpuIdle {
            driver: Some("haltpoll".into()),
            governor: Some("haltpoll".into()),
            guest_halt_poll_ns: Some(0),
            states: vec![idle("POLL", 0, false), idle("haltpoll idle", 1, false)],
        },
        cpufreq: CpuFreq::default(),
        mitigations: Mitigations {
            boot_param: Some("auto,no_guest_host,no_guest_guest".into()),
            vulnerabilities: vulnerabilities
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        },
        interfaces: vec![eth0],
        sysctls: sysctls(&[
            ("net.core.rmem_max", "4194304"),
            ("net.core.wmem_max", "4194304"),
            ("net.core.rmem_default", "212992"),
            ("net.ipv4.tcp_rmem", "4096 131072 33554432"),
            ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
            ("net.ipv4.tcp_mem", "287901 383869 575802"),
            ("net.ipv4.tcp_moderate_rcvbuf", "1"),
            ("net.ipv4.tcp_window_scaling", "1"),
            ("net.ipv4.tcp_sack", "1"),
            ("net.ipv4.tcp_timestamps", "1"),
            ("net.ipv4.tcp_mtu_probing", "0"),
            ("net.core.default_qdisc", "pfifo_fast"),
            ("net.core.netdev_max_backlog", "1000"),
            ("net.core.netdev_budget", "300"),
            ("net.core.netdev_budget_usecs", "8000"),
            ("net.core.rps_sock_flow_entries", "0"),
            ("net.core.somaxconn", "4096"),
            ("net.ipv4.tcp_max_syn_backlog", "2048"),
            ("net.ipv4.udp_rmem_min", "4096"),
        ]),
        irqbalance: Irqbalance::default(),
        packet_sockets: vec![],
        af_xdp_sockets: None,
        conntrack: Conntrack::default(),
        counters: Counters {
            softirqs: vec![net_rx(0, 2041), net_rx(1, 2659)],
            cpu_time: vec![cpu_time(0, 31196, 40), cpu_time(1, 33532, 55)],
            softnet: vec![softnet(0, 0x0a), softnet(1, 0x2de)],
            udp: counters(&[
                ("InDatagrams", 1523),
                ("InErrors", 0),
                ("RcvbufErrors", 0),
                ("SndbufErrors", 0),
            ]),
            tcp: counters(&[("ActiveOpens", 200), ("RetransSegs", 3)]),
            tcp_ext: counters(&[("ListenOverflows", 0), ("ListenDrops", 0)]),
            ..Counters::default()
        },
        sources: Vec::new(),
        host_sysctls: Default::default(),
    }
}

/// Node 0 holds CPUs 0-7 and their SMT siblings 16-23; node 1 holds 8-15
/// and 24-31 (the usual Intel numbering).
fn node_of(cpu: u32) -> u32 {
    if cpu % 16 < 8 {
        0
    } else {
        1
    }
}

pub const NODE0: [u32; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];
pub const NODE1: [u32; 16] = [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31];

pub fn two_socket_smt_8q() -> Host {
    let mut host = vm_2cpu_single_queue();
    host.cpus = (0..32)
        .map(|id| Cpu {
            id,
            node: Some(node_of(id)),
            siblings: vec![id % 16, id % 16 + 16],
            package: Some(node_of(id)),
            core: Some(id % 8),
        })
        .collect();
    host.online_cpus = (0..32).collect();
    host.numa_nodes = vec![
        NumaNode {
            id: 0,
            cpus: sorted(&NODE0),
        },
        NumaNode {
            id: 1,
            cpus: sorted(&NODE1),
        },
    ];
    host.cpuidle = CpuIdle {
        driver: Some("intel_idle".into()),
        governor: Some("menu".into()),
        guest_halt_poll_ns: None,
        states: vec![
            idle("POLL", 0, false),
            idle("C1", 2, false),
            idle("C1E", 10, false),
            idle("C6", 133, true),
        ],
    };
    host.cpufreq = CpuFreq {
        driver: Some("intel_pstate".into()),
        governors: [("performance".to_string(), (0..32).collect())].into(),
    };
    host.mitigations = Mitigations {
        boot_param: None,
        vulnerabilities: [
            ("meltdown", "Not affected"),
            (
                "spectre_v2",
                "Mitigation: Enhanced / Automatic IBRS; IBPB: conditional; RSB filling",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    };
    host.interfaces = vec![ixgbe_8q()];
    for (name, value) in [
        ("net.core.rmem_max", "67108864"),
        ("net.core.wmem_max", "67108864"),
        ("net.ipv4.tcp_rmem", "4096 131072 33554432"),
        ("net.ipv4.tcp_wmem", "4096 16384 33554432"),
        ("net.ipv4.tcp_mtu_probing", "1"),
        ("net.core.default_qdisc", "fq"),
        ("net.core.rps_sock_flow_entries", "32768"),
        ("net.core.netdev_budget_usecs", "2000"),
    ] {
        set_sysctl(&mut host, name, value);
    }
    // Receive work spread by the 8 queues and RPS over node 0.
    let net_rx_on = |cpu: u32| match cpu {
        0..=7 => 900_000,
        16..=23 => 450_000,
        _ => 1_000,
    };
    host.counters.softirqs = (0..32).map(|c| net_rx(c, net_rx_on(c))).collect();
    host.counters.cpu_time = (0..32).map(|c| cpu_time(c, 1_000_000, 20_000)).collect();
    host.counters.softnet = (0..32).map(|c| softnet(c, net_rx_on(c) * 20)).collect();
    host
}

/// The 8-queue ixgbe of [`two_socket_smt_8q`]: queue i's IRQ (74 + i) on
/// CPU i, RPS over node 0, RFS at 32768 / 8, XPS tx-i on CPU i, fq under mq,
/// jumbo frames, rings at maximum.
fn ixgbe_8q() -> Interface {
    let node0 = sorted(&NODE0);
    let hash = FlowHash {
        fields: ["ip_src", "ip_dst", "l4_src_port", "l4_dst_port"]
            .map(String::from)
            .to_vec(),
    };
    let mut vectors: Vec<IrqVector> = (0..8)
        .map(|q| {
            let mut per_cpu = vec![0; 32];
            per_cpu[q as usize] = 5_000_000;
            vector(
                74 + q,
                &format!("eth0-TxRx-{q}"),
                VectorRole::Combined,
                Some(q),
                &[q],
                q,
                per_cpu,
            )
        })
        .collect();
    vectors.push(vector(
        82,
        "eth0",
        VectorRole::Other,
        None,
        &[0],
        0,
        vec![3; 32],
    ));
    Interface {
        name: "eth0".into(),
        ifindex: Some(2),
        driver: Some("ixgbe".into()),
        physical: true,
        devtype: None,
        mtu: Some(9000),
        speed_mbps: Some(10_000),
        operstate: Some("up".into()),
        pci_address: Some("0000:3b:00.0".into()),
        numa_node: Some(0),
        local_cpus: Some(node0.clone()),
        rx_queues: (0..8)
            .map(|q| RxQueue {
                index: q,
                irq: Some(74 + q),
                affinity: Some(vec![q]),
                effective: Some(vec![q]),
                affinity_hint: Some(vec![q]),
                rps_cpus: Some(node0.clone()),
                rps_flow_cnt: Some(4096),
            })
            .collect(),
        tx_queues: (0..8)
            .map(|q| TxQueue {
                index: q,
                irq: Some(74 + q),
                affinity: Some(vec![q]),
                effective: Some(vec![q]),
                affinity_hint: Some(vec![q]),
                xps_cpus: Some(vec![q]),
                xps_rxqs: Some(vec![]),
                tx_maxrate: Some(0),
            })
            .collect(),
        irq_vectors: vectors,
        xdp: Probe::UNKNOWN,
        root_qdisc: Probe::Value(Qdisc {
            kind: "mq".into(),
            handle: "0:".into(),
        }),
        driver_settings: DriverSettings {
            channels: Probe::Value(Channels {
                rx: 0,
                tx: 0,
                other: 1,
                combined: 8,
                max_rx: 0,
                max_tx: 0,
                max_other: 1,
                max_combined: 63,
            }),
            rings: Probe::Value(Rings {
                rx: 4096,
                rx_max: 4096,
                rx_mini: 0,
                rx_mini_max: 0,
                rx_jumbo: 0,
                rx_jumbo_max: 0,
                tx: 4096,
                tx_max: 4096,
            }),
            coalesce: Probe::Value(Coalesce {
                rx_usecs: 1,
                rx_frames: 0,
                tx_usecs: 0,
                tx_frames: 0,
                adaptive_rx: true,
                adaptive_tx: false,
            }),
            rss_indirection: Probe::Value((0..128).map(|i| i % 8).collect()),
            rx_flow_hash: ["tcp4", "udp4", "tcp6", "udp6"]
                .into_iter()
                .map(|k| (k.to_string(), Probe::Value(hash.clone())))
                .collect(),
            queue_stats: Probe::Value(
                (0..8)
                    .map(|q| QueueStats {
                        direction: "rx".into(),
                        index: q,
                        counters: [
                            ("packets".to_string(), 90_000_000),
                            ("bytes".to_string(), 9 << 30),
                        ]
                        .into(),
                    })
                    .collect(),
            ),
            ..DriverSettings::default()
        },
        netdev: Default::default(),
        gro_flush_timeout: Some(0),
        napi_defer_hard_irqs: Some(0),
        threaded: Some("0".into()),
        statistics: zero_loss_statistics(),
    }
}

pub fn nic_on_node1() -> Host {
    let mut host = two_socket_smt_8q();
    let eth0 = iface(&mut host, "eth0");
    eth0.numa_node = Some(1);
    eth0.local_cpus = Some(sorted(&NODE1));
    eth0.pci_address = Some("0000:af:00.0".into());
    host
}

pub fn iface<'a>(host: &'a mut Host, name: &str) -> &'a mut Interface {
    host.interfaces
        .iter_mut()
        .find(|i| i.name == name)
        .expect("interface in fixture")
}

pub fn set_sysctl(host: &mut Host, name: &str, value: &str) {
    host.sysctls.insert(name.to_string(), value.to_string());
}

/// Pin queue q's RX IRQ to `cpus[q]`, configured and effective.
pub fn pin_rx_irqs(iface: &mut Interface, cpus: &[u32]) {
    for v in &mut iface.irq_vectors {
        if let (Some(q), VectorRole::Rx | VectorRole::Combined) = (v.queue, v.role) {
            let cpu = cpus[q as usize];
            v.affinity = Some(vec![cpu]);
            v.effective = Some(vec![cpu]);
        }
    }
    for q in &mut iface.rx_queues {
        q.affinity = Some(vec![cpus[q.index as usize]]);
        q.effective = Some(vec![cpus[q.index as usize]]);
    }
}

/// Counters sampled `seconds` apart: `after` is `host.counters` changed by `f`.
pub fn rates(host: &Host, seconds: f64, f: impl FnOnce(&mut Counters)) -> Rates {
    let mut after = host.counters.clone();
    f(&mut after);
    Rates {
        seconds,
        before: host.counters.clone(),
        after,
    }
}

pub fn diagnose(host: &Host) -> Vec<Finding> {
    super::diagnose(&Context::new(host))
}

pub fn diagnose_with(host: &Host, rates: &Rates) -> Vec<Finding> {
    super::diagnose(&Context {
        rates: Some(rates),
        ..Context::new(host)
    })
}

/// The one finding with `id`; panics (test failure) when there is none.
#[track_caller]
pub fn the(findings: &[Finding], id: &str) -> Finding {
    let hits: Vec<&Finding> = findings.iter().filter(|f| f.id == id).collect();
    assert_eq!(hits.len(), 1, "expected one {id}, got {findings:#?}");
    hits[0].clone()
}

#[track_caller]
pub fn none(findings: &[Finding], id: &str) {
    assert!(
        findings.iter().all(|f| f.id != id),
        "{id} fired: {findings:#?}"
    );
}

/// Assert id, severity and that the evidence quotes every number given.
#[track_caller]
pub fn assert_fires(
    findings: &[Finding],
    id: &str,
    severity: Severity,
    numbers: &[&str],
) -> Finding {
    let f = the(findings, id);
    assert_eq!(f.severity, severity, "{f:#?}");
    for n in numbers {
        assert!(
            f.evidence.contains(n),
            "{id} evidence lacks '{n}': {}",
            f.evidence
        );
    }
    assert!(!f.why.is_empty() && !f.fix.is_empty() && !f.title.is_empty());
    f
}

pub fn net_rx(cpu: u32, n: u64) -> CpuSoftirqs {
    CpuSoftirqs {
        cpu,
        net_rx: n,
        net_tx: n / 50,
    }
}

pub fn cpu_time(cpu: u32, idle: u64, softirq: u64) -> CpuTime {
    CpuTime {
        cpu,
        user: idle / 10,
        nice: 0,
        system: idle / 20,
        idle,
        iowait: 0,
        irq: 0,
        softirq,
        steal: 0,
    }
}

pub fn softnet(cpu: u32, processed: u64) -> SoftnetCpu {
    SoftnetCpu {
        cpu,
        processed,
        dropped: 0,
        time_squeeze: 0,
        received_rps: Some(0),
        flow_limit_count: Some(0),
        backlog_len: Some(0),
    }
}

pub fn counters(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn sysctls(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn zero_loss_statistics() -> BTreeMap<String, u64> {
    [
        "rx_dropped",
        "rx_errors",
        "rx_fifo_errors",
        "rx_missed_errors",
        "rx_over_errors",
        "tx_dropped",
        "tx_errors",
    ]
    .into_iter()
    .map(|k| (k.to_string(), 0))
    .collect()
}

fn idle(name: &str, latency_us: u64, disabled: bool) -> IdleState {
    IdleState {
        name: name.into(),
        latency_us: Some(latency_us),
        disabled,
    }
}

fn vector(
    irq: u32,
    name: &str,
    role: VectorRole,
    queue: Option<u32>,
    affinity: &[u32],
    effective: u32,
    per_cpu: Vec<u64>,
) -> IrqVector {
    IrqVector {
        irq,
        name: name.into(),
        role,
        queue,
        affinity: Some(affinity.to_vec()),
        effective: Some(vec![effective]),
        affinity_hint: None,
        per_cpu,
    }
}

fn sorted(cpus: &[u32]) -> Vec<u32> {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v
}

/// The findings of a host with every problem doctor knows (each rule in
/// `RULE_IDS` fires): the 2-socket host with a second NIC on node 1, every
/// queue IRQ of eth0 on CPU0, no RPS/RFS, an address-only UDP hash, small
/// rings, unused queues, NIC drops, contradicting buffers, no fq, no MTU
/// probing, SACK off, irqbalance, powersave, a packet tap, a full conntrack
/// table, a softirq hotspot, softnet drops and squeezes, UDP and listen
/// errors, an applied state that drifted, busy polling without IRQ
/// deferral, an RSS table that leaves a queue out, a generic XDP program on
/// a native driver, and an XDP program left by a benchmark that is gone.
pub fn every_finding() -> Vec<Finding> {
    use crate::base::driver::FlowHash;
    use crate::base::Probe;
    use crate::host::PacketSocket;

    let mut host = two_socket_smt_8q();
    let mut eth1 = host.interfaces[0].clone();
    eth1.name = "eth1".into();
    eth1.ifindex = Some(3);
    eth1.numa_node = Some(1);
    pin_rx_irqs(&mut eth1, &[8, 9, 10, 11, 8, 9, 10, 11]);
    // eth1's RPS steers every queue to CPU 8: rps.one-cpu.
    for q in &mut eth1.rx_queues {
        q.rps_cpus = Some(vec![8]);
    }
    // eth1's NAPIs defer IRQs with a long timer while nothing busy polls:
    // napi.deferral-delays.
    eth1.netdev = netdev_without_deferral(eth1.rx_queues.len() as u32);
    if let Probe::Value(napis) = &mut eth1.netdev.napis {
        for n in napis {
            n.defer_hard_irqs = Some(100);
            n.gro_flush_timeout_ns = Some(200_000);
        }
    }
    host.interfaces.push(eth1);

    let eth0 = iface(&mut host, "eth0");
    pin_rx_irqs(eth0, &[0; 8]);
    for q in &mut eth0.rx_queues {
        q.rps_cpus = Some(vec![]);
        q.rps_flow_cnt = Some(0);
    }
    let settings = &mut eth0.driver_settings;
    settings.rx_flow_hash.insert(
        "udp4".into(),
        Probe::Value(FlowHash {
            fields: vec!["ip_src".into(), "ip_dst".into()],
        }),
    );
    if let Probe::Value(r) = &mut settings.rings {
        r.rx = 512;
    }
    if let Probe::Value(c) = &mut settings.channels {
        c.combined = 4;
    }
    eth0.statistics.insert("rx_missed_errors".into(), 12_345);
    eth0.netdev = netdev_without_deferral(eth0.rx_queues.len() as u32);
    // RSS leaves queue 3 of the 4 out; a generic XDP program on a native
    // driver.
    eth0.driver_settings.rss_indirection = Probe::Value((0..128).map(|i| i % 3).collect());
    eth0.xdp = Probe::Value(crate::base::driver::xdp::XdpState {
        programs: vec![crate::base::driver::xdp::XdpProgram {
            mode: crate::base::driver::xdp::XdpMode::Generic,
            id: 9,
            name: None,
        }],
        features: Probe::Value(crate::base::driver::xdp::XdpFeatures {
            actions: vec!["basic".into()],
            zc_max_segs: 0,
        }),
    });

    for (name, value) in [
        ("net.core.busy_poll", "0"),
        ("net.core.busy_read", "0"),
        ("net.core.rmem_max", "4194304"),
        ("net.core.default_qdisc", "pfifo_fast"),
        ("net.ipv4.tcp_mtu_probing", "0"),
        ("net.ipv4.tcp_sack", "0"),
    ] {
        set_sysctl(&mut host, name, value);
    }
    host.irqbalance.running = true;
    host.cpufreq.governors = [("powersave".to_string(), (0..32).collect())].into();
    host.packet_sockets = vec![PacketSocket {
        inode: 31337,
        protocol: "0003".into(),
        ifindex: 0,
        uid: 0,
    }];
    host.conntrack.loaded = true;
    host.conntrack.count = Some(65_000);
    host.conntrack.max = Some(65_536);

    let r = rates(&host, 2.0, |after| {
        for s in &mut after.softirqs {
            s.net_rx += if s.cpu == 0 { 97_000 } else { 97 };
        }
        after.softnet[0].dropped += 500;
        after.softnet[0].time_squeeze += 300;
        *after.udp.entry("RcvbufErrors".into()).or_default() += 100;
        *after.tcp_ext.entry("ListenOverflows".into()).or_default() += 10;
    });
    let applied = [
        AppliedState {
            id: 1,
            what: "profile pps".to_string(),
            profile: Some("pps".to_string()),
            drift: vec![crate::plan::Drift {
                target: crate::plan::Target::IrqAffinity(24),
                group: "eth0".to_string(),
                applied: crate::plan::Value::cpu_list(&[1]),
                now: "0-1".to_string(),
            }],
            rollback: "nettune rollback 1".to_string(),
            apply_again: "nettune apply --profile pps".to_string(),
            steered: None,
            xdp: None,
        },
        AppliedState {
            id: 2,
            what: "XDP program".to_string(),
            profile: None,
            drift: Vec::new(),
            rollback: "nettune rollback 2".to_string(),
            apply_again: String::new(),
            steered: None,
            xdp: Some(crate::doctor::AppliedXdp {
                record: crate::base::records::XdpRecord {
                    iface: "eth0".into(),
                    queue: 0,
                    id: 9,
                    name: "nettune_xsk".into(),
                    mode: crate::base::driver::xdp::XdpMode::Native,
                    pid: 1,
                    pid_start: None,
                },
                owner_running: false,
                attached: true,
            }),
        },
        // A latency state applied: eth0's queues without deferral are
        // napi.no-irq-deferral (busy polling is off on this host).
        AppliedState {
            id: 3,
            what: "profile latency".to_string(),
            profile: Some("latency".to_string()),
            drift: Vec::new(),
            rollback: "nettune rollback 3".to_string(),
            apply_again: "nettune apply --profile latency".to_string(),
            steered: None,
            xdp: None,
        },
    ];
    super::diagnose(&Context {
        host: &host,
        rates: Some(&r),
        bandwidth_bps: Some(10_000_000_000),
        rtt_secs: Some(0.05),
        all_interfaces: false,
        applied: &applied,
        traced: Some(&crate::doctor::TracedDrops {
            seconds: 1.0,
            unavailable: None,
            reasons: vec![crate::base::drop_reason::ReasonRate {
                reason: "CPU_BACKLOG".to_string(),
                layer: crate::base::drop_layer::Layer::Softnet,
                count: 500,
                per_sec: Some(500.0),
                locations: Vec::new(),
                protocols: Vec::new(),
                about: crate::base::drop_reason::About {
                    what: Some("a CPU's input backlog was full".to_string()),
                    fix: Some(
                        "raise net.core.netdev_max_backlog, or spread the load with RPS"
                            .to_string(),
                    ),
                    source: Some("https://docs.kernel.org/admin-guide/sysctl/net.html".to_string()),
                    limit: true,
                },
            }],
            udp_sockets: Vec::new(),
        }),
    })
}

/// What netdev netlink says about a NIC whose one RX queue is served by
/// NAPI 257 (IRQ 38) with these deferral values.
pub fn one_napi(defer: u32, timer_ns: u64, napi_set: bool) -> crate::base::driver::NetdevState {
    use crate::base::driver::netdev::{Napi, NetdevQueue};
    crate::base::driver::NetdevState {
        queues: Probe::Value(vec![NetdevQueue {
            direction: "rx".to_string(),
            index: 0,
            napi_id: Some(257),
        }]),
        napis: Probe::Value(vec![Napi {
            id: 257,
            irq: Some(38),
            thread_pid: None,
            defer_hard_irqs: Some(defer),
            gro_flush_timeout_ns: Some(timer_ns),
            irq_suspend_timeout_ns: Some(0),
            threaded: Some(false),
        }]),
        qstats: Probe::NOT_SUPPORTED,
        napi_set: Probe::Value(napi_set),
    }
}

/// What netdev netlink says about a NIC with `queues` RX queues, each
/// linked to its own NAPI (ids from 8193) with IRQ deferral off, on a
/// kernel with napi-set.
pub fn netdev_without_deferral(queues: u32) -> crate::base::driver::NetdevState {
    use crate::base::driver::netdev::{Napi, NetdevQueue};
    crate::base::driver::NetdevState {
        queues: Probe::Value(
            (0..queues)
                .map(|q| NetdevQueue {
                    direction: "rx".to_string(),
                    index: q,
                    napi_id: Some(8193 + q),
                })
                .collect(),
        ),
        napis: Probe::Value(
            (0..queues)
                .map(|q| Napi {
                    id: 8193 + q,
                    irq: Some(74 + q),
                    thread_pid: None,
                    defer_hard_irqs: Some(0),
                    gro_flush_timeout_ns: Some(0),
                    irq_suspend_timeout_ns: Some(0),
                    threaded: Some(false),
                })
                .collect(),
        ),
        qstats: Probe::NOT_SUPPORTED,
        napi_set: Probe::Value(true),
    }
}
