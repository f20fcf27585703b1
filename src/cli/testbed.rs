//! `nettune testbed up|down`: the two-namespace veth testbed
//! ([`crate::testbed`]).

use serde_json::json;

use crate::error::Status;
use crate::testbed::host_values::Restored;
use crate::testbed::{self, delay_line, scenario, Testbed};

#[derive(Debug, clap::Subcommand)]
pub enum TestbedCommand {
    /// Make a testbed: namespaces NAME-server and NAME-client joined by a
    /// multi-queue veth pair (tb-server 198.18.0.1/30, tb-client
    /// 198.18.0.2/30; 198.18.0.0/15 is reserved for benchmarking, RFC 2544).
    ///
    /// With --scenario, the testbed has one of the receive problems the
    /// tuning profiles fix (`nettune testbed scenarios` lists them), and
    /// the commands that show, judge and fix it are printed.
    ///
    /// Examples:
    ///   nettune testbed up --name lab --queues 4
    ///   nettune testbed up --json
    ///   nettune testbed up --name lab --scenario softirq-on-app-cpu
    #[command(verbatim_doc_comment)]
    Up(UpArgs),
    /// List the scenarios `testbed up --scenario NAME` builds, one line
    /// each.
    Scenarios,
    /// Remove a testbed (both namespaces and the veth pair), or every
    /// testbed left behind with --all.
    ///
    /// Examples:
    ///   nettune testbed down --name lab
    ///   nettune testbed down lab
    ///   nettune testbed down --all
    #[command(verbatim_doc_comment)]
    Down(DownArgs),
    /// The forwarder of a scenario's delay line, which `testbed up` starts
    /// and `testbed down` stops.
    #[command(hide = true)]
    DelayLine(DelayLineArgs),
}

#[derive(Debug, clap::Args)]
pub struct DelayLineArgs {
    /// The testbed whose sides it joins.
    #[arg(long, value_name = "NAME")]
    pub name: String,
    /// The round-trip time it adds (half each way).
    #[arg(long, value_name = "TIME")]
    pub rtt: String,
    /// Its rate, each way.
    #[arg(long, value_name = "RATE")]
    pub rate: String,
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// The testbed's name; `ntb-` is put in front when missing. Default:
    /// ntb-PID.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// RX and TX queues of each veth end. Default: the number of online
    /// CPUs.
    #[arg(long, value_name = "N")]
    pub queues: Option<u32>,
    /// Build one of the problems the profiles fix (its queue count
    /// replaces --queues); `help` lists them.
    #[arg(long, value_name = "NAME", conflicts_with = "queues")]
    pub scenario: Option<String>,
    /// Print the namespaces, interfaces and addresses as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct DownArgs {
    /// The testbed to remove (as `testbed up` named it).
    #[arg(
        value_name = "NAME",
        required_unless_present_any = ["all", "name_flag"],
        conflicts_with_all = ["all", "name_flag"]
    )]
    pub name: Option<String>,
    /// The same, as `testbed up --name NAME` takes it.
    #[arg(long = "name", value_name = "NAME", conflicts_with = "all")]
    pub name_flag: Option<String>,
    /// Remove every testbed (every namespace named ntb-*-server or
    /// ntb-*-client), e.g. after an experiment was killed.
    #[arg(long)]
    pub all: bool,
    /// Print what was removed as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: TestbedCommand) -> anyhow::Result<Status> {
    match cmd {
        TestbedCommand::Up(args) => up(&args),
        TestbedCommand::Scenarios => {
            crate::output::print(&scenario::list())?;
            Ok(Status::Clean)
        }
        TestbedCommand::Down(args) => down(&args),
        TestbedCommand::DelayLine(args) => run_delay_line(&args),
    }
}

