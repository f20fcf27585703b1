//! One integration-test binary, split by topic.
mod doctor;
