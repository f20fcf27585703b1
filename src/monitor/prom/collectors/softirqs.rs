//! /proc/softirqs: the network softirqs per CPU, as node_exporter's
//! softirqs collector names them.

use super::super::exposition::{Exposition, Kind};
use super::input::Input;

/// /proc/softirqs: NET_RX and NET_TX per CPU, as node_exporter's
/// softirqs collector names them.
pub fn write(input: &Input, out: &mut Exposition) {
    let mut f = out.family(
        "node_softirqs_functions_total",
        "Softirq counts per CPU.",
        Kind::Counter,
    );
    for s in &input.sample.counters.softirqs {
        let cpu = s.cpu.to_string();
        f.sample(&[("cpu", &cpu), ("type", "NET_RX")], s.net_rx);
        f.sample(&[("cpu", &cpu), ("type", "NET_TX")], s.net_tx);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::monitor::testkit;

    #[test]
    fn net_rx_per_cpu() {
        let s = written(write, &testkit::first(), None);
        assert_eq!(
            value(
                &s,
                "node_softirqs_functions_total",
                &[("cpu", "1"), ("type", "NET_RX")]
            ),
            Some(900_000.0)
        );
    }
}
