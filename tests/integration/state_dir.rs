//! The state directory is nettune's own: a link (to /etc) is refused, so is
//! one another user owns or can write (as root); it is created 0700; a
//! FIFO where the lock or a journal should be is refused at once, never
//! waited on; a refusal leaves the directory as it was; a full disk
//! leaves no temporary file; an empty or relative `$NETTUNE_STATE_DIR` is
//! an error, never the default in disguise. Tests work on copies of
//! fixture trees (`--root`): nothing here touches the live host.

use std::fs;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::common::*;

/// `nettune ARGS --root TREE --state-dir STATE`, killed and failed if it runs past 20 s: a regression that blocks fails
/// the test instead of hanging it.
fn bounded(args: &[&str], tree: &Path, state: &Path) -> (i32, String, String) {
    let child = nettune()
        .args(args)
        .args(["--root", s(tree), "--state-dir", s(state)])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nettune");
    let (code, out, err) = finish_bounded(child, Duration::from_secs(20));
    (code.unwrap_or(-1), out, err)
}

/// The names in a directory, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// One line naming what was refused.
fn one_line_naming(err: &str, what: &str) {
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(what), "'{what}' not named: {err}");
}

#[test]
fn a_fifo_as_the_lock_file_is_refused_at_once() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    let (code, _, err) = bounded(&["apply", "--profile", "pps"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    let lock = state.join(".lock");
    fs::remove_file(&lock).expect("rm .lock");
    nix::unistd::mkfifo(&lock, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    for args in [&["rollback"][..], &["apply", "--profile", "latency"]] {
        let (code, _, err) = bounded(args, &tree, &state);
        assert_eq!(code, 2, "{args:?}: {err}");
        one_line_naming(&err, s(&lock));
        assert!(err.contains("FIFO"), "{err}");
    }
    // State 1 is still applied, and rolls back once the FIFO is gone.
    fs::remove_file(&lock).expect("rm fifo");
    let (code, out, err) = bounded(&["rollback"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rolled back state 1"), "{out}");
}

#[test]
fn a_fifo_as_a_journal_is_listed_as_unreadable_not_waited_for() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    let (code, _, err) = bounded(&["apply", "--profile", "pps"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    let fifo = state.join("state-0002.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let (code, out, err) = bounded(&["history"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("cannot be read") && out.contains("FIFO"),
        "{out}"
    );
    // It may be a newer state: state 1 is not rolled back under it.
    let (code, _, err) = bounded(&["rollback", "1"], &tree, &state);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("state-0002.json"), "{err}");
}

#[test]
fn a_state_dir_that_is_a_link_is_refused_and_nothing_is_written_through_it() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    // Stands for /etc: a directory the link points to.
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).expect("mkdir");
    let link = dir.path().join("state");
    std::os::unix::fs::symlink(&elsewhere, &link).expect("symlink");
    let before = fs::read_to_string(tree.join("proc/sys/net/core/rmem_max")).expect("read");
    let (code, _, err) = bounded(&["apply", "--profile", "pps"], &tree, &link);
    assert_eq!(code, 2, "{err}");
    one_line_naming(&err, s(&link));
    assert!(
        err.contains("symbolic link") && err.contains("--state-dir"),
        "{err}"
    );
    let (code, _, err) = bounded(&["rollback"], &tree, &link);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(names(&elsewhere).is_empty(), "{:?}", names(&elsewhere));
    let after = fs::read_to_string(tree.join("proc/sys/net/core/rmem_max")).expect("read");
    assert_eq!(before, after, "nothing applied");
}

#[test]
fn a_new_state_dir_is_private_and_as_root_a_dir_others_control_is_refused() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("new/state");
    let (code, _, err) = bounded(&["apply", "--profile", "pps"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    let mode = fs::metadata(&state).expect("stat").mode() & 0o777;
    assert_eq!(mode, 0o700, "created mode {mode:o}");
    if !is_root() {
        skipped(
            "a_new_state_dir_is_private_and_as_root_a_dir_others_control_is_refused",
            "the ownership checks apply to root only",
        );
        return;
    }
    // Root rolls back from a directory only root controls.
    let theirs = dir.path().join("theirs");
    fs::create_dir(&theirs).expect("mkdir");
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
    let (code, _, err) = bounded(&["apply", "--profile", "pps"], &tree, &theirs);
    assert_eq!(code, 2, "{err}");
    one_line_naming(&err, s(&theirs));
    assert!(err.contains("belongs to user 65534"), "{err}");
    assert!(names(&theirs).is_empty(), "{:?}", names(&theirs));
    let open = dir.path().join("open");
    fs::create_dir(&open).expect("mkdir");
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).expect("chmod");
    let (code, _, err) = bounded(&["apply", "--profile", "pps"], &tree, &open);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("written by group or others"), "{err}");
    assert!(names(&open).is_empty(), "{:?}", names(&open));
    // The applied state is still there to roll back.
    let (code, out, err) = bounded(&["rollback"], &tree, &state);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rolled back state 1"), "{out}");
}

#[test]
fn a_refused_rollback_leaves_the_state_dir_as_it_was() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    fs::create_dir(&state).expect("mkdir");
    fs::write(state.join("state-0001.json"), "{").expect("write");
    let (code, _, err) = bounded(&["rollback", "1"], &tree, &state);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be read"), "{err}");
    let (code, _, err) = bounded(&["rollback"], &tree, &state);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nothing to roll back"), "{err}");
    let (code, _, err) = bounded(&["rollback", "--forget", "1"], &tree, &state);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        names(&state),
        ["state-0001.json"],
        "no lock file, nothing else"
    );
}

