//! The rate maths on synthetic counter series: shares as mpstat computes
//! them, 32-bit wraps, counters that go back, interfaces and IRQs that
//! appear, vanish or are re-created, and the drop ladder.

use super::*;
use crate::base::driver::QueueStats;
use crate::monitor::ladder::Layer;
use crate::monitor::sample::QueueSource;
use crate::monitor::testkit::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn cpu_shares_are_field_increases_over_their_sum_as_mpstat_computes_them() {
    let s0 = first();
    // CPU1 over 1 s (100 ticks): 50 usr, 20 sys, 2 irq, 8 soft, 20 idle.
    // CPU0 did not tick at all (tickless and idle).
    let s1 = after(&s0, 1.0, |s| tick(s, 1, [50, 0, 20, 20, 0, 2, 8, 0]));
    let r = between(&s0, &s1);
    let t = r.cpu(1).and_then(|c| c.time).expect("cpu1 shares");
    assert!(close(t.usr, 50.0) && close(t.sys, 20.0) && close(t.idle, 20.0));
    assert!(close(t.irq, 2.0) && close(t.soft, 8.0) && close(t.steal, 0.0));
    let sum = t.usr + t.nice + t.sys + t.iowait + t.irq + t.soft + t.steal + t.idle;
    assert!(close(sum, 100.0), "{sum}");
    // mpstat shows a CPU whose counters did not move as 100% idle.
    let idle = r.cpu(0).and_then(|c| c.time).expect("cpu0 shares");
    assert!(close(idle.idle, 100.0) && close(idle.usr, 0.0));
    // The `all` row sums the ticks of both CPUs: the same 100 ticks.
    let all = r.all_cpus.expect("all");
    assert!(close(all.usr, 50.0) && close(all.soft, 8.0), "{all:?}");
}

#[test]
fn a_cpu_time_that_goes_back_is_a_gap_for_that_cpu_only() {
    let s0 = first();
    // CPU0's user time went back (the CPU came back online: its counters
    // restarted); CPU1 ticked on.
    let s1 = after(&s0, 1.0, |s| {
        s.counters.cpu_time[0].user -= 500;
        tick(s, 1, [10, 0, 0, 90, 0, 0, 0, 0]);
    });
    let r = between(&s0, &s1);
    assert_eq!(r.cpu(0).and_then(|c| c.time), None);
    assert!(r.cpu(1).and_then(|c| c.time).is_some());
    // The `all` row is made of the CPUs without a gap.
    assert!(close(r.all_cpus.expect("all").usr, 10.0));
    // idle and iowait may go back a little on tickless kernels: 0 for
    // that field, as mpstat counts it, not a gap.
    let s2 = after(&s1, 1.0, |s| {
        s.counters.cpu_time[0].iowait -= 2;
        tick(s, 0, [50, 0, 0, 50, 0, 0, 0, 0]);
    });
    let t = between(&s1, &s2).cpu(0).and_then(|c| c.time).expect("cpu0");
    assert!(close(t.usr, 50.0) && close(t.iowait, 0.0), "{t:?}");
}

#[test]
fn softirqs_and_softnet_count_across_a_32_bit_wrap_and_a_reset_is_a_gap() {
    let mut s0 = first();
    s0.counters.softirqs[1].net_rx = 0xffff_fff0;
    s0.counters.softnet[1].dropped = 0xffff_ff00;
    let s1 = after(&s0, 2.0, |s| {
        s.counters.softirqs[1].net_rx = 0x10; // 32 across the wrap
        s.counters.softnet[1].dropped = 0x100; // 512 across the wrap
        s.counters.softirqs[0].net_rx = 10; // from 2,000: a reset
    });
    let r = between(&s0, &s1);
    let cpu1 = r.cpu(1).expect("cpu1");
    assert_eq!(cpu1.net_rx_per_sec, Some(16.0));
    let net = cpu1.softnet.expect("softnet");
    assert_eq!(net.dropped_per_sec, Some(256.0));
    assert_eq!(net.processed_per_sec, Some(0.0));
    assert_eq!(r.cpu(0).expect("cpu0").net_rx_per_sec, None);
    let softnet = r.drops.layer(Layer::Softnet).expect("softnet layer");
    assert_eq!(softnet.drops_per_sec, Some(256.0));
}

