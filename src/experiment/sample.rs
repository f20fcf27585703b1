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
}

impl Usage {
    pub fn between(before: &Snapshot, after: &Snapshot) -> Usage {
        Usage {
            cpus: CpuUsage::between(&before.cpu, &after.cpu).rows,
            drops: after.drops.since(&before.drops),
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
