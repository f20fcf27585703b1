//! What a saved plan file may hold (`plan --plan`, `apply --plan`): only
//! changes a profile could make, in a network namespace only what the
//! namespace owns, only values of their setting's kind; refused before
//! anything is read, journaled or written. And the scripts nettune writes
//! (`--format sh`, `apply --persist`) keep every text a word or a comment,
//! whatever a plan or a recorded tree holds.
//!
//! Never applied to the live host: trees are fixture copies, and the
//! namespace tests change only their own namespace (a refused plan whose
//! target is the host's asks for the value the host already has).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nettune::host::{Host, Selection, ROOT_NAMESPACE_SYSCTLS};
use nettune::plan::admit::{admit, admit_change, admit_value, Limits, Scope, DRIVER_KEYS, SYSCTLS};
use nettune::plan::{plan, PlanOptions, Profile, Target};
use serde_json::{json, Value};

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

/// `plan --json` of `profile` on `on` (`--root T` or `--netns NS`).
fn saved_plan(profile: &str, on: &[&str]) -> Value {
    run_json(&[&["plan", "--profile", profile, "--json"][..], on].concat())
}

/// `plan` with one more change, written to `dir/plan.json`.
fn with_change(plan: &Value, dir: &Path, target: &str, from: &str, to: &str) -> PathBuf {
    let mut plan = plan.clone();
    plan["changes"]
        .as_array_mut()
        .expect("changes")
        .push(json!({
            "target": target, "from": from, "to": to, "reason": "edited", "group": "kernel",
        }));
    write_plan(&plan, dir)
}

fn write_plan(plan: &Value, dir: &Path) -> PathBuf {
    let file = dir.join("plan.json");
    fs::write(&file, serde_json::to_string(plan).expect("json")).expect("write plan");
    file
}

/// Every file of a tree with its bytes: what a refused apply must leave
/// as it was.
fn tree_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            let meta = fs::symlink_metadata(&path).expect("stat");
            if meta.is_dir() {
                todo.push(path);
            } else if meta.is_file() {
                out.insert(path.clone(), fs::read(&path).expect("read"));
            }
        }
    }
    out
}

/// A refusal as users must see it: exit 2, one line on stderr holding
/// `words`, nothing on stdout.
fn assert_refused(result: &(i32, String, String), words: &[&str]) {
    let (code, stdout, stderr) = result;
    assert_eq!(*code, 2, "{stderr}{stdout}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    for w in words {
        assert!(stderr.contains(w), "no '{w}' in: {stderr}");
    }
}

/// A plan file whose change targets a sysctl no profile changes is
/// refused, on a tree as on the host, and nothing is written: no state
/// directory, the tree's file as it was.
#[test]
fn a_plan_file_may_change_only_what_a_profile_could() {
    let (_dir, tree) = fixture_copy("vm-2cpu-virtio");
    fs::create_dir_all(tree.join("proc/sys/vm")).expect("mkdir");
    fs::write(tree.join("proc/sys/vm/swappiness"), "60\n").expect("write");
    fs::write(tree.join("proc/sys/kernel/core_pattern"), "core\n").expect("write");
    let work = tempfile::tempdir().expect("tempdir");
    let state = work.path().join("state");
    let on = ["--root", s(&tree)];
    let plan = saved_plan("pps", &on);
    let before = tree_files(&tree);
    for (target, from, to) in [
        ("/proc/sys/vm/swappiness", "60", "10"),
        (
            "/proc/sys/kernel/core_pattern",
            "core",
            "|/tmp/nt/handler %p",
        ),
        ("xdp:eth0:7", "not attached", "attached"),
    ] {
        let file = with_change(&plan, work.path(), target, from, to);
        let apply = run(&[
            &["apply", "--plan", s(&file), "--state-dir", s(&state)][..],
            &on,
        ]
        .concat());
        assert_refused(&apply, &[target, "nothing was changed"]);
        let shown = run(&[&["plan", "--plan", s(&file)][..], &on].concat());
        assert_refused(&shown, &[target, "refused"]);
        assert!(!state.exists(), "a state directory was made");
    }
    assert_eq!(tree_files(&tree), before, "the tree changed");
    // The plan as nettune wrote it passes.
    let file = write_plan(&plan, work.path());
    let (code, _, stderr) = run(&[&["plan", "--plan", s(&file)][..], &on].concat());
    assert_eq!(code, 0, "{stderr}");
}

