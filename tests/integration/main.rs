//! One integration-test binary, split by topic. Fixture tests need no
//! privilege; namespace tests need root (CI runs as root) and clean up
//! after themselves, also on failure.

mod bench_http;
mod bench_udp;
mod common;
mod inspect;
mod nic;
