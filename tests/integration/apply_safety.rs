//! Never the wrong host, never stuck: `--root` that is really `/` is
//! refused, states of different places are independent, a state that can
//! no longer be undone is shown and can be forgotten, journals of a newer
//! format are named and never misread, hints repeat the state directory,
//! irqbalance blocks IRQ changes unless allowed, drift is shown, --persist
//! finds IRQs by name.

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn history(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["history", "--json"];
    all.extend_from_slice(args);
    run_json(&all)
        .as_array()
        .expect("an array of states")
        .clone()
}

/// `nettune ARGS` as an unprivileged user (when we are root): even if the
/// refusal under test were broken, nothing on this host could be written.
fn run_unprivileged(args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nettune"));
    cmd.args(args);
    if is_root() {
        cmd.uid(65534).gid(65534);
    }
    split(cmd.output().expect("run nettune"))
}

#[test]
fn a_root_that_is_the_live_host_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The unprivileged user must be able to use the state directory.
    let state = dir.path().join("state");
    fs::create_dir(&state).expect("mkdir");
    fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod");
    fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let link = dir.path().join("host");
    std::os::unix::fs::symlink("/", &link).expect("symlink");
    for root in ["/", "/.", "//", s(&link)] {
        for verb in [vec!["apply", "--profile", "pps"], vec!["rollback"]] {
            let mut args = verb.clone();
            args.extend(["--root", root, "--state-dir", s(&state)]);
            let (code, _, err) = run_unprivileged(&args);
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(
                err.contains("live root directory")
                    || err.contains("no applied states")
                    || err.contains("nothing to roll back"),
                "{args:?}: {err}"
            );
            if verb[0] == "apply" {
                assert!(err.contains("nothing was changed"), "{args:?}: {err}");
            }
        }
    }
    let journals: Vec<_> = fs::read_dir(&state)
        .expect("state")
        .map(|e| e.expect("entry").file_name())
        .filter(|n| n.to_string_lossy().starts_with("state-"))
        .collect();
    assert!(journals.is_empty(), "no journal was written: {journals:?}");
}

#[test]
fn format_sh_without_dry_run_is_refused_and_applies_nothing() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    let (code, out, err) = run(&[
        "apply",
        "--profile",
        "pps",
        "--format",
        "sh",
        "--root",
        s(&tree),
        "--state-dir",
        s(&state),
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("--dry-run") && err.contains("nothing was changed"),
        "{err}"
    );
    assert!(!state.exists(), "no journal");
    let (code, out, err) = run(&[
        "apply",
        "--profile",
        "pps",
        "--format",
        "sh",
        "--dry-run",
        "--root",
        s(&tree),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("#!/bin/sh"), "{out}");
}

#[test]
fn the_state_dir_comes_from_the_environment_and_hints_repeat_it() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("env-state");
    let out = nettune()
        .args(["apply", "--profile", "pps", "--root", s(&tree)])
        .env("NETTUNE_STATE_DIR", &state)
        .output()
        .expect("run");
    let (code, out, err) = split(out);
    assert_eq!(code, 0, "{err}");
    assert!(
        state.join("state-0001.json").is_file(),
        "journal in $NETTUNE_STATE_DIR"
    );
    // The hint repeats where the state is, so that copying it works.
    let hint = out
        .lines()
        .find(|l| l.starts_with("undo with: "))
        .expect("an undo hint");
    assert!(
        hint.contains(&format!("--state-dir {}", s(&state))),
        "{hint}"
    );
    let command: Vec<&str> = hint["undo with: nettune ".len()..].split(' ').collect();
    let (code, out, err) = run(&command);
    assert_eq!(code, 0, "{hint}: {err}");
    assert!(out.contains("rolled back state 1"), "{out}");
}

#[test]
fn a_journal_of_a_newer_nettune_is_named_and_blocks_only_older_rollbacks() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    let on = ["--root", s(&tree), "--state-dir", s(&state)];
    let (code, _, err) = run(&[&["apply", "--profile", "pps"][..], &on].concat());
    assert_eq!(code, 0, "{err}");
    let mut newer: Value =
        serde_json::from_str(&fs::read_to_string(state.join("state-0001.json")).expect("read"))
            .expect("json");
    newer["schema_version"] = Value::from(99);
    newer["id"] = Value::from(2);
    fs::write(state.join("state-0002.json"), newer.to_string()).expect("write");
    let states = history(&on);
    assert_eq!(states.len(), 2);
    let unreadable = &states[1];
    assert_eq!(unreadable["status"], "unreadable");
    assert!(
        unreadable["error"]
            .as_str()
            .is_some_and(|e| e.contains("newer nettune") && e.contains("99")),
        "{unreadable}"
    );
    let (code, _, err) = run(&[&["rollback", "1"][..], &on].concat());
    assert_eq!(code, 2);
    assert!(
        err.contains("state-0002.json") && err.contains("newer"),
        "{err}"
    );
}

