//! napi.no-irq-deferral: a host tuned for latency (busy polling on, or the
//! latency or http profile applied) whose NIC queues still interrupt for
//! every packet, on a kernel and driver that can defer the IRQs, where the
//! profile's plan would defer them. Not where nothing will busy poll under
//! the latency profile (a network namespace whose host has busy polling
//! off): there its plan keeps deferral off. Info, not a warning: deferral
//! trades a bounded delay (the timer) for fewer interrupts, and on veth,
//! which has no hardware IRQ, it measured a little slower
//! (bench/busy_poll.sh compares both).

use super::shared::{judged_interfaces, napi_queues, planned_napi_value, plural, queue_list};
use crate::base::driver::NapiKey;
use crate::base::Probe;
use crate::doctor::planned::Plans;
use crate::doctor::{Context, Finding, Severity};
use crate::host::Interface;
use crate::plan::target::Target;
use crate::plan::{napi_values, Profile};

const WHY: &str = "Busy polling (net.core.busy_poll and busy_read, SO_BUSY_POLL, epoll busy \
polling) lets the application poll the NIC queue itself, but each packet still raises the \
device IRQ and a softirq that processes the queue on the IRQ's CPU: they interrupt the poller, \
take the packets from under it, and add the very wake-ups busy polling is meant to avoid. IRQ \
deferral keeps the IRQ masked after a poll that found packets, for up to defer-hard-irqs empty \
polls, with gro-flush-timeout as the timer that polls when nobody else does; IRQ suspension \
(irq-suspend-timeout) keeps IRQs off while an application using prefer-busy-poll epoll keeps \
finding events. Both are set per NAPI over netdev netlink (napi-set, Linux 6.13). The cost: \
while IRQs are deferred a packet nobody polls for waits up to gro-flush-timeout, so the timer \
is kept short (kernel Documentation/networking/napi.rst, \"IRQ mitigation\" and \"IRQ \
suspension\").";

/// Why this host counts as tuned for latency, if it does: busy polling on
/// for every socket, or a latency/http state nettune applied here.
fn tuned_for_latency(ctx: &Context) -> Option<(String, Profile)> {
    if let Some(state) = ctx.applied.iter().rev().find(|s| {
        let p = s.profile.as_deref();
        p == Some(Profile::Latency.name()) || p == Some(Profile::Http.name())
    }) {
        let profile = if state.profile.as_deref() == Some(Profile::Http.name()) {
            Profile::Http
        } else {
            Profile::Latency
        };
        return Some((
            format!("applied state {} ({})", state.id, state.what),
            profile,
        ));
    }
    let on: Vec<String> = ctx
        .host
        .busy_polling()
        .into_iter()
        .filter_map(|(name, us)| us.filter(|&us| us > 0).map(|us| format!("{name} {us}")))
        .collect();
    (!on.is_empty()).then(|| {
        (
            format!("busy polling on ({})", on.join(", ")),
            Profile::Latency,
        )
    })
}

/// The RX queues of `iface` whose NAPI has deferral off, with the value
/// that keeps it off; `None` when the kernel or driver cannot tell or set.
fn undeferred(iface: &Interface) -> Option<(Vec<u32>, Vec<String>)> {
    if iface.netdev.napi_set != Probe::Value(true) {
        return None;
    }
    napi_queues(
        iface,
        |defer, timer| defer == 0 || timer == 0,
        |defer, timer| format!("defer-hard-irqs {defer}, gro-flush-timeout {timer} ns"),
    )
}

