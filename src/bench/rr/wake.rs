//! Waking a worker blocked in a read that has no timeout.
//!
//! A thread serving one client blocks in `read`/`recv` with no timeout, as
//! sockperf does: a socket timeout (SO_RCVTIMEO) arms a kernel timer on
//! every blocking read, which cost about 5% of the transactions in a 1-byte
//! ping-pong on the development VM. The main thread watches instead: a
//! worker publishes until when it may block ([`Blocked::until`]); the
//! main thread, which wakes every few milliseconds anyway, sends it SIGURG
//! once that time has passed, and at the end of the run. The handler does
//! nothing and is installed without SA_RESTART, so the read returns EINTR
//! and the worker looks at its flags and timers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

extern "C" fn on_wake(_signal: libc::c_int) {}

/// Install the SIGURG handler (once per process). SIGURG is ignored by
/// default, so a stray one does no harm either way.
pub fn install() -> anyhow::Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    let done = DONE.get_or_init(|| {
        // SAFETY: sigaction is a plain C struct, valid all-zero (no flags,
        // empty mask); the handler does nothing, which is async-signal-safe.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_wake as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGURG, &action, std::ptr::null_mut())
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().to_string())
        }
    });
    done.clone()
        .map_err(|e| anyhow::anyhow!("cannot install the SIGURG handler: {e}"))
}

/// Set by SIGALRM, taken by [`alarmed`].
static ALARMED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_alarm(_signal: libc::c_int) {
    ALARMED.store(true, Ordering::Relaxed);
}

/// Whether the [`Alarm`] rang since the last call (a load, and a store
/// only when it did: nearly free per transaction).
#[inline]
pub fn alarmed() -> bool {
    if ALARMED.load(Ordering::Relaxed) {
        ALARMED.store(false, Ordering::Relaxed);
        true
    } else {
        false
    }
}

/// SIGALRM every `period` while alive (setitimer), for a process whose
/// only thread both serves and keeps the time: the signal interrupts a
/// blocking read (no SA_RESTART) and raises [`alarmed`]. One thread instead
/// of two matters: with a second thread in the process every system call
/// takes a file reference and every context switch costs more (3-4% of a
/// 1-byte ping-pong, measured by adding an idle thread to sockperf).
pub struct Alarm;

impl Alarm {
    pub fn every(period: Duration) -> anyhow::Result<Alarm> {
        // SAFETY: as in `install`; the handler stores to an atomic only.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_alarm as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGALRM, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            anyhow::bail!(
                "cannot install the SIGALRM handler: {}",
                std::io::Error::last_os_error()
            );
        }
        set_timer(period)?;
        Ok(Alarm)
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        let _ = set_timer(Duration::ZERO);
    }
}

fn set_timer(period: Duration) -> anyhow::Result<()> {
    let tv = libc::timeval {
        tv_sec: period.as_secs() as libc::time_t,
        tv_usec: period.subsec_micros() as libc::suseconds_t,
    };
    let timer = libc::itimerval {
        it_interval: tv,
        it_value: tv,
    };
    // SAFETY: a valid itimerval; the old value is not wanted.
    if unsafe { libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut()) } != 0 {
        anyhow::bail!("setitimer failed: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Nanoseconds since a process-wide start: cheap to store in an atomic.
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A deadline that never comes: block until the end of the run.
pub const NEVER: u64 = u64::MAX;

/// One worker's registration: its thread, and until when it may block
/// (0: it does not block).
#[derive(Debug, Default)]
pub struct Blocked {
    thread: AtomicU64,
    until: AtomicU64,
}

impl Blocked {
    /// Called by the worker itself, before it first blocks.
    pub fn register(&self) {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        self.thread.store(me as u64, Ordering::Release);
    }

    /// The worker may block until `deadline` ([`now_ns`] time, or
    /// [`NEVER`]); 0: it does not block.
    #[inline]
    pub fn until(&self, deadline: u64) {
        self.until.store(deadline, Ordering::Relaxed);
    }

    /// Signal the worker if its deadline has passed.
    pub fn wake_if_due(&self) {
        let until = self.until.load(Ordering::Relaxed);
        if until != 0 && until != NEVER && now_ns() >= until {
            self.wake();
        }
    }

    /// Signal the worker (if registered). Only while its thread has not
    /// been joined: the caller signals before joining.
    pub fn wake(&self) {
        let thread = self.thread.load(Ordering::Acquire);
        if thread != 0 {
            // SAFETY: the id is of a live (not yet joined) thread of this
            // process; a thread that already returned answers ESRCH.
            unsafe {
                libc::pthread_kill(thread as libc::pthread_t, libc::SIGURG);
            }
        }
    }
}

/// At the end of a run: signal every worker until all have returned (a
/// signal sent just before a worker entered its read would be lost, so
/// keep sending).
pub fn until_finished(blocked: &[Blocked], finished: impl Fn() -> bool) {
    while !finished() {
        for b in blocked {
            b.wake();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_blocked_read_returns_interrupted_when_woken() {
        install().expect("handler");
        let (mut a, _b) = UnixStream::pair().expect("pair");
        let blocked = Blocked::default();
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                blocked.register();
                blocked.until(NEVER);
                let mut buf = [0u8; 1];
                a.read(&mut buf).map_err(|e| e.kind())
            });
            until_finished(std::slice::from_ref(&blocked), || worker.is_finished());
            let got = worker.join().expect("join");
            assert_eq!(got, Err(std::io::ErrorKind::Interrupted));
        });
    }
}
