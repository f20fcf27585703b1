//! `nettune serve`: one daemon on the far host that starts the server side
//! of a bench on request (udp-sink, rr-server, http-server, stream-server),
//! each test on ports and threads of its own, and sends the server side's
//! report back (the receiver's view).
//!
//! Security: a shared token (HMAC-SHA256 over both sides' nonces, so it
//! never crosses the wire), TLS 1.3 on the control connections when
//! configured (with client certificates when asked for), or, without a
//! token or client certificates, loopback only; connections in their
//! handshake bounded per source address and in all; every server
//! side serves the address that asked and no other; every test is bounded
//! in time, threads and what it sends; a malformed, oversized or slow
//! control message costs a thread for a few seconds and a log line.
//! [`proto`] documents the protocol, docs/serve.md for users.
//!
//! Library use: the daemon is [`bind`] then [`Daemon::run`]; a client (a
//! bench with `--remote`, an experiment) calls [`start`] and
//! [`RemoteTest::finish`].

mod admit;
mod client;
mod daemon;
pub mod proto;
pub mod token;

pub use client::{start, Remote, RemoteTest};
pub use daemon::{
    bind, Daemon, DaemonConfig, DaemonReport, HANDSHAKE_WAIT, MAX_PENDING, MAX_PER_SOURCE,
};
pub use proto::{Limits, RemoteReport, ServerSide, Start};
pub use token::Token;