/// Run a delay line's forwarder until `testbed down` (SIGTERM) or until
/// its testbed's namespaces are gone.
fn run_delay_line(args: &DelayLineArgs) -> anyhow::Result<Status> {
    use crate::base::units::{parse_rate_within, parse_time_within};
    use std::time::Duration;
    let tb = Testbed::named(&args.name)?;
    let rtt = parse_time_within(
        &args.rtt,
        Duration::from_micros(100),
        Duration::from_secs(10),
    )
    .map_err(|e| anyhow::anyhow!("--rtt {e}"))?;
    let rate = parse_rate_within(&args.rate, 1_000_000, 100_000_000_000)
        .map_err(|e| anyhow::anyhow!("--rate {e}"))?;
    let line = delay_line::Line {
        rtt_us: rtt.as_micros() as u64,
        rate_bps: rate,
    };
    let stop = crate::cli::signals::stop_on_signals()?;
    let report = delay_line::serve(&tb.sides(), line, &stop, || {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready")
            .and_then(|()| out.flush())
            .map_err(|e| anyhow::anyhow!("cannot tell `testbed up` the delay line is ready: {e}"))
    })?;
    eprintln!(
        "nettune: delay line of {} ended: {} packets to the server ({} dropped), {} to the client \
         ({} dropped)",
        tb.name,
        report.to_server.forwarded,
        report.to_server.dropped,
        report.to_client.forwarded,
        report.to_client.dropped
    );
    Ok(Status::Clean)
}

/// The online CPUs of this host, for the default queue count.
pub fn online_cpus() -> u32 {
    crate::host::possible_cpus(&crate::base::Root::live())
        .map(|c| c.len() as u32)
        .unwrap_or(1)
        .max(1)
}

fn up(args: &UpArgs) -> anyhow::Result<Status> {
    let chosen = match args.scenario.as_deref() {
        Some("help") => {
            crate::output::print(&scenario::list())?;
            return Ok(Status::Clean);
        }
        Some(name) => Some(scenario::find(name)?),
        None => None,
    };
    let name = args.name.clone().unwrap_or_else(Testbed::default_name);
    let tb = Testbed::named(&name)?;
    let tb = testbed::up_with(&tb, args.queues.unwrap_or_else(online_cpus), chosen)?;
    if args.json {
        let mut doc = serde_json::to_value(&tb)?;
        if let (Some(s), Some(map)) = (chosen, doc.as_object_mut()) {
            map.insert(
                "commands".into(),
                serde_json::to_value(scenario::commands(s, tb.at()))?,
            );
            map.insert("finding".into(), json!(s.finding));
            map.insert("profile".into(), json!(s.profile));
        }
        crate::output::print(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
    } else {
        let mut text = describe(&tb);
        if let Some(s) = chosen {
            text.push_str(&describe_scenario(s, &tb));
        }
        crate::output::print(&text)?;
    }
    Ok(Status::Clean)
}

/// What a scenario built, and the commands that show, judge and fix it.
fn describe_scenario(s: &scenario::Scenario, tb: &Testbed) -> String {
    let c = scenario::commands(s, tb.at());
    let host = if tb.host_values.is_empty() {
        String::new()
    } else {
        let values: Vec<String> = tb
            .host_values
            .iter()
            .map(|v| format!("{} {} -> {}", v.sysctl, v.before, v.set))
            .collect();
        format!(
            "  host-wide (put back by `nettune testbed down {}`): {}\n",
            tb.name,
            values.join(", ")
        )
    };
    let line = tb
        .delay_line
        .as_ref()
        .map(|d| {
            format!(
                "  delay line: {} and {} (PID {}), {} round trip, {} each way; `nettune testbed \
                 down {}` stops it\n",
                d.server_tun,
                d.client_tun,
                d.pid,
                crate::base::units::format_time(d.line.rtt_us as f64 / 1e6),
                crate::base::units::format_rate(d.line.rate_bps),
                tb.name
            )
        })
        .unwrap_or_default();
    format!(
        "scenario {name}: {summary}\n{problem}\n  (after {source})\n{host}{line}show it (the server \
         first, then the client, in two shells):\n  {server}\n  {client}\njudge it (doctor names \
         {finding}):\n  {doctor}\nfix it, then run both again:\n  {fix}\n",
        name = s.name,
        summary = s.summary,
        problem = indented(s.problem),
        source = s.source,
        server = c.server,
        client = c.client,
        finding = s.finding,
        doctor = c.doctor,
        fix = c.fix,
    )
}

/// `text` in lines of at most 78 columns, each indented by two spaces.
fn indented(text: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + word.len() <= 78 => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(format!("  {word}")),
        }
    }
    lines.join("\n")
}

