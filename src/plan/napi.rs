//! Per-NAPI settings of each RX queue (netdev netlink `napi-set`, Linux
//! 6.13): IRQ deferral and suspension for the latency and http profiles,
//! the kernel's zeros for baseline. Each change names (interface, RX
//! queue), never a NAPI id: ids change when a driver rebuilds its queues.
//!
//! Why napi-set and not the per-device sysfs files (napi_defer_hard_irqs,
//! gro_flush_timeout): a write to those sets every NAPI of the device at
//! once, overwriting per-queue values set by anyone else, so undoing it
//! cannot restore them; napi-set changes one queue's NAPI and reads back
//! exactly. The sysfs files stay what they are: the defaults a NAPI
//! created later starts from.
//!
//! The latency profile's deferral is there for busy polling: the
//! application's poll takes the packets and the IRQ stays masked
//! (napi.rst, "Busy polling" and "IRQ mitigation"). Where nothing will busy
//! poll once the plan is applied (a network namespace cannot set
//! net.core.busy_read and busy_poll, and the host has them at 0), a
//! deferral only holds each packet until its timer, so the profile turns
//! it off there. The http profile keeps its deferral either way: a busy
//! server always has packets waiting, and batching their polls is what IRQ
//! deferral was made for ("net: napi: add hard irqs deferral feature":
//! fewer IRQs per packet on busy servers), busy polling or not.

use super::admit::sysctl_reach;
use super::draft::Draft;
use super::profile::{PlanOptions, Profile, Setting};
use super::target::Target;
use super::value::Value;
use super::values::{NapiValues, BUSY_POLL_US, HTTP_NAPI, LATENCY_NAPI};
use crate::base::driver::netdev::NoNapi;
use crate::base::driver::{NapiKey, NetdevState};
use crate::base::{Missing, Probe};
use crate::host::{Host, Interface};

const SOURCE: &str = "napi.rst";

/// IRQ deferral, its timer and IRQ suspension all off: the kernel's default.
const NO_DEFERRAL: NapiValues = NapiValues {
    defer_hard_irqs: 0,
    gro_flush_timeout_ns: 0,
    irq_suspend_timeout_ns: 0,
};

/// What a busy-polling sysctl read as `current` ([`Host::busy_polling`])
/// will be once the plan of `opts` is applied to `host`:
/// `Some(microseconds)`, or `None` where it cannot be read (not visible
/// from a container, absent from the kernel, not a number).
fn busy_polling_after(
    host: &Host,
    opts: &PlanOptions,
    name: &str,
    current: Option<u64>,
) -> Option<u64> {
    let settable =
        host.sysctls.contains_key(name) && !(host.in_netns() && sysctl_reach(name).is_some());
    match opts.site.as_ref().and_then(|s| s.sysctls.get(name)) {
        Some((Setting::Value(v), _)) if settable => v.trim().parse().ok(),
        Some(_) => current,
        None if settable && matches!(opts.profile, Profile::Latency | Profile::Http) => {
            Some(current.unwrap_or(0).max(BUSY_POLL_US))
        }
        None => current,
    }
}

/// Why nothing will busy poll on `host` once the plan of `opts` is applied
/// (the evidence, as text); `None` when busy polling will be on for every
/// socket. A value that cannot be read counts as 0, the kernel's default:
/// a deferral without a poller delays packets, while an IRQ per packet is
/// only what the kernel does by default. The latency profile's RPS reads
/// the same evidence (queues.rs).
pub(super) fn nothing_busy_polls(host: &Host, opts: &PlanOptions) -> Option<String> {
    let mut known = Vec::new();
    let mut unread = Vec::new();
    for (name, current) in host.busy_polling() {
        match busy_polling_after(host, opts, name, current) {
            Some(us) if us > 0 => return None,
            Some(us) => known.push(format!("{name} {us}")),
            None => unread.push(name),
        }
    }
    let mut parts = Vec::new();
    if !known.is_empty() {
        let whose = if host.in_netns() {
            format!(" on the host, which {} cannot change", host.netns_text())
        } else {
            String::new()
        };
        parts.push(format!("{}{whose}", known.join(", ")));
    }
    if !unread.is_empty() {
        let place = if host.in_netns() {
            format!("not visible from {}", host.netns_text())
        } else {
            "not readable on this kernel".to_string()
        };
        parts.push(format!("{} {place}, taken as 0", unread.join(" and ")));
    }
    Some(parts.join("; "))
}

