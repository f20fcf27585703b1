//! `nettune testbed up|down`: the two-namespace veth testbed
//! ([`crate::testbed`]).

use serde_json::json;

use crate::error::Status;
use crate::testbed::{self, Testbed};

#[derive(Debug, clap::Subcommand)]
pub enum TestbedCommand {
    /// Make a testbed: namespaces NAME-server and NAME-client joined by a
    /// multi-queue veth pair (tb-server 198.18.0.1/30, tb-client
    /// 198.18.0.2/30; 198.18.0.0/15 is reserved for benchmarking, RFC 2544).
    ///
    /// Examples:
    ///   nettune testbed up --name lab --queues 4
    ///   nettune testbed up --json
    #[command(verbatim_doc_comment)]
    Up(UpArgs),
    /// Remove a testbed (both namespaces and the veth pair), or every
    /// testbed left behind with --all.
    ///
    /// Examples:
    ///   nettune testbed down --name lab
    ///   nettune testbed down lab
    ///   nettune testbed down --all
    #[command(verbatim_doc_comment)]
    Down(DownArgs),
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
        TestbedCommand::Down(args) => down(&args),
    }
}

/// The online CPUs of this host, for the default queue count.
pub fn online_cpus() -> u32 {
    crate::host::possible_cpus(&crate::base::Root::live())
        .map(|c| c.len() as u32)
        .unwrap_or(1)
        .max(1)
}

fn up(args: &UpArgs) -> anyhow::Result<Status> {
    let name = args.name.clone().unwrap_or_else(Testbed::default_name);
    let tb = Testbed::named(&name)?;
    let tb = testbed::up(&tb, args.queues.unwrap_or_else(online_cpus))?;
    if args.json {
        crate::output::print(&(serde_json::to_string_pretty(&tb)? + "\n"))?;
    } else {
        crate::output::print(&describe(&tb))?;
    }
    Ok(Status::Clean)
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
        testbed::down_existing(&tb)?;
        vec![tb]
    };
    let names: Vec<&str> = removed.iter().map(|t| t.name.as_str()).collect();
    if args.json {
        crate::output::print(
            &(serde_json::to_string_pretty(&json!({ "removed": names }))? + "\n"),
        )?;
    } else if names.is_empty() {
        crate::output::print("no testbed to remove\n")?;
    } else {
        crate::output::print(&format!("removed testbed(s): {}\n", names.join(", ")))?;
    }
    Ok(Status::Clean)
}
