//! `nettune plan`: what a profile would change on a host, as a list of
//! changes (target, current value, new value, reason) and of settings left
//! alone with the reason. Pure and deterministic: the same host model and
//! options give the same plan. `apply` writes it.
//!
//! Targets: the absolute kernel path of file-backed settings
//! (`/proc/irq/74/smp_affinity_list`, `/proc/sys/net/core/rmem_max`), and
//! stable names for the rest: `ethtool:IFACE:KEY` (keys in
//! [`crate::base::driver::setting`]), `qdisc:IFACE:root` and
//! `napi:IFACE:rx-N:KEY` (a setting of the NAPI serving RX queue N). Profiles and the reason
//! for every value: docs/profiles.md.

pub mod admit;
pub mod compare;
mod cpus;
mod driver;
pub mod irqbalance;
mod kernel;
mod napi;
pub mod preflight;
mod queues;
pub mod render;
pub mod saved;
pub mod steer;
pub mod target;
pub mod values;

use serde::{Deserialize, Serialize};

use crate::host::{Host, Interface};

pub use target::Target;

/// What the host is tuned for. docs/profiles.md gives every value's reason.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Many small UDP packets (Cloudflare: receiving 1M UDP packets/s).
    Pps,
    /// Request/response latency (scaling.rst; tuned network-latency).
    Latency,
    /// Bulk TCP over long paths (fasterdata.es.net host tuning).
    Throughput,
    /// Many connections served per core (talawah.io: Linux kernel vs DPDK HTTP).
    Http,
    /// Kernel defaults: undo hand tuning done before nettune.
    Baseline,
    /// A plan made by `nettune experiment search` (or edited by hand), not
    /// by a profile: applied from its file with `apply --plan FILE`.
    #[value(skip)]
    Custom,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Pps => "pps",
            Profile::Latency => "latency",
            Profile::Throughput => "throughput",
            Profile::Http => "http",
            Profile::Baseline => "baseline",
            Profile::Custom => "custom",
        }
    }
}

/// Everything besides the host that decides a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanOptions {
    pub profile: Profile,
    /// Interfaces to tune; empty: every physical interface that is up.
    pub ifaces: Vec<String>,
    /// The CPUs network work may use; `None`: every online CPU except
    /// isolated and nohz_full ones.
    pub cpus: Option<Vec<u32>>,
    /// Path bandwidth for buffer sizes (throughput), bits per second;
    /// `None`: the fastest selected link.
    pub bandwidth_bits: Option<u64>,
    /// Path round-trip time (throughput), microseconds; `None`: 100 ms.
    pub rtt_us: Option<u64>,
    /// fq's per-flow pacing cap (throughput), bits per second.
    pub pace_bits: Option<u64>,
    /// Parallel streams sharing the path (throughput); `None`: 1.
    pub streams: Option<u32>,
}

impl PlanOptions {
    pub fn new(profile: Profile) -> PlanOptions {
        PlanOptions {
            profile,
            ifaces: Vec::new(),
            cpus: None,
            bandwidth_bits: None,
            rtt_us: None,
            pace_bits: None,
            streams: None,
        }
    }
}

/// One setting to change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The setting, typed; in JSON its text: the kernel path, or
    /// `ethtool:IFACE:KEY` / `qdisc:IFACE:root`.
    pub target: Target,
    /// The current value as text.
    pub from: String,
    /// The exact text that will be written.
    pub to: String,
    pub reason: String,
    /// The interface name, or `kernel`.
    pub group: String,
}

/// A setting the profile would change but leaves alone, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub target: Target,
    pub reason: String,
    pub group: String,
}

/// A host-wide value the profile wants that a network namespace cannot
/// set (it exists in the host's namespace only, or is a read-only mirror of
/// the host's value): it is set on the host, with [`Plan::host_command`].
/// Each is also in `skipped`, whose reason names the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostWide {
    pub target: Target,
    /// The host's value, when it can be seen from here.
    pub from: Option<String>,
    /// The value the profile wants.
    pub to: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub profile: Profile,
    /// The CPUs network work may use (after `--cpus` and the defaults).
    pub cpus: Vec<u32>,
    /// The interfaces planned for.
    pub interfaces: Vec<String>,
    pub changes: Vec<Change>,
    pub skipped: Vec<Skipped>,
    /// Set when irqbalance runs and the plan pins IRQs: it will move them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqbalance: Option<irqbalance::IrqbalanceWarning>,
    /// The host and namespace (or tree) the plan was made for, so that a
    /// saved plan is never applied elsewhere (`apply --plan FILE`). Set by
    /// whoever reads the host; `None` in a plan computed from a model alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_for: Option<saved::MadeFor>,
    /// Inside a network namespace: the host-wide values the profile wants
    /// that only the host can set.
    #[serde(default)]
    pub host_wide: Vec<HostWide>,
    /// The shell command that sets every `host_wide` value, run on the host.
    #[serde(default)]
    pub host_command: Option<String>,
}

