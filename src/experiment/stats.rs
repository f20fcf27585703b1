//! Statistics of an experiment: per cell the median, min/max and a
//! bootstrap 95% confidence interval; per cell against the first config the
//! ratio of medians with its bootstrap interval, and a verdict in the
//! manner of criterion.rs: better or worse only when the interval lies
//! wholly on one side of 1 and the change is beyond the noise threshold;
//! otherwise no difference at this noise, with a warning and the number
//! of repeats needed when the interval is too wide to decide.
//!
//! Medians, not means: one run hit by a noisy neighbour moves a mean but
//! not a median. The bootstrap (resampling each config's runs with
//! replacement, 10,000 times) needs no assumption about the distribution
//! of the runs. The random numbers come from a seeded generator, so the
//! same runs and seed give the same intervals.

use serde::{Deserialize, Serialize};

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 10_000;
/// Changes smaller than this (1%) are "no difference" even when the
/// interval excludes 1 (criterion's noise threshold).
pub const NOISE: f64 = 0.01;
/// An interval that reaches beyond ±5% while the verdict is "no
/// difference" cannot tell a 5% change from none: warn, with the repeats
/// that would narrow it to ±5%.
pub const RESOLUTION: f64 = 0.05;
/// Fewer runs than this give no interval worth the name.
pub const MIN_RUNS: usize = 3;

/// SplitMix64: small, fast and good enough for resampling and shuffling;
/// seeded, so results can be reproduced.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// A normal deviate (Box-Muller), for tests and fakes.
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// The median of `xs` (0 when empty).
pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(f64::total_cmp);
    median_sorted(&v)
}

fn median_sorted(v: &[f64]) -> f64 {
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The median of a resample of `xs` (with replacement), using `buf`.
fn resampled_median(xs: &[f64], rng: &mut Rng, buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    buf.extend((0..xs.len()).map(|_| xs[rng.below(xs.len())]));
    buf.sort_by(f64::total_cmp);
    median_sorted(buf)
}

/// The 2.5th and 97.5th percentiles of `values` (sorted in place).
fn interval(values: &mut [f64]) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    (at(0.025), at(0.975))
}

/// One cell's runs, summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// Standard deviation over the mean: the run-to-run spread.
    pub cv: f64,
    /// Bootstrap 95% interval of the median.
    pub ci_low: f64,
    pub ci_high: f64,
}

pub fn summarize(xs: &[f64], rng: &mut Rng) -> Summary {
    let n = xs.len();
    let mean = if n == 0 {
        0.0
    } else {
        xs.iter().sum::<f64>() / n as f64
    };
    let var = if n > 1 {
        xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    let (ci_low, ci_high) = if n == 0 {
        (0.0, 0.0)
    } else {
        let mut buf = Vec::with_capacity(n);
        let mut medians: Vec<f64> = (0..RESAMPLES)
            .map(|_| resampled_median(xs, rng, &mut buf))
            .collect();
        interval(&mut medians)
    };
    Summary {
        n,
        median: median(xs),
        min: if n == 0 {
            0.0
        } else {
            xs.iter().copied().fold(f64::INFINITY, f64::min)
        },
        max: xs.iter().copied().fold(0.0, f64::max),
        mean,
        cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
        ci_low,
        ci_high,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The config everything is compared to.
    Reference,
    Better,
    Worse,
    /// No difference this noise can show.
    NoDifference,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Reference => "reference",
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoDifference => "no difference",
        }
    }
}

/// A cell against the reference config's cell of the same bench.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Median over the reference's median.
    pub ratio: f64,
    /// Bootstrap 95% interval of the ratio; null with too few runs.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub verdict: Verdict,
    /// Why the verdict cannot be trusted to decide, if it cannot.
    pub warning: Option<String>,
    /// The repeats that would narrow the interval to ±5%, when it is wider.
    pub repeats_needed: Option<usize>,
}

impl Comparison {
    /// "+48%, 95% CI +40%..+55%", or the change alone with too few runs.
    pub fn text(&self) -> String {
        match (self.ci_low, self.ci_high) {
            (Some(lo), Some(hi)) => format!(
                "{}, 95% CI {}..{}",
                percent(self.ratio),
                percent(lo),
                percent(hi)
            ),
            _ => format!("{}, too few runs for an interval", percent(self.ratio)),
        }
    }

    pub fn reference() -> Comparison {
        Comparison {
            ratio: 1.0,
            ci_low: Some(1.0),
            ci_high: Some(1.0),
            verdict: Verdict::Reference,
            warning: None,
            repeats_needed: None,
        }
    }
}

