//! `/proc/net/snmp6`: the IPv6 counters of the current network namespace,
//! one `NameValue` pair per line, the protocol glued to the front of the
//! name:
//!
//! ```text
//! Ip6InReceives                   12
//! Icmp6OutType133                 1
//! Udp6RcvbufErrors                0
//! UdpLite6InDatagrams             0
//! ```
//!
//! (names padded to 32 columns, then a tab).
//!
//! Parsed into the same shape as /proc/net/snmp ([`super::snmp::Counters`]):
//! protocol tag (`Ip6`, `Icmp6`, `Udp6`, `UdpLite6`) -> counter name without
//! the tag (`RcvbufErrors`), so `Udp` and `Udp6` counters are looked up the
//! same way. The file is absent when IPv6 is disabled (`ipv6.disable=1`).

use std::collections::BTreeMap;

use super::snmp::Counters;
use crate::base::Root;
use crate::error::{KernelError, ParseError};

/// Read `/proc/net/snmp6`; empty counters when the kernel has no IPv6.
pub fn read(root: &Root) -> Result<Counters, KernelError> {
    Ok(root
        .parse_optional("/proc/net/snmp6", parse)?
        .unwrap_or_default())
}

/// Parse the file. Every non-blank line must be a name with a protocol tag
/// ending in `6` and a number.
pub fn parse(text: &str) -> Result<Counters, ParseError> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        let mut fields = line.split_whitespace();
        let Some(full) = fields.next() else { continue };
        let Some(value) = fields.next() else {
            return Err(ParseError::new(format!(
                "line {n}: '{full}' has no value (file truncated?)"
            )));
        };
        let value = value.parse::<i64>().map_err(|_| {
            ParseError::new(format!("line {n}: {full} = '{value}' is not a number"))
        })?;
        let (tag, name) = split_tag(full).ok_or_else(|| {
            ParseError::new(format!(
                "line {n}: '{full}' does not start with an IPv6 protocol tag (Ip6, Icmp6, Udp6, ...)"
            ))
        })?;
        out.entry(tag.to_string())
            .or_default()
            .insert(name.to_string(), value);
    }
    Ok(Counters(out))
}

/// `Udp6RcvbufErrors` -> (`Udp6`, `RcvbufErrors`): the tag ends at the
/// first `6` (every tag the kernel prints is a protocol name and `6`).
fn split_tag(full: &str) -> Option<(&str, &str)> {
    let end = full.find('6')? + 1;
    let (tag, name) = full.split_at(end);
    let proper = tag.len() > 1
        && tag.starts_with(|c: char| c.is_ascii_uppercase())
        && name.starts_with(|c: char| c.is_ascii_uppercase());
    proper.then_some((tag, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The head and the UDP part of `cat /proc/net/snmp6` on the 2-vCPU
    // Firecracker VM, Linux 6.18 (names padded to 32 columns, then a tab).
    const SNMP6_FIRECRACKER_6_18: &str = "Ip6InReceives                   \t12
Ip6InHdrErrors                  \t0
Ip6InTooBigErrors               \t0
Ip6InNoRoutes                   \t3
Ip6InAddrErrors                 \t0
Ip6InUnknownProtos              \t0
Ip6InTruncatedPkts              \t0
Ip6InDiscards                   \t7
Ip6InDelivers                   \t12
Icmp6InMsgs                     \t0
Icmp6OutType133                 \t1
Icmp6OutType143                 \t4
Udp6InDatagrams                 \t210
Udp6NoPorts                     \t2
Udp6InErrors                    \t45
Udp6OutDatagrams                \t0
Udp6RcvbufErrors                \t41
Udp6SndbufErrors                \t0
Udp6InCsumErrors                \t0
Udp6IgnoredMulti                \t0
Udp6MemErrors                   \t0
UdpLite6InDatagrams             \t0
UdpLite6RcvbufErrors            \t0
";

    #[test]
    fn snmp6_firecracker_6_18() {
        let c = parse(SNMP6_FIRECRACKER_6_18).expect("parse");
        assert_eq!(c.get("Udp6", "RcvbufErrors"), Some(41));
        assert_eq!(c.get("Udp6", "InErrors"), Some(45));
        assert_eq!(c.get("Udp6", "NoPorts"), Some(2));
        assert_eq!(c.get("Ip6", "InDiscards"), Some(7));
        assert_eq!(c.get("Ip6", "InNoRoutes"), Some(3));
        assert_eq!(c.get("Icmp6", "OutType133"), Some(1));
        // UdpLite6 is a protocol of its own, not Udp6's.
        assert_eq!(c.get("UdpLite6", "InDatagrams"), Some(0));
        assert_eq!(c.0["Udp6"].len(), 9);
    }

    #[test]
    fn garbled_file_is_an_error_naming_the_line() {
        let err = parse("Ip6InReceives 12\nUdp6NoPorts\n").expect_err("no value");
        assert!(err.0.contains("line 2"), "{}", err.0);
        let err = parse("Ip6InReceives 1x2\n").expect_err("not a number");
        assert!(err.0.contains("'1x2'"), "{}", err.0);
        let err = parse("InReceives 12\n").expect_err("no tag");
        assert!(err.0.contains("line 1"), "{}", err.0);
        assert!(parse("6Ip 1\n").is_err());
        assert_eq!(parse("\n\n").expect("blank"), Counters::default());
    }

    #[test]
    fn a_kernel_without_ipv6_has_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("proc/net")).expect("mkdir");
        let root = Root::at(dir.path()).expect("root");
        assert_eq!(read(&root).expect("absent"), Counters::default());
    }

    #[test]
    fn reads_the_live_host() {
        let c = read(&Root::live()).expect("/proc/net/snmp6 of this machine");
        if !c.0.is_empty() {
            assert!(c.get("Ip6", "InReceives").is_some());
            assert!(c.get("Udp6", "RcvbufErrors").is_some());
        }
    }
}
