//! What an experiment's user writes, turned into configs and benches:
//! `--configs current,pps,throughput:--rtt=50ms,plan.json` and `--bench
//! 'rr --proto tcp --instances 100'` (or `udp-flood`, `http`, `stream`). Both are parsed with the same clap
//! structs as `nettune plan`/`apply` and `nettune bench`, so every flag
//! means what it means there.

use std::path::Path;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{CommandFactory as _, FromArgMatches as _, Parser};

use crate::bench::engine::Load;
use crate::cli::bench::http::Target;
use crate::cli::bench::{FloodArgs, HttpArgs, RrArgs, StreamArgs};
use crate::cli::plan::TuneArgs;
use crate::experiment::bench::Bench;
use crate::experiment::search::Dimension;
use crate::experiment::tune::{BufferPath, Config, Tuning};
use crate::plan::Profile;

/// A target that stands in while the bench line is parsed; replaced by the
/// server's address before any run (192.0.2.0/24 is TEST-NET-1, never
/// routed: nothing is ever sent to it).
const PLACEHOLDER_TO: &str = "192.0.2.1:9";
const PLACEHOLDER_HOST: &str = "http://192.0.2.1:9";
const PLACEHOLDER_URL: &str = "http://192.0.2.1:9/plaintext";

/// The client commands an experiment runs (their servers it starts itself).
#[derive(Debug, Parser)]
#[command(name = "bench", no_binary_name = true, disable_help_subcommand = true)]
enum BenchLine {
    UdpFlood(FloodArgs),
    Rr(RrArgs),
    Http(HttpArgs),
    Stream(StreamArgs),
}

/// A clap error as one line.
fn one_line(err: &clap::Error) -> String {
    let text = err.render().to_string();
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments");
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

fn words(text: &str, what: &str) -> anyhow::Result<Vec<String>> {
    shlex::split(text).ok_or_else(|| anyhow::anyhow!("{what} '{text}': unbalanced quotes"))
}

/// `--bandwidth` and `--rtt` of `experiment run` and `experiment search`:
/// the path `buffers=throughput` sizes socket buffers for, parsed as
/// `plan` parses them. One definition for both commands, so that a label
/// the search prints, given to `experiment run` with the same flags,
/// applies the very values the search measured.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PathArgs {
    /// buffers=throughput: the path's bandwidth, as for `plan --profile
    /// throughput` (`50mbit`, `10gbit`; 1mbit to 10tbit). Default: the
    /// fastest link tuned. `experiment search` and `experiment run` size
    /// buffers alike for the same path.
    #[arg(long, value_name = "RATE", allow_hyphen_values = true, value_parser = crate::cli::plan::bandwidth_arg)]
    pub bandwidth: Option<u64>,
    /// buffers=throughput: the path's round-trip time (`30ms`, `0.2s`; 1us
    /// to 10s). Default: 100ms.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, value_parser = crate::cli::plan::rtt_arg)]
    pub rtt: Option<Duration>,
}

impl PathArgs {
    pub fn path(&self) -> BufferPath {
        BufferPath {
            bandwidth_bits: self.bandwidth,
            rtt_us: self
                .rtt
                .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        }
    }

    /// `--bandwidth` as `experiment run` and `search` take it back, exact:
    /// `50mbit`, `2500mbit`, `999bit`.
    pub fn bandwidth_text(&self) -> Option<String> {
        self.path()
            .bandwidth_bits
            .map(crate::base::units::format_tc_rate)
    }

    /// `--rtt` as taken back, whole in its unit and in the microseconds
    /// the path is sized in: `30ms`, `1s`, `250us`.
    pub fn rtt_text(&self) -> Option<String> {
        self.path().rtt_us.map(|us| {
            if us > 0 && us % 1_000_000 == 0 {
                format!("{}s", us / 1_000_000)
            } else if us > 0 && us % 1000 == 0 {
                format!("{}ms", us / 1000)
            } else {
                format!("{us}us")
            }
        })
    }

