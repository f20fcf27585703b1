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
    /// Built-in load generators and servers: measure packets per second,
    /// loss and where it happens.
    #[command(subcommand)]
    Bench(crate::bench::BenchCommand),
}

pub fn parse() -> Cli {
    Cli::parse()
}

pub fn run(cli: Cli) -> anyhow::Result<Status> {
    match cli.command {
        Command::Inspect => anyhow::bail!("inspect: not supported yet"),
        Command::Bench(cmd) => crate::bench::run(cmd),
    }
}
