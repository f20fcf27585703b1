//! [`LiveNetlink`]: the root qdisc of an interface, from an rtnetlink
//! `RTM_GETQDISC` dump (what `tc qdisc show dev IFACE` asks).
//!
//! Changes (`QdiscSet`): `RTM_NEWQDISC` with `NLM_F_CREATE | NLM_F_REPLACE`
//! (`tc qdisc replace dev IFACE root fq maxrate RATE`) and `RTM_DELQDISC`
//! (`tc qdisc del dev IFACE root`: the kernel re-attaches its default).
//!
//! The tcmsg header and two attributes are written and read by hand over
//! the shared framing in [`super::netlink`]: two requests and three fields
//! of the answer do not justify netlink-packet-route and netlink-sys (five
//! crates, an async-first API).

use std::io;

use nix::sys::socket::SockProtocol;

use crate::base::driver::{Netlink, Qdisc, QdiscSet, QdiscSpec, SetError};
use crate::base::netlink::{
    attr_str, attrs, ifindex, malformed, push_attr, push_str, route, u32_at, Socket,
};
use crate::base::Probe;

/// Reads qdiscs from the running kernel, in the calling thread's network
/// namespace.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveNetlink;

impl Netlink for LiveNetlink {
    /// `tc qdisc show dev IFACE`, root line only. Unknown when the interface
    /// does not exist or the dump fails.
    fn root_qdisc(&self, iface: &str) -> Probe<Qdisc> {
        let Ok(ifindex) = nix::net::if_::if_nametoindex(iface) else {
            return Probe::UNKNOWN;
        };
        match dump_qdiscs() {
            Ok(qdiscs) => qdiscs
                .into_iter()
                .find(|q| q.ifindex == ifindex && q.parent == TC_H_ROOT)
                .map(|q| Qdisc {
                    kind: q.kind,
                    handle: handle_text(q.handle),
                })
                .into(),
            Err(_) => Probe::UNKNOWN,
        }
    }

    fn xdp(&self, iface: &str) -> Probe<crate::base::driver::xdp::XdpState> {
        super::xdp_link::state(iface)
    }
}

impl QdiscSet for LiveNetlink {
    fn replace_root(&self, iface: &str, spec: &QdiscSpec) -> Result<(), SetError> {
        let body = qdisc_body(ifindex(iface)?, Some(spec));
        route()?.change(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, &body)
    }

    fn reset_root(&self, iface: &str, _default: &Qdisc) -> Result<(), SetError> {
        let body = qdisc_body(ifindex(iface)?, None);
        match route()?.change(RTM_DELQDISC, 0, &body) {
            // The root is the kernel's default already (handle 0 cannot be deleted).
            Err(e) if e.errno == libc::ENOENT => Ok(()),
            other => other,
        }
    }
}

const TCMSG_LEN: usize = 20;
const RTM_NEWQDISC: u16 = 36;
const RTM_DELQDISC: u16 = 37;
const RTM_GETQDISC: u16 = 38;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
/// fq's per-flow pacing cap, u32 bytes per second (linux/pkt_sched.h).
const TCA_FQ_FLOW_MAX_RATE: u16 = 7;
const TC_H_ROOT: u32 = 0xffff_ffff;

/// One qdisc of the dump.
#[derive(Debug, Clone, PartialEq, Eq)]
struct QdiscMessage {
    ifindex: u32,
    handle: u32,
    parent: u32,
    kind: String,
}

/// The `tc` text of a qdisc handle: major number in hex and a colon (`8001:`).
fn handle_text(handle: u32) -> String {
    format!("{:x}:", handle >> 16)
}

/// Every qdisc of every interface: an `RTM_GETQDISC` dump with a zeroed
/// tcmsg (every family, every interface).
fn dump_qdiscs() -> io::Result<Vec<QdiscMessage>> {
    Socket::open(SockProtocol::NetlinkRoute)?
        .dump(RTM_GETQDISC, &[0u8; TCMSG_LEN])?
        .iter()
        .map(|payload| parse_qdisc(payload))
        .collect()
}

