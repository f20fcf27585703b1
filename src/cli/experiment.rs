//! `nettune experiment run|compare|search`: arguments, where things run
//! (a testbed, a namespace, this host), signals, progress and the report;
//! the work is in [`crate::experiment`].

mod input;
mod place;
mod search;

use place::{absolute, require_root};
pub use place::{seed_or_clock, Place, WhereArgs};

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;

use crate::base::stop::Stop;
use crate::error::{Failed, Status};
use crate::experiment::bench::Bench;
use crate::experiment::results::{Results, Run};
use crate::experiment::run::{self, Progress, Spec};
use crate::experiment::sample::MonitorSampler;
use crate::experiment::{compare, report};

#[derive(Debug, clap::Subcommand)]
pub enum ExperimentCommand {
    /// Measure configs against each other: apply each (journaled), run
    /// every bench with per-CPU sampling, roll back; interleaved rounds;
    /// medians, bootstrap 95% intervals and a verdict per cell; a report
    /// directory (results.json, report.md, SVG charts, report.html).
    ///
    /// Examples:
    ///   nettune experiment run --testbed --configs current,pps --bench 'udp-flood --flows 16' --server-pin 1 --out exp1
    ///   nettune experiment run --testbed lab --configs current,pps,latency \
    ///       --bench 'rr --proto tcp --instances 100' --bench 'rr --proto udp' --repeat 5 --duration 10s --out exp2
    ///   nettune experiment run --configs current,throughput:--rtt=50ms,plan.json --bench 'http -c 64' --out exp3
    ///   nettune experiment run --testbed lab --configs current,rps=all+buffers=throughput \
    ///       --bandwidth 50mbit --rtt 30ms --bench stream --out exp4
    ///
    /// Details and the results.json schema: docs/experiment.md.
    #[command(verbatim_doc_comment)]
    Run(RunArgs),
    /// Compare two experiments' results, cell by cell (same configs and
    /// benches): the ratio of B to A with its interval and a verdict.
    ///
    /// Example: nettune experiment compare exp1 exp2
    Compare(CompareArgs),
    /// Find the best configuration by measurement: candidate plans over RPS,
    /// RFS, XPS, IRQ affinity, coalescing, per-NAPI IRQ deferral and TCP
    /// socket buffers, measured by successive halving; the winner is
    /// written as a plan for `apply --plan FILE`.
    ///
    /// Examples:
    ///   nettune experiment search --testbed --bench 'udp-flood --flows 16' --server-pin 1 --out plan.json
    ///   nettune experiment search --testbed lab --space rps,rfs --bench 'rr --proto udp' --out plan.json
    ///   nettune experiment search --testbed lab --space rps,buffers --bandwidth 50mbit --rtt 30ms --bench stream --out plan.json
    #[command(verbatim_doc_comment)]
    Search(search::SearchArgs),
    /// Write report.md, the charts and report.html again from a result
    /// directory's results.json (after an upgrade, or for results copied
    /// from another host).
    ///
    /// Example: nettune experiment report exp1
    Report(ReportArgs),
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The experiment's directory (holding results.json).
    pub dir: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Configs, comma separated (the first is the reference): `current`
    /// (the host as found), a profile (pps, latency, throughput, http,
    /// baseline) with plan flags after a colon (`throughput:--rtt=50ms`),
    /// a saved plan file, or settings as the search names them, joined by
    /// `+` (`rps=all`, `rps=app+rfs=on`, `xps=per-queue`, `irq=spread`,
    /// `napi=latency`, `buffers=throughput`: the throughput profile's
    /// buffers for the path of --bandwidth and --rtt); a search's label as
    /// it prints it is taken too (`'rps=not-app(0,2-3) xps=off'`).
    #[arg(long, value_name = "LIST", required = true)]
    pub configs: Vec<String>,
    #[command(flatten)]
    pub path: input::PathArgs,
    /// A `nettune bench` client command line without its target
    /// (`udp-flood --flows 16`, `rr --proto tcp --instances 100`, `http -c
    /// 64`, `stream`); repeat for several. The matching server side is started by the
    /// experiment.
    #[arg(long = "bench", value_name = "BENCH", required = true)]
    pub benches: Vec<String>,
    /// Runs of every config x bench.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Measured time of each run (unless the bench line sets its own).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::bench::duration)]
    pub duration: Duration,
    /// Warm-up before each run is measured (unless the bench line sets its
    /// own); 0 for none.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = crate::base::units::parse_duration_or_zero)]
    pub warmup: Duration,
    /// The report directory (new, or empty).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Let configs change host-wide values a network namespace cannot
    /// (net.core.rps_sock_flow_entries for `rfs=on`), journaled and
    /// restored like every change.
    #[arg(long)]
    pub allow_host: bool,
    #[command(flatten)]
    pub place: WhereArgs,
    /// Print results.json on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The first experiment's directory (or its results.json).
    pub a: PathBuf,
    /// The second.
    pub b: PathBuf,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: ExperimentCommand) -> anyhow::Result<Status> {
    match cmd {
        ExperimentCommand::Run(args) => run_matrix(args),
        ExperimentCommand::Compare(args) => run_compare(&args),
        ExperimentCommand::Search(args) => search::run(args),
        ExperimentCommand::Report(args) => {
            let results = Results::load(&args.dir)?;
            let page = report::write(&results, &args.dir)?;
            crate::output::print(&format!(
                "report: {}\n      {}\n",
                args.dir.join("report.md").display(),
                page.display()
            ))?;
            Ok(Status::Clean)
        }
    }
}

