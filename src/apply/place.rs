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
//!
//! The namespace is the one nettune ran in, however it was started: with
//! `--netns`, under `ip netns exec`, `nsenter` or `unshare`. One without a
//! name is recorded by identity alone, and can be rolled back only from
//! inside it.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use super::journal::{Journal, StateDir, StateStatus};
use crate::base::netns::{self, Current};
use crate::base::root::{fs_magic, PROC_SUPER_MAGIC, SYSFS_MAGIC};

/// Where a state was applied, or where this process is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A `--root` tree (absolute).
    Tree(String),
    /// The host's network namespace.
    Host,
    /// A named network namespace; its identity when known (journals of
    /// version 1 have none, of version 3 no cookie).
    Named {
        name: String,
        inode: Option<u64>,
        cookie: Option<u64>,
    },
    /// A network namespace without a name.
    Unnamed { inode: u64, cookie: Option<u64> },
}

impl Place {
    /// Where `journal` was applied.
    pub fn of(journal: &Journal) -> Place {
        match (&journal.root, &journal.netns, journal.netns_inode) {
            (Some(root), _, _) => Place::Tree(root.clone()),
            (None, Some(name), inode) => Place::Named {
                name: name.clone(),
                inode,
                cookie: journal.netns_cookie,
            },
            (None, None, Some(inode)) => Place::Unnamed {
                inode,
                cookie: journal.netns_cookie,
            },
            (None, None, None) => Place::Host,
        }
    }

    /// Where the calling thread writes: the tree `root`; the namespace
    /// `netns` it entered (by name; a thread that opens sockets there
    /// without moving also names it); else the network namespace it is in.
    pub fn here(root: Option<&Path>, netns: Option<&str>) -> anyhow::Result<Place> {
        if let Some(root) = root {
            return Ok(Place::Tree(root.display().to_string()));
        }
        if let Some(name) = netns {
            let inode = netns::inode_of(name);
            // The cookie is read from inside only.
            let cookie = netns::identity()
                .ok()
                .filter(|id| Some(id.inode) == inode)
                .and_then(|id| id.cookie);
            return Ok(Place::Named {
                name: name.to_string(),
                inode,
                cookie,
            });
        }
        Ok(match netns::current()? {
            Current::Host => Place::Host,
            Current::Named { name, id } => Place::Named {
                name,
                inode: Some(id.inode),
                cookie: id.cookie,
            },
            Current::Unnamed { id } => Place::Unnamed {
                inode: id.inode,
                cookie: id.cookie,
            },
        })
    }

    /// [`Place::here`], or when this process cannot tell (not root: PID
    /// 1's namespace cannot be read), the place as named by the options.
    pub fn here_or_named(root: Option<&Path>, netns: Option<&str>) -> Place {
        Place::here(root, netns).unwrap_or_else(|_| match netns {
            Some(name) => Place::Named {
                name: name.to_string(),
                inode: None,
                cookie: None,
            },
            None => Place::Host,
        })
    }

    /// What a journal records: `(netns, netns_inode, netns_cookie)`.
    pub fn netns_fields(&self) -> (Option<String>, Option<u64>, Option<u64>) {
        match self {
            Place::Tree(_) | Place::Host => (None, None, None),
            Place::Named {
                name,
                inode,
                cookie,
            } => (Some(name.clone()), *inode, *cookie),
            Place::Unnamed { inode, cookie } => (None, Some(*inode), *cookie),
        }
    }

    /// A network namespace other than the host's.
    pub fn is_namespace(&self) -> bool {
        matches!(self, Place::Named { .. } | Place::Unnamed { .. })
    }

    /// Whether two places are one: the same tree, the host, or the same
    /// namespace by identity (the cookie when both have one, else the
    /// inode, else the name).
    pub fn same(&self, other: &Place) -> bool {
        match (self, other) {
            (Place::Tree(a), Place::Tree(b)) => a == b,
            (Place::Host, Place::Host) => true,
            (a, b) if a.is_namespace() && b.is_namespace() => {
                let (name_a, inode_a, cookie_a) = a.netns_fields();
                let (name_b, inode_b, cookie_b) = b.netns_fields();
                match (cookie_a.zip(cookie_b), inode_a.zip(inode_b)) {
                    (Some((x, y)), _) => x == y,
                    (None, Some((x, y))) => x == y,
                    (None, None) => name_a.is_some() && name_a == name_b,
                }
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Tree(root) => write!(f, "tree {root}"),
            Place::Host => write!(f, "this host"),
            Place::Named { name, .. } => write!(f, "network namespace {name}"),
            Place::Unnamed { inode, .. } => {
                write!(f, "a network namespace without a name (inode {inode})")
            }
        }
    }
}

/// How a rollback reaches the namespace of a live state from where this
/// process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// The host's namespace, where this process is.
    Here,
    /// Enter the named namespace (checked to be the one recorded).
    Enter {
        name: String,
        inode: Option<u64>,
        cookie: Option<u64>,
    },
    /// This process is in the state's namespace already, which has no
    /// name: only its /sys must be made to show it.
    Inside,
}

