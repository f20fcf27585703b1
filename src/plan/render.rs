//! A plan for people (a diff grouped by interface and kernel), as JSON, and
//! as an equivalent shell script (echo, sysctl, ethtool, tc) for review or
//! for configuration management.

use std::fmt::Write as _;

use super::{Change, HostWide, Plan, Skipped, Target, Typed, Value, KERNEL_GROUP};
use crate::base::cpuset::format_list;
use crate::base::text::{sh_comment_line as comment_line, sh_word};

/// Where the plan was computed, for headers: "this host",
/// "network namespace blue", "capture ./web1".
pub fn place(root: Option<&str>, netns: Option<&str>) -> String {
    match (root, netns) {
        (Some(dir), _) => format!("capture {dir}"),
        (None, Some(ns)) => format!("network namespace {ns}"),
        (None, None) => "this host".to_string(),
    }
}

fn shown(value: &str) -> &str {
    if value.is_empty() {
        "(empty)"
    } else {
        value
    }
}

/// Groups in plan order: interfaces (by name), then `kernel`.
fn groups(plan: &Plan) -> Vec<String> {
    let mut names: Vec<String> = plan.interfaces.clone();
    for g in plan
        .changes
        .iter()
        .map(|c| &c.group)
        .chain(plan.skipped.iter().map(|s| &s.group))
    {
        if g != KERNEL_GROUP && !names.contains(g) {
            names.push(g.clone());
        }
    }
    names.push(KERNEL_GROUP.to_string());
    names
}

/// The diff for people.
pub fn text(plan: &Plan, place: &str) -> String {
    let mut out = String::new();
    let o = &mut out;
    let _ = writeln!(
        o,
        "nettune plan: profile {} on {place}\n  network CPUs {}   interfaces {}",
        match &plan.site {
            Some(site) => format!(
                "{} ({}, includes {})",
                site.name,
                site.file,
                site.includes.join(" -> ")
            ),
            None => plan.profile.name().to_string(),
        },
        format_list(&plan.cpus),
        if plan.interfaces.is_empty() {
            "none".to_string()
        } else {
            plan.interfaces.join(", ")
        }
    );
    for group in groups(plan) {
        let changes: Vec<&Change> = plan.changes.iter().filter(|c| c.group == group).collect();
        if changes.is_empty() {
            continue;
        }
        let _ = writeln!(o, "\n{group}");
        let rows: Vec<(String, String)> = changes
            .iter()
            .map(|c| {
                (
                    c.target.short_name(),
                    format!("{} -> {}", shown(&c.from), shown(c.to.as_str())),
                )
            })
            .collect();
        let name_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let diff_width = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        for ((name, diff), change) in rows.iter().zip(&changes) {
            let _ = writeln!(
                o,
                "  {name:<name_width$}  {diff:<diff_width$}  {}{}",
                change.reason,
                irqbalance_mark(plan, change)
            );
            if let Some(origin) = &change.origin {
                let _ = writeln!(o, "  {:name_width$}  from {origin}", "");
            }
        }
    }
    if !plan.host_wide.is_empty() {
        host_wide_text(o, plan);
    }
    let left: Vec<&Skipped> = plan
        .skipped
        .iter()
        .filter(|s| !plan.host_wide.iter().any(|h| h.target == s.target))
        .collect();
    if !left.is_empty() {
        let _ = writeln!(o, "\nleft alone");
        // Targets of one group left alone for the same reason share a line.
        let mut lines: Vec<(&str, Vec<String>, &str)> = Vec::new();
        for s in &left {
            match lines.last_mut() {
                Some((group, names, reason)) if *group == s.group && *reason == s.reason => {
                    names.push(s.target.short_name())
                }
                _ => lines.push((&s.group, vec![s.target.short_name()], &s.reason)),
            }
        }
        for (group, names, reason) in lines {
            let names = names.join(", ");
            let label = if group == KERNEL_GROUP {
                names
            } else {
                format!("{group} {names}")
            };
            let _ = writeln!(o, "  {label}: {reason}");
        }
    }
    if let Some(warning) = &plan.irqbalance {
        let _ = writeln!(o, "\nwarning: {}", warning.note);
    }
    let on_host = if plan.host_wide.is_empty() {
        String::new()
    } else {
        format!(", {} to set on the host", plan.host_wide.len())
    };
    let _ = writeln!(
        o,
        "\n{} change(s), {} left alone{on_host}.",
        plan.changes.len(),
        left.len()
    );
    out
}

