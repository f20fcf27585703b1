//! What every `nettune bench` command shares: `--pin`, `--duration` and
//! `--rate` parsing, progress lines, and how a report is printed.

use std::time::Duration;

use crate::base::Root;
use crate::bench::report::{print_line, Progress};
use crate::error::{Failed, Status};

/// The CPUs of `--pin`, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<u32>);

impl CpuList {
    /// The list for an engine config (empty: not pinned).
    pub fn of(pin: &Option<CpuList>) -> Vec<u32> {
        pin.as_ref().map(|p| p.0.clone()).unwrap_or_default()
    }
}

/// `--pin CPUS`: a CPU list bounded by this host's possible CPUs.
pub(crate) fn pin_list(text: &str) -> Result<CpuList, String> {
    let cpus =
        crate::host::parse_user_cpus("--pin", text, &Root::live()).map_err(|e| format!("{e:#}"))?;
    if cpus.is_empty() {
        return Err(format!(
            "'{text}' names no CPU; give a list such as 0 or 0-1,4"
        ));
    }
    Ok(CpuList(cpus))
}

/// Where the load goes: the daemon's server side with `--remote`, else
/// `--to` (clap makes sure one of the two is there).
pub(crate) fn target(
    to: Option<std::net::SocketAddr>,
    remote: Option<&crate::serve::RemoteTest>,
) -> anyhow::Result<std::net::SocketAddr> {
    match (remote, to) {
        (Some(test), _) => Ok(test.addr),
        (None, Some(to)) => Ok(to),
        (None, None) => anyhow::bail!("give --to ADDR:PORT, or --remote ADDR:PORT for a daemon"),
    }
}

/// `--duration`: how long a bench runs.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let d = crate::base::units::parse_duration(text)?;
    if d < MIN_DURATION {
        return Err(format!(
            "duration '{text}' is shorter than {} ms: nothing can be measured in it; give \
             e.g. 10, 500ms or 1m",
            MIN_DURATION.as_millis()
        ));
    }
    Ok(d)
}

/// The shortest bench run or timeout: one tick of the engines' stop poll.
const MIN_DURATION: Duration = crate::base::stop::POLL;

/// `--rate`: packets or requests per second, 1 to [`crate::bench::MAX_RATE`].
pub(crate) fn rate(text: &str) -> Result<u64, String> {
    crate::base::units::parse_count_within(text, 1, crate::bench::MAX_RATE)
        .map_err(|e| format!("{e:#}"))
}

/// How every bench server names where it listens: one line on stderr,
/// `NAME: listening on ADDR:PORT (how)`, so that one pattern finds the
/// address whatever the server, and stdout holds only what the run
/// measured (the JSON report names the address again as `bind`).
pub(crate) fn listening(name: &str, addr: std::net::SocketAddr, detail: &str) {
    eprintln!("{name}: listening on {addr} ({detail})");
}

/// An engine's progress on a terminal: the ready line and warnings on
/// stderr, a line per second on stdout (or, with `--json`, a status line on
/// stderr that the final JSON replaces).
pub(crate) struct Lines {
    name: &'static str,
    json: bool,
    progress: Progress,
}

impl Lines {
    pub fn new(name: &'static str, json: bool) -> Lines {
        Lines {
            name,
            json,
            progress: Progress::new(json),
        }
    }

    pub fn ready(&mut self, what: &str) {
        self.progress.clear();
        eprintln!("{}: {what}", self.name);
    }

    pub fn warning(&mut self, text: &str) {
        self.progress.clear();
        eprintln!("{}: warning: {text}", self.name);
    }

    /// A server's listening line (see [`listening`]).
    pub fn listening(&mut self, addr: std::net::SocketAddr, detail: &str) {
        self.progress.clear();
        listening(self.name, addr, detail);
    }

    pub fn line(&mut self, second: u64, line: &str) {
        if self.json {
            self.progress
                .show(&format!("{} {second} s: {line}", self.name));
        } else {
            // A closed stdout ends nothing here; the final report says so.
            let _ = print_line(&mut self.progress, line);
        }
    }

    pub fn done(&mut self) {
        self.progress.clear();
    }
}

/// Print a report as JSON or text; no check to fail.
pub(crate) fn finish_report<R: serde::Serialize>(
    report: &R,
    json: bool,
    text: impl FnOnce(&R) -> String,
) -> anyhow::Result<Status> {
    finish(report, json, text, None)
}

/// Print a report (JSON or text), then fail with `problem` (exit 1) when
/// the run measured nothing or its result is not a measurement.
pub(crate) fn finish<R: serde::Serialize>(
    report: &R,
    json: bool,
    text: impl FnOnce(&R) -> String,
    problem: Option<String>,
) -> anyhow::Result<Status> {
    if json {
        crate::bench::report::print_json(report)?;
    } else {
        crate::output::print(&text(report))?;
    }
    match problem {
        Some(reason) => Err(Failed(reason).into()),
        None => Ok(Status::Clean),
    }
}
