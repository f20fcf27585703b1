//! Named network namespaces, made and removed the way `ip netns add` and
//! `ip netns delete` do it (nettune never runs `ip`): a namespace is kept
//! alive by a bind mount of its nsfs file on /run/netns/NAME, and
//! /run/netns is a shared mount so that the namespace is seen from every
//! mount namespace, also from those made later (ip-netns(8)).

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};

/// Where named namespaces live.
pub const NETNS_DIR: &str = "/run/netns";

pub fn path(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}

pub fn exists(name: &str) -> bool {
    path(name).exists()
}

/// Every named namespace, sorted.
pub fn list() -> Vec<String> {
    crate::base::netns::named()
}

/// /run/netns as a shared mount point (made one by binding it onto itself
/// when it is a plain directory), as iproute2 does.
fn make_shared() -> anyhow::Result<()> {
    let shared = || {
        mount(
            None::<&str>,
            NETNS_DIR,
            Some("none"),
            MsFlags::MS_SHARED | MsFlags::MS_REC,
            None::<&str>,
        )
    };
    match shared() {
        Ok(()) => Ok(()),
        Err(Errno::EINVAL) => {
            mount(
                Some(NETNS_DIR),
                NETNS_DIR,
                Some("none"),
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .with_context(|| format!("cannot bind-mount {NETNS_DIR} onto itself"))?;
            shared().with_context(|| format!("cannot make {NETNS_DIR} a shared mount"))
        }
        Err(e) => Err(e).with_context(|| format!("cannot make {NETNS_DIR} a shared mount")),
    }
}

/// Create network namespace `name`; an error when it exists.
pub fn create(name: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(NETNS_DIR).with_context(|| format!("cannot create {NETNS_DIR}"))?;
    make_shared()?;
    let file = path(name);
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o000)
        .open(&file)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                anyhow::anyhow!("network namespace '{name}' exists already")
            } else {
                anyhow::anyhow!("cannot create {}: {e}", file.display())
            }
        })?;
    // A thread of its own moves into a new namespace (a network namespace
    // belongs to a thread) and pins it with the bind mount.
    let made = std::thread::scope(|s| {
        s.spawn(|| -> anyhow::Result<()> {
            unshare(CloneFlags::CLONE_NEWNET)
                .context("cannot create a network namespace (needs CAP_SYS_ADMIN)")?;
            mount(
                Some("/proc/thread-self/ns/net"),
                &file,
                Some("none"),
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .with_context(|| format!("cannot bind-mount the new namespace on {}", file.display()))
        })
        .join()
        .unwrap_or_else(|_| {
            Err(anyhow::anyhow!(
                "the thread making namespace '{name}' panicked"
            ))
        })
    });
    if let Err(e) = made {
        let _ = std::fs::remove_file(&file);
        return Err(e);
    }
    Ok(())
}

/// Remove network namespace `name` (its interfaces go with it once no
/// process uses it any more).
pub fn delete(name: &str) -> anyhow::Result<()> {
    let file = path(name);
    match umount2(&file, MntFlags::MNT_DETACH) {
        Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => {}
        Err(e) => return Err(e).with_context(|| format!("cannot unmount {}", file.display())),
    }
    match std::fs::remove_file(&file) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", file.display())),
    }
}
