//! Per-queue settings of one interface: IRQ affinity (one queue per CPU),
//! RPS masks, RFS flow counts and XPS (Documentation/networking/scaling.rst,
//! irq-affinity.rst; Scylla perftune.py and Redpanda's tuners).

use std::collections::BTreeMap;

use super::cpus::{assign_queues, nic_node_cpus, preference_order, Load};
use super::draft::Draft;
use super::driver::plan_channels;
use super::kernel::{flow_table, FlowTable};
use super::napi::nothing_busy_polls;
use super::profile::{PlanOptions, Profile};
use super::target::{RxFile, Target, TxFile};
use super::value::Value;
use super::values::RFS_ENTRIES;
use crate::base::cpuset::{format_list, format_mask};
use crate::host::{Host, Interface, RxQueue, VectorRole};

pub(super) fn plan_queues(
    d: &mut Draft,
    host: &Host,
    iface: &Interface,
    opts: &PlanOptions,
    cpus: &[u32],
    load: &mut Load,
) {
    let group = iface.name.as_str();
    // A new queue count makes new queues (and IRQs) that this host model
    // does not show: place them on the next run.
    if plan_channels(d, iface, opts, cpus.len()) {
        d.skip(
            group,
            &Target::queues(group),
            &format!(
                "per-queue settings wait for the new queue count: run `nettune apply --profile {}` again after this apply",
                opts.name()
            ),
        );
        return;
    }
    if opts.profile == Profile::Baseline {
        baseline(d, iface);
        return;
    }
    if !iface.physical {
        virtual_queues(d, host, iface, opts, cpus);
        return;
    }
    let node = nic_node_cpus(host, iface);
    let local: Vec<u32> = match &node {
        Some(node) => cpus.iter().copied().filter(|c| node.contains(c)).collect(),
        None => cpus.to_vec(),
    };
    let pool = match opts.profile {
        // Queue i on CPU i: listener i is created on CPU i (talawah.io).
        Profile::Http => cpus.to_vec(),
        // Only NIC-local CPUs: a remote node costs a cross-socket hop.
        Profile::Latency if !local.is_empty() => preference_order(host, &local, node.as_deref()),
        _ => preference_order(host, cpus, node.as_deref()),
    };
    let queues = queue_numbers(iface);
    let mut assigned = assign_queues(&pool, queues.len(), load);
    if opts.profile != Profile::Http {
        assigned = keep_current(iface, &queues, assigned);
    }
    let cpu_of: BTreeMap<u32, u32> = queues.iter().copied().zip(assigned).collect();

    let place = |cpu: u32| -> String {
        if opts.profile == Profile::Http {
            return "perfect locality: queue i on the i-th network CPU (talawah.io HTTP tuning)"
                .to_string();
        }
        let is_local = node.as_ref().is_none_or(|n| n.contains(&cpu));
        let sibling = host
            .cpus
            .iter()
            .find(|c| c.id == cpu)
            .is_some_and(|c| c.siblings.iter().any(|s| *s < cpu && pool.contains(s)));
        let kind = match (is_local, sibling) {
            (true, false) => "a NIC-local core",
            (true, true) => "an SMT sibling on the NIC's node (its cores are taken)",
            (false, false) => "a core on a remote node (the NIC's node is full)",
            (false, true) => "an SMT sibling on a remote node",
        };
        format!("one queue IRQ per CPU, {kind} (irq-affinity.rst; fasterdata)")
    };

    for v in &iface.irq_vectors {
        let (Some(queue), true) = (v.queue, v.role != VectorRole::Other) else {
            continue;
        };
        let Some(&cpu) = cpu_of.get(&queue) else {
            continue;
        };
        let target = Target::IrqAffinity(v.irq);
        match &v.affinity {
            Some(current) => d.want(
                group,
                target,
                &format_list(current),
                Value::cpu_list(&[cpu]),
                format!("{} queue {queue} -> CPU {cpu}: {}", v.name, place(cpu)),
            ),
            None => d.skip(
                group,
                &target,
                "the kernel shows no smp_affinity_list for this IRQ",
            ),
        }
    }

    let steer = |d: &mut Draft, note: &str| rps(d, host, iface, cpus, &local, node.is_some(), note);
    match opts.profile {
        Profile::Pps | Profile::Http => steer(d, ""),
        Profile::Latency => match nothing_busy_polls(host, opts) {
            None => rps_off_for_busy_polling(d, host, iface),
            Some(evidence) => steer(d, &no_poller(&evidence)),
        },
        _ => {}
    }

    for q in &iface.tx_queues {
        let Some(&cpu) = cpu_of.get(&q.index) else {
            continue;
        };
        let target = Target::tx(group, q.index, TxFile::XpsCpus);
        // Single-queue devices have no xps_cpus: nothing to choose there.
        if let Some(current) = &q.xps_cpus {
            d.want(
                group,
                target,
                &format_mask(current),
                Value::cpu_mask(&[cpu]),
                format!(
                    "XPS: CPU {cpu} sends on tx-{}, the queue it serves (scaling.rst)",
                    q.index
                ),
            );
        }
    }
}

