//! /proc/net/netstat (TcpExt), and the `node_netstat_` series that the
//! snmp and snmp6 collectors write the same way: node_exporter's netstat
//! collector's names and default fields.

use std::collections::BTreeMap;

use super::super::exposition::{Exposition, Kind, Value};
use super::input::Input;

/// The SNMP counters node_exporter's netstat collector exports by default
/// (its `--collector.netstat.fields`), plus those of the drop ladder.
pub fn exported(proto: &str, name: &str) -> bool {
    let node = name.ends_with("InErrors")
        || name.ends_with("InErrs")
        || match proto {
            "Ip" => name == "Forwarding",
            "Ip6" => matches!(name, "InOctets" | "OutOctets"),
            "TcpExt" => {
                name.starts_with("Listen")
                    || name.starts_with("Syncookies")
                    || matches!(name, "TCPSynRetrans" | "TCPTimeouts")
            }
            "Tcp" => matches!(
                name,
                "ActiveOpens"
                    | "InSegs"
                    | "OutSegs"
                    | "OutRsts"
                    | "PassiveOpens"
                    | "RetransSegs"
                    | "CurrEstab"
            ),
            "Udp" | "Udp6" => matches!(
                name,
                "InDatagrams" | "OutDatagrams" | "NoPorts" | "RcvbufErrors" | "SndbufErrors"
            ),
            _ => false,
        };
    let ladder = match proto {
        "Ip" | "Ip6" => {
            matches!(
                name,
                "InDiscards" | "InHdrErrors" | "InAddrErrors" | "InUnknownProtos"
            ) || (proto == "Ip6"
                && matches!(name, "InNoRoutes" | "InTruncatedPkts" | "InTooBigErrors"))
        }
        "TcpExt" => matches!(name, "TCPBacklogDrop" | "TCPRcvQDrop"),
        _ => false,
    };
    node || ladder
}

/// `node_netstat_<Proto>_<Name>`, untyped, as node_exporter writes them.
pub fn netstat_section(proto: &str, counters: &BTreeMap<String, i64>, out: &mut Exposition) {
    for (name, &value) in counters {
        if !exported(proto, name) {
            continue;
        }
        let metric = format!("node_netstat_{proto}_{name}");
        let help = format!("Statistic {proto}{name}.");
        // Negative only for the few gauges the kernel keeps signed
        // (Tcp MaxConn is -1): written as the float they are.
        let value = match u64::try_from(value) {
            Ok(v) => Value::Int(v),
            Err(_) => Value::Float(value as f64),
        };
        out.family(&metric, &help, Kind::Untyped).sample(&[], value);
    }
}

/// /proc/net/netstat: TcpExt.
pub fn write(input: &Input, out: &mut Exposition) {
    netstat_section("TcpExt", &input.sample.counters.tcp_ext, out);
}

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::monitor::testkit;

    #[test]
    fn listen_drops_from_tcpext() {
        let s = written(write, &testkit::first(), None);
        assert_eq!(value(&s, "node_netstat_TcpExt_ListenDrops", &[]), Some(6.0));
    }

    #[test]
    fn the_netstat_fields_are_node_exporters_default_and_the_ladders() {
        assert!(exported("Udp", "RcvbufErrors") && exported("Udp6", "NoPorts"));
        assert!(exported("TcpExt", "ListenOverflows") && exported("Tcp", "InErrs"));
        assert!(exported("Ip", "Forwarding") && exported("Ip6", "InOctets"));
        assert!(exported("Ip", "InDiscards") && exported("TcpExt", "TCPBacklogDrop"));
        assert!(!exported("Tcp", "RtoMin") && !exported("TcpExt", "TCPHPHits"));
        assert!(!exported("Ip", "InReceives") && !exported("Udp", "IgnoredMulti"));
    }
}
