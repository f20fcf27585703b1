//! `bench stream-server` and `bench stream` on the command line.

use std::net::SocketAddr;
use std::time::Duration;

use super::common::{duration, finish, pin_list, CpuList, Lines};
use super::remote::{self, RemoteArgs};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::bench::addr::{parse_bind, parse_destination};
use crate::bench::stream::{
    self, render, Interval, ServerConfig, ServerInterval, StreamConfig, ZeroCopy,
};
use crate::error::Status;

/// Receive (or, for a `--reverse` client, send) bulk TCP streams.
///
/// Serves many tests at once, each stream on a thread of its own; sends
/// each client its side of every stream (exact byte counts, CPU time).
///
/// Exit status: 0 when a test completed; 1 when none did (the report is
/// still printed); 2 when the server could not run (bad input, a port
/// another program holds, a missing namespace).
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Address and port to listen on (port 0: any free port). The first
    /// line on stderr says which, as every bench server says it:
    /// `stream-server: listening on ADDR:PORT (...)`.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_bind)]
    pub bind: SocketAddr,
    /// Pin stream i of every test to the i-th CPU of this list (e.g. 1 or
    /// 0-3), wrapping.
    #[arg(long, value_name = "CPUS", value_parser = pin_list)]
    pub pin: Option<CpuList>,
    /// How long to serve (10, 30s, 5m); default: until Ctrl-C or SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub duration: Option<Duration>,
    /// Serve one test, then exit (as iperf3 -1).
    #[arg(long, short = '1')]
    pub one_off: bool,
    /// Serve inside this network namespace (as `ip netns exec NAME`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Print the final report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Bulk TCP throughput against a stream-server, as iperf3 measures it.
///
/// Prints a line per stream and second (rate, retransmits, congestion
/// window, RTT and pacing rate from TCP_INFO), then both sides of every
/// stream: the receiver's exact byte count, retransmits, CPU per GB.
///
/// Examples:
///   nettune bench stream --to 10.0.0.2:5201
///   nettune bench stream --to 10.0.0.2:5201 -P 4 --duration 30
///   nettune bench stream --to 10.0.0.2:5201 --pace 2gbit --cc bbr --json
///   nettune bench stream --to 10.0.0.2:5201 --reverse --window 64M
///
/// Exit status: 0 when the bytes moved and the receiver counted exactly
/// what was sent; 1 when nothing moved, the server sent no results or the
/// counts differ (the report is still printed); 2 when the run could not
/// start (bad input, no server, a congestion control the kernel lacks).
#[derive(Debug, Clone, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct ClientArgs {
    /// The stream-server's address (`nettune bench stream-server` prints it).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_destination, required_unless_present = "remote", conflicts_with = "remote")]
    pub to: Option<SocketAddr>,
    /// Parallel TCP connections, each on a thread of its own on both sides
    /// (iperf3 -P).
    #[arg(long, short = 'P', value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=128))]
    pub streams: u32,
    /// How long to measure: seconds (10, 1.5) or 500ms, 5s, 1m; Ctrl-C or
    /// SIGTERM stops early with the report.
    #[arg(long, value_name = "DURATION", default_value = "10", value_parser = duration)]
    pub duration: Duration,
    /// Traffic before the measured part, not counted in the rates (iperf3
    /// --omit); 0 for none.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = crate::base::units::parse_duration_or_zero)]
    pub warmup: Duration,
    /// The server sends and this side receives (iperf3 -R).
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Bytes per write and read: 128K, 1M, 4M (K/M/G are powers of 1024).
    #[arg(long, short = 'l', value_name = "BYTES", default_value = "1M", value_parser = size)]
    pub size: usize,
    /// SO_SNDBUF and SO_RCVBUF on both sides (forced past net.core.wmem_max
    /// and rmem_max as root); without it the kernel autotunes them. Size it
    /// to bandwidth x RTT (see docs/bench-stream.md).
    #[arg(long, short = 'w', value_name = "BYTES", value_parser = window)]
    pub window: Option<u32>,
    /// Pace each stream at this rate (SO_MAX_PACING_RATE): 1gbit, 500mbit.
    /// The fq qdisc enforces it where it is the root qdisc; elsewhere TCP
    /// paces itself. The report says which.
    #[arg(long, value_name = "RATE", value_parser = rate)]
    pub pace: Option<u64>,
    /// Congestion control for both sides' sockets (TCP_CONGESTION): one of
    /// net.ipv4.tcp_available_congestion_control, e.g. cubic, bbr, reno.
    #[arg(long, short = 'C', value_name = "NAME")]
    pub cc: Option<String>,
    /// Send without copying: msg (MSG_ZEROCOPY, completions reaped from the
    /// error queue) or sendfile (as iperf3 -Z). On loopback and veth the
    /// kernel copies for the local receiver anyway.
    #[arg(long, short = 'Z', value_name = "HOW", value_enum)]
    pub zerocopy: Option<ZeroCopy>,
    /// Pin stream i's thread to the i-th CPU of this list (e.g. 0 or 0-3),
    /// wrapping.
    #[arg(long, value_name = "CPUS", value_parser = pin_list)]
    pub pin: Option<CpuList>,
    /// Run inside this network namespace (as `ip netns exec NAME`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Print the final report as JSON on stdout (see docs/bench-stream.md).
    #[arg(long, short = 'J')]
    pub json: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

