//! [`LiveNetlink`]: the root qdisc of an interface, from an rtnetlink
//! `RTM_GETQDISC` dump (what `tc qdisc show dev IFACE` asks).
//!
//! Changes (`QdiscSet`): `RTM_NEWQDISC` with `NLM_F_CREATE | NLM_F_REPLACE`
//! (`tc qdisc replace dev IFACE root fq maxrate RATE`) and `RTM_DELQDISC`
//! (`tc qdisc del dev IFACE root`: the kernel re-attaches its default).
//!
//! The three headers involved (nlmsghdr, tcmsg, rtattr) are written and read
//! by hand: two requests and three fields of the answer do not justify
//! netlink-packet-route and netlink-sys (five crates, an async-first API).

use nix::sys::socket::{
    recv, send, setsockopt, socket, sockopt, AddressFamily, MsgFlags, SockFlag, SockProtocol,
    SockType,
};
use nix::sys::time::{TimeVal, TimeValLike};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::base::driver::{Netlink, Qdisc, QdiscSet, QdiscSpec, SetError};
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
}

impl QdiscSet for LiveNetlink {
    fn replace_root(&self, iface: &str, spec: &QdiscSpec) -> Result<(), SetError> {
        let ifindex = ifindex(iface)?;
        let request = qdisc_request(
            RTM_NEWQDISC,
            NLM_F_CREATE | NLM_F_REPLACE,
            ifindex,
            Some(spec),
        );
        transact(&request)
    }

    fn reset_root(&self, iface: &str, _default: &Qdisc) -> Result<(), SetError> {
        let request = qdisc_request(RTM_DELQDISC, 0, ifindex(iface)?, None);
        match transact(&request) {
            // The root is the kernel's default already (handle 0 cannot be deleted).
            Err(e) if e.errno == libc::ENOENT => Ok(()),
            other => other,
        }
    }
}

fn ifindex(iface: &str) -> Result<u32, SetError> {
    nix::net::if_::if_nametoindex(iface).map_err(|e| SetError::from_errno(e as i32))
}

const NLMSG_HDRLEN: usize = 16;
const TCMSG_LEN: usize = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWQDISC: u16 = 36;
const RTM_DELQDISC: u16 = 37;
const RTM_GETQDISC: u16 = 38;
const NLM_F_REQUEST: u16 = 0x01;
const NLM_F_ACK: u16 = 0x04;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;
/// In an NLMSG_ERROR: the echoed request is only its header.
const NLM_F_CAPPED: u16 = 0x100;
/// In an NLMSG_ERROR: extended-ack attributes follow the echoed request.
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLMSGERR_ATTR_MSG: u16 = 1;
const SOL_NETLINK: i32 = 270;
const NETLINK_EXT_ACK: i32 = 11;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
/// fq's per-flow pacing cap, u32 bytes per second (linux/pkt_sched.h).
const TCA_FQ_FLOW_MAX_RATE: u16 = 7;
/// Sequence number of a change request.
const CHANGE_SEQ: u32 = 2;
const TC_H_ROOT: u32 = 0xffff_ffff;
/// Sequence number of our one request.
const DUMP_SEQ: u32 = 1;
/// A dump part never exceeds this (the kernel sizes them to a page or to
/// the reader's last buffer, at most 32 KiB).
const RECV_BUFFER: usize = 64 * 1024;
/// An answer from the kernel takes microseconds; this only bounds a hang.
const RECV_TIMEOUT_SECONDS: i64 = 2;

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

fn align4(len: usize) -> usize {
    (len + 3) & !3
}

fn u16_at(buf: &[u8], offset: usize) -> u16 {
    u16::from_ne_bytes([buf[offset], buf[offset + 1]])
}

fn u32_at(buf: &[u8], offset: usize) -> u32 {
    u32::from_ne_bytes([
        buf[offset],
        buf[offset + 1],
        buf[offset + 2],
        buf[offset + 3],
    ])
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed rtnetlink answer: {what}"),
    )
}

