//! What the kernel's `netdev` generic-netlink family tells about an
//! interface (Documentation/netlink/specs/netdev.yaml): which NAPI instance
//! serves each queue (`queue-get`, Linux 6.8), each NAPI's IRQ, thread and
//! settings (`napi-get`, 6.8; the settings 6.13), and the standard
//! per-queue counters (`qstats-get`, 6.9). [`Netdev`] reads it, [`NapiSet`]
//! changes a NAPI's settings (`napi-set`, 6.13).
//!
//! NAPI ids are not stable: veth creates its NAPIs when GRO or XDP is
//! switched on and frees them when both are off, and a driver that
//! rebuilds its queues (a channel change, a reset) may number them anew.
//! So changes name a queue, never a NAPI id: [`NapiSet::set_napi`] takes
//! (interface, RX queue) and finds the NAPI serving it at the time of the
//! write.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{QueueStats, SetError};
use crate::base::Probe;

/// One queue as `queue-get` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetdevQueue {
    /// `rx` or `tx`.
    pub direction: String,
    pub index: u32,
    /// The NAPI instance serving it; `None` when the driver does not say
    /// (it does not link queues to NAPIs, or the queue has none: veth
    /// without GRO or XDP).
    pub napi_id: Option<u32>,
}

/// One NAPI instance as `napi-get` reports it. A field the kernel does not
/// report (an older kernel) is `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Napi {
    pub id: u32,
    /// Its interrupt (none for software devices such as veth).
    pub irq: Option<u32>,
    /// The kernel thread polling it in threaded mode.
    pub thread_pid: Option<u32>,
    /// Empty polls before the device IRQ is re-armed (6.13).
    pub defer_hard_irqs: Option<u32>,
    /// The NAPI watchdog timer in nanoseconds; it also holds GRO packets
    /// back until it fires (6.13).
    pub gro_flush_timeout_ns: Option<u64>,
    /// How long IRQs stay suspended while an application's epoll busy poll
    /// finds events (6.13).
    pub irq_suspend_timeout_ns: Option<u64>,
    /// Threaded polling of this NAPI alone (6.17).
    pub threaded: Option<bool>,
}

/// An interface's entry of the `netdev` family.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NetdevState {
    /// `queue-get`: every RX and TX queue and its NAPI.
    pub queues: Probe<Vec<NetdevQueue>>,
    /// `napi-get`: the interface's NAPI instances.
    pub napis: Probe<Vec<Napi>>,
    /// `qstats-get` per queue: counters by the spec's names (`rx-packets`,
    /// `rx-bytes`, `rx-alloc-fail`, `rx-hw-drops`, `tx-packets`, ...).
    pub qstats: Probe<Vec<QueueStats>>,
    /// The kernel takes `napi-set` (6.13): false when the family lacks it.
    pub napi_set: Probe<bool>,
}

impl NetdevState {
    /// Each of `queues` (RX queue indexes) with its NAPI or why it has
    /// none, leaving out a queue whose NAPI an earlier one already serves:
    /// a NAPI is changed once, through the first RX queue it serves.
    pub fn first_rx_of_each_napi(
        &self,
        queues: impl IntoIterator<Item = u32>,
    ) -> Vec<(u32, Result<&Napi, NoNapi>)> {
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for queue in queues {
            match self.napi_of_rx(queue) {
                Ok(rx) if seen.contains(&rx.napi.id) => {}
                Ok(rx) => {
                    seen.push(rx.napi.id);
                    out.push((queue, Ok(rx.napi)));
                }
                Err(no) => out.push((queue, Err(no))),
            }
        }
        out
    }

    /// The NAPI serving RX queue `queue`, or why there is none.
    ///
    /// Drivers that link queues to NAPIs (`netif_queue_set_napi`: mlx5,
    /// ice, bnxt, virtio_net, ...) name it in queue-get. veth does not
    /// (Linux 6.18): it creates one NAPI per RX queue, in queue order, when
    /// GRO or XDP is switched on. So when no queue of the device names a
    /// NAPI and the device has exactly one NAPI per RX queue, the i-th
    /// NAPI in id order serves RX queue i (`by_position`).
    pub fn napi_of_rx(&self, queue: u32) -> Result<RxNapi<'_>, NoNapi> {
        let (queues, napis) = match (&self.queues, &self.napis) {
            (Probe::Value(q), Probe::Value(n)) => (q, n),
            (Probe::Missing(m), _) | (_, Probe::Missing(m)) => return Err(NoNapi::Unknown(*m)),
        };
        let rx: Vec<&NetdevQueue> = queues.iter().filter(|q| q.direction == "rx").collect();
        let Some(entry) = rx.iter().find(|q| q.index == queue) else {
            return Err(NoNapi::NoQueue);
        };
        if let Some(id) = entry.napi_id {
            return napis
                .iter()
                .find(|n| n.id == id)
                .map(|napi| RxNapi {
                    napi,
                    by_position: false,
                })
                .ok_or(NoNapi::NotListed);
        }
        if napis.is_empty() {
            return Err(NoNapi::NoneNow);
        }
        let none_linked = queues.iter().all(|q| q.napi_id.is_none());
        if !none_linked || napis.len() != rx.len() {
            return Err(NoNapi::NotLinked);
        }
        let mut ids: Vec<&Napi> = napis.iter().collect();
        ids.sort_by_key(|n| n.id);
        let mut indices: Vec<u32> = rx.iter().map(|q| q.index).collect();
        indices.sort_unstable();
        let rank = indices
            .iter()
            .position(|&i| i == queue)
            .ok_or(NoNapi::NoQueue)?;
        Ok(RxNapi {
            napi: ids[rank],
            by_position: true,
        })
    }
}

