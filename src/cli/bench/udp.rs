//! `bench udp-sink` and `bench udp-flood` on the command line.

use std::net::SocketAddr;
use std::time::Duration;

use super::common::{duration, finish, pin_list, rate, CpuList, Lines};
use super::remote::{self, RemoteArgs};
use crate::base::observe::Observer;
use crate::bench::addr::{parse_bind, parse_destination};
use crate::bench::udp::{self, render, Backend, FloodConfig, Interval, SinkConfig};
use crate::error::Status;

/// Receive UDP packets as fast as possible and account for every one.
///
/// Exit status: 0 when packets were measured; 1 when none arrived (the
/// report is still printed); 2 when the sink could not run (bad input, a
/// port another program holds, a missing namespace).
#[derive(Debug, Clone, clap::Args)]
pub struct SinkArgs {
    /// Address and port to receive on (port 0: any free port). The first
    /// line on stderr says which, as every bench server says it:
    /// `udp-sink: listening on ADDR:PORT (...)`.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_bind)]
    pub bind: SocketAddr,
    /// Receiving threads.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// One socket per thread with SO_REUSEPORT (the kernel spreads flows
    /// over them by hash); without it all threads read one socket.
    #[arg(long)]
    pub reuseport: bool,
    /// With --reuseport, join a port that another program already serves
    /// (the kernel then splits the traffic between the two); without it
    /// such a port is refused.
    #[arg(long, requires = "reuseport")]
    pub share_port: bool,
    /// Pin thread i to the i-th CPU of this list (e.g. 1 or 0-3), wrapping.
    #[arg(long, value_name = "CPUS", value_parser = pin_list)]
    pub pin: Option<CpuList>,
    /// Packets per recvmmsg call (at most 1024, the kernel's UIO_MAXIOV).
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub batch: u32,
    /// Socket receive buffer to ask for, in bytes (4194304 or 4M, at most
    /// 2147483647): SO_RCVBUFFORCE as root, else SO_RCVBUF capped by
    /// net.core.rmem_max; the granted size is reported.
    #[arg(long, value_name = "BYTES", value_parser = rcvbuf)]
    pub rcvbuf: Option<u32>,
    /// How long to receive: seconds (10, 1.5) or 500ms, 5s, 1m; Ctrl-C or
    /// SIGTERM stops early with the report.
    #[arg(long, value_name = "DURATION", default_value = "10", value_parser = duration)]
    pub duration: Duration,
    /// Receive inside this network namespace (as `ip netns exec NAME`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// UDP_GRO (Linux 5.0): take super-datagrams (a sender's UDP_SEGMENT
    /// sends, or datagrams GRO merged on the way in) and split them at
    /// their segment size, so one receive carries up to 64 packets, each
    /// still counted and numbered. Across veth, plain datagrams merge only
    /// with GRO, rx-udp-gro-forwarding and threaded NAPI on the receiving
    /// end (docs/fast-paths.md).
    #[arg(long)]
    pub gro: bool,
    /// I/O engine: epoll (recvmmsg), io_uring (multishot recvmsg into a
    /// provided buffer ring, Linux 6.0), or auto (the one that measured
    /// faster for this setting, with or without --gro; epoll, with a
    /// warning, where the kernel cannot serve io_uring). The report's
    /// `engine_reason` says why (docs/benchmarks.md has the figures).
    #[arg(long, value_enum, default_value = "epoll")]
    pub engine: Backend,
    /// Print the final report as JSON on stdout (see docs/bench-udp.md).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub xdp: super::xsk::XdpArgs,
}

