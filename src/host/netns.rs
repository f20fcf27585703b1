//! Entering a named network namespace (`--netns NAME`), the way
//! `ip netns exec` does: join the namespace, then give this process a
//! private mount namespace with a fresh sysfs, because /sys shows the
//! network namespace of whoever mounted it (see ip-netns(8)).
//!
//! Must run before any other thread starts: `unshare(CLONE_NEWNS)` refuses
//! multi-threaded callers.

use std::fs::File;
use std::path::Path;

use anyhow::Context as _;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{setns, unshare, CloneFlags};

/// Where `ip netns add` puts named namespaces.
const NETNS_DIR: &str = "/run/netns";

/// Every named network namespace (/run/netns), sorted.
pub fn named() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The named namespaces for a message: "a, b", or "none".
pub fn present() -> String {
    let names = named();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

pub fn enter(name: &str) -> anyhow::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        anyhow::bail!("'{name}' is not a network namespace name");
    }
    let path = Path::new(NETNS_DIR).join(name);
    let file = File::open(&path).map_err(|e| {
        anyhow::anyhow!(
            "network namespace '{name}' does not exist ({}: {e}); namespaces present: {}",
            path.display(),
            present()
        )
    })?;
    setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| {
        anyhow::anyhow!(
            "cannot enter network namespace '{name}': {e}; this needs root (CAP_SYS_ADMIN)"
        )
    })?;
    unshare(CloneFlags::CLONE_NEWNS)
        .context("cannot create a private mount namespace to remount /sys (needs CAP_SYS_ADMIN)")?;
    // Keep our remount of /sys from propagating back to the host.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_SLAVE | MsFlags::MS_REC,
        None::<&str>,
    )
    .context("cannot make / a slave mount")?;
    umount2("/sys", MntFlags::MNT_DETACH).context("cannot detach the host's /sys")?;
    mount(
        Some("sysfs"),
        "/sys",
        Some("sysfs"),
        MsFlags::empty(),
        None::<&str>,
    )
    .with_context(|| format!("cannot mount sysfs for network namespace '{name}'"))?;
    Ok(())
}

/// Where the process was before [`enter_returnable`]: its network and mount
/// namespaces and its working directory, to go back to.
pub struct Origin {
    net: File,
    mnt: File,
    cwd: File,
}

/// [`enter`], keeping the way back: a command that tunes a namespace and
/// then must act on the host again (delete the namespaces it made) leaves
/// with [`Origin::leave`].
pub fn enter_returnable(name: &str) -> anyhow::Result<Origin> {
    let open = |path: &str| File::open(path).with_context(|| format!("cannot open {path}"));
    let origin = Origin {
        net: open("/proc/thread-self/ns/net")?,
        mnt: open("/proc/thread-self/ns/mnt")?,
        cwd: open(".")?,
    };
    enter(name)?;
    Ok(origin)
}

impl Origin {
    /// The network namespace of before (a new descriptor): where host-wide
    /// values can still be read and written, from a thread that joins it.
    pub fn net(&self) -> anyhow::Result<File> {
        self.net
            .try_clone()
            .context("cannot keep the host's network namespace open")
    }

    /// Go back to the namespaces and directory of before. Like [`enter`],
    /// only while no other thread runs.
    pub fn leave(self) -> anyhow::Result<()> {
        setns(&self.mnt, CloneFlags::CLONE_NEWNS)
            .context("cannot return to the host's mount namespace")?;
        setns(&self.net, CloneFlags::CLONE_NEWNET)
            .context("cannot return to the host's network namespace")?;
        nix::unistd::fchdir(&self.cwd).context("cannot return to the working directory")?;
        Ok(())
    }
}
