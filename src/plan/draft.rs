//! The plan being built: what each planner (queues, driver, NAPI, kernel)
//! adds to, keeping a change only where the value differs in meaning.

use super::change::{Change, HostWide, Skipped, KERNEL_GROUP};
use super::compare;
use super::render;
use super::target::Target;
use super::value::Value;

/// The plan being built: changes only where the value differs in meaning.
#[derive(Debug, Default)]
pub(super) struct Draft {
    pub(super) changes: Vec<Change>,
    pub(super) skipped: Vec<Skipped>,
    pub(super) host_wide: Vec<HostWide>,
}

impl Draft {
    /// Change `target` from `from` to `to`, unless they mean the same.
    pub(super) fn want(
        &mut self,
        group: &str,
        target: Target,
        from: &str,
        to: Value,
        reason: String,
    ) {
        if compare::same_value(&target, from, to.as_str()) {
            return;
        }
        self.changes.push(Change {
            target,
            from: from.trim().to_string(),
            to,
            reason,
            group: group.to_string(),
            origin: None,
        });
    }

    /// A value only the host can set: named in `host_wide`, and left alone
    /// here with the command that sets it there. `why` says why this
    /// namespace cannot.
    pub(super) fn host_wide(
        &mut self,
        target: Target,
        from: Option<&str>,
        to: Value,
        reason: String,
        why: &str,
    ) {
        let skip = format!(
            "host-wide: {why}; set it on the host: {}",
            render::set_command(&target, &to)
        );
        self.skip(KERNEL_GROUP, &target, &skip);
        self.host_wide.push(HostWide {
            target,
            from: from.map(|f| f.trim().to_string()),
            to,
            reason,
        });
    }

    /// Remove every planned value of `target` (change, host-wide value, and
    /// the note that it was left alone).
    pub(super) fn forget(&mut self, target: &Target) {
        self.changes.retain(|c| &c.target != target);
        self.host_wide.retain(|h| &h.target != target);
        self.skipped.retain(|s| &s.target != target);
    }

    pub(super) fn skip(&mut self, group: &str, target: &Target, reason: &str) {
        self.skipped.push(Skipped {
            target: target.clone(),
            reason: reason.to_string(),
            group: group.to_string(),
        });
    }
}
