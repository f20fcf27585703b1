//! Errors and exit statuses, in one place.
//!
//! Exit status contract: 0 success/clean, 1 findings or a failed check,
//! 2 the tool could not do its job (bad input, missing permission,
//! unsupported kernel). Every error that reaches `main` exits with 2.

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

/// What a command concluded when it ran to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Success, nothing to report.
    Clean,
    /// The command ran and found something (a finding, a failed check).
    Findings,
}

impl From<Status> for ExitCode {
    fn from(status: Status) -> ExitCode {
        match status {
            Status::Clean => ExitCode::from(0),
            Status::Findings => ExitCode::from(1),
        }
    }
}

/// Exit status when nettune could not do its job.
pub const EXIT_ERROR: u8 = 2;

/// Exit status of a failed check: findings, or a benchmark that measured
/// nothing.
pub const EXIT_FAILED: u8 = 1;

/// A command that ran to its end and failed its check, with the reason: a
/// benchmark that measured nothing, a flood whose packets were refused.
/// Exits 1 (not 2: nettune did its job, the result is what failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Failed(pub String);

/// Errors reading or writing kernel state. Each carries the kernel path
/// (as the kernel names it, e.g. `/proc/interrupts`) so the user knows where.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    /// The value as written (`echo VALUE > FILE` adds a newline), shown
    /// without its trailing newline so the message stays one line.
    #[error("cannot write '{}' to {}: {source}", .value.trim_end(), .path.display())]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },
    #[error("{path} is malformed: {msg}")]
    Parse { path: PathBuf, msg: String },
    /// Not a file the kernel could have written (a FIFO, a device, past
    /// its kind's size limit), so not read at all: a tree holding one is
    /// not a kernel tree, and a command fails on it (exit 2).
    #[error("{why}")]
    Refused { path: PathBuf, why: String },
}

/// A parser's complaint about kernel text, before the path is known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl ParseError {
    pub fn new(msg: impl Into<String>) -> Self {
        ParseError(msg.into())
    }
}

/// Print an error the way every nettune error is printed and return the
/// exit status for "could not do its job". A closed stdout (`nettune inspect
/// | head`) is not an error.
pub fn report(err: &anyhow::Error) -> ExitCode {
    if let Some(io_err) = err.downcast_ref::<io::Error>() {
        if io_err.kind() == io::ErrorKind::BrokenPipe {
            return ExitCode::from(0);
        }
    }
    eprintln!("nettune: {}", message(err));
    if err.downcast_ref::<Failed>().is_some() {
        return ExitCode::from(EXIT_FAILED);
    }
    ExitCode::from(EXIT_ERROR)
}

/// An error and its causes on one line, each cause once: a cause whose
/// text the message already holds (an OS error that a `KernelError`
/// prints in its own message and also carries as its source) is skipped.
pub fn message(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_is_one_line() {
        let err = KernelError::Write {
            path: PathBuf::from("/proc/sys/net/ipv4/udp_rmem_min"),
            value: "65536\n".to_string(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        };
        let line = err.to_string();
        assert!(!line.contains('\n'), "{line:?}");
        assert!(
            line.starts_with("cannot write '65536' to /proc/sys/net/ipv4/udp_rmem_min: "),
            "{line}"
        );
    }

    #[test]
    fn each_cause_is_printed_once() {
        let err = KernelError::Read {
            path: PathBuf::from("/sys/devices/system/cpu/online"),
            source: io::Error::from_raw_os_error(libc::ENOENT),
        };
        let err = anyhow::Error::new(err).context("reading the host");
        let line = message(&err);
        assert_eq!(
            line.matches("No such file or directory").count(),
            1,
            "{line}"
        );
        assert!(
            line.starts_with("reading the host: cannot read /sys/devices/system/cpu/online"),
            "{line}"
        );
    }
}