/// Send numbered UDP packets as fast as possible, or at a steady rate.
///
/// Exit status: 0 when packets were sent and none refused; 1 when nothing
/// could be sent or the destination refused them (ECONNREFUSED: nothing
/// listens there; the report is still printed); 2 when the flood could not
/// run (bad input, a missing namespace).
#[derive(Debug, Clone, clap::Args)]
pub struct FloodArgs {
    /// Destinations, comma separated; sockets are spread over them in turn.
    #[arg(long, value_name = "ADDR:PORT[,ADDR:PORT...]", required_unless_present = "remote", conflicts_with = "remote", value_delimiter = ',', value_parser = parse_destination)]
    pub to: Vec<SocketAddr>,
    /// Sending threads.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// UDP payload bytes per packet (16-byte header included).
    #[arg(long, value_name = "BYTES", default_value = "32", value_parser = size)]
    pub size: usize,
    /// Packets per sendmmsg call (at most 1024, the kernel's UIO_MAXIOV).
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub batch: u32,
    /// Connected sockets per thread, each with its own source port, so RSS
    /// and SO_REUSEPORT can spread the traffic.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub flows: u32,
    /// Total packets per second, split evenly over the threads and paced
    /// smoothly (default: as fast as possible).
    #[arg(long, value_name = "PPS", value_parser = rate)]
    pub rate: Option<u64>,
    /// Pin thread i to the i-th CPU of this list (e.g. 0 or 0-3), wrapping.
    #[arg(long, value_name = "CPUS", value_parser = pin_list)]
    pub pin: Option<CpuList>,
    /// How long to send: seconds (10, 1.5) or 500ms, 5s, 1m; Ctrl-C or
    /// SIGTERM stops early with the report.
    #[arg(long, value_name = "DURATION", default_value = "10", value_parser = duration)]
    pub duration: Duration,
    /// Send from inside this network namespace (as `ip netns exec NAME`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// UDP_SEGMENT (Linux 4.18): hand the kernel SEGMENTS packets per
    /// message, cut into --size datagrams by the stack, each with its own
    /// sequence header. At most the kernel's UDP_MAX_SEGMENTS (64, or 128
    /// in newer kernels, asked at the start) and 65507 bytes per message
    /// (at 1200 bytes: 54).
    #[arg(long, value_name = "SEGMENTS", value_parser = clap::value_parser!(u32).range(1..))]
    pub gso: Option<u32>,
    /// Print the final report as JSON on stdout (see docs/bench-udp.md).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

fn size(text: &str) -> Result<usize, String> {
    let size: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number of bytes"))?;
    udp::check_size(size).map_err(|e| e.to_string())?;
    Ok(size)
}

impl SinkArgs {
    pub fn config(&self) -> SinkConfig {
        SinkConfig {
            bind: self.bind,
            threads: self.threads,
            reuseport: self.reuseport,
            share_port: self.share_port,
            pin: CpuList::of(&self.pin),
            batch: self.batch,
            rcvbuf: self.rcvbuf,
            duration: Some(self.duration),
            netns: self.netns.clone(),
            gro: self.gro,
            engine: self.engine,
        }
    }
}

impl FloodArgs {
    pub fn config(&self) -> FloodConfig {
        FloodConfig {
            to: self.to.clone(),
            threads: self.threads,
            size: self.size,
            batch: self.batch,
            flows: self.flows,
            rate: self.rate,
            pin: CpuList::of(&self.pin),
            duration: self.duration,
            netns: self.netns.clone(),
            gso: self.gso,
        }
    }
}

/// Prints what a UDP engine tells while it runs.
struct Progress(Lines);

impl Observer<Interval> for Progress {
    fn ready(&mut self, addr: Option<SocketAddr>, detail: &str) {
        match addr {
            Some(addr) => self.0.listening(addr, detail),
            None => self.0.ready(detail),
        }
    }
    fn warning(&mut self, text: &str) {
        self.0.warning(text);
    }
    fn interval(&mut self, interval: &Interval) {
        self.0.line(interval.second, &interval.line());
    }
}

pub fn sink(args: &SinkArgs, stop: &crate::base::stop::Stop) -> anyhow::Result<Status> {
    if args.xdp.xdp {
        let socket_only = args.threads != 1
            || args.reuseport
            || args.rcvbuf.is_some()
            || args.gro
            || args.engine != Backend::Epoll;
        if socket_only {
            anyhow::bail!(
                "--threads, --reuseport, --rcvbuf, --gro and --engine do not apply to --xdp: one \
                 reader takes the queue's frames from the AF_XDP socket's ring"
            );
        }
        let basics = super::xsk::Basics {
            bind: args.bind,
            batch: args.batch,
            duration: args.duration,
            netns: args.netns.clone(),
            pin: &args.pin,
            json: args.json,
        };
        return super::xsk::sink(&args.xdp, basics, stop);
    }
    let sink = udp::open_sink(args.config())?;
    let mut progress = Progress(Lines::new("udp-sink", args.json));
    let report = sink.run(stop, &mut progress)?;
    progress.0.done();
    finish(&report, args.json, render::sink_text, report.problem())
}

pub fn flood(args: &FloodArgs, stop: &crate::base::stop::Stop) -> anyhow::Result<Status> {
    let side = crate::serve::ServerSide::of(
        &udp::entry::Udp,
        &udp::entry::SinkParams {
            threads: args.remote.remote_threads,
            reuseport: args.remote.remote_threads > 1,
            rcvbuf: None,
        },
    );
    let remote = args
        .remote
        .start(side, args.duration.as_secs_f64(), args.netns.as_deref())?;
    let mut config = args.config();
    if let Some(test) = &remote {
        config.to = vec![test.addr];
    }
    let mut progress = Progress(Lines::new("udp-flood", args.json));
    let report = udp::run_flood(&config, stop, &mut progress)?;
    progress.0.done();
    remote::finish(
        &report,
        remote,
        args.json,
        render::flood_text,
        report.problem(),
    )
}

/// `--rcvbuf`: bytes, plain or with a binary suffix (`4M`), as the kernel
/// takes SO_RCVBUF: 1 to 2^31-1.
fn rcvbuf(text: &str) -> Result<u32, String> {
    crate::base::units::parse_bytes_within(text, 1, i32::MAX as u64)
        .map(|b| b as u32)
        .map_err(|e| format!("{e:#}"))
}
