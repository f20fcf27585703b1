//! Entering a named network namespace (`--netns NAME`), the way
//! `ip netns exec` does: join the namespace, then give this process a
//! private mount namespace with a fresh sysfs, because /sys shows the
//! network namespace of whoever mounted it (see ip-netns(8)).
//!
//! It also tells which network namespace this process is in, however it
//! was started (`--netns`, `ip netns exec`, `nsenter`), by comparing the
//! identity of its namespace with PID 1's and the named ones': a journal
//! records it so that a rollback restores there.
//!
//! Must run before any other thread starts: `unshare(CLONE_NEWNS)` refuses
//! multi-threaded callers.

use std::fs::File;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::MetadataExt as _;
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
    let file = open(name)?;
    join(&file, name)?;
    private_sysfs(&format!("network namespace '{name}'"))
}

/// [`enter`], only if `name` is still the namespace a journal recorded
/// (its inode, and its cookie when both are known): a namespace deleted
/// and created again under the same name is another one, and nothing of
/// the old one may be written there.
pub fn enter_checked(name: &str, inode: Option<u64>, cookie: Option<u64>) -> anyhow::Result<()> {
    let file = open(name)?;
    let now = file
        .metadata()
        .with_context(|| format!("cannot stat {NETNS_DIR}/{name}"))?
        .ino();
    let other = || {
        anyhow::anyhow!(
            "network namespace '{name}' was deleted and created again: it is another namespace \
             now, and nothing recorded for the old one is written there"
        )
    };
    if inode.is_some_and(|then| then != now) {
        return Err(other());
    }
    join(&file, name)?;
    if let (Some(then), Some(now)) = (cookie, self::cookie()) {
        if then != now {
            return Err(other());
        }
    }
    private_sysfs(&format!("network namespace '{name}'"))
}

/// Give this process a private /sys showing the network namespace it is
/// in already (started by `nsenter --net`, `unshare --net` or a service
/// manager, which leave /sys showing the namespace that mounted it): what
/// [`enter`] does after joining. Nothing to do in the host's namespace.
pub fn own_sysfs() -> anyhow::Result<()> {
    match current()? {
        Current::Host => Ok(()),
        here => private_sysfs(&here.to_string()),
    }
}

/// The procfs directory of the calling thread's network namespace:
/// `/proc/net` follows the thread-group leader, not the calling thread.
pub const THREAD_NET: &str = "/proc/thread-self/net";

/// Run `f` in network namespace `netns` (on a thread of its own that joins
/// it: a socket keeps the namespace it was created in, so sockets opened
/// there can be used on any thread), or on the calling thread when
/// `netns` is `None`. Nothing here remounts /sys.
pub fn within<T: Send>(
    netns: Option<&str>,
    f: impl FnOnce() -> anyhow::Result<T> + Send,
) -> anyhow::Result<T> {
    let Some(name) = netns else {
        return f();
    };
    let file = open(name)?;
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                join(&file, name)?;
                f()
            })
            .join()
            .unwrap_or_else(|_| {
                Err(anyhow::anyhow!(
                    "a thread in network namespace '{name}' panicked"
                ))
            })
    })
}

/// Move the calling thread into network namespace `name` (for a worker
/// that opens its own sockets). Only this thread moves.
pub fn enter_thread(name: &str) -> anyhow::Result<()> {
    join(&open(name)?, name)
}

/// The namespace's file, or an error naming it and the namespaces present.
pub fn open(name: &str) -> anyhow::Result<File> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        anyhow::bail!("'{name}' is not a network namespace name");
    }
    let path = Path::new(NETNS_DIR).join(name);
    File::open(&path).map_err(|e| {
        anyhow::anyhow!(
            "network namespace '{name}' does not exist ({}: {e}); namespaces present: {}",
            path.display(),
            present()
        )
    })
}

fn join(file: &File, name: &str) -> anyhow::Result<()> {
    setns(file, CloneFlags::CLONE_NEWNET).map_err(|e| {
        anyhow::anyhow!(
            "cannot enter network namespace '{name}': {e}; this needs root (CAP_SYS_ADMIN)"
        )
    })
}

/// A private mount namespace with a fresh sysfs, which shows the network
/// namespace of the process that mounts it.
fn private_sysfs(what: &str) -> anyhow::Result<()> {
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
    .with_context(|| format!("cannot mount sysfs for {what}"))?;
    Ok(())
}

