//! The whole exposition of synthetic samples: its structure (what the
//! format and promtool require) and collectors that fail alone. Each
//! collector's values are tested in its own file.

use std::collections::BTreeSet;

use super::super::parse::parse;
use super::testing::{render_of, value};
use super::*;
use crate::doctor::Severity;
use crate::host::SourceIssue;
use crate::monitor::findings::LiveFinding;
use crate::monitor::testkit;

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
