//! `nettune plan`: what a profile would change on a host, as a list of
//! changes (target, current value, new value, reason) and of settings left
//! alone with the reason. Pure and deterministic: the same host model and
//! options give the same plan. `apply` writes it.
//!
//! Targets: the absolute kernel path of file-backed settings
//! (`/proc/irq/74/smp_affinity_list`, `/proc/sys/net/core/rmem_max`), and
//! stable names for the rest: `ethtool:IFACE:KEY` (keys in
//! [`crate::base::driver::setting`]), `qdisc:IFACE:root` and
//! `napi:IFACE:rx-N:KEY` (a setting of the NAPI serving RX queue N). A
//! change's value is typed by its target's kind ([`Value`]) where it is
//! made, and written as typed. Profiles and the reason for every value:
//! docs/profiles.md.

pub mod admit;
pub mod change;
pub mod compare;
mod cpus;
mod draft;
pub mod drift;
mod driver;
pub mod irqbalance;
mod kernel;
pub mod made_for;
mod napi;
mod overlay;
pub mod preflight;
pub mod profile;
mod queues;
pub mod render;
pub mod saved;
pub mod site;
pub mod steer;
pub mod target;
pub mod value;
pub mod values;

use crate::host::{Host, Interface};

pub use change::{Change, HostWide, Plan, SiteRef, Skipped, KERNEL_GROUP};
pub use drift::Drift;
pub use napi::{napi_values, no_napi_set};
pub use profile::{PlanOptions, Profile};
pub use target::Target;
pub use value::{Typed, Value};

use draft::Draft;

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
    let site = opts.site.as_ref();
    let site_cpus = site.and_then(|s| s.irq_cpus.as_ref());
    let cpus = match (&opts.cpus, site_cpus) {
        (None, Some((list, at))) => {
            let offline: Vec<u32> = list
                .iter()
                .copied()
                .filter(|c| !host.online_cpus.contains(c))
                .collect();
            if !offline.is_empty() {
                anyhow::bail!(
                    "{}:{}: {}: CPU {} not online on this host (online: {}); name online CPUs only",
                    at.file,
                    at.line,
                    at.key,
                    crate::base::cpuset::format_list(&offline),
                    crate::base::cpuset::format_list(&host.online_cpus)
                );
            }
            cpus::network_cpus(host, Some(list))?
        }
        _ => cpus::network_cpus(host, opts.cpus.as_deref())?,
    };
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
        napi::plan_napi(&mut draft, host, iface, opts);
        if let Some(site) = site {
            driver::site_values(&mut draft, iface, site);
        }
    }
    kernel::plan_kernel(&mut draft, host, opts, &cpus, &ifaces);
    if let Some(site) = site {
        overlay::overlay(&mut draft, host, site, opts.cpus.is_none());
    }
    Ok(Plan {
        profile: opts.profile,
        site: site.map(|s| SiteRef {
            name: s.name.clone(),
            file: s.file.clone(),
            includes: s.chain[1..].to_vec(),
        }),
        cpus,
        interfaces: ifaces.iter().map(|i| i.name.clone()).collect(),
        irqbalance: irqbalance::warning(host, &irqs(&draft.changes)),
        changes: draft.changes,
        skipped: draft.skipped,
        made_for: None,
        host_command: render::host_command(&draft.host_wide),
        host_wide: draft.host_wide,
    })
}

/// The socket buffers alone, as the throughput profile sizes them for
/// `opts`' path (`--bandwidth`, `--rtt`, `--streams`): the autotuning
/// maxima (net.ipv4.tcp_rmem, tcp_wmem) and the socket caps
/// (net.core.rmem_max, wmem_max). Inside a network namespace the caps are
/// the host's (named in `host_wide`) and the maxima are held to them, as in
/// the whole profile's plan. `experiment search` tries it as a dimension.
pub fn throughput_buffers(host: &Host, opts: &PlanOptions) -> anyhow::Result<Plan> {
    let ifaces = select_interfaces(host, &opts.ifaces)?;
    let mut draft = Draft::default();
    kernel::buffers(&mut draft, host, opts, &ifaces);
    Ok(Plan {
        profile: Profile::Throughput,
        site: None,
        cpus: host.online_cpus.clone(),
        interfaces: ifaces.iter().map(|i| i.name.clone()).collect(),
        irqbalance: None,
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

/// The IRQs whose affinity `changes` set.
fn irqs(changes: &[Change]) -> Vec<u32> {
    changes.iter().filter_map(|c| c.target.irq()).collect()
}
