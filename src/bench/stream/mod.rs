//! `stream-server` and `stream`: bulk TCP throughput the way iperf3 and
//! nuttcp measure it, and the ESnet host-tuning pages reason about it
//! (buffers from bandwidth x RTT, pacing, congestion control).
//!
//! A test is one control connection and `streams` data connections, each
//! stream on a thread of its own (pinned when asked) on both sides. The
//! sender ends every stream with a FIN and the receiver reads to it, so
//! the receiver's byte count is exact, and the server sends it back: the
//! client's report has both sides of every stream. [`wire`] documents the
//! protocol.
//!
//! Library use: `server::open(ServerConfig)?` binds (its address is known
//! before any client starts) and `.run(&stop, &mut observer)` serves;
//! `client::run(&StreamConfig, &stop, &mut observer)` measures. Neither
//! prints, exits or touches signals; `render` turns their reports into
//! text.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bench::within;

pub mod client;
pub mod entry;
mod pump;
pub mod render;
pub mod report;
pub mod server;
pub mod server_report;
mod sock;
pub mod wire;

pub use client::run as run_client;
pub use pump::ZeroCopyStats;
pub use report::{Interval, StreamReport};
pub use server::{open as open_server, StreamServer};
pub use server_report::{ServerInterval, ServerReport, TestReport};
pub use sock::{check_cc, Buffers, Pacer, TcpInfo};

/// Most streams in one test.
pub const MAX_STREAMS: u32 = 128;
/// Largest write or read: 64 MiB.
pub const MAX_SIZE: usize = 64 << 20;
/// Bytes per write and read unless `--size` says otherwise. iperf3 writes
/// 128 KiB; 1 MiB halves the system calls per byte again, which on
/// loopback and veth (where the copies are the whole cost) is worth 10-40%.
pub const DEFAULT_SIZE: usize = 1 << 20;
/// The longest test a server accepts unless told otherwise: a day.
pub const MAX_TEST: Duration = Duration::from_secs(86_400);

/// How a sender hands its bytes to the kernel, instead of copying them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ZeroCopy {
    /// send(MSG_ZEROCOPY) with the completions reaped from the socket's
    /// error queue (Linux 4.14+). Pays off for writes of 10 KB and more
    /// leaving through a NIC; a local receiver (loopback, veth) gets a copy
    /// anyway.
    Msg,
    /// sendfile(2) from an in-memory file: pages handed to the socket by
    /// reference, as iperf3 -Z does.
    Sendfile,
}

impl ZeroCopy {
    pub fn name(self) -> &'static str {
        match self {
            ZeroCopy::Msg => "msg_zerocopy",
            ZeroCopy::Sendfile => "sendfile",
        }
    }
}

/// What a `bench stream` client does. Build with [`StreamConfig::new`],
/// adjust, `validate()`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamConfig {
    /// The stream-server's address.
    pub to: SocketAddr,
    /// Parallel TCP connections (iperf3 -P), each on its own thread.
    pub streams: u32,
    /// The server sends and this side receives (iperf3 -R).
    pub reverse: bool,
    /// The measured part.
    #[serde(with = "crate::bench::secs")]
    pub duration: Duration,
    /// Traffic before the measured part (iperf3 --omit).
    #[serde(with = "crate::bench::secs")]
    pub warmup: Duration,
    /// Bytes per write (sender) and read (receiver).
    pub size: usize,
    /// SO_SNDBUF and SO_RCVBUF on both sides; `None`: autotuning.
    pub window: Option<u32>,
    /// SO_MAX_PACING_RATE per stream, bits per second.
    pub pace: Option<u64>,
    /// TCP_CONGESTION on both sides' sockets.
    pub cc: Option<String>,
    /// How the sender hands bytes to the kernel; `None`: plain copies.
    pub zerocopy: Option<ZeroCopy>,
    /// Stream i's thread on the i-th CPU of this list, wrapping; empty: not
    /// pinned.
    pub pin: Vec<u32>,
    /// Run inside this named network namespace.
    pub netns: Option<String>,
    /// TLS 1.3 on the control connection (the data connections stay
    /// plain); `None`: plain text.
    #[serde(skip)]
    pub tls: Option<crate::base::tls::ClientTls>,
}

impl StreamConfig {
    pub fn new(to: SocketAddr) -> StreamConfig {
        StreamConfig {
            to,
            streams: 1,
            reverse: false,
            duration: Duration::from_secs(10),
            warmup: Duration::ZERO,
            size: DEFAULT_SIZE,
            window: None,
            pace: None,
            cc: None,
            zerocopy: None,
            pin: Vec::new(),
            netns: None,
            tls: None,
        }
    }

