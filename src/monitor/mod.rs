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
//! - [`Feed`] and [`run`] (`feed.rs`): samples from the live host every
//!   interval or from a recorded series (`series.rs`, written by
//!   `nettune capture --samples`), turned into a [`Frame`] per interval
//!   (rates plus live [`findings`], `findings.rs`) for a view.
//! - `prom/`: the Prometheus exporter (`monitor --prometheus`): the raw
//!   counters and settings at `/metrics`, sampled when scraped.
//! - `text.rs`: the sar-style text view. The NDJSON line is
//!   [`Frame::json_line`].
//!
//! Nothing here prints or handles signals; the live feed waits for its
//! next tick on the caller's `Stop` token.

pub mod feed;
pub mod findings;
pub mod guard;
pub mod ladder;
pub mod prom;
pub mod rates;
pub mod sample;
pub mod sampler;
pub mod series;
pub mod state;
#[cfg(test)]
mod testkit;
pub mod text;
pub mod tui;

pub use crate::host::stat::CpuShares;
pub use feed::{run, Feed, Frame, RunEnd};
pub use findings::{findings, LiveFinding};
pub use ladder::{DropCounter, DropLadder, DropLayer, Layer};
pub use rates::{
    between, CpuRates, InterfaceRates, IrqCpuRate, IrqRates, Lifecycle, QueueRates, Rates,
    SoftnetRates, SystemRates, Vanished,
};
pub use sample::{
    InterfaceCounters, IrqCounters, QueueSource, Sample, LINK_COUNTERS, MONITOR_SCHEMA_VERSION,
};
pub use sampler::{unix_ms_now, Sampler, Stamp, SETTINGS_EVERY_SECS};
pub use state::{InterfaceState, IrqState, State, STATE_SYSCTLS};
