//! When the exporter reads the host: on demand, when scraped, at most once
//! per `--interval` (scrapes within it share one reading, so any number
//! of scrapers cost at most one sample per interval); a replay serves each
//! recorded snapshot from the moment it is due on the recording's clock,
//! then the last one until stopped.
//!
//! Each reading becomes one rendered exposition, kept until the next:
//! serving a scrape is then a copy of bytes already made.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::host::model::CpuTime;
use crate::monitor::feed::{Feed, Frame};
use crate::monitor::findings::LiveFinding;
use crate::monitor::sample::Sample;

use super::collectors::{render, Input};

/// One reading, rendered, and until when it may be served.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub body: Arc<Vec<u8>>,
    /// Series in it.
    pub series: usize,
    /// Serve it until then; `None`: for ever (a replay that ended).
    pub fresh_until: Option<Instant>,
}

impl Rendered {
    pub fn fresh(&self, now: Instant) -> bool {
        self.fresh_until.is_none_or(|until| now < until)
    }
}

/// /proc/stat's CPU times as exported: a mode's time never goes back
/// (tickless kernels may count idle and iowait back a little, which a
/// Prometheus counter would take for a restart), and a CPU whose idle
/// time went back by [`JUMP_BACK_TICKS`] or more was taken offline and
/// brought back: its times start again. What node_exporter's cpu
/// collector does, so both export the same values.
#[derive(Debug, Default)]
pub struct CpuTimes {
    seen: BTreeMap<u32, CpuTime>,
}

/// 3 s of USER_HZ ticks: node_exporter's `jumpBackSeconds`.
pub const JUMP_BACK_TICKS: u64 = 300;

impl CpuTimes {
    pub fn update(&mut self, now: &[CpuTime]) -> Vec<CpuTime> {
        now.iter()
            .map(|n| {
                let kept = match self.seen.get(&n.cpu) {
                    Some(old) if old.idle.saturating_sub(n.idle) < JUMP_BACK_TICKS => CpuTime {
                        cpu: n.cpu,
                        user: n.user.max(old.user),
                        nice: n.nice.max(old.nice),
                        system: n.system.max(old.system),
                        idle: n.idle.max(old.idle),
                        iowait: n.iowait.max(old.iowait),
                        irq: n.irq.max(old.irq),
                        softirq: n.softirq.max(old.softirq),
                        steal: n.steal.max(old.steal),
                    },
                    _ => n.clone(),
                };
                self.seen.insert(n.cpu, kept.clone());
                kept
            })
            .collect()
    }
}

/// Where readings come from, and the last one.
pub struct Sampling {
    feed: Feed,
    /// Live readings are at least this far apart.
    interval: Duration,
    /// A replay's clock; `None` live.
    replay: Option<ReplayClock>,
    cpu: CpuTimes,
    last: Last,
}

/// The reading served now.
struct Last {
    sample: Sample,
    /// The findings of the interval that ended at `sample`, and its length.
    findings: Option<(Vec<LiveFinding>, f64)>,
    /// When it was read (live) or came due (replay).
    at: Instant,
}

impl Last {
    fn step(&mut self, next: Sample, at: Instant) {
        let frame = Frame::between(&self.sample, next);
        self.findings = Some((frame.findings, frame.rates.interval_secs));
        self.sample = frame.sample;
        self.at = at;
    }
}

/// Snapshot k of a replay is due at `start + (elapsed_k - elapsed_0)`.
struct ReplayClock {
    start: Instant,
    first_secs: f64,
    /// The next snapshot, read ahead to know when it is due.
    pending: Option<Sample>,
}

impl ReplayClock {
    fn due(&self, sample: &Sample) -> Instant {
        self.start + Duration::from_secs_f64((sample.elapsed_secs - self.first_secs).max(0.0))
    }
}

