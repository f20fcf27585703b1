//! What a bench engine offers the programs that drive it by name (the
//! `nettune serve` daemon, an experiment, a client's `--remote`): a server
//! side opened from plain parameters, and a client whose config an
//! experiment fills in at each run. Each engine implements [`Engine`] in a
//! file of its own (`udp/entry.rs`, `rr/entry.rs`, ...), and
//! [`crate::bench::registry`] lists them: a new engine is its module plus
//! one line there.
//!
//! Parameters travel as JSON objects (the serve protocol's `start`
//! message carries them beside `"bench"`); each engine reads them into its
//! own typed struct, so a malformed request is refused before anything
//! starts.

use std::any::Any;
use std::fmt::Debug;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::base::stop::Stop;
use crate::base::tls::ServerTls;
use crate::bench::latency::LatencySummary;

/// A server side's parameters: the fields of the serve protocol's
/// `start.side` other than `bench`.
pub type Params = serde_json::Map<String, Value>;

/// One bench: a server side, and the client that loads it.
pub trait Engine: Sync {
    /// The server side's command and protocol name (`rr-server`).
    fn server(&self) -> &'static str;
    /// The client's command (`rr`).
    fn client(&self) -> &'static str;
    /// What the client's rate counts (`transactions/s`).
    fn metric(&self) -> &'static str;
    /// Whether `params` are this server side's (a request that is not is
    /// refused as malformed).
    fn check_params(&self, params: &Params) -> Result<(), String>;
    /// The server threads `params` ask for.
    fn threads(&self, params: &Params) -> u32;
    /// Check `params` against a daemon's limits beyond the threads.
    fn within(&self, _params: &Params, _limits: &ServerLimits) -> anyhow::Result<()> {
        Ok(())
    }
    /// Bind the server side where `at` says.
    fn open(&self, params: &Params, at: &Placement) -> anyhow::Result<Box<dyn Server>>;
    /// Whether the server side sends anything (a sink does not: it may
    /// receive from anyone).
    fn answers(&self) -> bool {
        true
    }
    /// One line of figures from the server side's report (`--remote`).
    fn summary(&self, report: &Value) -> String;
    /// Whether a run's result is what the server side received (a flood)
    /// rather than the client's rate.
    fn judged_by_receiver(&self) -> bool {
        false
    }
    /// For an engine judged by its receiver: the rate and the packets the
    /// server side's report counts (`None`: the report has none).
    fn received(&self, _report: &Value) -> Option<(f64, u64)> {
        None
    }
    /// How long the server side keeps receiving after the client ends.
    fn linger(&self) -> Duration {
        Duration::ZERO
    }
}

/// A daemon's bounds on what a server side may do.
#[derive(Debug, Clone, Default)]
pub struct ServerLimits {
    /// The largest reply a server side sends (rr), bytes.
    pub max_reply: u32,
    /// The most a server side sends, bits per second.
    pub max_rate: Option<u64>,
}

/// Where and how long a server side runs, the same for every engine.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Address and port (0: any) to bind.
    pub bind: SocketAddr,
    /// Server thread i on the i-th CPU of this list (empty: not pinned).
    pub pin: Vec<u32>,
    /// How long it runs at most (`None`: until stopped).
    pub duration: Option<Duration>,
    /// The network namespace it runs in.
    pub netns: Option<String>,
    /// Serve this address only (a daemon's client).
    pub peer: Option<IpAddr>,
    /// Run one test and end (a daemon's server side).
    pub one_test: bool,
    pub limits: ServerLimits,
    /// TLS for a control connection of the engine's own (stream).
    pub tls: Option<ServerTls>,
}

impl Placement {
    pub fn new(bind: SocketAddr) -> Placement {
        Placement {
            bind,
            pin: Vec::new(),
            duration: None,
            netns: None,
            peer: None,
            one_test: false,
            limits: ServerLimits::default(),
            tls: None,
        }
    }
}

