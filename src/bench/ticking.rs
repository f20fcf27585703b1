//! The timeline loop the rr and http engines still run themselves (the UDP
//! engines use [`super::harness`]): tick each second until the duration or
//! the stop token, then set the workers' flag.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::stop::{Stop, POLL};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Duration,
    Interrupted,
}

/// Call `on_tick(n)` at each whole second `n` after `start` until
/// `duration` has passed or `stop` is triggered; then set `flag` so the
/// workers finish. Returns how it ended and the elapsed time at the stop.
pub fn run_ticking(
    start: Instant,
    duration: Duration,
    flag: &AtomicBool,
    stop: &Stop,
    on_tick: impl FnMut(u64),
) -> (Ended, Duration) {
    run_ticking_polled(start, duration, flag, stop, POLL, || {}, on_tick)
}

/// [`run_ticking`], also calling `on_poll` at least every `poll` (capped at
/// [`POLL`]): for a main thread that also watches its workers.
pub fn run_ticking_polled(
    start: Instant,
    duration: Duration,
    flag: &AtomicBool,
    stop: &Stop,
    poll: Duration,
    mut on_poll: impl FnMut(),
    mut on_tick: impl FnMut(u64),
) -> (Ended, Duration) {
    let poll = poll.min(POLL);
    let mut next_tick = 1u64;
    let ended = loop {
        let elapsed = start.elapsed();
        while Duration::from_secs(next_tick) <= elapsed.min(duration) {
            on_tick(next_tick);
            next_tick += 1;
        }
        if elapsed >= duration {
            break Ended::Duration;
        }
        if stop.is_set() {
            break Ended::Interrupted;
        }
        on_poll();
        let until_tick = Duration::from_secs(next_tick).saturating_sub(elapsed);
        let until_end = duration.saturating_sub(elapsed);
        std::thread::sleep(poll.min(until_tick).min(until_end));
    };
    flag.store(true, Ordering::Relaxed);
    (ended, start.elapsed().min(duration))
}
