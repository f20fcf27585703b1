//! /proc/net/snmp: Ip, Tcp and Udp, as `node_netstat_<Proto>_<Name>`.

use super::super::exposition::Exposition;
use super::input::Input;
use super::netstat::netstat_section;

/// /proc/net/snmp: Ip, Tcp, Udp.
pub fn write(input: &Input, out: &mut Exposition) {
    let c = &input.sample.counters;
    netstat_section("Ip", &c.ip, out);
    netstat_section("Tcp", &c.tcp, out);
    netstat_section("Udp", &c.udp, out);
}

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::monitor::testkit;

    #[test]
    fn udp_receive_buffer_errors() {
        let s = written(write, &testkit::first(), None);
        assert_eq!(value(&s, "node_netstat_Udp_RcvbufErrors", &[]), Some(40.0));
        assert!(value(&s, "node_netstat_Udp_InErrors", &[]).is_some());
    }
}
