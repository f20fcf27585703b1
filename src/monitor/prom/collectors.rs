//! What `/metrics` shows: one collector per kernel source, each writing
//! its metric families from one [`Sample`] (raw counters as `_total`
//! counters, settings as gauges), in the manner of node_exporter's
//! `collector/*.go`.
//!
//! Names follow node_exporter where a series is the same thing (same
//! name, type, labels and value: `node_cpu_seconds_total{cpu,mode}`,
//! `node_softnet_dropped_total{cpu}`, `node_network_receive_packets_total
//! {device}`, `node_netstat_Udp_RcvbufErrors`, ...), so dashboards and
//! alerts written for node_exporter work on either; the rest is
//! `nettune_`. docs/monitor.md lists every family.
//!
//! A collector whose source could not be read (the sampler lists it in
//! [`Sample::missing`]) writes what it has and reports
//! `nettune_scrape_collector_success{collector="x"} 0`; one that panics
//! (a bug) loses only its own families. Neither fails the scrape.
//!
//! Cardinality is bounded: everything per CPU is a fixed number of series
//! per CPU, per queue a fixed number per queue, and the queue x CPU
//! interrupt matrix (the one part that could grow as IRQs x CPUs) gets the
//! series left under [`MAX_SERIES`] once the rest is written, CPUs that
//! took the most interrupts first, rank by rank across IRQs, and never
//! fewer than one per IRQ.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::base::cpuset::format_list;
use crate::host::model::CpuTime;
use crate::host::{IssueKind, VectorRole};
use crate::monitor::findings::LiveFinding;
use crate::monitor::rates::{BYTE_NAMES, DROP_NAMES, PACKET_NAMES};
use crate::monitor::sample::{InterfaceCounters, Sample};

use super::exposition::{Exposition, Kind, Value};

/// The most series one exposition holds on a host of up to 256 CPUs and
/// 128 queues per NIC (the matrix yields to this; see the module doc).
pub const MAX_SERIES: usize = 5_000;

/// What a collector reads: the sample, and the findings of the interval
/// that ended at it (none before the second sample).
pub struct Input<'a> {
    pub sample: &'a Sample,
    /// /proc/stat's CPU times as exported: never going backwards (see
    /// `sampling::CpuTimes`), as node_exporter keeps them.
    pub cpu_time: &'a [CpuTime],
    /// The findings of the last interval and its length in seconds.
    pub findings: Option<(&'a [LiveFinding], f64)>,
}

/// One collector: a name for `nettune_scrape_collector_success`, the
/// sample sections (`SourceIssue::section`) it reads, and its writer.
struct Collector {
    name: &'static str,
    /// Sections it reads; a trailing `*` matches a prefix
    /// (`interface *` is every `interface eth0`).
    sections: &'static [&'static str],
    /// A source file that does not exist is no failure (/proc/net/snmp6
    /// on a host without IPv6, as node_exporter treats it).
    missing_is_empty: bool,
    write: fn(&Input, &mut Exposition),
}

/// Every collector, in the order their families appear. The interrupt
/// matrix comes after them (it takes the series left).
const COLLECTORS: &[Collector] = &[
    Collector {
        name: "stat",
        sections: &["counters.cpu_time"],
        missing_is_empty: false,
        write: stat,
    },
    Collector {
        name: "softirqs",
        sections: &["counters.softirqs"],
        missing_is_empty: false,
        write: softirqs,
    },
    Collector {
        name: "softnet",
        sections: &["counters.softnet"],
        missing_is_empty: false,
        write: softnet,
    },
    Collector {
        name: "snmp",
        sections: &["counters.snmp"],
        missing_is_empty: false,
        write: snmp,
    },
    Collector {
        name: "snmp6",
        sections: &["counters.snmp6"],
        missing_is_empty: true,
        write: snmp6,
    },
    Collector {
        name: "netstat",
        sections: &["counters.netstat"],
        missing_is_empty: false,
        write: netstat,
    },
    Collector {
        name: "netdev",
        sections: &["interfaces", "interface *"],
        missing_is_empty: false,
        write: netdev,
    },
    Collector {
        name: "queues",
        sections: &["interfaces"],
        missing_is_empty: false,
        write: queues,
    },
    Collector {
        name: "settings",
        sections: &["settings"],
        missing_is_empty: false,
        write: settings,
    },
    Collector {
        name: "ladder",
        sections: &[
            "interfaces",
            "interface *",
            "counters.softnet",
            "counters.snmp",
            "counters.snmp6",
            "counters.netstat",
        ],
        missing_is_empty: false,
        write: ladder,
    },
    Collector {
        name: "findings",
        sections: &[],
        missing_is_empty: false,
        write: findings,
    },
    Collector {
        name: "interrupts",
        sections: &["interrupts"],
        missing_is_empty: false,
        write: interrupt_totals,
    },
];