pub fn check(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    let Some((tuned, profile)) = tuned_for_latency(ctx) else {
        return;
    };
    // What the profile's plan writes here. The latency profile leaves
    // deferral off where nothing will busy poll (an applied latency state
    // in a network namespace whose host does not busy poll): then an IRQ
    // per packet is what the plan wants, not a finding.
    let wanted = match napi_values(ctx.host, &plans.options(profile)) {
        Some((values, None)) if values.defer_hard_irqs > 0 => values,
        _ => return,
    };
    for iface in judged_interfaces(ctx) {
        let Some((queues, values)) = undeferred(iface) else {
            continue;
        };
        let scope: Vec<Target> = queues
            .iter()
            .flat_map(|&q| NapiKey::ALL.map(|key| Target::napi(&iface.name, q, key)))
            .collect();
        let planned = plans.planned(profile, &scope);
        let value = |key, default| planned_napi_value(&planned, key, default);
        let (defer, timer, suspend) = (
            value(NapiKey::DeferHardIrqs, wanted.defer_hard_irqs),
            value(NapiKey::GroFlushTimeout, wanted.gro_flush_timeout_ns),
            value(NapiKey::IrqSuspendTimeout, wanted.irq_suspend_timeout_ns),
        );
        let by_hand = if planned.changes.is_empty() {
            " by hand (ynl --family netdev --do napi-set with each queue's NAPI id from \
             queue-get)"
        } else {
            ""
        };
        out.push(Finding {
            id: "napi.no-irq-deferral",
            severity: Severity::Info,
            title: format!(
                "{}: tuned for latency, but every packet still raises an IRQ",
                iface.name
            ),
            evidence: format!(
                "{tuned}; {} of {} ({}): {}; the kernel has napi-set",
                plural(queues.len(), "RX queue"),
                iface.name,
                queue_list(&queues),
                values.join("; ")
            ),
            why: WHY.to_string(),
            fix: format!(
                "Set the NAPI of each of these RX queues to defer-hard-irqs {defer}, \
                 gro-flush-timeout {timer} ns and irq-suspend-timeout {suspend} ns{by_hand}. \
                 The timer is the price: a packet nobody polls for waits up to it, so measure \
                 before and after (nettune bench rr --busy-poll 50)."
            ),
            profile: Some(profile.name()),
            changes: Vec::new(),
            scope,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::testkit::{one_napi, set_sysctl, vm_2cpu_single_queue};
    use crate::doctor::AppliedState;

    fn with_napi(defer: u32, timer: u64, napi_set: bool) -> crate::host::Host {
        let mut host = vm_2cpu_single_queue();
        host.interfaces[0].netdev = one_napi(defer, timer, napi_set);
        host
    }

    fn findings(ctx: &Context) -> Vec<Finding> {
        crate::doctor::diagnose(ctx)
            .into_iter()
            .filter(|f| f.id == "napi.no-irq-deferral")
            .collect()
    }

    #[test]
    fn busy_polling_without_deferral_is_a_finding_with_the_planned_values() {
        let mut host = with_napi(0, 0, true);
        set_sysctl(&mut host, "net.core.busy_poll", "50");
        let found = findings(&Context::new(&host));
        assert_eq!(found.len(), 1, "{found:#?}");
        let f = &found[0];
        assert!(
            f.evidence
                .starts_with("busy polling on (net.core.busy_poll 50); 1 RX queue of eth0 (rx-0)"),
            "{}",
            f.evidence
        );
        assert_eq!(f.profile, Some("latency"));
        let targets: Vec<String> = f.changes.iter().map(|c| c.target.to_string()).collect();
        assert_eq!(
            targets,
            [
                "napi:eth0:rx-0:defer-hard-irqs",
                "napi:eth0:rx-0:gro-flush-timeout",
                "napi:eth0:rx-0:irq-suspend-timeout"
            ]
        );
        for c in &f.changes {
            assert!(f.fix.contains(&c.to), "{} lacks {}", f.fix, c.to);
        }
    }

    #[test]
    fn an_applied_http_state_counts_and_names_http() {
        let host = with_napi(0, 20_000, true);
        let applied = [AppliedState {
            id: 4,
            what: "profile http".to_string(),
            profile: Some("http".to_string()),
            drift: Vec::new(),
            rollback: "nettune rollback 4".to_string(),
            apply_again: "nettune apply --profile http".to_string(),
            steered: None,
            xdp: None,
        }];
        let ctx = Context {
            applied: &applied,
            traced: None,
            ..Context::new(&host)
        };
        let found = findings(&ctx);
        assert_eq!(found.len(), 1);
        assert!(found[0].evidence.contains("applied state 4 (profile http)"));
        assert_eq!(found[0].profile, Some("http"));
    }

    #[test]
    fn silent_without_busy_polling_with_deferral_or_without_napi_set() {
        let host = with_napi(0, 0, true);
        assert!(findings(&Context::new(&host)).is_empty(), "not tuned");
        for (defer, timer, napi_set) in [(100, 50_000, true), (0, 0, false)] {
            let mut host = with_napi(defer, timer, napi_set);
            set_sysctl(&mut host, "net.core.busy_read", "50");
            assert!(
                findings(&Context::new(&host)).is_empty(),
                "{defer} {timer} {napi_set}"
            );
        }
    }

    /// An applied latency state counts where the latency plan defers IRQs,
    /// that is where busy polling is on; in a namespace whose host does not
    /// busy poll, the plan keeps deferral off and doctor is silent.
    #[test]
    fn an_applied_latency_state_counts_only_where_something_busy_polls() {
        let mut host = with_napi(0, 0, true);
        for name in crate::host::ROOT_NAMESPACE_SYSCTLS {
            host.sysctls.remove(*name);
        }
        host.source.netns = Some("blue".to_string());
        let applied = [AppliedState {
            id: 2,
            what: "profile latency".to_string(),
            profile: Some("latency".to_string()),
            drift: Vec::new(),
            rollback: "nettune rollback 2".to_string(),
            apply_again: "nettune apply --profile latency --netns blue".to_string(),
            steered: None,
            xdp: None,
        }];
        let found = |host: &crate::host::Host| {
            findings(&Context {
                applied: &applied,
                traced: None,
                ..Context::new(host)
            })
        };
        for name in ["net.core.busy_read", "net.core.busy_poll"] {
            host.host_sysctls.insert(name.to_string(), "0".to_string());
        }
        assert!(found(&host).is_empty(), "{:#?}", found(&host));
        host.host_sysctls
            .insert("net.core.busy_poll".to_string(), "50".to_string());
        let named = found(&host);
        assert_eq!(named.len(), 1, "{named:#?}");
        assert!(
            named[0]
                .fix
                .contains("defer-hard-irqs 2, gro-flush-timeout 20000 ns"),
            "{}",
            named[0].fix
        );
    }
}
