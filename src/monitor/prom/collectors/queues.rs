//! Per-queue packets, bytes and drops: the netdev netlink qstats, or the
//! driver's statistics.

use std::collections::BTreeMap;

use crate::monitor::rates::{BYTE_NAMES, DROP_NAMES, PACKET_NAMES};
use crate::monitor::sample::InterfaceCounters;

use super::super::exposition::{Exposition, Family, Kind};
use super::input::Input;

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
pub fn write(input: &Input, out: &mut Exposition) {
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
    f: &mut Family,
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

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::monitor::testkit;

    #[test]
    fn packets_per_queue() {
        let s = written(write, &testkit::first(), None);
        assert_eq!(
            value(
                &s,
                "nettune_queue_packets_total",
                &[("device", "eth0"), ("direction", "rx"), ("queue", "0")]
            ),
            Some(5_000_000.0)
        );
    }

    #[test]
    fn split_counters_are_summed() {
        // bnxt keeps unicast, multicast and broadcast apart.
        let counters: BTreeMap<String, u64> = [("ucast_packets", 5), ("mcast_packets", 2)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(queue_counter(&counters, PACKET_NAMES, "packets"), Some(7));
        assert_eq!(queue_counter(&counters, BYTE_NAMES, "bytes"), None);
    }
}