/// What a refresh did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// A newer reading (live, or a replay's snapshot that came due).
    New,
    /// Nothing new yet (a replay's next snapshot is not due).
    Same,
    /// The replay reached its last snapshot; it is served from now on.
    Ended,
}

impl Sampling {
    /// Take the first reading from `feed` (an error if there is none: the
    /// host cannot be read, `--iface` names no interface, a series is
    /// empty). Live readings are at least `interval` apart.
    pub fn start(mut feed: Feed, interval: Duration) -> anyhow::Result<Sampling> {
        let replay = feed.recorded_len().is_some();
        let first = feed
            .next_now()?
            .ok_or_else(|| anyhow::anyhow!("the recorded series has no snapshot"))?;
        let now = Instant::now();
        let replay = if replay {
            Some(ReplayClock {
                start: now,
                first_secs: first.elapsed_secs,
                pending: feed.next_now()?,
            })
        } else {
            None
        };
        Ok(Sampling {
            feed,
            interval,
            replay,
            cpu: CpuTimes::default(),
            last: Last {
                sample: first,
                findings: None,
                at: now,
            },
        })
    }

    /// Bring the reading up to now: live, a new sample; a replay, every
    /// snapshot that came due (the findings are those of the recorded
    /// interval that ended at the one served).
    pub fn refresh(&mut self) -> anyhow::Result<Advance> {
        let now = Instant::now();
        let Some(replay) = &mut self.replay else {
            if let Some(next) = self.feed.next_now()? {
                self.last.step(next, now);
            }
            return Ok(Advance::New);
        };
        let mut advance = Advance::Same;
        while let Some(next) = replay.pending.take() {
            let due = replay.due(&next);
            if due > now {
                replay.pending = Some(next);
                break;
            }
            replay.pending = self.feed.next_now()?;
            advance = if replay.pending.is_some() {
                Advance::New
            } else {
                Advance::Ended
            };
            self.last.step(next, due);
        }
        Ok(advance)
    }

    /// Render the current reading.
    pub fn render(&mut self) -> Rendered {
        let cpu_time = self.cpu.update(&self.last.sample.counters.cpu_time);
        let input = Input {
            sample: &self.last.sample,
            cpu_time: &cpu_time,
            findings: self
                .last
                .findings
                .as_ref()
                .map(|(f, secs)| (f.as_slice(), *secs)),
        };
        let exposition = render(&input);
        let fresh_until = match &self.replay {
            None => Some(self.last.at + self.interval),
            Some(replay) => replay.pending.as_ref().map(|p| replay.due(p)),
        };
        Rendered {
            series: exposition.series(),
            body: Arc::new(exposition.into_bytes()),
            fresh_until,
        }
    }

    /// The reading served now.
    pub fn current(&self) -> &Sample {
        &self.last.sample
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(cpu: u32, user: u64, idle: u64) -> CpuTime {
        CpuTime {
            cpu,
            user,
            nice: 0,
            system: 0,
            idle,
            iowait: 0,
            irq: 0,
            softirq: 0,
            steal: 0,
        }
    }

    #[test]
    fn cpu_times_never_go_back_unless_the_cpu_restarted() {
        let mut c = CpuTimes::default();
        assert_eq!(c.update(&[t(0, 10, 1000)]), [t(0, 10, 1000)]);
        // idle counted back a little (tickless): kept at 1000.
        assert_eq!(c.update(&[t(0, 12, 998)]), [t(0, 12, 1000)]);
        assert_eq!(c.update(&[t(0, 13, 1005)]), [t(0, 13, 1005)]);
        // idle back by 3 s or more: offline and back, restart.
        assert_eq!(c.update(&[t(0, 1, 5)]), [t(0, 1, 5)]);
        // A CPU seen for the first time is taken as it is.
        assert_eq!(
            c.update(&[t(0, 2, 6), t(3, 9, 9)]),
            [t(0, 2, 6), t(3, 9, 9)]
        );
    }
}
