//! Per-queue counters out of a driver's flat statistics list (`ethtool -S`).
//!
//! Drivers name per-queue counters in their own styles; the ones handled:
//!
//! | style                  | drivers                                  |
//! |------------------------|------------------------------------------|
//! | `rx_queue_0_packets`   | ixgbe, igb, ice, veth, older virtio_net  |
//! | `rx0_packets`          | mlx5, virtio_net (6.x)                   |
//! | `rxq0_packets`         | hns3                                     |
//! | `rx-0.packets`         | i40e, sfc (`rx-0.rx_packets`)            |
//! | `queue_0_rx_packets`   | ena                                      |
//! | `[0]: rx_ucast_packets`| bnxt                                     |
//!
//! Size-bucket counters such as tg3's `rx_64_or_less_octet_packets` look
//! like queue 64; queues always count up from 0 without gaps, so indices
//! after the first gap are dropped.

use std::collections::BTreeMap;

use crate::base::driver::QueueStats;

/// Group `(name, value)` statistics into per-queue counters, sorted by
/// direction (`rx` before `tx`) and queue index. Names that are not
/// per-queue are skipped.
pub(super) fn group_queue_stats<'a>(
    stats: impl IntoIterator<Item = (&'a str, u64)>,
) -> Vec<QueueStats> {
    let mut queues: BTreeMap<(&'static str, u32), BTreeMap<String, u64>> = BTreeMap::new();
    for (name, value) in stats {
        if let Some(stat) = split_queue_stat(name) {
            queues
                .entry((stat.direction, stat.index))
                .or_default()
                .insert(stat.counter.to_string(), value);
        }
    }
    let mut grouped = Vec::new();
    for direction in ["rx", "tx"] {
        for index in 0.. {
            let Some(counters) = queues.remove(&(direction, index)) else {
                break;
            };
            grouped.push(QueueStats {
                direction: direction.to_string(),
                index,
                counters,
            });
        }
    }
    grouped
}

#[derive(Debug, PartialEq, Eq)]
struct QueueStat<'a> {
    direction: &'static str,
    index: u32,
    counter: &'a str,
}

/// Split a statistic name into direction, queue index and counter name, when
/// it names a per-queue counter.
fn split_queue_stat(name: &str) -> Option<QueueStat<'_>> {
    // ena: queue_0_rx_cnt
    if let Some(rest) = name
        .strip_prefix("queue_")
        .or_else(|| name.strip_prefix("queue-"))
    {
        let (index, rest) = leading_index(rest)?;
        let (direction, rest) = direction(after_separator(rest)?)?;
        return Some(QueueStat {
            direction,
            index,
            counter: after_separator(rest)?,
        });
    }
    // bnxt: [0]: rx_ucast_packets
    if let Some(rest) = name.strip_prefix('[') {
        let (index, rest) = leading_index(rest)?;
        let rest = rest.strip_prefix("]:")?.trim_start();
        let (direction, rest) = direction(rest)?;
        return Some(QueueStat {
            direction,
            index,
            counter: after_separator(rest)?,
        });
    }
    let (direction, rest) = direction(name)?;
    for infix in ["_queue_", "-queue-", "_q", "q", "_", "-", ""] {
        let Some((index, rest)) = rest.strip_prefix(infix).and_then(leading_index) else {
            continue;
        };
        let counter = after_separator(rest)?;
        // sfc and i40e repeat the direction: rx-0.rx_packets
        let counter = match counter.strip_prefix(direction) {
            Some(bare) => after_separator(bare).unwrap_or(counter),
            None => counter,
        };
        return Some(QueueStat {
            direction,
            index,
            counter,
        });
    }
    None
}

fn direction(text: &str) -> Option<(&'static str, &str)> {
    if let Some(rest) = text.strip_prefix("rx") {
        Some(("rx", rest))
    } else {
        text.strip_prefix("tx").map(|rest| ("tx", rest))
    }
}

/// A queue index at the start of `text` and what follows it.
fn leading_index(text: &str) -> Option<(u32, &str)> {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let index = text[..end].parse().ok()?;
    Some((index, &text[end..]))
}

