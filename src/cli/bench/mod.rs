//! `nettune bench ...`: arguments into engine configs, Ctrl-C and SIGTERM
//! into the stop token, reports into text or JSON. The engines themselves
//! (`crate::bench`) neither print nor exit.

mod busy;
mod common;
pub mod http;
mod remote;
mod rr;
mod stream;
mod udp;
mod xsk;

use crate::error::Status;

pub use common::CpuList;
pub(crate) use common::{duration, finish_report, pin_list};
pub use http::{LoadArgs as HttpArgs, ServerArgs as HttpServerArgs};
pub use remote::{remote, TlsClientArgs};
pub use rr::{ClientArgs as RrArgs, ServerArgs as RrServerArgs};
pub use stream::{ClientArgs as StreamArgs, ServerArgs as StreamServerArgs};
pub use udp::{FloodArgs, SinkArgs};

#[derive(Debug, Clone, clap::Subcommand)]
pub enum BenchCommand {
    /// Receive UDP packets with recvmmsg and count them, their loss and
    /// reordering, and the kernel's drop counters (start it first); with
    /// --xdp, one RX queue's flow through AF_XDP (docs/bypass.md).
    UdpSink(SinkArgs),
    /// Send numbered UDP packets with sendmmsg, as fast as possible or at
    /// --rate, from --flows source ports per thread.
    UdpFlood(FloodArgs),
    /// Answer `bench rr` request/response transactions over TCP and UDP on
    /// one port.
    RrServer(RrServerArgs),
    /// netperf-style TCP_RR / UDP_RR: transactions/s and latency
    /// percentiles of many concurrent request/response loops, with the
    /// host's per-CPU time over the run.
    Rr(RrArgs),
    /// Serve TechEmpower's /plaintext and /json over HTTP/1.1 keep-alive:
    /// one pinned event loop per CPU, SO_REUSEPORT listeners in CPU order,
    /// CBPF locality.
    HttpServer(HttpServerArgs),
    /// Load an HTTP server wrk style (closed loop, or open loop at --rate
    /// with latency corrected for coordinated omission).
    Http(HttpArgs),
    /// Receive bulk TCP streams for `bench stream` (many tests at once,
    /// each stream on a thread of its own).
    StreamServer(StreamServerArgs),
    /// Bulk TCP throughput, iperf3 style: -P streams on pinned threads,
    /// --reverse, --window, --pace (SO_MAX_PACING_RATE), --cc, zero-copy;
    /// TCP_INFO per second and the receiver's exact byte count.
    Stream(StreamArgs),
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<Status> {
    let stop = super::signals::stop_on_signals()?;
    match cmd {
        BenchCommand::UdpSink(args) => udp::sink(&args, &stop),
        BenchCommand::UdpFlood(args) => udp::flood(&args, &stop),
        BenchCommand::RrServer(args) => rr::server(&args, &stop),
        BenchCommand::Rr(args) => rr::client(&args, &stop),
        BenchCommand::HttpServer(args) => http::server(&args, &stop),
        BenchCommand::Http(args) => http::load(&args, &stop),
        BenchCommand::StreamServer(args) => stream::server(&args, &stop),
        BenchCommand::Stream(args) => stream::client(&args, &stop),
    }
}
