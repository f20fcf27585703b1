//! The matrix: every config times every bench, repeated. Runs are
//! interleaved, round by round (ABC ABC ...), with the order of the configs
//! shuffled in each round, so that drift and noisy neighbours hit every
//! config alike. For each config of a round: apply it (journaled), run each
//! bench with the sampler beside it, roll it back. The host is restored
//! whatever happens: a failed bench, a stop (Ctrl-C, SIGTERM), a panic
//! (the applied config's guard restores it when dropped).

use std::time::Instant;

use super::bench::{self, Bench, Sides};
use super::results::{BenchInfo, Cell, ConfigInfo, HostInfo, Results, Run, Settings, Timing};
use super::sample::{Drops, ReasonCount, Sampler};
use super::stats::{self, Comparison, Rng};
use super::tune::{Config, Tuner};
use crate::apply::journal::now_utc;
use crate::base::drop_layer::Layer;
use crate::base::stop::Stop;
use crate::bench::cpu::CpuRow;
use crate::bench::latency::LatencySummary;
use crate::host::stat::CpuShares;

/// What to run.
pub struct Spec {
    pub configs: Vec<Config>,
    pub benches: Vec<Bench>,
    pub repeat: u32,
    pub sides: Sides,
    /// Recorded as is (the seed in it drives the shuffles).
    pub settings: Settings,
    pub command: Vec<String>,
}

/// What a runner tells while it runs.
pub trait Progress {
    /// Something the user should know (applying, a refusal, a warning).
    fn note(&mut self, text: &str);
    /// A run is about to start (number `n` of `total`).
    fn starting(&mut self, n: usize, total: usize, round: u32, config: &str, bench: &Bench);
    /// A run is done.
    fn done(&mut self, run: &Run, bench: &Bench);
}

/// The seed of the bootstrap, derived from the experiment's seed so that
/// the statistics can be made again from results.json alone.
pub fn stats_seed(seed: u64) -> u64 {
    seed ^ 0x005e_ed0f_b007_57a9
}

/// Plan every config against the host as found, without applying
/// anything: bad configs (a plan for another host, a profile that cannot
/// be planned here) are refused before the first run.
pub fn check(spec: &Spec, tuner: &Tuner) -> anyhow::Result<()> {
    for config in &spec.configs {
        tuner
            .plan(config)
            .map_err(|e| e.context(format!("config '{}'", config.name)))?;
    }
    Ok(())
}

/// Run the matrix. Always returns the results of the runs made, with
/// `ended` saying how it ended (`done`, `interrupted`, `failed: WHY`).
pub fn run<S: Sampler>(
    spec: &Spec,
    tuner: &Tuner,
    sampler: &mut S,
    stop: &Stop,
    progress: &mut dyn Progress,
) -> Results {
    let started = now_utc();
    let clock = Instant::now();
    let root = crate::base::Root::live();
    let load_before = super::sample::load_average(&root);
    let inspect = tuner
        .host()
        .ok()
        .and_then(|h| serde_json::to_value(h).ok())
        .unwrap_or(serde_json::Value::Null);
    let first = sampler.snapshot().ok();
    let mut state = Matrix {
        spec,
        tuner,
        sampler,
        stop,
        progress,
        clock,
        runs: Vec::new(),
        configs: config_infos(spec),
        tuning_s: 0.0,
    };
    let ended = match state.rounds() {
        Ok(true) => "done".to_string(),
        Ok(false) => "interrupted".to_string(),
        Err(e) => format!("failed: {}", crate::error::message(&e)),
    };
    let Matrix {
        runs,
        configs,
        tuning_s,
        ..
    } = state;
    let last = sampler.snapshot().ok();
    let wall_s = clock.elapsed().as_secs_f64();
    let bench_s: f64 = runs
        .iter()
        .filter_map(|r| spec.benches.iter().find(|b| b.name == r.bench))
        .map(|b| b.own_time().as_secs_f64())
        .sum();
    let whole = match (&first, &last) {
        (Some(a), Some(b)) => Some(sampler.usage(a, b)),
        _ => None,
    };
    let all = whole.as_ref().and_then(|u| u.cpus.first().cloned());
    let made_for = tuner.made_for();
    let host_model: Option<crate::host::Host> = serde_json::from_value(inspect.clone()).ok();
    let planned = spec.configs.len() * spec.benches.len() * spec.repeat as usize;
    let mut results = Results {
        schema_version: super::results::SCHEMA_VERSION,
        nettune_version: env!("CARGO_PKG_VERSION").to_string(),
        command: spec.command.clone(),
        started,
        finished: now_utc(),
        complete: ended == "done" && runs.len() == planned,
        ended,
        settings: spec.settings.clone(),
        host: HostInfo {
            hostname: made_for.hostname,
            machine_id: made_for.machine_id,
            kernel: host_model.as_ref().and_then(|h| h.kernel.clone()),
            online_cpus: host_model
                .as_ref()
                .map(|h| h.online_cpus.clone())
                .unwrap_or_default(),
            load_before,
            load_after: super::sample::load_average(&root),
            steal_percent: all.as_ref().map(|a| a.shares.steal),
            busy_percent: all
                .as_ref()
                .map(|a| 100.0 - a.shares.idle - a.shares.iowait),
            others_percent: whole.as_ref().and_then(|u| u.others_percent),
            inspect,
        },
        configs,
        benches: bench_infos(spec),
        runs,
        cells: Vec::new(),
        timing: timing(wall_s, bench_s, tuning_s),
    };
    results.cells = cells(&results);
    results
}

