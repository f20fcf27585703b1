//! `bench stream`: open a test on a stream-server, run one pinned thread per
//! stream on the harness, print a line per second from TCP_INFO, and
//! report both sides of every stream (the server sends its side at the
//! end), iperf3's field names where the meaning is the same.

use std::cell::Cell;
use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, SockaddrStorage};
use serde::{Deserialize, Serialize};

use super::pump::{self, Source, ZeroCopyStats};
use super::server::TestReport;
use super::sock::{self, Buffers, Pacer, TcpInfo};
use super::wire::{Header, Kind, Params, ToClient, ToServer, MAX_MESSAGE};
use super::{StreamConfig, ZeroCopy};
use crate::base::Root;
use crate::bench::cpu::CpuUsage;
use crate::bench::frame;
use crate::bench::harness::{self, Control, Placement, Timeline};
use crate::bench::netns;
use crate::bench::observe::Observer;
use crate::bench::pin::Pinning;
use crate::bench::report::LiveCounter;
use crate::bench::stop::Stop;
use crate::host::{stat, CpuTime};

/// How long a connect, and the server's answer to the parameters, may take.
const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// Connection attempts when the server refuses (it may still be starting).
const CONNECT_TRIES: u32 = 3;
/// After the end, how long a receiving stream reads on to the sender's FIN,
/// and how long the server has to send its results.
const DRAIN: Duration = Duration::from_secs(10);

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

/// A test opened on the server: its control connection and data streams.
struct Opened {
    ctl: TcpStream,
    streams: Vec<TcpStream>,
    window: Buffers,
    pacer: Option<Pacer>,
    congestion: String,
}

/// Open a test on the server (inside the config's namespace), run it for
/// the config's warm-up and duration or until `stop`, and report.
pub fn run(
    config: &StreamConfig,
    stop: &Stop,
    observer: &mut dyn Observer<Interval>,
) -> anyhow::Result<StreamReport> {
    config.validate()?;
    let pinning = Pinning::new(config.pin.clone(), &Root::live())?;
    let source = if config.reverse {
        None
    } else {
        Some(Source::new(config.size, config.zerocopy)?)
    };
    let opened = netns::within(config.netns.as_deref(), || open_test(config))?;
    observer.ready(
        None,
        &super::render::header(config, &pinning, &opened.window, opened.pacer),
    );
    if let Some(warning) = sock::window_capped(&opened.window) {
        observer.warning(&warning);
    }
    let live: Vec<LiveCounter> = opened
        .streams
        .iter()
        .map(|_| LiveCounter::default())
        .collect();
    let mut meter = Meter::new(config, &opened, &live, observer);
    let timeline = Timeline {
        warmup: config.warmup,
        duration: Some(config.duration),
    };
    let tasks: Vec<(&TcpStream, &LiveCounter)> = opened.streams.iter().zip(&live).collect();
    let started = Instant::now();
    let done = harness::run(
        tasks,
        Placement::pinned(&pinning),
        stop,
        &timeline,
        &mut meter,
        |i, (stream, live), phase| {
            let moved = match &source {
                Some(source) => {
                    pump::send(stream, source, &|| phase.stopped(), live).map(Moved::Sent)
                }
                None => {
                    let stopped_at = Cell::new(None::<Instant>);
                    let give_up = || {
                        if !phase.stopped() {
                            return false;
                        }
                        let at = stopped_at.get().unwrap_or_else(Instant::now);
                        stopped_at.set(Some(at));
                        at.elapsed() > DRAIN
                    };
                    pump::receive(stream, config.size, &give_up, live).map(Moved::Received)
                }
            };
            moved.with_context(|| format!("stream {i}"))
        },
    )?;
    meter.wake();
    let ran = started.elapsed();
    let cpu_after = meter.read_stat();
    let server = read_results(&opened.ctl);
    let finals: Vec<Option<TcpInfo>> = opened.streams.iter().map(sock::info_of).collect();
    Ok(build_report(
        config,
        &pinning,
        &opened,
        Outcome {
            ended: done.ended.name(),
            elapsed: done.elapsed,
            ran,
            moved: done.results,
            finals,
            server,
            cpu_before: meter.cpu_before.take(),
            cpu_after,
            baseline: meter.baseline.clone(),
            at_end: meter.at_end.clone().unwrap_or_else(|| meter.live_bytes()),
            rtts: std::mem::take(&mut meter.rtts),
            intervals: std::mem::take(&mut meter.intervals),
        },
    ))
}