/// How to reach the namespace of live state `journal`, or why not from
/// here: a state of the host is restored from the host only (never from
/// inside a namespace, which must not reach out), one of a namespace
/// without a name from inside that namespace only. Named namespaces are
/// entered from anywhere, as `--netns` does.
pub fn reach(journal: &Journal, state: &StateDir) -> anyhow::Result<Reach> {
    let place = Place::of(journal);
    let here = || Place::here(None, None);
    match &place {
        Place::Tree(_) => Ok(Reach::Here),
        Place::Named {
            name,
            inode,
            cookie,
        } => Ok(Reach::Enter {
            name: name.clone(),
            inode: *inode,
            cookie: *cookie,
        }),
        Place::Host => {
            let now = here()?;
            if now == Place::Host {
                return Ok(Reach::Here);
            }
            anyhow::bail!(
                "state {} was applied on the host, and this nettune runs in {now}: run `{}` on \
                 the host; nothing was restored",
                journal.id,
                state.command(&format!("rollback {}", journal.id))
            )
        }
        Place::Unnamed { .. } => {
            let now = here()?;
            if now.same(&place) {
                return Ok(Reach::Inside);
            }
            anyhow::bail!(
                "state {} was applied in {place}, and this nettune runs {}: run `{}` inside \
                 that namespace (`nsenter --net=/proc/PID/ns/net` with the PID of a process in \
                 it); if it is gone, drop the state with `{}`; nothing was restored",
                journal.id,
                if now == Place::Host {
                    "on the host".to_string()
                } else {
                    format!("in {now}")
                },
                state.command(&format!("rollback {}", journal.id)),
                state.command(&format!("rollback --forget {} --force", journal.id))
            )
        }
    }
}

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

/// This boot's id (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> Option<String> {
    crate::base::Root::live()
        .read_value("/proc/sys/kernel/random/boot_id")
        .ok()
        .flatten()
}

/// Whether two journals changed the same place: the same tree, or the same
/// network namespace (by identity), or the live host.
pub fn same_place(a: &Journal, b: &Journal) -> bool {
    Place::of(a).same(&Place::of(b))
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
        match netns::inode_of(ns) {
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

    fn named(name: &str, inode: Option<u64>, cookie: Option<u64>) -> Place {
        Place::Named {
            name: name.to_string(),
            inode,
            cookie,
        }
    }

    #[test]
    fn namespaces_are_the_same_place_by_identity_not_by_name() {
        let host = Place::Host;
        let unnamed = Place::Unnamed {
            inode: 7,
            cookie: Some(70),
        };
        // A state of a namespace without a name is never the host's.
        assert!(!host.same(&unnamed));
        assert!(host.same(&Place::Host));
        // The cookie decides when both have one: an inode the kernel gave
        // again to a new namespace is another place.
        assert!(named("blue", Some(7), Some(70)).same(&unnamed));
        assert!(!named("blue", Some(7), Some(71)).same(&unnamed));
        // Else the inode, else the name (journals of format 1).
        assert!(named("blue", Some(7), None).same(&named("red", Some(7), Some(1))));
        assert!(!named("blue", Some(7), None).same(&named("blue", Some(8), None)));
        assert!(named("blue", None, None).same(&named("blue", Some(8), None)));
        assert!(!named("blue", None, None).same(&named("red", None, None)));
        assert!(!Place::Tree("/t".into()).same(&host));
        // What a journal records comes back as the same place.
        for place in [host, unnamed, named("blue", Some(7), Some(70))] {
            let (netns, netns_inode, netns_cookie) = place.netns_fields();
            let journal = Journal {
                netns,
                netns_inode,
                netns_cookie,
                ..crate::apply::journal::tests::journal(1)
            };
            assert_eq!(Place::of(&journal), place);
        }
    }

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
