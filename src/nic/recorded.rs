//! Driver answers saved with a captured tree (`DIR/nettune/driver.json`),
//! so `--root DIR` sees the NIC the capture saw, and `apply --root DIR`
//! changes it ([`RecordedWriter`]). Format: docs/driver-file.md.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use serde_json::Value;

use crate::base::driver::flow::{NtupleRule, RuleAction};
use crate::base::driver::xdp::XdpState;
use crate::base::driver::{ChannelKind, DriverSetting};
use crate::base::driver::{
    DriverSettings, Ethtool, EthtoolSet, NapiKey, NapiSet, Netdev, NetdevState, Netlink, Qdisc,
    QdiscSet, QdiscSpec, QueueStats, SetError, SteeringSet,
};
use crate::base::fsio::{self, FileError};
use crate::base::{Probe, Root};

/// Bumped when a field changes meaning or is removed.
pub const DRIVER_FILE_VERSION: u32 = 1;

/// Where the driver file lives inside a captured tree.
pub const DRIVER_FILE: &str = "nettune/driver.json";

/// What a driver file is, in errors about one that is not.
const DRIVER_FILE_KIND: &str = "a nettune driver file";

/// The contents of `nettune/driver.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverFile {
    pub schema_version: u32,
    /// By interface name.
    pub interfaces: BTreeMap<String, RecordedInterface>,
}

/// What the driver and rtnetlink said about one interface.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RecordedInterface {
    pub ethtool: DriverSettings,
    pub root_qdisc: Probe<Qdisc>,
    /// The netdev generic-netlink family's answers (queues, NAPIs, qstats).
    pub netdev: NetdevState,
    /// XDP programs attached and the driver's XDP features.
    pub xdp: Probe<XdpState>,
}

impl DriverFile {
    /// The driver file of a captured tree; `None` when the tree has none
    /// (and always for the live host, whose drivers are asked directly).
    pub fn load(root: &Root) -> anyhow::Result<Option<DriverFile>> {
        if root.is_live() {
            return Ok(None);
        }
        let path = root.base().join(DRIVER_FILE);
        let text = match fsio::read_text_bounded(&path, fsio::RECORD_LIMIT, DRIVER_FILE_KIND) {
            Ok(text) => text,
            Err(e) if e.not_found() => return Ok(None),
            Err(FileError::Io { source, .. }) => {
                return Err(source).with_context(|| format!("cannot read {}", path.display()))
            }
            Err(refused) => {
                anyhow::bail!("{refused}; capture the host again with `nettune capture`")
            }
        };
        DriverFile::parse(&text, &path).map(Some)
    }

    fn parse(text: &str, path: &Path) -> anyhow::Result<DriverFile> {
        let file: DriverFile = serde_json::from_str(text).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a nettune driver file: {e}; capture the host again with `nettune capture`",
                path.display()
            )
        })?;
        if file.schema_version != DRIVER_FILE_VERSION {
            anyhow::bail!(
                "{} has schema_version '{}', this nettune reads {DRIVER_FILE_VERSION}; \
                 capture the host again with this nettune",
                path.display(),
                file.schema_version
            );
        }
        Ok(file)
    }

    /// Ask the drivers about each interface (what `capture` saves).
    pub fn record(
        iface_names: &[String],
        ethtool: &dyn Ethtool,
        netlink: &dyn Netlink,
        netdev: &dyn Netdev,
    ) -> DriverFile {
        let interfaces = iface_names
            .iter()
            .map(|name| {
                let recorded = RecordedInterface {
                    ethtool: ethtool.query(name),
                    root_qdisc: netlink.root_qdisc(name),
                    netdev: netdev.state(name),
                    xdp: netlink.xdp(name),
                };
                (name.clone(), recorded)
            })
            .collect();
        DriverFile {
            schema_version: DRIVER_FILE_VERSION,
            interfaces,
        }
    }

    /// Write `dir/nettune/driver.json` (creating `dir/nettune`).
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let path: PathBuf = dir.join(DRIVER_FILE);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// Answers [`Ethtool`] and [`Netlink`] from a driver file; interfaces the
/// file does not hold are unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub file: DriverFile,
}

impl From<DriverFile> for Recorded {
    fn from(file: DriverFile) -> Recorded {
        Recorded { file }
    }
}

