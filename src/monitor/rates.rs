//! [`Rates`]: what happened between two samples, per second and as shares
//! of CPU time. [`between`] is a pure function of the two samples.
//!
//! Gaps: a counter that went backwards between the samples (an interface
//! deleted and created again, a driver reloaded, counters reset) gives
//! `None` for that value, never a negative or a huge rate. Counters the
//! kernel keeps in 32 bits (softnet_stat, /proc/interrupts, /proc/softirqs)
//! are counted across a wrap ([`crate::base::counter`]). Interfaces and
//! IRQs present in only one of the two samples appear with
//! [`Lifecycle::Appeared`] (no rates yet) or are listed in
//! [`Rates::vanished`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::base::counter::{delta, Width};
use crate::base::driver::QueueStats;
use crate::host::stat::{sum_ticks, tick_deltas, CpuShares};
use crate::host::{CpuTime, VectorRole};

use super::ladder::{ladder, DropLadder};
use super::sample::{InterfaceCounters, IrqCounters, QueueSource, Sample};

/// The rates between two samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// The later sample's time on the series clock
    /// ([`Sample::elapsed_secs`]).
    pub elapsed_secs: f64,
    /// The later sample's wall-clock time, ms since the Unix epoch.
    pub unix_ms: u64,
    /// Seconds between the two samples; every `_per_sec` is a change
    /// divided by this. Not positive: every rate is `None`.
    pub interval_secs: f64,
    /// All CPUs together, as mpstat's `all` row: shares of the summed
    /// time of the CPUs below.
    pub all_cpus: Option<CpuShares>,
    /// One per online CPU of the later sample, by CPU id. Per-CPU counters
    /// count for the whole host, also inside a network namespace.
    pub cpus: Vec<CpuRates>,
    pub system: SystemRates,
    /// One per interface of the later sample.
    pub interfaces: Vec<InterfaceRates>,
    /// One per NIC IRQ vector of the later sample: the queue x CPU
    /// interrupt matrix.
    pub irqs: Vec<IrqRates>,
    /// Where packets were lost, layer by layer.
    pub drops: DropLadder,
    /// Interfaces and IRQs of the earlier sample that are gone.
    pub vanished: Vanished,
}

/// One CPU over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuRates {
    pub cpu: u32,
    /// Shares of its time as mpstat computes them ([`CpuShares`]); `None`
    /// when /proc/stat lacks the CPU in either sample, or its counters
    /// restarted (a field other than idle and iowait went backwards).
    pub time: Option<CpuShares>,
    /// NET_RX softirqs run on this CPU per second (/proc/softirqs).
    pub net_rx_per_sec: Option<f64>,
    /// NET_TX softirqs per second.
    pub net_tx_per_sec: Option<f64>,
    /// softnet_stat's counters per second; `None` without softnet_stat.
    pub softnet: Option<SoftnetRates>,
    /// Interrupts per second this CPU took from the selected interfaces'
    /// IRQ vectors (the column sums of the queue x CPU matrix).
    pub nic_irqs_per_sec: Option<f64>,
}

/// softnet_stat of one CPU, per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SoftnetRates {
    /// Packets taken from the CPU's backlog and the NAPI polls it ran.
    pub processed_per_sec: Option<f64>,
    /// Packets dropped because the backlog was full (netdev_max_backlog).
    pub dropped_per_sec: Option<f64>,
    /// Times the receive softirq stopped with work left (netdev_budget,
    /// netdev_budget_usecs).
    pub time_squeeze_per_sec: Option<f64>,
    /// Packets RPS steered to this CPU (`None` on layouts without it).
    pub received_rps_per_sec: Option<f64>,
    /// Packets the flow limit dropped (part of `dropped`).
    pub flow_limit_per_sec: Option<f64>,
}

/// /proc/stat's host-wide lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemRates {
    /// Context switches per second, all CPUs (mpstat/sar's `cswch/s`).
    pub context_switches_per_sec: Option<f64>,
    /// Tasks runnable at the later sample (a gauge: sar's `runq-sz`).
    pub procs_running: Option<u64>,
    /// Tasks blocked on I/O at the later sample (sar's `blocked`).
    pub procs_blocked: Option<u64>,
}

