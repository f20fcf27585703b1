//! The UDP sockets of this thread's network namespace as the kernel's
//! socket diagnostics report them (NETLINK_SOCK_DIAG, sock_diag(7)): the
//! same sockets as /proc/net/udp, each with its own receive buffer
//! (`sk_rcvbuf`, what getsockopt(SO_RCVBUF) returns), the bytes queued in
//! it and the datagrams it dropped, so that a drop at a full buffer can be
//! named with the buffer that was full. This is what `ss -uam` prints as
//! `skmem:(r…,rb…,…,d…)`.
//!
//! One dump per address family: an `inet_diag_req_v2` for IPPROTO_UDP in
//! every state, asking for INET_DIAG_SKMEMINFO; each answer is an
//! `inet_diag_msg` (include/uapi/linux/inet_diag.h) followed by
//! attributes, of which SKMEMINFO is an array of u32 indexed by
//! SK_MEMINFO_* (include/uapi/linux/sock_diag.h).
//!
//! The socket is opened in the calling thread's network namespace, so a
//! process that entered `--netns NAME` reads that namespace's sockets, as
//! it reads that namespace's /proc/net/udp. A kernel without UDP socket
//! diagnostics (CONFIG_INET_UDP_DIAG) answers ENOENT: [`udp_sockets`] then
//! reads /proc/net/udp, which has no buffer sizes.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use nix::sys::socket::SockProtocol;

use super::udp_sockets::{self, UdpSocket};
use crate::base::netlink::{attrs, malformed, u32_at, Socket};
use crate::base::Root;
use crate::error::KernelError;

/// The sock_diag request and answer type (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u8 = libc::AF_INET6 as u8;
const IPPROTO_UDP: u8 = libc::IPPROTO_UDP as u8;
/// The attribute holding the socket's memory counters.
const INET_DIAG_SKMEMINFO: u16 = 7;
/// Indexes into it.
const SK_MEMINFO_RMEM_ALLOC: usize = 0;
const SK_MEMINFO_RCVBUF: usize = 1;
const SK_MEMINFO_DROPS: usize = 8;
/// `struct inet_diag_req_v2` and `struct inet_diag_msg`.
const REQUEST_LEN: usize = 56;
const MESSAGE_LEN: usize = 72;
/// Every TCP state bit: UDP sockets are TCP_CLOSE (7) when unconnected,
/// TCP_ESTABLISHED (1) when connected.
const ALL_STATES: u32 = u32::MAX;

/// The body of a dump request for the UDP sockets of `family`, with their
/// memory counters.
pub fn request(family: u8) -> Vec<u8> {
    let mut body = vec![0u8; REQUEST_LEN];
    body[0] = family;
    body[1] = IPPROTO_UDP;
    // idiag_ext: a bit per attribute wanted, bit N-1 for attribute N.
    body[2] = 1 << (INET_DIAG_SKMEMINFO - 1);
    body[4..8].copy_from_slice(&ALL_STATES.to_ne_bytes());
    // The socket id (ports, addresses, interface, cookie) stays zero: a
    // dump matches every socket.
    body
}