/// Series the exposition's tail takes: one success line per collector,
/// the sample's timestamp and interval, build info.
const TAIL_SERIES: usize = COLLECTORS.len() + 3;

/// The exposition of one sample.
pub fn render(input: &Input) -> Exposition {
    let mut out = Exposition::new();
    let mut success = Vec::with_capacity(COLLECTORS.len());
    for collector in COLLECTORS {
        let mut own = Exposition::new();
        let wrote = catch_unwind(AssertUnwindSafe(|| (collector.write)(input, &mut own)));
        if wrote.is_ok() {
            out.append(own);
        }
        success.push((
            collector.name,
            wrote.is_ok() && read_whole(collector, input),
        ));
    }
    // The matrix last: it takes what is left of the bound.
    let budget = MAX_SERIES.saturating_sub(out.series() + TAIL_SERIES);
    let mut own = Exposition::new();
    if catch_unwind(AssertUnwindSafe(|| irq_matrix(input, budget, &mut own))).is_ok() {
        out.append(own);
    } else if let Some(s) = success.iter_mut().find(|(name, _)| *name == "interrupts") {
        s.1 = false;
    }
    tail(input, &success, &mut out);
    out
}

/// Whether the collector's sources were all read in full.
fn read_whole(collector: &Collector, input: &Input) -> bool {
    !input.sample.missing.iter().any(|issue| {
        let ours = collector
            .sections
            .iter()
            .any(|s| match s.strip_suffix('*') {
                Some(prefix) => issue.section.starts_with(prefix),
                None => issue.section == *s,
            });
        ours && !(collector.missing_is_empty && issue.kind == IssueKind::Missing)
    })
}

fn tail(input: &Input, success: &[(&str, bool)], out: &mut Exposition) {
    let mut f = out.family(
        "nettune_scrape_collector_success",
        "nettune: whether a collector's sources were read in full (0: see the exporter's \
         stderr or `nettune monitor --once` for the file and error).",
        Kind::Gauge,
    );
    for (name, ok) in success {
        f.sample(&[("collector", name)], *ok);
    }
    out.family(
        "nettune_sample_timestamp_seconds",
        "When the counters served were read, seconds since the Unix epoch (a replay: when they \
         were recorded).",
        Kind::Gauge,
    )
    .sample(&[], Value::Float(input.sample.unix_ms as f64 / 1000.0));
    if let Some((_, secs)) = input.findings {
        out.family(
            "nettune_findings_interval_seconds",
            "The length of the interval nettune_finding judged: between the last two samples.",
            Kind::Gauge,
        )
        .sample(&[], Value::Float(secs));
    }
    out.family(
        "nettune_build_info",
        "The nettune version serving these metrics (always 1).",
        Kind::Gauge,
    )
    .sample(&[("version", env!("CARGO_PKG_VERSION"))], 1u64);
}

