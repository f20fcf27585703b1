//! `bench udp-sink` and `bench udp-flood`: packets per second the way the
//! "receiving 1M UDP packets per second" article measures them (REFERENCE
//! section 3), with every packet numbered so loss is counted and located.
//!
//! The sender stamps a [`wire::Header`] (sender id, flow, sequence) on every
//! packet; the sink keeps a [`flows::FlowTable`] per thread and reads the
//! kernel's UDP and softnet counters around the run.

use std::net::SocketAddr;
use std::time::Duration;

use crate::bench::addr::{parse_bind, parse_destination};

mod flood;
mod flows;
mod mmsg;
mod sink;
mod wire;

pub use flood::run as run_flood;
pub use sink::run as run_sink;
pub use wire::HEADER_LEN;

/// The largest UDP payload over IPv4 (65535 - 20 IP - 8 UDP).
pub const MAX_PAYLOAD: usize = 65_507;

/// Receive UDP packets as fast as possible and account for every one.
#[derive(Debug, Clone, clap::Args)]
pub struct SinkArgs {
    /// Address and port to receive on (port 0: any free port). The first
    /// line on stderr says which: `udp-sink: listening on ADDR:PORT ...`.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_bind)]
    pub bind: SocketAddr,
    /// Receiving threads.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// One socket per thread with SO_REUSEPORT (the kernel spreads flows
    /// over them by hash); without it all threads read one socket.
    #[arg(long)]
    pub reuseport: bool,
    /// Pin thread i to the i-th CPU of this list (e.g. 1 or 0-3), wrapping.
    #[arg(long, value_name = "CPUS")]
    pub pin: Option<String>,
    /// Packets per recvmmsg call (at most 1024, the kernel's UIO_MAXIOV).
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub batch: u32,
    /// Socket receive buffer to ask for (SO_RCVBUFFORCE as root, else
    /// SO_RCVBUF capped by net.core.rmem_max); the granted size is reported.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub rcvbuf: Option<u32>,
    /// Seconds to run (fractions allowed); Ctrl-C stops early with a report.
    #[arg(long, value_name = "S", default_value = "10", value_parser = crate::base::units::parse_duration)]
    pub duration: Duration,
    /// Print the final report as JSON on stdout (see docs/bench-udp.md).
    #[arg(long)]
    pub json: bool,
}

/// Send numbered UDP packets as fast as possible, or at a steady rate.
#[derive(Debug, Clone, clap::Args)]
pub struct FloodArgs {
    /// Destinations, comma separated; sockets are spread over them in turn.
    #[arg(long, value_name = "ADDR:PORT[,ADDR:PORT...]", required = true, value_delimiter = ',', value_parser = parse_destination)]
    pub to: Vec<SocketAddr>,
    /// Sending threads.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// UDP payload bytes per packet (16-byte header included).
    #[arg(long, value_name = "BYTES", default_value = "32", value_parser = parse_size)]
    pub size: usize,
    /// Packets per sendmmsg call (at most 1024, the kernel's UIO_MAXIOV).
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub batch: u32,
    /// Connected sockets per thread, each with its own source port, so RSS
    /// and SO_REUSEPORT can spread the traffic.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub flows: u32,
    /// Total packets per second, split evenly over the threads and paced
    /// smoothly (default: as fast as possible).
    #[arg(long, value_name = "PPS", value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: Option<u64>,
    /// Pin thread i to the i-th CPU of this list (e.g. 0 or 0-3), wrapping.
    #[arg(long, value_name = "CPUS")]
    pub pin: Option<String>,
    /// Seconds to run (fractions allowed); Ctrl-C stops early with a report.
    #[arg(long, value_name = "S", default_value = "10", value_parser = crate::base::units::parse_duration)]
    pub duration: Duration,
    /// Print the final report as JSON on stdout (see docs/bench-udp.md).
    #[arg(long)]
    pub json: bool,
}

fn parse_size(text: &str) -> Result<usize, String> {
    let size: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number of bytes"))?;
    if size < HEADER_LEN {
        return Err(format!(
            "'{text}' bytes cannot hold the {HEADER_LEN}-byte sequence header; give at least {HEADER_LEN}"
        ));
    }
    if size > MAX_PAYLOAD {
        return Err(format!(
            "'{text}' bytes is more than a UDP datagram can carry ({MAX_PAYLOAD})"
        ));
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_between_header_and_datagram_limit() {
        assert_eq!(parse_size("32"), Ok(32));
        assert_eq!(parse_size("65507"), Ok(65_507));
        assert!(parse_size("65508")
            .expect_err("too big")
            .contains("'65508'"));
        assert!(parse_size("15").expect_err("too small").contains("16-byte"));
        assert!(parse_size("x").is_err());
    }
}
