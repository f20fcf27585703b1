//! `nettune experiment search`: arguments, progress and the saved plan;
//! the search itself is [`crate::experiment::search`].

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::json;

use super::input;
use super::place::{absolute, require_root, seed_or_clock, Place, WhereArgs};
use crate::error::{Failed, Status};
use crate::experiment::bench::Bench;
use crate::experiment::search::{self, Candidate, Dimension, Found, Remarks, Round, Schedule};
use crate::experiment::stats::{percent, Rng, Verdict};

#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// The bench to optimise (a `nettune bench` client line without its
    /// target, as for `experiment run`).
    #[arg(long = "bench", value_name = "BENCH")]
    pub bench: String,
    /// Dimensions to search, comma separated: rps, rfs, xps, irq, coalesce,
    /// napi (per-NAPI IRQ deferral: the latency profile's, the http
    /// profile's, or off; Linux 6.13+), buffers (TCP socket buffers as the
    /// throughput profile sizes them for the path, or as found). Default:
    /// every one the target can change.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub space: Vec<String>,
    #[command(flatten)]
    pub path: input::PathArgs,
    /// Also search host-wide values (net.core.rps_sock_flow_entries for
    /// RFS), journaled and restored like every change.
    #[arg(long)]
    pub allow_host: bool,
    /// Runs of the first round (every candidate); each later round keeps
    /// the best third and doubles it, up to --duration.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = crate::cli::bench::duration)]
    pub min_duration: Duration,
    /// The longest runs: the last rounds and the confirmation.
    #[arg(long, value_name = "DURATION", default_value = "4s", value_parser = crate::cli::bench::duration)]
    pub duration: Duration,
    /// Warm-up before each run at --duration; a shorter run of the rounds
    /// warms up for its share of it (a 1s run of a 4s search: a quarter).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = crate::base::units::parse_duration_or_zero)]
    pub warmup: Duration,
    /// Runs of the winner and of the host as found that confirm the result.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// At most this many candidates are measured.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub max_candidates: u64,
    /// Write the winning plan here (for `nettune apply --plan FILE` and
    /// `experiment run --configs current,FILE`); only when it measured
    /// better than the host as found.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub place: WhereArgs,
    /// Print the search (rounds, winner, comparison) as JSON.
    #[arg(long)]
    pub json: bool,
}

struct Lines;

impl search::Watch for Lines {
    fn measured(&mut self, round: usize, candidate: &str, duration: Duration, value: f64) {
        eprintln!(
            "search: round {round} ({:.1} s) {candidate}: {}",
            duration.as_secs_f64(),
            crate::experiment::report::text::rate(value)
        );
        let _ = std::io::stderr().flush();
    }
    fn round_done(&mut self, round: &Round) {
        eprintln!(
            "search: round {} kept {} of {}: {}",
            round.round,
            round.kept.len(),
            round.scores.len(),
            round.kept.join(", ")
        );
    }
}