/// /proc/stat: CPU time per mode, context switches, tasks.
fn stat(input: &Input, out: &mut Exposition) {
    let mut f = out.family(
        "node_cpu_seconds_total",
        "Seconds the CPUs spent in each mode.",
        Kind::Counter,
    );
    for t in input.cpu_time {
        let cpu = t.cpu.to_string();
        for (mode, ticks) in [
            ("idle", t.idle),
            ("iowait", t.iowait),
            ("irq", t.irq),
            ("nice", t.nice),
            ("softirq", t.softirq),
            ("steal", t.steal),
            ("system", t.system),
            ("user", t.user),
        ] {
            f.sample(&[("cpu", &cpu), ("mode", mode)], Value::Ticks(ticks));
        }
    }
    let system = &input.sample.counters.system;
    if let Some(n) = system.context_switches {
        out.family(
            "node_context_switches_total",
            "Total number of context switches.",
            Kind::Counter,
        )
        .sample(&[], n);
    }
    if let Some(n) = system.procs_running {
        out.family(
            "node_procs_running",
            "Number of processes in runnable state.",
            Kind::Gauge,
        )
        .sample(&[], n);
    }
    if let Some(n) = system.procs_blocked {
        out.family(
            "node_procs_blocked",
            "Number of processes blocked waiting for I/O to complete.",
            Kind::Gauge,
        )
        .sample(&[], n);
    }
}

/// /proc/softirqs: NET_RX and NET_TX per CPU, as node_exporter's
/// softirqs collector names them.
fn softirqs(input: &Input, out: &mut Exposition) {
    let mut f = out.family(
        "node_softirqs_functions_total",
        "Softirq counts per CPU.",
        Kind::Counter,
    );
    for s in &input.sample.counters.softirqs {
        let cpu = s.cpu.to_string();
        f.sample(&[("cpu", &cpu), ("type", "NET_RX")], s.net_rx);
        f.sample(&[("cpu", &cpu), ("type", "NET_TX")], s.net_tx);
    }
}

/// /proc/net/softnet_stat, per CPU.
fn softnet(input: &Input, out: &mut Exposition) {
    let softnet = &input.sample.counters.softnet;
    type Pick = fn(&crate::host::softnet::SoftnetCpu) -> Option<u64>;
    let families: [(&str, &str, Pick); 4] = [
        (
            "node_softnet_processed_total",
            "Number of processed packets",
            |s| Some(s.processed),
        ),
        (
            "node_softnet_dropped_total",
            "Number of dropped packets",
            |s| Some(s.dropped),
        ),
        (
            "node_softnet_times_squeezed_total",
            "Number of times processing packets ran out of quota",
            |s| Some(s.time_squeeze),
        ),
        (
            "node_softnet_received_rps_total",
            "Number of times cpu woken up received_rps",
            |s| s.received_rps,
        ),
    ];
    for (name, help, pick) in families {
        let mut f = out.family(name, help, Kind::Counter);
        for s in softnet {
            if let Some(v) = pick(s) {
                f.sample(&[("cpu", &s.cpu.to_string())], v);
            }
        }
    }
}

/// The SNMP counters node_exporter's netstat collector exports by default
/// (its `--collector.netstat.fields`), plus those of the drop ladder.
fn exported(proto: &str, name: &str) -> bool {
    let node = name.ends_with("InErrors")
        || name.ends_with("InErrs")
        || match proto {
            "Ip" => name == "Forwarding",
            "Ip6" => matches!(name, "InOctets" | "OutOctets"),
            "TcpExt" => {
                name.starts_with("Listen")
                    || name.starts_with("Syncookies")
                    || matches!(name, "TCPSynRetrans" | "TCPTimeouts")
            }
            "Tcp" => matches!(
                name,
                "ActiveOpens"
                    | "InSegs"
                    | "OutSegs"
                    | "OutRsts"
                    | "PassiveOpens"
                    | "RetransSegs"
                    | "CurrEstab"
            ),
            "Udp" | "Udp6" => matches!(
                name,
                "InDatagrams" | "OutDatagrams" | "NoPorts" | "RcvbufErrors" | "SndbufErrors"
            ),
            _ => false,
        };
    let ladder = match proto {
        "Ip" | "Ip6" => {
            matches!(
                name,
                "InDiscards" | "InHdrErrors" | "InAddrErrors" | "InUnknownProtos"
            ) || (proto == "Ip6"
                && matches!(name, "InNoRoutes" | "InTruncatedPkts" | "InTooBigErrors"))
        }
        "TcpExt" => matches!(name, "TCPBacklogDrop" | "TCPRcvQDrop"),
        _ => false,
    };
    node || ladder
}

