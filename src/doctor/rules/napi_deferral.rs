//! napi.deferral-delays: IRQ deferral set for throughput (a long
//! gro-flush-timeout) on a host where nothing busy polls. Once a NAPI poll
//! has found packets, deferral keeps the queue's IRQ masked and leaves the
//! next poll to the timer: a request that arrives meanwhile waits for it.
//! A timer at or above [`LONG_DEFERRAL_TIMER_NS`] is longer than a whole
//! request-response round trip on a LAN, across veth or loopback (tens of
//! microseconds), so every request waits longer than the exchange itself
//! takes.

use super::shared::{
    busy_polling_off, judged_interfaces, napi_queues, planned_napi_value, plural, queue_list,
};
use crate::base::driver::NapiKey;
use crate::doctor::planned::Plans;
use crate::doctor::{Context, Finding, Severity};
use crate::host::Interface;
use crate::plan::target::Target;
use crate::plan::values::{BUSY_POLL_US, LATENCY_NAPI};
use crate::plan::{napi_values, Profile};

/// 100 us: twice the http profile's timer (50 us), five times the latency
/// profile's (20 us), and longer than a request-response round trip across
/// a veth pair (10-60 us measured, docs/benchmarks.md) or a LAN switch.
pub(crate) const LONG_DEFERRAL_TIMER_NS: u64 = 100_000;

const WHY: &str = "IRQ deferral (defer-hard-irqs with gro-flush-timeout) keeps a queue's IRQ \
masked after a NAPI poll that found packets, for up to defer-hard-irqs empty polls, and leaves \
each next poll to the gro-flush-timeout timer unless an application busy polls first. That \
saves interrupts for a bulk receiver, which always has packets waiting; a request-response \
server has one packet at a time, and with nobody polling, each request that arrives while the \
IRQ is masked waits in the queue until the timer fires (kernel \
Documentation/networking/napi.rst, \"IRQ mitigation\": a packet nobody polls for waits up to \
gro-flush-timeout). veth has no hardware IRQ but the same deferral: while its NAPI is deferred \
a sent packet does not wake it. An application that busy polls its own sockets (SO_BUSY_POLL, \
epoll busy polling) takes the packets before the timer; doctor cannot see per-socket options, \
so ignore this finding for such a program (--ignore napi.deferral-delays).";

/// The RX queues of `iface` whose NAPI defers IRQs with a long timer, and
/// their values as text.
fn long_deferral(iface: &Interface) -> Option<(Vec<u32>, Vec<String>)> {
    napi_queues(
        iface,
        |defer, timer| defer > 0 && timer >= LONG_DEFERRAL_TIMER_NS,
        |defer, timer| {
            format!(
                "defer-hard-irqs {defer}, gro-flush-timeout {timer} ns ({} us)",
                timer / 1000
            )
        },
    )
}

