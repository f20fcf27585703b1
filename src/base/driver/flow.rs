//! Flow steering as plain data: a flow spec in a small syntax (what `nettune
//! steer --flow` and `bench udp-sink --flow` take), the NIC's ntuple rules
//! (`ethtool -n`), and the RSS indirection table made from queue weights
//! (`ethtool -X IFACE weight ...`).
//!
//! Flow syntax, words separated by spaces:
//!
//! ```text
//! PROTO [src-ip ADDR] [dst-ip ADDR] [src-port N] [dst-port N]
//! PROTO: udp4 | tcp4 | udp6 | tcp6 | udp | tcp   (udp/tcp: IPv4 unless an address is IPv6)
//! ```
//!
//! `src`/`dst` are accepted for `src-ip`/`dst-ip`, and a leading
//! `flow-type` is ignored, so `flow-type udp4 dst-port 53` (ethtool's words)
//! reads too. A field left out matches anything.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FlowProto {
    Tcp,
    Udp,
}

impl FlowProto {
    /// The IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            FlowProto::Tcp => 6,
            FlowProto::Udp => 17,
        }
    }
}

/// Which packets a rule or an XDP program picks.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowSpec {
    pub proto: FlowProto,
    pub ipv6: bool,
    pub src_ip: Option<IpAddr>,
    pub dst_ip: Option<IpAddr>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
}

/// A flow text that does not parse, with the word that broke it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("flow '{text}': {why}; write it as PROTO [src-ip ADDR] [dst-ip ADDR] [src-port N] [dst-port N] with PROTO udp4, tcp4, udp6 or tcp6, e.g. 'udp4 dst-port 53'")]
pub struct BadFlow {
    pub text: String,
    pub why: String,
}

impl FlowSpec {
    /// Any packet of `proto` over IPv4.
    pub fn any(proto: FlowProto) -> FlowSpec {
        FlowSpec {
            proto,
            ipv6: false,
            src_ip: None,
            dst_ip: None,
            src_port: None,
            dst_port: None,
        }
    }

    /// ethtool's flow-type name: `udp4`, `tcp6`.
    pub fn flow_type(&self) -> &'static str {
        match (self.proto, self.ipv6) {
            (FlowProto::Tcp, false) => "tcp4",
            (FlowProto::Udp, false) => "udp4",
            (FlowProto::Tcp, true) => "tcp6",
            (FlowProto::Udp, true) => "udp6",
        }
    }

    pub fn parse(text: &str) -> Result<FlowSpec, BadFlow> {
        let bad = |why: String| BadFlow {
            text: text.to_string(),
            why,
        };
        let mut words = text.split_whitespace().peekable();
        if words.peek() == Some(&"flow-type") {
            words.next();
        }
        let proto_word = words.next().ok_or_else(|| bad("it is empty".to_string()))?;
        let (proto, family) = match proto_word {
            "udp" => (FlowProto::Udp, None),
            "tcp" => (FlowProto::Tcp, None),
            "udp4" => (FlowProto::Udp, Some(false)),
            "tcp4" => (FlowProto::Tcp, Some(false)),
            "udp6" => (FlowProto::Udp, Some(true)),
            "tcp6" => (FlowProto::Tcp, Some(true)),
            other => {
                return Err(bad(format!(
                    "'{other}' is not a protocol (udp4, tcp4, udp6, tcp6)"
                )))
            }
        };
        let mut spec = FlowSpec::any(proto);
        while let Some(key) = words.next() {
            let value = words
                .next()
                .ok_or_else(|| bad(format!("'{key}' needs a value")))?;
            match key {
                "src-ip" | "src" | "dst-ip" | "dst" => {
                    let addr: IpAddr = value
                        .parse()
                        .map_err(|_| bad(format!("'{value}' is not an IP address")))?;
                    let slot = if key.starts_with("src") {
                        &mut spec.src_ip
                    } else {
                        &mut spec.dst_ip
                    };
                    if slot.replace(addr).is_some() {
                        return Err(bad(format!("'{key}' is given twice")));
                    }
                }
                "src-port" | "dst-port" => {
                    let port: u16 = value
                        .parse()
                        .ok()
                        .filter(|p| *p != 0)
                        .ok_or_else(|| bad(format!("'{value}' is not a port (1-65535)")))?;
                    let slot = if key == "src-port" {
                        &mut spec.src_port
                    } else {
                        &mut spec.dst_port
                    };
                    if slot.replace(port).is_some() {
                        return Err(bad(format!("'{key}' is given twice")));
                    }
                }
                other => {
                    return Err(bad(format!(
                        "'{other}' is not a field (src-ip, dst-ip, src-port, dst-port)"
                    )))
                }
            }
        }
        let v6: Vec<bool> = [spec.src_ip, spec.dst_ip]
            .iter()
            .flatten()
            .map(IpAddr::is_ipv6)
            .collect();
        spec.ipv6 = match (family, v6.first()) {
            (Some(f), _) => f,
            (None, Some(&first)) => first,
            (None, None) => false,
        };
        if v6.iter().any(|&a| a != spec.ipv6) {
            return Err(bad(format!(
                "an address is not IPv{} like the flow",
                if spec.ipv6 { 6 } else { 4 }
            )));
        }
        Ok(spec)
    }

    /// Whether a packet with these header fields is of this flow.
    pub fn matches(&self, proto: u8, src: IpAddr, dst: IpAddr, sport: u16, dport: u16) -> bool {
        proto == self.proto.number()
            && src.is_ipv6() == self.ipv6
            && self.src_ip.is_none_or(|a| a == src)
            && self.dst_ip.is_none_or(|a| a == dst)
            && self.src_port.is_none_or(|p| p == sport)
            && self.dst_port.is_none_or(|p| p == dport)
    }
}

