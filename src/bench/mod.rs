//! Benchmarks: load generators and servers, as library parts.
//!
//! Every engine has a plain config (serde, validated once), a run that
//! takes the config, a [`Stop`] token and an [`Observer`],
//! and returns a serde report; it never prints, exits or touches signals.
//! The scaffolding they share (threads, pinning, the timeline, joining)
//! is [`harness`]; `--netns` is [`netns`]; the check against joining a
//! port another program serves is [`port`]. The command line (`src/cli/bench`)
//! turns arguments into configs, ties Ctrl-C and SIGTERM to the stop token
//! and prints.
//!
//! [`Stop`]: crate::base::stop::Stop
//! [`Observer`]: crate::base::observe::Observer

pub mod addr;
pub mod backend;
pub mod busy_poll;
pub mod cpu;
pub mod engine;
pub mod errqueue;
pub mod frame;
pub mod harness;
pub mod http;
pub mod latency;
pub mod netns;
pub mod pin;
pub mod port;
pub mod registry;
pub mod report;
pub mod rr;
pub mod secs;
pub mod stream;
pub mod traffic;
pub mod udp;
pub mod uring;
pub mod xsk;

/// The highest `--rate` (packets or requests per second) a load generator
/// takes: above what 1.6 Tbit/s of minimum-size frames can carry.
pub const MAX_RATE: u64 = 1_000_000_000;

/// A config value `value` of `--name` must lie in `lo..=hi`; the error names
/// the value and the accepted range.
pub fn within(name: &str, value: u64, lo: u64, hi: u64) -> anyhow::Result<()> {
    if !(lo..=hi).contains(&value) {
        anyhow::bail!("--{name} '{value}' is out of range: give {lo} to {hi}");
    }
    Ok(())
}
