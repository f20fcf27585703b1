//! Queues, steering and the NIC's own limits: rps.off, rps.one-cpu, rfs.partial,
//! rss.udp-hash-ips-only, nic.rings-small, nic.queues-unused,
//! qdisc.no-fair-queue.

use super::shared::{
    busy_polling_off, judged_interfaces, plural, rx_queue_targets, sysctl_targets, sysctl_u64,
};
use crate::base::cpuset::{format_list, format_mask, parse_mask};
use crate::base::driver::{ChannelKind, Channels, DriverKey};
use crate::base::units::format_count;
use crate::doctor::planned::{Planned, Plans};
use crate::doctor::targets::{eligible_cpus, is_first_thread, rps_cpus};
use crate::doctor::{Context, Finding, Severity};
use crate::host::{Host, Interface};
use crate::plan::target::{RxFile, Target};
use crate::plan::values::RFS_ENTRIES;
use crate::plan::{Profile, Typed, Value};

const RFS_SYSCTL: &str = "net.core.rps_sock_flow_entries";

/// rps_flow_cnt further than this factor from rps_sock_flow_entries /
/// queues is "far": the kernel rounds both up to powers of two, so up to
/// 2x either way is rounding, not a mistake.
const FLOW_CNT_TOLERANCE: u64 = 2;

/// Root qdiscs that send in arrival order, one queue for every flow.
const FIFO_QDISCS: &[&str] = &["pfifo_fast", "pfifo", "bfifo", "pfifo_head_drop"];

/// Root qdiscs that only fan out to one child per TX queue; the children
/// are net.core.default_qdisc.
const MULTIQUEUE_ROOTS: &[&str] = &["mq"];

/// /sys/class/net/<if>/statistics counters in which the NIC reports
/// packets it dropped for lack of RX descriptors or FIFO space.
const NIC_LOSS_COUNTERS: &[&str] = &["rx_missed_errors", "rx_fifo_errors", "rx_over_errors"];

const WHY_RPS: &str = "With fewer RX queues than CPUs the hardware spreads receive work over \
only as many CPUs as it has queues; the rest take none of it. RPS is RSS in software: it hashes \
each flow of a queue to one of the CPUs in rps_cpus, and RFS then steers a flow to the CPU where \
its reader runs (Documentation/networking/scaling.rst, \"RPS: Receive Packet Steering\").";

const WHY_RPS_ONE_CPU: &str = "RPS hands each packet to a CPU of rps_cpus for its protocol \
processing (the receive softirq's work after the driver: IP, UDP or TCP, the socket queue). When \
every RX queue names the same single CPU, all receive processing lands there, the software twin of \
all queue interrupts on CPU0 that the article \"SMP IRQ affinity\" measures before spreading \
them: one CPU saturates in softirq while the others idle, and an application pinned to that CPU \
gets only what the softirq leaves it (Cloudflare, \"How to receive a million packets per \
second\": a reader on the CPU that receives loses to it; Documentation/networking/scaling.rst, \
\"RPS Configuration\").";

const WHY_RFS: &str = "RFS needs both halves: net.core.rps_sock_flow_entries sizes the global \
table that records the CPU where each flow's reader last ran, and each RX queue's rps_flow_cnt \
sizes the table that steers its packets there. With either at 0 RFS does nothing for that queue; \
sized far from entries / queues, flows collide and lose their steering \
(Documentation/networking/scaling.rst, \"RFS: Receive Flow Steering\": rps_flow_cnt = \
rps_sock_flow_entries / N, 32768 suggested for a moderately loaded server).";

const WHY_UDP_HASH: &str = "RSS picks a packet's queue from a hash of the header fields the NIC \
is told to use; for UDP many NICs hash the IP addresses only, so every datagram between two hosts \
lands on one queue and one CPU however many ports the flows use (Cloudflare, \"How to receive a \
million packets per second\": all traffic on one RX queue until `ethtool -N eth2 rx-flow-hash udp4 \
sdfn` adds the ports to the hash).";

const WHY_RINGS: &str = "The RX ring holds the descriptors for packets the NIC has received but \
the kernel has not yet taken; when a burst outlasts it (a softirq late, a CPU busy) the NIC drops \
and counts the packets before the kernel sees them. A larger ring absorbs longer bursts \
(fasterdata.es.net 100G tuning: rings to the maximum, `ethtool -G ethN rx 8192 tx 8192`; the \
Cloudflare 1M packets/s post reads the NIC's own drop counters with `ethtool -S`).";

