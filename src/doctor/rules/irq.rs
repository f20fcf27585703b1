//! Where queue IRQs are delivered: irq.one-cpu, irq.shared-cpu,
//! irq.remote-numa, irq.balancer.

use std::collections::{BTreeMap, BTreeSet};

use super::shared::{
    irq_list, judged_interfaces, queue_irq_targets, rx_queue_irqs, rx_queue_targets, sentence,
    tx_queue_targets, QueueIrq,
};
use crate::base::cpuset::{format_list, format_mask, parse_mask};
use crate::doctor::planned::{Planned, Plans};
use crate::doctor::targets::{cpu_node, eligible_cpus, rps_cpus};
use crate::doctor::{Context, Finding, Severity};
use crate::host::{Host, Interface};
use crate::plan::target::{RxFile, Target, TxFile};
use crate::plan::{Change, Profile};

/// A NIC with this many RX-carrying queue IRQs is multi-queue: placement
/// only matters when there is more than one queue to place.
const MIN_QUEUE_IRQS: usize = 2;

/// At most this many "IRQ -> CPU" pairs are spelled out in a fix; beyond
/// that the fix gives the IRQ and CPU ranges (64 pairs help nobody read).
const MAX_PAIRS_SHOWN: usize = 8;

const WHY_ONE_CPU: &str = "A queue's NET_RX softirq runs on the CPU that took its IRQ, so with \
every queue on one CPU the NIC gets one core's worth of receive work however many queues it has: \
the ksoftirqd/N symptom, one CPU near 100% soft while the others idle. A mask with several CPUs \
does not spread an IRQ, it is delivered to one of them (effective_affinity_list shows which; \
Documentation/core-api/irq/irq-affinity.rst, Documentation/networking/scaling.rst: one queue \
IRQ per CPU).";

const WHY_SHARED: &str = "Two queues whose IRQs share a CPU split that CPU's softirq budget \
while another CPU takes no network work; two on SMT siblings share one core's execution units \
and caches (Cloudflare, \"How to receive a million packets per second\": a receiver on the queue \
CPU's HT sibling did ~200k pps against 430k on its own core). Bind one queue IRQ per CPU, whole \
cores first (Documentation/networking/scaling.rst).";

const WHY_REMOTE: &str = "The NIC's PCI slot hangs off one socket: packets land in that node's \
memory, and every IRQ, softirq and copy done on another node crosses the interconnect. \
fasterdata.es.net (100G tuning) measures up to 2x lost on the wrong socket; Cloudflare's \"How to \
receive a million packets per second\" saw a receiver on the other node do ~330k pps, \
erratically, against 430k on the queue's own CPU.";

const WHY_BALANCER: &str = "irqbalance re-places IRQs every 10 s from the load it sees in \
/proc/interrupts and /proc/stat: it moves affinities set by hand or by nettune, places IRQs on \
remote nodes, and does nothing for RPS or XPS (irqbalance(1); its --banirq and \
IRQBALANCE_BANNED_CPULIST keep it away). fasterdata.es.net (100G tuning): stop irqbalance and \
bind the NIC's IRQs to its own node.";

pub fn check(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    for iface in judged_interfaces(ctx) {
        let irqs = rx_queue_irqs(iface);
        let all_on_one = one_cpu(ctx.host, plans, iface, &irqs, out);
        if !all_on_one {
            shared_cpu(ctx.host, plans, iface, &irqs, out);
        }
        remote_numa(ctx.host, plans, iface, &irqs, !all_on_one, out);
    }
    balancer(ctx, out);
}

