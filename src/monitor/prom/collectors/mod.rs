//! What `/metrics` shows: one collector per kernel source, each in a file
//! of its own whose `write` puts its metric families from one sample (raw
//! counters as `_total` counters, settings as gauges), in the manner of
//! node_exporter's `collector/*.go`. [`COLLECTORS`] lists them in the order
//! their families appear; [`render`] runs them.
//!
//! Names follow node_exporter where a series is the same thing (same
//! name, type, labels and value: `node_cpu_seconds_total{cpu,mode}`,
//! `node_softnet_dropped_total{cpu}`, `node_network_receive_packets_total
//! {device}`, `node_netstat_Udp_RcvbufErrors`, ...), so dashboards and
//! alerts written for node_exporter work on either; the rest is
//! `nettune_`. docs/monitor.md lists every family.
//!
//! A collector whose source could not be read (the sampler lists it in
//! `Sample::missing`) writes what it has and reports
//! `nettune_scrape_collector_success{collector="x"} 0`; one that panics
//! (a bug) loses only its own families. Neither fails the scrape.
//!
//! Cardinality is bounded: everything per CPU is a fixed number of series
//! per CPU, per queue a fixed number per queue, and the queue x CPU
//! interrupt matrix (the one part that could grow as IRQs x CPUs) gets the
//! series left under [`MAX_SERIES`] once the rest is written, CPUs that
//! took the most interrupts first, rank by rank across IRQs, and never
//! fewer than one per IRQ.

mod drop_reasons;
mod findings;
mod input;
mod interrupts;
mod ladder;
mod netdev;
mod netstat;
mod queues;
mod settings;
mod snmp;
mod snmp6;
mod softirqs;
mod softnet;
mod stat;

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::host::IssueKind;

use super::exposition::{Exposition, Kind, Value};

pub use input::Input;

/// The most series one exposition holds on a host of up to 256 CPUs and
/// 128 queues per NIC (the matrix yields to this; see the module doc).
pub const MAX_SERIES: usize = 5_000;

/// One collector: a name for `nettune_scrape_collector_success`, the
/// sample sections (`SourceIssue::section`) it reads, and its writer.
struct Collector {
    name: &'static str,
    /// Sections it reads; a trailing `*` matches a prefix
    /// (`interface *` is every `interface eth0`).
    sections: &'static [&'static str],
    /// A source file that does not exist is no failure (/proc/net/snmp6
    /// on a host without IPv6, as node_exporter treats it).
    missing_is_empty: bool,
    write: fn(&Input, &mut Exposition),
}

/// Every collector, in the order their families appear. The interrupt
/// matrix comes after them (it takes the series left).
const COLLECTORS: &[Collector] = &[
    Collector {
        name: "stat",
        sections: &["counters.cpu_time"],
        missing_is_empty: false,
        write: stat::write,
    },
    Collector {
        name: "softirqs",
        sections: &["counters.softirqs"],
        missing_is_empty: false,
        write: softirqs::write,
    },
    Collector {
        name: "softnet",
        sections: &["counters.softnet"],
        missing_is_empty: false,
        write: softnet::write,
    },
    Collector {
        name: "snmp",
        sections: &["counters.snmp"],
        missing_is_empty: false,
        write: snmp::write,
    },
    Collector {
        name: "snmp6",
        sections: &["counters.snmp6"],
        missing_is_empty: true,
        write: snmp6::write,
    },
    Collector {
        name: "netstat",
        sections: &["counters.netstat"],
        missing_is_empty: false,
        write: netstat::write,
    },
    Collector {
        name: "netdev",
        sections: &["interfaces", "interface *"],
        missing_is_empty: false,
        write: netdev::write,
    },
    Collector {
        name: "queues",
        sections: &["interfaces"],
        missing_is_empty: false,
        write: queues::write,
    },
    Collector {
        name: "settings",
        sections: &["settings"],
        missing_is_empty: false,
        write: settings::write,
    },
    Collector {
        name: "ladder",
        sections: &[
            "interfaces",
            "interface *",
            "counters.softnet",
            "counters.snmp",
            "counters.snmp6",
            "counters.netstat",
        ],
        missing_is_empty: false,
        write: ladder::write,
    },
    Collector {
        name: "drop_reasons",
        sections: &[],
        missing_is_empty: false,
        write: drop_reasons::write,
    },
    Collector {
        name: "findings",
        sections: &[],
        missing_is_empty: false,
        write: findings::write,
    },
    Collector {
        name: "interrupts",
        sections: &["interrupts"],
        missing_is_empty: false,
        write: interrupts::write,
    },
];

/// Series the exposition's tail takes: one success line per collector,
/// the sample's timestamp and interval, build info.
const TAIL_SERIES: usize = COLLECTORS.len() + 3;

/// The exposition of one sample.
pub fn render(input: &Input) -> Exposition {
    let mut out = Exposition::new();
    let mut success = Vec::with_capacity(COLLECTORS.len());
    for collector in COLLECTORS {
        let mut own = Exposition::new();
        let wrote = catch_unwind(AssertUnwindSafe(|| (collector.write)(input, &mut own)));
        if wrote.is_ok() {
            out.append(own);
        }
        success.push((
            collector.name,
            wrote.is_ok() && read_whole(collector, input),
        ));
    }
    // The matrix last: it takes what is left of the bound.
    let budget = MAX_SERIES.saturating_sub(out.series() + TAIL_SERIES);
    let mut own = Exposition::new();
    if catch_unwind(AssertUnwindSafe(|| {
        interrupts::matrix(input, budget, &mut own)
    }))
    .is_ok()
    {
        out.append(own);
    } else if let Some(s) = success.iter_mut().find(|(name, _)| *name == "interrupts") {
        s.1 = false;
    }
    tail(input, &success, &mut out);
    out
}

/// Whether the collector's sources were all read in full (for the drop
/// reasons: whether the tracer runs).
fn read_whole(collector: &Collector, input: &Input) -> bool {
    if collector.name == "drop_reasons" {
        return drop_reasons::traced(input);
    }
    !input.sample.missing.iter().any(|issue| {
        let ours = collector
            .sections
            .iter()
            .any(|s| match s.strip_suffix('*') {
                Some(prefix) => issue.section.starts_with(prefix),
                None => issue.section == *s,
            });
        ours && !(collector.missing_is_empty && issue.kind == IssueKind::Missing)
    })
}

fn tail(input: &Input, success: &[(&str, bool)], out: &mut Exposition) {
    let mut f = out.family(
        "nettune_scrape_collector_success",
        "nettune: whether a collector's sources were read in full (0: see the exporter's \
         stderr or `nettune monitor --once` for the file and error).",
        Kind::Gauge,
    );
    for (name, ok) in success {
        f.sample(&[("collector", name)], *ok);
    }
    out.family(
        "nettune_sample_timestamp_seconds",
        "When the counters served were read, seconds since the Unix epoch (a replay: when they \
         were recorded).",
        Kind::Gauge,
    )
    .sample(&[], Value::Float(input.sample.unix_ms as f64 / 1000.0));
    if let Some((_, secs)) = input.findings {
        out.family(
            "nettune_findings_interval_seconds",
            "The length of the interval nettune_finding judged: between the last two samples.",
            Kind::Gauge,
        )
        .sample(&[], Value::Float(secs));
    }
    out.family(
        "nettune_build_info",
        "The nettune version serving these metrics (always 1).",
        Kind::Gauge,
    )
    .sample(&[("version", env!("CARGO_PKG_VERSION"))], 1u64);
}
