//! The exposition of synthetic samples: its structure (what the format
//! and promtool require), the values of the series node_exporter also
//! writes, collectors that fail alone, and the cardinality bound.

use std::collections::{BTreeMap, BTreeSet};

use super::super::parse::{parse, Series};
use super::*;
use crate::doctor::Severity;
use crate::host::{SourceIssue, VectorRole};
use crate::monitor::sample::IrqCounters;
use crate::monitor::testkit;

fn render_of(sample: &Sample, findings: Option<(&[LiveFinding], f64)>) -> (String, usize) {
    let input = Input {
        sample,
        cpu_time: &sample.counters.cpu_time,
        findings,
    };
    let e = render(&input);
    let n = e.series();
    (e.as_str().to_string(), n)
}

fn value(series: &[Series], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    series
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

#[test]
fn the_exposition_is_well_formed() {
    let finding = LiveFinding {
        id: "udp.rcvbuf-errors".to_string(),
        severity: Severity::Crit,
        title: "t".to_string(),
        evidence: "e".to_string(),
    };
    let sample = testkit::first();
    let (text, count) = render_of(&sample, Some((&[finding], 1.0)));
    // parse() checks: HELP and TYPE once per family, before its samples;
    // each family in one block; valid names; no series twice.
    let parsed = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(parsed.series.len(), count);
    for (name, kind) in &parsed.types {
        assert_eq!(
            name.ends_with("_total"),
            kind == "counter",
            "{name} is a {kind}: counters and only counters end in _total"
        );
    }
    let names: BTreeSet<&str> = parsed.series.iter().map(|s| s.name.as_str()).collect();
    for expected in [
        "node_cpu_seconds_total",
        "node_softnet_processed_total",
        "node_softnet_dropped_total",
        "node_softnet_times_squeezed_total",
        "node_softirqs_functions_total",
        "node_network_receive_packets_total",
        "node_netstat_Udp_RcvbufErrors",
        "node_context_switches_total",
        "nettune_queue_packets_total",
        "nettune_irq_interrupts_total",
        "nettune_irq_cpu_interrupts_total",
        "nettune_drops_total",
        "nettune_finding",
        "nettune_scrape_collector_success",
    ] {
        assert!(names.contains(expected), "no {expected} in\n{text}");
    }
}

#[test]
fn values_are_the_kernels_under_node_exporters_names() {
    let sample = testkit::first();
    let (text, _) = render_of(&sample, None);
    let s = parse(&text).expect("parses").series;
    // 10,000 USER_HZ ticks are 100 s.
    let user = value(
        &s,
        "node_cpu_seconds_total",
        &[("cpu", "1"), ("mode", "user")],
    );
    assert_eq!(user, Some(100.0));
    assert_eq!(
        value(&s, "node_softnet_dropped_total", &[("cpu", "0")]),
        Some(10.0)
    );
    assert_eq!(
        value(
            &s,
            "node_softirqs_functions_total",
            &[("cpu", "1"), ("type", "NET_RX")]
        ),
        Some(900_000.0)
    );
    // /proc/net/dev's drop column: rx_dropped + rx_missed_errors.
    assert_eq!(
        value(&s, "node_network_receive_drop_total", &[("device", "eth0")]),
        Some(107.0)
    );
    assert_eq!(
        value(
            &s,
            "nettune_network_receive_missed_total",
            &[("device", "eth0")]
        ),
        Some(100.0)
    );
    assert_eq!(value(&s, "node_netstat_Udp_RcvbufErrors", &[]), Some(40.0));
    assert_eq!(value(&s, "node_netstat_TcpExt_ListenDrops", &[]), Some(6.0));
    // The ladder: InErrors + NoPorts for UDP (RcvbufErrors is inside
    // InErrors), the NIC per device.
    assert_eq!(
        value(&s, "nettune_drops_total", &[("layer", "udp")]),
        Some(52.0)
    );
    assert_eq!(
        value(
            &s,
            "nettune_drops_total",
            &[("layer", "nic"), ("device", "eth0")]
        ),
        Some(107.0)
    );
    assert_eq!(
        value(&s, "nettune_drops_total", &[("layer", "softnet")]),
        Some(20.0)
    );
    assert_eq!(
        value(
            &s,
            "nettune_queue_packets_total",
            &[("device", "eth0"), ("direction", "rx"), ("queue", "0")]
        ),
        Some(5_000_000.0)
    );
    // IRQ 38 took interrupts on CPU1 only: no CPU0 cell.
    let cell = |cpu: &str| {
        value(
            &s,
            "nettune_irq_cpu_interrupts_total",
            &[("irq", "38"), ("cpu", cpu)],
        )
    };
    assert_eq!((cell("0"), cell("1")), (None, Some(912_345.0)));
    assert_eq!(
        value(
            &s,
            "nettune_irq_interrupts_total",
            &[("irq", "38"), ("queue", "0")]
        ),
        Some(912_345.0)
    );
    // No interval yet: no findings family.
    assert!(!s.iter().any(|x| x.name == "nettune_finding"));
}

#[test]
fn a_source_that_cannot_be_read_fails_only_its_collector() {
    let mut sample = testkit::first();
    sample.counters.softnet.clear();
    let issue = |section: &str, kind| SourceIssue {
        section: section.to_string(),
        path: "/proc/x".to_string(),
        kind,
        error: "gone".to_string(),
    };
    sample.missing = vec![
        issue("counters.softnet", IssueKind::Missing),
        // No IPv6: not a failure, as node_exporter has it.
        issue("counters.snmp6", IssueKind::Missing),
        issue("interface eth0", IssueKind::Unreadable),
    ];
    let (text, _) = render_of(&sample, None);
    let s = parse(&text).expect("parses").series;
    let ok = |c: &str| value(&s, "nettune_scrape_collector_success", &[("collector", c)]);
    assert_eq!(ok("softnet"), Some(0.0));
    assert_eq!(ok("netdev"), Some(0.0));
    assert_eq!(ok("ladder"), Some(0.0));
    for good in [
        "stat",
        "softirqs",
        "snmp",
        "snmp6",
        "netstat",
        "interrupts",
        "findings",
    ] {
        assert_eq!(ok(good), Some(1.0), "{good}");
    }
    assert!(!s.iter().any(|x| x.name.starts_with("node_softnet")));
    // The rest is there.
    assert!(value(&s, "node_netstat_Udp_InErrors", &[]).is_some());
}

/// A host with `cpus` CPUs and `queues` queue IRQs, each of which took
/// interrupts on `spread` CPUs.
fn big_sample(cpus: u32, queues: u32, spread: u32) -> Sample {
    let mut s = testkit::first();
    let one = s.counters.cpu_time[0].clone();
    let soft = s.counters.softnet[0].clone();
    let irqs = s.counters.softirqs[0].clone();
    s.counters.cpu_time = (0..cpus)
        .map(|cpu| CpuTime { cpu, ..one.clone() })
        .collect();
    s.counters.softnet = (0..cpus)
        .map(|cpu| crate::host::softnet::SoftnetCpu {
            cpu,
            ..soft.clone()
        })
        .collect();
    s.counters.softirqs = (0..cpus)
        .map(|cpu| crate::host::CpuSoftirqs {
            cpu,
            ..irqs.clone()
        })
        .collect();
    s.irq_cpus = (0..cpus).collect();
    s.irqs = (0..queues)
        .map(|q| IrqCounters {
            irq: 200 + q,
            iface: "eth0".to_string(),
            name: format!("ice-eth0-TxRx-{q}"),
            role: VectorRole::Combined,
            queue: Some(q),
            // Most on the queue's own CPU, then fewer on the next ones.
            per_cpu: (0..cpus)
                .map(|cpu| {
                    let d = (cpu + cpus - q % cpus) % cpus;
                    if d < spread {
                        u64::from(1_000_000 - d)
                    } else {
                        0
                    }
                })
                .collect(),
        })
        .collect();
    let q0 = s.interfaces[0].queues.clone();
    s.interfaces[0].queues = (0..queues)
        .flat_map(|q| {
            q0.iter().map(move |x| crate::base::driver::QueueStats {
                index: q,
                ..x.clone()
            })
        })
        .collect();
    s
}

#[test]
fn the_interrupt_matrix_yields_to_the_series_bound() {
    // Every IRQ took interrupts on every one of 256 CPUs (irqbalance moved
    // them all around): 32,768 cells, bounded.
    let sample = big_sample(256, 128, 256);
    let (text, count) = render_of(&sample, None);
    assert!(count <= MAX_SERIES, "{count} series");
    let s = parse(&text).expect("parses").series;
    let cells: Vec<&Series> = s
        .iter()
        .filter(|x| x.name == "nettune_irq_cpu_interrupts_total")
        .collect();
    let mut per_irq: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for c in &cells {
        per_irq
            .entry(c.labels["irq"].as_str())
            .or_default()
            .push(c.labels["cpu"].parse().expect("cpu"));
    }
    // The bound is used, not wasted: IRQs keep CPUs rank by rank (so
    // their counts differ by one at most), at least the busiest one, the
    // queue's own CPU.
    assert!(count > MAX_SERIES - 128, "{count} series");
    assert_eq!(per_irq.len(), 128);
    let kept: BTreeSet<usize> = per_irq.values().map(Vec::len).collect();
    let (least, most) = (kept.first().copied(), kept.last().copied());
    assert!(least >= Some(1) && most <= least.map(|l| l + 1), "{kept:?}");
    for q in 0..128u32 {
        let cpus = &per_irq[(200 + q).to_string().as_str()];
        assert!(cpus.contains(&q), "IRQ {} lost its busiest CPU", 200 + q);
    }
    // And the totals are whole.
    let total = value(&s, "nettune_irq_interrupts_total", &[("irq", "200")]);
    let whole: u64 = (0..256u64).map(|d| 1_000_000 - d).sum();
    assert_eq!(total, Some(whole as f64));

    // Each IRQ on its own CPU (affinity set, no irqbalance): one cell
    // each, nothing dropped.
    let (text, count) = render_of(&big_sample(256, 128, 1), None);
    assert!(count <= MAX_SERIES, "{count} series");
    let s = parse(&text).expect("parses").series;
    let cells = s
        .iter()
        .filter(|x| x.name == "nettune_irq_cpu_interrupts_total")
        .count();
    assert_eq!(cells, 128);
}

#[test]
fn the_netstat_fields_are_node_exporters_default_and_the_ladders() {
    assert!(exported("Udp", "RcvbufErrors") && exported("Udp6", "NoPorts"));
    assert!(exported("TcpExt", "ListenOverflows") && exported("Tcp", "InErrs"));
    assert!(exported("Ip", "Forwarding") && exported("Ip6", "InOctets"));
    assert!(exported("Ip", "InDiscards") && exported("TcpExt", "TCPBacklogDrop"));
    assert!(!exported("Tcp", "RtoMin") && !exported("TcpExt", "TCPHPHits"));
    assert!(!exported("Ip", "InReceives") && !exported("Udp", "IgnoredMulti"));
}