impl Ethtool for Recorded {
    fn query(&self, iface: &str) -> DriverSettings {
        self.file
            .interfaces
            .get(iface)
            .map(|i| i.ethtool.clone())
            .unwrap_or_default()
    }
}

impl Netlink for Recorded {
    fn root_qdisc(&self, iface: &str) -> Probe<Qdisc> {
        self.file
            .interfaces
            .get(iface)
            .map(|i| i.root_qdisc.clone())
            .unwrap_or_default()
    }

    fn xdp(&self, iface: &str) -> Probe<XdpState> {
        self.file
            .interfaces
            .get(iface)
            .map(|i| i.xdp.clone())
            .unwrap_or_default()
    }
}

impl Netdev for Recorded {
    fn state(&self, iface: &str) -> NetdevState {
        self.file
            .interfaces
            .get(iface)
            .map(|i| i.netdev.clone())
            .unwrap_or_default()
    }
}

/// Answers from other sources (the live drivers) and keeps every answer,
/// so that what was asked can be written as a driver file: `capture
/// --samples` records, with each snapshot, exactly what the sampler read.
pub struct Recorder<'a> {
    ethtool: &'a dyn Ethtool,
    netlink: &'a dyn Netlink,
    netdev: &'a dyn Netdev,
    file: std::cell::RefCell<DriverFile>,
}

impl<'a> Recorder<'a> {
    pub fn new(
        ethtool: &'a dyn Ethtool,
        netlink: &'a dyn Netlink,
        netdev: &'a dyn Netdev,
    ) -> Recorder<'a> {
        Recorder {
            ethtool,
            netlink,
            netdev,
            file: std::cell::RefCell::new(DriverFile {
                schema_version: DRIVER_FILE_VERSION,
                interfaces: BTreeMap::new(),
            }),
        }
    }

    /// The answers so far; what was never asked is unknown.
    pub fn into_file(self) -> DriverFile {
        self.file.into_inner()
    }

    fn keep(&self, iface: &str, change: impl FnOnce(&mut RecordedInterface)) {
        let mut file = self.file.borrow_mut();
        change(file.interfaces.entry(iface.to_string()).or_default());
    }
}

impl Ethtool for Recorder<'_> {
    fn query(&self, iface: &str) -> DriverSettings {
        let answer = self.ethtool.query(iface);
        self.keep(iface, |i| i.ethtool = answer.clone());
        answer
    }

    fn queue_stats(&self, iface: &str) -> Probe<Vec<QueueStats>> {
        let answer = self.ethtool.queue_stats(iface);
        self.keep(iface, |i| i.ethtool.queue_stats = answer.clone());
        answer
    }
}

impl Netlink for Recorder<'_> {
    fn root_qdisc(&self, iface: &str) -> Probe<Qdisc> {
        let answer = self.netlink.root_qdisc(iface);
        self.keep(iface, |i| i.root_qdisc = answer.clone());
        answer
    }
}

impl Netdev for Recorder<'_> {
    fn state(&self, iface: &str) -> NetdevState {
        let answer = self.netdev.state(iface);
        self.keep(iface, |i| i.netdev = answer.clone());
        answer
    }

    fn qstats(&self, iface: &str) -> Probe<Vec<QueueStats>> {
        let answer = self.netdev.qstats(iface);
        self.keep(iface, |i| i.netdev.qstats = answer.clone());
        answer
    }
}

/// Writes changes into a tree's driver file the way a driver takes them:
/// a group the file records as `"not_supported"` is refused with
/// EOPNOTSUPP, a value above the recorded maximum with EINVAL, an interface
/// the file does not hold with ENODEV. The file is edited in place (its key
/// order and layout kept), so undoing every change gives back the same bytes.
#[derive(Debug, Clone)]
pub struct RecordedWriter {
    base: PathBuf,
    path: PathBuf,
}

/// The handle the kernel gives the first qdisc it numbers itself.
const FIRST_KERNEL_HANDLE: &str = "8001:";

impl RecordedWriter {
    pub fn new(root: &Root) -> RecordedWriter {
        RecordedWriter {
            base: root.base().to_path_buf(),
            path: root.base().join(DRIVER_FILE),
        }
    }

