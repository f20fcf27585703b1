//! One [`Sample`]: every counter `monitor` watches, read once, raw.
//!
//! Raw means as the kernel keeps them: totals since boot (or since the
//! interface or IRQ was created), never differences. Rates are computed
//! from two samples by [`super::rates::between`]; a Prometheus exporter can
//! publish these values as they are, as `_total` counters.
//!
//! The per-CPU and protocol counters are [`host::Counters`], the same model
//! `inspect --json` shows under `counters`, so one reader serves both. What
//! the host model does not hold (per-queue and per-interface traffic, the
//! interrupt counts of each queue IRQ, /proc/stat's host-wide lines) is
//! here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::driver::QueueStats;
use crate::base::drop_reason::ReasonTotals;
use crate::host::{Counters, Source, SourceIssue, VectorRole};

use super::state::State;

/// Bumped when a field of [`Sample`], [`super::Rates`] or
/// [`super::State`] changes meaning or is removed (not when one is added).
pub const MONITOR_SCHEMA_VERSION: u32 = 1;

/// Every counter `monitor` watches, read at one moment, and the settings
/// in force. Made by [`super::Sampler::sample`]; two of them make a
/// [`super::Rates`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// When it was read: seconds on a monotonic clock since the series
    /// began (the sampler's first sample, or a recorded series' first
    /// snapshot). Rates divide by differences of this, never of `unix_ms`.
    pub elapsed_secs: f64,
    /// Wall-clock time of the reading, milliseconds since the Unix epoch:
    /// for labels and timestamps only (the wall clock can jump).
    pub unix_ms: u64,
    /// Where it was read: `/` or the `--root` tree, and the `--netns` name.
    pub source: Source,
    /// Per-CPU counters (/proc/stat times, NET_RX/NET_TX softirqs,
    /// softnet_stat), /proc/stat's `ctxt`/`procs_running`, and the SNMP
    /// counters of IPv4 and IPv6 (Ip, Ip6, Udp, Udp6, Tcp, TcpExt). The
    /// per-CPU ones count for the whole host even inside a network
    /// namespace (`counters.host_wide` names them); the SNMP ones are the
    /// namespace's.
    pub counters: Counters,
    /// The CPU ids of /proc/interrupts' columns (online CPUs), in column
    /// order: `irqs[i].per_cpu[j]` is CPU `irq_cpus[j]`.
    pub irq_cpus: Vec<u32>,
    /// The IRQ vectors of the selected interfaces (queue vectors and the
    /// others: link, config, misc), with their interrupt counts.
    pub irqs: Vec<IrqCounters>,
    /// The selected interfaces, in /sys/class/net order.
    pub interfaces: Vec<InterfaceCounters>,
    /// The settings in force, as last read (see [`State::read_at_secs`]).
    pub state: State,
    /// The sources that could not be read for this sample, or only in
    /// part: their part of the sample is empty. Empty when all was read.
    pub missing: Vec<SourceIssue>,
    /// The drops counted by the kernel's reason since the drop tracer
    /// started (`None`: not traced, as in a replay or with --no-trace;
    /// `unavailable` says why tracing was asked for and could not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_reasons: Option<ReasonTotals>,
}

/// One IRQ vector of a NIC, as /proc/interrupts counts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqCounters {
    pub irq: u32,
    /// The interface it belongs to.
    pub iface: String,
    /// Its name in /proc/interrupts (`eth0-TxRx-3`, `virtio2-input.0`).
    pub name: String,
    /// What it serves: an RX, TX or combined queue, or no queue (`other`).
    pub role: VectorRole,
    /// The queue it serves (`None` for `other` vectors).
    pub queue: Option<u32>,
    /// Interrupts taken since the IRQ was set up, per CPU column of
    /// /proc/interrupts ([`Sample::irq_cpus`]). These wrap at 2^32.
    pub per_cpu: Vec<u64>,
}

/// Where an interface's per-queue counters came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueSource {
    /// The netdev netlink family's per-queue stats (`qstats`, Linux 6.9+):
    /// counters named the same on every driver, by the netdev spec's names
    /// (`rx-packets`, `rx-bytes`, `rx-hw-drops`, `tx-packets`, ...).
    Netlink,
    /// The driver's statistics (`ethtool -S`), grouped by queue: counter
    /// names are the driver's own (`packets`, `bytes`, `drops`, `kicks`, ...).
    Ethtool,
    /// Neither answered: no per-queue counters for this interface.
    None,
}

/// One interface's traffic and loss counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceCounters {
    pub name: String,
    /// Its ifindex at this reading. A different ifindex than in the
    /// previous sample means the interface was deleted and created again
    /// under the same name: its counters restarted.
    pub ifindex: Option<u32>,
    /// The link's counters (rtnetlink's link stats, as
    /// /sys/class/net/IF/statistics shows them): `rx_packets`, `rx_bytes`,
    /// `tx_packets`, `tx_bytes`, `rx_dropped`, `rx_missed_errors`,
    /// `rx_fifo_errors`, `rx_over_errors`, `rx_errors`, `rx_crc_errors`,
    /// `tx_dropped`, `tx_errors` (see [`LINK_COUNTERS`]); a name is absent
    /// when its file is.
    pub link: BTreeMap<String, u64>,
    /// Per-queue counters, RX queues then TX queues, each by index; empty
    /// when `queue_source` is `none`.
    pub queues: Vec<QueueStats>,
    pub queue_source: QueueSource,
}

/// The link counters read for every interface.
pub const LINK_COUNTERS: &[&str] = &[
    "rx_packets",
    "rx_bytes",
    "tx_packets",
    "tx_bytes",
    "rx_dropped",
    "rx_missed_errors",
    "rx_fifo_errors",
    "rx_over_errors",
    "rx_errors",
    "rx_crc_errors",
    "tx_dropped",
    "tx_errors",
];

impl Sample {
    /// The interface named `name`, if it was there.
    pub fn interface(&self, name: &str) -> Option<&InterfaceCounters> {
        self.interfaces.iter().find(|i| i.name == name)
    }

    /// The IRQ vector `irq`, if it belongs to a selected interface.
    pub fn irq(&self, irq: u32) -> Option<&IrqCounters> {
        self.irqs.iter().find(|i| i.irq == irq)
    }
}
