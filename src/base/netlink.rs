//! Netlink framing shared by the rtnetlink client (qdiscs), the netdev
//! generic-netlink client (both in `nic`) and the socket reader of
//! `host::sock_diag` (NETLINK_SOCK_DIAG): one socket per request, messages written and
//! read by hand (nlmsghdr, attributes), dumps collected to NLMSG_DONE,
//! changes acknowledged with the kernel's extended-ack words.
//!
//! Why by hand and not netlink-packet-* or netlink-bindings: nettune sends
//! seven kinds of request and reads a dozen attributes; the framing below is
//! the whole protocol it needs, with no async runtime and no generated code
//! to keep in step with the kernel's YAML specs.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{
    recv, send, setsockopt, socket, sockopt, AddressFamily, MsgFlags, SockFlag, SockProtocol,
    SockType,
};
use nix::sys::time::{TimeVal, TimeValLike};

use crate::base::driver::SetError;

pub const NLMSG_HDRLEN: usize = 16;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLM_F_REQUEST: u16 = 0x01;
pub const NLM_F_ACK: u16 = 0x04;
pub const NLM_F_DUMP: u16 = 0x300;
/// In an NLMSG_ERROR: the echoed request is only its header.
const NLM_F_CAPPED: u16 = 0x100;
/// In an NLMSG_ERROR: extended-ack attributes follow the echoed request.
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLMSGERR_ATTR_MSG: u16 = 1;
const SOL_NETLINK: i32 = 270;
const NETLINK_EXT_ACK: i32 = 11;
/// Attribute type bits that are flags, not the type (NLA_F_NESTED,
/// NLA_F_NET_BYTEORDER).
const NLA_TYPE_MASK: u16 = 0x3fff;
/// A dump part never exceeds this (the kernel sizes them to a page or to
/// the reader's last buffer, at most 32 KiB).
const RECV_BUFFER: usize = 64 * 1024;
/// An answer from the kernel takes microseconds; this only bounds a hang.
const RECV_TIMEOUT_SECONDS: i64 = 2;

pub fn align4(len: usize) -> usize {
    (len + 3) & !3
}

pub fn u16_at(buf: &[u8], offset: usize) -> u16 {
    u16::from_ne_bytes([buf[offset], buf[offset + 1]])
}

pub fn u32_at(buf: &[u8], offset: usize) -> u32 {
    u32::from_ne_bytes([
        buf[offset],
        buf[offset + 1],
        buf[offset + 2],
        buf[offset + 3],
    ])
}

pub fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed netlink answer: {what}"),
    )
}

/// Append attribute `kind` holding `data`, padded to 4 bytes.
pub fn push_attr(msg: &mut Vec<u8>, kind: u16, data: &[u8]) {
    let len = 4 + data.len();
    msg.extend_from_slice(&(len as u16).to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(data);
    msg.resize(align4(msg.len()), 0);
}

/// A string attribute, NUL-terminated as the kernel expects.
pub fn push_str(msg: &mut Vec<u8>, kind: u16, text: &str) {
    let mut bytes = text.as_bytes().to_vec();
    bytes.push(0);
    push_attr(msg, kind, &bytes);
}

/// One message: header (length, type, flags, sequence, port 0) and body.
pub fn message(kind: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(NLMSG_HDRLEN + body.len());
    msg.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    // nlmsg_pid 0: the kernel assigns our port.
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(body);
    msg
}

/// One message of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub kind: u16,
    pub flags: u16,
    pub seq: u32,
    pub payload: &'a [u8],
}

/// The messages of one datagram, or an error for a length that does not
/// fit.
pub fn messages(mut buf: &[u8]) -> io::Result<Vec<Message<'_>>> {
    let mut out = Vec::new();
    while buf.len() >= NLMSG_HDRLEN {
        let len = u32_at(buf, 0) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Err(malformed("message length outside the datagram"));
        }
        out.push(Message {
            kind: u16_at(buf, 4),
            flags: u16_at(buf, 6),
            seq: u32_at(buf, 8),
            payload: &buf[NLMSG_HDRLEN..len],
        });
        buf = &buf[align4(len).min(buf.len())..];
    }
    Ok(out)
}

