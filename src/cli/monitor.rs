//! `nettune monitor`: arguments, the choice of view, and the loop that
//! shows a frame per interval. Sampling and rates live in `crate::monitor`.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::doctor::Severity;
use crate::error::Status;
use crate::host::Selection;
use crate::monitor::{run as run_feed, text, tui, Feed, Frame, Lifecycle};

/// Shortest interval: below it the sampling itself would be what one sees.
pub const MIN_INTERVAL_SECS: f64 = 0.1;
/// Longest interval: an hour; longer is not watching.
pub const MAX_INTERVAL_SECS: f64 = 3600.0;
/// The interval when none is given.
pub const DEFAULT_INTERVAL_SECS: f64 = 1.0;

#[derive(Debug, Clone, Args)]
pub struct MonitorArgs {
    /// Seconds between samples: 1 (the default), 0.5, 2s, 500ms; from 0.1
    /// to 3600. Not with --root: a recorded series keeps its own.
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = interval)]
    pub interval: Option<f64>,

    /// Show one interval and exit (two samples, --interval apart).
    #[arg(long, conflicts_with = "count")]
    pub once: bool,

    /// Show N intervals and exit (N+1 samples).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = count)]
    pub count: Option<u64>,

    /// Print one JSON object per interval, one per line (NDJSON; schema in
    /// docs/json-schema.md).
    #[arg(long)]
    pub json: bool,

    /// Watch only this interface (its queues and IRQs); the CPU and
    /// protocol figures stay whole.
    #[arg(long, value_name = "NAME")]
    pub iface: Option<String>,

    /// Print text blocks even when stdout is a terminal (where the
    /// interactive view is the default).
    #[arg(long, conflicts_with = "json")]
    pub text: bool,

    /// Include the loopback interface.
    #[arg(long)]
    pub all: bool,

    /// Replay a series recorded with `nettune capture --samples N DIR`.
    #[arg(long, value_name = "DIR", conflicts_with = "netns")]
    pub root: Option<PathBuf>,

    /// Watch the network namespace NAME (as `ip netns` names it): its
    /// interfaces and protocol counters; CPU figures are the whole host's.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,

    /// Serve the counters to Prometheus at http://ADDR:PORT/metrics
    /// instead of printing them, until Ctrl-C or SIGTERM. A scrape reads
    /// the host (at most once per --interval; scrapers share readings).
    /// Metrics, scrape config and alert rules: docs/monitor.md.
    #[arg(long, conflicts_with_all = ["json", "text", "once", "count"])]
    pub prometheus: bool,

    /// With --prometheus: the address to listen on; default 127.0.0.1:10056
    /// (this host only). 0.0.0.0:10056 lets other hosts scrape; port 0
    /// takes a free port (printed on stderr).
    #[arg(long, value_name = "ADDR:PORT", value_parser = crate::bench::addr::parse_bind, requires = "prometheus")]
    pub bind: Option<std::net::SocketAddr>,
}

/// Parse an interval in seconds (`1`, `0.5`, `2s`, `500ms`) within the
/// bounds; for clap.
pub fn interval(text: &str) -> Result<f64, String> {
    let fail = || {
        format!(
            "'{text}' is not an interval from {MIN_INTERVAL_SECS} to {MAX_INTERVAL_SECS} seconds; \
             e.g. --interval 1, --interval 0.5, --interval 2s"
        )
    };
    let secs = crate::base::units::parse_duration_or_zero(text)
        .map_err(|_| fail())?
        .as_secs_f64();
    if (MIN_INTERVAL_SECS..=MAX_INTERVAL_SECS).contains(&secs) {
        Ok(secs)
    } else {
        Err(fail())
    }
}

fn count(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "'{text}' is not a number of intervals (1 or more); e.g. --count 10"
        )),
    }
}

/// How frames are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    /// A sar-style text block per interval.
    Text,
    /// One JSON object per line.
    Json,
    /// The interactive terminal view (`crate::monitor::tui`).
    Tui,
}

/// The view for these arguments: the terminal view when stdout is a
/// terminal and the run is open-ended (no --json, --text, --once or
/// --count); text blocks otherwise.
fn choose_view(args: &MonitorArgs) -> View {
    if args.json {
        return View::Json;
    }
    let open_ended = !args.once && args.count.is_none();
    if open_ended && !args.text && io::stdout().is_terminal() {
        return View::Tui;
    }
    View::Text
}

/// How the terminal view's title bar names where the frames come from.
fn source_label(args: &MonitorArgs) -> String {
    match (&args.root, &args.netns) {
        (Some(dir), _) => format!("replay {}", dir.display()),
        (None, Some(ns)) => format!("live, netns {ns}"),
        (None, None) => "live".to_string(),
    }
}

/// What clap cannot check: its `requires` is waived when the required
/// flag conflicts with one given (`--prometheus` with `--once`), so
/// `--bind` without `--prometheus` would pass silently.
fn check(args: &MonitorArgs) -> anyhow::Result<()> {
    if let (Some(bind), false) = (args.bind, args.prometheus) {
        anyhow::bail!(
            "--bind '{bind}' is where --prometheus listens, and --prometheus is not given: add \
             --prometheus to serve the counters, or drop --bind"
        );
    }
    Ok(())
}

