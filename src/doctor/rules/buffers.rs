//! TCP buffers and options: tcp.buffers-small, tcp.buffers-inconsistent,
//! tcp.options-off, mtu.jumbo-probing.

use super::shared::{judged_interfaces, sysctl_fields, sysctl_targets, sysctl_u64};
use crate::base::units::{format_bytes, format_rate, format_time};
use crate::doctor::planned::{Planned, Plans};
use crate::doctor::{Context, Finding, Severity};
use crate::host::Host;
use crate::plan::values::{buffer_tier, TCP_MTU_PROBING};
use crate::plan::Profile;

/// An autotuned flow whose buffer allows less than this fraction of the
/// path's bandwidth is critical: it loses more than half the link.
const CRIT_CEILING_FRACTION: f64 = 0.5;

/// MTUs above this are jumbo frames (9000 in practice; some NICs say 8192
/// or 8996), where path-MTU blackholes bite (fasterdata.es.net host tuning).
const JUMBO_MTU: u32 = 8000;

/// The largest window TCP can announce without window scaling.
const UNSCALED_WINDOW_BYTES: u64 = 65_535;

const WHY_SMALL: &str = "A TCP sender keeps at most one buffer of data unacknowledged, so one \
flow moves at most buffer / RTT: to fill the path, send and receive buffers must hold bandwidth x \
RTT (the bandwidth-delay product). Autotuning grows buffers up to the tcp_rmem/tcp_wmem maximum, \
and rmem_max/wmem_max cap what applications ask for with SO_RCVBUF/SO_SNDBUF (fasterdata.es.net \
host tuning: 1 Gbit/s x 50 ms needs 6.25 MB, 10 Gbit/s x 100 ms ~120 MB).";

const WHY_INCONSISTENT: &str = "Linux has two sets of limits: tcp_rmem/tcp_wmem bound what \
autotuning grows a socket to, and rmem_max/wmem_max bound what an application may request with \
SO_RCVBUF/SO_SNDBUF, after which that socket is no longer autotuned. When they disagree, \
programs on the same host get different ceilings without a word (a benchmark run with -w gets \
less than a download); tcp_rmem above rmem_max is a common mistake (Documentation/networking/\
ip-sysctl.rst: the tcp_rmem maximum does not override rmem_max; fasterdata.es.net host tuning \
sets rmem_max at or above the tcp_rmem maximum).";

const WHY_OPTIONS: &str = "Without window scaling (RFC 7323) the TCP window field holds at most \
64 KiB, so no buffer size helps: each flow moves 64 KiB per round trip. SACK lets a sender resend \
only what was lost and timestamps give RTT measurement and PAWS; fasterdata.es.net host tuning \
says to leave both on for fast long paths.";

const WHY_PROBING: &str = "With jumbo frames, a hop that carries less must say so with ICMP \
\"fragmentation needed\"; where that ICMP is filtered, full-size segments vanish and connections \
stall (a path-MTU blackhole). tcp_mtu_probing=1 makes TCP detect the blackhole and probe down to \
a size that passes (fasterdata.es.net host tuning: 1 with jumbo frames; 2, always probing, can \
hurt).";

pub fn check(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    buffers_small(ctx, plans, out);
    buffers_inconsistent(ctx.host, plans, out);
    options_off(ctx, plans, out);
    jumbo_probing(ctx, plans, out);
}

/// The plan's sysctl changes as one command (in plan order), then the
/// `wanted` settings (name, `name=value` to set by hand) the plan does not
/// change: "sysctl -w a=1 b='4096 131072 67108864'. By hand: sysctl -w c=1."
fn sysctl_fix(planned: &Planned, wanted: &[(&str, String)]) -> String {
    let sets: Vec<String> = planned
        .changes
        .iter()
        .filter_map(|c| {
            let name = c.target.sysctl_name()?;
            Some(assignment(name, c.to.as_str()))
        })
        .collect();
    let by_hand: Vec<&str> = wanted
        .iter()
        .filter(|(name, _)| planned.sysctl(name).is_none())
        .map(|(_, set)| set.as_str())
        .collect();
    let mut parts = Vec::new();
    if !sets.is_empty() {
        parts.push(format!("sysctl -w {}.", sets.join(" ")));
    }
    if !by_hand.is_empty() {
        parts.push(format!("By hand: sysctl -w {}.", by_hand.join(" ")));
    }
    parts.join(" ")
}