const WHY_QUEUES: &str = "Hardware queues spread receive work without RPS's extra hop between \
CPUs: each queue has its own IRQ and NAPI context. With a queue per core, and XPS sending from \
tx-i on CPU i, a request is received, handled and answered on one CPU: the \"perfect locality\" \
that was part of the step from 358k to 726k HTTP requests/s in \"Linux Kernel vs DPDK: HTTP \
Performance Showdown\" (talawah.io; XPS: Documentation/networking/scaling.rst).";

const WHY_QDISC: &str = "A FIFO qdisc sends packets in arrival order: one bulk flow's burst \
delays every other flow queued behind it, and nothing paces. fq keeps a queue per flow and paces \
each to its rate (SO_MAX_PACING_RATE, BBR): fasterdata.es.net (fair queuing and pacing) reports \
2-4x from pacing on 50-80 ms paths; fq_codel, the default since 4.12, gives flow fairness without \
pacing.";

pub fn check(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    let entries = sysctl_u64(ctx.host, RFS_SYSCTL);
    for iface in judged_interfaces(ctx) {
        rps_off(ctx.host, plans, iface, out);
        rps_one_cpu(ctx.host, plans, iface, out);
        if let Some(entries) = entries {
            rfs_partial(ctx.host, plans, iface, entries, out);
        }
        udp_hash(plans, iface, out);
        rings_small(plans, iface, out);
        queues_unused(ctx.host, plans, iface, out);
    }
    qdisc(ctx, plans, out);
}

/// RFS values from the plan, else what is set (the plan keeps it), else by
/// hand: "net.core.rps_sock_flow_entries = 32768 and rps_flow_cnt = 4096".
fn rfs_values(host: &Host, iface: &Interface, planned: &Planned) -> String {
    let entries = match planned.sysctl(RFS_SYSCTL) {
        Some(c) => c.to.to_string(),
        None => sysctl_u64(host, RFS_SYSCTL)
            .filter(|&n| n > 0)
            .unwrap_or(RFS_ENTRIES)
            .to_string(),
    };
    let mut counts: Vec<&str> = planned
        .changes
        .iter()
        .filter(|c| {
            matches!(
                c.target,
                Target::RxQueue {
                    file: RxFile::RpsFlowCnt,
                    ..
                }
            )
        })
        .map(|c| c.to.as_str())
        .collect();
    counts.sort_unstable();
    counts.dedup();
    let count = match counts[..] {
        [one] => one.to_string(),
        _ => {
            let share =
                entries.parse::<u64>().unwrap_or(RFS_ENTRIES) / iface.rx_queues.len().max(1) as u64;
            share.max(1).next_power_of_two().to_string()
        }
    };
    format!("{RFS_SYSCTL} = {entries} and rps_flow_cnt = {count}")
}

/// Plan targets of RPS and RFS on `iface`.
fn rfs_targets(iface: &Interface) -> Vec<Target> {
    let mut targets = rx_queue_targets(iface, RxFile::RpsFlowCnt);
    targets.extend(sysctl_targets(&[RFS_SYSCTL]));
    targets
}

/// Queues in use and the most the NIC allows, combined channels when the
/// driver uses them, else RX channels.
fn queue_counts(ch: &Channels) -> (u32, u32) {
    if ch.combined > 0 || ch.max_combined > 0 {
        (ch.combined, ch.max_combined)
    } else {
        (ch.rx, ch.max_rx)
    }
}

