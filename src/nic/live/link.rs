//! Making links and addresses over rtnetlink, for the testbed: a veth pair
//! whose two ends are created directly inside two network namespaces
//! (`ip link add A netns X numrxqueues N numtxqueues N type veth peer name
//! B netns Y ...`), a link brought up (`ip link set A up`), an IPv4
//! address added (`ip addr add 198.18.0.1/30 dev A`), a host route through
//! a link (`ip route add 198.18.0.2/32 dev T src 198.18.0.1`).
//!
//! Each request acts in the network namespace of the calling thread
//! (its netlink socket's), except where a namespace is passed by file
//! descriptor (IFLA_NET_NS_FD).

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::sys::socket::SockProtocol;

use crate::base::driver::SetError;
use crate::base::netlink::{push_attr, push_str, set_error, Socket};

const RTM_NEWLINK: u16 = 16;
const RTM_NEWADDR: u16 = 20;
const RTM_NEWROUTE: u16 = 24;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINKINFO: u16 = 18;
const IFLA_NET_NS_FD: u16 = 28;
const IFLA_NUM_TX_QUEUES: u16 = 31;
const IFLA_NUM_RX_QUEUES: u16 = 32;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const VETH_INFO_PEER: u16 = 1;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_PREFSRC: u16 = 7;
const RT_TABLE_MAIN: u8 = 254;
/// The protocol `ip route add` gives a route it adds.
const RTPROT_BOOT: u8 = 3;
const RT_SCOPE_LINK: u8 = 253;
const RTN_UNICAST: u8 = 1;
const IFF_UP: u32 = 1;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const AF_INET: u8 = 2;
/// sizeof(struct ifinfomsg).
const IFINFOMSG_LEN: usize = 16;

/// One end of a veth pair: its name, the namespace it is created in, and
/// its queue counts (RX and TX alike).
pub struct VethEnd<'a> {
    pub name: &'a str,
    pub netns: BorrowedFd<'a>,
    pub queues: u32,
}

/// struct ifinfomsg: family, pad, type, index, flags, change.
fn ifinfomsg(index: i32, flags: u32, change: u32) -> Vec<u8> {
    let mut msg = vec![0u8; 4];
    msg.extend_from_slice(&index.to_ne_bytes());
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&change.to_ne_bytes());
    debug_assert_eq!(msg.len(), IFINFOMSG_LEN);
    msg
}

/// Send one change over a route socket of this thread's namespace.
fn change(kind: u16, flags: u16, body: &[u8]) -> Result<(), SetError> {
    Socket::open(SockProtocol::NetlinkRoute)
        .map_err(|e| set_error(&e))?
        .change(kind, flags, body)
}

/// The name, queue counts and namespace of one end, as attributes.
fn end_attrs(msg: &mut Vec<u8>, end: &VethEnd) {
    push_str(msg, IFLA_IFNAME, end.name);
    push_attr(msg, IFLA_NUM_TX_QUEUES, &end.queues.to_ne_bytes());
    push_attr(msg, IFLA_NUM_RX_QUEUES, &end.queues.to_ne_bytes());
    let fd = end.netns.as_raw_fd() as u32;
    push_attr(msg, IFLA_NET_NS_FD, &fd.to_ne_bytes());
}

/// The RTM_NEWLINK body that creates the pair `a`/`b`.
fn veth_body(a: &VethEnd, b: &VethEnd) -> Vec<u8> {
    let mut body = ifinfomsg(0, 0, 0);
    end_attrs(&mut body, a);
    let mut peer = ifinfomsg(0, 0, 0);
    end_attrs(&mut peer, b);
    let mut data = Vec::new();
    push_attr(&mut data, VETH_INFO_PEER, &peer);
    let mut info = Vec::new();
    push_str(&mut info, IFLA_INFO_KIND, "veth");
    push_attr(&mut info, IFLA_INFO_DATA, &data);
    push_attr(&mut body, IFLA_LINKINFO, &info);
    body
}

