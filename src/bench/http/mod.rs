//! `bench http-server` and `bench http`: the measuring half of the
//! kernel-vs-DPDK HTTP article (REFERENCE section 4). A fixed-response
//! HTTP/1.1 server built the way the article tuned it (one pinned event loop
//! per CPU, SO_REUSEPORT listeners in CPU order, CBPF locality, microsecond
//! epoll timeouts, recv/send), and a wrk-style load generator that reports
//! the tail truthfully (per-thread HDR histograms, an open loop corrected
//! for coordinated omission).
//!
//! The HTTP rules (`session` for the server, `response` for the client) only
//! turn bytes into bytes; the engines (`server`, `load`) move them.

use std::net::SocketAddr;
use std::time::Duration;

use crate::bench::addr::parse_bind;

mod date;
mod event_loop;
mod load;
mod output;
mod response;
mod server;
mod session;
mod url;
mod worker;

pub use load::run as run_load;
pub use server::run as run_server;
pub use url::Url;

/// How the server steers a new connection to a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Locality {
    /// A classic BPF program picks the listener of the CPU that received the
    /// connection (SO_ATTACH_REUSEPORT_CBPF).
    Cbpf,
    /// The kernel's SO_REUSEPORT hash of the 4-tuple.
    None,
}

/// The server threads' scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sched {
    /// SCHED_BATCH: woken server threads do not preempt the running thread,
    /// so work arrives and is answered in larger batches.
    Batch,
    /// SCHED_OTHER, the default policy.
    Normal,
}

/// Serve `/plaintext` and `/json` the TechEmpower way until stopped.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Address and port to listen on (port 0: any free port). The first line
    /// on stdout says which: `http-server: listening on ADDR:PORT ...`.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_bind)]
    pub bind: SocketAddr,
    /// Event-loop threads, each with its own SO_REUSEPORT listener
    /// (default: one per --pin CPU, else one per CPU this process may use).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Pin thread i to the i-th CPU of this list (e.g. 0-3), wrapping; the
    /// listeners are created in this order.
    #[arg(long, value_name = "CPUS")]
    pub pin: Option<String>,
    /// Connection steering: cbpf (default with --pin) or none (default
    /// without). cbpf follows the CPU that handles a connection's first
    /// packet; for unpinned clients on this host prefer none.
    #[arg(long, value_enum)]
    pub locality: Option<Locality>,
    /// SO_BUSY_POLL microseconds on the listeners and connections (busy
    /// polling also needs a NIC with NAPI; loopback has none).
    #[arg(long, value_name = "USECS", value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub busy_poll: Option<u32>,
    /// epoll timeout in microseconds while traffic flows (default: 100
    /// when busy polling can engage, with --busy-poll or
    /// net.core.busy_poll; else 10000, since short waits then only add
    /// timer wake-ups).
    #[arg(long, value_name = "USECS", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub wait_us: Option<u32>,
    /// Scheduling policy of the server threads.
    #[arg(long, value_enum, default_value = "batch")]
    pub sched: Sched,
    /// Close connections idle this long.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::base::units::parse_duration)]
    pub idle_timeout: Duration,
    /// Stop after this long (e.g. 30, 30s, 5m); default: until Ctrl-C.
    #[arg(long, value_name = "DURATION", value_parser = crate::base::units::parse_duration)]
    pub duration: Option<Duration>,
    /// Print the final report as JSON on stdout, after the listening line
    /// (see docs/bench-http.md).
    #[arg(long)]
    pub json: bool,
}

/// Load an HTTP/1.1 server over keep-alive connections, wrk style.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// What to request: http://HOST[:PORT]/PATH (https is not supported).
    #[arg(value_name = "URL", value_parser = url::parse)]
    pub url: Url,
    /// Threads, one event loop each.
    #[arg(short = 't', long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Keep-alive connections in all, spread evenly over the threads.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: u32,
    /// How long statistics are collected (10, 10s, 1m), after the warm-up.
    #[arg(short = 'd', long, value_name = "DURATION", default_value = "10s", value_parser = crate::base::units::parse_duration)]
    pub duration: Duration,
    /// Warm-up before statistics start (0 = none).
    #[arg(short = 'D', long, value_name = "DURATION", default_value = "0", value_parser = crate::base::units::parse_duration_or_zero)]
    pub warmup: Duration,
    /// Open loop: this many requests per second in all, scheduled per thread;
    /// latency counts from each request's scheduled send time (corrected
    /// for coordinated omission) and, separately, from its actual send.
    #[arg(short = 'R', long, value_name = "RPS", value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: Option<u64>,
    /// Pin thread i to the i-th CPU this process may use (twrk's option).
    #[arg(long, conflicts_with = "pin")]
    pub pin_cpus: bool,
    /// Pin thread i to the i-th CPU of this list (e.g. 1 or 0-3), wrapping.
    #[arg(long, value_name = "CPUS")]
    pub pin: Option<String>,
    /// Requests in flight per connection (HTTP pipelining).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
    /// Extra request header, e.g. -H 'Host: server.tld' (repeatable; a Host
    /// given here replaces the URL's).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE", value_parser = parse_header)]
    pub headers: Vec<Header>,
    /// A request without its response after this long counts as a timeout
    /// error and its connection is reopened.
    #[arg(short = 'T', long, value_name = "DURATION", default_value = "2s", value_parser = crate::base::units::parse_duration)]
    pub timeout: Duration,
    /// Accepted for wrk/twrk compatibility: the distribution is always printed.
    #[arg(long, hide = true)]
    pub latency: bool,
    /// Print the report as JSON on stdout (see docs/bench-http.md).
    #[arg(long)]
    pub json: bool,
}

/// One `-H 'Name: value'` request header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: String,
}

/// RFC 9110 token characters (header names, methods).
pub(crate) fn is_token(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

fn parse_header(text: &str) -> Result<Header, String> {
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

    #[test]
    fn warmup_may_be_zero() {}
}
