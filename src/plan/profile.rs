//! What a plan is asked for: the profile and the options beside the host
//! that decide it.

use serde::{Deserialize, Serialize};

use super::site::SiteProfile;

/// What the host is tuned for. docs/profiles.md gives every value's reason.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Many small UDP packets (Cloudflare: receiving 1M UDP packets/s).
    Pps,
    /// Request/response latency (scaling.rst; tuned network-latency).
    Latency,
    /// Bulk TCP over long paths (fasterdata.es.net host tuning).
    Throughput,
    /// Many connections served per core (talawah.io: Linux kernel vs DPDK HTTP).
    Http,
    /// Kernel defaults: undo hand tuning done before nettune.
    Baseline,
    /// A plan made by `nettune experiment search` (or edited by hand), not
    /// by a profile: applied from its file with `apply --plan FILE`.
    #[value(skip)]
    Custom,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Pps => "pps",
            Profile::Latency => "latency",
            Profile::Throughput => "throughput",
            Profile::Http => "http",
            Profile::Baseline => "baseline",
            Profile::Custom => "custom",
        }
    }

    /// One line on what the profile is for (`nettune profiles`).
    pub fn summary(self) -> &'static str {
        match self {
            Profile::Pps => "many small UDP packets per second",
            Profile::Latency => "request/response latency",
            Profile::Throughput => "bulk TCP over long paths",
            Profile::Http => "many connections served per core",
            Profile::Baseline => "kernel defaults: undo hand tuning",
            Profile::Custom => "a plan saved in a file",
        }
    }
}

/// Everything besides the host that decides a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanOptions {
    pub profile: Profile,
    /// Interfaces to tune; empty: every physical interface that is up.
    pub ifaces: Vec<String>,
    /// The CPUs network work may use; `None`: every online CPU except
    /// isolated and nohz_full ones.
    pub cpus: Option<Vec<u32>>,
    /// Path bandwidth for buffer sizes (throughput), bits per second;
    /// `None`: the fastest selected link.
    pub bandwidth_bits: Option<u64>,
    /// Path round-trip time (throughput), microseconds; `None`: 100 ms.
    pub rtt_us: Option<u64>,
    /// fq's per-flow pacing cap (throughput), bits per second.
    pub pace_bits: Option<u64>,
    /// Parallel streams sharing the path (throughput); `None`: 1.
    pub streams: Option<u32>,
    /// A site profile laid over `profile` (the built-in one it includes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<Box<SiteProfile>>,
}

impl PlanOptions {
    pub fn new(profile: Profile) -> PlanOptions {
        PlanOptions {
            profile,
            ifaces: Vec::new(),
            cpus: None,
            bandwidth_bits: None,
            rtt_us: None,
            pace_bits: None,
            streams: None,
            site: None,
        }
    }

    /// The profile's name: the site profile's, else the built-in one's.
    pub fn name(&self) -> &str {
        match &self.site {
            Some(site) => &site.name,
            None => self.profile.name(),
        }
    }
}
