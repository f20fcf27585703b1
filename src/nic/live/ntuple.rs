//! Flow steering over SIOCETHTOOL: the RX ring count (ETHTOOL_GRXRINGS),
//! the ntuple rule table (GRXCLSRLCNT, GRXCLSRLALL, GRXCLSRULE: what
//! `ethtool -n` shows), and the [`SteeringSet`] writes: the whole RSS
//! indirection table (SRXFHINDIR, `ethtool -X`), a rule inserted at its
//! location (SRXCLSRLINS, `ethtool -N ... loc L`) and deleted by it
//! (SRXCLSRLDEL, `ethtool -N ... delete L`).
//!
//! `struct ethtool_rxnfc` (linux/ethtool.h) is handled as 192 bytes with its
//! fields at fixed offsets: cmd 0, flow_type 4, data 8, the flow spec `fs`
//! at 16 (flow_type 16, h_u 20, h_ext 72, m_u 92, m_ext 144, ring_cookie
//! 168, location 176), rule_cnt 184, rule_locs[] from 188.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::ethtool_ioctl::{write_u32, EthtoolSocket, IfName, LiveEthtool};
use crate::base::driver::flow::{FlowProto, FlowSpec, NtupleRule, NtupleTable, RuleAction};
use crate::base::driver::{SetError, SteeringSet};

const ETHTOOL_GRXRINGS: u32 = 0x2d;
const ETHTOOL_GRXCLSRLCNT: u32 = 0x2e;
const ETHTOOL_GRXCLSRULE: u32 = 0x2f;
const ETHTOOL_GRXCLSRLALL: u32 = 0x30;
const ETHTOOL_SRXCLSRLDEL: u32 = 0x31;
const ETHTOOL_SRXCLSRLINS: u32 = 0x32;
const ETHTOOL_SRXFHINDIR: u32 = 0x39;

const TCP_V4_FLOW: u32 = 0x01;
const UDP_V4_FLOW: u32 = 0x02;
const TCP_V6_FLOW: u32 = 0x05;
const UDP_V6_FLOW: u32 = 0x06;
/// Flags in `flow_type` above the type itself.
const FLOW_FLAGS: u32 = 0x8000_0000 | 0x4000_0000 | 0x2000_0000;
/// "Drop" as a ring cookie.
const RX_CLS_FLOW_DISC: u64 = u64::MAX;
/// In GRXCLSRLCNT's `data`: the driver picks locations itself.
const RX_CLS_LOC_SPECIAL: u32 = 0x8000_0000;

const RXNFC_LEN: usize = 192;
const FS: usize = 16;
const H_U: usize = FS + 4;
const M_U: usize = FS + 76;
const RING_COOKIE: usize = FS + 152;
const LOCATION: usize = FS + 160;
const RULE_CNT: usize = 184;
const RULE_LOCS: usize = 188;
/// More rules than any NIC's table holds; bounds what a driver can make
/// nettune allocate.
const MAX_RULES: u32 = 1 << 16;

fn u32_at(buf: &[u8], offset: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&buf[offset..offset + 4]);
    u32::from_ne_bytes(word)
}

fn u64_at(buf: &[u8], offset: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&buf[offset..offset + 8]);
    u64::from_ne_bytes(word)
}

fn rxnfc(cmd: u32) -> Vec<u8> {
    let mut buf = vec![0u8; RXNFC_LEN];
    write_u32(&mut buf, 0, cmd);
    buf
}

/// An rxnfc command of the usual size; the answer in the same buffer.
fn call(socket: &EthtoolSocket, iface: &IfName, buf: &mut [u8]) -> Result<(), i32> {
    debug_assert!(buf.len() >= RXNFC_LEN);
    // SAFETY: at least a whole struct ethtool_rxnfc, the most these
    // commands write (GRXCLSRLALL is sized by its caller).
    unsafe { socket.buffer(iface, buf) }
}

pub(super) fn rx_rings(socket: &EthtoolSocket, iface: &IfName) -> Result<u32, i32> {
    let mut buf = rxnfc(ETHTOOL_GRXRINGS);
    call(socket, iface, &mut buf)?;
    Ok(u64_at(&buf, 8) as u32)
}

