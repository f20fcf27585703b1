//! The run's timeline for `rr`, on the harness: the warm-up lasts its time
//! and, with a warm-up, until the first transaction completed; the
//! measured part gets an interval per second and the host's per-CPU time
//! around it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::observe::Observer;
use crate::base::Root;
use crate::bench::harness::Control;
use crate::bench::report::{deltas, LiveCounter};
use crate::host::{stat, CpuTime};

/// With a warm-up, how long to wait for the first transaction at most.
const FIRST_REPLY_WAIT: Duration = Duration::from_secs(2);

/// One second of the measured run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    pub second: u64,
    pub transactions: u64,
    /// Per thread (index = thread).
    pub per_thread: Vec<u64>,
}

/// The client's side of the calling thread.
pub struct RrControl<'a> {
    live: &'a [LiveCounter],
    observer: &'a mut dyn Observer<Interval>,
    /// For the error when nothing completes in the warm-up.
    describe: String,
    last: Vec<u64>,
    pub intervals: Vec<Interval>,
    /// /proc/stat when the measured part began.
    pub cpu_before: Option<Vec<CpuTime>>,
}

impl<'a> RrControl<'a> {
    /// `describe`: "--to 'ADDR' (tcp)", for the error when nothing answers.
    pub fn new(
        live: &'a [LiveCounter],
        observer: &'a mut dyn Observer<Interval>,
        describe: String,
    ) -> RrControl<'a> {
        RrControl {
            live,
            observer,
            describe,
            last: vec![0; live.len()],
            intervals: Vec::new(),
            cpu_before: None,
        }
    }

    /// /proc/stat now, or a warning and `None`.
    pub fn read_stat(&mut self) -> Option<Vec<CpuTime>> {
        stat::read(&Root::live())
            .map_err(|e| self.observer.warning(&format!("{e}; no per-CPU table")))
            .ok()
    }
}

impl Control for RrControl<'_> {
    /// The warm-up lasts its time, and with a warm-up, until the first
    /// transaction completed (a first packet lost costs TCP a 200 ms+
    /// retransmission), but no longer than [`FIRST_REPLY_WAIT`].
    fn warmed_up(&mut self, elapsed: Duration, warmup: Duration) -> anyhow::Result<bool> {
        if elapsed < warmup {
            return Ok(false);
        }
        let any_done = self.live.iter().any(|l| l.read().0 > 0);
        if warmup.is_zero() || any_done {
            return Ok(true);
        }
        if elapsed >= warmup.max(FIRST_REPLY_WAIT) {
            anyhow::bail!(
                "{}: no transaction completed in the first {:.1} s; is the server overloaded, \
                 or is something dropping the traffic?",
                self.describe,
                elapsed.as_secs_f64()
            );
        }
        Ok(false)
    }

    fn measuring(&mut self) {
        self.cpu_before = self.read_stat();
        self.observer.measuring();
    }

    fn tick(&mut self, second: u64) {
        let per_thread = deltas(self.live, &mut self.last);
        let interval = Interval {
            second,
            transactions: per_thread.iter().sum(),
            per_thread,
        };
        self.observer.interval(&interval);
        self.intervals.push(interval);
    }
}

pub use crate::bench::cpu::thread_cpu;