/// Whether an interface or IRQ was there in the earlier sample too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// In both samples: its rates are the changes in between.
    Continuing,
    /// New since the earlier sample: no rates until the next interval.
    Appeared,
    /// Deleted and created again under the same name or number (another
    /// ifindex, another IRQ name): its counters restarted, so no rates
    /// this interval.
    Recreated,
}

/// One interface over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfaceRates {
    pub name: String,
    pub lifecycle: Lifecycle,
    /// From the link counters (`rx_packets` ... per second).
    pub rx_packets_per_sec: Option<f64>,
    pub tx_packets_per_sec: Option<f64>,
    pub rx_bytes_per_sec: Option<f64>,
    pub tx_bytes_per_sec: Option<f64>,
    /// Every link counter of the sample ([`super::sample::LINK_COUNTERS`])
    /// per second, by name.
    pub link: BTreeMap<String, Option<f64>>,
    /// Per queue: RX queues then TX queues.
    pub queues: Vec<QueueRates>,
    pub queue_source: QueueSource,
}

/// One queue over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueRates {
    /// `rx` or `tx`.
    pub direction: String,
    pub index: u32,
    /// Packets per second, from the counter that counts them under the
    /// source's name (see [`PACKET_NAMES`]); `None` when the source has
    /// no such counter.
    pub packets_per_sec: Option<f64>,
    /// Bytes per second ([`BYTE_NAMES`]).
    pub bytes_per_sec: Option<f64>,
    /// Packets the driver dropped on this queue per second
    /// ([`DROP_NAMES`]).
    pub drops_per_sec: Option<f64>,
    /// Every counter of the queue per second, by the source's name.
    pub counters: BTreeMap<String, Option<f64>>,
}

/// Names a queue's packet counter goes by: the netdev qstats
/// (`rx-packets`, `tx-packets`), most drivers (`packets`), hns3
/// (`pktnum_rcd`), ena (`cnt`). bnxt counts `ucast_packets`,
/// `mcast_packets` and `bcast_packets` apart: summed.
pub const PACKET_NAMES: &[&str] = &[
    "rx-packets",
    "tx-packets",
    "packets",
    "pkts",
    "cnt",
    "pktnum_rcd",
];
/// Names of a queue's byte counter (bnxt: the `*cast_bytes`, summed).
pub const BYTE_NAMES: &[&str] = &["rx-bytes", "tx-bytes", "bytes", "octets"];
/// Names of a queue's drop counter: the netdev qstats' `rx-hw-drops` and
/// `tx-hw-drops`, virtio_net and veth `drops`, others `dropped`,
/// `discards`.
pub const DROP_NAMES: &[&str] = &["rx-hw-drops", "tx-hw-drops", "drops", "dropped", "discards"];

/// One IRQ vector over the interval: a row of the queue x CPU matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IrqRates {
    pub irq: u32,
    pub iface: String,
    pub name: String,
    pub role: VectorRole,
    pub queue: Option<u32>,
    pub lifecycle: Lifecycle,
    /// Interrupts per second, all CPUs; `None` for a gap.
    pub per_sec: Option<f64>,
    /// Interrupts per second on each CPU that took any in the interval,
    /// by CPU id (CPUs that took none are left out); empty for a gap.
    pub per_cpu: Vec<IrqCpuRate>,
}

/// One cell of the queue x CPU matrix.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IrqCpuRate {
    pub cpu: u32,
    pub per_sec: f64,
}

/// What the earlier sample had and the later one has not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vanished {
    pub interfaces: Vec<String>,
    pub irqs: Vec<u32>,
}

impl Rates {
    /// The CPU `cpu`.
    pub fn cpu(&self, cpu: u32) -> Option<&CpuRates> {
        self.cpus.iter().find(|c| c.cpu == cpu)
    }

