//! `nettune trace drops | softirq | reasons`: arguments into tracer
//! configs, Ctrl-C and SIGTERM into the stop token, snapshots and reports
//! into text or JSON, drops into the exit status. The tracers themselves
//! (`crate::trace`) neither print nor exit.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use crate::base::observe::Observer;
use crate::base::units::format_count;
use crate::bench::report::Progress;
use crate::error::Status;
use crate::trace::drops::{self, DropInterval, DropRow, DropsReport, Protocol};
use crate::trace::reasons::Reasons;
use crate::trace::softirq::{Histogram, SoftirqInterval, SoftirqReport};
use crate::trace::Tracer;
use crate::trace::{DropTracer, DropsConfig, SoftirqConfig, SoftirqTracer};

/// The longest run: a day. Longer is a service's job, not a diagnosis.
const MAX_DURATION: Duration = Duration::from_secs(86_400);
/// The shortest run: one tick of the snapshot loop.
const MIN_DURATION: Duration = Duration::from_millis(100);
/// Intervals kept for the JSON report (the most recent).
const KEPT_INTERVALS: usize = 3_600;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum TraceCommand {
    /// Count packet drops by the kernel's own reason (skb:kfree_skb), per
    /// CPU and kernel location, each reason placed in a layer of the path
    /// with its fix. Exit 0: no drops; 1: drops seen; 2: could not trace.
    ///
    /// Counting happens in the kernel (a BPF program on the tracepoint
    /// adds to per-CPU counters); nettune reads the counters each
    /// interval. Needs root. Details: docs/trace.md.
    ///
    /// Examples:
    ///   nettune trace drops
    ///   nettune trace drops --netns blue --duration 30 --json
    ///   nettune trace drops --iface eth0 --protocol udp --reason SOCKET_RCVBUFF
    #[command(verbatim_doc_comment)]
    Drops(DropsArgs),
    /// Where the receive path spends its time: per CPU, NET_RX softirq
    /// runs per second, the wait from raise to run and the run time
    /// (histograms); per NAPI instance (device and RX queue), polls,
    /// packets per poll and the share of polls that used the whole budget.
    ///
    /// Needs root. Details: docs/trace.md.
    ///
    /// Examples:
    ///   nettune trace softirq
    ///   nettune trace softirq --netns blue --iface veth0 --duration 5 --json
    #[command(verbatim_doc_comment)]
    Softirq(SoftirqArgs),
    /// List this kernel's drop reasons: for each its layer of the path,
    /// what it means, the fix and the public source. Needs no privilege.
    Reasons(ReasonsArgs),
}

/// How long a tracer runs and how it reports.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// How long to trace: 10 (the default), 1m, 500ms; from 100 ms to a
    /// day. Ctrl-C or SIGTERM ends it early with the report.
    #[arg(long, value_name = "DURATION", default_value = "10", value_parser = duration)]
    pub duration: Duration,
    /// Seconds between snapshots: 1 (the default), 0.5, 2s; from 0.1 to 3600.
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = super::monitor_args::interval)]
    pub interval: Option<f64>,
    /// Print the report as JSON, with the snapshots (docs/trace.md).
    #[arg(long)]
    pub json: bool,
}

