//! Where a plan was made: the host's identity and the network namespace or
//! tree, recorded in a saved plan so that it is never applied elsewhere.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::base::Root;
use crate::host::identity;

/// Where a plan was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MadeFor {
    /// `/etc/machine-id` (systemd's stable host identity); `None` when the
    /// host has none.
    pub machine_id: Option<String>,
    /// `/proc/sys/kernel/hostname`.
    pub hostname: Option<String>,
    /// The network namespace (`--netns`), by name.
    pub netns: Option<String>,
    /// The `--root` tree it was computed on.
    pub root: Option<String>,
}

impl MadeFor {
    /// The identity of the place `root` (and `netns`) shows.
    pub fn of(root: &Root, tree: Option<&Path>, netns: Option<&str>) -> MadeFor {
        // Without a machine id the host is named by its hostname.
        MadeFor {
            machine_id: identity::machine_id(root),
            hostname: identity::hostname(root),
            netns: netns.map(str::to_string),
            root: tree.map(|t| {
                std::fs::canonicalize(t)
                    .unwrap_or_else(|_| t.to_path_buf())
                    .display()
                    .to_string()
            }),
        }
    }

    /// "host web1 (machine id 3f2a...), network namespace blue".
    pub fn describe(&self) -> String {
        let host = match (&self.hostname, &self.machine_id) {
            (Some(h), Some(m)) => format!("host {h} (machine id {m})"),
            (Some(h), None) => format!("host {h}"),
            (None, Some(m)) => format!("the host with machine id {m}"),
            (None, None) => "an unidentified host".to_string(),
        };
        match (&self.root, &self.netns) {
            (Some(root), _) => format!("tree {root} ({host})"),
            (None, Some(ns)) => format!("network namespace {ns} on {host}"),
            (None, None) => host,
        }
    }

    /// Why a plan made for `self` must not be applied `here`, if it must not.
    pub fn mismatch(&self, here: &MadeFor) -> Option<String> {
        let other_host = match (&self.machine_id, &here.machine_id) {
            (Some(a), Some(b)) => a != b,
            _ => self.hostname.is_some() && self.hostname != here.hostname,
        };
        if other_host || self.root != here.root || self.netns != here.netns {
            return Some(format!(
                "it was made for {}, and this is {}",
                self.describe(),
                here.describe()
            ));
        }
        None
    }
}