/// The first IRQ of the host with an affinity file, and its CPU list.
fn a_host_irq() -> (String, String) {
    let interrupts = fs::read_to_string("/proc/interrupts").expect("interrupts");
    interrupts
        .lines()
        .filter_map(|l| l.split(':').next()?.trim().parse::<u32>().ok())
        .find_map(|irq| {
            let path = format!("/proc/irq/{irq}/smp_affinity_list");
            let cpus = fs::read_to_string(&path).ok()?;
            Some((path, cpus.trim().to_string()))
        })
        .expect("an IRQ with smp_affinity_list")
}

fn host_value(path: &str) -> String {
    fs::read_to_string(path).expect("read").trim().to_string()
}

/// Inside a network namespace a plan file may change only what the
/// namespace owns. A host-wide target is refused even with the value the
/// host already has (so no test run can change the host): a sysctl no
/// profile sets, a host-only sysctl (with the command for the host), an
/// IRQ of the host's own NIC; the core_pattern pipe is never shown as a
/// namespace change. The namespace's own plan applies and rolls back.
#[test]
fn a_namespace_plan_may_change_only_what_the_namespace_owns() {
    if skip_unless_root("a_namespace_plan_may_change_only_what_the_namespace_owns") {
        return;
    }
    let ns = Netns::new("pfile");
    let (a, b) = (unique("pa"), unique("pb"));
    ns.veth(&a, (2, 2), &b, (1, 1));
    ns.wait_up(&[&a, &b]);
    let on = ["--netns", ns.name.as_str()];
    let work = tempfile::tempdir().expect("tempdir");
    let state = work.path().join("state");
    let plan = saved_plan("pps", &on);
    assert!(
        !plan["changes"].as_array().expect("changes").is_empty(),
        "{plan}"
    );
    let swappiness = host_value("/proc/sys/vm/swappiness");
    let busy_poll = host_value("/proc/sys/net/core/busy_poll");
    let (irq, irq_cpus) = a_host_irq();
    let sysctl_w = format!("sysctl -w net.core.busy_poll={busy_poll}");
    let cases = [
        (
            "/proc/sys/vm/swappiness",
            swappiness.as_str(),
            "no nettune profile changes this sysctl",
        ),
        ("/proc/sys/net/core/busy_poll", &busy_poll, &sysctl_w),
        (
            irq.as_str(),
            &irq_cpus,
            "serves no interface of network namespace",
        ),
    ];
    for (target, value, why) in cases {
        let file = with_change(&plan, work.path(), target, value, value);
        let apply = run(&[
            &["apply", "--plan", s(&file), "--state-dir", s(&state)][..],
            &on,
        ]
        .concat());
        assert_refused(&apply, &[target, why, "nothing was changed"]);
        assert!(!state.exists(), "a state directory was made");
    }
    assert_eq!(host_value("/proc/sys/vm/swappiness"), swappiness);
    let core_pattern = host_value("/proc/sys/kernel/core_pattern");
    let file = with_change(
        &plan,
        work.path(),
        "/proc/sys/kernel/core_pattern",
        &core_pattern,
        "|/tmp/nt/handler %p",
    );
    let shown = run(&[&["plan", "--plan", s(&file)][..], &on].concat());
    assert_refused(&shown, &["/proc/sys/kernel/core_pattern", "refused"]);
    // The namespace's own plan applies, and rolls back.
    let file = write_plan(&plan, work.path());
    let (code, stdout, stderr) = run(&[
        &["apply", "--plan", s(&file), "--state-dir", s(&state)][..],
        &on,
    ]
    .concat());
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("applied"), "{stdout}");
    let (code, _, stderr) = run(&["rollback", "--state-dir", s(&state)]);
    assert_eq!(code, 0, "{stderr}");
}

