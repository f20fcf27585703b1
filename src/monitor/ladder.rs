//! The drop ladder: where packets are lost on the receive path, layer by
//! layer, from the NIC up to the sockets, as rates over one interval.
//!
//! ```text
//! NIC (rx_missed_errors, rx_dropped) -> softnet (dropped; time_squeeze)
//!   -> IP / IPv6 (InDiscards, ...) -> UDP / UDP6 (InErrors, NoPorts)
//!   -> TCP (ListenDrops, TCPBacklogDrop, ...)
//! ```
//!
//! Each counter says whether it adds to its layer's loss: some are part of
//! another (the kernel counts every RcvbufErrors in InErrors too, every
//! ListenOverflows in ListenDrops, every flow-limit drop in softnet's
//! dropped) and some count events, not lost packets (time_squeeze,
//! rx_fifo_errors), so adding them would count a packet twice.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::counter::{delta, Width};
use crate::base::drop_reason::{self, ReasonRate};
use crate::host::softnet::SoftnetCpu;
use crate::host::Counters;

use super::sample::Sample;

pub use crate::base::drop_layer::Layer;

/// The layers that have loss counters, in path order: every layer of
/// [`Layer::ALL`] but qdisc, netfilter and other, whose losses only the
/// drop tracer tells apart (their JSON names are the same either way).
pub const COUNTER_LAYERS: [Layer; 7] = [
    Layer::Nic,
    Layer::Softnet,
    Layer::Ip,
    Layer::Ip6,
    Layer::Udp,
    Layer::Udp6,
    Layer::Tcp,
];

/// Every layer's losses over one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DropLadder {
    /// One per layer with counters, in path order ([`COUNTER_LAYERS`]).
    pub layers: Vec<DropLayer>,
    /// The layer that lost the most packets per second, `None` when no
    /// layer lost any (or none could be computed).
    pub worst: Option<Layer>,
    /// Whether the kernel's drop reasons were traced over the interval:
    /// `None` when not asked for (a replay, `--no-trace`). When traced,
    /// `layers` holds every layer of [`Layer::ALL`], those without
    /// counters (qdisc, netfilter, other) with reasons only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing: Option<Tracing>,
}

/// The drop tracer over one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tracing {
    /// Why reasons could not be traced (one line); `None` when they were.
    pub unavailable: Option<String>,
    /// Drops per second the tracer counted, every reason and layer.
    pub per_sec: Option<f64>,
    /// Drops it could not file under a reason this interval (its map was
    /// full).
    pub lost: u64,
}

/// Reasons shown per layer and interval.
pub const TOP_REASONS: usize = 3;

/// One layer's losses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DropLayer {
    pub layer: Layer,
    /// Packets lost here per second: the sum of the counters with
    /// `counted`. `None` when none of them could be computed (not
    /// readable, or every one a gap).
    pub drops_per_sec: Option<f64>,
    /// The counters of this layer that the kernel has.
    pub counters: Vec<DropCounter>,
    /// Drops per second the tracer filed under this layer, every reason;
    /// `None` when not traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced_per_sec: Option<f64>,
    /// The kernel's reasons for this layer's drops over the interval, most
    /// first (at most [`TOP_REASONS`]), each with its top kernel locations
    /// and protocols; empty when none or not traced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<ReasonRate>,
}

/// One loss counter over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DropCounter {
    /// The kernel's name: `rx_missed_errors`, `dropped`, `InDiscards`,
    /// `RcvbufErrors`, `TCPBacklogDrop`.
    pub name: String,
    /// The interface, for NIC counters; `None` for counters of the whole
    /// host (softnet, summed over CPUs) or namespace (SNMP).
    pub scope: Option<String>,
    /// Its increase over the interval; `None` for a gap (the counter went
    /// backwards: re-created, reset) or when one of the samples lacks it.
    pub count: Option<u64>,
    /// `count` per second.
    pub per_sec: Option<f64>,
    /// Adds to [`DropLayer::drops_per_sec`]. False for a counter that is
    /// part of another one of the layer, or that counts events rather
    /// than lost packets.
    pub counted: bool,
}

