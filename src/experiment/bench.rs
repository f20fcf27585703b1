//! One benchmark of an experiment: the client side (an engine config, as
//! `nettune bench` builds it, with its target filled in here) and the
//! server side the experiment starts itself (udp-sink, rr-server,
//! http-server), pinned to the server CPUs, each in its namespace. A run
//! gives one number (the rate the bench is judged by), the latency
//! percentiles when the bench has them, and the engines' own reports.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::observe::{Observer, Quiet};
use crate::base::stop::Stop;
use crate::bench::latency::LatencySummary;
use crate::bench::{http, rr, udp};

/// The client side of a bench, as a config whose target is filled in at
/// each run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Client {
    UdpFlood(udp::FloodConfig),
    Rr(rr::ClientConfig),
    Http(http::LoadConfig),
}

/// A bench of an experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bench {
    /// As the user wrote it (`rr --proto tcp --instances 100`).
    pub name: String,
    pub client: Client,
    /// udp-flood has no warm-up of its own: a discarded run this long comes
    /// first. (rr and http warm up inside the engine.)
    #[serde(with = "crate::bench::secs")]
    pub udp_warmup: Duration,
}

impl Bench {
    pub fn kind(&self) -> &'static str {
        match self.client {
            Client::UdpFlood(_) => "udp-flood",
            Client::Rr(_) => "rr",
            Client::Http(_) => "http",
        }
    }

    /// What the number of a run counts.
    pub fn metric(&self) -> &'static str {
        match self.client {
            Client::UdpFlood(_) => "packets/s",
            Client::Rr(_) => "transactions/s",
            Client::Http(_) => "requests/s",
        }
    }

    /// The server side's name.
    pub fn server_kind(&self) -> &'static str {
        match self.client {
            Client::UdpFlood(_) => "udp-sink",
            Client::Rr(_) => "rr-server",
            Client::Http(_) => "http-server",
        }
    }

    /// Warm-up and measured time of one run: the time the bench itself
    /// needs, against which an experiment's overhead is counted.
    pub fn own_time(&self) -> Duration {
        match &self.client {
            Client::UdpFlood(c) => self.udp_warmup + c.duration,
            Client::Rr(c) => c.warmup + c.duration,
            Client::Http(c) => c.warmup + c.duration,
        }
    }

    /// The same bench measuring for `duration` (the search's short runs).
    pub fn with_duration(&self, duration: Duration) -> Bench {
        let mut b = self.clone();
        match &mut b.client {
            Client::UdpFlood(c) => c.duration = duration,
            Client::Rr(c) => c.duration = duration,
            Client::Http(c) => c.duration = duration,
        }
        b
    }

    /// The CPUs the client's threads are pinned to (empty: not pinned).
    pub fn client_pin(&self) -> &[u32] {
        match &self.client {
            Client::UdpFlood(c) => &c.pin,
            Client::Rr(c) => &c.pin,
            Client::Http(c) => &c.pin,
        }
    }
}

/// Where a bench's two sides run.
#[derive(Debug, Clone, PartialEq)]
pub struct Sides {
    /// The server's address (port chosen by the kernel).
    pub server_addr: IpAddr,
    pub server_netns: Option<String>,
    /// The server's threads, one per CPU (empty: one unpinned thread); on
    /// the daemon's host with `remote`.
    pub server_pin: Vec<u32>,
    pub client_netns: Option<String>,
    /// The server side started by `nettune serve` on another host instead
    /// of here.
    pub remote: Option<Remote>,
}

/// A `nettune serve` daemon that starts the server sides.
pub use crate::serve::Remote;

/// Seconds a remote server side may live beyond the client's own time:
/// connecting, the last packets, the report.
const REMOTE_MARGIN: f64 = 5.0;

/// One run's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The rate the bench is judged by ([`Bench::metric`]).
    pub value: f64,
    pub latency: Option<LatencySummary>,
    /// Packets sent but not received (udp-flood).
    pub lost: Option<u64>,
    /// The engines' reports (client, server), as their `--json`.
    pub client_report: serde_json::Value,
    pub server_report: serde_json::Value,
}

/// Calls `mark` when the measured part of a run starts.
struct Marker<'a> {
    mark: &'a mut dyn FnMut(),
    marked: bool,
}

impl<I> Observer<I> for Marker<'_> {
    fn measuring(&mut self) {
        if !self.marked {
            self.marked = true;
            (self.mark)();
        }
    }
}

/// Stop the server when the client is done (or the caller stops), after
/// `linger`: a moment for the datagrams still in flight to be received.
fn stop_after<T>(server: &Stop, linger: Duration, result: T) -> T {
    std::thread::sleep(linger);
    server.trigger();
    result
}

/// How long a sink keeps receiving after the flood ends: packets in a
/// backlog or socket queue are processed within microseconds to a few
/// milliseconds.
const UDP_LINGER: Duration = Duration::from_millis(20);