#[test]
fn interface_rates_and_gaps_when_recreated_appeared_or_vanished() {
    let s0 = first();
    let s1 = after(&s0, 2.0, |s| {
        bump_link(s, "eth0", "rx_packets", 100_000);
        bump_link(s, "eth0", "rx_bytes", 64_000_000);
        bump_link(s, "eth0", "rx_missed_errors", 40);
    });
    let r = between(&s0, &s1);
    let eth0 = r.interface("eth0").expect("eth0");
    assert_eq!(eth0.lifecycle, Lifecycle::Continuing);
    assert_eq!(eth0.rx_packets_per_sec, Some(50_000.0));
    assert_eq!(eth0.rx_bytes_per_sec, Some(32_000_000.0));
    assert_eq!(eth0.link["rx_missed_errors"], Some(20.0));
    assert_eq!(eth0.tx_packets_per_sec, Some(0.0));

    // eth0 deleted and created again (new ifindex, counters from 0):
    // no rates this interval, none negative or huge.
    let s2 = after(&s1, 1.0, |s| {
        let eth0 = &mut s.interfaces[0];
        eth0.ifindex = Some(9);
        for v in eth0.link.values_mut() {
            *v = 3;
        }
        for q in &mut eth0.queues {
            for v in q.counters.values_mut() {
                *v = 1;
            }
        }
    });
    let r = between(&s1, &s2);
    let eth0 = r.interface("eth0").expect("eth0");
    assert_eq!(eth0.lifecycle, Lifecycle::Recreated);
    assert!(eth0.link.values().all(Option::is_none), "{:?}", eth0.link);
    assert!(eth0.queues.iter().all(|q| q.packets_per_sec.is_none()));
    let nic = r.drops.layer(Layer::Nic).expect("nic");
    assert!(nic.counters.iter().all(|c| c.count.is_none()));
    assert_eq!(nic.drops_per_sec, None);

    // The next interval counts from the new counters again.
    let s3 = after(&s2, 1.0, |s| bump_link(s, "eth0", "rx_packets", 7));
    assert_eq!(
        between(&s2, &s3)
            .interface("eth0")
            .expect("eth0")
            .rx_packets_per_sec,
        Some(7.0)
    );

    // eth1 appears, eth0 vanishes (with its IRQ).
    let s4 = after(&s3, 1.0, |s| {
        let mut eth1 = crate::monitor::testkit::eth0();
        eth1.name = "eth1".to_string();
        eth1.ifindex = Some(10);
        s.interfaces = vec![eth1];
        s.irqs.clear();
    });
    let r = between(&s3, &s4);
    let eth1 = r.interface("eth1").expect("eth1");
    assert_eq!(eth1.lifecycle, Lifecycle::Appeared);
    assert_eq!(eth1.rx_packets_per_sec, None);
    assert_eq!(r.vanished.interfaces, ["eth0"]);
    assert_eq!(r.vanished.irqs, [38]);
    assert!(r.interface("eth0").is_none());
}

#[test]
fn a_link_counter_that_goes_back_without_a_new_ifindex_is_a_gap() {
    let s0 = first();
    // 32-bit driver counters are not taken as wraps: a reset (driver
    // reload keeping the netdev) must not read as four billion packets.
    let s1 = after(&s0, 1.0, |s| {
        s.interfaces[0].link.insert("rx_packets".into(), 12);
    });
    let r = between(&s0, &s1);
    assert_eq!(r.interface("eth0").expect("eth0").rx_packets_per_sec, None);
}