/// `node_netstat_<Proto>_<Name>`, untyped, as node_exporter writes them.
fn netstat_section(proto: &str, counters: &BTreeMap<String, i64>, out: &mut Exposition) {
    for (name, &value) in counters {
        if !exported(proto, name) {
            continue;
        }
        let metric = format!("node_netstat_{proto}_{name}");
        let help = format!("Statistic {proto}{name}.");
        // Negative only for the few gauges the kernel keeps signed
        // (Tcp MaxConn is -1): written as the float they are.
        let value = match u64::try_from(value) {
            Ok(v) => Value::Int(v),
            Err(_) => Value::Float(value as f64),
        };
        out.family(&metric, &help, Kind::Untyped).sample(&[], value);
    }
}

/// /proc/net/snmp: Ip, Tcp, Udp.
fn snmp(input: &Input, out: &mut Exposition) {
    let c = &input.sample.counters;
    netstat_section("Ip", &c.ip, out);
    netstat_section("Tcp", &c.tcp, out);
    netstat_section("Udp", &c.udp, out);
}

/// /proc/net/snmp6: Ip6, Udp6.
fn snmp6(input: &Input, out: &mut Exposition) {
    let c = &input.sample.counters;
    netstat_section("Ip6", &c.ip6, out);
    netstat_section("Udp6", &c.udp6, out);
}

/// /proc/net/netstat: TcpExt.
fn netstat(input: &Input, out: &mut Exposition) {
    netstat_section("TcpExt", &input.sample.counters.tcp_ext, out);
}

/// /sys/class/net/IF/statistics, under node_exporter's netdev names
/// (which come from /proc/net/dev: its `drop` column is rx_dropped plus
/// rx_missed_errors, net/core/net-procfs.c).
fn netdev(input: &Input, out: &mut Exposition) {
    type Pick = fn(&BTreeMap<String, u64>) -> Option<u64>;
    let families: [(&str, Pick); 9] = [
        ("receive_bytes", |l| l.get("rx_bytes").copied()),
        ("receive_packets", |l| l.get("rx_packets").copied()),
        ("receive_errs", |l| l.get("rx_errors").copied()),
        ("receive_drop", |l| {
            Some(l.get("rx_dropped")? + l.get("rx_missed_errors").copied().unwrap_or(0))
        }),
        ("receive_fifo", |l| l.get("rx_fifo_errors").copied()),
        ("transmit_bytes", |l| l.get("tx_bytes").copied()),
        ("transmit_packets", |l| l.get("tx_packets").copied()),
        ("transmit_errs", |l| l.get("tx_errors").copied()),
        ("transmit_drop", |l| l.get("tx_dropped").copied()),
    ];
    let interfaces = &input.sample.interfaces;
    for (stat, pick) in families {
        let name = format!("node_network_{stat}_total");
        let help = format!("Network device statistic {stat}.");
        let mut f = out.family(&name, &help, Kind::Counter);
        for iface in interfaces {
            if let Some(v) = pick(&iface.link) {
                f.sample(&[("device", &iface.name)], v);
            }
        }
    }
    let mut f = out.family(
        "nettune_network_receive_missed_total",
        "Packets the NIC dropped for want of receive buffers (rx_missed_errors; inside \
         node_network_receive_drop_total): a full RX ring.",
        Kind::Counter,
    );
    for iface in interfaces {
        if let Some(&v) = iface.link.get("rx_missed_errors") {
            f.sample(&[("device", &iface.name)], v);
        }
    }
}

/// A queue's counter under whichever name its source uses (the names
/// `monitor`'s rates read), or the sum of the split counters some
/// drivers keep (bnxt's `ucast_`/`mcast_`/`bcast_`).
fn queue_counter(counters: &BTreeMap<String, u64>, names: &[&str], split: &str) -> Option<u64> {
    if let Some(v) = names.iter().find_map(|n| counters.get(*n)) {
        return Some(*v);
    }
    let parts: Vec<u64> = ["ucast_", "mcast_", "bcast_"]
        .iter()
        .filter_map(|p| counters.get(&format!("{p}{split}")).copied())
        .collect();
    (!parts.is_empty()).then(|| parts.iter().sum())
}

