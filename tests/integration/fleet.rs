//! `nettune fleet report`: many hosts' doctor JSON merged into one table,
//! checked against counts made here from the same files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{finish_bounded, fixture, run, skipped};

const FIXTURES: &[&str] = &[
    "one-socket-ice-16q",
    "two-socket-nic-node1",
    "two-socket-smt-8q",
    "vm-2cpu-busy-poll",
    "vm-2cpu-virtio",
];

/// doctor --json of a fixture host, as a host would send it.
fn doctor_json(name: &str) -> Value {
    let root = fixture(name);
    let (code, out, err) = run(&["doctor", "--json", "--root", root.to_str().expect("utf8")]);
    assert!(code == 0 || code == 1, "doctor on {name}: {err}");
    serde_json::from_str(&out).expect("doctor json")
}

/// `copies` hosts per fixture, each with its own name and machine id, in
/// one folder per host as `ansible fetch` writes them.
fn fleet_dir(copies: usize) -> (tempfile::TempDir, BTreeMap<String, Value>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut hosts = BTreeMap::new();
    for name in FIXTURES {
        let report = doctor_json(name);
        assert!(
            report["host"].is_object(),
            "doctor --json has a host block: {report}"
        );
        for i in 0..copies {
            let mut host = report.clone();
            let hostname = format!("{name}-{i:03}");
            host["host"]["hostname"] = Value::from(hostname.clone());
            host["host"]["machine_id_hash"] = Value::from(format!("{hostname}-id"));
            let folder = dir.path().join(&hostname);
            std::fs::create_dir_all(&folder).expect("mkdir");
            std::fs::write(folder.join("doctor.json"), host.to_string()).expect("write");
            hosts.insert(hostname, host);
        }
    }
    (dir, hosts)
}