#[test]
fn the_queue_by_cpu_matrix_lists_the_cpus_that_took_interrupts() {
    let s0 = first();
    let s1 = after(&s0, 2.0, |s| s.irqs[0].per_cpu = vec![0, 912_345 + 4_000]);
    let r = between(&s0, &s1);
    let irq = &r.irqs[0];
    assert_eq!(
        (irq.irq, irq.queue, irq.lifecycle),
        (38, Some(0), Lifecycle::Continuing)
    );
    assert_eq!(irq.per_sec, Some(2_000.0));
    assert_eq!(
        irq.per_cpu,
        vec![IrqCpuRate {
            cpu: 1,
            per_sec: 2_000.0
        }]
    );
    assert_eq!(r.irq_cpus(), [1]);
    assert_eq!(r.cpu(1).expect("cpu1").nic_irqs_per_sec, Some(2_000.0));
    assert_eq!(r.cpu(0).expect("cpu0").nic_irqs_per_sec, Some(0.0));

    // One cell wraps at 2^32: counted across it.
    let mut w0 = first();
    w0.irqs[0].per_cpu = vec![u64::from(u32::MAX) - 9, 0];
    let w1 = after(&w0, 1.0, |s| s.irqs[0].per_cpu = vec![10, 5]);
    let r = between(&w0, &w1);
    assert_eq!(r.irqs[0].per_sec, Some(25.0));

    // The IRQ was freed and requested again: counts restart, a gap.
    let s2 = after(&s1, 1.0, |s| s.irqs[0].per_cpu = vec![0, 3]);
    let r = between(&s1, &s2);
    assert_eq!(r.irqs[0].per_sec, None);
    assert!(r.irqs[0].per_cpu.is_empty());
    assert_eq!(r.cpu(1).expect("cpu1").nic_irqs_per_sec, None);

    // The number now serves another vector: re-created.
    let s3 = after(&s1, 1.0, |s| s.irqs[0].name = "eth0-TxRx-1".into());
    assert_eq!(between(&s1, &s3).irqs[0].lifecycle, Lifecycle::Recreated);

    // A CPU brought online between the samples has no earlier count: it
    // is left out, the others still count.
    let mut c0 = first();
    c0.irq_cpus = vec![1];
    c0.irqs[0].per_cpu = vec![100];
    let c1 = after(&c0, 1.0, |s| {
        s.irq_cpus = vec![0, 1];
        s.irqs[0].per_cpu = vec![50, 150];
    });
    let r = between(&c0, &c1);
    assert_eq!(r.irqs[0].per_sec, Some(50.0));
    assert_eq!(
        r.irqs[0].per_cpu,
        vec![IrqCpuRate {
            cpu: 1,
            per_sec: 50.0
        }]
    );
}

#[test]
fn queue_rates_by_the_sources_names() {
    let s0 = first();
    let s1 = after(&s0, 1.0, |s| {
        let rx = &mut s.interfaces[0].queues[0].counters;
        *rx.get_mut("packets").expect("packets") += 1_000;
        *rx.get_mut("bytes").expect("bytes") += 64_000;
        *rx.get_mut("drops").expect("drops") += 3;
    });
    let r = between(&s0, &s1);
    let rx = &r.interface("eth0").expect("eth0").queues[0];
    assert_eq!((rx.direction.as_str(), rx.index), ("rx", 0));
    assert_eq!(rx.packets_per_sec, Some(1_000.0));
    assert_eq!(rx.bytes_per_sec, Some(64_000.0));
    assert_eq!(rx.drops_per_sec, Some(3.0));
    assert_eq!(rx.counters["packets"], Some(1_000.0));

    // bnxt counts unicast, multicast and broadcast apart.
    let bnxt = |u: u64, m: u64| QueueStats {
        direction: "rx".into(),
        index: 0,
        counters: [
            ("ucast_packets".to_string(), u),
            ("mcast_packets".to_string(), m),
        ]
        .into_iter()
        .collect(),
    };
    let per_sec = |n: Option<u64>| n.map(|n| n as f64);
    let q = queue_rates(Some(&bnxt(10, 5)), &bnxt(110, 25), &per_sec);
    assert_eq!(q.packets_per_sec, Some(120.0));
    assert_eq!(q.bytes_per_sec, None);

    // Counters from another source than last time are not comparable.
    let s2 = after(&s1, 1.0, |s| {
        s.interfaces[0].queue_source = QueueSource::Netlink
    });
    let r = between(&s1, &s2);
    assert_eq!(
        r.interface("eth0").expect("eth0").queues[0].packets_per_sec,
        None
    );
}

