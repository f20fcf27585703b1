//! Live findings: what one interval's rates show, judged with doctor's
//! rules and thresholds (docs/doctor.md), as a pure function of the
//! [`Rates`] and the [`State`]. A view shows them beside the numbers; an
//! exporter publishes them as `nettune_finding{id,severity}`.
//!
//! The ids are doctor's where the rule is the same (`softirq.hotspot`,
//! `softnet.drops`, `softnet.squeeze`, `udp.rcvbuf-errors`,
//! `tcp.listen-overflows`, `nic.rings-small`), so a user looks them up in
//! one place; `nic.drops` is monitor's own (the NIC is losing packets and
//! the ring is already at its maximum, or its size is unknown). Unlike
//! doctor's findings they carry no fix: `nettune doctor` gives it.

use serde::{Deserialize, Serialize};

use crate::base::units::format_count;
use crate::doctor::thresholds::{
    HOT_SHARE, LITTLE_SHARE, MIN_IDLE_OTHERS, MIN_NET_RX_PER_SEC, SATURATED_SOFTIRQ,
    UDP_ERRORS_CRIT_PER_SEC,
};
use crate::doctor::Severity;

use super::ladder::Layer;
use super::rates::Rates;
use super::state::State;

/// One thing the interval shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveFinding {
    /// doctor's rule id (docs/doctor.md), or `nic.drops`.
    pub id: String,
    pub severity: Severity,
    /// One line.
    pub title: String,
    /// The rates seen in this interval.
    pub evidence: String,
}

/// At most this many CPUs or interfaces are named one by one.
const MAX_NAMED: usize = 4;

/// The findings of one interval, worst first (ties in id order).
pub fn findings(rates: &Rates, state: &State) -> Vec<LiveFinding> {
    let mut out = Vec::new();
    if rates.interval_secs > 0.0 {
        hotspot(rates, &mut out);
        softnet(rates, state, &mut out);
        udp(rates, state, &mut out);
        listen(rates, state, &mut out);
        nic(rates, state, &mut out);
    }
    out.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.id.cmp(&b.id)));
    out
}

fn finding(id: &str, severity: Severity, title: &str, evidence: String) -> LiveFinding {
    LiveFinding {
        id: id.to_string(),
        severity,
        title: title.to_string(),
        evidence,
    }
}

/// "12,345" for a rate, rounded.
fn per_sec(rate: f64) -> String {
    format_count(rate.round() as u64)
}

/// "CPU1 500/s, CPU3 20/s" for the non-zero rates, highest first.
fn named(mut rows: Vec<(String, f64)>) -> String {
    rows.retain(|(_, r)| *r > 0.0);
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut parts: Vec<String> = rows
        .iter()
        .take(MAX_NAMED)
        .map(|(who, r)| format!("{who} {}/s", per_sec(*r)))
        .collect();
    if rows.len() > MAX_NAMED {
        parts.push(format!("{} more", rows.len() - MAX_NAMED));
    }
    parts.join(", ")
}

/// softirq.hotspot: one CPU runs most NET_RX softirqs while others idle,
/// or a CPU spends most of its time in softirq (crit).
fn hotspot(rates: &Rates, out: &mut Vec<LiveFinding>) {
    let mut evidence = Vec::new();
    let mut severity = Severity::Warn;
    let net_rx: Vec<(u32, f64)> = rates
        .cpus
        .iter()
        .filter_map(|c| Some((c.cpu, c.net_rx_per_sec?)))
        .collect();
    let total: f64 = net_rx.iter().map(|(_, r)| r).sum();
    if total >= MIN_NET_RX_PER_SEC {
        if let Some(&(hot, hot_rate)) = net_rx
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
        {
            let share = hot_rate / total;
            let idle_others = net_rx
                .iter()
                .filter(|(cpu, r)| *cpu != hot && r / total < LITTLE_SHARE)
                .count();
            if share > HOT_SHARE && idle_others >= MIN_IDLE_OTHERS {
                evidence.push(format!(
                    "CPU{hot} ran {:.0}% of NET_RX softirqs ({}/s of {}/s)",
                    100.0 * share,
                    per_sec(hot_rate),
                    per_sec(total)
                ));
            }
        }
    }
    for cpu in &rates.cpus {
        if let Some(time) = cpu.time.filter(|t| t.soft > 100.0 * SATURATED_SOFTIRQ) {
            severity = Severity::Crit;
            evidence.push(format!("CPU{} at {:.0}% soft", cpu.cpu, time.soft));
        }
    }
    if !evidence.is_empty() {
        out.push(finding(
            "softirq.hotspot",
            severity,
            "One CPU carries the receive softirq work",
            evidence.join("; "),
        ));
    }
}

