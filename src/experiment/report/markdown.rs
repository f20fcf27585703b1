//! report.md: the matrix as the SMP IRQ affinity and RPS/RFS article shows
//! it (configs x benches, the rate and the change against the first
//! config), then the per-CPU time table of each cell (mpstat's columns),
//! the charts, and what each config changed.

use std::fmt::Write as _;

use super::charts::Charts;
use super::text;
use crate::experiment::results::Results;

pub fn report(r: &Results, charts: &Charts) -> String {
    let mut o = String::new();
    let names: Vec<&str> = r.configs.iter().map(|c| c.name.as_str()).collect();
    let _ = writeln!(o, "# nettune experiment: {}\n", names.join(" vs "));
    for (k, v) in text::facts(r) {
        let _ = writeln!(o, "- **{k}**: {v}");
    }
    let _ = writeln!(o, "- **command**: `{}`", r.command.join(" "));
    let warnings = text::warnings(r);
    if !warnings.is_empty() {
        let _ = writeln!(o, "\n## Warnings\n");
        for w in warnings {
            let _ = writeln!(o, "- {w}");
        }
    }
    matrix(&mut o, r);
    cpu_tables(&mut o, r);
    let _ = writeln!(o, "\n## Charts\n");
    for chart in charts.all() {
        let _ = writeln!(o, "![{}]({})\n", chart.title, chart.file);
    }
    changes(&mut o, r);
    reasons(&mut o, r);
    o
}

/// Last: the drops by the kernel's reason, per bench, under each config.
fn reasons(o: &mut String, r: &Results) {
    let tables: Vec<(&str, text::Table)> = r
        .benches
        .iter()
        .filter_map(|b| Some((b.name.as_str(), text::reasons(r, &b.name)?)))
        .collect();
    if tables.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "## Drops by the kernel's reason\n\nThe median over the runs of the packets the kernel \
         dropped in the measured part, by the reason it gave (skb:kfree_skb; docs/trace.md says \
         what each means and its fix): which config removed which drops.\n"
    );
    for (bench, (header, rows)) in tables {
        let _ = writeln!(o, "### {bench}\n");
        let _ = writeln!(o, "| {} |", header.join(" | "));
        let _ = writeln!(o, "|{}", "---|".repeat(header.len()));
        if rows.is_empty() {
            let _ = writeln!(o, "| none | | {}", "0 | ".repeat(header.len() - 2));
        }
        for row in rows {
            let _ = writeln!(o, "| {} |", row.join(" | "));
        }
        let _ = writeln!(o);
    }
}

fn matrix(o: &mut String, r: &Results) {
    let reference = r.configs.first().map_or("", |c| c.name.as_str());
    let _ = writeln!(
        o,
        "\n## Results\n\nMedian of the runs; in brackets the change against `{reference}` with \
         its bootstrap 95% confidence interval, and the verdict (better, worse, or no difference \
         at this noise).\n"
    );
    let mut head = "| config |".to_string();
    let mut rule = "|---|".to_string();
    for b in &r.benches {
        let _ = write!(head, " {} ({}) |", b.name, b.metric);
        rule.push_str("---|");
    }
    let _ = writeln!(o, "{head}\n{rule}");
    for c in &r.configs {
        let mut row = format!("| {} |", c.name);
        for b in &r.benches {
            match r.cell(&c.name, &b.name) {
                Some(cell) => {
                    let _ = write!(row, " {} |", text::cell(cell));
                }
                None => row.push_str(" not run |"),
            }
        }
        let _ = writeln!(o, "{row}");
    }
    let _ = writeln!(o, "\nSpread of the runs:\n");
    let _ = writeln!(o, "{head}\n{rule}");
    for c in &r.configs {
        let mut row = format!("| {} |", c.name);
        for b in &r.benches {
            let spread = r
                .cell(&c.name, &b.name)
                .map_or("-".to_string(), text::spread);
            let _ = write!(row, " {spread} |");
        }
        let _ = writeln!(o, "{row}");
    }
}

fn cpu_tables(o: &mut String, r: &Results) {
    let _ = writeln!(
        o,
        "\n## Where the CPU time went\n\nPer CPU, the median over the runs of the measured part \
         (mpstat's columns; softnet and UDP drop counters beside).\n"
    );
    for b in &r.benches {
        let _ = writeln!(o, "### {}\n", b.name);
        let _ = writeln!(
            o,
            "| config | CPU | %usr | %sys | %irq | %soft | %steal | %idle |\n|---|---|---|---|---|---|---|---|"
        );
        for c in &r.configs {
            let Some(cell) = r.cell(&c.name, &b.name) else {
                continue;
            };
            for row in &cell.cpus {
                let s = &row.shares;
                let _ = writeln!(
                    o,
                    "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                    c.name, row.cpu, s.usr, s.sys, s.irq, s.soft, s.steal, s.idle
                );
            }
        }
        let _ = writeln!(
            o,
            "\n| config | softnet dropped | time_squeeze | UDP RcvbufErrors | UDP InErrors | TCP ListenDrops |\n|---|---|---|---|---|---|"
        );
        for c in &r.configs {
            if let Some(cell) = r.cell(&c.name, &b.name) {
                let d = &cell.drops;
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} | {} |",
                    c.name,
                    d.softnet_dropped,
                    d.softnet_time_squeeze,
                    d.udp_rcvbuf_errors,
                    d.udp_in_errors,
                    d.tcp_listen_drops
                );
            }
        }
        let _ = writeln!(o);
    }
}

fn changes(o: &mut String, r: &Results) {
    let _ = writeln!(o, "## What each config changed\n");
    for c in &r.configs {
        let _ = writeln!(o, "### {} ({})\n", c.name, c.kind);
        if c.changes.is_empty() {
            let _ = writeln!(o, "Nothing.\n");
        }
        for ch in &c.changes {
            let _ = writeln!(o, "- `{}`: `{}` -> `{}`", ch.target, ch.from, ch.to);
        }
        for why in &c.refused {
            let _ = writeln!(o, "- refused by the kernel, left alone: {why}");
        }
        if !c.changes.is_empty() || !c.refused.is_empty() {
            let _ = writeln!(o);
        }
    }
}
