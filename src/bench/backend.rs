//! The I/O backend a server or sink uses, decided once at the start; the
//! user picks it with `--engine epoll|io_uring|auto`, and reports name it
//! as `engine`, and why as `engine_reason`.
//!
//! - `epoll`: readiness (epoll, recv/send, recvmmsg): works everywhere.
//! - `io_uring`: completions (multishot accept and receive into a provided
//!   buffer ring, batched submissions; Linux 6.0+). If this kernel or the
//!   process's seccomp profile cannot serve it, the run does not start: an
//!   error names what is missing (exit 2).
//! - `auto`: the backend that measured faster for this engine and setting
//!   ([`measured_faster`]: one table, with its figures, that
//!   docs/benchmarks.md shows too); when that is io_uring and the check
//!   fails, epoll with a warning that says why.
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
    /// The backend that measured faster for this engine and setting
    /// (io_uring only where the kernel serves it; else epoll, with a
    /// warning).
    #[value(name = "auto")]
    #[serde(rename = "auto")]
    Auto,
}

/// What `auto` chooses for: the engine, and the setting of it that
/// changes which backend is faster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// `bench rr-server`: TCP and UDP, one client or many (a server cannot
    /// know in advance, so one choice covers all four).
    RrServer,
    /// `bench udp-sink`; `gro`: with `--gro`.
    UdpSink { gro: bool },
    /// `bench http-server`.
    HttpServer,
}

impl Workload {
    /// Every workload `auto` has a rule for (the tests and the docs' table
    /// go through them all).
    pub const ALL: [Workload; 4] = [
        Workload::RrServer,
        Workload::UdpSink { gro: false },
        Workload::UdpSink { gro: true },
        Workload::HttpServer,
    ];

    /// How the docs' table names it.
    pub fn name(self) -> &'static str {
        match self {
            Workload::RrServer => "rr-server",
            Workload::UdpSink { gro: false } => "udp-sink",
            Workload::UdpSink { gro: true } => "udp-sink --gro",
            Workload::HttpServer => "http-server",
        }
    }
}

/// `auto`'s rule: for each workload, the backend that measured faster,
/// and the measurement, in alternated pairs of the two engines in one run
/// on a quiet 2-CPU machine (docs/benchmarks.md, "Which engine `--engine
/// auto` runs", shows the same table; a test holds the two together).
pub fn measured_faster(workload: Workload) -> (Backend, &'static str) {
    match workload {
        // The setting `bench rr` runs by default.
        Workload::RrServer => (
            Backend::Epoll,
            "io_uring made 0.97x epoll's transactions/s with one unpinned TCP client \
             (14-byte ping-pong on loopback)",
        ),
        Workload::UdpSink { gro: false } => (
            Backend::IoUring,
            "1.13x epoll's packets/s, 32-byte datagrams on loopback from one sender, reader pinned",
        ),
        Workload::UdpSink { gro: true } => (
            Backend::IoUring,
            "1.31x epoll's packets/s, 32-byte datagrams in UDP_SEGMENT 64 sends on loopback, \
             reader pinned",
        ),
        Workload::HttpServer => (
            Backend::IoUring,
            "1.02x epoll's requests/s on loopback under wrk -t2 -c64 (176k and 173k)",
        ),
    }
}