impl fmt::Display for FlowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.flow_type())?;
        if let Some(a) = self.src_ip {
            write!(f, " src-ip {a}")?;
        }
        if let Some(a) = self.dst_ip {
            write!(f, " dst-ip {a}")?;
        }
        if let Some(p) = self.src_port {
            write!(f, " src-port {p}")?;
        }
        if let Some(p) = self.dst_port {
            write!(f, " dst-port {p}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for FlowSpec {
    type Err = BadFlow;
    fn from_str(text: &str) -> Result<FlowSpec, BadFlow> {
        FlowSpec::parse(text)
    }
}

impl Serialize for FlowSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FlowSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<FlowSpec, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What an ntuple rule does with its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    /// Deliver to this RX queue.
    Queue(u32),
    /// Drop (ethtool's `action -1`).
    Drop,
}

/// One ntuple rule of a NIC, at its location in the rule table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NtupleRule {
    pub location: u32,
    /// The flow, when it is one nettune models (TCP/UDP over IPv4/IPv6 with
    /// whole fields); `None` for others (ethtool -n shows them).
    pub flow: Option<FlowSpec>,
    /// The kernel's flow type number, for rules nettune does not model.
    pub flow_type: u32,
    pub action: RuleAction,
}

impl NtupleRule {
    /// The value text of a rule target: `udp4 dst-port 53 action 4`.
    pub fn value_text(&self) -> String {
        let flow = self.flow.as_ref().map_or_else(
            || format!("flow-type {}", self.flow_type),
            ToString::to_string,
        );
        match self.action {
            RuleAction::Queue(q) => format!("{flow} action {q}"),
            RuleAction::Drop => format!("{flow} action -1"),
        }
    }

    /// Parse `FLOW action Q` (what [`NtupleRule::value_text`] prints).
    pub fn parse_value(location: u32, text: &str) -> Result<NtupleRule, String> {
        let (flow, action) = text
            .rsplit_once(" action ")
            .ok_or_else(|| format!("'{text}' has no 'action QUEUE'"))?;
        let action = match action.trim() {
            "-1" => RuleAction::Drop,
            q => RuleAction::Queue(
                q.parse()
                    .map_err(|_| format!("'{q}' is not a queue number"))?,
            ),
        };
        let flow = FlowSpec::parse(flow).map_err(|e| e.to_string())?;
        Ok(NtupleRule {
            location,
            flow_type: 0,
            flow: Some(flow),
            action,
        })
    }
}

/// The NIC's ntuple rule table (`ethtool -n IFACE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NtupleTable {
    /// How many rules the table holds (ETHTOOL_GRXCLSRLCNT).
    pub size: u32,
    pub rules: Vec<NtupleRule>,
}

