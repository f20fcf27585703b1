//! Per-CPU receive work: softirq.hotspot, softnet.drops, softnet.squeeze.

use super::shared::{
    judged_interfaces, queue_irq_targets, rx_queue_targets, sysctl_targets, sysctl_u64, Window,
};
use crate::base::counter::Width;
use crate::base::cpuset::format_list;
use crate::base::units::format_count;
use crate::doctor::planned::Plans;
use crate::doctor::targets::{doubled, eligible_cpus};
use crate::doctor::{Context, Finding, Severity};
use crate::host::softnet::SoftnetCpu;
use crate::host::{Counters, CpuSoftirqs, CpuTime};
use crate::plan::values::{PPS_NETDEV_BUDGET, PPS_NETDEV_MAX_BACKLOG};
use crate::plan::Profile;

/// One CPU with more than this share of all NET_RX softirqs is a hotspot:
/// it does more receive work than the rest of the host together.
pub(crate) const HOT_SHARE: f64 = 0.5;

/// A CPU under this share of NET_RX "carries little": with 20 or more
/// CPUs sharing evenly each would have 5% or less, so below 5% next to a
/// CPU over 50% means the work is not being spread.
pub(crate) const LITTLE_SHARE: f64 = 0.05;

/// How many other CPUs must carry little: two, so that a host with one
/// other CPU (nothing to spread to beyond it) is judged by softirq time.
pub(crate) const MIN_IDLE_OTHERS: usize = 2;

/// A CPU spending more than this share of its time in softirq during the
/// sample is saturated by packet work: ksoftirqd takes over and the NIC
/// ring fills.
pub(crate) const SATURATED_SOFTIRQ: f64 = 0.8;

/// Below this many NET_RX softirqs since boot the shares mean nothing: a
/// few minutes of an idle host.
const MIN_NET_RX_TOTAL: u64 = 100_000;

/// Below this many NET_RX softirqs per second during sampling the host is
/// close to idle and shares are noise.
pub(crate) const MIN_NET_RX_PER_SEC: f64 = 1_000.0;

/// At most this many CPUs are named one by one in drop evidence.
const MAX_CPUS_NAMED: usize = 4;

const WHY_HOTSPOT: &str = "The NET_RX softirq runs on the CPU that took the queue's IRQ (or the \
CPU RPS chose); when one CPU does most of it, that CPU's cycles cap the host's packet rate while \
the others idle, and once it is saturated the work moves to ksoftirqd/N and packets wait \
(Documentation/networking/scaling.rst; `mpstat -P ALL 1` shows it as one CPU near 100% %soft).";

const WHY_DROPS: &str = "softnet_stat's second column counts packets thrown away because a \
CPU's input backlog (the per-CPU queue fed by RPS and by non-NAPI drivers) already held \
net.core.netdev_max_backlog packets: the NIC delivered them and no socket ever saw them. It \
happens when packets are steered to a CPU faster than its softirq drains them \
(Documentation/admin-guide/sysctl/net.rst, netdev_max_backlog; bpftune raises the backlog when \
drops pass 1/32 of it per minute).";

const WHY_SQUEEZE: &str = "time_squeeze counts the times the receive softirq stopped with \
packets still waiting because it used its budget (net.core.netdev_budget packets or \
netdev_budget_usecs); the rest waits for the next run or for ksoftirqd, which adds latency, and \
the NIC ring can overflow meanwhile (Documentation/admin-guide/sysctl/net.rst, netdev_budget; \
bpftune raises netdev_budget on squeezes).";

pub fn check(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    let window = Window::of(ctx);
    hotspot(ctx, &window, out);
    drops(ctx, plans, &window, out);
    squeeze(ctx, plans, &window, out);
}

fn softirqs(c: &Counters) -> &[CpuSoftirqs] {
    &c.softirqs
}

fn cpu_times(c: &Counters) -> &[CpuTime] {
    &c.cpu_time
}

fn softnet_rows(c: &Counters) -> &[SoftnetCpu] {
    &c.softnet
}