pub fn check(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    let Some(polling) = busy_polling_off(ctx.host) else {
        return;
    };
    for iface in judged_interfaces(ctx) {
        let Some((queues, values)) = long_deferral(iface) else {
            continue;
        };
        let scope: Vec<Target> = queues
            .iter()
            .flat_map(|&q| {
                [NapiKey::DeferHardIrqs, NapiKey::GroFlushTimeout]
                    .map(|key| Target::napi(&iface.name, q, key))
            })
            .collect();
        let planned = plans.planned(Profile::Latency, &scope);
        // The values the latency plan writes here: a short deferral where
        // busy polling will be on, none where nothing will poll.
        let wanted = napi_values(ctx.host, &plans.options(Profile::Latency))
            .map_or(LATENCY_NAPI, |(values, _)| values);
        let value = |key, default| planned_napi_value(&planned, key, default);
        let defer = value(NapiKey::DeferHardIrqs, wanted.defer_hard_irqs);
        let timer = value(NapiKey::GroFlushTimeout, wanted.gro_flush_timeout_ns);
        let by_hand = if planned.changes.is_empty() {
            " by hand (ynl --family netdev --do napi-set with each queue's NAPI id from \
             queue-get, or the device's sysfs files napi_defer_hard_irqs and gro_flush_timeout)"
        } else {
            ""
        };
        let fix = if defer == "0" {
            format!(
                "For request-response traffic, turn IRQ deferral off on each of these RX queues: \
                 defer-hard-irqs 0 and gro-flush-timeout {timer} ns{by_hand}. Nothing busy polls \
                 here{cannot}: without a poller any deferral only holds packets until its timer, \
                 and without deferral each packet wakes its queue at once. Where busy polling is \
                 on host-wide (net.core.busy_read and busy_poll {BUSY_POLL_US}), the latency \
                 profile keeps a short deferral instead ({} polls, {} us). Keep the long timer \
                 only on queues that carry bulk traffic.",
                LATENCY_NAPI.defer_hard_irqs,
                LATENCY_NAPI.gro_flush_timeout_ns / 1000,
                cannot = if ctx.host.in_netns() {
                    " (a network namespace cannot turn busy polling on)"
                } else {
                    ""
                }
            )
        } else {
            format!(
                "For request-response traffic, set the NAPI of each of these RX queues to \
                 defer-hard-irqs {defer} and gro-flush-timeout {timer} ns{by_hand}: a short \
                 deferral, so a packet nobody polls for waits one short timer at most \
                 (defer-hard-irqs 0 takes an IRQ per packet instead). Keep the long timer only \
                 on queues that carry bulk traffic."
            )
        };
        out.push(Finding {
            id: "napi.deferral-delays",
            severity: Severity::Warn,
            title: format!(
                "{}: IRQ deferral with a long timer holds each request until the timer fires",
                iface.name
            ),
            evidence: format!(
                "{} of {} ({}): {}, a timer of at least {} us; {polling}",
                plural(queues.len(), "RX queue"),
                iface.name,
                queue_list(&queues),
                values.join("; "),
                LONG_DEFERRAL_TIMER_NS / 1000
            ),
            why: WHY.to_string(),
            fix,
            profile: Some(Profile::Latency.name()),
            changes: Vec::new(),
            scope,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::testkit::{one_napi, set_sysctl, vm_2cpu_single_queue};
    use crate::plan::values::HTTP_NAPI;

    /// The fixture host with eth0's one RX queue served by NAPI 257 with
    /// these deferral values, busy polling off.
    fn deferred(defer: u32, timer: u64) -> crate::host::Host {
        let mut host = vm_2cpu_single_queue();
        host.interfaces[0].netdev = one_napi(defer, timer, true);
        set_sysctl(&mut host, "net.core.busy_read", "0");
        set_sysctl(&mut host, "net.core.busy_poll", "0");
        host
    }

    fn findings(host: &crate::host::Host) -> Vec<Finding> {
        crate::doctor::diagnose(&Context::new(host))
            .into_iter()
            .filter(|f| f.id == "napi.deferral-delays")
            .collect()
    }

    #[test]
    fn a_long_timer_with_nobody_polling_is_named_with_the_latency_plan() {
        let found = findings(&deferred(100, 200_000));
        assert_eq!(found.len(), 1, "{found:#?}");
        let f = &found[0];
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(
            f.evidence,
            "1 RX queue of eth0 (rx-0): defer-hard-irqs 100, gro-flush-timeout 200000 ns (200 \
             us), a timer of at least 100 us; busy polling off (net.core.busy_read 0, \
             net.core.busy_poll 0)"
        );
        assert!(f.why.contains("napi.rst"), "{}", f.why);
        // The fix is the latency profile's plan for this queue, by value.
        assert_eq!(f.profile, Some("latency"));
        let planned: Vec<(String, String, String)> = f
            .changes
            .iter()
            .map(|c| (c.target.to_string(), c.from.clone(), c.to.clone()))
            .collect();
        assert_eq!(
            planned,
            [
                (
                    "napi:eth0:rx-0:defer-hard-irqs".to_string(),
                    "100".to_string(),
                    LATENCY_NAPI.defer_hard_irqs.to_string()
                ),
                (
                    "napi:eth0:rx-0:gro-flush-timeout".to_string(),
                    "200000".to_string(),
                    LATENCY_NAPI.gro_flush_timeout_ns.to_string()
                ),
            ]
        );
        assert!(
            f.fix
                .contains("defer-hard-irqs 2 and gro-flush-timeout 20000 ns"),
            "{}",
            f.fix
        );
    }

    #[test]
    fn silent_for_the_profiles_own_timers_without_deferral_or_with_busy_polling() {
        for napi in [LATENCY_NAPI, HTTP_NAPI] {
            let host = deferred(napi.defer_hard_irqs as u32, napi.gro_flush_timeout_ns);
            assert!(findings(&host).is_empty(), "{napi:?}");
        }
        // A long timer alone only bounds how long GRO holds packets.
        assert!(findings(&deferred(0, 200_000)).is_empty());
        for sysctl in ["net.core.busy_read", "net.core.busy_poll"] {
            let mut host = deferred(100, 200_000);
            set_sysctl(&mut host, sysctl, "50");
            assert!(findings(&host).is_empty(), "{sysctl}");
        }
        // Just below the threshold.
        assert!(findings(&deferred(100, LONG_DEFERRAL_TIMER_NS - 1)).is_empty());
        assert_eq!(findings(&deferred(1, LONG_DEFERRAL_TIMER_NS)).len(), 1);
    }

    #[test]
    fn in_a_namespace_busy_polling_is_judged_by_the_hosts_values() {
        let mut host = deferred(100, 200_000);
        for name in crate::host::ROOT_NAMESPACE_SYSCTLS {
            host.sysctls.remove(*name);
        }
        host.source.netns = Some("blue".to_string());
        // Not visible at all: said so, and taken as off.
        let found = findings(&host);
        assert_eq!(found.len(), 1);
        assert!(
            found[0].evidence.ends_with(
                "busy polling unknown, taken as off: net.core.busy_read and busy_poll are not \
                 visible from network namespace 'blue'"
            ),
            "{}",
            found[0].evidence
        );
        // The host's values, read before entering the namespace.
        for (name, us) in [("net.core.busy_read", "0"), ("net.core.busy_poll", "0")] {
            host.host_sysctls.insert(name.to_string(), us.to_string());
        }
        let found = findings(&host);
        assert!(
            found[0].evidence.ends_with(
                "busy polling off host-wide (net.core.busy_read 0, net.core.busy_poll 0; a \
                 network namespace cannot set them)"
            ),
            "{}",
            found[0].evidence
        );
        host.host_sysctls
            .insert("net.core.busy_read".to_string(), "50".to_string());
        assert!(findings(&host).is_empty());
    }

    /// `deferred(100, 200000)` read with --netns blue, the host's busy
    /// polling values as given (read before entering the namespace).
    fn in_netns(busy_read: &str, busy_poll: &str) -> crate::host::Host {
        let mut host = deferred(100, 200_000);
        for name in crate::host::ROOT_NAMESPACE_SYSCTLS {
            host.sysctls.remove(*name);
        }
        host.source.netns = Some("blue".to_string());
        for (name, us) in [
            ("net.core.busy_read", busy_read),
            ("net.core.busy_poll", busy_poll),
        ] {
            host.host_sysctls.insert(name.to_string(), us.to_string());
        }
        host
    }

    /// (target, from, to, reason) of a plan's NAPI changes.
    fn napi_plan(
        host: &crate::host::Host,
        profile: Profile,
    ) -> Vec<(String, String, String, String)> {
        crate::plan::plan(host, &crate::plan::PlanOptions::new(profile))
            .expect("plan")
            .changes
            .into_iter()
            .filter(|c| matches!(c.target, Target::Napi { .. }))
            .map(|c| (c.target.to_string(), c.from, c.to.to_string(), c.reason))
            .collect()
    }

    #[test]
    fn in_a_namespace_whose_host_does_not_busy_poll_the_fix_turns_deferral_off() {
        let host = in_netns("0", "0");
        let found = findings(&host);
        assert_eq!(found.len(), 1, "{found:#?}");
        let f = &found[0];
        let planned: Vec<(String, String, String)> = f
            .changes
            .iter()
            .map(|c| (c.target.to_string(), c.from.clone(), c.to.clone()))
            .collect();
        assert_eq!(
            planned,
            [
                (
                    "napi:eth0:rx-0:defer-hard-irqs".to_string(),
                    "100".to_string(),
                    "0".to_string()
                ),
                (
                    "napi:eth0:rx-0:gro-flush-timeout".to_string(),
                    "200000".to_string(),
                    "0".to_string()
                ),
            ]
        );
        assert!(
            f.fix.starts_with(
                "For request-response traffic, turn IRQ deferral off on each of these RX \
                 queues: defer-hard-irqs 0 and gro-flush-timeout 0 ns. Nothing busy polls here \
                 (a network namespace cannot turn busy polling on)"
            ) && f.fix.contains("a short deferral instead (2 polls, 20 us)"),
            "{}",
            f.fix
        );
        // The plan says why, with what it read.
        let plan = napi_plan(&host, Profile::Latency);
        assert_eq!(plan.len(), 2, "{plan:#?}");
        assert!(
            plan[0].3.starts_with(
                "IRQ deferral off: nothing busy polls here (net.core.busy_read 0, \
                 net.core.busy_poll 0 on the host, which network namespace 'blue' cannot \
                 change)"
            ) && plan[0].3.contains("napi.rst, \"IRQ mitigation\""),
            "{}",
            plan[0].3
        );
        // The http profile batches a busy server's polls either way.
        let http: Vec<(String, String)> = napi_plan(&host, Profile::Http)
            .into_iter()
            .map(|c| (c.0, c.2))
            .collect();
        assert_eq!(
            http,
            [
                (
                    "napi:eth0:rx-0:gro-flush-timeout".to_string(),
                    "50000".to_string()
                ),
                (
                    "napi:eth0:rx-0:irq-suspend-timeout".to_string(),
                    "20000000".to_string()
                )
            ]
        );

        // Applied: nothing left to name, by either NAPI rule, also with the
        // latency state on record.
        let mut applied = host.clone();
        applied.interfaces[0].netdev = one_napi(0, 0, true);
        assert!(findings(&applied).is_empty());
        assert!(napi_plan(&applied, Profile::Latency).is_empty());
        let state = [crate::doctor::AppliedState {
            id: 1,
            what: "profile latency".to_string(),
            profile: Some("latency".to_string()),
            drift: Vec::new(),
            rollback: "nettune rollback 1".to_string(),
            apply_again: "nettune apply --profile latency".to_string(),
            steered: None,
            xdp: None,
        }];
        let ctx = Context {
            applied: &state,
            traced: None,
            ..Context::new(&applied)
        };
        let napi: Vec<&str> = crate::doctor::diagnose(&ctx)
            .iter()
            .map(|f| f.id)
            .filter(|id| id.starts_with("napi."))
            .collect();
        assert!(napi.is_empty(), "{napi:?}");
    }

    #[test]
    fn where_busy_polling_is_on_or_set_by_the_same_plan_the_short_deferral_stays() {
        let short = |host: &crate::host::Host| -> Vec<(String, String)> {
            napi_plan(host, Profile::Latency)
                .into_iter()
                .map(|c| (c.0, c.2))
                .collect()
        };
        let expected = [
            (
                "napi:eth0:rx-0:defer-hard-irqs".to_string(),
                "2".to_string(),
            ),
            (
                "napi:eth0:rx-0:gro-flush-timeout".to_string(),
                "20000".to_string(),
            ),
            (
                "napi:eth0:rx-0:irq-suspend-timeout".to_string(),
                "20000000".to_string(),
            ),
        ];
        // On the host: the latency plan sets busy_read and busy_poll 50.
        assert_eq!(short(&deferred(100, 200_000)), expected);
        // In a namespace whose host busy polls (either sysctl).
        assert_eq!(short(&in_netns("50", "0")), expected);
        assert_eq!(short(&in_netns("0", "50")), expected);
    }
}
