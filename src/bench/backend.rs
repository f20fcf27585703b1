//! The I/O backend a server or sink uses, decided once at the start; the
//! user picks it with `--engine epoll|io_uring|auto`, and reports name it
//! as `engine`.
//!
//! - `epoll`: readiness (epoll, recv/send, recvmmsg): works everywhere.
//! - `io_uring`: completions (multishot accept and receive into a provided
//!   buffer ring, batched submissions; Linux 6.0+). If this kernel or the
//!   process's seccomp profile cannot serve it, the run does not start: an
//!   error names what is missing (exit 2).
//! - `auto`: io_uring when the check passes, else epoll with a warning that
//!   says why.
//!
//! The check ([`crate::bench::uring::check`]) runs every operation the
//! io_uring engines use once, on sockets of its own, before any traffic:
//! a kernel that lacks one is found at the start, not on the first packet.

use serde::{Deserialize, Serialize};

/// The backend asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
pub enum Backend {
    /// epoll and plain system calls (the default).
    #[default]
    #[value(name = "epoll")]
    #[serde(rename = "epoll")]
    Epoll,
    /// io_uring: multishot receive into provided buffers, batched submissions.
    #[value(name = "io_uring")]
    #[serde(rename = "io_uring")]
    IoUring,
    /// io_uring when this kernel serves it, else epoll (said in a warning).
    #[value(name = "auto")]
    #[serde(rename = "auto")]
    Auto,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Epoll => "epoll",
            Backend::IoUring => "io_uring",
            Backend::Auto => "auto",
        }
    }

    /// The backend to run: `Epoll` or `IoUring`, and a warning when `auto`
    /// fell back. An explicit `io_uring` this kernel cannot serve is an
    /// error naming what is missing.
    pub fn resolve(self) -> anyhow::Result<(Backend, Option<String>)> {
        match self {
            Backend::Epoll => Ok((Backend::Epoll, None)),
            Backend::IoUring => match crate::bench::uring::check() {
                Ok(()) => Ok((Backend::IoUring, None)),
                Err(missing) => Err(anyhow::anyhow!(
                    "--engine io_uring: {missing}; use --engine epoll (or auto, which falls back)"
                )),
            },
            Backend::Auto => match crate::bench::uring::check() {
                Ok(()) => Ok((Backend::IoUring, None)),
                Err(missing) => Ok((
                    Backend::Epoll,
                    Some(format!("--engine auto: using epoll: {missing}")),
                )),
            },
        }
    }
}
