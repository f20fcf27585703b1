//! nettune as a system tool: `--version` names the commit, the man pages
//! and completions come from the command line's own definitions, and what
//! `apply --persist` writes re-applies an interface's settings when it
//! appears (the script for one interface, the udev rule through
//! `udevadm test` on a veth). The package itself is checked by
//! scripts/test-package (lintian, `man -l`, `systemd-analyze verify`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::CommandFactory as _;

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn version_names_the_commit_built_from() {
    let (code, out, err) = run(&["--version"]);
    assert_eq!(code, 0, "{err}");
    let line = out.trim();
    let commit = line
        .strip_prefix(&format!("nettune {} (commit ", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not 'nettune VERSION (commit HASH)': {line}"));
    let head = Command::new("git")
        .args(["-C", s(repo()), "log", "-1", "--abbrev=12", "--format=%h"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        // A checkout: exactly the commit HEAD names (a build after a
        // commit must not keep the previous one).
        Some(head) => assert_eq!(commit, head, "{line}"),
        None => assert!(!commit.is_empty(), "{line}"),
    }
}

/// `bash ARGS`, asserting success; its stdout.
fn bash(args: &[&str]) -> String {
    let out = Command::new("bash").args(args).output().expect("bash");
    assert!(
        out.status.success(),
        "bash {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// bash completing `words` (the last one is being typed) with the script
/// `nettune completions bash` prints, as bash does on TAB.
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; \
         COMP_POINT=${{#COMP_LINE}}; _nettune nettune '{}' '{}'; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        s(script),
        quoted.join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len().saturating_sub(2)],
    );
    bash(&["--norc", "-c", &program])
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn bash_completion_is_valid_and_completes_commands_and_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, script, err) = run(&["completions", "bash"]);
    assert_eq!(code, 0, "{err}");
    let path = dir.path().join("nettune");
    fs::write(&path, &script).expect("write");
    bash(&["-n", s(&path)]);
    assert_eq!(bash_complete(&path, &["nettune", "ap"]), ["apply"]);
    let mut bench = bash_complete(&path, &["nettune", "bench", "rr"]);
    bench.sort();
    assert_eq!(bench, ["rr", "rr-server"]);
    assert_eq!(
        bash_complete(&path, &["nettune", "apply", "--pers"]),
        ["--persist"]
    );
    let profiles = bash_complete(&path, &["nettune", "plan", "--profile", ""]);
    for p in ["pps", "latency", "throughput", "http", "baseline"] {
        assert!(profiles.iter().any(|c| c == p), "{p} in {profiles:?}");
    }
}

#[test]
fn completions_for_an_unknown_shell_are_refused_in_one_line() {
    let (code, out, err) = run(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{out}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("'tcsh'") && err.contains("bash"), "{err}");
}

/// Every command path's page name: `nettune`, `nettune-apply`,
/// `nettune-bench-rr`.
fn page_names(cmd: &clap::Command, prefix: &str, out: &mut Vec<String>) {
    out.push(prefix.to_string());
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        page_names(sub, &format!("{prefix}-{}", sub.get_name()), out);
    }
}

#[test]
fn man_writes_one_page_per_command_with_exit_status_and_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let man8 = dir.path().join("man8");
    let (code, out, err) = run(&["man", s(&man8)]);
    assert_eq!(code, 0, "{err}");
    let mut expected = Vec::new();
    page_names(&nettune::cli::Cli::command(), "nettune", &mut expected);
    let mut written: Vec<String> = fs::read_dir(&man8)
        .expect("man8")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut want: Vec<String> = expected.iter().map(|p| format!("{p}.8")).collect();
    want.sort();
    assert_eq!(written, want);
    assert!(
        out.contains(&format!("wrote {} man pages", want.len())),
        "{out}"
    );

    let page = |name: &str| fs::read_to_string(man8.join(name)).expect("page");
    for name in &written {
        let text = page(name);
        let title = name.trim_end_matches(".8");
        assert!(text.contains(&format!("\n.TH {title} 8 ")), "{name}");
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "\"EXIT STATUS\"",
            "\"SEE ALSO\"",
        ] {
            assert!(
                text.contains(&format!(".SH {section}\n")),
                "{name}: {section}"
            );
        }
    }
    let apply = page("nettune-apply.8");
    for file in [
        "/var/lib/nettune/",
        "/etc/sysctl.d/90\\-nettune.conf",
        "/etc/nettune/apply\\-devices.sh",
        "/etc/udev/rules.d/90\\-nettune\\-devices.rules",
        "NETTUNE_STATE_DIR",
    ] {
        assert!(apply.contains(file), "nettune-apply(8) lacks {file}");
    }
    // Exit status 1 only where a command has findings or failed checks.
    assert!(!apply.contains("\\fB1\\fR"), "{apply}");
    let doctor = page("nettune-doctor.8");
    assert!(
        doctor.contains("At least one finding at warn or crit"),
        "{doctor}"
    );
    let top = page("nettune.8");
    assert!(top.contains(".SH FILES") && top.contains("nettune\\-monitor.service"));
    assert!(
        top.contains(&format!("v{}", nettune::cli::VERSION)),
        "{top}"
    );
}

