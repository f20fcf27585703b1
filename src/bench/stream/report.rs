//! The client's report of a stream test in iperf3's `-J` layout: `start`
//! (who connected to what, when, with which test parameters), `intervals[]`
//! (each second's `streams[]` and `sum`) and `end` (every stream's
//! `sender` and `receiver`, `sum_sent`, `sum_received`,
//! `cpu_utilization_percent`), with iperf3's field names and units where
//! the meaning is the same, so a script written for `iperf3 -J` reads it
//! unchanged (`jq .end.sum_received.bits_per_second`). nettune's own
//! figures sit beside them (exact byte matching, pacing, CPU per GB, the
//! per-CPU table, the server's report).

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::pump::{Moved, ZeroCopyStats};
use super::server_report::TestReport;
use super::sock::{Buffers, Pacer, TcpInfo};
use super::{StreamConfig, ZeroCopy};
use crate::bench::cpu::CpuUsage;
use crate::bench::pin::Pinning;
use crate::host::CpuTime;

/// The layout of `bench stream --json`: 2 is iperf3's `start` /
/// `intervals` / `end` (1 was a flat document with iperf3's field names).
pub const STREAM_SCHEMA_VERSION: u32 = 2;

/// One stream in one second (iperf3's `intervals[].streams[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamInterval {
    /// The stream's socket (its file descriptor, as iperf3 names streams;
    /// `start.connected[]` says where it goes).
    pub socket: i32,
    /// Seconds since the measured part began.
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    /// Segments retransmitted in the second (sender only).
    pub retransmits: Option<u64>,
    /// Congestion window, bytes (sender only).
    pub snd_cwnd: Option<u64>,
    /// Smoothed RTT and its variation, microseconds.
    pub rtt: Option<u32>,
    pub rttvar: Option<u32>,
    /// Always false: the warm-up (iperf3's omitted seconds) is not listed.
    pub omitted: bool,
    /// This side sent (false with --reverse).
    pub sender: bool,
    /// nettune: the stream's number (0, 1, ...).
    pub stream: u32,
    /// nettune: the rate TCP paces at (sender only), bits per second.
    pub pacing_bits_per_second: Option<u64>,
}

impl StreamInterval {
    /// Stream `stream` on `socket` moved `bytes` in whole second `second`
    /// (1, 2, ...) of the measured part; the TCP figures are for the caller.
    pub(super) fn of_second(
        second: u64,
        socket: i32,
        stream: u32,
        bytes: u64,
        sender: bool,
    ) -> Self {
        StreamInterval {
            socket,
            start: second.saturating_sub(1) as f64,
            end: second as f64,
            seconds: 1.0,
            bytes,
            bits_per_second: bytes as f64 * 8.0,
            retransmits: None,
            snd_cwnd: None,
            rtt: None,
            rttvar: None,
            omitted: false,
            sender,
            stream,
            pacing_bits_per_second: None,
        }
    }
}

/// The streams' sum in one second (iperf3's `intervals[].sum`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalSum {
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    pub retransmits: Option<u64>,
    pub omitted: bool,
    pub sender: bool,
}

/// One second of the measured part, every stream and their sum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub streams: Vec<StreamInterval>,
    pub sum: IntervalSum,
    /// nettune: the second's number (1, 2, ...).
    pub second: u64,
}

impl Interval {
    /// Second `second` of `streams`, with their sum.
    pub(super) fn of(second: u64, streams: Vec<StreamInterval>, sender: bool) -> Interval {
        let bytes = streams.iter().map(|s| s.bytes).sum::<u64>();
        let sum = IntervalSum {
            start: second.saturating_sub(1) as f64,
            end: second as f64,
            seconds: 1.0,
            bytes,
            bits_per_second: bytes as f64 * 8.0,
            retransmits: sender.then(|| streams.iter().filter_map(|s| s.retransmits).sum()),
            omitted: false,
            sender,
        };
        Interval {
            streams,
            sum,
            second,
        }
    }
}

/// One side of one stream over the whole test (iperf3's
/// `end.streams[].sender` and `.receiver`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideTotals {
    /// This side's socket of the stream.
    pub socket: i32,
    pub start: f64,
    /// `seconds` after `start`.
    pub end: f64,
    pub seconds: f64,
    /// Bytes over the connection's life (warm-up included).
    pub bytes: u64,
    pub bits_per_second: f64,
    pub retransmits: Option<u64>,
    pub max_snd_cwnd: Option<u64>,
    /// Microseconds.
    pub max_rtt: Option<u32>,
    pub min_rtt: Option<u32>,
    pub mean_rtt: Option<u32>,
    /// This side sent (as iperf3 writes it on both entries).
    pub sender: bool,
}