fn hotspot(ctx: &Context, window: &Window, out: &mut Vec<Finding>) {
    let net_rx = window.per_cpu(softirqs, |s| (s.cpu, s.net_rx), Width::U32);
    let total: u64 = net_rx.iter().map(|(_, n)| n).sum();
    let enough = match window.per_sec(total) {
        Some(rate) => rate >= MIN_NET_RX_PER_SEC,
        None => total >= MIN_NET_RX_TOTAL,
    };
    let mut evidence = Vec::new();
    let mut severity = Severity::Warn;
    let eligible = eligible_cpus(ctx.host);
    if enough {
        if let Some(&(hot, hot_n)) = net_rx.iter().max_by_key(|(cpu, n)| (*n, u32::MAX - cpu)) {
            let share = hot_n as f64 / total as f64;
            let idle_others = net_rx
                .iter()
                .filter(|(c, n)| {
                    *c != hot && eligible.contains(c) && (*n as f64 / total as f64) < LITTLE_SHARE
                })
                .count();
            if share > HOT_SHARE && idle_others >= MIN_IDLE_OTHERS {
                let others: Vec<u32> = net_rx
                    .iter()
                    .map(|(c, _)| *c)
                    .filter(|&c| c != hot)
                    .collect();
                evidence.push(format!(
                    "CPU{hot} handled {}% of NET_RX softirqs {}{}; CPUs {} {}% together",
                    percent(share),
                    window.host_span(),
                    window.rate_suffix(hot_n),
                    format_list(&others),
                    percent(1.0 - share)
                ));
            }
        }
    }
    if window.live() {
        for (cpu, busy) in softirq_time_shares(window) {
            if busy > SATURATED_SOFTIRQ {
                severity = Severity::Crit;
                evidence.push(format!(
                    "CPU{cpu} spent {}% of its time in softirq {}",
                    percent(busy),
                    window.host_span()
                ));
            }
        }
    }
    if evidence.is_empty() {
        return;
    }
    // The placement and RPS changes of every judged NIC spread the work.
    let scope: Vec<crate::plan::Target> = judged_interfaces(ctx)
        .flat_map(|i| {
            let mut targets = queue_irq_targets(i);
            targets.extend(rx_queue_targets(i, crate::plan::target::RxFile::RpsCpus));
            targets
        })
        .collect();
    out.push(Finding {
        id: "softirq.hotspot",
        severity,
        title: "One CPU carries the receive softirq work".to_string(),
        evidence: evidence.join("; "),
        why: WHY_HOTSPOT.to_string(),
        fix: "Spread NET_RX over more CPUs: one queue IRQ per CPU on multi-queue NICs and RPS \
              where a NIC has fewer queues than CPUs (irq.one-cpu, irq.shared-cpu and rps.off \
              give this host's values); if one flow carries the traffic, no placement splits it."
            .to_string(),
        profile: Some(Profile::Pps.name()),
        changes: Vec::new(),
        scope,
    });
}

/// Per CPU, the share of time spent in softirq between the two samples.
fn softirq_time_shares(window: &Window) -> Vec<(u32, f64)> {
    let totals = window.per_cpu(cpu_times, |t| (t.cpu, t.total()), Width::U64);
    let soft = window.per_cpu(cpu_times, |t| (t.cpu, t.softirq), Width::U64);
    totals
        .iter()
        .zip(soft.iter())
        .filter(|((_, total), _)| *total > 0)
        .map(|((cpu, total), (_, s))| (*cpu, *s as f64 / *total as f64))
        .collect()
}

fn percent(share: f64) -> u64 {
    (share * 100.0).round() as u64
}

/// "CPU1 42, CPU3 3" for the CPUs with a non-zero count, worst first.
fn per_cpu_counts(rows: &[(u32, u64)]) -> String {
    let mut hits: Vec<(u32, u64)> = rows.iter().copied().filter(|(_, n)| *n > 0).collect();
    hits.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut parts: Vec<String> = hits
        .iter()
        .take(MAX_CPUS_NAMED)
        .map(|(c, n)| format!("CPU{c} {}", format_count(*n)))
        .collect();
    if hits.len() > MAX_CPUS_NAMED {
        parts.push(format!("{} more CPUs", hits.len() - MAX_CPUS_NAMED));
    }
    parts.join(", ")
}