/// One answer message: the socket, its buffer, queue and drops.
pub fn parse(payload: &[u8]) -> io::Result<UdpSocket> {
    if payload.len() < MESSAGE_LEN {
        return Err(malformed("an inet_diag_msg shorter than 72 bytes"));
    }
    let family = payload[0];
    // idiag_sport is in network byte order.
    let port = u16::from_be_bytes([payload[4], payload[5]]);
    let (ip, name) = match family {
        AF_INET => (
            IpAddr::V4(Ipv4Addr::new(
                payload[8],
                payload[9],
                payload[10],
                payload[11],
            )),
            "udp",
        ),
        AF_INET6 => {
            let mut bytes = [0u8; 16];
            bytes.copy_from_slice(&payload[8..24]);
            (IpAddr::V6(Ipv6Addr::from(bytes)), "udp6")
        }
        _ => return Err(malformed("a socket of a family other than IPv4 or IPv6")),
    };
    let inode = u64::from(u32_at(payload, 68));
    let memory = attrs(&payload[MESSAGE_LEN..])?
        .into_iter()
        .find(|(kind, _)| *kind == INET_DIAG_SKMEMINFO)
        .map(|(_, data)| data)
        .ok_or_else(|| malformed("a socket without INET_DIAG_SKMEMINFO"))?;
    let word = |i: usize| (memory.len() >= (i + 1) * 4).then(|| u64::from(u32_at(memory, i * 4)));
    let (Some(queued), Some(rcvbuf), Some(drops)) = (
        word(SK_MEMINFO_RMEM_ALLOC),
        word(SK_MEMINFO_RCVBUF),
        word(SK_MEMINFO_DROPS),
    ) else {
        // SK_MEMINFO_DROPS came with Linux 4.6.
        return Err(malformed("INET_DIAG_SKMEMINFO without the drop counter"));
    };
    Ok(UdpSocket {
        family: name,
        local: SocketAddr::new(ip, port),
        rx_queue_bytes: queued,
        drops,
        inode,
        rcvbuf_bytes: Some(rcvbuf),
    })
}

