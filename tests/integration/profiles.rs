//! Site profiles (TOML files that include a profile and override single
//! values), `nettune profiles`, `plan --check` and `rollback --json`: on
//! fixture hosts with profile directories in temp dirs
//! (NETTUNE_PROFILE_PATH), and live in a namespace the test creates.

use std::path::Path;

use serde_json::Value;

use crate::common::*;

const WEB: &str = r#"# a site profile for the tests
include = "pps"
description = "web front ends"
rps = "off"
sysctl."net.core.rmem_max" = 67108864
sysctl."net.core.netdev_max_backlog" = 20000
"#;

/// Run nettune with the profile directories `dirs`.
pub(crate) fn run_with(dirs: &[&Path], args: &[&str]) -> (i32, String, String) {
    let path = std::env::join_paths(dirs).expect("profile path");
    split(
        nettune()
            .env("NETTUNE_PROFILE_PATH", path)
            .args(args)
            .output()
            .expect("run nettune"),
    )
}

pub(crate) fn json_with(dirs: &[&Path], args: &[&str]) -> Value {
    let (code, out, err) = run_with(dirs, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
}

pub(crate) fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join(name), text).expect("write profile");
}

pub(crate) fn change<'a>(plan: &'a Value, target: &str) -> Option<&'a Value> {
    plan["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["target"] == target)
}

#[test]
fn a_site_profile_including_pps_overrides_two_values_on_a_fixture_host() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("etc");
    write(&dir, "web.toml", WEB);
    let file = dir.join("web.toml").display().to_string();
    let host = fixture("vm-2cpu-virtio");
    let root = s(&host);
    let pps = run_json(&["plan", "--profile", "pps", "--root", root, "--json"]);
    let web = json_with(
        &[&dir],
        &["plan", "--profile", "web", "--root", root, "--json"],
    );
    assert_eq!(web["profile"], "pps", "{web}");
    assert_eq!(web["site"]["name"], "web");
    assert_eq!(web["site"]["file"], file.as_str());

    // The two values the file overrides, each named by its line.
    for (target, to, line) in [
        ("/proc/sys/net/core/rmem_max", "67108864", 5),
        ("/proc/sys/net/core/netdev_max_backlog", "20000", 6),
    ] {
        let c = change(&web, target).unwrap_or_else(|| panic!("{target} not planned: {web}"));
        assert_eq!(c["to"], to, "{c}");
        let origin = c["origin"].as_str().expect("origin");
        assert!(
            origin.starts_with(&format!("{file}:{line} sysctl.")),
            "{origin}"
        );
        assert_ne!(change(&pps, target).map(|p| &p["to"]), Some(&c["to"]));
    }
    // rps = "off": pps plans the RX queue's RPS mask, the site profile
    // leaves it alone and says which line did.
    let rps = "/sys/class/net/eth0/queues/rx-0/rps_cpus";
    assert!(change(&pps, rps).is_some(), "pps plans {rps}: {pps}");
    assert!(change(&web, rps).is_none(), "{web}");
    let skipped = web["skipped"].as_array().expect("skipped");
    assert!(
        skipped.iter().any(|s| s["target"] == rps
            && s["reason"]
                .as_str()
                .is_some_and(|r| r.contains(&format!("rps = \"off\" ({file}:4)")))),
        "{web}"
    );
    // Every other value is pps's, and says it comes from pps, included
    // at line 2.
    for p in pps["changes"].as_array().expect("changes") {
        let target = p["target"].as_str().expect("target");
        if target == rps || target.ends_with("rmem_max") || target.ends_with("max_backlog") {
            continue;
        }
        let c = change(&web, target).unwrap_or_else(|| panic!("{target} dropped: {web}"));
        assert_eq!(c["to"], p["to"], "{target}");
        assert_eq!(
            c["origin"],
            format!("built-in profile pps (included at {file}:2)").as_str(),
            "{target}"
        );
    }
    assert_eq!(
        web["changes"].as_array().map(Vec::len),
        pps["changes"].as_array().map(|c| c.len() - 1),
        "{web}"
    );

    // The text names the profile, its file and every value's line.
    let (code, text, err) = run_with(&[&dir], &["plan", "--profile", "web", "--root", root]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains(&format!("profile web ({file}, includes pps)")),
        "{text}"
    );
    assert!(
        text.contains(&format!("from {file}:5 sysctl.\"net.core.rmem_max\"")),
        "{text}"
    );

    // --profile-file reads the same file without a search path.
    let (code, by_file, err) = run_with(&[], &["plan", "--profile-file", &file, "--root", root]);
    assert_eq!((code, by_file), (0, text), "{err}");
}

