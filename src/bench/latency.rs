//! Latency histograms: one HDR histogram per thread, merged after join
//! (never shared through atomics on the hot path).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Longest latency recorded exactly; longer ones are clamped to it (and
/// still counted), so one pathological sample cannot abort a run.
const MAX_NS: u64 = 100_000_000_000;
/// 3 significant digits: 0.1% resolution at every scale.
const SIGNIFICANT_DIGITS: u8 = 3;

#[derive(Clone)]
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

impl Latency {
    pub fn new() -> Latency {
        // 1 ns .. 100 s at 3 digits: bounds are constants, so this cannot fail.
        #[allow(clippy::expect_used)]
        let hist = Histogram::new_with_bounds(1, MAX_NS, SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        Latency { hist }
    }

    pub fn record(&mut self, latency: Duration) {
        self.record_ns(u64::try_from(latency.as_nanos()).unwrap_or(MAX_NS));
    }

    pub fn record_ns(&mut self, ns: u64) {
        self.hist.saturating_record(ns.clamp(1, MAX_NS));
    }

    /// Fold another thread's histogram into this one.
    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides: add cannot fail; saturate if it ever did.
        if self.hist.add(&other.hist).is_err() {
            for v in other.hist.iter_recorded() {
                self.hist
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// wrk's after-the-fact coordinated-omission correction: each sample
    /// longer than `expected_interval` also stands for the requests that
    /// would have been sent while it waited (v - i, v - 2i, ... down to i).
    /// `None` when that would mean more than 100 million extra records.
    pub fn corrected(&self, expected_interval: Duration) -> Option<Latency> {
        let interval = u64::try_from(expected_interval.as_nanos())
            .unwrap_or(MAX_NS)
            .max(1);
        let work: u64 = self
            .hist
            .iter_recorded()
            .map(|v| v.value_iterated_to() / interval)
            .fold(0u64, u64::saturating_add);
        if work > 100_000_000 {
            return None;
        }
        Some(Latency {
            hist: self.hist.clone_correct(interval),
        })
    }

    /// Share of the samples (0..=1) between `low_us` and `high_us`
    /// inclusive, e.g. wrk's "+/- Stdev" column (mean +/- one stdev).
    pub fn share_within(&self, low_us: f64, high_us: f64) -> f64 {
        if self.hist.is_empty() {
            return 0.0;
        }
        let low_ns = (low_us * 1000.0).max(0.0) as u64;
        let high_ns = (high_us * 1000.0).max(0.0) as u64;
        let inside: u64 = self
            .hist
            .iter_recorded()
            .filter(|v| (low_ns..=high_ns).contains(&v.value_iterated_to()))
            .map(|v| v.count_at_value())
            .sum();
        inside as f64 / self.hist.len() as f64
    }

    pub fn summary(&self) -> LatencySummary {
        let us = |ns: f64| ns / 1000.0;
        let q = |p: f64| us(self.hist.value_at_quantile(p) as f64);
        if self.hist.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.hist.len(),
            min_us: us(self.hist.min() as f64),
            mean_us: us(self.hist.mean()),
            stdev_us: us(self.hist.stdev()),
            p50_us: q(0.50),
            p90_us: q(0.90),
            p99_us: q(0.99),
            p999_us: q(0.999),
            p9999_us: q(0.9999),
            max_us: us(self.hist.max() as f64),
        }
    }
}

/// Percentiles in microseconds. `count` 0 means no samples (all zero).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_ordered_and_merge_adds_counts() {
        let mut a = Latency::new();
        let mut b = Latency::new();
        for i in 1..=1000u64 {
            a.record_ns(i * 1000);
        }
        b.record(Duration::from_millis(200));
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 1001);
        assert!(s.min_us <= s.p50_us && s.p50_us <= s.p90_us && s.p90_us <= s.p99_us);
        assert!(s.p99_us <= s.p999_us && s.p999_us <= s.p9999_us && s.p9999_us <= s.max_us);
        // The median of 1..1000 us plus one 200 ms sample is the 501st value
        // (0.1% resolution).
        assert!((s.p50_us - 501.0).abs() / 501.0 < 0.001, "{s:?}");
        assert!((s.max_us - 200_000.0).abs() / 200_000.0 < 0.001, "{s:?}");
    }

    #[test]
    fn share_within_counts_the_samples_in_a_band() {
        let mut l = Latency::new();
        for us in [100u64, 200, 300, 10_000] {
            l.record_ns(us * 1000);
        }
        assert!((l.share_within(150.0, 350.0) - 0.5).abs() < 1e-9);
        assert!((l.share_within(0.0, 1e9) - 1.0).abs() < 1e-9);
        assert_eq!(Latency::new().share_within(0.0, 1.0), 0.0);
    }

    #[test]
    fn after_the_fact_correction_fills_in_the_missed_samples() {
        let mut l = Latency::new();
        for _ in 0..98 {
            l.record(Duration::from_millis(1));
        }
        // One 10 ms stall with requests expected every 1 ms: 9 more samples
        // (9, 8, ... 1 ms).
        l.record(Duration::from_millis(10));
        let c = l.corrected(Duration::from_millis(1)).expect("small");
        assert_eq!(c.count(), 99 + 9);
        // Mean (99 x 1 + 2 + ... + 10 ms) / 108 against (98 + 10) / 99.
        assert!(
            (c.summary().mean_us - 1416.7).abs() < 5.0,
            "{:?}",
            c.summary()
        );
        l.record(Duration::from_secs(1));
        assert!(
            l.corrected(Duration::from_nanos(1)).is_none(),
            "a billion extra records"
        );
    }

    #[test]
    fn empty_histogram_summarises_to_zero() {
        assert_eq!(Latency::new().summary(), LatencySummary::default());
    }

    #[test]
    fn huge_values_are_clamped_not_lost() {
        let mut l = Latency::new();
        l.record(Duration::from_secs(1000));
        assert_eq!(l.count(), 1);
    }
}