/// The network namespace of PID 1: the host's (or, in a container, the
/// container's own).
const HOST_NS: &str = "/proc/1/ns/net";
/// The calling thread's network namespace: a thread may have joined
/// another one than the rest of the process.
const THREAD_NS: &str = "/proc/thread-self/ns/net";

/// A network namespace's identity while it exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The inode of its nsfs file (what `ip netns identify` compares); the
    /// kernel may give it to a new namespace once this one is gone.
    pub inode: u64,
    /// Its cookie (`SO_NETNS_COOKIE`, Linux 5.14): never reused within a
    /// boot. `None` on older kernels.
    pub cookie: Option<u64>,
}

/// Which network namespace the calling thread is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Current {
    /// PID 1's: the host's.
    Host,
    /// One that `ip netns add` named (the first of its names, sorted).
    Named { name: String, id: Identity },
    /// One without a name in /run/netns (`unshare --net`, a service's
    /// private network, a container's).
    Unnamed { id: Identity },
}

impl std::fmt::Display for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Current::Host => write!(f, "the host's network namespace"),
            Current::Named { name, .. } => write!(f, "network namespace {name}"),
            Current::Unnamed { id } => {
                write!(f, "a network namespace without a name (inode {})", id.inode)
            }
        }
    }
}

/// The network namespace of the calling thread, compared by identity with
/// PID 1's and with the named ones: however nettune was started (`--netns`,
/// `ip netns exec`, `nsenter`), this is where it reads and writes.
pub fn current() -> anyhow::Result<Current> {
    let here = nsfs_id(THREAD_NS)?;
    if in_host(here)? {
        return Ok(Current::Host);
    }
    let id = Identity {
        inode: here.1,
        cookie: cookie(),
    };
    Ok(match names_of(here).into_iter().next() {
        Some(name) => Current::Named { name, id },
        None => Current::Unnamed { id },
    })
}

/// The identity of the calling thread's network namespace.
pub fn identity() -> anyhow::Result<Identity> {
    Ok(Identity {
        inode: nsfs_id(THREAD_NS)?.1,
        cookie: cookie(),
    })
}

/// The inode of named namespace `name`, if it exists.
pub fn inode_of(name: &str) -> Option<u64> {
    std::fs::metadata(Path::new(NETNS_DIR).join(name))
        .ok()
        .map(|m| m.ino())
}

/// A sysctl the kernel registers in its initial network namespace only
/// (`net_core_table`, net/core/sysctl_net_core.c): /proc/sys shows it to a
/// thread there and to no other.
const INITIAL_ONLY: &str = "/proc/sys/net/core/netdev_max_backlog";

/// Whether namespace `here` (device, inode) is the host's: PID 1's, or
/// where PID 1 cannot be inspected (a sandbox that hides it even from
/// root), the kernel's initial one.
fn in_host(here: (u64, u64)) -> anyhow::Result<bool> {
    if let Ok(host) = nsfs_id(HOST_NS) {
        return Ok(here == host);
    }
    if !Path::new("/proc/sys/net/core").is_dir() {
        anyhow::bail!(
            "cannot tell which network namespace this is: {HOST_NS} cannot be read and \
             /proc/sys/net/core is missing; run as root with /proc mounted"
        );
    }
    Ok(Path::new(INITIAL_ONLY).exists())
}

/// The device and inode of a namespace file.
fn nsfs_id(path: &str) -> anyhow::Result<(u64, u64)> {
    let meta = std::fs::metadata(path).with_context(|| format!("cannot stat {path}"))?;
    Ok((meta.dev(), meta.ino()))
}

/// The names under /run/netns of the namespace `id` (device, inode), sorted.
fn names_of(id: (u64, u64)) -> Vec<String> {
    named()
        .into_iter()
        .filter(|name| {
            std::fs::metadata(Path::new(NETNS_DIR).join(name))
                .is_ok_and(|m| (m.dev(), m.ino()) == id)
        })
        .collect()
}

/// The cookie of the calling thread's network namespace, read from a
/// socket made there.
fn cookie() -> Option<u64> {
    let socket = nix::sys::socket::socket(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::Datagram,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        None,
    )
    .ok()?;
    let mut value: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writes of the sizes given,
    // and the descriptor is open for the whole call.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NETNS_COOKIE,
            std::ptr::addr_of_mut!(value).cast(),
            &mut len,
        )
    };
    (rc == 0 && len as usize == std::mem::size_of::<u64>()).then_some(value)
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