fn json<T: Serialize>(report: &T) -> serde_json::Value {
    serde_json::to_value(report).unwrap_or(serde_json::Value::Null)
}

/// What a run takes from a request/response client's report.
trait Measured: Serialize {
    fn problem(&self) -> Option<String>;
    fn rate(&self) -> f64;
    fn latency(&self) -> LatencySummary;
}

impl Measured for rr::RrReport {
    fn problem(&self) -> Option<String> {
        rr::RrReport::problem(self)
    }
    fn rate(&self) -> f64 {
        self.transactions_per_sec
    }
    fn latency(&self) -> LatencySummary {
        self.latency.clone()
    }
}

impl Measured for http::LoadReport {
    fn problem(&self) -> Option<String> {
        http::LoadReport::problem(self)
    }
    fn rate(&self) -> f64 {
        self.requests_per_s
    }
    fn latency(&self) -> LatencySummary {
        self.latency.summary.clone()
    }
}

/// A run's outcome from the client's report and the server side's; an
/// error when the client's run is not a measurement.
fn outcome<R: Measured, S: Serialize>(report: &R, served: &S) -> anyhow::Result<Outcome> {
    if let Some(problem) = report.problem() {
        anyhow::bail!("{problem}");
    }
    Ok(Outcome {
        value: report.rate(),
        latency: Some(report.latency()),
        lost: None,
        client_report: json(report),
        server_report: json(served),
    })
}

/// The rr client against `to`, run from the client's namespace.
fn rr_client(config: &rr::ClientConfig, to: SocketAddr, sides: &Sides) -> rr::ClientConfig {
    let mut client = config.clone();
    client.to = to;
    client.netns = sides.client_netns.clone();
    client
}

/// The load against the server at `addr` (the line's path kept), run from
/// the client's namespace.
fn http_load(
    config: &http::LoadConfig,
    addr: SocketAddr,
    sides: &Sides,
) -> anyhow::Result<http::LoadConfig> {
    let mut load = config.clone();
    load.url = http::url::parse(&format!("http://{addr}{}", config.url.path))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    load.netns = sides.client_netns.clone();
    Ok(load)
}

/// Run `bench` once: start its server side, warm up, measure. `mark` is
/// called when the measured part starts (the sampler's first snapshot);
/// the measured part ends when this returns.
pub fn run(
    bench: &Bench,
    sides: &Sides,
    stop: &Stop,
    mark: &mut dyn FnMut(),
) -> anyhow::Result<Outcome> {
    if let Some(remote) = &sides.remote {
        return run_remote(bench, sides, remote, stop, mark);
    }
    let bind = SocketAddr::new(sides.server_addr, 0);
    let threads = (sides.server_pin.len() as u32).max(1);
    match &bench.client {
        Client::UdpFlood(config) => {
            if !bench.udp_warmup.is_zero() {
                let mut warm = config.clone();
                warm.duration = bench.udp_warmup;
                udp_run(&warm, sides, bind, threads, stop, &mut || {})?;
            }
            udp_run(config, sides, bind, threads, stop, mark)
        }
        Client::Rr(config) => {
            let mut server = rr::ServerConfig::new(bind);
            server.threads = threads;
            server.pin = sides.server_pin.clone();
            server.netns = sides.server_netns.clone();
            let server = rr::open_server(server)?;
            let client = rr_client(config, server.local_addr(), sides);
            let mut marker = Marker {
                mark,
                marked: false,
            };
            let (report, served) = beside(
                "rr-server",
                move |st| server.run(st, &mut Quiet),
                Duration::ZERO,
                || rr::run_client(&client, stop, &mut marker),
            )?;
            outcome(&report, &served)
        }
        Client::Http(config) => {
            let mut server = http::ServerConfig::new(bind);
            server.threads = Some(threads);
            server.pin = sides.server_pin.clone();
            server.netns = sides.server_netns.clone();
            let server = http::open_server(server)?;
            let load = http_load(config, server.local_addr(), sides)?;
            let mut marker = Marker {
                mark,
                marked: false,
            };
            let (report, served) = beside(
                "http-server",
                move |st| server.run(st, &mut Quiet),
                Duration::ZERO,
                || http::run_load(&load, stop, &mut marker),
            )?;
            outcome(&report, &served)
        }
    }
}

