//! What `nettune plan` does for each finding. Rules read the plan of the
//! profile that fixes them, so a fix names the values the plan writes; after
//! the rules, [`attach`] puts the plan's changes for each finding's targets
//! on it, says why the plan leaves any of them alone, and drops the profile
//! from a finding the plan does nothing for. One source, so the two agree by
//! construction (tests/integration/doctor_plan.rs checks it end to end).

use std::cell::OnceCell;

use super::context::Context;
use super::finding::{Finding, PlannedChange};
use crate::base::Root;
use crate::host::Host;
use crate::plan::{plan, Change, Plan, PlanOptions, Profile, Skipped, Target};

const PROFILES: [Profile; 5] = [
    Profile::Pps,
    Profile::Latency,
    Profile::Throughput,
    Profile::Http,
    Profile::Baseline,
];

/// The profile called `name` (`pps`, ...).
pub fn profile_named(name: &str) -> Option<Profile> {
    PROFILES.into_iter().find(|p| p.name() == name)
}

/// The plans of a host, computed at most once per profile during one
/// `diagnose`, with the options doctor was given (`--bandwidth`, `--rtt` for
/// throughput; defaults otherwise), as `nettune plan --profile P` computes
/// them.
pub struct Plans<'a> {
    host: &'a Host,
    bandwidth_bps: Option<u64>,
    rtt_secs: Option<f64>,
    root: Option<&'a Root>,
    cache: [OnceCell<Option<Plan>>; PROFILES.len()],
}

impl<'a> Plans<'a> {
    /// Plans from the host model alone.
    pub fn new(ctx: &Context<'a>) -> Plans<'a> {
        Plans {
            host: ctx.host,
            bandwidth_bps: ctx.bandwidth_bps,
            rtt_secs: ctx.rtt_secs,
            root: None,
            cache: Default::default(),
        }
    }

    /// Also run the checks `nettune plan` makes against the files
    /// themselves (read-only sysctls, governors not offered), so that a
    /// change the kernel would refuse is reported as left alone here too.
    pub fn checked_against(mut self, root: &'a Root) -> Plans<'a> {
        self.root = Some(root);
        self
    }

    /// The options `nettune plan --profile P` gets from the same command
    /// line: the path sizes only throughput.
    pub fn options(&self, profile: Profile) -> PlanOptions {
        let mut opts = PlanOptions::new(profile);
        if profile == Profile::Throughput {
            opts.bandwidth_bits = self.bandwidth_bps;
            opts.rtt_us = self.rtt_secs.map(|s| (s * 1e6).round() as u64);
        }
        opts
    }

    /// The plan of `profile`; `None` when the plan cannot be made for this
    /// host (doctor still runs; its fixes then name no plan values).
    pub fn get(&self, profile: Profile) -> Option<&Plan> {
        let slot = PROFILES.iter().position(|p| *p == profile)?;
        self.cache[slot]
            .get_or_init(|| {
                let mut planned = plan(self.host, &self.options(profile)).ok()?;
                if let Some(root) = self.root {
                    crate::plan::preflight::preflight(&mut planned, root);
                }
                Some(planned)
            })
            .as_ref()
    }

    /// What `profile` does to `scope` (exact targets).
    pub fn planned(&self, profile: Profile, scope: &[Target]) -> Planned<'_> {
        let plan = self.get(profile);
        let within = |target: &Target| scope.contains(target);
        Planned {
            profile,
            changes: plan
                .iter()
                .flat_map(|p| &p.changes)
                .filter(|c| within(&c.target))
                .collect(),
            skipped: plan
                .iter()
                .flat_map(|p| &p.skipped)
                .filter(|s| within(&s.target))
                .collect(),
        }
    }
}

/// The changes and refusals of one profile's plan for some targets.
#[derive(Debug)]
pub struct Planned<'p> {
    pub profile: Profile,
    pub changes: Vec<&'p Change>,
    pub skipped: Vec<&'p Skipped>,
}

impl<'p> Planned<'p> {
    pub fn change(&self, target: &Target) -> Option<&'p Change> {
        self.changes.iter().copied().find(|c| &c.target == target)
    }

    pub fn is_skipped(&self, target: &Target) -> bool {
        self.skipped.iter().any(|s| &s.target == target)
    }

    /// The change to sysctl `name` (`net.core.rmem_max`).
    pub fn sysctl(&self, name: &str) -> Option<&'p Change> {
        self.changes
            .iter()
            .copied()
            .find(|c| c.target.sysctl_name() == Some(name))
    }

    /// "nettune plan --profile pps", for sentences.
    pub fn by(&self) -> String {
        format!("nettune plan --profile {}", self.profile.name())
    }
}

/// At most this many targets are named in one "leaves alone" sentence.
const MAX_SKIPPED_NAMED: usize = 3;

/// Put each finding's plan changes on it; say in its fix why the plan
/// leaves any of its targets alone; drop the profile where the plan changes
/// none of them (a profile is named only where it makes the change).
pub fn attach(findings: &mut [Finding], plans: &Plans) {
    for f in findings {
        let Some(profile) = f.profile.and_then(profile_named) else {
            continue;
        };
        let Some(plan) = plans.get(profile) else {
            continue;
        };
        // An interface the plan does not select by default (virtual, or
        // down): it has no changes, and the fix says how to include it.
        let mut outside: Vec<&str> = f
            .scope
            .iter()
            .filter_map(Target::iface)
            .filter(|i| !plan.interfaces.iter().any(|p| p == i))
            .collect();
        outside.dedup();
        for iface in outside {
            f.fix.push_str(&format!(
                " nettune plan --profile {} does not tune {iface} unless named (by default it \
                 tunes the physical interfaces that are up): add --iface {iface}.",
                profile.name()
            ));
        }
        let planned = plans.planned(profile, &f.scope);
        f.changes = planned
            .changes
            .iter()
            .map(|c| PlannedChange {
                target: c.target.clone(),
                from: c.from.clone(),
                to: c.to.to_string(),
            })
            .collect();
        for sentence in left_alone(&planned) {
            f.fix.push(' ');
            f.fix.push_str(&sentence);
        }
        if f.changes.is_empty() {
            f.profile = None;
        }
    }
}