fn drops(ctx: &Context, plans: &Plans, window: &Window, out: &mut Vec<Finding>) {
    let rows = window.per_cpu(softnet_rows, |s| (s.cpu, s.dropped), Width::U32);
    let total: u64 = rows.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return;
    }
    const NAME: &str = "net.core.netdev_max_backlog";
    let backlog = sysctl_u64(ctx.host, NAME);
    let scope = sysctl_targets(&[NAME]);
    let planned = plans.planned(Profile::Pps, &scope);
    let raise = match (planned.sysctl(NAME), backlog) {
        (Some(c), _) => format!("Raise {NAME} from {} to {}", c.from, c.to),
        (None, Some(b)) if b >= PPS_NETDEV_MAX_BACKLOG && !planned.is_skipped(&scope[0]) => {
            format!(
                "{NAME} is already {b}, at least the {PPS_NETDEV_MAX_BACKLOG} of the pps \
                 profile: double it by hand ({}) while drops continue",
                doubled(b)
            )
        }
        _ => format!("Raise {NAME} to {PPS_NETDEV_MAX_BACKLOG} by hand"),
    };
    let setting = backlog
        .map(|b| format!("; {NAME} = {b}"))
        .unwrap_or_default();
    out.push(Finding {
        id: "softnet.drops",
        severity: Severity::Warn,
        title: "CPU backlogs overflowed and dropped packets".to_string(),
        evidence: format!(
            "{} packets dropped with the backlog full {}{} ({}){setting}",
            format_count(total),
            window.host_span(),
            window.rate_suffix(total),
            per_cpu_counts(&rows)
        ),
        why: WHY_DROPS.to_string(),
        fix: format!(
            "{raise}, and spread receive work so that no one CPU's backlog fills (RPS over the \
             NIC node's CPUs: rps.off)."
        ),
        profile: Some(Profile::Pps.name()),
        changes: Vec::new(),
        scope,
    });
}

fn squeeze(ctx: &Context, plans: &Plans, window: &Window, out: &mut Vec<Finding>) {
    let rows = window.per_cpu(softnet_rows, |s| (s.cpu, s.time_squeeze), Width::U32);
    let total: u64 = rows.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return;
    }
    // Rising while we watched is a live problem; a total since boot may
    // be an old burst.
    let severity = if window.live() {
        Severity::Warn
    } else {
        Severity::Info
    };
    const BUDGET: &str = "net.core.netdev_budget";
    const USECS: &str = "net.core.netdev_budget_usecs";
    let budget = sysctl_u64(ctx.host, BUDGET);
    let usecs = sysctl_u64(ctx.host, USECS);
    let settings: Vec<String> = [(BUDGET, budget), (USECS, usecs)]
        .iter()
        .filter_map(|(name, v)| v.map(|v| format!("{name} = {v}")))
        .collect();
    let settings = if settings.is_empty() {
        String::new()
    } else {
        format!("; {}", settings.join(", "))
    };
    let scope = sysctl_targets(&[BUDGET]);
    let planned = plans.planned(Profile::Pps, &scope);
    let raise = match (planned.sysctl(BUDGET), budget) {
        (Some(c), _) => format!("Raise {BUDGET} from {} to {}", c.from, c.to),
        (None, Some(b)) if b >= PPS_NETDEV_BUDGET && !planned.is_skipped(&scope[0]) => format!(
            "{BUDGET} is already {b}, at least the {PPS_NETDEV_BUDGET} of the pps profile: \
             raise it further by hand ({})",
            doubled(b)
        ),
        _ => format!("Raise {BUDGET} to {PPS_NETDEV_BUDGET} by hand"),
    };
    // The time limit is left alone: the packet budget ends a run first
    // unless packets take longer than usecs / budget each.
    let time_limit = match usecs {
        Some(us) => format!(
            " {USECS} ({us}) is left as it is: a run of {} packets reaches it only at over {} us \
             per packet.",
            budget.unwrap_or(0).max(PPS_NETDEV_BUDGET),
            us / budget.unwrap_or(0).max(PPS_NETDEV_BUDGET).max(1)
        ),
        None => String::new(),
    };
    out.push(Finding {
        id: "softnet.squeeze",
        severity,
        title: "The receive softirq ran out of budget".to_string(),
        evidence: format!(
            "time_squeeze {} {}{} ({}){settings}",
            format_count(total),
            window.host_span(),
            window.rate_suffix(total),
            per_cpu_counts(&rows)
        ),
        why: WHY_SQUEEZE.to_string(),
        fix: format!(
            "{raise} so one softirq run may do more; spreading receive work over more CPUs helps \
             more where it is possible.{time_limit}"
        ),
        profile: Some(Profile::Pps.name()),
        changes: Vec::new(),
        scope,
    });
}

