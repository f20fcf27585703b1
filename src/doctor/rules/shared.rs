//! What the rules share: which interfaces are judged, the plan targets of
//! an interface's queues, where each queue IRQ is delivered, and counters
//! as totals or as deltas over the sampling interval.

use std::collections::BTreeMap;

use crate::base::counter::{delta, Width};
use crate::doctor::context::Context;
use crate::host::{delivered_cpu, effective_current, Counters, Host, Interface, VectorRole};
use crate::plan::target::{RxFile, Target, TxFile};

/// Plan targets: the affinity of every queue IRQ of `iface` (the plan
/// moves all vectors of queue i together).
pub(super) fn queue_irq_targets(iface: &Interface) -> Vec<Target> {
    let mut irqs: Vec<u32> = iface
        .irq_vectors
        .iter()
        .filter(|v| v.queue.is_some() && v.role != VectorRole::Other)
        .map(|v| v.irq)
        .chain(iface.rx_queues.iter().filter_map(|q| q.irq))
        .collect();
    irqs.sort_unstable();
    irqs.dedup();
    irqs.into_iter().map(Target::IrqAffinity).collect()
}

/// Plan targets: `file` of every RX queue of `iface`.
pub(super) fn rx_queue_targets(iface: &Interface, file: RxFile) -> Vec<Target> {
    iface
        .rx_queues
        .iter()
        .map(|q| Target::rx(&iface.name, q.index, file))
        .collect()
}

/// Plan targets: `file` of every TX queue of `iface`.
pub(super) fn tx_queue_targets(iface: &Interface, file: TxFile) -> Vec<Target> {
    iface
        .tx_queues
        .iter()
        .map(|q| Target::tx(&iface.name, q.index, file))
        .collect()
}

/// Plan targets of sysctls by name.
pub(super) fn sysctl_targets(names: &[&str]) -> Vec<Target> {
    names.iter().map(|n| Target::sysctl(n)).collect()
}

/// Interfaces the rules judge: not loopback, not administratively or
/// physically down, and backed by a device unless `--all` or `--netns`
/// (inside a namespace the veth IS the interface that matters).
pub(super) fn judged_interfaces<'a>(ctx: &Context<'a>) -> impl Iterator<Item = &'a Interface> {
    let all = ctx.all_interfaces || ctx.host.in_netns();
    ctx.host
        .interfaces
        .iter()
        .filter(move |i| i.name != "lo" && !i.is_down() && (i.physical || all))
}

/// A queue IRQ that carries receive work (an RX or combined vector).
#[derive(Debug, Clone)]
pub(super) struct QueueIrq {
    pub(super) irq: u32,
    /// The CPU that takes it: effective affinity when the kernel shows it,
    /// else the first CPU of the mask (irq-affinity.rst: a mask with
    /// several CPUs is delivered to one of them).
    pub(super) delivered: Option<u32>,
    /// The kernel showed the effective affinity (else the mask's first CPU).
    pub(super) by_effective: bool,
    /// Interrupts taken since boot, all CPUs.
    pub(super) count: u64,
}

/// The RX-carrying queue IRQs of an interface, from its IRQ vectors, or
/// from its RX queues when vectors were not matched to roles.
pub(super) fn rx_queue_irqs(iface: &Interface) -> Vec<QueueIrq> {
    let from_vectors: Vec<QueueIrq> = iface
        .irq_vectors
        .iter()
        .filter(|v| matches!(v.role, VectorRole::Rx | VectorRole::Combined))
        .map(|v| QueueIrq {
            irq: v.irq,
            delivered: delivered_cpu(v.effective.as_deref(), v.affinity.as_deref()),
            by_effective: effective_current(v.effective.as_deref(), v.affinity.as_deref()),
            count: v.per_cpu.iter().sum(),
        })
        .collect();
    if !from_vectors.is_empty() {
        return from_vectors;
    }
    iface
        .rx_queues
        .iter()
        .filter_map(|q| {
            Some(QueueIrq {
                irq: q.irq?,
                delivered: delivered_cpu(q.effective.as_deref(), q.affinity.as_deref()),
                by_effective: effective_current(q.effective.as_deref(), q.affinity.as_deref()),
                count: 0,
            })
        })
        .collect()
}

