//! What a plan is asked for: the profile and the options beside the host
//! that decide it, and a site profile's values (read by [`super::site`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

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

/// Where a value was set: file, line and key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub file: String,
    pub line: usize,
    pub key: String,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} {}", self.file, self.line, self.key)
    }
}

/// A value a site profile gives: a new value, or "off" (leave it alone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Setting {
    Value(String),
    Off,
}

/// Parts of a plan a site profile can leave alone as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// RPS masks (rx-N/rps_cpus).
    Rps,
    /// RFS: rx-N/rps_flow_cnt and net.core.rps_sock_flow_entries.
    Rfs,
    /// XPS masks (tx-N/xps_cpus).
    Xps,
    /// IRQ affinity (`irq.affinity = "off"`).
    Irq,
}

impl Part {
    /// The key of a profile file that leaves it alone.
    pub fn key(self) -> &'static str {
        match self {
            Part::Rps => "rps",
            Part::Rfs => "rfs",
            Part::Xps => "xps",
            Part::Irq => "irq.affinity",
        }
    }
}

/// A site profile, its includes resolved: the built-in profile at the end
/// of the chain and every override, the nearest file winning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteProfile {
    pub name: String,
    /// The file that defines it.
    pub file: String,
    /// The built-in profile the include chain ends in.
    pub base: Profile,
    /// The names from this profile to the built-in one (`web`, `edge`, `pps`).
    pub chain: Vec<String>,
    /// Where the chain reaches the built-in profile.
    pub include: Origin,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Parts left alone.
    #[serde(default)]
    pub off: BTreeMap<Part, Origin>,
    /// `irq.cpus`: the CPUs network work uses (as `--cpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_cpus: Option<(Vec<u32>, Origin)>,
    /// Sysctl (dotted name) -> its value or off.
    #[serde(default)]
    pub sysctls: BTreeMap<String, (Setting, Origin)>,
    /// Driver setting (`coalesce.rx-usecs`) or group of them (`rings`) ->
    /// its value or off, for every selected interface.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub driver: BTreeMap<String, (Setting, Origin)>,
}

impl SiteProfile {
    /// What the file says of driver setting `key` (`coalesce.rx-usecs`):
    /// its own entry, else its group's (`coalesce`).
    pub fn driver_choice(&self, key: &str) -> Option<&(Setting, Origin)> {
        let key = crate::base::driver::gro_as_one(key);
        self.driver.get(&key).or_else(|| {
            let (group, _) = key.split_once('.')?;
            self.driver.get(group)
        })
    }
}

impl SiteProfile {
    /// The name of the site profile whose file set a value (`at`): this
    /// one, or one it includes.
    pub fn set_by<'a>(&'a self, at: &'a Origin) -> &'a str {
        if at.file == self.file {
            return &self.name;
        }
        std::path::Path::new(&at.file)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(at.file.as_str())
    }

    /// `web (/etc/nettune/profiles/web.toml, includes pps)`.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, includes {})",
            self.name,
            self.file,
            self.includes()
        )
    }

    /// What it includes, down to the built-in profile: `web -> pps`. A
    /// chain without them (a hand-edited journal) names the built-in one.
    pub fn includes(&self) -> String {
        match self.chain.get(1..) {
            Some(names) if !names.is_empty() => names.join(" -> "),
            _ => self.base.name().to_string(),
        }
    }
}
