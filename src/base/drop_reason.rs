//! Drops counted by the kernel's own reason, as the parts that show them
//! receive them: the monitor's ladder and its exporter, doctor's findings,
//! experiment reports. The drop tracer (`crate::trace`) counts them; these
//! parts see only this plain data and a [`ReasonSource`] handed to them,
//! so none of them loads BPF programs or depends on the tracer.

use serde::{Deserialize, Serialize};

use super::drop_layer::Layer;

/// The drops counted since a tracer started: raw totals, as a sample holds
/// counters (a rate is the difference of two of these).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReasonTotals {
    /// Why reasons are not counted (no permission, an old kernel, tracefs
    /// not mounted): one line for the user. `None` when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// One per (reason, layer) seen, most first.
    pub reasons: Vec<ReasonTotal>,
    /// Drops the tracer could not file under a key (its map was full).
    #[serde(default)]
    pub lost: u64,
}

impl ReasonTotals {
    /// Totals that say why there are none.
    pub fn unavailable(why: impl Into<String>) -> ReasonTotals {
        ReasonTotals {
            unavailable: Some(why.into()),
            ..ReasonTotals::default()
        }
    }

    /// The total of `reason` in `layer` (0 when not seen).
    pub fn count(&self, reason: &str, layer: Layer) -> u64 {
        self.reasons
            .iter()
            .find(|r| r.reason == reason && r.layer == layer)
            .map_or(0, |r| r.count)
    }
}

/// One reason in one layer: how many drops since the start, and where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasonTotal {
    /// As the kernel names it: `SOCKET_RCVBUFF`.
    pub reason: String,
    pub layer: Layer,
    pub count: u64,
    /// Kernel locations (`udp_queue_rcv_one_skb+0x2f5`) with their counts,
    /// most first; `location` is `None` where the kernel hides addresses.
    #[serde(default)]
    pub locations: Vec<PlaceCount>,
    /// Packet protocols (`udp`, `tcp`, `arp`), most first.
    #[serde(default)]
    pub protocols: Vec<PlaceCount>,
    #[serde(flatten)]
    pub about: About,
}

/// What a reason means, its fix and where that is said: for reports and
/// findings (the tracer fills it from its catalogue).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct About {
    /// What happened, in a few words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// What to do about it, where a fix exists (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The public source that says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The cause is a limit a setting raises (a buffer, a backlog, a
    /// queue), not a decision (a rule, a filter) or a fault.
    #[serde(default)]
    pub limit: bool,
}

/// A count under a name: a kernel location or a protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaceCount {
    pub name: Option<String>,
    pub count: u64,
}

/// One reason over an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasonRate {
    pub reason: String,
    pub layer: Layer,
    pub count: u64,
    pub per_sec: Option<f64>,
    /// The kernel locations of this interval's drops, most first (at most
    /// [`TOP_PLACES`]); `name` is `None` where the kernel hides addresses.
    #[serde(default)]
    pub locations: Vec<PlaceCount>,
    /// Their protocols, most first (at most [`TOP_PLACES`]).
    #[serde(default)]
    pub protocols: Vec<PlaceCount>,
    #[serde(flatten)]
    pub about: About,
}

/// Locations and protocols kept per reason in an interval.
pub const TOP_PLACES: usize = 3;

/// What happened between two totals `seconds` apart: the reasons that
/// grew, most first. A reason whose count went back (a new tracer) counts
/// from zero.
pub fn between(prev: Option<&ReasonTotals>, cur: &ReasonTotals, seconds: f64) -> Vec<ReasonRate> {
    let place_delta = |now: &[PlaceCount], then: Option<&[PlaceCount]>| {
        let mut out: Vec<PlaceCount> = now
            .iter()
            .filter_map(|p| {
                let before = then
                    .and_then(|t| t.iter().find(|q| q.name == p.name))
                    .map_or(0, |q| q.count);
                let count = if p.count >= before {
                    p.count - before
                } else {
                    p.count
                };
                (count > 0).then(|| PlaceCount {
                    name: p.name.clone(),
                    count,
                })
            })
            .collect();
        out.sort_by_key(|p| std::cmp::Reverse(p.count));
        out.truncate(TOP_PLACES);
        out
    };
    let mut rates: Vec<ReasonRate> = cur
        .reasons
        .iter()
        .filter_map(|r| {
            let before = prev.and_then(|p| {
                p.reasons
                    .iter()
                    .find(|q| q.reason == r.reason && q.layer == r.layer)
            });
            let then = before.map_or(0, |b| b.count);
            let (count, restarted) = if r.count >= then {
                (r.count - then, false)
            } else {
                (r.count, true)
            };
            if count == 0 {
                return None;
            }
            let base =
                |pick: fn(&ReasonTotal) -> &[PlaceCount]| before.filter(|_| !restarted).map(pick);
            Some(ReasonRate {
                reason: r.reason.clone(),
                layer: r.layer,
                count,
                per_sec: (seconds > 0.0).then(|| count as f64 / seconds),
                locations: place_delta(&r.locations, base(|t| &t.locations)),
                protocols: place_delta(&r.protocols, base(|t| &t.protocols)),
                about: r.about.clone(),
            })
        })
        .collect();
    rates.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    rates
}

/// Where totals come from: a tracer the caller opened. Read once per
/// sample.
pub trait ReasonSource: Send {
    /// Everything counted since the source started.
    fn totals(&mut self) -> ReasonTotals;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(reason: &str, layer: Layer, count: u64, at: &[(&str, u64)]) -> ReasonTotal {
        ReasonTotal {
            reason: reason.to_string(),
            layer,
            count,
            locations: at
                .iter()
                .map(|(n, c)| PlaceCount {
                    name: Some(n.to_string()),
                    count: *c,
                })
                .collect(),
            protocols: Vec::new(),
            about: About::default(),
        }
    }

    #[test]
    fn an_interval_is_the_growth_of_each_reason_most_first() {
        let prev = ReasonTotals {
            reasons: vec![
                total("NO_SOCKET", Layer::Udp, 100, &[("a", 100)]),
                total("SOCKET_RCVBUFF", Layer::Udp, 10, &[("b", 10)]),
            ],
            ..Default::default()
        };
        let cur = ReasonTotals {
            reasons: vec![
                total("NO_SOCKET", Layer::Udp, 100, &[("a", 100)]),
                total("SOCKET_RCVBUFF", Layer::Udp, 410, &[("b", 400), ("c", 10)]),
                total("NETFILTER_DROP", Layer::Netfilter, 20, &[("d", 20)]),
            ],
            ..Default::default()
        };
        let rates = between(Some(&prev), &cur, 2.0);
        let seen: Vec<(&str, u64, Option<f64>)> = rates
            .iter()
            .map(|r| (r.reason.as_str(), r.count, r.per_sec))
            .collect();
        assert_eq!(
            seen,
            [
                ("SOCKET_RCVBUFF", 400, Some(200.0)),
                ("NETFILTER_DROP", 20, Some(10.0))
            ]
        );
        assert_eq!(rates[0].locations[0].name.as_deref(), Some("b"));
        assert_eq!(rates[0].locations[0].count, 390);
        assert_eq!(rates[0].locations[1].count, 10);
        // A tracer started again: counts from zero, not a huge number.
        let again = between(Some(&cur), &prev, 1.0);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].reason, "SOCKET_RCVBUFF");
        assert_eq!(again[0].count, 10);
    }
}
