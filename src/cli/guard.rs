//! `apply --guard`: the loop around a guarded apply. A baseline of the
//! receive path before the change, then a watch after it, sampled with
//! monitor's sampler in this process; the judgement is
//! [`crate::monitor::guard`] (pure), the change and its undo are
//! [`crate::apply`]'s. Progress goes to stderr; what is printed on stdout
//! is the caller's.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::apply::{self, Backend, GuardRecord, Journal, StateDir};
use crate::base::stop::Stop;
use crate::base::units::parse_duration;
use crate::base::Root;
use crate::bench::report::Progress;
use crate::host::{Inputs, Selection};
use crate::monitor::guard::{judge, Baseline, Fired, Metric, Watch};
use crate::monitor::{Sample, Sampler, Stamp};

use super::monitor_args::{interval, DEFAULT_INTERVAL_SECS};

#[derive(Debug, Clone, clap::Args)]
pub struct GuardArgs {
    /// Watch the receive path for DURATION after the change (`30s`, `5m`)
    /// and roll the change back by itself when it got worse than before:
    /// a drop-ladder layer, softnet or UDP RcvbufErrors above both twice
    /// its rate before the change and that rate + 100/s, or a finding at
    /// warn the baseline did not have (docs/apply.md). Exit 1 when it
    /// rolled back, 2 when the rollback failed.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "dry_run")]
    pub guard: Option<Duration>,
    /// With --guard: how long to measure the baseline before the change.
    /// Default: the --guard DURATION.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "guard")]
    pub guard_baseline: Option<Duration>,
    /// With --guard: watch only these (repeat the flag): drops (each layer
    /// of the drop ladder), softnet (backlog drops and squeezes; host-wide,
    /// not with --netns), udp-rcvbuf, findings. Default: all of them that
    /// the place can attribute.
    #[arg(long, value_name = "METRIC", value_enum, requires = "guard")]
    pub guard_metric: Vec<Metric>,
    /// With --guard: seconds between samples (1, the default; 0.5, 2s).
    /// A regression is seen within one interval of its start.
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = interval, requires = "guard")]
    pub interval: Option<f64>,
}

/// A guard checked against what the user typed, before anything is read.
#[derive(Debug, Clone)]
pub struct GuardPlan {
    watch: Watch,
    duration: Duration,
    baseline: Duration,
    interval: Duration,
}

impl GuardArgs {
    /// The guard asked for, checked (`namespace`: the change is made in a
    /// network namespace). `None` without --guard.
    pub fn plan(&self, namespace: bool) -> anyhow::Result<Option<GuardPlan>> {
        let Some(duration) = self.guard else {
            return Ok(None);
        };
        let watch = Watch::new(&self.guard_metric, namespace)
            .map_err(|e| anyhow::anyhow!("{e}; nothing was changed"))?;
        let interval = Duration::from_secs_f64(self.interval.unwrap_or(DEFAULT_INTERVAL_SECS));
        let baseline = self.guard_baseline.unwrap_or(duration);
        for (flag, d) in [("--guard", duration), ("--guard-baseline", baseline)] {
            if d < interval {
                anyhow::bail!(
                    "{flag} {:.3}s is shorter than one interval ({}s): give at least --interval, \
                     or a shorter --interval; nothing was changed",
                    d.as_secs_f64(),
                    interval.as_secs_f64()
                );
            }
        }
        Ok(Some(GuardPlan {
            watch,
            duration,
            baseline,
            interval,
        }))
    }
}

/// How a guarded apply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardResult {
    /// Nothing got worse for the whole duration: the change stays.
    Passed,
    /// A condition fired and the change was rolled back.
    RolledBack,
    /// A condition fired and rolling back failed: the state is kept.
    RollbackFailed,
    /// Ctrl-C or SIGTERM while watching: the change was rolled back.
    Interrupted,
}

/// What the guard saw and did.
#[derive(Debug, Clone)]
pub struct GuardReport {
    pub result: GuardResult,
    pub plan: GuardPlan,
    pub baseline: Baseline,
    /// Seconds watched after the change.
    pub watched_secs: f64,
    /// The interval that fired (1-based) and when it ended, seconds after
    /// the change was complete.
    pub fired_interval: Option<usize>,
    pub fired_after_secs: Option<f64>,
    /// When the rollback was complete, seconds after the change.
    pub restored_after_secs: Option<f64>,
    pub fired: Vec<Fired>,
    pub rollback_error: Option<String>,
}

/// A guard with its baseline taken, ready to watch a change.
pub struct Guarding {
    plan: GuardPlan,
    sampler: Sampler,
    root: Root,
    netns: Option<String>,
    start: Instant,
    baseline: Baseline,
    stop: Stop,
    progress: Progress,
}

