//! The rules, one file per family (what they share is in [`shared`]), run
//! one after the other.

mod buffers;
mod cpu;
mod irq;
mod napi;
mod napi_deferral;
mod nic;
mod reasons;
mod shared;
mod sockets;
mod softnet;
mod state;
mod steer;

/// Thresholds other judges share (`monitor`'s live findings use doctor's
/// numbers, so both say the same about the same rates).
pub(crate) mod thresholds {
    // The testbed's deferral scenario checks its timer against it.
    #[cfg(test)]
    pub(crate) use super::napi_deferral::LONG_DEFERRAL_TIMER_NS;
    pub(crate) use super::sockets::UDP_ERRORS_CRIT_PER_SEC;
    pub(crate) use super::softnet::{
        HOT_SHARE, LITTLE_SHARE, MIN_IDLE_OTHERS, MIN_NET_RX_PER_SEC, SATURATED_SOFTIRQ,
    };
}

use super::context::Context;
use super::finding::Finding;
use super::planned::Plans;

/// Every rule's findings, unsorted. Rules whose fix a profile makes read
/// that profile's plan from `plans`, so their fixes name its values.
pub fn all(ctx: &Context, plans: &Plans) -> Vec<Finding> {
    let mut out = Vec::new();
    irq::check(ctx, plans, &mut out);
    softnet::check(ctx, plans, &mut out);
    nic::check(ctx, plans, &mut out);
    buffers::check(ctx, plans, &mut out);
    sockets::check(ctx, plans, &mut out);
    cpu::check(ctx, plans, &mut out);
    napi::check(ctx, plans, &mut out);
    napi_deferral::check(ctx, plans, &mut out);
    reasons::check(ctx, &mut out);
    state::check(ctx, &mut out);
    steer::check(ctx, &mut out);
    out
}
