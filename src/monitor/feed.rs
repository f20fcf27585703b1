//! Where samples come from, and the loop that turns them into [`Frame`]s
//! for a view: the live host (one sample every interval, on the caller's
//! [`Stop`] token) or a recorded series (as fast as it is read).
//!
//! A view is any `FnMut(&Frame)`: the text blocks and NDJSON of
//! `src/cli/monitor.rs` today; a terminal UI can run [`Feed`] on a thread
//! of its own and send the frames to its drawing loop.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::base::drop_reason::ReasonSource;
use crate::base::stop::Stop;
use crate::base::Root;
use crate::doctor::Severity;
use crate::host::{Host, Inputs, Selection, Source, SourceIssue};
use crate::nic::live::{LiveEthtool, LiveNetdev, LiveNetlink};

use super::findings::{findings, LiveFinding};
use super::rates::{between, Rates};
use super::sample::{Sample, MONITOR_SCHEMA_VERSION};
use super::sampler::{Sampler, Stamp};
use super::series::Series;
use super::state::State;

/// Where `ip netns add` puts named namespaces.
const NETNS_DIR: &str = "/run/netns";

/// One interval, ready to show: the later sample, the rates since the
/// one before, and what they show.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub sample: Sample,
    pub rates: Rates,
    pub findings: Vec<LiveFinding>,
}

impl Frame {
    /// The interval from `prev` to `cur`.
    pub fn between(prev: &Sample, cur: Sample) -> Frame {
        let rates = between(prev, &cur);
        let findings = findings(&rates, &cur.state);
        Frame {
            sample: cur,
            rates,
            findings,
        }
    }

    /// The worst finding's severity.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// The frame as one line of NDJSON (no newline): docs/json-schema.md.
    pub fn json_line(&self) -> serde_json::Result<String> {
        serde_json::to_string(&JsonLine {
            schema_version: MONITOR_SCHEMA_VERSION,
            source: &self.sample.source,
            host_wide: &self.sample.counters.host_wide,
            rates: &self.rates,
            findings: &self.findings,
            state: &self.sample.state,
            missing: &self.sample.missing,
        })
    }
}

/// The NDJSON line: the rates' fields at the top level, then findings,
/// settings and what could not be read.
#[derive(Serialize)]
struct JsonLine<'a> {
    schema_version: u32,
    source: &'a Source,
    host_wide: &'a [String],
    #[serde(flatten)]
    rates: &'a Rates,
    findings: &'a [LiveFinding],
    state: &'a State,
    missing: &'a [SourceIssue],
}

/// The samples of a run.
#[derive(Debug)]
pub enum Feed {
    Live(LiveFeed),
    Replay(ReplayFeed),
}

/// The live host (or the network namespace this process entered), one
/// sample every interval.
#[derive(Debug)]
pub struct LiveFeed {
    root: Root,
    sampler: Sampler,
    netns: Option<String>,
    interval: Duration,
    start: Instant,
    /// Index of the next tick: sample k is due at `start + k * interval`.
    next_tick: u64,
    /// Where each sample's drop reasons come from (`None`: not traced).
    reasons: Option<Reasons>,
}

/// A [`ReasonSource`], or why there is none.
enum Reasons {
    Source(Box<dyn ReasonSource>),
    Unavailable(String),
}

impl std::fmt::Debug for Reasons {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reasons::Source(_) => f.write_str("Reasons::Source"),
            Reasons::Unavailable(why) => write!(f, "Reasons::Unavailable({why:?})"),
        }
    }
}

/// A recorded series, snapshot after snapshot.
#[derive(Debug)]
pub struct ReplayFeed {
    series: Series,
    sampler: Sampler,
    next: usize,
}

impl Feed {
    /// Sample this host every `interval`. With `netns`, the process must
    /// already be inside that namespace (`base::netns::enter`); the feed
    /// stops with an error if the namespace is deleted.
    pub fn live(selection: Selection, netns: Option<String>, interval: Duration) -> Feed {
        Feed::Live(LiveFeed {
            root: Root::live(),
            sampler: Sampler::new(selection),
            netns,
            interval,
            start: Instant::now(),
            next_tick: 0,
            reasons: None,
        })
    }

    /// Add the kernel's drop reasons to each live sample: counted by
    /// `source`, or, when it is `Err`, the reason why they are not (said
    /// in each sample, so that every view can say it). A replay has none.
    pub fn with_reasons(mut self, source: Result<Box<dyn ReasonSource>, String>) -> Feed {
        if let Feed::Live(live) = &mut self {
            live.reasons = Some(match source {
                Ok(source) => Reasons::Source(source),
                Err(why) => Reasons::Unavailable(why),
            });
        }
        self
    }

    /// Replay the series recorded in `dir`.
    pub fn replay(dir: &Path, selection: Selection) -> anyhow::Result<Feed> {
        let series = Series::load(dir)?;
        let sampler = series.sampler(selection);
        Ok(Feed::Replay(ReplayFeed {
            series,
            sampler,
            next: 0,
        }))
    }

