//! `bench http-server` and `bench http` on the command line.

use std::net::SocketAddr;
use std::time::Duration;

use super::busy::BusyPollArgs;
use super::common::{duration, finish, pin_list, CpuList};
use crate::base::observe::Observer;
use crate::base::stop::Stop;
use crate::bench::addr::parse_bind;
use crate::bench::http::{
    self, output, server, Backend, Header, LoadConfig, LoadInterval, Locality, Sched, ServerConfig,
    ServerInterval, Url,
};
use crate::bench::pin::Pinning;
use crate::bench::report::Progress;
use crate::error::Status;

/// Serve `/plaintext` and `/json` the TechEmpower way until stopped.
///
/// Exit status: 0 when requests were served; 1 when none came (the report
/// is still printed); 2 when the server could not run (bad input, a port
/// another program holds, a missing namespace).
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Address and port to listen on (port 0: any free port). The first line
    /// on stderr says which, as every bench server says it:
    /// `http-server: listening on ADDR:PORT (...)`.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_bind)]
    pub bind: SocketAddr,
    /// Event-loop threads, each with its own SO_REUSEPORT listener
    /// (default: one per --pin CPU, else one per CPU this process may use).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Pin thread i to the i-th CPU of this list (e.g. 0-3), wrapping; the
    /// listeners are created in this order.
    #[arg(long, value_name = "CPUS", value_parser = pin_list)]
    pub pin: Option<CpuList>,
    /// Connection steering: cbpf (default with --pin) or none (default
    /// without). cbpf follows the CPU that handles a connection's first
    /// packet; for unpinned clients on this host prefer none.
    #[arg(long, value_enum)]
    pub locality: Option<Locality>,
    #[command(flatten)]
    pub busy: BusyPollArgs,
    /// epoll timeout in microseconds while traffic flows (default: 100
    /// when busy polling can engage, with --busy-poll or
    /// net.core.busy_poll; else 10000, since short waits then only add
    /// timer wake-ups).
    #[arg(long, value_name = "USECS", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub wait_us: Option<u32>,
    /// Scheduling policy of the server threads.
    #[arg(long, value_enum, default_value = "batch")]
    pub sched: Sched,
    /// Close connections idle this long.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    pub idle_timeout: Duration,
    /// Stop after this long (e.g. 30, 30s, 5m); default: until Ctrl-C or
    /// SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub duration: Option<Duration>,
    /// Serve inside this network namespace (as `ip netns exec NAME`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Join a port that another program already serves (the kernel then
    /// splits the connections between the two); without it such a port is
    /// refused.
    #[arg(long)]
    pub share_port: bool,
    /// I/O engine: epoll, io_uring (multishot accept, multishot recv into a
    /// provided buffer ring, batched submissions; Linux 6.0), or auto (the
    /// one that measured faster; epoll, with a warning, where the kernel
    /// cannot serve io_uring). The report's `engine_reason` says why
    /// (docs/benchmarks.md has the figures).
    #[arg(long, value_enum, default_value = "epoll")]
    pub engine: Backend,
    /// Print the final report as JSON on stdout, after the listening line
    /// (see docs/bench-http.md).
    #[arg(long)]
    pub json: bool,
}

/// Load an HTTP/1.1 server over keep-alive connections, wrk style.
///
/// Exit status: 0 when responses came; 1 when none did (the report is still
/// printed); 2 when the run could not start (bad input, nothing listening,
/// a missing namespace).
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// What to request: http://HOST[:PORT]/PATH (https is not supported).
    /// With --remote a path alone (/json), or a URL of which only the path
    /// counts (default /plaintext).
    #[arg(value_name = "URL", value_parser = target, required_unless_present = "remote")]
    pub url: Option<Target>,
    /// Threads, one event loop each.
    #[arg(short = 't', long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Keep-alive connections in all, spread evenly over the threads.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: u32,
    /// How long statistics are collected (10, 10s, 1m), after the warm-up.
    #[arg(short = 'd', long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub duration: Duration,
    /// Warm-up before statistics start (0 = none).
    #[arg(short = 'D', long, value_name = "DURATION", default_value = "0", value_parser = crate::base::units::parse_duration_or_zero)]
    pub warmup: Duration,
    /// Open loop: this many requests per second in all, scheduled per thread;
    /// latency counts from each request's scheduled send time (corrected
    /// for coordinated omission) and, separately, from its actual send.
    #[arg(short = 'R', long, value_name = "RPS", value_parser = super::common::rate)]
    pub rate: Option<u64>,
    /// Pin thread i to the i-th CPU this process may use (twrk's option).
    #[arg(long, conflicts_with = "pin")]
    pub pin_cpus: bool,
    /// Pin thread i to the i-th CPU of this list (e.g. 1 or 0-3), wrapping.
    #[arg(long, value_name = "CPUS", value_parser = pin_list)]
    pub pin: Option<CpuList>,
    /// Requests in flight per connection (HTTP pipelining).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
    /// Extra request header, e.g. -H 'Host: server.tld' (repeatable; a Host
    /// given here replaces the URL's).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE", value_parser = http::parse_header)]
    pub headers: Vec<Header>,
    /// A request without its response after this long counts as a timeout
    /// error and its connection is reopened.
    #[arg(short = 'T', long, value_name = "DURATION", default_value = "2s", value_parser = duration)]
    pub timeout: Duration,
    /// Load from inside this network namespace (as `ip netns exec NAME`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Accepted for wrk/twrk compatibility: the distribution is always printed.
    #[arg(long, hide = true)]
    pub latency: bool,
    /// Print the report as JSON on stdout (see docs/bench-http.md).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
}

