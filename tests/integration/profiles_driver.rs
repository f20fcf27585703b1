//! Site profiles and the driver settings (`driver."KEY"`): a value the
//! plan shows with its line, a group left alone, refusals naming
//! file:line:key, and an apply through a fixture copy's recorded driver
//! answers (nettune/driver.json).

use std::path::Path;

use serde_json::Value;

use crate::common::*;
use crate::profiles::{change, json_with, run_with, write};

/// The fixture with recorded ethtool answers: ice, 16 combined channels
/// (64 at most), rings 2048 of 8160, rx-usecs 50 with adaptive moderation.
const ICE: &str = "one-socket-ice-16q";
const RX_USECS: &str = "ethtool:ens801f0:coalesce.rx-usecs";

fn skipped<'a>(plan: &'a Value, target: &str) -> Option<&'a str> {
    plan["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .find(|s| s["target"] == target)
        .and_then(|s| s["reason"].as_str())
}

/// A profile directory holding `name.toml` with `text`; returns it and the
/// file's path as the plan names it.
fn profile(work: &Path, name: &str, text: &str) -> (std::path::PathBuf, String) {
    let dir = work.join("profiles");
    write(&dir, &format!("{name}.toml"), text);
    let file = dir.join(format!("{name}.toml")).display().to_string();
    (dir, file)
}

#[test]
fn a_site_profile_sets_a_coalescing_value_the_profile_leaves_alone_with_its_origin() {
    let work = tempfile::tempdir().expect("tempdir");
    let (dir, file) = profile(
        work.path(),
        "dns",
        "include = \"pps\"\ndriver.\"coalesce.rx-usecs\" = 8\n",
    );
    let root = fixture(ICE);
    let pps = run_json(&["plan", "--profile", "pps", "--root", s(&root), "--json"]);
    assert!(
        change(&pps, RX_USECS).is_none(),
        "pps sets no coalescing: {pps}"
    );
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "dns", "--root", s(&root), "--json"],
    );
    let c = change(&plan, RX_USECS).unwrap_or_else(|| panic!("{RX_USECS} not planned: {plan}"));
    assert_eq!(c["from"], "50", "{c}");
    assert_eq!(c["to"], "8", "{c}");
    assert_eq!(
        c["origin"],
        format!("{file}:2 driver.\"coalesce.rx-usecs\"").as_str(),
        "{c}"
    );
    // Everything else is pps's, unchanged.
    assert_eq!(
        plan["changes"].as_array().map(Vec::len),
        pps["changes"].as_array().map(|c| c.len() + 1),
        "{plan}"
    );
    let (code, text, err) = run_with(&[&dir], &["plan", "--profile", "dns", "--root", s(&root)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains(&format!("from {file}:2 driver.\"coalesce.rx-usecs\"")),
        "{text}"
    );

    // A driver without coalescing (virtio_net here): skipped with the
    // reason the built-in profiles' driver values get.
    let bare = json_with(
        &[&dir],
        &[
            "plan",
            "--profile",
            "dns",
            "--root",
            s(&fixture("vm-2cpu-virtio")),
            "--json",
        ],
    );
    let target = "ethtool:eth0:coalesce.rx-usecs";
    assert!(change(&bare, target).is_none(), "{bare}");
    let why = skipped(&bare, target).unwrap_or_else(|| panic!("{target} not listed: {bare}"));
    assert_eq!(why, "virtio_net does not support this setting on eth0");
}

