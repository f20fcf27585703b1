//! Driver settings (the kernel's ethtool interface) and link-level netlink
//! (qdiscs), each behind one small trait so that a recorded answer can stand
//! in for a driver this machine lacks.
//!
//! - [`Ethtool`]: channels, rings, coalescing, features, RSS, flow hash, stats.
//! - [`Netlink`]: the root qdisc of an interface.
//!
//! Implementations: `live` talks to the running kernel; `recorded` answers
//! from the `nettune/driver.json` file of a captured tree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::host::Probe;

pub mod live;
pub mod recorded;

/// Read driver settings of one interface. Never fails: what a driver does
/// not support is `Probe::NOT_SUPPORTED` field by field.
pub trait Ethtool {
    fn query(&self, iface: &str) -> DriverSettings;
}

/// Read link-level state over rtnetlink.
pub trait Netlink {
    fn root_qdisc(&self, iface: &str) -> Probe<Qdisc>;
}

/// Everything the ethtool interface tells about one interface.
/// Fields missing from a recorded file read as unknown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DriverSettings {
    pub info: Probe<DriverInfo>,
    pub channels: Probe<Channels>,
    pub rings: Probe<Rings>,
    pub coalesce: Probe<Coalesce>,
    /// Offload features by the kernel's name (`rx-gro`, `rx-gro-hw`,
    /// `rx-lro`, `rx-ntuple-filter`, `rx-hashing`, ...). Features that
    /// `ethtool -k` shows under an older name are also listed under that
    /// name: `generic-receive-offload` (= `rx-gro`), `large-receive-offload`,
    /// `ntuple-filters`, `receive-hashing`, `rx-checksumming`,
    /// `generic-segmentation-offload`, `rx-vlan-offload`, `tx-vlan-offload`.
    pub features: Probe<BTreeMap<String, Feature>>,
    /// RSS indirection table: entry i names the RX queue for hash bucket i.
    pub rss_indirection: Probe<Vec<u32>>,
    /// rx-flow-hash fields by flow type: `tcp4`, `udp4`, `tcp6`, `udp6`
    /// (a live query always names all four).
    pub rx_flow_hash: BTreeMap<String, Probe<FlowHash>>,
    /// Per-queue counters from the driver's statistics (ethtool -S), rx
    /// queues then tx queues, each by index. Not supported when the driver
    /// has no statistics or none of them per queue.
    pub queue_stats: Probe<Vec<QueueStats>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverInfo {
    pub driver: String,
    pub version: String,
    pub firmware_version: String,
    pub bus_info: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channels {
    pub rx: u32,
    pub tx: u32,
    pub other: u32,
    pub combined: u32,
    pub max_rx: u32,
    pub max_tx: u32,
    pub max_other: u32,
    pub max_combined: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rings {
    pub rx: u32,
    pub rx_max: u32,
    pub rx_mini: u32,
    pub rx_mini_max: u32,
    pub rx_jumbo: u32,
    pub rx_jumbo_max: u32,
    pub tx: u32,
    pub tx_max: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coalesce {
    pub rx_usecs: u32,
    pub rx_frames: u32,
    pub tx_usecs: u32,
    pub tx_frames: u32,
    pub adaptive_rx: bool,
    pub adaptive_tx: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feature {
    /// On now.
    pub active: bool,
    /// The driver lets it be changed.
    pub changeable: bool,
}

/// Which header fields a flow type's RSS hash covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowHash {
    /// Field names: `l2_dst`, `vlan`, `l3_proto`, `ip_src`, `ip_dst`,
    /// `l4_src_port`, `l4_dst_port`; `discard` when the NIC drops the flow
    /// type. Empty: the NIC does not hash this flow type (ethtool: "None").
    pub fields: Vec<String>,
}

impl FlowHash {
    /// True when the hash uses addresses only: all flows between two hosts
    /// land on one queue (REFERENCE section 3).
    pub fn ips_only(&self) -> bool {
        let has = |f: &str| self.fields.iter().any(|x| x == f);
        !has("l4_src_port") && !has("l4_dst_port")
    }
}

/// Counters of one driver queue, as the driver names them without the
/// queue prefix (`packets`, `bytes`, `drops`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    /// `rx` or `tx`.
    pub direction: String,
    pub index: u32,
    pub counters: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Qdisc {
    pub kind: String,
    /// `8001:` style handle.
    pub handle: String,
}

/// Answers "unknown" to everything: an offline tree without driver data.
pub struct NoDriverData;

impl Ethtool for NoDriverData {
    fn query(&self, _iface: &str) -> DriverSettings {
        DriverSettings::default()
    }
}

impl Netlink for NoDriverData {
    fn root_qdisc(&self, _iface: &str) -> Probe<Qdisc> {
        Probe::UNKNOWN
    }
}
