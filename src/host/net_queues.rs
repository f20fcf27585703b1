//! `/sys/class/net/<iface>/queues`: the interface's RX and TX queues
//! (`rx-N`, `tx-N`) with their steering: RPS CPUs and RFS flow count on
//! RX, XPS CPUs or RX queues and the rate limit on TX; each queue beside
//! the IRQ vector that serves it.

use crate::base::cpuset::parse_mask;
use crate::base::Root;
use crate::error::KernelError;

use super::model::{IrqVector, RxQueue, TxQueue, VectorRole};

/// The queue numbers among a `queues` directory's entries with `prefix`
/// (`rx-`, `tx-`), in order.
pub fn queue_indices(names: &[String], prefix: &str) -> Vec<u32> {
    let mut idx: Vec<u32> = names
        .iter()
        .filter_map(|n| n.strip_prefix(prefix).and_then(|i| i.parse().ok()))
        .collect();
    idx.sort_unstable();
    idx
}

/// The vector that serves RX (or TX) queue `index`: its own, or a
/// combined one.
pub fn vector_for(vectors: &[IrqVector], index: u32, rx: bool) -> Option<&IrqVector> {
    let wanted = if rx { VectorRole::Rx } else { VectorRole::Tx };
    vectors
        .iter()
        .find(|v| v.queue == Some(index) && (v.role == wanted || v.role == VectorRole::Combined))
}

/// A number file (`rps_flow_cnt`, `tx_maxrate`), trimmed: unknown when it
/// is no number.
pub fn parse_number<T: std::str::FromStr>(text: &str) -> Option<T> {
    text.parse().ok()
}

/// The queues of the interface whose directory is `base`
/// (`/sys/class/net/eth0`), each with the vector of `vectors` serving it.
pub fn read(
    root: &Root,
    base: &str,
    vectors: &[IrqVector],
) -> Result<(Vec<RxQueue>, Vec<TxQueue>), KernelError> {
    let names = root.list(&format!("{base}/queues"))?.unwrap_or_default();
    let mut rx = Vec::new();
    for index in queue_indices(&names, "rx-") {
        let dir = format!("{base}/queues/rx-{index}");
        let vector = vector_for(vectors, index, true);
        rx.push(RxQueue {
            index,
            irq: vector.map(|v| v.irq),
            affinity: vector.and_then(|v| v.affinity.clone()),
            effective: vector.and_then(|v| v.effective.clone()),
            affinity_hint: vector.and_then(|v| v.affinity_hint.clone()),
            rps_cpus: root.parse_optional(&format!("{dir}/rps_cpus"), parse_mask)?,
            rps_flow_cnt: root
                .read_value(&format!("{dir}/rps_flow_cnt"))?
                .as_deref()
                .and_then(parse_number),
        });
    }
    let mut tx = Vec::new();
    for index in queue_indices(&names, "tx-") {
        let dir = format!("{base}/queues/tx-{index}");
        let vector = vector_for(vectors, index, false);
        tx.push(TxQueue {
            index,
            irq: vector.map(|v| v.irq),
            affinity: vector.and_then(|v| v.affinity.clone()),
            effective: vector.and_then(|v| v.effective.clone()),
            affinity_hint: vector.and_then(|v| v.affinity_hint.clone()),
            xps_cpus: root.parse_optional(&format!("{dir}/xps_cpus"), parse_mask)?,
            xps_rxqs: root.parse_optional(&format!("{dir}/xps_rxqs"), parse_mask)?,
            tx_maxrate: root
                .read_value(&format!("{dir}/tx_maxrate"))?
                .as_deref()
                .and_then(parse_number),
        });
    }
    Ok((rx, tx))
}

#[cfg(test)]
mod tests {
    use super::*;

    // two-socket-nic-node1 (Debian 12, 6.1, mlx5 ens1f0 on node 1):
    // queues/rx-0 and tx-0 with RPS, RFS and XPS set.
    const RX0_RPS_CPUS_MLX5_6_1: &str = "ff00\n";
    const RX0_RPS_FLOW_CNT_MLX5_6_1: &str = "4096";
    const TX0_XPS_CPUS_MLX5_6_1: &str = "0100\n";
    const TX0_XPS_RXQS_MLX5_6_1: &str = "0\n";
    const TX0_TX_MAXRATE_MLX5_6_1: &str = "0";

    #[test]
    fn steering_masks_and_counts() {
        assert_eq!(
            parse_mask(RX0_RPS_CPUS_MLX5_6_1).expect("rps_cpus"),
            (8..16).collect::<Vec<u32>>()
        );
        assert_eq!(parse_number::<u32>(RX0_RPS_FLOW_CNT_MLX5_6_1), Some(4096));
        assert_eq!(
            parse_mask(TX0_XPS_CPUS_MLX5_6_1).expect("xps_cpus"),
            vec![8]
        );
        assert!(parse_mask(TX0_XPS_RXQS_MLX5_6_1)
            .expect("xps_rxqs")
            .is_empty());
        assert_eq!(parse_number::<u64>(TX0_TX_MAXRATE_MLX5_6_1), Some(0));
        assert_eq!(parse_number::<u64>("-"), None);
    }

    #[test]
    fn queues_in_number_order_beside_their_vectors() {
        let names = ["rx-10", "rx-2", "tx-0", "rx-0", "rx-x"].map(String::from);
        assert_eq!(queue_indices(&names, "rx-"), vec![0, 2, 10]);
        assert_eq!(queue_indices(&names, "tx-"), vec![0]);
        let vector = |irq, role, queue| IrqVector {
            irq,
            name: format!("v{irq}"),
            role,
            queue,
            affinity: None,
            effective: None,
            affinity_hint: None,
            per_cpu: Vec::new(),
        };
        let vectors = [
            vector(38, VectorRole::Rx, Some(0)),
            vector(39, VectorRole::Tx, Some(0)),
            vector(151, VectorRole::Combined, Some(1)),
        ];
        let irq = |index, rx| vector_for(&vectors, index, rx).map(|v| v.irq);
        assert_eq!((irq(0, true), irq(0, false)), (Some(38), Some(39)));
        assert_eq!((irq(1, true), irq(1, false)), (Some(151), Some(151)));
        assert_eq!(irq(2, true), None);
    }

    #[test]
    fn reads_the_fixture_tree() {
        let root = crate::host::fixture("two-socket-nic-node1");
        let (rx, tx) = read(&root, "/sys/class/net/ens1f0", &[]).expect("queues");
        assert_eq!((rx.len(), tx.len()), (8, 8));
        assert_eq!(rx[0].rps_flow_cnt, Some(4096));
        assert_eq!(tx[0].xps_cpus, Some(vec![8]));
        assert_eq!(tx[0].tx_maxrate, Some(0));
    }
}
