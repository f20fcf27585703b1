//! The `host` block of `inspect --json` and `doctor --json`: what a fleet
//! report groups hosts by (name, a hash of the machine id, the network
//! namespace looked at, kernel, nettune version, CPU and NUMA layout, NIC
//! drivers), the same in both outputs.

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::model::Host;
use crate::base::cpuset::format_list;
use crate::base::fsio;
use crate::base::Root;

/// The key the machine id is hashed with. machine-id(5) asks programs not
/// to publish the id itself but a hash keyed by an application id (as
/// systemd's sd_id128_get_machine_app_specific does with HMAC-SHA256): the
/// hash still tells hosts apart, and cannot be turned back into the id.
const APP_KEY: &[u8] = b"nettune host identity";

/// One NUMA node: its id and its CPUs as a list (`0-7,16-23`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLayout {
    pub id: u32,
    pub cpus: String,
}

/// Who the host is, for grouping reports of many hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// /proc/sys/kernel/hostname; `None` when it cannot be read (a capture
    /// without it).
    pub hostname: Option<String>,
    /// HMAC-SHA256 of /etc/machine-id keyed by nettune's own key, the first
    /// 16 bytes in hex; `None` when the host has no machine id.
    pub machine_id_hash: Option<String>,
    /// The network namespace the report looked at (`--netns NAME`); absent
    /// for the host's own. Namespaces of one machine share its machine id,
    /// and each is a receive path of its own: a fleet report counts each
    /// as a host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// `uname -r`.
    pub kernel: Option<String>,
    /// The nettune version that wrote the report.
    pub nettune_version: String,
    /// Online CPUs.
    pub cpus: usize,
    /// Online CPUs as a list (`0-15`).
    pub online_cpus: String,
    pub numa_nodes: Vec<NodeLayout>,
    /// Interface name -> kernel driver, for every interface that has one.
    pub nic_drivers: BTreeMap<String, String>,
}

impl Identity {
    /// The identity of the host `host` was read from through `root`,
    /// inside network namespace `netns` when one was named.
    pub fn of(host: &Host, root: &Root, netns: Option<&str>) -> Identity {
        Identity {
            hostname: hostname(root),
            machine_id_hash: machine_id_hash(root),
            netns: netns.map(str::to_string),
            kernel: host.kernel.clone(),
            nettune_version: env!("CARGO_PKG_VERSION").to_string(),
            cpus: host.online_cpus.len(),
            online_cpus: format_list(&host.online_cpus),
            numa_nodes: host
                .numa_nodes
                .iter()
                .map(|n| NodeLayout {
                    id: n.id,
                    cpus: format_list(&n.cpus),
                })
                .collect(),
            nic_drivers: host
                .interfaces
                .iter()
                .filter_map(|i| Some((i.name.clone(), i.driver.clone()?)))
                .collect(),
        }
    }
}

/// `/etc/machine-id` of the tree `root` shows (systemd's stable host
/// identity: 32 hex digits, though a tree's may hold anything); `None`
/// when there is none.
pub fn machine_id(root: &Root) -> Option<String> {
    fsio::read_text_bounded(&root.base().join("etc/machine-id"), 4096, "a machine id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The keyed hash of the machine id of the tree `root` shows. A capture
/// holds no /etc/machine-id (machine-id(5): the id is confidential, and a
/// capture is made to be shared); `nettune capture` writes its hash into
/// nettune/capture.json instead, read here.
pub fn machine_id_hash(root: &Root) -> Option<String> {
    if let Some(id) = machine_id(root) {
        return Some(hash_machine_id(&id));
    }
    if root.is_live() {
        return None;
    }
    let info = fsio::read_text_bounded(
        &root.base().join(CAPTURE_INFO),
        64 * 1024,
        "a capture's description",
    )
    .ok()?;
    let info: serde_json::Value = serde_json::from_str(&info).ok()?;
    info.get("machine_id_hash")?
        .as_str()
        .filter(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
}

/// Where a capture describes itself, relative to its top directory.
pub const CAPTURE_INFO: &str = "nettune/capture.json";

/// `/proc/sys/kernel/hostname`; `None` when it cannot be read.
pub fn hostname(root: &Root) -> Option<String> {
    root.read_value("/proc/sys/kernel/hostname")
        .ok()
        .flatten()
        .filter(|s| !s.is_empty())
}

/// The keyed hash of a machine id, 32 hex digits.
pub fn hash_machine_id(id: &str) -> String {
    let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(APP_KEY) {
        Ok(mac) => mac,
        // HMAC takes a key of any length: not reached.
        Err(_) => return String::new(),
    };
    mac.update(id.trim().as_bytes());
    mac.finalize().into_bytes()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_id_is_hashed_not_shown() {
        let id = "0123456789abcdef0123456789abcdef";
        let hash = hash_machine_id(id);
        assert_eq!(hash.len(), 32);
        assert!(!hash.contains(id) && hash != id);
        assert_eq!(hash, hash_machine_id(&format!("{id}\n")));
        assert_ne!(hash, hash_machine_id("fedcba9876543210fedcba9876543210"));
    }
}