/// The NAPI of an RX queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxNapi<'a> {
    pub napi: &'a Napi,
    /// Found by position (one NAPI per RX queue, none linked), not named
    /// by queue-get.
    pub by_position: bool,
}

/// Why an RX queue has no NAPI to show or change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoNapi {
    /// queue-get or napi-get could not say (kernel without them, no data).
    Unknown(crate::base::Missing),
    /// queue-get does not list this queue.
    NoQueue,
    /// The device has no NAPI instance now (veth with GRO and XDP off).
    NoneNow,
    /// The driver does not link this queue to a NAPI, and the NAPIs cannot
    /// be matched to queues by position.
    NotLinked,
    /// Its NAPI id is not among napi-get's answers (it changed between the
    /// two calls).
    NotListed,
}

impl NoNapi {
    /// Why, for people, about RX queue `queue` of `iface`.
    pub fn reason(self, iface: &str, queue: u32) -> String {
        match self {
            NoNapi::Unknown(crate::base::Missing::NotSupported) => {
                "this kernel has no netdev netlink queue-get/napi-get (Linux 6.8+)".to_string()
            }
            NoNapi::Unknown(_) => {
                "unknown: no netdev netlink data (a capture without it, or the query failed)"
                    .to_string()
            }
            NoNapi::NoQueue => {
                format!("the netdev family does not list rx queue {queue} of {iface}")
            }
            NoNapi::NoneNow => format!(
                "{iface} has no NAPI instance now (veth has NAPI only with GRO or XDP on: \
                 ethtool -K {iface} gro on)"
            ),
            NoNapi::NotLinked => format!(
                "the driver of {iface} does not say which NAPI serves rx queue {queue} \
                 (netdev queue-get names none)"
            ),
            NoNapi::NotListed => format!(
                "the NAPI of rx queue {queue} of {iface} changed while it was read; try again"
            ),
        }
    }
}

/// One per-NAPI setting `napi-set` changes, by its netlink name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NapiKey {
    DeferHardIrqs,
    GroFlushTimeout,
    IrqSuspendTimeout,
}

impl NapiKey {
    pub const ALL: [NapiKey; 3] = [
        NapiKey::DeferHardIrqs,
        NapiKey::GroFlushTimeout,
        NapiKey::IrqSuspendTimeout,
    ];

    /// The attribute's name in the netdev spec (`ynl` takes it).
    pub fn name(self) -> &'static str {
        match self {
            NapiKey::DeferHardIrqs => "defer-hard-irqs",
            NapiKey::GroFlushTimeout => "gro-flush-timeout",
            NapiKey::IrqSuspendTimeout => "irq-suspend-timeout",
        }
    }

    pub fn parse(name: &str) -> Option<NapiKey> {
        NapiKey::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Its value in `napi`, as text; `None` when the kernel does not report it.
    pub fn value_in(self, napi: &Napi) -> Option<u64> {
        match self {
            NapiKey::DeferHardIrqs => napi.defer_hard_irqs.map(u64::from),
            NapiKey::GroFlushTimeout => napi.gro_flush_timeout_ns,
            NapiKey::IrqSuspendTimeout => napi.irq_suspend_timeout_ns,
        }
    }

    /// The largest value the kernel takes (defer-hard-irqs is an s32 in
    /// the kernel's policy; the timeouts are nanoseconds in a u64).
    pub fn max(self) -> u64 {
        match self {
            NapiKey::DeferHardIrqs => i32::MAX as u64,
            NapiKey::GroFlushTimeout | NapiKey::IrqSuspendTimeout => u64::MAX,
        }
    }

    /// The unit of its value, for people.
    pub fn unit(self) -> &'static str {
        match self {
            NapiKey::DeferHardIrqs => "polls",
            NapiKey::GroFlushTimeout | NapiKey::IrqSuspendTimeout => "ns",
        }
    }
}

