//! doctor's fixes agree with plan's changes (the test the doctor issue
//! promises, listed in the plan issue): on every fixture tree, with and
//! without a path for the buffer rules, every finding that names a profile
//! lists changes that `nettune plan --profile P --json` makes exactly, its
//! fix names the values written, and applying that profile to a copy of the
//! tree makes the finding go away.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::common::{apply_args, fixture, fixture_copy, run, skip_unless_root, unique, Netns};

const HOSTS: [&str; 4] = [
    "two-socket-smt-8q",
    "vm-2cpu-virtio",
    "two-socket-nic-node1",
    "vm-2cpu-busy-poll",
];

/// doctor's path options, also given to `plan --profile throughput`.
const PATH: [&str; 4] = ["--bandwidth", "10gbit", "--rtt", "50ms"];

/// Rules judged from counters since boot (`--root` has one sample): an
/// apply changes settings, not the drops and squeezes already counted, so
/// they still fire on the tuned copy. Their changes are still checked
/// against the plan.
const COUNTER_RULES: &[&str] = &[
    "softirq.hotspot",
    "softnet.drops",
    "softnet.squeeze",
    "udp.rcvbuf-errors",
    "tcp.listen-overflows",
];

/// Rules whose fix is partly left to the operator by design: after the
/// apply they may still fire, but only for what the plan does not do
/// (cpu.idle-latency: deep idle states are the operator's trade of power
/// for wake-up time). What is left must name no profile and no change.
const PARTLY_PLANNED: &[&str] = &["cpu.idle-latency"];

/// Fixes that point to other findings for the values (softirq.hotspot:
/// "irq.one-cpu ... and rps.off give this host's values").
const VALUES_ELSEWHERE: &[&str] = &["softirq.hotspot"];

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `nettune doctor --json --root TREE [path]`, its findings.
fn doctor(tree: &Path, path: &[&str]) -> Vec<Value> {
    doctor_at(&["--root", s(tree)], path)
}

/// `nettune doctor --json PLACE [path]` (PLACE: `--root TREE` or
/// `--netns NAME`), its findings.
fn doctor_at(place: &[&str], path: &[&str]) -> Vec<Value> {
    let mut args = vec!["doctor", "--json"];
    args.extend_from_slice(place);
    args.extend_from_slice(path);
    let (code, out, err) = run(&args);
    assert!(code == 0 || code == 1, "doctor {args:?} exit {code}: {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}\nnot JSON: {e}"));
    v["findings"].as_array().expect("findings").clone()
}

/// The profile's options as `nettune plan` takes them: the path sizes
/// throughput only.
fn profile_args<'a>(profile: &'a str, path: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--profile", profile];
    if profile == "throughput" {
        args.extend_from_slice(path);
    }
    args
}

/// (target, from, to) of every change `nettune plan --json PLACE` prints.
fn plan_changes(
    place: &[&str],
    profile: &str,
    path: &[&str],
) -> BTreeSet<(String, String, String)> {
    let mut args = vec!["plan", "--json"];
    args.extend_from_slice(place);
    args.extend(profile_args(profile, path));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "plan {args:?}: {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}\nnot JSON: {e}"));
    v["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(triple)
        .collect()
}

fn triple(c: &Value) -> (String, String, String) {
    let field = |k: &str| {
        c[k].as_str()
            .unwrap_or_else(|| panic!("{k} in {c}"))
            .to_string()
    };
    (field("target"), field("from"), field("to"))
}

fn text<'a>(f: &'a Value, key: &str) -> &'a str {
    f[key].as_str().unwrap_or_else(|| panic!("{key} in {f}"))
}

/// A finding's identity across runs: its id and, for per-interface
/// findings, the interface that starts its title ("eth0: ...").
fn key(f: &Value) -> (String, Option<String>) {
    let title = text(f, "title");
    let iface = title
        .split_once(": ")
        .map(|(i, _)| i.to_string())
        .filter(|i| !i.contains(' '));
    (text(f, "id").to_string(), iface)
}

/// What is wrong with `findings` against the plans of `tree`.
fn disagreements(tree: &Path, path: &[&str], findings: &[Value]) -> Vec<String> {
    disagreements_at(&["--root", s(tree)], path, findings)
}