/// An IRQ list (`74-81`) formatted like a CPU list.
pub(super) fn irq_list(irqs: impl IntoIterator<Item = u32>) -> String {
    let irqs: Vec<u32> = irqs.into_iter().collect();
    crate::base::cpuset::format_list(&irqs)
}

/// `text` with its first letter in upper case: fixes are sentences.
pub(super) fn sentence(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// "1 RX queue", "8 RX queues".
pub(super) fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A sysctl as a number: this namespace's, else (inside `--netns`) the
/// host's value of a host-wide one.
pub(super) fn sysctl_u64(host: &Host, name: &str) -> Option<u64> {
    host.sysctl_number(name)
}

/// What the evidence says about busy polling when it is off; `None` when
/// it is on host-wide (then pollers take the packets: before a deferral's
/// timer, and on their own CPU, which RPS would take them from).
pub(super) fn busy_polling_off(host: &Host) -> Option<String> {
    if host.busy_polls() {
        return None;
    }
    let values = host.busy_polling();
    let seen: Vec<String> = values
        .iter()
        .filter_map(|(n, v)| v.map(|us| format!("{n} {us}")))
        .collect();
    Some(if seen.is_empty() {
        format!(
            "busy polling unknown, taken as off: net.core.busy_read and busy_poll are not \
             visible from {}",
            host.netns_text()
        )
    } else if host.in_netns() {
        format!(
            "busy polling off host-wide ({}; a network namespace cannot set them)",
            seen.join(", ")
        )
    } else {
        format!("busy polling off ({})", seen.join(", "))
    })
}

/// A sysctl of several numbers (`tcp_rmem`: min default max).
pub(super) fn sysctl_fields(host: &Host, name: &str) -> Option<Vec<u64>> {
    host.sysctls
        .get(name)?
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect()
}

/// The counters a rule judges: totals since boot, or the change over the
/// sampling interval.
pub(super) struct Window<'a> {
    pub(super) now: &'a Counters,
    pub(super) before: Option<&'a Counters>,
    pub(super) seconds: Option<f64>,
    /// Judged inside a network namespace: per-CPU counters are the host's.
    pub(super) in_netns: bool,
}

