//! The checks a plan needs against the kernel files themselves, before
//! anything is written: files without a write bit (read-only sysctls, a
//! network namespace's mirrored values) and governors the CPU does not
//! offer. `plan`, `apply` and `doctor` run the same checks, so the three
//! agree on what would be left alone.

use std::io;
use std::os::unix::fs::PermissionsExt as _;

use super::{Plan, Skipped, Target};
use crate::base::Root;

/// Move changes that cannot be written into `skipped` before anything is
/// written: kernel files without a write bit (read-only sysctls, a
/// namespace's mirrored values), and governors the CPU does not offer.
pub fn preflight(plan: &mut Plan, root: &Root) {
    let mut kept = Vec::new();
    for change in std::mem::take(&mut plan.changes) {
        match unwritable(root, &change.target, change.to.as_str()) {
            Some(reason) => plan.skipped.push(Skipped {
                target: change.target,
                reason,
                group: change.group,
            }),
            None => kept.push(change),
        }
    }
    plan.changes = kept;
}

fn unwritable(root: &Root, target: &Target, value: &str) -> Option<String> {
    let path = target.path()?;
    let meta = match std::fs::metadata(root.real_path(&path)) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Some("the file does not exist (any more)".to_string())
        }
        Err(_) => return None,
    };
    if meta.is_file() && meta.permissions().mode() & 0o222 == 0 {
        return Some(format!(
            "read-only here (mode {:o}): the kernel does not let it be written in this namespace or on this system",
            meta.permissions().mode() & 0o777
        ));
    }
    if let Some(dir) = path.strip_suffix("/scaling_governor") {
        let offered = root
            .read_value(&format!("{dir}/scaling_available_governors"))
            .ok()
            .flatten()?;
        if !offered.split_whitespace().any(|g| g == value) {
            return Some(format!(
                "governor '{value}' is not offered (scaling_available_governors: {offered})"
            ));
        }
    }
    None
}
