//! What each drop reason means: the layer of the path it belongs to, what
//! happened, the fix where there is one, and the public source that says
//! so. The reasons themselves come from the running kernel
//! ([`super::reasons`]); this table only explains the names. A name it
//! does not list is placed by its family (`TCP_...`, `QDISC_...`) or, when
//! no family fits, reported as unmapped.
//!
//! The meaning of every reason is documented beside its definition in the
//! kernel, include/net/dropreason-core.h ([`DROPREASON`]).

use serde::Serialize;

use crate::base::drop_layer::Layer;

pub const DROPREASON: &str =
    "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/tree/include/net/dropreason-core.h";
const SOCKET7: &str = "https://man7.org/linux/man-pages/man7/socket.7.html";
const RX_MILLION: &str = "https://blog.cloudflare.com/how-to-receive-a-million-packets/";
const SYSCTL_NET: &str = "https://docs.kernel.org/admin-guide/sysctl/net.html";
const SCALING: &str = "https://docs.kernel.org/networking/scaling.html";
const IP_SYSCTL: &str = "https://docs.kernel.org/networking/ip-sysctl.html";
const TC8: &str = "https://man7.org/linux/man-pages/man8/tc.8.html";
const TBF8: &str = "https://man7.org/linux/man-pages/man8/tc-tbf.8.html";
const FQ8: &str = "https://man7.org/linux/man-pages/man8/tc-fq.8.html";
const NFT8: &str = "https://www.netfilter.org/projects/nftables/manpage.html";
const LISTEN2: &str = "https://man7.org/linux/man-pages/man2/listen.2.html";
const TCP7: &str = "https://man7.org/linux/man-pages/man7/tcp.7.html";
const UDP7: &str = "https://man7.org/linux/man-pages/man7/udp.7.html";

/// Where a reason sits; some depend on the packet (IPv4 or IPv6, UDP or
/// TCP), which the tracer records with each drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    At(Layer),
    /// IPv4 or IPv6, by the packet's ethertype.
    Ip,
    /// UDP or UDPv6, by the packet's ethertype.
    Udp,
    /// The packet's transport (UDP, UDPv6, TCP); IP when it is another.
    Transport,
}

impl Place {
    /// The layer of a drop of a packet with `ethertype` (host order) and
    /// IP protocol `l4` (0: unknown).
    pub fn layer(self, ethertype: u16, l4: u8) -> Layer {
        let v6 = ethertype == ETH_P_IPV6;
        let ip = |v6: bool| if v6 { Layer::Ip6 } else { Layer::Ip };
        let udp = |v6: bool| if v6 { Layer::Udp6 } else { Layer::Udp };
        match self {
            Place::At(layer) => layer,
            Place::Ip => ip(v6),
            Place::Udp => udp(v6),
            Place::Transport => match l4 {
                IPPROTO_UDP | IPPROTO_UDPLITE => udp(v6),
                IPPROTO_TCP => Layer::Tcp,
                _ if v6 || ethertype == ETH_P_IP => ip(v6),
                _ => Layer::Other,
            },
        }
    }

    /// The layers it can give, for tables.
    pub fn title(self) -> &'static str {
        match self {
            Place::At(layer) => layer.title(),
            Place::Ip => "IPv4/IPv6",
            Place::Udp => "UDP/UDPv6",
            Place::Transport => "UDP/TCP",
        }
    }
}

pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const ETH_P_ARP: u16 = 0x0806;
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_ICMPV6: u8 = 58;
pub const IPPROTO_UDPLITE: u8 = 136;

/// How well nettune knows a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mapping {
    /// Listed by name, with what it means.
    Exact,
    /// Placed by its family (`TCP_...`); no fix of its own.
    Family,
    /// Neither: counted under `other`.
    Unmapped,
}

/// What nettune says about one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub place: Place,
    pub what: &'static str,
    pub fix: Option<&'static str>,
    pub source: &'static str,
    pub mapping: Mapping,
}

type Row = (
    &'static str,
    Place,
    &'static str,
    Option<&'static str>,
    &'static str,
);

use Layer::*;
use Place::{At, Transport};

