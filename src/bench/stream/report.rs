//! The client's report of a stream test: both sides of every stream, the
//! sums and CPU cost, with iperf3's field names where the meaning is the
//! same (`bits_per_second`, `retransmits`, `snd_cwnd`, `rtt`, `sum_sent`,
//! `sum_received`, `cpu_utilization_percent`).

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::pump::{Moved, ZeroCopyStats};
use super::server_report::TestReport;
use super::sock::{Buffers, Pacer, TcpInfo};
use super::{StreamConfig, ZeroCopy};
use crate::bench::cpu::CpuUsage;
use crate::bench::pin::Pinning;
use crate::host::CpuTime;

/// One stream in one second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamInterval {
    pub stream: u32,
    pub bytes: u64,
    pub bits_per_second: f64,
    /// Segments retransmitted in the second (sender only).
    pub retransmits: Option<u64>,
    /// Congestion window, bytes (sender only).
    pub snd_cwnd: Option<u64>,
    /// Smoothed RTT and its variation, microseconds.
    pub rtt: Option<u32>,
    pub rttvar: Option<u32>,
    /// The rate TCP paces at (sender only), bits per second.
    pub pacing_bits_per_second: Option<u64>,
}

/// One second of the measured part, every stream and their sum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub second: u64,
    pub streams: Vec<StreamInterval>,
    pub bytes: u64,
    pub bits_per_second: f64,
    pub retransmits: Option<u64>,
}

/// One side of one stream over the whole test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideTotals {
    /// Bytes over the connection's life (warm-up included).
    pub bytes: u64,
    pub seconds: f64,
    pub bits_per_second: f64,
    pub retransmits: Option<u64>,
    pub max_snd_cwnd: Option<u64>,
    pub min_rtt: Option<u32>,
    pub max_rtt: Option<u32>,
    pub mean_rtt: Option<u32>,
}

/// Both sides of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamTotals {
    pub stream: u32,
    /// This side's CPU for the stream's thread.
    pub cpu: Option<u32>,
    pub sender: SideTotals,
    /// `None` when the server sent no results.
    pub receiver: Option<SideTotals>,
    /// The receiver read the sender's FIN and counted exactly the bytes
    /// the sender's kernel accepted.
    pub bytes_match: bool,
    pub zerocopy: Option<ZeroCopyStats>,
}

/// A sum over the streams (iperf3's `sum_sent` / `sum_received`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sum {
    pub bytes: u64,
    pub seconds: f64,
    pub bits_per_second: f64,
    pub retransmits: Option<u64>,
}

/// Stream threads' CPU time as a percentage of one CPU over the test, as
/// iperf3's `cpu_utilization_percent` (host: this side; remote: the
/// server's stream threads).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuPercent {
    pub host_total: f64,
    pub host_user: f64,
    pub host_system: f64,
    pub remote_total: Option<f64>,
    pub remote_user: Option<f64>,
    pub remote_system: Option<f64>,
}

/// CPU seconds (user + system of the stream threads) per gigabyte (10^9
/// bytes) received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuPerGb {
    pub sender: Option<f64>,
    pub receiver: Option<f64>,
    pub total: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    pub command: String,
    pub to: SocketAddr,
    pub netns: Option<String>,
    /// The server sent, this side received.
    pub reverse: bool,
    pub num_streams: usize,
    /// Bytes per write and read (iperf3's blksize).
    pub size: usize,
    /// This side's buffers (first stream).
    pub window: Buffers,
    /// SO_MAX_PACING_RATE per stream on the sender, bits per second.
    pub pace_bits_per_second: Option<u64>,
    /// Who enforces it: the fq qdisc, or TCP's own pacing.
    pub pacer: Option<Pacer>,
    pub sender_tcp_congestion: String,
    pub receiver_tcp_congestion: Option<String>,
    pub zerocopy: Option<ZeroCopy>,
    pub pin: Vec<u32>,
    pub warmup_s: f64,
    /// `duration` or `interrupted` (the stop token).
    pub ended: String,
    /// The measured time; rates are over it.
    pub duration_s: f64,
    pub intervals: Vec<Interval>,
    pub per_stream: Vec<StreamTotals>,
    /// The sender's bytes in the measured part and their rate.
    pub sum_sent: Sum,
    /// The receiver's count over the whole test (`None`: no results from
    /// the server).
    pub sum_received: Option<Sum>,
    /// Every stream's receiver counted exactly what its sender sent.
    pub bytes_match: bool,
    pub cpu_utilization_percent: CpuPercent,
    pub cpu_seconds_per_gb: CpuPerGb,
    /// This host's per-CPU time over the measured part.
    pub host_cpu: Option<CpuUsage>,
    /// The server's own report of the test (its per-CPU table included).
    pub server: Option<TestReport>,
    /// Why the server's report is missing, or what went wrong there.
    pub server_error: Option<String>,
}

