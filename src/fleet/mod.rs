//! `nettune fleet report`: many hosts' doctor (and inspect) JSON merged
//! into one table. Each finding with the number of hosts that have it,
//! split by what those hosts share (kernel, CPU count, NUMA layout, NIC
//! drivers, from the host block of each report), so that "412 hosts:
//! every RX IRQ on one CPU, driver bnx2, kernel 5.15" reads as one line.
//!
//! Reading (`read`) is apart from merging (here, pure) and from rendering
//! (`render`, text and HTML); the CLI prints.

pub mod read;
pub mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use read::{HostBlock, Loaded, Skipped};

/// The layout of `fleet report --json`; raised when a field changes
/// meaning or goes away.
pub const SCHEMA_VERSION: u32 = 1;

/// The merged report.
#[derive(Debug, Clone, Serialize)]
pub struct FleetReport {
    pub schema_version: u32,
    /// The directory read.
    pub dir: PathBuf,
    /// Hosts whose report was used.
    pub hosts: usize,
    /// Of those, hosts with no finding at all.
    pub clean_hosts: usize,
    /// Hosts whose report had no host block (an older nettune): counted,
    /// but grouped as "unknown".
    pub without_host_block: Vec<String>,
    /// Files written by a newer nettune: read for the fields they share.
    pub newer_schema: Vec<PathBuf>,
    /// Files not used, each with the reason.
    pub skipped: Vec<Skipped>,
    /// Worst first, then by the number of hosts.
    pub findings: Vec<FleetFinding>,
}

/// One finding across the fleet.
#[derive(Debug, Clone, Serialize)]
pub struct FleetFinding {
    pub id: String,
    pub severity: String,
    pub title: String,
    pub hosts: usize,
    pub host_names: Vec<String>,
    /// The hosts split by what they share, largest group first.
    pub groups: Vec<Group>,
}

/// Hosts that share kernel, CPU count, NUMA layout and NIC drivers.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Shape {
    pub kernel: Option<String>,
    pub cpus: Option<u64>,
    /// `2 nodes (0-7, 8-15)`; `None` when the report did not say.
    pub numa: Option<String>,
    /// Distinct drivers of the host's NICs, sorted.
    pub drivers: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Group {
    #[serde(flatten)]
    pub shape: Shape,
    pub hosts: usize,
    pub host_names: Vec<String>,
}

/// The name a host goes by in the report: its hostname, or the file's
/// path below the directory when the report has none; a network
/// namespace's report adds the namespace (`web1 netns blue`).
fn host_name(dir: &Path, loaded: &Loaded) -> String {
    let host = loaded.report.host.as_ref();
    let name = host
        .and_then(|h| h.hostname.clone())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| {
            let rel = loaded.path.strip_prefix(dir).unwrap_or(&loaded.path);
            rel.with_extension("").display().to_string()
        });
    match host.and_then(|h| h.netns.as_deref()) {
        Some(netns) => format!("{name} netns {netns}"),
        None => name,
    }
}

fn shape(host: Option<&HostBlock>) -> Shape {
    let Some(host) = host else {
        return Shape {
            kernel: None,
            cpus: None,
            numa: None,
            drivers: Vec::new(),
        };
    };
    let numa = host.numa_nodes.as_ref().map(|nodes| {
        let cpus: Vec<&str> = nodes
            .iter()
            .map(|n| n.cpus.as_deref().unwrap_or("?"))
            .collect();
        let word = if nodes.len() == 1 { "node" } else { "nodes" };
        format!("{} {word} ({})", nodes.len(), cpus.join(", "))
    });
    let drivers: BTreeSet<String> = host
        .nic_drivers
        .iter()
        .flat_map(|m| m.values().cloned())
        .collect();
    Shape {
        kernel: host.kernel.clone(),
        cpus: host.cpus,
        numa,
        drivers: drivers.into_iter().collect(),
    }
}

/// Worst first: the order doctor sorts by.
fn severity_rank(severity: &str) -> u8 {
    match severity {
        "critical" => 0,
        "warn" => 1,
        "info" => 2,
        "note" => 3,
        _ => 4,
    }
}