/// The host-wide values, named once, with the command that sets them.
fn host_wide_text(o: &mut String, plan: &Plan) {
    let _ = writeln!(
        o,
        "\nhost-wide: a network namespace cannot set these; on the host, run"
    );
    if let Some(command) = &plan.host_command {
        let _ = writeln!(o, "  {command}");
    }
    let _ = writeln!(
        o,
        "  (or `nettune apply --profile {}` there, without --netns, which also tunes the host's own interfaces)",
        plan.profile.name()
    );
    let rows: Vec<(String, String)> = plan
        .host_wide
        .iter()
        .map(|h| {
            let from = h.from.as_deref().map_or("(not visible here)", shown);
            (
                h.target.short_name(),
                format!("{from} -> {}", shown(h.to.as_str())),
            )
        })
        .collect();
    let name_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let diff_width = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    for ((name, diff), h) in rows.iter().zip(&plan.host_wide) {
        let _ = writeln!(
            o,
            "  {name:<name_width$}  {diff:<diff_width$}  {}",
            h.reason
        );
    }
}

/// `[irqbalance runs: ...]` after an IRQ change while irqbalance runs.
fn irqbalance_mark(plan: &Plan, change: &Change) -> String {
    match (&plan.irqbalance, change.target.irq()) {
        (Some(_), Some(_)) => format!(" [{}]", super::irqbalance::BESIDE),
        _ => String::new(),
    }
}

pub fn json(plan: &Plan) -> serde_json::Result<String> {
    Ok(serde_json::to_string_pretty(plan)? + "\n")
}

/// The shell command that makes one change.
pub fn command(change: &Change) -> String {
    set_command(&change.target, &change.to)
}

/// The shell command that sets `target` to `to`.
///
/// Every text in it is one shell word ([`sh_word`]): an interface named
/// `a;$(x)` or a value holding `; rm` stays a word; a command that cannot
/// be written is a comment line.
pub fn set_command(target: &Target, to: &Value) -> String {
    if let Some(name) = target.sysctl_name() {
        return format!("sysctl -w {}", sysctl_word(name, to.as_str()));
    }
    if let Some(path) = target.path() {
        return format!("echo {} > {}", sh_word(to.as_str()), sh_word(&path));
    }
    match (target, to.typed()) {
        (Target::Driver { iface, .. }, Typed::Driver(setting)) => setting.ethtool_command(iface),
        (Target::RootQdisc { iface }, Typed::Qdisc(_)) => {
            // The value as given (`fq maxrate 8gbit`): a kind and a rate,
            // each a plain word once admitted.
            let words: Vec<_> = to.as_str().split(' ').map(sh_word).collect();
            format!(
                "tc qdisc replace dev {} root {}",
                sh_word(iface),
                words.join(" ")
            )
        }
        // No shell tool sets a NAPI by queue: napi-set takes the NAPI id,
        // which the script cannot know ahead of time.
        (Target::Napi { iface, queue, key }, _) => comment_line(&format!(
            "{target}: no shell command sets a NAPI by queue; by hand: ynl --family netdev \
             --do napi-set --json '{{\"id\": ID, \"{key}\": {to}}}' with ID the NAPI of {iface} \
             rx queue {queue} (ynl --family netdev --dump queue-get), or nettune apply"
        )),
        (
            Target::RssIndirection { .. } | Target::NtupleRule { .. } | Target::XdpProgram { .. },
            _,
        ) => super::steer::command(target, to),
        _ => comment_line(&format!("{target}: no command known")),
    }
}

