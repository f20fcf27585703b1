//! Doctor's output: a short review for people, JSON for scripts.

use std::io::{self, Write};

use serde::Serialize;

use super::{Finding, Severity};
use crate::error::Status;

/// Width the text review wraps to.
const WIDTH: usize = 88;
/// Column where a finding's fields start ("  seen: ").
const LABEL_WIDTH: usize = 8;

/// Counts by severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub crit: usize,
    pub warn: usize,
    pub info: usize,
}

impl Summary {
    pub fn of(findings: &[Finding]) -> Summary {
        let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
        Summary {
            crit: count(Severity::Crit),
            warn: count(Severity::Warn),
            info: count(Severity::Info),
        }
    }
}

/// What `doctor --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Worst first.
    pub findings: Vec<Finding>,
    pub summary: Summary,
    /// Ids given with `--ignore`.
    pub ignored: Vec<String>,
    /// Findings that `--ignore` silenced.
    pub suppressed: usize,
    /// Seconds between the two counter samples; `null`: totals since boot.
    pub sampled_seconds: Option<f64>,
}

impl Report {
    /// `findings` (from `diagnose`) without the ignored ids.
    pub fn new(findings: Vec<Finding>, ignored: &[String], sampled_seconds: Option<f64>) -> Report {
        let before = findings.len();
        let findings: Vec<Finding> = findings
            .into_iter()
            .filter(|f| !ignored.iter().any(|id| id == f.id))
            .collect();
        Report {
            summary: Summary::of(&findings),
            suppressed: before - findings.len(),
            ignored: ignored.to_vec(),
            sampled_seconds,
            findings,
        }
    }

    /// `Findings` (exit 1) when anything is at warn or above.
    pub fn status(&self) -> Status {
        if self.findings.iter().any(|f| f.severity >= Severity::Warn) {
            Status::Findings
        } else {
            Status::Clean
        }
    }
}

/// The review: a count line, then each finding worst first with what was
/// seen, why it matters and the fix. A mechanism already explained for the
/// same id, or a fix already given, is not repeated.
pub fn render_text(findings: &[Finding], w: &mut dyn Write) -> io::Result<()> {
    let summary = Summary::of(findings);
    if findings.is_empty() {
        return writeln!(
            w,
            "No findings: nothing on this host's network path needs attention."
        );
    }
    let mut counts = Vec::new();
    for (n, one, many) in [
        (summary.crit, "critical", "critical"),
        (summary.warn, "warning", "warnings"),
        (summary.info, "note", "notes"),
    ] {
        if n > 0 {
            counts.push(format!("{n} {}", if n == 1 { one } else { many }));
        }
    }
    writeln!(w, "{}, worst first.", counts.join(", "))?;
    let mut explained: Vec<&str> = Vec::new();
    let mut fixes: Vec<(&str, &str)> = Vec::new();
    for f in findings {
        writeln!(w)?;
        writeln!(
            w,
            "{:<6}{}  [{}]",
            f.severity.label().to_uppercase(),
            f.title,
            f.id
        )?;
        write_wrapped(w, "seen:", &f.evidence, LABEL_WIDTH)?;
        if !explained.contains(&f.id) {
            write_wrapped(w, "why:", &f.why, LABEL_WIDTH)?;
            explained.push(f.id);
        }
        let fix = match fixes.iter().find(|(_, text)| *text == f.fix) {
            Some((id, _)) => format!("the same as for {id} above."),
            None => {
                fixes.push((f.id, &f.fix));
                match f.profile {
                    Some(p) => format!("{} [nettune plan --profile {p}]", f.fix),
                    None => f.fix.clone(),
                }
            }
        };
        write_wrapped(w, "fix:", &fix, LABEL_WIDTH)?;
    }
    Ok(())
}