/// What is wrong with `findings` against the plans of PLACE: (a) a
/// profile named without changes; (b) a change the plan does not make
/// exactly; a value written that the fix does not name; (c) a fix that
/// needs a flag beyond the profile and doctor's own (`--iface`): the
/// suggested command must plan the change as it stands.
fn disagreements_at(place: &[&str], path: &[&str], findings: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    for f in findings {
        let id = text(f, "id");
        let fix = text(f, "fix");
        if fix.contains("--iface") {
            problems.push(format!("{id}: the fix needs another flag: {fix}"));
        }
        let changes = f["changes"].as_array().expect("changes on every finding");
        let Some(profile) = f["profile"].as_str() else {
            if !changes.is_empty() {
                problems.push(format!("{id}: changes without a profile"));
            }
            continue;
        };
        // (a) a profile is named only where its plan changes something; a
        // fix that leaves things alone says why.
        if changes.is_empty() && !fix.contains("alone") {
            problems.push(format!(
                "{id}: profile {profile} but no change and no reason"
            ));
        }
        // (b) exactly what `nettune plan` prints.
        let planned = plan_changes(place, profile, path);
        for c in changes {
            let t = triple(c);
            if !planned.contains(&t) {
                problems.push(format!("{id}: {t:?} is not in plan --profile {profile}"));
            }
            if !VALUES_ELSEWHERE.contains(&id) && !fix.contains(&t.2) {
                problems.push(format!("{id}: the fix does not name '{}' ({})", t.2, t.0));
            }
        }
    }
    problems
}

#[test]
fn every_planned_fix_is_what_plan_writes() {
    let mut named = 0;
    for host in HOSTS {
        let tree = fixture(host);
        for path in [&[][..], &PATH[..]] {
            let findings = doctor(&tree, path);
            named += findings.iter().filter(|f| f["profile"].is_string()).count();
            let problems = disagreements(&tree, path, &findings);
            assert!(
                problems.is_empty(),
                "{host} {path:?}:\n{}",
                problems.join("\n")
            );
        }
    }
    // The fixtures exercise it: most findings name a profile.
    assert!(named >= 20, "only {named} findings name a profile");
}

#[test]
fn the_checks_catch_a_fix_that_disagrees() {
    let tree = fixture("two-socket-smt-8q");
    let mut findings = doctor(&tree, &[]);
    let drops = findings
        .iter_mut()
        .find(|f| f["id"] == "softnet.drops")
        .expect("softnet.drops on this tree");
    // doctor's old advice: double the backlog.
    drops["changes"][0]["to"] = Value::from("2000");
    drops["fix"] = Value::from("Raise net.core.netdev_max_backlog from 1000 to 2000.");
    let problems = disagreements(&tree, &[], &findings);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].contains("netdev_max_backlog"), "{problems:#?}");

    // A value the fix does not name.
    let mut findings = doctor(&tree, &[]);
    let rings = findings
        .iter_mut()
        .find(|f| f["id"] == "nic.rings-small")
        .expect("nic.rings-small on this tree");
    rings["fix"] = Value::from("Raise the RX ring to its maximum.");
    let problems = disagreements(&tree, &[], &findings);
    assert!(
        problems.len() == 1 && problems[0].contains("'4096'"),
        "{problems:#?}"
    );
}

#[test]
fn applying_the_profile_clears_the_finding() {
    let mut cleared = 0;
    for host in HOSTS {
        for path in [&[][..], &PATH[..]] {
            let findings = doctor(&fixture(host), path);
            let profiles: BTreeSet<&str> = findings
                .iter()
                .filter_map(|f| f["profile"].as_str())
                .collect();
            for profile in profiles {
                let (_dir, tree) = fixture_copy(host);
                let mut args = vec!["apply", "--root", s(&tree)];
                args.extend(profile_args(profile, path));
                let (code, _, err) = run(&args);
                assert_eq!(code, 0, "{host}: apply {args:?}: {err}");
                let after = doctor(&tree, path);
                for f in findings.iter().filter(|f| f["profile"] == profile) {
                    let id = text(f, "id");
                    if COUNTER_RULES.contains(&id) {
                        continue;
                    }
                    let still = after.iter().find(|a| key(a) == key(f));
                    match still {
                        None => cleared += 1,
                        Some(a) if PARTLY_PLANNED.contains(&id) => {
                            assert!(
                                a["profile"].is_null()
                                    && a["changes"].as_array().is_some_and(|c| c.is_empty()),
                                "{host} {path:?}: after apply --profile {profile}, {id} still \
                                 has planned work: {a:#}"
                            );
                            cleared += 1;
                        }
                        Some(a) => panic!(
                            "{host} {path:?}: after apply --profile {profile}, doctor still \
                             reports {id}: {a:#}"
                        ),
                    }
                }
            }
        }
    }
    assert!(cleared >= 20, "only {cleared} findings checked");
}

