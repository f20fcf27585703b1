//! `bench http-server` and `bench http`: the measuring half of the
//! "Linux Kernel vs DPDK: HTTP Performance Showdown" article. A fixed-response
//! HTTP/1.1 server built the way the article tuned it (one pinned event loop
//! per CPU, SO_REUSEPORT listeners in CPU order, CBPF locality, microsecond
//! epoll timeouts, recv/send), and a wrk-style load generator that reports
//! the tail truthfully (per-thread HDR histograms, an open loop corrected
//! for coordinated omission).
//!
//! The HTTP rules (`session` for the server, `response` for the client) only
//! turn bytes into bytes; the engines (`server`, `load`) move them.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::http::is_token;
pub use crate::bench::backend::Backend;
use crate::bench::busy_poll::BusyPoll;
use crate::bench::within;

pub mod entry;
mod event_loop;
mod load;
pub mod output;
pub mod response;
pub mod server;
pub mod session;
mod uring_loop;
pub mod url;
mod worker;

pub use load::{run as run_load, LoadInterval};
pub use output::LoadReport;
pub use server::{open as open_server, HttpServer, ServerInterval, ServerReport};
pub use url::Url;

/// How the server steers a new connection to a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Locality {
    /// A classic BPF program picks the listener of the CPU that received the
    /// connection (SO_ATTACH_REUSEPORT_CBPF).
    Cbpf,
    /// The kernel's SO_REUSEPORT hash of the 4-tuple.
    None,
}

/// The server threads' scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sched {
    /// SCHED_BATCH: woken server threads do not preempt the running thread,
    /// so work arrives and is answered in larger batches.
    Batch,
    /// SCHED_OTHER, the default policy.
    Normal,
}

/// What an http-server does. Build with [`ServerConfig::new`], adjust.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// Address and port to listen on (port 0: any free port).
    pub bind: SocketAddr,
    /// Event-loop threads, each with its own SO_REUSEPORT listener; `None`:
    /// one per pinned CPU, else one per CPU this process may use.
    pub threads: Option<u32>,
    /// Thread i on the i-th CPU of this list, wrapping; the listeners are
    /// created in this order. Empty: not pinned.
    pub pin: Vec<u32>,
    /// Connection steering; `None`: cbpf when pinned, else none.
    pub locality: Option<Locality>,
    /// SO_BUSY_POLL microseconds on the listeners and connections, and
    /// the same on each thread's epoll instance (EPIOCSPARAMS, Linux 6.9).
    pub busy_poll: Option<u32>,
    /// SO_PREFER_BUSY_POLL (and the epoll instances' prefer_busy_poll).
    #[serde(default)]
    pub prefer_busy_poll: bool,
    /// SO_BUSY_POLL_BUDGET (and the epoll instances' busy_poll_budget).
    #[serde(default)]
    pub busy_poll_budget: Option<u16>,
    /// epoll timeout in microseconds while traffic flows; `None`: 100 when
    /// busy polling can engage, else 10000.
    pub wait_us: Option<u32>,
    pub sched: Sched,
    /// Close connections idle this long.
    #[serde(with = "crate::bench::secs")]
    pub idle_timeout: Duration,
    /// How long to serve; `None`: until stopped.
    #[serde(with = "crate::bench::secs::option")]
    pub duration: Option<Duration>,
    /// Serve inside this named network namespace.
    pub netns: Option<String>,
    /// Join a port another program already serves, knowingly.
    pub share_port: bool,
    /// Serve this address only: connections from others are closed at once
    /// (a server started for one client, as `nettune serve` does).
    #[serde(default)]
    pub peer: Option<IpAddr>,
    /// The I/O engine of every server thread.
    #[serde(default)]
    pub engine: Backend,
}

impl ServerConfig {
    /// The busy polling asked for.
    pub fn busy(&self) -> BusyPoll {
        BusyPoll::new(self.busy_poll, self.prefer_busy_poll, self.busy_poll_budget)
    }

