//! What drivers and link-level netlink answer, as plain data, and the
//! small traits that answer it: [`Ethtool`] (channels, rings, coalescing,
//! features, RSS, flow hash, per-queue statistics), [`Netlink`] (the root
//! qdisc), [`Netdev`] (queues, NAPIs and qstats of the netdev netlink
//! family), [`EthtoolSet`], [`QdiscSet`] and [`NapiSet`] (what `apply` and
//! `rollback` write). The implementations live in `crate::nic` (the running kernel, or
//! the recorded `nettune/driver.json` of a captured tree); everything that
//! reads or judges driver state needs only this vocabulary.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::Probe;

pub mod flow;
pub mod netdev;
pub mod setting;
pub mod xdp;

pub use netdev::{NapiKey, NapiSet, Netdev, NetdevState};
pub use setting::{gro_as_one, ChannelKind, DriverKey, DriverSetting, GRO_NAMES};

/// Read driver settings of one interface. Never fails: what a driver does
/// not support is `Probe::NOT_SUPPORTED` field by field.
pub trait Ethtool {
    fn query(&self, iface: &str) -> DriverSettings;

    /// Only the per-queue counters ([`DriverSettings::queue_stats`]): what
    /// `monitor` asks every interval. An implementation that can ask the
    /// driver for less than a whole `query` overrides it.
    fn queue_stats(&self, iface: &str) -> Probe<Vec<QueueStats>> {
        self.query(iface).queue_stats
    }
}

/// Read link-level state over rtnetlink.
pub trait Netlink {
    fn root_qdisc(&self, iface: &str) -> Probe<Qdisc>;
    /// The XDP programs attached and the driver's XDP features.
    fn xdp(&self, _iface: &str) -> Probe<xdp::XdpState> {
        Probe::UNKNOWN
    }
}

/// Change one driver setting, as `ethtool -G/-C/-N/-L/-K` does: the other
/// fields of the same group keep their current values.
pub trait EthtoolSet {
    fn set(&self, iface: &str, setting: &DriverSetting) -> Result<(), SetError>;
}

/// Steer flows to RX queues, as `ethtool -X` and `ethtool -N` do.
pub trait SteeringSet {
    /// Write the whole RSS indirection table (ETHTOOL_SRXFHINDIR).
    fn set_indirection(&self, iface: &str, table: &[u32]) -> Result<(), SetError>;
    /// Insert an ntuple rule at its location (ETHTOOL_SRXCLSRLINS).
    fn insert_rule(&self, iface: &str, rule: &flow::NtupleRule) -> Result<(), SetError>;
    /// Delete the rule at `location` (ETHTOOL_SRXCLSRLDEL).
    fn delete_rule(&self, iface: &str, location: u32) -> Result<(), SetError>;
}

/// Change the root qdisc of an interface.
pub trait QdiscSet {
    /// `tc qdisc replace dev IFACE root KIND [maxrate RATE]`.
    fn replace_root(&self, iface: &str, spec: &QdiscSpec) -> Result<(), SetError>;
    /// `tc qdisc del dev IFACE root`: the kernel attaches its default root
    /// qdisc again. `default` is the one it had (a recorded file cannot know
    /// what the kernel would pick, so the caller names it).
    fn reset_root(&self, iface: &str, default: &Qdisc) -> Result<(), SetError>;
}

/// A root qdisc to install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdiscSpec {
    pub kind: String,
    /// fq's `maxrate` (TCA_FQ_FLOW_MAX_RATE) in bytes per second.
    pub maxrate_bytes: Option<u32>,
}

impl QdiscSpec {
    /// `fq` or `fq maxrate 8gbit`: the `to` of a root qdisc change.
    pub fn parse(text: &str) -> Result<QdiscSpec, String> {
        // A kind as the kernel names them (IFNAMSIZ, so at most 15).
        let kind_name = |k: &str| {
            (1..16).contains(&k.len())
                && k.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        // Longer than any such text: not parsed (nor echoed whole).
        let words: Vec<&str> = if text.len() <= 64 {
            text.split(' ').collect()
        } else {
            Vec::new()
        };
        match words[..] {
            [kind] if kind_name(kind) => Ok(QdiscSpec {
                kind: kind.to_string(),
                maxrate_bytes: None,
            }),
            [kind, "maxrate", rate] if kind_name(kind) => {
                let bits = crate::base::units::parse_rate(rate).map_err(|e| format!("{e:#}"))?;
                let bytes = u32::try_from(bits / 8)
                    .map_err(|_| format!("maxrate '{rate}' is above fq's 32-bit limit"))?;
                Ok(QdiscSpec {
                    kind: kind.to_string(),
                    maxrate_bytes: Some(bytes),
                })
            }
            _ => Err(format!(
                "{} is not a qdisc nettune installs (KIND, or KIND maxrate RATE)",
                crate::base::text::excerpt(text)
            )),
        }
    }
}

/// A refused or failed change: the errno (kept so that callers can tell
/// "the kernel will not do this" from a failure) and the kernel's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SetError {
    pub errno: i32,
    pub message: String,
}

impl SetError {
    pub fn from_errno(errno: i32) -> SetError {
        SetError {
            errno,
            message: std::io::Error::from_raw_os_error(errno).to_string(),
        }
    }

    /// With the kernel's own explanation (netlink extended ack).
    pub fn with_detail(errno: i32, detail: &str) -> SetError {
        let mut err = SetError::from_errno(errno);
        if !detail.is_empty() {
            err.message = format!("{} ({})", detail.trim_end_matches('.'), err.message);
        }
        err
    }
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
    /// RX rings RSS spreads over (ETHTOOL_GRXRINGS): the weights of
    /// `ethtool -X IFACE weight ...`, one per ring.
    pub rx_rings: Probe<u32>,
    /// The ntuple rule table (`ethtool -n IFACE`).
    pub ntuple: Probe<flow::NtupleTable>,
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
    /// land on one queue ("How to receive a million packets per second").
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

impl Netdev for NoDriverData {
    fn state(&self, _iface: &str) -> NetdevState {
        NetdevState::default()
    }
}