fn rps_off(host: &Host, plans: &Plans, iface: &Interface, out: &mut Vec<Finding>) {
    let queues = iface.rx_queues.len();
    let eligible = eligible_cpus(host);
    // A virtual interface's queues are not hardware queues: without RPS
    // its packets stay on the sending CPU however many it has. One stacked
    // on another interface (a bridge, a VLAN) gets its CPU from that one.
    let software = !iface.physical;
    if queues == 0 || (!software && queues >= eligible.len()) || iface.carried_kind().is_some() {
        return;
    }
    // With busy polling on host-wide, RPS off is what the latency profile
    // sets: the poller takes the queue's packets on its own CPU, and RPS
    // would hand them to another CPU's backlog, out of its reach. Where
    // nothing busy polls, the latency profile spreads RPS as pps does, so
    // RPS off is a finding for either.
    if busy_polling_off(host).is_none() {
        return;
    }
    let all_off = iface
        .rx_queues
        .iter()
        .all(|q| q.rps_cpus.as_ref().is_some_and(|c| c.is_empty()));
    if !all_off {
        return;
    }
    let mut scope = rx_queue_targets(iface, RxFile::RpsCpus);
    scope.extend(rfs_targets(iface));
    let planned = plans.planned(Profile::Pps, &scope);
    let mut masks: Vec<&str> = planned
        .changes
        .iter()
        .filter(|c| {
            matches!(
                c.target,
                Target::RxQueue {
                    file: RxFile::RpsCpus,
                    ..
                }
            )
        })
        .map(|c| c.to.as_str())
        .collect();
    masks.dedup();
    let mask = match masks[..] {
        [one] => one.to_string(),
        _ => format_mask(&rps_cpus(host, iface)),
    };
    let targets = parse_mask(&mask).unwrap_or_default();
    let node = match iface.numa_node {
        Some(n) => format!("node {n}'s CPUs {}", format_list(&targets)),
        None => format!("CPUs {}", format_list(&targets)),
    };
    let more_queues = match iface.driver_settings.channels.value().map(queue_counts) {
        Some((now, max)) if max > now => format!(
            " The NIC can run {max} queues: more hardware queues (ethtool -L {} combined N) \
             beat RPS.",
            iface.name
        ),
        _ => String::new(),
    };
    let queue_text = if queues == 1 {
        "rx-0".to_string()
    } else {
        format!("all {queues} RX queues")
    };
    let count = plural(queues, "RX queue");
    out.push(Finding {
        id: "rps.off",
        severity: Severity::Warn,
        title: if software {
            format!("{}: virtual interface with RPS off", iface.name)
        } else {
            format!(
                "{}: {count} for {} CPUs and RPS off",
                iface.name,
                eligible.len()
            )
        },
        evidence: if software {
            format!(
                "{} is virtual ({}): no hardware queue or interrupt spreads its packets, which \
                 are processed on the CPU that sent them, and rps_cpus is 0 on {queue_text}",
                iface.name,
                iface.driver.as_deref().unwrap_or("no driver named")
            )
        } else {
            format!(
                "{} has {count} for {} CPUs that can take network work, and rps_cpus is 0 on \
                 {queue_text}",
                iface.name,
                eligible.len()
            )
        },
        why: WHY_RPS.to_string(),
        fix: format!(
            "Write {mask} ({node}) to /sys/class/net/{}/queues/rx-N/rps_cpus of every RX queue, \
             with RFS: {} on each queue.{more_queues}",
            iface.name,
            rfs_values(host, iface, &planned)
        ),
        profile: Some(Profile::Pps.name()),
        changes: Vec::new(),
        scope,
    });
}

/// Every RX queue's RPS names the same one CPU while others could take
/// the work: all receive processing piles up there.
fn rps_one_cpu(host: &Host, plans: &Plans, iface: &Interface, out: &mut Vec<Finding>) {
    let eligible = eligible_cpus(host);
    if iface.rx_queues.is_empty() || eligible.len() < 2 || iface.carried_kind().is_some() {
        return;
    }
    let Some(masks) = iface
        .rx_queues
        .iter()
        .map(|q| q.rps_cpus.as_deref())
        .collect::<Option<Vec<&[u32]>>>()
    else {
        return;
    };
    let cpu = match masks[0] {
        [one] if masks.iter().all(|m| *m == [*one]) => *one,
        _ => return,
    };
    let scope = rx_queue_targets(iface, RxFile::RpsCpus);
    let planned = plans.planned(Profile::Pps, &scope);
    let mut to: Vec<&str> = planned.changes.iter().map(|c| c.to.as_str()).collect();
    to.dedup();
    let (profile, fix) = match to[..] {
        [mask] => (
            Some(Profile::Pps.name()),
            format!(
                "Write {mask} (CPUs {}) to /sys/class/net/{}/queues/rx-N/rps_cpus of every RX \
                 queue, so flows hash over the network CPUs; keep the application's threads off \
                 the CPUs that take the most receive work, or let RFS follow them.",
                format_list(&parse_mask(mask).unwrap_or_default()),
                iface.name
            ),
        ),
        _ => (
            None,
            format!(
                "Write {} (CPUs {}) to /sys/class/net/{}/queues/rx-N/rps_cpus of every RX queue \
                 by hand, so flows hash over the network CPUs.",
                format_mask(&rps_cpus(host, iface)),
                format_list(&rps_cpus(host, iface)),
                iface.name
            ),
        ),
    };
    let others: Vec<u32> = eligible.iter().copied().filter(|&c| c != cpu).collect();
    let queues = iface.rx_queues.len();
    out.push(Finding {
        id: "rps.one-cpu",
        severity: Severity::Warn,
        title: format!("{}: RPS steers every RX queue to CPU{cpu}", iface.name),
        evidence: format!(
            "rps_cpus is {} (CPU{cpu} only) on {} of {}: all its receive processing runs on \
             CPU{cpu}; {} none of it",
            format_mask(&[cpu]),
            if queues == 1 {
                "its RX queue".to_string()
            } else {
                format!("all {queues} RX queues")
            },
            iface.name,
            match others[..] {
                [one] => format!("CPU{one} takes"),
                _ => format!("CPUs {} take", format_list(&others)),
            }
        ),
        why: WHY_RPS_ONE_CPU.to_string(),
        fix,
        profile,
        changes: Vec::new(),
        scope,
    });
}

