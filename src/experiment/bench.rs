//! One benchmark of an experiment: the client side (an engine config, as
//! `nettune bench` builds it, with its target filled in here) and the
//! server side the experiment starts itself (udp-sink, rr-server,
//! http-server), pinned to the server CPUs, each in its namespace. A run
//! gives one number (the rate the bench is judged by), the latency
//! percentiles when the bench has them, and the engines' own reports.
//! Every engine is driven through [`crate::bench::engine`]: nothing here
//! names one.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::stop::Stop;
use crate::bench::engine::{json, Engine, Load, Placement, Ran, Served};
use crate::bench::latency::LatencySummary;

/// A bench of an experiment.
#[derive(Debug)]
pub struct Bench {
    /// As the user wrote it (`rr --proto tcp --instances 100`).
    pub name: String,
    /// The client side, as a config whose target is filled in at each run.
    pub client: Box<dyn Load>,
    /// A client without a warm-up of its own (udp-flood) gets a discarded
    /// run this long first.
    pub udp_warmup: Duration,
}

impl Clone for Bench {
    fn clone(&self) -> Bench {
        Bench {
            name: self.name.clone(),
            client: self.client.clone_box(),
            udp_warmup: self.udp_warmup,
        }
    }
}

impl PartialEq for Bench {
    fn eq(&self, other: &Bench) -> bool {
        self.name == other.name
            && self.client.to_json() == other.client.to_json()
            && self.udp_warmup == other.udp_warmup
    }
}

