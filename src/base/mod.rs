//! The shared vocabulary every stage speaks, with no dependency on any of
//! them: the [`Root`] every kernel file is read and written through,
//! [`Probe`] (a value or why there is none), CPU sets, units, the
//! driver answers ([`driver`]), bounded reads of files nettune does not
//! control ([`fsio`]), text made safe for scripts and messages
//! ([`text`]), files a user names ([`user_file`]), TLS for control
//! connections ([`tls`]) and the journal's records of steering and XDP
//! programs ([`records`]).
//!
//! What several long-running parts share sits here too, so that none of
//! them reaches into another: the [`stop`] token and the run [`observe`]r
//! that benches, the monitor, trace, experiments and the daemon are driven
//! with, the [`epoll`] wrapper of their event loops, and the HTTP/1.1
//! request head and date ([`http`]) that the bench http-server and the
//! monitor's exporter both serve with; and entering a named network
//! namespace ([`netns`]), which reading a host, applying, benches and
//! trace all do; and the [`netlink`] framing that the NIC clients and the
//! socket reader of `host` both speak.
//!
//! `host`, `nic`, `doctor`, `plan`, `apply` and `bench` depend on `base`;
//! `base` depends on nothing of nettune but `error`.

pub mod bpf;
pub mod counter;
pub mod cpuset;
pub mod driver;
pub mod drop_layer;
pub mod drop_reason;
pub mod epoll;
pub mod fsio;
pub mod http;
pub mod json_id;
pub mod netlink;
pub mod netns;
pub mod observe;
pub mod probe;
pub mod random;
pub mod records;
pub mod root;
pub mod stop;
pub mod text;
pub mod tls;
pub mod units;
pub mod user_file;

pub use probe::{Missing, Probe};
pub use root::Root;