/// The same CPUs, but a queue whose IRQs already sit alone on one of them
/// keeps it: placements made by hand or by the driver that the profile
/// accepts are not shuffled.
fn keep_current(iface: &Interface, queues: &[u32], assigned: Vec<u32>) -> Vec<u32> {
    let current = |queue: u32| -> Option<u32> {
        let mut cpus = iface
            .irq_vectors
            .iter()
            .filter(|v| v.queue == Some(queue) && v.role != VectorRole::Other)
            .map(|v| match v.affinity.as_deref() {
                Some([cpu]) => Some(*cpu),
                _ => None,
            });
        let first = cpus.next()??;
        cpus.all(|c| c == Some(first)).then_some(first)
    };
    let mut free = assigned.clone();
    let mut kept: Vec<Option<u32>> = queues
        .iter()
        .map(|&q| {
            let cpu = current(q)?;
            let at = free.iter().position(|&c| c == cpu)?;
            free.remove(at);
            Some(cpu)
        })
        .collect();
    let mut rest = free.into_iter();
    kept.iter_mut()
        .map(|k| k.take().or_else(|| rest.next()))
        .collect::<Option<Vec<u32>>>()
        .unwrap_or(assigned)
}

/// Queue numbers of the interface: RX and TX queues and queue IRQs.
fn queue_numbers(iface: &Interface) -> Vec<u32> {
    let mut numbers: Vec<u32> = iface
        .rx_queues
        .iter()
        .map(|q| q.index)
        .chain(iface.tx_queues.iter().map(|q| q.index))
        .chain(
            iface
                .irq_vectors
                .iter()
                .filter(|v| v.role != VectorRole::Other)
                .filter_map(|v| v.queue),
        )
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers
}

/// RPS from the NIC's node where the hardware queues do not cover the
/// network CPUs, off where they do; RFS flow counts on every RX queue.
/// `note` ends each reason (the latency profile's, see [`no_poller`]).
fn rps(
    d: &mut Draft,
    host: &Host,
    iface: &Interface,
    cpus: &[u32],
    local: &[u32],
    known_node: bool,
    note: &str,
) {
    let n_rx = iface.rx_queues.len();
    let rps_cpus: &[u32] = if local.is_empty() { cpus } else { local };
    let whence = if known_node && !local.is_empty() {
        "the NIC's node"
    } else {
        "the network CPUs"
    };
    let (to, reason) = if n_rx >= cpus.len() {
        (
            Value::cpu_mask(&[]),
            format!("RPS off: {n_rx} RX queues cover the {} network CPUs, RPS would only add a cross-CPU hop (Redpanda rpk tune){note}", cpus.len()),
        )
    } else {
        (
            Value::cpu_mask(rps_cpus),
            format!(
                "RPS: {n_rx} RX queue(s) for {} network CPUs; spread over {whence}'s CPUs {} (scaling.rst){note}",
                cpus.len(),
                format_list(rps_cpus)
            ),
        )
    };
    rps_every_queue(d, iface, &to, &reason, Some(flow_table(host)));
}

/// rps_cpus of every RX queue to `to` for `reason` (said skipped where the
/// kernel has no RPS), then each queue's RFS flow count from `flows`, the
/// socket flow table, when given.
fn rps_every_queue(
    d: &mut Draft,
    iface: &Interface,
    to: &Value,
    reason: &str,
    flows: Option<FlowTable>,
) {
    let group = iface.name.as_str();
    for q in &iface.rx_queues {
        let target = Target::rx(group, q.index, RxFile::RpsCpus);
        match &q.rps_cpus {
            Some(current) => d.want(
                group,
                target,
                &format_mask(current),
                to.clone(),
                reason.to_string(),
            ),
            None => d.skip(
                group,
                &target,
                "no rps_cpus: the kernel is built without RPS",
            ),
        }
        if let Some(table) = flows {
            flow_count(d, iface, q, table);
        }
    }
}

/// A virtual interface's queues. One that receives on its own (veth, tun)
/// has no hardware queue and no interrupt: its packets are processed on
/// the CPU that sent them unless RPS spreads them, whatever its queue
/// count, so RPS covers every RX queue. XPS is left as it is: there is no
/// transmit interrupt to keep local. One whose packets arrive through
/// another interface (bridge, bond, VLAN, macvlan, tunnel) is left alone:
/// that interface's steering has already chosen the CPU.
fn virtual_queues(d: &mut Draft, host: &Host, iface: &Interface, opts: &PlanOptions, cpus: &[u32]) {
    let group = iface.name.as_str();
    if let Some(kind) = iface.carried_kind() {
        d.skip(
            group,
            &Target::queues(group),
            &format!(
                "{group} is a {kind}: its packets reach it through another interface, whose RPS has already chosen their CPU; RPS here would add a second cross-CPU hop: tune that interface (the veth or the NIC under it)"
            ),
        );
        return;
    }
    let note = match opts.profile {
        Profile::Pps | Profile::Http => String::new(),
        Profile::Latency => match nothing_busy_polls(host, opts) {
            None => return rps_off_for_busy_polling(d, host, iface),
            Some(evidence) => no_poller(&evidence),
        },
        _ => return,
    };
    let kind = iface.driver.as_deref().unwrap_or("a virtual interface");
    let reason = format!(
        "RPS: {kind} has no hardware queue or interrupt, so without RPS its packets are processed on the CPU that sent them; spread over the network CPUs {} (scaling.rst){note}",
        format_list(cpus)
    );
    rps_every_queue(
        d,
        iface,
        &Value::cpu_mask(cpus),
        &reason,
        Some(flow_table(host)),
    );
}