    /// The interface named `name`.
    pub fn interface(&self, name: &str) -> Option<&InterfaceRates> {
        self.interfaces.iter().find(|i| i.name == name)
    }

    /// The CPUs that took any interrupt of the selected interfaces'
    /// vectors in the interval: the columns worth showing of the matrix.
    pub fn irq_cpus(&self) -> Vec<u32> {
        let cpus: BTreeSet<u32> = self
            .irqs
            .iter()
            .flat_map(|i| i.per_cpu.iter().map(|c| c.cpu))
            .collect();
        cpus.into_iter().collect()
    }
}

/// The rates from `prev` to `cur` (`cur` the later sample).
pub fn between(prev: &Sample, cur: &Sample) -> Rates {
    let seconds = cur.elapsed_secs - prev.elapsed_secs;
    let per_sec = |count: Option<u64>| -> Option<f64> {
        count.filter(|_| seconds > 0.0).map(|n| n as f64 / seconds)
    };
    let irqs = irq_rates(prev, cur, &per_sec);
    Rates {
        elapsed_secs: cur.elapsed_secs,
        unix_ms: cur.unix_ms,
        interval_secs: seconds,
        all_cpus: all_cpus(prev, cur),
        cpus: cpu_rates(prev, cur, &irqs, &per_sec),
        system: SystemRates {
            context_switches_per_sec: per_sec(
                prev.counters
                    .system
                    .context_switches
                    .zip(cur.counters.system.context_switches)
                    .and_then(|(then, now)| delta(then, now, Width::U64)),
            ),
            procs_running: cur.counters.system.procs_running,
            procs_blocked: cur.counters.system.procs_blocked,
        },
        interfaces: cur
            .interfaces
            .iter()
            .map(|iface| interface_rates(prev, iface, &per_sec))
            .collect(),
        vanished: Vanished {
            interfaces: prev
                .interfaces
                .iter()
                .filter(|i| cur.interface(&i.name).is_none())
                .map(|i| i.name.clone())
                .collect(),
            irqs: prev
                .irqs
                .iter()
                .filter(|i| cur.irq(i.irq).is_none())
                .map(|i| i.irq)
                .collect(),
        },
        irqs,
        drops: ladder(prev, cur, seconds),
    }
}

/// mpstat's `all` row: the tick increases summed over the CPUs present in
/// both samples without a gap.
fn all_cpus(prev: &Sample, cur: &Sample) -> Option<CpuShares> {
    let before: BTreeMap<u32, &CpuTime> =
        prev.counters.cpu_time.iter().map(|t| (t.cpu, t)).collect();
    let deltas: Vec<CpuTime> = cur
        .counters
        .cpu_time
        .iter()
        .filter_map(|now| tick_deltas(before.get(&now.cpu)?, now))
        .collect();
    if deltas.is_empty() {
        return None;
    }
    let sum = sum_ticks(&deltas);
    Some(CpuShares::of_ticks(&sum))
}