fn rfs_partial(
    host: &Host,
    plans: &Plans,
    iface: &Interface,
    entries: u64,
    out: &mut Vec<Finding>,
) {
    let Some(counts) = iface
        .rx_queues
        .iter()
        .map(|q| q.rps_flow_cnt.map(|c| (q.index, u64::from(c))))
        .collect::<Option<Vec<(u32, u64)>>>()
    else {
        return;
    };
    let n = counts.len() as u64;
    if n == 0 {
        return;
    }
    let entries_text = format!("net.core.rps_sock_flow_entries = {entries}");
    let evidence = if entries > 0 && counts.iter().all(|(_, c)| *c == 0) {
        format!(
            "{entries_text} but rps_flow_cnt is 0 on {} of {}",
            plural(n as usize, "RX queue"),
            iface.name
        )
    } else if entries == 0 && counts.iter().any(|(_, c)| *c > 0) {
        let set: Vec<String> = distinct_counts(&counts);
        format!(
            "rps_flow_cnt is {} on RX queues of {} but {entries_text}: there is no socket flow table",
            set.join("/"),
            iface.name
        )
    } else if entries > 0 {
        let expected = entries / n;
        let far: Vec<(u32, u64)> = counts
            .iter()
            .copied()
            .filter(|(_, c)| {
                *c * FLOW_CNT_TOLERANCE < expected || *c > expected * FLOW_CNT_TOLERANCE
            })
            .collect();
        if far.is_empty() {
            return;
        }
        let queues: Vec<u32> = far.iter().map(|(q, _)| *q).collect();
        format!(
            "rps_flow_cnt is {} on RX queues {} of {}; {entries_text} / {} = {expected}",
            distinct_counts(&far).join("/"),
            format_list(&queues),
            iface.name,
            plural(n as usize, "queue")
        )
    } else {
        return;
    };
    let scope = rfs_targets(iface);
    let planned = plans.planned(Profile::Pps, &scope);
    out.push(Finding {
        id: "rfs.partial",
        severity: Severity::Warn,
        title: format!("{}: RFS half configured", iface.name),
        evidence,
        why: WHY_RFS.to_string(),
        fix: format!(
            "Set {} (/sys/class/net/{}/queues/rx-N/rps_flow_cnt) on each of its {}.",
            rfs_values(host, iface, &planned),
            iface.name,
            plural(n as usize, "RX queue")
        ),
        profile: Some(Profile::Pps.name()),
        changes: Vec::new(),
        scope,
    });
}

fn distinct_counts(counts: &[(u32, u64)]) -> Vec<String> {
    let mut values: Vec<u64> = counts.iter().map(|(_, c)| *c).collect();
    values.sort_unstable();
    values.dedup();
    values.iter().map(u64::to_string).collect()
}

/// `ethtool -N eth0 rx-flow-hash udp4 sdfn` for a planned driver change.
fn ethtool_command(iface: &str, to: &Value) -> Option<String> {
    match to.typed() {
        Typed::Driver(setting) => Some(setting.ethtool_command(iface)),
        _ => None,
    }
}