#[cfg(test)]
mod tests {
    use crate::doctor::testkit::*;
    use crate::doctor::Severity;
    use crate::plan::values::{PPS_NETDEV_BUDGET, PPS_NETDEV_MAX_BACKLOG};

    #[test]
    fn hotspot_fires_when_cpu0_takes_almost_all_net_rx() {
        let host = two_socket_smt_8q();
        // Over 2 s CPU0 took 97,000 NET_RX softirqs, the other 31 CPUs 97 each.
        let r = rates(&host, 2.0, |after| {
            for s in &mut after.softirqs {
                s.net_rx += if s.cpu == 0 { 97_000 } else { 97 };
            }
        });
        let findings = diagnose_with(&host, &r);
        assert_fires(
            &findings,
            "softirq.hotspot",
            Severity::Warn,
            &[
                "CPU0 handled 97% of NET_RX softirqs over 2 s",
                "48,500/s",
                "CPUs 1-31 3% together",
            ],
        );
    }

    #[test]
    fn drops_across_a_32_bit_wrap_count_modulo_2_to_the_32_and_a_reset_is_a_gap() {
        // softnet_stat's dropped column wrapped: 0xfffffff0 -> 0x10 is 32
        // drops, not 0 (saturating) nor 4 billion.
        let mut host = vm_2cpu_single_queue();
        host.counters.softnet[1].dropped = 0xffff_fff0;
        let r = rates(&host, 2.0, |after| after.softnet[1].dropped = 0x10);
        assert_fires(
            &diagnose_with(&host, &r),
            "softnet.drops",
            Severity::Warn,
            &["32"],
        );
        // Went back from 1000 to 10 (counters reset): a gap, not a rate.
        let mut host = vm_2cpu_single_queue();
        host.counters.softnet[1].dropped = 1000;
        let r = rates(&host, 2.0, |after| after.softnet[1].dropped = 10);
        none(&diagnose_with(&host, &r), "softnet.drops");
    }

    #[test]
    fn hotspot_is_crit_when_a_cpu_saturates_in_softirq() {
        // The 2-vCPU VM under a UDP flood: CPU1 91% softirq over 2 s.
        let host = vm_2cpu_single_queue();
        let r = rates(&host, 2.0, |after| {
            after.cpu_time[1].softirq += 182;
            after.cpu_time[1].system += 18;
            after.cpu_time[0].idle += 150;
            after.cpu_time[0].user += 50;
            after.softirqs[1].net_rx += 60_000;
        });
        let f = assert_fires(
            &diagnose_with(&host, &r),
            "softirq.hotspot",
            Severity::Crit,
            &["CPU1 spent 91% of its time in softirq over 2 s"],
        );
        assert_eq!(f.profile, Some("pps"));
    }

    #[test]
    fn hotspot_silent_when_spread_idle_or_unknown() {
        // Tuned host since boot: CPUs 0-7 ~9% each.
        none(&diagnose(&two_socket_smt_8q()), "softirq.hotspot");
        // The VM since boot: 4,700 softirqs is too little to judge.
        none(&diagnose(&vm_2cpu_single_queue()), "softirq.hotspot");
        // An idle sample: 10 softirqs in 2 s, all on CPU0.
        let host = two_socket_smt_8q();
        let r = rates(&host, 2.0, |after| after.softirqs[0].net_rx += 10);
        none(&diagnose_with(&host, &r), "softirq.hotspot");
        // No /proc/softirqs or /proc/stat data at all.
        let mut host = two_socket_smt_8q();
        host.counters.softirqs.clear();
        host.counters.cpu_time.clear();
        let r = rates(&host, 2.0, |_| {});
        none(&diagnose_with(&host, &r), "softirq.hotspot");
    }

