//! What `bench stream-server` reports: its side of every test (the part
//! each client gets back over the test's control connection), the
//! connections it refused, and its own run.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::pump::ZeroCopyStats;
use super::sock::{Buffers, Pacer, TcpInfo};
use crate::bench::cpu::CpuUsage;

/// One stream of a test, as this server saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSide {
    pub stream: u32,
    pub cpu: Option<u32>,
    /// Bytes received (this side receives) or accepted by the kernel (this
    /// side sends), over the connection's life.
    pub bytes: u64,
    /// The receiver read the sender's FIN: `bytes` is everything sent.
    pub eof: bool,
    /// From the first byte to the last.
    pub seconds: f64,
    pub bits_per_second: f64,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub buffers: Buffers,
    /// TCP_INFO at the end (the sender's view when this side sends:
    /// retransmits, cwnd, RTT, pacing).
    pub tcp: Option<TcpInfo>,
    pub zerocopy: Option<ZeroCopyStats>,
    pub error: Option<String>,
}

/// One test, as this server saw it: what the client gets back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestReport {
    /// The random test id, a string in JSON (base::json_id).
    #[serde(with = "crate::base::json_id")]
    pub test: u64,
    /// The client's control connection.
    pub peer: SocketAddr,
    /// `receiver` or `sender`: this server's part.
    pub role: String,
    /// `complete`, `client-gone`, `deadline`, `interrupted` or `failed`.
    pub ended: String,
    pub error: Option<String>,
    pub size: usize,
    pub congestion: String,
    /// Sending: SO_MAX_PACING_RATE per stream, bits per second (the
    /// client's --pace, bounded by the server's rate limit).
    pub pace_bits_per_second: Option<u64>,
    pub pacer: Option<Pacer>,
    pub bytes: u64,
    /// The longest stream's first-to-last-byte time.
    pub seconds: f64,
    pub bits_per_second: f64,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// The server host's per-CPU time over the test.
    pub host_cpu: Option<CpuUsage>,
    pub streams: Vec<StreamSide>,
}

/// Connections the server closed without a test, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusals {
    /// From an address other than the one peer allowed.
    pub foreign_peer: u64,
    /// No header in time, or a header that is not nettune's.
    pub bad_header: u64,
    /// A control connection whose parameters were missing, malformed or
    /// out of bounds.
    pub bad_params: u64,
    /// A data connection for no waiting test (unknown id, wrong index or
    /// peer).
    pub unknown_stream: u64,
    /// Too many connections being greeted at once.
    pub busy: u64,
    /// A control connection whose TLS failed, or that asked for TLS from
    /// a server without it (or the reverse).
    #[serde(default)]
    pub tls: u64,
}

/// One second of the server's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInterval {
    pub second: u64,
    /// Bytes received and sent in that second, all tests.
    pub bytes: u64,
    pub bits_per_second: f64,
    /// Tests running at its end.
    pub tests: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    pub command: String,
    pub bind: SocketAddr,
    pub netns: Option<String>,
    /// `duration`, `interrupted` (the stop token) or `workers` (the test
    /// limit was reached).
    pub ended: String,
    pub duration_s: f64,
    pub tests: Vec<TestReport>,
    pub refused: Refusals,
    pub intervals: Vec<ServerInterval>,
}

impl ServerReport {
    /// Why this run measured nothing, if it did not: no test completed.
    pub fn problem(&self) -> Option<String> {
        (!self.tests.iter().any(|t| t.ended == "complete")).then(|| {
            format!(
                "stream-server measured nothing: no test completed at {} in {:.1} s; did a \
                 client run `nettune bench stream --to {}`?",
                self.bind, self.duration_s, self.bind
            )
        })
    }
}
