//! The guard of `apply --guard`: whether the receive path got worse after
//! a change than it was before it. A pure function of the samples taken
//! before the change (the baseline) and one interval after it; reading
//! the samples, applying and rolling back are the caller's.
//!
//! "Worse", defined once here (and in docs/apply.md):
//!
//! - a watched rate (a drop-ladder layer's drops per second, softnet's
//!   backlog drops or time squeezes per second, UDP RcvbufErrors per
//!   second) is above BOTH [`RATE_FACTOR`] times its baseline rate AND its
//!   baseline rate plus [`RATE_FLOOR_PER_SEC`] ([`worse`]): so a layer
//!   that lost nothing before fires above 100/s, and one that lost
//!   1,000/s fires above 2,000/s;
//! - or a live finding at warn or above (monitor's findings, doctor's
//!   rules) whose id no baseline interval showed.
//!
//! The baseline rate is the counters' increase over the whole baseline
//! divided by its length (intervals with a gap left out). One interval
//! after the change that is worse is enough: the guard exists to stop a
//! bad change quickly.
//!
//! In a network namespace, the per-CPU counters (softnet_stat, CPU time,
//! softirqs) count for the whole host: they cannot say whether the
//! namespace got worse, so the namespace's guard leaves them out (the
//! softnet layer of the ladder and the findings made from them) and says
//! so ([`Watch::not_attributed`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::base::units::format_count;
use crate::doctor::Severity;

use super::findings::{findings, LiveFinding};
use super::ladder::Layer;
use super::rates::{between, Rates};
use super::sample::Sample;

/// A watched rate fires above this many times its baseline rate...
pub const RATE_FACTOR: f64 = 2.0;
/// ...and above its baseline rate plus this many per second.
pub const RATE_FLOOR_PER_SEC: f64 = 100.0;

/// The one definition of a rate that got worse.
pub fn worse(baseline_per_sec: f64, now_per_sec: f64) -> bool {
    now_per_sec > limit(baseline_per_sec)
}

/// The rate above which `baseline_per_sec` got worse.
pub fn limit(baseline_per_sec: f64) -> f64 {
    (RATE_FACTOR * baseline_per_sec).max(baseline_per_sec + RATE_FLOOR_PER_SEC)
}

/// What a guard watches (`--guard-metric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Drops per second on each layer of the drop ladder: NIC, IPv4, IPv6,
    /// UDP, UDPv6, TCP (softnet's backlog is `softnet`).
    Drops,
    /// softnet_stat: backlog drops and time squeezes per second, all CPUs
    /// (host-wide: not in a network namespace).
    Softnet,
    /// UDP (IPv4 and IPv6) RcvbufErrors per second: datagrams dropped at
    /// full socket receive buffers.
    UdpRcvbuf,
    /// A finding at warn or above that the baseline did not show.
    Findings,
}

impl Metric {
    pub const ALL: [Metric; 4] = [
        Metric::Drops,
        Metric::Softnet,
        Metric::UdpRcvbuf,
        Metric::Findings,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Drops => "drops",
            Metric::Softnet => "softnet",
            Metric::UdpRcvbuf => "udp-rcvbuf",
            Metric::Findings => "findings",
        }
    }
}

/// Findings made from per-CPU counters: host-wide inside a namespace.
const HOST_WIDE_FINDINGS: &[&str] = &["softirq.hotspot", "softnet.drops", "softnet.squeeze"];

/// What one guard watches, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Watch {
    pub metrics: Vec<Metric>,
    /// Watching a network namespace: host-wide counters are left out.
    pub namespace: bool,
}

impl Watch {
    /// The metrics asked for (none: all that the place can attribute). In
    /// a namespace `softnet` cannot be watched: its counters are the
    /// whole host's.
    pub fn new(asked: &[Metric], namespace: bool) -> Result<Watch, String> {
        if namespace && asked.contains(&Metric::Softnet) {
            return Err(
                "--guard-metric softnet cannot be watched in a network namespace: softnet_stat \
                 counts every packet of the host, so it cannot say whether this namespace got \
                 worse; leave it out (drops, udp-rcvbuf and findings are the namespace's own)"
                    .to_string(),
            );
        }
        let mut metrics: Vec<Metric> = if asked.is_empty() {
            Metric::ALL
                .into_iter()
                .filter(|m| !(namespace && *m == Metric::Softnet))
                .collect()
        } else {
            asked.to_vec()
        };
        metrics.sort();
        metrics.dedup();
        Ok(Watch { metrics, namespace })
    }

    pub fn has(&self, metric: Metric) -> bool {
        self.metrics.contains(&metric)
    }