/// `other` against `reference` (higher is better).
pub fn compare(reference: &[f64], other: &[f64], rng: &mut Rng) -> Comparison {
    let (base, mid) = (median(reference), median(other));
    let ratio = if base > 0.0 { mid / base } else { 0.0 };
    let n = reference.len().min(other.len());
    if n < MIN_RUNS || base <= 0.0 {
        return Comparison {
            ratio,
            ci_low: None,
            ci_high: None,
            verdict: Verdict::NoDifference,
            warning: Some(format!(
                "{n} run(s) per config give no confidence interval; repeat at least {MIN_RUNS} \
                 times (--repeat 5 is a good start)"
            )),
            repeats_needed: Some(5),
        };
    }
    let mut buf = Vec::with_capacity(n);
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let b = resampled_median(reference, rng, &mut buf);
            let o = resampled_median(other, rng, &mut buf);
            if b > 0.0 {
                o / b
            } else {
                f64::INFINITY
            }
        })
        .collect();
    let (ci_low, ci_high) = interval(&mut ratios);
    let verdict = if ci_low > 1.0 && ratio > 1.0 + NOISE {
        Verdict::Better
    } else if ci_high < 1.0 && ratio < 1.0 - NOISE {
        Verdict::Worse
    } else {
        Verdict::NoDifference
    };
    let (mut warning, mut repeats_needed) = (None, None);
    if verdict == Verdict::NoDifference && (ci_low < 1.0 - RESOLUTION || ci_high > 1.0 + RESOLUTION)
    {
        let half = (ci_high - ci_low) / 2.0;
        let needed = (n as f64 * (half / RESOLUTION).powi(2)).ceil() as usize;
        let needed = needed.clamp(n + 1, 1000);
        warning = Some(format!(
            "the runs spread too much to decide: the 95% interval of the ratio is {} to {}, so a \
             change of 5% could hide in it; about {needed} repeats would narrow it to ±5% (or \
             quiet the host)",
            percent(ci_low),
            percent(ci_high)
        ));
        repeats_needed = Some(needed);
    }
    Comparison {
        ratio,
        ci_low: ci_low.is_finite().then_some(ci_low),
        ci_high: ci_high.is_finite().then_some(ci_high),
        verdict,
        warning,
        repeats_needed,
    }
}

/// A ratio as a signed change: 1.48 -> "+48%", 0.92 -> "-8%".
pub fn percent(ratio: f64) -> String {
    if !ratio.is_finite() {
        return "?".to_string();
    }
    let p = (ratio - 1.0) * 100.0;
    if p.abs() < 9.95 {
        format!("{p:+.1}%")
    } else {
        format!("{p:+.0}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(rng: &mut Rng, n: usize, mean: f64, cv: f64) -> Vec<f64> {
        (0..n).map(|_| rng.normal(mean, mean * cv)).collect()
    }

    #[test]
    fn medians_and_summaries() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let s = summarize(&[10.0, 12.0, 11.0, 9.0, 30.0], &mut Rng::new(1));
        assert_eq!((s.median, s.min, s.max, s.n), (11.0, 9.0, 30.0, 5));
        assert!(s.ci_low <= 11.0 && s.ci_high >= 11.0);
    }

    #[test]
    fn a_real_ten_percent_difference_is_found() {
        let mut rng = Rng::new(42);
        let mut found = 0;
        for _ in 0..50 {
            let base = draw(&mut rng, 5, 100_000.0, 0.02);
            let better = draw(&mut rng, 5, 110_000.0, 0.02);
            let c = compare(&base, &better, &mut rng);
            assert!(c.verdict != Verdict::Worse, "{c:?}");
            if c.verdict == Verdict::Better {
                found += 1;
                let (lo, hi) = (c.ci_low.expect("low"), c.ci_high.expect("high"));
                assert!(lo > 1.0 && lo < 1.1 && hi > 1.1 - 0.05, "{c:?}");
            }
            let worse = compare(&better, &base, &mut rng);
            assert!(worse.verdict != Verdict::Better, "{worse:?}");
        }
        assert!(found >= 48, "found the difference in {found} of 50");
    }

    #[test]
    fn identical_distributions_are_called_no_difference() {
        let mut rng = Rng::new(7);
        let mut called = 0;
        for _ in 0..200 {
            let a = draw(&mut rng, 5, 100_000.0, 0.03);
            let b = draw(&mut rng, 5, 100_000.0, 0.03);
            if compare(&a, &b, &mut rng).verdict != Verdict::NoDifference {
                called += 1;
            }
        }
        // A 95% interval errs about 5% of the time; the noise threshold
        // takes some of those back.
        assert!(
            called <= 12,
            "{called} of 200 identical pairs called different"
        );
    }

    #[test]
    fn wide_spread_warns_with_the_repeats_needed() {
        let mut rng = Rng::new(3);
        let a = draw(&mut rng, 5, 100_000.0, 0.25);
        let b = draw(&mut rng, 5, 100_000.0, 0.25);
        let c = compare(&a, &b, &mut rng);
        assert_eq!(c.verdict, Verdict::NoDifference, "{c:?}");
        let needed = c.repeats_needed.expect("repeats needed");
        assert!(needed > 5, "{needed}");
        assert!(c.warning.expect("warning").contains("repeats"));
        let few = compare(&[1.0, 2.0], &[3.0, 4.0], &mut rng);
        assert_eq!(few.verdict, Verdict::NoDifference);
        assert!(few.warning.expect("warning").contains("at least 3"));
    }

    #[test]
    fn same_seed_same_intervals_and_shuffles_are_permutations() {
        let xs = [1.0, 5.0, 3.0, 8.0, 2.0];
        let ys = [2.0, 6.0, 4.0, 9.0, 3.0];
        let a = compare(&xs, &ys, &mut Rng::new(9));
        let b = compare(&xs, &ys, &mut Rng::new(9));
        assert_eq!(a, b);
        let mut v: Vec<u32> = (0..10).collect();
        Rng::new(5).shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_eq!(percent(1.48), "+48%");
        assert_eq!(percent(0.92), "-8.0%");
    }
}