    fn edit(
        &self,
        iface: &str,
        change: impl FnOnce(&mut Value) -> Result<(), SetError>,
    ) -> Result<(), SetError> {
        let failed = |e: &dyn std::fmt::Display| {
            SetError::with_detail(libc::EIO, &format!("{}: {e}", self.path.display()))
        };
        let text = match fsio::read_text_bounded(&self.path, fsio::RECORD_LIMIT, DRIVER_FILE_KIND) {
            Ok(text) => text,
            Err(e) if e.not_found() => {
                return Err(SetError::with_detail(
                    libc::ENODEV,
                    &format!("no driver data: {} does not exist", self.path.display()),
                ))
            }
            Err(FileError::Io { source, .. }) => return Err(failed(&source)),
            Err(refused) => return Err(SetError::with_detail(libc::EIO, &refused.to_string())),
        };
        let mut file: Value = serde_json::from_str(&text).map_err(|e| failed(&e))?;
        let Some(entry) = file
            .get_mut("interfaces")
            .and_then(|all| all.get_mut(iface))
        else {
            return Err(SetError::with_detail(
                libc::ENODEV,
                &format!("interface '{iface}' is not in {}", self.path.display()),
            ));
        };
        change(entry)?;
        let mut out = serde_json::to_string_pretty(&file).map_err(|e| failed(&e))?;
        out.push('\n');
        // A driver file linked out of the tree is never written.
        crate::base::root::ensure_inside(&self.base, &self.path).map_err(|e| failed(&e))?;
        fs::write(&self.path, out).map_err(|e| failed(&e))
    }
}

/// The object at `entry.ethtool.<group>`, or the errno a driver would give.
fn group<'a>(entry: &'a mut Value, name: &str) -> Result<&'a mut Value, SetError> {
    match entry.get_mut("ethtool").and_then(|e| e.get_mut(name)) {
        Some(v) if v.is_object() => Ok(v),
        Some(Value::String(word)) if word == "not_supported" => {
            Err(SetError::from_errno(libc::EOPNOTSUPP))
        }
        _ => Err(SetError::with_detail(
            libc::ENODATA,
            &format!("the driver file does not record '{name}'"),
        )),
    }
}

/// Set `field` of an object to `value`, refusing values above `max_field`.
fn set_bounded(
    object: &mut Value,
    field: &str,
    max_field: &str,
    value: u32,
) -> Result<(), SetError> {
    let max = object.get(max_field).and_then(Value::as_u64);
    if max.is_some_and(|max| u64::from(value) > max) || value == 0 {
        return Err(SetError::from_errno(libc::EINVAL));
    }
    object[field] = Value::from(value);
    Ok(())
}

impl EthtoolSet for RecordedWriter {
    fn set(&self, iface: &str, setting: &DriverSetting) -> Result<(), SetError> {
        self.edit(iface, |entry| match setting {
            DriverSetting::RingRx(n) => set_bounded(group(entry, "rings")?, "rx", "rx_max", *n),
            DriverSetting::RingTx(n) => set_bounded(group(entry, "rings")?, "tx", "tx_max", *n),
            DriverSetting::RxUsecs(n) | DriverSetting::TxUsecs(n) => {
                let (field, adaptive) = match setting {
                    DriverSetting::RxUsecs(_) => ("rx_usecs", "adaptive_rx"),
                    _ => ("tx_usecs", "adaptive_tx"),
                };
                let ice = entry.pointer("/ethtool/info/driver") == Some(&Value::from("ice"));
                let coalesce = group(entry, "coalesce")?;
                // ice refuses a new time while adaptive moderation stays on
                // (ice_set_rc_coalesce: "interrupt throttling cannot be
                // changed if adaptive is enabled", EINVAL): recorded here
                // so that a plan writing them in the wrong order fails on
                // the fixture as on the NIC.
                if ice
                    && coalesce.get(adaptive) == Some(&Value::Bool(true))
                    && coalesce.get(field).and_then(Value::as_u64) != Some(u64::from(*n))
                {
                    return Err(SetError::with_detail(
                        libc::EINVAL,
                        &format!("ice: {field} cannot be changed while {adaptive} is on"),
                    ));
                }
                coalesce[field] = Value::from(*n);
                Ok(())
            }
            DriverSetting::AdaptiveRx(on) | DriverSetting::AdaptiveTx(on) => {
                let field = match setting {
                    DriverSetting::AdaptiveRx(_) => "adaptive_rx",
                    _ => "adaptive_tx",
                };
                group(entry, "coalesce")?[field] = Value::from(*on);
                Ok(())
            }
            DriverSetting::Channels { kind, count } => {
                let field = kind.name();
                let max = format!("max_{field}");
                let channels = group(entry, "channels")?;
                if *kind != ChannelKind::Combined && *count == 0 {
                    channels[field] = Value::from(0);
                    return Ok(());
                }
                set_bounded(channels, field, &max, *count)
            }
            DriverSetting::FlowHash { flow_type, hash } => {
                let slot = group(entry, "rx_flow_hash")?
                    .get_mut(flow_type.as_str())
                    .ok_or_else(|| SetError::from_errno(libc::EOPNOTSUPP))?;
                if !slot.is_object() {
                    return Err(SetError::from_errno(libc::EOPNOTSUPP));
                }
                slot["fields"] = Value::from(hash.fields.clone());
                Ok(())
            }
            DriverSetting::Feature { name, on } => {
                let features = group(entry, "features")?;
                // The file may hold the feature under both spellings.
                let aliases: Vec<&str> = crate::nic::live::LEGACY_FEATURE_NAMES
                    .iter()
                    .filter(|(kernel, legacy)| kernel == name || legacy == name)
                    .flat_map(|(kernel, legacy)| [*kernel, *legacy])
                    .chain([name.as_str()])
                    .collect();
                let mut found = false;
                for alias in aliases {
                    if let Some(feature) = features.get_mut(alias) {
                        if feature.get("changeable") != Some(&Value::Bool(true)) {
                            return Err(SetError::from_errno(libc::EOPNOTSUPP));
                        }
                        feature["active"] = Value::from(*on);
                        found = true;
                    }
                }
                if found {
                    Ok(())
                } else {
                    Err(SetError::from_errno(libc::EOPNOTSUPP))
                }
            }
        })
    }
}

