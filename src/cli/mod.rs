//! Command line: one `Args` struct per subcommand (clap derive); `run`
//! resolves arguments into objects and calls the library.

use std::path::PathBuf;

use std::io::IsTerminal as _;

use clap::{CommandFactory as _, Parser, Subcommand};

use crate::error::Status;

pub mod apply;
pub mod bench;
pub mod doctor;
pub mod experiment;
pub mod fleet;
pub mod guard;
mod host_args;
pub mod inspect;
pub mod manual;
pub mod monitor;
pub mod monitor_args;
pub mod monitor_prom;
pub mod plan;
pub mod profiles;
pub mod serve;
pub mod signals;
pub mod steer;
pub mod testbed;
pub mod trace;

pub use host_args::HostArgs;

use apply::{ApplyArgs, HistoryArgs, RollbackArgs};
use doctor::DoctorArgs;
use inspect::InspectArgs;
use monitor_args::MonitorArgs;
use plan::PlanArgs;

/// What `--version` prints after the name: the version and the git commit
/// the binary was built from (build.rs; `unknown` for a build outside git
/// without NETTUNE_BUILD_COMMIT).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("NETTUNE_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "nettune",
    version = VERSION,
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
    Doctor(DoctorArgs),
    /// Show what a tuning profile would change, with a reason for every value.
    ///
    /// Prints a diff (current -> new) grouped by interface and kernel, and the
    /// settings left alone with the reason; changes nothing.
    ///
    /// Profiles: pps (many small UDP packets), latency (request/response),
    /// throughput (bulk TCP over long paths), http (many connections per
    /// core), baseline (kernel defaults), and site profiles (files in
    /// /etc/nettune/profiles: `nettune profiles`), whose every value names
    /// the file and line that set it. Each value's reason: docs/profiles.md.
    ///
    /// --check exits 1 when changes are pending and 0 when the host already
    /// matches, for configuration management.
    ///
    /// Examples:
    ///   nettune plan --profile pps
    ///   nettune plan --profile latency --iface eth0 --cpus 0-7 --json
    ///   nettune plan --profile throughput --bandwidth 10gbit --rtt 80ms --streams 4
    ///   nettune plan --profile pps --format sh > tune.sh
    ///   nettune plan --profile http --root ./capture-web1
    ///   nettune plan --profile dns-edge --check   (a site profile; exit 1: changes pending)
    #[command(verbatim_doc_comment)]
    Plan(PlanArgs),
    /// List the profiles: the built-in ones and the site profiles in
    /// /etc/nettune/profiles and /usr/lib/nettune/profiles, each with the
    /// file it comes from and what it includes (exit 1 when a site file
    /// cannot be used, with its error).
    ///
    /// A site profile is a TOML file that includes a profile and overrides
    /// or leaves alone single values (docs/profiles.md):
    ///   include = "pps"
    ///   rps = "off"
    ///   irq.cpus = "2-15"
    ///   sysctl."net.core.rmem_max" = 67108864
    ///   driver."coalesce.adaptive-rx" = false
    ///   driver."coalesce.rx-usecs" = 50
    ///   driver."rings" = "off"
    ///
    /// Examples:
    ///   nettune profiles
    ///   nettune plan --profile dns-edge
    ///   nettune plan --profile-file ./dns-edge.toml --check
    #[command(verbatim_doc_comment)]
    Profiles(profiles::ProfilesArgs),
    /// Apply a profile with a journal; on any failure everything is restored.
    ///
    /// Journals the original values (synced to disk first), changes setting
    /// by setting and reads each back; on any failure restores everything and
    /// exits 2. Undo with `nettune rollback`. Details: docs/apply.md.
    ///
    /// Examples:
    ///   nettune apply --profile pps --dry-run
    ///   nettune apply --profile latency --iface eth0
    ///   nettune apply --profile pps --netns blue   (a container: its veths; names what the host must set)
    ///   nettune apply --profile throughput --bandwidth 10gbit --rtt 100ms --persist
    ///   nettune apply --profile pps --root ./capture-web1   (changes the tree only)
    #[command(verbatim_doc_comment)]
    Apply(ApplyArgs),
    /// Restore the last applied state (or state ID) exactly.
    ///
    /// Also after an apply that was killed half-way; removes the files
    /// written by --persist.
    ///
    /// Examples:
    ///   nettune rollback
    ///   nettune rollback 3
    ///   nettune rollback --root ./capture-web1
    #[command(verbatim_doc_comment)]
    Rollback(RollbackArgs),
    /// Hand one RX queue and one flow to a user-space reader: RSS gives the
    /// queue weight 0, an ntuple rule sends the flow there, LRO/GRO go off.
    ///
    /// The single-RX-queue kernel bypass (docs/bypass.md). Journaled like
    /// apply; `nettune rollback` restores the table byte for byte and
    /// deletes the rule by its location. Drivers without RSS control or
    /// ntuple filters (veth, virtio_net) are refused before any change.
    ///
    /// Examples:
    ///   nettune steer --iface eth2 --queue 4 --flow 'udp4 dst-port 53' --dry-run
    ///   nettune steer --iface eth2 --queue 4 --flow 'udp4 dst-port 53'
    ///   nettune steer --iface eth2 --queue 4 --flow 'udp dst-port 53' --root ./capture --dry-run
    #[command(verbatim_doc_comment)]
    Steer(steer::SteerArgs),
    /// List applied states: id, time, profile, number of changes, status.
    ///
    /// Examples:
    ///   nettune history
    ///   nettune history --json
    #[command(verbatim_doc_comment)]
    History(HistoryArgs),
    /// Copy the files nettune reads from this host (and its driver settings)
    /// into DIR, for `--root DIR` elsewhere: a bug report, a diagnosis offline.
    ///
    /// With --samples N, also record N snapshots of the counters --interval
    /// apart, for `nettune monitor --root DIR` (inspect and doctor read the
    /// first).
    ///
    /// Examples:
    ///   nettune capture ./web1
    ///   nettune capture --samples 30 --interval 1 ./web1-under-load
    ///   nettune capture --netns blue ./blue
    #[command(verbatim_doc_comment)]
    Capture(CaptureArgs),
    /// Watch where packets and CPU time go, interval by interval: per-CPU
    /// usr/sys/irq/soft/idle, softirqs, the queue x CPU interrupt matrix,
    /// packets per interface and queue, the drop ladder from the NIC to
    /// TCP, and the findings the rates show.
    ///
    /// On a terminal it shows an interactive view (keys: q quit, p pause,
    /// Tab pane, s sort, / filter by CPU or interface, ? help). Otherwise,
    /// and with --text, it prints a text block per interval (sar/mpstat
    /// style); with --json one JSON object per line. --once and --count N
    /// end the run (exit 1 when an interval showed a finding at warn or
    /// above); otherwise it runs until q, Ctrl-C or SIGTERM. Details:
    /// docs/monitor.md.
    ///
    /// Examples:
    ///   nettune monitor
    ///   nettune monitor --interval 2 --count 10 --json > rates.ndjson
    ///   nettune monitor --once --iface eth0
    ///   nettune monitor --netns blue
    ///   nettune monitor --root ./web1-under-load   (replay a capture --samples)
    ///   nettune monitor --prometheus               (serve /metrics at 127.0.0.1:10056)
    #[command(verbatim_doc_comment)]
    Monitor(MonitorArgs),
    /// Built-in load generators and servers: UDP packets per second with
    /// loss, TCP/UDP request/response, HTTP; latency percentiles and where
    /// the packets and CPU time went.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Prove which tuning wins (configs x benches, interleaved, with
    /// statistics and charts), compare two experiments, or search for the
    /// best configuration by measurement.
    #[command(subcommand)]
    Experiment(experiment::ExperimentCommand),
    /// A pair of network namespaces joined by a multi-queue veth, to run
    /// benchmarks and experiments without touching the host's interfaces.
    #[command(subcommand)]
    Testbed(testbed::TestbedCommand),
    /// Why and where the kernel drops packets (each reason with its layer
    /// and fix), and where the receive path spends its time (NET_RX
    /// softirq, NAPI polls), from the kernel's own tracepoints.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
    /// Reports over many hosts: `nettune fleet report DIR` merges their
    /// doctor JSON into one table of findings and the hosts that share them.
    #[command(subcommand)]
    Fleet(fleet::FleetCommand),
    /// Start the server side of any bench on request, for clients with
    /// `bench ... --remote ADDR:PORT --token-file FILE` (docs/serve.md).
    Serve(serve::ServeArgs),
    /// Print the shell completion script for SHELL (bash, zsh, fish,
    /// elvish, powershell), made from nettune's own argument definitions.
    ///
    /// The package installs bash's, zsh's and fish's. By hand:
    ///   nettune completions bash > /etc/bash_completion.d/nettune
    ///   nettune completions zsh > "${fpath[1]}/_nettune"
    ///   nettune completions fish > ~/.config/fish/completions/nettune.fish
    #[command(verbatim_doc_comment)]
    Completions(manual::CompletionsArgs),
    /// Write the man pages (nettune(8) and one per subcommand, e.g.
    /// nettune-apply(8), nettune-bench-rr(8)) into DIR, made from
    /// nettune's own argument definitions.
    ///
    /// The package installs them. By hand:
    ///   nettune man ~/.local/share/man/man8 && man nettune-apply
    #[command(verbatim_doc_comment)]
    Man(manual::ManArgs),
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
    /// Record N snapshots of the counters (a series `nettune monitor --root`
    /// replays); 1, the default, is a capture for inspect and doctor.
    #[arg(long, value_name = "N", default_value = "1", allow_hyphen_values = true, value_parser = samples)]
    pub samples: u32,
    /// Seconds between snapshots with --samples: 1 (the default), 0.5, 2s.
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = monitor_args::interval)]
    pub interval: Option<f64>,
}