/// Values a plan file cannot hold (a line break, megabytes, a command
/// after a qdisc, CPUs this host lacks, numbers out of range, a governor
/// that is not one) are refused before anything is written: exit 2, one
/// short line, no journal or lock, the tree as it was.
#[test]
fn values_a_plan_file_cannot_hold_are_refused_before_anything_is_written() {
    let big = "7".repeat(10 << 20);
    let cases: [(&str, &str, &str, &str, &str); 9] = [
        (
            "vm-2cpu-virtio",
            "pps",
            "/proc/sys/net/core/rmem_max",
            "65536\nx",
            "control character",
        ),
        (
            "vm-2cpu-virtio",
            "pps",
            "/proc/sys/net/core/rmem_max",
            &big,
            "longer than any value",
        ),
        (
            "vm-2cpu-virtio",
            "pps",
            "/proc/sys/net/core/rmem_max",
            "99999999999",
            "is above",
        ),
        (
            "vm-2cpu-virtio",
            "throughput",
            "qdisc:eth0:root",
            "fq; rm -rf /",
            "not a qdisc nettune installs",
        ),
        (
            "vm-2cpu-virtio",
            "throughput",
            "/proc/sys/net/ipv4/tcp_rmem",
            "4096 131072",
            "three whole numbers",
        ),
        (
            "vm-2cpu-virtio",
            "pps",
            "/sys/class/net/eth0/queues/rx-0/rps_cpus",
            "4",
            "names CPU 2",
        ),
        (
            "vm-2cpu-virtio",
            "pps",
            "/proc/irq/38/smp_affinity_list",
            "0-5",
            "CPU 5",
        ),
        (
            "vm-2cpu-virtio",
            "pps",
            "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt",
            "-1",
            "whole number",
        ),
        (
            "two-socket-smt-8q",
            "throughput",
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "performance;reboot",
            "is not a governor",
        ),
    ];
    let work = tempfile::tempdir().expect("tempdir");
    let state = work.path().join("state");
    let mut trees = BTreeMap::new();
    for (fixture, profile, target, bad, why) in cases {
        let tree = trees
            .entry(fixture)
            .or_insert_with(|| fixture_copy(fixture))
            .1
            .clone();
        let on = ["--root", s(&tree)];
        let mut plan = saved_plan(profile, &on);
        let change = plan["changes"]
            .as_array_mut()
            .expect("changes")
            .iter_mut()
            .find(|c| c["target"] == target)
            .unwrap_or_else(|| panic!("{profile} on {fixture} changes no {target}"));
        change["to"] = json!(bad);
        let file = write_plan(&plan, work.path());
        let before = tree_files(&tree);
        let result = run(&[
            &["apply", "--plan", s(&file), "--state-dir", s(&state)][..],
            &on,
        ]
        .concat());
        assert_refused(&result, &[target, why, "nothing was changed"]);
        assert!(result.2.len() < 1000, "{} bytes on stderr", result.2.len());
        assert!(
            !state.exists(),
            "{target} = {bad:?}: a state directory was made"
        );
        assert_eq!(
            tree_files(&tree),
            before,
            "{target} = {bad:?}: the tree changed"
        );
    }
}

/// The parts of a shell script the shell reads as code: every line
/// without its comment and without the inside of its single-quoted words.
fn code_outside_quotes(script: &str) -> String {
    let mut code = String::new();
    for line in script.lines() {
        let mut quoted = false;
        let mut word_start = true;
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            if quoted {
                quoted = c != '\'';
                word_start = false;
                continue;
            }
            match c {
                '\'' => quoted = true,
                '\\' => {
                    chars.next();
                }
                '#' if word_start => break,
                _ => code.push(c),
            }
            word_start = c == ' ' || c == '\t';
        }
        assert!(!quoted, "a quote left open: {line}");
        code.push('\n');
    }
    code
}

