//! Command line: one `Args` struct per subcommand (clap derive); `run`
//! resolves arguments into objects and calls the library.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::error::Status;
use crate::inspect::InspectArgs;

#[derive(Debug, Parser)]
#[command(
    name = "nettune",
    version,
    about = "See, judge, tune and measure a Linux host's network path",
    long_about = "nettune reads a Linux host's network path (CPUs, NUMA, NIC queues and their IRQs, \
RPS/RFS/XPS, driver settings, sysctls, qdiscs, loss counters), judges it, tunes it to a \
profile with an exact undo, and measures the result.\n\n\
Exit status: 0 success/clean, 1 findings or a failed check, 2 nettune could not do its job."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the host's whole network path: CPUs, NUMA, NIC queues and IRQs,
    /// RPS/XPS, driver settings, sysctls and loss counters.
    ///
    /// Examples: `nettune inspect`, `nettune inspect --netns blue --json`,
    /// `nettune inspect --root ./capture-web1`.
    Inspect(InspectArgs),
    /// Find what holds the network path back: each finding with the numbers
    /// seen, why it matters and the fix (exit 1 when any is at warn or above).
    ///
    /// Examples: `nettune doctor`, `nettune doctor --interval 5 --json`,
    /// `nettune doctor --bandwidth 10gbit --rtt 50ms`, `nettune doctor --root ./capture`.
    Doctor(crate::doctor::DoctorArgs),
    /// Copy the files nettune reads from this host (and its driver settings)
    /// into DIR, for `--root DIR` elsewhere: a bug report, a diagnosis offline.
    Capture(CaptureArgs),
    /// Built-in load generators and servers: measure packets per second,
    /// loss and where it happens.
    #[command(subcommand)]
    Bench(crate::bench::BenchCommand),
}

#[derive(Debug, clap::Args)]
pub struct CaptureArgs {
    /// New (or empty) directory to write the capture into.
    pub dir: PathBuf,
    /// Capture a named network namespace instead of the host's.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn parse() -> Cli {
    Cli::parse()
}

pub fn run(cli: Cli) -> anyhow::Result<Status> {
    match cli.command {
        Command::Inspect(args) => crate::inspect::run(args),
        Command::Doctor(args) => crate::doctor::run(args),
        Command::Capture(args) => capture(args),
        Command::Bench(cmd) => crate::bench::run(cmd),
    }
}

fn capture(args: CaptureArgs) -> anyhow::Result<Status> {
    if let Some(name) = &args.netns {
        crate::host::netns::enter(name)?;
    }
    let summary = crate::host::capture::capture(&args.dir, args.netns)?;
    let text = if args.json {
        serde_json::to_string_pretty(&summary)? + "\n"
    } else {
        format!(
            "captured {} files and the driver settings of {} into {}\ninspect it anywhere with: nettune inspect --root {}\n",
            summary.files,
            summary.interfaces.join(", "),
            summary.dir.display(),
            summary.dir.display()
        )
    };
    crate::output::print(&text)?;
    Ok(Status::Clean)
}
