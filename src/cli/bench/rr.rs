//! `bench rr-server` and `bench rr` on the command line.

use std::net::SocketAddr;
use std::time::Duration;

use super::busy::BusyPollArgs;
use super::common::{duration, finish, pin_list, CpuList, Lines};
use super::remote::{self, RemoteArgs};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::bench::addr::{parse_bind, parse_destination};
use crate::bench::rr::{self, output, Backend, ClientConfig, Interval, Proto, ServerConfig, Sizes};
use crate::error::Status;

/// Answer rr requests over TCP and UDP.
///
/// Exit status: 0 when transactions were answered; 1 when none came (the
/// report is still printed); 2 when the server could not run (bad input, a
/// port another program holds, a missing namespace).
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Address and port to answer on, TCP and UDP alike (port 0: any free
    /// port). The first line on stderr says which, as every bench server
    /// says it: `rr-server: listening on ADDR:PORT (...)`.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_bind)]
    pub bind: SocketAddr,
    /// Event-loop threads, each with its own SO_REUSEPORT TCP listener and
    /// UDP socket.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Join a port that another program already serves (the kernel then
    /// splits the traffic between the two); without it such a port is
    /// refused.
    #[arg(long)]
    pub share_port: bool,
    /// Pin thread i to the i-th CPU of this list (e.g. 0 or 0-3), wrapping.
    #[arg(long, value_name = "CPUS", value_parser = pin_list)]
    pub pin: Option<CpuList>,
    /// How long to serve (10, 30s, 5m); default: until Ctrl-C or SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub duration: Option<Duration>,
    /// Serve inside this network namespace (as `ip netns exec NAME`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    #[command(flatten)]
    pub busy: BusyPollArgs,
    /// I/O engine: epoll, io_uring (multishot accept, recv and recvmsg
    /// into provided buffer rings, batched submissions; Linux 6.0), or auto
    /// (the one that measured faster, with one client and with many;
    /// epoll, with a warning, where the kernel cannot serve io_uring). The
    /// report's `engine_reason` says why (docs/benchmarks.md has the
    /// figures).
    #[arg(long, value_enum, default_value = "epoll")]
    pub engine: Backend,
    /// Print the final report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Testing aid: each thread drops every N-th UDP request it receives
    /// (the client must resend).
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u64).range(1..))]
    pub drop_every: Option<u64>,
}

/// Run request/response transactions against an rr-server.
///
/// Exit status: 0 when transactions completed and no connection was lost;
/// 1 when none completed or connections were closed during the run (the
/// report is still printed); 2 when the run could not start (bad input, no
/// server, a missing namespace).
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// The rr-server's address (`nettune bench rr-server` prints it).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_destination, required_unless_present = "remote", conflicts_with = "remote")]
    pub to: Option<SocketAddr>,
    /// TCP_RR (one connection per instance) or UDP_RR (one source port per
    /// instance); TCP unless given, as netperf and sockperf default.
    #[arg(long, value_enum, default_value = "tcp")]
    pub proto: Proto,
    /// Request and reply bytes; one number sets both.
    #[arg(long, value_name = "REQ[,RESP]", default_value = "1,1", value_parser = parse_sizes)]
    pub size: Sizes,
    /// Concurrent request/response loops (netperf instances).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub instances: u32,
    /// Event-loop threads the instances are spread over (instance i on
    /// thread i mod T); never more than the instances.
    #[arg(long, value_name = "T", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// How long to measure: seconds (10, 1.5) or 500ms, 5s, 1m; Ctrl-C or
    /// SIGTERM stops early with the report.
    #[arg(long, value_name = "DURATION", default_value = "10", value_parser = duration)]
    pub duration: Duration,
    /// Traffic before the measurement starts (0 for none); it also waits
    /// for the first transaction, up to 2 s.
    #[arg(long, value_name = "DURATION", default_value = "1", value_parser = crate::base::units::parse_duration_or_zero)]
    pub warmup: Duration,
    /// Pin thread i to the i-th CPU of this list (e.g. 1 or 0-3), wrapping.
    #[arg(long, value_name = "CPUS", value_parser = pin_list)]
    pub pin: Option<CpuList>,
    /// UDP: the least wait before an unanswered request is sent again; the
    /// timeout follows the measured round trip above it, as TCP's RTO does
    /// (doubling per further timeout of the same request, up to 1 s).
    #[arg(long, value_name = "MS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub resend_after: u64,
    /// Run inside this network namespace (as `ip netns exec NAME`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    #[command(flatten)]
    pub busy: BusyPollArgs,
    /// Print the final report as JSON on stdout (see docs/bench-rr.md).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// `REQ[,RESP]`: positive byte counts up to the TCP bound; the UDP bound