/// A copy of `fixture` with `profile` applied to it with --persist (its
/// state directory beside it).
fn persisted(fixture: &str, profile: &str) -> (tempfile::TempDir, PathBuf) {
    let (dir, tree) = fixture_copy(fixture);
    let state = dir.path().join("state");
    let on = ["--root", s(&tree), "--state-dir", s(&state)];
    let (code, _, err) = run(&[&["apply", "--profile", profile, "--persist"][..], &on].concat());
    assert_eq!(code, 0, "{fixture} {profile}: {err}");
    (dir, tree)
}

/// The files under `dirs` (relative to `root`) and their trimmed text.
fn values(root: &Path, dirs: &[&str]) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            let meta = fs::symlink_metadata(&path).expect("meta");
            if meta.is_dir() {
                walk(base, &path, out);
            } else if meta.is_file() {
                let rel = path.strip_prefix(base).expect("inside").display();
                let text = fs::read_to_string(&path).unwrap_or_default();
                out.insert(rel.to_string(), text.trim().to_string());
            }
        }
    }
    let mut out = BTreeMap::new();
    for d in dirs {
        walk(root, &root.join(d), &mut out);
    }
    out
}

/// Run the persisted script on `tree` (its /proc and /sys paths moved
/// there; ethtool and tc logged instead of run) with `args`; returns the
/// ethtool/tc lines.
fn run_script(script: &str, tree: &Path, args: &[&str]) -> String {
    let bin = tree.join("stub-bin");
    fs::create_dir_all(&bin).expect("mkdir");
    let log = tree.join("tools.log");
    for tool in ["ethtool", "tc"] {
        let stub = bin.join(tool);
        fs::write(
            &stub,
            format!("#!/bin/sh\necho \"{tool} $*\" >> '{}'\n", s(&log)),
        )
        .expect("stub");
        sh(&["chmod", "+x", s(&stub)]);
    }
    let moved = script
        .replace("/proc/", &format!("{}/proc/", s(tree)))
        .replace("/sys/", &format!("{}/sys/", s(tree)));
    let path = tree.join("apply-devices.sh");
    fs::write(&path, moved).expect("write script");
    let out = Command::new("sh")
        .arg(&path)
        .args(args)
        .env(
            "PATH",
            format!("{}:{}", s(&bin), std::env::var("PATH").unwrap_or_default()),
        )
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "script {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs::read_to_string(&log).unwrap_or_default()
}

