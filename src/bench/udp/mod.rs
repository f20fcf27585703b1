//! `udp-sink` and `udp-flood`: packets per second the way the "receiving 1M
//! UDP packets per second" article measures them, with every packet
//! numbered so loss is counted and located.
//!
//! The flood stamps a [`wire::Header`] (sender id, flow, sequence) on every
//! packet; the sink keeps a [`flows::FlowTable`] per thread and reads its
//! network namespace's UDP counters and the host's softnet counters around
//! the run.
//!
//! Library use: build a [`SinkConfig`] / [`FloodConfig`], `validate()` it,
//! then `sink::open(config)?.run(&stop, &mut observer)` (the sink's address
//! is known after `open`, before any traffic) and
//! `flood::run(&config, &stop, &mut observer)`. Neither prints, exits or
//! touches signals; `render` turns their reports into text.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::bench::backend::Backend;
use crate::bench::within;

pub mod entry;
mod flood;
mod flows;
pub mod gso;
mod mmsg;
mod receive;
pub mod render;
mod sink;
mod uring_sink;
mod wire;

pub use flood::{run as run_flood, FloodReport, SendErrors};
pub use flows::SequenceSummary;
pub(crate) use flows::{summarize, FlowTable};
pub(crate) use sink::Meter;
pub use sink::{open as open_sink, KernelDelta, RcvBuf, Sink, SinkReport};
pub use wire::{HEADER_LEN, MAX_PAYLOAD};

/// Most threads an engine starts.
pub const MAX_THREADS: u32 = 1024;
/// Most packets per recvmmsg/sendmmsg call (the kernel's UIO_MAXIOV).
pub const MAX_BATCH: u32 = 1024;
/// Most connected sockets per flood thread.
pub const MAX_FLOWS: u32 = 4096;

/// One interval (a second) of a sink's or a flood's run.
pub use crate::bench::report::Interval;

/// What a sink does. Build with [`SinkConfig::new`], adjust, `validate()`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SinkConfig {
    /// Address and port to receive on (port 0: any free port).
    pub bind: SocketAddr,
    /// Receiving threads.
    pub threads: u32,
    /// One SO_REUSEPORT socket per thread (else all threads share one).
    pub reuseport: bool,
    /// Join a port another socket already holds (SO_REUSEPORT), knowingly.
    pub share_port: bool,
    /// Thread i on the i-th CPU of this list, wrapping; empty: not pinned.
    pub pin: Vec<u32>,
    /// Packets per recvmmsg call.
    pub batch: u32,
    /// Socket receive buffer to ask for (SO_RCVBUFFORCE as root).
    pub rcvbuf: Option<u32>,
    /// How long to receive; `None`: until stopped.
    #[serde(with = "crate::bench::secs::option")]
    pub duration: Option<Duration>,
    /// Receive inside this named network namespace.
    pub netns: Option<String>,
    /// UDP_GRO: take super-datagrams and split them by their segment size.
    #[serde(default)]
    pub gro: bool,
    /// The I/O engine: recvmmsg (epoll), multishot recvmsg (io_uring).
    #[serde(default)]
    pub engine: Backend,
}

impl SinkConfig {
    pub fn new(bind: SocketAddr) -> SinkConfig {
        SinkConfig {
            bind,
            threads: 1,
            reuseport: false,
            share_port: false,
            pin: Vec::new(),
            batch: 512,
            rcvbuf: None,
            duration: Some(Duration::from_secs(10)),
            netns: None,
            gro: false,
            engine: Backend::Epoll,
        }
    }

    /// Check every value once, before anything is opened.
    pub fn validate(&self) -> anyhow::Result<()> {
        within(
            "threads",
            u64::from(self.threads),
            1,
            u64::from(MAX_THREADS),
        )?;
        within("batch", u64::from(self.batch), 1, u64::from(MAX_BATCH))?;
        if let Some(bytes) = self.rcvbuf {
            within("rcvbuf", u64::from(bytes), 1, u64::from(i32::MAX as u32))?;
        }
        Ok(())
    }
}

/// What a flood sends. Build with [`FloodConfig::new`], adjust, `validate()`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloodConfig {
    /// Destinations; sockets are spread over them in turn.
    pub to: Vec<SocketAddr>,
    /// Sending threads.
    pub threads: u32,
    /// UDP payload bytes per packet (the 16-byte header included).
    pub size: usize,
    /// Packets per sendmmsg call.
    pub batch: u32,
    /// Connected sockets (source ports) per thread.
    pub flows: u32,
    /// Total packets per second, split over the threads; `None`: as fast as
    /// possible.
    pub rate: Option<u64>,
    /// Thread i on the i-th CPU of this list, wrapping; empty: not pinned.
    pub pin: Vec<u32>,
    /// How long to send.
    #[serde(with = "crate::bench::secs")]
    pub duration: Duration,
    /// Send from inside this named network namespace.
    pub netns: Option<String>,
    /// UDP_SEGMENT: packets per send, each `size` bytes with its own
    /// header; `None`: one datagram per message.
    #[serde(default)]
    pub gso: Option<u32>,
}