    /// Check every value once, before anything is opened (the congestion
    /// control against this kernel's list).
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.to.port() == 0 {
            anyhow::bail!(
                "--to '{}' has port 0, which nothing can listen on; give the port the server printed",
                self.to
            );
        }
        within(
            "streams",
            u64::from(self.streams),
            1,
            u64::from(MAX_STREAMS),
        )?;
        check_size(self.size)?;
        if let Some(window) = self.window {
            within("window", u64::from(window), 2048, i32::MAX as u64 / 2)?;
        }
        if let Some(pace) = self.pace {
            // SO_MAX_PACING_RATE counts bytes per second.
            within("pace", pace, 8, u64::MAX / 2)?;
        }
        if let Some(cc) = &self.cc {
            check_cc(cc)?;
        }
        if self.duration + self.warmup > MAX_TEST {
            anyhow::bail!("--duration plus --warmup is longer than a day; give less");
        }
        Ok(())
    }
}

/// A write or read size between 1 byte and [`MAX_SIZE`].
pub fn check_size(size: usize) -> anyhow::Result<()> {
    within("size", size as u64, 1, MAX_SIZE as u64)
}

/// What a stream-server does. Build with [`ServerConfig::new`], adjust.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// Address and port to listen on (port 0: any free port).
    pub bind: SocketAddr,
    /// Stream i of every test on the i-th CPU of this list, wrapping;
    /// empty: not pinned.
    pub pin: Vec<u32>,
    /// How long to serve; `None`: until stopped.
    #[serde(with = "crate::bench::secs::option")]
    pub duration: Option<Duration>,
    /// Serve inside this named network namespace.
    pub netns: Option<String>,
    /// End after this many tests (iperf3 -1 is one); `None`: no limit.
    pub tests: Option<u32>,
    /// Accept connections from this address only (others are closed at
    /// once and counted): a server started for one client.
    pub peer: Option<IpAddr>,
    /// The longest test accepted (warm-up and measured part).
    #[serde(with = "crate::bench::secs")]
    pub max_test: Duration,
    /// With `reverse`, the most this server sends per test, bits per second
    /// (split over the streams, enforced by pacing); `None`: no bound.
    pub max_rate: Option<u64>,
    /// TLS 1.3 on every control connection (a plain one is refused); data
    /// connections stay plain. `None`: plain text only.
    #[serde(skip)]
    pub tls: Option<crate::base::tls::ServerTls>,
}

impl ServerConfig {
    pub fn new(bind: SocketAddr) -> ServerConfig {
        ServerConfig {
            bind,
            pin: Vec::new(),
            duration: None,
            netns: None,
            tests: None,
            peer: None,
            max_test: MAX_TEST,
            max_rate: None,
            tls: None,
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.tests == Some(0) {
            anyhow::bail!("tests '0': give 1 or more, or none for no limit");
        }
        if self.max_test.is_zero() {
            anyhow::bail!("the longest test allowed is zero");
        }
        if let Some(rate) = self.max_rate {
            within("max-rate", rate, 8, u64::MAX / 2)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_checked_and_round_trip_through_json() {
        let to: SocketAddr = "127.0.0.1:5201".parse().expect("addr");
        let mut config = StreamConfig::new(to);
        config.pace = Some(1_000_000_000);
        config.zerocopy = Some(ZeroCopy::Msg);
        assert!(config.validate().is_ok());
        let text = serde_json::to_string(&config).expect("json");
        assert!(text.contains("\"zerocopy\":\"msg\""), "{text}");
        assert_eq!(
            serde_json::from_str::<StreamConfig>(&text).expect("back"),
            config
        );
        let mut bad = config.clone();
        bad.streams = 0;
        assert!(bad
            .validate()
            .expect_err("0")
            .to_string()
            .contains("1 to 128"));
        let mut bad = config.clone();
        bad.size = MAX_SIZE + 1;
        assert!(bad.validate().is_err());
        let mut bad = config;
        bad.cc = Some("no-such-algorithm".into());
        let err = bad.validate().expect_err("cc").to_string();
        assert!(
            err.contains("'no-such-algorithm'") && err.contains("available"),
            "{err}"
        );

        let server = ServerConfig::new(to);
        let text = serde_json::to_string(&server).expect("json");
        assert_eq!(
            serde_json::from_str::<ServerConfig>(&text).expect("back"),
            server
        );
    }
}