fn cpu_rates(
    prev: &Sample,
    cur: &Sample,
    irqs: &[IrqRates],
    per_sec: &dyn Fn(Option<u64>) -> Option<f64>,
) -> Vec<CpuRates> {
    let c = &cur.counters;
    let p = &prev.counters;
    // Online CPUs: /proc/stat's; without it, whatever names CPUs.
    let mut ids: BTreeSet<u32> = c.cpu_time.iter().map(|t| t.cpu).collect();
    if ids.is_empty() {
        ids.extend(c.softirqs.iter().map(|s| s.cpu));
        ids.extend(c.softnet.iter().map(|s| s.cpu));
    }
    let time_then: BTreeMap<u32, &CpuTime> = p.cpu_time.iter().map(|t| (t.cpu, t)).collect();
    let time_now: BTreeMap<u32, &CpuTime> = c.cpu_time.iter().map(|t| (t.cpu, t)).collect();
    let soft = |counters: &crate::host::Counters| -> BTreeMap<u32, (u64, u64)> {
        counters
            .softirqs
            .iter()
            .map(|s| (s.cpu, (s.net_rx, s.net_tx)))
            .collect()
    };
    let (soft_then, soft_now) = (soft(p), soft(c));
    let net_then: BTreeMap<u32, _> = p.softnet.iter().map(|s| (s.cpu, s)).collect();
    let net_now: BTreeMap<u32, _> = c.softnet.iter().map(|s| (s.cpu, s)).collect();
    let mut nic_irqs: BTreeMap<u32, f64> = BTreeMap::new();
    let mut irq_gap = false;
    for irq in irqs {
        irq_gap |= irq.per_sec.is_none();
        for cell in &irq.per_cpu {
            *nic_irqs.entry(cell.cpu).or_default() += cell.per_sec;
        }
    }
    let have_irqs = !irqs.is_empty() && !irq_gap && !cur.irq_cpus.is_empty();
    ids.into_iter()
        .map(|cpu| {
            let softirq = |pick: fn(&(u64, u64)) -> u64| {
                per_sec(delta(
                    pick(soft_then.get(&cpu)?),
                    pick(soft_now.get(&cpu)?),
                    Width::U32,
                ))
            };
            let softnet = net_now.get(&cpu).map(|now| {
                let then = net_then.get(&cpu);
                let field = |pick: fn(&crate::host::softnet::SoftnetCpu) -> Option<u64>| {
                    per_sec(delta(pick(then?)?, pick(now)?, Width::U32))
                };
                SoftnetRates {
                    processed_per_sec: field(|s| Some(s.processed)),
                    dropped_per_sec: field(|s| Some(s.dropped)),
                    time_squeeze_per_sec: field(|s| Some(s.time_squeeze)),
                    received_rps_per_sec: field(|s| s.received_rps),
                    flow_limit_per_sec: field(|s| s.flow_limit_count),
                }
            });
            CpuRates {
                cpu,
                time: time_then
                    .get(&cpu)
                    .zip(time_now.get(&cpu))
                    .and_then(|(then, now)| CpuShares::between(then, now)),
                net_rx_per_sec: softirq(|s| s.0),
                net_tx_per_sec: softirq(|s| s.1),
                softnet,
                nic_irqs_per_sec: if have_irqs && cur.irq_cpus.contains(&cpu) {
                    Some(nic_irqs.get(&cpu).copied().unwrap_or(0.0))
                } else {
                    None
                },
            }
        })
        .collect()
}

fn irq_rates(
    prev: &Sample,
    cur: &Sample,
    per_sec: &dyn Fn(Option<u64>) -> Option<f64>,
) -> Vec<IrqRates> {
    cur.irqs
        .iter()
        .map(|now| {
            let then = prev.irq(now.irq);
            let lifecycle = match then {
                None => Lifecycle::Appeared,
                Some(t) if t.name != now.name || t.iface != now.iface => Lifecycle::Recreated,
                Some(_) => Lifecycle::Continuing,
            };
            let cells = match (lifecycle, then) {
                (Lifecycle::Continuing, Some(then)) => irq_cells(prev, then, cur, now),
                _ => None,
            };
            let total = cells
                .as_ref()
                .map(|c| c.iter().map(|(_, n)| n).sum::<u64>());
            let per_cpu = match (&cells, total.and_then(|t| per_sec(Some(t)))) {
                (Some(cells), Some(_)) => cells
                    .iter()
                    .filter(|(_, n)| *n > 0)
                    .filter_map(|&(cpu, n)| {
                        Some(IrqCpuRate {
                            cpu,
                            per_sec: per_sec(Some(n))?,
                        })
                    })
                    .collect(),
                _ => Vec::new(),
            };
            IrqRates {
                irq: now.irq,
                iface: now.iface.clone(),
                name: now.name.clone(),
                role: now.role,
                queue: now.queue,
                lifecycle,
                per_sec: per_sec(total),
                per_cpu,
            }
        })
        .collect()
}

