//! `experiment search`: find the best configuration by measurement, since
//! a static profile is not always best (on a veth testbed, RPS steered to
//! the receiving application's CPU beats spreading it over all CPUs).
//!
//! Candidates are plans over the dimensions the target can change: RPS
//! (off, all CPUs, the NIC's node, the application's CPUs, all but the
//! application's), RFS (off, on), XPS (off, one CPU per queue), IRQ
//! layouts (spread, onto the application's CPUs, away from them),
//! coalescing (0, 50 us, adaptive), per-NAPI IRQ deferral (the latency
//! profile's, the http profile's, off) and TCP socket buffers (the
//! throughput profile's for the path). Dimensions the target lacks (IRQs
//! and coalescing on veth, NAPIs on a veth without GRO, buffers that
//! already hold the profile's) are skipped and said so; host-wide values
//! (`net.core.rps_sock_flow_entries`) only with `allow_host`.
//!
//! They are measured by successive halving with a third kept (η = 3, as
//! in Hyperband: Li et al., JMLR 18(185), 2018): every candidate briefly,
//! the better third again for twice as long, and so on, each round beside
//! the host as found (the baseline) in shuffled order, so that each
//! candidate is scored by its ratio to a baseline measured moments apart,
//! with the same run length and warm-up. The winner is confirmed against
//! the baseline with repeated full-length runs and the same statistics as
//! `experiment run`.
//!
//! What the rounds cost is what keeps a search cheaper than trying every
//! candidate: a third kept, rather than half, makes about N/2 fewer runs
//! of N candidates, all at the longer lengths, and a short run warms up in proportion to
//! its length (a 1 s run of a search with 4 s runs warms up for a quarter
//! of the warm-up). Neither touches the confirmation, which alone decides
//! what is reported and written: a round only ranks candidates against a
//! baseline run the same way, so what a shorter warm-up leaves in a run
//! is in the baseline's too.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::bench::{self, Bench, Sides};
pub use super::space::{
    candidates, host_only, parse_settings, settings_plan, split_outside_brackets, Candidate,
    Dimension, Remarks, Space, HOST_ONLY_SYSCTLS,
};
use super::stats::{self, Comparison, Rng};
use super::tune::Tuner;
use crate::base::stop::Stop;
use crate::plan::Plan;

/// Each round keeps this share of its candidates: 1 in 3.
const KEEP: usize = 3;

/// Measures one candidate once.
pub trait Trial {
    fn measure(&mut self, candidate: &Candidate, duration: Duration) -> anyhow::Result<f64>;
}

/// What a search tells while it runs.
pub trait Watch {
    fn measured(&mut self, round: usize, candidate: &str, duration: Duration, value: f64);
    fn round_done(&mut self, round: &Round);
}