    /// The next sample; `None` when `stop` was triggered while waiting, or
    /// a recorded series has no more.
    pub fn next(&mut self, stop: &Stop) -> anyhow::Result<Option<Sample>> {
        match self {
            Feed::Live(live) => live.next(stop),
            Feed::Replay(replay) => {
                if stop.is_set() || replay.next >= replay.series.len() {
                    return Ok(None);
                }
                let sample = replay.series.sample(&mut replay.sampler, replay.next)?;
                replay.next += 1;
                Ok(Some(sample))
            }
        }
    }

    /// The next sample without waiting for the interval's tick: a live
    /// feed samples now (a view that samples on demand, as the Prometheus
    /// exporter does when scraped); a replay gives its next snapshot
    /// (`None` when it has no more).
    pub fn next_now(&mut self) -> anyhow::Result<Option<Sample>> {
        match self {
            Feed::Live(live) => live.take().map(Some),
            Feed::Replay(_) => self.next(&Stop::new()),
        }
    }

    /// The host model as the sampler last read it (`None` before the
    /// first sample).
    pub fn host(&self) -> Option<&Host> {
        match self {
            Feed::Live(live) => live.sampler.host(),
            Feed::Replay(replay) => replay.sampler.host(),
        }
    }

    /// Snapshots a replay has in all (`None` live).
    pub fn recorded_len(&self) -> Option<usize> {
        match self {
            Feed::Live(_) => None,
            Feed::Replay(replay) => Some(replay.series.len()),
        }
    }
}

impl LiveFeed {
    fn next(&mut self, stop: &Stop) -> anyhow::Result<Option<Sample>> {
        let interval = self.interval.as_secs_f64();
        // Behind by more than a tick (the machine was suspended, a sample
        // took long): skip the ticks missed rather than sample in a burst.
        let passed = (self.start.elapsed().as_secs_f64() / interval).floor() as u64;
        let tick = self.next_tick.max(passed);
        let due = self.start + Duration::from_secs_f64(interval * tick as f64);
        if stop.sleep_until_polling(due, WAIT_SLICE) {
            return Ok(None);
        }
        self.next_tick = tick + 1;
        self.take().map(Some)
    }

    /// A sample now, whatever the tick.
    fn take(&mut self) -> anyhow::Result<Sample> {
        if let Some(ns) = &self.netns {
            let path = Path::new(NETNS_DIR).join(ns);
            if !path.exists() {
                anyhow::bail!(
                    "network namespace '{ns}' was deleted while monitor ran ({} is gone)",
                    path.display()
                );
            }
        }
        let (ethtool, netlink, netdev) = (LiveEthtool, LiveNetlink, LiveNetdev);
        let src = Inputs {
            root: &self.root,
            ethtool: &ethtool,
            netlink: &netlink,
            netdev: &netdev,
            netns: self.netns.clone(),
        };
        let mut sample = self.sampler.sample(&src, Stamp::since(self.start))?;
        sample.drop_reasons = match &mut self.reasons {
            None => None,
            Some(Reasons::Source(source)) => Some(source.totals()),
            Some(Reasons::Unavailable(why)) => Some(
                crate::base::drop_reason::ReasonTotals::unavailable(why.clone()),
            ),
        };
        Ok(sample)
    }
}

/// How often a waiting live feed looks at its stop token: a stop (Ctrl-C)
/// is seen within this, and an idle monitor wakes up 10 times a second,
/// not 50 as an engine polling at [`crate::base::stop::POLL`] would.
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEnd {
    /// Frames shown.
    pub frames: u64,
    /// The stop token ended it.
    pub stopped: bool,
    /// A recorded series ran out before `count` frames.
    pub series_ended: bool,
    /// The worst finding any frame showed.
    pub worst: Option<Severity>,
}

/// Take samples from `feed` and show a frame per interval, `count` of them
/// (all, or until `stop`, when `None`).
pub fn run(
    feed: &mut Feed,
    stop: &Stop,
    count: Option<u64>,
    show: &mut dyn FnMut(&Frame) -> anyhow::Result<()>,
) -> anyhow::Result<RunEnd> {
    let mut end = RunEnd {
        frames: 0,
        stopped: false,
        series_ended: false,
        worst: None,
    };
    let Some(mut prev) = feed.next(stop)? else {
        end.stopped = stop.is_set();
        end.series_ended = !end.stopped;
        return Ok(end);
    };
    while count.is_none_or(|c| end.frames < c) {
        let Some(cur) = feed.next(stop)? else {
            end.stopped = stop.is_set();
            end.series_ended = !end.stopped;
            break;
        };
        let frame = Frame::between(&prev, cur);
        show(&frame)?;
        end.frames += 1;
        end.worst = end.worst.max(frame.worst());
        prev = frame.sample;
    }
    Ok(end)
}