/// The group of host-wide settings.
pub const KERNEL_GROUP: &str = "kernel";

/// Compute the changes `opts.profile` makes on `host`.
pub fn plan(host: &Host, opts: &PlanOptions) -> anyhow::Result<Plan> {
    if opts.profile == Profile::Custom {
        anyhow::bail!(
            "'custom' names plans saved in a file (by `nettune experiment search`), not a \
             profile; apply such a plan with `nettune apply --plan FILE`"
        );
    }
    if opts.streams == Some(0) {
        anyhow::bail!("--streams 0: give the number of parallel streams, 1 or more");
    }
    let cpus = cpus::network_cpus(host, opts.cpus.as_deref())?;
    let ifaces = select_interfaces(host, &opts.ifaces)?;
    let mut draft = Draft::default();
    if ifaces.is_empty() {
        let none = if host.in_netns() {
            "no interface but lo is up in this network namespace: only its sysctls are planned; name interfaces with --iface"
        } else {
            "no physical interface is up: only host-wide settings are planned; name interfaces with --iface"
        };
        draft.skip(KERNEL_GROUP, &Target::Interfaces, none);
    }
    let mut load = cpus::Load::new();
    for iface in &ifaces {
        queues::plan_queues(&mut draft, host, iface, opts, &cpus, &mut load);
        driver::plan_driver(&mut draft, iface, opts);
        napi::plan_napi(&mut draft, iface, opts);
    }
    kernel::plan_kernel(&mut draft, host, opts, &cpus, &ifaces);
    Ok(Plan {
        profile: opts.profile,
        cpus,
        interfaces: ifaces.iter().map(|i| i.name.clone()).collect(),
        irqbalance: irqbalance::warning(host, &draft.changes),
        changes: draft.changes,
        skipped: draft.skipped,
        made_for: None,
        host_command: render::host_command(&draft.host_wide),
        host_wide: draft.host_wide,
    })
}

/// The interfaces to tune: the named ones (each must exist), or by
/// default, in name order: on the host, every physical interface that is
/// up; inside a network namespace (a container's), every interface that
/// is up but `lo`, virtual ones too: there a veth is the container's NIC.
fn select_interfaces<'h>(host: &'h Host, names: &[String]) -> anyhow::Result<Vec<&'h Interface>> {
    if names.is_empty() {
        let in_netns = host.in_netns();
        let mut up: Vec<&Interface> = host
            .interfaces
            .iter()
            .filter(|i| {
                if in_netns {
                    i.name != "lo" && !i.is_down()
                } else {
                    i.physical && i.operstate.as_deref() == Some("up")
                }
            })
            .collect();
        up.sort_by(|a, b| a.name.cmp(&b.name));
        return Ok(up);
    }
    let mut chosen = Vec::new();
    for name in names {
        let Some(iface) = host.interfaces.iter().find(|i| &i.name == name) else {
            let present: Vec<&str> = host.interfaces.iter().map(|i| i.name.as_str()).collect();
            let place = match &host.source.netns {
                Some(ns) => format!(" in network namespace '{ns}'"),
                None => String::new(),
            };
            anyhow::bail!(
                "interface '{name}' does not exist{place} (present: {})",
                present.join(", ")
            );
        };
        if !chosen.iter().any(|c: &&Interface| c.name == iface.name) {
            chosen.push(iface);
        }
    }
    chosen.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(chosen)
}

/// The plan being built: changes only where the value differs in meaning.
#[derive(Debug, Default)]
struct Draft {
    changes: Vec<Change>,
    skipped: Vec<Skipped>,
    host_wide: Vec<HostWide>,
}

impl Draft {
    /// Change `target` from `from` to `to`, unless they mean the same.
    fn want(&mut self, group: &str, target: Target, from: &str, to: String, reason: String) {
        if compare::same_value(&target, from, &to) {
            return;
        }
        self.changes.push(Change {
            target,
            from: from.trim().to_string(),
            to,
            reason,
            group: group.to_string(),
        });
    }

    /// A value only the host can set: named in `host_wide`, and left alone
    /// here with the command that sets it there. `why` says why this
    /// namespace cannot.
    fn host_wide(
        &mut self,
        target: Target,
        from: Option<&str>,
        to: String,
        reason: String,
        why: &str,
    ) {
        let skip = format!(
            "host-wide: {why}; set it on the host: {}",
            render::set_command(&target, &to)
        );
        self.skip(KERNEL_GROUP, &target, &skip);
        self.host_wide.push(HostWide {
            target,
            from: from.map(|f| f.trim().to_string()),
            to,
            reason,
        });
    }

    fn skip(&mut self, group: &str, target: &Target, reason: &str) {
        self.skipped.push(Skipped {
            target: target.clone(),
            reason: reason.to_string(),
            group: group.to_string(),
        });
    }
}