fn udp_hash(plans: &Plans, iface: &Interface, out: &mut Vec<Finding>) {
    let queues = iface.rx_queues.len();
    if queues < 2 {
        return;
    }
    let ips_only: Vec<(&str, String)> = ["udp4", "udp6"]
        .into_iter()
        .filter_map(|flow| {
            let hash = iface.driver_settings.rx_flow_hash.get(flow)?.value()?;
            hash.ips_only().then(|| (flow, hash.fields.join(", ")))
        })
        .collect();
    if ips_only.is_empty() {
        return;
    }
    let seen: Vec<String> = ips_only
        .iter()
        .map(|(f, fields)| format!("{f} on {fields}"))
        .collect();
    let scope: Vec<Target> = ips_only
        .iter()
        .map(|(f, _)| Target::driver(&iface.name, DriverKey::FlowHash(f.to_string())))
        .collect();
    let planned = plans.planned(Profile::Pps, &scope);
    let commands: Vec<String> = ips_only
        .iter()
        .zip(&scope)
        .map(|((flow, _), target)| {
            planned
                .change(target)
                .and_then(|c| ethtool_command(&iface.name, &c.to))
                .unwrap_or_else(|| {
                    format!(
                        "ethtool -N {} rx-flow-hash {flow} sdfn (by hand)",
                        iface.name
                    )
                })
        })
        .collect();
    out.push(Finding {
        id: "rss.udp-hash-ips-only",
        severity: Severity::Warn,
        title: format!("{}: UDP hashed on IP addresses only", iface.name),
        evidence: format!(
            "{} ({queues} RX queues) hashes {}: no ports",
            iface.name,
            seen.join("; ")
        ),
        why: WHY_UDP_HASH.to_string(),
        fix: format!(
            "Hash UDP over addresses and ports: {}.",
            commands.join("; ")
        ),
        profile: Some(Profile::Pps.name()),
        changes: Vec::new(),
        scope,
    });
}

fn rings_small(plans: &Plans, iface: &Interface, out: &mut Vec<Finding>) {
    let Some(rings) = iface.driver_settings.rings.value() else {
        return;
    };
    if rings.rx >= rings.rx_max {
        return;
    }
    let mut losses: Vec<String> = NIC_LOSS_COUNTERS
        .iter()
        .filter_map(|name| {
            let n = *iface.statistics.get(*name)?;
            (n > 0).then(|| format!("{name} {}", format_count(n)))
        })
        .collect();
    if let Some(stats) = iface.driver_settings.queue_stats.value() {
        for q in stats.iter().filter(|q| q.direction == "rx") {
            for (name, n) in &q.counters {
                if *n > 0 && (name.contains("drop") || name.contains("miss")) {
                    losses.push(format!("rx-{} {name} {}", q.index, format_count(*n)));
                }
            }
        }
    }
    if losses.is_empty() {
        return;
    }
    let scope = vec![Target::driver(&iface.name, DriverKey::RingRx)];
    let planned = plans.planned(Profile::Throughput, &scope);
    let command = planned
        .change(&scope[0])
        .and_then(|c| ethtool_command(&iface.name, &c.to))
        .unwrap_or_else(|| format!("ethtool -G {} rx {} (by hand)", iface.name, rings.rx_max));
    out.push(Finding {
        id: "nic.rings-small",
        severity: Severity::Warn,
        title: format!(
            "{}: RX ring below its maximum while the NIC drops",
            iface.name
        ),
        evidence: format!(
            "{} RX ring {} of a possible {}; the NIC counted {} since boot",
            iface.name,
            rings.rx,
            rings.rx_max,
            losses.join(", ")
        ),
        why: WHY_RINGS.to_string(),
        fix: format!("Raise the RX ring to its maximum: {command}."),
        profile: Some(Profile::Throughput.name()),
        changes: Vec::new(),
        scope,
    });
}

