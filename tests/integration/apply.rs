//! `nettune apply`, `rollback` and `history` on copies of the fixture trees
//! (`--root`): apply then rollback leaves the tree byte-identical, a second
//! apply changes nothing, a write failing half-way leaves the tree as it
//! was, an apply killed part-way is fully restored by rollback.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;

use serde_json::Value;

use crate::common::*;

/// Every file's bytes, every symlink's target and every directory of a
/// tree, by path relative to it; `skip` (relative) is left out.
#[derive(Debug, PartialEq, Eq)]
enum Node {
    Dir,
    File(Vec<u8>),
    Link(String),
}

fn snapshot(root: &Path, skip: Option<&str>) -> BTreeMap<String, Node> {
    fn walk(root: &Path, dir: &Path, skip: Option<&str>, out: &mut BTreeMap<String, Node>) {
        for entry in fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            let rel = path
                .strip_prefix(root)
                .expect("inside")
                .display()
                .to_string();
            if skip.is_some_and(|s| rel == s || rel.starts_with(&format!("{s}/"))) {
                continue;
            }
            let meta = fs::symlink_metadata(&path).expect("meta");
            if meta.file_type().is_symlink() {
                let target = fs::read_link(&path).expect("link");
                out.insert(rel, Node::Link(target.display().to_string()));
            } else if meta.is_dir() {
                out.insert(rel, Node::Dir);
                walk(root, &path, skip, out);
            } else {
                out.insert(rel, Node::File(fs::read(&path).expect("read")));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, skip, &mut out);
    out
}

fn assert_same_tree(before: &BTreeMap<String, Node>, after: &BTreeMap<String, Node>) {
    let differ: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(differ.is_empty(), "tree differs at {differ:?}");
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `nettune ARGS --root TREE --state-dir STATE`, returning (code, out, err).
fn on_tree(args: &[&str], tree: &Path, state: &Path) -> (i32, String, String) {
    let mut all = args.to_vec();
    all.extend(["--root", s(tree), "--state-dir", s(state)]);
    run(&all)
}

fn history(tree: &Path, state: &Path) -> Vec<Value> {
    let (code, out, err) = on_tree(&["history", "--json"], tree, state);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<Value>(&out)
        .expect("json")
        .as_array()
        .expect("array")
        .clone()
}

#[test]
fn apply_then_rollback_leaves_every_fixture_byte_identical() {
    for (fixture_name, profile) in [
        ("two-socket-smt-8q", "throughput"),
        ("two-socket-smt-8q", "latency"),
        ("two-socket-nic-node1", "pps"),
        ("two-socket-nic-node1", "baseline"),
        ("vm-2cpu-virtio", "pps"),
        ("vm-2cpu-virtio", "latency"),
    ] {
        let (dir, tree) = fixture_copy(fixture_name);
        let state = dir.path().join("state");
        let before = snapshot(&tree, None);
        let planned = run_json(&["plan", "--profile", profile, "--root", s(&tree), "--json"]);
        let n = planned["changes"].as_array().expect("changes").len();
        assert!(n > 0, "{fixture_name} {profile}: nothing planned");

        let (code, out, err) =
            on_tree(&["apply", "--profile", profile, "--persist"], &tree, &state);
        assert_eq!(code, 0, "{fixture_name} {profile}: {err}");
        assert!(out.contains(&format!("{n} change(s)")), "{out}");
        let applied = snapshot(&tree, None);
        assert_ne!(
            applied, before,
            "{fixture_name} {profile}: apply changed nothing"
        );
        assert!(tree.join("etc/sysctl.d/90-nettune.conf").is_file());
        // What the plan promised is what the tree now says.
        let after = run_json(&["plan", "--profile", profile, "--root", s(&tree), "--json"]);
        assert_eq!(
            after["changes"],
            Value::Array(Vec::new()),
            "{fixture_name} {profile}"
        );

        let (code, out, err) = on_tree(&["rollback"], &tree, &state);
        assert_eq!(code, 0, "{fixture_name} {profile}: {err}");
        assert!(out.contains("rolled back state 1"), "{out}");
        assert_same_tree(&before, &snapshot(&tree, None));
        let states = history(&tree, &state);
        assert_eq!(states.len(), 1);
        assert_eq!(states[0]["rolled_back"], true);
        assert_eq!(states[0]["changes"], n);
    }
}

#[test]
fn a_second_apply_changes_nothing() {
    let (dir, tree) = fixture_copy("two-socket-smt-8q");
    let state = dir.path().join("state");
    let (code, _, err) = on_tree(&["apply", "--profile", "pps"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    let once = snapshot(&tree, None);
    let (code, out, err) = on_tree(&["apply", "--profile", "pps"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing to change"), "{out}");
    assert_same_tree(&once, &snapshot(&tree, None));
    assert_eq!(
        history(&tree, &state).len(),
        1,
        "no state for a no-op apply"
    );
}

#[test]
fn the_default_state_dir_is_inside_the_tree() {
    let (_dir, tree) = fixture_copy("vm-2cpu-virtio");
    let before = snapshot(&tree, Some("var"));
    let (code, out, err) = run(&["apply", "--profile", "latency", "--root", s(&tree)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "nettune rollback 1 --root {}",
            s(&fs::canonicalize(&tree).expect("abs"))
        )),
        "{out}"
    );
    let journal = tree.join("var/lib/nettune/state-0001.json");
    let j: Value =
        serde_json::from_str(&fs::read_to_string(&journal).expect("journal")).expect("json");
    assert_eq!(j["status"], "complete");
    assert_eq!(j["profile"], "latency");
    let halt = j["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["target"] == "/sys/module/haltpoll/parameters/guest_halt_poll_ns")
        .expect("haltpoll in the journal");
    assert_eq!(halt["original"], "0\n", "the original is kept exactly");
    let (code, _, err) = run(&["rollback", "--root", s(&tree)]);
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&before, &snapshot(&tree, Some("var")));
}

/// Give a tree (and everything in it) to `uid`.
fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).expect("lchown");
    let meta = fs::symlink_metadata(path).expect("meta");
    if meta.is_dir() {
        for entry in fs::read_dir(path).expect("read_dir") {
            chown_tree(&entry.expect("entry").path(), uid);
        }
    }
}

const NOBODY: u32 = 65534;

#[test]
fn a_write_failing_half_way_leaves_the_tree_as_it_was() {
    // A real refusal by the kernel: the tree belongs to an unprivileged
    // user who runs apply, except one target in the middle of the plan,
    // which stays root's (mode 0644: it looks writable, EACCES on write).
    if skip_unless_root("a_write_failing_half_way_leaves_the_tree_as_it_was") {
        return;
    }
    let (dir, tree) = fixture_copy("two-socket-smt-8q");
    let state = dir.path().join("state");
    let plan = run_json(&["plan", "--profile", "pps", "--root", s(&tree), "--json"]);
    let changes = plan["changes"].as_array().expect("changes");
    let victim = changes
        .iter()
        .skip(changes.len() / 2)
        .map(|c| c["target"].as_str().expect("target").to_string())
        .find(|t| t.ends_with("/rps_cpus"))
        .expect("an RPS change in the second half");
    chown_tree(dir.path(), NOBODY);
    let real = tree.join(victim.trim_start_matches('/'));
    std::os::unix::fs::lchown(&real, Some(0), Some(0)).expect("chown root");
    let mut perms = fs::metadata(&real).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
    fs::set_permissions(&real, perms).expect("chmod");
    let mut perms = fs::metadata(dir.path()).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs::set_permissions(dir.path(), perms).expect("chmod tempdir");
    let before = snapshot(&tree, None);

    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_nettune"))
        .args([
            "apply",
            "--profile",
            "pps",
            "--root",
            s(&tree),
            "--state-dir",
            s(&state),
        ])
        .output()
        .expect("setpriv");
    let (code, _, err) = split(out);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&victim), "the failed change is named: {err}");
    assert!(err.contains("Permission denied"), "{err}");
    assert!(err.contains("were restored"), "{err}");
    assert!(
        !err.contains("the 0 setting(s)"),
        "changes were made before the failure: {err}"
    );
    assert_same_tree(&before, &snapshot(&tree, None));
    let states = history(&tree, &state);
    assert_eq!(states[0]["status"], "failed");
    // Rolled back by the user who owns the states: root refuses a state
    // directory another user owns.
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_nettune"))
        .args(["rollback", "--root", s(&tree), "--state-dir", s(&state)])
        .output()
        .expect("setpriv");
    let (code, _, err) = split(out);
    assert_eq!(code, 2);
    assert!(err.contains("nothing to roll back"), "{err}");
}

#[test]
fn an_apply_killed_part_way_is_restored_by_rollback() {
    let (dir, tree) = fixture_copy("two-socket-smt-8q");
    let state = dir.path().join("state");
    let before = snapshot(&tree, None);
    // Test hook (docs/apply.md): SIGKILL itself after 5 changes.
    let out = nettune()
        .args(["apply", "--profile", "throughput", "--persist"])
        .args(["--root", s(&tree), "--state-dir", s(&state)])
        .env("NETTUNE_TEST_KILL_AFTER", "5")
        .output()
        .expect("run");
    assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{out:?}");
    assert_ne!(
        snapshot(&tree, None),
        before,
        "5 changes were made before the kill"
    );
    let states = history(&tree, &state);
    assert_eq!(states[0]["status"], "applying");

    // A new apply refuses to stack on an interrupted one.
    let (code, _, err) = on_tree(&["apply", "--profile", "pps"], &tree, &state);
    assert_eq!(code, 2);
    assert!(
        err.contains("interrupted") && err.contains("nettune rollback 1"),
        "{err}"
    );

    let (code, _, err) = on_tree(&["rollback"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&before, &snapshot(&tree, None));
    assert_eq!(history(&tree, &state)[0]["rolled_back"], true);
}

#[test]
fn a_kill_right_after_the_journal_changes_nothing_and_rolls_back_cleanly() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    let before = snapshot(&tree, None);
    let out = nettune()
        .args([
            "apply",
            "--profile",
            "pps",
            "--root",
            s(&tree),
            "--state-dir",
            s(&state),
        ])
        .env("NETTUNE_TEST_KILL_AFTER", "0")
        .output()
        .expect("run");
    assert_eq!(out.status.signal(), Some(libc::SIGKILL));
    // The journal is on disk with every original before the first change.
    let journal: Value = serde_json::from_str(
        &fs::read_to_string(state.join("state-0001.json")).expect("journal written first"),
    )
    .expect("json");
    assert!(journal["changes"].as_array().expect("changes").len() >= 5);
    assert_same_tree(&before, &snapshot(&tree, None));
    let (code, _, err) = on_tree(&["rollback", "1"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    assert_same_tree(&before, &snapshot(&tree, None));
}

#[test]
fn stacked_states_roll_back_newest_first() {
    let (dir, tree) = fixture_copy("two-socket-nic-node1");
    let state = dir.path().join("state");
    let before = snapshot(&tree, None);
    for profile in ["pps", "latency"] {
        let (code, _, err) = on_tree(&["apply", "--profile", profile, "--persist"], &tree, &state);
        assert_eq!(code, 0, "{profile}: {err}");
    }
    // Both states' sysctls are persisted.
    let conf = fs::read_to_string(tree.join("etc/sysctl.d/90-nettune.conf")).expect("conf");
    assert!(conf.contains("net.core.rmem_max = 16777216"), "{conf}");
    assert!(conf.contains("net.core.busy_read = 50"), "{conf}");
    let (code, _, err) = on_tree(&["rollback", "1"], &tree, &state);
    assert_eq!(code, 2);
    assert!(
        err.contains("roll it back first") && err.contains("nettune rollback 2"),
        "{err}"
    );
    for _ in 0..2 {
        let (code, _, err) = on_tree(&["rollback"], &tree, &state);
        assert_eq!(code, 0, "{err}");
    }
    assert_same_tree(&before, &snapshot(&tree, None));
    let (code, out, err) = on_tree(&["history"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("rolled back").count(), 2, "{out}");
    assert!(out.contains("pps") && out.contains("latency"), "{out}");
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let (dir, tree) = fixture_copy("two-socket-smt-8q");
    let state = dir.path().join("state");
    let before = snapshot(&tree, None);
    let (code, out, err) = on_tree(&["apply", "--profile", "pps", "--dry-run"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    let (_, plan_text, _) = run(&["plan", "--profile", "pps", "--root", s(&tree)]);
    assert_eq!(out, plan_text);
    assert_same_tree(&before, &snapshot(&tree, None));
    assert!(!state.exists(), "no journal for a dry run");
}

#[test]
fn live_apply_without_root_is_refused_before_anything() {
    if !is_root() {
        // Already unprivileged: the plain call must refuse.
        let (code, _, err) = run(&["apply", "--profile", "pps", "--state-dir", "/nonexistent"]);
        assert_eq!(code, 2);
        assert!(err.contains("needs root"), "{err}");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_nettune"))
        .args(["apply", "--profile", "pps", "--state-dir", s(dir.path())])
        .output()
        .expect("setpriv");
    let (code, _, err) = split(out);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("needs root") && err.contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(
        fs::read_dir(dir.path()).expect("dir").count(),
        0,
        "no journal"
    );
}

#[test]
fn persist_with_netns_is_refused() {
    let (code, _, err) = run(&["apply", "--profile", "pps", "--netns", "nope", "--persist"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--persist cannot be used with --netns"),
        "{err}"
    );
}

#[test]
fn a_persist_that_cannot_be_written_undoes_the_whole_apply() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    // /etc is a file: nothing can be created below it.
    fs::write(tree.join("etc"), "not a directory\n").expect("write");
    let before = snapshot(&tree, None);
    let (code, _, err) = on_tree(&["apply", "--profile", "pps", "--persist"], &tree, &state);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--persist") && err.contains("every setting was restored"),
        "{err}"
    );
    assert_same_tree(&before, &snapshot(&tree, None));
    assert_eq!(history(&tree, &state)[0]["status"], "failed");
}