/// `RTM_GETQDISC` with `NLM_F_DUMP`: nlmsghdr then a zeroed tcmsg.
fn dump_request() -> [u8; NLMSG_HDRLEN + TCMSG_LEN] {
    let mut req = [0u8; NLMSG_HDRLEN + TCMSG_LEN];
    req[0..4].copy_from_slice(&((NLMSG_HDRLEN + TCMSG_LEN) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETQDISC.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req[8..12].copy_from_slice(&DUMP_SEQ.to_ne_bytes());
    // nlmsg_pid 0 lets the kernel assign our port; tcmsg all zero: every
    // family, every interface.
    req
}

fn dump_qdiscs() -> io::Result<Vec<QdiscMessage>> {
    let fd: OwnedFd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    setsockopt(
        &fd,
        sockopt::ReceiveTimeout,
        &TimeVal::seconds(RECV_TIMEOUT_SECONDS),
    )?;
    let request = dump_request();
    if send(fd.as_raw_fd(), &request, MsgFlags::empty())? != request.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short netlink send",
        ));
    }
    let mut qdiscs = Vec::new();
    let mut buf = vec![0u8; RECV_BUFFER];
    loop {
        // MSG_TRUNC: the real length, so a cut-off message is noticed.
        let len = recv(fd.as_raw_fd(), &mut buf, MsgFlags::MSG_TRUNC)?;
        if len > buf.len() {
            return Err(malformed("a dump part larger than 64 KiB"));
        }
        if parse_dump_part(&buf[..len], &mut qdiscs)? == Part::Last {
            return Ok(qdiscs);
        }
    }
}

fn push_attr(msg: &mut Vec<u8>, kind: u16, data: &[u8]) {
    let len = 4 + data.len();
    msg.extend_from_slice(&(len as u16).to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(data);
    msg.resize(align4(msg.len()), 0);
}

/// A qdisc change at the root of `ifindex`: nlmsghdr, tcmsg, then the kind
/// and fq options when installing one.
fn qdisc_request(kind: u16, flags: u16, ifindex: u32, spec: Option<&QdiscSpec>) -> Vec<u8> {
    let mut msg = vec![0u8; NLMSG_HDRLEN];
    // tcmsg: family AF_UNSPEC and padding, ifindex, handle 0 (the kernel
    // picks one), parent root, info 0.
    msg.extend_from_slice(&[0u8; 4]);
    for word in [ifindex, 0, TC_H_ROOT, 0] {
        msg.extend_from_slice(&word.to_ne_bytes());
    }
    if let Some(spec) = spec {
        let mut kind_text = spec.kind.as_bytes().to_vec();
        kind_text.push(0);
        push_attr(&mut msg, TCA_KIND, &kind_text);
        if let Some(rate) = spec.maxrate_bytes {
            let mut options = Vec::new();
            push_attr(&mut options, TCA_FQ_FLOW_MAX_RATE, &rate.to_ne_bytes());
            push_attr(&mut msg, TCA_OPTIONS, &options);
        }
    }
    let len = msg.len() as u32;
    msg[0..4].copy_from_slice(&len.to_ne_bytes());
    msg[4..6].copy_from_slice(&kind.to_ne_bytes());
    msg[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ACK | flags).to_ne_bytes());
    msg[8..12].copy_from_slice(&CHANGE_SEQ.to_ne_bytes());
    msg
}

fn set_error(e: impl Into<io::Error>) -> SetError {
    let e: io::Error = e.into();
    SetError::with_detail(e.raw_os_error().unwrap_or(libc::EIO), &e.to_string())
}

/// Send one change request and wait for its acknowledgement.
fn transact(request: &[u8]) -> Result<(), SetError> {
    let fd: OwnedFd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(set_error)?;
    setsockopt(
        &fd,
        sockopt::ReceiveTimeout,
        &TimeVal::seconds(RECV_TIMEOUT_SECONDS),
    )
    .map_err(set_error)?;
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option value of the right size.
    // Without extended acks the kernel's explanation is lost; not fatal.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_NETLINK,
            NETLINK_EXT_ACK,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    if send(fd.as_raw_fd(), request, MsgFlags::empty()).map_err(set_error)? != request.len() {
        return Err(SetError::with_detail(libc::EIO, "short netlink send"));
    }
    let mut buf = vec![0u8; RECV_BUFFER];
    loop {
        let len = recv(fd.as_raw_fd(), &mut buf, MsgFlags::MSG_TRUNC).map_err(set_error)?;
        if let Some(answer) = parse_ack(&buf[..len.min(buf.len())]).map_err(set_error)? {
            return answer;
        }
    }
}