fn samples(text: &str) -> Result<u32, String> {
    let max = crate::monitor::series::MAX_SAMPLES;
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "'{text}' is not a number of snapshots from 1 to {max}; e.g. --samples 30"
        )),
    }
}

/// Parse the command line. Usage errors are one line on stderr naming the
/// bad value, exit status 2; `--help` and `--version` print and exit 0.
pub fn parse() -> Cli {
    use clap::error::ErrorKind;
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => match err.kind() {
            ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => err.exit(),
            _ => {
                eprintln!("nettune: {}", usage_line(&err.render().to_string()));
                std::process::exit(i32::from(crate::error::EXIT_ERROR));
            }
        },
    }
}

/// clap's usage error as one line: its first line, the lines indented under
/// it (the missing arguments: `--to <ADDR:PORT>`), and its hints
/// (`[possible values: ...]`, `tip: ...`), without the usage block.
fn usage_line(text: &str) -> String {
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
    let mut named = Vec::new();
    for l in lines.by_ref() {
        if l.trim().is_empty() || !l.starts_with(char::is_whitespace) {
            break;
        }
        named.push(l.trim());
    }
    if !named.is_empty() {
        line = format!("{} {}", line.trim_end(), named.join(", "));
    }
    // clap puts the possible values on the first line for some errors
    // (an invalid value) and on a line of their own for others: say them
    // once.
    let hints: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("[possible values") || l.starts_with("tip:"))
        .filter(|l| !line.contains(l))
        .collect();
    if !hints.is_empty() {
        line = format!("{line}; {}", hints.join("; "));
    }
    format!("{line} (see --help)")
}