/// irq.one-cpu. Returns true when it fired (irq.shared-cpu would only
/// repeat it).
fn one_cpu(
    host: &Host,
    plans: &Plans,
    iface: &Interface,
    irqs: &[QueueIrq],
    out: &mut Vec<Finding>,
) -> bool {
    if irqs.len() < MIN_QUEUE_IRQS {
        return false;
    }
    let Some(cpus) = irqs
        .iter()
        .map(|q| q.delivered)
        .collect::<Option<Vec<u32>>>()
    else {
        return false;
    };
    let cpu = cpus[0];
    let others: Vec<u32> = eligible_cpus(host)
        .into_iter()
        .filter(|&c| c != cpu)
        .collect();
    if cpus.iter().any(|&c| c != cpu) || others.is_empty() {
        return false;
    }
    let total: u64 = irqs.iter().map(|q| q.count).sum();
    let count = if total > 0 {
        format!(
            " ({} interrupts since boot)",
            crate::base::units::format_count(total)
        )
    } else {
        String::new()
    };
    let scope = queue_irq_targets(iface);
    let planned = plans.planned(Profile::Pps, &scope);
    out.push(Finding {
        id: "irq.one-cpu",
        severity: Severity::Crit,
        title: format!(
            "{}: all {} RX queue IRQs go to CPU{cpu}",
            iface.name,
            irqs.len()
        ),
        evidence: format!(
            "{}: IRQs {} of {} RX queues are all delivered to CPU{cpu}{count}, by their {}; \
             CPUs {} take none of them",
            iface.name,
            irq_list(irqs.iter().map(|q| q.irq)),
            irqs.len(),
            how_delivered(irqs),
            format_list(&others)
        ),
        why: WHY_ONE_CPU.to_string(),
        fix: sentence(&spread_fix(host, iface, irqs, &planned)),
        profile: Some(Profile::Pps.name()),
        changes: Vec::new(),
        scope,
    });
    true
}

/// "effective affinity" when the kernel showed it for every queue IRQ,
/// else the masks' first CPU.
fn how_delivered(irqs: &[QueueIrq]) -> &'static str {
    if irqs.iter().all(|q| q.by_effective) {
        "effective affinity"
    } else {
        "affinity masks (a mask is delivered to its first CPU)"
    }
}

/// The fix for queue IRQ placement: the plan's `IRQ->CPU` pairs (one CPU
/// per queue, NIC-local node first, cores before SMT siblings).
fn spread_fix(host: &Host, iface: &Interface, irqs: &[QueueIrq], planned: &Planned) -> String {
    let pairs: Vec<(u32, &str)> = planned
        .changes
        .iter()
        .filter_map(|c| Some((c.target.irq()?, c.to.as_str())))
        .collect();
    // Queue IRQs the plan neither moves nor refuses already sit alone on
    // a CPU it accepts.
    let kept: Vec<u32> = irqs
        .iter()
        .map(|q| q.irq)
        .filter(|&irq| {
            !pairs.iter().any(|(p, _)| *p == irq) && !planned.is_skipped(&Target::IrqAffinity(irq))
        })
        .collect();
    let kept = match kept.len() {
        0 => String::new(),
        1 => format!("; IRQ {} keeps its CPU", kept[0]),
        _ => format!("; IRQs {} keep their CPUs", irq_list(kept)),
    };
    let node = match iface.numa_node {
        Some(n) => format!("node {n} first, "),
        None => String::new(),
    };
    let order = format!("{node}physical cores before SMT siblings");
    let balancer = if host.irqbalance.running {
        "; stop irqbalance first or it moves them back"
    } else {
        ""
    };
    if pairs.is_empty() {
        return format!(
            "give each queue IRQ a CPU of its own in /proc/irq/N/smp_affinity_list ({order}){balancer}."
        );
    }
    let mapping = if pairs.len() <= MAX_PAIRS_SHOWN {
        pairs
            .iter()
            .map(|(irq, cpu)| format!("{irq}->{cpu}"))
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        let cpus: Vec<&str> = pairs.iter().map(|p| p.1).collect();
        format!(
            "IRQs {} in turn to CPUs {}",
            irq_list(pairs.iter().map(|p| p.0)),
            cpus.join(",")
        )
    };
    format!(
        "write one CPU per queue IRQ to /proc/irq/N/smp_affinity_list: {mapping} ({order}){kept}{balancer}."
    )
}