pub fn run(args: SearchArgs) -> anyhow::Result<Status> {
    let bench = input::bench(&args.bench, args.duration, args.warmup)?;
    let dimensions = if args.space.is_empty() {
        Dimension::ALL.to_vec()
    } else {
        args.space
            .iter()
            .map(|d| Dimension::parse(d))
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    args.path.refuse_unused(
        dimensions.contains(&Dimension::Buffers),
        "the buffers dimension",
        "add buffers to --space",
    )?;
    if args.min_duration > args.duration {
        anyhow::bail!(
            "--min-duration ({:?}) is longer than --duration ({:?})",
            args.min_duration,
            args.duration
        );
    }
    if let Some(out) = &args.out {
        if out.exists() {
            anyhow::bail!(
                "--out '{}' exists: give a new file (plans are never overwritten); nothing was \
                 changed",
                out.display()
            );
        }
    }
    let out = args.out.as_ref().map(|o| absolute(o));
    require_root()?;
    let seed = seed_or_clock(args.place.seed);
    let place = Place::enter(&args.place)?;
    if out.is_some() && place.made_testbed() {
        eprintln!(
            "search: warning: the plan will be made for a testbed that is removed when the search \
             ends, so it cannot be applied there; search on a named testbed (`nettune testbed up \
             --name lab`, then --testbed lab) to use the plan"
        );
    }
    let found = search_here(&args, &place, &bench, dimensions, seed);
    let left = place.leave();
    let (candidates, remarks, found, plan) = found?;
    left?;
    let c = &found.comparison;
    let better = c.verdict == Verdict::Better;
    if let (Some(path), true) = (&out, better) {
        let text = serde_json::to_string_pretty(&plan)? + "\n";
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        let value = json!({
            "bench": bench.name,
            "metric": bench.metric(),
            // A string: a clock seed is past 2^53 (base::json_id).
            "seed": seed.to_string(),
            "candidates": candidates.iter().map(|c| &c.name).collect::<Vec<_>>(),
            // What was not searched, and why; notes on what was.
            "skipped": remarks.skipped,
            "notes": remarks.notes,
            // The path buffers=throughput was sized for, as `experiment
            // run --bandwidth/--rtt` takes it (null: the default).
            "bandwidth": args.path.bandwidth_text(),
            "rtt": args.path.rtt_text(),
            "search": found,
            "plan": plan,
            "written": out.as_ref().filter(|_| better).map(|p| p.display().to_string()),
        });
        crate::output::print(&(serde_json::to_string_pretty(&value)? + "\n"))?;
    } else {
        let mut o = text(
            &plan,
            &bench,
            &candidates,
            &remarks,
            &found,
            out.as_deref(),
            better,
        );
        o.push_str(&again(&candidates, &args.path));
        crate::output::print(&o)?;
    }
    if better {
        Ok(Status::Clean)
    } else {
        Err(Failed(format!(
            "no candidate measured better than the host as found (best: {}, {}, {}); no plan \
             written",
            found.winner_name,
            percent(c.ratio),
            c.verdict.word()
        ))
        .into())
    }
}

type Searched = (Vec<Candidate>, Remarks, Found, crate::plan::Plan);

/// How to measure a buffers candidate again: `experiment run` sizes
/// `buffers=throughput` for its own `--bandwidth`/`--rtt`, so the same
/// ones must be given there; empty when no candidate sets buffers or the
/// path is the default.
fn again(candidates: &[Candidate], path: &input::PathArgs) -> String {
    let flags = path.flags();
    if flags.is_empty() || !candidates.iter().any(|c| c.name.contains("buffers=")) {
        return String::new();
    }
    format!(
        "buffers=throughput is sized for {}: give `experiment run --configs` the same to \
         measure it again\n",
        flags.join(" ")
    )
}

fn search_here(
    args: &SearchArgs,
    place: &Place,
    bench: &Bench,
    dimensions: Vec<Dimension>,
    seed: u64,
) -> anyhow::Result<Searched> {
    let _lock = place.state.lock()?;
    let tuner = place.tuner(
        format!("search {}", bench.name),
        args.allow_host,
        args.path.path(),
    )?;
    tuner.refuse_unfinished()?;
    let host = tuner.host()?;
    let mut space = tuner.space(dimensions, args.max_candidates as usize);
    if space.ifaces.is_empty() {
        space.ifaces = host
            .interfaces
            .iter()
            .filter(|i| i.physical && i.operstate.as_deref() == Some("up"))
            .map(|i| i.name.clone())
            .collect();
    }
    let (candidates, remarks) = search::candidates(&host, &space)?;
    for n in &remarks.skipped {
        eprintln!("search: {n}");
    }
    for n in &remarks.notes {
        eprintln!("search: note: {n}");
    }
    eprintln!(
        "search: {} candidate(s) and the host as found, bench '{}'",
        candidates.len().saturating_sub(1),
        bench.name
    );
    let stop = crate::cli::signals::stop_on_signals_to_restore()?;
    let mut trial = search::Measured {
        tuner: &tuner,
        bench,
        sides: &place.sides,
        stop: &stop,
        full: args.duration,
        retried: Vec::new(),
    };
    let schedule = Schedule {
        first: args.min_duration,
        last: args.duration,
        confirm: args.repeat,
    };
    let found = search::halve(
        &candidates,
        &schedule,
        &mut trial,
        &mut Rng::new(seed),
        &mut Lines,
    );
    for why in &trial.retried {
        eprintln!("search: warning: a run failed and was made again: {why}");
    }
    let found = found?;
    let plan = search::winning_plan(&candidates[found.winner], &found, bench, &tuner);
    Ok((candidates, remarks, found, plan))
}

fn text(
    plan: &crate::plan::Plan,
    bench: &Bench,
    candidates: &[Candidate],
    remarks: &Remarks,
    found: &Found,
    out: Option<&std::path::Path>,
    better: bool,
) -> String {
    let mut o = format!(
        "\nsearch: {} candidate(s), bench '{}' ({})\n",
        candidates.len().saturating_sub(1),
        bench.name,
        bench.metric()
    );
    // Skips say so in their text (`rfs: skipped: ...`); notes are
    // labelled, as they are not skips.
    for n in &remarks.skipped {
        o.push_str(&format!("  {n}\n"));
    }
    for n in &remarks.notes {
        o.push_str(&format!("  note: {n}\n"));
    }
    for r in &found.rounds {
        o.push_str(&format!(
            "round {} ({:.1} s runs, host as found {}):\n",
            r.round,
            r.duration_s,
            crate::experiment::report::text::rate(r.baseline)
        ));
        for (name, value, ratio) in &r.scores {
            let kept = if r.kept.contains(name) { "kept" } else { "" };
            o.push_str(&format!(
                "  {:<44} {:>12} {:>7}  {kept}\n",
                name,
                crate::experiment::report::text::rate(*value),
                percent(*ratio)
            ));
        }
    }
    let c = &found.comparison;
    o.push_str(&format!(
        "winner: {}: {} against the host as found ({} runs each): {}\n",
        found.winner_name,
        c.text(),
        found.winner_runs.len(),
        c.verdict.word()
    ));
    if let Some(w) = &c.warning {
        o.push_str(&format!("warning: {w}\n"));
    }
    for ch in &candidates[found.winner].plan.changes {
        o.push_str(&format!("  {} : {} -> {}\n", ch.target, ch.from, ch.to));
    }
    match (out, better) {
        (Some(path), true) => {
            let netns = plan
                .made_for
                .as_ref()
                .and_then(|m| m.netns.as_deref())
                .map(|ns| format!(" --netns {ns}"))
                .unwrap_or_default();
            o.push_str(&format!(
                "plan written to {}: apply it with `nettune apply --plan {}{netns}`\n",
                path.display(),
                path.display()
            ));
        }
        (Some(_), false) => o.push_str("no plan written: the winner is not better\n"),
        (None, _) => {}
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn path(words: &[&str]) -> input::PathArgs {
        #[derive(clap::Parser)]
        struct Line {
            #[command(flatten)]
            path: input::PathArgs,
        }
        let mut argv = vec!["search"];
        argv.extend_from_slice(words);
        Line::try_parse_from(argv).expect("path flags").path
    }

    fn named(names: &[&str]) -> Vec<Candidate> {
        names
            .iter()
            .map(|n| Candidate {
                name: n.to_string(),
                plan: crate::plan::Plan::custom(Vec::new(), Vec::new(), Vec::new()),
            })
            .collect()
    }

    /// The output says which path a buffers candidate was sized for, as
    /// `experiment run` takes it, only where one was searched for a path.
    #[test]
    fn the_output_names_the_path_a_buffers_candidate_needs_again() {
        let given = path(&["--bandwidth", "50mbit", "--rtt", "30ms"]);
        let with_buffers = named(&["current", "rps=all buffers=throughput"]);
        assert_eq!(
            again(&with_buffers, &given),
            "buffers=throughput is sized for --bandwidth 50mbit --rtt 30ms: give `experiment \
             run --configs` the same to measure it again\n"
        );
        assert_eq!(again(&named(&["current", "rps=all"]), &given), "");
        assert_eq!(again(&with_buffers, &path(&[])), "");
    }
}
