//! The text view: one block per interval in the manner of sar and
//! `mpstat -P ALL`: a header line with the time, then the CPUs, the queue
//! IRQs (the queue x CPU matrix, by the CPUs that took interrupts), the
//! interfaces and their queues, the drop ladder, tasks, findings and what
//! could not be read. Numbers are plain (no separators) with two
//! decimals, so `awk` can read them; `-` is a value that could not be
//! computed this interval (a gap, or a counter the kernel lacks).

use std::fmt::Write as _;

use crate::base::units::format_time;

use super::feed::Frame;
use super::rates::Lifecycle;
use super::CpuShares;

/// CPUs named one by one in an IRQ row; more are counted.
const IRQ_CPUS_NAMED: usize = 8;

/// The block of one frame, ending with a blank line.
pub fn render(frame: &Frame) -> String {
    let mut o = String::new();
    let r = &frame.rates;
    let scope = match &frame.sample.source.netns {
        Some(ns) => format!("  netns {ns} (CPU, softirq and softnet figures are the whole host's)"),
        None => String::new(),
    };
    let _ = writeln!(
        o,
        "{}  interval {}{scope}",
        clock(r.unix_ms),
        format_time(r.interval_secs)
    );
    cpus(&mut o, frame);
    irqs(&mut o, frame);
    interfaces(&mut o, frame);
    ladder(&mut o, frame);
    let s = &r.system;
    let _ = writeln!(
        o,
        "tasks    cswch/s {}  runnable {}  blocked {}",
        num(s.context_switches_per_sec),
        s.procs_running.map_or("-".into(), |n| n.to_string()),
        s.procs_blocked.map_or("-".into(), |n| n.to_string())
    );
    if frame.findings.is_empty() {
        let _ = writeln!(o, "findings none");
    } else {
        let _ = writeln!(o, "findings");
        for f in &frame.findings {
            let _ = writeln!(
                o,
                "  {:<4} {:<21} {}: {}",
                f.severity.label(),
                f.id,
                f.title,
                f.evidence
            );
        }
    }
    if !frame.sample.missing.is_empty() {
        let _ = writeln!(o, "not read: {}", missing_list(&frame.sample.missing));
    }
    // No trailing blanks (an IRQ row without interrupts ends in its
    // empty per-CPU column).
    let mut block: String = o.lines().map(|l| l.trim_end().to_string() + "\n").collect();
    block.push('\n');
    block
}

/// The sources that could not be read, on one line:
/// `counters.softnet (/proc/net/softnet_stat: missing); ...`.
pub fn missing_list(missing: &[crate::host::SourceIssue]) -> String {
    let parts: Vec<String> = missing
        .iter()
        .map(|m| {
            if m.path.is_empty() {
                format!("{} ({})", m.section, m.error)
            } else {
                format!("{} ({}: {})", m.section, m.path, m.kind.word())
            }
        })
        .collect();
    parts.join("; ")
}

/// A rate with two decimals, or `-`.
fn num(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
}

/// Local wall-clock time `HH:MM:SS` of a Unix time in ms (as sar prints it).
pub fn clock(unix_ms: u64) -> String {
    let secs = (unix_ms / 1000) as libc::time_t;
    // SAFETY: localtime_r fills the tm we own; both pointers are valid.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return format!("{}s", unix_ms / 1000);
        }
        tm
    };
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

fn shares(o: &mut String, label: &str, t: Option<CpuShares>) {
    match t {
        Some(t) => {
            let _ = write!(
                o,
                "{label:<5} {:>7.2} {:>6.2} {:>6.2} {:>7.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2}",
                t.usr, t.nice, t.sys, t.iowait, t.irq, t.soft, t.steal, t.idle
            );
        }
        None => {
            let _ = write!(
                o,
                "{label:<5} {:>7} {:>6} {:>6} {:>7} {:>6} {:>6} {:>6} {:>6}",
                "-", "-", "-", "-", "-", "-", "-", "-"
            );
        }
    }
}

