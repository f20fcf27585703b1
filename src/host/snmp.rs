//! `/proc/net/snmp` and `/proc/net/netstat`: both are pairs of lines, a
//! header naming the counters and a line of values, under a protocol tag:
//!
//! ```text
//! Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors ...
//! Udp: 1523 12 0 1490 0 0 ...
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::base::Root;
use crate::error::{KernelError, ParseError};

/// Counters by protocol tag (`Udp`, `Tcp`, `TcpExt`, ...) and counter name.
/// Values are signed: `Tcp: MaxConn` is -1.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters(pub BTreeMap<String, BTreeMap<String, i64>>);

impl Counters {
    pub fn get(&self, proto: &str, name: &str) -> Option<i64> {
        self.0.get(proto).and_then(|m| m.get(name)).copied()
    }

    /// Read `/proc/net/snmp` (of the current network namespace).
    pub fn read_snmp(root: &Root) -> Result<Counters, KernelError> {
        root.parse("/proc/net/snmp", parse)
    }

    /// Read `/proc/net/netstat`.
    pub fn read_netstat(root: &Root) -> Result<Counters, KernelError> {
        root.parse("/proc/net/netstat", parse)
    }
}

/// Parse either file. Header and value lines must come in pairs with the
/// same tag and the same number of fields.
pub fn parse(text: &str) -> Result<Counters, ParseError> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty()).enumerate();
    while let Some((n, header)) = lines.next() {
        let (tag, names) = split_tag(header, n)?;
        let Some((m, values)) = lines.next() else {
            return Err(ParseError::new(format!(
                "line {}: '{tag}' header has no line of values (file truncated?)",
                n + 1
            )));
        };
        let (value_tag, values) = split_tag(values, m)?;
        if value_tag != tag {
            return Err(ParseError::new(format!(
                "line {}: expected values for '{tag}', found '{value_tag}'",
                m + 1
            )));
        }
        let names: Vec<&str> = names.split_whitespace().collect();
        let values: Vec<&str> = values.split_whitespace().collect();
        if names.len() != values.len() {
            return Err(ParseError::new(format!(
                "line {}: '{tag}' has {} names but {} values (file truncated?)",
                m + 1,
                names.len(),
                values.len()
            )));
        }
        let mut counters = BTreeMap::new();
        for (name, value) in names.iter().zip(values) {
            let value = value.parse::<i64>().map_err(|_| {
                ParseError::new(format!(
                    "line {}: {tag} {name} = '{value}' is not a number",
                    m + 1
                ))
            })?;
            counters.insert((*name).to_string(), value);
        }
        out.insert(tag.to_string(), counters);
    }
    Ok(Counters(out))
}

fn split_tag(line: &str, n: usize) -> Result<(&str, &str), ParseError> {
    line.split_once(':')
        .map(|(tag, rest)| (tag.trim(), rest))
        .ok_or_else(|| ParseError::new(format!("line {}: no 'Tag:' prefix", n + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    // /proc/net/snmp from the 2-vCPU Firecracker VM, Linux 6.18.
    const SNMP_FIRECRACKER_6_18: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 1 64 10291 0 0 0 0 0 10291 9853 0 0 0 0 0 0 0 0 0 9853
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs InTimeExcds InParmProbs InSrcQuenchs InRedirects InEchos InEchoReps InTimestamps InTimestampReps InAddrMasks InAddrMaskReps OutMsgs OutErrors OutRateLimitGlobal OutRateLimitHost OutDestUnreachs OutTimeExcds OutParmProbs OutSrcQuenchs OutRedirects OutEchos OutEchoReps OutTimestamps OutTimestampReps OutAddrMasks OutAddrMaskReps
Icmp: 2 0 0 2 0 0 0 0 0 0 0 0 0 0 2 0 0 0 2 0 0 0 0 0 0 0 0 0 0
IcmpMsg: InType3 OutType3
IcmpMsg: 2 2
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 25 3 0 0 2 10163 10196 4 0 8 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 124 2 0 126 0 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn snmp_firecracker_6_18() {
        let c = parse(SNMP_FIRECRACKER_6_18).expect("parse");
        assert_eq!(c.get("Udp", "InDatagrams"), Some(124));
        assert_eq!(c.get("Udp", "NoPorts"), Some(2));
        assert_eq!(c.get("Udp", "RcvbufErrors"), Some(0));
        assert_eq!(c.get("Tcp", "RetransSegs"), Some(4));
        assert_eq!(c.get("Tcp", "MaxConn"), Some(-1));
        assert_eq!(c.get("Udp", "Nope"), None);
    }

    #[test]
    fn netstat_tcpext() {
        let text =
            "TcpExt: SyncookiesSent SyncookiesRecv ListenOverflows ListenDrops TCPBacklogDrop\n\
                    TcpExt: 0 0 17 19 3\n\
                    IpExt: InNoRoutes InTruncatedPkts\n\
                    IpExt: 0 0\n";
        let c = parse(text).expect("parse");
        assert_eq!(c.get("TcpExt", "ListenOverflows"), Some(17));
        assert_eq!(c.get("TcpExt", "TCPBacklogDrop"), Some(3));
    }

    #[test]
    fn truncated_file_is_an_error_naming_the_line() {
        let truncated = "Udp: InDatagrams NoPorts InErrors\nUdp: 1 2\n";
        let err = parse(truncated).expect_err("short");
        assert!(err.0.contains("line 2"), "{}", err.0);
        let no_values = "Udp: InDatagrams NoPorts\n";
        assert!(parse(no_values).is_err());
        let garbled = "Udp: InDatagrams\nUdp: x\n";
        assert!(parse(garbled).is_err());
    }
}