/// The acknowledgement of our change in one datagram, if it holds it.
fn parse_ack(mut buf: &[u8]) -> io::Result<Option<Result<(), SetError>>> {
    while buf.len() >= NLMSG_HDRLEN {
        let len = u32_at(buf, 0) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Err(malformed("message length outside the datagram"));
        }
        let (kind, flags, seq) = (u16_at(buf, 4), u16_at(buf, 6), u32_at(buf, 8));
        let payload = &buf[NLMSG_HDRLEN..len];
        buf = &buf[align4(len).min(buf.len())..];
        if kind != NLMSG_ERROR || seq != CHANGE_SEQ {
            continue;
        }
        if payload.len() < 4 {
            return Err(malformed("short NLMSG_ERROR"));
        }
        let errno = -(u32_at(payload, 0) as i32);
        if errno == 0 {
            return Ok(Some(Ok(())));
        }
        return Ok(Some(Err(SetError::with_detail(
            errno,
            &ext_ack_message(payload, flags).unwrap_or_default(),
        ))));
    }
    Ok(None)
}

/// NLMSGERR_ATTR_MSG of an error: "Specified qdisc kind is unknown."
fn ext_ack_message(payload: &[u8], flags: u16) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 || payload.len() < 4 + NLMSG_HDRLEN {
        return None;
    }
    let echoed = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        u32_at(payload, 4) as usize
    };
    let mut attrs = payload.get(4 + align4(echoed)..)?;
    while attrs.len() >= 4 {
        let len = usize::from(u16_at(attrs, 0));
        if len < 4 || len > attrs.len() {
            return None;
        }
        if u16_at(attrs, 2) == NLMSGERR_ATTR_MSG {
            let text = &attrs[4..len];
            let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
            return Some(String::from_utf8_lossy(&text[..end]).into_owned());
        }
        attrs = &attrs[align4(len).min(attrs.len())..];
    }
    None
}

#[derive(Debug, PartialEq, Eq)]
enum Part {
    More,
    Last,
}

/// Parse one datagram of the dump into `qdiscs`; `Last` after NLMSG_DONE.
fn parse_dump_part(mut buf: &[u8], qdiscs: &mut Vec<QdiscMessage>) -> io::Result<Part> {
    while buf.len() >= NLMSG_HDRLEN {
        let len = u32_at(buf, 0) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Err(malformed("message length outside the datagram"));
        }
        let kind = u16_at(buf, 4);
        let seq = u32_at(buf, 8);
        let payload = &buf[NLMSG_HDRLEN..len];
        buf = &buf[align4(len).min(buf.len())..];
        if seq != DUMP_SEQ {
            continue;
        }
        match kind {
            NLMSG_DONE => {
                // The dump's own error, if it ended early.
                if payload.len() >= 4 {
                    let errno = u32_at(payload, 0) as i32;
                    if errno < 0 {
                        return Err(io::Error::from_raw_os_error(-errno));
                    }
                }
                return Ok(Part::Last);
            }
            NLMSG_ERROR => {
                if payload.len() < 4 {
                    return Err(malformed("short NLMSG_ERROR"));
                }
                let errno = u32_at(payload, 0) as i32;
                if errno < 0 {
                    return Err(io::Error::from_raw_os_error(-errno));
                }
            }
            RTM_NEWQDISC => qdiscs.push(parse_qdisc(payload)?),
            _ => {}
        }
    }
    Ok(Part::More)
}

