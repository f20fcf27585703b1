//! XDP on an interface as plain data: the programs attached (rtnetlink
//! IFLA_XDP, what `ip link show` prints as `xdp`/`xdpgeneric`) and what the
//! driver can do (the netdev family's `xdp-features`, what `ynl --family
//! netdev --dump dev-get` prints).

use serde::{Deserialize, Serialize};

use crate::base::Probe;

/// Where an XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XdpMode {
    /// In the driver, before an skb exists (`ip link ... xdpdrv`).
    Native,
    /// After the skb is built, for any driver (`xdpgeneric`): much slower.
    Generic,
    /// On the NIC itself.
    Offload,
}

impl XdpMode {
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
            XdpMode::Offload => "offload",
        }
    }
}

/// One attached program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpProgram {
    pub mode: XdpMode,
    /// The kernel's program id (`bpftool prog show id N`).
    pub id: u32,
    /// The program's name; `None` when it could not be asked (needs root).
    pub name: Option<String>,
}

/// The driver's XDP abilities (NETDEV_A_DEV_XDP_FEATURES), by the netdev
/// family's names: `basic` (native XDP), `redirect`, `ndo-xmit`,
/// `xsk-zerocopy` (AF_XDP zero-copy), `hw-offload`, `rx-sg`, `ndo-xmit-sg`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpFeatures {
    pub actions: Vec<String>,
    /// NETDEV_A_DEV_XDP_ZC_MAX_SEGS: fragments per zero-copy frame.
    pub zc_max_segs: u32,
}

impl XdpFeatures {
    pub fn has(&self, action: &str) -> bool {
        self.actions.iter().any(|a| a == action)
    }

    /// Native XDP in the driver.
    pub fn native(&self) -> bool {
        self.has("basic")
    }

    /// AF_XDP zero-copy.
    pub fn zero_copy(&self) -> bool {
        self.has("xsk-zerocopy")
    }
}

/// XDP on one interface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct XdpState {
    /// Attached programs (at most one per mode).
    pub programs: Vec<XdpProgram>,
    /// What the driver supports; unknown on kernels before 6.3 (no
    /// xdp-features) and not supported where the netdev family is absent.
    pub features: Probe<XdpFeatures>,
}

impl XdpState {
    pub fn in_mode(&self, mode: XdpMode) -> Option<&XdpProgram> {
        self.programs.iter().find(|p| p.mode == mode)
    }
}

/// NETDEV_XDP_ACT_* bits and their names (include/uapi/linux/netdev.h).
pub const XDP_ACTIONS: [(u64, &str); 7] = [
    (1 << 0, "basic"),
    (1 << 1, "redirect"),
    (1 << 2, "ndo-xmit"),
    (1 << 3, "xsk-zerocopy"),
    (1 << 4, "hw-offload"),
    (1 << 5, "rx-sg"),
    (1 << 6, "ndo-xmit-sg"),
];

/// The names of the bits set in an xdp-features mask (unknown bits as
/// `bit-N`).
pub fn action_names(bits: u64) -> Vec<String> {
    let mut names: Vec<String> = XDP_ACTIONS
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| name.to_string())
        .collect();
    let known = XDP_ACTIONS.iter().fold(0, |all, (bit, _)| all | bit);
    for bit in (0..64).filter(|b| bits & !known & (1 << b) != 0) {
        names.push(format!("bit-{bit}"));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_bits_have_the_netdev_names() {
        // veth on 6.x: basic, redirect, ndo-xmit, rx-sg, ndo-xmit-sg.
        let veth = action_names(0x67);
        assert_eq!(
            veth,
            ["basic", "redirect", "ndo-xmit", "rx-sg", "ndo-xmit-sg"]
        );
        let f = XdpFeatures {
            actions: veth,
            zc_max_segs: 0,
        };
        assert!(f.native() && !f.zero_copy());
        assert_eq!(action_names(1 << 9), ["bit-9"]);
    }

    #[test]
    fn state_json_is_plain() {
        let state = XdpState {
            programs: vec![XdpProgram {
                mode: XdpMode::Generic,
                id: 42,
                name: Some("nettune_xsk".to_string()),
            }],
            features: Probe::NOT_SUPPORTED,
        };
        let text = serde_json::to_string(&state).expect("json");
        assert_eq!(
            text,
            r#"{"programs":[{"mode":"generic","id":42,"name":"nettune_xsk"}],"features":"not_supported"}"#
        );
        assert_eq!(
            serde_json::from_str::<XdpState>(&text).expect("back"),
            state
        );
        assert!(state.in_mode(XdpMode::Native).is_none());
    }
}