/// `name='4096 131072 67108864'` (a triple) or `name=212992`.
fn assignment(name: &str, value: &str) -> String {
    if value.contains(' ') {
        format!("{name}='{value}'")
    } else {
        format!("{name}={value}")
    }
}

/// The maximum (third) field of tcp_rmem / tcp_wmem.
fn tcp_max(host: &Host, name: &str) -> Option<u64> {
    sysctl_fields(host, name)?.get(2).copied()
}

fn buffers_small(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    let (Some(bw), Some(rtt)) = (ctx.bandwidth_bps, ctx.rtt_secs) else {
        return;
    };
    let host = ctx.host;
    let bdp = (bw as f64 * rtt / 8.0).round() as u64;
    let tcp_rmem = tcp_max(host, "net.ipv4.tcp_rmem");
    let tcp_wmem = tcp_max(host, "net.ipv4.tcp_wmem");
    let limits = [
        ("tcp_rmem max", tcp_rmem),
        ("tcp_wmem max", tcp_wmem),
        ("net.core.rmem_max", sysctl_u64(host, "net.core.rmem_max")),
        ("net.core.wmem_max", sysctl_u64(host, "net.core.wmem_max")),
    ];
    let small: Vec<(&str, u64)> = limits
        .iter()
        .filter_map(|(name, v)| v.filter(|&v| v < bdp).map(|v| (*name, v)))
        .collect();
    if small.is_empty() {
        return;
    }
    let below: Vec<String> = small
        .iter()
        .map(|(name, v)| format!("{name} {}", format_bytes(*v)))
        .collect();
    let autotune_cap = tcp_rmem.into_iter().chain(tcp_wmem).min();
    let mut severity = Severity::Warn;
    let ceiling = match autotune_cap {
        Some(cap) if cap < bdp => {
            let rate = (cap as f64 * 8.0 / rtt) as u64;
            if (rate as f64) < bw as f64 * CRIT_CEILING_FRACTION {
                severity = Severity::Crit;
            }
            format!(
                ". One autotuned flow tops out near {} ({} per {})",
                format_rate(rate),
                format_bytes(cap),
                format_time(rtt)
            )
        }
        _ => String::new(),
    };
    // The plan sizes all four for the path, from the same bandwidth x RTT
    // and the same tiers.
    let names = [
        "net.core.rmem_max",
        "net.core.wmem_max",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    ];
    let scope = sysctl_targets(&names);
    let planned = plans.planned(Profile::Throughput, &scope);
    let (tcp_max, core_max, source) = buffer_tier(bdp);
    let by_hand: Vec<(&str, String)> = small
        .iter()
        .map(|(label, _)| match *label {
            "tcp_rmem max" => tcp_by_hand(host, "net.ipv4.tcp_rmem", tcp_max),
            "tcp_wmem max" => tcp_by_hand(host, "net.ipv4.tcp_wmem", tcp_max),
            name => (name, assignment(name, &core_max.to_string())),
        })
        .collect();
    let fix = format!(
        "{} ({} in flight, rounded up to a buffer tier: {source}).",
        sysctl_fix(&planned, &by_hand).trim_end_matches('.'),
        format_bytes(bdp)
    );
    out.push(Finding {
        id: "tcp.buffers-small",
        severity,
        title: format!(
            "Buffers below the bandwidth-delay product of {} x {}",
            format_rate(bw),
            format_time(rtt)
        ),
        evidence: format!(
            "{} x {} = {} in flight; below it: {}{ceiling}",
            format_rate(bw),
            format_time(rtt),
            format_bytes(bdp),
            below.join(", ")
        ),
        why: WHY_SMALL.to_string(),
        fix,
        profile: Some(Profile::Throughput.name()),
        changes: Vec::new(),
        scope,
    });
}

