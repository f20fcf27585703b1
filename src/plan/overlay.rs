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
    // Parts left alone: planned values become notes naming the line, and
    // so do the notes of what the profile could not plan there (RFS without
    // the host's flow table): their advice asks for what the file declines.
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
        let mut left: Vec<(String, Target)> = Vec::new();
        for target in hosts {
            d.forget(&target);
            left.push((KERNEL_GROUP.to_string(), target));
        }
        left.extend(gone.into_iter().map(|c| (c.group, c.target)));
        let (unplanned, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut d.skipped)
            .into_iter()
            .partition(|s| part_of(&s.target) == Some(*part));
        d.skipped = kept;
        left.extend(unplanned.into_iter().map(|s| (s.group, s.target)));
        let reason = format!(
            "left alone: {} = \"off\" ({}:{})",
            part.key(),
            at.file,
            at.line
        );
        let mut noted: Vec<Target> = Vec::new();
        for (group, target) in left {
            if !noted.contains(&target) {
                d.skip(&group, &target, &reason);
                noted.push(target);
            }
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
                let reason = format!("set by site profile {}", site.set_by(at));
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::profile::{Origin, PlanOptions, Profile};
    use super::*;

    const FILE: &str = "/etc/nettune/profiles/edge.toml";

    fn at(line: usize, key: &str) -> Origin {
        Origin {
            file: FILE.to_string(),
            line,
            key: key.to_string(),
        }
    }

    /// `include = "pps"` and `rfs = "off"`.
    fn rfs_off() -> SiteProfile {
        SiteProfile {
            name: "edge".to_string(),
            file: FILE.to_string(),
            base: Profile::Pps,
            chain: vec!["edge".to_string(), "pps".to_string()],
            include: at(1, "include"),
            description: None,
            off: BTreeMap::from([(Part::Rfs, at(2, "rfs"))]),
            irq_cpus: None,
            sysctls: BTreeMap::new(),
            driver: BTreeMap::new(),
        }
    }

    /// The RFS notes of a plan: (target, reason).
    fn rfs_notes(plan: &super::super::Plan) -> Vec<(String, String)> {
        plan.skipped
            .iter()
            .filter(|s| part_of(&s.target) == Some(Part::Rfs))
            .map(|s| (s.target.to_string(), s.reason.clone()))
            .collect()
    }

    /// Inside a network namespace whose host has no socket flow table, pps
    /// cannot plan RFS and says how to get it; a site profile with `rfs =
    /// "off"` leaves RFS alone, and the plan says that instead, once per
    /// value, with no advice to raise the table.
    #[test]
    fn rfs_off_says_the_flow_counts_are_left_alone_in_a_namespace() {
        let mut host = crate::gather::fixture_host("vm-2cpu-virtio");
        host.source.netns = Some("blue".to_string());
        let mut opts = PlanOptions::new(Profile::Pps);
        let plain = super::super::plan(&host, &opts).expect("pps");
        let needs = rfs_notes(&plain);
        assert!(
            needs
                .iter()
                .any(|(t, r)| t.ends_with("rps_flow_cnt") && r.starts_with("RFS needs")),
            "{needs:?}"
        );
        opts.site = Some(Box::new(rfs_off()));
        let site = super::super::plan(&host, &opts).expect("edge");
        let notes = rfs_notes(&site);
        let left = format!("left alone: rfs = \"off\" ({FILE}:2)");
        assert!(
            notes.iter().any(|(t, _)| t.ends_with("rx-0/rps_flow_cnt")),
            "{notes:?}"
        );
        for (target, reason) in &notes {
            assert_eq!(reason, &left, "{target}");
        }
        let mut targets: Vec<&String> = notes.iter().map(|(t, _)| t).collect();
        targets.sort();
        targets.dedup();
        assert_eq!(targets.len(), notes.len(), "{notes:?}");
        assert!(site
            .changes
            .iter()
            .all(|c| part_of(&c.target) != Some(Part::Rfs)));
    }
}
