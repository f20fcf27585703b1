//! Partial hosts are common: containers that hide parts of /sys, old or
//! stripped kernels, a capture taken without root. Every command that
//! reads a host shows what it can, lists what it cannot (path and error)
//! in `sources`, and says which doctor rules it could not judge; only a
//! tree where nothing at all can be read is exit 2.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `inspect --json` of a tree: exit 0 and the model.
fn inspect(tree: &Path) -> Value {
    run_json(&["inspect", "--json", "--root", s(tree)])
}

fn issue<'a>(host: &'a Value, section: &str) -> &'a Value {
    host["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .find(|i| i["section"] == section)
        .unwrap_or_else(|| panic!("no source issue for {section}: {:#}", host["sources"]))
}

/// doctor on a tree: it must judge (exit 0 or 1, never 2) and return its
/// JSON report.
fn doctor(tree: &Path) -> Value {
    let (code, out, err) = run(&["doctor", "--json", "--root", s(tree)]);
    assert!(code == 0 || code == 1, "doctor exit {code}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}\nnot JSON: {e}"))
}

fn unjudged(report: &Value) -> Vec<String> {
    report["unjudged"]
        .as_array()
        .expect("unjudged")
        .iter()
        .map(|u| u["id"].as_str().expect("id").to_string())
        .collect()
}

#[test]
fn a_container_that_hides_cpu_and_queue_files() {
    let (_dir, tree) = fixture_copy("two-socket-smt-8q");
    fs::remove_file(tree.join("sys/devices/system/cpu/online")).expect("rm online");
    fs::remove_dir_all(tree.join("sys/devices/system/node")).expect("rm node");
    let host = inspect(&tree);
    let missing = issue(&host, "cpus");
    assert_eq!(missing["kind"], "missing");
    assert_eq!(
        missing["path"],
        format!("{}/sys/devices/system/cpu/online", s(&tree))
    );
    // The rest is there: interfaces, queues, sysctls, counters.
    assert!(!host["interfaces"].as_array().expect("ifaces").is_empty());
    assert!(host["sysctls"].as_object().is_some_and(|m| !m.is_empty()));
    let (code, out, _) = run(&["inspect", "--root", s(&tree)]);
    assert_eq!(code, 0);
    assert!(
        out.contains("sources not read") && out.contains("cpu/online"),
        "{out}"
    );
    // Doctor judges what it can and names what it could not.
    let report = doctor(&tree);
    let not = unjudged(&report);
    assert!(not.iter().any(|id| id == "irq.one-cpu"), "{not:?}");
    assert!(!not.iter().any(|id| id == "tcp.buffers-small"), "{not:?}");
    let (_, text, _) = run(&["doctor", "--root", s(&tree)]);
    assert!(
        text.contains("Not judged") && text.contains("irq.one-cpu"),
        "{text}"
    );
    // Plan still plans.
    let (code, _, err) = run(&["plan", "--profile", "pps", "--root", s(&tree)]);
    assert_eq!(code, 0, "{err}");
}

