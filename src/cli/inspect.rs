//! `nettune inspect`: read the host model and print it.

use crate::error::Status;
use crate::host::Selection;

use super::host_args::HostArgs;

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// Print the host model as JSON (schema: docs/json-schema.md).
    #[arg(long)]
    pub json: bool,
    /// Include the loopback interface.
    #[arg(long)]
    pub all: bool,
    /// Show only this interface.
    #[arg(long, value_name = "NAME")]
    pub iface: Option<String>,
    #[command(flatten)]
    pub target: HostArgs,
}

pub fn run(args: InspectArgs) -> anyhow::Result<Status> {
    let selection = Selection {
        all: args.all,
        iface: args.iface,
    };
    let host = crate::gather::read_target(
        args.target.root.as_deref(),
        args.target.netns.as_deref(),
        &selection,
    )?;
    let text = if args.json {
        serde_json::to_string_pretty(&host)? + "\n"
    } else {
        // Asking for one interface means wanting its detail even when down.
        crate::inspect::render(&host, host.interfaces.len() == 1)
    };
    crate::output::print(&text)?;
    Ok(Status::Clean)
}