/// The backend to run and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// `Epoll` or `IoUring`.
    pub backend: Backend,
    /// Why this one (the reports' `engine_reason`): asked for, or `auto`'s
    /// rule with its figures.
    pub reason: String,
    /// `auto` wanted io_uring and this kernel cannot serve it: why.
    pub warning: Option<String>,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Epoll => "epoll",
            Backend::IoUring => "io_uring",
            Backend::Auto => "auto",
        }
    }

    /// The backend to run for `workload`: `Epoll` or `IoUring`, why, and a
    /// warning when `auto` fell back. An explicit `io_uring` this kernel
    /// cannot serve is an error naming what is missing.
    pub fn resolve(self, workload: Workload) -> anyhow::Result<Resolved> {
        self.resolve_with(workload, crate::bench::uring::check)
    }

    /// [`resolve`](Backend::resolve) with the io_uring check given.
    fn resolve_with(
        self,
        workload: Workload,
        check: impl Fn() -> Result<(), String>,
    ) -> anyhow::Result<Resolved> {
        let asked = |backend: Backend| Resolved {
            backend,
            reason: format!("--engine {} asked for", backend.name()),
            warning: None,
        };
        match self {
            Backend::Epoll => Ok(asked(Backend::Epoll)),
            Backend::IoUring => match check() {
                Ok(()) => Ok(asked(Backend::IoUring)),
                Err(missing) => Err(anyhow::anyhow!(
                    "--engine io_uring: {missing}; use --engine epoll (or auto, which falls back)"
                )),
            },
            Backend::Auto => {
                let (faster, figures) = measured_faster(workload);
                let reason = format!(
                    "--engine auto, {}: {} measured faster: {figures}",
                    workload.name(),
                    faster.name()
                );
                if faster == Backend::Epoll {
                    return Ok(Resolved {
                        backend: Backend::Epoll,
                        reason,
                        warning: None,
                    });
                }
                match check() {
                    Ok(()) => Ok(Resolved {
                        backend: Backend::IoUring,
                        reason,
                        warning: None,
                    }),
                    Err(missing) => Ok(Resolved {
                        backend: Backend::Epoll,
                        reason: format!("{reason}; this kernel cannot serve it: {missing}"),
                        warning: Some(format!("--engine auto: using epoll: {missing}")),
                    }),
                }
            }
        }
    }
}

/// An engine and why, as the text reports print it.
pub fn describe(engine: &str, reason: &str) -> String {
    if reason.is_empty() {
        engine.to_string()
    } else {
        format!("{engine} ({reason})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> Result<(), String> {
        Ok(())
    }

    fn blocked() -> Result<(), String> {
        Err("io_uring_setup was refused (EPERM): a seccomp profile blocks it".to_string())
    }

    #[test]
    fn auto_runs_what_measured_faster_where_io_uring_is_served() {
        for workload in Workload::ALL {
            let (faster, figures) = measured_faster(workload);
            let got = Backend::Auto
                .resolve_with(workload, served)
                .expect("resolves");
            assert_eq!(got.backend, faster, "{workload:?}");
            assert!(got.reason.contains(figures), "{got:?}");
            assert!(got.reason.contains(workload.name()), "{got:?}");
            assert_eq!(got.warning, None);
        }
    }

    #[test]
    fn auto_falls_back_to_epoll_and_says_why() {
        for workload in Workload::ALL {
            let got = Backend::Auto
                .resolve_with(workload, blocked)
                .expect("resolves");
            assert_eq!(got.backend, Backend::Epoll, "{workload:?}");
            if measured_faster(workload).0 == Backend::IoUring {
                let warning = got.warning.clone().expect("a warning");
                assert!(warning.contains("using epoll") && warning.contains("seccomp"));
                assert!(got.reason.contains("cannot serve it"), "{got:?}");
            }
        }
    }

    #[test]
    fn an_explicit_engine_is_run_as_asked_or_refused() {
        let epoll = Backend::Epoll
            .resolve_with(Workload::RrServer, blocked)
            .expect("epoll needs no check");
        assert_eq!(epoll.backend, Backend::Epoll);
        assert_eq!(epoll.reason, "--engine epoll asked for");
        let err = Backend::IoUring
            .resolve_with(Workload::RrServer, blocked)
            .expect_err("refused");
        assert!(err.to_string().contains("--engine epoll"), "{err}");
        let uring = Backend::IoUring
            .resolve_with(Workload::HttpServer, served)
            .expect("served");
        assert_eq!(uring.backend, Backend::IoUring);
    }
}
