//! The text both pages (and the command line's summary) share: rates,
//! cells, the header facts and the warnings.

use crate::base::units::format_count;
use crate::experiment::results::{Cell, Results};
use crate::experiment::stats::Verdict;

pub fn rate(v: f64) -> String {
    if v >= 100.0 {
        format_count(v.round() as u64)
    } else {
        format!("{v:.1}")
    }
}

/// "35,210 (+148%, 95% CI +140%..+155%, better)".
pub fn cell(cell: &Cell) -> String {
    let c = &cell.comparison;
    let rate = rate(cell.summary.median);
    if c.verdict == Verdict::Reference {
        return format!("{rate} (reference)");
    }
    format!("{rate} ({}, {})", c.text(), c.verdict.word())
}

/// A table: its header and its rows.
pub type Table = (Vec<String>, Vec<Vec<String>>);

/// The drops per reason of `bench` under each config, for the table
/// that shows which config removed which drops: the header (reason,
/// layer, then one column per config) and a row per (reason, layer)
/// any config saw, most drops under the reference first. `None` when
/// no run of the bench was traced.
pub fn reasons(r: &Results, bench: &str) -> Option<Table> {
    let cells: Vec<&Cell> = r
        .configs
        .iter()
        .filter_map(|c| r.cell(&c.name, bench))
        .collect();
    if cells.iter().all(|c| c.reasons.is_none()) {
        return None;
    }
    let count = |cell: &Cell, reason: &str, layer| {
        cell.reasons.as_ref().map(|rs| {
            rs.iter()
                .find(|x| x.reason == reason && x.layer == layer)
                .map_or(0, |x| x.count)
        })
    };
    let mut keys: Vec<(String, crate::base::drop_layer::Layer)> = cells
        .iter()
        .flat_map(|c| c.reasons.iter().flatten())
        .map(|x| (x.reason.clone(), x.layer))
        .collect();
    keys.sort();
    keys.dedup();
    let reference = cells.first().copied();
    let weight = |k: &(String, crate::base::drop_layer::Layer)| {
        cells
            .iter()
            .map(|c| count(c, &k.0, k.1).unwrap_or(0))
            .collect::<Vec<u64>>()
    };
    keys.sort_by_key(|k| std::cmp::Reverse(weight(k)));
    let mut header = vec!["reason".to_string(), "layer".to_string()];
    header.extend(cells.iter().map(|c| c.config.clone()));
    let rows = keys
        .iter()
        .map(|(reason, layer)| {
            let base = reference.and_then(|c| count(c, reason, *layer));
            let mut row = vec![reason.clone(), layer.title().to_string()];
            for (i, cell) in cells.iter().enumerate() {
                row.push(match (count(cell, reason, *layer), base) {
                    (None, _) => "not traced".to_string(),
                    (Some(0), Some(b)) if i > 0 && b > 0 => "0 (removed)".to_string(),
                    (Some(n), Some(0)) if i > 0 && n > 0 => {
                        format!("{} (new)", format_count(n))
                    }
                    (Some(n), _) => format_count(n),
                });
            }
            row
        })
        .collect();
    Some((header, rows))
}

/// min..max over the runs, and the spread.
pub fn spread(cell: &Cell) -> String {
    format!(
        "{} runs, {}..{}, spread {:.1}%",
        cell.summary.n,
        rate(cell.summary.min),
        rate(cell.summary.max),
        cell.summary.cv * 100.0
    )
}

fn pct(v: Option<f64>) -> String {
    v.map_or("unknown".to_string(), |v| format!("{v:.1}%"))
}

