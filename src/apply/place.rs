//! Where a state was applied, and whether it can still be undone there.
//!
//! A tool that writes kernel settings must never write them to the wrong
//! host. So a `--root` tree that is really the live host (a symlink to `/`,
//! `/.`, a bind mount of `/`, a tree whose `proc/` or `sys/` is a mounted
//! procfs or sysfs) is refused, and a journal records which network
//! namespace it changed by the namespace's identity (the inode of its nsfs
//! file), not only by its name: a namespace deleted and created again under
//! the same name is another namespace, and the old state cannot be undone
//! there. The boot id tells a state applied before a reboot (its changes
//! are gone unless persisted).

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use super::journal::{Journal, StateStatus};
use crate::base::root::{fs_magic, PROC_SUPER_MAGIC, SYSFS_MAGIC};

/// Where `ip netns add` puts named namespaces.
const NETNS_DIR: &str = "/run/netns";

/// Refuse a `--root` tree that reaches the live kernel: `verb` is what was
/// about to happen ("apply", "rollback").
pub fn check_tree(dir: &Path, verb: &str) -> anyhow::Result<()> {
    let meta =
        std::fs::metadata(dir).map_err(|e| anyhow::anyhow!("--root '{}': {e}", dir.display()))?;
    let live = std::fs::metadata("/").map_err(|e| anyhow::anyhow!("cannot stat /: {e}"))?;
    let refuse = |why: &str| {
        anyhow::anyhow!(
            "--root '{}' {why}: nettune {verb} would change the live host through it; the live \
             host is changed only without --root (as root); nothing was changed",
            dir.display()
        )
    };
    if (meta.dev(), meta.ino()) == (live.dev(), live.ino()) {
        return Err(refuse("is the live root directory /"));
    }
    for (sub, magic, kind) in [
        ("proc", PROC_SUPER_MAGIC, "procfs"),
        ("sys", SYSFS_MAGIC, "sysfs"),
    ] {
        if fs_magic(&dir.join(sub)) == Some(magic) {
            return Err(refuse(&format!("has a mounted {kind} at {sub}/")));
        }
    }
    Ok(())
}

/// The identity of network namespace `name`: the inode of its nsfs file.
pub fn netns_inode(name: &str) -> Option<u64> {
    std::fs::metadata(Path::new(NETNS_DIR).join(name))
        .ok()
        .map(|m| m.ino())
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
}

/// Whether two journals changed the same place: the same tree, or the same
/// network namespace (by name and identity), or the live host.
pub fn same_place(a: &Journal, b: &Journal) -> bool {
    a.root == b.root
        && a.netns == b.netns
        && (a.netns.is_none()
            || a.netns_inode.is_none()
            || b.netns_inode.is_none()
            || a.netns_inode == b.netns_inode)
}

/// Why a state can no longer be undone, if it cannot.
pub fn not_undoable(journal: &Journal) -> Option<String> {
    match journal.status {
        StateStatus::RolledBack => return Some("rolled back already".to_string()),
        StateStatus::Failed => {
            return Some("it failed and was restored when it was applied".to_string())
        }
        StateStatus::Forgotten => return Some("forgotten (rollback --forget)".to_string()),
        StateStatus::Applying | StateStatus::Complete => {}
    }
    if let Some(x) = journal.xdp.as_ref().filter(|x| x.owner_running()) {
        return Some(format!(
            "its nettune bench (pid {}) is still running and removes the program when it ends \
             (Ctrl-C or SIGTERM stops it)",
            x.pid
        ));
    }
    if let Some(root) = &journal.root {
        if !Path::new(root).is_dir() {
            return Some(format!("the tree {root} no longer exists"));
        }
        return None;
    }
    if let Some(ns) = &journal.netns {
        match netns_inode(ns) {
            None => return Some(format!("network namespace '{ns}' no longer exists")),
            Some(now) if journal.netns_inode.is_some_and(|then| then != now) => {
                return Some(format!(
                    "network namespace '{ns}' was deleted and created again: it is another namespace now"
                ))
            }
            Some(_) => {}
        }
    }
    let rebooted = matches!(
        (&journal.boot_id, boot_id()),
        (Some(then), Some(now)) if *then != now
    );
    if rebooted && journal.persist.is_empty() {
        return Some("the host rebooted since: its changes did not survive the reboot".to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_that_is_the_live_root_is_refused() {
        let err = check_tree(Path::new("/"), "apply").expect_err("/");
        assert!(err.to_string().contains("live root directory"), "{err}");
        let err = check_tree(Path::new("/."), "apply").expect_err("/.");
        assert!(err.to_string().contains("nothing was changed"), "{err}");
        let dir = tempfile::tempdir().expect("tempdir");
        let link = dir.path().join("host");
        std::os::unix::fs::symlink("/", &link).expect("symlink");
        assert!(check_tree(&link, "rollback").is_err());
        std::fs::create_dir(dir.path().join("tree")).expect("mkdir");
        assert!(check_tree(&dir.path().join("tree"), "apply").is_ok());
    }
}
