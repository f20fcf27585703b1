//! Doctor's output: a short review for people, JSON for scripts.

use std::io::{self, Write};

use serde::Serialize;

use super::{Finding, PlannedChange, Severity};
use crate::error::Status;
use crate::plan::Target;

/// Width the text review wraps to.
const WIDTH: usize = 88;
/// Column where a finding's fields start ("  seen: ").
const LABEL_WIDTH: usize = 8;
/// At most this many lines list a finding's plan changes; "+N more" after.
const MAX_CHANGE_LINES: usize = 3;
/// How IRQ affinity targets are shown: "IRQ 120..127".
const IRQ_PREFIX: &str = "IRQ ";

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

/// The version of `doctor --json`'s layout: raised when a field changes
/// meaning or goes away (new fields do not raise it). 2: `schema_version`
/// and `host` added.
pub const SCHEMA_VERSION: u32 = 2;

/// What `doctor --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema_version: u32,
    /// Who the host is (set by whoever read it); absent in a report made
    /// from a model alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::host::identity::Identity>,
    /// Worst first.
    pub findings: Vec<Finding>,
    pub summary: Summary,
    /// Ids given with `--ignore`.
    pub ignored: Vec<String>,
    /// Findings that `--ignore` silenced.
    pub suppressed: usize,
    /// Seconds between the two counter samples; `null`: totals since boot.
    pub sampled_seconds: Option<f64>,
    /// Rules that could not be judged: their data could not be read.
    pub unjudged: Vec<super::Unjudged>,
    /// The drop reasons traced while sampling (`--trace`): every reason
    /// seen, with its kernel locations, and the UDP sockets that dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<super::TracedDrops>,
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
            schema_version: SCHEMA_VERSION,
            host: None,
            summary: Summary::of(&findings),
            suppressed: before - findings.len(),
            ignored: ignored.to_vec(),
            sampled_seconds,
            findings,
            unjudged: Vec::new(),
            trace: None,
        }
    }

    /// With the drop reasons traced while sampling.
    pub fn with_trace(mut self, trace: Option<super::TracedDrops>) -> Report {
        self.trace = trace;
        self
    }

    /// With the rules that could not be judged (see `coverage`).
    pub fn with_host(mut self, host: crate::host::identity::Identity) -> Report {
        self.host = Some(host);
        self
    }

    pub fn with_unjudged(mut self, unjudged: Vec<super::Unjudged>) -> Report {
        self.unjudged = unjudged;
        self
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
    let mut fixes: Vec<&Finding> = Vec::new();
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
        let same = fixes
            .iter()
            .find(|g| g.fix == f.fix && g.changes == f.changes);
        if let Some(earlier) = same {
            write_wrapped(
                w,
                "fix:",
                &format!("the same as for {} above.", earlier.id),
                LABEL_WIDTH,
            )?;
            continue;
        }
        fixes.push(f);
        match (f.profile, f.changes.is_empty()) {
            (Some(p), false) => {
                write_wrapped(w, "fix:", &f.fix, LABEL_WIDTH)?;
                write_wrapped(w, "", &plan_line(p, &f.changes), LABEL_WIDTH)?;
            }
            // The plan could not be made for this host: name the profile.
            (Some(p), true) => write_wrapped(
                w,
                "fix:",
                &format!("{} [nettune plan --profile {p}]", f.fix),
                LABEL_WIDTH,
            )?,
            (None, _) => write_wrapped(w, "fix:", &f.fix, LABEL_WIDTH)?,
        }
    }
    Ok(())
}

/// "nettune plan --profile pps: netdev_max_backlog 1000 -> 10000; eth0
/// rx-0..7 rps_cpus 0 -> ff00ff; +3 more", at most [`MAX_CHANGE_LINES`]
/// lines once wrapped.
fn plan_line(profile: &str, changes: &[PlannedChange]) -> String {
    let head = format!("nettune plan --profile {profile}:");
    let items = change_items(changes);
    let fits = |text: &str| wrap("", text, LABEL_WIDTH).len() <= MAX_CHANGE_LINES;
    let mut shown = items.len();
    loop {
        let mut text = format!("{head} {}", items[..shown].join("; "));
        if shown < items.len() {
            text.push_str(&format!("; +{} more", items.len() - shown));
        }
        if shown <= 1 || fits(&text) {
            return text;
        }
        shown -= 1;
    }
}

