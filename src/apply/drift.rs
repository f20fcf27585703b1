//! Drift: a value that changed after apply. irqbalance moves IRQs within
//! seconds, a driver reload resets queue settings, NetworkManager rewrites
//! sysctls: the applied state no longer holds, and nobody said so. `history`
//! and `doctor` compare each change of a state still applied with what the
//! kernel shows now.

use serde::Serialize;

use super::journal::{Journal, Outcome};
use super::target::Backend;
use crate::plan::compare::same_value;
use crate::plan::Target;

/// One setting of an applied state that no longer holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drift {
    pub target: Target,
    /// The interface, or `kernel`.
    pub group: String,
    /// What apply wrote.
    pub applied: String,
    /// What the kernel shows now (or why it cannot be read).
    pub now: String,
}

/// The changes of `journal` whose value is no longer the one written
/// (changes the kernel refused are not compared: they were never made).
pub fn drift(journal: &Journal, backend: &Backend) -> Vec<Drift> {
    journal
        .changes
        .iter()
        .filter(|e| e.outcome == Outcome::Changed)
        .filter_map(|e| {
            let now = match backend.read(&e.target) {
                Ok(now) if same_value(&e.target, &now, &e.to) => return None,
                Ok(now) => now.trim().to_string(),
                Err(err) => format!("unreadable ({})", crate::error::message(&err)),
            };
            Some(Drift {
                target: e.target.clone(),
                group: e.group.clone(),
                applied: e.to.clone(),
                now,
            })
        })
        .collect()
}