/// irq.shared-cpu.
fn shared_cpu(
    host: &Host,
    plans: &Plans,
    iface: &Interface,
    irqs: &[QueueIrq],
    out: &mut Vec<Finding>,
) {
    let known: Vec<(u32, u32)> = irqs
        .iter()
        .filter_map(|q| q.delivered.map(|c| (q.irq, c)))
        .collect();
    if known.len() < MIN_QUEUE_IRQS {
        return;
    }
    let mut by_cpu: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for &(irq, cpu) in &known {
        by_cpu.entry(cpu).or_default().push(irq);
    }
    if by_cpu.len() < 2 {
        return; // all on one CPU: irq.one-cpu's case
    }
    let eligible = eligible_cpus(host);
    let free: Vec<u32> = eligible
        .iter()
        .copied()
        .filter(|c| !by_cpu.contains_key(c))
        .collect();
    let mut problems = Vec::new();
    let shared: Vec<String> = by_cpu
        .iter()
        .filter(|(_, irqs)| irqs.len() > 1)
        .map(|(cpu, irqs)| format!("IRQs {} share CPU{cpu}", irq_list(irqs.iter().copied())))
        .collect();
    if !shared.is_empty() && !free.is_empty() {
        problems.push(format!(
            "{} while CPUs {} take no queue IRQ",
            shared.join(", "),
            format_list(&free)
        ));
    }
    let sibling_pairs = sibling_pairs(host, &by_cpu);
    let free_cores = free_cores(host, &eligible, &by_cpu);
    if !sibling_pairs.is_empty() && !free_cores.is_empty() {
        let pairs: Vec<String> = sibling_pairs
            .iter()
            .map(|(a, b)| format!("CPUs {a} and {b}"))
            .collect();
        problems.push(format!(
            "queue IRQs sit on SMT siblings ({}) while {} whole cores are free (CPUs {})",
            pairs.join(", "),
            free_cores.len(),
            format_list(&free_cores.concat())
        ));
    }
    if problems.is_empty() {
        return;
    }
    let scope = queue_irq_targets(iface);
    let planned = plans.planned(Profile::Pps, &scope);
    out.push(Finding {
        id: "irq.shared-cpu",
        severity: Severity::Warn,
        title: format!(
            "{}: queue IRQs share CPUs while others are free",
            iface.name
        ),
        evidence: format!("{}: {}", iface.name, problems.join("; ")),
        why: WHY_SHARED.to_string(),
        fix: sentence(&spread_fix(host, iface, irqs, &planned)),
        profile: Some(Profile::Pps.name()),
        changes: Vec::new(),
        scope,
    });
}

/// Pairs of distinct CPUs holding queue IRQs that are SMT siblings.
fn sibling_pairs(host: &Host, by_cpu: &BTreeMap<u32, Vec<u32>>) -> Vec<(u32, u32)> {
    let mut pairs = Vec::new();
    for cpu in host.cpus.iter().filter(|c| by_cpu.contains_key(&c.id)) {
        for &sib in &cpu.siblings {
            if sib > cpu.id && by_cpu.contains_key(&sib) {
                pairs.push((cpu.id, sib));
            }
        }
    }
    pairs
}

/// Cores (sibling sets) whose threads are all eligible and hold no queue IRQ.
fn free_cores(host: &Host, eligible: &[u32], by_cpu: &BTreeMap<u32, Vec<u32>>) -> Vec<Vec<u32>> {
    let mut cores: BTreeSet<Vec<u32>> = BTreeSet::new();
    for cpu in &host.cpus {
        let mut threads = cpu.siblings.clone();
        if threads.is_empty() {
            threads.push(cpu.id);
        }
        threads.sort_unstable();
        if threads
            .iter()
            .all(|t| eligible.contains(t) && !by_cpu.contains_key(t))
        {
            cores.insert(threads);
        }
    }
    cores.into_iter().collect()
}

