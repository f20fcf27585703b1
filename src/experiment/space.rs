//! The candidates an `experiment search` measures: the dimensions a target
//! can change (RPS, RFS, XPS, IRQ layouts, coalescing), the plans they
//! make, and settings given by name (`rps=all+rfs=on`). The tuner applies
//! them; the search ranks them.

use serde::{Deserialize, Serialize};

use crate::base::cpuset::{format_list, format_mask};
use crate::base::driver::DriverSetting;
use crate::base::Probe;
use crate::host::{Host, Interface};
use crate::plan::compare::same_value;
use crate::plan::target::{RxFile, TxFile};
use crate::plan::{Change, Plan, Target, Value, KERNEL_GROUP};

/// What the search may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dimension {
    Rps,
    Rfs,
    Xps,
    Irq,
    Coalesce,
}

impl Dimension {
    pub const ALL: [Dimension; 5] = [
        Dimension::Rps,
        Dimension::Rfs,
        Dimension::Xps,
        Dimension::Irq,
        Dimension::Coalesce,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dimension::Rps => "rps",
            Dimension::Rfs => "rfs",
            Dimension::Xps => "xps",
            Dimension::Irq => "irq",
            Dimension::Coalesce => "coalesce",
        }
    }

    pub fn parse(text: &str) -> anyhow::Result<Dimension> {
        Dimension::ALL
            .into_iter()
            .find(|d| d.name() == text.trim())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--space: unknown dimension '{text}'; give rps, rfs, xps, irq, coalesce"
                )
            })
    }
}

/// A candidate configuration: a plan of the host as found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// `rps=app(1) xps=off`; `current` for the host as found.
    pub name: String,
    pub plan: Plan,
}

/// What a search may do, and what it knows of the benchmark.
pub struct Space {
    pub dimensions: Vec<Dimension>,
    pub ifaces: Vec<String>,
    /// The receiving application's CPUs (the pinned server side).
    pub app_cpus: Vec<u32>,
    /// May change host-wide values (rps_sock_flow_entries).
    pub allow_host: bool,
    /// Tuning a network namespace, not the host.
    pub in_namespace: bool,
    /// The host's net.core.rps_sock_flow_entries when tuning a namespace
    /// (where it cannot be seen), read from the host's namespace; `None`
    /// when it could not be read.
    pub host_rfs_table: Option<String>,
    /// At most this many candidates (besides the baseline).
    pub max_candidates: usize,
}

/// The sysctls that exist only in the host's network namespace: a
/// namespace's plan changes them from the host's namespace (journaled as
/// the host's), never from inside.
pub const HOST_ONLY_SYSCTLS: &[&str] = &["net.core.rps_sock_flow_entries"];

/// Whether `target` is a host-wide value a namespace cannot change.
pub fn host_only(target: &Target) -> bool {
    target
        .sysctl_name()
        .is_some_and(|n| HOST_ONLY_SYSCTLS.contains(&n))
}

/// One choice in one dimension: its label and the changes it makes.
struct Choice {
    label: String,
    changes: Vec<Change>,
}

fn change(group: &str, target: Target, from: &str, to: Value, reason: &str) -> Option<Change> {
    (!same_value(&target, from, to.as_str())).then(|| Change {
        target,
        from: from.trim().to_string(),
        to,
        reason: format!("experiment search: {reason}"),
        group: group.to_string(),
        origin: None,
    })
}

fn keep() -> Choice {
    Choice {
        label: String::new(),
        changes: Vec::new(),
    }
}

/// RPS masks to try on every RX queue of `iface`.
fn rps_choices(host: &Host, iface: &Interface, app: &[u32]) -> Vec<(String, Vec<u32>)> {
    let all = host.online_cpus.clone();
    let mut out = vec![
        ("off".to_string(), Vec::new()),
        ("all".to_string(), all.clone()),
    ];
    if let (Some(local), true) = (&iface.local_cpus, host.numa_nodes.len() > 1) {
        out.push((format!("node({})", format_list(local)), local.clone()));
    }
    if !app.is_empty() {
        out.push((format!("app({})", format_list(app)), app.to_vec()));
        let others: Vec<u32> = all.iter().copied().filter(|c| !app.contains(c)).collect();
        if !others.is_empty() {
            out.push((format!("not-app({})", format_list(&others)), others));
        }
    }
    out
}