    /// The host-wide counters this guard cannot attribute to its place
    /// (empty outside a namespace).
    pub fn not_attributed(&self) -> Vec<&'static str> {
        if !self.namespace {
            return Vec::new();
        }
        vec![
            "softnet_stat (backlog drops, time squeezes)",
            "CPU time and softirqs (/proc/stat, /proc/softirqs)",
        ]
    }

    /// What the guard needs that `sample` (the first, taken before any
    /// change) could not read: one line per metric, naming the file. A
    /// guard that cannot see a condition must not pretend to watch it.
    pub fn unreadable(&self, sample: &Sample) -> Vec<String> {
        let c = &sample.counters;
        let mut out = Vec::new();
        for metric in &self.metrics {
            let lacks: Vec<&str> = match metric {
                Metric::Drops => [
                    (c.ip.is_empty(), "/proc/net/snmp (Ip)"),
                    (c.udp.is_empty(), "/proc/net/snmp (Udp)"),
                    (c.tcp_ext.is_empty(), "/proc/net/netstat (TcpExt)"),
                ]
                .iter()
                .filter(|(missing, _)| *missing)
                .map(|(_, what)| *what)
                .collect(),
                Metric::Softnet => {
                    if c.softnet.is_empty() {
                        vec!["/proc/net/softnet_stat"]
                    } else {
                        Vec::new()
                    }
                }
                Metric::UdpRcvbuf => {
                    if c.udp.contains_key("RcvbufErrors") {
                        Vec::new()
                    } else {
                        vec!["/proc/net/snmp (Udp RcvbufErrors)"]
                    }
                }
                Metric::Findings => {
                    let mut lacks = Vec::new();
                    if c.udp.is_empty() {
                        lacks.push("/proc/net/snmp (Udp)");
                    }
                    if !self.namespace {
                        if c.softnet.is_empty() {
                            lacks.push("/proc/net/softnet_stat");
                        }
                        if c.softirqs.is_empty() {
                            lacks.push("/proc/softirqs");
                        }
                        if c.cpu_time.is_empty() {
                            lacks.push("/proc/stat");
                        }
                    }
                    lacks
                }
            };
            if !lacks.is_empty() {
                out.push(format!(
                    "--guard-metric {} needs {}, which cannot be read here",
                    metric.name(),
                    lacks.join(", ")
                ));
            }
        }
        out
    }

    /// The rates this guard compares in one interval, by name; `None`
    /// where the interval has a gap.
    fn rates(&self, rates: &Rates) -> Vec<(Metric, String, Option<f64>)> {
        let mut out = Vec::new();
        if self.has(Metric::Drops) {
            for layer in &rates.drops.layers {
                if layer.layer == Layer::Softnet {
                    continue;
                }
                out.push((
                    Metric::Drops,
                    format!("{} drops", layer.layer.title()),
                    layer.drops_per_sec,
                ));
            }
        }
        if self.has(Metric::Softnet) {
            for name in ["dropped", "time_squeeze"] {
                let rate = rates
                    .drops
                    .layer(Layer::Softnet)
                    .and_then(|l| l.counters.iter().find(|c| c.name == name))
                    .and_then(|c| c.per_sec);
                let shown = if name == "dropped" {
                    "softnet backlog drops"
                } else {
                    "softnet time squeezes"
                };
                out.push((Metric::Softnet, shown.to_string(), rate));
            }
        }
        if self.has(Metric::UdpRcvbuf) {
            let sum = [Layer::Udp, Layer::Udp6]
                .iter()
                .filter_map(|layer| {
                    rates
                        .drops
                        .layer(*layer)?
                        .counters
                        .iter()
                        .find(|c| c.name == "RcvbufErrors")
                        .map(|c| c.per_sec)
                })
                .collect::<Vec<_>>();
            let rate = if sum.is_empty() {
                None
            } else {
                sum.into_iter().try_fold(0.0, |a, r| Some(a + r?))
            };
            out.push((Metric::UdpRcvbuf, "UDP RcvbufErrors".to_string(), rate));
        }
        out
    }

    /// The findings this guard counts: at warn or above, and in a
    /// namespace only those made from the namespace's own counters.
    fn findings<'a>(&self, found: &'a [LiveFinding]) -> Vec<&'a LiveFinding> {
        if !self.has(Metric::Findings) {
            return Vec::new();
        }
        found
            .iter()
            .filter(|f| f.severity >= Severity::Warn)
            .filter(|f| !(self.namespace && HOST_WIDE_FINDINGS.contains(&f.id.as_str())))
            .collect()
    }
}

/// What the receive path looked like before the change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baseline {
    /// Seconds of intervals it was measured over.
    pub secs: f64,
    /// Each watched rate's baseline per second (`None`: no interval
    /// without a gap).
    pub rates: BTreeMap<String, Option<f64>>,
    /// The ids of the findings at warn or above any interval showed.
    pub findings: BTreeSet<String>,
}