/// The schedule of a search.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Schedule {
    /// The first round's runs; each round doubles it up to `last`.
    #[serde(with = "crate::bench::secs")]
    pub first: Duration,
    #[serde(with = "crate::bench::secs")]
    pub last: Duration,
    /// Runs of the winner and the baseline to confirm the result.
    pub confirm: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Round {
    pub round: usize,
    pub duration_s: f64,
    pub baseline: f64,
    /// (candidate, value, ratio to this round's baseline), best first.
    pub scores: Vec<(String, f64, f64)>,
    /// Candidates kept for the next round.
    pub kept: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Found {
    pub rounds: Vec<Round>,
    /// Index into the candidates.
    pub winner: usize,
    pub winner_name: String,
    pub baseline_runs: Vec<f64>,
    pub winner_runs: Vec<f64>,
    /// Winner against the baseline over the confirmation runs.
    pub comparison: Comparison,
}

/// Successive halving (a third kept) over `candidates` (index 0 is the
/// baseline), then a confirmation of the winner against the baseline.
pub fn halve(
    candidates: &[Candidate],
    schedule: &Schedule,
    trial: &mut dyn Trial,
    rng: &mut Rng,
    watch: &mut dyn Watch,
) -> anyhow::Result<Found> {
    if candidates.len() < 2 {
        anyhow::bail!(
            "nothing to search: every candidate equals the host as found (the dimensions to \
             search are skipped here, or already hold every value tried)"
        );
    }
    let mut alive: Vec<usize> = (1..candidates.len()).collect();
    let mut log_ratio = vec![0.0f64; candidates.len()];
    let mut measured = vec![0u32; candidates.len()];
    let mut duration = schedule.first.min(schedule.last);
    let mut rounds = Vec::new();
    while alive.len() > 1 || rounds.is_empty() {
        let number = rounds.len() + 1;
        let mut order: Vec<usize> = alive.clone();
        order.push(0);
        rng.shuffle(&mut order);
        let mut values = vec![0.0f64; candidates.len()];
        for &i in &order {
            let v = trial.measure(&candidates[i], duration)?;
            watch.measured(number, &candidates[i].name, duration, v);
            values[i] = v;
        }
        let base = values[0];
        if base <= 0.0 {
            anyhow::bail!("the baseline measured nothing in round {number}");
        }
        for &i in &alive {
            log_ratio[i] += (values[i].max(f64::MIN_POSITIVE) / base).ln();
            measured[i] += 1;
        }
        // Score: the geometric mean of a candidate's ratios so far.
        let score = |i: usize| log_ratio[i] / f64::from(measured[i].max(1));
        alive.sort_by(|a, b| score(*b).total_cmp(&score(*a)));
        let keep = alive.len().div_ceil(KEEP).max(1);
        let round = Round {
            round: number,
            duration_s: duration.as_secs_f64(),
            baseline: base,
            scores: alive
                .iter()
                .map(|&i| (candidates[i].name.clone(), values[i], values[i] / base))
                .collect(),
            kept: alive[..keep]
                .iter()
                .map(|&i| candidates[i].name.clone())
                .collect(),
        };
        watch.round_done(&round);
        rounds.push(round);
        alive.truncate(keep);
        duration = (duration * 2).min(schedule.last);
    }
    let winner = alive[0];
    let mut baseline_runs = Vec::new();
    let mut winner_runs = Vec::new();
    let confirm = rounds.len() + 1;
    for _ in 0..schedule.confirm {
        let mut pair = [0usize, winner];
        rng.shuffle(&mut pair);
        for i in pair {
            let v = trial.measure(&candidates[i], schedule.last)?;
            watch.measured(confirm, &candidates[i].name, schedule.last, v);
            if i == 0 {
                baseline_runs.push(v);
            } else {
                winner_runs.push(v);
            }
        }
    }
    let comparison = stats::compare(&baseline_runs, &winner_runs, rng);
    Ok(Found {
        rounds,
        winner,
        winner_name: candidates[winner].name.clone(),
        baseline_runs,
        winner_runs,
        comparison,
    })
}

/// The real trial: apply the candidate (journaled), run the bench, roll
/// back.
pub struct Measured<'a> {
    pub tuner: &'a Tuner,
    pub bench: &'a Bench,
    pub sides: &'a Sides,
    pub stop: &'a Stop,
    /// The confirmation's run length (the schedule's `last`): a shorter
    /// run warms up for its share of the bench's warm-up.
    pub full: Duration,
    /// Runs that failed and were made again (a search makes many short
    /// runs; on a loaded host one may measure nothing): the reasons.
    pub retried: Vec<String>,
}

impl Measured<'_> {
    fn once(&self, candidate: &Candidate, duration: Duration) -> anyhow::Result<f64> {
        let opts = crate::plan::saved::options(&candidate.plan);
        let tuned = self
            .tuner
            .apply_plan(&candidate.plan, &opts)
            .map_err(|e| e.context(format!("applying candidate '{}'", candidate.name)))?;
        let share = if self.full.is_zero() {
            1.0
        } else {
            (duration.as_secs_f64() / self.full.as_secs_f64()).min(1.0)
        };
        let outcome = bench::run(
            &self.bench.with_run(duration, share),
            self.sides,
            self.stop,
            &mut || {},
        );
        tuned.restore()?;
        Ok(outcome
            .map_err(|e| e.context(format!("measuring candidate '{}'", candidate.name)))?
            .value)
    }
}

