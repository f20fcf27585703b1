//! `nettune monitor`'s arguments and the checks clap cannot make: what
//! the text view (`monitor`) and the exporter (`monitor_prom`) both read.

use std::path::PathBuf;

use clap::Args;

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

    /// Do not trace the kernel's drop reasons. By default a live monitor
    /// counts them (a BPF program on skb:kfree_skb; needs root) and shows
    /// the top reasons under each layer of the drop ladder, and the
    /// exporter serves nettune_skb_drop_reason_total; without permission
    /// or kernel support it says so once and shows the counters only.
    #[arg(long)]
    pub no_trace: bool,

    /// With --prometheus: the address to listen on; default 127.0.0.1:10056
    /// (this host only). 0.0.0.0:10056 lets other hosts scrape; port 0
    /// takes a free port (printed on stderr).
    #[arg(long, value_name = "ADDR:PORT", value_parser = crate::bench::addr::parse_bind, requires = "prometheus")]
    pub bind: Option<std::net::SocketAddr>,

    /// With --prometheus: TLS and basic auth from FILE, the Prometheus
    /// exporter-toolkit web configuration that node_exporter reads with
    /// --web.config.file (tls_server_config: cert_file, key_file,
    /// client_ca_file, client_auth_type; basic_auth_users: bcrypt
    /// hashes). Serves TLS 1.3 only. Format and examples: docs/monitor.md.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub web_config: Option<PathBuf>,
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

/// The drop tracer for a live monitor (`None` with --no-trace). When it
/// cannot run, the note is said here once when `say` (the terminal view
/// shows it in its ladder pane instead).
pub fn reason_source(
    args: &MonitorArgs,
    say: bool,
) -> Option<Result<Box<dyn crate::base::drop_reason::ReasonSource>, String>> {
    if args.no_trace {
        return None;
    }
    let source = crate::trace::source::open(args.netns.as_deref());
    if let (Err(why), true) = (&source, say) {
        eprintln!("nettune monitor: {why}");
    }
    Some(source)
}

/// What clap cannot check: its `requires` is waived when the required
/// flag conflicts with one given (`--prometheus` with `--once`), so
/// `--bind` without `--prometheus` would pass silently.
pub fn check(args: &MonitorArgs) -> anyhow::Result<()> {
    if let (Some(file), false) = (&args.web_config, args.prometheus) {
        anyhow::bail!(
            "--web-config '{}' secures what --prometheus serves, and --prometheus is not given: \
             add --prometheus, or drop --web-config",
            file.display()
        );
    }
    if let (Some(bind), false) = (args.bind, args.prometheus) {
        anyhow::bail!(
            "--bind '{bind}' is where --prometheus listens, and --prometheus is not given: add \
             --prometheus to serve the counters, or drop --bind"
        );
    }
    Ok(())
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
