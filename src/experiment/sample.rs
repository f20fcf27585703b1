//! What the host did during a run: per-CPU usr/sys/irq/soft% (the table the
//! SMP IRQ affinity and RPS/RFS article prints beside every result) and the
//! counters where packets are lost, as the change between a snapshot taken
//! when the measured part starts and one when it ends.
//!
//! The experiment asks a [`Sampler`] for snapshots; [`ProcSampler`] reads
//! them from /proc (through the host readers). The sampler is a trait so
//! that the monitor's sampler can take its place without touching the
//! runner.

use serde::{Deserialize, Serialize};

use crate::base::Root;
use crate::bench::cpu::{CpuRow, CpuUsage};
use crate::host::CpuTime;

/// The counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Per-CPU time (/proc/stat, host-wide).
    pub cpu: Vec<CpuTime>,
    pub drops: Drops,
    /// This process's CPU time so far (all its threads), seconds.
    pub own_cpu_s: f64,
}

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
}

impl Usage {
    pub fn between(before: &Snapshot, after: &Snapshot) -> Usage {
        Usage {
            cpus: CpuUsage::between(&before.cpu, &after.cpu).rows,
            drops: after.drops.since(&before.drops),
            others_percent: others_percent(before, after),
        }
    }

    /// soft% of each CPU (not `all`), in CPU order.
    pub fn soft(&self) -> Vec<(String, f64)> {
        self.cpus
            .iter()
            .filter(|r| r.cpu != "all")
            .map(|r| (r.cpu.clone(), r.soft))
            .collect()
    }
}

/// The share of all CPUs' time that processes other than this one used
/// between two snapshots.
fn others_percent(before: &Snapshot, after: &Snapshot) -> Option<f64> {
    let (mut total, mut busy) = (0u64, 0u64);
    for a in &after.cpu {
        let b = before.cpu.iter().find(|b| b.cpu == a.cpu)?;
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
    let own = (after.own_cpu_s - before.own_cpu_s).max(0.0);
    let others = (busy as f64 * tick - own).max(0.0);
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

/// Snapshots from /proc: /proc/stat, /proc/net/softnet_stat, /proc/net/snmp
/// and /proc/net/netstat, as the calling process sees them (inside the
/// namespace being tuned).
pub struct ProcSampler {
    root: Root,
}

impl ProcSampler {
    pub fn new(root: Root) -> ProcSampler {
        ProcSampler { root }
    }
}

impl Sampler for ProcSampler {
    type Snapshot = Snapshot;

    fn usage(&self, before: &Snapshot, after: &Snapshot) -> Usage {
        Usage::between(before, after)
    }

    fn snapshot(&mut self) -> anyhow::Result<Snapshot> {
        let counters = crate::host::read_counters(&self.root);
        if counters.cpu_time.is_empty() {
            anyhow::bail!("cannot read the per-CPU time in /proc/stat");
        }
        let snmp = |map: &std::collections::BTreeMap<String, i64>, key: &str| {
            map.get(key).map_or(0, |v| u64::try_from(*v).unwrap_or(0))
        };
        Ok(Snapshot {
            drops: Drops {
                softnet_dropped: counters.softnet.iter().map(|c| c.dropped).sum(),
                softnet_time_squeeze: counters.softnet.iter().map(|c| c.time_squeeze).sum(),
                udp_rcvbuf_errors: snmp(&counters.udp, "RcvbufErrors"),
                udp_in_errors: snmp(&counters.udp, "InErrors"),
                tcp_listen_drops: snmp(&counters.tcp_ext, "ListenDrops"),
            },
            cpu: counters.cpu_time,
            own_cpu_s: own_cpu_seconds(),
        })
    }
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
        let before = Snapshot {
            cpu: vec![cpu(0, 0, 0), cpu(1, 0, 0)],
            own_cpu_s: 10.0,
            ..Snapshot::default()
        };
        let after = Snapshot {
            cpu: vec![cpu(0, hz, 0), cpu(1, hz / 2, hz / 2)],
            own_cpu_s: 10.5,
            ..Snapshot::default()
        };
        let others = Usage::between(&before, &after)
            .others_percent
            .expect("others");
        assert!((others - 50.0).abs() < 1e-6, "{others}");
        // Our own time beyond the busy ticks (rounding) is never negative.
        let after = Snapshot {
            own_cpu_s: 20.0,
            ..after
        };
        assert_eq!(Usage::between(&before, &after).others_percent, Some(0.0));
    }

    #[test]
    fn the_live_sampler_reads_this_host() {
        let mut sampler = ProcSampler::new(Root::live());
        let a = sampler.snapshot().expect("first");
        std::thread::sleep(std::time::Duration::from_millis(30));
        let b = sampler.snapshot().expect("second");
        let usage = sampler.usage(&a, &b);
        assert_eq!(usage.cpus.first().map(|r| r.cpu.as_str()), Some("all"));
        assert!(load_average(&Root::live()).is_some());
    }
}