/// Each config as the results name it; its changes and refusals are
/// filled in as it is applied.
fn config_infos(spec: &Spec) -> Vec<ConfigInfo> {
    spec.configs
        .iter()
        .map(|c| ConfigInfo {
            name: c.name.clone(),
            kind: c.kind().to_string(),
            changes: Vec::new(),
            refused: Vec::new(),
        })
        .collect()
}

/// Each bench as the results name it, with its client's settings.
fn bench_infos(spec: &Spec) -> Vec<BenchInfo> {
    spec.benches
        .iter()
        .map(|b| BenchInfo {
            name: b.name.clone(),
            kind: b.kind().to_string(),
            metric: b.metric().to_string(),
            server: b.server_kind().to_string(),
            client: b.client_json(),
        })
        .collect()
}

/// Wall time against the benches' own time: what the experiment cost
/// beyond measuring.
fn timing(wall_s: f64, bench_s: f64, tuning_s: f64) -> Timing {
    Timing {
        wall_s,
        bench_s,
        overhead_s: wall_s - bench_s,
        overhead_percent: if bench_s > 0.0 {
            (wall_s - bench_s) * 100.0 / bench_s
        } else {
            0.0
        },
        tuning_s,
    }
}

struct Matrix<'a, S: Sampler> {
    spec: &'a Spec,
    tuner: &'a Tuner,
    sampler: &'a mut S,
    stop: &'a Stop,
    progress: &'a mut dyn Progress,
    clock: Instant,
    runs: Vec<Run>,
    configs: Vec<ConfigInfo>,
    tuning_s: f64,
}