impl fmt::Display for NapiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Read an interface's netdev entry. Never fails: what the kernel or the
/// driver does not support is `Probe::NOT_SUPPORTED` field by field.
pub trait Netdev {
    fn state(&self, iface: &str) -> NetdevState;

    /// Only the per-queue counters: what a live view samples every second
    /// (one dump, no queue or NAPI lookups).
    fn qstats(&self, iface: &str) -> Probe<Vec<QueueStats>> {
        self.state(iface).qstats
    }
}

/// Change one setting of the NAPI that serves RX queue `queue` now.
pub trait NapiSet {
    fn set_napi(&self, iface: &str, queue: u32, key: NapiKey, value: u64) -> Result<(), SetError>;
}

/// A whole-number value text of a NAPI setting, within its bounds.
pub fn parse_napi_value(key: NapiKey, text: &str) -> Result<u64, String> {
    let value: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{key} '{}' is not a whole number", text.trim()))?;
    if value > key.max() {
        return Err(format!(
            "{key} '{value}' is above the kernel's limit of {}",
            key.max()
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn napi(id: u32) -> Napi {
        Napi {
            id,
            irq: None,
            thread_pid: None,
            defer_hard_irqs: Some(0),
            gro_flush_timeout_ns: Some(0),
            irq_suspend_timeout_ns: None,
            threaded: None,
        }
    }

    #[test]
    fn a_queue_finds_its_napi_or_says_why_not() {
        let state = NetdevState {
            queues: Probe::Value(vec![
                NetdevQueue {
                    direction: "rx".to_string(),
                    index: 0,
                    napi_id: Some(8193),
                },
                NetdevQueue {
                    direction: "rx".to_string(),
                    index: 1,
                    napi_id: None,
                },
                NetdevQueue {
                    direction: "rx".to_string(),
                    index: 2,
                    napi_id: Some(9),
                },
            ]),
            napis: Probe::Value(vec![napi(8193)]),
            ..NetdevState::default()
        };
        assert_eq!(state.napi_of_rx(0).map(|n| n.napi.id), Ok(8193));
        assert_eq!(state.napi_of_rx(1), Err(NoNapi::NotLinked));
        assert_eq!(state.napi_of_rx(2), Err(NoNapi::NotListed));
        assert_eq!(state.napi_of_rx(7), Err(NoNapi::NoQueue));
        assert!(matches!(
            NetdevState::default().napi_of_rx(0),
            Err(NoNapi::Unknown(_))
        ));
    }

    /// veth on 6.18 with GRO on: two RX queues, two NAPIs, none linked.
    #[test]
    fn unlinked_veth_queues_take_their_napi_by_position() {
        let queue = |direction: &str, index| NetdevQueue {
            direction: direction.to_string(),
            index,
            napi_id: None,
        };
        let mut state = NetdevState {
            queues: Probe::Value(vec![
                queue("rx", 0),
                queue("rx", 1),
                queue("tx", 0),
                queue("tx", 1),
            ]),
            // napi-get dumps the newest first.
            napis: Probe::Value(vec![napi(281), napi(280)]),
            ..NetdevState::default()
        };
        let rx1 = state.napi_of_rx(1).expect("rx-1");
        assert_eq!((rx1.napi.id, rx1.by_position), (281, true));
        assert_eq!(state.napi_of_rx(0).map(|n| n.napi.id), Ok(280));
        // GRO off: no NAPI at all.
        state.napis = Probe::Value(Vec::new());
        assert_eq!(state.napi_of_rx(0), Err(NoNapi::NoneNow));
        assert!(NoNapi::NoneNow.reason("veth0", 0).contains("gro on"));
        // Three NAPIs for two queues: no guess.
        state.napis = Probe::Value(vec![napi(1), napi(2), napi(3)]);
        assert_eq!(state.napi_of_rx(0), Err(NoNapi::NotLinked));
    }

    #[test]
    fn keys_and_values_are_checked() {
        for key in NapiKey::ALL {
            assert_eq!(NapiKey::parse(key.name()), Some(key));
        }
        assert_eq!(NapiKey::parse("threaded"), None);
        assert_eq!(parse_napi_value(NapiKey::DeferHardIrqs, "2\n"), Ok(2));
        assert!(parse_napi_value(NapiKey::DeferHardIrqs, "2147483648")
            .expect_err("above s32")
            .contains("limit"));
        assert!(parse_napi_value(NapiKey::GroFlushTimeout, "-1").is_err());
        assert_eq!(
            NapiKey::IrqSuspendTimeout.value_in(&napi(1)),
            None,
            "not reported by a 6.8-6.12 kernel"
        );
    }
}
