//! What the host did during a run: per-CPU usr/sys/irq/soft% (the table the
//! SMP IRQ affinity and RPS/RFS article prints beside every result) and the
//! counters where packets are lost, as the change between a snapshot taken
//! when the measured part starts and one when it ends.
//!
//! The experiment asks a [`Sampler`] for snapshots. [`MonitorSampler`] is
//! `nettune monitor`'s sampler ([`crate::monitor::Sampler`]): the same
//! counters, read the same way, and per-CPU shares computed as monitor
//! (and mpstat) computes them. The runner sees only the trait.

use serde::{Deserialize, Serialize};

use std::time::Instant;

use crate::base::driver::{Ethtool, Netdev, Netlink};
use crate::base::drop_layer::Layer;
use crate::base::drop_reason::{self, ReasonSource};
use crate::base::Root;
use crate::bench::cpu::CpuRow;
use crate::host::{Counters, CpuTime, Inputs, Selection};
use crate::monitor::{Sample, Stamp};

/// Counters of lost packets: softnet's are the host's, the SNMP ones those
/// of the network namespace being tuned (where the receiver runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drops {
    /// Packets dropped because a CPU's backlog was full (all CPUs).
    pub softnet_dropped: u64,
    /// NAPI rounds cut short by the budget (all CPUs).
    pub softnet_time_squeeze: u64,
    /// UDP datagrams dropped for a full socket buffer.
    pub udp_rcvbuf_errors: u64,
    /// UDP datagrams dropped for any reason (RcvbufErrors included).
    pub udp_in_errors: u64,
    /// TCP connections dropped by a full accept queue.
    pub tcp_listen_drops: u64,
}

impl Drops {
    /// The drop counters in `counters` (the softnet ones summed over CPUs).
    pub fn of(counters: &Counters) -> Drops {
        let snmp = |map: &std::collections::BTreeMap<String, i64>, key: &str| {
            map.get(key).map_or(0, |v| u64::try_from(*v).unwrap_or(0))
        };
        Drops {
            softnet_dropped: counters.softnet.iter().map(|c| c.dropped).sum(),
            softnet_time_squeeze: counters.softnet.iter().map(|c| c.time_squeeze).sum(),
            udp_rcvbuf_errors: snmp(&counters.udp, "RcvbufErrors"),
            udp_in_errors: snmp(&counters.udp, "InErrors"),
            tcp_listen_drops: snmp(&counters.tcp_ext, "ListenDrops"),
        }
    }

    /// The change from `before` (a counter that went backwards counts 0).
    pub fn since(&self, before: &Drops) -> Drops {
        Drops {
            softnet_dropped: self.softnet_dropped.saturating_sub(before.softnet_dropped),
            softnet_time_squeeze: self
                .softnet_time_squeeze
                .saturating_sub(before.softnet_time_squeeze),
            udp_rcvbuf_errors: self
                .udp_rcvbuf_errors
                .saturating_sub(before.udp_rcvbuf_errors),
            udp_in_errors: self.udp_in_errors.saturating_sub(before.udp_in_errors),
            tcp_listen_drops: self
                .tcp_listen_drops
                .saturating_sub(before.tcp_listen_drops),
        }
    }
}

/// What the host did between two snapshots.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// `all` first, then each CPU: mpstat's columns, in percent.
    pub cpus: Vec<CpuRow>,
    pub drops: Drops,
    /// CPU time used by other processes, percent of all CPUs' time: the
    /// host's busy time (not idle, not iowait) less nettune's own. Kernel
    /// work done for nettune's packets on other tasks' time counts as
    /// theirs, so a few percent is normal; tens of percent is a noisy
    /// neighbour.
    #[serde(default)]
    pub others_percent: Option<f64>,
    /// The packets the kernel dropped, per reason it gave (the drop
    /// tracer on skb:kfree_skb), most first; `None` when not traced (no
    /// permission, an older kernel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<ReasonCount>>,
}