/// Apply in two namespaces; delete one. The other still rolls back, the
/// deleted one is shown as not undoable and can be forgotten; a namespace
/// created again under the old name is not taken for the old one.
#[test]
fn states_of_different_namespaces_are_independent_and_a_gone_one_can_be_forgotten() {
    if skip_unless_root(
        "states_of_different_namespaces_are_independent_and_a_gone_one_can_be_forgotten",
    ) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let st = ["--state-dir", s(&state)];
    let a = Netns::new("sa");
    let b = Netns::new("sb");
    for ns in [&a, &b] {
        let (x, y) = (unique("sx"), unique("sy"));
        ns.veth(&x, (2, 2), &y, (1, 2));
        let (code, out, err) = run(&[
            &[
                "apply",
                "--profile",
                "pps",
                "--netns",
                &ns.name,
                "--iface",
                &y,
            ][..],
            &st,
        ]
        .concat());
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("applied profile pps"), "{out}");
    }
    let a_name = a.name.clone();
    drop(a);
    let states = history(&st);
    let by_ns = |name: &str| -> Value {
        states
            .iter()
            .find(|s| s["netns"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no state of {name}: {states:?}"))
    };
    let gone = by_ns(&a_name);
    assert_eq!(gone["undoable"], false, "{gone}");
    assert!(
        gone["not_undoable_because"]
            .as_str()
            .is_some_and(|w| w.contains("no longer exists")),
        "{gone}"
    );
    assert_eq!(by_ns(&b.name)["undoable"], true);
    // State 2 (namespace b) rolls back although state 1 (a, older, gone)
    // is still listed as applied; and the default rollback picks it.
    let (code, out, err) = run(&[&["rollback"][..], &st].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rolled back state 2"), "{out}");
    // State 1 cannot be rolled back: said plainly, with the way out.
    let (code, _, err) = run(&[&["rollback", "1"][..], &st].concat());
    assert_eq!(code, 2);
    assert!(err.contains("--forget 1"), "{err}");
    let (code, out, err) = run(&[&["rollback", "--forget", "1"][..], &st].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing was restored"), "{out}");
    assert!(out.contains("rps_cpus"), "it names what it leaves: {out}");
    let states = history(&st);
    assert_eq!(states[0]["status"], "forgotten");

    // A new namespace under b's name after b is gone is another namespace.
    let (x, y) = (unique("sx"), unique("sy"));
    b.veth(&x, (2, 2), &y, (1, 2));
    let (code, _, err) = run(&[
        &[
            "apply",
            "--profile",
            "pps",
            "--netns",
            &b.name,
            "--iface",
            &y,
        ][..],
        &st,
    ]
    .concat());
    assert_eq!(code, 0, "{err}");
    let b_name = b.name.clone();
    drop(b);
    sh(&["ip", "netns", "add", &b_name]);
    let states = history(&st);
    let last = states.last().expect("state 3");
    assert!(
        last["not_undoable_because"]
            .as_str()
            .is_some_and(|w| w.contains("created again")),
        "{last}"
    );
    let _ = Command::new("ip").args(["netns", "del", &b_name]).status();
}

fn with_irqbalance(tree: &Path) {
    let proc_dir = tree.join("proc/4242");
    fs::create_dir_all(&proc_dir).expect("mkdir");
    fs::write(proc_dir.join("comm"), "irqbalance\n").expect("write");
}

#[test]
fn irqbalance_blocks_irq_affinity_changes_unless_allowed() {
    let (dir, tree) = fixture_copy("two-socket-smt-8q");
    with_irqbalance(&tree);
    let state = dir.path().join("state");
    let on = ["--root", s(&tree), "--state-dir", s(&state)];
    let (code, _, err) = run(&[&["apply", "--profile", "pps"][..], &on].concat());
    assert_eq!(code, 2);
    for words in [
        "irqbalance",
        "systemctl stop irqbalance",
        "IRQBALANCE_BANNED_CPULIST",
        "--banirq",
        "--allow-irqbalance",
        "nothing was changed",
    ] {
        assert!(err.contains(words), "{words}: {err}");
    }
    assert!(!state.join("state-0001.json").exists());
    let (code, out, err) = run(&[
        &["apply", "--profile", "pps", "--allow-irqbalance"][..],
        &on,
    ]
    .concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("applied profile pps"), "{out}");
}

#[test]
fn history_shows_a_value_that_changed_after_apply() {
    let (dir, tree) = fixture_copy("two-socket-smt-8q");
    let state = dir.path().join("state");
    let on = ["--root", s(&tree), "--state-dir", s(&state)];
    let (code, _, err) = run(&[&["apply", "--profile", "pps"][..], &on].concat());
    assert_eq!(code, 0, "{err}");
    let journal: Value =
        serde_json::from_str(&fs::read_to_string(state.join("state-0001.json")).expect("read"))
            .expect("json");
    let rps = journal["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| {
            c["target"]
                .as_str()
                .is_some_and(|t| t.ends_with("/rps_cpus"))
        })
        .expect("an rps_cpus change")
        .clone();
    let target = rps["target"].as_str().expect("target");
    // Someone (irqbalance, a driver reload) puts it back.
    fs::write(tree.join(target.trim_start_matches('/')), "0\n").expect("write");
    let states = history(&on);
    let drift = states[0]["drift"].as_array().expect("drift checked");
    assert_eq!(drift.len(), 1, "{drift:?}");
    assert_eq!(drift[0]["target"], target);
    assert_eq!(drift[0]["now"], "0");
    let (code, out, _) = run(&[&["history"][..], &on].concat());
    assert_eq!(code, 0);
    assert!(out.contains("no longer holds"), "{out}");
    // Doctor says so too, as a finding.
    let out = nettune()
        .args(["doctor", "--json", "--root", s(&tree)])
        .env("NETTUNE_STATE_DIR", &state)
        .output()
        .expect("doctor");
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    let finding = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["id"] == "state.drift")
        .unwrap_or_else(|| panic!("no state.drift: {report:#}"));
    assert!(
        finding["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("applied state 1")),
        "{finding}"
    );
    assert!(
        finding["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("rps_cpus is '0'")),
        "{finding}"
    );
}

#[test]
fn persist_finds_irqs_by_name_and_leaves_no_temporary_file() {
    let (dir, tree) = fixture_copy("two-socket-smt-8q");
    let state = dir.path().join("state");
    let on = ["--root", s(&tree), "--state-dir", s(&state)];
    let (code, _, err) = run(&[&["apply", "--profile", "pps", "--persist"][..], &on].concat());
    assert_eq!(code, 0, "{err}");
    let script = fs::read_to_string(tree.join("etc/nettune/apply-devices.sh")).expect("script");
    assert!(script.contains("irq_named() {"), "{script}");
    assert!(
        !script.contains("> /proc/irq/") || script.contains("/proc/irq/$irq/"),
        "IRQ numbers of this boot: {script}"
    );
    assert!(script.contains("irq=$(irq_named '"), "{script}");
    for d in ["etc/nettune", "etc/sysctl.d", "etc/systemd/system"] {
        for entry in fs::read_dir(tree.join(d)).expect("dir") {
            let name = entry.expect("entry").file_name();
            assert!(
                !name.to_string_lossy().contains("tmp"),
                "temporary file left: {d}/{name:?}"
            );
        }
    }
    // The script's IRQ lookup works on this tree's /proc/interrupts.
    let name = script
        .lines()
        .find_map(|l| l.strip_prefix("irq=$(irq_named '"))
        .and_then(|rest| rest.split('\'').next())
        .expect("a named IRQ")
        .to_string();
    let func = &script[script.find("irq_named() {").expect("func")..];
    let func = &func[..func.find("\n}\n").expect("end") + 3];
    let lookup = format!(
        "{}irq_named '{name}' < /dev/null",
        func.replace("/proc/interrupts", s(&tree.join("proc/interrupts")))
    );
    let irq = sh(&["sh", "-c", &lookup]);
    assert!(irq.trim().parse::<u32>().is_ok(), "{name}: {irq:?}");
}