impl GuardPlan {
    /// How long it watches after the change.
    pub fn duration_secs(&self) -> f64 {
        self.duration.as_secs_f64()
    }

    /// What the journal records before the change.
    fn record(&self) -> GuardRecord {
        GuardRecord::here(
            u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            self.watch
                .metrics
                .iter()
                .map(|m| m.name().to_string())
                .collect(),
        )
    }

    /// Measure the baseline where the change will be made (`root_dir`: a
    /// tree; else the place this process is in, named `netns`). Refused
    /// before anything is changed when a watched condition cannot be read.
    pub fn measure(
        self,
        root_dir: Option<&Path>,
        netns: Option<&str>,
        stop: Stop,
    ) -> anyhow::Result<Guarding> {
        let root = crate::host::open_root(root_dir)?;
        let mut sampler = Sampler::new(Selection::default());
        let start = Instant::now();
        let mut progress = Progress::new(true);
        let mut samples = vec![sample(&mut sampler, &root, netns, start)?];
        let unreadable = self.watch.unreadable(&samples[0]);
        if !unreadable.is_empty() {
            anyhow::bail!(
                "cannot guard this change: {}; leave that --guard-metric out (or give the ones \
                 that can be read); nothing was changed",
                unreadable.join("; ")
            );
        }
        say(&format!(
            "guard: measuring the baseline for {} before the change",
            secs(self.baseline.as_secs_f64())
        ));
        let ticks = ticks(self.baseline, self.interval);
        for k in 1..=ticks {
            if stop.sleep_until_polling(start + self.interval * k, WAIT_SLICE) {
                anyhow::bail!("interrupted while measuring the baseline; nothing was changed");
            }
            samples.push(sample(&mut sampler, &root, netns, start)?);
            progress.show(&format!(
                "guard: baseline {}/{}",
                secs(start.elapsed().as_secs_f64()),
                secs(self.baseline.as_secs_f64())
            ));
        }
        progress.clear();
        let baseline = Baseline::of(&self.watch, &samples);
        Ok(Guarding {
            plan: self,
            sampler,
            root,
            netns: netns.map(str::to_string),
            start,
            baseline,
            stop,
            progress,
        })
    }
}

impl Guarding {
    pub fn record(&self) -> GuardRecord {
        self.plan.record()
    }

