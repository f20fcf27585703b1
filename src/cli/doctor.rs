//! `nettune doctor` arguments and the command itself: read the host,
//! sample the counters, judge, print.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;

use crate::apply::{place, Backend, StateStatus};
use crate::base::drop_reason::{self, ReasonSource};
use crate::doctor::{diagnose_with_plans, parse_ignore, render_json, render_text, Context, Plans};
use crate::doctor::{AppliedState, AppliedXdp, Rates, Report, SocketDrops, TracedDrops};
use crate::error::Status;
use crate::gather::read_target;
use crate::host::sock_diag;
use crate::host::udp_sockets::UdpSocket;
use crate::host::{open_root, read_counters, Selection};

/// Longest `--interval` accepted: doctor is a check, not a monitor.
const MAX_INTERVAL_SECS: f64 = 3600.0;
/// Shortest `--interval` besides 0: over less, a rate is a count of a few
/// events divided by almost nothing.
const MIN_INTERVAL_SECS: f64 = 0.1;

#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// Print JSON: {"findings": [{"id", "severity", "title", "evidence",
    /// "why", "fix", "profile", "changes"}], "summary": {"crit", "warn",
    /// "info"}, ...}.
    #[arg(long)]
    pub json: bool,

    /// Silence findings by id (see docs/doctor.md), e.g.
    /// --ignore cpu.mitigations,irq.balancer.
    #[arg(long, value_name = "ID[,ID...]", value_delimiter = ',', value_parser = rule_id)]
    pub ignore: Vec<String>,

    /// Seconds between two samples of the counters (0.1 to 3600), so that
    /// rates are judged live; 0 judges totals since boot (as --root always
    /// does).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "2",
        allow_hyphen_values = true,
        value_parser = interval
    )]
    pub interval: f64,

    /// Path bandwidth for the buffer check, in tc units: 10gbit, 100mbit, or
    /// 2.5G as iperf3 reads it (kbps/mbps/gbps are BYTES per second, as in
    /// tc); 1mbit to 10tbit. Needs --rtt.
    #[arg(long, value_name = "RATE", requires = "rtt", allow_hyphen_values = true, value_parser = crate::cli::plan::bandwidth_arg)]
    pub bandwidth: Option<u64>,

    /// Round-trip time of the path: 50ms, 100us, 0.2s (1us to 10s).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = crate::cli::plan::rtt_arg)]
    pub rtt: Option<Duration>,

    /// Judge a captured tree (from `nettune capture`) instead of this host.
    #[arg(long, value_name = "DIR", conflicts_with = "netns")]
    pub root: Option<PathBuf>,

    /// Judge the network namespace NAME (as `ip netns` names it): its
    /// interfaces, queues, sysctls and counters.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,

    /// Judge virtual interfaces (veth, bridges, tunnels) too.
    #[arg(long)]
    pub all: bool,

    /// While sampling, also count the kernel's drop reasons (a BPF program
    /// on skb:kfree_skb; needs root) and name each in a drops.reason
    /// finding with where it happened, the UDP socket it happened to and
    /// the fix. Without permission or kernel support doctor says so and
    /// judges the counters. Needs --interval above 0; not with --root.
    #[arg(long)]
    pub trace: bool,
}

fn rule_id(text: &str) -> Result<String, String> {
    parse_ignore(text)
        .map(|mut ids| ids.remove(0))
        .map_err(|e| format!("{e:#}"))
}

fn interval(text: &str) -> Result<f64, String> {
    match crate::base::units::parse_duration_or_zero(text).map(|d| d.as_secs_f64()) {
        Ok(secs) if secs == 0.0 || (MIN_INTERVAL_SECS..=MAX_INTERVAL_SECS).contains(&secs) => {
            Ok(secs)
        }
        _ => Err(format!(
            "'{text}' is not 0 or a number of seconds from {MIN_INTERVAL_SECS} to \
             {MAX_INTERVAL_SECS}; e.g. --interval 2, or 0 to judge totals since boot"
        )),
    }
}