/// Merge what was read. `loaded` in path order; a second report of the
/// same machine (same hashed machine id) and the same network namespace
/// (none for the host's own) is skipped, naming the first. Namespaces of
/// one machine are hosts of their own: each is its own receive path.
pub fn merge(dir: &Path, loaded: Vec<Loaded>, mut skipped: Vec<Skipped>) -> FleetReport {
    let mut seen_machines: BTreeMap<(String, Option<String>), PathBuf> = BTreeMap::new();
    let mut hosts = 0;
    let mut clean_hosts = 0;
    let mut without_host_block = Vec::new();
    let mut newer_schema = Vec::new();
    // finding id -> (severity, title, shape -> host names)
    type Acc = (String, String, BTreeMap<Shape, Vec<String>>);
    let mut by_finding: BTreeMap<String, Acc> = BTreeMap::new();
    for item in loaded {
        let machine = item.report.host.as_ref().and_then(|h| {
            h.machine_id_hash
                .clone()
                .map(|machine| (machine, h.netns.clone()))
        });
        if let Some(machine) = machine {
            if let Some(first) = seen_machines.get(&machine) {
                skipped.push(Skipped {
                    path: item.path.clone(),
                    reason: format!("the same machine as '{}' (counted once)", first.display()),
                });
                continue;
            }
            seen_machines.insert(machine, item.path.clone());
        }
        let name = host_name(dir, &item);
        hosts += 1;
        if item.report.schema_version.unwrap_or(0) > read::KNOWN_SCHEMA {
            newer_schema.push(item.path.clone());
        }
        if item.report.host.is_none() {
            without_host_block.push(name.clone());
        }
        let findings = item.report.findings.as_deref().unwrap_or(&[]);
        if findings.is_empty() {
            clean_hosts += 1;
        }
        let host_shape = shape(item.report.host.as_ref());
        // A finding counted once per host even if a report lists it twice.
        let mut counted = BTreeSet::new();
        for finding in findings {
            if !counted.insert(finding.id.as_str()) {
                continue;
            }
            let entry = by_finding.entry(finding.id.clone()).or_insert_with(|| {
                (
                    finding.severity.clone().unwrap_or_default(),
                    finding.title.clone().unwrap_or_default(),
                    BTreeMap::new(),
                )
            });
            entry
                .2
                .entry(host_shape.clone())
                .or_default()
                .push(name.clone());
        }
    }
    let mut findings: Vec<FleetFinding> = by_finding
        .into_iter()
        .map(|(id, (severity, title, shapes))| {
            let mut groups: Vec<Group> = shapes
                .into_iter()
                .map(|(shape, mut host_names)| {
                    host_names.sort();
                    Group {
                        shape,
                        hosts: host_names.len(),
                        host_names,
                    }
                })
                .collect();
            groups.sort_by(|a, b| b.hosts.cmp(&a.hosts).then(a.shape.cmp(&b.shape)));
            let mut host_names: Vec<String> = groups
                .iter()
                .flat_map(|g| g.host_names.iter().cloned())
                .collect();
            host_names.sort();
            FleetFinding {
                id,
                severity,
                title,
                hosts: host_names.len(),
                host_names,
                groups,
            }
        })
        .collect();
    findings.sort_by(|a, b| {
        severity_rank(&a.severity)
            .cmp(&severity_rank(&b.severity))
            .then(b.hosts.cmp(&a.hosts))
            .then(a.id.cmp(&b.id))
    });
    FleetReport {
        schema_version: SCHEMA_VERSION,
        dir: dir.to_path_buf(),
        hosts,
        clean_hosts,
        without_host_block,
        newer_schema,
        skipped,
        findings,
    }
}

/// Read every report below `dir` (in parallel: parsing dominates) and
/// merge them. An error only when the directory cannot be listed; files
/// that cannot be used are in the report's `skipped`.
pub fn report(dir: &Path) -> anyhow::Result<FleetReport> {
    let paths = read::list(dir)?;
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 16);
    let chunk = paths.len().div_ceil(workers).max(1);
    let results: Vec<Vec<Result<Loaded, Skipped>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(|p| read::load(p)).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut loaded = Vec::new();
    let mut skipped = Vec::new();
    for result in results.into_iter().flatten() {
        match result {
            Ok(l) => loaded.push(l),
            Err(s) => skipped.push(s),
        }
    }
    Ok(merge(dir, loaded, skipped))
}

#[cfg(test)]
mod tests {
    use super::read::{FindingRef, HostReport, NumaNode};
    use super::*;

