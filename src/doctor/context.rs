//! What the rules judge: the host model, the counters sampled twice when
//! doctor was given an interval, the path it was told of, and the states
//! nettune applied here.

use serde::Serialize;

use crate::base::drop_reason::ReasonRate;
use crate::base::records::XdpRecord;
use crate::host::udp_sockets::UdpSocket;
use crate::host::{Counters, Host};
use crate::plan::Drift;

/// Counters sampled twice, `seconds` apart (`doctor --interval`).
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    pub seconds: f64,
    pub before: Counters,
    pub after: Counters,
}

/// What the rules judge.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub host: &'a Host,
    /// `None`: judge the counters in `host` as totals since boot.
    pub rates: Option<&'a Rates>,
    /// `--bandwidth`, bits per second.
    pub bandwidth_bps: Option<u64>,
    /// `--rtt`, seconds.
    pub rtt_secs: Option<f64>,
    /// `--all`: judge virtual interfaces too (physical ones only otherwise;
    /// inside `--netns` every interface but `lo` is judged).
    pub all_interfaces: bool,
    /// States nettune applied to this host (or namespace, or tree) that are
    /// still in place, with the settings that changed since.
    pub applied: &'a [AppliedState],
    /// The kernel's drop reasons over the sampling interval (`doctor
    /// --interval S --trace`); `None` when not traced.
    pub traced: Option<&'a TracedDrops>,
}

/// What the drop tracer counted while doctor sampled (`--trace`), and the
/// UDP sockets whose drop counters grew meanwhile, so that a reason can
/// be named with the socket it happened to.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TracedDrops {
    pub seconds: f64,
    /// Why the reasons could not be traced (then there are none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Most first.
    pub reasons: Vec<ReasonRate>,
    /// UDP sockets that dropped datagrams over the interval, most first.
    pub udp_sockets: Vec<SocketDrops>,
}

/// A UDP socket and the datagrams it dropped over the interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SocketDrops {
    pub socket: UdpSocket,
    pub drops: u64,
}

/// A state `nettune apply` (or `steer`, or an XDP benchmark) made here and
/// has not rolled back, with the settings that no longer hold the value it
/// wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedState {
    pub id: u32,
    /// What it is: `profile pps`, `steer eth2 queue 4 (udp4 dst-port 53)`.
    pub what: String,
    /// The profile, for a profile's state.
    pub profile: Option<String>,
    pub drift: Vec<Drift>,
    /// The commands that roll it back and apply its profile again, with
    /// the options they need here (`--root`, `--netns`, `--state-dir`).
    pub rollback: String,
    pub apply_again: String,
    /// The (interface, queue) `nettune steer` took out of RSS.
    pub steered: Option<(String, u32)>,
    /// The XDP program a benchmark attached.
    pub xdp: Option<AppliedXdp>,
}

/// An XDP program recorded by a benchmark, as it stands now.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedXdp {
    pub record: XdpRecord,
    /// The process that attached it still runs.
    pub owner_running: bool,
    /// The program is still attached.
    pub attached: bool,
}

impl<'a> Context<'a> {
    /// A context that judges `host` alone: totals since boot, no path given.
    pub fn new(host: &'a Host) -> Context<'a> {
        Context {
            host,
            rates: None,
            bandwidth_bps: None,
            rtt_secs: None,
            all_interfaces: false,
            applied: &[],
            traced: None,
        }
    }
}