/// A report directory that does not exist yet, or is empty: never mix two
/// experiments' files. Made only once every check has passed.
fn fresh_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .with_context(|| format!("--out '{}'", dir.display()))?
            .next()
            .is_none();
        if !empty {
            anyhow::bail!(
                "--out '{}' exists and is not empty: give a new directory (results are never \
                 overwritten); nothing was changed",
                dir.display()
            );
        }
    }
    Ok(absolute(dir))
}

/// This command line, each word quoted as a shell needs it.
fn command_line() -> Vec<String> {
    std::env::args()
        .map(|w| shlex::try_quote(&w).map_or(w.clone(), |q| q.into_owned()))
        .collect()
}

/// Progress lines on stderr.
pub struct Lines;

impl Progress for Lines {
    fn note(&mut self, text: &str) {
        eprintln!("experiment: {text}");
    }
    fn starting(&mut self, n: usize, total: usize, round: u32, config: &str, bench: &Bench) {
        eprint!(
            "[{n:>3}/{total}] round {round}  {config}  {} ... ",
            bench.name
        );
        let _ = std::io::stderr().flush();
    }
    fn done(&mut self, run: &Run, bench: &Bench) {
        eprintln!("{} {}", report::text::rate(run.value), bench.metric());
    }
}

fn run_matrix(args: RunArgs) -> anyhow::Result<Status> {
    // Bad input is refused before anything is made or changed.
    let configs: Vec<_> = input::split_configs(&args.configs);
    if configs.is_empty() {
        anyhow::bail!(
            "--configs '{}' names no config: give one or more, comma separated (current, a \
             profile, a plan file); nothing was changed",
            args.configs.join(",")
        );
    }
    let mut parsed = Vec::new();
    for text in &configs {
        if parsed
            .iter()
            .any(|c: &crate::experiment::tune::Config| &c.name == text)
        {
            anyhow::bail!("config '{text}' is given twice; nothing was changed");
        }
        parsed.push(input::config(
            text,
            &args.place.ifaces,
            args.place.cpus.as_deref(),
        )?);
    }
    args.path.refuse_unused(
        input::sets_buffers(&parsed),
        "buffers=throughput configs",
        "add one to --configs (a profile takes its own: throughput:--rtt=30ms)",
    )?;
    let mut benches = Vec::new();
    for text in &args.benches {
        benches.push(input::bench(text, args.duration, args.warmup)?);
    }
    require_root()?;
    let out = fresh_dir(&args.out)?;
    let seed = seed_or_clock(args.place.seed);
    let place = Place::enter(&args.place)?;
    let ifaces_for_profiles = place.ifaces.clone();
    // A testbed's interface goes to every profile that names none.
    for config in &mut parsed {
        if let crate::experiment::tune::Tuning::Profile(opts) = &mut config.tuning {
            if opts.ifaces.is_empty() {
                opts.ifaces = ifaces_for_profiles.clone();
            }
        }
    }
    let spec = Spec {
        configs: parsed,
        benches,
        repeat: args.repeat,
        sides: place.sides.clone(),
        settings: place.settings(args.repeat, args.duration, args.warmup, seed),
        command: command_line(),
    };
    let outcome = matrix(&spec, &place, &out, args.allow_host, args.path.path());
    let left = place.leave();
    let results = outcome?;
    left?;
    let page = report::write(&results, &out)?;
    if args.json {
        crate::output::print(&(serde_json::to_string_pretty(&results)? + "\n"))?;
    } else {
        crate::output::print(&summary(&results, &out, &page))?;
    }
    conclude(&results, &out)
}