/// Create a veth pair with each end inside its own namespace. Fails (EEXIST)
/// when a name is taken there.
pub fn add_veth(a: &VethEnd, b: &VethEnd) -> Result<(), SetError> {
    change(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &veth_body(a, b))
}

fn ifindex(name: &str) -> Result<i32, SetError> {
    let index = nix::net::if_::if_nametoindex(name).map_err(|e| SetError::from_errno(e as i32))?;
    i32::try_from(index).map_err(|_| SetError::from_errno(libc::ERANGE))
}

/// Bring link `name` (in this thread's namespace) up.
pub fn set_up(name: &str) -> Result<(), SetError> {
    let body = ifinfomsg(ifindex(name)?, IFF_UP, IFF_UP);
    change(RTM_NEWLINK, 0, &body)
}

/// Add `addr/prefix` to link `name` (in this thread's namespace).
pub fn add_address(name: &str, addr: Ipv4Addr, prefix: u8) -> Result<(), SetError> {
    let index = ifindex(name)? as u32;
    // struct ifaddrmsg: family, prefixlen, flags, scope (universe), index.
    let mut body = vec![AF_INET, prefix, 0, 0];
    body.extend_from_slice(&index.to_ne_bytes());
    push_attr(&mut body, IFA_LOCAL, &addr.octets());
    push_attr(&mut body, IFA_ADDRESS, &addr.octets());
    change(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &body)
}

/// The RTM_NEWROUTE body of `ip route add DEST/32 dev (index) src SRC`.
fn host_route_body(dest: Ipv4Addr, index: u32, src: Ipv4Addr) -> Vec<u8> {
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope,
    // type, flags.
    let mut body = vec![
        AF_INET,
        32,
        0,
        0,
        RT_TABLE_MAIN,
        RTPROT_BOOT,
        RT_SCOPE_LINK,
        RTN_UNICAST,
    ];
    body.extend_from_slice(&0u32.to_ne_bytes());
    push_attr(&mut body, RTA_DST, &dest.octets());
    push_attr(&mut body, RTA_OIF, &index.to_ne_bytes());
    push_attr(&mut body, RTA_PREFSRC, &src.octets());
    body
}

/// Route `dest`/32 out of link `name` with source address `src` (an
/// address of this namespace), in the calling thread's namespace. The
/// route goes with the link. Fails (EEXIST) when the route exists.
pub fn add_host_route(dest: Ipv4Addr, name: &str, src: Ipv4Addr) -> Result<(), SetError> {
    let body = host_route_body(dest, ifindex(name)? as u32, src);
    change(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn the_veth_request_nests_the_peer_inside_linkinfo() {
        let file = std::fs::File::open("/dev/null").expect("a descriptor");
        let a = VethEnd {
            name: "tb-server",
            netns: file.as_fd(),
            queues: 4,
        };
        let b = VethEnd {
            name: "tb-client",
            netns: file.as_fd(),
            queues: 4,
        };
        let req = veth_body(&a, &b);
        let text = String::from_utf8_lossy(&req);
        let (server, kind, client) = (
            text.find("tb-server").expect("first name"),
            text.find("veth").expect("kind"),
            text.find("tb-client").expect("peer name"),
        );
        assert!(server < kind && kind < client, "{text:?}");
        assert_eq!(req.len() % 4, 0);
    }

    #[test]
    fn a_host_route_names_its_destination_link_and_source() {
        let body = host_route_body(
            Ipv4Addr::new(198, 18, 0, 2),
            7,
            Ipv4Addr::new(198, 18, 0, 1),
        );
        // rtmsg (12 bytes), then three 8-byte attributes.
        assert_eq!(body.len(), 12 + 3 * 8);
        assert_eq!(&body[..8], &[AF_INET, 32, 0, 0, 254, 3, 253, 1]);
        assert_eq!(&body[16..20], &[198, 18, 0, 2]);
        assert_eq!(&body[24..28], &7u32.to_ne_bytes());
        assert_eq!(&body[32..36], &[198, 18, 0, 1]);
    }
}