impl<S: Sampler> Matrix<'_, S> {
    /// Every round; false when stopped early.
    fn rounds(&mut self) -> anyhow::Result<bool> {
        let spec = self.spec;
        let total = spec.configs.len() * spec.benches.len() * spec.repeat as usize;
        let mut rng = Rng::new(spec.settings.seed);
        for round in 1..=spec.repeat {
            let mut order: Vec<usize> = (0..spec.configs.len()).collect();
            rng.shuffle(&mut order);
            for i in order {
                if self.stop.is_set() {
                    return Ok(false);
                }
                if !self.config(round, i, total)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Apply config `i`, run every bench, roll back; false when stopped.
    fn config(&mut self, round: u32, i: usize, total: usize) -> anyhow::Result<bool> {
        let config = &self.spec.configs[i];
        let t = Instant::now();
        let tuned = self
            .tuner
            .apply(config)
            .map_err(|e| e.context(format!("applying config '{}'", config.name)))?;
        self.tuning_s += t.elapsed().as_secs_f64();
        let info = &mut self.configs[i];
        if round == 1 || (info.changes.is_empty() && info.refused.is_empty()) {
            info.changes = tuned.changed.clone();
            info.refused = tuned.refused.clone();
            for why in &tuned.refused {
                self.progress.note(&format!(
                    "config '{}': the kernel refused {why}; left alone",
                    config.name
                ));
            }
        }
        let mut completed = true;
        for bench in &self.spec.benches {
            self.progress
                .starting(self.runs.len() + 1, total, round, &config.name, bench);
            match self.one(round, config, bench)? {
                Some(run) => {
                    self.progress.done(&run, bench);
                    self.runs.push(run);
                }
                None => {
                    self.progress.note(
                        "stopped: this run was cut short and is not counted; restoring the host",
                    );
                    completed = false;
                    break;
                }
            }
        }
        let t = Instant::now();
        tuned
            .restore()
            .map_err(|e| e.context(format!("rolling back config '{}'", config.name)))?;
        self.tuning_s += t.elapsed().as_secs_f64();
        Ok(completed)
    }

    /// One run; None when it was stopped before its end (not a measurement).
    fn one(&mut self, round: u32, config: &Config, bench: &Bench) -> anyhow::Result<Option<Run>> {
        let at_s = self.clock.elapsed().as_secs_f64();
        let mut first: Option<anyhow::Result<S::Snapshot>> = None;
        let sampler = &mut *self.sampler;
        let outcome = bench::run(bench, &self.spec.sides, self.stop, &mut || {
            first = Some(sampler.snapshot());
        });
        let last = self.sampler.snapshot();
        if self.stop.is_set() {
            return Ok(None);
        }
        let outcome = outcome.map_err(|e| {
            e.context(format!(
                "bench '{}' under config '{}' (round {round})",
                bench.name, config.name
            ))
        })?;
        let first =
            first.unwrap_or_else(|| Err(anyhow::anyhow!("the run never started measuring")));
        let usage = self.sampler.usage(&first?, &last?);
        Ok(Some(Run {
            round,
            config: config.name.clone(),
            bench: bench.name.clone(),
            at_s,
            value: outcome.value,
            latency: outcome.latency,
            lost: outcome.lost,
            usage,
        }))
    }
}

/// The statistics of every config x bench, from the runs (the first
/// config is the reference).
pub fn cells(results: &Results) -> Vec<Cell> {
    let mut rng = Rng::new(stats_seed(results.settings.seed));
    let Some(reference) = results.configs.first() else {
        return Vec::new();
    };
    let mut cells = Vec::new();
    for bench in &results.benches {
        let base = results.values(&reference.name, &bench.name);
        for config in &results.configs {
            let runs: Vec<&Run> = results
                .runs
                .iter()
                .filter(|r| r.config == config.name && r.bench == bench.name)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let values: Vec<f64> = runs.iter().map(|r| r.value).collect();
            let comparison = if config.name == reference.name {
                Comparison::reference()
            } else {
                stats::compare(&base, &values, &mut rng)
            };
            cells.push(Cell {
                config: config.name.clone(),
                bench: bench.name.clone(),
                summary: stats::summarize(&values, &mut rng),
                comparison,
                cpus: median_cpus(&runs),
                drops: median_drops(&runs),
                reasons: median_reasons(&runs),
                latency: median_latency(&runs),
            });
        }
    }
    cells
}

fn median_of<T>(items: &[T], f: impl Fn(&T) -> f64) -> f64 {
    stats::median(&items.iter().map(f).collect::<Vec<f64>>())
}

fn median_cpus(runs: &[&Run]) -> Vec<CpuRow> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .usage
        .cpus
        .iter()
        .map(|row| {
            let rows: Vec<&CpuRow> = runs
                .iter()
                .filter_map(|r| r.usage.cpus.iter().find(|c| c.cpu == row.cpu))
                .collect();
            CpuRow {
                cpu: row.cpu.clone(),
                shares: CpuShares {
                    usr: median_of(&rows, |r| r.shares.usr),
                    nice: median_of(&rows, |r| r.shares.nice),
                    sys: median_of(&rows, |r| r.shares.sys),
                    iowait: median_of(&rows, |r| r.shares.iowait),
                    irq: median_of(&rows, |r| r.shares.irq),
                    soft: median_of(&rows, |r| r.shares.soft),
                    steal: median_of(&rows, |r| r.shares.steal),
                    idle: median_of(&rows, |r| r.shares.idle),
                },
            }
        })
        .collect()
}

fn median_drops(runs: &[&Run]) -> Drops {
    let m = |f: fn(&Drops) -> u64| median_of(runs, |r| f(&r.usage.drops) as f64) as u64;
    Drops {
        softnet_dropped: m(|d| d.softnet_dropped),
        softnet_time_squeeze: m(|d| d.softnet_time_squeeze),
        udp_rcvbuf_errors: m(|d| d.udp_rcvbuf_errors),
        udp_in_errors: m(|d| d.udp_in_errors),
        tcp_listen_drops: m(|d| d.tcp_listen_drops),
    }
}

/// Per (reason, layer) seen in any run, the median over the traced runs.
fn median_reasons(runs: &[&Run]) -> Option<Vec<ReasonCount>> {
    let traced: Vec<&Vec<ReasonCount>> = runs
        .iter()
        .filter_map(|r| r.usage.reasons.as_ref())
        .collect();
    if traced.is_empty() {
        return None;
    }
    let mut keys: Vec<(String, Layer)> = traced
        .iter()
        .flat_map(|rs| rs.iter().map(|r| (r.reason.clone(), r.layer)))
        .collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<ReasonCount> = keys
        .into_iter()
        .map(|(reason, layer)| {
            let count = median_of(&traced, |rs| {
                rs.iter()
                    .find(|r| r.reason == reason && r.layer == layer)
                    .map_or(0.0, |r| r.count as f64)
            });
            ReasonCount {
                reason,
                layer,
                count: count as u64,
            }
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    Some(out)
}

fn median_latency(runs: &[&Run]) -> Option<LatencySummary> {
    let all: Vec<&LatencySummary> = runs.iter().filter_map(|r| r.latency.as_ref()).collect();
    if all.is_empty() {
        return None;
    }
    let m = |f: fn(&LatencySummary) -> f64| median_of(&all, |l| f(l));
    Some(LatencySummary {
        count: median_of(&all, |l| l.count as f64) as u64,
        min_us: m(|l| l.min_us),
        mean_us: m(|l| l.mean_us),
        stdev_us: m(|l| l.stdev_us),
        p50_us: m(|l| l.p50_us),
        p90_us: m(|l| l.p90_us),
        p99_us: m(|l| l.p99_us),
        p999_us: m(|l| l.p999_us),
        p9999_us: m(|l| l.p9999_us),
        max_us: m(|l| l.max_us),
    })
}