#[test]
fn a_setting_the_plan_leaves_alone_is_explained_and_set_by_hand() {
    // Read-only in this tree (as rmem_max is inside a network namespace):
    // the plan reports it left alone, and doctor says so and how to set it.
    let (_dir, tree) = fixture_copy("two-socket-smt-8q");
    for name in ["core/rmem_max", "core/netdev_max_backlog"] {
        let file = tree.join("proc/sys/net").join(name);
        let mut perms = std::fs::metadata(&file).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o444);
        std::fs::set_permissions(&file, perms).expect("chmod");
    }
    let findings = doctor(&tree, &[]);
    let problems = disagreements(&tree, &[], &findings);
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    let find = |id: &str| {
        findings
            .iter()
            .find(|f| f["id"] == id)
            .unwrap_or_else(|| panic!("{id} missing"))
    };
    // Part of the fix is planned: the profile stays, the rest is by hand.
    let udp = find("udp.rcvbuf-errors");
    let fix = text(udp, "fix");
    assert_eq!(udp["profile"], "pps");
    assert!(
        fix.contains("By hand: sysctl -w net.core.rmem_max=16777216")
            && fix.contains("leaves net.core.rmem_max alone: read-only"),
        "{fix}"
    );
    assert!(udp["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .all(|c| c["target"] != "/proc/sys/net/core/rmem_max"));
    // None of it is planned: no profile is promised.
    let drops = find("softnet.drops");
    let fix = text(drops, "fix");
    assert!(drops["profile"].is_null(), "{drops:#}");
    assert!(
        fix.contains("to 10000 by hand")
            && fix.contains("leaves net.core.netdev_max_backlog alone"),
        "{fix}"
    );
}

/// A namespace as a container has it: veths (one with 4 RX queues, one
/// with 1), a bridge with a veth port, and a macvlan where the kernel has
/// it. Returns the namespace and the names of its veths that receive on
/// their own.
fn container() -> (Netns, Vec<String>) {
    let ns = Netns::new("dp");
    let (a, b, c, d) = (unique("da"), unique("db"), unique("dc"), unique("dd"));
    ns.veth(&a, (4, 4), &b, (1, 4));
    ns.veth(&c, (1, 1), &d, (1, 1));
    let br = unique("dbr");
    ns.ip(&["link", "add", &br, "type", "bridge"]);
    ns.ip(&["link", "set", &d, "master", &br]);
    ns.ip(&["link", "set", &br, "up"]);
    let mut up = vec![a.clone(), b.clone(), c.clone(), br.clone()];
    let mv = unique("dm");
    let macvlan = std::process::Command::new("ip")
        .args([
            "-n", &ns.name, "link", "add", &mv, "link", &a, "type", "macvlan",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if macvlan {
        ns.ip(&["link", "set", &mv, "up"]);
        up.push(mv);
    }
    let links: Vec<&str> = up.iter().map(String::as_str).collect();
    ns.wait_up(&links);
    (ns, vec![a, b, c, d])
}

#[test]
fn in_a_namespace_every_fix_is_what_plan_writes_without_further_flags() {
    if skip_unless_root("in_a_namespace_every_fix_is_what_plan_writes") {
        return;
    }
    let (ns, veths) = container();
    let place = ["--netns", ns.name.as_str()];
    let findings = doctor_at(&place, &[]);
    let problems = disagreements_at(&place, &[], &findings);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Every veth that receives on its own has RPS off: doctor says so for
    // each (the 4-queue one too), names pps, and its changes are the RPS
    // masks of all its RX queues; bridge and macvlan are not judged so.
    let rps_off: Vec<&Value> = findings.iter().filter(|f| f["id"] == "rps.off").collect();
    for veth in &veths {
        let f = rps_off
            .iter()
            .find(|f| key(f).1.as_deref() == Some(veth.as_str()))
            .unwrap_or_else(|| panic!("no rps.off for {veth}: {findings:#?}"));
        assert_eq!(f["profile"], "pps", "{f:#}");
        let masks = f["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .filter(|c| {
                c["target"]
                    .as_str()
                    .is_some_and(|t| t.ends_with("/rps_cpus"))
            })
            .count();
        let queues = if veth == &veths[0] { 4 } else { 1 };
        assert_eq!(masks, queues, "{veth}: {f:#}");
    }
    assert_eq!(rps_off.len(), veths.len(), "{rps_off:#?}");

    // Applying the profile the findings name clears them.
    let state = tempfile::tempdir().expect("state dir");
    let state_dir = state.path().to_str().expect("path");
    let (code, _, err) = run(&apply_args("pps", &ns.name, state_dir));
    assert_eq!(code, 0, "{err}");
    let after = doctor_at(&place, &[]);
    assert!(after.iter().all(|f| f["id"] != "rps.off"), "{after:#?}");
}