impl Baseline {
    /// The baseline of consecutive `samples` (at least two), as `watch`
    /// sees them.
    pub fn of(watch: &Watch, samples: &[Sample]) -> Baseline {
        let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        let mut names: Vec<String> = Vec::new();
        let mut seen = BTreeSet::new();
        let mut secs = 0.0;
        for pair in samples.windows(2) {
            let rates = between(&pair[0], &pair[1]);
            secs += rates.interval_secs.max(0.0);
            for (_, name, rate) in watch.rates(&rates) {
                if !names.contains(&name) {
                    names.push(name.clone());
                }
                if let Some(rate) = rate.filter(|_| rates.interval_secs > 0.0) {
                    let sum = sums.entry(name).or_default();
                    sum.0 += rate * rates.interval_secs;
                    sum.1 += rates.interval_secs;
                }
            }
            for f in watch.findings(&findings(&rates, &pair[1].state)) {
                seen.insert(f.id.clone());
            }
        }
        let rates = names
            .into_iter()
            .map(|name| {
                let rate = sums
                    .get(&name)
                    .filter(|(_, secs)| *secs > 0.0)
                    .map(|(count, secs)| count / secs);
                (name, rate)
            })
            .collect();
        Baseline {
            secs,
            rates,
            findings: seen,
        }
    }
}

/// One condition that fired.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fired {
    pub metric: Metric,
    /// `UDP drops`, `softnet time squeezes`, `finding udp.rcvbuf-errors`.
    pub what: String,
    /// For a rate: the baseline, the interval's rate, and the limit it
    /// passed (per second).
    pub baseline_per_sec: Option<f64>,
    pub now_per_sec: Option<f64>,
    pub limit_per_sec: Option<f64>,
    /// For a finding: its severity and evidence.
    pub severity: Option<Severity>,
    pub evidence: Option<String>,
}

impl Fired {
    /// One line: `UDP drops 8,300/s (baseline 0/s, limit 100/s)`.
    pub fn line(&self) -> String {
        match (self.now_per_sec, self.baseline_per_sec, self.limit_per_sec) {
            (Some(now), Some(base), Some(limit)) => format!(
                "{} {}/s (baseline {}/s, limit {}/s)",
                self.what,
                count(now),
                count(base),
                count(limit)
            ),
            _ => format!(
                "{} at {} (not in the baseline): {}",
                self.what,
                self.severity.map_or("warn", Severity::label),
                self.evidence.as_deref().unwrap_or("")
            ),
        }
    }
}

fn count(rate: f64) -> String {
    format_count(rate.max(0.0).round() as u64)
}

/// What one interval after the change shows against the baseline: every
/// condition that fired (empty: not worse).
pub fn judge(watch: &Watch, baseline: &Baseline, prev: &Sample, cur: &Sample) -> Vec<Fired> {
    let rates = between(prev, cur);
    if rates.interval_secs <= 0.0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (metric, name, rate) in watch.rates(&rates) {
        let Some(now) = rate else { continue };
        // A rate the baseline could not measure (every interval a gap)
        // is taken as none before.
        let base = baseline.rates.get(&name).copied().flatten().unwrap_or(0.0);
        if worse(base, now) {
            out.push(Fired {
                metric,
                what: name,
                baseline_per_sec: Some(base),
                now_per_sec: Some(now),
                limit_per_sec: Some(limit(base)),
                severity: None,
                evidence: None,
            });
        }
    }
    for f in watch.findings(&findings(&rates, &cur.state)) {
        if !baseline.findings.contains(&f.id) {
            out.push(Fired {
                metric: Metric::Findings,
                what: format!("finding {}", f.id),
                baseline_per_sec: None,
                now_per_sec: None,
                limit_per_sec: None,
                severity: Some(f.severity),
                evidence: Some(f.evidence.clone()),
            });
        }
    }
    out
}

/// The guard's verdict over a whole run: the baseline from `before`, then
/// each interval of `after` (its first sample taken right after the
/// change) judged in turn until one is worse. `Some((interval, fired))`:
/// the 1-based interval that fired.
pub fn verdict(
    watch: &Watch,
    before: &[Sample],
    after: &[Sample],
) -> (Baseline, Option<(usize, Vec<Fired>)>) {
    let baseline = Baseline::of(watch, before);
    for (i, pair) in after.windows(2).enumerate() {
        let fired = judge(watch, &baseline, &pair[0], &pair[1]);
        if !fired.is_empty() {
            return (baseline, Some((i + 1, fired)));
        }
    }
    (baseline, None)
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