/// A tmpfs mounted on a directory, unmounted on drop (also on failure).
struct Tmpfs<'a>(&'a Path);

impl Drop for Tmpfs<'_> {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn a_full_state_disk_leaves_no_temporary_file_and_changes_nothing() {
    if skip_unless_root("a_full_state_disk_leaves_no_temporary_file_and_changes_nothing") {
        return;
    }
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let disk = dir.path().join("disk");
    fs::create_dir(&disk).expect("mkdir");
    sh(&[
        "mount",
        "-t",
        "tmpfs",
        "-o",
        "size=64k,mode=0700",
        "nettune-test",
        s(&disk),
    ]);
    let _mounted = Tmpfs(&disk);
    let state = disk.join("state");
    fs::create_dir(&state).expect("mkdir");
    // Fill the disk: what is left cannot hold a journal.
    {
        use std::io::Write as _;
        let mut filler = fs::File::create(disk.join("filler")).expect("create");
        while filler.write_all(&[0u8; 4096]).is_ok() {}
    }
    let before = fs::read_to_string(tree.join("proc/sys/net/core/rmem_max")).expect("read");
    let (code, _, err) = bounded(&["apply", "--profile", "pps"], &tree, &state);
    assert_eq!(code, 2, "{err}");
    one_line_naming(&err, "No space left on device");
    assert!(err.contains("state-0001.json"), "{err}");
    let left = names(&state);
    assert!(left.iter().all(|n| !n.ends_with(".tmp")), "{left:?}");
    assert!(!left.iter().any(|n| n == "state-0001.json"), "{left:?}");
    let after = fs::read_to_string(tree.join("proc/sys/net/core/rmem_max")).expect("read");
    assert_eq!(before, after, "nothing applied without its journal");
}

#[test]
fn an_empty_or_relative_state_dir_in_the_environment_is_refused() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    for (value, said) in [("", "is set but empty"), ("states", "is a relative path")] {
        for args in [
            &["apply", "--profile", "pps", "--root", s(&tree)][..],
            &["rollback", "--root", s(&tree)],
            &["history", "--root", s(&tree)],
        ] {
            let out = nettune()
                .args(args)
                .current_dir(dir.path())
                .env("NETTUNE_STATE_DIR", value)
                .output()
                .expect("run");
            let (code, _, err) = split(out);
            assert_eq!(code, 2, "{args:?} with '{value}': {err}");
            one_line_naming(&err, "NETTUNE_STATE_DIR");
            assert!(err.contains(said), "{err}");
        }
    }
    assert!(
        !tree.join("var/lib/nettune").exists() && !dir.path().join("states").exists(),
        "no state directory was made"
    );
    // A relative --state-dir is the working directory's, shown absolute so
    // that the hint works from anywhere.
    let out = nettune()
        .args(["apply", "--profile", "pps", "--root", s(&tree)])
        .args(["--state-dir", "mine"])
        .current_dir(dir.path())
        .env_remove("NETTUNE_STATE_DIR")
        .output()
        .expect("run");
    let (code, out, err) = split(out);
    assert_eq!(code, 0, "{err}");
    let mine = dir.path().join("mine");
    assert!(mine.join("state-0001.json").is_file());
    assert!(out.contains(&format!("--state-dir {}", s(&mine))), "{out}");
    let (code, out, err) = bounded(&["rollback"], &tree, &mine);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rolled back state 1"), "{out}");
}

#[test]
fn the_lock_is_never_taken_through_a_link() {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let state = dir.path().join("state");
    fs::create_dir(&state).expect("mkdir");
    let target = dir.path().join("victim");
    std::os::unix::fs::symlink(&target, state.join(".lock")).expect("symlink");
    let (code, _, err) = bounded(&["apply", "--profile", "pps"], &tree, &state);
    assert_eq!(code, 2, "{err}");
    one_line_naming(&err, ".lock");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!target.exists(), "nothing created where the link points");
}
