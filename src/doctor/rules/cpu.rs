//! CPU settings that tax the network path: cpu.idle-latency,
//! cpu.mitigations.

use super::shared::sentence;
use crate::base::cpuset::format_list;
use crate::doctor::planned::Plans;
use crate::doctor::{Context, Finding, Severity};
use crate::host::Host;
use crate::plan::values::{GOVERNOR, HALT_POLL_NS};
use crate::plan::{Profile, Target};

/// Idle states slower than this to leave are "deep" for a latency profile:
/// tuned's network-latency keeps CPUs in C1 or shallower (exit ~1-2 us) and
/// C1E is ~10 us; C3/C6-class states take 40-130 us, longer than a whole
/// busy-polled round trip.
const DEEP_IDLE_EXIT_US: u64 = 10;

/// cpufreq governors that run CPUs slowly between bursts.
const SLOW_GOVERNORS: &[&str] = &["powersave"];

/// Vulnerabilities whose default mitigations cost little per syscall
/// (barriers in copy routines; opt-in per process), so they alone do not
/// make the note true.
const CHEAP_MITIGATIONS: &[&str] = &["spectre_v1", "spec_store_bypass"];

const WHY_IDLE: &str = "A request/response round trip wakes an idle CPU at least twice: the \
deeper its idle state the longer the wake-up, and a powersave governor leaves it at a low clock \
for the work that follows. In a VM with haltpoll at guest_halt_poll_ns = 0 an idle vCPU halts at \
once and every wake-up is a VM exit; polling a while before halting avoids the exit \
(Documentation/virt/guest-halt-polling.rst). tuned's network-latency profile sets the \
performance governor and keeps CPUs out of deep idle states; fasterdata.es.net (100G tuning) \
sets the performance governor too.";

const WHY_MITIGATIONS: &str = "CPU vulnerability mitigations add work at every kernel entry and \
exit (page-table switches, return-stack and branch-predictor barriers), which a network server \
pays per syscall. In \"Linux Kernel vs DPDK: HTTP Performance Showdown\" (talawah.io), with \
mitigations on the kernel HTTP path lost 33% while DPDK, which makes no syscall per packet, lost \
nothing.";

pub fn check(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    idle_latency(ctx.host, plans, out);
    mitigations(ctx.host, out);
}

/// One cause of cpu.idle-latency: what was seen, how to fix it, the
/// targets the fix writes, and whether it alone makes the finding a warning.
struct IdleCause {
    seen: String,
    fix: String,
    scope: Vec<Target>,
    warn: bool,
}

fn idle_latency(host: &Host, plans: &Plans, out: &mut Vec<Finding>) {
    let mut causes = slow_governors(host, plans);
    causes.extend(haltpoll_without_polling(host, plans));
    causes.extend(deep_idle_states(host));
    if causes.is_empty() {
        return;
    }
    let severity = if causes.iter().any(|c| c.warn) {
        Severity::Warn
    } else {
        Severity::Info
    };
    let seen: Vec<&str> = causes.iter().map(|c| c.seen.as_str()).collect();
    let fixes: Vec<&str> = causes.iter().map(|c| c.fix.as_str()).collect();
    let fix = format!("{}.", sentence(&fixes.join("; ")));
    out.push(Finding {
        id: "cpu.idle-latency",
        severity,
        title: "Idle and frequency settings add wake-up latency".to_string(),
        evidence: seen.join("; "),
        why: WHY_IDLE.to_string(),
        fix,
        profile: Some(Profile::Latency.name()),
        changes: Vec::new(),
        scope: causes.into_iter().flat_map(|c| c.scope).collect(),
    });
}

/// A slow cpufreq governor on some CPUs; the fix names the CPUs the
/// latency plan sets to the fast governor.
fn slow_governors(host: &Host, plans: &Plans) -> Vec<IdleCause> {
    // The plan's targets for the governor, so that the fix can say what the
    // plan does.
    let governor_scope: Vec<Target> = host
        .cpus
        .iter()
        .map(|c| Target::Governor(c.id))
        .chain([Target::Cpufreq])
        .collect();
    let mut causes = Vec::new();
    for governor in SLOW_GOVERNORS {
        let Some(cpus) = host
            .cpufreq
            .governors
            .get(*governor)
            .filter(|c| !c.is_empty())
        else {
            continue;
        };
        let driver = host
            .cpufreq
            .driver
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        let planned = plans.planned(Profile::Latency, &governor_scope);
        let set: Vec<u32> = planned
            .changes
            .iter()
            .filter_map(|c| match c.target {
                Target::Governor(cpu) => Some(cpu),
                _ => None,
            })
            .collect();
        let fix = if set.is_empty() {
            format!(
                "write {GOVERNOR} to /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor by hand"
            )
        } else {
            format!(
                "write {GOVERNOR} to /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor of \
                 the network CPUs {}",
                format_list(&set)
            )
        };
        causes.push(IdleCause {
            seen: format!(
                "cpufreq governor {governor}{driver} on CPUs {}",
                format_list(cpus)
            ),
            fix,
            scope: governor_scope.clone(),
            warn: true,
        });
    }
    causes
}