/// is checked once the protocol is known.
fn parse_sizes(text: &str) -> Result<Sizes, String> {
    let one = |part: &str| -> Result<usize, String> {
        let n: usize = part
            .trim()
            .parse()
            .map_err(|_| format!("'{text}' is not REQ[,RESP] in bytes (e.g. 1 or 64,1024)"))?;
        if n == 0 || n > rr::MAX_TCP_SIZE {
            return Err(format!(
                "'{text}': sizes go from 1 to {} bytes",
                rr::MAX_TCP_SIZE
            ));
        }
        Ok(n)
    };
    match text.split_once(',') {
        Some((request, reply)) => Ok(Sizes {
            request: one(request)?,
            reply: one(reply)?,
        }),
        None => {
            let n = one(text)?;
            Ok(Sizes {
                request: n,
                reply: n,
            })
        }
    }
}

impl ServerArgs {
    pub fn config(&self) -> ServerConfig {
        ServerConfig {
            bind: self.bind,
            threads: self.threads,
            share_port: self.share_port,
            pin: CpuList::of(&self.pin),
            duration: self.duration,
            netns: self.netns.clone(),
            drop_every: self.drop_every,
            peer: None,
            max_reply: None,
            busy: self.busy.config(),
            engine: self.engine,
        }
    }
}

impl ClientArgs {
    /// The config against `to` (--to, or the daemon's server side).
    pub fn config(&self, to: SocketAddr) -> ClientConfig {
        ClientConfig {
            to,
            proto: self.proto,
            size: self.size,
            instances: self.instances,
            threads: self.threads,
            duration: self.duration,
            warmup: self.warmup,
            pin: CpuList::of(&self.pin),
            resend_after: Duration::from_millis(self.resend_after),
            netns: self.netns.clone(),
            busy: self.busy.config(),
        }
    }
}

/// The server's listening line and warnings on stderr; stdout holds the
/// report alone.
struct ServerLines;

impl Observer<()> for ServerLines {
    fn ready(&mut self, addr: Option<SocketAddr>, detail: &str) {
        match addr {
            Some(addr) => super::common::listening("rr-server", addr, detail),
            None => eprintln!("rr-server: {detail}"),
        }
    }
    fn warning(&mut self, text: &str) {
        eprintln!("rr-server: warning: {text}");
    }
}

struct ClientLines(Lines);

impl Observer<Interval> for ClientLines {
    fn ready(&mut self, _addr: Option<SocketAddr>, detail: &str) {
        // The header goes to stderr: stdout holds the report alone.
        self.0.ready(detail.trim_start_matches("rr: "));
    }
    fn warning(&mut self, text: &str) {
        self.0.warning(text);
    }
    fn interval(&mut self, interval: &Interval) {
        self.0
            .line(interval.second, &output::interval_line(interval));
    }
}

pub fn server(args: &ServerArgs, stop: &Stop) -> anyhow::Result<Status> {
    let server = rr::open_server(args.config())?;
    let report = server.run(stop, &mut ServerLines)?;
    finish(&report, args.json, output::server_text, report.problem())
}

pub fn client(args: &ClientArgs, stop: &Stop) -> anyhow::Result<Status> {
    let side = crate::serve::ServerSide::of(
        &rr::entry::Rr,
        &rr::entry::ServerParams {
            threads: args.remote.remote_threads,
            max_reply: args.size.reply as u32,
        },
    );
    let seconds = (args.warmup + args.duration).as_secs_f64();
    let remote = args.remote.start(side, seconds, args.netns.as_deref())?;
    let to = super::common::target(args.to, remote.as_ref())?;
    let mut lines = ClientLines(Lines::new("rr", args.json));
    let report = rr::run_client(&args.config(to), stop, &mut lines)?;
    lines.0.done();
    remote::finish(&report, remote, args.json, output::text, report.problem())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_one_or_two_numbers() {
        assert_eq!(
            parse_sizes("1"),
            Ok(Sizes {
                request: 1,
                reply: 1
            })
        );
        assert_eq!(
            parse_sizes("64, 1024"),
            Ok(Sizes {
                request: 64,
                reply: 1024
            })
        );
        assert!(parse_sizes("0").expect_err("zero").contains("'0'"));
        assert!(parse_sizes("1,x").expect_err("word").contains("'1,x'"));
        assert!(parse_sizes("1,2,3").is_err());
    }
}