/// What follows one separator (`_`, `.`, `-`, `:`), when that is not empty.
fn after_separator(text: &str) -> Option<&str> {
    let rest = text.strip_prefix(['_', '.', '-', ':'])?;
    (!rest.is_empty()).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(name: &str) -> Option<(&'static str, u32, &str)> {
        split_queue_stat(name).map(|s| (s.direction, s.index, s.counter))
    }

    #[test]
    fn splits_each_driver_style() {
        assert_eq!(split("rx_queue_0_packets"), Some(("rx", 0, "packets")));
        assert_eq!(split("tx_queue_3_bytes"), Some(("tx", 3, "bytes")));
        assert_eq!(
            split("rx_queue_2_xdp_packets"),
            Some(("rx", 2, "xdp_packets"))
        );
        assert_eq!(split("rx0_drops"), Some(("rx", 0, "drops")));
        assert_eq!(split("tx12_kicks"), Some(("tx", 12, "kicks")));
        assert_eq!(split("rxq1_pktnum_rcd"), Some(("rx", 1, "pktnum_rcd")));
        assert_eq!(split("rx-0.packets"), Some(("rx", 0, "packets")));
        assert_eq!(split("tx-5.tx_packets"), Some(("tx", 5, "packets")));
        assert_eq!(split("queue_0_rx_packets"), Some(("rx", 0, "packets")));
        assert_eq!(split("queue_7_tx_cnt"), Some(("tx", 7, "cnt")));
        assert_eq!(
            split("[3]: rx_ucast_packets"),
            Some(("rx", 3, "ucast_packets"))
        );
    }

    #[test]
    fn leaves_device_wide_counters_alone() {
        for name in [
            "rx_drops",
            "rx_xdp_packets",
            "tx_tx_timeouts",
            "rx_queue_dropped",
            "rx_prio0_bytes",
            "peer_ifindex",
            "ch0_events",
            "rx_size_64.nic",
            "[0]: tpa_packets",
            "rx_queue_0",
            "rx_queue_0_",
        ] {
            assert_eq!(split(name), None, "{name}");
        }
    }

    /// The head of `ethtool -S eth0` on a 6.18 virtio_net NIC with one queue pair.
    #[test]
    fn groups_virtio_net_6_18() {
        let stats = [
            ("rx_drops", 0),
            ("rx_xdp_packets", 0),
            ("rx_kicks", 533),
            ("tx_kicks", 2140),
            ("tx_tx_timeouts", 0),
            ("rx0_drops", 3),
            ("rx0_xdp_packets", 0),
            ("rx0_kicks", 533),
            ("tx0_xdp_tx", 0),
            ("tx0_kicks", 2140),
        ];
        let queues = group_queue_stats(stats);
        assert_eq!(queues.len(), 2);
        assert_eq!((queues[0].direction.as_str(), queues[0].index), ("rx", 0));
        assert_eq!(queues[0].counters["kicks"], 533);
        assert_eq!(queues[0].counters["drops"], 3);
        assert_eq!(queues[0].counters.len(), 3);
        assert_eq!((queues[1].direction.as_str(), queues[1].index), ("tx", 0));
        assert_eq!(queues[1].counters["kicks"], 2140);
    }

    /// veth with 2 rx and 2 tx queues (names as veth_get_strings writes them).
    #[test]
    fn groups_veth_by_queue_in_order() {
        let stats = [
            ("peer_ifindex", 2),
            ("rx_queue_1_xdp_packets", 11),
            ("rx_queue_0_xdp_packets", 10),
            ("rx_queue_0_drops", 1),
            ("tx_queue_1_xdp_xmit", 21),
            ("tx_queue_0_xdp_xmit", 20),
            ("rx_queue_1_drops", 0),
        ];
        let queues = group_queue_stats(stats);
        let order: Vec<_> = queues
            .iter()
            .map(|q| (q.direction.as_str(), q.index))
            .collect();
        assert_eq!(order, [("rx", 0), ("rx", 1), ("tx", 0), ("tx", 1)]);
        assert_eq!(queues[1].counters["xdp_packets"], 11);
        assert_eq!(queues[3].counters["xdp_xmit"], 21);
    }

    /// tg3 size buckets parse like queues 64 and 65 but have no queue 0.
    #[test]
    fn drops_size_buckets_that_look_like_queues() {
        let stats = [
            ("rx_queue_0_packets", 5),
            ("rx_64_or_less_octet_packets", 100),
            ("rx_65_to_127_octet_packets", 200),
        ];
        let queues = group_queue_stats(stats);
        assert_eq!(queues.len(), 1);
        assert_eq!(queues[0].counters.len(), 1);
        assert_eq!(queues[0].counters["packets"], 5);
    }
}
