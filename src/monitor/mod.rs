//! `nettune monitor`: where packets and CPU time go, interval by interval.
//!
//! Sampling is apart from presentation. The data model is the contract
//! every view builds on (text blocks, NDJSON, the terminal UI, a
//! Prometheus exporter):
//!
//! - [`Sample`] (`sample.rs`): one reading of every counter, raw (totals
//!   since boot), plus the settings in force ([`State`], `state.rs`). An
//!   exporter publishes these as `_total` counters and gauges.
//! - [`Rates`] (`rates.rs`): what happened between two samples, made by
//!   the pure function [`between`]: per-CPU usr/sys/irq/soft/idle shares as
//!   mpstat computes them, softirqs and softnet per second, the queue x CPU
//!   interrupt matrix, per-interface and per-queue packets and bytes per
//!   second, and the drop ladder ([`DropLadder`], `ladder.rs`) from the NIC
//!   up to TCP, IPv4 and IPv6. A counter that went backwards gives `None`
//!   (a gap), never a negative or huge rate.
//! - [`Sampler`] (`sampler.rs`): reads samples through a `Root` and the
//!   driver traits (live, in a namespace, or from a recorded series), and
//!   picks up interfaces and IRQs that appear or vanish.
//!
//! Nothing here prints, sleeps or handles signals.

pub mod findings;
pub mod ladder;
pub mod rates;
pub mod sample;
pub mod sampler;
pub mod state;
#[cfg(test)]
mod testkit;

pub use findings::{findings, LiveFinding};
pub use ladder::{DropCounter, DropLadder, DropLayer, Layer};
pub use rates::{
    between, CpuRates, CpuShares, InterfaceRates, IrqCpuRate, IrqRates, Lifecycle, QueueRates,
    Rates, SoftnetRates, SystemRates, Vanished,
};
pub use sample::{
    InterfaceCounters, IrqCounters, QueueSource, Sample, LINK_COUNTERS, MONITOR_SCHEMA_VERSION,
};
pub use sampler::{unix_ms_now, Sampler, Stamp, SETTINGS_EVERY_SECS};
pub use state::{InterfaceState, IrqState, State, STATE_SYSCTLS};