/// A server side, bound and ready to run.
pub trait Server: Send {
    fn local_addr(&self) -> SocketAddr;
    /// Serve until `stop` or the duration; the report as JSON (what the
    /// server command prints with `--json`).
    fn run(self: Box<Self>, stop: &Stop) -> anyhow::Result<Served>;
}

/// A server side's run.
#[derive(Debug, Clone)]
pub struct Served {
    pub report: Value,
    /// Why the run is not a measurement, if it is not.
    pub problem: Option<String>,
}

/// What every client config has by being a serializable value: given to
/// each [`Load`] by the blanket impl below.
pub trait Config {
    /// The config as JSON, its engine's client name as `kind`.
    fn to_json(&self) -> Value;
    fn clone_box(&self) -> Box<dyn Load>;
    fn as_any(&self) -> &dyn Any;
}

impl<T: Load + Clone + Serialize + 'static> Config for T {
    fn to_json(&self) -> Value {
        tagged(self.engine().client(), self)
    }
    fn clone_box(&self) -> Box<dyn Load> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A client's config as an experiment keeps it: the target and namespace
/// are filled in at each run.
pub trait Load: Config + Debug + Send + Sync {
    fn engine(&self) -> &'static dyn Engine;
    /// The measured time of a run.
    fn duration(&self) -> Duration;
    fn set_duration(&mut self, duration: Duration);
    /// The engine's own warm-up before it measures; `None`: it has none
    /// (a discarded run stands in).
    fn warmup(&self) -> Option<Duration>;
    /// Change the engine's own warm-up. An engine without one (`warmup`
    /// is `None`) keeps this default, which ignores it.
    fn set_warmup(&mut self, _warmup: Duration) {}
    /// The CPUs the client's threads are pinned to (empty: not pinned).
    fn pin(&self) -> &[u32];
    /// The parameters of the server side this client loads with
    /// `threads` threads.
    fn server_params(&self, threads: u32) -> Params;
    /// Run against `to` from `netns`; `mark` is called when the measured
    /// part starts.
    fn run(
        &self,
        to: SocketAddr,
        netns: Option<String>,
        stop: &Stop,
        mark: &mut dyn FnMut(),
    ) -> anyhow::Result<Ran>;
}

/// A client's run.
#[derive(Debug, Clone)]
pub struct Ran {
    /// What the engine's metric counts, per second.
    pub rate: f64,
    pub latency: Option<LatencySummary>,
    /// Packets sent (a flood), to count what was lost.
    pub sent: Option<u64>,
    /// Why the run is not a measurement, if it is not.
    pub problem: Option<String>,
    /// The client's report, as its `--json`.
    pub report: Value,
}

/// `value` as JSON (`null` if it cannot be).
pub fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Read `params` as an engine's typed parameters.
pub fn typed<T: DeserializeOwned>(params: &Params) -> Result<T, String> {
    serde_json::from_value(Value::Object(params.clone())).map_err(|e| e.to_string())
}

/// `params` from an engine's typed parameters.
pub fn params<T: Serialize>(typed: &T) -> Params {
    match json(typed) {
        Value::Object(map) => map,
        _ => Params::new(),
    }
}

/// A client config's JSON with its kind first, as experiments record it.
pub fn tagged<T: Serialize>(kind: &str, config: &T) -> Value {
    let mut out = Params::new();
    out.insert("kind".to_string(), Value::String(kind.to_string()));
    if let Value::Object(fields) = json(config) {
        out.extend(fields);
    }
    Value::Object(out)
}

/// Calls `mark` when an engine's observer hears the measured part start.
pub struct Marker<'a> {
    mark: &'a mut dyn FnMut(),
    marked: bool,
}

impl<'a> Marker<'a> {
    pub fn new(mark: &'a mut dyn FnMut()) -> Marker<'a> {
        Marker {
            mark,
            marked: false,
        }
    }
}

impl<I> crate::base::observe::Observer<I> for Marker<'_> {
    fn measuring(&mut self) {
        if !self.marked {
            self.marked = true;
            (self.mark)();
        }
    }
}