/// The attributes of a message body (after its fixed header) or of a
/// nested attribute: (type without flag bits, data).
pub fn attrs(mut buf: &[u8]) -> io::Result<Vec<(u16, &[u8])>> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = usize::from(u16_at(buf, 0));
        if len < 4 || len > buf.len() {
            return Err(malformed("attribute length outside the message"));
        }
        out.push((u16_at(buf, 2) & NLA_TYPE_MASK, &buf[4..len]));
        buf = &buf[align4(len).min(buf.len())..];
    }
    Ok(out)
}

/// A u32 attribute's value.
pub fn attr_u32(data: &[u8]) -> io::Result<u32> {
    if data.len() != 4 {
        return Err(malformed("a 32-bit attribute of another size"));
    }
    Ok(u32_at(data, 0))
}

/// A u16 attribute's value.
pub fn attr_u16(data: &[u8]) -> io::Result<u16> {
    if data.len() != 2 {
        return Err(malformed("a 16-bit attribute of another size"));
    }
    Ok(u16_at(data, 0))
}

/// An NLA_UINT attribute: 4 or 8 bytes, as the value needs.
pub fn attr_uint(data: &[u8]) -> io::Result<u64> {
    match data.len() {
        4 => Ok(u64::from(u32_at(data, 0))),
        8 => {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(data);
            Ok(u64::from_ne_bytes(bytes))
        }
        _ => Err(malformed(
            "a variable-size integer that is neither 4 nor 8 bytes",
        )),
    }
}

/// A string attribute, up to its NUL.
pub fn attr_str(data: &[u8]) -> String {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    String::from_utf8_lossy(&data[..end]).into_owned()
}

/// Push an NLA_UINT value in the fewest bytes the kernel takes.
pub fn push_uint(msg: &mut Vec<u8>, kind: u16, value: u64) {
    match u32::try_from(value) {
        Ok(small) => push_attr(msg, kind, &small.to_ne_bytes()),
        Err(_) => push_attr(msg, kind, &value.to_ne_bytes()),
    }
}

/// The errno of an NLMSG_ERROR payload (0: an acknowledgement) and, when
/// the kernel gave one, its extended-ack words.
pub fn error_of(msg: &Message) -> io::Result<(i32, Option<String>)> {
    if msg.payload.len() < 4 {
        return Err(malformed("short NLMSG_ERROR"));
    }
    let errno = -(u32_at(msg.payload, 0) as i32);
    Ok((errno, ext_ack_message(msg.payload, msg.flags)))
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
    let tlvs = payload.get(4 + align4(echoed)..)?;
    attrs(tlvs)
        .ok()?
        .into_iter()
        .find(|(kind, _)| *kind == NLMSGERR_ATTR_MSG)
        .map(|(_, text)| attr_str(text))
}

/// A refusal with the kernel's extended-ack words: its errno is kept
/// (an io::Error built from words alone would lose it).
#[derive(Debug)]
struct KernelWords {
    errno: i32,
    text: String,
}

impl std::fmt::Display for KernelWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for KernelWords {}

/// An errno with the kernel's words, as an io::Error.
fn io_error(errno: i32, words: Option<String>) -> io::Error {
    let base = io::Error::from_raw_os_error(errno);
    match words {
        Some(words) if !words.is_empty() => io::Error::new(
            base.kind(),
            KernelWords {
                errno,
                text: format!("{} ({base})", words.trim_end_matches('.')),
            },
        ),
        _ => base,
    }
}

/// The errno of an error from this module (EIO when it has none).
pub fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error()
        .or_else(|| {
            e.get_ref()
                .and_then(|inner| inner.downcast_ref::<KernelWords>())
                .map(|k| k.errno)
        })
        .unwrap_or(libc::EIO)
}