    /// Watch the change `journal` made for the guard's duration; roll it
    /// back through `backend` when an interval is worse than the baseline
    /// (or on Ctrl-C / SIGTERM). Returns the report and the journal as it
    /// ends.
    pub fn watch(
        mut self,
        state: &StateDir,
        backend: &Backend,
        mut journal: Journal,
    ) -> anyhow::Result<(GuardReport, Journal)> {
        // Samples keep the baseline's clock (the sampler reads the
        // settings again on it); intervals are counted from the change.
        let changed = Instant::now();
        let netns = self.netns.clone();
        // The counters' starting point is read before the guard says it
        // watches: whatever is lost after that line is in the first interval.
        let mut prev = sample(&mut self.sampler, &self.root, netns.as_deref(), self.start)?;
        say(&format!(
            "guard: state {} applied; watching for {} (interval {})",
            journal.id,
            secs(self.plan.duration.as_secs_f64()),
            secs(self.plan.interval.as_secs_f64())
        ));
        let mut report = GuardReport {
            result: GuardResult::Passed,
            plan: self.plan.clone(),
            baseline: self.baseline.clone(),
            watched_secs: 0.0,
            fired_interval: None,
            fired_after_secs: None,
            restored_after_secs: None,
            fired: Vec::new(),
            rollback_error: None,
        };
        let ticks = ticks(self.plan.duration, self.plan.interval);
        for k in 1..=ticks {
            if self
                .stop
                .sleep_until_polling(changed + self.plan.interval * k, WAIT_SLICE)
            {
                report.result = GuardResult::Interrupted;
                break;
            }
            let cur = sample(&mut self.sampler, &self.root, netns.as_deref(), self.start)?;
            let fired = judge(&self.plan.watch, &self.baseline, &prev, &cur);
            report.watched_secs = changed.elapsed().as_secs_f64();
            if !fired.is_empty() {
                report.fired_interval = Some(k as usize);
                report.fired_after_secs = Some(report.watched_secs);
                report.fired = fired;
                report.result = GuardResult::RolledBack;
                break;
            }
            self.progress.show(&format!(
                "guard: watching {}/{}, nothing worse",
                secs(report.watched_secs),
                secs(self.plan.duration.as_secs_f64())
            ));
            prev = cur;
        }
        self.progress.clear();
        if report.result == GuardResult::Passed {
            apply::guard_result(state, &mut journal, "passed")?;
            return Ok((report, journal));
        }
        let why = match report.result {
            GuardResult::Interrupted => "rolled back: interrupted while watching".to_string(),
            _ => format!(
                "rolled back: {}",
                report
                    .fired
                    .iter()
                    .map(Fired::line)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        apply::guard_result(state, &mut journal, &why)?;
        match apply::undo(state, backend, journal.clone()) {
            Ok(undone) => {
                report.restored_after_secs = Some(changed.elapsed().as_secs_f64());
                Ok((report, undone))
            }
            Err(e) => {
                report.result = GuardResult::RollbackFailed;
                report.rollback_error = Some(crate::error::message(&e));
                Ok((report, journal))
            }
        }
    }
}

/// How often a waiting guard looks at its stop token.
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// The samples after the first that fit in `span` at `interval` (at
/// least one).
fn ticks(span: Duration, interval: Duration) -> u32 {
    let n = (span.as_secs_f64() / interval.as_secs_f64()).floor();
    (n as u32).max(1)
}

fn sample(
    sampler: &mut Sampler,
    root: &Root,
    netns: Option<&str>,
    start: Instant,
) -> anyhow::Result<Sample> {
    let (ethtool, netlink) = crate::nic::sources(root)?;
    let netdev = crate::nic::netdev_source(root)?;
    let src = Inputs {
        root,
        ethtool: ethtool.as_ref(),
        netlink: netlink.as_ref(),
        netdev: netdev.as_ref(),
        netns: netns.map(str::to_string),
    };
    sampler.sample(&src, Stamp::since(start))
}

/// A progress line on stderr (stdout holds the report).
fn say(line: &str) {
    eprintln!("nettune apply: {line}");
}

/// `10 s`, `0.5 s`.
fn secs(s: f64) -> String {
    if (s - s.round()).abs() < 0.05 {
        format!("{:.0} s", s.round())
    } else {
        format!("{s:.1} s")
    }
}

impl GuardReport {
    /// What the guard saw and did, for people.
    pub fn text(&self, state: &StateDir, journal: &Journal) -> String {
        let plan = &self.plan;
        let mut out = String::new();
        let watched = format!(
            "{} every {}, baseline {} before the change",
            plan.watch
                .metrics
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(", "),
            secs(plan.interval.as_secs_f64()),
            secs(self.baseline.secs)
        );
        match self.result {
            GuardResult::Passed => out.push_str(&format!(
                "guard passed: nothing got worse in {} after the change; state {} stays \
                 (watched {watched})\n",
                secs(self.watched_secs),
                journal.id
            )),
            GuardResult::RolledBack | GuardResult::RollbackFailed => {
                out.push_str(&format!(
                    "guard fired {} after the change (interval {}), watching {watched}:\n",
                    secs(self.fired_after_secs.unwrap_or(0.0)),
                    self.fired_interval.unwrap_or(0)
                ));
                for f in &self.fired {
                    out.push_str(&format!("  {}\n", f.line()));
                }
                match (&self.rollback_error, self.restored_after_secs) {
                    (None, Some(restored)) => out.push_str(&format!(
                        "rolled back state {} ({}): every setting restored {} after the change\n",
                        journal.id,
                        journal.what(),
                        secs(restored)
                    )),
                    (Some(e), _) => out.push_str(&format!(
                        "rolling back state {} failed: {e}; run `{}`\n",
                        journal.id,
                        state.command(&format!("rollback {}", journal.id))
                    )),
                    (None, None) => {}
                }
            }
            GuardResult::Interrupted => out.push_str(&format!(
                "guard interrupted after {}: rolled back state {} ({})\n",
                secs(self.watched_secs),
                journal.id,
                journal.what()
            )),
        }
        let host_wide = plan.watch.not_attributed();
        if !host_wide.is_empty() {
            out.push_str(&format!(
                "  not watched in a network namespace (host-wide, cannot be attributed to it): \
                 {}\n",
                host_wide.join("; ")
            ));
        }
        out
    }

    pub fn json(&self) -> serde_json::Value {
        let plan = &self.plan;
        json!({
            "result": self.result,
            "duration_secs": plan.duration.as_secs_f64(),
            "baseline_secs": plan.baseline.as_secs_f64(),
            "interval_secs": plan.interval.as_secs_f64(),
            "metrics": plan.watch.metrics,
            "namespace": plan.watch.namespace,
            "not_attributed": plan.watch.not_attributed(),
            "baseline": self.baseline,
            "watched_secs": self.watched_secs,
            "fired_interval": self.fired_interval,
            "fired_after_secs": self.fired_after_secs,
            "restored_after_secs": self.restored_after_secs,
            "fired": self.fired,
            "rollback_error": self.rollback_error,
        })
    }
}