impl StreamReport {
    /// Why this run is not a measurement, if it is not.
    pub fn problem(&self) -> Option<String> {
        if self.sum_sent.bytes == 0 {
            return Some(format!(
                "stream measured nothing: no byte moved to or from '{}' in {:.1} s",
                self.to, self.duration_s
            ));
        }
        if let Some(error) = &self.server_error {
            return Some(format!("stream: the server at '{}': {error}", self.to));
        }
        if !self.bytes_match {
            let bad: Vec<String> = self
                .per_stream
                .iter()
                .filter(|s| !s.bytes_match)
                .map(|s| {
                    format!(
                        "stream {} sent {} received {}",
                        s.stream,
                        s.sender.bytes,
                        s.receiver.as_ref().map_or(0, |r| r.bytes)
                    )
                })
                .collect();
            return Some(format!(
                "stream: the receiver's count differs from the sender's ({})",
                bad.join(", ")
            ));
        }
        None
    }
}

/// RTT samples of one stream, one per second.
#[derive(Debug, Clone, Default)]
pub(super) struct Rtts {
    min: Option<u32>,
    max: Option<u32>,
    sum: u64,
    count: u64,
    max_cwnd: Option<u64>,
}

impl Rtts {
    pub(super) fn add(&mut self, info: &TcpInfo) {
        self.min = Some(self.min.map_or(info.rtt, |m| m.min(info.rtt)));
        self.max = Some(self.max.map_or(info.rtt, |m| m.max(info.rtt)));
        self.sum += u64::from(info.rtt);
        self.count += 1;
        self.max_cwnd = Some(
            self.max_cwnd
                .map_or(info.snd_cwnd, |m| m.max(info.snd_cwnd)),
        );
    }

    fn mean(&self) -> Option<u32> {
        (self.count > 0).then(|| (self.sum / self.count) as u32)
    }
}

/// Everything the run produced, for the report.
pub(super) struct Outcome {
    /// This side's buffers, pacing and congestion control, as its sockets
    /// were set.
    pub(super) window: Buffers,
    pub(super) pacer: Option<Pacer>,
    pub(super) congestion: String,
    pub(super) ended: &'static str,
    pub(super) elapsed: Duration,
    /// From the start of the harness to the end of the last stream.
    pub(super) ran: Duration,
    pub(super) moved: Vec<Moved>,
    pub(super) finals: Vec<Option<TcpInfo>>,
    pub(super) server: Result<TestReport, String>,
    pub(super) cpu_before: Option<Vec<CpuTime>>,
    pub(super) cpu_after: Option<Vec<CpuTime>>,
    pub(super) baseline: Vec<u64>,
    pub(super) at_end: Vec<u64>,
    pub(super) rtts: Vec<Rtts>,
    pub(super) intervals: Vec<Interval>,
}

