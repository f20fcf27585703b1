//! /proc/net/softnet_stat: node_exporter's softnet collector's series,
//! per CPU.

use super::super::exposition::{Exposition, Kind};
use super::input::Input;

/// /proc/net/softnet_stat, per CPU.
pub fn write(input: &Input, out: &mut Exposition) {
    let softnet = &input.sample.counters.softnet;
    type Pick = fn(&crate::host::softnet::SoftnetCpu) -> Option<u64>;
    let families: [(&str, &str, Pick); 4] = [
        (
            "node_softnet_processed_total",
            "Number of processed packets",
            |s| Some(s.processed),
        ),
        (
            "node_softnet_dropped_total",
            "Number of dropped packets",
            |s| Some(s.dropped),
        ),
        (
            "node_softnet_times_squeezed_total",
            "Number of times processing packets ran out of quota",
            |s| Some(s.time_squeeze),
        ),
        (
            "node_softnet_received_rps_total",
            "Number of times cpu woken up received_rps",
            |s| s.received_rps,
        ),
    ];
    for (name, help, pick) in families {
        let mut f = out.family(name, help, Kind::Counter);
        for s in softnet {
            if let Some(v) = pick(s) {
                f.sample(&[("cpu", &s.cpu.to_string())], v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::monitor::testkit;

    #[test]
    fn drops_and_squeezes_per_cpu() {
        let s = written(write, &testkit::first(), None);
        assert_eq!(
            value(&s, "node_softnet_dropped_total", &[("cpu", "0")]),
            Some(10.0)
        );
        for name in [
            "node_softnet_processed_total",
            "node_softnet_times_squeezed_total",
        ] {
            assert!(value(&s, name, &[("cpu", "0")]).is_some(), "{name}");
        }
    }
}