const NOT_TUNING: Option<&str> = None;
const CHECKSUM: Option<&str> = Some(
    "corrupted on the way or by a device: check cables and the NIC's error counters; \
     hardware or configuration, not tuning",
);
const QDISC_LIMIT: Option<&str> = Some(
    "the qdisc's queue was full: raise its limit (tc qdisc change ... limit N), or let the \
     sender pace itself (fq, TCP pacing) so the queue stays short",
);
const TCP_CHECK: &str = "TCP's own checks refused the segment (old, duplicate, out of window or \
     state): expected in small numbers, not a tuning problem";

/// Every reason nettune knows by name.
const ROWS: &[Row] = &[
    ("NOT_SPECIFIED", At(Other), "the kernel gave no reason at this place (its location says where)", None, DROPREASON),
    ("NO_SOCKET", Transport, "no socket was bound to the destination port (UDP answers with ICMP port unreachable, TCP with a reset)", Some("nothing listens there: start the service or fix the sender's port; not a tuning problem"), UDP7),
    ("SOCKET_CLOSE", Transport, "the socket was closed while data still arrived", NOT_TUNING, DROPREASON),
    ("SOCKET_FILTER", Transport, "a socket filter (SO_ATTACH_FILTER, a BPF socket program) refused it", Some("the application's own filter decided: not tuning"), SOCKET7),
    ("SOCKET_RCVBUFF", Transport, "the socket's receive buffer was full: the reader fell behind", Some("read faster (more reader threads with SO_REUSEPORT, recvmmsg batches) or give the socket a larger buffer: SO_RCVBUF, up to net.core.rmem_max (`nettune plan --profile pps` raises both)"), RX_MILLION),
    ("UNIX_DISCONNECT", At(Other), "a Unix socket's peer was gone", NOT_TUNING, DROPREASON),
    ("UNIX_SKIP_OOB", At(Other), "out-of-band data skipped on a Unix socket", NOT_TUNING, DROPREASON),
    ("PKT_TOO_SMALL", Place::Ip, "shorter than its headers say", CHECKSUM, DROPREASON),
    ("TCP_CSUM", At(Tcp), "bad TCP checksum", CHECKSUM, DROPREASON),
    ("UDP_CSUM", Place::Udp, "bad UDP checksum", CHECKSUM, DROPREASON),
    ("NETFILTER_DROP", At(Netfilter), "a netfilter rule dropped it (nftables or iptables, or conntrack)", Some("a rule decided, not a limit: find it with `nft list ruleset` or `iptables -L -v -n` (its counter grows with these drops)"), NFT8),
    ("OTHERHOST", Place::Ip, "the frame was addressed to another host's MAC (a promiscuous interface, a bridge or veth peer)", Some("not for this host: configuration, not tuning"), DROPREASON),
    ("IP_CSUM", Place::Ip, "bad IP header checksum", CHECKSUM, DROPREASON),
    ("IP_INHDR", Place::Ip, "a bad IP header (version, length, options)", CHECKSUM, DROPREASON),
    ("IP_RPFILTER", Place::Ip, "the reverse-path filter refused the source: the route back to it leaves by another interface", Some("asymmetric routing: fix the routes, or set net.ipv4.conf.IFACE.rp_filter to 2 (loose)"), IP_SYSCTL),
    ("UNICAST_IN_L2_MULTICAST", Place::Ip, "an IP unicast packet in a link-layer multicast or broadcast frame", Some("a sender's or a switch's configuration, not tuning"), DROPREASON),
    ("XFRM_POLICY", Place::Ip, "an IPsec (xfrm) policy refused it", Some("an IPsec policy decided: configuration"), DROPREASON),
    ("IP_NOPROTO", Place::Ip, "no handler for its IP protocol on this host (a module not loaded)", NOT_TUNING, DROPREASON),
    ("PROTO_MEM", Transport, "the protocol's memory for all sockets was used up (net.ipv4.udp_mem or tcp_mem)", Some("raise net.ipv4.udp_mem or net.ipv4.tcp_mem, or find the sockets that hold memory (`ss -m`)"), IP_SYSCTL),
    ("TCP_AUTH_HDR", At(Tcp), "TCP-MD5 or TCP-AO signature header missing or both present", Some("the peers' authentication keys differ: configuration"), DROPREASON),
    ("TCP_MD5NOTFOUND", At(Tcp), "a TCP-MD5 signature was expected and missing", Some("the peers' authentication keys differ: configuration"), DROPREASON),
    ("TCP_MD5UNEXPECTED", At(Tcp), "a TCP-MD5 signature came where none was expected", Some("the peers' authentication keys differ: configuration"), DROPREASON),
    ("TCP_MD5FAILURE", At(Tcp), "a TCP-MD5 signature did not match", Some("the peers' authentication keys differ: configuration"), DROPREASON),
    ("TCP_AONOTFOUND", At(Tcp), "a TCP-AO signature was expected and missing", Some("the peers' authentication keys differ: configuration"), DROPREASON),
    ("TCP_AOUNEXPECTED", At(Tcp), "a TCP-AO signature came where none was expected", Some("the peers' authentication keys differ: configuration"), DROPREASON),
    ("TCP_AOKEYNOTFOUND", At(Tcp), "no TCP-AO key matches the segment", Some("the peers' authentication keys differ: configuration"), DROPREASON),
    ("TCP_AOFAILURE", At(Tcp), "a TCP-AO signature did not match", Some("the peers' authentication keys differ: configuration"), DROPREASON),
    ("SOCKET_BACKLOG", Transport, "the socket's backlog was full (packets that came while the application held the socket)", Some("the receive buffer bounds the backlog: raise SO_RCVBUF or net.ipv4.tcp_rmem, and hold the socket for shorter calls"), SOCKET7),
    ("TCP_FLAGS", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_ABORT_ON_DATA", At(Tcp), "data arrived for a socket the application had closed (the connection is reset)", NOT_TUNING, TCP7),
    ("TCP_ZEROWINDOW", At(Tcp), "the receiver's window was zero: its application reads slower than the sender sends", Some("read faster, or a larger receive buffer (net.ipv4.tcp_rmem)"), TCP7),
    ("TCP_OLD_DATA", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_OVERWINDOW", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_OFOMERGE", At(Tcp), "an out-of-order segment already held was dropped as a duplicate", NOT_TUNING, TCP7),
    ("TCP_RFC7323_PAWS", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_RFC7323_PAWS_ACK", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_RFC7323_TW_PAWS", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_RFC7323_TSECR", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_LISTEN_OVERFLOW", At(Tcp), "a listener's accept queue was full", Some("accept faster, and raise the listen() backlog with net.core.somaxconn (and net.ipv4.tcp_max_syn_backlog)"), LISTEN2),
    ("TCP_OLD_SEQUENCE", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_INVALID_SEQUENCE", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_INVALID_END_SEQUENCE", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_INVALID_ACK_SEQUENCE", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_RESET", At(Tcp), "a reset ended the connection; queued data went with it", NOT_TUNING, TCP7),
    ("TCP_INVALID_SYN", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_CLOSE", At(Tcp), "a segment for a closed connection", NOT_TUNING, TCP7),
    ("TCP_FASTOPEN", At(Tcp), "TCP Fast Open data that could not be accepted", NOT_TUNING, TCP7),
    ("TCP_OLD_ACK", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_TOO_OLD_ACK", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_ACK_UNSENT_DATA", At(Tcp), TCP_CHECK, NOT_TUNING, TCP7),
    ("TCP_OFO_QUEUE_PRUNE", At(Tcp), "the out-of-order queue was pruned: the socket ran out of receive memory", Some("raise net.ipv4.tcp_rmem (and tcp_mem); loss upstream is what fills the queue"), IP_SYSCTL),
    ("TCP_OFO_DROP", At(Tcp), "an out-of-order segment beyond the receive window or memory", Some("raise net.ipv4.tcp_rmem; loss upstream is what makes segments arrive out of order"), IP_SYSCTL),
    ("IP_OUTNOROUTES", Place::Ip, "no route to the destination when sending", Some("routing configuration: add the route"), DROPREASON),
    ("BPF_CGROUP_EGRESS", At(Other), "a cgroup BPF program refused the packet on egress", Some("a policy program decided: configuration"), DROPREASON),
    ("IPV6DISABLED", At(Ip6), "IPv6 is disabled on the interface", Some("configuration (net.ipv6.conf.IFACE.disable_ipv6)"), IP_SYSCTL),
    ("NEIGH_CREATEFAIL", Place::Ip, "no neighbour (ARP/ND) entry could be made: the table is full", Some("raise net.ipv4.neigh.default.gc_thresh3 (and the IPv6 one)"), IP_SYSCTL),
    ("NEIGH_FAILED", Place::Ip, "neighbour resolution (ARP/ND) failed: the next hop does not answer", Some("the next hop is down or misconfigured: not tuning"), DROPREASON),
    ("NEIGH_QUEUEFULL", Place::Ip, "too many packets waited for neighbour resolution", Some("the next hop answers ARP/ND slowly or not at all; if it is only slow, raise neigh.default.unres_qlen_bytes"), IP_SYSCTL),
    ("NEIGH_DEAD", Place::Ip, "the neighbour entry went away while packets waited", NOT_TUNING, DROPREASON),
    ("NEIGH_HH_FILLFAIL", Place::Ip, "the link-layer header could not be filled in", NOT_TUNING, DROPREASON),
    ("TC_EGRESS", At(Qdisc), "a tc filter or action dropped it on egress (clsact, tc BPF)", Some("a tc rule decided: `tc filter show dev IFACE egress`"), TC8),
    ("SECURITY_HOOK", At(Other), "a security module (SELinux, AppArmor, ...) refused it", Some("a security policy decided: configuration"), DROPREASON),
    ("QDISC_DROP", At(Qdisc), "a qdisc dropped it: its queue was full, or its policy", QDISC_LIMIT, TBF8),
    ("QDISC_OVERLIMIT", At(Qdisc), "the qdisc's queue was over its limit", QDISC_LIMIT, TBF8),
    ("QDISC_CONGESTED", At(Qdisc), "an AQM (CoDel, PIE, RED) dropped it to signal congestion", Some("intended: let ECN mark instead (net.ipv4.tcp_ecn) where both ends take it"), IP_SYSCTL),
    ("CAKE_FLOOD", At(Qdisc), "cake's flood protection dropped it", QDISC_LIMIT, TC8),
    ("FQ_BAND_LIMIT", At(Qdisc), "fq's per-band packet limit was reached", QDISC_LIMIT, FQ8),
    ("FQ_HORIZON_LIMIT", At(Qdisc), "the packet's send time was beyond fq's horizon", Some("the sender schedules too far ahead: raise fq's horizon or pace closer"), FQ8),
    ("FQ_FLOW_LIMIT", At(Qdisc), "one flow filled its share of fq (flow_limit)", Some("raise fq's flow_limit, or let the flow pace itself"), FQ8),
    ("CPU_BACKLOG", At(Softnet), "a CPU's input backlog was full: RPS, a veth or a driver without NAPI queued packets for it faster than it took them", Some("raise net.core.netdev_max_backlog, or spread the load over more CPUs with RPS (`nettune plan --profile pps`)"), SYSCTL_NET),
    ("XDP", At(Nic), "an XDP program dropped it (XDP_DROP or XDP_ABORTED)", Some("the XDP program on the interface decided (`ip link show`): not tuning"), DROPREASON),
    ("TC_INGRESS", At(Qdisc), "a tc filter or action dropped it on ingress (clsact, tc BPF)", Some("a tc rule decided: `tc filter show dev IFACE ingress`"), TC8),
    ("UNHANDLED_PROTO", At(Other), "no protocol on this host takes its ethertype", NOT_TUNING, DROPREASON),
    ("SKB_CSUM", At(Other), "computing its checksum failed on the way out", NOT_TUNING, DROPREASON),
    ("SKB_GSO_SEG", At(Other), "segmenting a large (GSO) packet failed", NOT_TUNING, DROPREASON),
    ("SKB_UCOPY_FAULT", At(Other), "copying from user memory failed", NOT_TUNING, DROPREASON),
    ("DEV_HDR", At(Nic), "the device found a bad header or metadata", NOT_TUNING, DROPREASON),
    ("DEV_READY", At(Nic), "the device was not ready (down, or its qdisc being replaced)", Some("the interface is down or being changed: configuration"), DROPREASON),
    ("FULL_RING", At(Nic), "a device's ring was full (a veth peer, tun, a driver's TX ring)", Some("the receiving side is slower: give a veth more queues and GRO, read a tun faster"), SCALING),
    ("NOMEM", At(Other), "the kernel could not allocate memory for it", Some("the host was short of memory"), DROPREASON),
    ("HDR_TRUNC", Place::Ip, "its headers were cut short", CHECKSUM, DROPREASON),
    ("TAP_FILTER", At(Other), "a tun/tap device's filter refused it", NOT_TUNING, DROPREASON),
    ("TAP_TXFILTER", At(Other), "a tun/tap device's transmit filter refused it", NOT_TUNING, DROPREASON),
    ("ICMP_CSUM", Place::Ip, "bad ICMP checksum", CHECKSUM, DROPREASON),
    ("INVALID_PROTO", Place::Ip, "the protocol field is invalid", CHECKSUM, DROPREASON),
    ("IP_INADDRERRORS", Place::Ip, "an invalid destination address (IP InAddrErrors)", Some("a sender's or a route's configuration"), DROPREASON),
    ("IP_INNOROUTES", Place::Ip, "no route for the destination on input (IP InNoRoutes)", Some("routing configuration"), DROPREASON),
    ("IP_LOCAL_SOURCE", Place::Ip, "a packet from outside with one of this host's addresses as source (a loop, or spoofed)", Some("configuration (net.ipv4.conf.IFACE.accept_local)"), IP_SYSCTL),
    ("IP_INVALID_SOURCE", Place::Ip, "an invalid source address (multicast, broadcast, zero)", NOT_TUNING, DROPREASON),
    ("IP_LOCALNET", Place::Ip, "a loopback (127/8) address arrived from outside", Some("configuration (net.ipv4.conf.IFACE.route_localnet)"), IP_SYSCTL),
    ("IP_INVALID_DEST", Place::Ip, "an invalid destination address", NOT_TUNING, DROPREASON),
    ("PKT_TOO_BIG", Place::Ip, "larger than the MTU and not allowed to fragment", Some("path MTU: the same MTU on both ends, or clamp TCP's MSS"), IP_SYSCTL),
    ("DUP_FRAG", Place::Ip, "a duplicate IP fragment", NOT_TUNING, DROPREASON),
    ("FRAG_REASM_TIMEOUT", Place::Ip, "an IP datagram's fragments did not all arrive in time", Some("fragments were lost on the way: send datagrams that fit the path MTU"), IP_SYSCTL),
    ("FRAG_TOO_FAR", Place::Ip, "an IP fragment too far from the others (ipfrag_max_dist)", Some("heavy reordering or loss on the way; see net.ipv4.ipfrag_max_dist"), IP_SYSCTL),
    ("TCP_MINTTL", At(Tcp), "the segment's TTL was below the socket's IP_MINTTL", NOT_TUNING, TCP7),
    ("IPV6_BAD_EXTHDR", At(Ip6), "a bad IPv6 extension header", CHECKSUM, DROPREASON),
    ("IPV6_NDISC_FRAG", At(Ip6), "a fragmented neighbour-discovery message", NOT_TUNING, DROPREASON),
    ("IPV6_NDISC_HOP_LIMIT", At(Ip6), "a neighbour-discovery message with a hop limit other than 255", NOT_TUNING, DROPREASON),
    ("IPV6_NDISC_BAD_CODE", At(Ip6), "a neighbour-discovery message with a bad code", NOT_TUNING, DROPREASON),
    ("IPV6_NDISC_BAD_OPTIONS", At(Ip6), "a neighbour-discovery message with bad options", NOT_TUNING, DROPREASON),
    ("IPV6_NDISC_NS_OTHERHOST", At(Ip6), "a neighbour solicitation for another host", NOT_TUNING, DROPREASON),
    ("QUEUE_PURGE", At(Other), "a queue was emptied (its socket or device went away)", NOT_TUNING, DROPREASON),
    ("TC_COOKIE_ERROR", At(Qdisc), "a tc action's cookie could not be read", NOT_TUNING, TC8),
    ("PACKET_SOCK_ERROR", At(Other), "an AF_PACKET socket could not take it", NOT_TUNING, DROPREASON),
    ("TC_CHAIN_NOTFOUND", At(Qdisc), "a tc action named a filter chain that does not exist", Some("a tc configuration error: `tc chain show`"), TC8),
    ("TC_RECLASSIFY_LOOP", At(Qdisc), "tc reclassified the packet too many times", Some("a tc configuration loop"), TC8),
    ("VXLAN_INVALID_HDR", At(Other), "a bad VXLAN header", NOT_TUNING, DROPREASON),
    ("VXLAN_VNI_NOT_FOUND", At(Other), "no VXLAN device for the packet's VNI", Some("tunnel configuration"), DROPREASON),
    ("MAC_INVALID_SOURCE", At(Other), "an invalid source MAC address", NOT_TUNING, DROPREASON),
    ("VXLAN_ENTRY_EXISTS", At(Other), "a VXLAN forwarding entry already existed", NOT_TUNING, DROPREASON),
    ("NO_TX_TARGET", At(Other), "a tunnel found no target to send it to", Some("tunnel configuration"), DROPREASON),
    ("IP_TUNNEL_ECN", At(Other), "a tunnel's outer and inner ECN bits disagreed", NOT_TUNING, DROPREASON),
    ("TUNNEL_TXINFO", At(Other), "a tunnel packet came without its transmit information", NOT_TUNING, DROPREASON),
    ("LOCAL_MAC", At(Other), "a frame from outside with this interface's own MAC as source", NOT_TUNING, DROPREASON),
    ("ARP_PVLAN_DISABLE", At(Other), "an ARP proxied back onto its own private VLAN, which is off", NOT_TUNING, DROPREASON),
    ("MAC_IEEE_MAC_CONTROL", At(Other), "an IEEE MAC control frame (pause) not to be forwarded", NOT_TUNING, DROPREASON),
    ("BRIDGE_INGRESS_STP_STATE", At(Other), "the bridge port's spanning-tree state does not forward", Some("bridge configuration (STP)"), DROPREASON),
    ("CAN_RX_INVALID_FRAME", At(Other), "an invalid CAN frame", NOT_TUNING, DROPREASON),
    ("CANFD_RX_INVALID_FRAME", At(Other), "an invalid CAN FD frame", NOT_TUNING, DROPREASON),
    ("CANXL_RX_INVALID_FRAME", At(Other), "an invalid CAN XL frame", NOT_TUNING, DROPREASON),
    ("PFMEMALLOC", At(Other), "a packet from the emergency memory reserve for a socket that may not use it", Some("the host was short of memory"), DROPREASON),
    ("DUALPI2_STEP_DROP", At(Qdisc), "dualpi2's step threshold dropped it", QDISC_LIMIT, TC8),
    ("PSP_INPUT", At(Other), "PSP (encryption) refused it on input", NOT_TUNING, DROPREASON),
    ("PSP_OUTPUT", At(Other), "PSP (encryption) refused it on output", NOT_TUNING, DROPREASON),
    ("RECURSION_LIMIT", At(Other), "devices nested too deep (tunnels within tunnels)", Some("interface configuration"), DROPREASON),
];

/// Reasons whose cause is a limit a setting raises (a buffer, a backlog,
/// a queue), as opposed to a decision (a rule, a filter, a policy) or a
/// fault: the ones doctor warns about.
pub const LIMITS: &[&str] = &[
    "SOCKET_RCVBUFF",
    "SOCKET_BACKLOG",
    "PROTO_MEM",
    "TCP_LISTEN_OVERFLOW",
    "TCP_ZEROWINDOW",
    "TCP_OFO_QUEUE_PRUNE",
    "TCP_OFO_DROP",
    "NEIGH_CREATEFAIL",
    "NEIGH_QUEUEFULL",
    "QDISC_DROP",
    "QDISC_OVERLIMIT",
    "CAKE_FLOOD",
    "FQ_BAND_LIMIT",
    "FQ_FLOW_LIMIT",
    "DUALPI2_STEP_DROP",
    "CPU_BACKLOG",
    "FULL_RING",
];

/// Families by name prefix, for reasons a newer kernel adds.
const FAMILIES: &[(&str, Place)] = &[
    ("TCP_", At(Tcp)),
    ("IPV6_", At(Ip6)),
    ("IP_TUNNEL", At(Other)),
    ("IP_", Place::Ip),
    ("NEIGH_", Place::Ip),
    ("FRAG_", Place::Ip),
    ("UDP_", Place::Udp),
    ("SOCKET_", Transport),
    ("QDISC_", At(Qdisc)),
    ("FQ_", At(Qdisc)),
    ("CAKE_", At(Qdisc)),
    ("TC_", At(Qdisc)),
    ("NETFILTER", At(Netfilter)),
    ("NF_", At(Netfilter)),
    ("XDP", At(Nic)),
    ("DEV_", At(Nic)),
    ("VXLAN_", At(Other)),
    ("TUNNEL", At(Other)),
    ("UNIX_", At(Other)),
    ("TAP_", At(Other)),
    ("CAN", At(Other)),
    ("MAC_", At(Other)),
    ("BRIDGE_", At(Other)),
    ("PSP_", At(Other)),
];

/// What nettune knows of reason `name` (as the kernel lists it, without
/// the `SKB_DROP_REASON_` prefix).
pub fn entry(name: &str) -> Entry {
    if let Some(&(_, place, what, fix, source)) = ROWS.iter().find(|r| r.0 == name) {
        return Entry {
            place,
            what,
            fix,
            source,
            mapping: Mapping::Exact,
        };
    }
    if let Some(&(_, place)) = FAMILIES.iter().find(|(prefix, _)| name.starts_with(prefix)) {
        return Entry {
            place,
            what: "a reason this version of nettune does not describe; its family places it",
            fix: None,
            source: DROPREASON,
            mapping: Mapping::Family,
        };
    }
    Entry {
        place: At(Other),
        what: "a reason this version of nettune does not know",
        fix: None,
        source: DROPREASON,
        mapping: Mapping::Unmapped,
    }
}

/// The names nettune describes, in the kernel's order of today.
pub fn known() -> impl Iterator<Item = &'static str> {
    ROWS.iter().map(|r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_is_a_listed_reason_with_a_fix() {
        for name in LIMITS {
            let e = entry(name);
            assert_eq!(e.mapping, Mapping::Exact, "{name}");
            assert!(e.fix.is_some(), "{name}");
        }
    }

    #[test]
    fn the_issue_s_examples_map_to_their_layers_and_fixes() {
        let e = entry("SOCKET_RCVBUFF");
        assert_eq!(e.place.layer(ETH_P_IP, IPPROTO_UDP), Udp);
        assert_eq!(e.place.layer(ETH_P_IPV6, IPPROTO_UDP), Udp6);
        assert_eq!(e.place.layer(ETH_P_IP, IPPROTO_TCP), Tcp);
        assert!(e.fix.is_some_and(|f| f.contains("SO_RCVBUF")));
        let e = entry("CPU_BACKLOG");
        assert_eq!(e.place.layer(ETH_P_IP, 0), Softnet);
        assert!(e
            .fix
            .is_some_and(|f| f.contains("netdev_max_backlog") && f.contains("RPS")));
        assert_eq!(entry("QDISC_DROP").place.layer(ETH_P_IP, 0), Qdisc);
        assert_eq!(entry("NETFILTER_DROP").place.layer(ETH_P_IP, 0), Netfilter);
        assert!(entry("NETFILTER_DROP")
            .fix
            .is_some_and(|f| f.contains("rule")));
        assert!(entry("NO_SOCKET")
            .fix
            .is_some_and(|f| f.contains("not a tuning problem")));
        assert_eq!(entry("IP_RPFILTER").place.layer(ETH_P_IPV6, 0), Ip6);
        // Transport reasons on a packet that is not IP.
        assert_eq!(entry("NO_SOCKET").place.layer(ETH_P_ARP, 0), Other);
        assert_eq!(entry("NO_SOCKET").place.layer(ETH_P_IP, IPPROTO_ICMP), Ip);
    }

    #[test]
    fn new_reasons_go_by_family_or_are_unmapped() {
        assert_eq!(entry("TCP_SOMETHING_NEW").mapping, Mapping::Family);
        assert_eq!(entry("TCP_SOMETHING_NEW").place, At(Tcp));
        assert_eq!(entry("IP_TUNNEL_FOO").place, At(Other));
        let odd = entry("WHOLLY_NEW");
        assert_eq!(odd.mapping, Mapping::Unmapped);
        assert_eq!(odd.place.layer(ETH_P_IP, 17), Other);
    }

    #[test]
    fn names_are_listed_once_and_every_source_is_public() {
        let mut names: Vec<&str> = known().collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "a reason listed twice");
        for row in ROWS {
            assert!(row.4.starts_with("https://"), "{}", row.0);
            assert!(!row.2.is_empty());
        }
    }
}
