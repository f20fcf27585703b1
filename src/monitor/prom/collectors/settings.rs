//! The settings in force, as gauges: link state, MTU and speed under
//! node_exporter's names, then qdisc, rings, queues, RPS, IRQ affinity,
//! the receive path's sysctls and irqbalance.

use crate::base::cpuset::format_list;

use super::super::exposition::{Exposition, Kind};
use super::input::Input;
use super::interrupts::role_word;

/// The settings in force, as gauges: link state, qdisc, rings, queues,
/// RPS, IRQ affinity, the receive path's sysctls.
pub fn write(input: &Input, out: &mut Exposition) {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::gather::read_target;
    use crate::host::Selection;
    use crate::monitor::testkit;
    use crate::monitor::State;

    #[test]
    fn the_settings_of_a_host_as_gauges() {
        // two-socket-nic-node1: mlx5 ens1f0, 8 queues with RPS on, MTU
        // 9000 at 25 Gb/s, IRQ 151 (queue 0) on CPU 8.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hosts/two-socket-nic-node1");
        let host = read_target(Some(&dir), None, &Selection::default()).expect("fixture");
        let sample = crate::monitor::sample::Sample {
            state: State::from_host(&host, 0.0),
            ..testkit::first()
        };
        let s = written(write, &sample, None);
        let ens1f0 = [("device", "ens1f0")];
        assert_eq!(value(&s, "node_network_up", &ens1f0), Some(1.0));
        assert_eq!(value(&s, "node_network_mtu_bytes", &ens1f0), Some(9000.0));
        assert_eq!(
            value(&s, "node_network_speed_bytes", &ens1f0),
            Some(25_000.0 * 125_000.0)
        );
        assert_eq!(
            value(
                &s,
                "nettune_network_queues",
                &[("device", "ens1f0"), ("direction", "rx")]
            ),
            Some(8.0)
        );
        assert_eq!(
            value(
                &s,
                "nettune_queue_rps_enabled",
                &[("device", "ens1f0"), ("queue", "0")]
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &s,
                "nettune_irq_affinity_info",
                &[
                    ("irq", "151"),
                    ("queue", "0"),
                    ("role", "combined"),
                    ("affinity", "8")
                ]
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &s,
                "nettune_sysctl",
                &[("name", "net.core.netdev_max_backlog")]
            ),
            Some(1000.0)
        );
    }
}