/// Run `nettune doctor`.
pub fn run(args: DoctorArgs) -> anyhow::Result<Status> {
    let selection = Selection {
        all: args.all,
        iface: None,
    };
    if args.trace && (args.root.is_some() || args.interval == 0.0) {
        anyhow::bail!(
            "--trace counts the drops of this host while doctor samples it: it needs --interval \
             above 0 (e.g. --interval 5 --trace) and cannot judge a capture (--root)"
        );
    }
    // Before entering the namespace: the tracer reads tracefs and the
    // kernel's BTF, which a namespace's own /sys lacks.
    let mut reasons = args
        .trace
        .then(|| crate::trace::source::open(args.netns.as_deref()));
    if let Some(Err(why)) = &reasons {
        eprintln!("nettune doctor: {why}");
    }
    let host = read_target(args.root.as_deref(), args.netns.as_deref(), &selection)?;
    // A capture has one sample: totals since boot.
    let (rates, traced) = if args.root.is_none() && args.interval > 0.0 {
        let (rates, traced) = sample(args.interval, reasons.as_mut())?;
        (Some(rates), traced)
    } else {
        (None, None)
    };
    let applied = applied_states(&args);
    let ctx = Context {
        host: &host,
        rates: rates.as_ref(),
        bandwidth_bps: args.bandwidth,
        rtt_secs: args.rtt.map(|d| d.as_secs_f64()),
        all_interfaces: args.all,
        applied: &applied,
        traced: traced.as_ref(),
    };
    // The fixes follow the plans `nettune plan` would print here, with the
    // same checks against the files (read-only sysctls, governors offered).
    let root = open_root(args.root.as_deref())?;
    let plans = Plans::new(&ctx).checked_against(&root);
    let report = Report::new(
        diagnose_with_plans(&ctx, &plans),
        &args.ignore,
        rates.as_ref().map(|r| r.seconds),
    )
    .with_unjudged(crate::doctor::unjudged(&host))
    .with_host(crate::host::identity::Identity::of(
        &host,
        &root,
        args.netns.as_deref(),
    ))
    .with_trace(traced.clone());
    let mut out = io::stdout().lock();
    if args.json {
        render_json(&report, &mut out)?;
    } else {
        render_text(&report.findings, &mut out)?;
        crate::doctor::render_unjudged(&report.unjudged, &mut out)?;
    }
    out.flush()?;
    Ok(report.status())
}

/// The states nettune applied to what doctor judges (this host, the
/// namespace, or the tree) and still in place, with what drifted since.
/// Best effort: without a readable state directory there are none.
fn applied_states(args: &DoctorArgs) -> Vec<AppliedState> {
    let Ok(state) = crate::cli::apply::state_dir(None, args.root.as_deref()) else {
        return Vec::new();
    };
    let Ok(listing) = state.list() else {
        return Vec::new();
    };
    let tree = args
        .root
        .as_deref()
        .and_then(|r| std::fs::canonicalize(r).ok())
        .map(|r| r.display().to_string());
    if args.root.is_some() && tree.is_none() {
        return Vec::new();
    }
    // This process is where doctor reads (the namespace entered, or the
    // one it was started in).
    let here = place::Place::here_or_named(tree.as_deref().map(Path::new), args.netns.as_deref());
    let Ok(root) = open_root(args.root.as_deref()) else {
        return Vec::new();
    };
    let backend = Backend::new(root);
    listing
        .journals
        .iter()
        .filter(|j| {
            // An XDP record of a run killed before it could mark the
            // program attached may have attached it all the same.
            let live = j.status == StateStatus::Complete
                || (j.xdp.is_some() && j.status == StateStatus::Applying);
            live && place::not_undoable(j).is_none()
        })
        .filter(|j| place::Place::of(j).same(&here))
        .map(|j| {
            let netns = j
                .netns
                .as_ref()
                .map(|ns| format!(" --netns {ns}"))
                .unwrap_or_default();
            let apply_again = match (&j.options, &j.steer) {
                (Some(options), _) => state.command(&format!(
                    "apply {}{netns}",
                    crate::cli::plan::option_flags(options)
                )),
                (None, Some(s)) => state.command(&format!(
                    "steer --iface {} --queue {} --flow '{}'{netns}",
                    s.iface, s.queue, s.flow
                )),
                (None, None) => String::new(),
            };
            AppliedState {
                id: j.id,
                what: j.what(),
                profile: j.profile.map(|p| p.name().to_string()),
                drift: crate::apply::drift(j, &backend),
                rollback: state.command(&format!("rollback {}", j.id)),
                apply_again,
                steered: j.steer.as_ref().map(|s| (s.iface.clone(), s.queue)),
                xdp: j.xdp.as_ref().map(|x| AppliedXdp {
                    record: x.clone(),
                    owner_running: x.owner_running(),
                    attached: j.changes.iter().any(|e| {
                        backend
                            .read(&e.target)
                            .is_ok_and(|v| v == crate::apply::XDP_ATTACHED)
                    }),
                }),
            }
        })
        .collect()
}

/// The drop tracer, or why there is none.
type ReasonSourceOr = Result<Box<dyn ReasonSource>, String>;

