//! report.html: one self-contained page (no scripts, no files beside it):
//! the facts, the matrix, the charts inline as SVG, the per-CPU tables and
//! what each config changed.

use std::fmt::Write as _;

use super::charts::Charts;
use super::text;
use crate::experiment::results::Results;
use crate::experiment::stats::Verdict;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:1100px;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:4px 8px;\
text-align:right}th{background:#eee}td:first-child,th:first-child{text-align:left}\
.better{background:#d8f0d8}.worse{background:#f6d6d6}.same{background:#f4f4f4}\
.warn{color:#8a4b00}figure{margin:1.5em 0}figcaption{font-size:90%;color:#555}\
dt{font-weight:bold}dd{margin:0 0 .4em 1.5em}code{background:#f2f2f2;padding:0 3px}";

pub fn report(r: &Results, charts: &Charts) -> String {
    let names: Vec<&str> = r.configs.iter().map(|c| c.name.as_str()).collect();
    let title = format!("nettune experiment: {}", names.join(" vs "));
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head><body>\n<h1>{}</h1>\n<dl>",
        esc(&title),
        esc(&title)
    );
    for (k, v) in text::facts(r) {
        let _ = write!(o, "<dt>{}</dt><dd>{}</dd>", esc(&k), esc(&v));
    }
    let _ = writeln!(
        o,
        "<dt>command</dt><dd><code>{}</code></dd></dl>",
        esc(&r.command.join(" "))
    );
    let warnings = text::warnings(r);
    if !warnings.is_empty() {
        let _ = write!(o, "<h2>Warnings</h2><ul>");
        for w in warnings {
            let _ = write!(o, "<li class=\"warn\">{}</li>", esc(&w));
        }
        let _ = writeln!(o, "</ul>");
    }
    matrix(&mut o, r);
    let _ = writeln!(o, "<h2>Charts</h2>");
    for chart in charts.all() {
        let _ = writeln!(
            o,
            "<figure>{}<figcaption>{}</figcaption></figure>",
            strip_prolog(&chart.svg),
            esc(&chart.title)
        );
    }
    cpu_tables(&mut o, r);
    changes(&mut o, r);
    reasons(&mut o, r);
    let _ = writeln!(o, "</body></html>");
    o
}

/// The SVG element alone (an XML declaration is not allowed inside HTML).
fn strip_prolog(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

fn matrix(o: &mut String, r: &Results) {
    let reference = r.configs.first().map_or("", |c| c.name.as_str());
    let _ = write!(
        o,
        "<h2>Results</h2><p>Median of the runs; the change against <code>{}</code> with its \
         bootstrap 95% confidence interval, and the verdict.</p><table><tr><th>config</th>",
        esc(reference)
    );
    for b in &r.benches {
        let _ = write!(o, "<th>{} ({})</th>", esc(&b.name), esc(&b.metric));
    }
    let _ = write!(o, "</tr>");
    for c in &r.configs {
        let _ = write!(o, "<tr><td>{}</td>", esc(&c.name));
        for b in &r.benches {
            match r.cell(&c.name, &b.name) {
                Some(cell) => {
                    let class = match cell.comparison.verdict {
                        Verdict::Better => "better",
                        Verdict::Worse => "worse",
                        _ => "same",
                    };
                    let _ = write!(
                        o,
                        "<td class=\"{class}\" title=\"{}\">{}</td>",
                        esc(&text::spread(cell)),
                        esc(&text::cell(cell))
                    );
                }
                None => o.push_str("<td>not run</td>"),
            }
        }
        let _ = write!(o, "</tr>");
    }
    let _ = writeln!(o, "</table>");
}

fn cpu_tables(o: &mut String, r: &Results) {
    let _ = writeln!(o, "<h2>Where the CPU time went</h2>");
    for b in &r.benches {
        let _ = write!(
            o,
            "<h3>{}</h3><table><tr><th>config</th><th>CPU</th><th>%usr</th><th>%sys</th>\
             <th>%irq</th><th>%soft</th><th>%steal</th><th>%idle</th><th>softnet dropped</th>\
             <th>UDP RcvbufErrors</th></tr>",
            esc(&b.name)
        );
        for c in &r.configs {
            let Some(cell) = r.cell(&c.name, &b.name) else {
                continue;
            };
            for (i, row) in cell.cpus.iter().enumerate() {
                let drops = if i == 0 {
                    format!(
                        "<td>{}</td><td>{}</td>",
                        cell.drops.softnet_dropped, cell.drops.udp_rcvbuf_errors
                    )
                } else {
                    "<td></td><td></td>".to_string()
                };
                let _ = write!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td>\
                     <td>{:.2}</td><td>{:.2}</td><td>{:.2}</td>{drops}</tr>",
                    esc(&c.name),
                    esc(&row.cpu),
                    row.shares.usr,
                    row.shares.sys,
                    row.shares.irq,
                    row.shares.soft,
                    row.shares.steal,
                    row.shares.idle
                );
            }
        }
        let _ = writeln!(o, "</table>");
    }
}

/// Last: the drops by the kernel's reason, per bench, under each config.
fn reasons(o: &mut String, r: &Results) {
    let mut first = true;
    for b in &r.benches {
        let Some((header, rows)) = text::reasons(r, &b.name) else {
            continue;
        };
        if first {
            first = false;
            let _ = writeln!(
                o,
                "<h2>Drops by the kernel's reason</h2><p>The median over the runs of the packets \
                 the kernel dropped in the measured part, by the reason it gave: which config \
                 removed which drops.</p>"
            );
        }
        let _ = write!(o, "<h3>{}</h3><table><tr>", esc(&b.name));
        for h in &header {
            let _ = write!(o, "<th>{}</th>", esc(h));
        }
        let _ = writeln!(o, "</tr>");
        if rows.is_empty() {
            let _ = writeln!(o, "<tr><td colspan=\"{}\">no drops</td></tr>", header.len());
        }
        for row in rows {
            let _ = write!(o, "<tr>");
            for v in &row {
                let _ = write!(o, "<td>{}</td>", esc(v));
            }
            let _ = writeln!(o, "</tr>");
        }
        let _ = writeln!(o, "</table>");
    }
}

fn changes(o: &mut String, r: &Results) {
    let _ = writeln!(o, "<h2>What each config changed</h2>");
    for c in &r.configs {
        let _ = write!(o, "<h3>{} ({})</h3><ul>", esc(&c.name), esc(&c.kind));
        if c.changes.is_empty() {
            let _ = write!(o, "<li>nothing</li>");
        }
        for ch in &c.changes {
            let _ = write!(
                o,
                "<li><code>{}</code>: <code>{}</code> &rarr; <code>{}</code></li>",
                esc(&ch.target),
                esc(&ch.from),
                esc(&ch.to)
            );
        }
        for why in &c.refused {
            let _ = write!(
                o,
                "<li>refused by the kernel, left alone: {}</li>",
                esc(why)
            );
        }
        let _ = writeln!(o, "</ul>");
    }
}
