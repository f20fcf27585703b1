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
    // plan says it beside every IRQ change, in text, JSON and sh.
    let (code, text, _) = run(&["plan", "--profile", "pps", "--root", s(&tree)]);
    assert_eq!(code, 0);
    let irq_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("/proc/irq/"))
        .collect();
    assert!(!irq_lines.is_empty(), "{text}");
    for line in &irq_lines {
        assert!(
            line.ends_with("[irqbalance runs: it will move this IRQ again]"),
            "{line}"
        );
    }
    assert!(text.contains("warning: irqbalance is running"), "{text}");
    let plan = run_json(&["plan", "--profile", "pps", "--root", s(&tree), "--json"]);
    let irqs: Vec<u64> = plan["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .filter_map(|c| {
            c["target"]
                .as_str()?
                .strip_prefix("/proc/irq/")?
                .split('/')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(
        plan["irqbalance"]["irqs"],
        serde_json::json!(irqs),
        "{plan:#}"
    );
    assert_eq!(plan["irqbalance"]["pids"], serde_json::json!([4242]));
    let (_, script, _) = run(&[
        "plan",
        "--profile",
        "pps",
        "--root",
        s(&tree),
        "--format",
        "sh",
    ]);
    assert!(
        script.contains("# WARNING: irqbalance is running"),
        "{script}"
    );
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
    // Its commands say where the state is, so that they work when copied.
    let fix = finding["fix"].as_str().expect("fix");
    for command in [
        format!(
            "`nettune rollback 1 --root {} --state-dir {}`",
            s(&tree),
            s(&state)
        ),
        format!(
            "`nettune apply --profile pps --root {} --state-dir {}`",
            s(&tree),
            s(&state)
        ),
    ] {
        assert!(fix.contains(&command), "{command} not in: {fix}");
    }
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

/// A tree whose files lead out of it (a capture with a symlink to the live
/// /proc/sys, or to any other place) is never written through: the apply
/// fails naming the link, everything already changed is restored, and the
/// place the link leads to is untouched.
#[test]
fn a_link_out_of_the_tree_is_never_written_through() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let outside = dir.path().join("outside-ipv4");
    let ipv4 = tree.join("proc/sys/net/ipv4");
    fs::rename(&ipv4, &outside).expect("move ipv4 out");
    std::os::unix::fs::symlink(&outside, &ipv4).expect("link it back");
    let before = fs::read_to_string(outside.join("udp_rmem_min")).expect("read");
    let state = dir.path().join("state");
    let on = ["--root", s(&tree), "--state-dir", s(&state)];
    let (code, _, err) = run(&[&["apply", "--profile", "pps"][..], &on].concat());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("udp_rmem_min") && err.contains("outside the tree"),
        "{err}"
    );
    assert!(err.contains("were restored"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert_eq!(
        fs::read_to_string(outside.join("udp_rmem_min")).expect("read"),
        before
    );
    // --persist: /etc linked out of the tree is refused the same way.
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let etc = dir.path().join("outside-etc");
    fs::create_dir(&etc).expect("mkdir");
    std::os::unix::fs::symlink(&etc, tree.join("etc")).expect("link");
    let state = dir.path().join("state");
    let on = ["--root", s(&tree), "--state-dir", s(&state)];
    let (code, _, err) = run(&[&["apply", "--profile", "pps", "--persist"][..], &on].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("outside the tree"), "{err}");
    assert!(
        fs::read_dir(&etc).expect("etc").next().is_none(),
        "nothing was written where the link leads"
    );
}

/// `/` bind-mounted elsewhere is the live host under another name. Run in
/// a private mount namespace (the mount vanishes with it) and, after the
/// mount, as an unprivileged user: even a broken refusal could not write
/// this host.
#[test]
fn a_bind_mount_of_the_live_root_is_refused() {
    if skip_unless_root("a_bind_mount_of_the_live_root_is_refused") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mnt = dir.path().join("mnt");
    let state = dir.path().join("state");
    fs::create_dir(&mnt).expect("mkdir");
    fs::create_dir(&state).expect("mkdir");
    for d in [dir.path(), &state] {
        fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o777)).expect("chmod");
    }
    let script = format!(
        "mount --bind / {mnt} && exec setpriv --reuid 65534 --regid 65534 --clear-groups {bin} \
         apply --profile pps --root {mnt} --state-dir {state}",
        mnt = s(&mnt),
        bin = env!("CARGO_BIN_EXE_nettune"),
        state = s(&state)
    );
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare");
    let (code, _, err) = split(out);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("live root directory") && err.contains("nothing was changed"),
        "{err}"
    );
    assert!(fs::read_dir(&state).expect("state").next().is_none());
}

/// Every hint names the command to copy with the options it needs: a state
/// that cannot be undone is dropped with `rollback --forget N --state-dir
/// DIR`, in history and in rollback's refusal, and that command works.
#[test]
fn hints_about_a_state_repeat_the_state_dir() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("my states");
    let (code, _, err) = run(&[
        "apply",
        "--profile",
        "pps",
        "--root",
        s(&tree),
        "--state-dir",
        s(&state),
    ]);
    assert_eq!(code, 0, "{err}");
    fs::remove_dir_all(&tree).expect("the tree goes away");
    let forget = format!("nettune rollback --forget 1 --state-dir '{}'", s(&state));
    let (code, out, _) = run(&["history", "--state-dir", s(&state)]);
    assert_eq!(code, 0);
    assert!(out.contains(&forget), "{forget} not in:\n{out}");
    let (code, _, err) = run(&["rollback", "--state-dir", s(&state)]);
    assert_eq!(code, 2);
    assert!(err.contains("nettune history --state-dir '"), "{err}");
    let (code, _, err) = run(&["rollback", "1", "--state-dir", s(&state)]);
    assert_eq!(code, 2);
    assert!(err.contains(&forget), "{err}");
    // The hint, pasted into a shell, does what it says.
    let pasted = forget.replacen("nettune", env!("CARGO_BIN_EXE_nettune"), 1);
    let (code, out, err) = split(
        Command::new("sh")
            .args(["-c", &pasted])
            .output()
            .expect("sh"),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("forgot state 1"), "{out}");
}

/// A user who is not root, rolling back the states root applied (the
/// state directory is root's, as /var/lib/nettune is): told that rollback
/// needs root, as apply says, not which file could not be opened.
#[test]
fn rollback_as_a_user_says_it_needs_root() {
    if skip_unless_root("rollback_as_a_user_says_it_needs_root") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let state = dir.path().join("state");
    fs::create_dir(&state).expect("mkdir");
    let journal = state.join("state-1.json");
    fs::write(&journal, "{}").expect("journal");
    fs::write(state.join(".lock"), "").expect("lock");
    for file in [&journal, &state.join(".lock")] {
        fs::set_permissions(file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("chmod");
    }
    // Root's directory as apply makes it, and one others may list.
    for mode in [0o700, 0o755] {
        fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .expect("chmod");
        for extra in [&[][..], &["1"], &["--forget", "1"]] {
            let mut args = vec!["rollback", "--state-dir", s(&state)];
            args.extend_from_slice(extra);
            let (code, out, err) = run_unprivileged(&args);
            assert_eq!(code, 2, "{mode:o} {args:?}: {err}");
            assert!(out.is_empty(), "{out}");
            assert!(
                err.contains("nettune rollback needs root") && err.contains("run it as root"),
                "{mode:o} {args:?}: {err}"
            );
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        }
    }
}