    /// The flags given, as taken back: `--bandwidth 50mbit --rtt 30ms`.
    pub fn flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (flag, text) in [
            ("--bandwidth", self.bandwidth_text()),
            ("--rtt", self.rtt_text()),
        ] {
            if let Some(text) = text {
                out.extend([flag.to_string(), text]);
            }
        }
        out
    }

    /// Refuse flags that would size nothing (`used` false): `sizes` names
    /// what they size, `needs` what to add (`add buffers to --space`).
    pub fn refuse_unused(&self, used: bool, sizes: &str, needs: &str) -> anyhow::Result<()> {
        if used {
            return Ok(());
        }
        let given = [
            ("--bandwidth", self.bandwidth.is_some()),
            ("--rtt", self.rtt.is_some()),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
            anyhow::bail!("{flag} sizes {sizes} only; {needs} or drop {flag}; nothing was changed");
        }
        Ok(())
    }
}

/// Whether any of `configs` sets `buffers=`.
pub fn sets_buffers(configs: &[Config]) -> bool {
    configs.iter().any(|c| match &c.tuning {
        Tuning::Settings(s) => s.iter().any(|(d, _)| *d == Dimension::Buffers),
        _ => false,
    })
}

/// Parse `--bench 'LINE'`: the `nettune bench` client command line without
/// its target. `duration` and `warmup` apply unless the line sets its own.
pub fn bench(text: &str, duration: Duration, warmup: Duration) -> anyhow::Result<Bench> {
    let mut w = words(text, "--bench")?;
    let kind = w.first().cloned().unwrap_or_default();
    match kind.as_str() {
        "udp-flood" | "rr" | "http" | "stream" => {}
        "udp-sink" | "rr-server" | "http-server" | "stream-server" => anyhow::bail!(
            "--bench '{text}': {kind} is a server side, which the experiment starts itself; give \
             the client: udp-flood, rr, http or stream"
        ),
        _ => anyhow::bail!(
            "--bench '{text}': give a `nettune bench` client command line without its target: \
             'udp-flood --flows 16', 'rr --proto tcp --instances 100', 'http -c 64', 'stream'"
        ),
    }
    if let Some(word) = w.iter().find(|x| {
        *x == "--to"
            || x.starts_with("--to=")
            || x.contains("://")
            || x.starts_with("--netns")
            || x.starts_with("--remote")
            || x.starts_with("--token-file")
            || x.starts_with("--tls-")
    }) {
        anyhow::bail!(
            "--bench '{text}' names its own target or namespace ('{word}'): the experiment \
             starts the server side itself (here, or with the experiment's --remote through \
             `nettune serve`) and fills in where to send; drop it"
        );
    }
    if kind == "http" {
        // A path alone (`http -c 64 /json`) says what to load; else /plaintext.
        if !w.iter().skip(1).any(|x| x.starts_with('/')) {
            w.push(PLACEHOLDER_URL.to_string());
        }
    } else {
        w.push("--to".to_string());
        w.push(PLACEHOLDER_TO.to_string());
    }
    let matches = BenchLine::command()
        .try_get_matches_from(&w)
        .map_err(|e| anyhow::anyhow!("--bench '{text}': {}", one_line(&e)))?;
    let line = BenchLine::from_arg_matches(&matches)
        .map_err(|e| anyhow::anyhow!("--bench '{text}': {}", one_line(&e)))?;
    let given = |id: &str| {
        matches.subcommand().is_some_and(|(_, m)| {
            m.ids().any(|x| x.as_str() == id)
                && m.value_source(id) == Some(ValueSource::CommandLine)
        })
    };
    let (own_duration, own_warmup) = (given("duration"), given("warmup"));
    let client: Box<dyn Load> = match line {
        BenchLine::UdpFlood(args) => {
            let mut c = args.config();
            if !own_duration {
                c.duration = duration;
            }
            c.validate()
                .map_err(|e| anyhow::anyhow!("--bench '{text}': {e}"))?;
            Box::new(c)
        }
        BenchLine::Rr(args) => {
            let to = args
                .to
                .ok_or_else(|| anyhow::anyhow!("--bench '{text}': no target"))?;
            let mut c = args.config(to);
            if !own_duration {
                c.duration = duration;
            }
            if !own_warmup {
                c.warmup = warmup;
            }
            c.size
                .check_for(c.proto)
                .map_err(|e| anyhow::anyhow!("--bench '{text}': {e}"))?;
            Box::new(c)
        }
        BenchLine::Stream(args) => {
            let to = args
                .to
                .ok_or_else(|| anyhow::anyhow!("--bench '{text}': no target"))?;
            let mut c = args.config(to);
            if !own_duration {
                c.duration = duration;
            }
            if !own_warmup {
                c.warmup = warmup;
            }
            c.validate()
                .map_err(|e| anyhow::anyhow!("--bench '{text}': {e}"))?;
            Box::new(c)
        }
        BenchLine::Http(args) => {
            let url = match &args.url {
                Some(Target::Url(url)) => url.clone(),
                Some(Target::Path(path)) => {
                    crate::bench::http::url::parse(&format!("{PLACEHOLDER_HOST}{path}"))
                        .map_err(|e| anyhow::anyhow!("--bench '{text}': {e}"))?
                }
                None => anyhow::bail!("--bench '{text}': no URL"),
            };
            let mut c = args
                .config(url)
                .map_err(|e| anyhow::anyhow!("--bench '{text}': {e}"))?;
            if !own_duration {
                c.duration = duration;
            }
            if !own_warmup {
                c.warmup = warmup;
            }
            Box::new(c)
        }
    };
    Ok(Bench {
        name: text.split_whitespace().collect::<Vec<_>>().join(" "),
        // A client without a warm-up of its own gets a discarded run.
        udp_warmup: if client.warmup().is_none() {
            warmup
        } else {
            Duration::ZERO
        },
        client,
    })
}

