//! Text for `bench stream` and `bench stream-server`: the header, a line per
//! stream and second (iperf3's columns: rate, retransmits, cwnd, RTT, and
//! the pacing rate), and the final report.

use std::fmt::Write as _;

use super::report::{Interval, StreamInterval, StreamReport};
use super::server_report::{ServerInterval, ServerReport, TestReport};
use super::sock::{Buffers, Pacer};
use super::StreamConfig;
use crate::base::units::{format_bytes, format_count};
use crate::bench::pin::Pinning;
use crate::bench::report::plural;

/// `21.73 Gbit/s`, `950.2 Mbit/s`.
pub fn gbits(bits_per_second: f64) -> String {
    if bits_per_second >= 1e9 {
        format!("{:.2} Gbit/s", bits_per_second / 1e9)
    } else {
        format!("{:.1} Mbit/s", bits_per_second / 1e6)
    }
}

fn window_text(w: &Buffers) -> String {
    match w.requested {
        Some(bytes) => format!(
            "window {} (SO_SNDBUF {}, SO_RCVBUF {}{})",
            format_bytes(u64::from(bytes)),
            format_bytes(w.sndbuf as u64),
            format_bytes(w.rcvbuf as u64),
            if w.forced { ", forced" } else { "" }
        ),
        None => "window autotuned (net.ipv4.tcp_wmem / tcp_rmem)".to_string(),
    }
}

/// The line a client prints before the first interval.
pub fn header(
    config: &StreamConfig,
    pinning: &Pinning,
    window: &Buffers,
    pacer: Option<Pacer>,
) -> String {
    let n = config.streams as usize;
    let mut line = format!(
        "{n} stream{} {} {} for {} s{}, {} per {}, {}",
        plural(n),
        if config.reverse { "from" } else { "to" },
        config.to,
        config.duration.as_secs_f64(),
        if config.warmup.is_zero() {
            String::new()
        } else {
            format!(" after a {} s warm-up", config.warmup.as_secs_f64())
        },
        format_bytes(config.size as u64),
        if config.reverse { "read" } else { "write" },
        window_text(window),
    );
    if let Some(cc) = &config.cc {
        let _ = write!(line, ", cc {cc}");
    }
    if let Some(pace) = config.pace {
        let _ = write!(line, ", paced at {} per stream", gbits(pace as f64));
        if let Some(pacer) = pacer {
            let _ = write!(line, " by {}", pacer.describe());
        }
    }
    if let Some(zc) = config.zerocopy {
        let _ = write!(line, ", {}", zc.name());
    }
    if !pinning.cpus().is_empty() {
        let _ = write!(
            line,
            ", stream i on CPU i of {}",
            crate::base::cpuset::format_list(pinning.cpus())
        );
    }
    line
}

fn stream_line(label: &str, second: u64, s: &StreamInterval) -> String {
    let mut line = format!(
        "{:>6.2}-{:<6.2} s  [{label:>3}]  {:>13}",
        (second - 1) as f64,
        second as f64,
        gbits(s.bits_per_second)
    );
    if let Some(retr) = s.retransmits {
        let _ = write!(line, "  retr {retr:<5}");
    }
    if let Some(cwnd) = s.snd_cwnd {
        let _ = write!(line, "  cwnd {:<9}", format_bytes(cwnd));
    }
    if let Some(rtt) = s.rtt {
        let _ = write!(line, "  rtt {rtt} us");
    }
    if let Some(pacing) = s.pacing_bits_per_second {
        if pacing > 0 {
            let _ = write!(line, "  pacing {}", gbits(pacing as f64));
        }
    }
    line
}