fn cpus(o: &mut String, frame: &Frame) {
    let _ = writeln!(
        o,
        "CPU      %usr  %nice   %sys %iowait   %irq  %soft %steal  %idle {:>11} {:>11} {:>10} {:>9} {:>10}",
        "NET_RX/s", "NET_TX/s", "drop/s", "squeez/s", "nicirq/s"
    );
    let r = &frame.rates;
    let sum = |pick: fn(&super::CpuRates) -> Option<f64>| -> Option<f64> {
        r.cpus.iter().map(pick).try_fold(0.0, |s, v| Some(s + v?))
    };
    shares(o, "all", r.all_cpus);
    let _ = writeln!(
        o,
        " {:>11} {:>11} {:>10} {:>9} {:>10}",
        num(sum(|c| c.net_rx_per_sec)),
        num(sum(|c| c.net_tx_per_sec)),
        num(sum(|c| c.softnet?.dropped_per_sec)),
        num(sum(|c| c.softnet?.time_squeeze_per_sec)),
        num(sum(|c| c.nic_irqs_per_sec)),
    );
    for c in &r.cpus {
        shares(o, &c.cpu.to_string(), c.time);
        let _ = writeln!(
            o,
            " {:>11} {:>11} {:>10} {:>9} {:>10}",
            num(c.net_rx_per_sec),
            num(c.net_tx_per_sec),
            num(c.softnet.and_then(|s| s.dropped_per_sec)),
            num(c.softnet.and_then(|s| s.time_squeeze_per_sec)),
            num(c.nic_irqs_per_sec),
        );
    }
}

fn lifecycle_note(l: Lifecycle) -> &'static str {
    match l {
        Lifecycle::Continuing => "",
        Lifecycle::Appeared => "  (new: rates from the next interval)",
        Lifecycle::Recreated => "  (re-created, counters restarted: rates from the next interval)",
    }
}

fn irqs(o: &mut String, frame: &Frame) {
    let r = &frame.rates;
    if r.irqs.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "IRQ    {:<12} {:>5} {:<8} {:>11}  per CPU (intr/s)",
        "iface", "queue", "role", "intr/s"
    );
    for irq in &r.irqs {
        let mut cells: Vec<String> = irq
            .per_cpu
            .iter()
            .take(IRQ_CPUS_NAMED)
            .map(|c| format!("CPU{} {:.2}", c.cpu, c.per_sec))
            .collect();
        if irq.per_cpu.len() > IRQ_CPUS_NAMED {
            cells.push(format!("+{} CPUs", irq.per_cpu.len() - IRQ_CPUS_NAMED));
        }
        let role = serde_json::to_value(irq.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "{:<6} {:<12} {:>5} {:<8} {:>11}  {}{}",
            irq.irq,
            irq.iface,
            irq.queue.map_or("-".to_string(), |q| q.to_string()),
            role,
            num(irq.per_sec),
            cells.join(", "),
            lifecycle_note(irq.lifecycle)
        );
    }
}

fn interfaces(o: &mut String, frame: &Frame) {
    let r = &frame.rates;
    let _ = writeln!(
        o,
        "IFACE        {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "rxpck/s", "txpck/s", "rxkB/s", "txkB/s", "rxdrop/s", "rxmiss/s"
    );
    let kb = |v: Option<f64>| v.map(|b| b / 1000.0);
    for i in &r.interfaces {
        let _ = writeln!(
            o,
            "{:<12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}{}",
            i.name,
            num(i.rx_packets_per_sec),
            num(i.tx_packets_per_sec),
            num(kb(i.rx_bytes_per_sec)),
            num(kb(i.tx_bytes_per_sec)),
            num(i.link.get("rx_dropped").copied().flatten()),
            num(i.link.get("rx_missed_errors").copied().flatten()),
            lifecycle_note(i.lifecycle)
        );
        for q in &i.queues {
            let (pck, bytes, drops) = (q.packets_per_sec, q.bytes_per_sec, q.drops_per_sec);
            if pck.is_none() && bytes.is_none() && drops.is_none() {
                continue;
            }
            let _ = writeln!(
                o,
                "  {:<10} {:>12} {:>12} {:>12} {:>12} {:>10}",
                format!("{}-{}", q.direction, q.index),
                num(if q.direction == "rx" { pck } else { None }),
                num(if q.direction == "tx" { pck } else { None }),
                num(if q.direction == "rx" { kb(bytes) } else { None }),
                num(if q.direction == "tx" { kb(bytes) } else { None }),
                num(drops),
            );
        }
    }
    if !r.vanished.interfaces.is_empty() {
        let _ = writeln!(o, "gone: {}", r.vanished.interfaces.join(", "));
    }
}