/// A target split around its number: `/proc/irq/74/smp_affinity_list` is
/// ("IRQ ", 74, ""), `.../eth0/queues/rx-3/rps_cpus` ("eth0 rx-", 3,
/// " rps_cpus"); targets without a number are (short name, None, "").
fn short_target(target: &Target) -> (String, Option<u32>, String) {
    let plain = |name: String| (name, None, String::new());
    match target {
        Target::Sysctl(name) => plain(name.rsplit('.').next().unwrap_or(name).to_string()),
        Target::IrqAffinity(irq) => (IRQ_PREFIX.to_string(), Some(*irq), String::new()),
        Target::Governor(cpu) => (
            "cpu".to_string(),
            Some(*cpu),
            " scaling_governor".to_string(),
        ),
        Target::RxQueue { iface, queue, file } => (
            format!("{iface} rx-"),
            Some(*queue),
            format!(" {}", file.name()),
        ),
        Target::TxQueue { iface, queue, file } => (
            format!("{iface} tx-"),
            Some(*queue),
            format!(" {}", file.name()),
        ),
        Target::Driver { iface, key } => plain(format!("{iface} {key}")),
        Target::RootQdisc { iface } => plain(format!("{iface} root qdisc")),
        Target::Napi { iface, queue, key } => {
            (format!("{iface} rx-"), Some(*queue), format!(" napi {key}"))
        }
        other => {
            let text = other.to_string();
            plain(text.rsplit('/').next().unwrap_or(&text).to_string())
        }
    }
}

/// Changes as short items, runs of neighbours folded: "IRQ 120..127 0-31
/// -> 0..7" (one CPU each, in turn), "eth0 rx-0..7 rps_cpus 0 -> ff00ff".
fn change_items(changes: &[PlannedChange]) -> Vec<String> {
    /// Neighbouring targets (numbers n, n+1, ...) changed from one value,
    /// to one value or, for IRQs, to CPUs counting up with them (masks,
    /// hex, never count).
    struct Run<'a> {
        prefix: String,
        suffix: String,
        first: u32,
        last: u32,
        from: &'a str,
        to_first: &'a str,
        to_last: &'a str,
    }
    impl Run<'_> {
        fn takes(&self, prefix: &str, n: u32, suffix: &str, c: &PlannedChange) -> bool {
            let count = |v: &str| v.parse::<u64>().ok();
            let same_to = self.to_first == self.to_last && c.to == self.to_last;
            let counting = match (count(self.to_first), count(self.to_last), count(&c.to)) {
                (Some(a), Some(z), Some(t)) if self.prefix == IRQ_PREFIX => {
                    z.checked_sub(a) == Some(u64::from(self.last - self.first)) && t == z + 1
                }
                _ => false,
            };
            n == self.last + 1
                && prefix == self.prefix
                && suffix == self.suffix
                && c.from == self.from
                && (same_to || counting)
        }
    }
    let mut items = Vec::new();
    let mut run: Option<Run> = None;
    let shown = |v: &str| {
        if v.is_empty() {
            "(empty)".to_string()
        } else {
            v.to_string()
        }
    };
    let close = |r: Run| {
        let index = if r.first == r.last {
            r.first.to_string()
        } else {
            format!("{}..{}", r.first, r.last)
        };
        let to = if r.to_first == r.to_last {
            shown(r.to_first)
        } else {
            format!("{}..{}", r.to_first, r.to_last)
        };
        format!("{}{index}{} {} -> {to}", r.prefix, r.suffix, shown(r.from))
    };
    // Same kind of target together (rx-N/rps_cpus before rx-N/rps_flow_cnt),
    // kinds in the plan's order.
    let mut split: Vec<(String, Option<u32>, String, &PlannedChange)> = changes
        .iter()
        .map(|c| {
            let (prefix, n, suffix) = short_target(&c.target);
            (prefix, n, suffix, c)
        })
        .collect();
    let mut kinds: Vec<(String, String)> = Vec::new();
    for (prefix, _, suffix, _) in &split {
        if !kinds.iter().any(|(p, s)| p == prefix && s == suffix) {
            kinds.push((prefix.clone(), suffix.clone()));
        }
    }
    split.sort_by_key(|(prefix, _, suffix, _)| {
        kinds.iter().position(|(p, s)| p == prefix && s == suffix)
    });
    for (prefix, n, suffix, c) in split {
        let Some(n) = n else {
            items.extend(run.take().map(close));
            items.push(format!("{prefix} {} -> {}", shown(&c.from), shown(&c.to)));
            continue;
        };
        match &mut run {
            Some(r) if r.takes(&prefix, n, &suffix, c) => {
                r.last = n;
                r.to_last = &c.to;
            }
            _ => {
                items.extend(run.take().map(close));
                run = Some(Run {
                    prefix,
                    suffix,
                    first: n,
                    last: n,
                    from: &c.from,
                    to_first: &c.to,
                    to_last: &c.to,
                });
            }
        }
    }
    items.extend(run.map(close));
    items
}

