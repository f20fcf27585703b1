//! Gathering a host: the host model ([`crate::host`]) with the driver
//! answers that go with its root ([`crate::nic`]: the live kernel, or the
//! driver file of a captured tree), from the live host, a named network
//! namespace or a captured tree; and `nettune capture` ([`capture`]), which
//! records what a gathering read into a tree that `--root` reads back.

pub mod capture;

use std::path::Path;

use crate::base::{netns, Root};
use crate::host::sysctl::read_root_namespace_sysctls;
use crate::host::{open_root, read_host, Host, Inputs, Selection};

/// Read the host model of what the user pointed at: the live host, a named
/// network namespace (`--netns`, entered for the rest of the process), or a
/// captured tree (`--root`).
pub fn read_target(
    root: Option<&Path>,
    netns: Option<&str>,
    selection: &Selection,
) -> anyhow::Result<Host> {
    if root.is_some() && netns.is_some() {
        anyhow::bail!("--root and --netns cannot be combined: a capture records one namespace; capture it with `nettune capture --netns NAME DIR`");
    }
    // The host-wide values a namespace cannot see, read while this process
    // is still in the host's namespace.
    let host_sysctls = match netns {
        Some(_) => read_root_namespace_sysctls(&Root::live()),
        None => Default::default(),
    };
    if let Some(name) = netns {
        netns::enter(name)?;
    }
    let host = read_at(&open_root(root)?, netns, selection)?;
    Ok(Host {
        host_sysctls,
        ..host
    })
}

/// Fixture host `name` (tests/fixtures/hosts) as `--root` reads it, every
/// interface selected.
#[cfg(test)]
pub(crate) fn fixture_host(name: &str) -> Host {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts")
        .join(name);
    let all = Selection {
        all: true,
        iface: None,
    };
    read_target(Some(&dir), None, &all).expect("fixture host")
}

/// The host model of `root` (with its driver answers), labelled as
/// namespace `netns`.
fn read_at(root: &Root, netns: Option<&str>, selection: &Selection) -> anyhow::Result<Host> {
    let (ethtool, netlink) = crate::nic::sources(root)?;
    let netdev = crate::nic::netdev_source(root)?;
    let sources = Inputs {
        root,
        ethtool: ethtool.as_ref(),
        netlink: netlink.as_ref(),
        netdev: netdev.as_ref(),
        netns: netns.map(str::to_string),
    };
    read_host(&sources, selection)
}

/// The live host model as this process sees it now, after it entered
/// network namespace `netns` (with [`netns::enter`]) or none: what a
/// command that reads the same place again and again (an experiment) uses
/// instead of [`read_target`], which enters the namespace itself.
pub fn read_entered(netns: Option<&str>) -> anyhow::Result<Host> {
    read_at(
        &Root::live(),
        netns,
        &Selection {
            all: true,
            iface: None,
        },
    )
}