    pub fn new(bind: SocketAddr) -> ServerConfig {
        ServerConfig {
            bind,
            threads: None,
            pin: Vec::new(),
            locality: None,
            busy_poll: None,
            prefer_busy_poll: false,
            busy_poll_budget: None,
            wait_us: None,
            sched: Sched::Batch,
            idle_timeout: Duration::from_secs(60),
            duration: None,
            netns: None,
            share_port: false,
            peer: None,
            engine: Backend::Epoll,
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(n) = self.threads {
            within("threads", u64::from(n), 1, 1024)?;
        }
        self.busy().validate("--bind", self.bind)?;
        if let Some(us) = self.wait_us {
            within("wait-us", u64::from(us), 1, 1_000_000)?;
        }
        Ok(())
    }
}

/// What an http load run does. Build with [`LoadConfig::new`], adjust.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadConfig {
    /// What to request: http://HOST[:PORT]/PATH.
    pub url: Url,
    /// Threads, one event loop each.
    pub threads: u32,
    /// Keep-alive connections in all, spread evenly over the threads.
    pub connections: u32,
    /// How long statistics are collected, after the warm-up.
    #[serde(with = "crate::bench::secs")]
    pub duration: Duration,
    #[serde(with = "crate::bench::secs")]
    pub warmup: Duration,
    /// Open loop: requests per second in all; `None`: closed loop.
    pub rate: Option<u64>,
    /// Thread i on the i-th CPU of this list, wrapping; empty: not pinned.
    pub pin: Vec<u32>,
    /// Requests in flight per connection.
    pub pipeline: u32,
    pub headers: Vec<Header>,
    /// A request without its response after this long is a timeout error.
    #[serde(with = "crate::bench::secs")]
    pub timeout: Duration,
    /// Load from inside this named network namespace.
    pub netns: Option<String>,
}

impl LoadConfig {
    pub fn new(url: Url) -> LoadConfig {
        LoadConfig {
            url,
            threads: 2,
            connections: 10,
            duration: Duration::from_secs(10),
            warmup: Duration::ZERO,
            rate: None,
            pin: Vec::new(),
            pipeline: 1,
            headers: Vec::new(),
            timeout: Duration::from_secs(2),
            netns: None,
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        within("threads", u64::from(self.threads), 1, 1024)?;
        within("connections", u64::from(self.connections), 1, 1_000_000)?;
        within("pipeline", u64::from(self.pipeline), 1, 1024)?;
        if self.connections < self.threads {
            anyhow::bail!(
                "-c '{}' is less than -t '{}': every thread needs at least one connection; raise \
                 -c or lower -t",
                self.connections,
                self.threads
            );
        }
        if let Some(rate) = self.rate {
            within("rate", rate, 1, crate::bench::MAX_RATE)?;
            if rate < u64::from(self.threads) {
                anyhow::bail!(
                    "--rate '{rate}' is below -t '{}': each thread sends at least 1 request/s; \
                     raise --rate or lower -t",
                    self.threads
                );
            }
        }
        Ok(())
    }
}

/// One `-H 'Name: value'` request header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub name: String,
    pub value: String,
}

pub fn parse_header(text: &str) -> Result<Header, String> {
    let Some((name, value)) = text.split_once(':') else {
        return Err(format!("'{text}' is not a header: give 'Name: value'"));
    };
    if name.is_empty() || !name.bytes().all(is_token) {
        return Err(format!(
            "'{text}': '{name}' is not a header name (letters, digits, -, no spaces)"
        ));
    }
    let value = value.trim();
    if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(format!(
            "'{text}': the value holds a control character (CR or LF?)"
        ));
    }
    Ok(Header {
        name: name.to_string(),
        value: value.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_name_colon_value() {
        assert_eq!(
            parse_header("Host: server.tld"),
            Ok(Header {
                name: "Host".into(),
                value: "server.tld".into()
            })
        );
        assert!(parse_header("no colon")
            .expect_err("colon")
            .contains("'no colon'"));
        assert!(parse_header("Bad Name: x").is_err());
        assert!(parse_header("X-A: a\r\nX-B: b").is_err());
    }
}
