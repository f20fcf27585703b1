//! The fleet report as text for a terminal and as one self-contained HTML
//! page (no script, no external resource: it opens from a mail or a CI
//! artifact as it is).

use std::fmt::Write as _;

use super::{FleetReport, Shape};

/// Host names shown in a line of text before "+N more".
const NAMES_SHOWN: usize = 5;

/// "kernel 5.15.0, 16 CPUs, 2 nodes (0-7, 8-15), driver bnx2".
pub fn shape_text(shape: &Shape) -> String {
    let mut parts = Vec::new();
    parts.push(format!(
        "kernel {}",
        shape.kernel.as_deref().unwrap_or("unknown")
    ));
    match shape.cpus {
        Some(n) => parts.push(format!("{n} CPU{}", if n == 1 { "" } else { "s" })),
        None => parts.push("CPUs unknown".into()),
    }
    if let Some(numa) = &shape.numa {
        parts.push(numa.clone());
    }
    match shape.drivers.len() {
        0 => parts.push("no NIC driver named".into()),
        1 => parts.push(format!("driver {}", shape.drivers[0])),
        _ => parts.push(format!("drivers {}", shape.drivers.join(" + "))),
    }
    parts.join(", ")
}

fn names(list: &[String]) -> String {
    let shown: Vec<&str> = list.iter().take(NAMES_SHOWN).map(String::as_str).collect();
    let mut text = shown.join(", ");
    if list.len() > NAMES_SHOWN {
        let _ = write!(text, " +{} more", list.len() - NAMES_SHOWN);
    }
    text
}

fn hosts_word(n: usize) -> &'static str {
    if n == 1 {
        "host"
    } else {
        "hosts"
    }
}

/// The summary line: how many hosts, how many without findings, what was
/// skipped or read only in part.
fn summary(report: &FleetReport) -> String {
    let mut line = format!(
        "{} {} from {} ({} without findings)",
        report.hosts,
        hosts_word(report.hosts),
        report.dir.display(),
        report.clean_hosts
    );
    if !report.skipped.is_empty() {
        let _ = write!(line, "; {} files skipped", report.skipped.len());
    }
    if !report.newer_schema.is_empty() {
        let _ = write!(
            line,
            "; {} from a newer nettune, read where understood",
            report.newer_schema.len()
        );
    }
    if !report.without_host_block.is_empty() {
        let _ = write!(
            line,
            "; {} without a host block (an older nettune), grouped as unknown",
            report.without_host_block.len()
        );
    }
    line
}

pub fn text(report: &FleetReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", summary(report));
    if report.findings.is_empty() && report.hosts > 0 {
        let _ = writeln!(out, "No host has a finding.");
    }
    for f in &report.findings {
        let _ = writeln!(
            out,
            "\n{:>5} {} {}: {}",
            report_count(f.hosts),
            f.severity,
            f.id,
            f.title
        );
        for g in &f.groups {
            let _ = writeln!(
                out,
                "      {:>5} {}: {}",
                g.hosts,
                shape_text(&g.shape),
                names(&g.host_names)
            );
        }
    }
    if !report.skipped.is_empty() {
        let _ = writeln!(out, "\nSkipped:");
        for s in &report.skipped {
            let _ = writeln!(out, "  {}: {}", s.path.display(), s.reason);
        }
    }
    out
}

fn report_count(n: usize) -> String {
    format!("{n} {}", hosts_word(n))
}

/// HTML text: the five characters that could end an element or attribute.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub fn html(report: &FleetReport) -> String {
    let mut out = String::new();
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>nettune fleet report</title>\n<style>\
         body{font:14px system-ui,sans-serif;margin:2em}\
         table{border-collapse:collapse;width:100%}\
         th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}\
         th{background:#f3f3f3}td.n{text-align:right}\
         .critical,.warn{color:#a40000;font-weight:bold}.info,.note{color:#555}\
         </style></head><body>\n<h1>nettune fleet report</h1>\n",
    );
    let _ = writeln!(out, "<p id=\"summary\">{}</p>", esc(&summary(report)));
    out.push_str(
        "<table id=\"findings\">\n<thead><tr><th>severity</th><th>finding</th>\
         <th>hosts</th><th>shared by the hosts</th><th>hosts in the group</th>\
         <th>which</th></tr></thead>\n<tbody>\n",
    );
    for f in &report.findings {
        let rows = f.groups.len().max(1);
        for (i, g) in f.groups.iter().enumerate() {
            out.push_str("<tr>");
            if i == 0 {
                let _ = write!(
                    out,
                    "<td rowspan=\"{rows}\" class=\"{sev}\">{sev}</td>\
                     <td rowspan=\"{rows}\"><code>{id}</code><br>{title}</td>\
                     <td rowspan=\"{rows}\" class=\"n\">{hosts}</td>",
                    sev = esc(&f.severity),
                    id = esc(&f.id),
                    title = esc(&f.title),
                    hosts = f.hosts
                );
            }
            let _ = writeln!(
                out,
                "<td>{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                esc(&shape_text(&g.shape)),
                g.hosts,
                esc(&g.host_names.join(", "))
            );
        }
    }
    out.push_str("</tbody></table>\n");
    if !report.skipped.is_empty() {
        out.push_str("<h2>Skipped files</h2>\n<ul id=\"skipped\">\n");
        for s in &report.skipped {
            let _ = writeln!(
                out,
                "<li><code>{}</code>: {}</li>",
                esc(&s.path.display().to_string()),
                esc(&s.reason)
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escapes_what_a_report_file_controls() {
        assert_eq!(
            esc("<script>a&b\"'</script>"),
            "&lt;script&gt;a&amp;b&quot;&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn long_host_lists_are_cut_with_a_count() {
        let list: Vec<String> = (0..8).map(|i| format!("h{i}")).collect();
        assert_eq!(names(&list), "h0, h1, h2, h3, h4 +3 more");
    }
}
