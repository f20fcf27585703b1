//! Host-wide values a testbed scenario changes (sysctls a network
//! namespace cannot set: `net.core.rmem_default`, ...): snapshot before,
//! restore at `testbed down`.
//!
//! The snapshot is written (and synced) before the first value changes,
//! under /run/nettune/testbed, which, like the namespaces in /run/netns and
//! the values themselves, does not survive a reboot. Changes and restores
//! hold an exclusive lock on [`LOCK`], which other programs that change
//! host-wide values for a while take too, so two of them never interleave.
//! A value someone changed again after the scenario set it is left as it
//! is, and said so: restoring would undo their change.

use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::base::Root;

/// Where snapshots live (one file per testbed).
pub const DIR: &str = "/run/nettune/testbed";
/// The lock every change of a host-wide value holds.
pub const LOCK: &str = "/tmp/nettune-host-values.lock";

/// One host-wide sysctl a scenario set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostValue {
    /// Dotted name: `net.core.rmem_default`.
    pub sysctl: String,
    /// Its value before the scenario.
    pub before: String,
    /// The value the scenario wrote.
    pub set: String,
}

fn proc_path(sysctl: &str) -> String {
    format!("/proc/sys/{}", sysctl.replace('.', "/"))
}

fn snapshot_path(testbed: &str) -> PathBuf {
    snapshot_in(Path::new(DIR), testbed)
}

fn snapshot_in(dir: &Path, testbed: &str) -> PathBuf {
    dir.join(format!("{testbed}.json"))
}

/// An exclusive flock on [`LOCK`], released when dropped.
struct Locked(std::fs::File);

fn lock() -> anyhow::Result<Locked> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK)
        .with_context(|| format!("cannot open the host-values lock {LOCK}"))?;
    // SAFETY: flock on a descriptor this function owns; blocks until free.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("cannot lock {LOCK}"));
    }
    Ok(Locked(file))
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: unlocking the descriptor this guard owns.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