/// One line per stream, and a sum line when there are several.
pub fn interval_lines(i: &Interval) -> Vec<String> {
    let mut lines: Vec<String> = i
        .streams
        .iter()
        .map(|s| stream_line(&s.stream.to_string(), i.second, s))
        .collect();
    if i.streams.len() > 1 {
        let sum = StreamInterval {
            retransmits: i.sum.retransmits,
            ..StreamInterval::of_second(i.second, -1, 0, i.sum.bytes, i.sum.sender)
        };
        lines.push(stream_line("SUM", i.second, &sum));
    }
    lines
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// The client's final report.
pub fn text(r: &StreamReport) -> String {
    let mut out = String::new();
    let (start, end) = (&r.start, &r.end);
    let streams = start.test_start.num_streams;
    let _ = writeln!(
        out,
        "stream: {} stream{} {} {}, {:.2} s measured ({}), {} per call, sender cc {}",
        streams,
        plural(streams),
        if reverse(r) { "from" } else { "to" },
        start.to,
        end.duration_s,
        end.ended,
        format_bytes(start.test_start.blksize as u64),
        end.sender_tcp_congestion
    );
    write_stream_table(&mut out, r);
    write_sums(&mut out, r);
    write_pacing_and_cpu(&mut out, r);
    write_notes(&mut out, r);
    out
}

/// The server sent (--reverse).
fn reverse(r: &StreamReport) -> bool {
    r.start.test_start.reverse != 0
}

/// One row per stream: bytes each side counted, rate, retransmits, cwnd,
/// RTT, and whether the counts agree.
fn write_stream_table(out: &mut String, r: &StreamReport) {
    let _ = writeln!(
        out,
        "{:<6} {:>17} {:>17} {:>13} {:>6} {:>10} {:>18} {:>6}",
        "stream",
        "sent bytes",
        "received bytes",
        "rate",
        "retr",
        "max cwnd",
        "rtt min/mean/max",
        "exact"
    );
    for s in &r.end.streams {
        let rate = if reverse(r) {
            s.receiver.as_ref().map_or(0.0, |x| x.bits_per_second)
        } else {
            s.sender.bits_per_second
        };
        let _ = writeln!(
            out,
            "{:<6} {:>17} {:>17} {:>13} {:>6} {:>10} {:>18} {:>6}",
            s.stream,
            format_count(s.sender.bytes),
            s.receiver
                .as_ref()
                .map_or_else(|| "-".to_string(), |x| format_count(x.bytes)),
            gbits(rate),
            opt(s.sender.retransmits),
            s.sender
                .max_snd_cwnd
                .map_or_else(|| "-".to_string(), format_bytes),
            format!(
                "{}/{}/{} us",
                opt(s.sender.min_rtt),
                opt(s.sender.mean_rtt),
                opt(s.sender.max_rtt)
            ),
            if s.bytes_match { "yes" } else { "NO" }
        );
    }
}

/// What was sent and received in all, and whether every stream's counts
/// agree.
fn write_sums(out: &mut String, r: &StreamReport) {
    let end = &r.end;
    let _ = writeln!(
        out,
        "sent:     {} over {:.2} s ({} bytes{})",
        gbits(end.sum_sent.bits_per_second),
        end.sum_sent.seconds,
        format_count(end.sum_sent.bytes),
        end.sum_sent
            .retransmits
            .map(|n| format!(", {n} retransmits"))
            .unwrap_or_default()
    );
    match &end.sum_received {
        Some(sum) => {
            let _ = writeln!(
                out,
                "received: {} over {:.2} s ({} bytes: {})",
                gbits(sum.bits_per_second),
                sum.seconds,
                format_count(sum.bytes),
                if end.bytes_match {
                    "every stream's receiver counted exactly what its sender sent"
                } else {
                    "the receiver's count DIFFERS from the sender's"
                }
            );
        }
        None => {
            let _ = writeln!(out, "received: unknown (no results from the server)");
        }
    }
}

/// The pacing rate, and the CPU cost of both sides.
fn write_pacing_and_cpu(out: &mut String, r: &StreamReport) {
    if let Some(pace) = r.start.pace_bits_per_second {
        let _ = writeln!(
            out,
            "pacing:   {} per stream (SO_MAX_PACING_RATE), enforced by {}",
            gbits(pace as f64),
            r.start.pacer.map_or("the kernel", |p| p.describe())
        );
    }
    let c = &r.end.cpu_utilization_percent;
    let per_gb_of = &r.end.cpu_seconds_per_gb;
    let _ = writeln!(
        out,
        "CPU:      this side {:.1}% of one CPU (user {:.1}, system {:.1}), server {}; per GB received: sender {} s, receiver {} s, both {} s",
        c.host_total,
        c.host_user,
        c.host_system,
        c.remote_total.map_or_else(|| "-".to_string(), |p| format!("{p:.1}%")),
        per_gb(per_gb_of.sender),
        per_gb(per_gb_of.receiver),
        per_gb(per_gb_of.total),
    );
}

/// Zero-copy completions per stream, the server's error, and the per-CPU
/// time of this host.
fn write_notes(out: &mut String, r: &StreamReport) {
    for s in &r.end.streams {
        if let Some(zc) = &s.zerocopy {
            let _ = writeln!(
                out,
                "zero-copy stream {}: {} MSG_ZEROCOPY sends, {} completed, {} copied by the kernel anyway{}",
                s.stream,
                zc.sends,
                zc.completed,
                zc.copied,
                if zc.copied > 0 && zc.copied == zc.completed {
                    " (a local receiver, as on loopback and veth, always gets a copy)"
                } else {
                    ""
                }
            );
        }
    }
    if let Some(error) = &r.server_error {
        let _ = writeln!(out, "server:   {error}");
    }
    if let Some(cpu) = &r.end.host_cpu {
        let mut table = Vec::new();
        if cpu.write_table(&mut table).is_ok() {
            out.push_str("\nper-CPU time over the run (this host):\n");
            out.push_str(&String::from_utf8_lossy(&table));
        }
    }
}

fn per_gb(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"))
}

/// A stream-server's line per second.
pub fn server_interval_line(i: &ServerInterval) -> String {
    format!(
        "{:>6.2}-{:<6.2} s  {:>13}  {} test{} running",
        (i.second - 1) as f64,
        i.second as f64,
        gbits(i.bits_per_second),
        i.tests,
        plural(i.tests)
    )
}

fn test_line(t: &TestReport) -> String {
    format!(
        "test {:#018x} from {}: {} {} bytes on {} stream{} in {:.2} s ({}), {}",
        t.test,
        t.peer,
        if t.role == "sender" {
            "sent"
        } else {
            "received"
        },
        format_count(t.bytes),
        t.streams.len(),
        plural(t.streams.len()),
        t.seconds,
        gbits(t.bits_per_second),
        match &t.error {
            Some(e) => format!("{}: {e}", t.ended),
            None => t.ended.clone(),
        }
    )
}

/// The server's final report.
pub fn server_text(r: &ServerReport) -> String {
    let mut out = format!(
        "stream-server {}: {} test{} in {:.1} s ({})\n",
        r.bind,
        r.tests.len(),
        plural(r.tests.len()),
        r.duration_s,
        r.ended
    );
    for t in &r.tests {
        out.push_str(&test_line(t));
        out.push('\n');
    }
    let f = &r.refused;
    let refused = f.foreign_peer + f.bad_header + f.bad_params + f.unknown_stream + f.busy;
    if refused > 0 {
        let _ = writeln!(
            out,
            "closed without a test: {} from other addresses, {} without a valid header, {} with bad parameters, {} data connections for no test, {} while busy",
            f.foreign_peer, f.bad_header, f.bad_params, f.unknown_stream, f.busy
        );
    }
    out
}
