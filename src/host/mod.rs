//! Reading the kernel: one module per kernel source (parse text, no I/O;
//! `read(&Root)` ties it to its path), and `Host::read`, which assembles the
//! host model from them.

pub mod cpuset;
pub mod interrupts;
pub mod irqname;
pub mod model;
pub mod packet;
pub mod probe;
pub mod root;
pub mod snmp;
pub mod softirqs;
pub mod softnet;
pub mod stat;

pub use model::*;
pub use probe::{Missing, Probe};
pub use root::Root;