fn read(root: &Root, sysctl: &str) -> anyhow::Result<String> {
    let text = root
        .read(&proc_path(sysctl))
        .with_context(|| format!("cannot read {sysctl}"))?;
    Ok(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A wanted value: "at most N" (the scenario lowers a bigger value and
/// leaves a smaller one), for the numbers scenarios shrink.
#[derive(Debug, Clone, Copy)]
pub struct AtMost {
    pub sysctl: &'static str,
    pub value: u64,
}

/// Set `wanted` on the host for testbed `testbed`, with the snapshot
/// written first. The values changed (none when the host already has
/// them). On a failure, whatever was changed is restored.
pub fn set(testbed: &str, wanted: &[AtMost]) -> anyhow::Result<Vec<HostValue>> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    set_in(&Root::live(), Path::new(DIR), testbed, wanted)
}

/// [`set`] on the kernel files of `root`, the snapshot in `dir`.
fn set_in(
    root: &Root,
    dir: &Path,
    testbed: &str,
    wanted: &[AtMost],
) -> anyhow::Result<Vec<HostValue>> {
    let _held = lock()?;
    let mut changes = Vec::new();
    for w in wanted {
        let before = read(root, w.sysctl)?;
        let now: u64 = before
            .parse()
            .with_context(|| format!("{} is '{before}', not a number of bytes", w.sysctl))?;
        if now > w.value {
            changes.push(HostValue {
                sysctl: w.sysctl.to_string(),
                before,
                set: w.value.to_string(),
            });
        }
    }
    if changes.is_empty() {
        return Ok(changes);
    }
    save(dir, testbed, &changes)?;
    for (i, c) in changes.iter().enumerate() {
        if let Err(e) = root.write(&proc_path(&c.sysctl), &c.set) {
            let _ = restore_values(root, &changes[..i]);
            let _ = std::fs::remove_file(snapshot_in(dir, testbed));
            return Err(anyhow::anyhow!(
                "cannot set {} to '{}' on the host: {e}; nothing is left changed",
                c.sysctl,
                c.set
            ));
        }
    }
    Ok(changes)
}

fn save(dir: &Path, testbed: &str, changes: &[HostValue]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = snapshot_in(dir, testbed);
    let mut file =
        std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(serde_json::to_string_pretty(changes)?.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// What a restore did with one value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Restored {
    pub sysctl: String,
    /// The value it has now.
    pub value: String,
    /// False when someone changed it after the scenario: it is left as
    /// they set it.
    pub restored: bool,
}

fn restore_values(root: &Root, changes: &[HostValue]) -> anyhow::Result<Vec<Restored>> {
    let mut out = Vec::new();
    for c in changes.iter().rev() {
        let now = read(root, &c.sysctl)?;
        if now == c.set {
            root.write(&proc_path(&c.sysctl), &c.before).map_err(|e| {
                anyhow::anyhow!("cannot restore {} to '{}': {e}", c.sysctl, c.before)
            })?;
            out.push(Restored {
                sysctl: c.sysctl.clone(),
                value: c.before.clone(),
                restored: true,
            });
        } else {
            out.push(Restored {
                sysctl: c.sysctl.clone(),
                value: now,
                restored: false,
            });
        }
    }
    out.reverse();
    Ok(out)
}

/// Put back what testbed `testbed`'s scenario changed on the host, and
/// forget the snapshot. Nothing to do (an empty list) without one.
pub fn restore(testbed: &str) -> anyhow::Result<Vec<Restored>> {
    restore_in(&Root::live(), Path::new(DIR), testbed)
}

/// [`restore`] on the kernel files of `root`, the snapshot in `dir`.
fn restore_in(root: &Root, dir: &Path, testbed: &str) -> anyhow::Result<Vec<Restored>> {
    let path = snapshot_in(dir, testbed);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let changes: Vec<HostValue> = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a host-value snapshot", path.display()))?;
    let _held = lock()?;
    let done = restore_values(root, &changes)?;
    std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    Ok(done)
}

/// The host values testbed `testbed` has changed, from its snapshot.
pub fn changed(testbed: &str) -> Vec<HostValue> {
    std::fs::read_to_string(snapshot_path(testbed))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree with the two sysctls, and a snapshot directory.
    fn tree(rmem_default: &str, rmem_max: &str) -> (tempfile::TempDir, Root, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let core = dir.path().join("proc/sys/net/core");
        std::fs::create_dir_all(&core).expect("mkdir");
        std::fs::write(core.join("rmem_default"), format!("{rmem_default}\n")).expect("write");
        std::fs::write(core.join("rmem_max"), format!("{rmem_max}\n")).expect("write");
        let root = Root::at(dir.path()).expect("root");
        let snapshots = dir.path().join("snapshots");
        (dir, root, snapshots)
    }

    const WANTED: &[AtMost] = &[
        AtMost {
            sysctl: "net.core.rmem_default",
            value: 212_992,
        },
        AtMost {
            sysctl: "net.core.rmem_max",
            value: 212_992,
        },
    ];

    #[test]
    fn a_bigger_value_is_lowered_recorded_first_and_put_back() {
        let (_dir, root, snaps) = tree("4194304", "100000");
        let changed = set_in(&root, &snaps, "ntb-a", WANTED).expect("set");
        // rmem_max is already smaller: left alone, not recorded.
        assert_eq!(
            changed,
            [HostValue {
                sysctl: "net.core.rmem_default".into(),
                before: "4194304".into(),
                set: "212992".into(),
            }]
        );
        assert_eq!(
            read(&root, "net.core.rmem_default").expect("read"),
            "212992"
        );
        assert!(snapshot_in(&snaps, "ntb-a").exists());
        let done = restore_in(&root, &snaps, "ntb-a").expect("restore");
        assert_eq!(done.len(), 1);
        assert!(done[0].restored);
        assert_eq!(
            read(&root, "net.core.rmem_default").expect("read"),
            "4194304"
        );
        assert_eq!(read(&root, "net.core.rmem_max").expect("read"), "100000");
        assert!(!snapshot_in(&snaps, "ntb-a").exists());
        // Nothing recorded: nothing to do.
        assert!(restore_in(&root, &snaps, "ntb-a")
            .expect("again")
            .is_empty());
    }

    #[test]
    fn a_value_changed_after_the_scenario_is_left_as_it_is() {
        let (_dir, root, snaps) = tree("4194304", "4194304");
        assert_eq!(
            set_in(&root, &snaps, "ntb-b", WANTED).expect("set").len(),
            2
        );
        root.write("/proc/sys/net/core/rmem_max", "1000000")
            .expect("someone else");
        let done = restore_in(&root, &snaps, "ntb-b").expect("restore");
        let by_name = |n: &str| done.iter().find(|r| r.sysctl == n).cloned().expect(n);
        assert!(by_name("net.core.rmem_default").restored);
        let max = by_name("net.core.rmem_max");
        assert!(!max.restored);
        assert_eq!(max.value, "1000000");
        assert_eq!(read(&root, "net.core.rmem_max").expect("read"), "1000000");
        assert_eq!(
            read(&root, "net.core.rmem_default").expect("read"),
            "4194304"
        );
    }

    #[test]
    fn a_value_that_is_not_a_number_changes_nothing() {
        let (_dir, root, snaps) = tree("lots", "4194304");
        assert!(set_in(&root, &snaps, "ntb-c", WANTED).is_err());
        assert_eq!(read(&root, "net.core.rmem_max").expect("read"), "4194304");
        assert!(!snapshot_in(&snaps, "ntb-c").exists());
    }

    #[test]
    fn sysctl_names_map_to_proc_files() {
        assert_eq!(
            proc_path("net.core.rmem_default"),
            "/proc/sys/net/core/rmem_default"
        );
        assert_eq!(
            snapshot_path("ntb-a"),
            PathBuf::from("/run/nettune/testbed/ntb-a.json")
        );
    }
}
