//! Reading the kernel: one module per kernel source (parse text, no I/O;
//! `read(&Root)` ties it to its path), and [`read_host`], which assembles
//! the host model from them and from the driver answers it is handed
//! (the traits of [`crate::base::driver`]). Which driver answers a root
//! has, and reading what the user pointed at, is [`crate::gather`]'s.

pub mod cpufreq;
pub mod cpuidle;
pub mod identity;
pub mod interrupts;
pub mod irq;
pub mod irqname;
pub mod model;
pub mod net_class;
pub mod net_queues;
pub mod packet;
pub mod protocols;
pub mod snmp;
pub mod snmp6;
pub mod sock_diag;
pub mod softirqs;
pub mod softnet;
pub mod stat;
pub mod sysctl;
pub mod topology;
pub mod udp_sockets;
pub mod vulnerabilities;

pub use model::*;

pub mod read;

pub use read::{read_counters, read_counters_checked, read_host, Inputs, Selection};
pub use topology::{parse_user_cpus, possible_cpus};

use std::path::Path;

use crate::base::Root;

/// The `Root` for `--root DIR`, or the live host.
pub fn open_root(root: Option<&Path>) -> anyhow::Result<Root> {
    match root {
        Some(dir) => Root::at(dir),
        None => Ok(Root::live()),
    }
}

/// The tree of fixture host `name` (tests/fixtures/hosts), for the
/// sources' tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> Root {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hosts")
        .join(name);
    Root::at(&dir).expect("fixture tree")
}
