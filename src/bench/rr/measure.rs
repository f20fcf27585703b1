//! The run's timeline for `bench rr`: warm-up, measured part, end. A
//! [`Conductor`] looks at the clock and the workers' counts each time it is
//! pulsed: from the main thread's loop when workers run in threads of
//! their own, or from the worker's loop itself when one thread does all
//! (then the process has a single thread: see [`super::wake::Alarm`]).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::engine::Phase;
use super::{ClientArgs, Proto};
use crate::base::Root;
use crate::bench::report::LiveCounter;
use crate::bench::stop::Stop;
use crate::bench::ticking::Ended;
use crate::host::{stat, CpuTime};

/// With a warm-up, how long to wait for the first transaction at most.
const FIRST_REPLY_WAIT: Duration = Duration::from_secs(2);

/// One second of the measured run.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    pub second: u64,
    pub transactions: u64,
    /// Per thread (index = thread).
    pub per_thread: Vec<u64>,
}

/// What the conductor saw of the measured part.
pub struct Measured {
    pub ended: Ended,
    /// From the start of the measured part to the stop (a few ms past
    /// `--duration` at most; rates use this, not the nominal duration).
    pub elapsed: Duration,
    pub cpu_before: Option<Vec<CpuTime>>,
    pub cpu_after: Option<Vec<CpuTime>>,
    /// This process's (user, system) CPU time over the measured part.
    pub usage: (Duration, Duration),
    pub intervals: Vec<Interval>,
}

/// How often the run is looked at: UDP resends of a lone instance are as
/// late as this is slow (a quarter of the timeout, 1 to 5 ms); TCP needs it
/// for the per-second lines and the end.
pub fn pulse_every(args: &ClientArgs) -> Duration {
    match args.proto {
        Proto::Udp => (Duration::from_millis(args.resend_after) / 4)
            .clamp(Duration::from_millis(1), Duration::from_millis(5)),
        Proto::Tcp => Duration::from_millis(5),
    }
}

enum State {
    WarmingUp {
        since: Instant,
    },
    Measuring {
        start: Instant,
        next_tick: u64,
        last: Vec<u64>,
        cpu_before: Option<Vec<CpuTime>>,
        usage_before: (Duration, Duration),
    },
    Done,
}

pub struct Conductor<'a> {
    args: &'a ClientArgs,
    root: &'a Root,
    stop: &'a Stop,
    phase: &'a Phase,
    live: &'a [LiveCounter],
    on_interval: &'a mut dyn FnMut(&Interval),
    intervals: Vec<Interval>,
    state: State,
    outcome: Option<anyhow::Result<Measured>>,
}