#[test]
fn profiles_lists_built_in_and_site_profiles_with_their_origin() {
    let work = tempfile::tempdir().expect("tempdir");
    let etc = work.path().join("etc");
    let lib = work.path().join("lib");
    write(&etc, "web.toml", WEB);
    write(&lib, "web.toml", "include = \"latency\"\n");
    write(&lib, "edge.toml", "include = \"web\"\nxps = \"off\"\n");
    write(&lib, "notes.txt", "not a profile");
    let listed = json_with(&[&etc, &lib], &["profiles", "--json"]);
    let profiles = listed["profiles"].as_array().expect("profiles");
    let names: Vec<&str> = profiles.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "pps",
            "latency",
            "throughput",
            "http",
            "baseline",
            "edge",
            "web"
        ],
        "{listed}"
    );
    let get = |name: &str| profiles.iter().find(|p| p["name"] == name).expect(name);
    assert_eq!(get("pps")["kind"], "built-in");
    let web = get("web");
    assert_eq!(web["kind"], "site");
    assert_eq!(web["origin"], s(&etc.join("web.toml")));
    assert_eq!(web["hides"][0], s(&lib.join("web.toml")));
    assert_eq!(web["includes"], serde_json::json!(["pps"]));
    // edge includes web by name: the one in etc, which hides lib's.
    assert_eq!(get("edge")["includes"], serde_json::json!(["web", "pps"]));

    let (code, text, _) = run_with(&[&etc, &lib], &["profiles"]);
    assert_eq!(code, 0);
    assert!(text.contains(s(&etc.join("web.toml"))), "{text}");
    assert!(
        text.contains(&format!("hides {}", s(&lib.join("web.toml")))),
        "{text}"
    );

    // A file that cannot be used is listed with its error, exit 1.
    write(&etc, "broken.toml", "include = \"nosuch\"\n");
    let (code, text, _) = run_with(&[&etc, &lib], &["profiles"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("unusable:") && text.contains("broken.toml:1"),
        "{text}"
    );
}

#[test]
fn a_bad_profile_file_is_one_line_naming_file_line_and_key_and_changes_nothing() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("profiles");
    let (_tree, host) = fixture_copy("vm-2cpu-virtio");
    let state = work.path().join("state");
    let cases: &[(&str, &str, &str)] = &[
        (
            "self",
            "include = \"self\"\n",
            "self.toml:1: include = 'self': the profile includes itself",
        ),
        (
            "ping",
            "include = \"pong\"\n",
            "pong.toml:1: include = 'ping': the profile includes itself (ping -> pong -> ping)",
        ),
        (
            "lost",
            "rps = \"off\"\ninclude = \"nosuch\"\n",
            "lost.toml:2: include: unknown profile 'nosuch'",
        ),
        (
            "key",
            "include = \"pps\"\n\nbusy = 1\n",
            "key.toml:3: busy: unknown key",
        ),
        (
            "range",
            "include = \"pps\"\nsysctl.\"net.core.busy_poll\" = 99999999\n",
            "range.toml:2: sysctl.\"net.core.busy_poll\": '99999999' is above 1000000",
        ),
        (
            "core",
            "include = \"pps\"\nsysctl.\"kernel.core_pattern\" = \"|/bin/sh\"\n",
            "core.toml:2: sysctl.\"kernel.core_pattern\": no nettune profile changes this sysctl",
        ),
        (
            "cpus",
            "include = \"pps\"\nirq.cpus = \"0-7\"\n",
            "cpus.toml:2: irq.cpus: CPU 2-7 not online",
        ),
        (
            "word",
            "include = \"pps\"\nrps = \"maybe\"\n",
            "word.toml:2: rps: 'maybe' is neither",
        ),
        (
            "toml",
            "include = \"pps\"\nrps = \n",
            "toml.toml:2: not TOML",
        ),
        ("none", "rps = \"off\"\n", "none.toml:1: include: missing"),
    ];
    write(&dir, "pong.toml", "include = \"ping\"\n");
    for (name, text, _) in cases {
        write(&dir, &format!("{name}.toml"), text);
    }
    let before = std::fs::read_to_string(host.join("proc/sys/net/core/rmem_max")).expect("read");
    refused_by_plan_and_apply(
        &dir,
        &host,
        &state,
        cases.iter().map(|(n, _, says)| (*n, *says)),
    );
    assert!(!state.exists(), "a refused apply made its state directory");
    let after = std::fs::read_to_string(host.join("proc/sys/net/core/rmem_max")).expect("read");
    assert_eq!(before, after);
}

