//! `experiment compare A B`: the cells two experiments have in common
//! (same config and bench names), B against A, with the same statistics as
//! within one experiment; and what differs between the two runs' hosts and
//! settings, which may explain a difference better than the tuning does.

use serde::Serialize;

use super::results::Results;
use super::run::stats_seed;
use super::stats::{self, Comparison, Rng};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub a: String,
    pub b: String,
    /// What differs between the two experiments besides their results.
    pub notes: Vec<String>,
    pub cells: Vec<DiffCell>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffCell {
    pub config: String,
    pub bench: String,
    pub metric: String,
    pub a_median: f64,
    pub b_median: f64,
    /// B over A.
    pub comparison: Comparison,
}

fn differ<T: PartialEq + std::fmt::Debug>(notes: &mut Vec<String>, what: &str, a: T, b: T) {
    if a != b {
        notes.push(format!("{what} differs: {a:?} in A, {b:?} in B"));
    }
}

pub fn compare(a: &Results, b: &Results, a_name: &str, b_name: &str) -> anyhow::Result<Diff> {
    let mut notes = Vec::new();
    differ(
        &mut notes,
        "host (machine id)",
        &a.host.machine_id,
        &b.host.machine_id,
    );
    differ(&mut notes, "kernel", &a.host.kernel, &b.host.kernel);
    differ(
        &mut notes,
        "nettune version",
        &a.nettune_version,
        &b.nettune_version,
    );
    differ(
        &mut notes,
        "online CPUs",
        &a.host.online_cpus,
        &b.host.online_cpus,
    );
    differ(
        &mut notes,
        "measured time per run (s)",
        a.settings.duration_s,
        b.settings.duration_s,
    );
    differ(
        &mut notes,
        "warm-up (s)",
        a.settings.warmup_s,
        b.settings.warmup_s,
    );
    differ(
        &mut notes,
        "server pinning",
        &a.settings.server_pin,
        &b.settings.server_pin,
    );
    differ(
        &mut notes,
        "testbed",
        a.settings.testbed.is_some(),
        b.settings.testbed.is_some(),
    );
    for (name, r) in [("A", a), ("B", b)] {
        if !r.complete {
            notes.push(format!("{name} is incomplete ({})", r.ended));
        }
        if let Some(steal) = r.host.steal_percent.filter(|s| *s > 5.0) {
            notes.push(format!(
                "{name} lost {steal:.1}% of its CPU time to other guests"
            ));
        }
    }
    let mut rng = Rng::new(stats_seed(a.settings.seed ^ b.settings.seed));
    let mut cells = Vec::new();
    for bench in &a.benches {
        for config in &a.configs {
            let (xa, xb) = (
                a.values(&config.name, &bench.name),
                b.values(&config.name, &bench.name),
            );
            if xa.is_empty() || xb.is_empty() {
                continue;
            }
            cells.push(DiffCell {
                config: config.name.clone(),
                bench: bench.name.clone(),
                metric: bench.metric.clone(),
                a_median: stats::median(&xa),
                b_median: stats::median(&xb),
                comparison: stats::compare(&xa, &xb, &mut rng),
            });
        }
    }
    if cells.is_empty() {
        anyhow::bail!(
            "{a_name} and {b_name} have no config x bench in common (configs {} and {}; benches \
             {} and {}): nothing to compare",
            names(a.configs.iter().map(|c| &c.name)),
            names(b.configs.iter().map(|c| &c.name)),
            names(a.benches.iter().map(|c| &c.name)),
            names(b.benches.iter().map(|c| &c.name)),
        );
    }
    Ok(Diff {
        a: a_name.to_string(),
        b: b_name.to_string(),
        notes,
        cells,
    })
}

fn names<'a>(it: impl Iterator<Item = &'a String>) -> String {
    it.map(String::as_str).collect::<Vec<_>>().join(", ")
}

pub fn text(d: &Diff) -> String {
    let mut o = format!("A: {}\nB: {}\n", d.a, d.b);
    for n in &d.notes {
        o.push_str(&format!("note: {n}\n"));
    }
    o.push_str(&format!(
        "\n{:<20}  {:<36}  {:>14}  {:>14}  {}\n",
        "config", "bench", "A (median)", "B (median)", "B vs A (95% CI), verdict"
    ));
    for c in &d.cells {
        let x = &c.comparison;
        o.push_str(&format!(
            "{:<20}  {:<36}  {:>14}  {:>14}  {}, {}\n",
            c.config,
            c.bench,
            super::report::text::rate(c.a_median),
            super::report::text::rate(c.b_median),
            x.text(),
            x.verdict.word()
        ));
        if let Some(w) = &x.warning {
            o.push_str(&format!("    warning: {w}\n"));
        }
    }
    o
}