/// A guest's haltpoll cpuidle with guest_halt_poll_ns = 0: every wake-up
/// is a VM exit.
fn haltpoll_without_polling(host: &Host, plans: &Plans) -> Option<IdleCause> {
    let idle = &host.cpuidle;
    let haltpoll =
        idle.governor.as_deref() == Some("haltpoll") || idle.driver.as_deref() == Some("haltpoll");
    if !haltpoll || idle.guest_halt_poll_ns != Some(0) {
        return None;
    }
    let halt_scope = vec![Target::HaltPoll];
    let planned = plans.planned(Profile::Latency, &halt_scope);
    let (value, by_hand) = match planned.change(&Target::HaltPoll) {
        Some(c) => (c.to.to_string(), ""),
        None => (HALT_POLL_NS.to_string(), " by hand"),
    };
    let us = value.parse::<u64>().unwrap_or(HALT_POLL_NS) / 1000;
    Some(IdleCause {
        seen: "cpuidle haltpoll with guest_halt_poll_ns = 0: an idle vCPU halts at once"
            .to_string(),
        fix: format!(
            "write {value} to {}{by_hand} (an idle vCPU then polls up to {us} us \
             before halting, which costs host CPU time)",
            Target::HaltPoll
        ),
        scope: halt_scope,
        warn: true,
    })
}

/// Enabled idle states slower to leave than DEEP_IDLE_EXIT_US. Only a note:
/// nettune does not change idle states, so the fix is by hand.
fn deep_idle_states(host: &Host) -> Option<IdleCause> {
    let deep: Vec<(usize, String)> = host
        .cpuidle
        .states
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.disabled && s.latency_us.is_some_and(|l| l > DEEP_IDLE_EXIT_US))
        .map(|(i, s)| (i, format!("{} ({} us)", s.name, s.latency_us.unwrap_or(0))))
        .collect();
    if deep.is_empty() {
        return None;
    }
    let names: Vec<&str> = deep.iter().map(|(_, n)| n.as_str()).collect();
    let indices: Vec<String> = deep.iter().map(|(i, _)| format!("state{i}")).collect();
    Some(IdleCause {
        seen: format!("deep idle states enabled: {}", names.join(", ")),
        fix: format!(
            "for latency work, write 1 to /sys/devices/system/cpu/cpuN/cpuidle/{{{}}}/disable by \
             hand (nettune leaves idle states alone: it is a trade of power and heat for \
             wake-up time that the operator makes)",
            indices.join(",")
        ),
        scope: Vec::new(),
        warn: false,
    })
}

fn mitigations(host: &Host, out: &mut Vec<Finding>) {
    let m = &host.mitigations;
    let off = m
        .boot_param
        .as_deref()
        .is_some_and(|p| p.split(',').any(|w| w.trim() == "off"));
    if off {
        return;
    }
    let active: Vec<String> = m
        .vulnerabilities
        .iter()
        .filter(|(name, text)| {
            text.starts_with("Mitigation") && !CHEAP_MITIGATIONS.contains(&name.as_str())
        })
        .map(|(name, text)| {
            let how = text
                .trim_start_matches("Mitigation:")
                .split(';')
                .next()
                .unwrap_or("")
                .trim();
            format!("{name} ({how})")
        })
        .collect();
    if active.is_empty() {
        return;
    }
    let boot = match &m.boot_param {
        Some(p) => format!("mitigations={p}"),
        None => "no mitigations= boot parameter".to_string(),
    };
    out.push(Finding {
        id: "cpu.mitigations",
        severity: Severity::Info,
        title: "CPU vulnerability mitigations are on".to_string(),
        evidence: format!("mitigated: {}; {boot}", active.join(", ")),
        why: WHY_MITIGATIONS.to_string(),
        fix: "Keep them on. mitigations=off on the kernel command line reopens the side channels \
              they close (Spectre, Meltdown, Retbleed class: one process, user or guest reading \
              another's memory), acceptable only on a host that runs no untrusted code. Cut \
              syscalls instead: recvmmsg/sendmmsg batches (Cloudflare, \"How to receive a \
              million packets per second\"), UDP GSO/GRO \
              (Documentation/networking/segmentation-offloads.rst), io_uring (io_uring(7))."
            .to_string(),
        profile: None,
        changes: Vec::new(),
        scope: Vec::new(),
    });
}