impl FloodConfig {
    pub fn new(to: Vec<SocketAddr>) -> FloodConfig {
        FloodConfig {
            to,
            threads: 1,
            size: 32,
            batch: 1024,
            flows: 1,
            rate: None,
            pin: Vec::new(),
            duration: Duration::from_secs(10),
            netns: None,
            gso: None,
        }
    }

    /// Check every value once, before anything is opened.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.to.is_empty() {
            anyhow::bail!("no destination: give --to ADDR:PORT");
        }
        if let Some(zero) = self.to.iter().find(|a| a.port() == 0) {
            anyhow::bail!("--to '{zero}' has port 0, which nothing can listen on; give the port the sink printed");
        }
        within(
            "threads",
            u64::from(self.threads),
            1,
            u64::from(MAX_THREADS),
        )?;
        within("batch", u64::from(self.batch), 1, u64::from(MAX_BATCH))?;
        within("flows", u64::from(self.flows), 1, u64::from(MAX_FLOWS))?;
        check_size(self.size)?;
        if let Some(segments) = self.gso {
            gso::check_segments(segments, self.size)?;
        }
        let sockets = u64::from(self.threads) * u64::from(self.flows);
        if sockets < self.to.len() as u64 {
            anyhow::bail!(
                "{} thread(s) x {} flow(s) = {sockets} socket(s) cannot reach all {} destinations; \
                 raise --flows or --threads",
                self.threads,
                self.flows,
                self.to.len()
            );
        }
        if sockets > u64::from(u16::MAX) + 1 {
            anyhow::bail!(
                "{} thread(s) x {} flow(s) = {sockets} flows is more than the header's 65536 flow \
                 ids; lower --flows",
                self.threads,
                self.flows
            );
        }
        if let Some(rate) = self.rate {
            within("rate", rate, 1, crate::bench::MAX_RATE)?;
            if rate < u64::from(self.threads) {
                anyhow::bail!(
                    "--rate '{rate}' is below --threads '{}': each thread sends at least 1 \
                     packet/s; lower --threads",
                    self.threads
                );
            }
        }
        Ok(())
    }
}

/// A packet size between the sequence header and the datagram limit.
pub fn check_size(size: usize) -> anyhow::Result<()> {
    if size < HEADER_LEN {
        anyhow::bail!(
            "--size '{size}' bytes cannot hold the {HEADER_LEN}-byte sequence header; give at least {HEADER_LEN}"
        );
    }
    if size > MAX_PAYLOAD {
        anyhow::bail!(
            "--size '{size}' bytes is more than a UDP datagram can carry ({MAX_PAYLOAD})"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("addr")
    }

    #[test]
    fn configs_are_checked_once_with_the_accepted_range() {
        assert!(SinkConfig::new(addr("127.0.0.1:0")).validate().is_ok());
        let mut sink = SinkConfig::new(addr("127.0.0.1:0"));
        sink.batch = 5000;
        let err = sink.validate().expect_err("batch");
        assert!(err.to_string().contains("'5000'") && err.to_string().contains("1 to 1024"));

        let flood = FloodConfig::new(vec![addr("127.0.0.1:9")]);
        assert!(flood.validate().is_ok());
        let mut bad = flood.clone();
        bad.size = 15;
        assert!(bad
            .validate()
            .expect_err("size")
            .to_string()
            .contains("16-byte"));
        let mut bad = flood.clone();
        bad.to = vec![addr("127.0.0.1:0")];
        assert!(bad
            .validate()
            .expect_err("port 0")
            .to_string()
            .contains("port 0"));
        let mut bad = flood.clone();
        bad.rate = Some(1);
        bad.threads = 2;
        assert!(bad
            .validate()
            .expect_err("rate")
            .to_string()
            .contains("'1'"));
        let mut bad = flood;
        bad.to = vec![addr("127.0.0.1:9"), addr("127.0.0.1:10")];
        assert!(bad
            .validate()
            .expect_err("sockets")
            .to_string()
            .contains("raise --flows"));
    }

    #[test]
    fn configs_round_trip_through_json() {
        let mut sink = SinkConfig::new(addr("127.0.0.1:9000"));
        sink.duration = None;
        sink.netns = Some("blue".to_string());
        let text = serde_json::to_string(&sink).expect("json");
        assert_eq!(
            serde_json::from_str::<SinkConfig>(&text).expect("back"),
            sink
        );
        let flood = FloodConfig::new(vec![addr("[::1]:9000")]);
        let text = serde_json::to_string(&flood).expect("json");
        assert!(text.contains("\"duration\":10.0"), "{text}");
        assert_eq!(
            serde_json::from_str::<FloodConfig>(&text).expect("back"),
            flood
        );
    }
}
