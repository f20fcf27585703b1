//! Finding drift ([`Drift`]): `history` and `doctor` compare each change
//! of a state still applied with what the kernel shows now.

use super::journal::{Journal, Outcome};
use super::target::Backend;
use crate::plan::compare::same_value;
use crate::plan::drift::Drift;

/// The changes of `journal` whose value is no longer the one written
/// (changes the kernel refused are not compared: they were never made).
pub fn drift(journal: &Journal, backend: &Backend) -> Vec<Drift> {
    journal
        .changes
        .iter()
        .filter(|e| e.outcome == Outcome::Changed)
        .filter_map(|e| {
            let now = match backend.read(&e.target) {
                Ok(now) if same_value(&e.target, &now, e.to.as_str()) => return None,
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
