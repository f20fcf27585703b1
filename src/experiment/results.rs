//! `results.json`: everything an experiment measured and what it needs to
//! be judged later (the host, the load on it, what each config changed).
//! Its schema is documented in docs/experiment.md; `experiment compare`
//! reads two of them.

use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::sample::{Drops, ReasonCount, Usage};
use super::stats::{Comparison, Summary};
use super::tune::Changed;
use crate::base::fsio::{self, FileError};
use crate::bench::cpu::CpuRow;
use crate::bench::latency::LatencySummary;

/// Bumped when a field changes meaning or is removed. 2: `settings.seed`
/// is a string (a clock seed is past 2^53, where jq loses digits); files
/// of version 1 are read as they are.
pub const SCHEMA_VERSION: u32 = 2;
/// The file name inside a result directory.
pub const FILE: &str = "results.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub schema_version: u32,
    pub nettune_version: String,
    /// The command line that ran it.
    pub command: Vec<String>,
    /// UTC, RFC 3339.
    pub started: String,
    pub finished: String,
    /// Every planned run was made.
    pub complete: bool,
    /// `done`, `interrupted` (Ctrl-C, SIGTERM) or `failed: WHY`.
    pub ended: String,
    pub settings: Settings,
    pub host: HostInfo,
    pub configs: Vec<ConfigInfo>,
    pub benches: Vec<BenchInfo>,
    /// Every run, in the order made.
    pub runs: Vec<Run>,
    /// Config x bench: statistics over the runs.
    pub cells: Vec<Cell>,
    pub timing: Timing,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub repeat: u32,
    /// Measured seconds per run, warm-up seconds before it.
    pub duration_s: f64,
    pub warmup_s: f64,
    /// Seeds the shuffles and the bootstrap: the same runs and seed give
    /// the same report. A string in JSON: see `base::json_id`.
    #[serde(with = "crate::base::json_id")]
    pub seed: u64,
    /// The testbed it ran on, if any.
    pub testbed: Option<String>,
    /// Where configs were applied: a network namespace, or null (the host).
    pub tuned_netns: Option<String>,
    pub server_netns: Option<String>,
    pub client_netns: Option<String>,
    pub server_addr: String,
    /// The `nettune serve` daemon that ran the server sides, if one did.
    #[serde(default)]
    pub remote: Option<String>,
    pub server_pin: Vec<u32>,
    /// Interfaces the profiles tuned (empty: the profile's default).
    pub ifaces: Vec<String>,
}

/// The host, to judge a result later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: Option<String>,
    pub machine_id: Option<String>,
    pub kernel: Option<String>,
    pub online_cpus: Vec<u32>,
    /// /proc/loadavg (1, 5, 15 min) before the first run and after the
    /// last.
    pub load_before: Option<[f64; 3]>,
    pub load_after: Option<[f64; 3]>,
    /// CPU time stolen by the hypervisor for other guests over the whole
    /// experiment, percent of all CPUs' time.
    pub steal_percent: Option<f64>,
    /// Busy (non-idle) share of all CPUs over the whole experiment, percent.
    pub busy_percent: Option<f64>,
    /// The share of all CPUs' time other processes used over the whole
    /// experiment, percent (see [`super::sample::Usage::others_percent`]).
    #[serde(default)]
    pub others_percent: Option<f64>,
    /// `nettune inspect --json` of the tuned place before the first run.
    pub inspect: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigInfo {
    pub name: String,
    /// `current`, `profile` or `plan`.
    pub kind: String,
    /// The settings it changed (from its first apply).
    pub changes: Vec<Changed>,
    /// Changes the kernel refused, with the reason.
    pub refused: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchInfo {
    pub name: String,
    /// `udp-flood`, `rr`, `http`.
    pub kind: String,
    /// What its numbers count: `packets/s`, `transactions/s`, `requests/s`.
    pub metric: String,
    /// `udp-sink`, `rr-server`, `http-server`.
    pub server: String,
    /// The client engine's config (target filled in at each run).
    pub client: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// 1-based round.
    pub round: u32,
    pub config: String,
    pub bench: String,
    /// Seconds since the experiment started.
    pub at_s: f64,
    pub value: f64,
    pub latency: Option<LatencySummary>,
    /// udp-flood: packets sent and not received.
    pub lost: Option<u64>,
    /// Per-CPU time and drop counters over the measured part.
    pub usage: Usage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub config: String,
    pub bench: String,
    pub summary: Summary,
    /// Against the first config, same bench.
    pub comparison: Comparison,
    /// Per CPU (and `all`), the median over the runs of each column.
    pub cpus: Vec<CpuRow>,
    /// The median over the runs of each drop counter.
    pub drops: Drops,
    /// The median over the runs of the drops of each reason the kernel
    /// gave (a run without it counts 0), most first; `None` when no run
    /// was traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<ReasonCount>>,
    /// The median over the runs of each percentile.
    pub latency: Option<LatencySummary>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// From the first apply to the last rollback.
    pub wall_s: f64,
    /// The benches' own warm-up and measured time, summed over the runs.
    pub bench_s: f64,
    /// What the experiment added: applying, rolling back, starting
    /// servers, sampling (wall_s - bench_s).
    pub overhead_s: f64,
    pub overhead_percent: f64,
    /// Of which applying and rolling back.
    pub tuning_s: f64,
}

impl Results {
    pub fn cell(&self, config: &str, bench: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.config == config && c.bench == bench)
    }

    pub fn values(&self, config: &str, bench: &str) -> Vec<f64> {
        self.runs
            .iter()
            .filter(|r| r.config == config && r.bench == bench)
            .map(|r| r.value)
            .collect()
    }

    pub fn bench(&self, name: &str) -> Option<&BenchInfo> {
        self.benches.iter().find(|b| b.name == name)
    }

    /// Read `DIR/results.json` (or a file path).
    pub fn load(path: &Path) -> anyhow::Result<Results> {
        let file = if path.is_dir() {
            path.join(FILE)
        } else {
            path.to_path_buf()
        };
        let text =
            fsio::read_text_bounded(&file, fsio::RECORD_LIMIT, "an experiment's results.json")
                .map_err(|e| match e {
                    FileError::Io { source, .. } => anyhow::anyhow!(
                        "cannot read experiment results {}: {source}",
                        file.display()
                    ),
                    refused => anyhow::anyhow!("{refused}"),
                })?;
        #[derive(Deserialize)]
        struct Version {
            schema_version: u32,
        }
        let version: Version = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{} is not an experiment's results.json: {e}",
                file.display()
            )
        })?;
        if version.schema_version > SCHEMA_VERSION {
            anyhow::bail!(
                "{} was written by a newer nettune (results version {}; this one reads {}): use \
                 that nettune",
                file.display(),
                version.schema_version,
                SCHEMA_VERSION
            );
        }
        serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{} is not an experiment's results.json: {e}",
                file.display()
            )
        })
    }

    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        let file = dir.join(FILE);
        let text = serde_json::to_string_pretty(self)? + "\n";
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))
    }
}
