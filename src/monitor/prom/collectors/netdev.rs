//! /sys/class/net/IF/statistics: node_exporter's netdev collector's
//! series, and the NIC's missed packets.

use std::collections::BTreeMap;

use super::super::exposition::{Exposition, Kind};
use super::input::Input;

/// /sys/class/net/IF/statistics, under node_exporter's netdev names
/// (which come from /proc/net/dev: its `drop` column is rx_dropped plus
/// rx_missed_errors, net/core/net-procfs.c).
pub fn write(input: &Input, out: &mut Exposition) {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::monitor::testkit;

    #[test]
    fn the_drop_column_is_dropped_plus_missed() {
        let s = written(write, &testkit::first(), None);
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
        assert!(value(
            &s,
            "node_network_receive_packets_total",
            &[("device", "eth0")]
        )
        .is_some());
    }
}