/// A tcp_rmem/tcp_wmem triple with its maximum raised, min and default
/// kept, to set by hand.
fn tcp_by_hand(host: &Host, name: &'static str, max: u64) -> (&'static str, String) {
    let value = match sysctl_fields(host, name).as_deref() {
        Some([min, default, _]) => format!("{min} {default} {max}"),
        _ => format!("MIN DEFAULT {max}"),
    };
    (name, assignment(name, &value))
}

fn buffers_inconsistent(host: &Host, plans: &Plans, out: &mut Vec<Finding>) {
    let mut problems = Vec::new();
    // (sysctl, the smallest consistent value to set by hand)
    let mut wanted: Vec<(&str, String)> = Vec::new();
    for (dir, tcp, core) in [
        ("receive", "net.ipv4.tcp_rmem", "net.core.rmem_max"),
        ("send", "net.ipv4.tcp_wmem", "net.core.wmem_max"),
    ] {
        let fields = sysctl_fields(host, tcp);
        if let Some([min, default, max]) = fields.as_deref() {
            if min > default || default > max {
                problems.push(format!(
                    "{tcp} = '{min} {default} {max}' is not min <= default <= max"
                ));
                let (lo, mid, hi) = sorted3(*min, *default, *max);
                wanted.push((tcp, assignment(tcp, &format!("{lo} {mid} {hi}"))));
            }
        }
        let tcp_max = fields.as_ref().and_then(|f| f.get(2).copied());
        if let (Some(tmax), Some(cmax)) = (tcp_max, sysctl_u64(host, core)) {
            if tmax > cmax {
                problems.push(format!(
                    "{tcp} max {} is above {core} {}: autotuned sockets may {dir} into {}, \
                     a socket that sets its size is held to {}",
                    format_bytes(tmax),
                    format_bytes(cmax),
                    format_bytes(tmax),
                    format_bytes(cmax)
                ));
                wanted.push((core, assignment(core, &tmax.to_string())));
            }
        }
    }
    if sysctl_u64(host, "net.ipv4.tcp_moderate_rcvbuf") == Some(0) {
        if let Some([_, default, max]) = sysctl_fields(host, "net.ipv4.tcp_rmem").as_deref() {
            if max > default {
                problems.push(format!(
                    "net.ipv4.tcp_moderate_rcvbuf = 0: receive autotuning is off, so sockets \
                     stay at the tcp_rmem default {} and never use the {} maximum",
                    format_bytes(*default),
                    format_bytes(*max)
                ));
                let name = "net.ipv4.tcp_moderate_rcvbuf";
                wanted.push((name, assignment(name, "1")));
            }
        }
    }
    if problems.is_empty() {
        return;
    }
    let names: Vec<&str> = wanted.iter().map(|(n, _)| *n).collect();
    let scope = sysctl_targets(&names);
    let planned = plans.planned(Profile::Throughput, &scope);
    // The plan's values where it makes the change (it sizes the buffers for
    // a path as well); the smallest consistent values by hand otherwise.
    let fix = sysctl_fix(&planned, &wanted);
    out.push(Finding {
        id: "tcp.buffers-inconsistent",
        severity: Severity::Warn,
        title: "Buffer limits contradict each other".to_string(),
        evidence: problems.join("; "),
        why: WHY_INCONSISTENT.to_string(),
        fix,
        profile: Some(Profile::Throughput.name()),
        changes: Vec::new(),
        scope,
    });
}

fn sorted3(a: u64, b: u64, c: u64) -> (u64, u64, u64) {
    let mut v = [a, b, c];
    v.sort_unstable();
    (v[0], v[1], v[2])
}