/// The header facts: host, load, place, runs, timing.
pub fn facts(r: &Results) -> Vec<(String, String)> {
    let h = &r.host;
    let s = &r.settings;
    let load = |l: &Option<[f64; 3]>| {
        l.map_or("unknown".to_string(), |l| {
            format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2])
        })
    };
    let place = match (&s.testbed, &s.tuned_netns) {
        _ if s.remote.is_some() => format!(
            "server sides started by `nettune serve` at {}; clients in {}; configs applied \
             in {}",
            s.remote.as_deref().unwrap_or("-"),
            s.client_netns.as_deref().unwrap_or("this host's namespace"),
            s.tuned_netns.as_deref().unwrap_or("this host")
        ),
        (Some(tb), _) => format!(
            "testbed {tb}: server in {}, client in {}, configs applied in {}",
            s.server_netns.as_deref().unwrap_or("-"),
            s.client_netns.as_deref().unwrap_or("-"),
            s.tuned_netns.as_deref().unwrap_or("the host")
        ),
        (None, Some(ns)) => format!("configs applied in network namespace {ns}"),
        (None, None) => "configs applied to this host".to_string(),
    };
    vec![
        (
            "host".to_string(),
            format!(
                "{}, kernel {}, {} CPUs, nettune {}",
                h.hostname.as_deref().unwrap_or("unknown"),
                h.kernel.as_deref().unwrap_or("unknown"),
                h.online_cpus.len(),
                r.nettune_version
            ),
        ),
        (
            "load".to_string(),
            format!(
                "load average {} before, {} after; CPU time used by other processes {}, \
                 stolen by other guests {}; busy {}",
                load(&h.load_before),
                load(&h.load_after),
                pct(h.others_percent),
                pct(h.steal_percent),
                pct(h.busy_percent)
            ),
        ),
        ("place".to_string(), place),
        (
            "runs".to_string(),
            format!(
                "{} config(s) x {} bench(es) x {} repeat(s), {} s each after {} s warm-up, \
                 server pinned to CPUs {}, interleaved (config order shuffled per round, --seed={})",
                r.configs.len(),
                r.benches.len(),
                s.repeat,
                s.duration_s,
                s.warmup_s,
                if s.server_pin.is_empty() {
                    "none".to_string()
                } else {
                    crate::base::cpuset::format_list(&s.server_pin)
                },
                s.seed
            ),
        ),
        (
            "time".to_string(),
            format!(
                "{:.1} s in all, {:.1} s of it the benches' own warm-up and measurement; \
                 overhead {:.1} s ({:.1}%), of which applying and rolling back {:.2} s",
                r.timing.wall_s,
                r.timing.bench_s,
                r.timing.overhead_s,
                r.timing.overhead_percent,
                r.timing.tuning_s
            ),
        ),
        (
            "ended".to_string(),
            format!(
                "{} ({} of {} runs){}",
                r.ended,
                r.runs.len(),
                r.configs.len() * r.benches.len() * s.repeat as usize,
                if r.complete { "" } else { ": INCOMPLETE" }
            ),
        ),
    ]
}

/// Warnings worth reading before the numbers.
pub fn warnings(r: &Results) -> Vec<String> {
    let mut out = Vec::new();
    if !r.complete {
        out.push(format!(
            "the experiment ended early ({}): the cells hold only the runs made",
            r.ended
        ));
    }
    if let Some(steal) = r.host.steal_percent.filter(|s| *s > 5.0) {
        out.push(format!(
            "{steal:.1}% of the CPU time was stolen by other guests: noisy neighbours"
        ));
    }
    if let Some(others) = r.host.others_percent.filter(|o| *o > 10.0) {
        out.push(format!(
            "other processes used {others:.0}% of all CPU time during the experiment: the runs \
             compete with them (quiet the host for tighter intervals; each run's share is \
             in results.json, runs[].usage.others_percent)"
        ));
    }
    for cell in &r.cells {
        if let Some(w) = &cell.comparison.warning {
            out.push(format!("{} x {}: {w}", cell.config, cell.bench));
        }
    }
    for c in &r.configs {
        if c.kind != "current" && c.changes.is_empty() {
            out.push(format!(
                "config '{}' changed nothing here (the host already had its values, or \
                 the kernel refused them): it measures the host as found",
                c.name
            ));
        }
    }
    out
}
