//! What `bench http` brings back and prints: per-thread results merged
//! after join, and the report in the article's twrk layout (wrk's, with a
//! Min column and p99.99) or as JSON.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::LoadConfig;
use crate::bench::harness::Ended;
use crate::bench::latency::{Latency, LatencySummary};

/// Responses by status code, 100..=999.
#[derive(Debug, Clone)]
pub struct StatusCounts {
    counts: Vec<u64>,
}

impl Default for StatusCounts {
    fn default() -> Self {
        StatusCounts {
            counts: vec![0; 900],
        }
    }
}

impl StatusCounts {
    #[inline]
    pub fn count(&mut self, status: u16) {
        if let Some(n) = self.counts.get_mut(usize::from(status).wrapping_sub(100)) {
            *n += 1;
        }
    }

    fn add(&mut self, other: &StatusCounts) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    fn codes(&self) -> BTreeMap<String, u64> {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| ((i + 100).to_string(), *n))
            .collect()
    }
}

/// Socket errors, all counted, never hidden.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketErrors {
    /// Connections refused, reset or not established within --timeout.
    pub connect: u64,
    /// recv failures, and connections closed with responses outstanding.
    pub read: u64,
    /// send failures.
    pub write: u64,
    /// Requests without a response after --timeout (connection reopened).
    pub timeout: u64,
    /// Responses that could not be parsed (connection reopened).
    pub protocol: u64,
    /// The first protocol error, to say what was wrong.
    pub first_protocol_error: Option<String>,
}

impl SocketErrors {
    pub fn note_protocol(&mut self, why: &str) {
        self.protocol += 1;
        if self.first_protocol_error.is_none() {
            self.first_protocol_error = Some(why.to_string());
        }
    }

    fn add(&mut self, other: &SocketErrors) {
        self.connect += other.connect;
        self.read += other.read;
        self.write += other.write;
        self.timeout += other.timeout;
        self.protocol += other.protocol;
        if self.first_protocol_error.is_none() {
            self.first_protocol_error
                .clone_from(&other.first_protocol_error);
        }
    }
}

/// What one load thread brings back (only what happened after warm-up).
#[derive(Clone, Default)]
pub struct ThreadStats {
    pub cpu: Option<u32>,
    pub connections: usize,
    pub requests: u64,
    pub bytes: u64,
    /// From the scheduled send time (open loop) or the send (closed loop).
    pub latency: Latency,
    /// Open loop only: from the actual send.
    pub uncorrected: Option<Latency>,
    /// Requests per second of this thread, one sample per 100 ms.
    pub rate_samples: Vec<f64>,
    pub statuses: StatusCounts,
    pub errors: SocketErrors,
    /// Open loop: requests due but not sent when the run stopped.
    pub unsent_at_end: u64,
}

/// Latency percentiles plus wrk's "+/- Stdev" (share within one stdev).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencyReport {
    #[serde(flatten)]
    pub summary: LatencySummary,
    pub within_stdev_pct: f64,
}

impl LatencyReport {
    fn from(latency: &Latency) -> LatencyReport {
        let summary = latency.summary();
        let within = latency.share_within(
            summary.mean_us - summary.stdev_us,
            summary.mean_us + summary.stdev_us,
        );
        LatencyReport {
            summary,
            within_stdev_pct: 100.0 * within,
        }
    }
}

/// Statistics of the per-thread Req/Sec samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleStats {
    pub samples: usize,
    pub mean: f64,
    pub stdev: f64,
    pub min: f64,
    pub max: f64,
    pub within_stdev_pct: f64,
}