/// softnet.drops and softnet.squeeze, per CPU.
fn softnet(rates: &Rates, state: &State, out: &mut Vec<LiveFinding>) {
    let rows = |pick: fn(&super::SoftnetRates) -> Option<f64>| -> Vec<(String, f64)> {
        rates
            .cpus
            .iter()
            .filter_map(|c| Some((format!("CPU{}", c.cpu), pick(c.softnet.as_ref()?)?)))
            .collect()
    };
    let setting = |name: &str| {
        state
            .sysctl_u64(name)
            .map(|v| format!("; {name} = {v}"))
            .unwrap_or_default()
    };
    let dropped = rows(|s| s.dropped_per_sec);
    if dropped.iter().any(|(_, r)| *r > 0.0) {
        out.push(finding(
            "softnet.drops",
            Severity::Warn,
            "CPU backlogs overflowed and dropped packets",
            format!(
                "backlog drops {}{}",
                named(dropped),
                setting("net.core.netdev_max_backlog")
            ),
        ));
    }
    let squeezed = rows(|s| s.time_squeeze_per_sec);
    if squeezed.iter().any(|(_, r)| *r > 0.0) {
        out.push(finding(
            "softnet.squeeze",
            Severity::Warn,
            "The receive softirq ran out of budget",
            format!(
                "time_squeeze {}{}",
                named(squeezed),
                setting("net.core.netdev_budget")
            ),
        ));
    }
}

/// The rate of one counter of a ladder layer.
fn counter_rate(rates: &Rates, layer: Layer, name: &str) -> Option<f64> {
    rates
        .drops
        .layer(layer)?
        .counters
        .iter()
        .find(|c| c.name == name)?
        .per_sec
}

/// udp.rcvbuf-errors: UDP receive errors over IPv4 or IPv6.
fn udp(rates: &Rates, state: &State, out: &mut Vec<LiveFinding>) {
    let mut worst = 0.0;
    let mut seen = Vec::new();
    for (proto, layer) in [("Udp", Layer::Udp), ("Udp6", Layer::Udp6)] {
        let rcvbuf = counter_rate(rates, layer, "RcvbufErrors").unwrap_or(0.0);
        let in_errors = counter_rate(rates, layer, "InErrors").unwrap_or(0.0);
        worst += rcvbuf.max(in_errors);
        let parts: Vec<String> = [("RcvbufErrors", rcvbuf), ("InErrors", in_errors)]
            .iter()
            .filter(|(_, r)| *r > 0.0)
            .map(|(name, r)| format!("{name} {}/s", per_sec(*r)))
            .collect();
        if !parts.is_empty() {
            seen.push(format!("{proto} {}", parts.join(", ")));
        }
    }
    if worst <= 0.0 {
        return;
    }
    let severity = if worst >= UDP_ERRORS_CRIT_PER_SEC {
        Severity::Crit
    } else {
        Severity::Warn
    };
    let buffers = state
        .sysctl_u64("net.core.rmem_default")
        .map(|v| format!("; net.core.rmem_default = {v}"))
        .unwrap_or_default();
    out.push(finding(
        "udp.rcvbuf-errors",
        severity,
        "UDP datagrams dropped at full socket buffers",
        format!("{}{buffers}", seen.join("; ")),
    ));
}

