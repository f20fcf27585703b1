//! Command line: one `Args` struct per subcommand (clap derive); `run`
//! resolves arguments into objects and calls the library.

use clap::{Parser, Subcommand};

use crate::error::Status;

#[derive(Debug, Parser)]
#[command(
    name = "nettune",
    version,
    about = "See, judge, tune and measure a Linux host's network path"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the host's whole network path: CPUs, NUMA, NIC queues and IRQs,
    /// RPS/XPS, driver settings, sysctls and loss counters.
    Inspect,
    /// Find what holds the network path back: each finding with the numbers
    /// seen, why it matters and the fix (exit 1 when any is at warn or above).
    Doctor(crate::doctor::DoctorArgs),
}

pub fn parse() -> Cli {
    Cli::parse()
}

pub fn run(cli: Cli) -> anyhow::Result<Status> {
    match cli.command {
        Command::Inspect => anyhow::bail!("inspect: not supported yet"),
        Command::Doctor(args) => crate::doctor::run(args),
    }
}
