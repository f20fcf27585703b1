//! When a benchmark stops: at `--duration`, or on Ctrl-C.
//!
//! The one piece of global state is [`INTERRUPTED`], set by the SIGINT
//! handler (a signal handler can touch nothing else safely). Workers never
//! look at it: they watch the run's own stop flag, which the main thread sets
//! from [`run_ticking`] when the deadline passes or Ctrl-C arrives. So the
//! main thread is the only one that decides, wrk style: it sleeps, reports,
//! sets stop, joins.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by the SIGINT handler; cleared by [`catch_ctrl_c`].
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Make Ctrl-C end the run with a final report instead of killing the
/// process. Without SA_RESTART, so a worker blocked in a system call wakes
/// up with EINTR and sees the stop flag promptly.
pub fn catch_ctrl_c() -> anyhow::Result<()> {
    INTERRUPTED.store(false, Ordering::Relaxed);
    // SAFETY: sigaction is a plain C struct, valid all-zero (no flags,
    // empty mask); the handler only stores to an atomic, which is
    // async-signal-safe.
    let rc = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut())
    };
    if rc != 0 {
        anyhow::bail!(
            "cannot install the Ctrl-C handler: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Whether Ctrl-C was pressed since [`catch_ctrl_c`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Duration,
    Interrupted,
}

/// How often the main thread wakes to look at the clock and Ctrl-C: short
/// enough that a stop is noticed at once, long enough to cost nothing.
const POLL: Duration = Duration::from_millis(20);

/// Run the main thread's side of a benchmark: call `on_tick(n)` at each
/// whole second `n` (1, 2, ...) after `start`, until `duration` has passed or
/// Ctrl-C; then set `stop` so the workers finish. Returns how it ended and
/// the elapsed time at the stop.
pub fn run_ticking(
    start: Instant,
    duration: Duration,
    stop: &AtomicBool,
    on_tick: impl FnMut(u64),
) -> (Ended, Duration) {
    run_ticking_polled(start, duration, stop, POLL, || {}, on_tick)
}

/// [`run_ticking`], also calling `on_poll` at least every `poll` (capped at
/// the usual 20 ms): for a main thread that also watches its workers.
pub fn run_ticking_polled(
    start: Instant,
    duration: Duration,
    stop: &AtomicBool,
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
        if interrupted() {
            break Ended::Interrupted;
        }
        on_poll();
        let until_tick = Duration::from_secs(next_tick).saturating_sub(elapsed);
        let until_end = duration.saturating_sub(elapsed);
        std::thread::sleep(poll.min(until_tick).min(until_end));
    };
    stop.store(true, Ordering::Relaxed);
    (ended, start.elapsed().min(duration))
}

/// Join every worker of a scope, in order; a panicked worker becomes an
/// error naming `what` ("a sending thread panicked") instead of a panic here.
pub fn join_all<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, anyhow::Result<T>>>,
    what: &str,
) -> Vec<anyhow::Result<T>> {
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("a {what} thread panicked")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_each_whole_second_then_sets_stop() {
        let stop = AtomicBool::new(false);
        let mut ticks = Vec::new();
        // Started 2.5 s ago with a 2.5 s duration: ticks 1 and 2 at once.
        let start = Instant::now() - Duration::from_millis(2500);
        let (ended, elapsed) =
            run_ticking(start, Duration::from_millis(2500), &stop, |n| ticks.push(n));
        assert_eq!(ended, Ended::Duration);
        assert_eq!(ticks, vec![1, 2]);
        assert_eq!(elapsed, Duration::from_millis(2500));
        assert!(stop.load(Ordering::Relaxed));
    }
}
