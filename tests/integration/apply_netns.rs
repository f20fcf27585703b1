//! apply and rollback live, inside a network namespace this test creates,
//! on a veth pair with 4 queues (its peer with 1 RX queue, so RPS has
//! work). Checked with `nettune inspect --netns`. No root-namespace value
//! is changed: the test checks that too. Needs root (CI runs as root).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use nettune::base::cpuset::{parse_list, parse_mask};
use serde_json::Value;

use crate::common::*;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Interface names unique to this process, within 15 characters.
fn link_names() -> (String, String) {
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let pid = std::process::id();
    (format!("ta{pid}x{n}"), format!("tb{pid}x{n}"))
}

/// A namespace with a veth pair: `a` with 4 RX/4 TX queues, `b` with
/// 1 RX/4 TX queues, both up.
fn veth_namespace(tag: &str) -> (Netns, String, String) {
    let ns = Netns::new(tag);
    let (a, b) = link_names();
    ns.veth(&a, (4, 4), &b, (1, 4));
    (ns, a, b)
}

fn inspect(ns: &str) -> Value {
    run_json(&["inspect", "--netns", ns, "--all", "--json"])
}

/// The value inspect shows for a planned target, as text comparable to
/// the plan's `to` (CPU sets as sets, sysctls as text).
fn shown(host: &Value, target: &str) -> Option<String> {
    if let Some(rest) = target.strip_prefix("/proc/sys/") {
        return host["sysctls"][rest.replace('/', ".")]
            .as_str()
            .map(str::to_string);
    }
    let rest = target.strip_prefix("/sys/class/net/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let [iface, "queues", queue, file] = parts[..] else {
        return None;
    };
    let iface = host["interfaces"]
        .as_array()?
        .iter()
        .find(|i| i["name"] == iface)?;
    let (list, index) = match queue.split_once('-')? {
        ("rx", i) => ("rx_queues", i.parse::<u64>().ok()?),
        ("tx", i) => ("tx_queues", i.parse::<u64>().ok()?),
        _ => return None,
    };
    let q = iface[list]
        .as_array()?
        .iter()
        .find(|q| q["index"] == index)?;
    let v = &q[file];
    match v {
        Value::Array(cpus) => Some(
            cpus.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(","),
        ),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn same(target: &str, shown: &str, to: &str) -> bool {
    if target.ends_with("_cpus") {
        parse_list(shown).ok() == parse_mask(to).ok()
    } else {
        shown.split_whitespace().eq(to.split_whitespace())
    }
}

/// The queue and sysctl values of a namespace that plan may touch.
fn tunables(host: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for iface in host["interfaces"].as_array().expect("interfaces") {
        for list in ["rx_queues", "tx_queues"] {
            out.insert(format!("{}/{list}", iface["name"]), iface[list].clone());
        }
        out.insert(
            format!("{}/root_qdisc", iface["name"]),
            iface["root_qdisc"].clone(),
        );
        out.insert(
            format!("{}/features", iface["name"]),
            iface["driver_settings"]["features"].clone(),
        );
    }
    out.insert("sysctls".to_string(), host["sysctls"].clone());
    out
}

fn root_ns_sysctls() -> BTreeMap<String, String> {
    [
        "net/ipv4/udp_rmem_min",
        "net/ipv4/tcp_rmem",
        "net/ipv4/tcp_wmem",
        "net/core/rmem_max",
        "net/core/netdev_max_backlog",
        "net/core/rps_sock_flow_entries",
        "net/ipv4/tcp_slow_start_after_idle",
        "net/ipv4/tcp_no_metrics_save",
    ]
    .iter()
    .map(|p| {
        let path = Path::new("/proc/sys").join(p);
        (p.to_string(), fs::read_to_string(path).unwrap_or_default())
    })
    .collect()
}

fn apply_and_roll_back(profile: &str, tag: &str, check: impl Fn(&Value, &Value)) {
    let (ns, a, b) = veth_namespace(tag);
    let state = tempfile::tempdir().expect("state dir");
    let state_dir = state.path().to_str().expect("path");
    let host_before = root_ns_sysctls();
    let before = inspect(&ns.name);
    let common = [
        "--netns",
        ns.name.as_str(),
        "--iface",
        a.as_str(),
        "--iface",
        b.as_str(),
    ];

    let mut plan_args = vec!["plan", "--profile", profile, "--json"];
    plan_args.extend(common);
    let plan = run_json(&plan_args);
    let changes = plan["changes"].as_array().expect("changes").clone();
    assert!(!changes.is_empty(), "{plan}");

    let mut apply_args = vec!["apply", "--profile", profile, "--state-dir", state_dir];
    apply_args.extend(common);
    let (code, out, err) = run(&apply_args);
    assert_eq!(code, 0, "apply: {err}");
    let after = inspect(&ns.name);
    check(&plan, &after);
    // Every planned change inspect can see took (unless apply said the
    // kernel refused it).
    for c in &changes {
        let target = c["target"].as_str().expect("target");
        if out.contains(&format!("left alone {target}")) {
            continue;
        }
        if let Some(now) = shown(&after, target) {
            let to = c["to"].as_str().expect("to");
            assert!(
                same(target, &now, to),
                "{target}: inspect shows {now}, plan wrote {to}"
            );
        }
    }
    assert_eq!(
        root_ns_sysctls(),
        host_before,
        "a root-namespace value changed"
    );

    // A second apply changes nothing.
    let (code, out2, err) = run(&apply_args);
    assert_eq!(code, 0, "second apply: {err}");
    assert!(out2.contains("nothing to change"), "{out2}");

    let (code, out, err) = run(&["rollback", "--state-dir", state_dir]);
    assert_eq!(code, 0, "rollback: {err}");
    assert!(out.contains("rolled back state 1"), "{out}");
    assert_eq!(
        tunables(&inspect(&ns.name)),
        tunables(&before),
        "not every value is back"
    );
    assert_eq!(root_ns_sysctls(), host_before);
}

/// net.core.rps_sock_flow_entries of the host (read, never changed here).
fn host_flow_entries() -> u64 {
    fs::read_to_string("/proc/sys/net/core/rps_sock_flow_entries")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .expect("rps_sock_flow_entries")
}

#[test]
fn pps_in_a_namespace_sets_rps_rfs_and_namespace_sysctls_then_rolls_back() {
    if skip_unless_root("pps_in_a_namespace") {
        return;
    }
    apply_and_roll_back("pps", "pps", |plan, after| {
        let targets: Vec<&str> = plan["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .map(|c| c["target"].as_str().expect("target"))
            .collect();
        let has = |suffix: &str| targets.iter().any(|t| t.ends_with(suffix));
        // veth queues are not hardware queues: RPS on every RX queue of
        // both ends (the 4-queue one too); no XPS (no TX interrupts).
        assert!(
            has("/rx-0/rps_cpus") && has("/rx-3/rps_cpus"),
            "{targets:?}"
        );
        assert!(!has("/xps_cpus"), "{targets:?}");
        assert!(
            targets.contains(&"/proc/sys/net/ipv4/udp_rmem_min"),
            "{targets:?}"
        );
        assert_eq!(after["sysctls"]["net.ipv4.udp_rmem_min"], "65536");
        // Root-namespace-only and read-only sysctls are left alone, said so.
        let skipped = plan["skipped"].as_array().expect("skipped");
        let reason = |t: &str| {
            skipped
                .iter()
                .find(|s| s["target"] == t)
                .and_then(|s| s["reason"].as_str())
                .unwrap_or_else(|| panic!("{t} not skipped: {skipped:?}"))
                .to_string()
        };
        assert!(reason("/proc/sys/net/core/rmem_max").contains("read-only"));
        assert!(reason("/proc/sys/net/core/netdev_max_backlog").contains("host-wide"));
        let entries = host_flow_entries();
        if entries < 32768 {
            assert!(reason("/proc/sys/net/core/rps_sock_flow_entries").contains("host-wide"));
        }
        for iface in after["interfaces"].as_array().expect("interfaces") {
            let rx = iface["rx_queues"].as_array().expect("rx");
            if iface["name"] == "lo" {
                continue;
            }
            for q in rx {
                assert_eq!(ids(&q["rps_cpus"]), ids(&plan["cpus"]), "{iface}");
                // RFS only where the host has a flow table to share out.
                let want = match entries {
                    0 => 0,
                    n => (n / rx.len() as u64).max(1).next_power_of_two(),
                };
                assert_eq!(q["rps_flow_cnt"], want, "{iface}");
            }
        }
    });
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .expect("cpu list")
        .iter()
        .map(|c| c.as_u64().expect("cpu"))
        .collect()
}

#[test]
fn throughput_in_a_namespace_skips_the_missing_fq_and_rolls_back() {
    if skip_unless_root("throughput_in_a_namespace") {
        return;
    }
    apply_and_roll_back("throughput", "tput", |plan, after| {
        let changes = plan["changes"].as_array().expect("changes");
        assert!(
            changes.iter().any(|c| c["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("qdisc:"))),
            "fq is planned (its absence shows only when written): {plan}"
        );
        // fq is missing on this kernel (ENVIRONMENT): the root qdisc stays.
        for iface in after["interfaces"].as_array().expect("interfaces") {
            assert_ne!(iface["root_qdisc"]["kind"], "fq", "{iface}");
        }
        let rmem = after["sysctls"]["net.ipv4.tcp_rmem"]
            .as_str()
            .expect("tcp_rmem");
        let max: u64 = rmem
            .split_whitespace()
            .nth(2)
            .and_then(|m| m.parse().ok())
            .expect("max");
        assert!(max >= 16 << 20, "{rmem}");
    });
}

#[test]
fn apply_names_the_missing_interface_in_the_namespace() {
    if skip_unless_root("apply_names_the_missing_interface") {
        return;
    }
    let (ns, _a, _b) = veth_namespace("miss");
    let state = tempfile::tempdir().expect("state");
    let (code, _, err) = run(&[
        "apply",
        "--profile",
        "pps",
        "--netns",
        &ns.name,
        "--iface",
        "eth0",
        "--state-dir",
        state.path().to_str().expect("path"),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("interface 'eth0' does not exist in network namespace"),
        "{err}"
    );
    assert!(fs::read_dir(state.path()).expect("dir").all(|e| {
        !e.expect("entry")
            .file_name()
            .to_string_lossy()
            .starts_with("state-")
    }));
}

#[test]
fn apply_without_iface_tunes_the_namespaces_veths_and_names_what_the_host_must_set() {
    if skip_unless_root("apply_without_iface_tunes_the_namespaces_veths") {
        return;
    }
    // a: 4 RX queues (more than the CPUs of a small VM: RPS all the same),
    // b: 1 RX queue.
    let (ns, a, b) = veth_namespace("dflt");
    ns.wait_up(&[&a, &b]);
    let state = tempfile::tempdir().expect("state dir");
    let state_dir = state.path().to_str().expect("path");
    let host_before = root_ns_sysctls();
    let mut args = apply_args("pps", &ns.name, state_dir);
    args.push("--json");
    let v = run_json(&args);
    assert_eq!(v["applied"], true, "{v:#}");
    let changed: Vec<&str> = v["state"]["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .filter(|c| c["outcome"] == "changed")
        .map(|c| c["target"].as_str().expect("target"))
        .collect();
    for (iface, queues) in [(&a, 4), (&b, 1)] {
        for q in 0..queues {
            let t = format!("/sys/class/net/{iface}/queues/rx-{q}/rps_cpus");
            assert!(changed.contains(&t.as_str()), "{t} not in {changed:?}");
        }
    }
    // Every CPU in every RX queue's RPS mask, as inspect reads it back.
    let after = inspect(&ns.name);
    let online: Vec<u64> = parse_list(
        fs::read_to_string("/sys/devices/system/cpu/online")
            .expect("online")
            .trim(),
    )
    .expect("list")
    .into_iter()
    .map(u64::from)
    .collect();
    for iface in after["interfaces"].as_array().expect("interfaces") {
        if iface["name"] == "lo" {
            continue;
        }
        for q in iface["rx_queues"].as_array().expect("rx") {
            assert_eq!(ids(&q["rps_cpus"]), online, "{iface}");
        }
    }
    // The host-wide values are named, with the command for the host, and
    // none was changed.
    let command = v["host_command"].as_str().expect("host_command");
    assert!(command.starts_with("sysctl -w "), "{command}");
    assert!(
        command.contains("net.core.netdev_max_backlog="),
        "{command}"
    );
    assert_eq!(root_ns_sysctls(), host_before);

    // The human output says it once, after what was applied.
    let (code, out, err) = run(&["rollback", "--state-dir", state_dir]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rolled back"), "{out}");
    let (code, out, err) = run(&apply_args("pps", &ns.name, state_dir));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("not applied, host-wide").count(), 1, "{out}");
    assert!(out.contains(command), "{out}");
}

#[test]
fn a_change_the_kernel_refuses_is_reported_and_never_counted_as_applied() {
    if skip_unless_root("a_change_the_kernel_refuses_is_reported") {
        return;
    }
    let (ns, a, _b) = veth_namespace("refu");
    let state = tempfile::tempdir().expect("state dir");
    let state_dir = state.path().to_str().expect("path");
    let args = [
        "apply",
        "--profile",
        "throughput",
        "--netns",
        &ns.name,
        "--iface",
        &a,
        "--state-dir",
        state_dir,
        "--json",
    ];
    let v = run_json(&args);
    let entries = v["state"]["changes"].as_array().expect("changes").clone();
    let refused: Vec<&Value> = entries
        .iter()
        .filter(|c| c["outcome"].get("refused").is_some())
        .collect();
    let changed = entries.iter().filter(|c| c["outcome"] == "changed").count();
    assert_eq!(v["changed"], changed, "{v:#}");
    assert_eq!(v["refused"], refused.len(), "{v:#}");
    if refused.is_empty() {
        // A kernel with fq (not this project's VMs): nothing refused, and
        // the counts above are all there is to check.
        return;
    }
    assert!(refused.iter().all(|c| c["target"]
        .as_str()
        .is_some_and(|t| t.starts_with("qdisc:"))));
    // The qdisc is as it was.
    let after = inspect(&ns.name);
    for iface in after["interfaces"].as_array().expect("interfaces") {
        assert_ne!(iface["root_qdisc"]["kind"], "fq", "{iface}");
    }
    // history and rollback count only what was changed.
    let history = run_json(&["history", "--state-dir", state_dir, "--json"]);
    assert_eq!(history[0]["changes"], changed, "{history:#}");
    assert_eq!(history[0]["refused"], refused.len(), "{history:#}");
    let (code, out, err) = run(&["rollback", "--state-dir", state_dir]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("{changed} change(s)")), "{out}");
    // Applied again, only the refused change is left: nothing is applied,
    // and the text says the kernel refused it.
    let (code, out, err) = run(&args[..args.len() - 1]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("refused by the kernel, not applied"), "{out}");
    let (code, out, _) = run(&args[..args.len() - 1]);
    assert_eq!(code, 0);
    assert!(
        out.contains("the kernel refused every planned change") && !out.contains("applied profile"),
        "{out}"
    );
}