fn rate(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

pub(super) fn build_report(config: &StreamConfig, pinning: &Pinning, o: Outcome) -> StreamReport {
    let secs = o.elapsed.as_secs_f64();
    let (server, server_error) = match o.server {
        Ok(report) => {
            let error = report
                .error
                .clone()
                .map(|e| format!("the test ended {} there: {e}", report.ended));
            (Some(report), error)
        }
        Err(e) => (None, Some(e)),
    };
    let mut per_stream = Vec::with_capacity(o.moved.len());
    let (mut local_user, mut local_sys) = (0.0, 0.0);
    for (i, moved) in o.moved.iter().enumerate() {
        let this = OneStream {
            index: i,
            moved,
            measured: o.at_end[i].saturating_sub(o.baseline[i]),
            secs,
            info: o.finals[i],
            rtts: &o.rtts[i],
        };
        let (totals, (user, sys)) = this.totals(server.as_ref(), pinning);
        local_user += user;
        local_sys += sys;
        per_stream.push(totals);
    }
    // The measured part, from this side's counters.
    let measured: u64 = o
        .at_end
        .iter()
        .zip(&o.baseline)
        .map(|(end, start)| end.saturating_sub(*start))
        .sum();
    let (sum_sent, sum_received) = sums(config, &per_stream, server.as_ref(), measured, secs);
    let (cpu_utilization_percent, cpu_seconds_per_gb) = cpu_cost(
        config.reverse,
        o.ran,
        (local_user, local_sys),
        server.as_ref(),
        &per_stream,
    );
    let bytes_match = !per_stream.is_empty() && per_stream.iter().all(|s| s.bytes_match);
    let host_cpu = match (&o.cpu_before, &o.cpu_after) {
        (Some(before), Some(after)) => Some(CpuUsage::between(before, after)),
        _ => None,
    };
    let sides = SenderSettings::of(config, o.pacer, &o.congestion, server.as_ref());
    StreamReport {
        command: "stream".to_string(),
        to: config.to,
        netns: config.netns.clone(),
        reverse: config.reverse,
        num_streams: per_stream.len(),
        size: config.size,
        window: o.window,
        pace_bits_per_second: sides.pace,
        pacer: sides.pacer,
        sender_tcp_congestion: sides.sender_congestion,
        receiver_tcp_congestion: sides.receiver_congestion,
        zerocopy: config.zerocopy,
        pin: pinning.cpus().to_vec(),
        warmup_s: config.warmup.as_secs_f64(),
        ended: o.ended.to_string(),
        duration_s: secs,
        intervals: o.intervals,
        per_stream,
        sum_sent,
        sum_received,
        bytes_match,
        cpu_utilization_percent,
        cpu_seconds_per_gb,
        host_cpu,
        server,
        server_error,
    }
}

/// The sender's pacing and each side's congestion control (`pacer` and
/// `congestion` are this side's): the server
/// sends with --reverse, this side otherwise.
struct SenderSettings {
    pace: Option<u64>,
    pacer: Option<Pacer>,
    sender_congestion: String,
    receiver_congestion: Option<String>,
}

impl SenderSettings {
    fn of(
        config: &StreamConfig,
        pacer: Option<Pacer>,
        congestion: &str,
        server: Option<&TestReport>,
    ) -> SenderSettings {
        if config.reverse {
            SenderSettings {
                pace: server.and_then(|s| s.pace_bits_per_second),
                pacer: server.and_then(|s| s.pacer),
                sender_congestion: server
                    .map(|s| s.congestion.clone())
                    .unwrap_or_else(|| "unknown".to_string()),
                receiver_congestion: Some(congestion.to_string()),
            }
        } else {
            SenderSettings {
                pace: config.pace,
                pacer,
                sender_congestion: congestion.to_string(),
                receiver_congestion: server.map(|s| s.congestion.clone()),
            }
        }
    }
}

/// What this side knows of one stream at the end of the test.
struct OneStream<'a> {
    index: usize,
    moved: &'a Moved,
    /// Bytes of the measured part, from this side's counters.
    measured: u64,
    secs: f64,
    info: Option<TcpInfo>,
    rtts: &'a Rtts,
}

impl OneStream<'_> {
    /// Both sides' totals of the stream (the far side's from the server's
    /// report, when there is one), and this side's CPU time for it (user,
    /// system seconds).
    fn totals(&self, server: Option<&TestReport>, pinning: &Pinning) -> (StreamTotals, (f64, f64)) {
        let (i, secs, info, measured) = (self.index, self.secs, self.info, self.measured);
        let remote = server.and_then(|s| s.streams.get(i));
        let (sender, receiver, zerocopy, cpu) = match self.moved {
            Moved::Sent(sent) => {
                let rtts = self.rtts;
                let sender = SideTotals {
                    bytes: sent.bytes,
                    seconds: secs,
                    bits_per_second: rate(measured, secs),
                    retransmits: info.map(|t| u64::from(t.total_retrans)),
                    max_snd_cwnd: rtts.max_cwnd.or(info.map(|t| t.snd_cwnd)),
                    min_rtt: rtts.min.or(info.map(|t| t.rtt)),
                    max_rtt: rtts.max.or(info.map(|t| t.rtt)),
                    mean_rtt: rtts.mean().or(info.map(|t| t.rtt)),
                };
                let receiver =
                    remote.map(|r| SideTotals::received(r.bytes, r.seconds, r.bits_per_second));
                let cpu = (sent.cpu.0.as_secs_f64(), sent.cpu.1.as_secs_f64());
                (sender, receiver, sent.zerocopy.clone(), cpu)
            }
            Moved::Received(got) => {
                let receiver = SideTotals::received(got.bytes, got.seconds(), rate(measured, secs));
                let sender = match remote {
                    Some(r) => SideTotals {
                        bytes: r.bytes,
                        seconds: r.seconds,
                        bits_per_second: rate(r.bytes, r.seconds),
                        retransmits: r.tcp.map(|t| u64::from(t.total_retrans)),
                        max_snd_cwnd: r.tcp.map(|t| t.snd_cwnd),
                        min_rtt: r.tcp.map(|t| t.rtt),
                        max_rtt: r.tcp.map(|t| t.rtt),
                        mean_rtt: r.tcp.map(|t| t.rtt),
                    },
                    None => SideTotals::received(0, 0.0, 0.0),
                };
                let zerocopy = remote.and_then(|r| r.zerocopy.clone());
                let cpu = (got.cpu.0.as_secs_f64(), got.cpu.1.as_secs_f64());
                (sender, Some(receiver), zerocopy, cpu)
            }
        };
        let eof = match self.moved {
            Moved::Sent(_) => remote.is_some_and(|r| r.eof),
            Moved::Received(got) => got.eof,
        };
        let bytes_match =
            eof && server.is_some() && receiver.as_ref().is_some_and(|r| r.bytes == sender.bytes);
        let totals = StreamTotals {
            stream: i as u32,
            cpu: pinning.cpu_for(i),
            sender,
            receiver,
            bytes_match,
            zerocopy,
        };
        (totals, cpu)
    }
}

