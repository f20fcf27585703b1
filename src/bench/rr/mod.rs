//! `bench rr-server` and `bench rr`: netperf-style TCP_RR and UDP_RR
//! (REFERENCE section 1), with many concurrent instances in one process,
//! HDR latency percentiles, and the host's per-CPU time over the run.
//!
//! The server answers TCP and UDP on one port, one event loop per thread
//! with its own SO_REUSEPORT sockets. The client runs `--instances`
//! closed-loop request/response exchanges over `--threads` event loops.
//! [`wire`] documents the protocol.

use std::net::SocketAddr;
use std::time::Duration;

use crate::bench::addr::{parse_bind, parse_destination};

mod client;
mod conn;
mod engine;
mod measure;
mod output;
mod server;
mod wake;
mod wire;

pub use client::run as run_client;
pub use server::run as run_server;

/// Answer rr requests over TCP and UDP.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Address and port to answer on, TCP and UDP alike (port 0: any free
    /// port). The first line on stdout is the bound ADDR:PORT.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_bind)]
    pub bind: SocketAddr,
    /// Event-loop threads, each with its own SO_REUSEPORT TCP listener and
    /// UDP socket.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Pin thread i to the i-th CPU of this list (e.g. 0 or 0-3), wrapping.
    #[arg(long, value_name = "CPUS")]
    pub pin: Option<String>,
    /// Seconds to run (fractions allowed); default until Ctrl-C.
    #[arg(long, value_name = "S", value_parser = crate::base::units::parse_duration)]
    pub duration: Option<Duration>,
    /// Print the final report as JSON on stdout (after the address line).
    #[arg(long)]
    pub json: bool,
    /// Testing aid: each thread drops every N-th UDP request it receives
    /// (the client must resend).
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u64).range(1..))]
    pub drop_every: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub request: usize,
    pub reply: usize,
}

/// Run request/response transactions against an rr-server.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// The rr-server's address (`nettune bench rr-server` prints it).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_destination)]
    pub to: SocketAddr,
    /// TCP_RR (one connection per instance) or UDP_RR (one source port per
    /// instance).
    #[arg(long, value_enum)]
    pub proto: Proto,
    /// Request and reply bytes; one number sets both.
    #[arg(long, value_name = "REQ[,RESP]", default_value = "1,1", value_parser = parse_sizes)]
    pub size: Sizes,
    /// Concurrent request/response loops (netperf instances).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub instances: u32,
    /// Event-loop threads the instances are spread over (instance i on
    /// thread i mod T); never more than the instances.
    #[arg(long, value_name = "T", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Seconds measured (fractions allowed); Ctrl-C stops early with a report.
    #[arg(long, value_name = "S", default_value = "10", value_parser = crate::base::units::parse_duration)]
    pub duration: Duration,
    /// Seconds of traffic before the measurement starts (0 for none); it
    /// also waits for the first transaction, up to 2 s.
    #[arg(long, value_name = "S", default_value = "1", value_parser = crate::base::units::parse_duration_or_zero)]
    pub warmup: Duration,
    /// Pin thread i to the i-th CPU of this list (e.g. 1 or 0-3), wrapping.
    #[arg(long, value_name = "CPUS")]
    pub pin: Option<String>,
    /// UDP: the least wait before an unanswered request is sent again; the
    /// timeout follows the measured round trip above it, as TCP's RTO does
    /// (doubling per further timeout of the same request, up to 1 s).
    #[arg(long, value_name = "MS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub resend_after: u64,
    /// Print the final report as JSON on stdout (see docs/bench-rr.md).
    #[arg(long)]
    pub json: bool,
}

/// `REQ[,RESP]`: positive byte counts up to the TCP bound; the UDP bound
/// is checked once the protocol is known ([`Sizes::check_for`]).
fn parse_sizes(text: &str) -> Result<Sizes, String> {
    let one = |part: &str| -> Result<usize, String> {
        let n: usize = part
            .trim()
            .parse()
            .map_err(|_| format!("'{text}' is not REQ[,RESP] in bytes (e.g. 1 or 64,1024)"))?;
        if n == 0 || n > wire::MAX_TCP_SIZE {
            return Err(format!(
                "'{text}': sizes go from 1 to {} bytes",
                wire::MAX_TCP_SIZE
            ));
        }
        Ok(n)
    };
    match text.split_once(',') {
        Some((request, reply)) => Ok(Sizes {
            request: one(request)?,
            reply: one(reply)?,
        }),
        None => {
            let n = one(text)?;
            Ok(Sizes {
                request: n,
                reply: n,
            })
        }
    }
}

impl Sizes {
    pub fn check_for(self, proto: Proto) -> anyhow::Result<()> {
        let largest = self.request.max(self.reply);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_one_or_two_numbers() {
        assert_eq!(
            parse_sizes("1"),
            Ok(Sizes {
                request: 1,
                reply: 1
            })
        );
        assert_eq!(
            parse_sizes("64, 1024"),
            Ok(Sizes {
                request: 64,
                reply: 1024
            })
        );
        assert!(parse_sizes("0").expect_err("zero").contains("'0'"));
        assert!(parse_sizes("1,x").expect_err("word").contains("'1,x'"));
        assert!(parse_sizes("1,2,3").is_err());
    }

    #[test]
    fn udp_sizes_stop_at_the_datagram_limit() {
        let big = parse_sizes("1,65508").expect("fine for tcp");
        assert!(big.check_for(Proto::Tcp).is_ok());
        let err = big.check_for(Proto::Udp).expect_err("too big for udp");
        assert!(err.to_string().contains("'1,65508'"), "{err}");
        assert!(parse_sizes("65507")
            .expect("max")
            .check_for(Proto::Udp)
            .is_ok());
    }

    #[test]
    fn warmup_may_be_zero_but_not_negative() {
        assert!(parse_destination("127.0.0.1:0")
            .expect_err("port 0")
            .contains("port 0"));
    }
}
