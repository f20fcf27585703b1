//! When a benchmark stops: a [`Stop`] token the caller owns.
//!
//! Engines never look at process signals. Whoever drives an engine (the
//! command line, a monitor, an experiment, a daemon) holds a `Stop` and
//! triggers it when the run must end early: the CLI ties Ctrl-C and SIGTERM
//! to it (`src/cli/signals.rs`), an experiment its own deadline. Engines
//! look at it at least every [`POLL`] and end with their report, and never
//! block in a system call longer than that without looking (socket
//! timeouts, polls with a timeout), so a stop is seen within a small bound.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest an engine goes without looking at its stop token and its
/// deadline: short enough that a stop is noticed at once, long enough to
/// cost nothing.
pub const POLL: Duration = Duration::from_millis(20);

/// A cloneable stop token. Cloning shares the flag.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
}

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    /// End every run that watches this token (idempotent).
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Whether the token was triggered: one relaxed load, for hot loops.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    /// Sleep until `until` or until the token is triggered, whichever comes
    /// first (looking every [`POLL`]); true when triggered.
    pub fn sleep_until(&self, until: Instant) -> bool {
        self.sleep_until_polling(until, POLL)
    }

    /// [`Stop::sleep_until`], looking every `poll`: a process that only
    /// waits (a monitor between samples) wakes less often.
    pub fn sleep_until_polling(&self, until: Instant, poll: Duration) -> bool {
        loop {
            if self.is_set() {
                return true;
            }
            let now = Instant::now();
            if now >= until {
                return false;
            }
            std::thread::sleep((until - now).min(poll));
        }
    }

    /// The shared flag itself, for a signal handler that may only store to
    /// an atomic (signal-hook's `flag::register`).
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.flag)
    }
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
    fn a_triggered_token_ends_a_sleep_at_once_and_clones_share_it() {
        let stop = Stop::new();
        let other = stop.clone();
        assert!(!stop.sleep_until(Instant::now() + Duration::from_millis(30)));
        let started = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(30));
                other.trigger();
            });
            assert!(stop.sleep_until(Instant::now() + Duration::from_secs(10)));
        });
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(stop.is_set());
    }
}
