//! The drop ladder as raw counters: per layer of the receive path, the
//! sum of the counters that add to its loss (docs/monitor.md).

use std::collections::BTreeMap;

use super::super::exposition::{Exposition, Kind};
use super::input::Input;

/// The drop ladder as raw counters: per layer, the sum of the counters
/// that add to its loss (docs/monitor.md), per interface for the NIC.
pub fn write(input: &Input, out: &mut Exposition) {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::monitor::testkit;

    #[test]
    fn each_layer_counts_its_losses_once() {
        let s = written(write, &testkit::first(), None);
        // InErrors + NoPorts for UDP (RcvbufErrors is inside InErrors),
        // the NIC per device.
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
    }
}