/// The per-NAPI values `opts.profile` writes on `host` (`None`: a profile
/// that leaves NAPIs alone), and, where the latency profile turns IRQ
/// deferral off because nothing will busy poll, the evidence for that.
/// doctor names the same values in its fixes.
pub fn napi_values(host: &Host, opts: &PlanOptions) -> Option<(NapiValues, Option<String>)> {
    match opts.profile {
        Profile::Latency => Some(match nothing_busy_polls(host, opts) {
            Some(why) => (NO_DEFERRAL, Some(why)),
            None => (LATENCY_NAPI, None),
        }),
        Profile::Http => Some((HTTP_NAPI, None)),
        Profile::Baseline => Some((NO_DEFERRAL, None)),
        Profile::Pps | Profile::Throughput | Profile::Custom => None,
    }
}

/// The value and reason of each NAPI setting for a plan of `opts`.
fn wanted(host: &Host, opts: &PlanOptions) -> Vec<(NapiKey, u64, String)> {
    let Some((v, off)) = napi_values(host, opts) else {
        return Vec::new();
    };
    let why = match (opts.profile, off) {
        (Profile::Baseline, _) => {
            return NapiKey::ALL
                .into_iter()
                .map(|key| (key, 0, "kernel default".to_string()))
                .collect()
        }
        (Profile::Latency, Some(polling)) => return deferral_off(&polling),
        (Profile::Http, _) => "a busy server keeps IRQs off while it polls, in batches",
        _ => "a short deferral: a packet nobody polls for waits one timer at most",
    };
    vec![
        (
            NapiKey::DeferHardIrqs,
            v.defer_hard_irqs,
            format!(
                "IRQ deferral: after a poll that found packets the device IRQ stays masked for up \
                 to {} empty polls, so busy polling is not interrupted by IRQs and softirqs; {why} \
                 ({SOURCE})",
                v.defer_hard_irqs
            ),
        ),
        (
            NapiKey::GroFlushTimeout,
            v.gro_flush_timeout_ns,
            format!(
                "the deferral's timer: while IRQs are deferred NAPI is polled again after {} us \
                 when no application busy-polls first ({SOURCE})",
                v.gro_flush_timeout_ns / 1000
            ),
        ),
        (
            NapiKey::IrqSuspendTimeout,
            v.irq_suspend_timeout_ns,
            format!(
                "IRQ suspension: IRQs stay off up to {} ms while an application that busy-polls \
                 with prefer-busy-poll epoll keeps finding events ({SOURCE})",
                v.irq_suspend_timeout_ns / 1_000_000
            ),
        ),
    ]
}

/// The latency profile where nothing will busy poll (`polling` says why):
/// deferral, its timer and IRQ suspension off.
fn deferral_off(polling: &str) -> Vec<(NapiKey, u64, String)> {
    let short = format!(
        "{} polls, {} us",
        LATENCY_NAPI.defer_hard_irqs,
        LATENCY_NAPI.gro_flush_timeout_ns / 1000
    );
    vec![
        (
            NapiKey::DeferHardIrqs,
            0,
            format!(
                "IRQ deferral off: nothing busy polls here ({polling}); deferral lets a busy \
                 poller replace the IRQ, and without one it only holds each packet until the \
                 timer fires ({SOURCE}, \"IRQ mitigation\"), so each packet raises its IRQ at \
                 once instead. With busy polling on (net.core.busy_read and busy_poll \
                 {BUSY_POLL_US}), the profile sets a short deferral ({short}): plan again then"
            ),
        ),
        (
            NapiKey::GroFlushTimeout,
            0,
            format!(
                "no deferral timer: with IRQ deferral off it would only keep GRO holding packets \
                 until it fires ({SOURCE})"
            ),
        ),
        (
            NapiKey::IrqSuspendTimeout,
            0,
            format!(
                "IRQ suspension off: it serves applications that busy poll with prefer-busy-poll \
                 epoll, on top of the deferral turned off here ({SOURCE}, \"IRQ suspension\")"
            ),
        ),
    ]
}