/// `NAME=VALUE` for `sysctl -w`, each part a shell word.
fn sysctl_word(name: &str, to: &str) -> String {
    format!("{}={}", sh_word(name), sh_word(to))
}

/// One command line that sets every host-wide value on the host: the
/// sysctls in one `sysctl -w`, files with `echo`. `None` when there are none.
pub fn host_command(values: &[HostWide]) -> Option<String> {
    let sysctls: Vec<String> = values
        .iter()
        .filter_map(|v| Some(sysctl_word(v.target.sysctl_name()?, v.to.as_str())))
        .collect();
    let mut parts = Vec::new();
    if !sysctls.is_empty() {
        parts.push(format!("sysctl -w {}", sysctls.join(" ")));
    }
    parts.extend(
        values
            .iter()
            .filter(|v| v.target.sysctl_name().is_none())
            .map(|v| set_command(&v.target, &v.to)),
    );
    (!parts.is_empty()).then(|| parts.join(" && "))
}

/// A shell script with the same effect as the plan, for review. Every
/// text from the plan is in a comment kept on its line or in a shell word
/// (see [`set_command`]): a saved plan can hold anything.
pub fn shell(plan: &Plan, place: &str, netns: Option<&str>) -> String {
    let mut lines = vec![
        "#!/bin/sh".to_string(),
        comment_line(&format!(
            "nettune plan --profile {}: {} change(s), computed on {place}.",
            plan.profile.name(),
            plan.changes.len()
        )),
        comment_line("For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo."),
    ];
    if let Some(ns) = netns {
        lines.push(comment_line(&format!(
            "Run it inside the namespace: ip netns exec {} sh THIS_FILE",
            sh_word(ns)
        )));
    }
    if let Some(warning) = &plan.irqbalance {
        lines.push(comment_line(&format!("WARNING: {}", warning.note)));
    }
    lines.push("set -e".to_string());
    for group in groups(plan) {
        let changes: Vec<&Change> = plan.changes.iter().filter(|c| c.group == group).collect();
        if changes.is_empty() {
            continue;
        }
        lines.push(String::new());
        lines.push(comment_line(&group));
        for change in changes {
            lines.push(comment_line(&format!(
                "{} (was {}){}",
                change.reason,
                shown(&change.from),
                irqbalance_mark(plan, change)
            )));
            lines.push(command(change));
        }
    }
    if let Some(command) = &plan.host_command {
        lines.push(String::new());
        lines.push(comment_line(
            "host-wide: a network namespace cannot set these; run on the host itself:",
        ));
        lines.push(comment_line(command));
    }
    lines.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(target: &str, to: &str, group: &str) -> Change {
        let target: Target = target.parse().expect("target");
        Change {
            to: Value::parse(&target, to).expect("value"),
            target,
            from: String::new(),
            reason: String::new(),
            group: group.to_string(),
            origin: None,
        }
    }

    #[test]
    fn commands_match_the_tools() {
        assert_eq!(
            command(&change(
                "/proc/sys/net/ipv4/tcp_rmem",
                "4096 131072 33554432",
                "kernel"
            )),
            "sysctl -w net.ipv4.tcp_rmem='4096 131072 33554432'"
        );
        assert_eq!(
            command(&change("/proc/irq/74/smp_affinity_list", "3", "eth0")),
            "echo 3 > /proc/irq/74/smp_affinity_list"
        );
        assert_eq!(
            command(&change("ethtool:eth0:rx-flow-hash.udp4", "sdfn", "eth0")),
            "ethtool -N eth0 rx-flow-hash udp4 sdfn"
        );
        assert_eq!(
            command(&change("qdisc:eth0:root", "fq maxrate 8gbit", "eth0")),
            "tc qdisc replace dev eth0 root fq maxrate 8gbit"
        );
        let napi = command(&change("napi:eth0:rx-0:defer-hard-irqs", "100", "eth0"));
        assert!(
            napi.starts_with("# napi:eth0:rx-0:defer-hard-irqs"),
            "{napi}"
        );
        assert!(napi.contains(r#""defer-hard-irqs": 100"#), "{napi}");
    }

    #[test]
    fn names_are_short_within_their_group() {
        let name = |t: &str| t.parse::<Target>().expect("target").short_name();
        assert_eq!(name("/proc/sys/net/core/rmem_max"), "net.core.rmem_max");
        assert_eq!(
            name("/sys/class/net/eth0/queues/rx-3/rps_cpus"),
            "rx-3/rps_cpus"
        );
        assert_eq!(name("ethtool:eth0:rings.rx"), "rings.rx");
        assert_eq!(name("qdisc:eth0:root"), "qdisc root");
        assert_eq!(
            name("/proc/irq/74/smp_affinity_list"),
            "/proc/irq/74/smp_affinity_list"
        );
    }

    /// Every text a plan carries (a reason with a line break, an
    /// interface named `a;$(x)`, a sysctl named like code) stays a comment
    /// or one shell word: the script parses and runs no text as a command.
    /// A value with a command after it cannot even be made for a qdisc or
    /// a NAPI.
    #[test]
    fn a_script_keeps_every_text_a_word_or_a_comment() {
        let iface = "a;$(x)";
        for (target, bad) in [
            ("qdisc:a;$(x):root", "fq; rm -rf /"),
            ("napi:a;$(x):rx-0:defer-hard-irqs", "2\nrm -rf /"),
        ] {
            let target: Target = target.parse().expect("target");
            assert!(Value::parse(&target, bad).is_err(), "{bad}");
        }
        let mut changes = vec![
            change("qdisc:a;$(x):root", "fq maxrate 8gbit", iface),
            change("/sys/class/net/a;$(x)/queues/rx-0/rps_cpus", "3", iface),
            change("ethtool:a;$(x):rings.rx", "4096", iface),
            change("napi:a;$(x):rx-0:defer-hard-irqs", "2", iface),
            change("/proc/sys/net/core/$(x)", "1", "kernel\nrm -rf /"),
        ];
        changes[0].reason = "pacing\ntouch /tmp/nt/INJECTED".to_string();
        let plan = Plan {
            profile: super::super::Profile::Custom,
            cpus: vec![0, 1],
            interfaces: vec![iface.to_string()],
            changes,
            skipped: Vec::new(),
            irqbalance: Some(super::super::irqbalance::IrqbalanceWarning {
                pids: vec![1],
                irqs: vec![74],
                note: "runs\nrm -rf /".to_string(),
            }),
            made_for: None,
            host_wide: Vec::new(),
            host_command: Some("sysctl -w a=1\nrm -rf /".to_string()),
            site: None,
        };
        let script = shell(&plan, "network namespace x\nrm -rf /", Some("x\nrm -rf /"));
        assert_eq!(crate::base::text::bash_parses(&script), Ok(()), "{script}");
        for line in script.lines() {
            if line.contains("INJECTED") || line.contains("rm -rf") {
                assert!(line.starts_with('#'), "as code: {line}\n{script}");
            }
        }
        for expected in [
            "tc qdisc replace dev 'a;$(x)' root fq maxrate 8gbit",
            "echo 3 > '/sys/class/net/a;$(x)/queues/rx-0/rps_cpus'",
            "ethtool -G 'a;$(x)' rx 4096",
            "sysctl -w 'net.core.$(x)'=1",
        ] {
            assert!(
                script.lines().any(|l| l == expected),
                "no {expected}:\n{script}"
            );
        }
    }
}
