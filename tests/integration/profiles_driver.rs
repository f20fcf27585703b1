//! Site profiles and the driver settings (`driver."KEY"`): a value the
//! plan shows with its line, a group left alone, refusals naming
//! file:line:key, and an apply through a fixture copy's recorded driver
//! answers (nettune/driver.json).

use std::path::Path;

use serde_json::Value;

use crate::common::*;
use crate::profiles::{change, json_with, refused_by_plan_and_apply, run_with, write};

/// The fixture with recorded ethtool answers: ice, 16 combined channels
/// (64 at most), rings 2048 of 8160, rx-usecs 50 with adaptive moderation.
const ICE: &str = "one-socket-ice-16q";
const RX_USECS: &str = "ethtool:ens801f0:coalesce.rx-usecs";
const ADAPTIVE_RX: &str = "ethtool:ens801f0:coalesce.adaptive-rx";

/// The targets of a plan's (or journal's) changes, in the order they are
/// written.
fn targets(plan: &Value) -> Vec<String> {
    plan["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .filter_map(|c| c["target"].as_str().map(String::from))
        .collect()
}

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
        "include = \"pps\"\ndriver.\"coalesce.rx-usecs\" = 8\ndriver.\"coalesce.adaptive-rx\" = false\n",
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
    // Adaptive moderation goes off first: ice refuses a fixed time while
    // it is on.
    assert_eq!(
        targets(&plan)
            .into_iter()
            .filter(|t| t.contains(":coalesce."))
            .collect::<Vec<_>>(),
        [ADAPTIVE_RX, RX_USECS],
        "{plan}"
    );
    // Everything else is pps's, unchanged.
    assert_eq!(
        plan["changes"].as_array().map(Vec::len),
        pps["changes"].as_array().map(|c| c.len() + 2),
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
         driver.\"features.rx-gro\" = \"off\"\ndriver.\"coalesce.adaptive-rx\" = false\n",
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
            "group.toml:2: driver.\"rings\": '4096' is neither \"off\" nor \"on\"",
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
        (
            "nohash",
            "driver.\"rx-flow-hash.udp4\" = \"\"",
            "nohash.toml:2: driver.\"rx-flow-hash.udp4\": '' hashes on no field at all",
        ),
        (
            "truehash",
            "driver.\"rx-flow-hash.udp6\" = true",
            "truehash.toml:2: driver.\"rx-flow-hash.udp6\": 'true' is not a hash: give the \
             letters of the fields to hash on, such as \"sdfn\"",
        ),
        (
            "twogro",
            "driver.\"features.rx-gro\" = true\ndriver.\"features.generic-receive-offload\" = false",
            "twogro.toml:3: driver.\"features.generic-receive-offload\": GRO is given twice, \
             here and as driver.\"features.rx-gro\" (line 2)",
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
    refused_by_plan_and_apply(
        &dir,
        &host,
        &state,
        cases.iter().map(|(n, _, says)| (*n, *says)),
    );
    assert!(!state.exists(), "a refused apply made its state directory");
    assert_eq!(before, std::fs::read(&driver_json).expect("read"));
}

#[test]
fn apply_writes_the_site_value_through_the_recorded_driver_and_rollback_restores_it() {
    let work = tempfile::tempdir().expect("tempdir");
    let (dir, file) = profile(
        work.path(),
        "dns",
        "include = \"pps\"\ndriver.\"coalesce.rx-usecs\" = 8\ndriver.\"coalesce.adaptive-rx\" = false\n",
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
    // Written in this order: adaptive moderation off, then the time.
    let written = targets(&journal);
    let at = |t: &str| written.iter().position(|w| w == t);
    assert!(
        at(ADAPTIVE_RX).is_some() && at(ADAPTIVE_RX) < at(RX_USECS),
        "{journal}"
    );

    let (code, out, err) = run_with(&[&dir], &[&["rollback"][..], &args].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(before, std::fs::read(&driver_json).expect("read"));
}

/// A fixture copy of the ice host with GRO off; its driver.json lists GRO
/// under both names, as `ethtool -k` shows it on a real host.
fn ice_gro_off() -> (tempfile::TempDir, std::path::PathBuf) {
    let (tree, host) = fixture_copy(ICE);
    let path = host.join("nettune/driver.json");
    let mut json: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("driver.json");
    let features = &mut json["interfaces"]["ens801f0"]["ethtool"]["features"];
    for name in GRO_NAMES {
        assert!(features[name].is_object(), "{name} listed: {features}");
        features[name]["active"] = Value::Bool(false);
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&json).expect("json")).expect("write");
    (tree, host)
}

const GRO_NAMES: [&str; 2] = ["rx-gro", "generic-receive-offload"];

fn gro_targets(plan: &Value) -> Vec<String> {
    targets(plan)
        .into_iter()
        .filter(|t| {
            GRO_NAMES
                .iter()
                .any(|n| t.ends_with(&format!(":features.{n}")))
        })
        .collect()
}

#[test]
fn gro_is_one_setting_under_either_of_its_two_names() {
    let work = tempfile::tempdir().expect("tempdir");
    let (_tree, host) = ice_gro_off();
    let state = work.path().join("state");
    let throughput = run_json(&[
        "plan",
        "--profile",
        "throughput",
        "--root",
        s(&host),
        "--json",
    ]);
    assert_eq!(
        gro_targets(&throughput),
        ["ethtool:ens801f0:features.rx-gro"],
        "throughput turns GRO on: {throughput}"
    );
    // The older name keeps GRO off: nothing planned under either name.
    let (dir, _) = profile(
        work.path(),
        "nogro",
        "include = \"throughput\"\ndriver.\"features.generic-receive-offload\" = false\n",
    );
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "nogro", "--root", s(&host), "--json"],
    );
    assert!(gro_targets(&plan).is_empty(), "{plan}");
    // A child's name of GRO replaces its parent's other name.
    write(
        &dir,
        "grobase.toml",
        "include = \"throughput\"\ndriver.\"features.rx-gro\" = true\n",
    );
    write(
        &dir,
        "grochild.toml",
        "include = \"grobase\"\ndriver.\"features.generic-receive-offload\" = false\n",
    );
    let child = json_with(
        &[&dir],
        &[
            "plan",
            "--profile",
            "grochild",
            "--root",
            s(&host),
            "--json",
        ],
    );
    assert!(gro_targets(&child).is_empty(), "{child}");

    let (code, out, err) = run_with(
        &[&dir],
        &[
            "apply",
            "--profile",
            "nogro",
            "--root",
            s(&host),
            "--state-dir",
            s(&state),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let json: Value =
        serde_json::from_slice(&std::fs::read(host.join("nettune/driver.json")).expect("read"))
            .expect("driver.json");
    for name in GRO_NAMES {
        assert_eq!(
            json["interfaces"]["ens801f0"]["ethtool"]["features"][name]["active"], false,
            "{name} after apply"
        );
    }
}

#[test]
fn a_coalescing_time_waits_for_adaptive_moderation_to_be_turned_off() {
    let work = tempfile::tempdir().expect("tempdir");
    let root = fixture(ICE);
    // pps leaves adaptive-rx on (the fixture has it on): ice would refuse.
    let (dir, file) = profile(
        work.path(),
        "dns",
        "include = \"pps\"\ndriver.\"coalesce.rx-usecs\" = 8\n",
    );
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "dns", "--root", s(&root), "--json"],
    );
    assert!(change(&plan, RX_USECS).is_none(), "{plan}");
    let why = skipped(&plan, RX_USECS).unwrap_or_else(|| panic!("{RX_USECS} not listed: {plan}"));
    assert!(why.starts_with("adaptive-rx stays on"), "{why}");
    assert!(
        why.contains(&format!("8 ({file}:2) is left unset")),
        "{why}"
    );
    assert!(
        why.contains("add driver.\"coalesce.adaptive-rx\" = false"),
        "{why}"
    );

    // latency turns adaptive-rx off then sets rx-usecs 0; a file that
    // names adaptive-rx again keeps that order.
    let (dir, _) = profile(
        work.path(),
        "quick",
        "include = \"latency\"\ndriver.\"coalesce.adaptive-rx\" = false\n",
    );
    let latency = run_json(&["plan", "--profile", "latency", "--root", s(&root), "--json"]);
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "quick", "--root", s(&root), "--json"],
    );
    for p in [&latency, &plan] {
        let order: Vec<String> = targets(p)
            .into_iter()
            .filter(|t| t.contains(":coalesce."))
            .collect();
        assert_eq!(order, [ADAPTIVE_RX, RX_USECS], "{p}");
    }
    // A file that leaves adaptive-rx alone (on here) leaves latency's
    // rx-usecs 0 unset too.
    write(
        &dir,
        "quick.toml",
        "include = \"latency\"\ndriver.\"coalesce.adaptive-rx\" = \"off\"\n",
    );
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "quick", "--root", s(&root), "--json"],
    );
    assert!(change(&plan, RX_USECS).is_none(), "{plan}");
    let why = skipped(&plan, RX_USECS).unwrap_or("");
    assert!(
        why.starts_with("adaptive-rx stays on") && why.contains("latency's 0 is left unset"),
        "{plan}"
    );
    // The file names adaptive-rx already: the advice points at its line
    // (a second key would be a TOML error).
    let quick = dir.join("quick.toml");
    assert!(
        why.contains(&format!(
            "set driver.\"coalesce.adaptive-rx\" = false ({}:2)",
            quick.display()
        )) && !why.contains("add driver"),
        "{why}"
    );
}

