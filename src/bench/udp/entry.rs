//! udp-sink and udp-flood as a registered engine: judged by what the sink
//! receives.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{open_sink, run_flood, FloodConfig, Sink, SinkConfig};
use crate::base::observe::Quiet;
use crate::base::stop::Stop;
use crate::bench::engine::{
    json, params, typed, Engine, Load, Params, Placement, Ran, Served, Server,
};

/// How long a sink keeps receiving after the flood ends: packets in a
/// backlog or socket queue are processed within microseconds to a few
/// milliseconds.
const LINGER: Duration = Duration::from_millis(20);

pub struct Udp;

/// The sink's parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SinkParams {
    pub threads: u32,
    pub reuseport: bool,
    pub rcvbuf: Option<u32>,
}

impl Engine for Udp {
    fn server(&self) -> &'static str {
        "udp-sink"
    }
    fn client(&self) -> &'static str {
        "udp-flood"
    }
    fn metric(&self) -> &'static str {
        "packets/s"
    }
    fn check_params(&self, params: &Params) -> Result<(), String> {
        typed::<SinkParams>(params).map(|_| ())
    }
    fn threads(&self, params: &Params) -> u32 {
        typed::<SinkParams>(params).map_or(1, |p| p.threads)
    }
    fn open(&self, params: &Params, at: &Placement) -> anyhow::Result<Box<dyn Server>> {
        let p: SinkParams = typed(params).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut c = SinkConfig::new(at.bind);
        c.threads = p.threads;
        c.reuseport = p.reuseport;
        c.rcvbuf = p.rcvbuf;
        c.pin = at.pin.clone();
        c.duration = at.duration;
        c.netns = at.netns.clone();
        Ok(Box::new(open_sink(c)?))
    }
    fn answers(&self) -> bool {
        false
    }
    fn summary(&self, v: &Value) -> String {
        format!(
            "received {} packets ({:.0} pps), {} lost in sequence, {} dropped for a full buffer (RcvbufErrors)",
            num(v, "/packets"),
            num(v, "/pps"),
            num(v, "/sequence/lost"),
            num(v, "/kernel/udp_rcvbuf_errors")
        )
    }
    fn judged_by_receiver(&self) -> bool {
        true
    }
    fn received(&self, report: &Value) -> Option<(f64, u64)> {
        let pps = report["pps"].as_f64()?;
        Some((pps, report["packets"].as_u64().unwrap_or(0)))
    }
    fn linger(&self) -> Duration {
        LINGER
    }
}

/// A number of a report, 0 where it has none.
pub(crate) fn num(v: &Value, path: &str) -> f64 {
    v.pointer(path).and_then(Value::as_f64).unwrap_or(0.0)
}

impl Server for Sink {
    fn local_addr(&self) -> SocketAddr {
        Sink::local_addr(self)
    }
    fn run(self: Box<Self>, stop: &Stop) -> anyhow::Result<Served> {
        let report = Sink::run(*self, stop, &mut Quiet)?;
        Ok(Served {
            problem: report.problem(),
            report: json(&report),
        })
    }
}

impl Load for FloodConfig {
    fn engine(&self) -> &'static dyn Engine {
        &Udp
    }
    fn duration(&self) -> Duration {
        self.duration
    }
    fn set_duration(&mut self, duration: Duration) {
        self.duration = duration;
    }
    fn warmup(&self) -> Option<Duration> {
        None
    }
    fn pin(&self) -> &[u32] {
        &self.pin
    }
    fn server_params(&self, threads: u32) -> Params {
        params(&SinkParams {
            threads,
            reuseport: threads > 1,
            rcvbuf: None,
        })
    }
    fn run(
        &self,
        to: SocketAddr,
        netns: Option<String>,
        stop: &Stop,
        mark: &mut dyn FnMut(),
    ) -> anyhow::Result<Ran> {
        let mut flood = self.clone();
        flood.to = vec![to];
        flood.netns = netns;
        mark();
        let sent = run_flood(&flood, stop, &mut Quiet)?;
        Ok(Ran {
            rate: sent.pps,
            latency: None,
            sent: Some(sent.packets),
            problem: sent.problem(),
            report: json(&sent),
        })
    }
}