#[test]
fn the_drop_ladder_counts_each_lost_packet_once_and_names_the_worst_layer() {
    let s0 = first();
    let s1 = after(&s0, 2.0, |s| {
        // 2,000 datagrams lost at full buffers: counted in RcvbufErrors
        // and in InErrors by the kernel; 10 to closed ports.
        bump(&mut s.counters.udp, "RcvbufErrors", 2_000);
        bump(&mut s.counters.udp, "InErrors", 2_000);
        bump(&mut s.counters.udp, "NoPorts", 10);
        bump(&mut s.counters.udp6, "RcvbufErrors", 100);
        bump(&mut s.counters.udp6, "InErrors", 100);
        // 30 listen overflows, each also a listen drop.
        bump(&mut s.counters.tcp_ext, "ListenOverflows", 30);
        bump(&mut s.counters.tcp_ext, "ListenDrops", 30);
        s.counters.softnet[0].time_squeeze += 50;
        bump_link(s, "eth0", "rx_missed_errors", 8);
        bump_link(s, "eth0", "rx_fifo_errors", 8);
    });
    let r = between(&s0, &s1);
    let rate = |layer| r.drops.layer(layer).and_then(|l| l.drops_per_sec);
    assert_eq!(rate(Layer::Udp), Some(1_005.0));
    assert_eq!(rate(Layer::Udp6), Some(50.0));
    assert_eq!(rate(Layer::Tcp), Some(15.0));
    // time_squeeze is not a lost packet; fifo errors count events.
    assert_eq!(rate(Layer::Softnet), Some(0.0));
    assert_eq!(rate(Layer::Nic), Some(4.0));
    assert_eq!(rate(Layer::Ip), Some(0.0));
    assert_eq!(r.drops.worst, Some(Layer::Udp));
    let udp = r.drops.layer(Layer::Udp).expect("udp");
    let rcvbuf = udp
        .counters
        .iter()
        .find(|c| c.name == "RcvbufErrors")
        .expect("RcvbufErrors");
    assert_eq!(
        (rcvbuf.count, rcvbuf.per_sec, rcvbuf.counted),
        (Some(2_000), Some(1_000.0), false)
    );
    let squeeze = &r.drops.layer(Layer::Softnet).expect("softnet").counters;
    assert!(squeeze
        .iter()
        .any(|c| c.name == "time_squeeze" && c.count == Some(50)));
    let layers: Vec<Layer> = r.drops.layers.iter().map(|l| l.layer).collect();
    assert_eq!(layers, crate::monitor::ladder::COUNTER_LAYERS);

    // Nothing lost: no worst layer.
    let quiet = after(&s1, 1.0, |_| {});
    assert_eq!(between(&s1, &quiet).drops.worst, None);

    // A namespace re-created between samples: SNMP counters went back.
    let reset = after(&s1, 1.0, |s| {
        s.counters.udp.insert("InErrors".into(), 0);
    });
    let r = between(&s1, &reset);
    let udp = r.drops.layer(Layer::Udp).expect("udp");
    assert!(udp
        .counters
        .iter()
        .any(|c| c.name == "InErrors" && c.count.is_none()));
    assert_eq!(udp.drops_per_sec, Some(0.0), "NoPorts still counts");
}

#[test]
fn unreadable_sources_leave_their_rates_unknown() {
    let s0 = first();
    let s1 = after(&s0, 1.0, |s| {
        s.counters.softnet.clear();
        s.counters.udp6.clear();
        s.counters.ip6.clear();
    });
    let r = between(&s0, &s1);
    assert!(r.cpus.iter().all(|c| c.softnet.is_none()));
    let layer = |l| r.drops.layer(l).expect("layer");
    assert!(layer(Layer::Softnet).counters.is_empty());
    assert_eq!(layer(Layer::Softnet).drops_per_sec, None);
    assert_eq!(layer(Layer::Udp6).drops_per_sec, None);
    // /proc/stat missing: CPUs still listed from the other sources.
    let s2 = after(&s1, 1.0, |s| s.counters.cpu_time.clear());
    let r = between(&s1, &s2);
    assert_eq!(r.cpus.len(), 2);
    assert!(r.cpus.iter().all(|c| c.time.is_none()));
    assert_eq!(r.all_cpus, None);
}