/// Drops of one reason in one layer of the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonCount {
    /// As the kernel names it: `SOCKET_RCVBUFF`.
    pub reason: String,
    pub layer: Layer,
    pub count: u64,
}

impl Usage {
    /// soft% of each CPU (not `all`), in CPU order.
    pub fn soft(&self) -> Vec<(String, f64)> {
        self.cpus
            .iter()
            .filter(|r| r.cpu != "all")
            .map(|r| (r.cpu.clone(), r.shares.soft))
            .collect()
    }
}

/// The share of all CPUs' time that processes other than this one used
/// between two readings of the per-CPU times (`before`, `after`), this
/// process having used `own_s` seconds meanwhile.
fn others_percent(before: &[CpuTime], after: &[CpuTime], own_s: f64) -> Option<f64> {
    let (mut total, mut busy) = (0u64, 0u64);
    for a in after {
        let b = before.iter().find(|b| b.cpu == a.cpu)?;
        let t = a.total().saturating_sub(b.total());
        let idle = (a.idle + a.iowait).saturating_sub(b.idle + b.iowait);
        total += t;
        busy += t.saturating_sub(idle);
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if total == 0 || hz <= 0 {
        return None;
    }
    let tick = 1.0 / hz as f64;
    let others = (busy as f64 * tick - own_s.max(0.0)).max(0.0);
    Some(others * 100.0 / (total as f64 * tick))
}

/// This process's CPU time so far, all threads (getrusage), seconds.
pub fn own_cpu_seconds() -> f64 {
    // SAFETY: rusage is plain data, valid all-zero; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Takes snapshots while benchmarks run, and says what happened between
/// two of them. The experiment needs nothing else of a sampler, so that
/// another one (the monitor's) can take this one's place.
pub trait Sampler {
    type Snapshot;
    fn snapshot(&mut self) -> anyhow::Result<Self::Snapshot>;
    fn usage(&self, before: &Self::Snapshot, after: &Self::Snapshot) -> Usage;
}

/// A reading of the monitor's sampler, and this process's CPU time then.
pub struct MonitorSnapshot {
    pub sample: Sample,
    pub own_cpu_s: f64,
}

/// `nettune monitor`'s sampler, reading the place this process is in (the
/// namespace it entered, or the host), every interface but `lo`.
pub struct MonitorSampler {
    inner: crate::monitor::Sampler,
    root: Root,
    ethtool: Box<dyn Ethtool>,
    netlink: Box<dyn Netlink>,
    netdev: Box<dyn Netdev>,
    netns: Option<String>,
    start: Instant,
    /// The drop tracer, when one could be opened.
    reasons: Option<Box<dyn ReasonSource>>,
}

impl MonitorSampler {
    /// Count the kernel's drop reasons in each snapshot too.
    pub fn with_reasons(mut self, source: Box<dyn ReasonSource>) -> MonitorSampler {
        self.reasons = Some(source);
        self
    }

    /// `netns`: the namespace this process entered, for the samples' label.
    pub fn new(netns: Option<&str>) -> anyhow::Result<MonitorSampler> {
        let root = Root::live();
        let (ethtool, netlink) = crate::nic::sources(&root)?;
        let netdev = crate::nic::netdev_source(&root)?;
        Ok(MonitorSampler {
            inner: crate::monitor::Sampler::new(Selection {
                all: false,
                iface: None,
            }),
            root,
            ethtool,
            netlink,
            netdev,
            netns: netns.map(str::to_string),
            start: Instant::now(),
            reasons: None,
        })
    }
}

impl Sampler for MonitorSampler {
    type Snapshot = MonitorSnapshot;

    fn snapshot(&mut self) -> anyhow::Result<MonitorSnapshot> {
        let src = Inputs {
            root: &self.root,
            ethtool: self.ethtool.as_ref(),
            netlink: self.netlink.as_ref(),
            netdev: self.netdev.as_ref(),
            netns: self.netns.clone(),
        };
        let mut sample = self.inner.sample(&src, Stamp::since(self.start))?;
        sample.drop_reasons = self.reasons.as_mut().map(|r| r.totals());
        if sample.counters.cpu_time.is_empty() {
            anyhow::bail!("cannot read the per-CPU time in /proc/stat");
        }
        Ok(MonitorSnapshot {
            sample,
            own_cpu_s: own_cpu_seconds(),
        })
    }

    fn usage(&self, before: &MonitorSnapshot, after: &MonitorSnapshot) -> Usage {
        let rates = crate::monitor::between(&before.sample, &after.sample);
        let mut cpus: Vec<CpuRow> = rates
            .all_cpus
            .map(|shares| CpuRow {
                cpu: "all".to_string(),
                shares,
            })
            .into_iter()
            .collect();
        cpus.extend(rates.cpus.iter().filter_map(|c| {
            Some(CpuRow {
                cpu: c.cpu.to_string(),
                shares: c.time?,
            })
        }));
        let (b, a) = (&before.sample.counters, &after.sample.counters);
        Usage {
            cpus,
            drops: Drops::of(a).since(&Drops::of(b)),
            others_percent: others_percent(
                &b.cpu_time,
                &a.cpu_time,
                after.own_cpu_s - before.own_cpu_s,
            ),
            reasons: reasons(&before.sample, &after.sample),
        }
    }
}

/// The drops per reason between two samples; `None` unless both were
/// traced.
fn reasons(before: &Sample, after: &Sample) -> Option<Vec<ReasonCount>> {
    let (b, a) = (before.drop_reasons.as_ref()?, after.drop_reasons.as_ref()?);
    if a.unavailable.is_some() || b.unavailable.is_some() {
        return None;
    }
    Some(
        drop_reason::between(Some(b), a, 0.0)
            .into_iter()
            .map(|r| ReasonCount {
                reason: r.reason,
                layer: r.layer,
                count: r.count,
            })
            .collect(),
    )
}

/// The load average (1, 5, 15 minutes) from /proc/loadavg.
pub fn load_average(root: &Root) -> Option<[f64; 3]> {
    let text = root.read("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_subtract_and_never_go_negative() {
        let before = Drops {
            softnet_dropped: 10,
            udp_rcvbuf_errors: 5,
            ..Drops::default()
        };
        let after = Drops {
            softnet_dropped: 25,
            udp_rcvbuf_errors: 3,
            ..Drops::default()
        };
        let d = after.since(&before);
        assert_eq!((d.softnet_dropped, d.udp_rcvbuf_errors), (15, 0));
    }

    fn cpu(id: u32, user: u64, idle: u64) -> CpuTime {
        CpuTime {
            cpu: id,
            user,
            nice: 0,
            system: 0,
            idle,
            iowait: 0,
            irq: 0,
            softirq: 0,
            steal: 0,
        }
    }

    #[test]
    fn others_are_the_busy_time_less_our_own() {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        // Two CPUs, one second: 1.5 CPU-seconds busy, 0.5 of them ours.
        let before = [cpu(0, 0, 0), cpu(1, 0, 0)];
        let after = [cpu(0, hz, 0), cpu(1, hz / 2, hz / 2)];
        let others = others_percent(&before, &after, 0.5).expect("others");
        assert!((others - 50.0).abs() < 1e-6, "{others}");
        // Our own time beyond the busy ticks (rounding) is never negative.
        assert_eq!(others_percent(&before, &after, 10.0), Some(0.0));
        assert_eq!(others_percent(&before, &before, 0.0), None);
    }

    #[test]
    fn the_monitor_sampler_reads_this_host() {
        let mut sampler = MonitorSampler::new(None).expect("sampler");
        let a = sampler.snapshot().expect("first");
        std::thread::sleep(std::time::Duration::from_millis(30));
        let b = sampler.snapshot().expect("second");
        let usage = sampler.usage(&a, &b);
        assert_eq!(usage.cpus.first().map(|r| r.cpu.as_str()), Some("all"));
        assert!(usage.cpus.len() >= 2, "{usage:?}");
        assert!(load_average(&Root::live()).is_some());
    }
}