/// Both sides of one stream (iperf3's `end.streams[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamTotals {
    pub sender: SideTotals,
    /// `None` when the server sent no results.
    pub receiver: Option<SideTotals>,
    /// nettune: the stream's number.
    pub stream: u32,
    /// nettune: this side's CPU for the stream's thread.
    pub cpu: Option<u32>,
    /// nettune: the receiver read the sender's FIN and counted exactly the
    /// bytes the sender's kernel accepted.
    pub bytes_match: bool,
    pub zerocopy: Option<ZeroCopyStats>,
}

/// A sum over the streams (iperf3's `end.sum_sent` / `end.sum_received`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sum {
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    pub retransmits: Option<u64>,
    /// This side sent.
    pub sender: bool,
}

impl Sum {
    fn new(bytes: u64, seconds: f64, retransmits: Option<u64>, sender: bool) -> Sum {
        Sum {
            start: 0.0,
            end: seconds,
            seconds,
            bytes,
            bits_per_second: rate(bytes, seconds),
            retransmits,
            sender,
        }
    }
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

/// One stream's connection (iperf3's `start.connected[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Connected {
    pub socket: i32,
    pub local_host: String,
    pub local_port: u16,
    pub remote_host: String,
    pub remote_port: u16,
}

/// When the test began (iperf3's `start.timestamp`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timestamp {
    /// `Fri, 27 Nov 2026 00:03:43 GMT`.
    pub time: String,
    /// Seconds since the Unix epoch.
    pub timesecs: u64,
}

/// Where the test went (iperf3's `start.connecting_to`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectingTo {
    pub host: String,
    pub port: u16,
}

/// The test's parameters (iperf3's `start.test_start`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestStart {
    /// Always `TCP`.
    pub protocol: String,
    pub num_streams: usize,
    /// Bytes per write and read.
    pub blksize: usize,
    /// The warm-up, seconds (iperf3 --omit).
    pub omit: f64,
    /// The measured time asked for, seconds.
    pub duration: f64,
    /// Always 0: tests run for a time, not a byte or block count.
    pub bytes: u64,
    pub blocks: u64,
    /// 1 with --reverse (the server sent), else 0, as iperf3 writes it.
    pub reverse: u8,
    pub tos: u8,
    /// The pace per stream, bits per second (0: none).
    pub target_bitrate: u64,
}

/// What the test was (iperf3's `start`), and nettune's settings beside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    pub connected: Vec<Connected>,
    /// `nettune VERSION`.
    pub version: String,
    pub timestamp: Timestamp,
    pub connecting_to: ConnectingTo,
    /// The server's random test id (a string, as iperf3's cookie).
    pub cookie: String,
    /// `--window`, bytes (0: the kernel autotunes).
    pub sock_bufsize: u64,
    /// SO_SNDBUF and SO_RCVBUF of this side's first stream, bytes.
    pub sndbuf_actual: usize,
    pub rcvbuf_actual: usize,
    pub test_start: TestStart,
    /// nettune: the server's address as given.
    pub to: SocketAddr,
    pub netns: Option<String>,
    /// nettune: this side's buffers (first stream).
    pub window: Buffers,
    /// nettune: SO_MAX_PACING_RATE per stream on the sender, bits per
    /// second, and who enforces it: the fq qdisc, or TCP's own pacing.
    pub pace_bits_per_second: Option<u64>,
    pub pacer: Option<Pacer>,
    pub zerocopy: Option<ZeroCopy>,
    pub pin: Vec<u32>,
    pub warmup_s: f64,
}

/// How the test went (iperf3's `end`), and nettune's figures beside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct End {
    pub streams: Vec<StreamTotals>,
    /// The sender's bytes in the measured part and their rate.
    pub sum_sent: Sum,
    /// The receiver's count over the whole test (`None`: no results from
    /// the server).
    pub sum_received: Option<Sum>,
    pub cpu_utilization_percent: CpuPercent,
    pub sender_tcp_congestion: String,
    pub receiver_tcp_congestion: Option<String>,
    /// nettune: `duration` or `interrupted` (the stop token).
    pub ended: String,
    /// nettune: the measured time; the interval rates are over it.
    pub duration_s: f64,
    /// nettune: every stream's receiver counted exactly what its sender
    /// sent.
    pub bytes_match: bool,
    pub cpu_seconds_per_gb: CpuPerGb,
    /// nettune: this host's per-CPU time over the measured part.
    pub host_cpu: Option<CpuUsage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// [`STREAM_SCHEMA_VERSION`].
    pub schema_version: u32,
    pub command: String,
    pub start: Start,
    pub intervals: Vec<Interval>,
    pub end: End,
    /// The server's own report of the test (its per-CPU table included).
    pub server: Option<TestReport>,
    /// Why the server's report is missing, or what went wrong there.
    pub server_error: Option<String>,
}

