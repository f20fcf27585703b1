//! [`EthtoolSet`] for the running kernel: SIOCETHTOOL set commands.
//!
//! Each set command takes the same struct its get command fills, so a change
//! reads the group first (rings, coalescing, channels), changes one field and
//! writes the whole struct back: the other fields keep their values, as with
//! `ethtool -G eth0 rx 4096`.

use super::ethtool::{
    EthtoolChannels, EthtoolCoalesce, EthtoolRingparam, EthtoolRxnfc, ETHTOOL_GCHANNELS,
    ETHTOOL_GCOALESCE, ETHTOOL_GRINGPARAM, ETH_SS_FEATURES, FLOW_TYPES, LEGACY_FEATURE_NAMES,
    RXH_FIELDS,
};
use super::ethtool_ioctl::{write_u32, EthtoolSocket, IfName, LiveEthtool};
use crate::base::driver::{ChannelKind, DriverSetting};
use crate::base::driver::{EthtoolSet, FlowHash, SetError};

// Set command numbers from linux/ethtool.h.
const ETHTOOL_SCOALESCE: u32 = 0x0f;
const ETHTOOL_SRINGPARAM: u32 = 0x11;
const ETHTOOL_SRXFH: u32 = 0x2a;
const ETHTOOL_SFEATURES: u32 = 0x3b;
const ETHTOOL_SCHANNELS: u32 = 0x3d;

impl EthtoolSet for LiveEthtool {
    fn set(&self, iface: &str, setting: &DriverSetting) -> Result<(), SetError> {
        let name = IfName::new(iface).ok_or_else(|| SetError::from_errno(libc::ENODEV))?;
        let socket = EthtoolSocket::open()
            .map_err(|e| SetError::from_errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
        set(&socket, &name, setting).map_err(SetError::from_errno)
    }
}

fn set(socket: &EthtoolSocket, name: &IfName, setting: &DriverSetting) -> Result<(), i32> {
    match setting {
        DriverSetting::RingRx(n) | DriverSetting::RingTx(n) => {
            let mut rings: EthtoolRingparam = socket.fixed(name, ETHTOOL_GRINGPARAM)?;
            if matches!(setting, DriverSetting::RingRx(_)) {
                rings.rx_pending = *n;
            } else {
                rings.tx_pending = *n;
            }
            socket.send(name, ETHTOOL_SRINGPARAM, rings)
        }
        DriverSetting::RxUsecs(_)
        | DriverSetting::TxUsecs(_)
        | DriverSetting::AdaptiveRx(_)
        | DriverSetting::AdaptiveTx(_) => {
            let mut c: EthtoolCoalesce = socket.fixed(name, ETHTOOL_GCOALESCE)?;
            match *setting {
                DriverSetting::RxUsecs(n) => c.rx_coalesce_usecs = n,
                DriverSetting::TxUsecs(n) => c.tx_coalesce_usecs = n,
                DriverSetting::AdaptiveRx(on) => c.use_adaptive_rx_coalesce = u32::from(on),
                DriverSetting::AdaptiveTx(on) => c.use_adaptive_tx_coalesce = u32::from(on),
                _ => {}
            }
            socket.send(name, ETHTOOL_SCOALESCE, c)
        }
        DriverSetting::Channels { kind, count } => {
            let mut c: EthtoolChannels = socket.fixed(name, ETHTOOL_GCHANNELS)?;
            match kind {
                ChannelKind::Rx => c.rx_count = *count,
                ChannelKind::Tx => c.tx_count = *count,
                ChannelKind::Combined => c.combined_count = *count,
            }
            socket.send(name, ETHTOOL_SCHANNELS, c)
        }
        DriverSetting::FlowHash { flow_type, hash } => {
            let flow = FLOW_TYPES
                .iter()
                .find(|(n, _)| n == flow_type)
                .map(|(_, code)| *code)
                .ok_or(libc::EINVAL)?;
            let mut command = EthtoolRxnfc::default();
            command.flow_type = flow;
            command.data = flow_hash_bits(hash).ok_or(libc::EINVAL)?;
            socket.send(name, ETHTOOL_SRXFH, command)
        }
        DriverSetting::Feature { name: feature, on } => set_feature(socket, name, feature, *on),
    }
}

/// RXH_* bits for the hash fields; `None` for a field without a bit.
fn flow_hash_bits(hash: &FlowHash) -> Option<u64> {
    hash.fields.iter().try_fold(0u64, |bits, field| {
        RXH_FIELDS
            .iter()
            .find(|(_, name)| name == field)
            .map(|(bit, _)| bits | bit)
    })
}

/// ETHTOOL_SFEATURES for one feature: find its bit among the feature
/// strings, then send `valid` = that bit and `requested` = on/off.
fn set_feature(socket: &EthtoolSocket, iface: &IfName, feature: &str, on: bool) -> Result<(), i32> {
    // `ethtool -k` spellings name the kernel's feature.
    let kernel_name = LEGACY_FEATURE_NAMES
        .iter()
        .find(|(_, legacy)| *legacy == feature)
        .map(|(kernel, _)| *kernel)
        .unwrap_or(feature);
    let count = socket.string_set_sizes(iface).features?;
    let features = socket.features(iface, count)?;
    // The kernel ignores (and only flags) a change to a fixed feature.
    if !features.get(kernel_name).is_some_and(|f| f.changeable) {
        return Err(libc::EOPNOTSUPP);
    }
    let names = socket.strings(iface, ETH_SS_FEATURES, count)?;
    let index = names
        .iter()
        .position(|n| n == kernel_name)
        .ok_or(libc::EOPNOTSUPP)?;
    // struct ethtool_sfeatures: cmd, size, then per 32 features {valid, requested}.
    let words = names.len().div_ceil(32);
    let mut buf = vec![0u8; 8 + words * 8];
    write_u32(&mut buf, 0, ETHTOOL_SFEATURES);
    write_u32(&mut buf, 4, u32::try_from(words).map_err(|_| libc::EINVAL)?);
    let block = 8 + (index / 32) * 8;
    let bit = 1u32 << (index % 32);
    write_u32(&mut buf, block, bit);
    write_u32(&mut buf, block + 4, if on { bit } else { 0 });
    // SAFETY: the buffer holds the header and `words` blocks, the size we
    // pass; the kernel reads it and writes back only the header.
    unsafe { socket.buffer(iface, &mut buf) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_hash_fields_become_rxh_bits() {
        // `ethtool -N eth0 rx-flow-hash udp4 sdfn` sends 0xf0.
        let sdfn = FlowHash {
            fields: ["ip_src", "ip_dst", "l4_src_port", "l4_dst_port"]
                .map(String::from)
                .to_vec(),
        };
        assert_eq!(flow_hash_bits(&sdfn), Some(0xf0));
        let unknown = FlowHash {
            fields: vec!["bit_9".to_string()],
        };
        assert_eq!(flow_hash_bits(&unknown), None);
    }
}
