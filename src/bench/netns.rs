//! Opening an engine's sockets inside a named network namespace
//! (`--netns NS`, an engine config's `netns`).
//!
//! A network namespace belongs to a thread, and a socket keeps the
//! namespace it was created in. So an engine opens its sockets on a
//! short-lived thread that has joined the namespace (setns on that thread
//! only), and its workers, on any thread, use them there. One process can
//! thus drive a sink in one namespace and a flood in another. Nothing here
//! remounts /sys: engines read no per-namespace sysfs file.

use std::fs::File;
use std::path::Path;

use anyhow::Context as _;
use nix::sched::{setns, CloneFlags};

/// Where `ip netns add` puts named namespaces.
const NETNS_DIR: &str = "/run/netns";

/// The procfs directory of the calling thread's network namespace:
/// `/proc/net` follows the thread-group leader, not the calling thread.
pub const THREAD_NET: &str = "/proc/thread-self/net";

/// Run `f` in network namespace `netns` (on a thread of its own that joins
/// it), or on the calling thread when `netns` is `None`.
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
                setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| {
                    anyhow::anyhow!(
                        "cannot enter network namespace '{name}': {e}; this needs root (CAP_SYS_ADMIN)"
                    )
                })?;
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("a thread in network namespace '{name}' panicked")))
    })
}

/// Move the calling thread into network namespace `name` (for a worker
/// that opens its own sockets). Only this thread moves.
pub fn enter_thread(name: &str) -> anyhow::Result<()> {
    let file = open(name)?;
    setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| {
        anyhow::anyhow!(
            "cannot enter network namespace '{name}': {e}; this needs root (CAP_SYS_ADMIN)"
        )
    })
}

/// The namespace's file, or an error naming it and the namespaces present.
fn open(name: &str) -> anyhow::Result<File> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        anyhow::bail!("--netns '{name}' is not a network namespace name");
    }
    let path = Path::new(NETNS_DIR).join(name);
    File::open(&path).with_context(|| {
        format!(
            "network namespace '{name}' does not exist ({}); namespaces present: {}",
            path.display(),
            crate::host::netns::present()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_namespace_runs_on_the_calling_thread() {
        let me = std::thread::current().id();
        let ran = within(None, || Ok(std::thread::current().id())).expect("run");
        assert_eq!(ran, me);
    }

    #[test]
    fn a_missing_namespace_is_named() {
        let err = within(Some("nettune-no-such-ns"), || Ok(())).expect_err("missing");
        let text = format!("{err:#}");
        assert!(
            text.contains("'nettune-no-such-ns' does not exist"),
            "{text}"
        );
        assert!(within(Some("../x"), || Ok(())).is_err());
    }
}
