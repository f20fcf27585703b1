//! `nettune doctor`: pure rules over the host model that say what holds the
//! network path back, with the numbers seen, the mechanism and the fix.
//!
//! Rules never read the kernel: they judge a [`Host`] (and, when doctor
//! sampled the counters twice, the [`Rates`] between the samples). Missing
//! data is never a finding. The rule ids in [`RULE_IDS`] are a contract:
//! users silence findings by id and scripts match on them.

mod context;
pub mod coverage;
mod finding;
mod planned;
mod render;
mod rules;
pub mod targets;
#[cfg(test)]
mod testkit;

pub use context::{AppliedState, AppliedXdp, Context, Rates, SocketDrops, TracedDrops};
pub use coverage::{unjudged, Unjudged};
pub use finding::{Finding, PlannedChange, Severity};
pub use planned::Plans;
pub use render::{render_json, render_text, render_unjudged, Report, Summary};
pub(crate) use rules::thresholds;

/// Every rule id, the contract list (docs/doctor.md describes each).
pub const RULE_IDS: &[&str] = &[
    "cpu.idle-latency",
    "cpu.mitigations",
    "drops.reason",
    "irq.balancer",
    "irq.one-cpu",
    "irq.remote-numa",
    "irq.shared-cpu",
    "mtu.jumbo-probing",
    "napi.deferral-delays",
    "napi.no-irq-deferral",
    "netfilter.conntrack",
    "nic.queues-unused",
    "nic.rings-small",
    "qdisc.no-fair-queue",
    "rfs.partial",
    "rps.off",
    "rps.one-cpu",
    "rss.queue-without-weight",
    "rss.udp-hash-ips-only",
    "sock.packet-taps",
    "softirq.hotspot",
    "softnet.drops",
    "softnet.squeeze",
    "state.drift",
    "tcp.buffers-inconsistent",
    "tcp.buffers-small",
    "tcp.listen-overflows",
    "tcp.options-off",
    "udp.rcvbuf-errors",
    "xdp.generic-mode",
    "xdp.stale-program",
];

/// Run every rule; findings worst first, ties in id order (and, within one
/// id, in the order the rule gave them: interface order). Fixes follow the
/// plans computed from the host model alone.
pub fn diagnose(ctx: &Context) -> Vec<Finding> {
    diagnose_with_plans(ctx, &Plans::new(ctx))
}

/// [`diagnose`] with the plans given (`Plans::checked_against` the host's
/// files, as `nettune doctor` does).
pub fn diagnose_with_plans(ctx: &Context, plans: &Plans) -> Vec<Finding> {
    let mut findings = rules::all(ctx, plans);
    planned::attach(&mut findings, plans);
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.id.cmp(b.id)));
    findings
}

/// Parse `--ignore ID[,ID...]`. An unknown id is an error that lists the
/// valid ones.
pub fn parse_ignore(list: &str) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::new();
    for id in list.split(',').map(str::trim).filter(|id| !id.is_empty()) {
        if !RULE_IDS.contains(&id) {
            anyhow::bail!(
                "unknown finding id '{id}'; valid ids: {}",
                RULE_IDS.join(", ")
            );
        }
        if !ids.iter().any(|known| known == id) {
            ids.push(id.to_string());
        }
    }
    if ids.is_empty() {
        anyhow::bail!(
            "--ignore '{list}' names no finding id; e.g. --ignore cpu.mitigations,irq.balancer"
        );
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_order_worst_last() {
        assert!(Severity::Info < Severity::Warn && Severity::Warn < Severity::Crit);
        assert_eq!(
            serde_json::to_string(&Severity::Crit).expect("json"),
            "\"crit\""
        );
    }

    #[test]
    fn rule_ids_are_sorted_and_unique() {
        let mut sorted = RULE_IDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, RULE_IDS);
    }

    #[test]
    fn ignore_list_accepts_known_ids() {
        assert_eq!(
            parse_ignore("irq.balancer, cpu.mitigations,irq.balancer").expect("ids"),
            vec!["irq.balancer", "cpu.mitigations"]
        );
    }

    #[test]
    fn unknown_ignore_id_lists_the_valid_ones() {
        let err = parse_ignore("irq.one-cpu,irq.onecpu")
            .expect_err("unknown")
            .to_string();
        assert!(err.contains("'irq.onecpu'"), "{err}");
        for id in RULE_IDS {
            assert!(err.contains(id), "{id} missing from: {err}");
        }
        assert!(parse_ignore(" , ").is_err());
    }

    /// A host with every problem doctor knows: each id in RULE_IDS fires,
    /// and nothing fires that is not in RULE_IDS.
    #[test]
    fn every_rule_fires_on_a_host_with_every_problem() {
        let findings = testkit::every_finding();
        let mut fired: Vec<&str> = findings.iter().map(|f| f.id).collect();
        fired.sort_unstable();
        fired.dedup();
        assert_eq!(fired, RULE_IDS);
        // Worst first, ties by id.
        for pair in findings.windows(2) {
            let key = |f: &Finding| (std::cmp::Reverse(f.severity), f.id);
            assert!(
                key(&pair[0]) <= key(&pair[1]),
                "{} before {}",
                pair[0].id,
                pair[1].id
            );
        }
        assert_eq!(findings[0].severity, Severity::Crit);
        // Every finding names a real profile or none.
        for f in &findings {
            assert!(
                f.profile.is_none_or(
                    |p| ["pps", "latency", "throughput", "http", "baseline"].contains(&p)
                ),
                "{}: {:?}",
                f.id,
                f.profile
            );
        }
    }

    /// What doctor says cites public sources, never internal notes: every
    /// rule's finding, as text and as JSON.
    #[test]
    fn findings_cite_public_sources_only() {
        let findings = testkit::every_finding();
        let mut text = Vec::new();
        render_text(&findings, &mut text).expect("render");
        let text = String::from_utf8(text).expect("utf-8");
        let json = serde_json::to_string(&findings).expect("json");
        for f in &findings {
            for part in [&f.title, &f.evidence, &f.why, &f.fix] {
                let found = crate::wording::internal_names(part);
                assert!(found.is_empty(), "{}: {found:?} in: {part}", f.id);
            }
        }
        for whole in [&text, &json] {
            let found = crate::wording::internal_names(whole);
            assert!(found.is_empty(), "{found:?}");
        }
    }

    #[test]
    fn docs_describe_every_rule() {
        let docs = include_str!("../../docs/doctor.md");
        for id in RULE_IDS {
            assert!(
                docs.contains(&format!("`{id}`")),
                "docs/doctor.md lacks `{id}`"
            );
        }
    }
}