/// What a stream's thread brings back.
enum Moved {
    Sent(pump::Sent),
    Received(pump::Received),
}

/// Connect the control connection, agree on the test, connect the streams
/// and wait for the server's go.
fn open_test(config: &StreamConfig) -> anyhow::Result<Opened> {
    let to = config.to;
    let mut ctl = connect(to, None)?;
    ctl.write_all(&Header::control().encode())
        .with_context(|| format!("--to '{to}': cannot send the test header"))?;
    let params = Params {
        streams: config.streams,
        reverse: config.reverse,
        seconds: (config.warmup + config.duration).as_secs_f64(),
        size: config.size,
        window: config.window,
        pace: config.pace,
        cc: config.cc.clone(),
        zerocopy: config.zerocopy,
    };
    frame::write(&ctl, &ToServer::Params(params))
        .with_context(|| format!("--to '{to}': cannot send the test parameters"))?;
    let test = match answer(&ctl, to)? {
        ToClient::Accepted { test } => test,
        other => return Err(unexpected(to, &other)),
    };
    let mut streams = Vec::with_capacity(config.streams as usize);
    let mut window = None;
    for i in 0..config.streams {
        let (mut stream, buffers) = connect_stream(config)?;
        window.get_or_insert(buffers);
        let header = Header {
            kind: Kind::Data,
            stream: i,
            test,
        };
        stream
            .write_all(&header.encode())
            .with_context(|| format!("--to '{to}': cannot open stream {i}"))?;
        streams.push(stream);
    }
    match answer(&ctl, to)? {
        ToClient::Ready => {}
        other => return Err(unexpected(to, &other)),
    }
    let pacer = match (config.pace, config.reverse, streams.first()) {
        (Some(_), false, Some(s)) => s.local_addr().ok().map(|local| sock::pacer_for(local).1),
        _ => None,
    };
    let congestion = streams
        .first()
        .map(|s| sock::congestion(s.as_fd()))
        .unwrap_or_default();
    let _ = ctl.set_nodelay(true);
    Ok(Opened {
        ctl,
        streams,
        window: window.ok_or_else(|| anyhow::anyhow!("no stream was opened"))?,
        pacer,
        congestion,
    })
}

/// The server's next answer; a refusal is an error with its reason.
fn answer(ctl: &TcpStream, to: SocketAddr) -> anyhow::Result<ToClient> {
    let deadline = Instant::now() + ANSWER_WAIT;
    match frame::read::<ToClient>(ctl, MAX_MESSAGE, deadline, &|| false) {
        Ok(ToClient::Refused { error }) => {
            anyhow::bail!("--to '{to}': the stream-server refused the test: {error}")
        }
        Ok(answer) => Ok(answer),
        Err(e) => anyhow::bail!(
            "--to '{to}': no answer from a stream-server ({e}); is `nettune bench stream-server` \
             (the same version) listening there?"
        ),
    }
}

fn unexpected(to: SocketAddr, got: &ToClient) -> anyhow::Error {
    let what = match got {
        ToClient::Accepted { .. } => "accepted",
        ToClient::Refused { .. } => "refused",
        ToClient::Ready => "ready",
        ToClient::Results(_) => "results",
    };
    anyhow::anyhow!("--to '{to}': the stream-server answered '{what}' out of turn")
}

/// A data connection with this side's options set before the handshake
/// (buffers, congestion control, pacing and SO_ZEROCOPY for a sender).
fn connect_stream(config: &StreamConfig) -> anyhow::Result<(TcpStream, Buffers)> {
    let mut buffers = None;
    let stream = connect(
        config.to,
        Some(&mut |fd: &OwnedFd| {
            let fd = fd.as_fd();
            buffers = Some(sock::set_window(fd, config.window)?);
            if let Some(cc) = &config.cc {
                sock::set_cc(fd, cc)?;
            }
            if !config.reverse {
                if let Some(rate) = config.pace {
                    sock::set_pacing(fd, rate)?;
                }
                if config.zerocopy == Some(ZeroCopy::Msg) {
                    sock::enable_zerocopy(fd)?;
                }
            }
            Ok(())
        }),
    )?;
    let buffers = buffers.ok_or_else(|| anyhow::anyhow!("no buffers read"))?;
    Ok((stream, buffers))
}