#[test]
fn a_childs_group_replaces_what_the_files_it_includes_say_of_the_group() {
    let work = tempfile::tempdir().expect("tempdir");
    let root = fixture(ICE);
    let dir = work.path().join("profiles");
    let rx = "ethtool:ens801f0:rings.rx";
    write(
        &dir,
        "base1.toml",
        "include = \"pps\"\ndriver.\"rings.rx\" = 4096\n",
    );
    write(
        &dir,
        "child.toml",
        "include = \"base1\"\ndriver.\"rings\" = \"off\"\n",
    );
    write(
        &dir,
        "other.toml",
        "include = \"base1\"\nsysctl.\"net.core.rmem_max\" = 67108864\n",
    );
    let base = dir.join("base1.toml").display().to_string();
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "base1", "--root", s(&root), "--json"],
    );
    assert!(change(&plan, rx).is_some(), "{plan}");
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "child", "--root", s(&root), "--json"],
    );
    assert!(change(&plan, rx).is_none(), "{plan}");

    // A value from an included file is said to be set by that file's
    // profile, as a sysctl's is.
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "other", "--root", s(&root), "--json"],
    );
    let c = change(&plan, rx).unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(c["to"], "4096", "{c}");
    assert_eq!(c["reason"], "set by site profile base1", "{c}");
    assert_eq!(
        c["origin"],
        format!("{base}:2 driver.\"rings.rx\"").as_str()
    );

    // "on" undoes an included group's "off": throughput's rings again.
    write(
        &dir,
        "norings.toml",
        "include = \"throughput\"\ndriver.\"rings\" = \"off\"\n",
    );
    write(
        &dir,
        "rings.toml",
        "include = \"norings\"\ndriver.\"rings\" = \"on\"\n",
    );
    let plan = json_with(
        &[&dir],
        &["plan", "--profile", "rings", "--root", s(&root), "--json"],
    );
    let c = change(&plan, rx).unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(c["to"], "8160", "{c}");
    assert!(
        c["origin"]
            .as_str()
            .is_some_and(|o| o.starts_with("built-in profile throughput")),
        "{c}"
    );
}