impl NtupleTable {
    /// The highest free location, as ethtool's rule manager picks it (the
    /// end of the table is the lowest priority).
    pub fn free_location(&self) -> Option<u32> {
        (0..self.size)
            .rev()
            .find(|loc| !self.rules.iter().any(|r| r.location == *loc))
    }
}

/// The most queues a device has: the kernel allocates at most 0xffff per
/// device (`netif_alloc_netdev_queues`). A larger count, or a table naming
/// a queue past it, comes from a garbled capture or plan.
pub const MAX_QUEUES: u32 = 0xffff;

/// The indirection table `ethtool -X IFACE weight W0 W1 ...` writes: each
/// queue gets a share of the `size` entries in proportion to its weight,
/// in one run, in queue order (ethtool's `fill_indir_table`). `None` when
/// the weights sum to 0 or to more than the table has entries.
pub fn weighted_table(size: u32, weights: &[u32]) -> Option<Vec<u32>> {
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if sum == 0 || sum > u64::from(size) {
        return None;
    }
    let mut table = Vec::with_capacity(size as usize);
    let (mut partial, mut queue) = (0u64, 0usize);
    let mut next = 0usize;
    for i in 0..u64::from(size) {
        while i >= u64::from(size) * partial / sum {
            queue = next;
            partial += u64::from(*weights.get(next)?);
            next += 1;
        }
        table.push(queue as u32);
    }
    Some(table)
}

/// The table that leaves `queue` out: weight 1 for every other of `rings`
/// RX queues, 0 for it (`ethtool -X IFACE weight 1 1 1 1 0 1 1 1`).
pub fn without_queue(size: u32, rings: u32, queue: u32) -> Option<Vec<u32>> {
    // Checked before the weights exist: `rings` may come from a capture,
    // and a table of `size` entries serves at most `size` queues.
    let served = u64::from(rings) - u64::from(queue < rings);
    if served > u64::from(size) {
        return None;
    }
    let weights: Vec<u32> = (0..rings).map(|q| u32::from(q != queue)).collect();
    weighted_table(size, &weights)
}

/// The kernel's default table for `rings` queues (ethtool_rxfh_indir_default:
/// entry i is queue i % rings).
pub fn default_table(size: u32, rings: u32) -> Vec<u32> {
    (0..size).map(|i| i % rings.max(1)).collect()
}

/// `1 RX queue (0)`, `8 RX queues (0-7)`: what an interface has, for
/// errors about a queue it lacks.
pub fn queues_text(count: u32) -> String {
    match count {
        0 => "no RX queue".to_string(),
        1 => "1 RX queue (0)".to_string(),
        n => format!("{n} RX queues (0-{})", n - 1),
    }
}