type Setup<'a> = &'a mut dyn FnMut(&OwnedFd) -> anyhow::Result<()>;

/// A blocking TCP connection to `to` within [`ANSWER_WAIT`], `setup` run on
/// the socket before the handshake; a refused connection is tried again a
/// few times (the server may be starting).
fn connect(to: SocketAddr, mut setup: Option<Setup<'_>>) -> anyhow::Result<TcpStream> {
    let mut last = Errno::ECONNREFUSED;
    for attempt in 0..CONNECT_TRIES {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(100));
        }
        let family = if to.is_ipv4() {
            AddressFamily::Inet
        } else {
            AddressFamily::Inet6
        };
        let fd = socket::socket(
            family,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            None,
        )
        .context("cannot create a TCP socket")?;
        if let Some(setup) = setup.as_mut() {
            setup(&fd)?;
        }
        match socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(to)) {
            Ok(()) | Err(Errno::EINPROGRESS) => {}
            Err(e) => {
                last = e;
                if e == Errno::ECONNREFUSED {
                    continue;
                }
                break;
            }
        }
        match finish_connect(&fd) {
            Ok(()) => {
                let stream = TcpStream::from(fd);
                stream
                    .set_nonblocking(false)
                    .context("cannot make the connection blocking")?;
                return Ok(stream);
            }
            Err(Errno::ECONNREFUSED) => last = Errno::ECONNREFUSED,
            Err(e) => {
                last = e;
                break;
            }
        }
    }
    anyhow::bail!(
        "--to '{to}': cannot connect over TCP: {}; start `nettune bench stream-server --bind {to}` \
         there first",
        last.desc()
    )
}

/// Wait for a non-blocking connect to finish, up to [`ANSWER_WAIT`].
fn finish_connect(fd: &OwnedFd) -> Result<(), Errno> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, ANSWER_WAIT.as_millis() as libc::c_int) };
    if n == 0 {
        return Err(Errno::ETIMEDOUT);
    }
    if n < 0 {
        return Err(Errno::last());
    }
    match socket::getsockopt(fd, socket::sockopt::SocketError) {
        Ok(0) => Ok(()),
        Ok(code) => Err(Errno::from_raw(code)),
        Err(e) => Err(e),
    }
}

/// The server's results, after the transfer.
fn read_results(ctl: &TcpStream) -> Result<TestReport, String> {
    match frame::read::<ToClient>(ctl, MAX_MESSAGE, Instant::now() + DRAIN, &|| false) {
        Ok(ToClient::Results(report)) => Ok(*report),
        Ok(_) => Err("it answered something other than its results".to_string()),
        Err(e) => Err(format!("no results ({e})")),
    }
}

/// RTT samples of one stream, one per second.
#[derive(Debug, Clone, Default)]
struct Rtts {
    min: Option<u32>,
    max: Option<u32>,
    sum: u64,
    count: u64,
    max_cwnd: Option<u64>,
}

impl Rtts {
    fn add(&mut self, info: &TcpInfo) {
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

/// The calling thread: per-second lines from the counters and TCP_INFO,
/// the measured part's bounds, and (reverse) the Stop to the server.
struct Meter<'a> {
    streams: &'a [TcpStream],
    live: &'a [LiveCounter],
    ctl: &'a TcpStream,
    observer: &'a mut dyn Observer<Interval>,
    sender: bool,
    reverse: bool,
    last: Vec<u64>,
    last_retrans: Vec<u32>,
    /// Bytes when the measured part began, and when it ended.
    baseline: Vec<u64>,
    at_end: Option<Vec<u64>>,
    rtts: Vec<Rtts>,
    intervals: Vec<Interval>,
    cpu_before: Option<Vec<CpuTime>>,
}

impl<'a> Meter<'a> {
    fn new(
        config: &StreamConfig,
        opened: &'a Opened,
        live: &'a [LiveCounter],
        observer: &'a mut dyn Observer<Interval>,
    ) -> Meter<'a> {
        let n = opened.streams.len();
        Meter {
            streams: &opened.streams,
            live,
            ctl: &opened.ctl,
            observer,
            sender: !config.reverse,
            reverse: config.reverse,
            last: vec![0; n],
            last_retrans: vec![0; n],
            baseline: vec![0; n],
            at_end: None,
            rtts: vec![Rtts::default(); n],
            intervals: Vec::new(),
            cpu_before: None,
        }
    }