/// The UDP sockets of the calling thread's network namespace, IPv4 then
/// IPv6, through sock_diag.
pub fn udp() -> io::Result<Vec<UdpSocket>> {
    let mut socket = Socket::open(SockProtocol::NetlinkSockDiag)?;
    let mut all = Vec::new();
    for family in [AF_INET, AF_INET6] {
        match socket.dump(SOCK_DIAG_BY_FAMILY, &request(family)) {
            Ok(answers) => {
                for answer in answers {
                    all.push(parse(&answer)?);
                }
            }
            // A kernel built without IPv6 has no handler for its family.
            Err(e) if family == AF_INET6 && e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(all)
}

/// The UDP sockets with their buffers where the kernel reports them, else
/// as /proc/net/udp lists them (no buffer sizes).
pub fn udp_sockets(root: &Root) -> Result<Vec<UdpSocket>, KernelError> {
    match udp() {
        Ok(sockets) => Ok(sockets),
        Err(_) => udp_sockets::read(root),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        let text: String = text.split_whitespace().collect();
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
            .collect()
    }

    /// One datagram of the kernel's answer to `request(AF_INET)` on Linux
    /// 6.18 (x86_64): a sink on 127.0.0.1:33658 with SO_RCVBUF 1 (the
    /// kernel's floor, 2304 bytes) sent 20 datagrams of 32 bytes, and the
    /// socket that sent them. `ss -uanm` showed the sink as
    /// `skmem:(r1664,rb2304,t0,tb212992,f2432,w0,o0,bl0,d18)`, and
    /// /proc/net/udp as `0100007F:837A ... 00000000:00000680 ... 18530554
    /// ... 18`.
    const UDP4_6_18: &str = "
        a400000014000200070000002f10000002070000837a00007f0000010000000000000000
        0000000000000000000000000000000000000000000000000e0000000000000000000000
        800600000000000000000000fac01a01050008000000000008000f00000000000c001500
        010000000000000006001600500000002800070080060000000900000000000000400300
        8009000000000000000000000000000012000000a400000014000200070000002f100000
        020700009e04000000000000000000000000000000000000000000000000000000000000
        00000000000000000f0000000000000000000000000000000000000000000000fbc01a01
        050008000000000008000f00000000000c00150001000000000000000600160050000000
        280007000000000000400300000000000040030000000000000000000000000000000000
        000000001400000003000200070000002f10000000000000";

    /// The same for `request(AF_INET6)`: a sink on [::1]:58308, and the
    /// sender on [::]:58053.
    const UDP6_6_18: &str = "
        ac00000014000200070000007e1000000a070000e2c50000000000000000000000000000
        000000000000000000000000000000000000000000000000100000000000000000000000
        00000000000000000000000048c11a01050008000000000005000b000000000008000f00
        000000000c00150001000000000000000600160010000000280007000000000000400300
        00000000004003000000000000000000000000000000000000000000ac00000014000200
        070000007e1000000a070000e3c400000000000000000000000000000000000100000000
        000000000000000000000000000000001100000000000000000000008006000000000000
        0000000047c11a01050008000000000005000b000100000008000f00000000000c001500
        010000000000000006001600100000002800070080060000000900000000000000400300
        80090000000000000000000000000000120000001400000003000200070000007e100000
        00000000";

    fn sockets(recorded: &str, seq: u32) -> Vec<UdpSocket> {
        let bytes = hex(recorded);
        let answers = match crate::base::netlink::answer_part(&bytes, seq).expect("answer") {
            crate::base::netlink::Part::Last(answers) => answers,
            other => panic!("the dump did not end: {other:?}"),
        };
        answers
            .iter()
            .map(|m| parse(m.payload).expect("a socket"))
            .collect()
    }

    #[test]
    fn sockets_with_their_own_buffer_queue_and_drops() {
        let v4 = sockets(UDP4_6_18, 7);
        assert_eq!(v4.len(), 2);
        let sink = &v4[0];
        assert_eq!(sink.local.to_string(), "127.0.0.1:33658");
        assert_eq!(
            (
                sink.family,
                sink.rcvbuf_bytes,
                sink.rx_queue_bytes,
                sink.drops,
                sink.inode
            ),
            ("udp", Some(2304), 1664, 18, 18_530_554)
        );
        // The sender kept the default buffer (net.core.rmem_default).
        assert_eq!(v4[1].local.to_string(), "0.0.0.0:40452");
        assert_eq!((v4[1].rcvbuf_bytes, v4[1].drops), (Some(212_992), 0));

        let v6 = sockets(UDP6_6_18, 7);
        assert_eq!(v6.len(), 2);
        assert_eq!(v6[1].local.to_string(), "[::1]:58308");
        assert_eq!(
            (
                v6[1].family,
                v6[1].rcvbuf_bytes,
                v6[1].rx_queue_bytes,
                v6[1].drops
            ),
            ("udp6", Some(2304), 1664, 18)
        );
        assert_eq!(v6[0].local.to_string(), "[::]:58053");
    }

    #[test]
    fn the_request_asks_for_every_udp_socket_and_its_memory() {
        let body = request(AF_INET6);
        assert_eq!(body.len(), REQUEST_LEN);
        assert_eq!(&body[..4], &[AF_INET6, IPPROTO_UDP, 0x40, 0]);
        assert_eq!(&body[4..8], &[0xff; 4]);
        assert!(body[8..].iter().all(|&b| b == 0));
    }

    #[test]
    fn damage_is_an_error_not_a_socket() {
        let bytes = hex(UDP4_6_18);
        let answers = match crate::base::netlink::answer_part(&bytes, 7).expect("answer") {
            crate::base::netlink::Part::Last(answers) => answers,
            other => panic!("{other:?}"),
        };
        let whole = answers[0].payload;
        assert!(parse(&whole[..40]).is_err());
        // Without its attributes: no buffer to report.
        let err = parse(&whole[..MESSAGE_LEN]).expect_err("no SKMEMINFO");
        assert!(err.to_string().contains("INET_DIAG_SKMEMINFO"), "{err}");
        // An SKMEMINFO cut before the drop counter.
        let mut short = whole[..MESSAGE_LEN].to_vec();
        short.extend_from_slice(&[12, 0, 7, 0, 0, 0, 0, 0, 0, 9, 0, 0]);
        assert!(parse(&short).is_err());
        let mut other = whole.to_vec();
        other[0] = 1;
        assert!(parse(&other).is_err());
    }
}