/// What one datagram of an answer to request `seq` said.
#[derive(Debug, PartialEq, Eq)]
pub enum Part<'a> {
    /// Answer messages; more datagrams follow (a dump not yet done).
    More(Vec<Message<'a>>),
    /// The last answer messages: NLMSG_DONE, or the acknowledgement.
    Last(Vec<Message<'a>>),
}

/// Sort one datagram of the answer to `seq`: messages of other requests are
/// skipped; an error ends the answer with its errno and words.
pub fn answer_part(buf: &[u8], seq: u32) -> io::Result<Part<'_>> {
    let mut answers = Vec::new();
    for msg in messages(buf)? {
        if msg.seq != seq {
            continue;
        }
        match msg.kind {
            NLMSG_DONE => {
                // The dump's own error, if it ended early.
                if msg.payload.len() >= 4 {
                    let errno = u32_at(msg.payload, 0) as i32;
                    if errno < 0 {
                        return Err(io::Error::from_raw_os_error(-errno));
                    }
                }
                return Ok(Part::Last(answers));
            }
            NLMSG_ERROR => {
                let (errno, words) = error_of(&msg)?;
                if errno != 0 {
                    return Err(io_error(errno, words));
                }
                return Ok(Part::Last(answers));
            }
            _ => answers.push(msg),
        }
    }
    Ok(Part::More(answers))
}

/// A netlink socket of one protocol, in the calling thread's network
/// namespace, with extended acks on and a receive timeout.
pub struct Socket {
    fd: OwnedFd,
    seq: u32,
}

impl Socket {
    pub fn open(protocol: SockProtocol) -> io::Result<Socket> {
        let fd: OwnedFd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            protocol,
        )?;
        setsockopt(
            &fd,
            sockopt::ReceiveTimeout,
            &TimeVal::seconds(RECV_TIMEOUT_SECONDS),
        )?;
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
        Ok(Socket { fd, seq: 0 })
    }

    /// Send message `kind` with `flags` (NLM_F_REQUEST added) and collect
    /// the answer's messages until the kernel ends it. A request without
    /// NLM_F_DUMP or NLM_F_ACK must be answered by exactly one message,
    /// which ends it.
    pub fn request(&mut self, kind: u16, flags: u16, body: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        self.seq = self.seq.wrapping_add(1);
        let request = message(kind, NLM_F_REQUEST | flags, self.seq, body);
        if send(self.fd.as_raw_fd(), &request, MsgFlags::empty())? != request.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "short netlink send",
            ));
        }
        let single = flags & (NLM_F_DUMP | NLM_F_ACK) == 0;
        let mut out = Vec::new();
        let mut buf = vec![0u8; RECV_BUFFER];
        loop {
            // MSG_TRUNC: the real length, so a cut-off message is noticed.
            let len = recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::MSG_TRUNC)?;
            if len > buf.len() {
                return Err(malformed("an answer larger than 64 KiB"));
            }
            let (last, answers) = match answer_part(&buf[..len], self.seq)? {
                Part::More(a) => (false, a),
                Part::Last(a) => (true, a),
            };
            let got = !answers.is_empty();
            out.extend(answers.into_iter().map(|m| m.payload.to_vec()));
            if last || (single && got) {
                return Ok(out);
            }
        }
    }

    /// A dump: every answer message's payload.
    pub fn dump(&mut self, kind: u16, body: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        self.request(kind, NLM_F_DUMP, body)
    }

    /// A change: wait for the acknowledgement; a refusal keeps its errno
    /// and the kernel's words.
    pub fn change(&mut self, kind: u16, flags: u16, body: &[u8]) -> Result<(), SetError> {
        self.request(kind, NLM_F_ACK | flags, body)
            .map(|_| ())
            .map_err(|e| set_error(&e))
    }
}

/// The index of interface `iface` in the calling thread's network
/// namespace, for a change's request.
pub fn ifindex(iface: &str) -> Result<u32, SetError> {
    nix::net::if_::if_nametoindex(iface).map_err(|e| SetError::from_errno(e as i32))
}

/// An rtnetlink socket (qdiscs, links' XDP), for a change.
pub fn route() -> Result<Socket, SetError> {
    Socket::open(SockProtocol::NetlinkRoute).map_err(|e| set_error(&e))
}

