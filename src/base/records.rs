//! What the journal records of states that are not a profile: a queue
//! handed to a reader by `nettune steer`, and an XDP program that `bench
//! udp-sink --xdp` attached. Both are journaled like a profile (originals
//! first, synced before the change) so `rollback` undoes them and `doctor`
//! sees them. Plain data over the driver's types: `plan` makes a steer
//! record, a benchmark an XDP record, `apply` journals both and `doctor`
//! judges them, so they live below all of those.

use serde::{Deserialize, Serialize};

use crate::base::driver::flow::FlowSpec;
use crate::base::driver::xdp::XdpMode;

/// The value of an ntuple rule slot that holds no rule.
pub const NO_RULE: &str = "none";

/// The value of an XDP program target before the program is attached,
/// and once it is.
pub const XDP_DETACHED: &str = "not attached";
pub const XDP_ATTACHED: &str = "attached";

/// What `nettune steer` set up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SteerRecord {
    pub iface: String,
    /// The queue taken out of RSS and given the flow.
    pub queue: u32,
    pub flow: FlowSpec,
    /// Where the ntuple rule sits (rollback deletes it there).
    pub location: u32,
    /// The CPU of the queue's IRQ, where the reader should run.
    pub reader_cpu: Option<u32>,
}

/// An XDP program a benchmark attached, recorded before it was attached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpRecord {
    pub iface: String,
    pub queue: u32,
    /// The kernel's program id: rollback removes this program only.
    pub id: u32,
    pub name: String,
    pub mode: XdpMode,
    /// The process that attached it, and its start time (clock ticks after
    /// boot, /proc/PID/stat field 22) so a reused pid is not taken for it.
    pub pid: u32,
    pub pid_start: Option<u64>,
}

impl XdpRecord {
    /// Whether the process that attached the program still runs (it then
    /// removes the program itself when it ends).
    pub fn owner_running(&self) -> bool {
        self.pid_start.is_some() && process_start(self.pid) == self.pid_start
    }
}

/// The guard of `apply --guard`, recorded with the state before the first
/// change: a guard that was killed while it watched leaves a state that
/// nobody judged, which the next apply of the same place refuses to build
/// on and `rollback` undoes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardRecord {
    /// How long it watches after the change, in milliseconds.
    pub duration_ms: u64,
    /// What it watches (`drops`, `softnet`, `udp-rcvbuf`, `findings`).
    pub metrics: Vec<String>,
    /// The process that watches, and its start time (as [`XdpRecord`]).
    pub pid: u32,
    pub pid_start: Option<u64>,
    /// How it ended: `passed`, `rolled back: WHY`; `None` while it
    /// watches, or when it was killed before it decided.
    pub result: Option<String>,
}

impl GuardRecord {
    /// A guard of `duration_ms` watching `metrics` from this process.
    pub fn here(duration_ms: u64, metrics: Vec<String>) -> GuardRecord {
        let pid = std::process::id();
        GuardRecord {
            duration_ms,
            metrics,
            pid,
            pid_start: process_start(pid),
            result: None,
        }
    }

    /// It ended without a verdict: its process is gone (killed).
    pub fn interrupted(&self) -> bool {
        self.result.is_none()
            && !(self.pid_start.is_some() && process_start(self.pid) == self.pid_start)
    }
}

/// The start time of process `pid` (field 22 of /proc/PID/stat).
pub fn process_start(pid: u32) -> Option<u64> {
    let text = crate::base::Root::live()
        .read(&format!("/proc/{pid}/stat"))
        .ok()?;
    // The command name (field 2) may hold spaces: count after its ')'.
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_running_and_a_stale_start_is_not() {
        let pid = std::process::id();
        let start = process_start(pid);
        assert!(start.is_some());
        let mut record = XdpRecord {
            iface: "veth0".to_string(),
            queue: 0,
            id: 1,
            name: "nettune_xsk".to_string(),
            mode: XdpMode::Native,
            pid,
            pid_start: start,
        };
        assert!(record.owner_running());
        record.pid_start = start.map(|s| s + 1);
        assert!(!record.owner_running());
        record.pid_start = None;
        assert!(!record.owner_running());
    }
}
