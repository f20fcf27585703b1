//! `nettune doctor`: pure rules over the host model that say what holds the
//! network path back, with the numbers seen, the mechanism and the fix.
//!
//! Rules never read the kernel: they judge a [`Host`] (and, when doctor
//! sampled the counters twice, the [`Rates`] between the samples). Missing
//! data is never a finding. The rule ids in [`RULE_IDS`] are a contract:
//! users silence findings by id and scripts match on them.

pub mod coverage;
mod planned;
mod render;
mod rules;
pub mod targets;
#[cfg(test)]
mod testkit;

use serde::Serialize;

use crate::host::{Counters, Host};

pub use coverage::{unjudged, Unjudged};
pub use planned::{PlannedChange, Plans};
pub use render::{render_json, render_text, render_unjudged, Report, Summary};

/// How bad a finding is. Ordered: `Info < Warn < Crit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; does not change the exit status.
    Info,
    /// Costs performance or loses packets; exit status 1.
    Warn,
    /// Caps the host's network path now; exit status 1.
    Crit,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Crit => "crit",
        }
    }
}

/// One thing doctor found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable id from [`RULE_IDS`].
    pub id: &'static str,
    pub severity: Severity,
    /// One line.
    pub title: String,
    /// The numbers the rule saw.
    pub evidence: String,
    /// The mechanism, with the REFERENCE.md section it comes from.
    pub why: String,
    /// The concrete change, with the values `nettune plan` writes; where
    /// the plan leaves a setting alone, what to do by hand and why.
    pub fix: String,
    /// The `nettune plan --profile` that makes the fix, if one does: named
    /// only when its plan changes something for this finding.
    pub profile: Option<&'static str>,
    /// What that profile's plan changes for this finding, exactly as
    /// `nettune plan --json` lists it.
    pub changes: Vec<PlannedChange>,
    /// The plan targets that carry this finding's fix (filled by the rule,
    /// read by [`planned::attach`]).
    #[serde(skip)]
    pub(crate) scope: Vec<crate::plan::Target>,
}

/// Counters sampled twice, `seconds` apart (`doctor --interval`).
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    pub seconds: f64,
    pub before: Counters,
    pub after: Counters,
}

/// What the rules judge.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub host: &'a Host,
    /// `None`: judge the counters in `host` as totals since boot.
    pub rates: Option<&'a Rates>,
    /// `--bandwidth`, bits per second.
    pub bandwidth_bps: Option<u64>,
    /// `--rtt`, seconds.
    pub rtt_secs: Option<f64>,
    /// `--all`: judge virtual interfaces too (physical ones only otherwise;
    /// inside `--netns` every interface but `lo` is judged).
    pub all_interfaces: bool,
    /// States nettune applied to this host (or namespace, or tree) that are
    /// still in place, with the settings that changed since.
    pub applied: &'a [AppliedState],
}

/// A state `nettune apply` made here and has not rolled back, with the
/// settings that no longer hold the value it wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedState {
    pub id: u32,
    pub profile: String,
    pub drift: Vec<crate::apply::Drift>,
    /// The commands that roll it back and apply its profile again, with
    /// the options they need here (`--root`, `--netns`, `--state-dir`).
    pub rollback: String,
    pub apply_again: String,
}

impl<'a> Context<'a> {
    /// A context that judges `host` alone: totals since boot, no path given.
    pub fn new(host: &'a Host) -> Context<'a> {
        Context {
            host,
            rates: None,
            bandwidth_bps: None,
            rtt_secs: None,
            all_interfaces: false,
            applied: &[],
        }
    }
}

/// Every rule id, the contract list (docs/doctor.md describes each).
pub const RULE_IDS: &[&str] = &[
    "cpu.idle-latency",
    "cpu.mitigations",
    "irq.balancer",
    "irq.one-cpu",
    "irq.remote-numa",
    "irq.shared-cpu",
    "mtu.jumbo-probing",
    "netfilter.conntrack",
    "nic.queues-unused",
    "nic.rings-small",
    "qdisc.no-fair-queue",
    "rfs.partial",
    "rps.off",
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
        use crate::base::driver::FlowHash;
        use crate::base::Probe;
        use crate::host::PacketSocket;
        use testkit::*;

        let mut host = two_socket_smt_8q();
        let mut eth1 = host.interfaces[0].clone();
        eth1.name = "eth1".into();
        eth1.ifindex = Some(3);
        eth1.numa_node = Some(1);
        pin_rx_irqs(&mut eth1, &[8, 9, 10, 11, 8, 9, 10, 11]);
        host.interfaces.push(eth1);

        let eth0 = iface(&mut host, "eth0");
        pin_rx_irqs(eth0, &[0; 8]);
        for q in &mut eth0.rx_queues {
            q.rps_cpus = Some(vec![]);
            q.rps_flow_cnt = Some(0);
        }
        let settings = &mut eth0.driver_settings;
        settings.rx_flow_hash.insert(
            "udp4".into(),
            Probe::Value(FlowHash {
                fields: vec!["ip_src".into(), "ip_dst".into()],
            }),
        );
        if let Probe::Value(r) = &mut settings.rings {
            r.rx = 512;
        }
        if let Probe::Value(c) = &mut settings.channels {
            c.combined = 4;
        }
        eth0.statistics.insert("rx_missed_errors".into(), 12_345);

        for (name, value) in [
            ("net.core.rmem_max", "4194304"),
            ("net.core.default_qdisc", "pfifo_fast"),
            ("net.ipv4.tcp_mtu_probing", "0"),
            ("net.ipv4.tcp_sack", "0"),
        ] {
            set_sysctl(&mut host, name, value);
        }
        host.irqbalance.running = true;
        host.cpufreq.governors = [("powersave".to_string(), (0..32).collect())].into();
        host.packet_sockets = vec![PacketSocket {
            inode: 31337,
            protocol: "0003".into(),
            ifindex: 0,
            uid: 0,
        }];
        host.conntrack.loaded = true;
        host.conntrack.count = Some(65_000);
        host.conntrack.max = Some(65_536);

        let r = rates(&host, 2.0, |after| {
            for s in &mut after.softirqs {
                s.net_rx += if s.cpu == 0 { 97_000 } else { 97 };
            }
            after.softnet[0].dropped += 500;
            after.softnet[0].time_squeeze += 300;
            *after.udp.entry("RcvbufErrors".into()).or_default() += 100;
            *after.tcp_ext.entry("ListenOverflows".into()).or_default() += 10;
        });
        let applied = [AppliedState {
            id: 1,
            profile: "pps".to_string(),
            drift: vec![crate::apply::Drift {
                target: crate::plan::Target::IrqAffinity(24),
                group: "eth0".to_string(),
                applied: "1".to_string(),
                now: "0-1".to_string(),
            }],
            rollback: "nettune rollback 1".to_string(),
            apply_again: "nettune apply --profile pps".to_string(),
        }];
        let findings = super::diagnose(&Context {
            host: &host,
            rates: Some(&r),
            bandwidth_bps: Some(10_000_000_000),
            rtt_secs: Some(0.05),
            all_interfaces: false,
            applied: &applied,
        });
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