/// The load's URL argument: a whole URL, or a path alone whose server is
/// named elsewhere (the daemon's with --remote, an experiment's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Url(Url),
    Path(String),
}

impl Target {
    pub fn path(&self) -> &str {
        match self {
            Target::Url(url) => &url.path,
            Target::Path(path) => path,
        }
    }
}

fn target(text: &str) -> Result<Target, String> {
    if text.trim_start().starts_with('/') {
        return http::url::parse_path(text).map(Target::Path);
    }
    http::url::parse(text).map(Target::Url)
}

impl ServerArgs {
    pub fn config(&self) -> ServerConfig {
        ServerConfig {
            bind: self.bind,
            threads: self.threads,
            pin: CpuList::of(&self.pin),
            locality: self.locality,
            busy_poll: self.busy.busy_poll,
            prefer_busy_poll: self.busy.prefer_busy_poll,
            busy_poll_budget: self.busy.busy_poll_budget,
            wait_us: self.wait_us,
            sched: self.sched,
            idle_timeout: self.idle_timeout,
            duration: self.duration,
            netns: self.netns.clone(),
            share_port: self.share_port,
            peer: None,
            engine: self.engine,
        }
    }
}

impl LoadArgs {
    /// The URL to load: the one given, or with --remote the daemon's
    /// server side and the given URL's path.
    pub fn url(&self, remote: Option<&crate::serve::RemoteTest>) -> anyhow::Result<Url> {
        match (remote, &self.url) {
            (Some(test), url) => {
                let path = url.as_ref().map_or("/plaintext", Target::path);
                http::url::parse(&format!("http://{}{path}", test.addr)).map_err(anyhow::Error::msg)
            }
            (None, Some(Target::Url(url))) => Ok(url.clone()),
            (None, Some(Target::Path(path))) => anyhow::bail!(
                "'{path}' is a path alone: give the whole URL (http://HOST[:PORT]{path}), or \
                 --remote ADDR:PORT for a `nettune serve` daemon whose server side it loads"
            ),
            (None, None) => anyhow::bail!("give a URL, or --remote ADDR:PORT for a daemon"),
        }
    }

    pub fn config(&self, url: Url) -> anyhow::Result<LoadConfig> {
        let pin = if self.pin_cpus {
            Pinning::all_allowed()?.cpus().to_vec()
        } else {
            CpuList::of(&self.pin)
        };
        Ok(LoadConfig {
            url,
            threads: self.threads,
            connections: self.connections,
            duration: self.duration,
            warmup: self.warmup,
            rate: self.rate,
            pin,
            pipeline: self.pipeline,
            headers: self.headers.clone(),
            timeout: self.timeout,
            netns: self.netns.clone(),
        })
    }
}

/// The server's listening line and warnings on stderr (stdout holds the
/// report alone), a status line per second on a terminal.
struct ServerLines(Progress);

impl Observer<ServerInterval> for ServerLines {
    fn ready(&mut self, addr: Option<SocketAddr>, detail: &str) {
        self.0.clear();
        match addr {
            Some(addr) => super::common::listening("http-server", addr, detail),
            None => eprintln!("http-server: {detail}"),
        }
    }
    fn warning(&mut self, text: &str) {
        self.0.clear();
        eprintln!("http-server: warning: {text}");
    }
    fn interval(&mut self, i: &ServerInterval) {
        let per_thread: Vec<String> = i.per_thread.iter().map(ToString::to_string).collect();
        self.0.show(&format!(
            "http-server {} s: {} req/s  threads: {}",
            i.second,
            i.requests,
            per_thread.join(" ")
        ));
    }
}

/// The load generator's "Running ..." lines on stdout (wrk's layout), a
/// status line per second on a terminal.
struct LoadLines {
    json: bool,
    progress: Progress,
}

impl Observer<LoadInterval> for LoadLines {
    fn ready(&mut self, _addr: Option<SocketAddr>, detail: &str) {
        if !self.json {
            println!("{detail}");
        }
    }
    fn warning(&mut self, text: &str) {
        self.progress.clear();
        eprintln!("http: warning: {text}");
    }
    fn interval(&mut self, i: &LoadInterval) {
        self.progress
            .show(&format!("http {} s: {} req/s", i.second, i.requests));
    }
}

pub fn server(args: &ServerArgs, stop: &Stop) -> anyhow::Result<Status> {
    let server = http::open_server(args.config())?;
    let mut lines = ServerLines(Progress::new(true));
    let report = server.run(stop, &mut lines)?;
    lines.0.clear();
    finish(&report, args.json, server::text, report.problem())
}

pub fn load(args: &LoadArgs, stop: &Stop) -> anyhow::Result<Status> {
    let mut lines = LoadLines {
        json: args.json,
        progress: Progress::new(true),
    };
    let side = crate::serve::ServerSide::of(
        &http::entry::Http,
        &http::entry::ServerParams {
            threads: args.remote.remote_threads,
        },
    );
    let seconds = (args.warmup + args.duration).as_secs_f64();
    let remote = args.remote.start(side, seconds, args.netns.as_deref())?;
    let url = args.url(remote.as_ref())?;
    let report = http::run_load(&args.config(url)?, stop, &mut lines)?;
    lines.progress.clear();
    super::remote::finish(&report, remote, args.json, output::text, report.problem())
}