/// `bash -n`: the script parses (nothing is run).
fn assert_parses(script: &str) {
    let mut child = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write script");
    let out = child.wait_with_output().expect("bash -n");
    assert!(
        out.status.success(),
        "bash -n: {}\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `payload` never reaches the shell as code: it is only ever inside a
/// single-quoted word or a comment.
fn assert_inert(script: &str, payload: &str) {
    assert_parses(script);
    let code = code_outside_quotes(script);
    assert!(!code.contains(payload), "'{payload}' as code in:\n{script}");
}

/// A reason with a line break in a plan file would have put the rest of
/// the reason on a line of its own in `--format sh`: a plan file holds no
/// such text, and is refused.
#[test]
fn a_reason_with_a_line_break_never_reaches_a_script() {
    let (_dir, tree) = fixture_copy("vm-2cpu-virtio");
    let on = ["--root", s(&tree)];
    let mut plan = saved_plan("pps", &on);
    plan["changes"][0]["reason"] = json!("more room\ntouch /tmp/nt/INJECTED");
    let work = tempfile::tempdir().expect("tempdir");
    let file = write_plan(&plan, work.path());
    for verb in [&["plan"][..], &["apply", "--dry-run"][..]] {
        let result = run(&[verb, &["--plan", s(&file), "--format", "sh"], &on].concat());
        assert_refused(&result, &["control character", "nothing was changed"]);
        assert!(!result.1.contains("INJECTED"), "{}", result.1);
    }
}

/// The interface that a recorded tree or a saved plan can name `a;$(x)`.
const CODE_NAME: &str = "a;$(x)";

/// `vm-2cpu-virtio` with its NIC named [`CODE_NAME`].
fn tree_with_code_name() -> (tempfile::TempDir, PathBuf) {
    let (dir, tree) = fixture_copy("vm-2cpu-virtio");
    let device = "sys/devices/pci0000:00/0000:00:03.0/virtio2/net";
    fs::rename(
        tree.join(device).join("eth0"),
        tree.join(device).join(CODE_NAME),
    )
    .expect("rename");
    fs::remove_file(tree.join("sys/class/net/eth0")).expect("unlink");
    std::os::unix::fs::symlink(
        format!("../../devices/pci0000:00/0000:00:03.0/virtio2/net/{CODE_NAME}"),
        tree.join("sys/class/net").join(CODE_NAME),
    )
    .expect("symlink");
    let driver = tree.join("nettune/driver.json");
    let text = fs::read_to_string(&driver).expect("driver.json");
    let renamed = text.replace("\"eth0\"", &json!(CODE_NAME).to_string());
    assert_ne!(text, renamed);
    fs::write(&driver, renamed).expect("write driver.json");
    (dir, tree)
}

/// Every profile's script, made from the tree or from its saved plan, and
/// the boot script `apply --persist` writes keep the interface name a
/// single-quoted word: it parses, and `$(x)` is never code.
#[test]
fn scripts_keep_an_interface_named_like_code_a_word() {
    let (dir, tree) = tree_with_code_name();
    let on = ["--root", s(&tree)];
    let mut quoted_qdisc = false;
    for profile in ["pps", "latency", "throughput", "http", "baseline"] {
        let (code, script, stderr) =
            run(&[&["plan", "--profile", profile, "--format", "sh"][..], &on].concat());
        assert_eq!(code, 0, "{stderr}");
        assert_inert(&script, "$(x)");
        quoted_qdisc |= script.contains("tc qdisc replace dev 'a;$(x)' root fq");
        let plan = saved_plan(profile, &on);
        let file = write_plan(&plan, dir.path());
        let (code, from_file, stderr) =
            run(&[&["plan", "--plan", s(&file), "--format", "sh"][..], &on].concat());
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(from_file, script);
    }
    assert!(quoted_qdisc, "no profile set the qdisc of {CODE_NAME}");
    let state = dir.path().join("state");
    let (code, _, stderr) = run(&[
        &[
            "apply",
            "--profile",
            "throughput",
            "--persist",
            "--state-dir",
            s(&state),
        ][..],
        &on,
    ]
    .concat());
    assert_eq!(code, 0, "{stderr}");
    let boot = fs::read_to_string(tree.join("etc/nettune/apply-devices.sh")).expect("script");
    assert!(boot.contains(CODE_NAME), "{boot}");
    assert_inert(&boot, "$(x)");
    let (code, _, stderr) = run(&["rollback", "--state-dir", s(&state), "--root", s(&tree)]);
    assert_eq!(code, 0, "{stderr}");
}

/// The same with a live interface of that name, in a namespace the test
/// makes: plan's script for it parses and keeps the name a word.
#[test]
fn a_live_interface_named_like_code_stays_a_word() {
    if skip_unless_root("a_live_interface_named_like_code_stays_a_word") {
        return;
    }
    let ns = Netns::new("pcode");
    let peer = unique("pc");
    ns.veth(CODE_NAME, (2, 2), &peer, (1, 1));
    ns.wait_up(&[CODE_NAME, &peer]);
    for profile in ["pps", "throughput"] {
        let (code, script, stderr) = run(&[
            "plan",
            "--profile",
            profile,
            "--netns",
            &ns.name,
            "--iface",
            CODE_NAME,
            "--format",
            "sh",
        ]);
        assert_eq!(code, 0, "{stderr}");
        assert!(script.contains(CODE_NAME), "{script}");
        assert_inert(&script, "$(x)");
    }
}

/// Hosts as a profile sees them: every fixture, on the host and as a
/// network namespace shows it (root-only sysctls out of sight, the
/// host's values read before entering).
fn hosts() -> Vec<(String, Host)> {
    let selection = Selection {
        all: true,
        iface: None,
    };
    let mut hosts = Vec::new();
    for name in [
        "vm-2cpu-virtio",
        "vm-2cpu-busy-poll",
        "two-socket-smt-8q",
        "one-socket-ice-16q",
        "two-socket-nic-node1",
    ] {
        let host = nettune::gather::read_target(Some(&fixture(name)), None, &selection)
            .expect("read fixture");
        let mut netns = host.clone();
        netns.source.netns = Some("blue".to_string());
        for sysctl in ROOT_NAMESPACE_SYSCTLS {
            if let Some(value) = netns.sysctls.remove(*sysctl) {
                netns.host_sysctls.insert(sysctl.to_string(), value);
            }
        }
        // Every value off its default: each profile then sets each of its
        // sysctls (baseline the kernel's defaults).
        let mut detuned = host.clone();
        for value in detuned.sysctls.values_mut() {
            if value.split(' ').count() == 3 {
                *value = "7 7 7".to_string();
            } else if value.parse::<u64>().is_ok() {
                *value = "7".to_string();
            }
        }
        hosts.push((name.to_string(), host));
        hosts.push((format!("{name} in a namespace"), netns));
        hosts.push((format!("{name} detuned"), detuned));
    }
    hosts
}

/// The allow-list cannot drift from the profiles: every change each
/// profile makes on every fixture host (on the host, in a namespace, with
/// every sysctl off its default) is admitted there, each host-wide value
/// on the host; and every sysctl on the list is one some profile sets.
#[test]
fn the_allow_list_is_what_the_profiles_change() {
    let mut seen = std::collections::BTreeSet::new();
    for (name, host) in hosts() {
        let scope = Scope::of(&host);
        assert_eq!(name.contains("namespace"), scope != Scope::Host, "{name}");
        let limits = Limits::of(&host);
        // CPU ids of values are bounded by the fixture's CPUs.
        let cpus = match name.split(' ').next() {
            Some("two-socket-smt-8q") => 32,
            Some(n) if n.starts_with("vm-") => 2,
            _ => 16,
        };
        assert_eq!(limits.cpus, cpus, "{name}");
        for profile in [
            Profile::Pps,
            Profile::Latency,
            Profile::Throughput,
            Profile::Http,
            Profile::Baseline,
        ] {
            let planned = plan(&host, &PlanOptions::new(profile)).expect("plan");
            for c in &planned.changes {
                if let Err(refusal) = admit_change(c, &scope, &limits) {
                    panic!("{name}, {}: {refusal}", profile.name());
                }
                seen.extend(c.target.sysctl_name().map(str::to_string));
                if let Target::Driver { key, .. } = &c.target {
                    let key = key.to_string();
                    assert!(DRIVER_KEYS.contains(&key.as_str()), "{name}: {key}");
                }
            }
            for h in &planned.host_wide {
                admit_value(&h.target, h.to.as_str(), &limits)
                    .and_then(|_| admit(&h.target, &Scope::Host))
                    .unwrap_or_else(|r| panic!("{name}, {}: {r}", profile.name()));
                // And never in the namespace itself.
                assert!(admit(&h.target, &scope).is_err(), "{name}: {}", h.target);
                seen.extend(h.target.sysctl_name().map(str::to_string));
            }
        }
    }
    let listed: std::collections::BTreeSet<String> =
        SYSCTLS.iter().map(|s| s.name.to_string()).collect();
    assert_eq!(
        listed, seen,
        "the allow-list and what the profiles set differ"
    );
    // Targets no profile produces.
    for text in [
        "/proc/sys/vm/swappiness",
        "/proc/sys/kernel/core_pattern",
        "/sys/class/net/eth0/queues/tx-0/xps_rxqs",
        "rss:eth0:indirection",
        "ntuple:eth0:3",
        "xdp:eth0:7",
    ] {
        let target: Target = text.parse().expect("target");
        assert!(admit(&target, &Scope::Host).is_err(), "{text}");
    }
}
