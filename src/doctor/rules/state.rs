//! `state.drift`: a state nettune applied no longer holds.

use super::super::{Context, Finding, Severity};

/// At most this many changed settings are named in the evidence.
const MAX_NAMED: usize = 4;

pub fn check(ctx: &Context, out: &mut Vec<Finding>) {
    // An XDP program's record has its own rule (xdp.stale-program).
    for state in ctx
        .applied
        .iter()
        .filter(|s| !s.drift.is_empty() && s.xdp.is_none())
    {
        let named: Vec<String> = state
            .drift
            .iter()
            .take(MAX_NAMED)
            .map(|d| {
                format!(
                    "{} {} is '{}', was set to '{}'",
                    d.group,
                    d.target.short_name(),
                    d.now,
                    d.applied
                )
            })
            .collect();
        let more = state.drift.len().saturating_sub(MAX_NAMED);
        let mut evidence = named.join("; ");
        if more > 0 {
            evidence.push_str(&format!("; {more} more"));
        }
        let irqs = state.drift.iter().any(|d| d.target.irq().is_some());
        out.push(Finding {
            id: "state.drift",
            severity: Severity::Warn,
            title: format!(
                "applied state {} ({}) no longer holds: {} setting(s) changed since",
                state.id,
                state.what,
                state.drift.len()
            ),
            evidence,
            why: format!(
                "Something changed these values after nettune applied them, so the tuning in \
                 place is not the one applied (and not the one measured).{} A driver reload or \
                 an interface created again resets its queue settings; NetworkManager, \
                 systemd-sysctl or configuration management may rewrite sysctls.",
                if irqs {
                    " irqbalance rewrites IRQ affinity within seconds."
                } else {
                    ""
                }
            ),
            fix: format!(
                "Find what changes them{}, then apply again (`{}`, then `{}`); `--persist` \
                 brings them back after a reboot.",
                if irqs {
                    " (irqbalance: `systemctl status irqbalance`; stop it or ban these IRQs)"
                } else {
                    ""
                },
                state.rollback,
                state.apply_again,
            ),
            profile: None,
            changes: Vec::new(),
            scope: Vec::new(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::testkit::vm_2cpu_single_queue;
    use crate::doctor::AppliedState;
    use crate::plan::Drift;

    #[test]
    fn a_state_whose_values_changed_is_a_finding_naming_them() {
        let host = vm_2cpu_single_queue();
        let applied = [AppliedState {
            id: 3,
            what: "profile pps".to_string(),
            profile: Some("pps".to_string()),
            steered: None,
            xdp: None,
            drift: vec![Drift {
                target: "/sys/class/net/eth0/queues/rx-0/rps_cpus"
                    .parse()
                    .expect("target"),
                group: "eth0".to_string(),
                applied: crate::plan::Value::cpu_mask(&[0, 1]),
                now: "0".to_string(),
            }],
            rollback: "nettune rollback 3 --state-dir /tmp/st".to_string(),
            apply_again: "nettune apply --profile pps --netns blue --state-dir /tmp/st".to_string(),
        }];
        let ctx = Context {
            applied: &applied,
            traced: None,
            ..Context::new(&host)
        };
        let mut out = Vec::new();
        check(&ctx, &mut out);
        assert_eq!(out.len(), 1);
        assert!(
            out[0].title.starts_with("applied state 3"),
            "{}",
            out[0].title
        );
        assert_eq!(out[0].evidence, "eth0 rx-0/rps_cpus is '0', was set to '3'");
        assert!(
            out[0].fix.contains(
                "(`nettune rollback 3 --state-dir /tmp/st`, then `nettune apply --profile pps \
                 --netns blue --state-dir /tmp/st`)"
            ),
            "{}",
            out[0].fix
        );
        // A state that still holds says nothing.
        let holds = [AppliedState {
            drift: Vec::new(),
            ..applied[0].clone()
        }];
        let ctx = Context {
            applied: &holds,
            traced: None,
            ..Context::new(&host)
        };
        let mut out = Vec::new();
        check(&ctx, &mut out);
        assert!(out.is_empty());
    }
}