/// The interrupts each CPU took from one IRQ between the samples, by CPU
/// id (CPUs in both samples' columns); `None` when any count went back
/// without wrapping (the IRQ was freed and requested again).
fn irq_cells(
    prev: &Sample,
    then: &IrqCounters,
    cur: &Sample,
    now: &IrqCounters,
) -> Option<Vec<(u32, u64)>> {
    let before: BTreeMap<u32, u64> = prev
        .irq_cpus
        .iter()
        .copied()
        .zip(then.per_cpu.iter().copied())
        .collect();
    cur.irq_cpus
        .iter()
        .zip(&now.per_cpu)
        .filter_map(|(cpu, &n)| Some((*cpu, *before.get(cpu)?, n)))
        .map(|(cpu, b, n)| Some((cpu, delta(b, n, Width::U32)?)))
        .collect()
}

fn interface_rates(
    prev: &Sample,
    now: &InterfaceCounters,
    per_sec: &dyn Fn(Option<u64>) -> Option<f64>,
) -> InterfaceRates {
    let then = prev.interface(&now.name);
    let lifecycle = match then {
        None => Lifecycle::Appeared,
        Some(t) if t.ifindex != now.ifindex => Lifecycle::Recreated,
        Some(_) => Lifecycle::Continuing,
    };
    let then = then.filter(|_| lifecycle == Lifecycle::Continuing);
    let link: BTreeMap<String, Option<f64>> = now
        .link
        .iter()
        .map(|(name, &n)| {
            let count = then
                .and_then(|t| t.link.get(name))
                .and_then(|&b| delta(b, n, Width::U64));
            (name.clone(), per_sec(count))
        })
        .collect();
    let pick = |name: &str| link.get(name).copied().flatten();
    // Counters from another source than last time are not comparable.
    let queues_then = then
        .filter(|t| t.queue_source == now.queue_source)
        .map(|t| t.queues.as_slice())
        .unwrap_or_default();
    InterfaceRates {
        name: now.name.clone(),
        lifecycle,
        rx_packets_per_sec: pick("rx_packets"),
        tx_packets_per_sec: pick("tx_packets"),
        rx_bytes_per_sec: pick("rx_bytes"),
        tx_bytes_per_sec: pick("tx_bytes"),
        queues: now
            .queues
            .iter()
            .map(|q| {
                let before = queues_then
                    .iter()
                    .find(|b| b.direction == q.direction && b.index == q.index);
                queue_rates(before, q, per_sec)
            })
            .collect(),
        queue_source: now.queue_source,
        link,
    }
}

fn queue_rates(
    then: Option<&QueueStats>,
    now: &QueueStats,
    per_sec: &dyn Fn(Option<u64>) -> Option<f64>,
) -> QueueRates {
    let counters: BTreeMap<String, Option<f64>> = now
        .counters
        .iter()
        .map(|(name, &n)| {
            let count = then
                .and_then(|t| t.counters.get(name))
                .and_then(|&b| delta(b, n, Width::U64));
            (name.clone(), per_sec(count))
        })
        .collect();
    let named = |names: &[&str], summed: &[&str]| -> Option<f64> {
        if let Some(name) = names.iter().find(|n| counters.contains_key(**n)) {
            return counters.get(*name).copied().flatten();
        }
        let parts: Vec<Option<f64>> = summed
            .iter()
            .filter_map(|n| counters.get(*n).copied())
            .collect();
        if parts.is_empty() {
            return None;
        }
        parts.into_iter().try_fold(0.0, |sum, r| Some(sum + r?))
    };
    QueueRates {
        direction: now.direction.clone(),
        index: now.index,
        packets_per_sec: named(
            PACKET_NAMES,
            &["ucast_packets", "mcast_packets", "bcast_packets"],
        ),
        bytes_per_sec: named(BYTE_NAMES, &["ucast_bytes", "mcast_bytes", "bcast_bytes"]),
        drops_per_sec: named(DROP_NAMES, &[]),
        counters,
    }
}

#[cfg(test)]
#[path = "rates_tests.rs"]
mod tests;
