//! Reading a directory of reports: every `*.json` file below it (as
//! `ansible fetch` lays them out, one folder per host), each parsed into
//! the few fields a fleet report needs. A file this version cannot use is
//! named with its path and the reason, never fatal.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::base::fsio;

/// The largest report read: a doctor report of a 1,024-CPU host with every
/// finding is well under 1 MiB.
pub const MAX_REPORT_BYTES: u64 = 16 << 20;
/// How deep below the directory reports are looked for.
pub const MAX_DEPTH: usize = 4;
/// The most files read: a fleet report is for thousands of hosts, and a
/// directory by mistake (`/`) must end.
pub const MAX_FILES: usize = 200_000;
/// The newest doctor/inspect JSON schema this version knows. Newer files
/// are still read for the fields they share (findings and the host block
/// keep their names); the report says they were newer.
pub const KNOWN_SCHEMA: u32 = 2;

/// One host's report, as far as the fleet report reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct HostReport {
    #[serde(default)]
    pub schema_version: Option<u32>,
    #[serde(default)]
    pub host: Option<HostBlock>,
    /// Present in doctor reports; inspect reports carry only the host.
    #[serde(default)]
    pub findings: Option<Vec<FindingRef>>,
}

/// The host block of doctor and inspect JSON (docs/json-schema.md).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HostBlock {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub machine_id_hash: Option<String>,
    /// The network namespace the report looked at (`--netns NAME`).
    #[serde(default)]
    pub netns: Option<String>,
    #[serde(default)]
    pub kernel: Option<String>,
    #[serde(default)]
    pub nettune_version: Option<String>,
    #[serde(default)]
    pub cpus: Option<u64>,
    #[serde(default)]
    pub numa_nodes: Option<Vec<NumaNode>>,
    /// Interface -> kernel driver.
    #[serde(default)]
    pub nic_drivers: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NumaNode {
    #[serde(default)]
    pub id: Option<u64>,
    #[serde(default)]
    pub cpus: Option<String>,
}

/// A finding as the fleet report counts it: what it is, not its evidence.
#[derive(Debug, Clone, Deserialize)]
pub struct FindingRef {
    pub id: String,
    #[serde(default)]
    pub severity: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
}

/// A file that was read.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub report: HostReport,
}

/// A file that was not used, and why (one line).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

/// Every `*.json` below `dir` (sorted, so the report does not depend on
/// the order the directory lists them in).
pub fn list(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let meta = fs::metadata(dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot read the report directory '{}': {e}; give the directory the hosts' \
             doctor --json files were collected into",
            dir.display()
        )
    })?;
    if !meta.is_dir() {
        anyhow::bail!(
            "'{}' is not a directory; give the directory the hosts' doctor --json files \
             were collected into",
            dir.display()
        );
    }
    let mut out = Vec::new();
    walk(dir, 0, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries =
        fs::read_dir(dir).map_err(|e| anyhow::anyhow!("cannot list '{}': {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        // file_type does not follow symbolic links: a link loop cannot
        // make the walk endless, and a link to /dev/zero is not read.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth < MAX_DEPTH {
            walk(&path, depth + 1, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "json") {
            if out.len() >= MAX_FILES {
                anyhow::bail!(
                    "more than {MAX_FILES} JSON files below '{}': give the directory of one fleet",
                    dir.display()
                );
            }
            out.push(path);
        }
    }
    Ok(())
}

/// Read and parse one file: the report, or why it was skipped.
pub fn load(path: &Path) -> Result<Loaded, Skipped> {
    let skip = |reason: String| Skipped {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = fsio::read_bounded(path, MAX_REPORT_BYTES, "a host report")
        .map_err(|e| skip(e.to_string()))?;
    let report: HostReport = serde_json::from_slice(&bytes)
        .map_err(|e| skip(format!("not a nettune doctor or inspect report: {e}")))?;
    if report.findings.is_none() && report.host.is_none() {
        return Err(skip(
            "neither findings nor a host block: not a doctor or inspect --json report".into(),
        ));
    }
    Ok(Loaded {
        path: path.to_path_buf(),
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_of_a_newer_schema_is_read_for_the_fields_it_shares() {
        let text = r#"{"schema_version": 9, "something_new": [1, 2],
            "host": {"hostname": "a", "cpus": 4, "new_field": true},
            "findings": [{"id": "x.y", "severity": "warn", "title": "T", "more": {}}]}"#;
        let report: HostReport = serde_json::from_str(text).expect("parses");
        assert_eq!(report.schema_version, Some(9));
        assert_eq!(report.host.and_then(|h| h.cpus), Some(4));
        assert_eq!(report.findings.map(|f| f.len()), Some(1));
    }

    #[test]
    fn an_old_report_without_host_block_is_read() {
        let report: HostReport =
            serde_json::from_str(r#"{"findings": [{"id": "a"}]}"#).expect("parses");
        assert!(report.host.is_none());
        assert_eq!(report.schema_version, None);
    }
}