impl Trial for Measured<'_> {
    fn measure(&mut self, candidate: &Candidate, duration: Duration) -> anyhow::Result<f64> {
        if self.stop.is_set() {
            anyhow::bail!("interrupted");
        }
        let first = self.once(candidate, duration);
        if self.stop.is_set() {
            anyhow::bail!("interrupted");
        }
        match first {
            Ok(v) => Ok(v),
            // A run that could not even apply or restore is not retried.
            Err(e) if !format!("{e:#}").contains("measuring candidate") => Err(e),
            Err(e) => {
                self.retried.push(crate::error::message(&e));
                let again = self.once(candidate, duration);
                if self.stop.is_set() {
                    anyhow::bail!("interrupted");
                }
                again.map_err(|e| e.context("made twice, failed twice"))
            }
        }
    }
}

/// The winner as a plan to save: where it was made, and why each value.
pub fn winning_plan(candidate: &Candidate, found: &Found, bench: &Bench, tuner: &Tuner) -> Plan {
    let c = &found.comparison;
    let why = format!(
        "{} {} over the host as found ({} runs each), bench '{}'",
        c.text(),
        bench.metric(),
        found.winner_runs.len(),
        bench.name
    );
    let mut plan = candidate.plan.clone();
    for change in &mut plan.changes {
        change.reason = format!("{}: {why}", change.reason);
    }
    plan.made_for = Some(tuner.made_for());
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(name: &str) -> Candidate {
        Candidate {
            name: name.to_string(),
            plan: Plan::custom(vec![0, 1], vec!["veth0".to_string()], Vec::new()),
        }
    }

    /// A bench whose rate depends on the candidate (a known best) plus noise.
    struct Fake {
        rng: Rng,
        noise: f64,
        seconds: f64,
    }

    impl Trial for Fake {
        fn measure(&mut self, c: &Candidate, d: Duration) -> anyhow::Result<f64> {
            self.seconds += d.as_secs_f64();
            let truth = match c.name.as_str() {
                "current" => 100_000.0,
                "best" => 137_000.0,
                "good" => 117_000.0,
                "bad" => 80_000.0,
                other => 100_000.0 + other.len() as f64 * 100.0,
            };
            Ok(self.rng.normal(truth, truth * self.noise))
        }
    }

    struct Quiet;
    impl Watch for Quiet {
        fn measured(&mut self, _: usize, _: &str, _: Duration, _: f64) {}
        fn round_done(&mut self, _: &Round) {}
    }

    #[test]
    fn halving_finds_the_known_best_and_confirms_it() {
        let mut names = vec!["current", "bad", "good", "best"];
        names.extend(["a1", "a22", "a333", "a4444", "a55555", "a666666"]);
        let cands: Vec<Candidate> = names.iter().map(|n| candidate(n)).collect();
        let schedule = Schedule {
            first: Duration::from_secs(1),
            last: Duration::from_secs(4),
            confirm: 5,
        };
        for seed in 0..10 {
            let mut fake = Fake {
                rng: Rng::new(seed),
                noise: 0.03,
                seconds: 0.0,
            };
            let found = halve(
                &cands,
                &schedule,
                &mut fake,
                &mut Rng::new(seed + 100),
                &mut Quiet,
            )
            .expect("search");
            assert_eq!(found.winner_name, "best", "seed {seed}: {:?}", found.rounds);
            assert_eq!(found.comparison.verdict, stats::Verdict::Better);
            assert!(
                (found.comparison.ratio - 1.37).abs() < 0.06,
                "{:?}",
                found.comparison
            );
            // A third of 9 candidates kept each round: 9 -> 3 -> 1.
            assert_eq!(found.rounds.len(), 2);
            assert_eq!(found.rounds[0].kept.len(), 3);
            // Brief first: far less time than measuring all at full length.
            assert!(fake.seconds < 9.0 * 4.0 * 5.0, "{}", fake.seconds);
        }
    }

    #[test]
    fn a_search_with_only_the_baseline_is_refused() {
        let mut fake = Fake {
            rng: Rng::new(1),
            noise: 0.0,
            seconds: 0.0,
        };
        let schedule = Schedule {
            first: Duration::from_secs(1),
            last: Duration::from_secs(1),
            confirm: 3,
        };
        let err = halve(
            &[candidate("current")],
            &schedule,
            &mut fake,
            &mut Rng::new(1),
            &mut Quiet,
        )
        .expect_err("nothing to search");
        assert!(err.to_string().contains("nothing to search"));
    }
}