/// Per-queue counters: the netdev netlink qstats, or the driver's.
fn queues(input: &Input, out: &mut Exposition) {
    type Pick = fn(&BTreeMap<String, u64>) -> Option<u64>;
    let families: [(&str, &str, Pick); 3] = [
        (
            "nettune_queue_packets_total",
            "Packets through one queue (netdev netlink qstats, or the driver's ethtool -S).",
            |c| queue_counter(c, PACKET_NAMES, "packets"),
        ),
        (
            "nettune_queue_bytes_total",
            "Bytes through one queue (netdev netlink qstats, or the driver's ethtool -S).",
            |c| queue_counter(c, BYTE_NAMES, "bytes"),
        ),
        (
            "nettune_queue_drops_total",
            "Packets the driver dropped on one queue, where it counts them.",
            |c| DROP_NAMES.iter().find_map(|n| c.get(*n)).copied(),
        ),
    ];
    for (name, help, pick) in families {
        let mut f = out.family(name, help, Kind::Counter);
        for iface in &input.sample.interfaces {
            queue_samples(iface, pick, &mut f);
        }
    }
}

fn queue_samples(
    iface: &InterfaceCounters,
    pick: fn(&BTreeMap<String, u64>) -> Option<u64>,
    f: &mut super::exposition::Family,
) {
    for q in &iface.queues {
        if let Some(v) = pick(&q.counters) {
            let index = q.index.to_string();
            f.sample(
                &[
                    ("device", &iface.name),
                    ("direction", &q.direction),
                    ("queue", &index),
                ],
                v,
            );
        }
    }
}

fn role_word(role: VectorRole) -> &'static str {
    match role {
        VectorRole::Rx => "rx",
        VectorRole::Tx => "tx",
        VectorRole::Combined => "combined",
        VectorRole::Other => "other",
    }
}