    fn host(name: &str, driver: &str, cpus: u64, ids: &[&str]) -> Loaded {
        Loaded {
            path: PathBuf::from(format!("/d/{name}.json")),
            report: HostReport {
                schema_version: Some(2),
                host: Some(HostBlock {
                    hostname: Some(name.into()),
                    machine_id_hash: Some(format!("m-{name}")),
                    netns: None,
                    kernel: Some("5.15.0".into()),
                    nettune_version: Some("0.1.0".into()),
                    cpus: Some(cpus),
                    numa_nodes: Some(vec![NumaNode {
                        id: Some(0),
                        cpus: Some(format!("0-{}", cpus - 1)),
                    }]),
                    nic_drivers: Some([("eth0".to_string(), driver.to_string())].into()),
                }),
                findings: Some(
                    ids.iter()
                        .map(|id| FindingRef {
                            id: id.to_string(),
                            severity: Some(
                                if id.starts_with('w') { "warn" } else { "info" }.into(),
                            ),
                            title: Some(format!("title {id}")),
                        })
                        .collect(),
                ),
            },
        }
    }

    #[test]
    fn hosts_with_a_finding_are_counted_and_split_by_what_they_share() {
        let loaded = vec![
            host("a", "bnx2", 16, &["w.irq", "i.x"]),
            host("b", "bnx2", 16, &["w.irq"]),
            host("c", "ixgbe", 8, &["w.irq"]),
            host("d", "ixgbe", 8, &[]),
        ];
        let r = merge(Path::new("/d"), loaded, Vec::new());
        assert_eq!(r.hosts, 4);
        assert_eq!(r.clean_hosts, 1);
        assert_eq!(r.findings[0].id, "w.irq", "warn sorts before info");
        assert_eq!(r.findings[0].hosts, 3);
        let groups = &r.findings[0].groups;
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].hosts, 2);
        assert_eq!(groups[0].shape.drivers, vec!["bnx2".to_string()]);
        assert_eq!(groups[0].shape.numa.as_deref(), Some("1 node (0-15)"));
        assert_eq!(groups[1].host_names, vec!["c".to_string()]);
        assert_eq!(r.findings[1].hosts, 1);
    }

    #[test]
    fn the_same_machine_twice_is_counted_once_and_named() {
        let mut second = host("a", "bnx2", 16, &["w.irq"]);
        second.path = PathBuf::from("/d/z/a-again.json");
        let r = merge(
            Path::new("/d"),
            vec![host("a", "bnx2", 16, &["w.irq"]), second],
            Vec::new(),
        );
        assert_eq!(r.hosts, 1);
        assert_eq!(r.findings[0].hosts, 1);
        assert_eq!(r.skipped.len(), 1);
        assert!(r.skipped[0].reason.contains("/d/a.json"), "{:?}", r.skipped);
    }

    #[test]
    fn network_namespaces_of_one_machine_are_hosts_of_their_own() {
        let in_netns = |ns: &str| {
            let mut loaded = host("a", "veth", 2, &["w.irq"]);
            loaded.path = PathBuf::from(format!("/d/{ns}.json"));
            if let Some(h) = loaded.report.host.as_mut() {
                h.netns = Some(ns.to_string());
            }
            loaded
        };
        let r = merge(
            Path::new("/d"),
            vec![
                host("a", "veth", 2, &["w.irq"]),
                in_netns("blue"),
                in_netns("red"),
                in_netns("red"),
            ],
            Vec::new(),
        );
        assert_eq!(r.hosts, 3);
        assert_eq!(
            r.findings[0].host_names,
            vec!["a", "a netns blue", "a netns red"]
        );
        assert_eq!(r.skipped.len(), 1, "the second report of red");
    }

    #[test]
    fn a_report_without_host_block_is_named_by_its_path_and_grouped_as_unknown() {
        let old = Loaded {
            path: PathBuf::from("/d/web7/doctor.json"),
            report: HostReport {
                schema_version: None,
                host: None,
                findings: Some(vec![FindingRef {
                    id: "w.irq".into(),
                    severity: Some("warn".into()),
                    title: None,
                }]),
            },
        };
        let r = merge(Path::new("/d"), vec![old], Vec::new());
        assert_eq!(r.without_host_block, vec!["web7/doctor".to_string()]);
        assert_eq!(r.findings[0].groups[0].shape.kernel, None);
    }
}
