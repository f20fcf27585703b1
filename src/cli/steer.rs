//! `nettune steer`: hand one RX queue and one flow to a user-space reader
//! (the plan: [`crate::plan::steer`]), journaled like `apply` and undone by
//! `rollback`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::apply::{self, Applied, Backend, Purpose, Request};
use crate::base::driver::flow::FlowSpec;
use crate::error::Status;
use crate::host::{self, Selection};
use crate::plan::render::place;
use crate::plan::steer::{self, SteerPlan, SteerRequest};
use crate::plan::{Change, Target};

#[derive(Debug, clap::Args)]
pub struct SteerArgs {
    /// The interface whose queue to hand over.
    #[arg(long, value_name = "IFACE")]
    pub iface: String,
    /// The RX queue: RSS stops hashing other flows to it, the flow goes
    /// there by an ntuple rule.
    #[arg(long, value_name = "Q")]
    pub queue: u32,
    /// The flow: PROTO [src-ip ADDR] [dst-ip ADDR] [src-port N] [dst-port N],
    /// PROTO udp4, tcp4, udp6 or tcp6 (udp/tcp: IPv4), e.g. 'udp4 dst-port 53'.
    #[arg(long, value_name = "FLOW", value_parser = parse_flow)]
    pub flow: FlowSpec,
    /// Leave software GRO on (the method turns it off with LRO; GRO only
    /// matters to the kernel path of the other flows).
    #[arg(long)]
    pub keep_gro: bool,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the plan (with --dry-run) or the applied state as JSON.
    #[arg(long)]
    pub json: bool,
    /// Work on a captured tree (its driver file) instead of this host.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Work inside a named network namespace.
    #[arg(long, value_name = "NAME", conflicts_with = "root")]
    pub netns: Option<String>,
    /// Where journals go. Default: $NETTUNE_STATE_DIR, else /var/lib/nettune
    /// (DIR/var/lib/nettune with --root DIR).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

fn parse_flow(text: &str) -> Result<FlowSpec, String> {
    FlowSpec::parse(text).map_err(|e| e.to_string())
}

pub fn run(args: SteerArgs) -> anyhow::Result<Status> {
    let root_dir = match (&args.root, args.dry_run) {
        (Some(dir), false) => Some(crate::cli::apply::tree(dir, "steer")?),
        (Some(dir), true) => Some(dir.clone()),
        (None, _) => None,
    };
    if !args.dry_run {
        crate::cli::apply::require_root_for_live(root_dir.as_deref(), "steer")?;
        if root_dir.is_none() && args.netns.is_none() {
            // Started inside a namespace: its own /sys, as --netns gives.
            crate::base::netns::own_sysfs()?;
        }
    }
    let selection = Selection {
        all: true,
        iface: None,
    };
    let host = crate::gather::read_target(root_dir.as_deref(), args.netns.as_deref(), &selection)?;
    let request = SteerRequest {
        iface: args.iface.clone(),
        queue: args.queue,
        flow: args.flow.clone(),
        keep_gro: args.keep_gro,
    };
    let plan = steer::plan_steer(&host, &request)?;
    let where_ = place(
        args.root.as_deref().and_then(Path::to_str),
        args.netns.as_deref(),
    );
    if args.dry_run {
        let text = if args.json {
            serde_json::to_string_pretty(&plan)? + "\n"
        } else {
            plan_text(&plan, &where_)
        };
        crate::output::print(&text)?;
        return Ok(Status::Clean);
    }
    let state = crate::cli::apply::state_dir(args.state_dir.as_deref(), root_dir.as_deref())?;
    let _lock = state.lock()?;
    let backend = Backend::new(host::open_root(root_dir.as_deref())?);
    let applied = apply::apply(
        &state,
        &backend,
        &Request {
            changes: &plan.changes,
            purpose: Purpose::Steer(plan.record.clone()),
            root: root_dir.as_deref(),
            netns: args.netns.as_deref(),
            persist: false,
            irqbalance_running: host.irqbalance.running,
            allow_irqbalance: false,
            experiment: None,
            guard: None,
        },
    )?;
    let journal = match &applied {
        Applied::Done(j) => Some(j),
        Applied::Nothing | Applied::AllRefused(_) => None,
    };
    if args.json {
        let value = json!({
            "applied": journal.is_some(),
            "state": journal,
            "plan": plan,
        });
        crate::output::print(&(serde_json::to_string_pretty(&value)? + "\n"))?;
        return Ok(Status::Clean);
    }
    let mut out = String::new();
    match journal {
        Some(j) => {
            let _ = writeln!(
                out,
                "steered {} on {} to queue {} ({where_}): {} change(s), state {}",
                plan.record.flow,
                plan.record.iface,
                plan.record.queue,
                j.change_count(),
                j.id
            );
            out.push_str(&reader_text(&plan));
            let _ = writeln!(
                out,
                "undo with: {}",
                state.command(&format!("rollback {}", j.id))
            );
        }
        None => {
            let _ = writeln!(
                out,
                "nothing to change: {} already goes to queue {} of {} and RSS leaves that queue \
                 out ({where_})",
                plan.record.flow, plan.record.queue, plan.record.iface
            );
            out.push_str(&reader_text(&plan));
        }
    }
    crate::output::print(&out)?;
    Ok(Status::Clean)
}

/// Where to run the reader, and the command that reads the queue.
fn reader_text(plan: &SteerPlan) -> String {
    let r = &plan.record;
    let pin = match (plan.irq, r.reader_cpu) {
        (Some(irq), Some(cpu)) => {
            format!("reader: queue {}'s IRQ {irq} is delivered to CPU {cpu}; run the reader there (nothing else on that CPU, as the method asks)\n", r.queue)
        }
        _ => format!(
            "reader: queue {} has no IRQ of its own here; pin the reader to a CPU of your choice\n",
            r.queue
        ),
    };
    let port = r.flow.dst_port.unwrap_or(0);
    let addr = r.flow.dst_ip.map_or_else(
        || {
            if r.flow.ipv6 {
                "[::]".to_string()
            } else {
                "0.0.0.0".to_string()
            }
        },
        |ip| match ip {
            std::net::IpAddr::V6(a) => format!("[{a}]"),
            std::net::IpAddr::V4(a) => a.to_string(),
        },
    );
    format!(
        "{pin}  read it: nettune bench udp-sink --xdp --iface {} --queue {} --flow '{}' --bind {addr}:{port}{}\n",
        r.iface,
        r.queue,
        r.flow,
        r.reader_cpu.map(|c| format!(" --pin {c}")).unwrap_or_default()
    )
}

fn plan_text(plan: &SteerPlan, where_: &str) -> String {
    let r = &plan.record;
    let mut out = format!(
        "nettune steer: {} queue {} for {} on {where_} (driver {}, {} RX queues)\n  the single-RX-queue method: RSS leaves the queue out, an ntuple rule sends the flow there, a reader takes it (docs/bypass.md)\n",
        r.iface, r.queue, r.flow, plan.driver, plan.rings
    );
    if plan.changes.is_empty() {
        out.push_str(
            "\nnothing to change: the flow goes to the queue already and RSS leaves it out\n",
        );
    } else {
        let _ = writeln!(out, "\n{}", r.iface);
        let rows: Vec<(String, String, &Change)> = plan
            .changes
            .iter()
            .map(|c| {
                let (from, to) = match c.target {
                    Target::RssIndirection { .. } => (
                        steer::table_summary(&c.from),
                        steer::table_summary(c.to.as_str()),
                    ),
                    _ => (c.from.clone(), c.to.to_string()),
                };
                (c.target.short_name(), format!("{from} -> {to}"), c)
            })
            .collect();
        let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        for (name, diff, c) in &rows {
            let _ = writeln!(
                out,
                "  {name:<width$}  {diff}\n  {:<width$}  ({})",
                "", c.reason
            );
        }
        out.push_str("\nas ethtool commands:\n");
        for c in &plan.changes {
            let _ = writeln!(out, "  {}", crate::plan::render::command(c));
        }
    }
    out.push('\n');
    out.push_str(&reader_text(plan));
    let _ = writeln!(
        out,
        "\n{} change(s); run without --dry-run to make them (journaled; `nettune rollback` undoes them).",
        plan.changes.len()
    );
    out
}