    #[test]
    fn drops_fire_with_totals_and_rates() {
        let mut host = vm_2cpu_single_queue();
        host.counters.softnet[1].dropped = 42;
        host.counters.softnet[0].dropped = 3;
        let f = assert_fires(
            &diagnose(&host),
            "softnet.drops",
            Severity::Warn,
            &["45", "since boot", "CPU1 42", "CPU0 3", "= 1000"],
        );
        let raise = format!("from 1000 to {PPS_NETDEV_MAX_BACKLOG}");
        assert!(f.fix.contains(&raise), "{}", f.fix);
        assert_eq!(f.profile, Some("pps"));

        // Already at the profile's backlog: double it by hand, no profile.
        let mut host = vm_2cpu_single_queue();
        host.counters.softnet[1].dropped = 42;
        set_sysctl(&mut host, "net.core.netdev_max_backlog", "10000");
        let f = the(&diagnose(&host), "softnet.drops");
        assert!(f.fix.contains("by hand (20000)"), "{}", f.fix);
        assert_eq!((f.profile, f.changes.len()), (None, 0));

        let host = vm_2cpu_single_queue();
        let r = rates(&host, 2.0, |after| after.softnet[1].dropped += 500);
        assert_fires(
            &diagnose_with(&host, &r),
            "softnet.drops",
            Severity::Warn,
            &["500", "over 2 s", "(250/s)"],
        );
    }

    #[test]
    fn host_wide_counters_are_labelled_so_inside_a_namespace() {
        let mut host = vm_2cpu_single_queue();
        host.counters.softnet[1].dropped = 42;
        let outside = the(&diagnose(&host), "softnet.drops");
        assert!(
            !outside.evidence.contains("whole host"),
            "{}",
            outside.evidence
        );
        // Inside a container (no --netns: the root-namespace-only sysctls
        // are missing) and inside --netns: softnet_stat is the host's.
        let mut container = host.clone();
        for name in crate::host::ROOT_NAMESPACE_SYSCTLS {
            container.sysctls.remove(*name);
        }
        let mut named = container.clone();
        named.source.netns = Some("blue".to_string());
        named.host_sysctls.insert(
            "net.core.netdev_max_backlog".to_string(),
            "1000".to_string(),
        );
        for host in [container, named] {
            let f = the(&diagnose(&host), "softnet.drops");
            assert!(
                f.evidence
                    .contains("whole host: these counters are not per namespace"),
                "{}",
                f.evidence
            );
            // The backlog is the host's: no profile applied here changes
            // it; the fix names the command for the host.
            assert_eq!((f.profile, f.changes.len()), (None, 0), "{f:?}");
            assert!(
                f.fix
                    .contains("sysctl -w net.core.netdev_max_backlog=10000"),
                "{}",
                f.fix
            );
        }
    }

    #[test]
    fn drops_silent_when_none_new_or_unknown() {
        none(&diagnose(&vm_2cpu_single_queue()), "softnet.drops");
        // Old drops since boot, none while sampling.
        let mut host = vm_2cpu_single_queue();
        host.counters.softnet[1].dropped = 42;
        let r = rates(&host, 2.0, |after| after.softnet[1].processed += 1000);
        none(&diagnose_with(&host, &r), "softnet.drops");
        let mut host = vm_2cpu_single_queue();
        host.counters.softnet.clear();
        none(&diagnose(&host), "softnet.drops");
    }

    #[test]
    fn squeeze_warns_when_rising_and_notes_totals() {
        let host = vm_2cpu_single_queue();
        let r = rates(&host, 2.0, |after| after.softnet[0].time_squeeze += 310);
        let f = assert_fires(
            &diagnose_with(&host, &r),
            "softnet.squeeze",
            Severity::Warn,
            &["310", "(155/s)", "netdev_budget = 300"],
        );
        let raise = format!("from 300 to {PPS_NETDEV_BUDGET}");
        assert!(f.fix.contains(&raise), "{}", f.fix);
        // The time limit is not what the plan changes, and the fix says why.
        assert!(
            f.fix.contains("netdev_budget_usecs (8000) is left"),
            "{}",
            f.fix
        );
        assert_eq!(f.profile, Some("pps"));
        assert_eq!(f.changes.len(), 1, "{:?}", f.changes);

        let mut host = vm_2cpu_single_queue();
        host.counters.softnet[0].time_squeeze = 1250;
        assert_fires(
            &diagnose(&host),
            "softnet.squeeze",
            Severity::Info,
            &["1,250", "since boot"],
        );
    }

    #[test]
    fn squeeze_silent_without_squeezes() {
        none(&diagnose(&vm_2cpu_single_queue()), "softnet.squeeze");
        let host = two_socket_smt_8q();
        let r = rates(&host, 2.0, |after| after.softnet[3].processed += 1_000_000);
        none(&diagnose_with(&host, &r), "softnet.squeeze");
    }
}