/// `--configs LIST` split into configs: commas separate them, except
/// inside brackets (the search's labels: `rps=not-app(0,2-3)`) and where
/// the next piece continues a CPU list (`pps:--cpus=0-3,8`).
pub fn split_configs(lists: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for list in lists {
        for piece in crate::experiment::search::split_outside_brackets(list, |c| c == ',') {
            let continues = piece.starts_with(|c: char| c.is_ascii_digit())
                && out.last().is_some_and(|l| l.contains(':'));
            match out.last_mut() {
                Some(last) if continues => {
                    last.push(',');
                    last.push_str(piece);
                }
                _ => out.push(piece.to_string()),
            }
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// A profile's flags parsed as `nettune plan` parses them.
#[derive(Debug, Parser)]
#[command(name = "config", no_binary_name = true)]
struct ProfileLine {
    #[command(flatten)]
    tune: TuneArgs,
}

/// Parse one config: `current`, `PROFILE[:FLAGS]` or a plan file. The
/// experiment's `--iface` and `--cpus` go to every profile.
pub fn config(text: &str, ifaces: &[String], cpus: Option<&str>) -> anyhow::Result<Config> {
    if text == "current" {
        return Ok(Config {
            name: text.to_string(),
            tuning: Tuning::Current,
        });
    }
    let (name, flags) = text.split_once(':').unwrap_or((text, ""));
    let site_profile = || crate::plan::site::find(&crate::plan::site::dirs(), name).is_some();
    if name == Profile::Custom.name() {
        anyhow::bail!("config '{text}': custom plans are given as their file");
    }
    if crate::plan::site::built_in(name).is_some() || site_profile() {
        let mut w = vec!["--profile".to_string(), name.to_string()];
        let extra = words(flags, "config")?;
        if let Some(bad) = extra.iter().find(|x| {
            ["--root", "--netns", "--plan", "--profile"]
                .iter()
                .any(|f| x.starts_with(f))
        }) {
            anyhow::bail!(
                "config '{text}': '{bad}' cannot be given per config (the experiment decides \
                 where configs are applied)"
            );
        }
        w.extend(extra);
        for iface in ifaces {
            w.push("--iface".to_string());
            w.push(iface.clone());
        }
        if let Some(cpus) = cpus {
            if !w.iter().any(|x| x.starts_with("--cpus")) {
                w.push("--cpus".to_string());
                w.push(cpus.to_string());
            }
        }
        let line = ProfileLine::try_parse_from(&w)
            .map_err(|e| anyhow::anyhow!("config '{text}': {}", one_line(&e)))?;
        let opts = line
            .tune
            .options()
            .map_err(|e| anyhow::anyhow!("config '{text}': {e}"))?;
        return Ok(Config {
            name: text.to_string(),
            tuning: Tuning::Profile(opts),
        });
    }
    let path = Path::new(text);
    let settings_like = text.contains('=') && !text.contains('/') && !text.ends_with(".json");
    if settings_like && !path.is_file() {
        return Ok(Config {
            name: text.to_string(),
            tuning: Tuning::Settings(crate::experiment::search::parse_settings(text)?),
        });
    }
    if flags.is_empty() && path.is_file() {
        let plan = crate::plan::saved::load(path)?;
        return Ok(Config {
            name: text.to_string(),
            tuning: Tuning::Plan {
                file: text.to_string(),
                plan: Box::new(plan),
            },
        });
    }
    anyhow::bail!(
        "unknown config '{text}': give current, a profile (pps, latency, throughput, http, \
         baseline, or a site profile of `nettune profiles`; flags after a colon: \
         throughput:--rtt=50ms), settings (rps=all, \
         rps=app+rfs=on) or a saved plan file (no such file)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(3);
    const W: Duration = Duration::from_secs(1);

    #[test]
    fn bench_lines_parse_with_the_bench_flags() {
        let b = bench("rr --proto tcp --instances 100", S, W).expect("rr");
        match b
            .client
            .as_any()
            .downcast_ref::<crate::bench::rr::ClientConfig>()
        {
            Some(c) => {
                assert_eq!(c.instances, 100);
                assert_eq!((c.duration, c.warmup), (S, W));
            }
            None => panic!("{:?}", b.client),
        }
        let b = bench("udp-flood --flows 16 --duration 2", S, W).expect("udp");
        match b
            .client
            .as_any()
            .downcast_ref::<crate::bench::udp::FloodConfig>()
        {
            Some(c) => assert_eq!((c.flows, c.duration), (16, Duration::from_secs(2))),
            None => panic!("{:?}", b.client),
        }
        assert_eq!(b.udp_warmup, W);
        let b = bench("stream -P 2", S, W).expect("stream");
        match b
            .client
            .as_any()
            .downcast_ref::<crate::bench::stream::StreamConfig>()
        {
            Some(c) => assert_eq!((c.streams, c.duration, c.warmup), (2, S, W)),
            None => panic!("{:?}", b.client),
        }
        assert_eq!((b.kind(), b.metric()), ("stream", "bits/s"));
        assert!(bench("stream-server", S, W).is_err());
        let b = bench("http -c 64 -D 0", S, W).expect("http");
        match b
            .client
            .as_any()
            .downcast_ref::<crate::bench::http::LoadConfig>()
        {
            Some(c) => assert_eq!((c.connections, c.warmup), (64, Duration::ZERO)),
            None => panic!("{:?}", b.client),
        }
        // A path alone picks what is loaded; the experiment fills in the server.
        let b = bench("http -c 8 /json", S, W).expect("http with a path");
        match b
            .client
            .as_any()
            .downcast_ref::<crate::bench::http::LoadConfig>()
        {
            Some(c) => assert_eq!(c.url.path, "/json"),
            None => panic!("{:?}", b.client),
        }
    }

    #[test]
    fn bench_lines_with_a_target_or_bad_flags_are_refused() {
        for (line, says) in [
            ("rr --proto tcp --to 10.0.0.1:5000", "own target"),
            ("udp-flood --to=1.2.3.4:9", "own target"),
            ("http http://example.com/", "own target"),
            ("rr --proto tcp --netns x", "namespace"),
            ("udp-sink --bind 0.0.0.0:1", "server side"),
            ("iperf3 -c x", "client command line"),
            ("rr --proto sctp", "sctp"),
            ("rr --proto tcp --instances 0", "instances"),
            ("udp-flood --size 'x", "unbalanced"),
        ] {
            let err = bench(line, S, W).expect_err(line).to_string();
            assert!(err.contains(says), "{line}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn configs_are_current_profiles_with_flags_or_plan_files() {
        assert_eq!(
            split_configs(&["current,pps,latency:--cpus=0-1,3,plan.json".to_string()]),
            ["current", "pps", "latency:--cpus=0-1,3", "plan.json"]
        );
        // The search's labels on a host of more than two CPUs: a CPU list
        // in brackets is part of its config.
        assert_eq!(
            split_configs(&[
                "current,rps=not-app(0,2-3),irq=not-app(0,2-3) xps=off".to_string(),
                "pps:--cpus=0-1,3,rps=app(1,3)+rfs=on".to_string()
            ]),
            [
                "current",
                "rps=not-app(0,2-3)",
                "irq=not-app(0,2-3) xps=off",
                "pps:--cpus=0-1,3",
                "rps=app(1,3)+rfs=on"
            ]
        );
        let c = config("throughput:--rtt=50ms", &["eth0".to_string()], None).expect("throughput");
        match c.tuning {
            Tuning::Profile(o) => {
                assert_eq!(o.rtt_us, Some(50_000));
                assert_eq!(o.ifaces, ["eth0"]);
            }
            other => panic!("{other:?}"),
        }
        let err = config("fastest", &[], None)
            .expect_err("unknown")
            .to_string();
        assert!(err.contains("unknown config 'fastest'"), "{err}");
        let err = config("pps:--rtt=5ms", &[], None)
            .expect_err("rtt")
            .to_string();
        assert!(err.contains("throughput profile only"), "{err}");
        let err = config("pps:--netns=x", &[], None)
            .expect_err("netns")
            .to_string();
        assert!(err.contains("cannot be given per config"), "{err}");
    }

    /// `nettune experiment WORDS` as the command line parses it.
    fn parse(words: &[&str]) -> super::super::ExperimentCommand {
        let mut argv = vec!["nettune", "experiment"];
        argv.extend_from_slice(words);
        match crate::cli::Cli::try_parse_from(argv)
            .expect("parses")
            .command
        {
            crate::cli::Command::Experiment(e) => e,
            other => panic!("{other:?}"),
        }
    }

    /// `buffers=throughput` as the search makes it and as `experiment
    /// run --configs` applies it, both given `--bandwidth 50mbit --rtt
    /// 30ms` (187.5 kB in flight): the same changes, the 16 MiB tier of
    /// that path, not the 128 MiB of the default one (10 Gbit/s x 100 ms),
    /// which `experiment run` applied when it could not be given the path.
    #[test]
    fn run_applies_the_buffers_the_search_measured_for_the_same_path() {
        use super::super::ExperimentCommand;
        use crate::experiment::search::{candidates, settings_plan};
        use crate::experiment::tune::Scope;
        let path = ["--bandwidth", "50mbit", "--rtt", "30ms"];
        let with_path = |words: &[&str]| {
            let mut w = words.to_vec();
            w.extend_from_slice(&path);
            parse(&w)
        };
        let ExperimentCommand::Search(search) =
            with_path(&["search", "--bench", "stream", "--space", "buffers"])
        else {
            panic!("not the search");
        };
        let run_words = [
            "run",
            "--configs",
            "current,buffers=throughput",
            "--bench",
            "stream",
            "--out",
            "exp",
        ];
        let ExperimentCommand::Run(run) = with_path(&run_words) else {
            panic!("not run");
        };
        let host = crate::gather::fixture_host("vm-2cpu-virtio");
        let scope = |path: &PathArgs| Scope {
            ifaces: vec!["eth0".to_string()],
            path: path.path(),
            ..Scope::default()
        };
        let changes = |plan: &crate::plan::Plan| {
            let mut c: Vec<(String, String, String)> = plan
                .changes
                .iter()
                .map(|c| (c.target.to_string(), c.from.clone(), c.to.to_string()))
                .collect();
            c.sort();
            c
        };
        // The search's candidate.
        let space = scope(&search.path).space(vec![Dimension::Buffers], 32);
        let (found, _) = candidates(&host, &space).expect("candidates");
        let searched = &found
            .iter()
            .find(|c| c.name == "buffers=throughput")
            .expect("the buffers candidate")
            .plan;
        // The run's config, as the tuner makes its plan (Tuner::plan).
        let configs: Vec<Config> = split_configs(&run.configs)
            .iter()
            .map(|c| config(c, &[], None))
            .collect::<anyhow::Result<_>>()
            .expect("configs");
        assert!(sets_buffers(&configs));
        let Tuning::Settings(settings) = &configs[1].tuning else {
            panic!("{:?}", configs[1]);
        };
        let dims = settings.iter().map(|(d, _)| *d).collect();
        let ran = settings_plan(&host, &scope(&run.path).space(dims, 1), settings)
            .expect("buffers=throughput");
        assert_eq!(changes(&ran), changes(searched));
        let tier = (16u64 << 20).to_string();
        assert!(
            changes(&ran).contains(&(
                "/proc/sys/net/ipv4/tcp_rmem".to_string(),
                "4096 131072 6291456".to_string(),
                format!("4096 131072 {tier}")
            )),
            "{:?}",
            changes(&ran)
        );
        // Without the path, the default's: another size.
        let default = settings_plan(
            &host,
            &scope(&PathArgs::default()).space(vec![Dimension::Buffers], 1),
            settings,
        )
        .expect("default path");
        assert_ne!(changes(&default), changes(&ran));
    }

    /// The path the search prints (its JSON, its hint) parses back into
    /// the very values it sized for, in whatever units it was given.
    #[test]
    fn the_path_flags_parse_back_exactly() {
        for (given, back) in [
            (["50mbit", "30ms"], ["50mbit", "30ms"]),
            (["2.5G", "0.2s"], ["2500mbit", "200ms"]),
            (["1gbps", "1.5ms"], ["8gbit", "1500us"]),
            (["10gbit", "2s"], ["10gbit", "2s"]),
        ] {
            let words = [
                "search",
                "--bench",
                "stream",
                "--space",
                "buffers",
                "--bandwidth",
                given[0],
                "--rtt",
                given[1],
            ];
            let super::super::ExperimentCommand::Search(first) = parse(&words) else {
                panic!("not the search");
            };
            let flags = first.path.flags();
            assert_eq!(flags, ["--bandwidth", back[0], "--rtt", back[1]]);
            let mut again = vec![
                "run",
                "--configs",
                "buffers=throughput",
                "--bench",
                "stream",
            ];
            again.extend(["--out", "exp"]);
            again.extend(flags.iter().map(String::as_str));
            let super::super::ExperimentCommand::Run(run) = parse(&again) else {
                panic!("not run");
            };
            assert_eq!(run.path.path(), first.path.path(), "{given:?}");
        }
    }
}