/// irq.remote-numa: queue IRQs, RPS or XPS on a node other than the NIC's,
/// while the NIC's node has CPUs to spare for them. `judge_irqs` is false
/// when irq.one-cpu already reported (and fixed) these IRQs.
fn remote_numa(
    host: &Host,
    plans: &Plans,
    iface: &Interface,
    irqs: &[QueueIrq],
    judge_irqs: bool,
    out: &mut Vec<Finding>,
) {
    let Some(node) = iface.numa_node else {
        return;
    };
    let eligible = eligible_cpus(host);
    let local: Vec<u32> = eligible
        .iter()
        .copied()
        .filter(|&c| cpu_node(host, c) == Some(node))
        .collect();
    if local.is_empty() {
        return;
    }
    let remote = |c: &u32| cpu_node(host, *c).is_some_and(|n| n != node);
    let irq_problem = if judge_irqs {
        remote_irq_problem(host, irqs, &local, remote)
    } else {
        None
    };
    let rps_problem = remote_rps_problem(host, iface, remote);
    let xps_problem = remote_xps_problem(host, iface, &local, remote);
    let off = OffNode {
        irqs: irq_problem.is_some(),
        rps: rps_problem.is_some(),
        xps: xps_problem.is_some(),
    };
    let problems: Vec<String> = [irq_problem, rps_problem, xps_problem]
        .into_iter()
        .flatten()
        .collect();
    if problems.is_empty() {
        return;
    }
    let scope = off.scope(iface);
    let planned = plans.planned(Profile::Latency, &scope);
    let fix = off.fix(host, iface, irqs, node, &planned);
    out.push(Finding {
        id: "irq.remote-numa",
        severity: Severity::Warn,
        title: format!(
            "{}: network work placed off the NIC's node {node}",
            iface.name
        ),
        evidence: format!(
            "{} sits on node {node} (CPUs {}); {}",
            iface.name,
            format_list(&local),
            problems.join("; ")
        ),
        why: WHY_REMOTE.to_string(),
        fix,
        profile: Some(Profile::Latency.name()),
        changes: Vec::new(),
        scope,
    });
}

/// Queue IRQs delivered to another node's CPUs while some CPU of the NIC's
/// node (`local`) takes none of them.
fn remote_irq_problem(
    host: &Host,
    irqs: &[QueueIrq],
    local: &[u32],
    remote: impl Fn(&u32) -> bool,
) -> Option<String> {
    let delivered: BTreeSet<u32> = irqs.iter().filter_map(|q| q.delivered).collect();
    let remote_irqs: Vec<&QueueIrq> = irqs
        .iter()
        .filter(|q| q.delivered.as_ref().is_some_and(&remote))
        .collect();
    if remote_irqs.is_empty() || !local.iter().any(|c| !delivered.contains(c)) {
        return None;
    }
    let cpus: Vec<u32> = remote_irqs.iter().filter_map(|q| q.delivered).collect();
    Some(format!(
        "queue IRQs {} on CPUs {}{}",
        irq_list(remote_irqs.iter().map(|q| q.irq)),
        format_list(&cpus),
        nodes_of(host, &cpus)
    ))
}

/// RX queues whose RPS set names another node's CPUs.
fn remote_rps_problem(
    host: &Host,
    iface: &Interface,
    remote: impl Fn(&u32) -> bool,
) -> Option<String> {
    let (rps_queues, rps_remote) = off_node(
        iface
            .rx_queues
            .iter()
            .map(|q| (q.index, q.rps_cpus.as_deref())),
        remote,
    );
    if rps_queues.is_empty() {
        return None;
    }
    Some(format!(
        "RPS of RX queues {} includes CPUs {}{}",
        format_list(&rps_queues),
        format_list(&rps_remote),
        nodes_of(host, &rps_remote)
    ))
}

/// TX queues whose XPS map names another node's CPUs while some CPU of
/// the NIC's node (`local`) is in no queue's map.
fn remote_xps_problem(
    host: &Host,
    iface: &Interface,
    local: &[u32],
    remote: impl Fn(&u32) -> bool,
) -> Option<String> {
    let xps_used: BTreeSet<u32> = iface
        .tx_queues
        .iter()
        .flat_map(|q| q.xps_cpus.iter().flatten().copied())
        .collect();
    let (xps_queues, xps_remote) = off_node(
        iface
            .tx_queues
            .iter()
            .map(|q| (q.index, q.xps_cpus.as_deref())),
        remote,
    );
    if xps_queues.is_empty() || !local.iter().any(|c| !xps_used.contains(c)) {
        return None;
    }
    Some(format!(
        "XPS of TX queues {} maps CPUs {}{}",
        format_list(&xps_queues),
        format_list(&xps_remote),
        nodes_of(host, &xps_remote)
    ))
}