/// `label` then `text` wrapped at [`WIDTH`], continuation lines indented
/// by `indent`.
fn wrap(label: &str, text: &str, indent: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = format!("  {label:<width$}", width = indent - 2);
    let mut line_has_word = false;
    for word in text.split_whitespace() {
        if line_has_word && line.chars().count() + 1 + word.chars().count() > WIDTH {
            lines.push(line.trim_end().to_string());
            line = " ".repeat(indent);
            line_has_word = false;
        }
        if line_has_word {
            line.push(' ');
        }
        line.push_str(word);
        line_has_word = true;
    }
    lines.push(line.trim_end().to_string());
    lines
}

fn write_wrapped(w: &mut dyn Write, label: &str, text: &str, indent: usize) -> io::Result<()> {
    for line in wrap(label, text, indent) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

/// The JSON document, pretty-printed, with a final newline.
/// The rules that could not be judged, after the findings.
pub fn render_unjudged(unjudged: &[super::Unjudged], w: &mut dyn Write) -> io::Result<()> {
    if unjudged.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "\nNot judged ({}): their data could not be read (see `nettune inspect`, sources):",
        unjudged.len()
    )?;
    for u in unjudged {
        writeln!(w, "  {:<24} {}", u.id, u.because)?;
    }
    Ok(())
}

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
        // Under the fix, the plan's changes for it.
        assert!(
            review.contains("nettune plan --profile pps: eth0 rx-0 rps_cpus 0 -> 3;"),
            "{review}"
        );
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
                                                                   // Two findings with one fix (text and changes) print it once.
        let mut same = findings.clone();
        same[1].fix = same[0].fix.clone();
        same[1].changes = same[0].changes.clone();
        let review = text(&same);
        assert!(
            review.contains(&format!("the same as for {} above", same[0].id)),
            "{review}"
        );
    }

    fn change(target: &str, from: &str, to: &str) -> PlannedChange {
        PlannedChange {
            target: target.parse().expect("target"),
            from: from.to_string(),
            to: to.to_string(),
        }
    }

    #[test]
    fn plan_changes_fold_neighbours_and_stop_at_three_lines() {
        // pps on the 8-queue ixgbe: 8 IRQs to CPUs 0-7 in turn, then RPS
        // and RFS per queue (interleaved as the plan lists them).
        let mut changes: Vec<PlannedChange> = (0..8)
            .map(|i| {
                change(
                    &format!("/proc/irq/{}/smp_affinity_list", 120 + i),
                    "0-31",
                    &i.to_string(),
                )
            })
            .collect();
        for q in 0..8 {
            let dir = format!("/sys/class/net/eth0/queues/rx-{q}");
            changes.push(change(&format!("{dir}/rps_cpus"), "0", "ff00ff"));
            changes.push(change(&format!("{dir}/rps_flow_cnt"), "0", "4096"));
        }
        changes.push(change(
            "/proc/sys/net/core/netdev_max_backlog",
            "1000",
            "10000",
        ));
        assert_eq!(
            change_items(&changes),
            vec![
                "IRQ 120..127 0-31 -> 0..7",
                "eth0 rx-0..7 rps_cpus 0 -> ff00ff",
                "eth0 rx-0..7 rps_flow_cnt 0 -> 4096",
                "netdev_max_backlog 1000 -> 10000",
            ]
        );
        // XPS masks do not count up: each is its own item, and past three
        // lines the rest is counted.
        let xps: Vec<PlannedChange> = (0..32)
            .map(|q| {
                change(
                    &format!("/sys/class/net/eth0/queues/tx-{q}/xps_cpus"),
                    "0",
                    &format!("{:x}", 1u64 << q),
                )
            })
            .collect();
        let line = plan_line("latency", &xps);
        let lines = wrap("", &line, LABEL_WIDTH);
        assert!(lines.len() <= MAX_CHANGE_LINES, "{lines:#?}");
        assert!(line.starts_with("nettune plan --profile latency: eth0 tx-0 xps_cpus 0 -> 1;"));
        let more: usize = line
            .rsplit("; +")
            .next()
            .and_then(|t| t.strip_suffix(" more"))
            .and_then(|n| n.parse().ok())
            .expect("+N more");
        assert_eq!(line.matches("xps_cpus").count() + more, 32, "{line}");
    }

    #[test]
    fn a_fix_without_a_profile_lists_no_plan() {
        let findings = diagnose(&vm_2cpu_single_queue());
        let note = findings
            .iter()
            .find(|f| f.id == "cpu.mitigations")
            .expect("mitigations");
        assert!(note.profile.is_none() && note.changes.is_empty());
        let review = text(std::slice::from_ref(note));
        assert!(!review.contains("nettune plan"), "{review}");
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