/// One line per host-wide value that someone changed after the scenario
/// set it, and which `down` therefore left alone.
fn left_alone(restored: &[Restored]) -> String {
    restored
        .iter()
        .filter(|r| !r.restored)
        .map(|r| {
            format!(
                "left {} at '{}': it was changed after the scenario set it\n",
                r.sysctl, r.value
            )
        })
        .collect()
}

/// The testbed for people, with the commands that use it.
pub fn describe(tb: &Testbed) -> String {
    let queues = tb
        .queues
        .map(|q| format!(", {q} RX/TX queues per end"))
        .unwrap_or_default();
    format!(
        "testbed {name} is up{queues}\n  server: network namespace {sns}, interface {sif} {sa}/{p}\n  \
         client: network namespace {cns}, interface {cif} {ca}/{p}\nuse it:\n  nettune experiment run \
         --testbed {name} --configs current,pps --bench 'udp-flood --flows 16'\n  nettune bench \
         udp-sink --netns {sns} --bind {sa}:9000\n  nettune bench udp-flood --netns {cns} --to \
         {sa}:9000\nremove it: nettune testbed down --name {name}\n",
        name = tb.name,
        sns = tb.server.netns,
        sif = tb.server.iface,
        sa = tb.server.address,
        cns = tb.client.netns,
        cif = tb.client.iface,
        ca = tb.client.address,
        p = tb.server.prefix_len,
    )
}

fn down(args: &DownArgs) -> anyhow::Result<Status> {
    let removed = if args.all {
        testbed::down_all()?
    } else {
        let name = args.name.as_deref().or(args.name_flag.as_deref());
        let tb = Testbed::named(name.unwrap_or_default())?;
        let restored = testbed::down_existing(&tb)?;
        vec![(tb, restored)]
    };
    let names: Vec<&str> = removed.iter().map(|(t, _)| t.name.as_str()).collect();
    let restored: Vec<Restored> = removed.iter().flat_map(|(_, r)| r.clone()).collect();
    if args.json {
        crate::output::print(
            &(serde_json::to_string_pretty(&json!({ "removed": names, "host_values": restored }))?
                + "\n"),
        )?;
    } else if names.is_empty() {
        crate::output::print("no testbed to remove\n")?;
    } else {
        crate::output::print(&format!("removed testbed(s): {}\n", names.join(", ")))?;
        for r in restored.iter().filter(|r| r.restored) {
            crate::output::print(&format!("put back {} = {}\n", r.sysctl, r.value))?;
        }
        crate::output::print(&left_alone(&restored))?;
    }
    Ok(Status::Clean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::bench::BenchCommand;
    use crate::cli::{Cli, Command};
    use clap::Parser as _;

    /// Every command a scenario prints is one nettune accepts as printed,
    /// and a UDP flood's options (its flows, its GSO) pass the flood's own
    /// checks: a user pastes them.
    #[test]
    fn every_scenario_prints_commands_nettune_accepts() {
        let at = scenario::Where {
            server_netns: "ntb-x-server",
            server_address: std::net::Ipv4Addr::new(198, 18, 0, 1),
            client_netns: "ntb-x-client",
            server_iface: "tb-server",
            client_iface: "tb-client",
        };
        for s in scenario::ALL {
            let c = scenario::commands(s, at);
            for line in [&c.server, &c.client, &c.doctor, &c.fix] {
                let cli = Cli::try_parse_from(line.split_whitespace())
                    .unwrap_or_else(|e| panic!("{}: '{line}': {e}", s.name));
                if let Command::Bench(BenchCommand::UdpFlood(flood)) = cli.command {
                    flood
                        .config()
                        .validate()
                        .unwrap_or_else(|e| panic!("{}: '{line}': {e:#}", s.name));
                }
            }
        }
    }
}