/// Ask the daemon for the server side, run the client against it here, and
/// take the server side's report back (the receiver's view: for udp-flood,
/// the packets/s that arrived there).
fn run_remote(
    bench: &Bench,
    sides: &Sides,
    remote: &Remote,
    stop: &Stop,
    mark: &mut dyn FnMut(),
) -> anyhow::Result<Outcome> {
    use crate::serve::{ServerSide, Start};
    let threads = (sides.server_pin.len() as u32).max(1);
    let side = match &bench.client {
        Client::UdpFlood(_) => ServerSide::UdpSink {
            threads,
            reuseport: threads > 1,
            rcvbuf: None,
        },
        Client::Rr(c) => ServerSide::RrServer {
            threads,
            max_reply: u32::try_from(c.size.reply).unwrap_or(u32::MAX),
        },
        Client::Http(_) => ServerSide::HttpServer { threads },
    };
    let start = |seconds: f64| Start {
        side: side.clone(),
        seconds: seconds + REMOTE_MARGIN,
        pin: sides.server_pin.clone(),
    };
    let begin = |seconds: f64| {
        crate::bench::netns::within(sides.client_netns.as_deref(), || {
            remote.start(&start(seconds))
        })
    };
    let mut marker = Marker {
        mark,
        marked: false,
    };
    let outcome = match &bench.client {
        Client::UdpFlood(config) => {
            if !bench.udp_warmup.is_zero() {
                let test = begin(bench.udp_warmup.as_secs_f64())?;
                let mut warm = config.clone();
                warm.duration = bench.udp_warmup;
                warm.to = vec![test.addr];
                warm.netns = sides.client_netns.clone();
                let _ = udp::run_flood(&warm, stop, &mut Quiet);
                test.finish()?;
            }
            let test = begin(config.duration.as_secs_f64())?;
            let mut flood = config.clone();
            flood.to = vec![test.addr];
            flood.netns = sides.client_netns.clone();
            (marker.mark)();
            let sent = udp::run_flood(&flood, stop, &mut Quiet);
            std::thread::sleep(UDP_LINGER);
            let received = test.finish()?;
            let sent = sent?;
            if let Some(problem) = sent.problem() {
                anyhow::bail!("{problem}");
            }
            let report = received.report.clone().unwrap_or(serde_json::Value::Null);
            let pps = report["pps"].as_f64().ok_or_else(|| {
                anyhow::anyhow!(
                    "the daemon's udp-sink sent no report ({}{})",
                    received.ended,
                    received
                        .error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                )
            })?;
            let got = report["packets"].as_u64().unwrap_or(0);
            Outcome {
                value: pps,
                latency: None,
                lost: Some(sent.packets.saturating_sub(got)),
                client_report: json(&sent),
                server_report: json(&received),
            }
        }
        Client::Rr(config) => {
            let test = begin((config.warmup + config.duration).as_secs_f64())?;
            let client = rr_client(config, test.addr, sides);
            let report = rr::run_client(&client, stop, &mut marker);
            let served = test.finish()?;
            outcome(&report?, &served)?
        }
        Client::Http(config) => {
            let test = begin((config.warmup + config.duration).as_secs_f64())?;
            let load = http_load(config, test.addr, sides)?;
            let report = http::run_load(&load, stop, &mut marker);
            let served = test.finish()?;
            outcome(&report?, &served)?
        }
    };
    Ok(outcome)
}

/// Run a server side on a thread of its own (`serve`, until its stop
/// token) while `client` runs here; stop the server `linger` after the
/// client ends. The client's result, then the server's.
fn beside<S: Send, C>(
    what: &str,
    serve: impl FnOnce(&Stop) -> anyhow::Result<S> + Send,
    linger: Duration,
    client: impl FnOnce() -> anyhow::Result<C>,
) -> anyhow::Result<(C, S)> {
    let server_stop = Stop::new();
    std::thread::scope(|s| {
        let serving = s.spawn(|| serve(&server_stop));
        let report = stop_after(&server_stop, linger, client());
        let served = serving
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the {what} panicked")))?;
        Ok((report?, served))
    })
}

/// A udp-flood run: the sink receives until the flood is done; the rate is
/// the sink's (packets that reached the application).
fn udp_run(
    config: &udp::FloodConfig,
    sides: &Sides,
    bind: SocketAddr,
    threads: u32,
    stop: &Stop,
    mark: &mut dyn FnMut(),
) -> anyhow::Result<Outcome> {
    let mut sink = udp::SinkConfig::new(bind);
    sink.threads = threads;
    sink.reuseport = threads > 1;
    sink.pin = sides.server_pin.clone();
    sink.duration = None;
    sink.netns = sides.server_netns.clone();
    let sink = udp::open_sink(sink)?;
    let mut flood = config.clone();
    flood.to = vec![sink.local_addr()];
    flood.netns = sides.client_netns.clone();
    let (sent, received) = beside(
        "udp-sink",
        move |st| sink.run(st, &mut Quiet),
        UDP_LINGER,
        || {
            mark();
            udp::run_flood(&flood, stop, &mut Quiet)
        },
    )?;
    if let Some(problem) = sent.problem().or_else(|| received.problem()) {
        anyhow::bail!("{problem}");
    }
    Ok(Outcome {
        value: received.pps,
        latency: None,
        lost: Some(sent.packets.saturating_sub(received.packets)),
        client_report: json(&sent),
        server_report: json(&received),
    })
}