fn size(text: &str) -> Result<usize, String> {
    crate::base::units::parse_bytes_within(text, 1, stream::MAX_SIZE as u64)
        .map(|b| b as usize)
        .map_err(|e| format!("{e:#}"))
}

fn window(text: &str) -> Result<u32, String> {
    crate::base::units::parse_bytes_within(text, 2048, i32::MAX as u64 / 2)
        .map(|b| b as u32)
        .map_err(|e| format!("{e:#}"))
}

fn rate(text: &str) -> Result<u64, String> {
    crate::base::units::parse_rate(text).map_err(|e| format!("{e:#}"))
}

impl ServerArgs {
    pub fn config(&self) -> ServerConfig {
        let mut config = ServerConfig::new(self.bind);
        config.pin = CpuList::of(&self.pin);
        config.duration = self.duration;
        config.netns = self.netns.clone();
        config.tests = self.one_off.then_some(1);
        config
    }
}

impl ClientArgs {
    /// The config against `to` (--to, or the daemon's server side).
    pub fn config(&self, to: SocketAddr) -> StreamConfig {
        StreamConfig {
            to,
            streams: self.streams,
            reverse: self.reverse,
            duration: self.duration,
            warmup: self.warmup,
            size: self.size,
            window: self.window,
            pace: self.pace,
            cc: self.cc.clone(),
            zerocopy: self.zerocopy,
            pin: CpuList::of(&self.pin),
            netns: self.netns.clone(),
            tls: None,
        }
    }
}

/// The server's listening line and its per-second lines on stderr;
/// stdout holds the report alone.
struct ServerLines;

impl Observer<ServerInterval> for ServerLines {
    fn ready(&mut self, addr: Option<SocketAddr>, detail: &str) {
        match addr {
            Some(addr) => super::common::listening("stream-server", addr, detail),
            None => eprintln!("stream-server: {detail}"),
        }
    }
    fn warning(&mut self, text: &str) {
        eprintln!("stream-server: {text}");
    }
    fn interval(&mut self, interval: &ServerInterval) {
        if interval.bytes > 0 {
            eprintln!("stream-server: {}", render::server_interval_line(interval));
        }
    }
}

struct ClientLines(Lines);

impl Observer<Interval> for ClientLines {
    fn ready(&mut self, _addr: Option<SocketAddr>, detail: &str) {
        self.0.ready(detail);
    }
    fn warning(&mut self, text: &str) {
        self.0.warning(text);
    }
    fn interval(&mut self, interval: &Interval) {
        for line in render::interval_lines(interval) {
            self.0.line(interval.second, &line);
        }
    }
}

pub fn server(args: &ServerArgs, stop: &Stop) -> anyhow::Result<Status> {
    let server = stream::open_server(args.config())?;
    let report = server.run(stop, &mut ServerLines)?;
    finish(&report, args.json, render::server_text, report.problem())
}

pub fn client(args: &ClientArgs, stop: &Stop) -> anyhow::Result<Status> {
    let seconds = (args.warmup + args.duration).as_secs_f64();
    let side =
        crate::serve::ServerSide::of(&stream::entry::Stream, &stream::entry::ServerParams {});
    let remote = args.remote.start(side, seconds, args.netns.as_deref())?;
    let to = super::common::target(args.to, remote.as_ref())?;
    let mut config = args.config(to);
    // The test's own control connection (it carries the server's side of
    // every stream) speaks TLS as the daemon's does.
    config.tls = remote.as_ref().and_then(|r| r.tls.clone());
    let mut lines = ClientLines(Lines::new("stream", args.json));
    let report = stream::run_client(&config, stop, &mut lines)?;
    lines.0.done();
    remote::finish(&report, remote, args.json, render::text, report.problem())
}