#[test]
fn system_rates_and_a_zero_interval() {
    let s0 = first();
    let s1 = after(&s0, 0.5, |s| {
        s.counters.system.context_switches = Some(1_006_000);
        s.counters.system.procs_running = Some(7);
    });
    let r = between(&s0, &s1);
    assert_eq!(r.system.context_switches_per_sec, Some(12_000.0));
    assert_eq!(r.system.procs_running, Some(7));
    // The same moment twice (or out of order): no rates at all.
    let same = after(&s0, 0.0, |s| bump_link(s, "eth0", "rx_packets", 5));
    let r = between(&s0, &same);
    assert_eq!(r.interface("eth0").expect("eth0").rx_packets_per_sec, None);
    assert_eq!(r.system.context_switches_per_sec, None);
    assert!(r.drops.layers.iter().all(|l| l.drops_per_sec.is_none()));
}

#[test]
fn traced_reasons_go_under_their_layers_and_every_layer_is_listed() {
    use crate::base::drop_reason::{PlaceCount, ReasonTotal, ReasonTotals};
    let total = |reason: &str, layer, count, at: &str| ReasonTotal {
        reason: reason.to_string(),
        layer,
        count,
        locations: vec![PlaceCount {
            name: Some(at.to_string()),
            count,
        }],
        protocols: Vec::new(),
        about: Default::default(),
    };
    let mut s0 = first();
    s0.drop_reasons = Some(ReasonTotals {
        reasons: vec![total(
            "SOCKET_RCVBUFF",
            Layer::Udp,
            100,
            "udp_queue_rcv_one_skb+0x2f5",
        )],
        ..ReasonTotals::default()
    });
    let s1 = after(&s0, 2.0, |s| {
        s.drop_reasons = Some(ReasonTotals {
            reasons: vec![
                total(
                    "SOCKET_RCVBUFF",
                    Layer::Udp,
                    924,
                    "udp_queue_rcv_one_skb+0x2f5",
                ),
                total("NETFILTER_DROP", Layer::Netfilter, 40, "nf_hook_slow+0x9a"),
                total("NO_SOCKET", Layer::Udp, 2, "__udp4_lib_rcv+0x6a1"),
            ],
            lost: 3,
            ..ReasonTotals::default()
        })
    });
    let r = between(&s0, &s1);
    let layers: Vec<Layer> = r.drops.layers.iter().map(|l| l.layer).collect();
    assert_eq!(layers, Layer::ALL);
    let udp = r.drops.layer(Layer::Udp).expect("udp");
    let names: Vec<(&str, u64)> = udp
        .reasons
        .iter()
        .map(|r| (r.reason.as_str(), r.count))
        .collect();
    assert_eq!(names, [("SOCKET_RCVBUFF", 824), ("NO_SOCKET", 2)]);
    assert_eq!(udp.reasons[0].per_sec, Some(412.0));
    assert_eq!(udp.traced_per_sec, Some(413.0));
    assert_eq!(
        udp.reasons[0].locations[0].name.as_deref(),
        Some("udp_queue_rcv_one_skb+0x2f5")
    );
    let nf = r.drops.layer(Layer::Netfilter).expect("netfilter");
    assert!(nf.counters.is_empty() && nf.drops_per_sec.is_none());
    assert_eq!(nf.traced_per_sec, Some(20.0));
    let tracing = r.drops.tracing.as_ref().expect("traced");
    assert_eq!((tracing.per_sec, tracing.lost), (Some(433.0), 3));
    // The layer losing the most is judged on counters, as without tracing.
    assert_eq!(r.drops.worst, None);

    // Asked for and unavailable: said, and the ladder is the counters'.
    let mut s2 = after(&s1, 1.0, |_| {});
    s2.drop_reasons = Some(ReasonTotals::unavailable("needs root"));
    let r = between(&s1, &s2);
    assert_eq!(
        r.drops.tracing.and_then(|t| t.unavailable).as_deref(),
        Some("needs root")
    );
    assert_eq!(
        r.drops.layers.len(),
        crate::monitor::ladder::COUNTER_LAYERS.len()
    );
    // Not asked for: no trace of it in the JSON.
    let plain = between(&first(), &after(&first(), 1.0, |_| {}));
    let json = serde_json::to_string(&plain.drops).expect("json");
    assert!(
        !json.contains("tracing") && !json.contains("reasons"),
        "{json}"
    );
}