#[test]
fn off_leaves_a_group_alone_and_a_setting_of_it_may_still_be_given() {
    let work = tempfile::tempdir().expect("tempdir");
    let (dir, file) = profile(
        work.path(),
        "bulk",
        "include = \"throughput\"\ndriver.\"rings\" = \"off\"\n\
         driver.\"coalesce\" = \"off\"\ndriver.\"coalesce.rx-usecs\" = 100\n\
         driver.\"features.rx-gro\" = \"off\"\n",
    );
    let root = fixture(ICE);
    let throughput = run_json(&[
        "plan",
        "--profile",
        "throughput",
        "--root",
        s(&root),
        "--json",
    ]);
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "bulk", "--root", s(&root), "--json"],
    );
    for target in ["ethtool:ens801f0:rings.rx", "ethtool:ens801f0:rings.tx"] {
        assert!(change(&throughput, target).is_some(), "{throughput}");
        assert!(change(&plan, target).is_none(), "{target}: {plan}");
        let says = format!("left alone: driver.\"rings\" = \"off\" ({file}:2)");
        assert_eq!(skipped(&plan, target), Some(says.as_str()), "{plan}");
    }
    // One setting turned off is listed even where nothing was planned for
    // it (GRO is on already here), as a sysctl is.
    let gro = "ethtool:ens801f0:features.rx-gro";
    assert!(change(&throughput, gro).is_none(), "{throughput}");
    let says = format!("left alone: driver.\"features.rx-gro\" = \"off\" ({file}:5)");
    assert_eq!(skipped(&plan, gro), Some(says.as_str()), "{plan}");
    // The setting given a value wins over its group's "off".
    let c = change(&plan, RX_USECS).unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(c["to"], "100", "{c}");
    assert!(
        c["origin"]
            .as_str()
            .is_some_and(|o| o.starts_with(&format!("{file}:4 "))),
        "{c}"
    );
    let (code, text, err) = run_with(&[&dir], &["plan", "--profile", "bulk", "--root", s(&root)]);
    assert_eq!(code, 0, "{err}");
    let left = text.split("\nleft alone\n").nth(1).unwrap_or("");
    assert!(
        left.contains("rings.rx, rings.tx: left alone: driver.\"rings\" = \"off\""),
        "{text}"
    );
}

#[test]
fn a_queue_count_waits_for_the_queues_and_is_held_to_the_driver_maximum() {
    let work = tempfile::tempdir().expect("tempdir");
    let root = fixture(ICE);
    let (dir, file) = profile(
        work.path(),
        "web",
        "include = \"http\"\ndriver.\"channels.combined\" = 8\n",
    );
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "web", "--root", s(&root), "--json"],
    );
    let target = "ethtool:ens801f0:channels.combined";
    let c = change(&plan, target).unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(
        (c["from"].as_str(), c["to"].as_str()),
        (Some("16"), Some("8"))
    );
    assert_eq!(
        c["origin"],
        format!("{file}:2 driver.\"channels.combined\"").as_str()
    );
    let why = skipped(&plan, "/sys/class/net/ens801f0/queues").unwrap_or("");
    assert!(why.contains("nettune apply --profile web` again"), "{plan}");
    assert!(
        !plan["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .any(|c| c["target"].as_str().is_some_and(|t| t.contains("/queues/"))),
        "{plan}"
    );

    write(
        &dir,
        "web.toml",
        "include = \"http\"\ndriver.\"channels.combined\" = 100\n",
    );
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "web", "--root", s(&root), "--json"],
    );
    assert!(change(&plan, target).is_none(), "{plan}");
    let why = skipped(&plan, target).unwrap_or("");
    assert!(
        why.contains("above ice's maximum on ens801f0 (64)"),
        "{why}"
    );
}