impl Bench {
    fn engine(&self) -> &'static dyn Engine {
        self.client.engine()
    }

    pub fn kind(&self) -> &'static str {
        self.engine().client()
    }

    /// What the number of a run counts.
    pub fn metric(&self) -> &'static str {
        self.engine().metric()
    }

    /// The server side's name.
    pub fn server_kind(&self) -> &'static str {
        self.engine().server()
    }

    /// The client's config as JSON, its kind first.
    pub fn client_json(&self) -> serde_json::Value {
        self.client.to_json()
    }

    /// Warm-up and measured time of one run: the time the bench itself
    /// needs, against which an experiment's overhead is counted.
    pub fn own_time(&self) -> Duration {
        self.warmup() + self.client.duration()
    }

    /// The warm-up before the measured part: the engine's own, or the
    /// discarded run.
    fn warmup(&self) -> Duration {
        self.client.warmup().unwrap_or(self.udp_warmup)
    }

    /// The same bench measuring for `duration` (the search's short runs).
    pub fn with_duration(&self, duration: Duration) -> Bench {
        let mut b = self.clone();
        b.client.set_duration(duration);
        b
    }

    /// The same bench measuring for `duration` after `share` (0 to 1) of
    /// its warm-up, the engine's own or the discarded run: the search's
    /// short runs warm up in proportion to their length.
    pub fn with_run(&self, duration: Duration, share: f64) -> Bench {
        let mut b = self.with_duration(duration);
        let share = share.clamp(0.0, 1.0);
        if let Some(own) = b.client.warmup() {
            b.client.set_warmup(own.mul_f64(share));
        }
        b.udp_warmup = b.udp_warmup.mul_f64(share);
        b
    }

    /// The CPUs the client's threads are pinned to (empty: not pinned).
    pub fn client_pin(&self) -> &[u32] {
        self.client.pin()
    }

    /// Whether a discarded run comes first.
    fn discarded_warmup(&self) -> bool {
        self.client.warmup().is_none() && !self.udp_warmup.is_zero()
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

/// Stop the server when the client is done (or the caller stops), after
/// `linger`: a moment for the datagrams still in flight to be received.
fn stop_after<T>(server: &Stop, linger: Duration, result: T) -> T {
    std::thread::sleep(linger);
    server.trigger();
    result
}

/// A run's outcome from the client's run and the server side's report
/// (`served`); `received`: what the receiver counted, for an engine judged
/// by it.
fn outcome(ran: Ran, served: serde_json::Value, received: Option<(f64, u64)>) -> Outcome {
    let (value, lost) = match received {
        Some((rate, got)) => (rate, ran.sent.map(|sent| sent.saturating_sub(got))),
        None => (ran.rate, None),
    };
    Outcome {
        value,
        latency: ran.latency,
        lost,
        client_report: ran.report,
        server_report: served,
    }
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
    if bench.discarded_warmup() {
        let warm = bench.with_duration(bench.udp_warmup);
        run_local(&warm, sides, stop, &mut || {})?;
    }
    run_local(bench, sides, stop, mark)
}

/// One run with the server side here, on a thread of its own.
fn run_local(
    bench: &Bench,
    sides: &Sides,
    stop: &Stop,
    mark: &mut dyn FnMut(),
) -> anyhow::Result<Outcome> {
    let engine = bench.engine();
    let threads = (sides.server_pin.len() as u32).max(1);
    let mut at = Placement::new(SocketAddr::new(sides.server_addr, 0));
    at.pin = sides.server_pin.clone();
    at.netns = sides.server_netns.clone();
    let server = engine.open(&bench.client.server_params(threads), &at)?;
    let to = server.local_addr();
    let (ran, served) = beside(
        engine.server(),
        move |st| server.run(st),
        engine.linger(),
        || bench.client.run(to, sides.client_netns.clone(), stop, mark),
    )?;
    let Served { report, problem } = served;
    let judged = engine.judged_by_receiver();
    let problem = if judged {
        ran.problem.clone().or(problem)
    } else {
        ran.problem.clone()
    };
    if let Some(problem) = problem {
        anyhow::bail!("{problem}");
    }
    let received = if judged {
        engine.received(&report)
    } else {
        None
    };
    Ok(outcome(ran, report, received))
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
    let engine = bench.engine();
    let threads = (sides.server_pin.len() as u32).max(1);
    let side = ServerSide::new(engine, bench.client.server_params(threads));
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
    if bench.discarded_warmup() {
        let test = begin(bench.udp_warmup.as_secs_f64())?;
        let warm = bench.with_duration(bench.udp_warmup);
        let _ = warm
            .client
            .run(test.addr, sides.client_netns.clone(), stop, &mut || {});
        test.finish()?;
    }
    let own = bench.client.warmup().unwrap_or(Duration::ZERO) + bench.client.duration();
    let test = begin(own.as_secs_f64())?;
    let ran = bench
        .client
        .run(test.addr, sides.client_netns.clone(), stop, mark);
    std::thread::sleep(engine.linger());
    let received = test.finish()?;
    let ran = ran?;
    if let Some(problem) = &ran.problem {
        anyhow::bail!("{problem}");
    }
    let report = received.report.clone().unwrap_or(serde_json::Value::Null);
    let counted = if engine.judged_by_receiver() {
        // Its report must be there.
        Some(engine.received(&report).ok_or_else(|| {
            anyhow::anyhow!(
                "the daemon's {} sent no report ({}{})",
                engine.server(),
                received.ended,
                received
                    .error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            )
        })?)
    } else {
        None
    };
    Ok(outcome(ran, json(&received), counted))
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

#[cfg(test)]
mod tests {
    //! An engine the library has never heard of, defined here: an
    //! experiment runs it with no change anywhere else.

    use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};

    use super::*;
    use crate::bench::engine::{params, Params, Server};

    /// Counts the TCP connections its client opens.
    struct Knock;

    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct KnockParams {
        threads: u32,
    }

    impl Engine for Knock {
        fn server(&self) -> &'static str {
            "knock-server"
        }
        fn client(&self) -> &'static str {
            "knock"
        }
        fn metric(&self) -> &'static str {
            "knocks"
        }
        fn check_params(&self, params: &Params) -> Result<(), String> {
            crate::bench::engine::typed::<KnockParams>(params).map(|_| ())
        }
        fn threads(&self, _params: &Params) -> u32 {
            1
        }
        fn open(&self, _params: &Params, at: &Placement) -> anyhow::Result<Box<dyn Server>> {
            let listener = TcpListener::bind(at.bind)?;
            listener.set_nonblocking(true)?;
            Ok(Box::new(Door(listener)))
        }
        fn summary(&self, _report: &serde_json::Value) -> String {
            String::new()
        }
    }

    struct Door(TcpListener);

    impl Server for Door {
        fn local_addr(&self) -> SocketAddr {
            self.0.local_addr().expect("bound")
        }
        fn run(self: Box<Self>, stop: &Stop) -> anyhow::Result<Served> {
            let mut heard = 0u64;
            loop {
                match self.0.accept() {
                    Ok(_) => heard += 1,
                    // Connections made before the stop are all taken.
                    Err(_) if stop.is_set() => break,
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            Ok(Served {
                report: serde_json::json!({ "heard": heard }),
                problem: None,
            })
        }
    }

    #[derive(Debug, Clone, Serialize)]
    struct KnockConfig {
        knocks: u32,
        duration: Duration,
    }

    impl Load for KnockConfig {
        fn engine(&self) -> &'static dyn Engine {
            &Knock
        }
        fn duration(&self) -> Duration {
            self.duration
        }
        fn set_duration(&mut self, duration: Duration) {
            self.duration = duration;
        }
        fn warmup(&self) -> Option<Duration> {
            Some(Duration::ZERO)
        }
        fn pin(&self) -> &[u32] {
            &[]
        }
        fn server_params(&self, threads: u32) -> Params {
            params(&KnockParams { threads })
        }
        fn run(
            &self,
            to: SocketAddr,
            _netns: Option<String>,
            _stop: &Stop,
            mark: &mut dyn FnMut(),
        ) -> anyhow::Result<Ran> {
            mark();
            for _ in 0..self.knocks {
                TcpStream::connect(to)?;
            }
            Ok(Ran {
                rate: f64::from(self.knocks),
                latency: None,
                sent: None,
                problem: None,
                report: json(self),
            })
        }
    }

    #[test]
    fn an_engine_defined_outside_the_library_runs_as_an_experiment_bench() {
        let bench = Bench {
            name: "knock".to_string(),
            client: Box::new(KnockConfig {
                knocks: 5,
                duration: Duration::from_secs(1),
            }),
            udp_warmup: Duration::ZERO,
        };
        assert_eq!(
            (bench.kind(), bench.server_kind(), bench.metric()),
            ("knock", "knock-server", "knocks")
        );
        assert_eq!(bench.client_json()["kind"], "knock");
        let sides = Sides {
            server_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            server_netns: None,
            server_pin: Vec::new(),
            client_netns: None,
            remote: None,
        };
        let mut marked = false;
        let outcome = run(&bench, &sides, &Stop::new(), &mut || marked = true).expect("run");
        assert!(marked);
        assert_eq!(outcome.value, 5.0);
        assert_eq!(outcome.lost, None);
        assert_eq!(outcome.server_report["heard"], 5);
        assert_eq!(outcome.client_report["knocks"], 5);
    }

    /// The search's short runs: measured for their length after their
    /// share of the warm-up; a full-length run keeps all of it.
    #[test]
    fn a_short_run_warms_up_for_its_share() {
        use crate::bench::rr::{ClientConfig, Proto};
        let mut rr = ClientConfig::new(
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            Proto::Tcp,
        );
        rr.duration = Duration::from_secs(4);
        rr.warmup = Duration::from_secs(1);
        let bench = Bench {
            name: "rr --proto tcp".to_string(),
            client: Box::new(rr),
            udp_warmup: Duration::ZERO,
        };
        let short = bench.with_run(Duration::from_secs(1), 0.25);
        assert_eq!(short.client.duration(), Duration::from_secs(1));
        assert_eq!(short.client.warmup(), Some(Duration::from_millis(250)));
        assert_eq!(short.own_time(), Duration::from_millis(1250));
        let full = bench.with_run(Duration::from_secs(4), 1.0);
        assert_eq!(full, bench);
        // A flood has no warm-up of its own: its discarded run is shortened.
        let flood = Bench {
            name: "knock".to_string(),
            client: Box::new(KnockConfig {
                knocks: 1,
                duration: Duration::from_secs(4),
            }),
            udp_warmup: Duration::from_secs(1),
        };
        assert_eq!(
            flood.with_run(Duration::from_secs(2), 0.5).udp_warmup,
            Duration::from_millis(500)
        );
    }
}