/// Lock, check, run: the results, or why nothing ran.
fn matrix(
    spec: &Spec,
    place: &Place,
    out: &Path,
    allow_host: bool,
    path: crate::experiment::tune::BufferPath,
) -> anyhow::Result<Results> {
    let _lock = place.state.lock()?;
    let tuner = place.tuner(out.display().to_string(), allow_host, path)?;
    tuner.refuse_unfinished()?;
    run::check(spec, &tuner)?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create --out '{}'", out.display()))?;
    let stop: Stop = super::signals::stop_on_signals_to_restore()?;
    let mut sampler = MonitorSampler::new(place.tuned_netns.as_deref())?;
    // Each run records the kernel's drop reasons where it can; the
    // counters are recorded either way.
    match crate::trace::source::open(place.tuned_netns.as_deref()) {
        Ok(source) => sampler = sampler.with_reasons(source),
        Err(why) => eprintln!("nettune experiment: {why}"),
    }
    Ok(run::run(spec, &tuner, &mut sampler, &stop, &mut Lines))
}

/// How the command ends: 0 when every run was made; 1 when stopped early
/// (the report holds the runs made); 2 when a run or a rollback failed.
fn conclude(results: &Results, out: &Path) -> anyhow::Result<Status> {
    if results.ended == "done" {
        return Ok(Status::Clean);
    }
    if results.ended == "interrupted" {
        return Err(Failed(format!(
            "interrupted after {} run(s); the host was restored; the report of the runs made is \
             in {}",
            results.runs.len(),
            out.display()
        ))
        .into());
    }
    anyhow::bail!(
        "{}; the report of the runs made is in {}",
        results.ended,
        out.display()
    )
}

/// The table for the terminal.
fn summary(r: &Results, out: &Path, page: &Path) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "\n{:<24}  {}\n",
        "config",
        r.benches
            .iter()
            .map(|b| format!("{:<44}", format!("{} ({})", b.name, b.metric)))
            .collect::<Vec<_>>()
            .join("  ")
    ));
    for c in &r.configs {
        let cells: Vec<String> = r
            .benches
            .iter()
            .map(|b| {
                format!(
                    "{:<44}",
                    r.cell(&c.name, &b.name)
                        .map_or("not run".to_string(), report::text::cell)
                )
            })
            .collect();
        o.push_str(&format!("{:<24}  {}\n", c.name, cells.join("  ")));
    }
    for w in report::text::warnings(r) {
        o.push_str(&format!("warning: {w}\n"));
    }
    o.push_str(&format!(
        "time: {:.1} s, overhead {:.1}% beyond the benches' own warm-up and duration\nreport: {}\n      {}\n",
        r.timing.wall_s,
        r.timing.overhead_percent,
        out.join("report.md").display(),
        page.display()
    ));
    o
}

fn run_compare(args: &CompareArgs) -> anyhow::Result<Status> {
    let a = Results::load(&args.a)?;
    let b = Results::load(&args.b)?;
    let diff = compare::compare(
        &a,
        &b,
        &args.a.display().to_string(),
        &args.b.display().to_string(),
    )?;
    if args.json {
        crate::output::print(&(serde_json::to_string_pretty(&diff)? + "\n"))?;
    } else {
        crate::output::print(&compare::text(&diff))?;
    }
    Ok(Status::Clean)
}
