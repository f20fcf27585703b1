//! /proc/net/snmp6: Ip6 and Udp6, as `node_netstat_<Proto>_<Name>`; a
//! host without IPv6 has no file, which is no failure.

use super::super::exposition::Exposition;
use super::input::Input;
use super::netstat::netstat_section;

/// /proc/net/snmp6: Ip6, Udp6.
pub fn write(input: &Input, out: &mut Exposition) {
    let c = &input.sample.counters;
    netstat_section("Ip6", &c.ip6, out);
    netstat_section("Udp6", &c.udp6, out);
}

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::monitor::testkit;

    #[test]
    fn ipv6_and_udp6_only() {
        let s = written(write, &testkit::first(), None);
        assert_eq!(value(&s, "node_netstat_Ip6_InDiscards", &[]), Some(1.0));
        assert_eq!(value(&s, "node_netstat_Udp6_RcvbufErrors", &[]), Some(0.0));
        assert!(s
            .iter()
            .all(|x| x.name.starts_with("node_netstat_Ip6_")
                || x.name.starts_with("node_netstat_Udp6_")));
    }
}
