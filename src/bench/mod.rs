//! Benchmarks: load generators and servers. One module per engine; shared
//! pieces (pinning, stop, reporting) once.

pub mod addr;
pub mod cpu;
pub mod event;
pub mod http;
pub mod latency;
pub mod pin;
pub mod report;
pub mod rr;
pub mod stop;
pub mod udp;

use crate::error::Status;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum BenchCommand {
    /// Receive UDP packets with recvmmsg and count them, their loss and
    /// reordering, and the kernel's drop counters (start it first).
    UdpSink(udp::SinkArgs),
    /// Send numbered UDP packets with sendmmsg, as fast as possible or at
    /// --rate, from --flows source ports per thread.
    UdpFlood(udp::FloodArgs),
    /// Answer `bench rr` request/response transactions over TCP and UDP on
    /// one port (prints the bound ADDR:PORT first).
    RrServer(rr::ServerArgs),
    /// netperf-style TCP_RR / UDP_RR: transactions/s and latency
    /// percentiles of many concurrent request/response loops, with the
    /// host's per-CPU time over the run.
    Rr(rr::ClientArgs),
    /// Serve TechEmpower's /plaintext and /json over HTTP/1.1 keep-alive:
    /// one pinned event loop per CPU, SO_REUSEPORT listeners in CPU order,
    /// CBPF locality.
    HttpServer(http::ServerArgs),
    /// Load an HTTP server wrk style (closed loop, or open loop at --rate
    /// with latency corrected for coordinated omission).
    Http(http::LoadArgs),
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<Status> {
    match cmd {
        BenchCommand::UdpSink(args) => udp::run_sink(&args),
        BenchCommand::UdpFlood(args) => udp::run_flood(&args),
        BenchCommand::RrServer(args) => rr::run_server(&args),
        BenchCommand::Rr(args) => rr::run_client(&args),
        BenchCommand::HttpServer(args) => http::run_server(&args),
        BenchCommand::Http(args) => http::run_load(&args),
    }
}