/// tcmsg {u8 family, u8, u16, i32 ifindex, u32 handle, u32 parent, u32 info}
/// followed by rtattrs {u16 len, u16 type, data}.
fn parse_qdisc(payload: &[u8]) -> io::Result<QdiscMessage> {
    if payload.len() < TCMSG_LEN {
        return Err(malformed("short tcmsg"));
    }
    let mut qdisc = QdiscMessage {
        ifindex: u32_at(payload, 4),
        handle: u32_at(payload, 8),
        parent: u32_at(payload, 12),
        kind: String::new(),
    };
    let mut attrs = &payload[TCMSG_LEN..];
    while attrs.len() >= 4 {
        let len = usize::from(u16_at(attrs, 0));
        if len < 4 || len > attrs.len() {
            return Err(malformed("attribute length outside the message"));
        }
        if u16_at(attrs, 2) == TCA_KIND {
            let text = &attrs[4..len];
            let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
            qdisc.kind = String::from_utf8_lossy(&text[..end]).into_owned();
        }
        attrs = &attrs[align4(len).min(attrs.len())..];
    }
    Ok(qdisc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + payload.len();
        let mut msg = Vec::new();
        msg.extend_from_slice(&(len as u32).to_ne_bytes());
        msg.extend_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(&0x2u16.to_ne_bytes()); // NLM_F_MULTI
        msg.extend_from_slice(&seq.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(payload);
        msg.resize(align4(msg.len()), 0);
        msg
    }

    fn qdisc_payload(ifindex: u32, handle: u32, parent: u32, kind: &str) -> Vec<u8> {
        let mut p = vec![0u8; 4];
        for word in [ifindex, handle, parent, 2] {
            p.extend_from_slice(&word.to_ne_bytes());
        }
        let attr_len = 4 + kind.len() + 1;
        p.extend_from_slice(&(attr_len as u16).to_ne_bytes());
        p.extend_from_slice(&TCA_KIND.to_ne_bytes());
        p.extend_from_slice(kind.as_bytes());
        p.push(0);
        p.resize(align4(p.len()), 0);
        // TCA_OPTIONS (2) after the kind, as the kernel sends it.
        p.extend_from_slice(&8u16.to_ne_bytes());
        p.extend_from_slice(&2u16.to_ne_bytes());
        p.extend_from_slice(&[1, 2, 3, 4]);
        p
    }

    #[test]
    fn replace_request_carries_kind_and_maxrate() {
        let spec = QdiscSpec {
            kind: "fq".to_string(),
            maxrate_bytes: Some(1_000_000_000),
        };
        let req = qdisc_request(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, 7, Some(&spec));
        assert_eq!(u32_at(&req, 0) as usize, req.len());
        assert_eq!(u16_at(&req, 4), RTM_NEWQDISC);
        assert_eq!(
            u16_at(&req, 6),
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE
        );
        let tcmsg = &req[NLMSG_HDRLEN..];
        assert_eq!(u32_at(tcmsg, 4), 7);
        assert_eq!(u32_at(tcmsg, 12), TC_H_ROOT);
        let attrs = &tcmsg[TCMSG_LEN..];
        // TCA_KIND "fq\0" padded to 8, then TCA_OPTIONS { TCA_FQ_FLOW_MAX_RATE }.
        assert_eq!((u16_at(attrs, 0), u16_at(attrs, 2)), (7, TCA_KIND));
        assert_eq!(&attrs[4..7], b"fq\0");
        let options = &attrs[8..];
        assert_eq!((u16_at(options, 0), u16_at(options, 2)), (12, TCA_OPTIONS));
        assert_eq!(u16_at(options, 6), TCA_FQ_FLOW_MAX_RATE);
        assert_eq!(u32_at(options, 8), 1_000_000_000);
        let del = qdisc_request(RTM_DELQDISC, 0, 7, None);
        assert_eq!(del.len(), NLMSG_HDRLEN + TCMSG_LEN);
    }

    /// The kernel's answer to `tc qdisc replace dev veth0 root fq` on a
    /// kernel without sch_fq: ENOENT with an extended-ack message.
    #[test]
    fn unknown_kind_error_keeps_errno_and_kernel_words() {
        let request = qdisc_request(
            RTM_NEWQDISC,
            NLM_F_CREATE | NLM_F_REPLACE,
            3,
            Some(&QdiscSpec {
                kind: "fq".to_string(),
                maxrate_bytes: None,
            }),
        );
        let mut payload = (-libc::ENOENT).to_ne_bytes().to_vec();
        payload.extend_from_slice(&request[..NLMSG_HDRLEN]);
        let text = b"Specified qdisc kind is unknown\0";
        payload.extend_from_slice(&((4 + text.len()) as u16).to_ne_bytes());
        payload.extend_from_slice(&NLMSGERR_ATTR_MSG.to_ne_bytes());
        payload.extend_from_slice(text);
        let mut msg = message(NLMSG_ERROR, CHANGE_SEQ, &payload);
        msg[6..8].copy_from_slice(&(NLM_F_CAPPED | NLM_F_ACK_TLVS).to_ne_bytes());
        let err = parse_ack(&msg)
            .expect("well formed")
            .expect("our ack")
            .expect_err("refused");
        assert_eq!(err.errno, libc::ENOENT);
        assert!(
            err.message.contains("Specified qdisc kind is unknown"),
            "{}",
            err.message
        );
        let ok = message(NLMSG_ERROR, CHANGE_SEQ, &0i32.to_ne_bytes());
        assert_eq!(parse_ack(&ok).expect("parse"), Some(Ok(())));
        let other = message(NLMSG_ERROR, 9, &0i32.to_ne_bytes());
        assert_eq!(parse_ack(&other).expect("parse"), None);
    }

    #[test]
    fn handles_print_like_tc() {
        assert_eq!(handle_text(0x8001_0000), "8001:");
        assert_eq!(handle_text(0), "0:");
        assert_eq!(handle_text(0xffff_0000), "ffff:");
    }

    #[test]
    fn request_is_a_qdisc_dump() {
        let req = dump_request();
        assert_eq!(u32_at(&req, 0) as usize, req.len());
        assert_eq!(u16_at(&req, 4), RTM_GETQDISC);
        assert_eq!(u16_at(&req, 6), NLM_F_REQUEST | NLM_F_DUMP);
    }

    /// lo with noqueue, eth0 with mq and a pfifo_fast child per queue and
    /// an ingress qdisc, as 6.x dumps them.
    #[test]
    fn parses_a_dump_and_finds_each_root() {
        let mut part = message(RTM_NEWQDISC, 1, &qdisc_payload(1, 0, TC_H_ROOT, "noqueue"));
        part.extend(message(
            RTM_NEWQDISC,
            1,
            &qdisc_payload(2, 0, TC_H_ROOT, "mq"),
        ));
        part.extend(message(
            RTM_NEWQDISC,
            1,
            &qdisc_payload(2, 0, 0x1, "pfifo_fast"),
        ));
        part.extend(message(
            RTM_NEWQDISC,
            1,
            &qdisc_payload(2, 0xffff_0000, 0xffff_fff1, "ingress"),
        ));
        let mut qdiscs = Vec::new();
        assert_eq!(
            parse_dump_part(&part, &mut qdiscs).expect("parse"),
            Part::More
        );
        let done = message(NLMSG_DONE, 1, &0i32.to_ne_bytes());
        assert_eq!(
            parse_dump_part(&done, &mut qdiscs).expect("parse"),
            Part::Last
        );
        let roots: Vec<_> = qdiscs
            .iter()
            .filter(|q| q.parent == TC_H_ROOT)
            .map(|q| (q.ifindex, q.kind.as_str()))
            .collect();
        assert_eq!(roots, [(1, "noqueue"), (2, "mq")]);
        assert_eq!(qdiscs[3].kind, "ingress");
    }

    #[test]
    fn dump_errors_and_garbage_are_errors_not_panics() {
        let mut qdiscs = Vec::new();
        let err = message(NLMSG_ERROR, 1, &(-libc::EPERM).to_ne_bytes());
        let e = parse_dump_part(&err, &mut qdiscs).expect_err("EPERM");
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        let mut cut = message(RTM_NEWQDISC, 1, &qdisc_payload(2, 0, TC_H_ROOT, "mq"));
        cut[0] = 200; // claims more than the datagram holds
        assert!(parse_dump_part(&cut, &mut qdiscs).is_err());
        let short = message(RTM_NEWQDISC, 1, &[0u8; 8]);
        assert!(parse_dump_part(&short, &mut qdiscs).is_err());
        // Another request's answer is skipped.
        let other = message(RTM_NEWQDISC, 9, &qdisc_payload(2, 0, TC_H_ROOT, "mq"));
        assert_eq!(
            parse_dump_part(&other, &mut qdiscs).expect("parse"),
            Part::More
        );
        assert!(qdiscs.is_empty());
    }
}
