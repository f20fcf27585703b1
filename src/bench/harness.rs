//! The scaffolding every engine shares, written once: start one thread per
//! worker (pinned when asked), run the timeline on the calling thread
//! (warm-up, a tick per second of the measured part, the end at the duration
//! or when the caller's [`Stop`] is triggered), tell the workers to finish,
//! and join them.
//!
//! The calling thread only sleeps, looks at the clock, calls the engine's
//! [`Control`] and sets the phase, wrk style; workers keep plain counters
//! and look at the [`Phase`] once per batch. An engine supplies the work
//! of one thread and its `Control` (which turns the workers' running totals
//! into intervals for its observer); nothing here prints or touches
//! signals.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::pin::{pin_current_thread, Pinning};
use crate::base::stop::{join_all, Stop, POLL};

/// How a run is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    /// Traffic before the measured part; workers see `measuring()` false.
    pub warmup: Duration,
    /// The measured part; `None`: until the stop token (servers).
    pub duration: Option<Duration>,
}

impl Timeline {
    pub fn measured(duration: Duration) -> Timeline {
        Timeline {
            warmup: Duration::ZERO,
            duration: Some(duration),
        }
    }
}

/// What the workers of a run look at: whether the measured part has begun,
/// and whether the run is over.
#[derive(Debug, Default)]
pub struct Phase {
    measuring: AtomicBool,
    stop: AtomicBool,
}

impl Phase {
    /// Past the warm-up: count what happens from now on.
    #[inline]
    pub fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    /// The run is over: finish and return.
    #[inline]
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// End the run from inside (a worker that can go on no longer).
    pub fn end(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The measured part lasted its duration.
    Duration,
    /// The stop token was triggered (Ctrl-C, SIGTERM, the caller).
    Stopped,
    /// The workers ended it themselves (every connection gone).
    Workers,
}

impl Ended {
    /// The word reports use: `duration`, `interrupted`, `workers`.
    pub fn name(self) -> &'static str {
        match self {
            Ended::Duration => "duration",
            Ended::Stopped => "interrupted",
            Ended::Workers => "workers",
        }
    }
}

/// The engine's side of the calling thread. Every method has a default that
/// does nothing.
pub trait Control {
    /// Whether the warm-up is over, `elapsed` after the start. The default:
    /// once `warmup` has passed. An error ends the run with it (nothing
    /// could be measured).
    fn warmed_up(&mut self, elapsed: Duration, warmup: Duration) -> anyhow::Result<bool> {
        Ok(elapsed >= warmup)
    }
    /// The measured part begins now.
    fn measuring(&mut self) {}
    /// Whole second `second` (1, 2, ...) of the measured part has passed.
    fn tick(&mut self, _second: u64) {}
    /// Called at least every [`POLL`] while the run goes on.
    fn poll(&mut self) {}
    /// The run is over: make sure blocked workers notice (called again
    /// every millisecond until every worker has returned).
    fn wake(&mut self) {}
}

/// A run's end and what its workers brought back, in worker order.
#[derive(Debug)]
pub struct Finished<R> {
    pub ended: Ended,
    /// The measured part: from the end of the warm-up to the stop (a few ms
    /// past the duration at most; rates use this, not the nominal one).
    pub elapsed: Duration,
    pub results: Vec<R>,
}

/// Where worker threads run: thread `i` on the i-th CPU of `pinning`, and
/// inside network namespace `netns` (for engines whose workers open their
/// own sockets; engines that open them beforehand leave it `None`).
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    pub pinning: &'a Pinning,
    pub netns: Option<&'a str>,
}

impl<'a> Placement<'a> {
    pub fn pinned(pinning: &'a Pinning) -> Placement<'a> {
        Placement {
            pinning,
            netns: None,
        }
    }
}

/// Run `work` on one thread per task, placed as `placement` says, and the
/// timeline on the calling thread. The first worker error (in worker
/// order) is the run's error.
pub fn run<T, R>(
    tasks: Vec<T>,
    placement: Placement<'_>,
    stop: &Stop,
    timeline: &Timeline,
    control: &mut dyn Control,
    work: impl Fn(usize, T, &Phase) -> anyhow::Result<R> + Sync,
) -> anyhow::Result<Finished<R>>
where
    T: Send,
    R: Send,
{
    let phase = Phase::default();
    let (timed, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = tasks
            .into_iter()
            .enumerate()
            .map(|(i, task)| {
                let (cpu, phase, work) = (placement.pinning.cpu_for(i), &phase, &work);
                let netns = placement.netns;
                scope.spawn(move || {
                    let placed = || -> anyhow::Result<()> {
                        if let Some(name) = netns {
                            super::netns::enter_thread(name)?;
                        }
                        if let Some(cpu) = cpu {
                            pin_current_thread(cpu)?;
                        }
                        Ok(())
                    };
                    let result = placed().and_then(|()| work(i, task, phase));
                    if result.is_err() {
                        // A worker that fails ends the run for all.
                        phase.end();
                    }
                    result
                })
            })
            .collect();
        let timed = timeline_loop(&phase, stop, timeline, control);
        phase.end();
        while !handles.iter().all(|h| h.is_finished()) {
            control.wake();
            std::thread::sleep(Duration::from_millis(1));
        }
        (timed, join_all(handles, "benchmark"))
    });
    let (ended, elapsed) = timed?;
    let results = results.into_iter().collect::<anyhow::Result<Vec<R>>>()?;
    Ok(Finished {
        ended,
        elapsed,
        results,
    })
}

