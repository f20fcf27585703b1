//! `nettune fleet report DIR`: the hosts' doctor and inspect JSON, read and
//! merged by `crate::fleet`, printed as text or JSON, optionally written as
//! an HTML page.

use std::path::PathBuf;

use crate::error::Status;
use crate::fleet;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum FleetCommand {
    /// Merge many hosts' `doctor --json` (and `inspect --json`) files into
    /// one table: each finding with the number of hosts that have it, split
    /// by what those hosts share (kernel, CPU count, NUMA layout, NIC
    /// drivers, from each report's host block).
    ///
    /// Reads every *.json file below DIR (four levels deep, as `ansible
    /// fetch` lays them out, one folder per host). Files of older or newer
    /// nettune versions are merged where understood; a file that cannot be
    /// used is named with the reason. A machine reported twice (the same
    /// hashed machine id) is counted once. Exit 0 with a report, 2 when no
    /// file could be read. Details: docs/fleet.md.
    ///
    /// Examples:
    ///   nettune fleet report ./doctor-reports
    ///   nettune fleet report ./doctor-reports --html fleet.html
    ///   nettune fleet report ./doctor-reports --json | jq '.findings[0]'
    #[command(verbatim_doc_comment)]
    Report(ReportArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// The directory the hosts' JSON reports were collected into.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Also write the table as a self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print the merged report as JSON on stdout (see docs/json-schema.md).
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: FleetCommand) -> anyhow::Result<Status> {
    match cmd {
        FleetCommand::Report(args) => report(args),
    }
}

fn report(args: ReportArgs) -> anyhow::Result<Status> {
    let report = fleet::report(&args.dir)?;
    if report.hosts == 0 {
        let why = match report.skipped.first() {
            None => "it holds no *.json file".to_string(),
            Some(s) => format!(
                "none of its {} JSON files could be used (first: '{}': {})",
                report.skipped.len(),
                s.path.display(),
                s.reason
            ),
        };
        anyhow::bail!(
            "no host report in '{}': {why}; collect `nettune doctor --json` from each host \
             into it (contrib/ansible's playbook does)",
            args.dir.display()
        );
    }
    if let Some(path) = &args.html {
        std::fs::write(path, fleet::render::html(&report)).map_err(|e| {
            anyhow::anyhow!(
                "cannot write the HTML report to '{}': {e}; give a writable --html FILE",
                path.display()
            )
        })?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", fleet::render::text(&report));
        if let Some(path) = &args.html {
            println!("HTML report written to {}", path.display());
        }
    }
    Ok(Status::Clean)
}
