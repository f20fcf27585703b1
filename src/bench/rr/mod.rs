//! `rr-server` and `rr`: netperf-style TCP_RR and UDP_RR, with many
//! concurrent instances in one process, HDR latency percentiles, and the
//! host's per-CPU time over the run.
//!
//! The server answers TCP and UDP on one port, one event loop per thread
//! with its own SO_REUSEPORT sockets. The client runs `instances`
//! closed-loop request/response exchanges over `threads` event loops.
//! [`wire`] documents the protocol.
//!
//! Library use: `server::open(ServerConfig)?` binds (its address is known
//! before any client starts) and `.run(&stop, &mut observer)` serves;
//! `client::run(&ClientConfig, &stop, &mut observer)` measures. Neither
//! prints, exits or touches signals; `output` renders their reports.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::bench::backend::Backend;
use crate::bench::busy_poll::BusyPoll;
use crate::bench::within;

pub mod client;
mod conn;
mod engine;
pub mod entry;
pub mod flows;
mod measure;
pub mod output;
pub mod report;
pub mod server;
mod server_thread;
mod uring_server;
pub mod wire;

pub use client::run as run_client;
pub use measure::Interval;
pub use report::RrReport;
pub use server::{open as open_server, RrServer, ServerReport};
pub use wire::{MAX_TCP_SIZE, MAX_UDP_SIZE};

/// Most threads an engine starts.
pub const MAX_THREADS: u32 = 1024;
/// Most concurrent instances of one client.
pub const MAX_INSTANCES: u32 = 100_000;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

/// Request and reply sizes in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sizes {
    pub request: usize,
    pub reply: usize,
}

impl Sizes {
    pub fn check_for(self, proto: Proto) -> anyhow::Result<()> {
        let largest = self.request.max(self.reply);
        if self.request == 0 || self.reply == 0 || largest > wire::MAX_TCP_SIZE {
            anyhow::bail!(
                "--size '{},{}': sizes go from 1 to {} bytes",
                self.request,
                self.reply,
                wire::MAX_TCP_SIZE
            );
        }
        if proto == Proto::Udp && largest > wire::MAX_UDP_SIZE {
            anyhow::bail!(
                "--size '{},{}': {largest} bytes is more than a UDP datagram can carry ({}); \
                 use --proto tcp for larger transactions",
                self.request,
                self.reply,
                wire::MAX_UDP_SIZE
            );
        }
        Ok(())
    }
}

/// What an rr-server does. Build with [`ServerConfig::new`], adjust.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// Address and port to answer on, TCP and UDP alike (port 0: any).
    pub bind: SocketAddr,
    /// Event-loop threads, each with its own SO_REUSEPORT sockets.
    pub threads: u32,
    /// Join a port another program already serves, knowingly.
    pub share_port: bool,
    /// Thread i on the i-th CPU of this list, wrapping; empty: not pinned.
    pub pin: Vec<u32>,
    /// How long to serve; `None`: until stopped.
    #[serde(with = "crate::bench::secs::option")]
    pub duration: Option<Duration>,
    /// Serve inside this named network namespace.
    pub netns: Option<String>,
    /// Testing aid: each thread drops every N-th UDP request it receives.
    pub drop_every: Option<u64>,
    /// Answer this address only: its datagrams are answered, others are
    /// ignored, connections from others closed (a server started for one
    /// client, as `nettune serve` does: never a reflector).
    #[serde(default)]
    pub peer: Option<IpAddr>,
    /// The largest reply a hello may ask for; a larger one is refused (a
    /// bound on what a small request can make the server send).
    #[serde(default)]
    pub max_reply: Option<u32>,
    /// Busy polling on every socket and each thread's epoll instance
    /// (in JSON: `busy_poll`, `prefer_busy_poll`, `busy_poll_budget`).
    #[serde(flatten)]
    pub busy: BusyPoll,
    /// The I/O engine of every server thread.
    #[serde(default)]
    pub engine: Backend,
}