impl SampleStats {
    fn of(samples: &[f64]) -> SampleStats {
        if samples.is_empty() {
            return SampleStats::default();
        }
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let stdev = if samples.len() > 1 {
            (samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        let within = samples
            .iter()
            .filter(|s| (mean - stdev..=mean + stdev).contains(s))
            .count();
        SampleStats {
            samples: samples.len(),
            mean,
            stdev,
            min: samples.iter().copied().fold(f64::INFINITY, f64::min),
            max: samples.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            within_stdev_pct: 100.0 * within as f64 / n,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadLine {
    pub thread: usize,
    pub cpu: Option<u32>,
    pub connections: usize,
    pub requests: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadReport {
    pub command: String,
    pub url: String,
    pub threads: usize,
    pub connections: usize,
    pub pipeline: u32,
    /// "closed" or "open".
    pub mode: String,
    pub rate_rps: Option<u64>,
    /// `duration`, `interrupted` (the stop token) or `workers`.
    pub ended: String,
    pub warmup_s: f64,
    /// The measured time, after the warm-up.
    pub duration_s: f64,
    pub requests: u64,
    pub bytes_read: u64,
    pub requests_per_s: f64,
    pub bytes_per_s: f64,
    /// Closed loop: from each send. Open loop: from each scheduled send
    /// (corrected for coordinated omission).
    pub latency: LatencyReport,
    /// Open loop only: from each actual send.
    pub latency_uncorrected: Option<LatencyReport>,
    /// Closed loop only: `latency` corrected after the fact the way wrk
    /// corrects its own (every sample longer than the expected interval,
    /// connections / requests per second, also counts for the requests
    /// that would have been sent meanwhile), for comparing with wrk.
    pub latency_wrk_corrected: Option<LatencyReport>,
    /// The expected interval of that correction, microseconds.
    pub wrk_interval_us: Option<f64>,
    pub requests_per_s_per_thread: SampleStats,
    pub status_codes: BTreeMap<String, u64>,
    /// Responses outside 200-299.
    pub non_2xx: u64,
    pub errors: SocketErrors,
    /// Open loop: requests due but not sent at the end (the server or this
    /// generator fell behind the rate).
    pub unsent_at_end: Option<u64>,
    pub per_thread: Vec<ThreadLine>,
}

pub fn build(
    args: &LoadConfig,
    ended: Ended,
    measured: Duration,
    results: Vec<ThreadStats>,
) -> LoadReport {
    let secs = measured.as_secs_f64();
    let mut latency = Latency::new();
    let mut uncorrected = args.rate.map(|_| Latency::new());
    let mut statuses = StatusCounts::default();
    let mut errors = SocketErrors::default();
    let mut samples = Vec::new();
    for r in &results {
        latency.merge(&r.latency);
        if let (Some(all), Some(mine)) = (&mut uncorrected, &r.uncorrected) {
            all.merge(mine);
        }
        statuses.add(&r.statuses);
        errors.add(&r.errors);
        samples.extend_from_slice(&r.rate_samples);
    }
    let requests: u64 = results.iter().map(|r| r.requests).sum();
    let bytes: u64 = results.iter().map(|r| r.bytes).sum();
    let status_codes = statuses.codes();
    let connections: usize = results.iter().map(|r| r.connections).sum();
    let wrk_interval = (args.rate.is_none() && requests > 0 && secs > 0.0)
        .then(|| Duration::from_secs_f64(secs * connections as f64 / requests as f64));
    let wrk_corrected = wrk_interval.and_then(|i| latency.corrected(i));
    let ok: u64 = statuses.counts[100..200].iter().sum();
    let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    LoadReport {
        command: "http".to_string(),
        url: args.url.text.clone(),
        threads: results.len(),
        connections,
        pipeline: args.pipeline,
        mode: if args.rate.is_some() {
            "open"
        } else {
            "closed"
        }
        .to_string(),
        rate_rps: args.rate,
        ended: ended.name().to_string(),
        warmup_s: args.warmup.as_secs_f64(),
        duration_s: secs,
        requests,
        bytes_read: bytes,
        requests_per_s: per_s(requests),
        bytes_per_s: per_s(bytes),
        latency: LatencyReport::from(&latency),
        latency_uncorrected: uncorrected.as_ref().map(LatencyReport::from),
        latency_wrk_corrected: wrk_corrected.as_ref().map(LatencyReport::from),
        wrk_interval_us: wrk_corrected
            .as_ref()
            .and(wrk_interval)
            .map(|i| i.as_secs_f64() * 1e6),
        requests_per_s_per_thread: SampleStats::of(&samples),
        status_codes,
        non_2xx: requests.saturating_sub(ok),
        errors,
        unsent_at_end: args
            .rate
            .map(|_| results.iter().map(|r| r.unsent_at_end).sum()),
        per_thread: results
            .iter()
            .enumerate()
            .map(|(thread, r)| ThreadLine {
                thread,
                cpu: r.cpu,
                connections: r.connections,
                requests: r.requests,
                bytes: r.bytes,
            })
            .collect(),
    }
}

/// wrk's first lines, printed when the run starts.
pub fn running_line(args: &LoadConfig) -> String {
    let mut line = format!(
        "Running {} test @ {}",
        format_seconds(args.duration),
        args.url.text
    );
    if !args.warmup.is_zero() {
        line.push_str(&format!(" after {} warm-up", format_seconds(args.warmup)));
    }
    line.push_str(&format!(
        "\n  {} threads and {} connections",
        args.threads, args.connections
    ));
    if args.pipeline > 1 {
        line.push_str(&format!(", {} pipelined requests each", args.pipeline));
    }
    match args.rate {
        Some(rate) => line.push_str(&format!(
            ", open loop at {rate} req/s (latency from scheduled send times)"
        )),
        None => line.push_str(", closed loop"),
    }
    line
}

fn format_seconds(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}s")
    } else {
        format!("{secs:.2}s")
    }
}

impl LoadReport {
    /// Why this run measured nothing, if it did not: no response came.
    pub fn problem(&self) -> Option<String> {
        (self.requests == 0).then(|| {
            format!(
                "http measured nothing: no response from '{}' in {:.1} s ({} connect, {} read, {} \
                 timeout errors); is the server up and answering?",
                self.url,
                self.duration_s,
                self.errors.connect,
                self.errors.read,
                self.errors.timeout
            )
        })
    }
}

/// The twrk-style report (after the "Running" lines).
pub fn text(r: &LoadReport) -> String {
    let mut t = String::new();
    t.push_str("  Thread Stats   Avg     Stdev       Max       Min   +/- Stdev\n");
    t.push_str(&latency_row("Latency", &r.latency));
    let s = &r.requests_per_s_per_thread;
    t.push_str(&row(
        "Req/Sec",
        [s.mean, s.stdev, s.max, s.min].map(format_metric),
        s.within_stdev_pct,
    ));
    t.push_str("  Latency Distribution\n");
    t.push_str(&distribution(&r.latency.summary));
    if let (Some(c), Some(interval)) = (&r.latency_wrk_corrected, r.wrk_interval_us) {
        t.push_str(&format!(
            "  Latency Distribution, corrected afterwards as wrk does (interval {})\n",
            format_time_us(interval)
        ));
        t.push_str(&distribution(&c.summary));
    }
    if let Some(u) = &r.latency_uncorrected {
        t.push_str("  Uncorrected Latency (from actual send times)\n");
        t.push_str(&latency_row("Latency", u));
        t.push_str(&distribution(&u.summary));
    }
    t.push_str(&format!(
        "  {} requests in {}, {}B read\n",
        r.requests,
        format_time_us(r.duration_s * 1e6),
        format_binary(r.bytes_read as f64)
    ));
    let others: Vec<String> = r
        .status_codes
        .iter()
        .filter(|(code, _)| !code.starts_with('2'))
        .map(|(code, n)| format!("{code}: {n}"))
        .collect();
    t.push_str(&format!("  Non-2xx responses: {}", r.non_2xx));
    if !others.is_empty() {
        t.push_str(&format!(" ({})", others.join(", ")));
    }
    t.push('\n');
    let e = &r.errors;
    t.push_str(&format!(
        "  Socket errors: connect {}, read {}, write {}, timeout {}\n",
        e.connect, e.read, e.write, e.timeout
    ));
    if e.protocol > 0 {
        t.push_str(&format!(
            "  Malformed responses: {} (first: {})\n",
            e.protocol,
            e.first_protocol_error.as_deref().unwrap_or("?")
        ));
    }
    if let Some(unsent) = r.unsent_at_end.filter(|n| *n > 0) {
        t.push_str(&format!(
            "  Behind schedule at the end: {unsent} requests due but not sent\n"
        ));
    }
    if r.ended == "interrupted" {
        t.push_str("  Stopped by Ctrl-C\n");
    }
    t.push_str(&format!("Requests/sec: {:>10.2}\n", r.requests_per_s));
    t.push_str(&format!(
        "Transfer/sec: {:>10}B\n",
        format_binary(r.bytes_per_s)
    ));
    t
}

fn latency_row(name: &str, l: &LatencyReport) -> String {
    let s = &l.summary;
    row(
        name,
        [s.mean_us, s.stdev_us, s.max_us, s.min_us].map(format_time_us),
        l.within_stdev_pct,
    )
}

/// `    Latency   205.32us   36.57us    1.34ms   62.00us   69.36%`: values
/// right-aligned so that their numbers line up whatever the unit's width.
fn row(name: &str, values: [String; 4], within_pct: f64) -> String {
    let mut line = format!("    {name:<10}");
    for (value, width) in values.iter().zip([8, 10, 10, 10]) {
        line.push_str(&units(value, width));
    }
    line.push_str(&format!("{within_pct:8.2}%\n"));
    line
}

/// wrk's print_units: a unit of one or two letters takes the place of the
/// two-space pad that follows a bare number.
fn units(value: &str, width: usize) -> String {
    let letters = value
        .bytes()
        .rev()
        .take(2)
        .filter(u8::is_ascii_alphabetic)
        .count();
    let pad = 2 - letters;
    format!("{value:>w$}{}", &"  "[..pad], w = width - pad)
}

fn distribution(s: &LatencySummary) -> String {
    [
        (50.0, s.p50_us),
        (90.0, s.p90_us),
        (99.0, s.p99_us),
        (99.9, s.p999_us),
        (99.99, s.p9999_us),
    ]
    .iter()
    .map(|(p, us)| format!("  {p:5.2}%{}\n", units(&format_time_us(*us), 10)))
    .collect()
}

/// `205.32us`, `1.34ms`, `5.00s`, `1.50m`.
pub fn format_time_us(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.2}us")
    } else if us < 1e6 {
        format!("{:.2}ms", us / 1e3)
    } else if us < 60e6 {
        format!("{:.2}s", us / 1e6)
    } else {
        format!("{:.2}m", us / 60e6)
    }
}

/// `205.46`, `74.80k`, `1.19M`.
pub fn format_metric(n: f64) -> String {
    if n < 1e3 {
        format!("{n:.2}")
    } else if n < 1e6 {
        format!("{:.2}k", n / 1e3)
    } else if n < 1e9 {
        format!("{:.2}M", n / 1e6)
    } else {
        format!("{:.2}G", n / 1e9)
    }
}

/// `264.55M` (then printed with a `B`), base 1024.
pub fn format_binary(n: f64) -> String {
    let mut value = n;
    for unit in ["", "K", "M", "G"] {
        if value < 1024.0 {
            return format!("{value:.2}{unit}");
        }
        value /= 1024.0;
    }
    format!("{value:.2}T")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_line_up_like_the_articles_twrk_output() {
        // The DPDK run in "Linux Kernel vs DPDK: HTTP Performance Showdown".
        let latency = row(
            "Latency",
            [205.32, 36.57, 1340.0, 62.0].map(format_time_us),
            69.36,
        );
        assert_eq!(
            latency,
            "    Latency   205.32us   36.57us    1.34ms   62.00us   69.36%\n"
        );
        let rate = row(
            "Req/Sec",
            [74_800.0, 1_810.0, 77_850.0, 69_060.0].map(format_metric),
            73.85,
        );
        assert_eq!(
            rate,
            "    Req/Sec    74.80k     1.81k    77.85k    69.06k    73.85%\n"
        );
        // A bare number (stdev under 1000) keeps the two-space pad.
        let rate = row(
            "Req/Sec",
            [22_480.0, 205.46, 23_100.0, 21_830.0].map(format_metric),
            68.62,
        );
        assert_eq!(
            rate,
            "    Req/Sec    22.48k   205.46     23.10k    21.83k    68.62%\n"
        );
    }

    #[test]
    fn distribution_lines_match_twrk() {
        let s = LatencySummary {
            p50_us: 204.0,
            p90_us: 252.0,
            p99_us: 297.0,
            p999_us: 350.0,
            p9999_us: 403.0,
            ..LatencySummary::default()
        };
        assert_eq!(
            distribution(&s),
            "  50.00%  204.00us\n  90.00%  252.00us\n  99.00%  297.00us\n  99.90%  350.00us\n  99.99%  403.00us\n"
        );
    }

    #[test]
    fn units_scale() {
        assert_eq!(format_time_us(2_500_000.0), "2.50s");
        assert_eq!(format_binary(882.04 * 1024.0 * 1024.0), "882.04M");
        assert_eq!(format_binary(512.0), "512.00");
        assert_eq!(format_metric(1_190_822.8), "1.19M");
    }

    #[test]
    fn sample_stats_and_status_classes() {
        let s = SampleStats::of(&[10.0, 20.0, 30.0]);
        assert_eq!((s.mean, s.min, s.max, s.samples), (20.0, 10.0, 30.0, 3));
        assert!((s.stdev - 10.0).abs() < 1e-9);
        assert!((s.within_stdev_pct - 100.0).abs() < 1e-9);
        let mut codes = StatusCounts::default();
        for status in [200, 200, 404, 503, 42] {
            codes.count(status);
        }
        let map = codes.codes();
        assert_eq!(map.get("200"), Some(&2));
        assert_eq!(map.get("404"), Some(&1));
        assert_eq!(map.len(), 3, "a code outside 100-999 is not a status");
    }
}