impl StreamReport {
    /// Why this run is not a measurement, if it is not.
    pub fn problem(&self) -> Option<String> {
        let to = self.start.to;
        if self.end.sum_sent.bytes == 0 {
            return Some(format!(
                "stream measured nothing: no byte moved to or from '{to}' in {:.1} s",
                self.end.duration_s
            ));
        }
        if let Some(error) = &self.server_error {
            return Some(format!("stream: the server at '{to}': {error}"));
        }
        if !self.end.bytes_match {
            let bad: Vec<String> = self
                .end
                .streams
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
/// What the client learned opening the test, for the report.
pub(super) struct Opening {
    /// This side's buffers, pacing and congestion control, as its sockets
    /// were set.
    pub(super) window: Buffers,
    pub(super) pacer: Option<Pacer>,
    pub(super) congestion: String,
    /// The server's id of the test.
    pub(super) test: u64,
    /// Each stream's socket, local and remote address, as connected.
    pub(super) connected: Vec<(i32, SocketAddr, SocketAddr)>,
    /// When the streams were connected (the report's start time).
    pub(super) began: SystemTime,
}

pub(super) struct Outcome {
    pub(super) opening: Opening,
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
    let opened = &o.opening;
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
            socket: opened.connected.get(i).map_or(-1, |c| c.0),
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
    let sides = SenderSettings::of(config, opened, server.as_ref());
    StreamReport {
        schema_version: STREAM_SCHEMA_VERSION,
        command: "stream".to_string(),
        start: start_of(config, pinning, opened, &sides),
        intervals: o.intervals,
        end: End {
            streams: per_stream,
            sum_sent,
            sum_received,
            cpu_utilization_percent,
            sender_tcp_congestion: sides.sender_congestion,
            receiver_tcp_congestion: sides.receiver_congestion,
            ended: o.ended.to_string(),
            duration_s: secs,
            bytes_match,
            cpu_seconds_per_gb,
            host_cpu,
        },
        server,
        server_error,
    }
}

/// iperf3's `start` block: the connections, the time, the parameters.
fn start_of(
    config: &StreamConfig,
    pinning: &Pinning,
    opened: &Opening,
    sides: &SenderSettings,
) -> Start {
    let connected = opened
        .connected
        .iter()
        .map(|(socket, local, remote)| Connected {
            socket: *socket,
            local_host: local.ip().to_string(),
            local_port: local.port(),
            remote_host: remote.ip().to_string(),
            remote_port: remote.port(),
        })
        .collect();
    let timesecs = opened
        .began
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let time =
        String::from_utf8_lossy(&crate::base::http::date::imf_fixdate(timesecs)).into_owned();
    Start {
        connected,
        version: format!("nettune {}", env!("CARGO_PKG_VERSION")),
        timestamp: Timestamp { time, timesecs },
        connecting_to: ConnectingTo {
            host: config.to.ip().to_string(),
            port: config.to.port(),
        },
        cookie: opened.test.to_string(),
        sock_bufsize: config.window.map_or(0, u64::from),
        sndbuf_actual: opened.window.sndbuf,
        rcvbuf_actual: opened.window.rcvbuf,
        test_start: TestStart {
            protocol: "TCP".to_string(),
            num_streams: opened.connected.len(),
            blksize: config.size,
            omit: config.warmup.as_secs_f64(),
            duration: config.duration.as_secs_f64(),
            bytes: 0,
            blocks: 0,
            reverse: u8::from(config.reverse),
            tos: 0,
            target_bitrate: sides.pace.unwrap_or(0),
        },
        to: config.to,
        netns: config.netns.clone(),
        window: opened.window.clone(),
        pace_bits_per_second: sides.pace,
        pacer: sides.pacer,
        zerocopy: config.zerocopy,
        pin: pinning.cpus().to_vec(),
        warmup_s: config.warmup.as_secs_f64(),
    }
}

/// The sender's pacing and each side's congestion control: the server
/// sends with --reverse, this side otherwise.
struct SenderSettings {
    pace: Option<u64>,
    pacer: Option<Pacer>,
    sender_congestion: String,
    receiver_congestion: Option<String>,
}

impl SenderSettings {
    fn of(config: &StreamConfig, opened: &Opening, server: Option<&TestReport>) -> SenderSettings {
        if config.reverse {
            SenderSettings {
                pace: server.and_then(|s| s.pace_bits_per_second),
                pacer: server.and_then(|s| s.pacer),
                sender_congestion: server
                    .map(|s| s.congestion.clone())
                    .unwrap_or_else(|| "unknown".to_string()),
                receiver_congestion: Some(opened.congestion.clone()),
            }
        } else {
            SenderSettings {
                pace: config.pace,
                pacer: opened.pacer,
                sender_congestion: opened.congestion.clone(),
                receiver_congestion: server.map(|s| s.congestion.clone()),
            }
        }
    }
}

/// What this side knows of one stream at the end of the test.
struct OneStream<'a> {
    index: usize,
    /// This side's socket of the stream.
    socket: i32,
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
        // iperf3 names both sides by this side's socket, and says on both
        // whether this side sent.
        let (socket, sending) = (self.socket, matches!(self.moved, Moved::Sent(_)));
        let plain = |bytes, seconds, bits_per_second| {
            SideTotals::plain(socket, sending, bytes, seconds, bits_per_second)
        };
        let (sender, receiver, zerocopy, cpu) = match self.moved {
            Moved::Sent(sent) => {
                let rtts = self.rtts;
                let sender = SideTotals {
                    retransmits: info.map(|t| u64::from(t.total_retrans)),
                    max_snd_cwnd: rtts.max_cwnd.or(info.map(|t| t.snd_cwnd)),
                    min_rtt: rtts.min.or(info.map(|t| t.rtt)),
                    max_rtt: rtts.max.or(info.map(|t| t.rtt)),
                    mean_rtt: rtts.mean().or(info.map(|t| t.rtt)),
                    ..plain(sent.bytes, secs, rate(measured, secs))
                };
                let receiver = remote.map(|r| plain(r.bytes, r.seconds, r.bits_per_second));
                let cpu = (sent.cpu.0.as_secs_f64(), sent.cpu.1.as_secs_f64());
                (sender, receiver, sent.zerocopy.clone(), cpu)
            }
            Moved::Received(got) => {
                let receiver = plain(got.bytes, got.seconds(), rate(measured, secs));
                let sender = match remote {
                    Some(r) => SideTotals {
                        retransmits: r.tcp.map(|t| u64::from(t.total_retrans)),
                        max_snd_cwnd: r.tcp.map(|t| t.snd_cwnd),
                        min_rtt: r.tcp.map(|t| t.rtt),
                        max_rtt: r.tcp.map(|t| t.rtt),
                        mean_rtt: r.tcp.map(|t| t.rtt),
                        ..plain(r.bytes, r.seconds, rate(r.bytes, r.seconds))
                    },
                    None => plain(0, 0.0, 0.0),
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
            sender,
            receiver,
            stream: i as u32,
            cpu: pinning.cpu_for(i),
            bytes_match,
            zerocopy,
        };
        (totals, cpu)
    }
}

impl SideTotals {
    /// Totals without the sender's TCP figures (a receiver, or a sender
    /// that never reported).
    fn plain(
        socket: i32,
        sender: bool,
        bytes: u64,
        seconds: f64,
        bits_per_second: f64,
    ) -> SideTotals {
        SideTotals {
            socket,
            start: 0.0,
            end: seconds,
            seconds,
            bytes,
            bits_per_second,
            retransmits: None,
            max_snd_cwnd: None,
            max_rtt: None,
            min_rtt: None,
            mean_rtt: None,
            sender,
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
    let sender = !config.reverse;
    let sum_sent = if config.reverse {
        let bytes: u64 = per_stream.iter().map(|s| s.sender.bytes).sum();
        let seconds = per_stream
            .iter()
            .map(|s| s.sender.seconds)
            .fold(0.0, f64::max);
        Sum::new(bytes, seconds, retransmits(per_stream), sender)
    } else {
        Sum::new(measured, secs, retransmits(per_stream), sender)
    };
    let sum_received = if config.reverse {
        Some(Sum::new(measured, secs, None, sender))
    } else {
        server.map(|s| Sum::new(s.bytes, s.seconds, None, sender))
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
