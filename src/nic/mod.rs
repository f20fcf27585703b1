//! Driver settings (the kernel's ethtool interface) and link-level netlink
//! (qdiscs): the implementations of the traits in [`crate::base::driver`].
//!
//! `live` talks to the running kernel (the SIOCETHTOOL ioctl, rtnetlink);
//! `recorded` answers from (and writes to) the `nettune/driver.json` file of
//! a captured tree, so a recorded answer can stand in for a driver this
//! machine lacks. [`sources`] picks one for a `Root`.

use crate::base::driver::{Ethtool, NapiSet, Netdev, Netlink, NoDriverData};
use crate::base::Root;

pub mod live;
pub mod recorded;

/// Driver data for a root: the live kernel, the capture's driver file, or
/// "unknown" for a tree without one.
pub fn sources(root: &Root) -> anyhow::Result<(Box<dyn Ethtool>, Box<dyn Netlink>)> {
    if root.is_live() {
        return Ok((Box::new(live::LiveEthtool), Box::new(live::LiveNetlink)));
    }
    match recorded::DriverFile::load(root)? {
        Some(file) => {
            let recorded = recorded::Recorded::from(file);
            Ok((Box::new(recorded.clone()), Box::new(recorded)))
        }
        None => Ok((Box::new(NoDriverData), Box::new(NoDriverData))),
    }
}

/// The netdev netlink family for a root: the live kernel, the capture's
/// driver file, or "unknown" for a tree without one.
pub fn netdev_source(root: &Root) -> anyhow::Result<Box<dyn Netdev>> {
    if root.is_live() {
        return Ok(Box::new(live::LiveNetdev));
    }
    Ok(match recorded::DriverFile::load(root)? {
        Some(file) => Box::new(recorded::Recorded::from(file)),
        None => Box::new(NoDriverData),
    })
}

/// Where `napi-set` goes for a root: the live kernel, or the tree's driver
/// file.
pub fn napi_setter(root: &Root) -> Box<dyn NapiSet> {
    if root.is_live() {
        Box::new(live::LiveNetdev)
    } else {
        Box::new(recorded::RecordedWriter::new(root))
    }
}

/// The standard per-queue counters of `iface` (netdev `qstats-get`, Linux
/// 6.9+): rx and tx queues by index, counters by the netdev spec's names
/// (`rx-packets`, `rx-bytes`, `rx-hw-drops`, `tx-packets`, ...). One dump,
/// cheap enough to sample every second for per-queue rates; not supported
/// when the kernel lacks qstats or the driver has no standard statistics.
pub fn qstats(
    root: &Root,
    iface: &str,
) -> anyhow::Result<crate::base::Probe<Vec<crate::base::driver::QueueStats>>> {
    Ok(netdev_source(root)?.qstats(iface))
}
