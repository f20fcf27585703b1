//! A site profile's values laid over the plan of the built-in profile it
//! includes: parts left alone, sysctls overridden or dropped (driver
//! settings are, per interface, in [`super::driver`]), and the
//! origin of every value (the file and line that set it, or the built-in
//! profile and the line that included it).

use super::admit::sysctl_reach;
use super::draft::Draft;
use super::driver::site_entry;
use super::profile::{Part, Setting, SiteProfile};
use super::target::{RxFile, TxFile};
use super::{Target, Value, KERNEL_GROUP};
use crate::host::Host;

/// The part of a plan `target` belongs to, if a site profile can leave it
/// alone as a whole.
fn part_of(target: &Target) -> Option<Part> {
    match target {
        Target::RxQueue {
            file: RxFile::RpsCpus,
            ..
        } => Some(Part::Rps),
        Target::RxQueue {
            file: RxFile::RpsFlowCnt,
            ..
        } => Some(Part::Rfs),
        Target::Sysctl(name) if name == "net.core.rps_sock_flow_entries" => Some(Part::Rfs),
        Target::TxQueue {
            file: TxFile::XpsCpus,
            ..
        } => Some(Part::Xps),
        Target::IrqAffinity(_) => Some(Part::Irq),
        _ => None,
    }
}

/// Whether `target` is placed by the network CPUs (`irq.cpus`).
fn placed_by_cpus(target: &Target) -> bool {
    matches!(
        target,
        Target::IrqAffinity(_)
            | Target::RxQueue {
                file: RxFile::RpsCpus,
                ..
            }
            | Target::TxQueue {
                file: TxFile::XpsCpus,
                ..
            }
    )
}

/// Lay `site` over the plan in `d`. `cpus_from_site`: the network CPUs are
/// the file's `irq.cpus` (no `--cpus` was given).
pub(super) fn overlay(d: &mut Draft, host: &Host, site: &SiteProfile, cpus_from_site: bool) {
    // Parts left alone: planned values become notes naming the line.
    for (part, at) in &site.off {
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut d.changes)
            .into_iter()
            .partition(|c| part_of(&c.target) == Some(*part));
        d.changes = kept;
        let hosts: Vec<Target> = d
            .host_wide
            .iter()
            .filter(|h| part_of(&h.target) == Some(*part))
            .map(|h| h.target.clone())
            .collect();
        for target in hosts {
            d.forget(&target);
            d.skip(
                KERNEL_GROUP,
                &target,
                &format!(
                    "left alone: {} = \"off\" ({}:{})",
                    part.key(),
                    at.file,
                    at.line
                ),
            );
        }
        for c in gone {
            d.skip(
                &c.group,
                &c.target,
                &format!(
                    "left alone: {} = \"off\" ({}:{})",
                    part.key(),
                    at.file,
                    at.line
                ),
            );
        }
    }
    for (name, (setting, at)) in &site.sysctls {
        let target = Target::sysctl(name);
        d.forget(&target);
        let place = format!("{}:{}", at.file, at.line);
        match setting {
            Setting::Off => d.skip(
                KERNEL_GROUP,
                &target,
                &format!("left alone: {} = \"off\" ({place})", at.key),
            ),
            Setting::Value(value) => {
                let reason = format!("set by site profile {}", site.name);
                let in_ns = host.in_netns();
                match (in_ns, sysctl_reach(name)) {
                    (true, Some(reach)) => {
                        let ns = match &host.source.netns {
                            Some(n) => format!("network namespace '{n}'"),
                            None => "this network namespace".to_string(),
                        };
                        d.host_wide(
                            target,
                            host.sysctl_or_host(name),
                            Value::sysctl(value),
                            reason,
                            &reach.why(&ns),
                        );
                    }
                    _ => match host.sysctls.get(name) {
                        Some(from) => {
                            let from = from.clone();
                            d.want(KERNEL_GROUP, target, &from, Value::sysctl(value), reason);
                        }
                        None => d.skip(
                            KERNEL_GROUP,
                            &target,
                            &format!("this kernel has no {name} ({place} sets it)"),
                        ),
                    },
                }
            }
        }
    }
    // Every value says where it comes from.
    let cpus_at = site.irq_cpus.as_ref().map(|(_, at)| at);
    let included = format!(
        "built-in profile {} (included at {}:{})",
        site.base.name(),
        site.include.file,
        site.include.line
    );
    for c in &mut d.changes {
        if c.origin.is_some() {
            continue;
        }
        let by_file = match &c.target {
            Target::Driver { key, .. } => match site_entry(site, key) {
                Some((Setting::Value(_), at)) => Some(at),
                _ => None,
            },
            target => site
                .sysctls
                .get(target.sysctl_name().unwrap_or(""))
                .map(|(_, at)| at),
        };
        c.origin = Some(match (by_file, cpus_at) {
            (Some(at), _) => at.to_string(),
            (None, Some(at)) if cpus_from_site && placed_by_cpus(&c.target) => {
                format!("{at}; placed as built-in profile {} does", site.base.name())
            }
            _ => included.clone(),
        });
    }
}