#[test]
fn a_bad_driver_value_is_one_line_naming_file_line_and_key() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("profiles");
    let (_tree, host) = fixture_copy(ICE);
    let state = work.path().join("state");
    let cases: &[(&str, &str, &str)] = &[
        (
            "range",
            "driver.\"coalesce.rx-usecs\" = 99999",
            "range.toml:2: driver.\"coalesce.rx-usecs\": '99999' is above 10000",
        ),
        (
            "ring",
            "driver.\"rings.rx\" = 0",
            "ring.toml:2: driver.\"rings.rx\": '0' is below 1",
        ),
        (
            "unknown",
            "driver.\"rings.bogus\" = 5",
            "unknown.toml:2: driver.\"rings.bogus\": no nettune profile changes this driver setting",
        ),
        (
            "unchanged",
            "driver.\"coalesce.tx-usecs\" = 5",
            "unchanged.toml:2: driver.\"coalesce.tx-usecs\": no nettune profile changes this driver setting",
        ),
        (
            "group",
            "driver.\"rings\" = 4096",
            "group.toml:2: driver.\"rings\": '4096' is not \"off\"",
        ),
        (
            "dotted",
            "driver.coalesce.rx-usecs = 8",
            "dotted.toml:2: driver.\"coalesce\": quote the setting's name",
        ),
        (
            "switch",
            "driver.\"coalesce.adaptive-rx\" = \"yes\"",
            "switch.toml:2: driver.\"coalesce.adaptive-rx\": 'yes' is not true or false",
        ),
        (
            "hash",
            "driver.\"rx-flow-hash.udp4\" = \"sdx\"",
            "hash.toml:2: driver.\"rx-flow-hash.udp4\": 'x' in rx-flow-hash 'sdx'",
        ),
    ];
    for (name, line, _) in cases {
        write(
            &dir,
            &format!("{name}.toml"),
            &format!("include = \"pps\"\n{line}\n"),
        );
    }
    let driver_json = host.join("nettune/driver.json");
    let before = std::fs::read(&driver_json).expect("read");
    for (name, _, says) in cases {
        for verb in ["plan", "apply"] {
            let mut args = vec![verb, "--profile", name, "--root", s(&host)];
            if verb == "apply" {
                args.extend(["--state-dir", s(&state)]);
            }
            let (code, out, err) = run_with(&[&dir], &args);
            assert_eq!(code, 2, "{verb} {name}: {out}{err}");
            assert!(out.is_empty(), "{verb} {name}: {out}");
            assert_eq!(err.lines().count(), 1, "{verb} {name}: {err}");
            assert!(err.contains(says), "{verb} {name}: {err}");
        }
    }
    assert!(!state.exists(), "a refused apply made its state directory");
    assert_eq!(before, std::fs::read(&driver_json).expect("read"));
}

#[test]
fn apply_writes_the_site_value_through_the_recorded_driver_and_rollback_restores_it() {
    let work = tempfile::tempdir().expect("tempdir");
    let (dir, file) = profile(
        work.path(),
        "dns",
        "include = \"pps\"\ndriver.\"coalesce.rx-usecs\" = 8\n",
    );
    let (_tree, host) = fixture_copy(ICE);
    let state = work.path().join("state");
    let driver_json = host.join("nettune/driver.json");
    let before = std::fs::read(&driver_json).expect("read");
    let rx_usecs = |path: &Path| -> Value {
        let json: Value =
            serde_json::from_slice(&std::fs::read(path).expect("read")).expect("driver.json");
        json["interfaces"]["ens801f0"]["ethtool"]["coalesce"]["rx_usecs"].clone()
    };
    assert_eq!(rx_usecs(&driver_json), 50);

    let args = ["--root", s(&host), "--state-dir", s(&state)];
    let (code, out, err) = run_with(
        &[&dir],
        &[&["apply", "--profile", "dns"][..], &args].concat(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(rx_usecs(&driver_json), 8);
    let again = json_with(
        &[&dir],
        &["plan", "--profile", "dns", "--root", s(&host), "--json"],
    );
    assert!(change(&again, RX_USECS).is_none(), "{again}");

    // The journal records the file's value and where it was set.
    let journal: Value =
        serde_json::from_slice(&std::fs::read(state.join("state-0001.json")).expect("journal"))
            .expect("json");
    let entry = &journal["options"]["site"]["driver"]["coalesce.rx-usecs"];
    assert_eq!(entry[0]["value"], "8", "{journal}");
    assert_eq!(entry[1]["file"], file.as_str(), "{journal}");
    assert_eq!(entry[1]["line"], 2, "{journal}");
    assert!(
        journal["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .any(|c| c["target"] == RX_USECS),
        "{journal}"
    );

    let (code, out, err) = run_with(&[&dir], &[&["rollback"][..], &args].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(before, std::fs::read(&driver_json).expect("read"));
}