fn ladder(o: &mut String, frame: &Frame) {
    let d = &frame.rates.drops;
    let mut parts = Vec::new();
    for layer in &d.layers {
        if layer.counters.is_empty() {
            continue;
        }
        let mut part = format!("{} {}", layer.layer.title(), num(layer.drops_per_sec));
        let details: Vec<String> = layer
            .counters
            .iter()
            .filter(|c| c.per_sec.is_some_and(|r| r > 0.0))
            .map(|c| match &c.scope {
                Some(scope) => format!("{scope} {} {}", c.name, num(c.per_sec)),
                None => format!("{} {}", c.name, num(c.per_sec)),
            })
            .collect();
        if !details.is_empty() {
            part.push_str(&format!(" ({})", details.join(", ")));
        }
        parts.push(part);
    }
    let worst = match d.worst {
        Some(layer) => format!("  <- losing at {}", layer.title()),
        None => String::new(),
    };
    let _ = writeln!(o, "drops/s  {}{worst}", parts.join(" > "));
    // The kernel's reasons, when traced (why not is said once, on stderr).
    let reasons: Vec<String> = d
        .layers
        .iter()
        .filter(|l| !l.reasons.is_empty())
        .map(|l| {
            let each: Vec<String> = l
                .reasons
                .iter()
                .map(
                    |r| match r.locations.first().and_then(|p| p.name.as_deref()) {
                        Some(at) => format!("{} {} ({at})", r.reason, num(r.per_sec)),
                        None => format!("{} {}", r.reason, num(r.per_sec)),
                    },
                )
                .collect();
            format!("{} {}", l.layer.title(), each.join(", "))
        })
        .collect();
    if !reasons.is_empty() {
        let _ = writeln!(o, "reasons/s  {}", reasons.join("; "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::testkit::*;

    #[test]
    fn a_block_shows_cpus_irqs_interfaces_drops_and_findings() {
        let s0 = first();
        let s1 = after(&s0, 1.0, |s| {
            tick(s, 1, [0, 0, 9, 0, 0, 0, 91, 0]);
            tick(s, 0, [10, 0, 10, 80, 0, 0, 0, 0]);
            s.irqs[0].per_cpu[1] += 5_000;
            bump_link(s, "eth0", "rx_packets", 60_000);
            bump(&mut s.counters.udp, "RcvbufErrors", 2_000);
            bump(&mut s.counters.udp, "InErrors", 2_000);
        });
        let text = render(&Frame::between(&s0, s1));
        let line = |start: &str| {
            text.lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no line starting '{start}' in\n{text}"))
                .to_string()
        };
        assert!(line("CPU ").contains("%soft"), "{text}");
        let cpu1 = line("1 ");
        let cpu1: Vec<&str> = cpu1.split_whitespace().collect();
        assert_eq!(
            &cpu1[..9],
            ["1", "0.00", "0.00", "9.00", "0.00", "0.00", "91.00", "0.00", "0.00"],
            "{text}"
        );
        assert!(line("38 ").contains("CPU1 5000.00"), "{text}");
        assert!(line("eth0").contains("60000.00"), "{text}");
        assert!(
            line("drops/s").contains("UDP 2000.00 (RcvbufErrors 2000.00, InErrors 2000.00)"),
            "{text}"
        );
        assert!(line("drops/s").ends_with("<- losing at UDP"), "{text}");
        assert!(text.contains("crit softirq.hotspot"), "{text}");
        assert!(text.contains("crit udp.rcvbuf-errors"), "{text}");
        assert!(text.ends_with("\n\n"));
    }

    #[test]
    fn gaps_show_as_dashes_and_new_interfaces_are_named() {
        let s0 = first();
        let s1 = after(&s0, 1.0, |s| {
            s.interfaces[0].ifindex = Some(99);
            s.counters.cpu_time[0].user = 0;
        });
        let text = render(&Frame::between(&s0, s1));
        let eth0 = text.lines().find(|l| l.starts_with("eth0")).expect("eth0");
        assert!(
            eth0.contains(" - ") && eth0.contains("re-created"),
            "{eth0}"
        );
        let cpu0 = text.lines().find(|l| l.starts_with("0 ")).expect("cpu0");
        assert!(cpu0.split_whitespace().nth(1) == Some("-"), "{cpu0}");
    }
}