fn queues_unused(host: &Host, plans: &Plans, iface: &Interface, out: &mut Vec<Finding>) {
    let Some((now, max)) = iface.driver_settings.channels.value().map(queue_counts) else {
        return;
    };
    // One queue per physical core of the NIC's node (first SMT threads).
    let cores: Vec<u32> = rps_cpus(host, iface)
        .into_iter()
        .filter(|&c| is_first_thread(host, c))
        .collect();
    let target = max.min(cores.len() as u32);
    if now == 0 || now >= target {
        return;
    }
    let channels = if iface
        .driver_settings
        .channels
        .value()
        .is_some_and(|c| c.max_combined > 0)
    {
        ChannelKind::Combined
    } else {
        ChannelKind::Rx
    };
    let kind = channels.name();
    let node = iface
        .numa_node
        .map(|n| format!("node {n} has"))
        .unwrap_or_else(|| "the host has".to_string());
    // The plan also says when the per-queue settings follow (a second apply).
    let scope = vec![
        Target::driver(&iface.name, DriverKey::Channels(channels)),
        Target::queues(&iface.name),
    ];
    let planned = plans.planned(Profile::Http, &scope);
    let command = match planned
        .change(&scope[0])
        .and_then(|c| ethtool_command(&iface.name, &c.to))
    {
        Some(command) => format!("run one queue per network CPU: {command}"),
        None => format!(
            "run one queue per core by hand: ethtool -L {} {kind} {target}",
            iface.name
        ),
    };
    out.push(Finding {
        id: "nic.queues-unused",
        severity: Severity::Info,
        title: format!("{}: {now} queues in use, the NIC can run {max}", iface.name),
        evidence: format!(
            "{} runs {now} of its {max} {kind} channels; {node} {} physical cores for network work (CPUs {})",
            iface.name,
            cores.len(),
            format_list(&cores)
        ),
        why: WHY_QUEUES.to_string(),
        fix: format!(
            "{}, then one queue IRQ per CPU and XPS tx-i on the CPU of queue i.",
            super::shared::sentence(&command)
        ),
        profile: Some(Profile::Http.name()),
        changes: Vec::new(),
        scope,
    });
}

fn qdisc(ctx: &Context, plans: &Plans, out: &mut Vec<Finding>) {
    let default = ctx
        .host
        .sysctls
        .get("net.core.default_qdisc")
        .map(String::as_str);
    let default_fifo = default.is_some_and(|d| FIFO_QDISCS.contains(&d));
    let mut seen = Vec::new();
    let mut sending = Vec::new();
    for iface in judged_interfaces(ctx) {
        let Some(root) = iface.root_qdisc.value() else {
            continue;
        };
        if FIFO_QDISCS.contains(&root.kind.as_str()) {
            seen.push(format!("{} root {}", iface.name, root.kind));
            sending.push(iface.name.as_str());
        } else if MULTIQUEUE_ROOTS.contains(&root.kind.as_str()) && default_fifo {
            seen.push(format!(
                "{} root {} over {} per TX queue",
                iface.name,
                root.kind,
                default.unwrap_or("")
            ));
            sending.push(iface.name.as_str());
        }
    }
    if seen.is_empty() {
        return;
    }
    let scope: Vec<Target> = sending.iter().map(|i| Target::root_qdisc(i)).collect();
    let planned = plans.planned(Profile::Throughput, &scope);
    let steps: Vec<String> = sending
        .iter()
        .zip(&scope)
        .map(|(name, target)| match planned.change(target) {
            Some(c) => format!("tc qdisc replace dev {name} root {}", c.to),
            None => format!("tc qdisc replace dev {name} root fq (by hand)"),
        })
        .collect();
    let default_text = default
        .map(|d| format!("; net.core.default_qdisc = {d}"))
        .unwrap_or_default();
    // nettune replaces the root itself; default_qdisc only shapes qdiscs
    // made later, and writing fq to it fails where sch_fq is missing.
    let default_step = if default == Some("fq") {
        String::new()
    } else {
        " nettune leaves net.core.default_qdisc alone (it only sets the qdisc of devices \
         created later, and writing fq fails where sch_fq is missing); for other interfaces, \
         by hand: sysctl -w net.core.default_qdisc=fq."
            .to_string()
    };
    out.push(Finding {
        id: "qdisc.no-fair-queue",
        severity: Severity::Warn,
        title: "No fair queueing or pacing on sending interfaces".to_string(),
        evidence: format!("{}{default_text}", seen.join("; ")),
        why: WHY_QDISC.to_string(),
        fix: format!(
            "{}: fq paces each flow.{default_step} Without sch_fq (\"Specified qdisc kind is \
             unknown\": modprobe sch_fq, or CONFIG_NET_SCH_FQ) apply reports the root change \
             refused; fq_codel gives fairness without pacing.",
            steps.join("; ")
        ),
        profile: Some(Profile::Throughput.name()),
        changes: Vec::new(),
        scope,
    });
}

#[cfg(test)]
#[path = "nic_tests.rs"]
mod tests;