fn dimension_choices(
    d: Dimension,
    host: &Host,
    ifaces: &[&Interface],
    space: &Space,
    notes: &mut Vec<String>,
) -> Vec<Choice> {
    let mut choices = vec![keep()];
    choices.extend(match d {
        Dimension::Rps => rps_dimension(host, ifaces, space),
        Dimension::Rfs => rfs_dimension(host, ifaces, space, notes),
        Dimension::Xps => xps_dimension(host, ifaces),
        Dimension::Irq => irq_dimension(host, ifaces, space, notes),
        Dimension::Coalesce => coalesce_dimension(ifaces, notes),
    });
    choices
}

/// RPS: each of rps_choices' CPU sets on every RX queue.
fn rps_dimension(host: &Host, ifaces: &[&Interface], space: &Space) -> Vec<Choice> {
    let mut choices = Vec::new();
    let Some(first) = ifaces.first() else {
        return Vec::new();
    };
    for (label, cpus) in rps_choices(host, first, &space.app_cpus) {
        let mut changes = Vec::new();
        for iface in ifaces {
            for q in &iface.rx_queues {
                if let Some(current) = &q.rps_cpus {
                    changes.extend(change(
                        &iface.name,
                        Target::rx(&iface.name, q.index, RxFile::RpsCpus),
                        &format_mask(current),
                        Value::cpu_mask(&cpus),
                        &format!("RPS {label}"),
                    ));
                }
            }
        }
        choices.push(Choice {
            label: format!("rps={label}"),
            changes,
        });
    }
    choices
}

/// RFS on (the flow table, host-wide when it is 0 and allowed, and a
/// share of it per RX queue) and off; none when the host-wide table cannot
/// be read, or is 0 and may not be changed.
fn rfs_dimension(
    host: &Host,
    ifaces: &[&Interface],
    space: &Space,
    notes: &mut Vec<String>,
) -> Vec<Choice> {
    let mut choices = Vec::new();
    let table = if space.in_namespace {
        space.host_rfs_table.clone()
    } else {
        host.sysctls.get("net.core.rps_sock_flow_entries").cloned()
    };
    let host_table = match table {
        None => {
            notes.push(
                "rfs: skipped: net.core.rps_sock_flow_entries (the host-wide RFS table) \
                     cannot be read"
                    .to_string(),
            );
            return Vec::new();
        }
        // The table is on already: RFS is per queue from here.
        Some(v) if v.trim() != "0" => None,
        Some(v) if space.allow_host => Some(v.trim().to_string()),
        Some(_) => {
            notes.push(
                "rfs: skipped: RFS needs the host-wide net.core.rps_sock_flow_entries (0 \
                     now); give --allow-host to try it (journaled and restored like every \
                     change)"
                    .to_string(),
            );
            return Vec::new();
        }
    };
    let mut changes = Vec::new();
    if let Some(current) = host_table {
        changes.extend(change(
            KERNEL_GROUP,
            Target::sysctl("net.core.rps_sock_flow_entries"),
            &current,
            Value::number(crate::plan::values::RFS_ENTRIES),
            "RFS flow table",
        ));
    }
    for iface in ifaces {
        let n = iface.rx_queues.len().max(1) as u64;
        let per = (crate::plan::values::RFS_ENTRIES / n)
            .max(1)
            .next_power_of_two();
        for q in &iface.rx_queues {
            if let Some(current) = q.rps_flow_cnt {
                changes.extend(change(
                    &iface.name,
                    Target::rx(&iface.name, q.index, RxFile::RpsFlowCnt),
                    &current.to_string(),
                    Value::number(per),
                    "RFS on",
                ));
            }
        }
    }
    choices.push(Choice {
        label: "rfs=on".to_string(),
        changes,
    });
    let mut off = Vec::new();
    for iface in ifaces {
        for q in &iface.rx_queues {
            if let Some(current) = q.rps_flow_cnt {
                off.extend(change(
                    &iface.name,
                    Target::rx(&iface.name, q.index, RxFile::RpsFlowCnt),
                    &current.to_string(),
                    Value::number(0),
                    "RFS off",
                ));
            }
        }
    }
    choices.push(Choice {
        label: "rfs=off".to_string(),
        changes: off,
    });
    choices
}

/// XPS: one CPU per TX queue, or off.
fn xps_dimension(host: &Host, ifaces: &[&Interface]) -> Vec<Choice> {
    let mut choices = Vec::new();
    let cpus = &host.online_cpus;
    let (mut per_queue, mut off) = (Vec::new(), Vec::new());
    for iface in ifaces {
        for q in &iface.tx_queues {
            let Some(current) = &q.xps_cpus else { continue };
            let target = || Target::tx(&iface.name, q.index, TxFile::XpsCpus);
            let cpu = cpus.get(q.index as usize % cpus.len().max(1)).copied();
            per_queue.extend(change(
                &iface.name,
                target(),
                &format_mask(current),
                Value::cpu_mask(&cpu.into_iter().collect::<Vec<_>>()),
                "XPS: one CPU per TX queue",
            ));
            off.extend(change(
                &iface.name,
                target(),
                &format_mask(current),
                Value::cpu_mask(&[]),
                "XPS off",
            ));
        }
    }
    choices.push(Choice {
        label: "xps=per-queue".to_string(),
        changes: per_queue,
    });
    choices.push(Choice {
        label: "xps=off".to_string(),
        changes: off,
    });
    choices
}