/// Why the per-NAPI settings of an interface with netdev state `n` cannot
/// be changed here; `None` when the kernel takes napi-set.
pub fn no_napi_set(n: &NetdevState) -> Option<&'static str> {
    match &n.napi_set {
        Probe::Value(true) => None,
        Probe::Value(false) => Some("this kernel has no netdev napi-set (Linux 6.13+)"),
        Probe::Missing(Missing::NotSupported) => {
            Some("this kernel has no netdev netlink family (napi-set: Linux 6.13+)")
        }
        Probe::Missing(Missing::Unknown) => {
            Some("unknown: no netdev netlink data (a capture without it, or the query failed)")
        }
    }
}

pub(super) fn plan_napi(d: &mut Draft, host: &Host, iface: &Interface, opts: &PlanOptions) {
    let wanted = wanted(host, opts);
    let Some(first) = iface.rx_queues.first().map(|q| q.index) else {
        return;
    };
    if wanted.is_empty() {
        return;
    }
    let group = iface.name.as_str();
    let n = &iface.netdev;
    // One reason for the whole interface, on its first RX queue's first
    // setting: one message, not one per queue and setting.
    let skip_all = |d: &mut Draft, why: String| {
        let queues = iface.rx_queues.len();
        let names: Vec<&str> = wanted.iter().map(|(key, _, _)| key.name()).collect();
        d.skip(
            group,
            &Target::napi(group, first, wanted[0].0),
            &format!(
                "{why}: the NAPI settings ({}) of its {queues} RX queue{} stay as they are",
                names.join(", "),
                if queues == 1 { "" } else { "s" }
            ),
        );
    };
    if let Some(why) = no_napi_set(n) {
        return skip_all(d, why.to_string());
    }
    for (queue, napi) in n.first_rx_of_each_napi(iface.rx_queues.iter().map(|q| q.index)) {
        let napi = match napi {
            Ok(napi) => napi,
            // The whole device: say it once.
            Err(why @ (NoNapi::NoneNow | NoNapi::NotLinked | NoNapi::Unknown(_))) => {
                return skip_all(d, why.reason(group, queue));
            }
            Err(why) => {
                for (key, _, _) in &wanted {
                    d.skip(
                        group,
                        &Target::napi(group, queue, *key),
                        &why.reason(group, queue),
                    );
                }
                continue;
            }
        };
        for (key, value, reason) in &wanted {
            let target = Target::napi(group, queue, *key);
            match key.value_in(napi) {
                Some(current) => d.want(
                    group,
                    target,
                    &current.to_string(),
                    Value::number(*value),
                    reason.clone(),
                ),
                None => d.skip(
                    group,
                    &target,
                    &format!("this kernel does not report {key} (Linux 6.13+)"),
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Busy polling as the host model reads it (the fact doctor judges
    /// by), and as the plan sees it where the plan leaves it alone (pps):
    /// on in the busy-poll VM, off in the plain one, and inside a network
    /// namespace the host's values.
    #[test]
    fn busy_polling_is_read_once_for_doctor_and_plan() {
        let pps = PlanOptions::new(Profile::Pps);
        let on = crate::gather::fixture_host("vm-2cpu-busy-poll");
        assert_eq!(
            on.busy_polling(),
            [
                ("net.core.busy_read", Some(50)),
                ("net.core.busy_poll", Some(50))
            ]
        );
        assert!(on.busy_polls());
        assert_eq!(nothing_busy_polls(&on, &pps), None);

        let mut off = crate::gather::fixture_host("vm-2cpu-virtio");
        assert!(!off.busy_polls());
        assert_eq!(
            nothing_busy_polls(&off, &pps).as_deref(),
            Some("net.core.busy_read 0, net.core.busy_poll 0")
        );
        // Inside --netns: the host's values, read before entering it.
        off.source.netns = Some("blue".to_string());
        for name in crate::host::BUSY_POLLING {
            off.sysctls.remove(name);
            off.host_sysctls.insert(name.to_string(), "50".to_string());
        }
        assert_eq!(off.busy_polling()[1], ("net.core.busy_poll", Some(50)));
        assert!(off.busy_polls());
        assert_eq!(nothing_busy_polls(&off, &pps), None);
    }
}
