//! What benchmarks print: rates in the article's format, the final JSON
//! document, and a one-line progress status on a terminal.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Packets and payload bytes over `secs`, in the article's order with the
/// unit of time on every rate: `0.352M pps 10.730MiB/s / 90.010Mbit/s`
/// (millions of packets, MiB of payload and megabits (10^6) of payload per
/// second).
pub fn format_rate(packets: u64, bytes: u64, secs: f64) -> String {
    let (pps, bps) = per_second(packets, bytes, secs);
    format!(
        "{:.3}M pps {:.3}MiB/s / {:.3}Mbit/s",
        pps / 1e6,
        bps / (1024.0 * 1024.0),
        bps * 8.0 / 1e6
    )
}

/// Packets per second as `0.352M`.
pub fn format_mpps(packets: u64, secs: f64) -> String {
    format!("{:.3}M", per_second(packets, 0, secs).0 / 1e6)
}

/// Packets and bytes per second; zero over an empty interval.
pub fn per_second(packets: u64, bytes: u64, secs: f64) -> (f64, f64) {
    if secs <= 0.0 {
        return (0.0, 0.0);
    }
    (packets as f64 / secs, bytes as f64 / secs)
}

/// "s" for counts other than one: `format!("{n} thread{}", plural(n))`.
/// Nanoseconds of CPU per packet; `None` when nothing was counted.
pub fn per_packet_ns(cpu_s: f64, packets: u64) -> Option<f64> {
    (packets > 0).then(|| cpu_s * 1e9 / packets as f64)
}

pub fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Print a final report as pretty JSON on stdout, with a trailing newline.
pub fn print_json<T: Serialize>(report: &T) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, report)?;
    writeln!(out)?;
    Ok(())
}

/// Print one line on stdout, clearing the progress status first so the two
/// do not run into each other on a terminal.
pub fn print_line(progress: &mut Progress, line: &str) -> io::Result<()> {
    progress.clear();
    let mut out = io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}

/// A one-line status on stderr, redrawn in place with `\r`; only when stderr
/// is a terminal (never in a pipe or a log file).
#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    shown: bool,
}

impl Progress {
    /// Enabled when `wanted` and stderr is a terminal.
    pub fn new(wanted: bool) -> Progress {
        Progress {
            enabled: wanted && io::stderr().is_terminal(),
            shown: false,
        }
    }

    pub fn show(&mut self, status: &str) {
        if self.enabled {
            // A status line is best effort: a failed write must not end the run.
            let _ = write!(io::stderr().lock(), "\r{status}\x1b[K");
            self.shown = true;
        }
    }

    pub fn clear(&mut self) {
        if self.shown {
            let _ = write!(io::stderr().lock(), "\r\x1b[K");
            self.shown = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

/// A worker's running totals, published once per batch so the main thread
/// can print per-second rates. Only the owning worker writes (a relaxed store
/// of its own plain counters: no lock, no read-modify-write); each sits on
/// its own cache lines so workers do not slow each other down.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct LiveCounter {
    packets: AtomicU64,
    bytes: AtomicU64,
}

impl LiveCounter {
    #[inline]
    pub fn publish(&self, packets: u64, bytes: u64) {
        self.packets.store(packets, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }

    pub fn read(&self) -> (u64, u64) {
        (
            self.packets.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// Each worker's count since `last` (its running totals' first field),
/// and `last` moved to now: one interval's per-thread counts.
pub fn deltas(live: &[LiveCounter], last: &mut [u64]) -> Vec<u64> {
    live.iter()
        .zip(last.iter_mut())
        .map(|(counter, last)| {
            let now = counter.read().0;
            let delta = now.saturating_sub(*last);
            *last = now;
            delta
        })
        .collect()
}

/// One second of a run, all threads and each thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Interval {
    /// Which second of the run (1 = the first).
    pub second: u64,
    /// Packets in that second, all threads: the packets per second.
    pub packets: u64,
    /// Payload bytes in that second.
    pub bytes: u64,
    /// Packets in that second, per thread (index = thread).
    pub thread_packets: Vec<u64>,
}

impl Interval {
    /// The article's line, then the per-thread rates when there are several
    /// threads (uneven numbers show SO_REUSEPORT hash imbalance).
    pub fn line(&self) -> String {
        let mut line = format_rate(self.packets, self.bytes, 1.0);
        if self.thread_packets.len() > 1 {
            line.push_str("  threads:");
            for packets in &self.thread_packets {
                line.push(' ');
                line.push_str(&format_mpps(*packets, 1.0));
            }
        }
        line
    }
}

/// Turns the workers' running totals into per-second intervals.
#[derive(Debug)]
pub struct IntervalMeter {
    last: Vec<(u64, u64)>,
    pub intervals: Vec<Interval>,
}

impl IntervalMeter {
    pub fn new(threads: usize) -> IntervalMeter {
        IntervalMeter {
            last: vec![(0, 0); threads],
            intervals: Vec::new(),
        }
    }

    /// Record second `second` from the counters now; returns it.
    pub fn tick(&mut self, second: u64, live: &[LiveCounter]) -> &Interval {
        let mut interval = Interval {
            second,
            packets: 0,
            bytes: 0,
            thread_packets: Vec::with_capacity(live.len()),
        };
        for (counter, last) in live.iter().zip(self.last.iter_mut()) {
            let now = counter.read();
            let packets = now.0.saturating_sub(last.0);
            interval.packets += packets;
            interval.bytes += now.1.saturating_sub(last.1);
            interval.thread_packets.push(packets);
            *last = now;
        }
        self.intervals.push(interval);
        &self.intervals[self.intervals.len() - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_matches_the_article_line() {
        // 351,602 packets of 32 bytes in one second: the article's
        // `0.352M pps 10.730MiB / 90.010Mb`, each rate per second.
        assert_eq!(
            format_rate(351_602, 351_602 * 32, 1.0),
            "0.352M pps 10.730MiB/s / 90.010Mbit/s"
        );
        assert_eq!(
            format_rate(703_204, 703_204 * 32, 2.0),
            "0.352M pps 10.730MiB/s / 90.010Mbit/s"
        );
        assert_eq!(
            format_rate(5, 160, 0.0),
            "0.000M pps 0.000MiB/s / 0.000Mbit/s"
        );
        assert_eq!(format_mpps(1_234_567, 1.0), "1.235M");
    }

    #[test]
    fn intervals_are_differences_of_running_totals() {
        let live = [LiveCounter::default(), LiveCounter::default()];
        let mut meter = IntervalMeter::new(2);
        live[0].publish(300_000, 9_600_000);
        live[1].publish(100_000, 3_200_000);
        assert_eq!(meter.tick(1, &live).packets, 400_000);
        live[0].publish(500_000, 16_000_000);
        let second = meter.tick(2, &live).clone();
        assert_eq!(second.thread_packets, vec![200_000, 0]);
        assert_eq!(second.bytes, 6_400_000);
        assert_eq!(
            second.line(),
            "0.200M pps 6.104MiB/s / 51.200Mbit/s  threads: 0.200M 0.000M"
        );
    }
}
