//! stream-server as a registered engine: a daemon's server side for one
//! test, its parameters on the stream's own control connection; and the
//! stream client as an experiment's load, judged by the bits per second it
//! moved in its measured part.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{open_server, ServerConfig, StreamConfig, StreamServer};
use crate::base::observe::Quiet;
use crate::base::stop::Stop;
use crate::bench::engine::{
    json, params, typed, Engine, Load, Marker, Params, Placement, Ran, Served, Server,
};
use crate::bench::udp::entry::num;

pub struct Stream;

/// The server side's parameters in the serve protocol.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerParams {}

impl Engine for Stream {
    fn server(&self) -> &'static str {
        "stream-server"
    }
    fn client(&self) -> &'static str {
        "stream"
    }
    fn metric(&self) -> &'static str {
        "bits/s"
    }
    fn check_params(&self, params: &Params) -> Result<(), String> {
        typed::<ServerParams>(params).map(|_| ())
    }
    fn threads(&self, _params: &Params) -> u32 {
        1
    }
    fn open(&self, _params: &Params, at: &Placement) -> anyhow::Result<Box<dyn Server>> {
        let mut c = ServerConfig::new(at.bind);
        c.pin = at.pin.clone();
        c.duration = at.duration;
        c.netns = at.netns.clone();
        c.peer = at.peer;
        if at.one_test {
            c.tests = Some(1);
        }
        if let Some(max_test) = at.duration {
            c.max_test = max_test;
        }
        if at.limits.max_rate.is_some() {
            c.max_rate = at.limits.max_rate;
        }
        c.tls = at.tls.clone();
        Ok(Box::new(open_server(c)?))
    }
    fn summary(&self, v: &Value) -> String {
        format!(
            "{} bytes in {:.2} s ({:.2} Gbit/s)",
            num(v, "/tests/0/bytes"),
            num(v, "/tests/0/seconds"),
            num(v, "/tests/0/bits_per_second") / 1e9
        )
    }
}

impl Server for StreamServer {
    fn local_addr(&self) -> SocketAddr {
        StreamServer::local_addr(self)
    }
    fn run(self: Box<Self>, stop: &Stop) -> anyhow::Result<Served> {
        let report = StreamServer::run(*self, stop, &mut Quiet)?;
        Ok(Served {
            problem: None,
            report: json(&report),
        })
    }
}

impl Load for StreamConfig {
    fn engine(&self) -> &'static dyn Engine {
        &Stream
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
    fn server_params(&self, _threads: u32) -> Params {
        params(&ServerParams {})
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
        let report = super::client::run(&client, stop, &mut Marker::new(mark))?;
        Ok(Ran {
            // The measured part's rate (the receiver's count spans the
            // warm-up too).
            rate: report.end.sum_sent.bits_per_second,
            latency: None,
            sent: None,
            problem: report.problem(),
            report: json(&report),
        })
    }
}