/// Queue IRQ layouts: spread over all CPUs, onto the application's CPUs,
/// or away from them; none on interfaces without queue IRQs.
fn irq_dimension(
    host: &Host,
    ifaces: &[&Interface],
    space: &Space,
    notes: &mut Vec<String>,
) -> Vec<Choice> {
    let mut choices = Vec::new();
    let vectors: Vec<(&Interface, u32, Option<u32>, Vec<u32>)> = ifaces
        .iter()
        .flat_map(|i| {
            i.irq_vectors
                .iter()
                .filter(|v| v.queue.is_some())
                .map(move |v| (*i, v.irq, v.queue, v.affinity.clone().unwrap_or_default()))
        })
        .collect();
    if vectors.is_empty() {
        notes.push(format!(
            "irq: skipped: {} ha{} no queue IRQs (a virtual interface)",
            names(ifaces),
            if ifaces.len() == 1 { "s" } else { "ve" }
        ));
        return Vec::new();
    }
    let all = &host.online_cpus;
    let others: Vec<u32> = all
        .iter()
        .copied()
        .filter(|c| !space.app_cpus.contains(c))
        .collect();
    // Queue i's IRQs on the i-th CPU of the pool, wrapping.
    let mut layouts: Vec<(String, Vec<u32>)> = vec![("irq=spread".to_string(), all.clone())];
    if !space.app_cpus.is_empty() {
        let app = space.app_cpus.clone();
        layouts.push((format!("irq=app({})", format_list(&app)), app));
        if !others.is_empty() {
            layouts.push((format!("irq=not-app({})", format_list(&others)), others));
        }
    }
    for (label, pool) in layouts {
        let cpu_of = |q: u32| -> Vec<u32> {
            pool.get(q as usize % pool.len().max(1))
                .copied()
                .into_iter()
                .collect()
        };
        let changes = vectors
            .iter()
            .filter_map(|(iface, irq, queue, current)| {
                change(
                    &iface.name,
                    Target::IrqAffinity(*irq),
                    &format_list(current),
                    Value::cpu_list(&cpu_of(queue.unwrap_or(0))),
                    &label,
                )
            })
            .collect();
        choices.push(Choice { label, changes });
    }
    choices
}

/// Interrupt coalescing: 0 us, 50 us, adaptive; none when no driver can
/// change it.
fn coalesce_dimension(ifaces: &[&Interface], notes: &mut Vec<String>) -> Vec<Choice> {
    let mut choices = Vec::new();
    let supported: Vec<&&Interface> = ifaces
        .iter()
        .filter(|i| matches!(i.driver_settings.coalesce, Probe::Value(_)))
        .collect();
    if supported.is_empty() {
        notes.push(format!(
            "coalesce: skipped: the driver of {} cannot change interrupt coalescing",
            names(ifaces)
        ));
        return Vec::new();
    }
    for (label, settings) in [
        (
            "coalesce=0us",
            vec![DriverSetting::AdaptiveRx(false), DriverSetting::RxUsecs(0)],
        ),
        (
            "coalesce=50us",
            vec![DriverSetting::AdaptiveRx(false), DriverSetting::RxUsecs(50)],
        ),
        ("coalesce=adaptive", vec![DriverSetting::AdaptiveRx(true)]),
    ] {
        let mut changes = Vec::new();
        for iface in &supported {
            for s in &settings {
                let Probe::Value(current) =
                    crate::base::driver::setting::current_text(&s.key(), &iface.driver_settings)
                else {
                    continue;
                };
                changes.extend(change(
                    &iface.name,
                    Target::driver(&iface.name, s.key()),
                    &current,
                    Value::driver(s.clone()),
                    label,
                ));
            }
        }
        choices.push(Choice {
            label: label.to_string(),
            changes,
        });
    }
    choices
}