impl<'a> Conductor<'a> {
    pub fn new(
        args: &'a ClientArgs,
        root: &'a Root,
        stop: &'a Stop,
        phase: &'a Phase,
        live: &'a [LiveCounter],
        on_interval: &'a mut dyn FnMut(&Interval),
    ) -> Conductor<'a> {
        Conductor {
            args,
            root,
            stop,
            phase,
            live,
            on_interval,
            intervals: Vec::new(),
            state: State::WarmingUp {
                since: Instant::now(),
            },
            outcome: None,
        }
    }

    /// Look at the clock and the counts; move on when it is time. Sets
    /// `phase.stop` (and returns false) once the run is over.
    pub fn pulse(&mut self) -> bool {
        let start = match self.state {
            State::Done => return false,
            State::WarmingUp { since } => {
                if let Err(e) = self.warm_up(since) {
                    self.end(Err(e));
                    return false;
                }
                return true;
            }
            State::Measuring { start, .. } => start,
        };
        let elapsed = start.elapsed();
        self.tick(elapsed);
        let ended = if elapsed >= self.args.duration {
            Ended::Duration
        } else if self.stop.is_set() {
            Ended::Interrupted
        } else {
            return true;
        };
        let measured = self.measured(ended, elapsed);
        self.end(measured);
        false
    }

    /// Until the next per-second line or the end, at most `cap`: how long
    /// a main thread may sleep between pulses.
    pub fn next_due(&self, cap: Duration) -> Duration {
        match &self.state {
            State::Measuring {
                start, next_tick, ..
            } => {
                let elapsed = start.elapsed();
                let tick = Duration::from_secs(*next_tick).saturating_sub(elapsed);
                let end = self.args.duration.saturating_sub(elapsed);
                cap.min(tick).min(end)
            }
            _ => cap,
        }
    }

    /// The outcome, once [`Conductor::pulse`] returned false.
    pub fn finish(self) -> anyhow::Result<Measured> {
        self.outcome
            .unwrap_or_else(|| Err(anyhow::anyhow!("the run ended before it was measured")))
    }

    fn end(&mut self, outcome: anyhow::Result<Measured>) {
        self.outcome = Some(outcome);
        self.state = State::Done;
        self.phase.stop.store(true, Ordering::Relaxed);
    }

    /// The warm-up lasts its time, and with a warm-up, until the first
    /// transaction completed (a first packet lost costs TCP a 200 ms+
    /// retransmission), but no longer than [`FIRST_REPLY_WAIT`].
    fn warm_up(&mut self, since: Instant) -> anyhow::Result<()> {
        let args = self.args;
        if self.stop.is_set() {
            anyhow::bail!("interrupted during the warm-up: nothing was measured");
        }
        let elapsed = since.elapsed();
        if elapsed < args.warmup {
            return Ok(());
        }
        let any_done = self.live.iter().any(|l| l.read().0 > 0);
        if !args.warmup.is_zero() && !any_done {
            if elapsed >= args.warmup.max(FIRST_REPLY_WAIT) {
                anyhow::bail!(
                    "--to '{}': no transaction completed in the first {:.1} s; \
                     is the server overloaded, or is something dropping {} traffic?",
                    args.to,
                    elapsed.as_secs_f64(),
                    args.proto.name()
                );
            }
            return Ok(());
        }
        let cpu_before = read_stat(self.root);
        let usage_before = rusage()?;
        self.phase.measuring.store(true, Ordering::Relaxed);
        self.state = State::Measuring {
            start: Instant::now(),
            next_tick: 1,
            last: vec![0; self.live.len()],
            cpu_before,
            usage_before,
        };
        Ok(())
    }

    /// One interval per whole second passed (within the duration).
    fn tick(&mut self, elapsed: Duration) {
        let State::Measuring {
            next_tick, last, ..
        } = &mut self.state
        else {
            return;
        };
        while Duration::from_secs(*next_tick) <= elapsed.min(self.args.duration) {
            let now: Vec<u64> = self.live.iter().map(|l| l.read().0).collect();
            let per_thread: Vec<u64> = now
                .iter()
                .zip(last.iter())
                .map(|(n, l)| n.saturating_sub(*l))
                .collect();
            *last = now;
            let interval = Interval {
                second: *next_tick,
                transactions: per_thread.iter().sum(),
                per_thread,
            };
            (self.on_interval)(&interval);
            self.intervals.push(interval);
            *next_tick += 1;
        }
    }

    fn measured(&mut self, ended: Ended, elapsed: Duration) -> anyhow::Result<Measured> {
        let usage_after = rusage()?;
        let cpu_after = read_stat(self.root);
        let State::Measuring {
            cpu_before,
            usage_before,
            ..
        } = std::mem::replace(&mut self.state, State::Done)
        else {
            anyhow::bail!("the run ended before it was measured");
        };
        Ok(Measured {
            ended,
            elapsed,
            cpu_before,
            cpu_after,
            usage: (
                usage_after.0.saturating_sub(usage_before.0),
                usage_after.1.saturating_sub(usage_before.1),
            ),
            intervals: std::mem::take(&mut self.intervals),
        })
    }
}

fn read_stat(root: &Root) -> Option<Vec<CpuTime>> {
    stat::read(root)
        .map_err(|e| eprintln!("rr: warning: {e}; no per-CPU table"))
        .ok()
}

/// This process's (user, system) CPU time so far.
fn rusage() -> anyhow::Result<(Duration, Duration)> {
    // SAFETY: rusage is plain data, valid all-zero; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage struct.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Err(std::io::Error::last_os_error()).context("getrusage failed");
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Ok((time(usage.ru_utime), time(usage.ru_stime)))
}
