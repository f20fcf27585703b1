//! Driver settings (the kernel's ethtool interface) and link-level netlink
//! (qdiscs): the implementations of the traits in [`crate::base::driver`].
//!
//! `live` talks to the running kernel (the SIOCETHTOOL ioctl, rtnetlink);
//! `recorded` answers from (and writes to) the `nettune/driver.json` file of
//! a captured tree, so a recorded answer can stand in for a driver this
//! machine lacks. [`sources`] picks one for a `Root`.

use crate::base::driver::{Ethtool, Netlink, NoDriverData};
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