/// `entry.ethtool.<field>`, or the errno a driver would give for it.
fn field<'a>(entry: &'a mut Value, name: &str) -> Result<&'a mut Value, SetError> {
    match entry.get_mut("ethtool").and_then(|e| e.get_mut(name)) {
        Some(Value::String(word)) if word == "not_supported" => {
            Err(SetError::from_errno(libc::EOPNOTSUPP))
        }
        Some(Value::String(_)) | None => Err(SetError::with_detail(
            libc::ENODATA,
            &format!("the driver file does not record '{name}'"),
        )),
        Some(v) => Ok(v),
    }
}

/// The RX rings RSS and rules may name: `rx_rings`, else the channels.
fn ring_count(entry: &Value) -> Option<u64> {
    let ethtool = entry.get("ethtool")?;
    if let Some(rings) = ethtool.get("rx_rings").and_then(Value::as_u64) {
        return Some(rings);
    }
    let channels = ethtool.get("channels")?;
    let count = |k: &str| channels.get(k).and_then(Value::as_u64).unwrap_or(0);
    Some(count("combined") + count("rx"))
}

/// The driver refuses rules while ntuple filters are off (ixgbe does).
fn ntuple_on(entry: &Value) -> bool {
    let feature = entry
        .get("ethtool")
        .and_then(|e| e.get("features"))
        .and_then(|f| f.get("rx-ntuple-filter"));
    feature.is_none_or(|f| f.get("active") == Some(&Value::Bool(true)))
}

impl SteeringSet for RecordedWriter {
    fn set_indirection(&self, iface: &str, table: &[u32]) -> Result<(), SetError> {
        self.edit(iface, |entry| {
            let rings = ring_count(entry);
            let current = field(entry, "rss_indirection")?;
            let size = current.as_array().map_or(0, Vec::len);
            let new: Vec<u32> = if table.is_empty() {
                // The driver's default: entry i is ring i % rings.
                let rings = rings
                    .filter(|r| *r > 0)
                    .ok_or_else(|| SetError::from_errno(libc::EINVAL))?;
                (0..size as u64).map(|i| (i % rings) as u32).collect()
            } else {
                table.to_vec()
            };
            if new.len() != size || rings.is_some_and(|r| new.iter().any(|q| u64::from(*q) >= r)) {
                return Err(SetError::from_errno(libc::EINVAL));
            }
            *current = Value::from(new);
            Ok(())
        })
    }

