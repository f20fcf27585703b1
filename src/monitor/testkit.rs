//! Synthetic samples for the rate and finding tests: a 2-CPU host with one
//! NIC (`eth0`, one combined queue, IRQ 38), counters since boot that each
//! test moves forward (or back) by hand.

use std::collections::BTreeMap;

use crate::base::driver::QueueStats;
use crate::host::softnet::SoftnetCpu;
use crate::host::{Counters, CpuSoftirqs, CpuTime, Source, SystemCounters, VectorRole};

use super::sample::{InterfaceCounters, IrqCounters, QueueSource, Sample};
use super::state::State;

pub fn map(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn cpu_time(cpu: u32) -> CpuTime {
    CpuTime {
        cpu,
        user: 10_000,
        nice: 10,
        system: 3_000,
        idle: 80_000,
        iowait: 100,
        irq: 0,
        softirq: 400,
        steal: 5,
    }
}

fn softnet(cpu: u32) -> SoftnetCpu {
    SoftnetCpu {
        cpu,
        processed: 1_000_000,
        dropped: 10,
        time_squeeze: 3,
        received_rps: Some(0),
        flow_limit_count: Some(0),
        backlog_len: Some(0),
    }
}

/// eth0 with link counters and one RX and one TX queue.
pub fn eth0() -> InterfaceCounters {
    let link = [
        ("rx_packets", 5_000_000u64),
        ("rx_bytes", 4_000_000_000),
        ("tx_packets", 3_000_000),
        ("tx_bytes", 2_000_000_000),
        ("rx_dropped", 7),
        ("rx_missed_errors", 100),
        ("rx_fifo_errors", 2),
        ("rx_over_errors", 0),
        ("tx_dropped", 0),
    ];
    let queue = |direction: &str, packets: u64| QueueStats {
        direction: direction.to_string(),
        index: 0,
        counters: [
            ("packets".to_string(), packets),
            ("bytes".to_string(), packets * 800),
            ("drops".to_string(), 1),
        ]
        .into_iter()
        .collect(),
    };
    InterfaceCounters {
        name: "eth0".to_string(),
        ifindex: Some(2),
        link: link.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        queues: vec![queue("rx", 5_000_000), queue("tx", 3_000_000)],
        queue_source: QueueSource::Ethtool,
    }
}

pub fn irq38() -> IrqCounters {
    IrqCounters {
        irq: 38,
        iface: "eth0".to_string(),
        name: "eth0-TxRx-0".to_string(),
        role: VectorRole::Combined,
        queue: Some(0),
        per_cpu: vec![0, 912_345],
    }
}

/// The first sample, at 0 s.
pub fn first() -> Sample {
    Sample {
        elapsed_secs: 0.0,
        unix_ms: 1_700_000_000_000,
        source: Source {
            root: "/".to_string(),
            netns: None,
        },
        counters: Counters {
            softirqs: vec![
                CpuSoftirqs {
                    cpu: 0,
                    net_rx: 2_000,
                    net_tx: 40,
                },
                CpuSoftirqs {
                    cpu: 1,
                    net_rx: 900_000,
                    net_tx: 30,
                },
            ],
            cpu_time: vec![cpu_time(0), cpu_time(1)],
            softnet: vec![softnet(0), softnet(1)],
            udp: map(&[
                ("InDatagrams", 1_000),
                ("NoPorts", 2),
                ("InErrors", 50),
                ("RcvbufErrors", 40),
            ]),
            tcp: map(&[("RetransSegs", 3)]),
            tcp_ext: map(&[
                ("ListenOverflows", 5),
                ("ListenDrops", 6),
                ("TCPBacklogDrop", 0),
            ]),
            ip: map(&[("InDiscards", 0), ("InHdrErrors", 0)]),
            ip6: map(&[("InDiscards", 1)]),
            udp6: map(&[("InErrors", 0), ("RcvbufErrors", 0), ("NoPorts", 0)]),
            system: SystemCounters {
                context_switches: Some(1_000_000),
                procs_running: Some(2),
                procs_blocked: Some(0),
            },
            host_wide: Vec::new(),
        },
        irq_cpus: vec![0, 1],
        irqs: vec![irq38()],
        interfaces: vec![eth0()],
        state: State::default(),
        missing: Vec::new(),
        drop_reasons: None,
    }
}

/// A sample `secs` after `prev`, changed by `change`.
pub fn after(prev: &Sample, secs: f64, change: impl FnOnce(&mut Sample)) -> Sample {
    let mut next = prev.clone();
    next.elapsed_secs += secs;
    next.unix_ms += (secs * 1000.0) as u64;
    change(&mut next);
    next
}

/// Add `n` to the link counter `name` of `iface`.
pub fn bump_link(s: &mut Sample, iface: &str, name: &str, n: u64) {
    if let Some(i) = s.interfaces.iter_mut().find(|i| i.name == iface) {
        *i.link.entry(name.to_string()).or_default() += n;
    }
}

/// Add ticks to CPU `cpu`'s times: [user, nice, system, idle, iowait,
/// irq, softirq, steal].
pub fn tick(s: &mut Sample, cpu: u32, ticks: [u64; 8]) {
    if let Some(t) = s.counters.cpu_time.iter_mut().find(|t| t.cpu == cpu) {
        t.user += ticks[0];
        t.nice += ticks[1];
        t.system += ticks[2];
        t.idle += ticks[3];
        t.iowait += ticks[4];
        t.irq += ticks[5];
        t.softirq += ticks[6];
        t.steal += ticks[7];
    }
}

/// Add `n` to an SNMP counter of `map`.
pub fn bump(map: &mut BTreeMap<String, i64>, name: &str, n: i64) {
    *map.entry(name.to_string()).or_default() += n;
}