fn names(ifaces: &[&Interface]) -> String {
    ifaces
        .iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The candidates of `space` on `host`, the baseline (`current`) first,
/// and notes on what was skipped and why.
pub fn candidates(host: &Host, space: &Space) -> anyhow::Result<(Vec<Candidate>, Vec<String>)> {
    let ifaces = interfaces(host, space)?;
    let mut notes = Vec::new();
    let mut combos: Vec<Choice> = vec![keep()];
    for d in &space.dimensions {
        let choices = dimension_choices(*d, host, &ifaces, space, &mut notes);
        let mut next = Vec::new();
        for base in &combos {
            for c in &choices {
                let label = [base.label.as_str(), c.label.as_str()]
                    .iter()
                    .filter(|l| !l.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ");
                let mut changes = base.changes.clone();
                changes.extend(c.changes.iter().cloned());
                next.push(Choice { label, changes });
            }
        }
        combos = next;
    }
    // Choices that change nothing here (RPS already off) collapse into the
    // same plan: keep the first of each.
    let mut seen: Vec<Vec<(String, String)>> = Vec::new();
    let mut out = Vec::new();
    for c in combos {
        let mut key: Vec<(String, String)> = c
            .changes
            .iter()
            .map(|ch| (ch.target.to_string(), ch.to.to_string()))
            .collect();
        key.sort();
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let name = if c.changes.is_empty() {
            "current".to_string()
        } else {
            c.label
        };
        out.push(Candidate {
            name,
            plan: Plan::custom(host.online_cpus.clone(), space.ifaces.clone(), c.changes),
        });
    }
    let limit = space.max_candidates + 1;
    if out.len() > limit {
        notes.push(format!(
            "{} candidates; measuring the first {} (raise --max-candidates, or narrow --space)",
            out.len() - 1,
            space.max_candidates
        ));
        out.truncate(limit);
    }
    Ok((out, notes))
}

/// A config named by settings, as the search labels them: `rps=all`,
/// `rps=app+rfs=on`, `xps=off+irq=spread` (`+` between settings; a value
/// with its CPUs in brackets, as the search prints it, is accepted too).
pub fn parse_settings(text: &str) -> anyhow::Result<Vec<(Dimension, String)>> {
    let mut out: Vec<(Dimension, String)> = Vec::new();
    for part in text.split('+') {
        let (key, value) = part.split_once('=').ok_or_else(|| {
            anyhow::anyhow!("config '{text}': '{part}' is not SETTING=VALUE (e.g. rps=all)")
        })?;
        let d = Dimension::parse(key).map_err(|_| {
            anyhow::anyhow!(
                "config '{text}': unknown setting '{key}'; give rps, rfs, xps, irq or coalesce"
            )
        })?;
        if out.iter().any(|(x, _)| *x == d) {
            anyhow::bail!("config '{text}': {key} is given twice");
        }
        let value = value.split('(').next().unwrap_or(value).trim();
        out.push((d, value.to_string()));
    }
    Ok(out)
}

/// The plan of settings `wanted` on `host` (see [`parse_settings`]).
pub fn settings_plan(
    host: &Host,
    space: &Space,
    wanted: &[(Dimension, String)],
) -> anyhow::Result<Plan> {
    let ifaces = interfaces(host, space)?;
    let mut changes = Vec::new();
    for (d, value) in wanted {
        let mut notes = Vec::new();
        let choices = dimension_choices(*d, host, &ifaces, space, &mut notes);
        let label = format!("{}={value}", d.name());
        let Some(choice) = choices
            .iter()
            .find(|c| c.label == label || c.label.starts_with(&format!("{label}(")))
        else {
            if let Some(why) = notes.first() {
                anyhow::bail!("{why}");
            }
            let offered: Vec<&str> = choices
                .iter()
                .filter_map(|c| c.label.strip_prefix(&format!("{}=", d.name())))
                .collect();
            anyhow::bail!(
                "{label} is not possible here; {} takes {}",
                d.name(),
                offered.join(", ")
            );
        };
        changes.extend(choice.changes.iter().cloned());
    }
    Ok(Plan::custom(
        host.online_cpus.clone(),
        space.ifaces.clone(),
        changes,
    ))
}

/// The interfaces of `space`, each as `host` has it.
fn interfaces<'h>(host: &'h Host, space: &Space) -> anyhow::Result<Vec<&'h Interface>> {
    let ifaces: Vec<&Interface> = space
        .ifaces
        .iter()
        .map(|name| {
            host.interfaces
                .iter()
                .find(|i| &i.name == name)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "interface '{name}' does not exist here (present: {})",
                        host.interfaces
                            .iter()
                            .map(|i| i.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
        })
        .collect::<anyhow::Result<_>>()?;
    if ifaces.is_empty() {
        anyhow::bail!("no interface to tune or search: name one with --iface");
    }
    Ok(ifaces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimensions_parse_by_name() {
        assert_eq!(Dimension::parse("rps").expect("rps"), Dimension::Rps);
        assert!(Dimension::parse("rss").is_err());
    }
}
