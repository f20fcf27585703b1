//! The running kernel's answers: [`LiveEthtool`] and [`LiveNetlink`].
//!
//! Both open their socket per call, in the network namespace of the calling
//! thread, so a thread that has `setns()`ed into a namespace reads that
//! namespace's interfaces.
//!
//! Why the SIOCETHTOOL ioctl and not the ethtool generic-netlink family:
//! every read nettune needs (driver info, channels, rings, coalescing,
//! features, RSS table, rx-flow-hash, statistics) exists as an ioctl command,
//! each is one synchronous call with a fixed `#[repr(C)]` struct whose layout
//! is stable kernel ABI, and it needs no family-id resolution or attribute
//! parsing. The netlink family (Linux 5.6+) adds nothing for these reads;
//! rx-flow-hash and the RSS table were reachable only through the ioctl until
//! recently anyway.
//!
//! The root qdisc comes from rtnetlink (`RTM_GETQDISC` dump), which has no
//! ioctl equivalent.

mod ethtool;
mod ethtool_ioctl;
mod ethtool_set;
pub mod link;
mod netdev;
mod ntuple;
mod queue_stats;
mod rtnetlink;
pub mod xdp_link;

pub(crate) use ethtool::LEGACY_FEATURE_NAMES;
pub use ethtool_ioctl::LiveEthtool;
pub use netdev::LiveNetdev;
pub use rtnetlink::LiveNetlink;

/// What the driver of interface `ifindex` can do with XDP (the netdev
/// family's xdp-features), in the calling thread's network namespace.
pub fn xdp_features(ifindex: u32) -> crate::base::Probe<crate::base::driver::xdp::XdpFeatures> {
    netdev::xdp_features(ifindex)
}