    fn insert_rule(&self, iface: &str, rule: &NtupleRule) -> Result<(), SetError> {
        self.edit(iface, |entry| {
            if !ntuple_on(entry) {
                return Err(SetError::with_detail(
                    libc::EINVAL,
                    "ntuple filters are off (ethtool -K IFACE ntuple on)",
                ));
            }
            let rings = ring_count(entry);
            if let RuleAction::Queue(q) = rule.action {
                if rings.is_some_and(|r| u64::from(q) >= r) {
                    return Err(SetError::from_errno(libc::EINVAL));
                }
            }
            let table = field(entry, "ntuple")?;
            let size = table.get("size").and_then(Value::as_u64).unwrap_or(0);
            if u64::from(rule.location) >= size {
                return Err(SetError::from_errno(libc::EINVAL));
            }
            let rules = table
                .get_mut("rules")
                .and_then(Value::as_array_mut)
                .ok_or_else(|| SetError::from_errno(libc::ENODATA))?;
            let new = serde_json::to_value(rule).map_err(|_| SetError::from_errno(libc::EINVAL))?;
            let at = |r: &Value| r.get("location").and_then(Value::as_u64).unwrap_or(0);
            rules.retain(|r| at(r) != u64::from(rule.location));
            let pos = rules
                .iter()
                .position(|r| at(r) > u64::from(rule.location))
                .unwrap_or(rules.len());
            rules.insert(pos, new);
            Ok(())
        })
    }

    fn delete_rule(&self, iface: &str, location: u32) -> Result<(), SetError> {
        self.edit(iface, |entry| {
            let rules = field(entry, "ntuple")?
                .get_mut("rules")
                .and_then(Value::as_array_mut)
                .ok_or_else(|| SetError::from_errno(libc::ENODATA))?;
            let before = rules.len();
            rules
                .retain(|r| r.get("location").and_then(Value::as_u64) != Some(u64::from(location)));
            if rules.len() == before {
                return Err(SetError::from_errno(libc::ENOENT));
            }
            Ok(())
        })
    }
}

impl QdiscSet for RecordedWriter {
    fn replace_root(&self, iface: &str, spec: &QdiscSpec) -> Result<(), SetError> {
        self.edit(iface, |entry| {
            entry["root_qdisc"] = serde_json::json!({
                "kind": spec.kind,
                "handle": FIRST_KERNEL_HANDLE,
            });
            Ok(())
        })
    }

    fn reset_root(&self, iface: &str, default: &Qdisc) -> Result<(), SetError> {
        self.edit(iface, |entry| {
            entry["root_qdisc"] = serde_json::json!({
                "kind": default.kind,
                "handle": default.handle,
            });
            Ok(())
        })
    }
}

