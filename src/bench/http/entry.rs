//! http-server and http as a registered engine: judged by the load's
//! requests per second.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{open_server, run_load, HttpServer, LoadConfig, ServerConfig};
use crate::base::observe::Quiet;
use crate::base::stop::Stop;
use crate::bench::engine::{
    json, params, typed, Engine, Load, Marker, Params, Placement, Ran, Served, Server,
};
use crate::bench::udp::entry::num;

pub struct Http;

/// The server side's parameters in the serve protocol.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerParams {
    pub threads: u32,
}

impl Engine for Http {
    fn server(&self) -> &'static str {
        "http-server"
    }
    fn client(&self) -> &'static str {
        "http"
    }
    fn metric(&self) -> &'static str {
        "requests/s"
    }
    fn check_params(&self, params: &Params) -> Result<(), String> {
        typed::<ServerParams>(params).map(|_| ())
    }
    fn threads(&self, params: &Params) -> u32 {
        typed::<ServerParams>(params).map_or(1, |p| p.threads)
    }
    fn open(&self, params: &Params, at: &Placement) -> anyhow::Result<Box<dyn Server>> {
        let p: ServerParams = typed(params).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut c = ServerConfig::new(at.bind);
        c.threads = Some(p.threads);
        c.pin = at.pin.clone();
        c.duration = at.duration;
        c.netns = at.netns.clone();
        c.peer = at.peer;
        Ok(Box::new(open_server(c)?))
    }
    fn summary(&self, v: &Value) -> String {
        format!(
            "answered {} requests ({:.0}/s) on {} connections",
            num(v, "/requests"),
            num(v, "/requests_per_s"),
            num(v, "/connections")
        )
    }
}

impl Server for HttpServer {
    fn local_addr(&self) -> SocketAddr {
        HttpServer::local_addr(self)
    }
    fn run(self: Box<Self>, stop: &Stop) -> anyhow::Result<Served> {
        let report = HttpServer::run(*self, stop, &mut Quiet)?;
        Ok(Served {
            problem: report.problem(),
            report: json(&report),
        })
    }
}

impl Load for LoadConfig {
    fn engine(&self) -> &'static dyn Engine {
        &Http
    }
    fn duration(&self) -> Duration {
        self.duration
    }
    fn set_duration(&mut self, duration: Duration) {
        self.duration = duration;
    }
    fn warmup(&self) -> Option<Duration> {
        Some(self.warmup)
    }
    fn set_warmup(&mut self, warmup: Duration) {
        self.warmup = warmup;
    }
    fn pin(&self) -> &[u32] {
        &self.pin
    }
    fn server_params(&self, threads: u32) -> Params {
        params(&ServerParams { threads })
    }
    /// The load against the server at `to`, the line's path kept.
    fn run(
        &self,
        to: SocketAddr,
        netns: Option<String>,
        stop: &Stop,
        mark: &mut dyn FnMut(),
    ) -> anyhow::Result<Ran> {
        let mut load = self.clone();
        load.url = super::url::parse(&format!("http://{to}{}", self.url.path))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        load.netns = netns;
        let report = run_load(&load, stop, &mut Marker::new(mark))?;
        Ok(Ran {
            rate: report.requests_per_s,
            latency: Some(report.latency.summary.clone()),
            sent: None,
            problem: report.problem(),
            report: json(&report),
        })
    }
}