fn report_json(dir: &Path) -> Value {
    let (code, out, err) = run(&["fleet", "report", dir.to_str().expect("utf8"), "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("fleet json")
}

#[test]
fn every_finding_counts_the_hosts_that_have_it_grouped_by_what_they_share() {
    let (dir, hosts) = fleet_dir(3);
    let report = report_json(dir.path());
    assert_eq!(report["hosts"], hosts.len());
    // The expected table, counted here from the files themselves.
    let mut expected: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut shapes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, host) in &hosts {
        let h = &host["host"];
        let shape = format!(
            "{}|{}|{:?}",
            h["kernel"],
            h["cpus"],
            h["nic_drivers"]
                .as_object()
                .map(|m| m.values().map(|v| v.to_string()).collect::<BTreeSet<_>>())
        );
        for f in host["findings"].as_array().expect("findings") {
            let id = f["id"].as_str().expect("id").to_string();
            expected.entry(id.clone()).or_default().insert(name.clone());
            shapes.entry(id).or_default().insert(shape.clone());
        }
    }
    let findings = report["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), expected.len());
    assert!(!findings.is_empty(), "the fixtures have findings");
    for f in findings {
        let id = f["id"].as_str().expect("id");
        let want = &expected[id];
        assert_eq!(f["hosts"], want.len(), "{id}");
        let names: BTreeSet<String> = f["host_names"]
            .as_array()
            .expect("names")
            .iter()
            .map(|v| v.as_str().expect("name").to_string())
            .collect();
        assert_eq!(&names, want, "{id}");
        let groups = f["groups"].as_array().expect("groups");
        assert_eq!(groups.len(), shapes[id].len(), "{id}: {groups:?}");
        let in_groups: u64 = groups.iter().map(|g| g["hosts"].as_u64().expect("n")).sum();
        assert_eq!(in_groups as usize, want.len(), "{id}");
    }
    // Worst first: no warn after an info.
    let ranks: Vec<u8> = findings
        .iter()
        .map(|f| match f["severity"].as_str() {
            Some("critical") => 0,
            Some("warn") => 1,
            _ => 2,
        })
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");
    // The text names the count and the shared driver of a group.
    let (code, text, err) = run(&["fleet", "report", dir.path().to_str().expect("utf8")]);
    assert_eq!(code, 0, "{err}");
    let first = &findings[0];
    assert!(
        text.contains(&format!(
            "{} hosts {} {}",
            first["hosts"],
            first["severity"].as_str().expect("s"),
            first["id"].as_str().expect("id")
        )),
        "{text}"
    );
}

#[test]
fn files_it_cannot_use_are_named_and_newer_or_older_reports_are_merged() {
    let (dir, hosts) = fleet_dir(1);
    let d = dir.path();
    std::fs::write(d.join("broken.json"), "{\"findings\": [").expect("write");
    std::fs::write(d.join("other.json"), "{\"hello\": 1}").expect("write");
    // A newer nettune: a schema this version does not know, an extra field.
    let mut newer = hosts.values().next().expect("a host").clone();
    newer["schema_version"] = Value::from(99);
    newer["host"]["hostname"] = Value::from("newer");
    newer["host"]["machine_id_hash"] = Value::from("newer-id");
    newer["something_new"] = Value::from(true);
    std::fs::write(d.join("newer.json"), newer.to_string()).expect("write");
    // An older nettune: no schema_version, no host block.
    let mut older = hosts.values().next().expect("a host").clone();
    older.as_object_mut().expect("object").remove("host");
    older
        .as_object_mut()
        .expect("object")
        .remove("schema_version");
    std::fs::create_dir_all(d.join("old7")).expect("mkdir");
    std::fs::write(d.join("old7/doctor.json"), older.to_string()).expect("write");
    // The same machine twice.
    let (name, first) = hosts.iter().next().expect("a host");
    // Named to sort after the first one, which is the one counted.
    std::fs::write(d.join("zz-again.json"), first.to_string()).expect("write");

    let report = report_json(d);
    assert_eq!(report["hosts"], hosts.len() + 2, "{report}");
    let skipped: BTreeMap<String, String> = report["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|s| {
            let path = s["path"].as_str().expect("path");
            let file = Path::new(path)
                .file_name()
                .expect("name")
                .to_string_lossy()
                .to_string();
            (file, s["reason"].as_str().expect("reason").to_string())
        })
        .collect();
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert!(
        skipped["broken.json"].contains("not a nettune"),
        "{skipped:?}"
    );
    assert!(
        skipped["other.json"].contains("neither findings"),
        "{skipped:?}"
    );
    assert!(
        skipped["zz-again.json"].contains(name.as_str()),
        "{skipped:?}"
    );
    assert_eq!(report["newer_schema"].as_array().expect("newer").len(), 1);
    assert_eq!(report["without_host_block"][0], "old7/doctor");
    let (code, text, _) = run(&["fleet", "report", d.to_str().expect("utf8")]);
    assert_eq!(code, 0);
    assert!(text.contains("broken.json: not a nettune"), "{text}");
    assert!(text.contains("1 from a newer nettune"), "{text}");
}

#[test]
fn an_empty_directory_or_no_usable_file_is_exit_2_saying_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf8");
    let (code, out, err) = run(&["fleet", "report", d]);
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("no host report") && err.contains("no *.json file"),
        "{err}"
    );
    std::fs::write(dir.path().join("x.json"), "not json").expect("write");
    let (code, _, err) = run(&["fleet", "report", d]);
    assert_eq!(code, 2);
    assert!(err.contains("x.json"), "{err}");
    let (code, _, err) = run(&["fleet", "report", "/nonexistent-fleet-dir"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent-fleet-dir"), "{err}");
}

#[test]
fn the_html_page_shows_the_same_table_in_headless_chromium() {
    let Some(chromium) = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok())
    else {
        skipped(
            "the_html_page_shows_the_same_table_in_headless_chromium",
            "chromium is not installed",
        );
        return;
    };
    let (dir, _) = fleet_dir(2);
    // A host name a page must not run as markup.
    let mut evil = doctor_json("vm-2cpu-virtio");
    evil["host"]["hostname"] = Value::from("<img src=x onerror=alert(1)>");
    evil["host"]["machine_id_hash"] = Value::from("evil-id");
    std::fs::write(dir.path().join("evil.json"), evil.to_string()).expect("write");
    let out = tempfile::tempdir().expect("tempdir");
    let page = out.path().join("fleet.html");
    let (code, _, err) = run(&[
        "fleet",
        "report",
        dir.path().to_str().expect("utf8"),
        "--html",
        page.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0, "{err}");
    let report = report_json(dir.path());
    let child = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!(
            "--user-data-dir={}",
            out.path().join("profile").display()
        ))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium");
    let (code, dom, stderr) = finish_bounded(child, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
    // One row per group, as in the JSON.
    let groups: usize = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["groups"].as_array().expect("groups").len())
        .sum();
    let body = dom.split("<tbody>").nth(1).expect("a table body");
    assert_eq!(body.matches("<tr>").count(), groups, "{dom}");
    for f in report["findings"].as_array().expect("findings") {
        assert!(dom.contains(f["id"].as_str().expect("id")), "{dom}");
    }
    assert!(!dom.contains("<img"), "a host name became markup: {dom}");
    assert!(dom.contains("&lt;img src=x"), "{dom}");
}
