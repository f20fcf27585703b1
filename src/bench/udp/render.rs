//! The UDP reports as text, in the article's units. Pure: the command line
//! prints what these return.

use std::fmt::Write as _;

use super::flows::SequenceSummary;
use super::{FloodReport, KernelDelta, RcvBuf, SinkReport};
use crate::bench::report::{format_rate, plural};
use crate::bench::traffic::rate_window;

/// The sink's final report.
pub fn sink_text(r: &SinkReport) -> String {
    let mut out = String::new();
    let window = rate_window(r.traffic_s, r.duration_s);
    let _ = writeln!(
        out,
        "udp-sink: {} packets, {} bytes in {:.3} s ({:.3} s of traffic){}",
        r.packets,
        r.bytes,
        r.duration_s,
        r.traffic_s,
        stopped(&r.ended)
    );
    let _ = writeln!(out, "total     {}", format_rate(r.packets, r.bytes, window));
    let _ = writeln!(
        out,
        "engine    {}{}: {} receive{} of {:.1} packets on average; CPU {:.3} s, {}",
        r.engine,
        if r.gro { " with UDP_GRO" } else { "" },
        r.datagrams,
        plural(r.datagrams as usize),
        if r.datagrams > 0 {
            r.packets as f64 / r.datagrams as f64
        } else {
            0.0
        },
        r.cpu_s,
        per_packet(r.cpu_ns_per_packet)
    );
    if !r.engine_reason.is_empty() {
        let _ = writeln!(out, "why       {}", r.engine_reason);
    }
    for t in &r.per_thread {
        let _ = writeln!(
            out,
            "thread {:<2} {}  ({} packets)",
            t.thread,
            format_rate(t.packets, t.bytes, window),
            t.packets
        );
    }
    let s = &r.sequence;
    let _ = writeln!(out, "{}", sequence_line(s));
    let k = &r.kernel;
    let show = |v: Option<i64>| v.map_or("?".to_string(), |v| format!("+{v}"));
    let show_u = |v: Option<u64>| v.map_or("?".to_string(), |v| format!("+{v}"));
    let place = r
        .netns
        .as_deref()
        .map(|ns| format!(" (network namespace {ns})"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "kernel    Udp InDatagrams {}  InErrors {}  RcvbufErrors {}  MemErrors {}  NoPorts {}{place}",
        show(k.udp_in_datagrams),
        show(k.udp_in_errors),
        show(k.udp_rcvbuf_errors),
        show(k.udp_mem_errors),
        show(k.udp_no_ports)
    );
    let _ = writeln!(
        out,
        "          softnet dropped {}  time_squeeze {}{}",
        show_u(k.softnet_dropped),
        show_u(k.softnet_time_squeeze),
        if r.netns.is_some() {
            " (whole host: softnet_stat is not per namespace)"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "where     {}", where_lost(s, k, &r.rcvbuf));
    out
}

/// The flood's final report.
pub fn flood_text(r: &FloodReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "udp-flood: {} packets, {} bytes in {:.3} s{}",
        r.packets,
        r.bytes,
        r.duration_s,
        stopped(&r.ended)
    );
    let _ = writeln!(
        out,
        "total     {}",
        format_rate(r.packets, r.bytes, r.duration_s)
    );
    for t in &r.per_thread {
        let _ = writeln!(
            out,
            "thread {:<2} {}  ({} packets, {} send errors)",
            t.thread,
            format_rate(t.packets, t.bytes, r.duration_s),
            t.packets,
            t.send_errors.total()
        );
    }
    let _ = writeln!(
        out,
        "cpu       {:.3} s, {}{}",
        r.cpu_s,
        per_packet(r.cpu_ns_per_packet),
        r.gso_segments
            .map(|n| format!("; UDP_SEGMENT {n} packets per send"))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "errors    {}", r.send_errors.describe());
    out
}

/// "123 ns per packet", or "no packets".
fn per_packet(ns: Option<f64>) -> String {
    ns.map_or("no packets".to_string(), |ns| {
        format!("{ns:.0} ns per packet")
    })
}

/// `sequence  1 sender, 16 flows: ... received, ... lost (...%), ...`: what
/// the sequence numbers say (the AF_XDP sink prints it too).
pub fn sequence_line(s: &SequenceSummary) -> String {
    let expected = s.received + s.lost;
    format!(
        "sequence  {} sender{}, {} flow{}: {} received, {} lost ({:.3}%), {} reordered, {} duplicate, {} without header",
        s.senders,
        plural(s.senders as usize),
        s.flows,
        plural(s.flows as usize),
        s.received,
        s.lost,
        if expected > 0 { 100.0 * s.lost as f64 / expected as f64 } else { 0.0 },
        s.reordered,
        s.duplicates,
        s.without_header
    )
}

/// `, stopped early` for a run the stop token ended.
pub fn stopped(ended: &str) -> &'static str {
    if ended == "interrupted" {
        ", stopped early"
    } else {
        ""
    }
}

