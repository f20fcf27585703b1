//! Ctrl-C and SIGTERM, for commands that run until told to stop: both
//! trigger the run's [`Stop`] token, so the engine ends with its report
//! (SIGTERM is how service managers and `timeout` stop a process). A second
//! one while stopping ends the process at once, as users expect of a
//! second Ctrl-C. The only signal handling in nettune is here. (The
//! terminal view adds SIGHUP, and its second signal gives the terminal
//! back before the process ends: [`stop_on_signals_for_view`].)
//!
//! "Second" means a later one, not a copy of the first: `timeout(1)` sends
//! its signal to the process and then to its whole process group, so the
//! bench gets two SIGTERMs a few microseconds apart, and both must count as
//! one request to stop with the report. A signal within [`SAME_REQUEST`] of
//! the first is taken as part of it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::base::stop::Stop;

/// Signals this close to the first are the same request to stop: far
/// shorter than a person can press Ctrl-C twice, far longer than the gap
/// between the copies `timeout` sends.
pub const SAME_REQUEST: Duration = Duration::from_millis(100);

/// When the first stop signal came (CLOCK_MONOTONIC, ns).
static FIRST_SIGNAL_NS: AtomicU64 = AtomicU64::new(0);

/// A stop token that Ctrl-C and SIGTERM trigger.
pub fn stop_on_signals() -> anyhow::Result<Stop> {
    stop_on(&[SIGINT, SIGTERM], exit_now)
}

/// For the full-screen terminal view: a stop token that Ctrl-C, SIGTERM
/// and SIGHUP (the terminal was closed) trigger; a later signal, while the
/// view is closing, ends the process through `exit`, which gives the
/// terminal back before it ends the process (or leaves that to the path
/// already restoring it). `exit` must be async-signal-safe.
pub fn stop_on_signals_for_view(exit: fn(i32)) -> anyhow::Result<Stop> {
    stop_on(&[SIGINT, SIGTERM, SIGHUP], exit)
}

fn stop_on(signals: &[i32], exit: fn(i32)) -> anyhow::Result<Stop> {
    let stop = Stop::new();
    for &signal in signals {
        let flag = stop.flag();
        let action = move || on_signal(&flag, signal, exit);
        // SAFETY: the action is async-signal-safe: it loads and stores
        // atomics, calls clock_gettime (async-signal-safe in POSIX) and
        // `exit` (async-signal-safe by its contract), and neither
        // allocates nor takes a lock.
        unsafe { signal_hook::low_level::register(signal, action) }
            .map_err(|e| anyhow::anyhow!("cannot handle signal {signal}: {e}"))?;
    }
    Ok(stop)
}

/// End the process at once with `code`.
fn exit_now(code: i32) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(code) };
}

/// What a stop signal does: the first one (and its copies) triggers the
/// token; a later one, while the run is still stopping, calls `exit`.
fn on_signal(flag: &Arc<AtomicBool>, signal: i32, exit: fn(i32)) {
    let now = monotonic_ns();
    if flag.load(Ordering::SeqCst) {
        let first = FIRST_SIGNAL_NS.load(Ordering::SeqCst);
        if now.saturating_sub(first) >= SAME_REQUEST.as_nanos() as u64 {
            exit(128 + signal);
        }
        return;
    }
    FIRST_SIGNAL_NS.store(now, Ordering::SeqCst);
    flag.store(true, Ordering::SeqCst);
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// For commands that must put the host back before they exit (an
/// experiment between apply and rollback): Ctrl-C and SIGTERM trigger the
/// stop token, every time; a second one does not end the process at once,
/// since the rollback that follows takes milliseconds and leaving the host
/// tuned would be worse. (SIGKILL cannot be caught: `nettune rollback`
/// finishes from the journal.)
pub fn stop_on_signals_to_restore() -> anyhow::Result<Stop> {
    let stop = Stop::new();
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, stop.flag())
            .map_err(|e| anyhow::anyhow!("cannot handle signal {signal}: {e}"))?;
    }
    Ok(stop)
}