impl RunArgs {
    /// The time between snapshots: never longer than the run.
    fn every(&self) -> Duration {
        Duration::from_secs_f64(
            self.interval
                .unwrap_or(super::monitor_args::DEFAULT_INTERVAL_SECS),
        )
        .min(self.duration)
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct DropsArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Only drops in the network namespace NAME (as `ip netns` names it):
    /// by the packet's device, or its socket when it has none.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Only drops of packets whose device is this interface (in --netns,
    /// or in nettune's own namespace).
    #[arg(long, value_name = "NAME")]
    pub iface: Option<String>,
    /// Only packets of this protocol.
    #[arg(long, value_enum, value_name = "PROTOCOL")]
    pub protocol: Option<Protocol>,
    /// Only this drop reason, as the kernel names it (SOCKET_RCVBUFF,
    /// NETFILTER_DROP); repeat or separate with commas. `nettune trace
    /// reasons` lists this kernel's.
    #[arg(long, value_name = "REASON", value_delimiter = ',')]
    pub reason: Vec<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SoftirqArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Only NAPI instances of devices in the network namespace NAME (the
    /// CPU figures are always the whole host's).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Only NAPI instances of this interface.
    #[arg(long, value_name = "NAME")]
    pub iface: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReasonsArgs {
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--duration` for a tracer: 100 ms to a day.
fn duration(text: &str) -> Result<Duration, String> {
    let d = crate::base::units::parse_duration(text)?;
    if !(MIN_DURATION..=MAX_DURATION).contains(&d) {
        return Err(format!(
            "duration '{text}' is out of range: give 100ms to 24h, e.g. 10, 1m"
        ));
    }
    Ok(d)
}

pub fn run(cmd: TraceCommand) -> anyhow::Result<Status> {
    match cmd {
        TraceCommand::Drops(args) => run_drops(&args),
        TraceCommand::Softirq(args) => run_softirq(&args),
        TraceCommand::Reasons(args) => run_reasons(&args),
    }
}

/// Snapshots: a line each on stdout (text), or a status line on a
/// terminal and kept for the JSON report.
struct Snapshots<I> {
    json: bool,
    progress: Progress,
    kept: VecDeque<I>,
    omitted: usize,
    line: fn(&I) -> String,
}

impl<I: Clone> Snapshots<I> {
    fn new(json: bool, line: fn(&I) -> String) -> Snapshots<I> {
        Snapshots {
            json,
            progress: Progress::new(json),
            kept: VecDeque::new(),
            omitted: 0,
            line,
        }
    }
}

impl<I: Clone> Observer<I> for Snapshots<I> {
    fn interval(&mut self, interval: &I) {
        let line = (self.line)(interval);
        if self.json {
            self.progress.show(&line);
            if self.kept.len() == KEPT_INTERVALS {
                self.kept.pop_front();
                self.omitted += 1;
            }
            self.kept.push_back(interval.clone());
        } else {
            // A closed stdout ends nothing here; the report says so.
            let _ = crate::bench::report::print_line(&mut self.progress, &line);
        }
    }
}

/// The JSON document: the report and the snapshots.
#[derive(Serialize)]
struct WithIntervals<'a, R, I> {
    #[serde(flatten)]
    report: &'a R,
    intervals: &'a VecDeque<I>,
    /// Earlier snapshots left out (only the last 3,600 are kept).
    intervals_omitted: usize,
}

fn print_json<R: Serialize, I: Serialize>(
    report: &R,
    mut snapshots: Snapshots<I>,
) -> anyhow::Result<()> {
    snapshots.progress.clear();
    json_out(&WithIntervals {
        report,
        intervals: &snapshots.kept,
        intervals_omitted: snapshots.omitted,
    })
}

/// Pretty JSON on stdout (a closed pipe is not an error).
fn json_out<T: Serialize>(value: &T) -> anyhow::Result<()> {
    crate::output::print(&(serde_json::to_string_pretty(value)? + "\n"))?;
    Ok(())
}

fn run_drops(args: &DropsArgs) -> anyhow::Result<Status> {
    let config = DropsConfig {
        netns: args.netns.clone(),
        iface: args.iface.clone(),
        protocol: args.protocol,
        reasons: args.reason.clone(),
    };
    let tracer = DropTracer::open(&config)?;
    eprintln!("trace drops: {}", drops_header(&tracer, &config, &args.run));
    let report = drive(tracer, &args.run, drop_line, drops_text)?;
    Ok(if report.total > 0 {
        Status::Findings
    } else {
        Status::Clean
    })
}

/// Run `tracer` as `run` says (Ctrl-C and SIGTERM end it with the report),
/// printing its snapshots and then its report.
fn drive<T>(
    mut tracer: T,
    run: &RunArgs,
    line: fn(&T::Interval) -> String,
    text: fn(&T::Report) -> String,
) -> anyhow::Result<T::Report>
where
    T: Tracer,
    T::Interval: Clone + Serialize,
    T::Report: Serialize,
{
    let stop = super::signals::stop_on_signals()?;
    let mut snapshots = Snapshots::new(run.json, line);
    let report = crate::trace::run(
        &mut tracer,
        run.every(),
        Some(run.duration),
        &stop,
        &mut snapshots,
    )?;
    // Detached and freed before printing.
    drop(tracer);
    if run.json {
        print_json(&report, snapshots)?;
    } else {
        drop(snapshots);
        crate::output::print(&text(&report))?;
    }
    Ok(report)
}

fn scope_words(netns: Option<&str>, iface: Option<&str>) -> String {
    match (netns, iface) {
        (Some(ns), Some(i)) => format!("on {i} in network namespace '{ns}'"),
        (Some(ns), None) => format!("in network namespace '{ns}'"),
        (None, Some(i)) => format!("on {i}"),
        (None, None) => "host-wide".to_string(),
    }
}

fn drops_header(tracer: &DropTracer, config: &DropsConfig, run: &RunArgs) -> String {
    let info = tracer.info();
    let mut text = format!(
        "{} {}, {} reasons read from {}, every {} s for {} s; Ctrl-C ends it with the report",
        info.tracepoint,
        scope_words(config.netns.as_deref(), config.iface.as_deref()),
        info.kernel_reasons,
        info.reasons_from,
        trim(run.every().as_secs_f64()),
        trim(run.duration.as_secs_f64()),
    );
    for note in &info.notes {
        text.push_str(&format!("\ntrace drops: note: {note}"));
    }
    text
}

fn trim(secs: f64) -> String {
    let text = format!("{secs:.1}");
    text.strip_suffix(".0").map(str::to_string).unwrap_or(text)
}

/// One snapshot: `  3.0 s   412 drops/s  SOCKET_RCVBUFF 400/s (UDP), ...`.
fn drop_line(i: &DropInterval) -> String {
    let mut line = format!("{:>7.1} s  {:>9} drops/s", i.at_secs, rate(i.per_sec));
    let top: Vec<String> = i
        .rows
        .iter()
        .take(3)
        .map(|r| format!("{} {}/s ({})", r.reason, rate(r.per_sec), r.layer.title()))
        .collect();
    if !top.is_empty() {
        line.push_str("  ");
        line.push_str(&top.join(", "));
    }
    if i.rows.len() > 3 {
        line.push_str(&format!(", {} more", i.rows.len() - 3));
    }
    if i.lost > 0 {
        line.push_str(&format!(
            "  ({} not counted by reason: map full)",
            format_count(i.lost)
        ));
    }
    line
}

fn rate(per_sec: f64) -> String {
    if per_sec >= 100.0 || per_sec == 0.0 {
        format_count(per_sec.round() as u64)
    } else {
        format!("{per_sec:.1}")
    }
}

/// A left-aligned table with two spaces between columns.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let last = cells.len().saturating_sub(1);
        for (i, cell) in cells.iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    for row in rows {
        line(row.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

fn top_locations(row: &DropRow) -> String {
    let mut parts: Vec<String> = row
        .locations
        .iter()
        .take(2)
        .map(|l| match &l.location {
            Some(at) => format!("{at} ({})", format_count(l.count)),
            None => "unavailable".to_string(),
        })
        .collect();
    if row.locations.len() > 2 {
        parts.push(format!("{} more", row.locations.len() - 2));
    }
    parts.join(", ")
}

fn drops_text(report: &DropsReport) -> String {
    let info = &report.trace;
    let scope = scope_words(info.scope.netns.as_deref(), info.scope.iface.as_deref());
    let mut out = format!(
        "\n{} drops {scope} over {} s: {} ({}/s)\n",
        info.tracepoint,
        trim(report.seconds),
        format_count(report.total),
        rate(report.per_sec),
    );
    if report.total == 0 {
        out.push_str("no drops seen");
        if info.protocol.is_some() || !info.reasons.is_empty() {
            out.push_str(" of the protocol and reasons asked for");
        }
        out.push('\n');
    } else {
        let layers: Vec<String> = report
            .by_layer
            .iter()
            .map(|l| format!("{} {}", l.layer.title(), format_count(l.count)))
            .collect();
        out.push_str(&format!("by layer: {}\n\n", layers.join(", ")));
        let rows: Vec<Vec<String>> = report
            .rows
            .iter()
            .map(|r| {
                let cpus: Vec<String> = r
                    .cpus
                    .iter()
                    .take(4)
                    .map(|c| format!("{}:{}", c.cpu, format_count(c.count)))
                    .collect();
                let protocols: Vec<&str> = r
                    .protocols
                    .iter()
                    .take(2)
                    .map(|p| p.protocol.as_str())
                    .collect();
                vec![
                    r.reason.clone(),
                    r.layer.title().to_string(),
                    format_count(r.count),
                    rate(r.per_sec),
                    protocols.join(","),
                    cpus.join(" "),
                    top_locations(r),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "reason",
                "layer",
                "drops",
                "per s",
                "proto",
                "cpu:drops",
                "where in the kernel",
            ],
            &rows,
        ));
        out.push_str("\nwhat they mean and what to do:\n");
        let mut seen = Vec::new();
        for row in &report.rows {
            if seen.contains(&&row.reason) {
                continue;
            }
            seen.push(&row.reason);
            if let Some(advice) = &row.advice {
                out.push_str(&format!("  {}: {}\n", row.reason, advice.what));
                if let Some(fix) = &advice.fix {
                    out.push_str(&format!("    fix: {fix}\n"));
                }
                out.push_str(&format!("    source: {}\n", advice.source));
            }
        }
    }
    if report.lost > 0 {
        out.push_str(&format!(
            "\n{} drops were not counted by reason: more distinct reasons and locations than the \
             tracer holds ({})\n",
            format_count(report.lost),
            format_count(drops::MAX_KEYS as u64)
        ));
    }
    if !info.locations {
        out.push_str("\nkernel locations unavailable: /proc/kallsyms hides addresses (kernel.kptr_restrict)\n");
    }
    if !report.unmapped.is_empty() {
        out.push_str(&format!(
            "\nreasons of this kernel nettune cannot place (counted under other): {}\n",
            report.unmapped.join(", ")
        ));
    }
    out
}

fn run_softirq(args: &SoftirqArgs) -> anyhow::Result<Status> {
    let config = SoftirqConfig {
        netns: args.netns.clone(),
        iface: args.iface.clone(),
    };
    let tracer = SoftirqTracer::open(&config)?;
    let info = tracer.info();
    eprintln!(
        "trace softirq: {} (NET_RX is vector {}), NAPI {}, every {} s for {} s; Ctrl-C ends it with the report",
        info.tracepoints.join(", "),
        info.net_rx,
        scope_words(config.netns.as_deref(), config.iface.as_deref()),
        trim(args.run.every().as_secs_f64()),
        trim(args.run.duration.as_secs_f64()),
    );
    for note in &info.notes {
        eprintln!("trace softirq: note: {note}");
    }
    drive(tracer, &args.run, softirq_line, softirq_text)?;
    Ok(Status::Clean)
}

/// A bucket bound in the unit that reads best: `≤2µs`.
fn bound(ns: Option<u64>) -> String {
    let Some(ns) = ns else {
        return "-".to_string();
    };
    let (value, unit) = match ns {
        n if n < 1_000 => (n as f64, "ns"),
        n if n < 1_000_000 => (n as f64 / 1e3, "µs"),
        n if n < 1_000_000_000 => (n as f64 / 1e6, "ms"),
        n => (n as f64 / 1e9, "s"),
    };
    format!("≤{}{unit}", trim_sig(value))
}

fn trim_sig(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        trim(v)
    }
}

fn softirq_line(i: &SoftirqInterval) -> String {
    let cpus: Vec<String> = i
        .cpus
        .iter()
        .filter(|c| c.runs > 0)
        .map(|c| {
            format!(
                "cpu{} {} runs/s {:.1}% busy wait p99 {}",
                c.cpu,
                rate(c.runs_per_sec),
                c.busy * 100.0,
                bound(c.wait.p99_ns)
            )
        })
        .collect();
    let mut line = format!(
        "{:>7.1} s  NET_RX: {}",
        i.at_secs,
        if cpus.is_empty() {
            "idle".to_string()
        } else {
            cpus.join(", ")
        }
    );
    if let Some(top) = i.napis.first() {
        line.push_str(&format!(
            "  busiest NAPI {}{} {} polls/s {:.1} pkts/poll",
            top.device,
            top.queue.map_or(String::new(), |q| format!(" rx-{q}")),
            rate(top.polls as f64 / i.seconds.max(1e-9)),
            top.packets_per_poll.unwrap_or(0.0)
        ));
    }
    line
}

fn hist_cells(h: &Histogram) -> [String; 3] {
    [bound(h.p50_ns), bound(h.p99_ns), bound(h.max_ns)]
}

fn softirq_text(report: &SoftirqReport) -> String {
    let w = &report.whole;
    let mut out = format!("\nNET_RX softirq over {} s (per CPU):\n", trim(w.seconds));
    let rows: Vec<Vec<String>> = w
        .cpus
        .iter()
        .map(|c| {
            let [w50, w99, wmax] = hist_cells(&c.wait);
            let [r50, r99, rmax] = hist_cells(&c.run);
            vec![
                c.cpu.to_string(),
                rate(c.runs_per_sec),
                format!("{:.1}%", c.busy * 100.0),
                w50,
                w99,
                wmax,
                r50,
                r99,
                rmax,
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "cpu", "runs/s", "busy", "wait p50", "wait p99", "wait max", "run p50", "run p99",
            "run max",
        ],
        &rows,
    ));
    out.push_str("(wait: from the softirq's raise to its start; run: its length; each within a factor of two)\n");
    if !report.trace.napi {
        out.push_str("\nno NAPI view on this kernel (see the note above)\n");
    } else if w.napis.is_empty() {
        out.push_str("\nno NAPI polls seen");
        if report.trace.scope.netns.is_some() || report.trace.scope.iface.is_some() {
            out.push_str(" on the devices asked for");
        }
        out.push('\n');
    } else {
        out.push_str("\nNAPI instances (most polls first):\n");
        let rows: Vec<Vec<String>> = w
            .napis
            .iter()
            .map(|n| {
                let cpus: Vec<String> = n.cpus.iter().take(4).map(|c| c.cpu.to_string()).collect();
                vec![
                    n.device.clone(),
                    n.queue.map_or("-".to_string(), |q| format!("rx-{q}")),
                    if n.napi_id == 0 {
                        "-".to_string()
                    } else {
                        n.napi_id.to_string()
                    },
                    rate(n.polls as f64 / w.seconds.max(1e-9)),
                    n.packets_per_poll
                        .map_or("-".to_string(), |p| format!("{p:.1}")),
                    n.full_budget_share
                        .map_or("-".to_string(), |s| format!("{:.1}%", s * 100.0)),
                    cpus.join(","),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "device",
                "queue",
                "napi id",
                "polls/s",
                "packets/poll",
                "whole budget",
                "cpus",
            ],
            &rows,
        ));
        out.push_str(
            "(whole budget: polls that used all of their budget, so the device had more waiting)\n",
        );
    }
    out
}

fn run_reasons(args: &ReasonsArgs) -> anyhow::Result<Status> {
    let root = crate::base::Root::live();
    let btf = crate::trace::read_btf(&root).ok();
    let reasons = Reasons::read(&root, btf.as_ref()).ok_or_else(|| {
        anyhow::anyhow!(
            "this kernel lists no drop reasons (neither the skb:kfree_skb format in tracefs nor \
             enum skb_drop_reason in its BTF): Linux 5.17 or later has them"
        )
    })?;
    let list = reasons.describe();
    if args.json {
        #[derive(Serialize)]
        struct Listing<'a> {
            from: &'a str,
            reasons: &'a [crate::trace::reasons::ReasonInfo],
            unmapped: Vec<String>,
        }
        json_out(&Listing {
            from: &reasons.source,
            reasons: &list,
            unmapped: reasons.unmapped(),
        })?;
        return Ok(Status::Clean);
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|r| {
            vec![
                r.code.to_string(),
                r.name.clone(),
                r.layer.clone(),
                r.fix.clone().unwrap_or_else(|| "-".to_string()),
            ]
        })
        .collect();
    let mut out = format!("{} drop reasons, from {}:\n", list.len(), reasons.source);
    out.push_str(&table(&["code", "reason", "layer", "fix"], &rows));
    let unmapped = reasons.unmapped();
    if !unmapped.is_empty() {
        out.push_str(&format!(
            "\nnot placed in a layer by nettune: {}\n",
            unmapped.join(", ")
        ));
    }
    crate::output::print(&out)?;
    Ok(Status::Clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_out_of_range_are_refused() {
        assert!(duration("10").is_ok());
        assert!(duration("50ms")
            .expect_err("short")
            .contains("out of range"));
        assert!(duration("2d").is_err() || duration("48h").is_err());
        assert!(duration("48h").expect_err("long").contains("'48h'"));
        assert!(duration("-1").is_err());
    }

    #[test]
    fn bounds_read_in_their_unit() {
        assert_eq!(bound(Some(512)), "≤512ns");
        assert_eq!(bound(Some(2048)), "≤2µs");
        assert_eq!(bound(Some(16_384)), "≤16µs");
        assert_eq!(bound(Some(2 << 20)), "≤2.1ms");
        assert_eq!(bound(None), "-");
    }
}
