//! One integration-test binary, split by topic. Fixture tests need no
//! privilege; namespace tests need root (CI runs as root) and clean up
//! after themselves, also on failure.

#[macro_use]
mod common;
mod ansible;
mod apply;
mod apply_guard;
mod apply_netns;
mod apply_safety;
mod bad_files;
mod bad_input;
mod bench_fast;
mod bench_http;
mod bench_lib;
mod bench_rr;
mod bench_stream;
mod bench_stream_iperf3;
mod bench_udp;
mod doctor;
mod doctor_plan;
mod experiment;
mod experiment_report;
mod fleet;
mod fuzz_findings;
mod golden;
mod inspect;
mod install;
mod layering;
mod monitor;
mod monitor_prom;
mod monitor_tui;
mod monitor_web;
mod napi;
mod netns_journal;
mod nic;
mod nic_set;
mod partial_hosts;
mod plan;
mod plan_file;
mod plan_netns;
mod plan_props;
mod product_text;
mod profiles;
mod profiles_driver;
mod prom_contrib;
mod rr_peers;
mod scenario;
mod serve;
mod serve_guard;
mod serve_tls;
mod state_dir;
mod steer;
mod trace;
mod trace_views;
mod wording;
mod xdp;