/// Run `nettune monitor`.
pub fn run(args: MonitorArgs) -> anyhow::Result<Status> {
    check(&args)?;
    if args.prometheus {
        return super::monitor_prom::run(args);
    }
    let selection = Selection {
        all: args.all,
        iface: args.iface.clone(),
    };
    let count = if args.once { Some(1) } else { args.count };
    let mut feed = match &args.root {
        Some(dir) => {
            if args.interval.is_some() {
                anyhow::bail!(
                    "--interval cannot be used with --root: a recorded series keeps the interval \
                     it was captured with"
                );
            }
            Feed::replay(dir, selection)?
        }
        None => {
            if let Some(name) = &args.netns {
                crate::base::netns::enter(name)?;
            }
            let secs = args.interval.unwrap_or(DEFAULT_INTERVAL_SECS);
            Feed::live(selection, args.netns.clone(), Duration::from_secs_f64(secs))
        }
    };
    let view = choose_view(&args);
    let stop = if view == View::Tui {
        // SIGHUP too (the terminal was closed), and a second signal gives
        // the terminal back before it ends the process.
        super::signals::stop_on_signals_for_view(tui::exit_restored)?
    } else {
        super::signals::stop_on_signals()?
    };
    if view == View::Tui {
        // An interactive view is watched, not a check: quitting it is a
        // success whatever it showed.
        tui::run(
            feed,
            &stop,
            tui::TuiOptions {
                source: source_label(&args),
                theme: tui::Theme::from_env(),
            },
        )?;
        return Ok(Status::Clean);
    }
    let mut out = io::stdout().lock();
    let mut watch = IfaceWatch::new(args.iface.clone());
    let end = run_feed(&mut feed, &stop, count, &mut |frame: &Frame| {
        watch.note(frame);
        match view {
            // (The terminal view returned above.)
            View::Text | View::Tui => out.write_all(text::render(frame).as_bytes())?,
            View::Json => {
                out.write_all(frame.json_line()?.as_bytes())?;
                out.write_all(b"\n")?;
            }
        }
        out.flush()?;
        Ok(())
    })?;
    if end.frames == 0 && !end.stopped {
        anyhow::bail!("the recorded series has fewer than two snapshots");
    }
    if let (Some(wanted), true) = (count, end.series_ended) {
        eprintln!(
            "nettune monitor: the recorded series ends after {} interval(s) of the {wanted} asked",
            end.frames
        );
    }
    // A bounded run is a check: findings at warn or above exit 1, as
    // doctor's do. An open-ended run ends when told to.
    let bounded = count.is_some() || args.root.is_some();
    if bounded && end.worst >= Some(Severity::Warn) {
        return Ok(Status::Findings);
    }
    Ok(Status::Clean)
}

/// Says on stderr when the interface named with --iface goes away and
/// comes back.
struct IfaceWatch {
    iface: Option<String>,
    gone: bool,
}

impl IfaceWatch {
    fn new(iface: Option<String>) -> IfaceWatch {
        IfaceWatch { iface, gone: false }
    }

    fn note(&mut self, frame: &Frame) {
        let Some(name) = &self.iface else { return };
        if frame.rates.vanished.interfaces.contains(name) {
            self.gone = true;
            eprintln!("nettune monitor: interface '{name}' is gone; waiting for it to come back");
        } else if self.gone {
            if let Some(back) = frame.rates.interface(name) {
                if back.lifecycle != Lifecycle::Continuing {
                    self.gone = false;
                    eprintln!("nettune monitor: interface '{name}' is back");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: MonitorArgs,
    }

    fn parse(args: &[&str]) -> Result<MonitorArgs, String> {
        let mut argv = vec!["monitor"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_intervals() {
        let args = parse(&[]).expect("defaults");
        assert_eq!(args.interval, None);
        assert!(!args.once && args.count.is_none() && !args.json);
        assert_eq!(
            parse(&["--interval", "0.5"]).expect("0.5").interval,
            Some(0.5)
        );
        assert_eq!(
            parse(&["--interval", "2s"]).expect("2s").interval,
            Some(2.0)
        );
        assert_eq!(
            parse(&["--interval", "250ms"]).expect("ms").interval,
            Some(0.25)
        );
        assert_eq!(parse(&["--count", "3"]).expect("count").count, Some(3));
    }

    #[test]
    fn bad_input_is_an_error_with_an_example() {
        for bad in ["0", "-1", "-0.5", "1e9", "99999", "soon", "0.01", "nan", ""] {
            let err = parse(&["--interval", bad]).expect_err(bad);
            assert!(
                err.contains("--interval 1") && err.contains("0.1 to 3600"),
                "{bad}: {err}"
            );
        }
        for bad in ["0", "-3", "many"] {
            let err = parse(&["--count", bad]).expect_err(bad);
            assert!(err.contains("--count 10"), "{bad}: {err}");
        }
        assert!(parse(&["--once", "--count", "2"]).is_err());
        for without in [
            &["--once", "--bind", "127.0.0.1:0"][..],
            &["--json", "--count", "1", "--bind", "127.0.0.1:0"],
        ] {
            let args = parse(without).expect("clap lets it through");
            let err = check(&args).expect_err("--bind without --prometheus");
            assert!(
                err.to_string().contains("--prometheus is not given"),
                "{err}"
            );
        }
        let with = parse(&["--prometheus", "--bind", "127.0.0.1:0"]).expect("prometheus");
        assert!(check(&with).is_ok());
        assert!(parse(&["--root", "/tmp/x", "--netns", "a"]).is_err());
    }
}
