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

use super::draft::Draft;
use super::profile::{PlanOptions, Profile};
use super::target::Target;
use super::value::Value;
use super::values::{HTTP_NAPI, LATENCY_NAPI};
use crate::base::driver::netdev::NoNapi;
use crate::base::driver::{NapiKey, NetdevState};
use crate::base::{Missing, Probe};
use crate::host::Interface;

const SOURCE: &str = "napi.rst";

/// The value and reason of each NAPI setting for a profile.
fn wanted(profile: Profile) -> Vec<(NapiKey, u64, String)> {
    let (v, why) = match profile {
        Profile::Latency => (
            LATENCY_NAPI,
            "a short deferral: a packet nobody polls for waits one timer at most",
        ),
        Profile::Http => (
            HTTP_NAPI,
            "a busy server keeps IRQs off while it polls, in batches",
        ),
        Profile::Baseline => {
            return NapiKey::ALL
                .into_iter()
                .map(|key| (key, 0, "kernel default".to_string()))
                .collect()
        }
        Profile::Pps | Profile::Throughput | Profile::Custom => return Vec::new(),
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

pub(super) fn plan_napi(d: &mut Draft, iface: &Interface, opts: &PlanOptions) {
    let wanted = wanted(opts.profile);
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