    fn live_bytes(&self) -> Vec<u64> {
        self.live.iter().map(|l| l.read().1).collect()
    }

    fn read_stat(&mut self) -> Option<Vec<CpuTime>> {
        stat::read(&Root::live())
            .map_err(|e| self.observer.warning(&format!("{e}; no per-CPU table")))
            .ok()
    }
}

impl Control for Meter<'_> {
    fn measuring(&mut self) {
        self.cpu_before = self.read_stat();
        self.baseline = self.live_bytes();
        self.last = self.baseline.clone();
        for (i, stream) in self.streams.iter().enumerate() {
            if let Some(info) = sock::info_of(stream) {
                self.last_retrans[i] = info.total_retrans;
            }
        }
        self.observer.measuring();
    }

    fn tick(&mut self, second: u64) {
        let now = self.live_bytes();
        let mut streams = Vec::with_capacity(now.len());
        for (i, stream) in self.streams.iter().enumerate() {
            let bytes = now[i].saturating_sub(self.last[i]);
            let info = sock::info_of(stream);
            let mut interval = StreamInterval {
                stream: i as u32,
                bytes,
                bits_per_second: bytes as f64 * 8.0,
                retransmits: None,
                snd_cwnd: None,
                rtt: info.map(|t| t.rtt),
                rttvar: info.map(|t| t.rttvar),
                pacing_bits_per_second: None,
            };
            if let (Some(info), true) = (info, self.sender) {
                interval.retransmits = Some(u64::from(
                    info.total_retrans.saturating_sub(self.last_retrans[i]),
                ));
                interval.snd_cwnd = Some(info.snd_cwnd);
                interval.pacing_bits_per_second = Some(info.pacing_bits_per_second);
                self.last_retrans[i] = info.total_retrans;
                self.rtts[i].add(&info);
            }
            streams.push(interval);
        }
        self.last = now;
        let bytes = streams.iter().map(|s| s.bytes).sum::<u64>();
        let interval = Interval {
            second,
            bytes,
            bits_per_second: bytes as f64 * 8.0,
            retransmits: self
                .sender
                .then(|| streams.iter().filter_map(|s| s.retransmits).sum()),
            streams,
        };
        self.observer.interval(&interval);
        self.intervals.push(interval);
    }

    /// The run is over: note where the counters stood and, receiving, ask
    /// the server to stop sending (once).
    fn wake(&mut self) {
        if self.at_end.is_none() {
            self.at_end = Some(self.live_bytes());
            if self.reverse {
                let _ = frame::write(self.ctl, &ToServer::Stop);
            }
        }
    }
}

/// Everything the run produced, for the report.
struct Outcome {
    ended: &'static str,
    elapsed: Duration,
    /// From the start of the harness to the end of the last stream.
    ran: Duration,
    moved: Vec<Moved>,
    finals: Vec<Option<TcpInfo>>,
    server: Result<TestReport, String>,
    cpu_before: Option<Vec<CpuTime>>,
    cpu_after: Option<Vec<CpuTime>>,
    baseline: Vec<u64>,
    at_end: Vec<u64>,
    rtts: Vec<Rtts>,
    intervals: Vec<Interval>,
}