fn options_off(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    let host = ctx.host;
    let mut seen = Vec::new();
    let mut names = Vec::new();
    let mut severity = Severity::Warn;
    if sysctl_u64(host, "net.ipv4.tcp_window_scaling") == Some(0) {
        severity = Severity::Crit;
        let per_flow = match ctx.rtt_secs {
            Some(rtt) => format!(
                ": at most {} per flow over {}",
                format_rate((UNSCALED_WINDOW_BYTES as f64 * 8.0 / rtt) as u64),
                format_time(rtt)
            ),
            None => String::new(),
        };
        seen.push(format!(
            "net.ipv4.tcp_window_scaling = 0 caps every window at 64 KiB{per_flow}"
        ));
        names.push("net.ipv4.tcp_window_scaling");
    }
    for name in ["net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps"] {
        if sysctl_u64(host, name) == Some(0) {
            seen.push(format!("{name} = 0"));
            names.push(name);
        }
    }
    if seen.is_empty() {
        return;
    }
    let scope = sysctl_targets(&names);
    let planned = plans.planned(Profile::Baseline, &scope);
    let wanted: Vec<(&str, String)> = names.iter().map(|n| (*n, assignment(n, "1"))).collect();
    let baseline = if planned.changes.is_empty() {
        ""
    } else {
        " The baseline profile puts back every other kernel default it knows as well: read its \
         plan first, or set just these."
    };
    let fix = format!(
        "Turn them back on (kernel defaults): {}{baseline}",
        sysctl_fix(&planned, &wanted)
    );
    out.push(Finding {
        id: "tcp.options-off",
        severity,
        title: "TCP options that fast paths need are off".to_string(),
        evidence: seen.join("; "),
        why: WHY_OPTIONS.to_string(),
        fix,
        profile: Some(Profile::Baseline.name()),
        changes: Vec::new(),
        scope,
    });
}

fn jumbo_probing(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    if sysctl_u64(ctx.host, "net.ipv4.tcp_mtu_probing") != Some(0) {
        return;
    }
    let jumbo: Vec<String> = judged_interfaces(ctx)
        .filter_map(|i| {
            let mtu = i.mtu?;
            (mtu > JUMBO_MTU).then(|| format!("{} MTU {mtu}", i.name))
        })
        .collect();
    if jumbo.is_empty() {
        return;
    }
    let scope = sysctl_targets(&["net.ipv4.tcp_mtu_probing"]);
    let planned = plans.planned(Profile::Throughput, &scope);
    let name = "net.ipv4.tcp_mtu_probing";
    let fix = sysctl_fix(
        &planned,
        &[(name, assignment(name, &TCP_MTU_PROBING.to_string()))],
    );
    out.push(Finding {
        id: "mtu.jumbo-probing",
        severity: Severity::Warn,
        title: "Jumbo frames without TCP MTU probing".to_string(),
        evidence: format!("{}; net.ipv4.tcp_mtu_probing = 0", jumbo.join(", ")),
        why: WHY_PROBING.to_string(),
        fix,
        profile: Some(Profile::Throughput.name()),
        changes: Vec::new(),
        scope,
    });
}

#[cfg(test)]
mod tests {
    use crate::doctor::testkit::*;
    use crate::doctor::{Context, Severity};

    fn with_path(host: &crate::host::Host, bw: u64, rtt: f64) -> Vec<crate::doctor::Finding> {
        crate::doctor::diagnose(&Context {
            bandwidth_bps: Some(bw),
            rtt_secs: Some(rtt),
            ..Context::new(host)
        })
    }

