//! `nettune apply`, `rollback` and `history`: make a plan's changes with a
//! journal of the original values, undo them exactly, list what was done.
//!
//! Apply: compute the plan; read every target's current value; write the
//! journal and sync it BEFORE the first change; make the changes one by one,
//! reading each back; on a failure restore everything changed so far (in
//! reverse) and exit with an error naming the change. A write the kernel
//! refuses for what it is (a managed IRQ, a qdisc kind it lacks, a driver
//! without the operation) changes nothing and is reported as left alone:
//! these are only discovered when written, as no file tells them in advance.

pub mod journal;
pub mod persist;
mod target;

pub use journal::{Entry, Journal, Outcome, StateDir, StateStatus, DEFAULT_STATE_DIR};
pub use target::{Backend, WriteError};

use crate::plan::compare::same_value;

/// Put back the originals of `entries`, last first. A target that already
/// holds its original is not written. Returns the errors.
pub fn restore(backend: &Backend, entries: &[Entry]) -> Vec<String> {
    let mut errors = Vec::new();
    for e in entries.iter().rev() {
        if let Err(err) = restore_one(backend, e) {
            errors.push(format!("{}: {err:#}", e.target));
        }
    }
    errors
}

fn restore_one(backend: &Backend, entry: &Entry) -> anyhow::Result<()> {
    let target = &entry.target;
    let current = backend.read(target)?;
    if same_value(target, &current, &entry.original) {
        return Ok(());
    }
    backend.write_original(target, &entry.original)?;
    backend.check(target, &entry.original)?;
    Ok(())
}
