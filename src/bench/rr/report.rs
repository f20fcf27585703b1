//! The rr client's report: transactions per second, latency percentiles,
//! errors and the CPU time of the client and the host over the run.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::measure::Interval;
use super::Proto;
use crate::bench::busy_poll::BusyPollReport;
use crate::bench::cpu::CpuUsage;
use crate::bench::latency::LatencySummary;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    pub thread: usize,
    pub cpu: Option<u32>,
    pub instances: usize,
    pub transactions: u64,
    pub transactions_per_sec: f64,
}

/// The client threads' CPU time over the measured run (getrusage per
/// thread: other engines in the same process do not count).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientCpu {
    pub user_s: f64,
    pub sys_s: f64,
    /// (user + sys) / run time: 100 = one CPU kept busy.
    pub percent_of_one_cpu: f64,
    /// The same over every online CPU: the share of the host's capacity.
    pub percent_of_all_cpus: f64,
    pub online_cpus: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrReport {
    pub command: String,
    pub to: SocketAddr,
    /// The network namespace it ran in; `null`: nettune's own.
    pub netns: Option<String>,
    pub proto: Proto,
    pub request_bytes: usize,
    pub reply_bytes: usize,
    pub instances: usize,
    pub threads: usize,
    /// `--pin` CPUs (thread i on the i-th, wrapping); empty when unpinned.
    pub pin: Vec<u32>,
    pub warmup_s: f64,
    /// The busy polling set on sockets and epoll instances; null: off.
    #[serde(default)]
    pub busy_poll: Option<BusyPollReport>,
    /// `duration`, `interrupted` (the stop token: Ctrl-C, SIGTERM, the
    /// caller) or `workers` (every connection was closed).
    pub ended: String,
    /// The measured time (warm-up excluded).
    pub duration_s: f64,
    pub transactions: u64,
    pub transactions_per_sec: f64,
    /// From the request's first send to its reply, microseconds.
    pub latency: LatencySummary,
    /// UDP: requests sent again after a timeout.
    pub resends: u64,
    /// UDP: replies to an already answered request (ignored).
    pub late_replies: u64,
    /// UDP: datagrams of the wrong size (ignored).
    pub bad_replies: u64,
    /// Send/receive errors, and TCP connections closed during the run.
    pub errors: u64,
    pub closed_connections: u64,
    pub first_error: Option<String>,
    pub client_cpu: ClientCpu,
    /// The host's per-CPU time over the measured run (mpstat -P ALL
    /// layout); null if /proc/stat could not be read.
    pub host_cpu: Option<CpuUsage>,
    pub per_thread: Vec<ThreadReport>,
    pub intervals: Vec<Interval>,
}

impl RrReport {
    /// Why this run is not a measurement, if it is not: no transaction
    /// completed, or connections were lost during it.
    pub fn problem(&self) -> Option<String> {
        if self.transactions == 0 {
            return Some(format!(
                "rr measured nothing: --to '{}': no transaction completed in {:.1} s ({}); is the \
                 server overloaded or gone?",
                self.to,
                self.duration_s,
                self.first_error.as_deref().unwrap_or("no error seen")
            ));
        }
        if self.closed_connections > 0 {
            return Some(format!(
                "rr: --to '{}': {} of {} connections were closed during the run (first: {}); the \
                 figures cover the rest",
                self.to,
                self.closed_connections,
                self.instances,
                self.first_error.as_deref().unwrap_or("closed")
            ));
        }
        None
    }
}