    #[test]
    fn buffers_small_for_10gbit_50ms_on_the_vm() {
        // BDP 62.5 MB; the VM: tcp_wmem max 4 MiB, rmem/wmem_max 4 MiB.
        let findings = with_path(&vm_2cpu_single_queue(), 10_000_000_000, 0.05);
        let f = assert_fires(
            &findings,
            "tcp.buffers-small",
            Severity::Crit,
            &[
                "10 Gbit/s x 50 ms = 59.6 MiB",
                "tcp_rmem max 32 MiB",
                "tcp_wmem max 4 MiB",
                "671.1 Mbit/s",
            ],
        );
        // The throughput tier for 62.5 MB: 64 MiB autotuning, 128 MiB cap.
        assert!(
            f.fix.contains("net.ipv4.tcp_wmem='4096 16384 67108864'"),
            "{}",
            f.fix
        );
        assert!(f.fix.contains("net.core.rmem_max=134217728"), "{}", f.fix);
        assert_eq!(f.profile, Some("throughput"));
        assert_eq!(f.changes.len(), 4, "{:?}", f.changes);
    }

    #[test]
    fn buffers_small_is_warn_when_flows_keep_over_half() {
        // 1 Gbit/s x 50 ms = 6.25 MB; tuned host's rmem/wmem limits are fine,
        // tcp max 4 MiB gives 671 Mbit/s: more than half.
        let mut host = two_socket_smt_8q();
        set_sysctl(&mut host, "net.ipv4.tcp_rmem", "4096 131072 4194304");
        set_sysctl(&mut host, "net.ipv4.tcp_wmem", "4096 16384 4194304");
        let f = assert_fires(
            &with_path(&host, 1_000_000_000, 0.05),
            "tcp.buffers-small",
            Severity::Warn,
            &["6 MiB in flight"],
        );
        // The smallest tier, 16 MiB; the 64 MiB caps are kept.
        assert!(f.fix.contains("'4096 131072 16777216'"), "{}", f.fix);
        assert!(!f.fix.contains("rmem_max"), "{}", f.fix);
    }

    #[test]
    fn buffers_small_silent_without_a_path_or_when_large_enough() {
        none(&diagnose(&vm_2cpu_single_queue()), "tcp.buffers-small");
        // 64 MiB limits hold 10 Gbit/s x 50 ms; 32 MiB tcp max holds 1 Gbit/s x 100 ms.
        none(
            &with_path(&two_socket_smt_8q(), 1_000_000_000, 0.1),
            "tcp.buffers-small",
        );
        let mut host = vm_2cpu_single_queue();
        host.sysctls.clear();
        none(&with_path(&host, 10_000_000_000, 0.05), "tcp.buffers-small");
    }

    #[test]
    fn inconsistent_fires_on_this_vms_tcp_rmem_above_rmem_max() {
        let f = assert_fires(
            &diagnose(&vm_2cpu_single_queue()),
            "tcp.buffers-inconsistent",
            Severity::Warn,
            &["tcp_rmem max 32 MiB is above net.core.rmem_max 4 MiB"],
        );
        // The plan's cap for the default path (no --bandwidth/--rtt), at
        // least the autotuning maximum.
        let plan = crate::plan::plan(
            &vm_2cpu_single_queue(),
            &crate::plan::PlanOptions::new(crate::plan::Profile::Throughput),
        )
        .expect("plan");
        let cap = plan
            .changes
            .iter()
            .find(|c| c.target == crate::plan::Target::sysctl("net.core.rmem_max"))
            .expect("rmem_max planned");
        assert!(cap.to.as_str().parse::<u64>().expect("number") >= 33554432);
        assert!(
            f.fix.contains(&format!("net.core.rmem_max={}", cap.to)),
            "{}",
            f.fix
        );
        assert!(!f.evidence.contains("wmem"), "{}", f.evidence);
        assert!(!f.fix.contains("wmem"), "{}", f.fix);
    }