/// The rule table: its size, then every rule by location.
pub(super) fn rules(socket: &EthtoolSocket, iface: &IfName) -> Result<NtupleTable, i32> {
    let mut buf = rxnfc(ETHTOOL_GRXCLSRLCNT);
    call(socket, iface, &mut buf)?;
    let count = u32_at(&buf, RULE_CNT);
    let size = (u64_at(&buf, 8) as u32) & !RX_CLS_LOC_SPECIAL;
    if count > MAX_RULES {
        return Err(libc::E2BIG);
    }
    let mut all = vec![0u8; RXNFC_LEN + 4 * count as usize];
    write_u32(&mut all, 0, ETHTOOL_GRXCLSRLALL);
    write_u32(&mut all, RULE_CNT, count);
    // SAFETY: room for the struct and `count` locations, the most the
    // kernel copies back (a driver with more rules answers EMSGSIZE).
    unsafe { socket.buffer(iface, &mut all)? };
    let listed = (u32_at(&all, RULE_CNT)).min(count) as usize;
    let mut rules = Vec::with_capacity(listed);
    for i in 0..listed {
        let location = u32_at(&all, RULE_LOCS + 4 * i);
        let mut one = rxnfc(ETHTOOL_GRXCLSRULE);
        write_u32(&mut one, LOCATION, location);
        match call(socket, iface, &mut one) {
            Ok(()) => rules.push(decode_rule(&one, location)),
            // Deleted between the two calls.
            Err(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(NtupleTable { size, rules })
}

/// The rule at `location`, or `None` when the slot is empty.
pub(super) fn rule_at(
    socket: &EthtoolSocket,
    iface: &IfName,
    location: u32,
) -> Result<Option<NtupleRule>, i32> {
    let mut one = rxnfc(ETHTOOL_GRXCLSRULE);
    write_u32(&mut one, LOCATION, location);
    match call(socket, iface, &mut one) {
        Ok(()) => Ok(Some(decode_rule(&one, location))),
        Err(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Network-order bytes of an address field.
fn ip_bytes(buf: &[u8], offset: usize, v6: bool) -> IpAddr {
    if v6 {
        let mut b = [0u8; 16];
        b.copy_from_slice(&buf[offset..offset + 16]);
        IpAddr::V6(Ipv6Addr::from(b))
    } else {
        let mut b = [0u8; 4];
        b.copy_from_slice(&buf[offset..offset + 4]);
        IpAddr::V4(Ipv4Addr::from(b))
    }
}

fn port_at(buf: &[u8], offset: usize) -> u16 {
    u16::from_be_bytes([buf[offset], buf[offset + 1]])
}

/// Offsets within h_u/m_u of (src, dst, src port, dst port, tos/tclass)
/// for tcpip4 and tcpip6 specs.
fn layout(v6: bool) -> (usize, usize, usize, usize, usize, usize) {
    if v6 {
        (0, 16, 32, 34, 36, 16)
    } else {
        (0, 4, 8, 10, 12, 4)
    }
}

/// A rule as the driver answered it. Flows with partial masks, a TOS, or
/// extension fields are not modeled: they keep only their flow type.
fn decode_rule(buf: &[u8], location: u32) -> NtupleRule {
    let flow_type = u32_at(buf, FS);
    let cookie = u64_at(buf, RING_COOKIE);
    let action = if cookie == RX_CLS_FLOW_DISC {
        RuleAction::Drop
    } else {
        // The low 32 bits are the queue; the VF sits above them.
        RuleAction::Queue(cookie as u32)
    };
    let kind = match flow_type {
        TCP_V4_FLOW => Some((FlowProto::Tcp, false)),
        UDP_V4_FLOW => Some((FlowProto::Udp, false)),
        TCP_V6_FLOW => Some((FlowProto::Tcp, true)),
        UDP_V6_FLOW => Some((FlowProto::Udp, true)),
        _ => None,
    };
    let flow = kind.and_then(|(proto, v6)| decode_flow(buf, proto, v6));
    NtupleRule {
        location,
        flow,
        flow_type: flow_type & !FLOW_FLAGS,
        action,
    }
}

fn decode_flow(buf: &[u8], proto: FlowProto, v6: bool) -> Option<FlowSpec> {
    let (src, dst, psrc, pdst, tos, alen) = layout(v6);
    let all_or_none = |offset: usize, len: usize| -> Option<bool> {
        let mask = &buf[M_U + offset..M_U + offset + len];
        if mask.iter().all(|&b| b == 0xff) {
            Some(true)
        } else if mask.iter().all(|&b| b == 0) {
            None
        } else {
            // A partial mask (a subnet, a port range): not modeled.
            Some(false)
        }
    };
    let field = |offset: usize, len: usize| -> Result<bool, ()> {
        match all_or_none(offset, len) {
            Some(true) => Ok(true),
            None => Ok(false),
            Some(false) => Err(()),
        }
    };
    if buf[M_U + tos] != 0 {
        return None;
    }
    let mut spec = FlowSpec::any(proto);
    spec.ipv6 = v6;
    if field(src, alen).ok()? {
        spec.src_ip = Some(ip_bytes(buf, H_U + src, v6));
    }
    if field(dst, alen).ok()? {
        spec.dst_ip = Some(ip_bytes(buf, H_U + dst, v6));
    }
    if field(psrc, 2).ok()? {
        spec.src_port = Some(port_at(buf, H_U + psrc));
    }
    if field(pdst, 2).ok()? {
        spec.dst_port = Some(port_at(buf, H_U + pdst));
    }
    Some(spec)
}

/// The SRXCLSRLINS command for a rule: the fields it names with whole
/// masks (the kernel's masks: a set bit is compared).
fn encode_rule(rule: &NtupleRule) -> Result<Vec<u8>, i32> {
    let flow = rule.flow.as_ref().ok_or(libc::EINVAL)?;
    let mut buf = rxnfc(ETHTOOL_SRXCLSRLINS);
    let flow_type = match (flow.proto, flow.ipv6) {
        (FlowProto::Tcp, false) => TCP_V4_FLOW,
        (FlowProto::Udp, false) => UDP_V4_FLOW,
        (FlowProto::Tcp, true) => TCP_V6_FLOW,
        (FlowProto::Udp, true) => UDP_V6_FLOW,
    };
    write_u32(&mut buf, FS, flow_type);
    let (src, dst, psrc, pdst, _, alen) = layout(flow.ipv6);
    let mut put_ip = |offset: usize, addr: Option<IpAddr>| {
        if let Some(addr) = addr {
            let bytes = match addr {
                IpAddr::V4(a) => a.octets().to_vec(),
                IpAddr::V6(a) => a.octets().to_vec(),
            };
            buf[H_U + offset..H_U + offset + alen].copy_from_slice(&bytes[..alen]);
            buf[M_U + offset..M_U + offset + alen].fill(0xff);
        }
    };
    put_ip(src, flow.src_ip);
    put_ip(dst, flow.dst_ip);
    for (offset, port) in [(psrc, flow.src_port), (pdst, flow.dst_port)] {
        if let Some(port) = port {
            buf[H_U + offset..H_U + offset + 2].copy_from_slice(&port.to_be_bytes());
            buf[M_U + offset..M_U + offset + 2].fill(0xff);
        }
    }
    let cookie = match rule.action {
        RuleAction::Queue(q) => u64::from(q),
        RuleAction::Drop => RX_CLS_FLOW_DISC,
    };
    buf[RING_COOKIE..RING_COOKIE + 8].copy_from_slice(&cookie.to_ne_bytes());
    write_u32(&mut buf, LOCATION, rule.location);
    Ok(buf)
}

fn open(iface: &str) -> Result<(EthtoolSocket, IfName), SetError> {
    let name = IfName::new(iface).ok_or_else(|| SetError::from_errno(libc::ENODEV))?;
    let socket = EthtoolSocket::open()
        .map_err(|e| SetError::from_errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
    Ok((socket, name))
}

impl SteeringSet for LiveEthtool {
    fn set_indirection(&self, iface: &str, table: &[u32]) -> Result<(), SetError> {
        let (socket, name) = open(iface)?;
        // struct ethtool_rxfh_indir: cmd, size, u32 ring_index[size].
        let mut buf = vec![0u8; 8 + 4 * table.len()];
        write_u32(&mut buf, 0, ETHTOOL_SRXFHINDIR);
        let size = u32::try_from(table.len()).map_err(|_| SetError::from_errno(libc::EINVAL))?;
        write_u32(&mut buf, 4, size);
        for (i, queue) in table.iter().enumerate() {
            write_u32(&mut buf, 8 + 4 * i, *queue);
        }
        // SAFETY: the kernel reads the header and `size` entries, all ours.
        unsafe { socket.buffer(&name, &mut buf) }.map_err(SetError::from_errno)
    }

    fn insert_rule(&self, iface: &str, rule: &NtupleRule) -> Result<(), SetError> {
        let (socket, name) = open(iface)?;
        let mut buf = encode_rule(rule).map_err(SetError::from_errno)?;
        call(&socket, &name, &mut buf).map_err(SetError::from_errno)?;
        // A driver that picks locations itself says where it put it.
        let placed = u32_at(&buf, LOCATION);
        if placed != rule.location {
            let mut undo = rxnfc(ETHTOOL_SRXCLSRLDEL);
            write_u32(&mut undo, LOCATION, placed);
            let _ = call(&socket, &name, &mut undo);
            return Err(SetError::with_detail(
                libc::EINVAL,
                &format!(
                    "the driver put the rule at location {placed}, not {}",
                    rule.location
                ),
            ));
        }
        Ok(())
    }

    fn delete_rule(&self, iface: &str, location: u32) -> Result<(), SetError> {
        let (socket, name) = open(iface)?;
        let mut buf = rxnfc(ETHTOOL_SRXCLSRLDEL);
        write_u32(&mut buf, LOCATION, location);
        call(&socket, &name, &mut buf).map_err(SetError::from_errno)
    }
}

impl LiveEthtool {
    /// The rule at `location` of `iface` (`None`: the slot is empty).
    pub fn rule_at(&self, iface: &str, location: u32) -> Result<Option<NtupleRule>, SetError> {
        let (socket, name) = open(iface)?;
        rule_at(&socket, &name, location).map_err(SetError::from_errno)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_encodes_as_ethtool_sends_it_and_decodes_back() {
        // `ethtool -N eth3 flow-type udp4 dst-port 53 action 4 loc 1023`
        let rule = NtupleRule::parse_value(1023, "udp4 dst-port 53 action 4").expect("rule");
        let buf = encode_rule(&rule).expect("encode");
        assert_eq!(buf.len(), RXNFC_LEN);
        assert_eq!(u32_at(&buf, 0), ETHTOOL_SRXCLSRLINS);
        assert_eq!(u32_at(&buf, FS), UDP_V4_FLOW);
        // pdst at h_u + 10, big endian; its mask whole; nothing else masked.
        assert_eq!(&buf[H_U + 10..H_U + 12], &[0, 53]);
        assert_eq!(&buf[M_U + 10..M_U + 12], &[0xff, 0xff]);
        assert!(buf[M_U..M_U + 10].iter().all(|&b| b == 0));
        assert_eq!(u64_at(&buf, RING_COOKIE), 4);
        assert_eq!(u32_at(&buf, LOCATION), 1023);
        let back = decode_rule(&buf, 1023);
        assert_eq!(back.flow, rule.flow);
        assert_eq!(back.action, RuleAction::Queue(4));
        assert_eq!(back.value_text(), "udp4 dst-port 53 action 4");
    }

    #[test]
    fn ipv6_and_drop_rules_round_trip() {
        let rule =
            NtupleRule::parse_value(7, "tcp6 src-ip fd00::1 dst-port 443 action -1").expect("rule");
        let buf = encode_rule(&rule).expect("encode");
        assert_eq!(u32_at(&buf, FS), TCP_V6_FLOW);
        assert_eq!(buf[H_U + 15], 1);
        assert_eq!(&buf[H_U + 34..H_U + 36], &443u16.to_be_bytes());
        assert_eq!(u64_at(&buf, RING_COOKIE), RX_CLS_FLOW_DISC);
        assert_eq!(decode_rule(&buf, 7).flow, rule.flow);
        assert_eq!(decode_rule(&buf, 7).action, RuleAction::Drop);
    }

    #[test]
    fn rules_nettune_does_not_model_keep_their_flow_type() {
        let mut buf = rxnfc(ETHTOOL_GRXCLSRULE);
        // A /24 source subnet: a partial mask.
        write_u32(&mut buf, FS, UDP_V4_FLOW);
        buf[M_U..M_U + 3].fill(0xff);
        let rule = decode_rule(&buf, 1);
        assert_eq!(rule.flow, None);
        assert_eq!(rule.flow_type, UDP_V4_FLOW);
        assert_eq!(rule.value_text(), "flow-type 2 action 0");
        // ether flows (0x12) with FLOW_EXT set.
        write_u32(&mut buf, FS, 0x12 | 0x8000_0000);
        assert_eq!(decode_rule(&buf, 1).flow_type, 0x12);
    }
}
