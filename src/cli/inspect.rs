//! `nettune inspect`: read the host model and print it.

use crate::base::Root;
use crate::error::Status;
use crate::host::identity::Identity;
use crate::host::{Host, Selection};

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
        let root = crate::host::open_root(args.target.root.as_deref())?;
        serde_json::to_string_pretty(&with_identity(&host, &root, args.target.netns.as_deref())?)?
            + "\n"
    } else {
        // Asking for one interface means wanting its detail even when down.
        crate::inspect::render(&host, host.interfaces.len() == 1)
    };
    crate::output::print(&text)?;
    Ok(Status::Clean)
}

/// The host model as JSON with the `host` block (who the host is) right
/// after `schema_version`, where a fleet report looks first.
fn with_identity(
    host: &Host,
    root: &Root,
    netns: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    let identity = serde_json::to_value(Identity::of(host, root, netns))?;
    let serde_json::Value::Object(model) = serde_json::to_value(host)? else {
        anyhow::bail!("the host model is not a JSON object");
    };
    let mut out = serde_json::Map::new();
    for (key, value) in model {
        let first = key == "schema_version";
        out.insert(key, value);
        if first {
            out.insert("host".to_string(), identity.clone());
        }
    }
    Ok(serde_json::Value::Object(out))
}