/// Write `label` then `text` wrapped at [`WIDTH`], continuation lines
/// indented by `indent`.
fn write_wrapped(w: &mut dyn Write, label: &str, text: &str, indent: usize) -> io::Result<()> {
    let mut line = format!("  {label:<width$}", width = indent - 2);
    let mut line_has_word = false;
    for word in text.split_whitespace() {
        if line_has_word && line.chars().count() + 1 + word.chars().count() > WIDTH {
            writeln!(w, "{}", line.trim_end())?;
            line = " ".repeat(indent);
            line_has_word = false;
        }
        if line_has_word {
            line.push(' ');
        }
        line.push_str(word);
        line_has_word = true;
    }
    writeln!(w, "{}", line.trim_end())
}

/// The JSON document, pretty-printed, with a final newline.
pub fn render_json(report: &Report, w: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, report).map_err(io::Error::from)?;
    writeln!(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::testkit::*;

    fn text(findings: &[Finding]) -> String {
        let mut out = Vec::new();
        render_text(findings, &mut out).expect("render");
        String::from_utf8(out).expect("utf8")
    }

    #[test]
    fn review_of_the_vm_reads_worst_first_with_numbers() {
        let review = text(&diagnose(&vm_2cpu_single_queue()));
        let first = review.lines().next().expect("summary line");
        assert_eq!(first, "4 warnings, 1 note, worst first.");
        // The note comes last.
        let warn_at = review.find("[rps.off]").expect("rps.off shown");
        let info_at = review.find("[cpu.mitigations]").expect("mitigations shown");
        assert!(
            review.contains("WARN  eth0: 1 RX queue for 2 CPUs and RPS off  [rps.off]"),
            "{review}"
        );
        assert!(warn_at < info_at, "{review}");
        assert!(review.contains("[nettune plan --profile pps]"), "{review}");
        assert!(
            review.lines().all(|l| l.chars().count() <= WIDTH),
            "{review}"
        );
    }

    #[test]
    fn review_does_not_repeat_a_mechanism_or_a_fix() {
        let mut host = two_socket_smt_8q();
        let mut eth1 = host.interfaces[0].clone();
        eth1.name = "eth1".into();
        host.interfaces.push(eth1);
        for iface in &mut host.interfaces {
            for q in &mut iface.rx_queues {
                q.rps_flow_cnt = Some(0);
            }
        }
        let findings = diagnose(&host);
        let rfs: Vec<&Finding> = findings.iter().filter(|f| f.id == "rfs.partial").collect();
        assert_eq!(rfs.len(), 2);
        let review = text(&findings);
        assert_eq!(review.matches("why:").count(), 2, "{review}"); // rfs once + mitigations
                                                                   // Two findings with one fix text print it once.
        let mut same = findings.clone();
        same[1].fix = same[0].fix.clone();
        let review = text(&same);
        assert!(
            review.contains(&format!("the same as for {} above", same[0].id)),
            "{review}"
        );
    }

    #[test]
    fn clean_host_says_so() {
        assert_eq!(
            text(&[]),
            "No findings: nothing on this host's network path needs attention.\n"
        );
    }

    #[test]
    fn json_has_the_contract_fields_and_summary() {
        let findings = diagnose(&vm_2cpu_single_queue());
        let report = Report::new(findings, &["cpu.mitigations".to_string()], Some(2.0));
        let mut out = Vec::new();
        render_json(&report, &mut out).expect("json");
        let v: serde_json::Value = serde_json::from_slice(&out).expect("parse");
        let first = &v["findings"][0];
        for key in [
            "id", "severity", "title", "evidence", "why", "fix", "profile",
        ] {
            assert!(first.get(key).is_some(), "missing {key}: {first}");
        }
        assert_eq!(first["severity"], "warn");
        assert_eq!(v["summary"]["warn"], 4);
        assert_eq!(v["summary"]["info"], 0);
        assert_eq!(v["suppressed"], 1);
        assert_eq!(v["ignored"][0], "cpu.mitigations");
        assert_eq!(v["sampled_seconds"], 2.0);
        assert_eq!(report.status(), Status::Findings);
    }

    #[test]
    fn status_is_clean_with_only_notes() {
        let findings = diagnose(&two_socket_smt_8q());
        assert!(
            findings.iter().all(|f| f.severity == Severity::Info),
            "{findings:#?}"
        );
        assert_eq!(Report::new(findings, &[], None).status(), Status::Clean);
    }
}