pub fn run(cli: Cli) -> anyhow::Result<Status> {
    match cli.command {
        Command::Inspect(args) => inspect::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Capture(args) => capture(args),
        Command::Monitor(args) => monitor::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Profiles(args) => profiles::run(args),
        Command::Apply(args) => apply::run_apply(args),
        Command::Rollback(args) => apply::run_rollback(args),
        Command::History(args) => apply::run_history(args),
        Command::Steer(args) => steer::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Experiment(cmd) => experiment::run(cmd),
        Command::Testbed(cmd) => testbed::run(cmd),
        Command::Trace(cmd) => trace::run(cmd),
        Command::Fleet(cmd) => fleet::run(cmd),
        Command::Serve(args) => serve::run(args),
        Command::Completions(args) => {
            let mut out = Vec::new();
            manual::completions(Cli::command(), args.shell, &mut out)?;
            crate::output::print(&String::from_utf8_lossy(&out))?;
            Ok(Status::Clean)
        }
        Command::Man(args) => {
            let written = manual::write_pages(Cli::command(), &args.dir)?;
            crate::output::print(&format!(
                "wrote {} man pages into {}\n",
                written.len(),
                args.dir.display()
            ))?;
            Ok(Status::Clean)
        }
    }
}

fn capture(args: CaptureArgs) -> anyhow::Result<Status> {
    if args.interval.is_some() && args.samples < 2 {
        anyhow::bail!("--interval needs --samples 2 or more: it is the time between snapshots");
    }
    if let Some(name) = &args.netns {
        crate::base::netns::enter(name)?;
    }
    let summary = if args.samples > 1 {
        let secs = args.interval.unwrap_or(monitor_args::DEFAULT_INTERVAL_SECS);
        let stop = signals::stop_on_signals()?;
        let terminal = std::io::stderr().is_terminal();
        let mut progress = |done: usize, total: usize| {
            if terminal {
                eprint!("\rcaptured snapshot {done}/{total}");
                if done == total {
                    eprintln!();
                }
            }
        };
        let summary = crate::monitor::series::capture_series(
            &args.dir,
            args.netns,
            args.samples,
            std::time::Duration::from_secs_f64(secs),
            &stop,
            &mut progress,
        )?;
        if summary.samples < args.samples as usize {
            if terminal {
                eprintln!();
            }
            eprintln!(
                "nettune capture: stopped after {} of {} snapshots; the series holds those",
                summary.samples, args.samples
            );
        }
        summary
    } else {
        crate::gather::capture::capture(&args.dir, args.netns)?
    };
    let text = if args.json {
        serde_json::to_string_pretty(&summary)? + "\n"
    } else if summary.samples > 1 {
        format!(
            "captured {} snapshots ({} files) of {} into {}\nreplay them with: nettune monitor --root {}\n",
            summary.samples,
            summary.files,
            summary.interfaces.join(", "),
            summary.dir.display(),
            summary.dir.display()
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn usage_error(args: &[&str]) -> String {
        let err = Cli::try_parse_from(args).expect_err("a usage error");
        usage_line(&err.render().to_string())
    }

    #[test]
    fn a_missing_argument_is_named() {
        let line = usage_error(&["nettune", "plan"]);
        assert!(line.contains("--profile"), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }

    #[test]
    fn hints_stay_on_the_line() {
        let line = usage_error(&["nettune", "plan", "--profile", "pps", "--format", "fast"]);
        assert!(
            line.contains("'fast'") && line.contains("possible values"),
            "{line}"
        );
        assert_eq!(line.matches("possible values").count(), 1, "{line}");
    }
}