impl SideTotals {
    /// Totals without the sender's TCP figures (a receiver, or a sender
    /// that never reported).
    fn received(bytes: u64, seconds: f64, bits_per_second: f64) -> SideTotals {
        SideTotals {
            bytes,
            seconds,
            bits_per_second,
            retransmits: None,
            max_snd_cwnd: None,
            min_rtt: None,
            max_rtt: None,
            mean_rtt: None,
        }
    }
}

/// `sum_sent` and `sum_received`: this side's counters for its own
/// direction (`measured` bytes over `secs`), the server's report or the
/// streams' totals for the other.
fn sums(
    config: &StreamConfig,
    per_stream: &[StreamTotals],
    server: Option<&TestReport>,
    measured: u64,
    secs: f64,
) -> (Sum, Option<Sum>) {
    let retransmits = |streams: &[StreamTotals]| -> Option<u64> {
        let all: Vec<u64> = streams
            .iter()
            .filter_map(|s| s.sender.retransmits)
            .collect();
        (!all.is_empty()).then(|| all.iter().sum())
    };
    let sum_sent = if config.reverse {
        let bytes: u64 = per_stream.iter().map(|s| s.sender.bytes).sum();
        let seconds = per_stream
            .iter()
            .map(|s| s.sender.seconds)
            .fold(0.0, f64::max);
        Sum {
            bytes,
            seconds,
            bits_per_second: rate(bytes, seconds),
            retransmits: retransmits(per_stream),
        }
    } else {
        Sum {
            bytes: measured,
            seconds: secs,
            bits_per_second: rate(measured, secs),
            retransmits: retransmits(per_stream),
        }
    };
    let sum_received = if config.reverse {
        Some(Sum {
            bytes: measured,
            seconds: secs,
            bits_per_second: rate(measured, secs),
            retransmits: None,
        })
    } else {
        server.map(|s| Sum {
            bytes: s.bytes,
            seconds: s.seconds,
            bits_per_second: s.bits_per_second,
            retransmits: None,
        })
    };
    (sum_sent, sum_received)
}

/// CPU cost: this side's (`local`: user, system seconds) and the server's
/// stream threads as a percentage of one CPU over `ran`, and seconds per GB
/// received on each side.
fn cpu_cost(
    reverse: bool,
    ran: Duration,
    (local_user, local_sys): (f64, f64),
    server: Option<&TestReport>,
    per_stream: &[StreamTotals],
) -> (CpuPercent, CpuPerGb) {
    let ran = ran.as_secs_f64();
    let pct = |cpu: f64| if ran > 0.0 { cpu * 100.0 / ran } else { 0.0 };
    let (remote_user, remote_sys) = server.map(|s| (s.cpu_user_s, s.cpu_sys_s)).unzip();
    let received_total: u64 = per_stream
        .iter()
        .filter_map(|s| s.receiver.as_ref().map(|r| r.bytes))
        .sum();
    let per_gb = |cpu: Option<f64>| -> Option<f64> {
        let cpu = cpu?;
        (received_total > 0).then(|| cpu / (received_total as f64 / 1e9))
    };
    let local = local_user + local_sys;
    let remote_cpu = remote_user.zip(remote_sys).map(|(u, s)| u + s);
    let (sender_cpu, receiver_cpu) = if reverse {
        (remote_cpu, Some(local))
    } else {
        (Some(local), remote_cpu)
    };
    (
        CpuPercent {
            host_total: pct(local),
            host_user: pct(local_user),
            host_system: pct(local_sys),
            remote_total: remote_cpu.map(pct),
            remote_user: remote_user.map(pct),
            remote_system: remote_sys.map(pct),
        },
        CpuPerGb {
            sender: per_gb(sender_cpu),
            receiver: per_gb(receiver_cpu),
            total: per_gb(sender_cpu.zip(receiver_cpu).map(|(a, b)| a + b)),
        },
    )
}