    #[test]
    fn inconsistent_fires_for_disorder_and_autotuning_off() {
        let mut host = two_socket_smt_8q();
        set_sysctl(&mut host, "net.ipv4.tcp_wmem", "4096 67108864 33554432");
        set_sysctl(&mut host, "net.ipv4.tcp_moderate_rcvbuf", "0");
        let f = assert_fires(
            &diagnose(&host),
            "tcp.buffers-inconsistent",
            Severity::Warn,
            &["'4096 67108864 33554432'", "tcp_moderate_rcvbuf = 0"],
        );
        // Put in order, the maximum raised to the plan's tier.
        assert!(
            f.fix
                .contains("net.ipv4.tcp_wmem='4096 67108864 134217728'"),
            "{}",
            f.fix
        );
        assert!(
            f.fix.contains("net.ipv4.tcp_moderate_rcvbuf=1"),
            "{}",
            f.fix
        );
    }

    #[test]
    fn inconsistent_silent_when_consistent_or_unknown() {
        none(&diagnose(&two_socket_smt_8q()), "tcp.buffers-inconsistent");
        let mut host = vm_2cpu_single_queue();
        host.sysctls.remove("net.core.rmem_max");
        none(&diagnose(&host), "tcp.buffers-inconsistent");
    }

    #[test]
    fn options_off_crit_without_window_scaling() {
        let mut host = two_socket_smt_8q();
        set_sysctl(&mut host, "net.ipv4.tcp_window_scaling", "0");
        set_sysctl(&mut host, "net.ipv4.tcp_sack", "0");
        let findings = crate::doctor::diagnose(&Context {
            rtt_secs: Some(0.05),
            ..Context::new(&host)
        });
        let f = assert_fires(
            &findings,
            "tcp.options-off",
            Severity::Crit,
            &["64 KiB", "10.5 Mbit/s", "tcp_sack = 0"],
        );
        assert!(
            f.fix
                .contains("net.ipv4.tcp_window_scaling=1 net.ipv4.tcp_sack=1"),
            "{}",
            f.fix
        );
        // baseline restores them (and says it restores the rest too).
        assert_eq!(f.profile, Some("baseline"));
        assert_eq!(f.changes.len(), 2, "{:?}", f.changes);
        assert!(f.fix.contains("every other kernel default"), "{}", f.fix);

        let mut host = two_socket_smt_8q();
        set_sysctl(&mut host, "net.ipv4.tcp_timestamps", "0");
        assert_fires(
            &diagnose(&host),
            "tcp.options-off",
            Severity::Warn,
            &["tcp_timestamps = 0"],
        );
    }

    #[test]
    fn options_off_silent_when_on_or_unknown() {
        none(&diagnose(&two_socket_smt_8q()), "tcp.options-off");
        let mut host = two_socket_smt_8q();
        host.sysctls.remove("net.ipv4.tcp_sack");
        none(&diagnose(&host), "tcp.options-off");
    }

    #[test]
    fn jumbo_probing_fires_with_mtu_9000_and_probing_off() {
        let mut host = two_socket_smt_8q();
        set_sysctl(&mut host, "net.ipv4.tcp_mtu_probing", "0");
        let f = assert_fires(
            &diagnose(&host),
            "mtu.jumbo-probing",
            Severity::Warn,
            &["eth0 MTU 9000", "= 0"],
        );
        assert!(f.fix.contains("tcp_mtu_probing=1"), "{}", f.fix);
    }

    #[test]
    fn jumbo_probing_silent_at_1500_probing_on_or_unknown() {
        // The VM: MTU 1400, probing 0.
        none(&diagnose(&vm_2cpu_single_queue()), "mtu.jumbo-probing");
        // Tuned: MTU 9000, probing 1.
        none(&diagnose(&two_socket_smt_8q()), "mtu.jumbo-probing");
        let mut host = two_socket_smt_8q();
        host.sysctls.remove("net.ipv4.tcp_mtu_probing");
        none(&diagnose(&host), "mtu.jumbo-probing");
        let mut host = two_socket_smt_8q();
        set_sysctl(&mut host, "net.ipv4.tcp_mtu_probing", "0");
        iface(&mut host, "eth0").mtu = None;
        none(&diagnose(&host), "mtu.jumbo-probing");
    }
}