impl DropLadder {
    /// The layer `layer`.
    pub fn layer(&self, layer: Layer) -> Option<&DropLayer> {
        self.layers.iter().find(|l| l.layer == layer)
    }
}

/// Link counters of the NIC layer: (name, adds to the loss).
/// rx_dropped and rx_missed_errors are disjoint (include/uapi/linux/if_link.h:
/// /proc/net/dev's "drop" is their sum); fifo and over errors count
/// overflow events.
const NIC: &[(&str, bool)] = &[
    ("rx_missed_errors", true),
    ("rx_dropped", true),
    ("rx_fifo_errors", false),
    ("rx_over_errors", false),
];

/// /proc/net/snmp Ip and /proc/net/snmp6 Ip6 (without the prefix).
const IP: &[(&str, bool)] = &[
    ("InDiscards", true),
    ("InHdrErrors", true),
    ("InAddrErrors", true),
    ("InUnknownProtos", true),
];

const IP6: &[(&str, bool)] = &[
    ("InDiscards", true),
    ("InHdrErrors", true),
    ("InAddrErrors", true),
    ("InUnknownProtos", true),
    ("InNoRoutes", true),
    ("InTruncatedPkts", true),
    ("InTooBigErrors", true),
];

/// Udp and Udp6: RcvbufErrors (and MemErrors, InCsumErrors) are counted
/// in InErrors too (net/ipv4/udp.c).
const UDP: &[(&str, bool)] = &[
    ("RcvbufErrors", false),
    ("InErrors", true),
    ("NoPorts", true),
];

/// TcpExt: every ListenOverflows is also a ListenDrops (tcp_listendrop).
const TCP: &[(&str, bool)] = &[
    ("ListenOverflows", false),
    ("ListenDrops", true),
    ("TCPBacklogDrop", true),
    ("TCPRcvQDrop", true),
];

/// One column of softnet_stat (`None` where the kernel's layout lacks it).
type SoftnetField = fn(&SoftnetCpu) -> Option<u64>;