#[test]
fn an_unknown_profile_name_is_refused_at_run_time_where_a_profile_is_named() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("profiles");
    write(&dir, "web.toml", WEB);
    let host = fixture("vm-2cpu-virtio");
    let out = work.path().join("exp");
    for args in [
        vec!["plan", "--profile", "fast", "--root", s(&host)],
        vec![
            "apply",
            "--profile",
            "fast",
            "--root",
            s(&host),
            "--dry-run",
        ],
        vec![
            "experiment",
            "run",
            "--configs",
            "current,fast",
            "--bench",
            "rr --proto tcp",
            "--out",
            s(&out),
        ],
    ] {
        let (code, stdout, err) = run_with(&[&dir], &args);
        assert_eq!(code, 2, "{args:?}: {stdout}{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("'fast'"), "{err}");
        if args[0] != "experiment" {
            // The error names what there is, site profiles included.
            assert!(err.contains("pps, latency") && err.contains("web"), "{err}");
        }
    }
    assert!(!out.exists());
    // A site profile is a config of an experiment like a built-in one: it
    // is read (and a bad one refused) before anything runs.
    write(
        &dir,
        "broken.toml",
        "include = \"pps\"\nsysctl.\"vm.swappiness\" = 1\n",
    );
    let (code, _, err) = run_with(
        &[&dir],
        &[
            "experiment",
            "run",
            "--configs",
            "current,broken",
            "--bench",
            "rr --proto tcp",
            "--out",
            s(&out),
        ],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("broken.toml:2: sysctl.\"vm.swappiness\""),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn rollback_json_has_apply_json_field_names_and_the_state_id() {
    let work = tempfile::tempdir().expect("tempdir");
    let (_tree, host) = fixture_copy("vm-2cpu-virtio");
    let state = work.path().join("state");
    let base = ["--root", s(&host), "--state-dir", s(&state), "--json"];
    let mut apply = vec!["apply", "--profile", "pps"];
    apply.extend(base);
    let applied = run_json(&apply);
    assert_eq!(applied["applied"], true, "{applied}");
    let id = applied["state_id"].as_u64().expect("state_id");
    assert_eq!(applied["state"]["id"], id);
    let mut rollback = vec!["rollback"];
    rollback.extend(base);
    let rolled = run_json(&rollback);
    assert_eq!(rolled["rolled_back"], true, "{rolled}");
    assert_eq!(rolled["state_id"], id);
    assert_eq!(rolled["changed"], applied["changed"]);
    assert_eq!(rolled["state"]["id"], id);
    // Nothing left to roll back: one line, exit 2.
    let (code, _, err) = run(&rollback);
    assert_eq!(code, 2, "{err}");
    // An apply that changes nothing says so with the same names.
    let again = run_json(&apply);
    assert_eq!(again["applied"], true, "{again}");
    let nothing = run_json(&apply);
    assert_eq!(nothing["applied"], false, "{nothing}");
    assert_eq!(nothing["changed"], 0);
    assert!(nothing["state_id"].is_null());
}

#[test]
fn plan_check_exits_1_while_changes_are_pending_and_0_after_apply_in_a_namespace() {
    if skip_unless_root(
        "plan_check_exits_1_while_changes_are_pending_and_0_after_apply_in_a_namespace",
    ) {
        return;
    }
    let ns = Netns::new("check");
    let (a, b) = (unique("ca"), unique("cb"));
    ns.veth(&a, (4, 4), &b, (1, 4));
    ns.wait_up(&[&a, &b]);
    let work = tempfile::tempdir().expect("tempdir");
    let state = work.path().join("state");
    let check = ["plan", "--profile", "pps", "--netns", &ns.name, "--check"];
    let (code, before, err) = run(&check);
    assert_eq!(code, 1, "{before}{err}");
    assert!(before.contains("change(s) pending"), "{before}");
    // The host-wide values pps wants are named apart and do not count.
    assert!(before.contains("host-wide"), "{before}");

    let applied = run_json(&[
        "apply",
        "--profile",
        "pps",
        "--netns",
        &ns.name,
        "--state-dir",
        s(&state),
        "--json",
    ]);
    assert_eq!(applied["applied"], true, "{applied}");
    let (code, after, err) = run(&check);
    assert_eq!(code, 0, "{after}{err}");
    assert!(after.contains("already matches"), "{after}");
    assert!(after.contains("host-wide"), "{after}");
    let (code, json, _) = run(&[
        "plan",
        "--profile",
        "pps",
        "--netns",
        &ns.name,
        "--check",
        "--json",
    ]);
    assert_eq!(code, 0);
    let plan: Value = serde_json::from_str(&json).expect("json");
    assert_eq!(plan["changes"], serde_json::json!([]));
    assert!(!plan["host_wide"].as_array().expect("host_wide").is_empty());

    let rolled = run_json(&["rollback", "--state-dir", s(&state), "--json"]);
    assert_eq!(rolled["rolled_back"], true, "{rolled}");
    assert_eq!(rolled["state_id"], applied["state_id"]);
    assert_eq!(rolled["changed"], applied["changed"]);
    let (code, _, err) = run(&check);
    assert_eq!(code, 1, "pending again after the rollback: {err}");
}

/// A site profile with `rfs = "off"` planned inside a namespace: every
/// RFS value (each RX queue's `rps_flow_cnt`, the host's flow table) is
/// listed as left alone by the file's line, never with the advice to raise
/// the host's flow table that the profile alone gives there.
#[test]
fn a_site_profile_with_rfs_off_leaves_the_flow_counts_alone_in_a_namespace() {
    if skip_unless_root("a_site_profile_with_rfs_off_leaves_the_flow_counts_alone_in_a_namespace") {
        return;
    }
    let ns = Netns::new("rfsoff");
    let (a, b) = (unique("ra"), unique("rb"));
    ns.veth(&a, (2, 2), &b, (2, 2));
    ns.wait_up(&[&a, &b]);
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("etc");
    write(&dir, "edge.toml", "include = \"latency\"\nrfs = \"off\"\n");
    let file = dir.join("edge.toml").display().to_string();
    let left = format!("left alone: rfs = \"off\" ({file}:2)");
    let args = [
        "plan",
        "--profile",
        "edge",
        "--netns",
        &ns.name,
        "--iface",
        &a,
    ];
    let (code, text, err) = run_with(&[&dir], &args);
    assert_eq!(code, 0, "{err}");
    assert!(!text.contains("RFS needs"), "{text}");
    assert!(
        text.contains(&format!("{a} rx-0/rps_flow_cnt, rx-1/rps_flow_cnt: {left}")),
        "{text}"
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let plan = json_with(&[&dir], &json_args);
    let flow_counts: Vec<&Value> = plan["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .filter(|s| {
            s["target"]
                .as_str()
                .is_some_and(|t| t.ends_with("rps_flow_cnt"))
        })
        .collect();
    assert_eq!(flow_counts.len(), 2, "{plan}");
    for s in flow_counts {
        assert_eq!(s["reason"], left.as_str(), "{s}");
    }
    assert!(change(
        &plan,
        &format!("/sys/class/net/{a}/queues/rx-0/rps_flow_cnt")
    )
    .is_none());
}

/// Each profile `name` of `dir` refused by `plan` and by `apply` on `host`
/// (state in `state`): exit 2, nothing on stdout, one line on stderr that
/// holds `says`.
pub(crate) fn refused_by_plan_and_apply<'a>(
    dir: &Path,
    host: &Path,
    state: &Path,
    cases: impl Iterator<Item = (&'a str, &'a str)>,
) {
    for (name, says) in cases {
        for verb in ["plan", "apply"] {
            let mut args = vec![verb, "--profile", name, "--root", s(host)];
            if verb == "apply" {
                args.extend(["--state-dir", s(state)]);
            }
            let (code, out, err) = run_with(&[dir], &args);
            assert_eq!(code, 2, "{verb} {name}: {out}{err}");
            assert!(out.is_empty(), "{verb} {name}: {out}");
            assert_eq!(err.lines().count(), 1, "{verb} {name}: {err}");
            assert!(err.contains(says), "{verb} {name}: {err}");
        }
    }
}

#[test]
fn apply_names_the_whole_include_chain_of_a_site_profile() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("profiles");
    write(&dir, "web.toml", WEB);
    write(&dir, "edge.toml", "include = \"web\"\nxps = \"off\"\n");
    let (_tree, host) = fixture_copy("vm-2cpu-virtio");
    let state = work.path().join("state");
    let base = ["--root", s(&host), "--state-dir", s(&state)];
    // Before, only the built-in profile at the chain's end was named
    // ("includes pps"), as if edge included it directly.
    for (verb, said) in [
        (
            &["apply", "--profile", "edge"][..],
            "applied profile edge (site, includes web -> pps)",
        ),
        (
            &["rollback"][..],
            "profile edge (site, includes web -> pps)",
        ),
    ] {
        let args: Vec<&str> = verb.iter().copied().chain(base).collect();
        let (code, text, err) = run_with(&[&dir], &args);
        assert_eq!(code, 0, "{err}");
        assert!(text.contains(said), "{text}");
    }
}