/// Read the counters twice, `seconds` apart; with a drop tracer, its
/// counts and the UDP sockets' drops over the same interval (with each
/// socket's own receive buffer, read in the namespace doctor entered).
fn sample(
    seconds: f64,
    reasons: Option<&mut ReasonSourceOr>,
) -> anyhow::Result<(Rates, Option<TracedDrops>)> {
    let root = open_root(None)?;
    if io::stderr().is_terminal() {
        eprintln!(
            "sampling counters for {}...",
            crate::base::units::format_time(seconds)
        );
    }
    let mut reasons = reasons;
    let traced_before = match reasons.as_deref_mut() {
        Some(Ok(source)) => Some(source.totals()),
        _ => None,
    };
    let sockets_before = sock_diag::udp_sockets(&root).unwrap_or_default();
    let before = read_counters(&root);
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let after = read_counters(&root);
    let seconds = start.elapsed().as_secs_f64();
    let traced = match reasons {
        None => None,
        Some(Err(why)) => Some(TracedDrops {
            seconds,
            unavailable: Some(why.clone()),
            ..TracedDrops::default()
        }),
        Some(Ok(source)) => {
            let now = source.totals();
            let udp = sock_diag::udp_sockets(&root).unwrap_or_default();
            Some(TracedDrops {
                seconds,
                unavailable: now.unavailable.clone(),
                reasons: drop_reason::between(traced_before.as_ref(), &now, seconds),
                udp_sockets: socket_drops(&sockets_before, udp),
            })
        }
    };
    Ok((
        Rates {
            seconds,
            before,
            after,
        },
        traced,
    ))
}

/// The UDP sockets whose drop counter grew between two readings, most
/// first (a socket is the same one when its inode is).
fn socket_drops(before: &[UdpSocket], after: Vec<UdpSocket>) -> Vec<SocketDrops> {
    let mut grew: Vec<SocketDrops> = after
        .into_iter()
        .filter_map(|s| {
            let then = before
                .iter()
                .find(|b| b.inode == s.inode && b.family == s.family)
                .map_or(0, |b| b.drops);
            let drops = s.drops.checked_sub(then).filter(|&d| d > 0)?;
            Some(SocketDrops { socket: s, drops })
        })
        .collect();
    grew.sort_by_key(|s| std::cmp::Reverse(s.drops));
    grew
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: DoctorArgs,
    }

    fn parse(args: &[&str]) -> Result<DoctorArgs, String> {
        let mut argv = vec!["doctor"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_sample_for_two_seconds() {
        let args = parse(&[]).expect("defaults");
        assert_eq!(args.interval, 2.0);
        assert!(args.ignore.is_empty() && !args.json && !args.all);
    }

    #[test]
    fn path_and_ignore_parse() {
        let args = parse(&[
            "--bandwidth",
            "10gbit",
            "--rtt",
            "50ms",
            "--ignore",
            "cpu.mitigations,irq.balancer",
            "--ignore",
            "rps.off",
        ])
        .expect("args");
        assert_eq!(args.bandwidth, Some(10_000_000_000));
        assert_eq!(args.rtt, Some(Duration::from_millis(50)));
        assert_eq!(
            args.ignore,
            vec!["cpu.mitigations", "irq.balancer", "rps.off"]
        );
    }

    #[test]
    fn bad_input_is_an_error_with_an_example() {
        let err = parse(&["--bandwidth", "10 gigs", "--rtt", "50ms"]).expect_err("bad rate");
        assert!(err.contains("'10 gigs'") && err.contains("10gbit"), "{err}");
        let err = parse(&["--rtt", "-5ms"]).expect_err("negative");
        assert!(err.contains("negative") && err.contains("50ms"), "{err}");
        let err = parse(&["--ignore", "irq.onecpu"]).expect_err("unknown id");
        assert!(err.contains("irq.one-cpu"), "{err}");
        let err = parse(&["--bandwidth", "10gbit"]).expect_err("needs rtt");
        assert!(err.contains("--rtt"), "{err}");
        let err = parse(&["--interval", "-1"]).expect_err("negative interval");
        assert!(err.contains("--interval 2"), "{err}");
        assert!(parse(&["--interval", "soon"]).is_err());
        for absurd in ["1ns", "0.001", "3601", "1e30"] {
            let err = parse(&["--interval", absurd]).expect_err(absurd);
            assert!(err.contains("0.1 to 3600"), "{absurd}: {err}");
        }
        assert_eq!(parse(&["--interval", "0"]).expect("0").interval, 0.0);
        assert_eq!(parse(&["--interval", "500ms"]).expect("0.5").interval, 0.5);
        let err = parse(&["--bandwidth", "1bit", "--rtt", "50ms"]).expect_err("1 bit/s");
        assert!(err.contains("1mbit to 10tbit"), "{err}");
        let err = parse(&["--bandwidth", "10gbit", "--rtt", "1000000s"]).expect_err("11 days");
        assert!(err.contains("1 us to 10 s"), "{err}");
        let args = parse(&["--bandwidth", "2.5G", "--rtt", "50ms"]).expect("as help shows it");
        assert_eq!(args.bandwidth, Some(2_500_000_000));
        assert!(parse(&["--root", "/tmp/x", "--netns", "a"]).is_err());
    }
}
