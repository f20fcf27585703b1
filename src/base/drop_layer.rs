//! The layers of the receive and transmit path where the kernel drops
//! packets, in the order a received packet meets them: the names that the
//! drop ladder (counters per layer) and the drop tracer (reasons per
//! layer) share.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The NIC and its driver (and XDP): the ring was full, the driver or
    /// an XDP program dropped.
    Nic,
    /// The per-CPU backlog and the receive softirq (softnet_stat).
    Softnet,
    /// Traffic control: a qdisc's queue, a tc filter or action.
    Qdisc,
    /// A netfilter (nftables, iptables) rule.
    Netfilter,
    /// IPv4, with ARP and neighbour resolution.
    Ip,
    /// IPv6, with neighbour discovery.
    Ip6,
    /// UDP over IPv4 and its sockets.
    Udp,
    /// UDP over IPv6 and its sockets.
    Udp6,
    /// TCP (IPv4 and IPv6) and its sockets.
    Tcp,
    /// Anything else: tunnels, bridges, other protocols and socket families.
    Other,
}

impl Layer {
    /// Every layer, in path order.
    pub const ALL: [Layer; 10] = [
        Layer::Nic,
        Layer::Softnet,
        Layer::Qdisc,
        Layer::Netfilter,
        Layer::Ip,
        Layer::Ip6,
        Layer::Udp,
        Layer::Udp6,
        Layer::Tcp,
        Layer::Other,
    ];

    /// Its name in JSON and in metric labels: `nic`, `softnet`, `qdisc`,
    /// `netfilter`, `ip`, `ip6`, `udp`, `udp6`, `tcp`, `other`.
    pub fn key(self) -> &'static str {
        match self {
            Layer::Nic => "nic",
            Layer::Softnet => "softnet",
            Layer::Qdisc => "qdisc",
            Layer::Netfilter => "netfilter",
            Layer::Ip => "ip",
            Layer::Ip6 => "ip6",
            Layer::Udp => "udp",
            Layer::Udp6 => "udp6",
            Layer::Tcp => "tcp",
            Layer::Other => "other",
        }
    }

    /// How people name it: `NIC`, `softnet`, `qdisc`, `netfilter`, `IPv4`,
    /// `IPv6`, `UDP`, `UDPv6`, `TCP`, `other`.
    pub fn title(self) -> &'static str {
        match self {
            Layer::Nic => "NIC",
            Layer::Softnet => "softnet",
            Layer::Qdisc => "qdisc",
            Layer::Netfilter => "netfilter",
            Layer::Ip => "IPv4",
            Layer::Ip6 => "IPv6",
            Layer::Udp => "UDP",
            Layer::Udp6 => "UDPv6",
            Layer::Tcp => "TCP",
            Layer::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_serialize_by_their_snake_case_names() {
        let names: Vec<String> = Layer::ALL
            .iter()
            .map(|l| serde_json::to_string(l).expect("json"))
            .collect();
        assert_eq!(names[0], "\"nic\"");
        assert_eq!(names[5], "\"ip6\"");
        for (layer, name) in Layer::ALL.iter().zip(&names) {
            assert_eq!(format!("\"{}\"", layer.key()), *name);
        }
        assert!(Layer::ALL.windows(2).all(|w| w[0] < w[1]));
    }
}