fn rate(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

fn build_report(
    config: &StreamConfig,
    pinning: &Pinning,
    opened: &Opened,
    o: Outcome,
) -> StreamReport {
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
    let remote = |i: usize| server.as_ref().and_then(|s| s.streams.get(i));
    let mut per_stream = Vec::with_capacity(o.moved.len());
    let (mut local_user, mut local_sys) = (0.0, 0.0);
    for (i, moved) in o.moved.iter().enumerate() {
        let measured = o.at_end[i].saturating_sub(o.baseline[i]);
        let info = o.finals[i];
        let (sender, receiver, zerocopy) = match moved {
            Moved::Sent(sent) => {
                local_user += sent.cpu.0.as_secs_f64();
                local_sys += sent.cpu.1.as_secs_f64();
                let rtts = &o.rtts[i];
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
                let receiver = remote(i).map(|r| SideTotals {
                    bytes: r.bytes,
                    seconds: r.seconds,
                    bits_per_second: r.bits_per_second,
                    retransmits: None,
                    max_snd_cwnd: None,
                    min_rtt: None,
                    max_rtt: None,
                    mean_rtt: None,
                });
                (sender, receiver, sent.zerocopy.clone())
            }
            Moved::Received(got) => {
                local_user += got.cpu.0.as_secs_f64();
                local_sys += got.cpu.1.as_secs_f64();
                let receiver = SideTotals {
                    bytes: got.bytes,
                    seconds: got.seconds(),
                    bits_per_second: rate(measured, secs),
                    retransmits: None,
                    max_snd_cwnd: None,
                    min_rtt: None,
                    max_rtt: None,
                    mean_rtt: None,
                };
                let sender = match remote(i) {
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
                    None => SideTotals {
                        bytes: 0,
                        seconds: 0.0,
                        bits_per_second: 0.0,
                        retransmits: None,
                        max_snd_cwnd: None,
                        min_rtt: None,
                        max_rtt: None,
                        mean_rtt: None,
                    },
                };
                let zerocopy = remote(i).and_then(|r| r.zerocopy.clone());
                (sender, Some(receiver), zerocopy)
            }
        };
        let eof = match moved {
            Moved::Sent(_) => remote(i).is_some_and(|r| r.eof),
            Moved::Received(got) => got.eof,
        };
        let bytes_match =
            eof && server.is_some() && receiver.as_ref().is_some_and(|r| r.bytes == sender.bytes);
        per_stream.push(StreamTotals {
            stream: i as u32,
            cpu: pinning.cpu_for(i),
            sender,
            receiver,
            bytes_match,
            zerocopy,
        });
    }
    // The measured part, from this side's counters.
    let measured: u64 = o
        .at_end
        .iter()
        .zip(&o.baseline)
        .map(|(end, start)| end.saturating_sub(*start))
        .sum();
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
            retransmits: retransmits(&per_stream),
        }
    } else {
        Sum {
            bytes: measured,
            seconds: secs,
            bits_per_second: rate(measured, secs),
            retransmits: retransmits(&per_stream),
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
        server.as_ref().map(|s| Sum {
            bytes: s.bytes,
            seconds: s.seconds,
            bits_per_second: s.bits_per_second,
            retransmits: None,
        })
    };
    let ran = o.ran.as_secs_f64();
    let pct = |cpu: f64| if ran > 0.0 { cpu * 100.0 / ran } else { 0.0 };
    let (remote_user, remote_sys) = server.as_ref().map(|s| (s.cpu_user_s, s.cpu_sys_s)).unzip();
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
    let (sender_cpu, receiver_cpu) = if config.reverse {
        (remote_cpu, Some(local))
    } else {
        (Some(local), remote_cpu)
    };
    let bytes_match = !per_stream.is_empty() && per_stream.iter().all(|s| s.bytes_match);
    let host_cpu = match (&o.cpu_before, &o.cpu_after) {
        (Some(before), Some(after)) => Some(CpuUsage::between(before, after)),
        _ => None,
    };
    StreamReport {
        command: "stream".to_string(),
        to: config.to,
        netns: config.netns.clone(),
        reverse: config.reverse,
        num_streams: per_stream.len(),
        size: config.size,
        window: opened.window.clone(),
        pace_bits_per_second: if config.reverse {
            server.as_ref().and_then(|s| s.pace_bits_per_second)
        } else {
            config.pace
        },
        pacer: if config.reverse {
            server.as_ref().and_then(|s| s.pacer)
        } else {
            opened.pacer
        },
        sender_tcp_congestion: if config.reverse {
            server
                .as_ref()
                .map(|s| s.congestion.clone())
                .unwrap_or_else(|| "unknown".to_string())
        } else {
            opened.congestion.clone()
        },
        receiver_tcp_congestion: if config.reverse {
            Some(opened.congestion.clone())
        } else {
            server.as_ref().map(|s| s.congestion.clone())
        },
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
        cpu_utilization_percent: CpuPercent {
            host_total: pct(local),
            host_user: pct(local_user),
            host_system: pct(local_sys),
            remote_total: remote_cpu.map(pct),
            remote_user: remote_user.map(pct),
            remote_system: remote_sys.map(pct),
        },
        cpu_seconds_per_gb: CpuPerGb {
            sender: per_gb(sender_cpu),
            receiver: per_gb(receiver_cpu),
            total: per_gb(sender_cpu.zip(receiver_cpu).map(|(a, b)| a + b)),
        },
        host_cpu,
        server,
        server_error,
    }
}