/// The table's text in a journal: its entries, space separated.
pub fn table_text(table: &[u32]) -> String {
    table
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn parse_table(text: &str) -> Result<Vec<u32>, String> {
    text.split_whitespace()
        .map(|w| {
            w.parse()
                .map_err(|_| format!("'{w}' in an indirection table is not a queue number"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_article_flow_parses_and_prints_as_ethtool_words() {
        let f = FlowSpec::parse("udp dst-port 53").expect("parse");
        assert_eq!(
            f,
            FlowSpec::parse("flow-type udp4 dst-port 53").expect("ethtool words")
        );
        assert_eq!(f.to_string(), "udp4 dst-port 53");
        assert_eq!(f.dst_port, Some(53));
        let full = FlowSpec::parse("tcp src 10.0.0.1 dst-ip 10.0.0.2 src-port 1000 dst-port 80")
            .expect("parse");
        assert_eq!(
            full.to_string(),
            "tcp4 src-ip 10.0.0.1 dst-ip 10.0.0.2 src-port 1000 dst-port 80"
        );
        let v6 = FlowSpec::parse("udp dst-ip fd00::2 dst-port 9000").expect("v6");
        assert!(v6.ipv6);
        assert_eq!(v6.flow_type(), "udp6");
        assert_eq!(FlowSpec::parse(&v6.to_string()).expect("round trip"), v6);
    }

    #[test]
    fn bad_flows_name_the_word() {
        for (text, word) in [
            ("", "empty"),
            ("icmp", "'icmp'"),
            ("udp dst-port", "'dst-port' needs a value"),
            ("udp dst-port 70000", "'70000'"),
            ("udp dst-port 0", "'0'"),
            ("udp port 53", "'port'"),
            ("udp dst-ip 10.0.0.999", "'10.0.0.999'"),
            ("udp4 dst-ip ::1", "IPv4"),
            ("udp src-ip 10.0.0.1 dst-ip ::1", "IPv4"),
            ("udp dst-port 1 dst-port 2", "twice"),
        ] {
            let err = FlowSpec::parse(text).expect_err(text).to_string();
            assert!(err.contains(word), "{text}: {err}");
            assert!(err.contains("PROTO"), "{err}");
        }
    }

    #[test]
    fn matching_checks_every_given_field() {
        let f = FlowSpec::parse("udp dst-ip 10.1.0.2 dst-port 9000").expect("parse");
        let src: IpAddr = "10.1.0.1".parse().expect("ip");
        let dst: IpAddr = "10.1.0.2".parse().expect("ip");
        assert!(f.matches(17, src, dst, 40000, 9000));
        assert!(!f.matches(6, src, dst, 40000, 9000));
        assert!(!f.matches(17, src, dst, 40000, 9001));
        assert!(!f.matches(17, src, src, 40000, 9000));
    }

    #[test]
    fn rule_values_round_trip() {
        let rule = NtupleRule::parse_value(1023, "udp4 dst-port 53 action 4").expect("rule");
        assert_eq!(rule.action, RuleAction::Queue(4));
        assert_eq!(rule.value_text(), "udp4 dst-port 53 action 4");
        assert!(NtupleRule::parse_value(1, "udp4 dst-port 53").is_err());
        assert!(NtupleRule::parse_value(1, "udp4 action x").is_err());
        let drop = NtupleRule::parse_value(1, "tcp4 src-port 1 action -1").expect("drop");
        assert_eq!(drop.action, RuleAction::Drop);
    }

    #[test]
    fn weights_fill_the_table_as_ethtool_does() {
        // `ethtool -X eth3 weight 1 1 1 1 0 1 1 1 1 1` on a 128-entry table:
        // nine queues share it, queue 4 gets nothing.
        let t = weighted_table(128, &[1, 1, 1, 1, 0, 1, 1, 1, 1, 1]).expect("table");
        assert_eq!(t.len(), 128);
        assert!(!t.contains(&4));
        for q in [0, 1, 2, 3, 5, 6, 7, 8, 9] {
            let n = t.iter().filter(|&&x| x == q).count();
            assert!((14..=15).contains(&n), "queue {q}: {n}");
        }
        // Runs in queue order.
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(without_queue(128, 10, 4), Some(t));
        assert_eq!(weighted_table(4, &[1, 1]), Some(vec![0, 0, 1, 1]));
        assert_eq!(weighted_table(4, &[0, 0]), None);
        assert_eq!(weighted_table(2, &[1, 1, 1]), None);
        assert_eq!(default_table(6, 4), vec![0, 1, 2, 3, 0, 1]);
    }

    #[test]
    fn queue_counts_read_as_ranges() {
        assert_eq!(queues_text(1), "1 RX queue (0)");
        assert_eq!(queues_text(8), "8 RX queues (0-7)");
    }

    #[test]
    fn tables_have_a_text() {
        assert_eq!(table_text(&[0, 1, 2]), "0 1 2");
        assert_eq!(parse_table("0 1  2\n"), Ok(vec![0, 1, 2]));
        assert!(parse_table("0 x").is_err());
    }

    #[test]
    fn the_free_location_is_the_last_one_unused() {
        let mut table = NtupleTable {
            size: 4,
            rules: Vec::new(),
        };
        assert_eq!(table.free_location(), Some(3));
        table.rules.push(NtupleRule {
            location: 3,
            flow: None,
            flow_type: 2,
            action: RuleAction::Drop,
        });
        assert_eq!(table.free_location(), Some(2));
        table.size = 1;
        assert_eq!(table.free_location(), Some(0));
        table.size = 0;
        assert_eq!(table.free_location(), None);
    }
}