/// Which of a NIC's network work irq.remote-numa found off the NIC's node.
struct OffNode {
    irqs: bool,
    rps: bool,
    xps: bool,
}

impl OffNode {
    /// The files a fix would write: the IRQs' affinity, the RPS and XPS
    /// masks, each only where it was found off the node.
    fn scope(&self, iface: &Interface) -> Vec<Target> {
        let mut scope = Vec::new();
        if self.irqs {
            scope.extend(queue_irq_targets(iface));
        }
        if self.rps {
            scope.extend(rx_queue_targets(iface, RxFile::RpsCpus));
        }
        if self.xps {
            scope.extend(tx_queue_targets(iface, TxFile::XpsCpus));
        }
        scope
    }

    /// "Move it to node N:" and the planned values for each part found off
    /// the node.
    fn fix(
        &self,
        host: &Host,
        iface: &Interface,
        irqs: &[QueueIrq],
        node: u32,
        planned: &Planned,
    ) -> String {
        let mut fix = format!("Move it to node {node}:");
        if self.irqs {
            fix.push(' ');
            fix.push_str(&spread_fix(host, iface, irqs, planned));
        }
        if self.rps {
            fix.push(' ');
            fix.push_str(&rps_fix(host, iface, node, planned));
        }
        if self.xps {
            fix.push(' ');
            fix.push_str(&xps_fix(planned));
        }
        fix
    }
}

/// The queues whose CPU set (RPS or XPS) names CPUs of another node, and
/// those CPUs: (queue indices, remote CPUs in order).
fn off_node<'a>(
    queues: impl Iterator<Item = (u32, Option<&'a [u32]>)>,
    remote: impl Fn(&u32) -> bool,
) -> (Vec<u32>, Vec<u32>) {
    let mut indices = Vec::new();
    let mut cpus = BTreeSet::new();
    for (index, set) in queues {
        let off: Vec<u32> = set.unwrap_or(&[]).iter().copied().filter(&remote).collect();
        if !off.is_empty() {
            indices.push(index);
            cpus.extend(off);
        }
    }
    (indices, cpus.into_iter().collect())
}

/// RPS masks from the plan: the NIC node's CPUs, or off (where the queues
/// cover the network CPUs, or where the profile busy-polls), with the
/// plan's reason.
fn rps_fix(host: &Host, iface: &Interface, node: u32, planned: &Planned) -> String {
    let rps: Vec<&Change> = planned
        .changes
        .iter()
        .copied()
        .filter(|c| {
            matches!(
                c.target,
                Target::RxQueue {
                    file: RxFile::RpsCpus,
                    ..
                }
            )
        })
        .collect();
    let mut masks: Vec<&str> = rps.iter().map(|c| c.to.as_str()).collect();
    masks.dedup();
    match masks[..] {
        ["0"] => {
            let why = rps
                .first()
                .map(|c| c.reason.strip_prefix("RPS off: ").unwrap_or(&c.reason))
                .unwrap_or_default();
            format!("Turn RPS off (rps_cpus 0 on every RX queue): {why}.")
        }
        [mask] => {
            let cpus = parse_mask(mask)
                .map(|c| format_list(&c))
                .unwrap_or_default();
            format!("Set rps_cpus of every RX queue to {mask} (node {node}'s CPUs {cpus}).")
        }
        _ => format!(
            "Set rps_cpus of every RX queue to {} (node {node}'s CPUs).",
            format_mask(&rps_cpus(host, iface))
        ),
    }
}