/// A container that hides /proc/sys and /sys/class/net: that is not a
/// kernel without sysctls or interfaces, it is a host whose sysctls and
/// interfaces could not be read, and doctor and plan say so.
#[test]
fn a_container_that_hides_proc_sys_and_the_interfaces() {
    let (_dir, tree) = fixture_copy("two-socket-smt-8q");
    fs::remove_dir_all(tree.join("proc/sys")).expect("rm proc/sys");
    fs::remove_dir_all(tree.join("sys/class/net")).expect("rm class/net");
    let host = inspect(&tree);
    for (section, path) in [("sysctls", "proc/sys/net"), ("interfaces", "sys/class/net")] {
        let missing = issue(&host, section);
        assert_eq!(missing["kind"], "missing", "{section}");
        assert_eq!(missing["path"], format!("{}/{path}", s(&tree)), "{section}");
    }
    let not = unjudged(&doctor(&tree));
    for id in [
        "tcp.buffers-small",
        "tcp.options-off",
        "rps.off",
        "nic.rings-small",
    ] {
        assert!(not.iter().any(|n| n == id), "{id}: {not:?}");
    }
    // The plan does not call a sysctl it could not read absent from the kernel.
    let plan = run_json(&["plan", "--profile", "pps", "--root", s(&tree), "--json"]);
    let reasons: Vec<&str> = plan["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .filter_map(|x| x["reason"].as_str())
        .collect();
    assert!(!reasons.is_empty(), "{plan:#}");
    for reason in reasons.iter().filter(|r| r.contains("net.core.")) {
        assert!(
            reason.contains("could not be read") && !reason.contains("does not exist"),
            "{reason}"
        );
    }
}

#[test]
fn an_old_or_stripped_kernel_without_newer_files() {
    let (_dir, tree) = fixture_copy("vm-2cpu-virtio");
    for file in ["proc/net/netstat", "proc/net/snmp", "proc/softirqs"] {
        fs::remove_file(tree.join(file)).expect("rm");
    }
    for entry in fs::read_dir(tree.join("proc/irq")).expect("irq dir") {
        let _ = fs::remove_file(entry.expect("entry").path().join("effective_affinity_list"));
    }
    let host = inspect(&tree);
    for section in ["counters.snmp", "counters.softirqs"] {
        assert_eq!(issue(&host, section)["kind"], "missing", "{section}");
    }
    let report = doctor(&tree);
    let not = unjudged(&report);
    for id in ["udp.rcvbuf-errors", "softirq.hotspot"] {
        assert!(not.iter().any(|n| n == id), "{id}: {not:?}");
    }
}

#[test]
fn a_capture_without_root_has_unreadable_files() {
    if skip_unless_root("a_capture_without_root_has_unreadable_files") {
        return;
    }
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    // Readable for the unprivileged user, but two files are not.
    for d in [dir.path(), tree.as_path()] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    sh(&["chmod", "-R", "a+rX", s(&tree)]);
    let snmp = tree.join("proc/net/snmp");
    fs::set_permissions(&snmp, fs::Permissions::from_mode(0o000)).expect("chmod");
    let out = Command::new(env!("CARGO_BIN_EXE_nettune"))
        .args(["inspect", "--json", "--root", s(&tree)])
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run");
    let (code, out, err) = split(out);
    assert_eq!(code, 0, "{err}");
    let host: Value = serde_json::from_str(&out).expect("json");
    let unreadable = issue(&host, "counters.snmp");
    assert_eq!(unreadable["kind"], "unreadable", "{unreadable}");
    assert!(
        unreadable["error"]
            .as_str()
            .is_some_and(|e| e.contains("Permission denied")),
        "{unreadable}"
    );
}

#[test]
fn absurd_cpu_lists_from_the_kernel_are_named_not_expanded() {
    let (_dir, tree) = fixture_copy("vm-2cpu-virtio");
    fs::write(tree.join("sys/devices/system/cpu/online"), "0-4294967295\n").expect("write");
    fs::write(tree.join("sys/devices/system/cpu/isolated"), "4294967295\n").expect("write");
    let host = inspect(&tree);
    let bad = issue(&host, "cpus");
    assert_eq!(bad["kind"], "malformed", "{bad}");
    assert!(
        bad["error"]
            .as_str()
            .is_some_and(|e| e.contains("4294967295") && e.contains("8191")),
        "{bad}"
    );
}

#[test]
fn a_row_cut_short_in_proc_interrupts_is_a_named_warning() {
    let (_dir, tree) = fixture_copy("two-socket-smt-8q");
    let path = tree.join("proc/interrupts");
    let text = fs::read_to_string(&path).expect("read");
    // Cut the last numbered row after its first count.
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let last = lines
        .iter()
        .rposition(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .expect("a numbered row");
    let label = lines[last]
        .split(':')
        .next()
        .expect("label")
        .trim()
        .to_string();
    let first_count: String = lines[last]
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    lines[last] = format!(" {first_count}");
    fs::write(&path, lines.join("\n") + "\n").expect("write");
    let host = inspect(&tree);
    let warning = issue(&host, "interrupts");
    assert_eq!(warning["kind"], "truncated", "{warning}");
    assert!(
        warning["error"]
            .as_str()
            .is_some_and(|e| e.contains(&format!("IRQ {label}"))),
        "{warning}"
    );
    // The other IRQs are still read.
    let vectors = host["interfaces"][0]["irq_vectors"]
        .as_array()
        .expect("vectors");
    assert!(!vectors.is_empty());
}

#[test]
fn a_tree_where_nothing_can_be_read_is_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir_all(dir.path().join("proc")).expect("mkdir");
    for command in ["inspect", "doctor"] {
        let (code, out, err) = run(&[command, "--root", s(dir.path())]);
        assert_eq!(code, 2, "{command}: {out}");
        assert!(err.contains("nothing could be read"), "{command}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
