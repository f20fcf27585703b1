//! `--root DIR` / `--netns NAME`: which host a reading command looks at,
//! shared by inspect, doctor, plan and apply.

use std::path::PathBuf;

/// Which host to read: live (default), a named network namespace, or a
/// captured tree.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HostArgs {
    /// Read a captured or fixture tree (DIR/proc, DIR/sys) instead of this host.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Look inside a named network namespace (as `ip netns exec NAME` would).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
}