#[test]
fn the_persisted_script_sets_one_interface_when_given_its_name() {
    // latency on this fixture: eth0's IRQs, queue files and coalescing,
    // and the host's CPU governors.
    let (_dir, applied) = persisted("two-socket-smt-8q", "latency");
    let etc = applied.join("etc");
    let script = fs::read_to_string(etc.join("nettune/apply-devices.sh")).expect("script");
    for (written, source) in [
        (
            "systemd/system/nettune-devices@.service",
            "contrib/systemd/nettune-devices@.service",
        ),
        (
            "udev/rules.d/90-nettune-devices.rules",
            "contrib/udev/90-nettune-devices.rules",
        ),
        (
            "systemd/system/nettune-devices.service",
            "contrib/systemd/nettune-devices.service",
        ),
    ] {
        assert_eq!(
            fs::read_to_string(etc.join(written)).expect("written"),
            fs::read_to_string(repo().join(source)).expect("source"),
            "{written}"
        );
    }

    let device = ["proc/irq", "sys/class/net/eth0/queues"];
    let host = ["sys/devices/system/cpu/cpu0/cpufreq"];
    let fixture = fixture("two-socket-smt-8q");
    assert_ne!(values(&applied, &device), values(&fixture, &device));
    assert_ne!(values(&applied, &host), values(&fixture, &host));

    // Another interface appeared: nothing of eth0's, nothing host-wide.
    let (_d, tree) = fixture_copy("two-socket-smt-8q");
    let tools = run_script(&script, &tree, &["eth1"]);
    assert_eq!(values(&tree, &device), values(&fixture, &device));
    assert_eq!(values(&tree, &host), values(&fixture, &host));
    assert_eq!(tools, "");

    // eth0 appeared again: all of eth0's, still nothing host-wide.
    let (_d, tree) = fixture_copy("two-socket-smt-8q");
    let tools = run_script(&script, &tree, &["eth0"]);
    assert_eq!(values(&tree, &device), values(&applied, &device));
    assert_eq!(values(&tree, &host), values(&fixture, &host));
    assert!(tools.contains("ethtool -C eth0 rx-usecs 0"), "{tools}");

    // At boot (no argument): everything.
    let (_d, tree) = fixture_copy("two-socket-smt-8q");
    run_script(&script, &tree, &[]);
    assert_eq!(values(&tree, &device), values(&applied, &device));
    assert_eq!(values(&tree, &host), values(&applied, &host));
}

/// A veth pair in this namespace, deleted on drop.
struct HostVeth(String);

impl Drop for HostVeth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

/// `udevadm test` of a device with `rule` added to the host's rules, in a
/// private mount namespace: the rule reaches no other program, and the
/// database udevadm writes goes to a tmpfs that ends with it.
fn udevadm_test(rule: &Path, action: &str, iface: &str) -> String {
    let rules = tempfile::tempdir().expect("tempdir");
    if let Ok(entries) = fs::read_dir("/etc/udev/rules.d") {
        for e in entries {
            let e = e.expect("entry");
            let _ = fs::copy(e.path(), rules.path().join(e.file_name()));
        }
    }
    fs::copy(rule, rules.path().join("90-nettune-devices.rules")).expect("copy rule");
    let program = format!(
        "mount --make-rprivate / && mount -t tmpfs tmpfs /run && \
         mount --bind '{}' /etc/udev/rules.d && \
         exec udevadm test --action={action} /sys/class/net/{iface}",
        s(rules.path())
    );
    let child = Command::new("timeout")
        .args(["60", "unshare", "--mount", "sh", "-c", &program])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("unshare");
    let (code, out, err) = finish_bounded(child, std::time::Duration::from_secs(90));
    assert_eq!(code, Some(0), "udevadm test: {err}");
    format!("{out}{err}")
}

#[test]
fn the_persisted_udev_rule_starts_the_unit_for_an_interface_that_appears() {
    if skip_unless_root("the_persisted_udev_rule_starts_the_unit_for_an_interface_that_appears") {
        return;
    }
    if Command::new("udevadm").arg("--version").output().is_err() {
        skipped(
            "the_persisted_udev_rule_starts_the_unit_for_an_interface_that_appears",
            "udevadm is not installed (apt-get install udev)",
        );
        return;
    }
    let (_dir, tree) = persisted("vm-2cpu-virtio", "pps");
    let rule: PathBuf = tree.join("etc/udev/rules.d/90-nettune-devices.rules");

    // An interface of the host's namespace, with a dash in its name (kept
    // as it is in the unit's instance).
    let name = unique("nt-u");
    let veth = HostVeth(name.clone());
    sh(&[
        "ip",
        "link",
        "add",
        &veth.0,
        "type",
        "veth",
        "peer",
        "name",
        &format!("{name}p"),
    ]);

    let added = udevadm_test(&rule, "add", &name);
    let wants = format!("SYSTEMD_WANTS=nettune-devices@{name}.service");
    assert!(
        added.lines().any(|l| l.trim() == wants),
        "{wants} not in:\n{added}"
    );
    assert!(
        added
            .lines()
            .any(|l| l.starts_with("TAGS=") && l.contains(":systemd:")),
        "{added}"
    );
    // Only when it appears: a change event starts nothing.
    let changed = udevadm_test(&rule, "change", &name);
    assert!(!changed.contains("nettune-devices@"), "{changed}");
}
