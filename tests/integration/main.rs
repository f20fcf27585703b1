//! One integration-test binary, split by topic.
mod bench_udp;