impl<'a> Window<'a> {
    pub(super) fn of(ctx: &Context<'a>) -> Window<'a> {
        match ctx.rates {
            Some(r) if r.seconds > 0.0 => Window {
                now: &r.after,
                before: Some(&r.before),
                seconds: Some(r.seconds),
                in_netns: ctx.host.in_netns(),
            },
            _ => Window {
                now: &ctx.host.counters,
                before: None,
                seconds: None,
                in_netns: ctx.host.in_netns(),
            },
        }
    }

    pub(super) fn live(&self) -> bool {
        self.before.is_some()
    }

    /// "over 2 s" or "since boot", for evidence.
    pub(super) fn span(&self) -> String {
        match self.seconds {
            Some(s) => format!("over {}", crate::base::units::format_time(s)),
            None => "since boot".to_string(),
        }
    }

    /// [`Window::span`] for per-CPU counters (softirqs, /proc/stat,
    /// softnet_stat), which count for the whole host: inside a network
    /// namespace the evidence says so.
    pub(super) fn host_span(&self) -> String {
        if self.in_netns {
            format!(
                "{} (whole host: these counters are not per namespace)",
                self.span()
            )
        } else {
            self.span()
        }
    }

    /// ", 120/s" when sampled, "" otherwise.
    pub(super) fn rate_suffix(&self, n: u64) -> String {
        match self.seconds {
            Some(s) => format!(
                " ({}/s)",
                crate::base::units::format_count((n as f64 / s).round() as u64)
            ),
            None => String::new(),
        }
    }

    pub(super) fn per_sec(&self, n: u64) -> Option<f64> {
        self.seconds.map(|s| n as f64 / s)
    }

    /// A named counter from one of the snmp maps (`Udp`, `TcpExt`, ...).
    /// A counter that went backwards between the samples (a namespace or
    /// module re-created) is a gap: `None`, not judged.
    pub(super) fn counter(
        &self,
        pick: fn(&Counters) -> &BTreeMap<String, i64>,
        name: &str,
    ) -> Option<u64> {
        let now = u64::try_from(*pick(self.now).get(name)?).ok()?;
        match self.before {
            Some(b) => delta(u64::try_from(*pick(b).get(name)?).ok()?, now, Width::U64),
            None => Some(now),
        }
    }

    /// A per-CPU value, keyed by CPU id. Counters `width` bits wide that
    /// wrapped between the samples count across the wrap (softnet_stat,
    /// softirqs and interrupts are 32-bit); CPUs missing from either
    /// sample, or whose counter went back otherwise (a gap), are left out.
    pub(super) fn per_cpu<T>(
        &self,
        rows: fn(&Counters) -> &[T],
        key: fn(&T) -> (u32, u64),
        width: Width,
    ) -> Vec<(u32, u64)> {
        let now = rows(self.now).iter().map(key);
        match self.before {
            None => now.collect(),
            Some(before) => {
                let base: BTreeMap<u32, u64> = rows(before).iter().map(key).collect();
                now.filter_map(|(cpu, v)| Some((cpu, delta(*base.get(&cpu)?, v, width)?)))
                    .collect()
            }
        }
    }
}

/// The RX queues of `iface` whose NAPI reports deferral values that
/// `pick(defer-hard-irqs, gro-flush-timeout ns)` selects, and those values
/// as text, once per distinct pair; `None` when no queue is selected
/// (also when the kernel reports no NAPI or no values).
pub(super) fn napi_queues(
    iface: &Interface,
    pick: impl Fn(u32, u64) -> bool,
    text: impl Fn(u32, u64) -> String,
) -> Option<(Vec<u32>, Vec<String>)> {
    let mut queues = Vec::new();
    let mut seen = Vec::new();
    let mut values: Vec<String> = Vec::new();
    for q in &iface.rx_queues {
        let Ok(rx) = iface.netdev.napi_of_rx(q.index) else {
            continue;
        };
        let (Some(defer), Some(timer)) = (rx.napi.defer_hard_irqs, rx.napi.gro_flush_timeout_ns)
        else {
            continue;
        };
        if !pick(defer, timer) {
            continue;
        }
        queues.push(q.index);
        if !seen.contains(&rx.napi.id) {
            seen.push(rx.napi.id);
            let text = text(defer, timer);
            if !values.contains(&text) {
                values.push(text);
            }
        }
    }
    (!queues.is_empty()).then_some((queues, values))
}

/// The value `planned` sets for NAPI setting `key` (the first queue's), or
/// `default` when the plan does not change it.
pub(super) fn planned_napi_value(
    planned: &crate::doctor::planned::Planned,
    key: crate::base::driver::NapiKey,
    default: u64,
) -> String {
    planned
        .changes
        .iter()
        .find(|c| matches!(c.target, Target::Napi { key: k, .. } if k == key))
        .map_or_else(|| default.to_string(), |c| c.to.to_string())
}

/// RX queues for sentences: `rx-0..7` or `rx-0, rx-3`.
pub(super) fn queue_list(queues: &[u32]) -> String {
    let contiguous = queues.windows(2).all(|w| w[1] == w[0] + 1);
    match queues {
        [one] => format!("rx-{one}"),
        [first, .., last] if contiguous => format!("rx-{first}..{last}"),
        _ => queues
            .iter()
            .map(|q| format!("rx-{q}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_lists_fold_runs() {
        assert_eq!(queue_list(&[0, 1, 2, 3]), "rx-0..3");
        assert_eq!(queue_list(&[2]), "rx-2");
        assert_eq!(queue_list(&[0, 3]), "rx-0, rx-3");
    }
}