/// tcp.listen-overflows: accept queues overflowing.
fn listen(rates: &Rates, state: &State, out: &mut Vec<LiveFinding>) {
    let seen: Vec<String> = ["ListenOverflows", "ListenDrops"]
        .iter()
        .filter_map(|name| {
            let r = counter_rate(rates, Layer::Tcp, name).filter(|r| *r > 0.0)?;
            Some(format!("{name} {}/s", per_sec(r)))
        })
        .collect();
    if seen.is_empty() {
        return;
    }
    let somaxconn = state
        .sysctl_u64("net.core.somaxconn")
        .map(|v| format!("; net.core.somaxconn = {v}"))
        .unwrap_or_default();
    out.push(finding(
        "tcp.listen-overflows",
        Severity::Warn,
        "Listening sockets' accept queues overflowed",
        format!("{}{somaxconn}", seen.join(", ")),
    ));
}

/// nic.rings-small (the ring could be larger) or nic.drops (it cannot, or
/// its size is unknown): the NIC ran out of receive buffers.
fn nic(rates: &Rates, state: &State, out: &mut Vec<LiveFinding>) {
    for iface in &rates.interfaces {
        let losses: Vec<(String, f64)> = ["rx_missed_errors", "rx_fifo_errors", "rx_over_errors"]
            .iter()
            .filter_map(|name| Some((name.to_string(), iface.link.get(*name).copied()??)))
            .collect();
        if !losses.iter().any(|(_, r)| *r > 0.0) {
            continue;
        }
        let rings = state.interface(&iface.name).and_then(|s| s.rings);
        let (id, title, ring) = match rings {
            Some(r) if r.rx < r.rx_max => (
                "nic.rings-small",
                "RX ring below its maximum while the NIC drops",
                format!("; RX ring {} of a possible {}", r.rx, r.rx_max),
            ),
            Some(r) => (
                "nic.drops",
                "The NIC ran out of receive buffers",
                format!("; RX ring {} (its maximum)", r.rx),
            ),
            None => (
                "nic.drops",
                "The NIC ran out of receive buffers",
                String::new(),
            ),
        };
        let evidence = losses
            .iter()
            .filter(|(_, r)| *r > 0.0)
            .map(|(name, r)| format!("{name} {}/s", per_sec(*r)))
            .collect::<Vec<_>>()
            .join(", ");
        out.push(finding(
            id,
            Severity::Warn,
            &format!("{}: {title}", iface.name),
            format!("{} {evidence}{ring}", iface.name),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::driver::Rings;
    use crate::monitor::between;
    use crate::monitor::state::InterfaceState;
    use crate::monitor::testkit::*;

    fn state() -> State {
        let mut state = State::default();
        state
            .sysctls
            .insert("net.core.netdev_max_backlog".into(), "1000".into());
        state
            .sysctls
            .insert("net.core.rmem_default".into(), "212992".into());
        state
    }

    fn ids(f: &[LiveFinding]) -> Vec<(&str, Severity)> {
        f.iter().map(|f| (f.id.as_str(), f.severity)).collect()
    }

    #[test]
    fn a_quiet_interval_shows_nothing() {
        let s0 = first();
        let s1 = after(&s0, 1.0, |s| tick(s, 0, [5, 0, 5, 90, 0, 0, 0, 0]));
        assert!(findings(&between(&s0, &s1), &state()).is_empty());
    }

    #[test]
    fn the_softirq_hotspot_of_a_udp_flood() {
        // Four CPUs; over 1 s CPU1 ran 60,000 NET_RX softirqs and spent
        // 91% of its time in softirq; the others ran 100 each.
        let mut s0 = first();
        for cpu in 2..4 {
            let mut t = s0.counters.cpu_time[0].clone();
            t.cpu = cpu;
            s0.counters.cpu_time.push(t);
            let mut n = s0.counters.softirqs[0].clone();
            n.cpu = cpu;
            s0.counters.softirqs.push(n);
        }
        let s1 = after(&s0, 1.0, |s| {
            for n in &mut s.counters.softirqs {
                n.net_rx += if n.cpu == 1 { 60_000 } else { 100 };
            }
            tick(s, 1, [0, 0, 9, 0, 0, 0, 91, 0]);
        });
        let f = findings(&between(&s0, &s1), &state());
        assert_eq!(ids(&f), [("softirq.hotspot", Severity::Crit)]);
        assert!(
            f[0].evidence
                .contains("CPU1 ran 100% of NET_RX softirqs (60,000/s of 60,300/s)")
                && f[0].evidence.contains("CPU1 at 91% soft"),
            "{}",
            f[0].evidence
        );
        // Spread work, no saturated CPU: nothing. An idle host: nothing.
        let spread = after(&s0, 1.0, |s| {
            for n in &mut s.counters.softirqs {
                n.net_rx += 20_000;
            }
        });
        assert!(findings(&between(&s0, &spread), &state()).is_empty());
        let idle = after(&s0, 1.0, |s| s.counters.softirqs[1].net_rx += 500);
        assert!(findings(&between(&s0, &idle), &state()).is_empty());
    }

    #[test]
    fn drops_growing_layer_by_layer() {
        let s0 = first();
        let s1 = after(&s0, 2.0, |s| {
            s.counters.softnet[1].dropped += 400;
            s.counters.softnet[0].time_squeeze += 20;
            bump(&mut s.counters.udp, "RcvbufErrors", 4_000);
            bump(&mut s.counters.udp, "InErrors", 4_000);
            bump(&mut s.counters.tcp_ext, "ListenOverflows", 6);
            bump(&mut s.counters.tcp_ext, "ListenDrops", 6);
            bump_link(s, "eth0", "rx_missed_errors", 10);
        });
        let f = findings(&between(&s0, &s1), &state());
        assert_eq!(
            ids(&f),
            [
                ("udp.rcvbuf-errors", Severity::Crit),
                ("nic.drops", Severity::Warn),
                ("softnet.drops", Severity::Warn),
                ("softnet.squeeze", Severity::Warn),
                ("tcp.listen-overflows", Severity::Warn),
            ]
        );
        let by = |id: &str| f.iter().find(|f| f.id == id).expect(id).evidence.clone();
        assert_eq!(
            by("udp.rcvbuf-errors"),
            "Udp RcvbufErrors 2,000/s, InErrors 2,000/s; net.core.rmem_default = 212992"
        );
        assert_eq!(
            by("softnet.drops"),
            "backlog drops CPU1 200/s; net.core.netdev_max_backlog = 1000"
        );
        assert_eq!(
            by("tcp.listen-overflows"),
            "ListenOverflows 3/s, ListenDrops 3/s"
        );
        assert_eq!(by("nic.drops"), "eth0 rx_missed_errors 5/s");

        // With the ring below its maximum the fix is known: doctor's id.
        let mut st = state();
        st.interfaces.push(InterfaceState {
            name: "eth0".into(),
            ifindex: Some(2),
            driver: None,
            operstate: None,
            speed_mbps: None,
            mtu: None,
            numa_node: None,
            qdisc: None,
            rings: Some(Rings {
                rx: 512,
                rx_max: 4096,
                rx_mini: 0,
                rx_mini_max: 0,
                rx_jumbo: 0,
                rx_jumbo_max: 0,
                tx: 512,
                tx_max: 4096,
            }),
            channels: None,
            rx_queues: Vec::new(),
            tx_queues: Vec::new(),
            irqs: Vec::new(),
        });
        let f = findings(&between(&s0, &s1), &st);
        let ring = f.iter().find(|f| f.id == "nic.rings-small").expect("rings");
        assert!(
            ring.evidence.ends_with("RX ring 512 of a possible 4096"),
            "{}",
            ring.evidence
        );
    }

    #[test]
    fn udp6_errors_count_and_gaps_are_not_findings() {
        let s0 = first();
        let s1 = after(&s0, 1.0, |s| {
            bump(&mut s.counters.udp6, "RcvbufErrors", 30);
            bump(&mut s.counters.udp6, "InErrors", 30);
        });
        let f = findings(&between(&s0, &s1), &state());
        assert_eq!(ids(&f), [("udp.rcvbuf-errors", Severity::Warn)]);
        assert!(
            f[0].evidence.starts_with("Udp6 RcvbufErrors 30/s"),
            "{}",
            f[0].evidence
        );
        // Counters that went back (a namespace re-created) are gaps.
        let s2 = after(&s1, 1.0, |s| {
            s.counters.udp6.insert("InErrors".into(), 0);
            s.counters.softnet[1].dropped = 1;
        });
        assert!(findings(&between(&s1, &s2), &state()).is_empty());
    }
}