/// The settings in force, as gauges: link state, qdisc, rings, queues,
/// RPS, IRQ affinity, the receive path's sysctls.
fn settings(input: &Input, out: &mut Exposition) {
    let state = &input.sample.state;
    let ifaces = &state.interfaces;
    let mut f = out.family(
        "node_network_up",
        "Value is 1 if operstate is 'up', 0 otherwise.",
        Kind::Gauge,
    );
    for i in ifaces {
        if let Some(op) = &i.operstate {
            f.sample(&[("device", &i.name)], op == "up");
        }
    }
    let mut f = out.family(
        "node_network_mtu_bytes",
        "Network device property: mtu_bytes",
        Kind::Gauge,
    );
    for i in ifaces {
        if let Some(mtu) = i.mtu {
            f.sample(&[("device", &i.name)], mtu);
        }
    }
    let mut f = out.family(
        "node_network_speed_bytes",
        "Network device property: speed_bytes",
        Kind::Gauge,
    );
    for i in ifaces {
        if let Some(mbps) = i.speed_mbps {
            f.sample(&[("device", &i.name)], mbps.saturating_mul(125_000));
        }
    }
    let mut f = out.family(
        "nettune_network_qdisc_info",
        "The kind of the interface's root qdisc (always 1).",
        Kind::Gauge,
    );
    for i in ifaces {
        if let Some(kind) = &i.qdisc {
            f.sample(&[("device", &i.name), ("kind", kind)], 1u64);
        }
    }
    let mut f = out.family(
        "nettune_network_ring_entries",
        "Descriptors in the NIC's RX or TX ring (ethtool -g), now and at most (limit=\"max\").",
        Kind::Gauge,
    );
    for i in ifaces {
        if let Some(r) = &i.rings {
            for (dir, now, max) in [("rx", r.rx, r.rx_max), ("tx", r.tx, r.tx_max)] {
                f.sample(
                    &[
                        ("device", &i.name),
                        ("direction", dir),
                        ("limit", "current"),
                    ],
                    now,
                );
                f.sample(
                    &[("device", &i.name), ("direction", dir), ("limit", "max")],
                    max,
                );
            }
        }
    }
    let mut f = out.family(
        "nettune_network_queues",
        "RX and TX queues the kernel has for the interface (/sys/class/net/IF/queues).",
        Kind::Gauge,
    );
    for i in ifaces {
        f.sample(
            &[("device", &i.name), ("direction", "rx")],
            i.rx_queues.len() as u64,
        );
        f.sample(
            &[("device", &i.name), ("direction", "tx")],
            i.tx_queues.len() as u64,
        );
    }
    let mut f = out.family(
        "nettune_queue_rps_enabled",
        "1 when the RX queue's rps_cpus names a CPU (Receive Packet Steering on).",
        Kind::Gauge,
    );
    for i in ifaces {
        for q in &i.rx_queues {
            if let Some(on) = i.rps_on(q.index) {
                f.sample(&[("device", &i.name), ("queue", &q.index.to_string())], on);
            }
        }
    }
    let mut f = out.family(
        "nettune_irq_affinity_info",
        "Where an IRQ of the interface may go (smp_affinity_list) and goes \
         (effective_affinity_list), as CPU lists (always 1).",
        Kind::Gauge,
    );
    for i in ifaces {
        for v in &i.irqs {
            let irq = v.irq.to_string();
            let queue = v.queue.map(|q| q.to_string()).unwrap_or_default();
            let affinity = v.affinity.as_deref().map(format_list).unwrap_or_default();
            let effective = v.effective.as_deref().map(format_list).unwrap_or_default();
            f.sample(
                &[
                    ("irq", &irq),
                    ("device", &i.name),
                    ("queue", &queue),
                    ("role", role_word(v.role)),
                    ("affinity", &affinity),
                    ("effective", &effective),
                ],
                1u64,
            );
        }
    }
    let mut f = out.family(
        "nettune_sysctl",
        "A receive-path sysctl, by its dotted name (backlog, budget, socket buffers, accept \
         queue, RFS, busy polling).",
        Kind::Gauge,
    );
    for name in state.sysctls.keys() {
        if let Some(v) = state.sysctl_u64(name) {
            f.sample(&[("name", name)], v);
        }
    }
    out.family(
        "nettune_irqbalance_running",
        "1 when irqbalance runs: it may move the IRQs while they are watched.",
        Kind::Gauge,
    )
    .sample(&[], state.irqbalance_running);
}

/// The drop ladder as raw counters: per layer, the sum of the counters
/// that add to its loss (docs/monitor.md), per interface for the NIC.
fn ladder(input: &Input, out: &mut Exposition) {
    let s = input.sample;
    let mut f = out.family(
        "nettune_drops_total",
        "Packets lost on the receive path, by layer in the order a packet meets them (nic, \
         softnet, ip, ip6, udp, udp6, tcp); each counts every loss of its layer once.",
        Kind::Counter,
    );
    for iface in &s.interfaces {
        let missed = iface.link.get("rx_missed_errors");
        let dropped = iface.link.get("rx_dropped");
        if missed.is_some() || dropped.is_some() {
            let sum = missed.copied().unwrap_or(0) + dropped.copied().unwrap_or(0);
            f.sample(&[("layer", "nic"), ("device", &iface.name)], sum);
        }
    }
    if !s.counters.softnet.is_empty() {
        let sum: u64 = s.counters.softnet.iter().map(|c| c.dropped).sum();
        f.sample(&[("layer", "softnet"), ("device", "")], sum);
    }
    let c = &s.counters;
    let snmp: [(&str, &BTreeMap<String, i64>, &[&str]); 5] = [
        (
            "ip",
            &c.ip,
            &[
                "InDiscards",
                "InHdrErrors",
                "InAddrErrors",
                "InUnknownProtos",
            ],
        ),
        (
            "ip6",
            &c.ip6,
            &[
                "InDiscards",
                "InHdrErrors",
                "InAddrErrors",
                "InUnknownProtos",
                "InNoRoutes",
                "InTruncatedPkts",
                "InTooBigErrors",
            ],
        ),
        ("udp", &c.udp, &["InErrors", "NoPorts"]),
        ("udp6", &c.udp6, &["InErrors", "NoPorts"]),
        (
            "tcp",
            &c.tcp_ext,
            &["ListenDrops", "TCPBacklogDrop", "TCPRcvQDrop"],
        ),
    ];
    for (layer, counters, names) in snmp {
        let values: Vec<u64> = names
            .iter()
            .filter_map(|n| u64::try_from(*counters.get(*n)?).ok())
            .collect();
        if !values.is_empty() {
            f.sample(
                &[("layer", layer), ("device", "")],
                values.iter().sum::<u64>(),
            );
        }
    }
}

