//! Drift: a value that changed after apply. irqbalance moves IRQs within
//! seconds, a driver reload resets queue settings, NetworkManager rewrites
//! sysctls: the applied state no longer holds, and nobody said so. `apply`
//! finds it (it reads the kernel), `history` shows it and `doctor` judges
//! it; the record is made of a target and its values, so it sits beside
//! them.

use serde::Serialize;

use super::target::Target;
use super::value::Value;

/// One setting of an applied state that no longer holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drift {
    pub target: Target,
    /// The interface, or `kernel`.
    pub group: String,
    /// What apply wrote.
    pub applied: Value,
    /// What the kernel shows now (or why it cannot be read).
    pub now: String,
}