/// The ladder between two samples `seconds` apart.
pub fn ladder(prev: &Sample, cur: &Sample, seconds: f64) -> DropLadder {
    let rate = |count: Option<u64>| -> Option<f64> {
        count.filter(|_| seconds > 0.0).map(|n| n as f64 / seconds)
    };
    let counter =
        |name: &str, scope: Option<&str>, count: Option<u64>, counted: bool| DropCounter {
            name: name.to_string(),
            scope: scope.map(str::to_string),
            count,
            per_sec: rate(count),
            counted,
        };

    let mut nic = Vec::new();
    for iface in &cur.interfaces {
        let before = prev
            .interface(&iface.name)
            .filter(|p| p.ifindex == iface.ifindex);
        for &(name, counted) in NIC {
            let Some(&now) = iface.link.get(name) else {
                continue;
            };
            let count = before
                .and_then(|b| b.link.get(name))
                .and_then(|&then| delta(then, now, Width::U64));
            nic.push(counter(name, Some(&iface.name), count, counted));
        }
    }

    let softnet_sum = |c: &Counters, pick: SoftnetField| {
        c.softnet
            .iter()
            .map(|s| (s.cpu, pick(s)))
            .collect::<BTreeMap<u32, Option<u64>>>()
    };
    let mut softnet = Vec::new();
    if !cur.counters.softnet.is_empty() {
        let fields: [(&str, SoftnetField, bool); 3] = [
            ("dropped", |s| Some(s.dropped), true),
            ("flow_limit_count", |s| s.flow_limit_count, false),
            ("time_squeeze", |s| Some(s.time_squeeze), false),
        ];
        for (name, pick, counted) in fields {
            let now = softnet_sum(&cur.counters, pick);
            if now.values().all(Option::is_none) {
                continue;
            }
            let then = softnet_sum(&prev.counters, pick);
            // Summed over the CPUs in both samples; a CPU whose counter
            // went back (not a wrap) leaves the sum unknown.
            let count = now
                .iter()
                .filter_map(|(cpu, v)| Some((v.as_ref()?, then.get(cpu)?.as_ref()?)))
                .map(|(&now, &then)| delta(then, now, Width::U32))
                .try_fold(0u64, |sum, d| Some(sum + d?))
                .filter(|_| !prev.counters.softnet.is_empty());
            softnet.push(counter(name, None, count, counted));
        }
    }

    let snmp = |pick: fn(&Counters) -> &BTreeMap<String, i64>, names: &[(&str, bool)]| {
        names
            .iter()
            .filter_map(|&(name, counted)| {
                let now = u64::try_from(*pick(&cur.counters).get(name)?).ok()?;
                let count = pick(&prev.counters)
                    .get(name)
                    .and_then(|&then| u64::try_from(then).ok())
                    .and_then(|then| delta(then, now, Width::U64));
                Some(counter(name, None, count, counted))
            })
            .collect::<Vec<_>>()
    };

    let mut layers: Vec<DropLayer> = [
        (Layer::Nic, nic),
        (Layer::Softnet, softnet),
        (Layer::Ip, snmp(|c| &c.ip, IP)),
        (Layer::Ip6, snmp(|c| &c.ip6, IP6)),
        (Layer::Udp, snmp(|c| &c.udp, UDP)),
        (Layer::Udp6, snmp(|c| &c.udp6, UDP)),
        (Layer::Tcp, snmp(|c| &c.tcp_ext, TCP)),
    ]
    .into_iter()
    .map(|(layer, counters)| DropLayer {
        layer,
        drops_per_sec: counters
            .iter()
            .filter(|c| c.counted)
            .filter_map(|c| c.per_sec)
            .reduce(|a, b| a + b),
        counters,
        traced_per_sec: None,
        reasons: Vec::new(),
    })
    .collect();
    let tracing = cur
        .drop_reasons
        .as_ref()
        .map(|now| traced(&mut layers, prev, now, seconds));
    let worst = layers
        .iter()
        .filter_map(|l| Some((l.layer, l.drops_per_sec?)))
        .filter(|(_, rate)| *rate > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(layer, _)| layer);
    DropLadder {
        layers,
        worst,
        tracing,
    }
}

/// Put the reasons of the interval under their layers (adding the layers
/// that only the tracer sees, so that every layer is there).
fn traced(
    layers: &mut Vec<DropLayer>,
    prev: &Sample,
    now: &drop_reason::ReasonTotals,
    seconds: f64,
) -> Tracing {
    if let Some(why) = &now.unavailable {
        return Tracing {
            unavailable: Some(why.clone()),
            per_sec: None,
            lost: 0,
        };
    }
    // A previous sample without totals (the first after the tracer
    // started) counts from zero.
    let before = prev
        .drop_reasons
        .as_ref()
        .filter(|p| p.unavailable.is_none());
    let rates = drop_reason::between(before, now, seconds);
    let per_sec = |count: u64| (seconds > 0.0).then(|| count as f64 / seconds);
    let all: Vec<DropLayer> = Layer::ALL
        .iter()
        .map(|&layer| {
            let (mut counted, mut of_layer) = (0u64, Vec::new());
            for r in rates.iter().filter(|r| r.layer == layer) {
                counted += r.count;
                if of_layer.len() < TOP_REASONS {
                    of_layer.push(r.clone());
                }
            }
            let mut l = match layers.iter().position(|l| l.layer == layer) {
                Some(i) => layers[i].clone(),
                None => DropLayer {
                    layer,
                    drops_per_sec: None,
                    counters: Vec::new(),
                    traced_per_sec: None,
                    reasons: Vec::new(),
                },
            };
            l.traced_per_sec = per_sec(counted);
            l.reasons = of_layer;
            l
        })
        .collect();
    *layers = all;
    let lost = match before {
        Some(b) if now.lost >= b.lost => now.lost - b.lost,
        _ => now.lost,
    };
    Tracing {
        unavailable: None,
        per_sec: per_sec(rates.iter().map(|r| r.count).sum()),
        lost,
    }
}