/// The body of a qdisc change at the root of `ifindex`: tcmsg, then the
/// kind and fq options when installing one.
fn qdisc_body(ifindex: u32, spec: Option<&QdiscSpec>) -> Vec<u8> {
    // tcmsg: family AF_UNSPEC and padding, ifindex, handle 0 (the kernel
    // picks one), parent root, info 0.
    let mut body = vec![0u8; 4];
    for word in [ifindex, 0, TC_H_ROOT, 0] {
        body.extend_from_slice(&word.to_ne_bytes());
    }
    if let Some(spec) = spec {
        push_str(&mut body, TCA_KIND, &spec.kind);
        if let Some(rate) = spec.maxrate_bytes {
            let mut options = Vec::new();
            push_attr(&mut options, TCA_FQ_FLOW_MAX_RATE, &rate.to_ne_bytes());
            push_attr(&mut body, TCA_OPTIONS, &options);
        }
    }
    body
}

/// tcmsg {u8 family, u8, u16, i32 ifindex, u32 handle, u32 parent, u32 info}
/// followed by rtattrs {u16 len, u16 type, data}.
fn parse_qdisc(payload: &[u8]) -> io::Result<QdiscMessage> {
    if payload.len() < TCMSG_LEN {
        return Err(malformed("short tcmsg"));
    }
    let kind = attrs(&payload[TCMSG_LEN..])?
        .into_iter()
        .find(|(kind, _)| *kind == TCA_KIND)
        .map(|(_, text)| attr_str(text))
        .unwrap_or_default();
    Ok(QdiscMessage {
        ifindex: u32_at(payload, 4),
        handle: u32_at(payload, 8),
        parent: u32_at(payload, 12),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::netlink::{align4, u16_at};

    fn qdisc_payload(ifindex: u32, handle: u32, parent: u32, kind: &str) -> Vec<u8> {
        let mut p = vec![0u8; 4];
        for word in [ifindex, handle, parent, 2] {
            p.extend_from_slice(&word.to_ne_bytes());
        }
        push_str(&mut p, TCA_KIND, kind);
        // TCA_OPTIONS (2) after the kind, as the kernel sends it.
        push_attr(&mut p, TCA_OPTIONS, &[1, 2, 3, 4]);
        p
    }

    #[test]
    fn replace_request_carries_kind_and_maxrate() {
        let spec = QdiscSpec {
            kind: "fq".to_string(),
            maxrate_bytes: Some(1_000_000_000),
        };
        let tcmsg = qdisc_body(7, Some(&spec));
        assert_eq!(u32_at(&tcmsg, 4), 7);
        assert_eq!(u32_at(&tcmsg, 12), TC_H_ROOT);
        let attrs = &tcmsg[TCMSG_LEN..];
        // TCA_KIND "fq\0" padded to 8, then TCA_OPTIONS { TCA_FQ_FLOW_MAX_RATE }.
        assert_eq!((u16_at(attrs, 0), u16_at(attrs, 2)), (7, TCA_KIND));
        assert_eq!(&attrs[4..7], b"fq\0");
        let options = &attrs[align4(7)..];
        assert_eq!((u16_at(options, 0), u16_at(options, 2)), (12, TCA_OPTIONS));
        assert_eq!(u16_at(options, 6), TCA_FQ_FLOW_MAX_RATE);
        assert_eq!(u32_at(options, 8), 1_000_000_000);
        assert_eq!(qdisc_body(7, None).len(), TCMSG_LEN);
    }

    #[test]
    fn handles_print_like_tc() {
        assert_eq!(handle_text(0x8001_0000), "8001:");
        assert_eq!(handle_text(0), "0:");
        assert_eq!(handle_text(0xffff_0000), "ffff:");
    }

    /// lo with noqueue, eth0 with mq and a pfifo_fast child per queue and
    /// an ingress qdisc, as 6.x dumps them.
    #[test]
    fn parses_each_qdisc_of_a_dump() {
        let payloads = [
            qdisc_payload(1, 0, TC_H_ROOT, "noqueue"),
            qdisc_payload(2, 0, TC_H_ROOT, "mq"),
            qdisc_payload(2, 0, 0x1, "pfifo_fast"),
            qdisc_payload(2, 0xffff_0000, 0xffff_fff1, "ingress"),
        ];
        let qdiscs: Vec<QdiscMessage> = payloads
            .iter()
            .map(|p| parse_qdisc(p).expect("parse"))
            .collect();
        let roots: Vec<_> = qdiscs
            .iter()
            .filter(|q| q.parent == TC_H_ROOT)
            .map(|q| (q.ifindex, q.kind.as_str()))
            .collect();
        assert_eq!(roots, [(1, "noqueue"), (2, "mq")]);
        assert_eq!(qdiscs[3].kind, "ingress");
        assert!(parse_qdisc(&[0u8; 8]).is_err());
    }
}
