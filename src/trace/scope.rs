//! What a tracer is limited to, resolved before anything is loaded: a
//! named network namespace (the inode number the kernel's `net.ns.inum`
//! holds, as /run/netns/NAME shows it) and an interface in it (its
//! ifindex there). An interface without a namespace is one of the
//! caller's namespace, which is then the namespace traced: ifindexes are
//! unique only within a namespace.

use std::fs::File;
use std::os::unix::fs::MetadataExt as _;

use serde::Serialize;

use super::TraceError;
use crate::base::netns;

/// The namespace and interface a tracer keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Scope {
    /// The namespace's name, as `ip netns` names it.
    pub netns: Option<String>,
    /// Its inode number (`ls -i /run/netns/NAME`).
    pub netns_inode: Option<u32>,
    pub iface: Option<String>,
    pub ifindex: Option<u32>,
}

/// The inode number of a namespace file.
fn inode(file: &File, what: &str) -> Result<u32, TraceError> {
    let meta = file
        .metadata()
        .map_err(|e| TraceError::Input(format!("cannot read {what}: {e}")))?;
    u32::try_from(meta.ino()).map_err(|_| {
        TraceError::Unsupported(format!("{what} has inode {} (over 32 bits)", meta.ino()))
    })
}

/// Resolve `--netns` and `--iface`.
pub fn resolve(netns: Option<&str>, iface: Option<&str>) -> Result<Scope, TraceError> {
    let netns_inode = match netns {
        Some(name) => {
            let file =
                netns::open(name).map_err(|e| TraceError::Input(crate::error::message(&e)))?;
            Some(inode(&file, &format!("network namespace '{name}'"))?)
        }
        None if iface.is_some() => {
            let file = File::open("/proc/thread-self/ns/net").map_err(|e| {
                TraceError::Input(format!("cannot open /proc/thread-self/ns/net: {e}"))
            })?;
            Some(inode(&file, "this process's network namespace")?)
        }
        None => None,
    };
    let ifindex = match iface {
        Some(name) => Some(ifindex_in(netns, name)?),
        None => None,
    };
    Ok(Scope {
        netns: netns.map(str::to_string),
        netns_inode,
        iface: iface.map(str::to_string),
        ifindex,
    })
}

/// `name`'s ifindex in namespace `netns` (the caller's for `None`).
fn ifindex_in(netns: Option<&str>, name: &str) -> Result<u32, TraceError> {
    let found = netns::within(netns, || {
        Ok(match nix::net::if_::if_nametoindex(name) {
            Ok(index) => Ok(index),
            Err(_) => Err(nix::net::if_::if_nameindex()
                .map(|list| {
                    list.iter()
                        .map(|i| i.name().to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()),
        })
    })
    .map_err(|e| TraceError::Input(crate::error::message(&e)))?;
    found.map_err(|present| {
        let place = netns.map_or(String::new(), |n| format!(" in network namespace '{n}'"));
        TraceError::Input(format!(
            "interface '{name}' does not exist{place} (present: {})",
            present.join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_scope_is_the_whole_host() {
        assert_eq!(resolve(None, None).expect("scope"), Scope::default());
    }

    #[test]
    fn a_missing_interface_is_named_with_those_present() {
        let err = resolve(None, Some("nettune-no-such0")).expect_err("missing");
        let text = err.to_string();
        assert!(
            text.contains("interface 'nettune-no-such0' does not exist"),
            "{text}"
        );
        assert!(text.contains("lo"), "{text}");
        assert!(matches!(err, TraceError::Input(_)));
    }

    #[test]
    fn a_missing_namespace_is_named() {
        let err = resolve(Some("nettune-no-such-ns"), None).expect_err("missing");
        assert!(
            err.to_string()
                .contains("'nettune-no-such-ns' does not exist"),
            "{err}"
        );
    }
}