/// "nettune plan --profile pps leaves net.core.rmem_max alone: REASON."
/// once per reason.
fn left_alone(planned: &Planned) -> Vec<String> {
    let mut reasons: Vec<(&str, Vec<String>)> = Vec::new();
    for s in &planned.skipped {
        let name = s
            .target
            .sysctl_name()
            .map_or_else(|| s.target.to_string(), str::to_string);
        match reasons.iter_mut().find(|(r, _)| *r == s.reason) {
            Some((_, names)) => names.push(name),
            None => reasons.push((&s.reason, vec![name])),
        }
    }
    reasons
        .into_iter()
        .map(|(reason, mut names)| {
            if names.len() > MAX_SKIPPED_NAMED {
                let more = names.len() - MAX_SKIPPED_NAMED + 1;
                names.truncate(MAX_SKIPPED_NAMED - 1);
                names.push(format!("{more} more"));
            }
            let reason = reason.trim_end_matches('.');
            format!(
                "{} leaves {} alone: {reason}.",
                planned.by(),
                names.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::testkit::{set_sysctl, vm_2cpu_single_queue};

    #[test]
    fn plans_are_those_of_the_plan_command() {
        let host = vm_2cpu_single_queue();
        let ctx = Context {
            bandwidth_bps: Some(10_000_000_000),
            rtt_secs: Some(0.05),
            ..Context::new(&host)
        };
        let plans = Plans::new(&ctx);
        let opts = plans.options(Profile::Throughput);
        assert_eq!(opts.bandwidth_bits, Some(10_000_000_000));
        assert_eq!(opts.rtt_us, Some(50_000));
        // Only throughput takes the path: `nettune plan` refuses it elsewhere.
        assert_eq!(plans.options(Profile::Pps), PlanOptions::new(Profile::Pps));
        let expected = plan(&host, &opts).expect("plan");
        assert_eq!(plans.get(Profile::Throughput), Some(&expected));
    }

    #[test]
    fn attach_takes_the_changes_in_scope_and_says_what_is_left_alone() {
        let mut host = vm_2cpu_single_queue();
        set_sysctl(&mut host, "net.core.netdev_max_backlog", "1000");
        host.source.netns = Some("blue".to_string());
        let ctx = Context::new(&host);
        let plans = Plans::new(&ctx);
        let finding = |scope: &[&str]| Finding {
            id: "softnet.drops",
            severity: crate::doctor::Severity::Warn,
            title: String::new(),
            evidence: String::new(),
            why: String::new(),
            fix: "Advice.".to_string(),
            profile: Some("pps"),
            changes: Vec::new(),
            scope: scope.iter().map(|s| s.parse().expect("target")).collect(),
        };
        let mut findings = vec![
            finding(&["/proc/sys/net/core/netdev_max_backlog"]),
            finding(&["/proc/sys/net/ipv4/udp_rmem_min"]),
        ];
        attach(&mut findings, &plans);
        // Host-wide inside a namespace: left alone, with the reason, and no
        // profile promised.
        assert!(findings[0].changes.is_empty());
        assert_eq!(findings[0].profile, None);
        assert!(
            findings[0].fix.starts_with(
                "Advice. nettune plan --profile pps leaves net.core.netdev_max_backlog alone: "
            ) && findings[0].fix.contains("'blue'"),
            "{}",
            findings[0].fix
        );
        // Per namespace: planned.
        assert_eq!(
            findings[1].changes,
            vec![PlannedChange {
                target: Target::sysctl("net.ipv4.udp_rmem_min"),
                from: "4096".to_string(),
                to: "65536".to_string(),
            }]
        );
        assert_eq!(findings[1].profile, Some("pps"));
        assert_eq!(findings[1].fix, "Advice.");
    }

    #[test]
    fn an_interface_the_plan_does_not_select_is_named_with_how_to_add_it() {
        // Judged with --all, a virtual interface: the plan tunes physical
        // ones only unless named.
        let mut host = vm_2cpu_single_queue();
        host.interfaces[0].physical = false;
        let ctx = Context {
            all_interfaces: true,
            ..Context::new(&host)
        };
        let findings = crate::doctor::diagnose(&ctx);
        let rps = findings
            .iter()
            .find(|f| f.id == "rps.off")
            .expect("rps.off with --all");
        // Only the host-wide part of the fix is planned.
        let targets: Vec<String> = rps.changes.iter().map(|c| c.target.to_string()).collect();
        assert_eq!(targets, ["/proc/sys/net/core/rps_sock_flow_entries"]);
        assert!(
            rps.fix.contains("does not tune eth0 unless named") && rps.fix.contains("--iface eth0"),
            "{}",
            rps.fix
        );
        let iface = |t: &str| {
            t.parse::<Target>()
                .expect("target")
                .iface()
                .map(str::to_string)
        };
        assert_eq!(iface("ethtool:eth0:rings.rx").as_deref(), Some("eth0"));
        assert_eq!(
            iface("/sys/class/net/ens1f0/queues/rx-0/rps_cpus").as_deref(),
            Some("ens1f0")
        );
        assert_eq!(iface("/proc/irq/74/smp_affinity_list"), None);
    }
}
