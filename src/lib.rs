//! nettune: see a Linux host's network path, judge it, tune it, measure it.
//!
//! Data flows one way: `host` reads the kernel through a [`host::Root`] into a
//! plain [`host::Host`] model; later stages judge, plan and apply against that
//! model; `bench` measures. Kernel I/O stays at the edges (`host::Root`, `nic`).

pub mod apply;
pub mod base;
pub mod bench;
pub mod cli;
pub mod doctor;
pub mod error;
pub mod experiment;
pub mod fleet;
pub mod gather;
pub mod host;
pub mod inspect;
pub mod monitor;
pub mod nic;
pub mod output;
pub mod plan;
pub mod serve;
pub mod testbed;
pub mod trace;

/// The product-text checker is test code: the integration tests own it, and
/// the library's tests run it over every rule's finding.
#[cfg(test)]
#[path = "../tests/integration/wording.rs"]
mod wording;