/// The calling thread's part: warm-up, measured part with a tick per
/// second, end. Returns how it ended and the measured time.
fn timeline_loop(
    phase: &Phase,
    stop: &Stop,
    timeline: &Timeline,
    control: &mut dyn Control,
) -> anyhow::Result<(Ended, Duration)> {
    let start = Instant::now();
    // Warm-up.
    loop {
        if stop.is_set() {
            return Ok((Ended::Stopped, Duration::ZERO));
        }
        if phase.stopped() {
            return Ok((Ended::Workers, Duration::ZERO));
        }
        if control.warmed_up(start.elapsed(), timeline.warmup)? {
            break;
        }
        control.poll();
        std::thread::sleep(POLL.min(Duration::from_millis(5)));
    }
    let measured = Instant::now();
    phase.measuring.store(true, Ordering::SeqCst);
    control.measuring();
    let mut next_tick = 1u64;
    loop {
        let elapsed = measured.elapsed();
        let capped = timeline.duration.map_or(elapsed, |d| elapsed.min(d));
        while Duration::from_secs(next_tick) <= capped {
            control.tick(next_tick);
            next_tick += 1;
        }
        if let Some(duration) = timeline.duration {
            if elapsed >= duration {
                return Ok((Ended::Duration, duration));
            }
        }
        if stop.is_set() {
            return Ok((Ended::Stopped, elapsed));
        }
        if phase.stopped() {
            return Ok((Ended::Workers, elapsed));
        }
        control.poll();
        let until_tick = Duration::from_secs(next_tick).saturating_sub(elapsed);
        let until_end = timeline
            .duration
            .map_or(POLL, |d| d.saturating_sub(elapsed));
        std::thread::sleep(POLL.min(until_tick).min(until_end));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[derive(Default)]
    struct Ticks(Vec<u64>, bool);

    impl Control for Ticks {
        fn measuring(&mut self) {
            self.1 = true;
        }
        fn tick(&mut self, second: u64) {
            self.0.push(second);
        }
    }

    #[test]
    fn workers_run_until_the_duration_and_ticks_come_each_second() {
        let counted = AtomicU64::new(0);
        let mut ticks = Ticks::default();
        let timeline = Timeline {
            warmup: Duration::from_millis(50),
            duration: Some(Duration::from_millis(1100)),
        };
        let done = run(
            vec![(), ()],
            Placement::pinned(&Pinning::none()),
            &Stop::new(),
            &timeline,
            &mut ticks,
            |i, (), phase| {
                while !phase.stopped() {
                    if phase.measuring() {
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(i)
            },
        )
        .expect("run");
        assert_eq!(done.ended, Ended::Duration);
        assert_eq!(done.elapsed, Duration::from_millis(1100));
        assert_eq!(done.results, vec![0, 1]);
        assert_eq!(ticks.0, vec![1]);
        assert!(ticks.1);
        assert!(counted.load(Ordering::Relaxed) > 0);
    }

    #[test]
    fn the_stop_token_ends_a_run_without_a_duration() {
        let stop = Stop::new();
        let started = Instant::now();
        let done = std::thread::scope(|s| {
            let stopper = stop.clone();
            s.spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                stopper.trigger();
            });
            run(
                vec![()],
                Placement::pinned(&Pinning::none()),
                &stop,
                &Timeline {
                    warmup: Duration::ZERO,
                    duration: None,
                },
                &mut Ticks::default(),
                |_, (), phase| {
                    while !phase.stopped() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Ok(())
                },
            )
        })
        .expect("run");
        assert_eq!(done.ended, Ended::Stopped);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_failing_worker_ends_the_run_with_its_error() {
        let err = run(
            vec![false, true],
            Placement::pinned(&Pinning::none()),
            &Stop::new(),
            &Timeline::measured(Duration::from_secs(30)),
            &mut Ticks::default(),
            |_, fail, phase| {
                if fail {
                    anyhow::bail!("socket gone");
                }
                while !phase.stopped() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            },
        )
        .expect_err("worker error");
        assert!(err.to_string().contains("socket gone"), "{err}");
    }
}