/// What the last interval showed: doctor's ids, one series per finding.
fn findings(input: &Input, out: &mut Exposition) {
    let Some((findings, _)) = input.findings else {
        return;
    };
    let mut f = out.family(
        "nettune_finding",
        "A finding the last interval showed (doctor's rule id and severity; docs/doctor.md); \
         absent when not seen.",
        Kind::Gauge,
    );
    for finding in findings {
        f.sample(
            &[("id", &finding.id), ("severity", finding.severity.label())],
            1u64,
        );
    }
}

fn irq_labels(irq: &crate::monitor::sample::IrqCounters) -> [(&'static str, String); 4] {
    [
        ("irq", irq.irq.to_string()),
        ("device", irq.iface.clone()),
        (
            "queue",
            irq.queue.map(|q| q.to_string()).unwrap_or_default(),
        ),
        ("role", role_word(irq.role).to_string()),
    ]
}

/// Interrupts of each NIC IRQ vector, summed over the CPUs.
fn interrupt_totals(input: &Input, out: &mut Exposition) {
    let mut f = out.family(
        "nettune_irq_interrupts_total",
        "Interrupts of one IRQ vector of a NIC, all CPUs (/proc/interrupts; the kernel keeps \
         each CPU's count in 32 bits: a wrap shows as a counter reset).",
        Kind::Counter,
    );
    for irq in &input.sample.irqs {
        let labels = irq_labels(irq);
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        f.sample(&labels, irq.per_cpu.iter().sum::<u64>());
    }
}

/// The queue x CPU matrix: for each IRQ vector, the CPUs that took its
/// interrupts, most first, within `budget` series (round-robin by rank
/// across IRQs, at least one CPU per IRQ).
fn irq_matrix(input: &Input, budget: usize, out: &mut Exposition) {
    let s = input.sample;
    // Per IRQ: (column, count) of the CPUs with a count, most first.
    let ranked: Vec<Vec<(usize, u64)>> = s
        .irqs
        .iter()
        .map(|irq| {
            let mut cells: Vec<(usize, u64)> = irq
                .per_cpu
                .iter()
                .copied()
                .enumerate()
                .filter(|&(_, n)| n > 0)
                .collect();
            cells.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            cells
        })
        .collect();
    let mut keep = vec![0usize; ranked.len()];
    let mut left = budget;
    let deepest = ranked.iter().map(Vec::len).max().unwrap_or(0);
    for rank in 0..deepest {
        for (i, cells) in ranked.iter().enumerate() {
            if rank < cells.len() && (rank == 0 || left > 0) {
                keep[i] += 1;
                left = left.saturating_sub(1);
            }
        }
    }
    let mut f = out.family(
        "nettune_irq_cpu_interrupts_total",
        "Interrupts of one IRQ vector of a NIC on one CPU: the queue x CPU matrix, only for \
         CPUs that took the IRQ's interrupts (the most first when series are bounded).",
        Kind::Counter,
    );
    for ((irq, cells), n) in s.irqs.iter().zip(&ranked).zip(keep) {
        let labels = irq_labels(irq);
        let mut cells: Vec<(usize, u64)> = cells[..n].to_vec();
        cells.sort_by_key(|&(col, _)| col);
        for (col, count) in cells {
            let Some(cpu) = s.irq_cpus.get(col) else {
                continue;
            };
            let cpu = cpu.to_string();
            let mut all: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            all.push(("cpu", &cpu));
            f.sample(&all, count);
        }
    }
}

#[cfg(test)]
#[path = "collectors_tests.rs"]
mod tests;