impl ServerConfig {
    pub fn new(bind: SocketAddr) -> ServerConfig {
        ServerConfig {
            bind,
            threads: 1,
            share_port: false,
            pin: Vec::new(),
            duration: None,
            netns: None,
            drop_every: None,
            peer: None,
            max_reply: None,
            busy: BusyPoll::default(),
            engine: Backend::Epoll,
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        within(
            "threads",
            u64::from(self.threads),
            1,
            u64::from(MAX_THREADS),
        )?;
        if self.drop_every == Some(0) {
            anyhow::bail!("--drop-every '0': give 1 or more");
        }
        self.busy.validate("--bind", self.bind)
    }
}

/// What an rr client does. Build with [`ClientConfig::new`], adjust.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientConfig {
    /// The rr-server's address.
    pub to: SocketAddr,
    /// TCP_RR (one connection per instance) or UDP_RR (one source port per
    /// instance).
    pub proto: Proto,
    pub size: Sizes,
    /// Concurrent request/response loops.
    pub instances: u32,
    /// Event-loop threads the instances are spread over (at most one per
    /// instance is used).
    pub threads: u32,
    /// The measured part.
    #[serde(with = "crate::bench::secs")]
    pub duration: Duration,
    /// Traffic before the measured part (it also waits for the first
    /// transaction, up to 2 s).
    #[serde(with = "crate::bench::secs")]
    pub warmup: Duration,
    /// Thread i on the i-th CPU of this list, wrapping; empty: not pinned.
    pub pin: Vec<u32>,
    /// UDP: the least wait before an unanswered request is sent again.
    #[serde(with = "crate::bench::secs")]
    pub resend_after: Duration,
    /// Run inside this named network namespace.
    pub netns: Option<String>,
    /// Busy polling on every socket and each thread's epoll instance
    /// (in JSON: `busy_poll`, `prefer_busy_poll`, `busy_poll_budget`).
    #[serde(flatten)]
    pub busy: BusyPoll,
}

impl ClientConfig {
    pub fn new(to: SocketAddr, proto: Proto) -> ClientConfig {
        ClientConfig {
            to,
            proto,
            size: Sizes {
                request: 1,
                reply: 1,
            },
            instances: 1,
            threads: 1,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            pin: Vec::new(),
            resend_after: Duration::from_millis(10),
            netns: None,
            busy: BusyPoll::default(),
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.to.port() == 0 {
            anyhow::bail!(
                "--to '{}' has port 0, which nothing can listen on; give the port the server printed",
                self.to
            );
        }
        self.size.check_for(self.proto)?;
        within(
            "instances",
            u64::from(self.instances),
            1,
            u64::from(MAX_INSTANCES),
        )?;
        within(
            "threads",
            u64::from(self.threads),
            1,
            u64::from(MAX_THREADS),
        )?;
        let ms = u64::try_from(self.resend_after.as_millis()).unwrap_or(u64::MAX);
        within("resend-after", ms, 1, 10_000)?;
        self.busy.validate("--to", self.to)
    }

    /// Threads actually used: never more than the instances.
    pub fn threads_used(&self) -> usize {
        (self.threads as usize).min(self.instances as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_sizes_stop_at_the_datagram_limit() {
        let big = Sizes {
            request: 1,
            reply: 65_508,
        };
        assert!(big.check_for(Proto::Tcp).is_ok());
        let err = big.check_for(Proto::Udp).expect_err("too big for udp");
        assert!(err.to_string().contains("'1,65508'"), "{err}");
        let zero = Sizes {
            request: 0,
            reply: 1,
        };
        assert!(zero.check_for(Proto::Tcp).is_err());
    }

    #[test]
    fn configs_are_checked_and_round_trip_through_json() {
        let to: SocketAddr = "127.0.0.1:9000".parse().expect("addr");
        let mut client = ClientConfig::new(to, Proto::Udp);
        assert!(client.validate().is_ok());
        let text = serde_json::to_string(&client).expect("json");
        assert_eq!(
            serde_json::from_str::<ClientConfig>(&text).expect("back"),
            client
        );
        client.instances = 0;
        assert!(client
            .validate()
            .expect_err("0")
            .to_string()
            .contains("1 to 100000"));
        client.instances = 1;
        client.to = "127.0.0.1:0".parse().expect("addr");
        assert!(client
            .validate()
            .expect_err("port 0")
            .to_string()
            .contains("port 0"));
        let server = ServerConfig::new(to);
        let text = serde_json::to_string(&server).expect("json");
        assert_eq!(
            serde_json::from_str::<ServerConfig>(&text).expect("back"),
            server
        );
    }
}