/// XPS from the plan: tx-i on the CPU of queue i.
fn xps_fix(planned: &Planned) -> String {
    let pairs: Vec<String> = planned
        .changes
        .iter()
        .filter_map(|c| {
            let Target::TxQueue {
                queue,
                file: TxFile::XpsCpus,
                ..
            } = c.target
            else {
                return None;
            };
            Some(format!("tx-{queue} -> {}", c.to))
        })
        .collect();
    if pairs.is_empty() || pairs.len() > MAX_PAIRS_SHOWN {
        return "Set xps_cpus of tx-i to the CPU of queue i's IRQ.".to_string();
    }
    format!(
        "Set xps_cpus of tx-i to the CPU of queue i's IRQ: {}.",
        pairs.join(", ")
    )
}

/// " (node 0)" or " (nodes 0,1)" for a CPU set.
fn nodes_of(host: &Host, cpus: &[u32]) -> String {
    let nodes: Vec<u32> = cpus
        .iter()
        .filter_map(|&c| cpu_node(host, c))
        .collect::<BTreeSet<u32>>()
        .into_iter()
        .collect();
    match nodes.len() {
        0 => String::new(),
        1 => format!(" (node {})", nodes[0]),
        _ => format!(" (nodes {})", format_list(&nodes)),
    }
}

/// irq.balancer: info, warn when the queue IRQs look pinned on purpose
/// (every one on its own single CPU), which irqbalance will undo.
fn balancer(ctx: &Context, out: &mut Vec<Finding>) {
    let host = ctx.host;
    if !host.irqbalance.running {
        return;
    }
    let mut pinned = Vec::new();
    let mut irqs_all = Vec::new();
    for iface in judged_interfaces(ctx) {
        let irqs = rx_queue_irqs(iface);
        irqs_all.extend(irqs.iter().map(|q| q.irq));
        if looks_pinned(iface) {
            pinned.push(iface.name.clone());
        }
    }
    let pids = if host.irqbalance.pids.is_empty() {
        String::new()
    } else {
        let pids: Vec<String> = host.irqbalance.pids.iter().map(u32::to_string).collect();
        format!(" (pid {})", pids.join(", "))
    };
    let (severity, hand) = if pinned.is_empty() {
        (Severity::Info, String::new())
    } else {
        (
            Severity::Warn,
            format!(
                "; the queue IRQs of {} are each pinned to a CPU of their own, which looks set \
                 by hand or by a tuning script",
                pinned.join(", ")
            ),
        )
    };
    let banirq: Vec<String> = irqs_all.iter().map(|i| format!("--banirq={i}")).collect();
    let keep = if banirq.is_empty() {
        String::new()
    } else {
        format!(
            ", or keep it away from the NIC queues: IRQBALANCE_ARGS=\"{}\" in \
             /etc/default/irqbalance (/etc/sysconfig/irqbalance on Red Hat)",
            banirq.join(" ")
        )
    };
    out.push(Finding {
        id: "irq.balancer",
        severity,
        title: "irqbalance is running and will move queue IRQs".to_string(),
        evidence: format!("irqbalance is running{pids}{hand}"),
        why: WHY_BALANCER.to_string(),
        fix: format!("Stop it before tuning IRQs: systemctl disable --now irqbalance{keep}."),
        profile: None,
        changes: Vec::new(),
        scope: Vec::new(),
    });
}

/// Every RX queue IRQ (two or more) configured to exactly one CPU, no two
/// on the same CPU.
fn looks_pinned(iface: &Interface) -> bool {
    let masks: Vec<Option<&Vec<u32>>> = iface
        .irq_vectors
        .iter()
        .filter(|v| v.queue.is_some() && v.role != crate::host::VectorRole::Tx)
        .map(|v| v.affinity.as_ref())
        .collect();
    if masks.len() < MIN_QUEUE_IRQS {
        return false;
    }
    let mut seen = BTreeSet::new();
    masks
        .iter()
        .all(|m| matches!(m, Some(cpus) if cpus.len() == 1 && seen.insert(cpus[0])))
}

#[cfg(test)]
#[path = "irq_tests.rs"]
mod tests;
