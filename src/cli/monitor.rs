//! `nettune monitor`: the choice of view, and the loop that shows a frame
//! per interval (the arguments are in `monitor_args`, the exporter's run in
//! `monitor_prom`). Sampling and rates live in `crate::monitor`.

use std::io::{self, IsTerminal, Write};
use std::time::Duration;

use crate::doctor::Severity;
use crate::error::Status;
use crate::host::Selection;
use crate::monitor::{run as run_feed, text, tui, Feed, Frame, Lifecycle};

use super::monitor_args::{check, reason_source, MonitorArgs, DEFAULT_INTERVAL_SECS};

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
            // A namespace that is not there is the one error to report,
            // not also a note that the tracer could not follow it.
            if let Some(name) = &args.netns {
                crate::base::netns::open(name)?;
            }
            // Before entering the namespace: the tracer reads tracefs and
            // the kernel's BTF, which a namespace's own /sys lacks.
            let reasons = reason_source(&args, choose_view(&args) != View::Tui);
            if let Some(name) = &args.netns {
                crate::base::netns::enter(name)?;
            }
            let secs = args.interval.unwrap_or(DEFAULT_INTERVAL_SECS);
            let feed = Feed::live(selection, args.netns.clone(), Duration::from_secs_f64(secs));
            match reasons {
                Some(source) => feed.with_reasons(source),
                None => feed,
            }
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
