//! rr-server and rr as a registered engine: judged by the client's
//! transactions per second.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{open_server, run_client, ClientConfig, RrServer, ServerConfig};
use crate::base::observe::Quiet;
use crate::base::stop::Stop;
use crate::bench::engine::{
    json, params, typed, Engine, Load, Marker, Params, Placement, Ran, Served, Server, ServerLimits,
};
use crate::bench::udp::entry::num;

pub struct Rr;

/// The server side's parameters: replies of at most `max_reply` bytes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerParams {
    pub threads: u32,
    pub max_reply: u32,
}

impl Engine for Rr {
    fn server(&self) -> &'static str {
        "rr-server"
    }
    fn client(&self) -> &'static str {
        "rr"
    }
    fn metric(&self) -> &'static str {
        "transactions/s"
    }
    fn check_params(&self, params: &Params) -> Result<(), String> {
        typed::<ServerParams>(params).map(|_| ())
    }
    fn threads(&self, params: &Params) -> u32 {
        typed::<ServerParams>(params).map_or(1, |p| p.threads)
    }
    fn within(&self, params: &Params, limits: &ServerLimits) -> anyhow::Result<()> {
        let p: ServerParams = typed(params).map_err(|e| anyhow::anyhow!("{e}"))?;
        if p.max_reply > limits.max_reply {
            anyhow::bail!(
                "rr replies of {} bytes are more than this daemon sends ({}, --max-reply)",
                p.max_reply,
                limits.max_reply
            );
        }
        Ok(())
    }
    fn open(&self, params: &Params, at: &Placement) -> anyhow::Result<Box<dyn Server>> {
        let p: ServerParams = typed(params).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut c = ServerConfig::new(at.bind);
        c.threads = p.threads;
        c.pin = at.pin.clone();
        c.duration = at.duration;
        c.netns = at.netns.clone();
        c.peer = at.peer;
        // Only a daemon bounds the replies: a server side of its own
        // answers whatever its client asks.
        if at.peer.is_some() {
            c.max_reply = Some(p.max_reply);
        }
        Ok(Box::new(open_server(c)?))
    }
    fn summary(&self, v: &Value) -> String {
        format!(
            "answered {} TCP and {} UDP transactions",
            num(v, "/total/tcp_transactions"),
            num(v, "/total/udp_transactions")
        )
    }
}

impl Server for RrServer {
    fn local_addr(&self) -> SocketAddr {
        RrServer::local_addr(self)
    }
    fn run(self: Box<Self>, stop: &Stop) -> anyhow::Result<Served> {
        let report = RrServer::run(*self, stop, &mut Quiet)?;
        Ok(Served {
            problem: report.problem(),
            report: json(&report),
        })
    }
}

impl Load for ClientConfig {
    fn engine(&self) -> &'static dyn Engine {
        &Rr
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
        params(&ServerParams {
            threads,
            max_reply: u32::try_from(self.size.reply).unwrap_or(u32::MAX),
        })
    }
    fn run(
        &self,
        to: SocketAddr,
        netns: Option<String>,
        stop: &Stop,
        mark: &mut dyn FnMut(),
    ) -> anyhow::Result<Ran> {
        let mut client = self.clone();
        client.to = to;
        client.netns = netns;
        let report = run_client(&client, stop, &mut Marker::new(mark))?;
        Ok(Ran {
            rate: report.transactions_per_sec,
            latency: Some(report.latency.clone()),
            sent: None,
            problem: report.problem(),
            report: json(&report),
        })
    }
}