/// One sentence on where the lost packets died, from the counters.
pub fn where_lost(s: &SequenceSummary, k: &KernelDelta, rcvbuf: &RcvBuf) -> String {
    let rcvbuf_errors = k.udp_rcvbuf_errors.unwrap_or(0).max(0) as u64;
    let mem_errors = k.udp_mem_errors.unwrap_or(0).max(0) as u64;
    let backlog = k.softnet_dropped.unwrap_or(0);
    let counted = rcvbuf_errors + mem_errors + backlog;
    if s.lost == 0 && counted == 0 {
        return "no packet lost".to_string();
    }
    let mut parts = Vec::new();
    if rcvbuf_errors > 0 {
        parts.push(format!(
            "{rcvbuf_errors} dropped by full socket buffers (RcvbufErrors: read faster with more \
             threads and --reuseport, or raise --rcvbuf from {} bytes)",
            rcvbuf.granted
        ));
    }
    if mem_errors > 0 {
        parts.push(format!(
            "{mem_errors} for lack of UDP memory (MemErrors: net.ipv4.udp_mem)"
        ));
    }
    if backlog > 0 {
        parts.push(format!(
            "{backlog} in full CPU backlogs (softnet dropped: net.core.netdev_max_backlog, RPS)"
        ));
    }
    let mut text = format!("{} lost by sequence", s.lost);
    if !parts.is_empty() {
        text.push_str("; the kernel counted ");
        text.push_str(&parts.join(", "));
    }
    if s.lost > counted {
        text.push_str(&format!(
            "; {} never reached this host's UDP layer (sender, network, NIC: see `ethtool -S`)",
            s.lost - counted
        ));
    } else if counted > s.lost {
        text.push_str(
            "; the counters exceed the sequence loss: drops after the last packet seen, \
             or other sockets in this network namespace",
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(received: u64, lost: u64) -> SequenceSummary {
        SequenceSummary {
            senders: 1,
            flows: 1,
            received,
            lost,
            ..SequenceSummary::default()
        }
    }

    fn kernel(rcvbuf_errors: i64, softnet_dropped: u64) -> KernelDelta {
        KernelDelta {
            udp_rcvbuf_errors: Some(rcvbuf_errors),
            udp_mem_errors: Some(0),
            softnet_dropped: Some(softnet_dropped),
            ..KernelDelta::default()
        }
    }

    const RCVBUF: RcvBuf = RcvBuf {
        requested: None,
        granted: 212_992,
        forced: false,
    };

    #[test]
    fn where_names_the_socket_buffer_and_the_rest() {
        let text = where_lost(&summary(900, 100), &kernel(60, 0), &RCVBUF);
        assert!(text.starts_with("100 lost by sequence"), "{text}");
        assert!(text.contains("60 dropped by full socket buffers"), "{text}");
        assert!(text.contains("from 212992 bytes"), "{text}");
        assert!(
            text.contains("40 never reached this host's UDP layer"),
            "{text}"
        );
    }

    #[test]
    fn where_explains_counters_above_the_sequence_loss() {
        let text = where_lost(&summary(900, 10), &kernel(0, 25), &RCVBUF);
        assert!(text.contains("25 in full CPU backlogs"), "{text}");
        assert!(text.contains("exceed the sequence loss"), "{text}");
        assert_eq!(
            where_lost(&summary(5, 0), &kernel(0, 0), &RCVBUF),
            "no packet lost"
        );
    }
}