/// An io::Error as the `SetError` apply classifies.
pub fn set_error(e: &io::Error) -> SetError {
    SetError {
        errno: errno_of(e),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_message(seq: u32, errno: i32, request: &[u8], words: Option<&str>) -> Vec<u8> {
        let mut payload = (-errno).to_ne_bytes().to_vec();
        payload.extend_from_slice(&request[..NLMSG_HDRLEN]);
        if let Some(words) = words {
            push_str(&mut payload, NLMSGERR_ATTR_MSG, words);
        }
        let mut msg = message(NLMSG_ERROR, 0, seq, &payload);
        if words.is_some() {
            msg[6..8].copy_from_slice(&(NLM_F_CAPPED | NLM_F_ACK_TLVS).to_ne_bytes());
        }
        msg
    }

    #[test]
    fn an_error_keeps_errno_and_the_kernels_words() {
        let request = message(36, NLM_F_REQUEST | NLM_F_ACK, 2, &[0u8; 20]);
        let refused = error_message(
            2,
            libc::ENOENT,
            &request,
            Some("Specified qdisc kind is unknown"),
        );
        let err = answer_part(&refused, 2).expect_err("refused");
        assert_eq!(set_error(&err).errno, libc::ENOENT);
        assert!(
            err.to_string().contains("Specified qdisc kind is unknown"),
            "{err}"
        );
        let plain = error_message(2, libc::EPERM, &request, None);
        let err = answer_part(&plain, 2).expect_err("EPERM");
        assert_eq!(err.raw_os_error(), Some(libc::EPERM));
        assert_eq!(set_error(&err).errno, libc::EPERM);
        let ok = error_message(2, 0, &request, None);
        assert_eq!(answer_part(&ok, 2).expect("ack"), Part::Last(Vec::new()));
        // Another request's answer is not ours.
        assert_eq!(
            answer_part(&ok, 9).expect("skipped"),
            Part::More(Vec::new())
        );
    }

    #[test]
    fn dumps_end_at_done_and_report_its_error() {
        let mut part = message(16, 2, 1, &[1, 2, 3, 4]);
        part.extend(message(16, 2, 1, &[5, 6, 7, 8]));
        match answer_part(&part, 1).expect("parse") {
            Part::More(m) => assert_eq!(m.len(), 2),
            other => panic!("{other:?}"),
        }
        let done = message(NLMSG_DONE, 2, 1, &0i32.to_ne_bytes());
        assert_eq!(answer_part(&done, 1).expect("done"), Part::Last(Vec::new()));
        let failed = message(NLMSG_DONE, 2, 1, &(-libc::EOPNOTSUPP).to_ne_bytes());
        let err = answer_part(&failed, 1).expect_err("dump error");
        assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut cut = message(16, 0, 1, &[0u8; 8]);
        cut[0] = 200; // claims more than the datagram holds
        assert!(messages(&cut).is_err());
        assert!(attrs(&[8, 0, 1, 0, 1, 2]).is_err());
        assert!(attrs(&[2, 0, 1, 0]).is_err());
        assert!(attr_u32(&[1, 2]).is_err());
        assert!(attr_uint(&[1, 2, 3]).is_err());
    }

    #[test]
    fn attributes_round_trip_with_flag_bits_dropped() {
        let mut body = Vec::new();
        push_attr(&mut body, 3 | 0x8000, &7u32.to_ne_bytes());
        push_uint(&mut body, 4, 20_000);
        push_uint(&mut body, 5, 1 << 40);
        push_str(&mut body, 6, "netdev");
        let got = attrs(&body).expect("attrs");
        assert_eq!(got[0].0, 3);
        assert_eq!(attr_u32(got[0].1).expect("u32"), 7);
        assert_eq!(got[1].1.len(), 4);
        assert_eq!(attr_uint(got[1].1).expect("uint"), 20_000);
        assert_eq!(attr_uint(got[2].1).expect("uint"), 1 << 40);
        assert_eq!(attr_str(got[3].1), "netdev");
    }
}