#[cfg(test)]
mod tests {
    use crate::doctor::testkit::*;
    use crate::doctor::Severity;

    #[test]
    fn idle_latency_fires_for_this_vms_haltpoll() {
        let f = assert_fires(
            &diagnose(&vm_2cpu_single_queue()),
            "cpu.idle-latency",
            Severity::Warn,
            &["haltpoll", "guest_halt_poll_ns = 0"],
        );
        assert!(
            f.fix
                .contains("200000 to /sys/module/haltpoll/parameters/guest_halt_poll_ns"),
            "{}",
            f.fix
        );
        assert_eq!(f.profile, Some("latency"));
    }

    #[test]
    fn idle_latency_fires_for_powersave_and_notes_deep_states() {
        let mut host = two_socket_smt_8q();
        host.cpufreq.governors = [("powersave".to_string(), (0..32).collect())].into();
        host.cpuidle.states[3].disabled = false;
        let f = assert_fires(
            &diagnose(&host),
            "cpu.idle-latency",
            Severity::Warn,
            &["powersave (intel_pstate) on CPUs 0-31", "C6 (133 us)"],
        );
        // The governor is planned (latency, on the network CPUs); idle
        // states are left to the operator, and the fix says so.
        assert!(
            f.fix.contains("performance to") && f.fix.contains("network CPUs 0-31"),
            "{}",
            f.fix
        );
        assert!(
            f.fix.contains("cpuidle/{state3}/disable by hand"),
            "{}",
            f.fix
        );
        assert_eq!(f.profile, Some("latency"));
        assert_eq!(f.changes.len(), 32, "{:?}", f.changes);

        // Deep states alone are a note, and no profile changes them.
        let mut host = two_socket_smt_8q();
        host.cpuidle.states[3].disabled = false;
        let f = assert_fires(
            &diagnose(&host),
            "cpu.idle-latency",
            Severity::Info,
            &["C6 (133 us)"],
        );
        assert!(
            f.fix.contains("nettune leaves idle states alone"),
            "{}",
            f.fix
        );
        assert_eq!((f.profile, f.changes.len()), (None, 0));
    }

    #[test]
    fn idle_latency_silent_when_tuned_or_unknown() {
        none(&diagnose(&two_socket_smt_8q()), "cpu.idle-latency");
        // haltpoll already raised.
        let mut host = vm_2cpu_single_queue();
        host.cpuidle.guest_halt_poll_ns = Some(200_000);
        none(&diagnose(&host), "cpu.idle-latency");
        // Nothing known about cpuidle or cpufreq.
        let mut host = vm_2cpu_single_queue();
        host.cpuidle = Default::default();
        none(&diagnose(&host), "cpu.idle-latency");
    }

    #[test]
    fn mitigations_note_names_what_is_mitigated() {
        let f = assert_fires(
            &diagnose(&vm_2cpu_single_queue()),
            "cpu.mitigations",
            Severity::Info,
            &[
                "spectre_v2 (Retpolines)",
                "mitigations=auto,no_guest_host,no_guest_guest",
            ],
        );
        assert!(!f.evidence.contains("spectre_v1"), "{}", f.evidence);
        // Never advise turning them off without saying what that exposes.
        assert!(
            f.fix.contains("Keep them on") && f.fix.contains("another's memory"),
            "{}",
            f.fix
        );
        assert_eq!(f.profile, None);
    }

    #[test]
    fn mitigations_silent_when_off_unaffected_or_unknown() {
        let mut host = vm_2cpu_single_queue();
        host.mitigations.boot_param = Some("off".into());
        none(&diagnose(&host), "cpu.mitigations");
        let mut host = vm_2cpu_single_queue();
        host.mitigations.vulnerabilities.remove("spectre_v2");
        none(&diagnose(&host), "cpu.mitigations");
        let mut host = vm_2cpu_single_queue();
        host.mitigations = Default::default();
        none(&diagnose(&host), "cpu.mitigations");
    }
}
