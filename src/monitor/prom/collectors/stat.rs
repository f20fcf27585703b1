//! /proc/stat: node_exporter's cpu and stat collectors' series (CPU
//! seconds per mode, context switches, runnable and blocked tasks).

use super::super::exposition::{Exposition, Kind, Value};
use super::input::Input;

/// /proc/stat: CPU time per mode, context switches, tasks.
pub fn write(input: &Input, out: &mut Exposition) {
    let mut f = out.family(
        "node_cpu_seconds_total",
        "Seconds the CPUs spent in each mode.",
        Kind::Counter,
    );
    for t in input.cpu_time {
        let cpu = t.cpu.to_string();
        for (mode, ticks) in [
            ("idle", t.idle),
            ("iowait", t.iowait),
            ("irq", t.irq),
            ("nice", t.nice),
            ("softirq", t.softirq),
            ("steal", t.steal),
            ("system", t.system),
            ("user", t.user),
        ] {
            f.sample(&[("cpu", &cpu), ("mode", mode)], Value::Ticks(ticks));
        }
    }
    let system = &input.sample.counters.system;
    if let Some(n) = system.context_switches {
        out.family(
            "node_context_switches_total",
            "Total number of context switches.",
            Kind::Counter,
        )
        .sample(&[], n);
    }
    if let Some(n) = system.procs_running {
        out.family(
            "node_procs_running",
            "Number of processes in runnable state.",
            Kind::Gauge,
        )
        .sample(&[], n);
    }
    if let Some(n) = system.procs_blocked {
        out.family(
            "node_procs_blocked",
            "Number of processes blocked waiting for I/O to complete.",
            Kind::Gauge,
        )
        .sample(&[], n);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{value, written};
    use super::*;
    use crate::monitor::testkit;

    #[test]
    fn cpu_time_in_seconds_and_the_task_counts() {
        let s = written(write, &testkit::first(), None);
        // 10,000 USER_HZ ticks are 100 s.
        let user = value(
            &s,
            "node_cpu_seconds_total",
            &[("cpu", "1"), ("mode", "user")],
        );
        assert_eq!(user, Some(100.0));
        assert!(value(&s, "node_context_switches_total", &[]).is_some());
    }
}