/// The latency profile turns busy polling on (busy_read, busy_poll): the
/// application's own CPU polls the device queue and takes its packets up
/// the stack itself, with no interrupt and no wake-up. RPS would hand each
/// of those packets to another CPU's backlog, out of the poller's reach, and
/// add the cross-CPU hop busy polling exists to avoid (measured on a veth:
/// request/response p50 4.5 us without RPS, 22 us with it). A NIC keeps
/// its RFS flow counts: accelerated RFS steers a flow to the hardware queue
/// whose IRQ is on the application's CPU without RPS; a virtual interface
/// has no hardware to steer, so there they would do nothing. Only where
/// busy polling will be on once the plan is applied: see [`no_poller`].
fn rps_off_for_busy_polling(d: &mut Draft, host: &Host, iface: &Interface) {
    let flows = iface.physical.then(|| flow_table(host));
    rps_every_queue(
        d,
        iface,
        &Value::cpu_mask(&[]),
        "RPS off: with busy polling the application's CPU takes the queue's packets up the stack itself; RPS would hand them to another CPU's backlog, out of the poller's reach (napi.rst \"Busy polling\", scaling.rst)",
        flows,
    );
}

/// The end of the latency profile's RPS reasons where nothing will busy
/// poll once the plan is applied (`evidence` says why: a network namespace
/// cannot set net.core.busy_read and busy_poll, the host has them at 0, or
/// a site profile sets them to 0). RPS goes off only for a busy poller;
/// without one, no CPU takes the packets but the one their softirq runs
/// on, and the profile steers as pps does. scaling.rst recommends
/// spreading receive processing "when latency is a concern" (RSS:
/// spreading load between CPUs decreases queue length; RPS is its software
/// form, for queues without hardware to spread them), and RFS, whose table
/// the latency profile sizes, moves each flow's processing to the CPU
/// where its reader runs, for cache locality.
fn no_poller(evidence: &str) -> String {
    format!(
        "; set as for pps: the latency profile turns RPS off only for a busy poller, and nothing will busy poll here ({evidence}); without one, receive work is spread where latency is a concern, and RFS moves each flow to its reader's CPU where there is a flow table (scaling.rst)"
    )
}

/// RFS: the queue's share of the socket flow table, where there is one.
fn flow_count(d: &mut Draft, iface: &Interface, q: &RxQueue, table: FlowTable) {
    let Some(current) = q.rps_flow_cnt else {
        return;
    };
    let group = iface.name.as_str();
    let target = Target::rx(group, q.index, RxFile::RpsFlowCnt);
    let n_rx = iface.rx_queues.len();
    let (entries, whose, caveat) = match table {
        FlowTable::Here(n) => (n, "", ""),
        FlowTable::Host(n) if n > 0 => (n, "the host's ", ""),
        FlowTable::Host(_) => {
            d.skip(
                group,
                &target,
                &format!(
                    "RFS needs the socket flow table, and net.core.rps_sock_flow_entries is 0 on the host, which a network namespace cannot raise: set it on the host (sysctl -w net.core.rps_sock_flow_entries={RFS_ENTRIES}), then plan again"
                ),
            );
            return;
        }
        FlowTable::Unseen => (
            RFS_ENTRIES,
            "",
            "; steers only once the host sets net.core.rps_sock_flow_entries, which this network namespace cannot see",
        ),
    };
    let share = entries / n_rx.max(1) as u64;
    let count = share.max(1).next_power_of_two();
    let rounding = if count == share {
        String::new()
    } else {
        format!(", which the kernel rounds up to {count}")
    };
    d.want(
        group,
        target,
        &current.to_string(),
        Value::number(count),
        format!(
            "RFS: {whose}{entries} flow entries / {n_rx} RX queue(s) = {share}{rounding} (scaling.rst){caveat}"
        ),
    );
}

/// Kernel defaults per queue: RPS and RFS off.
fn baseline(d: &mut Draft, iface: &Interface) {
    let group = iface.name.as_str();
    for q in &iface.rx_queues {
        let file = |file: RxFile| Target::rx(group, q.index, file);
        if let Some(current) = &q.rps_cpus {
            d.want(
                group,
                file(RxFile::RpsCpus),
                &format_mask(current),
                Value::cpu_mask(&[]),
                "kernel default: RPS off".to_string(),
            );
        }
        if let Some(current) = q.rps_flow_cnt {
            d.want(
                group,
                file(RxFile::RpsFlowCnt),
                &current.to_string(),
                Value::number(0),
                "kernel default: RFS off".to_string(),
            );
        }
    }
}