impl NapiSet for RecordedWriter {
    /// As the kernel takes `napi-set`: refused (EOPNOTSUPP) when the file
    /// records a kernel without it or without this setting, ENOENT when
    /// the queue has no NAPI; otherwise the NAPI serving the queue (found
    /// as [`NetdevState::napi_of_rx`] finds it) gets the value.
    fn set_napi(&self, iface: &str, queue: u32, key: NapiKey, value: u64) -> Result<(), SetError> {
        self.edit(iface, |entry| {
            let state: NetdevState = entry
                .get("netdev")
                .map(|v| serde_json::from_value(v.clone()))
                .transpose()
                .map_err(|e| SetError::with_detail(libc::EIO, &format!("netdev: {e}")))?
                .unwrap_or_default();
            if state.napi_set != Probe::Value(true) {
                return Err(SetError::with_detail(
                    libc::EOPNOTSUPP,
                    "the recorded kernel has no napi-set (Linux 6.13+)",
                ));
            }
            let napi = state
                .napi_of_rx(queue)
                .map_err(|why| SetError::with_detail(libc::ENOENT, &why.reason(iface, queue)))?;
            if key.value_in(napi.napi).is_none() {
                return Err(SetError::with_detail(
                    libc::EOPNOTSUPP,
                    &format!("the recorded kernel does not report {key}"),
                ));
            }
            let id = napi.napi.id;
            let field = match key {
                NapiKey::DeferHardIrqs => "defer_hard_irqs",
                NapiKey::GroFlushTimeout => "gro_flush_timeout_ns",
                NapiKey::IrqSuspendTimeout => "irq_suspend_timeout_ns",
            };
            let slot = entry["netdev"]["napis"]
                .as_array_mut()
                .and_then(|all| {
                    all.iter_mut()
                        .find(|n| n.get("id").and_then(Value::as_u64) == Some(u64::from(id)))
                })
                .ok_or_else(|| SetError::from_errno(libc::ENOENT))?;
            slot[field] = Value::from(value);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::driver::{Channels, Feature, FlowHash, QueueStats};

    /// The example in docs/driver-file.md: a two-port ixgbe host.
    fn documented_example() -> DriverFile {
        let doc = include_str!("../../docs/driver-file.md");
        let start = doc.find("```json\n").expect("json block in the doc") + "```json\n".len();
        let end = start + doc[start..].find("```").expect("end of json block");
        DriverFile::parse(&doc[start..end], Path::new("docs/driver-file.md"))
            .expect("the documented example parses")
    }

    #[test]
    fn ixgbe_example_answers_exactly_what_it_holds() {
        let recorded = Recorded::from(documented_example());
        let eth2 = recorded.query("eth2");
        let info = eth2.info.value().expect("driver info");
        assert_eq!(info.driver, "ixgbe");
        let rings = eth2.rings.value().expect("rings");
        assert_eq!(
            (rings.rx, rings.rx_max, rings.tx, rings.tx_max),
            (512, 4096, 512, 4096)
        );
        let coalesce = eth2.coalesce.value().expect("coalesce");
        assert_eq!(coalesce.rx_usecs, 1);
        assert!(!coalesce.adaptive_rx);
        let channels = eth2.channels.value().expect("channels");
        assert_eq!((channels.combined, channels.max_combined), (8, 63));
        let rss = eth2.rss_indirection.value().expect("rss");
        assert_eq!(rss.len(), 128);
        assert!(rss.iter().all(|&q| q < 8));
        assert_eq!(rss.iter().filter(|&&q| q == 7).count(), 16);
        let udp4 = eth2.rx_flow_hash["udp4"].value().expect("udp4 hash");
        assert_eq!(udp4.fields, ["ip_src", "ip_dst"]);
        assert!(udp4.ips_only());
        let tcp4 = eth2.rx_flow_hash["tcp4"].value().expect("tcp4 hash");
        assert!(!tcp4.ips_only());
        let features = eth2.features.value().expect("features");
        assert_eq!(
            features["rx-lro"],
            Feature {
                active: false,
                changeable: true
            }
        );
        assert_eq!(features["generic-receive-offload"], features["rx-gro"]);
        let queues = eth2.queue_stats.value().expect("queue stats");
        assert_eq!(queues.iter().filter(|q| q.direction == "rx").count(), 8);
        assert_eq!(
            recorded.root_qdisc("eth2"),
            Probe::Value(Qdisc {
                kind: "mq".to_string(),
                handle: "0:".to_string()
            })
        );
        // eth3 holds only what the driver said it lacks; lo holds nothing.
        let eth3 = recorded.query("eth3");
        assert_eq!(eth3.rings, Probe::NOT_SUPPORTED);
        assert_eq!(eth3.channels, Probe::UNKNOWN);
        assert_eq!(recorded.root_qdisc("eth3"), Probe::UNKNOWN);
        assert_eq!(recorded.query("eth9"), DriverSettings::default());
        assert_eq!(recorded.root_qdisc("eth9"), Probe::UNKNOWN);
    }

    /// The netdev example in docs/driver-file.md (its second JSON block).
    #[test]
    fn the_documented_netdev_entry_parses_and_finds_the_queues_napi() {
        let doc = include_str!("../../docs/driver-file.md");
        let blocks: Vec<&str> = doc.split("```json\n").skip(1).collect();
        let block = blocks[1].split("```").next().expect("end of block");
        let state: NetdevState = serde_json::from_str(block).expect("the example parses");
        let rx0 = state.napi_of_rx(0).expect("rx-0 has a NAPI");
        assert_eq!((rx0.napi.id, rx0.by_position), (257, false));
        assert_eq!(rx0.napi.irq, None);
        assert_eq!(state.napi_set, Probe::Value(true));
        let qstats = state.qstats.value().expect("qstats");
        assert_eq!(qstats[0].counters["rx-packets"], 912_345);
    }

    #[test]
    fn napi_changes_go_to_the_napi_of_the_queue_or_are_refused() {
        let (dir, root) = fixture_copy("vm-2cpu-virtio");
        let path = dir.path().join(DRIVER_FILE);
        let before = fs::read(&path).expect("read");
        let writer = RecordedWriter::new(&root);
        writer
            .set_napi("eth0", 0, NapiKey::GroFlushTimeout, 50_000)
            .expect("napi-set");
        let state =
            Recorded::from(DriverFile::load(&root).expect("load").expect("file")).state("eth0");
        let napi = state.napi_of_rx(0).expect("rx-0").napi;
        assert_eq!(napi.gro_flush_timeout_ns, Some(50_000));
        writer
            .set_napi("eth0", 0, NapiKey::GroFlushTimeout, 0)
            .expect("undo");
        assert_eq!(fs::read(&path).expect("read"), before);
        let err = writer
            .set_napi("eth0", 3, NapiKey::DeferHardIrqs, 2)
            .expect_err("no rx-3");
        assert_eq!(err.errno, libc::ENOENT);
        let err = writer
            .set_napi("lo", 0, NapiKey::DeferHardIrqs, 2)
            .expect_err("lo has no NAPI");
        assert_eq!(err.errno, libc::ENOENT);
        // A 6.1 capture: no netdev family, refused as the kernel would.
        let (_dir, old) = fixture_copy("two-socket-nic-node1");
        let err = RecordedWriter::new(&old)
            .set_napi("ens1f0", 0, NapiKey::DeferHardIrqs, 2)
            .expect_err("no napi-set");
        assert_eq!(err.errno, libc::EOPNOTSUPP);
        assert!(err.message.contains("napi-set"), "{}", err.message);
    }

    struct Fake;

    impl Ethtool for Fake {
        fn query(&self, iface: &str) -> DriverSettings {
            let mut rx_flow_hash = BTreeMap::new();
            rx_flow_hash.insert(
                "udp4".to_string(),
                Probe::Value(FlowHash {
                    fields: vec!["ip_src".to_string(), "ip_dst".to_string()],
                }),
            );
            rx_flow_hash.insert("tcp6".to_string(), Probe::NOT_SUPPORTED);
            DriverSettings {
                channels: Probe::Value(Channels {
                    rx: 0,
                    tx: 0,
                    other: 0,
                    combined: iface.len() as u32,
                    max_rx: 0,
                    max_tx: 0,
                    max_other: 0,
                    max_combined: 8,
                }),
                rings: Probe::NOT_SUPPORTED,
                rx_flow_hash,
                queue_stats: Probe::Value(vec![QueueStats {
                    direction: "rx".to_string(),
                    index: 0,
                    counters: BTreeMap::from([("packets".to_string(), u64::MAX)]),
                }]),
                ..DriverSettings::default()
            }
        }
    }

    impl Netlink for Fake {
        fn root_qdisc(&self, _iface: &str) -> Probe<Qdisc> {
            Probe::Value(Qdisc {
                kind: "htb".to_string(),
                handle: "8001:".to_string(),
            })
        }
    }

    impl Netdev for Fake {
        fn state(&self, _iface: &str) -> NetdevState {
            NetdevState {
                napi_set: Probe::Value(true),
                qstats: Probe::NOT_SUPPORTED,
                ..NetdevState::default()
            }
        }
    }

    #[test]
    fn record_write_load_round_trip() {
        let names = vec!["eth0".to_string(), "veth12".to_string()];
        let file = DriverFile::record(&names, &Fake, &Fake, &Fake);
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir(dir.path().join("sys")).expect("mkdir sys");
        file.write(dir.path()).expect("write");
        let root = Root::at(dir.path()).expect("root");
        let loaded = DriverFile::load(&root)
            .expect("load")
            .expect("file present");
        assert_eq!(loaded, file);
        let recorded = Recorded::from(loaded);
        assert_eq!(recorded.query("veth12"), Fake.query("veth12"));
        assert_eq!(recorded.root_qdisc("eth0"), Fake.root_qdisc("eth0"));
        assert_eq!(recorded.state("eth0"), Fake.state("eth0"));
    }

    #[test]
    fn absent_file_is_none_and_garbage_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir(dir.path().join("sys")).expect("mkdir sys");
        let root = Root::at(dir.path()).expect("root");
        assert_eq!(DriverFile::load(&root).expect("load"), None);

        fs::create_dir(dir.path().join("nettune")).expect("mkdir");
        let path = dir.path().join(DRIVER_FILE);
        fs::write(
            &path,
            "{\"schema_version\": 1, \"interfaces\": {\"eth0\": 3}}",
        )
        .expect("write");
        let err = DriverFile::load(&root).expect_err("garbled");
        let msg = format!("{err:#}");
        assert!(msg.contains("nettune/driver.json"), "{msg}");
        assert!(msg.contains("invalid type"), "{msg}");

        fs::write(&path, "{\"schema_version\": 7, \"interfaces\": {}}").expect("write");
        let msg = format!("{:#}", DriverFile::load(&root).expect_err("future version"));
        assert!(msg.contains("schema_version '7'"), "{msg}");
    }

    fn fixture_copy(name: &str) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hosts")
            .join(name)
            .join(DRIVER_FILE);
        fs::create_dir_all(dir.path().join("sys")).expect("mkdir sys");
        fs::create_dir_all(dir.path().join("nettune")).expect("mkdir nettune");
        fs::copy(src, dir.path().join(DRIVER_FILE)).expect("copy driver file");
        let root = Root::at(dir.path()).expect("root");
        (dir, root)
    }

    #[test]
    fn writer_changes_a_field_and_undoing_gives_the_same_bytes() {
        let (dir, root) = fixture_copy("two-socket-smt-8q");
        let path = dir.path().join(DRIVER_FILE);
        let before = fs::read(&path).expect("read");
        let writer = RecordedWriter::new(&root);
        writer
            .set("eth0", &DriverSetting::RingRx(4096))
            .expect("rings within max");
        writer
            .set("eth0", &DriverSetting::AdaptiveRx(true))
            .expect("coalesce");
        let eth0 =
            Recorded::from(DriverFile::load(&root).expect("load").expect("file")).query("eth0");
        let rings = eth0.rings.value().expect("rings");
        assert_eq!((rings.rx, rings.tx), (4096, 512));
        assert!(eth0.coalesce.value().expect("coalesce").adaptive_rx);
        writer
            .set("eth0", &DriverSetting::RingRx(512))
            .expect("undo rings");
        writer
            .set("eth0", &DriverSetting::AdaptiveRx(false))
            .expect("undo coalesce");
        assert_eq!(fs::read(&path).expect("read"), before);
    }

    #[test]
    fn ice_refuses_a_coalescing_time_until_adaptive_moderation_is_off() {
        let (_dir, root) = fixture_copy("one-socket-ice-16q");
        let writer = RecordedWriter::new(&root);
        let err = writer
            .set("ens801f0", &DriverSetting::RxUsecs(8))
            .expect_err("adaptive-rx is on in the capture");
        assert_eq!(err.errno, libc::EINVAL, "{err:?}");
        // The time it already has is accepted, as ice compares with it.
        writer
            .set("ens801f0", &DriverSetting::RxUsecs(50))
            .expect("unchanged time");
        writer
            .set("ens801f0", &DriverSetting::AdaptiveRx(false))
            .expect("adaptive off");
        writer
            .set("ens801f0", &DriverSetting::RxUsecs(8))
            .expect("a time once adaptive is off");
        // tx has its own adaptive flag, still on.
        assert!(writer.set("ens801f0", &DriverSetting::TxUsecs(8)).is_err());
    }

    #[test]
    fn writer_refuses_what_the_driver_would() {
        let (_dir, root) = fixture_copy("vm-2cpu-virtio");
        let writer = RecordedWriter::new(&root);
        let err = writer
            .set("eth0", &DriverSetting::RingRx(256))
            .expect_err("virtio has no rings");
        assert_eq!(err.errno, libc::EOPNOTSUPP);
        let err = writer
            .set(
                "eth0",
                &DriverSetting::Channels {
                    kind: ChannelKind::Combined,
                    count: 2,
                },
            )
            .expect_err("max_combined is 1");
        assert_eq!(err.errno, libc::EINVAL);
        let err = writer
            .set("eth9", &DriverSetting::RingRx(256))
            .expect_err("no such interface");
        assert_eq!(err.errno, libc::ENODEV);
        let err = writer
            .set(
                "eth0",
                &DriverSetting::Feature {
                    name: "receive-hashing".to_string(),
                    on: true,
                },
            )
            .expect_err("fixed feature");
        assert_eq!(err.errno, libc::EOPNOTSUPP);
    }
}
